# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's fixes in one module run (documentation: plugins/modules/host_fix.py)."""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleConnectionFailure
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.remedy.fix_steps import applied_rules, select_steps
from ansible_collections.gpuhost.baseline.plugins.modules.host_fix import ARGUMENT_SPEC

__metaclass__ = type


def _lost(why):
    """The task's result when the connection dropped under the fixes: failed (the remediate role's rescue notes it,
    the host is audited again and reported failed; a host that no longer answers is then reported unreachable),
    with every chosen step counted as applied (which of them ran is not known)."""
    return dict(failed=True, connection_lost=True, msg="connection lost during the fixes: %s" % why)


class ActionModule(ActionBase):
    """Chooses the host's steps on the controller (failing rules, ``enabled``, --tags / --skip-tags), then
    runs the host_fix module once with them; nothing runs on the host when no step is left."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        unused_validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        task_vars = task_vars or {}
        selected, left_out = select_steps(args["fixes"], args["failing"], task_vars.get("ansible_run_tags"),
                                          task_vars.get("ansible_skip_tags"))
        names = [step["name"] for step in selected]
        result.update(selected=names, left_out=left_out, steps={}, ran=[], commands=[], backup_files={},
                      applied=applied_rules(selected, args["failing"], self._task.check_mode), changed=False)
        if not selected:
            result.update(skipped=True, skip_reason="no fix to apply for the failing rules" + (
                " (left out: %s)" % ", ".join("%s: %s" % item for item in sorted(left_out.items())) if left_out else ""))
            return result
        module_args = dict(fixes=selected, failing=args["failing"], root=args["root"], backup=args["backup"])
        try:
            ran = self._execute_module(module_name="gpuhost.baseline.host_fix", module_args=module_args,
                                       task_vars=task_vars)
        except AnsibleConnectionFailure as exc:
            ran = _lost(to_text(exc))
        else:
            self._remove_tmp_path(self._connection._shell.tmpdir)
            if ran.get("unreachable"):
                ran = _lost(ran.get("msg") or "unreachable")
        result.update(ran)
        if "ran" in ran:  # the module answered: the steps that ran, the one that failed last
            done = set(ran["ran"])
            result["applied"] = applied_rules([step for step in selected if step["name"] in done], args["failing"],
                                              self._task.check_mode)
        return result
