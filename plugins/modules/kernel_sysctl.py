#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: kernel_sysctl
short_description: Set the NUMA and memory reclaim sysctls of a GPU host, now and at boot
version_added: 0.1.0
description:
  - Sets one of the kernel settings the GPU host baseline manages, at runtime (C(/proc/sys)) and in a
    file of C(/etc/sysctl.d/) that C(systemd-sysctl) applies at boot.
  - Only the keys of the baseline are accepted, V(kernel.numa_balancing), V(vm.zone_reclaim_mode) and
    V(vm.swappiness); any other key is refused with a message (use C(ansible.posix.sysctl) for those).
  - Runtime and persisted state are reported apart. "Persisted" is the value C(systemd-sysctl) would
    apply at boot after its precedence over C(/etc/sysctl.d), C(/run/sysctl.d), C(/usr/local/lib/sysctl.d),
    C(/usr/lib/sysctl.d) and C(/etc/sysctl.conf). When another file applied after O(sysctl_file) sets the
    same key, the value written here is ineffective, and the module warns and returns that file in
    RV(overridden_by).
  - Runtime is written first. When the kernel refuses it (read-only C(/proc/sys) in an unprivileged
    container, a value out of range) the task fails and no file is written; when the file cannot be
    written, the runtime value is put back.
author:
  - gpuhost.baseline maintainers (@gpuhost-baseline)
options:
  key:
    description:
      - The sysctl to set, dotted (V(vm.swappiness)) or with slashes (V(vm/swappiness)).
      - One of V(kernel.numa_balancing), V(vm.zone_reclaim_mode), V(vm.swappiness); another key fails the task
        with a message naming these.
    type: str
    required: true
  value:
    description:
      - The integer to set. V(kernel.numa_balancing) takes 0 to 3 (the baseline wants V(0)),
        V(vm.zone_reclaim_mode) 0 to 7 (V(0)), V(vm.swappiness) 0 to 200 (kernels before 5.8 stop at 100).
    type: str
    required: true
  runtime:
    description:
      - Write the value to C(/proc/sys) now.
    type: bool
    default: true
  persist:
    description:
      - Write the value to O(sysctl_file) so that it is applied at boot.
    type: bool
    default: true
  sysctl_file:
    description:
      - The file of a sysctl.d directory that holds the values of the baseline. It is created with a
        header saying that it is managed; lines for other keys and comments in it are kept.
    type: path
    default: /etc/sysctl.d/90-gpuhost-baseline.conf
extends_documentation_fragment:
  - gpuhost.baseline.fix
seealso:
  - name: sysctl.d(5)
    description: Where systemd-sysctl reads its files and which one wins.
    link: https://www.freedesktop.org/software/systemd/man/latest/sysctl.d.html
"""

EXAMPLES = r"""
- name: Turn NUMA balancing off now and at boot
  gpuhost.baseline.kernel_sysctl:
    key: kernel.numa_balancing
    value: "0"
    backup: true
  become: true

- name: Only persist zone reclaim off (applied at the next boot)
  gpuhost.baseline.kernel_sysctl:
    key: vm.zone_reclaim_mode
    value: "0"
    runtime: false

- name: Fix a writable copy of a snapshot (nothing on the controller is touched outside it)
  gpuhost.baseline.kernel_sysctl:
    key: kernel.numa_balancing
    value: "0"
    root: /tmp/gpu01-copy
  delegate_to: localhost
"""

RETURN = r"""
key:
  description: The key set, dotted.
  returned: always
  type: str
  sample: kernel.numa_balancing
value:
  description: The value asked for, as the kernel prints it.
  returned: always
  type: str
  sample: "0"
runtime_before:
  description: Value in C(/proc/sys) before the task; V(null) when the file does not exist.
  returned: success
  type: str
  sample: "1"
runtime_after:
  description: Value in C(/proc/sys) after the task (in check mode, what it would be).
  returned: success
  type: str
  sample: "0"
persisted_before:
  description: Value systemd-sysctl would apply at boot before the task; V(null) when no file sets it.
  returned: success
  type: str
  sample: "1"
persisted_after:
  description: Value systemd-sysctl would apply at boot after the task.
  returned: success
  type: str
  sample: "0"
persisted_file:
  description: The file whose line sets the boot value after the task.
  returned: success
  type: str
  sample: /etc/sysctl.d/90-gpuhost-baseline.conf
overridden_by:
  description:
    - A file applied after O(sysctl_file) that sets the key to another value, making the persisted value
      ineffective; V(null) when the value persists.
  returned: success
  type: str
  sample: /etc/sysctl.d/99-sysctl.conf
sysctl_file:
  description: The file this module manages.
  returned: always
  type: str
  sample: /etc/sysctl.d/90-gpuhost-baseline.conf
backup_files:
  description: Backup copy of each file replaced, by file (only with O(backup=true) when a file existed).
  returned: changed
  type: dict
  sample: {"/etc/sysctl.d/90-gpuhost-baseline.conf": "/etc/sysctl.d/90-gpuhost-baseline.conf.4211.2025-01-15@10:02:11~"}
commands:
  description: Commands run or, in check mode or on a snapshot root, that would run. This module runs none.
  returned: always
  type: list
  elements: str
  sample: []
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.base import FIX_OPTIONS, run_fix
from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.sysctl import ARGUMENT_SPEC, REQUIRED_ONE_OF, apply_params


def main():
    module = AnsibleModule(argument_spec=dict(ARGUMENT_SPEC, **FIX_OPTIONS), required_one_of=REQUIRED_ONE_OF,
                           supports_check_mode=True)
    run_fix(module, lambda host: apply_params(host, module.params, module._diff))


if __name__ == "__main__":
    main()
