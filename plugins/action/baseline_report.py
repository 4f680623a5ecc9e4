# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side writer of the baseline reports (documentation: plugins/modules/baseline_report.py)."""

from __future__ import absolute_import, division, print_function

import datetime
from collections.abc import Mapping

from ansible.errors import AnsibleError
from ansible.utils.display import Display

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.actionbase import ControllerAction
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import (
    ARGUMENT_SPEC, HostsRead, ReportError, build_stored, dumps_document, failing_at_or_above, failing_to_drain,
    map_host_findings)
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report_dir import ReportDirError, write_stored
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_load import collection_version, load_catalogue
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_model import CatalogueError
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.findings import expand_findings
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.console import console_lines, subject_nouns
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.files import controller_path
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.stats import StatsError, caller_stats
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.history import record_report
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.verdict import passes

__metaclass__ = type


def _with_rule_text(data, catalogue):
    """One host's results with each finding's rule fields (title, rationale, fix...) put back from
    the catalogue: ``baseline_evaluate`` leaves them out of ``host_report`` (the same on every host)."""
    return map_host_findings(data, lambda findings: expand_findings(findings, catalogue))


def with_rule_text(hosts, catalogue):
    """``hosts`` (name -> a host's results) read with the rule text put back into its findings, a host
    when it is read (a :class:`report.HostsRead`): ``build_stored`` reads each twice and keeps its
    stored form only, so the fleet's findings with their rule text are never held together (only the
    host being built). Anything but a mapping as it is (build_stored rejects it with the reason)."""
    return HostsRead(hosts, lambda data: _with_rule_text(data, catalogue)) if isinstance(hosts, Mapping) else hosts


#: What ``play_hosts`` reads from each host's variables (docs: option ``play_hosts`` of the module):
#: the audit role's registered evaluation, the controller guard (audit/tasks/controller_guard.yml), the host's note.
EVAL_VAR = "gpuhost_eval"
GUARD_VAR = "gpuhost_controller_guard"
NOTE_VAR = "gpuhost_note"
#: why a host's remediation did not complete (the remediate role's set_fact); the verdict fails such a host
FIX_ERROR_VAR = "gpuhost_fix_error"
CLUSTER_VAR = "gpuhost_cluster"


def _registered_report(variables, name):
    """``variables[name].host_report`` of a registered result, or None (not registered, skipped, empty)."""
    registered = variables.get(name)
    report = registered.get("host_report") if isinstance(registered, Mapping) else None
    return report or None


def hosts_from_play(names, active, raw_vars, note_of):
    """``(hosts, notes, unknown, verdict_hosts)`` read from the play, one host at a time: ``hosts`` maps each
    host of ``names`` that has a report to it, ``notes`` each host with a ``gpuhost_note`` to it, ``unknown``
    lists the names that are no inventory host, ``verdict_hosts`` maps each host with a report that is still in
    ``active`` (the hosts the verdict task runs for) to its ``gpuhost_fix_error`` (None without one).

    A host's report is its ``gpuhost_eval.host_report`` (a host without one, e.g. a later
    ``gpuhost_serial`` batch's host, is left out); a host not in ``active`` (failed in this play)
    whose ``gpuhost_controller_guard.host_report`` is set was refused by the controller guard,
    and that report replaces its evaluation. ``raw_vars(name)``: the host's variables as stored,
    not templated (``HostVars.raw_get``: the registered results are data, never templates), or
    None for an unknown host; ``note_of(name)``: the host's
    ``gpuhost_note`` templated in its own context (an inventory variable may be a template). Only
    these values are kept, never a host's whole variables."""
    hosts, notes, unknown, verdict_hosts = {}, {}, [], {}
    active = frozenset(active or ())
    for name in names:
        variables = raw_vars(name)
        if not isinstance(variables, Mapping):
            unknown.append(name)
            continue
        report = _registered_report(variables, EVAL_VAR)
        if name not in active:
            report = _registered_report(variables, GUARD_VAR) or report
        if report:
            hosts[name] = report
            if name in active:
                verdict_hosts[name] = variables.get(FIX_ERROR_VAR)
        if NOTE_VAR in variables:
            notes[name] = note_of(name)
    return hosts, notes, unknown, verdict_hosts


def _passing(given, verdict_hosts, failing_hosts):
    """The hosts of ``verdict_hosts`` (:func:`hosts_from_play`) whose verdict is a pass, sorted: ``verdict.passes``
    of what ``baseline_verdict`` is given (the state of the host's report in ``given``, its ``gpuhost_fix_error``,
    its failing findings in ``failing_hosts``). verdict.yml ends the role for them in a meta task, which forks no
    worker."""
    passing = []
    for name, fix_error in verdict_hosts.items():
        part = given.get(name)
        state = part.get("state") if isinstance(part, Mapping) else None
        if passes(state if isinstance(state, str) else "", fix_error, failing_hosts.get(name) or ()):
            passing.append(name)
    return sorted(passing)


def _note_of(hostvars, name):
    """``gpuhost_note`` of host ``name``, templated in its own context; ValueError naming the host
    when it cannot be (an undefined variable in it)."""
    try:
        return hostvars[name][NOTE_VAR]
    except AnsibleError as exc:
        raise ValueError("the %s of host %s cannot be templated: %s" % (NOTE_VAR, name, exc))


def _cluster_of(hostvars, name):
    """``gpuhost_cluster`` of host ``name`` as text ("" for none); ValueError naming the host when it cannot be
    templated or is not text."""
    try:
        cluster = hostvars[name].get(CLUSTER_VAR)
    except AnsibleError as exc:
        raise ValueError("the %s of host %s cannot be templated: %s" % (CLUSTER_VAR, name, exc))
    if cluster in (None, ""):
        return ""
    if not isinstance(cluster, str):
        raise ValueError("the %s of host %s must be text, not %s" % (CLUSTER_VAR, name, type(cluster).__name__))
    return cluster


def finding_label(finding):
    """``"PCI-001 0000:41:00.0 (high)"``: rule id, subject when there is one, severity."""
    subject = finding.get("subject")
    return "%s%s (%s)" % (finding["id"], "" if subject in (None, "") else " %s" % (subject,), finding.get("severity"))


class ActionModule(ControllerAction):
    # Reports are written on the controller in check mode too: an audit with --check must report.
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def run(self, tmp=None, task_vars=None):
        # play_hosts reads the hosts' results from task_vars' hostvars (act gets the arguments only)
        self._play_vars = task_vars or {}
        return super(ActionModule, self).run(tmp, task_vars)

    def _hosts(self, args):
        """``(hosts, notes, verdict_hosts)``: ``hosts`` as given (``verdict_hosts`` None), or read from the play for
        ``play_hosts`` (:func:`hosts_from_play`); raises ValueError with the reason when neither or both are given
        or a name is no inventory host."""
        if args.get("play_hosts") is None:
            if args.get("hosts") is None:
                raise ValueError("give hosts (each host's results) or play_hosts (the hosts whose results to read "
                                 "from the play, as the roles do)")
            return args["hosts"], args["host_notes"], None
        if args.get("hosts") is not None:
            raise ValueError("give hosts or play_hosts, not both")
        hostvars = self._play_vars.get("hostvars")
        if hostvars is None:
            raise ValueError("play_hosts: no hostvars in the task's variables")
        hosts, notes, unknown, verdict_hosts = hosts_from_play(
            args["play_hosts"], self._play_vars.get("ansible_play_hosts") or (),
            # raw_get of a name that is no host returns an undefined that needs a template context
            lambda name: hostvars.raw_get(name) if name in hostvars else None,
            lambda name: _note_of(hostvars, name))
        if unknown:
            raise ValueError("play_hosts names %s, not in the inventory" % ", ".join(repr(n) for n in unknown[:5]))
        notes.update(args["host_notes"])  # a note given as host_notes wins over the host's gpuhost_note
        for name in list(hosts):
            # gpuhost_cluster of each host (a label of its series): read here for every host, also one that
            # was not evaluated (unreachable, refused), templated in the host's own context
            cluster = _cluster_of(hostvars, name)
            if cluster:
                hosts[name] = dict(hosts[name], cluster=cluster)
        return hosts, notes, verdict_hosts

    def act(self, result, args):
        try:
            report_dir = controller_path(args["report_dir"])
        except (IOError, OSError) as exc:
            result.update(failed=True, msg="baseline_report: cannot resolve the relative report directory %r: the "
                          "working directory of ansible-playbook is gone (%s); give an absolute gpuhost_report_dir"
                          % (args["report_dir"], exc))
            return result
        try:
            given, notes, verdict_hosts = self._hosts(args)
        except ValueError as exc:
            result.update(failed=True, msg="baseline_report: %s" % exc)
            return result
        generated = args.get("generated") or datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
        try:
            catalogue = load_catalogue()
            hosts = with_rule_text(given, catalogue)
        except CatalogueError as exc:
            result.update(failed=True, msg="baseline_report: cannot load the rule catalogue: %s" % exc)
            return result
        try:
            # report.json as stored, built a host at a time: the fleet's findings with their rule text
            # are never held together (each host is read, and its rule text put back, twice)
            report = build_stored(
                hosts,
                profile=args.get("profile"),
                generated=generated,
                collection_version=args.get("collection_version") or collection_version(),
                started=args.get("started"),
                preview=args["preview"],
            )
        except ReportError as exc:
            result.update(failed=True, msg="baseline_report: the findings break the report contract: %s" % exc)
            return result
        del hosts
        if args.get("history_dir"):
            # drift history: one record per host appended, what changed since the last one into the report
            boot_ids = dict((name, data.get("boot_id")) for name, data in given.items() if isinstance(data, dict))
            counters = dict((name, data.get("counters")) for name, data in given.items() if isinstance(data, dict))
            problems = record_report(report, boot_ids, args["history_dir"], args["history_keep"], counters=counters)
            if problems:
                result["warnings"] = list(result.get("warnings") or []) + ["baseline_report: %s" % p for p in problems]
        # From here on the document as report.json stores it: the fleet is held once while the
        # views are rendered (write_stored gives back the document the views rendered, the same one).
        text = dumps_document(report)
        del report
        try:
            paths, report = write_stored(text, report_dir, args["formats"], template_dir=args.get("template_dir"))
        except ReportDirError as exc:
            # a refused directory (system, foreign files, a link as hosts/, an odd metrics.prom) or a
            # write that failed (a full disk): one line naming the directory (docs/report.md, "The report directory")
            result.update(failed=True, msg="baseline_report: %s" % exc)
            return result
        except ReportError as exc:
            result.update(failed=True, msg="baseline_report: cannot render the reports: %s" % exc)
            return result
        except (IOError, OSError) as exc:
            result.update(failed=True, msg="baseline_report: cannot write reports to %s: %s; check that the "
                          "directory is writable by the controller user (gpuhost_report_dir)" % (report_dir, exc))
            return result
        try:
            stats = caller_stats(report, paths=paths, report_dir=report_dir)
        except StatsError as exc:  # build_report's document always passes; kept for a clear message
            result.update(failed=True, msg="baseline_report: cannot compute the totals for callers: %s" % exc)
            return result
        result.update(changed=False, paths=paths, report_dir=report_dir, totals=report["totals"],
                      profile=report["profile"], collection_version=report["collection_version"], stats=stats)
        # the console summary the roles print (plugins/plugin_utils/report/console.py; docs/report.md, "Console output")
        result["console"] = console_lines(report, notes=notes, fail_on=args["fail_on"],
                                          report_dir=report_dir, nouns=subject_nouns(catalogue))
        if args["print_console"]:
            # plain lines whatever the stdout callback (a debug task's msg is a JSON list of escaped strings with
            # the stock default callback); the lines are escaped for a terminal already (console.escape)
            Display().display("\n".join(result["console"]))
        # what gpuhost_on_fail drains on, by host (roles/on_fail/tasks/act.yml): independent of fail_on
        result["drain_hosts"] = {}
        for host, finding in failing_to_drain(report, args["drain_severities"], args["drain_kinds"]):
            result["drain_hosts"].setdefault(host, []).append(finding_label(finding))
        failing_hosts = {}
        if args["fail_on"] != "none":
            failing = failing_at_or_above(report, args["fail_on"])
            result["failing"] = ["%s: %s" % (host, finding_label(f)) for host, f in failing]
            # the same, by host: the roles fail each host with its own findings (roles/audit/tasks/verdict.yml)
            for host, finding in failing:
                failing_hosts.setdefault(host, []).append(finding_label(finding))
            result["failing_hosts"] = failing_hosts
            if failing:
                shown = ", ".join(result["failing"][:5]) + (", ..." if len(failing) > 5 else "")
                result.update(failed=True, msg=(
                    "%d failing finding(s) at or above severity %s on %d host(s): %s. Reports were written to %s; "
                    "fix the drift or waive it, or raise gpuhost_fail_on"
                    % (len(failing), args["fail_on"], len(set(host for host, dummy in failing)), shown, report_dir)))
        if verdict_hosts is not None:
            result["passing_hosts"] = _passing(given, verdict_hosts, failing_hosts)
        return result
