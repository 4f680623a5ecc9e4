#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: host_fix
short_description: Apply a host's baseline fixes in one module run
version_added: 0.1.0
description:
  - Applies the steps of a host's fix plan in order, each step one of the fix modules of this collection
    (M(gpuhost.baseline.kernel_sysctl), M(gpuhost.baseline.pcie_tune), M(gpuhost.baseline.cpu_power),
    M(gpuhost.baseline.kernel_cmdline), M(gpuhost.baseline.nvidia_gpu)) with the options that module takes,
    checked against that module's own argument spec. One process on the host instead of one per fix;
    the C(remediate) role applies a host's fixes with one task of this module.
  - Every step's options are checked before the first step runs; a step the module would refuse fails the
    task and nothing is applied.
  - A step that fails puts back what it wrote itself, as its module does, and the steps after it do not run;
    what the steps before it changed stays, and RV(steps) and RV(ran) say which ran. The message names the
    step.
  - On the controller, the action plugin of the same name chooses the steps first (O(failing), each step's
    O(fixes[].enabled), C(--tags) and C(--skip-tags)) and starts nothing on the host when none is left.
author:
  - gpuhost.baseline maintainers (@gpuhost-baseline)
options:
  fixes:
    description:
      - The plan, in the order the steps are applied.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description:
          - The step's name, unique in the plan; the C(remediate) role names each with the rule ids it fixes.
        type: str
        required: true
      module:
        description:
          - The fix module whose options O(fixes[].args) are and whose change the step makes.
        type: str
        required: true
        choices: [cpu_power, kernel_cmdline, kernel_sysctl, nvidia_gpu, pcie_tune]
      args:
        description:
          - The module's options, as a task of that module takes them, less O(root) and O(backup).
        type: dict
        default: {}
      rules:
        description:
          - The rule ids the step fixes. The step runs only when one of them is in O(failing).
        type: list
        elements: str
        default: []
      tags:
        description:
          - Tags of the step besides its rule ids (its area, V(numa), V(pcie)...). With C(--tags), a step runs
            when the run names one of its tags or rule ids (or V(all), V(tagged)); with C(--skip-tags), it does
            not run when the run names one of them (or V(all), V(tagged)).
        type: list
        elements: str
        default: []
      enabled:
        description:
          - A condition of the step besides its rules (an opt-in variable, a list of devices not empty).
        type: bool
        default: true
  failing:
    description:
      - The ids of the rules that fail on the host (the audit's RV(gpuhost.baseline.baseline_evaluate#module:failing_ids)).
    type: list
    elements: str
    required: true
extends_documentation_fragment:
  - gpuhost.baseline.fix
notes:
  - The action plugin runs on the controller and reads C(ansible_run_tags) and C(ansible_skip_tags); a step has no
    C(always) or C(never) tag of its own. The task itself carries C(always) in the C(remediate) role, so that
    C(--tags numa) reaches it and it then applies the numa steps only.
seealso:
  - module: gpuhost.baseline.kernel_sysctl
  - module: gpuhost.baseline.pcie_tune
  - module: gpuhost.baseline.cpu_power
  - module: gpuhost.baseline.kernel_cmdline
  - module: gpuhost.baseline.nvidia_gpu
"""

EXAMPLES = r"""
- name: Apply the failing rules' fixes in one module run
  gpuhost.baseline.host_fix:
    failing: "{{ gpuhost_eval.failing_ids }}"
    backup: true
    fixes:
      - name: CPU-003 CPU-006 - governor performance, deep idle states off
        module: cpu_power
        args: {governor: performance, idle_latency_max_us: 10}
        rules: [CPU-003, CPU-006]
        tags: [cpu]
      - name: CPU-001 CPU-002 - amd_pstate=active, pending a reboot
        module: kernel_cmdline
        args: {add: [amd_pstate=active]}
        rules: [CPU-001, CPU-002]
        tags: [cpu, kernel]
  register: fixed

- name: Reboot when a step needs it
  ansible.builtin.reboot:
  when: fixed.reboot_required | default(false)
"""

RETURN = r"""
steps:
  description:
    - Each step that ran, by name, with what its module returns (C(changed), C(commands), C(backup_files) and
      the module's own values, C(reboot_required) of M(gpuhost.baseline.kernel_cmdline) for one). A step that
      failed has C(failed) and C(msg).
  returned: always
  type: dict
  sample: {"CPU-001 CPU-002 - amd_pstate=active, pending a reboot": {"changed": true, "reboot_required": true,
           "bootloader": "grub", "commands": ["update-grub"], "backup_files": {}}}
ran:
  description: The names of the steps that ran, in order, the one that failed last.
  returned: always
  type: list
  elements: str
selected:
  description: The names of the steps the action chose (failing rules, enabled, tags), before any ran.
  returned: always
  type: list
  elements: str
left_out:
  description: Steps of a failing rule that did not run, by name, with why (V(disabled), V(tags)).
  returned: always
  type: dict
applied:
  description:
    - The failing rule ids whose step ran (a failed or cut-off one included), V([]) in check mode; the
      re-audit says "still failing after the fix" only of these.
  returned: always
  type: list
  elements: str
reboot_required:
  description: Whether a step changed something that takes effect at the next boot only.
  returned: success
  type: bool
commands:
  description: The commands the steps ran or, in check mode or on a snapshot root, would run.
  returned: always
  type: list
  elements: str
backup_files:
  description: Backup copy of each file replaced, by file (O(backup=true)).
  returned: always
  type: dict
failed_fix:
  description: The name of the step that failed.
  returned: failed
  type: str
connection_lost:
  description:
    - The connection dropped while the module ran (the action fails the task with C(connection lost during the
      fixes) instead of leaving the host unreachable; which steps ran is not known, RV(applied) names them all).
  returned: when the connection dropped
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.base import FIX_OPTIONS
from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.plan import MODULES, PlanError, apply_plan


#: The module's options, which the action plugin of the same name takes too (it imports this spec).
ARGUMENT_SPEC = dict(
    fixes=dict(type="list", elements="dict", required=True, options=dict(
        name=dict(type="str", required=True),
        module=dict(type="str", required=True, choices=sorted(MODULES)),
        args=dict(type="dict", default={}),
        rules=dict(type="list", elements="str", default=[]),
        tags=dict(type="list", elements="str", default=[]),
        enabled=dict(type="bool", default=True),
    )),
    failing=dict(type="list", elements="str", required=True),
    **FIX_OPTIONS
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    # the action plugin chose the steps already (tags too); a step is never applied for a rule that passes
    failing = set(module.params["failing"])
    steps = [step for step in module.params["fixes"] if step["enabled"] and failing.intersection(step["rules"])]
    try:
        result = apply_plan(module, steps, module.params["root"], module.params["backup"],
                            module._diff)
    except PlanError as exc:
        result = exc.result
        for warning in result.pop("warnings", []):
            module.warn(warning)
        failed = result["ran"][-1] if result.get("ran") else None
        module.fail_json(msg=exc.msg, failed_fix=failed, **result)
    for warning in result.pop("warnings"):
        module.warn(warning)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
