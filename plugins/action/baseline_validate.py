# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Load and validate the rule catalogue, a profile, parameters and waivers on the controller.

Documentation: plugins/modules/baseline_validate.py. Nothing runs on the managed host.
"""

from __future__ import absolute_import, division, print_function

import json

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue import CatalogueError, validate

__metaclass__ = type


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        unused_validation, args = self.validate_argument_spec(argument_spec=dict(
            profile=dict(type="str", default="auto"),
            params=dict(type="dict", default={}),
            waivers=dict(type="list", elements="raw", default=[]),
            waiver_files=dict(type="list", elements="path", default=[]),
            catalogue_dirs=dict(type="list", elements="path", default=[]),
            hosts=dict(type="list", elements="str"),
        ))
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        if args["hosts"] is None:
            inputs = [(None, args["profile"], args["params"], args["waivers"], args["waiver_files"],
                       args["catalogue_dirs"])]
        else:
            inputs = self._per_host_inputs(args["hosts"], task_vars or {})
        outcome, seen = None, {}
        for host, profile, params, waivers, waiver_files, catalogue_dirs in inputs:
            # hosts sharing their inputs (the usual case: group vars) are validated once; every
            # combination of site catalogue directories that some host uses is loaded and checked
            key = json.dumps([profile, params, waivers, waiver_files, catalogue_dirs], sort_keys=True, default=str)
            if key in seen:
                continue
            try:
                seen[key] = outcome = validate(profile=profile, params=params, waivers=waivers,
                                               waiver_files=waiver_files, site_dirs=catalogue_dirs)
            except CatalogueError as exc:
                where = " (host %s)" % host if host else ""
                raise AnsibleActionFail("invalid baseline configuration%s: %s" % (where, exc))
        result.update(outcome or {})
        result["changed"] = False
        result["msg"] = "catalogue of %d rules valid for profile(s) %s" % (outcome["rules"], ", ".join(outcome["profiles"]))
        if args["hosts"] is not None:
            result["msg"] += " on %d host(s)" % len(inputs)
        return result

    @staticmethod
    def _per_host_inputs(hosts, task_vars):
        hostvars = task_vars.get("hostvars") or {}
        inputs = []
        for host in hosts:
            hv = hostvars.get(host) or {}
            inputs.append((host, hv.get("gpuhost_profile", "auto"), hv.get("gpuhost_params", {}),
                           hv.get("gpuhost_waivers", []), hv.get("gpuhost_waiver_files", []),
                           hv.get("gpuhost_catalogue_dirs", [])))
        return inputs
