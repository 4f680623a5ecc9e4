# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one judge: a host's facts, its catalogue and its variables in, its part of the report out.

Two callers, one code path: the ``baseline_evaluate`` action on the controller (``audit.yml``,
``remediate.yml``) and the self-audit runner on the host (``self_audit.py``, in the bundle the
``self_audit`` role installs). Both load the catalogue (the bundled one with the site's
``gpuhost_catalogue_dirs`` layered over it) and hand it here with the host's variables; what
comes back is the same for the same facts, so continuous mode judges a fleet as the audit does.

Per host, in order: the drift history of the host joined to its facts (what the earlier audits of
this boot saw: PCI-008's evidence), the profile chosen once (``auto`` tries each profile's
``match``), the rules evaluated (``evaluation.evaluate``), the host's part of ``report.json``
(``evaluation.host_report``) with the rule text the bundled catalogue cannot restore kept in it
(site rules, replaced rules, severities a profile changed), and the boot the facts saw.

Standard library only and Python 3.8+: it runs on managed hosts inside the self-audit bundle.
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_load import load_catalogue
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_model import CatalogueError, choose_profile
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_counters import counter_values
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge.evaluation import evaluate, host_report
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge.prove import prove_summary
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.findings import RULE_TEXT_FIELDS, expand_findings
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.history import boot_id_of, with_history

__metaclass__ = type

#: the host variables the judge reads (``host_vars``), with their defaults; the action plugin's
#: options and the self-audit config carry the same names
HOST_VARS = {
    "host": None,          # inventory name: waivers match it, the history file is named after it
    "profile": "auto",     # gpuhost_profile
    "params": None,        # gpuhost_params
    "waivers": None,       # gpuhost_waivers (inline, already merged with gpuhost_waiver_files on hosts)
    "waiver_files": None,  # gpuhost_waiver_files (paths, read on the controller)
    "today": None,         # the day waivers expire against (tests fix it)
    "before": None,        # findings before a remediation (remediate.yml's re-audit)
    "note": None,          # a message for the report (e.g. a reboot that did not come back)
    "failure": None,       # why work on the host did not complete: state failed, findings kept
    "applied": None,       # rule ids whose fix task ran (remediate.yml): only those can be "not fixed"
    "cluster": None,       # gpuhost_cluster: the report's and the metrics' cluster of the host
    "prove": None,         # the measurements before and after the fixes (remediate.yml, gpuhost_prove)
}


class Judgement:
    """What :func:`judge_host` returns: ``outcome`` (``evaluation.evaluate``'s result, ``None``
    when the catalogue, profile, parameters or waivers are malformed), ``part`` (the host's part
    of the report: ``state`` ``audited`` or ``failed`` with the reason) and ``warnings`` (a damaged
    history, said once, never a failure)."""

    def __init__(self, outcome, part, warnings):
        self.outcome = outcome
        self.part = part
        self.warnings = warnings

    @property
    def failed(self):
        return self.outcome is None


def keep_rule_text(part, catalogue, bundled=None):
    """Put back into ``part`` (a host_report) the rule fields the report writer cannot restore from
    the ``bundled`` catalogue (default: this collection's): findings of site rules, of rules a site
    replaced, and severities a profile changed (``rules.severity``)."""
    bundled = bundled if bundled is not None else load_catalogue()
    if catalogue is bundled:
        return part
    differs = {}

    def fields(rule_id, source):
        return expand_findings([{"id": rule_id}], source)[0]

    for findings in (part.get("findings"), (part.get("before") or {}).get("findings")):
        for finding in findings or []:
            rule_id = finding.get("id") if isinstance(finding, dict) else None
            if rule_id not in catalogue.by_id:
                continue
            if rule_id not in differs:
                own = fields(rule_id, catalogue)
                restored = fields(rule_id, bundled) if rule_id in bundled.by_id else {}
                differs[rule_id] = dict((k, own.get(k)) for k in RULE_TEXT_FIELDS) \
                    if any(own.get(k) != restored.get(k) for k in RULE_TEXT_FIELDS) else None
            if differs[rule_id]:
                # a field the finding kept (a severity graded by its events) stays its own
                finding.update((k, v) for k, v in differs[rule_id].items() if k not in finding)
    return part


def judge_host(facts, catalogue, host_vars, history=None, history_name=None, bundled=None):
    """Judge one host: ``facts`` (``ansible_facts.gpuhost``), ``catalogue`` (the loaded
    :class:`catalogue_model.Catalogue`, site layers included), ``host_vars`` (a mapping with the keys of
    :data:`HOST_VARS`; missing keys take their defaults), ``history`` (the drift history directory,
    ``None`` for none; the host's file in it is named ``history_name``, default the ``host`` variable).
    ``bundled`` is the catalogue the report writer restores rule text from (default: this collection's).
    Returns a :class:`Judgement`; never raises for bad input."""
    options = dict(HOST_VARS)
    options.update((k, v) for k, v in (host_vars or {}).items() if k in HOST_VARS)
    host = options["host"]
    judged, warnings = facts, []
    if history and isinstance(facts, dict):
        judged, warnings = with_history(facts, history, history_name or host, rules=catalogue.history_values())
    try:
        profile = options["profile"] or "auto"
        why = None
        if isinstance(facts, dict):
            # chosen once: the profile's rules.severity sets the findings' severity, and evaluate
            # resolves the chosen name instead of matching every profile again
            chosen, why = choose_profile(catalogue, profile, facts)
            catalogue = catalogue.for_profile(chosen)
            profile = chosen.name
        outcome = evaluate(judged, profile=profile, params=options["params"] or {},
                           waivers=options["waivers"] or [], host=host, today=options["today"],
                           catalogue=catalogue, applied=options["applied"],
                           waiver_files=list(options["waiver_files"] or []) + list(catalogue.waiver_files))
    except CatalogueError as exc:
        message = "baseline evaluation of %s: %s" % (host, exc)
        return Judgement(None, {"state": "failed", "message": message}, warnings)
    part = host_report(facts, outcome, before=options["before"], note=options["note"], failure=options["failure"],
                       catalogue=catalogue)
    keep_rule_text(part, catalogue, bundled)
    if isinstance(options["cluster"], str) and options["cluster"]:
        part["cluster"] = options["cluster"]
    proven = prove_summary(options["prove"], options["applied"])
    if proven is not None:
        part["prove"] = proven  # what the fixes delivered, measured before and after them
    if why:
        part["profile_reason"] = why  # the report says why this profile judged the host
    # the boot this audit saw: the report writer keeps it in the history (same boot or across a reboot)
    part["boot_id"] = boot_id_of(facts)
    # and the error counters it read: the history keeps them for the next audits' counter rules
    part["counters"] = counter_values(facts)
    return Judgement(outcome, part, warnings)
