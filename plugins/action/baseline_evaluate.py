# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Judge one host's ``ansible_facts.gpuhost`` against the baseline, on the controller.

Documentation: plugins/modules/baseline_evaluate.py. Nothing runs on the managed host.
"""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpuhost.baseline.plugins.module_utils._rules import CatalogueError, evaluate

__metaclass__ = type


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        unused_validation, args = self.validate_argument_spec(argument_spec=dict(
            facts=dict(type="dict", required=True),
            profile=dict(type="str", default="auto"),
            params=dict(type="dict", default={}),
            waivers=dict(type="list", elements="raw", default=[]),
            host=dict(type="str"),
            today=dict(type="raw"),
        ))
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        host = args["host"] or (task_vars or {}).get("inventory_hostname")
        try:
            outcome = evaluate(args["facts"], profile=args["profile"], params=args["params"],
                               waivers=args["waivers"], host=host, today=args["today"])
        except CatalogueError as exc:
            raise AnsibleActionFail("baseline evaluation of %s: %s" % (host, exc))
        result.update(outcome)
        result["changed"] = False
        return result
