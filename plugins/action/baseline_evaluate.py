# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Judge one host's ``ansible_facts.gpuhost`` against the baseline, on the controller.

Documentation: plugins/modules/baseline_evaluate.py. Without ``facts`` it gathers them first with
one ``host_facts`` module run, so an audit is one task per host; the judging never runs on the host.
"""

from __future__ import absolute_import, division, print_function

import json
import os

from ansible import constants as C
from ansible.plugins.action import ActionBase

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base import files, schema
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.schema import COLLECTION_ROOT
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_load import load_catalogue
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_model import CatalogueError
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.console import measure_line, prove_line
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.findings import compact_findings, pack_findings
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.snapshot.gathering import gather_host
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge.judge import HOST_VARS, judge_host
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.inputs.inventory_vars import (
    InventoryVarsError, connection_name, controller_refusal, known_names, unknown_names)
from ansible_collections.gpuhost.baseline.plugins.modules.baseline_evaluate import ARGUMENT_SPEC

__metaclass__ = type


def _warm_catalogue():
    """Load the bundled catalogue into ``load_catalogue``'s memory cache when this module is imported.

    The linear strategy imports an action plugin in the controller's main process before it forks a
    worker per host, and every worker inherits that memory: the catalogue is read and compiled once
    per run instead of once per host (its cache entry is checked against the files' identity on each
    use, as always). A site's ``catalogue_dirs`` are loaded by the first worker that needs them and
    kept on disk for the others. Nothing is reported here: each host's own load says what is wrong."""
    try:
        load_catalogue(site_dirs=[])
    except (CatalogueError, EnvironmentError, ImportError, ValueError):
        pass


_warm_catalogue()
# the schema validators too (jsonschema with them): each host's waivers are checked with them
schema.warm()


def _keep_facts(facts):
    """Write ``facts`` to a new file (mode 0600) of this run's local temporary directory (Ansible's, mode 0700,
    removed when ansible-playbook exits; the forked workers share it); returns its path."""
    return files.write_temporary(os.path.join(C.DEFAULT_LOCAL_TMP, "gpuhost-facts.json"),
                                 json.dumps(facts, separators=(",", ":")), sync=False, mode=0o600)


def _kept_facts(path):
    """``(facts, None)`` from a file of :func:`_keep_facts` (read as every file of the controller: regular, not
    through a link, bounded), or ``(None, why)``; the file is removed once read."""
    try:
        facts = files.loads_json(files.read_text(path))
    except (OSError, ValueError) as exc:
        return None, "the facts kept from the first gather cannot be read (%s): %s" % (path, exc)
    files.discard(path)
    if not isinstance(facts, dict):
        return None, "the facts kept from the first gather (%s) are no mapping" % path
    return facts, None


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        unused_validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        host = args["host"] or (task_vars or {}).get("inventory_hostname")
        if args["controller_guard"]:
            refusal = self._refusal(args, task_vars or {})
            if refusal:
                # nothing is read; the reports show the host failed with the reason, the verdict fails it
                result.update(failed=True, changed=False, msg=refusal,
                              host_report={"state": "failed", "message": refusal, "findings": []})
                return result
        # the catalogue first: the gather reads the sysctls its rules read by name (Catalogue.sysctls)
        try:
            catalogue, message = load_catalogue(site_dirs=args["catalogue_dirs"]), None
        except CatalogueError as exc:
            catalogue, message = None, "baseline evaluation of %s: %s" % (host, exc)
        facts = args["facts"]
        result["facts_source"] = "given" if facts is not None else ("kept" if args["facts_from"] else "gathered")
        if facts is None and args["facts_from"]:
            facts, message = _kept_facts(args["facts_from"])
            if facts is None:
                result.update(failed=True, changed=False, msg=message,
                              host_report={"state": "failed", "message": message})
                return result
        if facts is None:
            gathered = self._gather(args, task_vars, catalogue.sysctls if catalogue is not None else None)
            if "host_report" in gathered:  # unreachable or the module failed: say so, judge nothing
                part = gathered["host_report"]
                if args["failure"]:
                    part["message"] = "%s; then %s" % (args["failure"], part["message"])
                if args["before"] is not None:  # the report still shows where the host stood
                    part["before"] = {"findings": compact_findings(args["before"], catalogue)}
                if not args["return_findings"]:
                    gathered["host_report"] = pack_findings(part)
                result.update(gathered)
                return result
            facts = gathered["facts"]
            if args["return_facts"]:
                result["ansible_facts"] = {"gpuhost": facts}
            if args["keep_facts"]:
                result["facts_file"] = _keep_facts(facts)
        host_vars = dict((key, args[key]) for key in HOST_VARS if key in args)
        host_vars["host"] = host
        if catalogue is not None:
            # the host's history file is named after its inventory name, as baseline_report writes it
            judgement = judge_host(facts, catalogue, host_vars, history=args["history_dir"],
                                   history_name=(task_vars or {}).get("inventory_hostname") or host)
            if judgement.warnings:
                result["warnings"] = list(result.get("warnings") or []) + judgement.warnings
            message = judgement.part["message"] if judgement.failed else None
        if message is not None:
            # fail the task, but keep a report entry so the other hosts' reports are still written
            result.update(failed=True, msg=message, host_report={"state": "failed", "message": message})
            return result
        result.update(judgement.outcome)
        if args["applied"] is not None:
            # the rule ids it was told ran (remediate.yml): a later judgement of the same host (gpuhost_prove's
            # after the measurements) is told the same
            result["applied"] = list(args["applied"])
        result["host_report"] = judgement.part
        if args["facts"] is not None and isinstance(facts.get("measure"), dict):
            # validate.yml's line of what was measured: the tools' messages escaped as every console line
            result["measure_line"] = measure_line(host, facts["measure"])
        if "prove" in judgement.part:
            # remediate.yml's line of what the fixes delivered (gpuhost_prove)
            result["prove_line"] = prove_line(host, judgement.part["prove"])
        if not args["return_findings"]:
            # the bulk of the result: Ansible holds every host's until the play ends. host_report keeps
            # the findings once, as one JSON text (a third of the memory of the same findings as dicts)
            for key in ("findings", "failing", "pending_items"):
                result.pop(key, None)
            result["host_report"] = pack_findings(result["host_report"])
        result["changed"] = False
        return result

    def _refusal(self, args, task_vars):
        """The controller guard's refusal for the task's host (inventory_vars.controller_refusal, as
        baseline_validate's controller_guard), or None; the misspelled gpuhost_root it names is looked for only
        when the host is refused."""
        host = task_vars.get("inventory_hostname")
        connection = connection_name(self)
        if not controller_refusal(host, connection, args["root"], args["allow_controller"], (), args["guard_action"]):
            return None
        try:
            unknown = unknown_names(list(task_vars), known_names(COLLECTION_ROOT))
        except (InventoryVarsError, IOError, OSError):
            unknown = ()
        return controller_refusal(host, connection, args["root"], args["allow_controller"], unknown, args["guard_action"])

    def _gather(self, args, task_vars, sysctls):
        """``gathering.gather_host``, with this host's part of the report when it did not answer."""
        gathered = gather_host(self, task_vars, args["root"], args["gather"], args["kernel_log_boots"], sysctls)
        if "facts" not in gathered:
            state = "unreachable" if gathered.get("unreachable") else "failed"
            gathered["host_report"] = {"state": state, "message": gathered["msg"]}
        return gathered
