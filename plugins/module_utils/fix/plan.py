# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A host's fixes in one module run (the ``host_fix`` module).

Each step names one of the fix modules and its options, exactly as a task of that module takes them;
the options are checked with that module's own argument spec (``ARGUMENT_SPEC`` of ``fix.sysctl``,
``fix.pcie``, ``fix.cpu``, ``fix.cmdline``, ``fix.nvidia``), every step before the first is applied.
The steps are then applied in order, each through its own :class:`Host` (its own journal): a step that
fails puts back what it wrote itself, as its module would, and the steps after it do not run; what the
steps before it changed stays, as it did when each was a task of its own.
"""

from __future__ import absolute_import, division, print_function

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpuhost.baseline.plugins.module_utils.fix import cmdline, cpu, nvidia, pcie, sysctl
from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.base import FixError, Host, fail_with_rollback

__metaclass__ = type

#: the module a step names -> the module_utils that holds its argument spec and its apply
MODULES = {
    "kernel_sysctl": sysctl,
    "pcie_tune": pcie,
    "cpu_power": cpu,
    "kernel_cmdline": cmdline,
    "nvidia_gpu": nvidia,
}


class PlanError(Exception):
    """A step that failed: ``msg`` for the user, ``result`` the module's result so far."""

    def __init__(self, msg, result):
        super(PlanError, self).__init__(msg)
        self.msg = msg
        self.result = result


def check_steps(steps):
    """``steps`` (``[{"name", "module", "args", "rules"}]``) -> ``[(step, validated options)]``; raises
    :class:`PlanError` naming every step whose options its module would refuse (nothing has run then)."""
    checked, problems = [], []
    names = set()
    for step in steps:
        name, module = step.get("name") or "(unnamed)", step.get("module")
        if name in names:
            problems.append("fix %r: a second step of that name" % name)
        names.add(name)
        kind = MODULES.get(module)
        if kind is None:
            problems.append("fix %r: module %r is none of %s" % (name, module, ", ".join(sorted(MODULES))))
            continue
        validator = ArgumentSpecValidator(kind.ARGUMENT_SPEC, required_one_of=kind.REQUIRED_ONE_OF or None)
        outcome = validator.validate(dict(step.get("args") or {}))
        if outcome.error_messages:
            problems.append("fix %r (%s): %s" % (name, module, "; ".join(outcome.error_messages)))
        else:
            checked.append((step, outcome.validated_parameters))
    if problems:
        raise PlanError("no fix applied, the plan is refused: " + " | ".join(problems),
                        dict(changed=False, steps={}, ran=[]))
    return checked


def apply_plan(module, steps, root, backup, diff):
    """Apply ``steps`` in order on ``root``; returns the module's result (``steps``: each step's result by name,
    ``ran``, ``reboot_required``, ``commands``, ``backup_files``, ``warnings``, ``diff`` when asked) or
    raises :class:`PlanError` with the result so far when a step fails."""
    checked = check_steps(steps)
    steps, ran, commands, backups, warnings, diffs = {}, [], [], {}, [], []
    outcome = dict(steps=steps, ran=ran, commands=commands, backup_files=backups, warnings=warnings)
    for step, params in checked:
        name = step["name"]
        ran.append(name)
        host = Host(module, root, backup)
        try:
            result = MODULES[step["module"]].apply_params(host, params, diff)
        except FixError as exc:
            msg, partial = fail_with_rollback(host, exc)
            steps[name] = dict(partial, failed=True, msg=msg)
            commands.extend(host.commands)
            backups.update(host.backups)
            outcome["changed"] = any(r.get("changed") for r in steps.values())
            raise PlanError("fix task %r failed: %s" % (name, msg), outcome)
        warnings.extend("%s: %s" % (name, text) for text in result.pop("warnings", []))
        step_diff = result.pop("diff", None)
        if step_diff:
            diffs.extend(step_diff if isinstance(step_diff, list) else [step_diff])
        result["commands"] = host.commands
        result["backup_files"] = host.backups
        steps[name] = result
        commands.extend(host.commands)
        backups.update(host.backups)
    outcome["changed"] = any(r.get("changed") for r in steps.values())
    outcome["reboot_required"] = any(r.get("reboot_required") for r in steps.values())
    if diff:
        outcome["diff"] = diffs
    return outcome
