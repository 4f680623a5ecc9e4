#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: kernel_cmdline
short_description: Add, set or remove kernel command-line parameters for the boot loader in use
version_added: 0.1.0
description:
  - Edits the command line the boot loader passes to the kernel at the next boot, for the boot loader
    that the host's files show (never guessed), and regenerates the boot entries.
  - V(systemd-boot) (Proxmox VE and systemd-boot hosts) when C(/etc/kernel/cmdline) exists together with
    C(/etc/kernel/proxmox-boot-uuids), C(/boot/efi/loader), or BLS entries without C(/etc/default/grub).
    C(/etc/kernel/cmdline) is edited, then C(proxmox-boot-tool refresh) runs (C(kernel-install add) for the
    running kernel on non-Proxmox hosts).
  - V(bls) (RHEL, Rocky, Alma, Fedora) when C(/etc/default/grub), BLS entries in C(/boot/loader/entries) and
    C(/etc/redhat-release) exist. C(grubby --update-kernel=ALL --args=... --remove-args=...) edits every entry;
    the module writes no file itself, so on a snapshot root nothing is written and the command is only listed.
  - >-
    V(grub) when C(/etc/default/grub) exists. C(GRUB_CMDLINE_LINUX_DEFAULT) is edited at the assignment in effect,
    the last one of the last file that assigns it (C(/etc/default/grub), then C(/etc/default/grub.d/*.cfg) in name
    order, hidden files left out as the shell glob does); a key already in C(GRUB_CMDLINE_LINUX) is changed there.
    The quoting and every other byte of the file are kept. Then C(update-grub) (Debian family),
    C(grub2-mkconfig -o /boot/grub2/grub.cfg) (EL, SUSE) or C(proxmox-boot-tool refresh) regenerates grub.cfg.
  - >-
    These files are shell that grub-mkconfig sources; the module reads them and never runs them. It edits them
    only when the value the shell ends with can be read from the text, that is when every write to
    C(GRUB_CMDLINE_LINUX) or C(GRUB_CMDLINE_LINUX_DEFAULT) is a plain assignment on a line of its own
    (C(NAME=value) or C(export NAME=value), single-quoted, double-quoted or bare, referring to no variable but
    these two), outside any C(if) or C(case) block, loop, function, C({ }) group or subshell, and not after
    C(&&), C(||), C(;), C(|) or C(!). Reading them (C($NAME), C(${NAME})) is allowed anywhere.
  - >-
    Otherwise the task fails, reports nothing changed, writes nothing and runs nothing, in check mode too, with the
    file and the line in its message, for example V(cannot edit /etc/default/grub safely: line 12 assigns
    GRUB_CMDLINE_LINUX_DEFAULT inside an if block) and V(edit it by hand) after the reason.
    This covers C(+=), assignments inside blocks or after an operator, C(NAME=value command), a value with
    C($OTHER), C($1), C(${NAME:-...}), command substitution or backquotes, sourcing another file (C(.), C(source)),
    C(eval), C(exit), C(return), C(exec), a here-document, an unterminated quote and an unclosed block, anywhere
    in any of the files. Make the file plain (one assignment per variable, or a last plain assignment) and run
    again.
  - >-
    The assignment in effect is also refused when its value uses an expansion (C(NAME="$NAME quiet")), since
    rewriting it could change what the shell evaluates; and before anything is written, the edited files are
    evaluated again the same way and must give the planned command line.
  - When no boot loader is found the task fails and nothing is written. When the regenerating command fails
    the edited file is put back, so that the next run tries again.
  - Parameter names match with C(-) and C(_) equal, as in the kernel. A key in O(add) replaces every occurrence
    of that key (the first keeps its place, later ones go).
  - The new command line takes effect at the next boot; RV(reboot_required) says whether the running kernel
    was booted with other values for the managed keys.
author:
  - gpuhost.baseline maintainers (@gpuhost-baseline)
options:
  add:
    description:
      - Parameters to set, as a dict from name to value (V(true) or V(null) for a flag without value, see the
        examples) or as a list of C(key=value) strings and flags such as V([amd_pstate=active, iommu=pt]).
      - A value containing spaces is written in double quotes.
    type: raw
  remove:
    description:
      - Names of parameters to remove, every occurrence, whatever their value.
    type: list
    elements: str
  bootloader:
    description:
      - V(auto) detects the boot loader from files as described above. Naming one forces it, with a warning
        when the files say otherwise.
    type: str
    choices: [auto, grub, systemd-boot, bls]
    default: auto
extends_documentation_fragment:
  - gpuhost.baseline.fix
seealso:
  - name: The kernel's command-line parameters
    description: What each parameter does and how the kernel splits the line.
    link: https://docs.kernel.org/admin-guide/kernel-parameters.html
  - name: Proxmox VE host boot loader
    description: C(/etc/kernel/cmdline), C(/etc/default/grub) and C(proxmox-boot-tool refresh).
    link: https://pve.proxmox.com/wiki/Host_Bootloader
"""

EXAMPLES = r"""
- name: Active amd_pstate and IOMMU pass-through at the next boot
  gpuhost.baseline.kernel_cmdline:
    add:
      amd_pstate: active
      iommu: pt
    backup: true
  become: true
  register: cmdline

- name: Say when a reboot is pending
  ansible.builtin.debug:
    msg: "reboot needed for {{ cmdline.running }}"
  when: cmdline.reboot_required

- name: Drop a parameter and set another, as a list
  gpuhost.baseline.kernel_cmdline:
    add: [processor.max_cstate=1]
    remove: [intel_idle.max_cstate]

- name: Edit a writable copy of a snapshot; the commands are only listed
  gpuhost.baseline.kernel_cmdline:
    add: {amd_pstate: active}
    root: /tmp/gpu01-copy
  delegate_to: localhost
"""

RETURN = r"""
bootloader:
  description: The boot loader whose configuration was edited.
  returned: success
  type: str
  sample: systemd-boot
detected_bootloader:
  description: What the files say (V(null) when nothing was found); differs from RV(bootloader) only when forced.
  returned: success
  type: str
  sample: systemd-boot
source:
  description: Where the configured command line lives for this boot loader.
  returned: success
  type: str
  sample: /etc/kernel/cmdline
config_files:
  description:
    - Files edited (or that would be). For V(bls), the entries that C(grubby) edits (or would).
  returned: success
  type: list
  elements: str
  sample: [/etc/kernel/cmdline]
entries_to_update:
  description: BLS entries that lack an added value or still have a removed key.
  returned: when bootloader is bls
  type: list
  elements: str
  sample: [/boot/loader/entries/4f2a9c0e-5.14.0-427.el9.x86_64.conf]
configured_before:
  description:
    - Parameters the boot loader was configured to pass, as a dict (flags map to V(true)). For V(bls), the
      entry of the newest kernel.
  returned: success
  type: dict
  sample: {"root": "ZFS=rpool/ROOT/pve-1", "boot": "zfs", "quiet": true}
configured_after:
  description: Parameters configured after the task (in check mode, what they would be).
  returned: success
  type: dict
  sample: {"root": "ZFS=rpool/ROOT/pve-1", "boot": "zfs", "quiet": true, "amd_pstate": "active"}
running:
  description: Values of the managed keys on the running kernel's command line (V(null) for an absent key).
  returned: success
  type: dict
  sample: {"amd_pstate": null}
reboot_required:
  description:
    - Whether the running command line differs from the configured one for the managed keys, that is
      whether a reboot is needed for them to apply. V(null) when C(/proc/cmdline) cannot be read.
  returned: success
  type: bool
  sample: true
commands:
  description: Commands run or, in check mode or on a snapshot root, that would run.
  returned: always
  type: list
  elements: str
  sample: [proxmox-boot-tool refresh]
backup_files:
  description: Backup copy of each file replaced, by file (only with O(backup=true)).
  returned: changed
  type: dict
  sample: {"/etc/kernel/cmdline": "/etc/kernel/cmdline.4211.2025-01-15@10:02:11~"}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.cmdline import ARGUMENT_SPEC, REQUIRED_ONE_OF, apply_params
from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.base import FIX_OPTIONS, run_fix


def main():
    module = AnsibleModule(argument_spec=dict(ARGUMENT_SPEC, **FIX_OPTIONS), required_one_of=REQUIRED_ONE_OF,
                           supports_check_mode=True)
    run_fix(module, lambda host: apply_params(host, module.params, module._diff))


if __name__ == "__main__":
    main()
