#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: host_facts
short_description: Gather GPU inference host facts across ten subsystems
version_added: 0.1.0
description:
  - Reads kernel, CPU power management, NUMA memory, PCI/PCIe config space, IOMMU, NVIDIA driver
    and GPU state, and LXC/Proxmox container configuration in one call and returns them under
    C(ansible_facts.gpuhost).
  - With O(root) set to a snapshot directory it reads that capture instead and executes nothing.
  - Values that cannot be read are V(null) and the reason is listed in RV(ansible_facts.gpuhost.errors).
    Reading full PCI config space and debugfs needs root (C(become=true)).
  - The document layout is described in C(docs/facts.md) of the collection.
author:
  - gpuhost.baseline maintainers (@gpuhost-baseline)
options:
  gather:
    description:
      - Subsystems to gather. Default is all of them.
    type: list
    elements: str
    choices: [kernel, cpu, numa, pci, iommu, nvidia, lxc, persistence, health]
  root:
    description:
      - Directory the host's C(/sys), C(/proc) and C(/etc) are read from.
      - V(/) reads the live host. Any other value is a snapshot directory (see C(docs/snapshot-format.md));
        then command output is read from its C(commands/) directory and nothing is run.
    type: path
    default: /
  kernel_log_boots:
    description:
      - How many boots' kernel logs the C(health) subsystem reads for GPU and NVSwitch faults (Xid, SXid,
        a GPU fallen off the bus or failing to initialise).
      - V(1) reads the current boot (C(journalctl -k -b)). V(2) also reads the previous boot
        (C(journalctl -k -b -1)), named by its boot id from C(journalctl --list-boots), into
        RV(ansible_facts.gpuhost.health.kernel_log_previous); its faults are judged by rule HEALTH-016.
      - At most V(2), because each boot is one more journal read at every audit and one more log in a snapshot, and a
        boot before the previous one was the previous boot of the audits in between.
      - Without journalctl (the C(dmesg) fallback holds the current boot only) and with a journal that keeps
        no earlier boot, the previous boot is unknown and its C(error) says why. On a snapshot O(root), the
        previous boot is read from the snapshot (captured with O(gpuhost.baseline.host_snapshot#module:kernel_log_boots=2)).
    type: int
    choices: [1, 2]
    default: 1
  sysctls:
    description:
      - Sysctls to read beyond those the collection manages (C(SYSCTLS) in
        C(plugins/module_utils/facts/sysctls.py)), by their dotted names (V(vm.dirty_ratio)). The running value goes
        into C(kernel.sysctl) of the facts and the sysctl.d value into
        C(kernel.sysctl_persisted), each under its dotted name.
      - The audit sets it to the sysctls the catalogue's rules read by name (C(kernel.sysctl."vm.dirty_ratio")), so
        a rule for a new sysctl needs no change to the code. At most 64 names; a name that is not a sysctl name
        fails the module.
    type: list
    elements: str
    default: []
  command_timeouts:
    description:
      - Seconds each command of a tool may run (the basename of its binary, for example C(nvidia-smi)), over the
        defaults of the collection's command runner (C(TIMEOUTS) in C(plugins/module_utils/host/runner.py);
        60 s for a tool not listed). A command past its bound is killed with its process group and its facts are
        unknown with the reason; a tool that timed out is not run again in the same gather.
      - Set from the variable C(gpuhost_command_timeouts) by the audit.
    type: dict
    default: {}
extends_documentation_fragment:
  - gpuhost.baseline.facts
notes:
  - Supports check mode; it never changes the host.
"""

EXAMPLES = r"""
- name: Gather everything
  gpuhost.baseline.host_facts:

- name: Only PCI and NVIDIA facts, as root so extended config space is readable
  gpuhost.baseline.host_facts:
    gather: [pci, nvidia]
  become: true

- name: Read a snapshot captured by playbooks/snapshot.yml
  gpuhost.baseline.host_facts:
    root: /var/tmp/gpuhost-snapshots/gpu01
  delegate_to: localhost
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to ansible_facts.
  returned: always
  type: dict
  contains:
    gpuhost:
      description:
        - The host document, grouped by subsystem (C(kernel), C(cpu), C(numa), C(pci), C(iommu),
          C(nvidia), C(lxc), C(persistence), C(health)); see C(docs/facts.md) for every key.
      returned: always
      type: dict
      contains:
        schema:
          description: Version of the document layout.
          type: int
          returned: always
          sample: 1
        live:
          description: Whether the live host was read (O(root=/)).
          type: bool
          returned: always
          sample: true
        gathered:
          description: Subsystems present in this document.
          type: list
          elements: str
          returned: always
          sample: [kernel, cpu, numa, pci, iommu, nvidia, lxc, persistence, health]
        health:
          description:
            - GPU and fabric health (C(docs/facts.md), section health). C(kernel_log) summarises the kernel log of
              the current boot (C(boot_id) named when O(kernel_log_boots=2)); C(kernel_log_previous) the previous
              boot's, with its C(boot_id), or V(null) when O(kernel_log_boots=1).
          type: dict
          returned: when the health subsystem is gathered
          contains:
            kernel_log_boots:
              description: The boots read (O(kernel_log_boots)).
              type: int
              returned: always
              sample: 2
            kernel_log_previous:
              description:
                - The previous boot's GPU and NVSwitch faults, as C(kernel_log) holds the current boot's, with
                  C(boot_id) (32 hex digits), C(boot_offset) (-1) and C(span) (the first and last entry's times).
                - V(null) with O(kernel_log_boots=1) or without NVIDIA hardware; C(error) says why it is unknown
                  (dmesg fallback, no earlier boot in the journal).
              type: dict
              returned: always
              sample: {"boot_id": "3c5e9a1f0b7d4c2e8a6f1d3b5c7e9a0f", "boot_offset": -1, "events": 1,
                       "faults": {"0000:41:00.0": {"fallen_off_bus": {"count": 1}}}, "error": null}
        errors:
          description: Every path or command that could not be read, with the reason.
          type: list
          elements: dict
          returned: always
          sample: [{"subsystem": "pci", "path": "/sys/bus/pci/devices/0000:41:00.0/config",
                    "reason": "config space is 64 bytes: extended capabilities need root; run with become: true"}]
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuhost.baseline.plugins.module_utils.host import runner
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.gather import SUBSYSTEMS, gather_facts, module_options
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root


def main():
    module = AnsibleModule(
        argument_spec=dict(
            gather=dict(type="list", elements="str", choices=list(SUBSYSTEMS)),
            root=dict(type="path", default="/"),
            kernel_log_boots=dict(type="int", default=1, choices=[1, 2]),
            command_timeouts=dict(type="dict", default={}),
            sysctls=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    options = module_options(module)
    root_dir = module.params["root"]
    if root_dir != "/" and not os.path.isdir(root_dir):
        module.fail_json(msg="snapshot root %s is not a directory: capture one with the gpuhost.baseline.snapshot playbook" % root_dir)

    timeouts = runner.module_timeouts(module)

    def run(argv):
        return runner.run(argv, timeouts=timeouts).decoded()

    root = Root(root_dir, run_command=run, which=module.get_bin_path)
    facts = gather_facts(root, module.params["gather"], options)
    module.exit_json(changed=False, ansible_facts={"gpuhost": facts})


if __name__ == "__main__":
    main()
