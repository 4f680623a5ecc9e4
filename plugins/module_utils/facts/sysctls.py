# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sysctls the baseline manages: one table, read by every layer that needs to know them.

The kernel facts (``kernel.sysctl`` and ``kernel.sysctl_persisted``), the derivation of the value
after a reboot (``derived.kernel.sysctl_boot``), the fix module ``kernel_sysctl`` (which keys it may
set and in which range), the sources the report names for an unknown value, and the demo
generator all read :data:`SYSCTLS`; none keeps a list of its own (docs/architecture.md, "Add a
rule"). Host side: Python 3.8 syntax, standard library only.

Each entry, keyed by the dotted name:

``fact``
    the key of ``kernel.sysctl`` and ``derived.kernel.sysctl_boot`` (what rules query).
``range``
    ``(low, high)``, the values the kernel accepts (its ``proc_dointvec_minmax`` bounds); the fix
    module refuses anything else.
``boot_default``
    the value the kernel starts with when nothing sets it at boot; ``None`` when it depends on the
    kernel's build and the host (the derivation works it out and says from what).
``boot_param``
    a kernel parameter other than ``sysctl.<name>=`` that sets it (``{"name", "values": {text: value}}``),
    or ``None``.
``boot_want``
    what the value after a reboot must be: ``{"equals": n}`` or ``{"at_most_param": profile parameter}``.
``absent_when``
    why a kernel may have no such file (the fix module's message), or ``None``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

SYSCTLS = {
    # 0 off, 1 NUMA balancing, 2 memory tiering, 3 both (kernel/sched/core.c, 5.18+); the default
    # depends on CONFIG_NUMA_BALANCING_DEFAULT_ENABLED and the number of nodes (mm/mempolicy.c)
    "kernel.numa_balancing": {
        "fact": "numa_balancing",
        "range": (0, 3),
        "boot_default": None,
        "boot_param": {"name": "numa_balancing", "values": {"enable": 1, "disable": 0}},
        "boot_want": {"equals": 0},
        "absent_when": "built without CONFIG_NUMA_BALANCING",
    },
    # bit mask: 1 reclaim locally, 2 write dirty pages, 4 swap (Documentation/admin-guide/sysctl/vm.rst)
    "vm.zone_reclaim_mode": {
        "fact": "zone_reclaim_mode",
        "range": (0, 7),
        "boot_default": 0,
        "boot_param": None,
        "boot_want": {"equals": 0},
        "absent_when": None,
    },
    # 0..200 since 5.8 (0..100 before; an older kernel answers EINVAL above 100)
    "vm.swappiness": {
        "fact": "swappiness",
        "range": (0, 200),
        "boot_default": 60,
        "boot_param": None,
        "boot_want": {"at_most_param": "swappiness_max"},
        "absent_when": None,
    },
}


def proc_path(name):
    """``vm.swappiness`` -> ``/proc/sys/vm/swappiness``."""
    return "/proc/sys/" + name.replace(".", "/")
