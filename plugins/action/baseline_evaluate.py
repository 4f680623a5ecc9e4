# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Judge one host's ``ansible_facts.gpuhost`` against the baseline, on the controller.

Documentation: plugins/modules/baseline_evaluate.py. Without ``facts`` it gathers them first with
one ``host_facts`` module run, so an audit is one task per host; the judging never runs on the host.
"""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleConnectionFailure
from ansible.plugins.action import ActionBase

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.gather import SUBSYSTEMS
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue import CatalogueError
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.evaluation import compact_findings, evaluate, host_report

__metaclass__ = type


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
            before=dict(type="list", elements="dict"),
            note=dict(type="str"),
            failure=dict(type="str"),
            profile=dict(type="str", default="auto"),
            params=dict(type="dict", default={}),
            waivers=dict(type="list", elements="raw", default=[]),
            waiver_files=dict(type="list", elements="path", default=[]),
            host=dict(type="str"),
            today=dict(type="raw"),
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
        try:
            outcome = evaluate(facts, profile=args["profile"], params=args["params"],
                               waivers=args["waivers"], host=host, today=args["today"],
                               waiver_files=args["waiver_files"])
        except CatalogueError as exc:
            # fail the task, but keep a report entry so the other hosts' reports are still written
            message = "baseline evaluation of %s: %s" % (host, exc)
            result.update(failed=True, msg=message, host_report={"state": "failed", "message": message})
            return result
        result.update(outcome)
        result["host_report"] = host_report(facts, outcome, before=args["before"], note=args["note"],
                                            failure=args["failure"])
        result["changed"] = False
        return result

    def _gather(self, args, task_vars):
        module_args = {"root": args["root"]}
        if args["gather"]:
            module_args["gather"] = args["gather"]
        try:
            facts_result = self._execute_module(module_name="gpuhost.baseline.host_facts", module_args=module_args,
                                                task_vars=task_vars)
        except AnsibleConnectionFailure as exc:
            message = "host unreachable: %s" % exc
            return {"unreachable": True, "msg": message,
                    "host_report": {"state": "unreachable", "message": message}}
        if facts_result.get("unreachable"):
            message = facts_result.get("msg") or "host unreachable"
            return {"unreachable": True, "msg": message, "host_report": {"state": "unreachable", "message": message}}
        facts = (facts_result.get("ansible_facts") or {}).get("gpuhost")
        if facts_result.get("failed") or not isinstance(facts, dict):
            message = "gpuhost.baseline.host_facts failed: %s" % (facts_result.get("msg") or "no facts returned")
            return {"failed": True, "msg": message, "host_report": {"state": "failed", "message": message}}
        return {"facts": facts}
