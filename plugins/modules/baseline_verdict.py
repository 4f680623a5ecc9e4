#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: baseline_verdict
short_description: Give Ansible its verdict on an audited host, after the reports are written
version_added: 0.1.0
description:
  - The last task of the C(audit) role (and of C(remediate) and C(validate), which end with it). It settles the
    exit code of C(ansible-playbook) once M(gpuhost.baseline.baseline_report) has written every report
    (C(docs/report.md) of the collection, "Exit codes").
  - A host reported C(unreachable) (O(state)) is contacted once more with C(ansible.builtin.ping), through the
    task's connection and C(become). If it is still unreachable, Ansible records it as unreachable and
    C(ansible-playbook) exits 4. If it answers now, the task fails, because its report says C(unreachable) and
    it was not audited.
  - A host reported C(failed), a host whose remediation did not complete (O(fix_error)), and a host with
    failing findings at or above O(fail_on) (O(failing)) fail the task with the reason, so that
    C(ansible-playbook) exits 2 and the PLAY RECAP and a retry file name them. The other hosts pass.
  - This is an action plugin. Nothing runs on the host except the C(ping) of a host reported unreachable.
author:
  - gpuhost.baseline maintainers (@gpuhost-baseline)
options:
  host:
    description: The host's inventory name, as the messages name it.
    type: str
    required: true
  state:
    description: The host's state in the report (C(audited), C(failed), C(unreachable)); empty when it has none.
    type: str
    default: ""
  reason:
    description: The report's message for the host (why it failed or was unreachable).
    type: str
    default: ""
  fix_error:
    description: Why the host's remediation did not complete (the C(remediate) role); the host then fails with it.
    type: str
  failing:
    description:
      - The host's failing findings at or above O(fail_on), as M(gpuhost.baseline.baseline_report) returns them
        in C(failing_hosts); the message names the first five.
    type: list
    elements: str
    default: []
  fail_on:
    description: The severity threshold the findings were selected with (C(gpuhost_fail_on)), for the message.
    type: str
    default: none
    choices: [critical, high, medium, low, none]
  report_dir:
    description: Where the reports were written, for the message.
    type: str
    default: ""
attributes:
  check_mode:
    description: The same in check mode (the C(ping) of an unreachable host changes nothing).
    support: full
seealso:
  - module: gpuhost.baseline.baseline_report
  - module: gpuhost.baseline.baseline_evaluate
"""

EXAMPLES = r"""
- name: Fail the drifted hosts after the reports are written
  gpuhost.baseline.baseline_verdict:
    host: "{{ inventory_hostname }}"
    state: "{{ gpuhost_eval.host_report.state | default('') }}"
    reason: "{{ gpuhost_eval.host_report.message | default('') }}"
    failing: "{{ gpuhost_report.failing_hosts[inventory_hostname] | default([]) }}"
    fail_on: high
    report_dir: "{{ gpuhost_report.report_dir }}"
"""

RETURN = r"""
msg:
  description: Why the host fails the run (only when it does).
  returned: failure
  type: str
  sample: "gpu01: 2 failing finding(s) at or above severity high: PCI-001 0000:41:00.0 (high), CPU-001 (high).
    Reports were written to /var/lib/gpuhost/reports; fix the drift or waive it, or raise gpuhost_fail_on"
"""

from ansible.module_utils.basic import AnsibleModule

# The action plugin's options (plugins/plugin_utils/report/verdict.py ARGUMENT_SPEC), repeated here because a
# module cannot import controller code; tests/unit/plugins/plugin_utils/test_verdict.py keeps the two equal.
ARGUMENT_SPEC = dict(
    host=dict(type="str", required=True),
    state=dict(type="str", default=""),
    reason=dict(type="str", default=""),
    fix_error=dict(type="str"),
    failing=dict(type="list", elements="str", default=[]),
    fail_on=dict(type="str", default="none", choices=["critical", "high", "medium", "low", "none"]),
    report_dir=dict(type="str", default=""),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.fail_json(msg="gpuhost.baseline.baseline_verdict runs on the controller as an action plugin; it was "
                         "executed as a module on a host, which means the action plugin was not found: run it "
                         "from a playbook with the collection installed (ANSIBLE_COLLECTIONS_PATH)")


if __name__ == "__main__":
    main()
