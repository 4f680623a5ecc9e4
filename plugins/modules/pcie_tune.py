#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pcie_tune
short_description: Set PCIe MaxReadReq/MaxPayload and ACS redirect of GPUs, NICs and switch ports, now and at boot
version_added: 0.1.0
description:
  - Sets the Max Read Request size (and, only when asked, the Max Payload size) in the Device Control register
    of the PCI Express devices selected by O(addresses), O(vendor) and O(kinds); optionally clears ACS
    request and completion redirect on chosen bridges; and installs a boot-time script, systemd unit and
    udev rule that re-apply the same bits after a reboot or when a device comes back.
  - B(Runtime) changes are a read-modify-write of only the bits concerned (Max_Read_Request_Size 14:12,
    Max_Payload_Size 7:5 of Device Control at PCI Express capability + 8; P2P Request Redirect and P2P
    Completion Redirect, bits 2 and 3 of ACS Control at ACS capability + 6). The module writes the two bytes
    of the register at its offset in C(/sys/bus/pci/devices/<address>/config) (an aligned two-byte C(pwrite),
    which the kernel turns into one config word write) and reads them back. It does this itself rather than
    through C(setpci) because it then needs nothing installed, writes exactly the masked bits, and acts the
    same on a writable snapshot copy, where C(config) is a plain file. A register that reads back other bits
    than written fails the task and names the device.
  - B(Persisted) state is three files written atomically (never through a shell) - the script
    C(/usr/local/sbin/gpuhost-pcie-apply), which calls C(setpci -s ADDR CAP_EXP+8.w=VALUE:MASK) and
    C(ECAP_ACS+6.w=VALUE:MASK) per device (C(setpci) is present on real hosts and C(VALUE:MASK) keeps every
    other bit); the oneshot unit C(/etc/systemd/system/gpuhost-pcie.service), enabled by its
    C(multi-user.target.wants) link, that runs it at boot; and the udev rule
    C(/etc/udev/rules.d/90-gpuhost-pcie.rules), which runs it for one device on C(add) (hot-plug, rescan after
    a reset or link recovery) and C(bind) (a driver probe may reprogram Device Control). The script keeps the
    settings of earlier tasks for other devices and registers, so one task for GPUs and another for NICs
    add up; a new value for the same bits replaces the old one.
  - Runtime and persisted state are reported apart, in RV(runtime) and RV(persisted).
  - Every input is read and checked before the first write - addresses that do not exist, a MaxPayload above what
    the device or a port above it supports, config space cut at 64 bytes (not root), read-only sysfs. When a
    later step fails, the register writes already made are put back and files already written are restored.
author:
  - gpuhost.baseline maintainers (@gpuhost-baseline)
options:
  addresses:
    description:
      - PCI addresses of the devices to tune (V(0000:41:00.0); the domain may be left out).
      - An address that does not exist fails the task.
    type: list
    elements: str
  vendor:
    description:
      - PCI vendor ids in hex (V(0x10de) NVIDIA, V(0x15b3) Mellanox); devices of other vendors are left alone.
    type: list
    elements: str
  kinds:
    description:
      - Device kinds as the facts classify them (C(pci.devices[].kind)).
      - Selectors are combined, a device must match all that are given. Functions without a PCI Express
        capability that O(vendor) or O(kinds) select are skipped (listed in RV(runtime.skipped)); one named
        in O(addresses) fails the task.
    type: list
    elements: str
    choices: [gpu, nic, bridge, nvme, other]
  max_read_request:
    description:
      - Max Read Request size in bytes for the selected devices.
    type: int
    choices: [128, 256, 512, 1024, 2048, 4096]
  max_payload:
    description:
      - Max Payload size in bytes for the selected devices. Leave unset unless you mean it.
      - It must be within the DevCap of each device and of every port above it (the upstream ports found
        from the device's sysfs path). Where it changes, both ends of every link the device is on must end
        up with the same value, because a receiver drops a TLP larger than its own MaxPayload as malformed;
        so raising it means selecting the whole path (root port, switch ports, device) in one task.
        Anything else fails before a write.
      - The kernel may set it again at boot (C(pci=pcie_bus_*)); the boot script re-applies it afterwards.
    type: int
    choices: [128, 256, 512, 1024, 2048, 4096]
  acs_redirect:
    description:
      - V(disable) clears P2P Request Redirect and P2P Completion Redirect (and no other bit) in the ACS Control
        register of the bridges in O(acs_bridges), now and at boot, so GPU-to-GPU and GPU-to-NIC traffic turns
        around inside a PCIe switch instead of going up to the root complex.
      - B(This weakens isolation.) The IOMMU no longer sees peer requests below those ports, so devices behind
        them can reach each other's memory unchecked, and the kernel may put them in one IOMMU group. It is
        B(wrong on a host that passes devices to VMs or containers) (VFIO, Proxmox PCI passthrough); there,
        leave it at V(keep) and use the BIOS or the hypervisor's own settings.
      - V(keep) leaves ACS alone.
    type: str
    choices: [keep, disable]
    default: keep
  acs_bridges:
    description:
      - Bridges whose ACS redirect O(acs_redirect=disable) clears, as PCI addresses; a listed address that does
        not exist, is not a bridge, or has no ACS capability fails the task.
      - V(auto) (the default) picks the bridges rule PCI-006 reports, the switch downstream ports on the
        path between two GPUs or a GPU and a NIC, below the point where their paths meet. Root ports and
        switch upstream ports are not included. Peer traffic between different root ports goes through the
        root complex whatever their ACS says.
    type: list
    elements: str
    default: [auto]
  persist:
    description:
      - Install or update the boot script, the unit (and its enable link) and the udev rule so that the settings
        of this task are re-applied at boot and when a device comes back.
      - With V(false) the files are left as they are, and RV(persisted) says whether they already cover this
        task's settings.
      - On a live host the unit is then known to systemd through C(systemctl daemon-reload) and the rule to udev
        through C(udevadm control --reload); the unit is not started, because the runtime values are already set.
    type: bool
    default: true
extends_documentation_fragment:
  - gpuhost.baseline.fix
notes:
  - On a snapshot root (O(root) not V(/)) the C(config) files of the copy are rewritten in place and the three
    files are written below O(root); C(systemctl) and C(udevadm) are never run, only listed in RV(commands).
  - MaxReadReq and MaxPayload of a device can be reprogrammed by the kernel (C(pci=pcie_bus_perf)) or a
    driver; the udev rule covers a driver that binds later, the unit covers boot.
seealso:
  - name: setpci(8)
    description: The register names and VALUE:MASK syntax the boot script uses.
    link: https://man7.org/linux/man-pages/man8/setpci.8.html
  - name: NCCL troubleshooting, PCI Access Control Services
    description: Why ACS redirect hurts GPU peer-to-peer traffic, and what disabling it means for isolation.
    link: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html#pci-access-control-services-acs
"""

EXAMPLES = r"""
- name: MaxReadReq 4096 on every NVIDIA GPU and every NIC, now and at boot
  gpuhost.baseline.pcie_tune:
    kinds: [gpu, nic]
    max_read_request: 4096
    backup: true
  become: true

- name: Only the two ConnectX ports, without touching the boot-time files
  gpuhost.baseline.pcie_tune:
    addresses: ["0000:49:00.0", "0000:c9:00.0"]
    max_read_request: 4096
    persist: false
  become: true

- name: MaxPayload 512 on a NIC and the root port above it (both ends of the link in one task)
  gpuhost.baseline.pcie_tune:
    addresses: ["0000:40:03.1", "0000:49:00.0"]
    max_payload: 512
  become: true

- name: Let GPU peer traffic turn around in the PCIe switches (bare-metal inference host, no VM passthrough)
  gpuhost.baseline.pcie_tune:
    acs_redirect: disable
    acs_bridges: auto
  become: true

- name: Tune a writable copy of a snapshot (nothing outside it is touched, no command runs)
  gpuhost.baseline.pcie_tune:
    kinds: [gpu]
    max_read_request: 4096
    root: /tmp/gpu01-copy
  delegate_to: localhost
"""

RETURN = r"""
runtime:
  description: What the registers hold before and after the task (in check mode, what they would hold).
  returned: success
  type: dict
  contains:
    devices:
      description: One entry per selected device with a PCI Express capability.
      type: list
      elements: dict
      sample:
        - address: "0000:43:00.0"
          kind: gpu
          devctl_before: "0x293e"
          devctl_after: "0x593e"
          max_read_request_before: 512
          max_read_request_after: 4096
          max_payload_before: 256
          max_payload_after: 256
          max_payload_supported: 256
          changed: true
    bridges:
      description: One entry per bridge whose ACS redirect was to be cleared.
      type: list
      elements: dict
      sample:
        - address: "0000:42:00.0"
          acsctl_before: "0x001d"
          acsctl_after: "0x0011"
          request_redirect_before: true
          request_redirect_after: false
          completion_redirect_before: true
          completion_redirect_after: false
          changed: true
    skipped:
      description: Selected functions left alone, with the reason (no PCI Express or no ACS capability).
      type: list
      elements: dict
      sample: [{"address": "0000:40:00.0", "reason": "no PCI Express capability"}]
persisted:
  description:
    - The boot-time files after the task (in check mode, as they would be). C(present) - the file exists;
      C(matching) - its content is exactly what this module writes for the settings in the script;
      C(enabled) - the unit's C(multi-user.target.wants) link exists; C(covers) - everything is in place and
      the script re-applies every setting of this task.
  returned: success
  type: dict
  sample:
    script: {"path": "/usr/local/sbin/gpuhost-pcie-apply", "present": true, "matching": true}
    unit: {"path": "/etc/systemd/system/gpuhost-pcie.service", "present": true, "matching": true}
    udev: {"path": "/etc/udev/rules.d/90-gpuhost-pcie.rules", "present": true, "matching": true}
    enabled: true
    covers: true
persisted_before:
  description: The same as RV(persisted), for the files as they were before the task.
  returned: success
  type: dict
  sample:
    script: {"path": "/usr/local/sbin/gpuhost-pcie-apply", "present": false, "matching": false}
    unit: {"path": "/etc/systemd/system/gpuhost-pcie.service", "present": false, "matching": false}
    udev: {"path": "/etc/udev/rules.d/90-gpuhost-pcie.rules", "present": false, "matching": false}
    enabled: false
    covers: false
backup_files:
  description: Backup copy of each file replaced, by file (only with O(backup=true) when a file existed).
  returned: success
  type: dict
  sample: {"/usr/local/sbin/gpuhost-pcie-apply": "/usr/local/sbin/gpuhost-pcie-apply.4211.2025-01-15@10:02:11~"}
commands:
  description: Commands run or, in check mode or on a snapshot root, that would run.
  returned: always
  type: list
  elements: str
  sample: ["systemctl daemon-reload", "udevadm control --reload"]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.base import FIX_OPTIONS, run_fix
from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.pcie import ARGUMENT_SPEC, REQUIRED_ONE_OF, apply_params


def main():
    module = AnsibleModule(argument_spec=dict(ARGUMENT_SPEC, **FIX_OPTIONS), required_one_of=REQUIRED_ONE_OF,
                           supports_check_mode=True)
    run_fix(module, lambda host: apply_params(host, module.params, module._diff))


if __name__ == "__main__":
    main()
