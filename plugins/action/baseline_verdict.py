# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's verdict after the reports are written (documentation: plugins/modules/baseline_verdict.py)."""

from __future__ import absolute_import, division, print_function

from ansible.plugins.action import ActionBase

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.verdict import ARGUMENT_SPEC, must_contact, verdict

__metaclass__ = type


class ActionModule(ActionBase):
    """One task per host for the exit code: a host reported unreachable is contacted once more
    (``ansible.builtin.ping`` through the task's connection and ``become``; still unreachable, Ansible
    records it as such and the run exits 4); a host that failed, that answers now, or that has failing
    findings at or above ``fail_on`` fails with the reason. Nothing else ever runs on the host."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        result["changed"] = False
        if must_contact(args["state"], args["fix_error"]):
            # a connection that still fails raises AnsibleConnectionFailure: the host is unreachable
            try:
                contact = self._execute_module(module_name="ansible.builtin.ping", module_args={}, task_vars=task_vars)
            finally:
                self._remove_tmp_path(self._connection._shell.tmpdir)
            if contact.get("unreachable"):
                return dict(result, **contact)
        why = verdict(args["host"], args["state"], args["reason"], args["fix_error"], args["failing"],
                      args["fail_on"], args["report_dir"])
        if why is not None:
            result.update(failed=True, msg=why)
        return result
