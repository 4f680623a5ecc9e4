# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Load and validate the rule catalogue, a profile, parameters and waivers on the controller.

Documentation: plugins/modules/baseline_validate.py. Nothing runs on the managed host.
"""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpuhost.baseline.plugins.module_utils._rules import CatalogueError, validate

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
        ))
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        try:
            outcome = validate(profile=args["profile"], params=args["params"], waivers=args["waivers"])
        except CatalogueError as exc:
            raise AnsibleActionFail("invalid baseline configuration: %s" % exc)
        result.update(outcome)
        result["changed"] = False
        result["msg"] = "catalogue of %d rules valid for profile(s) %s" % (outcome["rules"], ", ".join(outcome["profiles"]))
        return result
