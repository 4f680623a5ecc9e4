# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The sysctls the baseline manages: one table, read by every layer that needs to know them.

The kernel facts (``kernel.sysctl`` and ``kernel.sysctl_persisted``), the derivation of the value
after a reboot (``derived.kernel.sysctl_boot``), the fix module ``kernel_sysctl`` (which keys it may
set and in which range), the sources the report names for an unknown value, and the demo
generator all read :data:`SYSCTLS`; none keeps a list of its own (docs/architecture.md, "Add a
rule"). Host side: Python 3.8 syntax, standard library only.

A rule may also read a sysctl this table does not hold: its query names it by its dotted name,
``kernel.sysctl."vm.dirty_ratio"`` (or ``kernel.sysctl_persisted."vm.dirty_ratio"``); the catalogue
collects those names (:data:`REFERENCE_RE`) and the kernel facts read them too, keyed by that name
(docs/architecture.md, "Add a sysctl check"). Such a sysctl has no automatic fix until it has an entry here.

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

import re

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


#: a sysctl name a rule may ask for, as sysctl(8) writes it: two to six dot-separated parts of lower-case
#: letters, digits, ``_`` and ``-`` (``vm.dirty_ratio``, ``net.ipv4.tcp_rmem``); no ``/``, ``..`` or ``*``
NAME_RE = re.compile(r"\A[a-z0-9_]+(?:\.[a-z0-9_-]+){1,5}\Z")
#: the most sysctls beyond :data:`SYSCTLS` one gather reads (each is one file read)
MAX_REQUESTED = 64
#: a sysctl a rule expression reads by name: ``kernel.sysctl."<name>"`` or ``kernel.sysctl_persisted."<name>"``
#: (groups ``fact``, the facts key, and ``name``); the catalogue collects them, the sources name their file
REFERENCE_RE = re.compile(r'(?P<fact>kernel\.sysctl(?:_persisted)?)\s*\.\s*"(?P<name>[^"\\]{0,200})"')
#: the longest value text kept for a sysctl that is not one integer (``net.ipv4.tcp_rmem``: three)
MAX_VALUE_CHARS = 4096


def name_problem(names):
    """Why ``names`` (the sysctls a catalogue asks for) cannot be read, in one line; ``None`` when they can."""
    if not isinstance(names, (list, tuple)):
        return "sysctls must be a list of sysctl names, not %s" % type(names).__name__
    for name in names:
        if not isinstance(name, str) or not NAME_RE.match(name):
            return ("sysctls: %r is not a sysctl name (dotted, as sysctl(8) writes it: vm.dirty_ratio)"
                    % (name if not isinstance(name, str) else name[:80],))
    if len(set(names)) > MAX_REQUESTED:
        return "sysctls: %d names, more than the %d one gather reads" % (len(set(names)), MAX_REQUESTED)
    return None


def sysctl_value(text):
    """A /proc/sys file's text as a value: an ``int`` for one integer, else the text with its runs of
    white space made one space (``4096 131072 6291456``), at most :data:`MAX_VALUE_CHARS`; ``None`` for none."""
    if text is None:
        return None
    words = text.split()
    if len(words) == 1 and re.match(r"\A-?[0-9]{1,20}\Z", words[0]):
        return int(words[0])
    return " ".join(words)[:MAX_VALUE_CHARS]
