# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Judge one host's ``ansible_facts.gpuhost`` against the baseline, on the controller.

Documentation: plugins/modules/baseline_evaluate.py. Without ``facts`` it gathers them first with
one ``host_facts`` module run, so an audit is one task per host; the judging never runs on the host.
"""

from __future__ import absolute_import, division, print_function

from ansible.plugins.action import ActionBase

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.gather import SUBSYSTEMS
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue import CatalogueError, load_catalogue, select_profile
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.evaluation import (
    RULE_TEXT_FIELDS, compact_findings, evaluate, expand_findings, host_report)
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.gathering import gather_host
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.history import boot_id_of, with_history

__metaclass__ = type


def keep_rule_text(part, catalogue):
    """Put back into ``part`` (a host_report) the rule fields that ``baseline_report`` could not
    restore from the bundled catalogue: findings of site rules, of rules a site replaced, and
    severities a profile changed (``rules.severity``)."""
    bundled = load_catalogue()
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
                own, restored = fields(rule_id, catalogue), fields(rule_id, bundled)
                differs[rule_id] = dict((k, own.get(k)) for k in RULE_TEXT_FIELDS) \
                    if any(own.get(k) != restored.get(k) for k in RULE_TEXT_FIELDS) else None
            if differs[rule_id]:
                finding.update(differs[rule_id])
    return part


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        unused_validation, args = self.validate_argument_spec(argument_spec=dict(
            facts=dict(type="dict"),
            root=dict(type="path", default="/"),
            gather=dict(type="list", elements="str", choices=list(SUBSYSTEMS)),
            return_facts=dict(type="bool", default=False),
            return_findings=dict(type="bool", default=True),
            before=dict(type="list", elements="dict"),
            note=dict(type="str"),
            failure=dict(type="str"),
            profile=dict(type="str", default="auto"),
            params=dict(type="dict", default={}),
            waivers=dict(type="list", elements="raw", default=[]),
            waiver_files=dict(type="list", elements="path", default=[]),
            catalogue_dirs=dict(type="list", elements="path", default=[]),
            host=dict(type="str"),
            today=dict(type="raw"),
            history_dir=dict(type="path"),
        ))
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        host = args["host"] or (task_vars or {}).get("inventory_hostname")
        facts = args["facts"]
        if facts is None:
            gathered = self._gather(args, task_vars)
            if "host_report" in gathered:  # unreachable or the module failed: say so, judge nothing
                part = gathered["host_report"]
                if args["failure"]:
                    part["message"] = "%s; then %s" % (args["failure"], part["message"])
                if args["before"] is not None:  # the report still shows where the host stood
                    part["before"] = {"findings": compact_findings(args["before"])}
                result.update(gathered)
                return result
            facts = gathered["facts"]
            if args["return_facts"]:
                result["ansible_facts"] = {"gpuhost": facts}
        judged = facts
        if args["history_dir"] and isinstance(facts, dict):
            # the host's history file is named after its inventory name, as baseline_report writes it
            judged, warnings = with_history(facts, args["history_dir"],
                                            (task_vars or {}).get("inventory_hostname") or host)
            if warnings:
                result["warnings"] = list(result.get("warnings") or []) + warnings
        try:
            catalogue = load_catalogue(site_dirs=args["catalogue_dirs"])
            if isinstance(facts, dict):
                # the chosen profile's rules.severity: the findings carry the severity it sets
                catalogue = catalogue.for_profile(select_profile(catalogue, args["profile"], facts))
            outcome = evaluate(judged, profile=args["profile"], params=args["params"],
                               waivers=args["waivers"], host=host, today=args["today"], catalogue=catalogue,
                               waiver_files=list(args["waiver_files"]) + catalogue.waiver_files)
        except CatalogueError as exc:
            # fail the task, but keep a report entry so the other hosts' reports are still written
            message = "baseline evaluation of %s: %s" % (host, exc)
            result.update(failed=True, msg=message, host_report={"state": "failed", "message": message})
            return result
        result.update(outcome)
        result["host_report"] = host_report(facts, outcome, before=args["before"], note=args["note"],
                                            failure=args["failure"])
        if not args["return_findings"]:
            # the bulk of the result (host_report keeps the findings): Ansible holds every host's until the play ends
            for key in ("findings", "failing", "pending_items"):
                result.pop(key, None)
        keep_rule_text(result["host_report"], catalogue)
        # the boot this audit saw: baseline_report keeps it in the history (same boot or across a reboot)
        result["host_report"]["boot_id"] = boot_id_of(facts)
        result["changed"] = False
        return result

    def _gather(self, args, task_vars):
        """``gathering.gather_host``, with this host's part of the report when it did not answer."""
        gathered = gather_host(self, task_vars, args["root"], args["gather"])
        if "facts" not in gathered:
            state = "unreachable" if gathered.get("unreachable") else "failed"
            gathered["host_report"] = {"state": state, "message": gathered["msg"]}
        return gathered
