# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""IOMMU facts: on or off, AMD-Vi or Intel DMAR, default domain type per group, cmdline switches.

Pure helpers (:func:`iommu_type`, :func:`cmdline_switches`, :func:`passthrough`) never raise;
:func:`gather` reads through a :class:`host.root.Root` (docs/facts.md, section ``iommu``). The
running command line is shared with the kernel gatherer so ``/proc/cmdline`` is read once.
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.kernel import (
    cmdline_value,
    parse_cmdline,
    read_running_cmdline,
)

__metaclass__ = type

SUBSYSTEM = "iommu"
GROUPS_DIR = "/sys/kernel/iommu_groups"
CLASS_DIR = "/sys/class/iommu"
SWITCHES = ("iommu", "amd_iommu", "intel_iommu", "iommu.passthrough")


def iommu_type(class_names):
    """``AMD-Vi`` for ``ivhd*`` units, ``DMAR`` for ``dmar*`` units in ``/sys/class/iommu``, else ``None``."""
    names = list(class_names or ())
    if any(name.startswith("ivhd") for name in names):
        return "AMD-Vi"
    if any(name.startswith("dmar") for name in names):
        return "DMAR"
    return None


def cmdline_switches(params):
    """The IOMMU switches of a parsed cmdline; ``None`` for each one absent (or no cmdline).

    Flags without a value are ``True``; ``-``/``_`` spellings are equal, as in the kernel.
    """
    return dict((name, cmdline_value(params, name) if params is not None else None) for name in SWITCHES)


def passthrough(domain_types):
    """``True`` when every group's default domain is ``identity``; ``None`` without groups.

    ``domain_types`` lists one type per group, ``None`` where unreadable: any non-identity
    type decides ``False``; otherwise an unreadable one leaves the answer ``None``.
    """
    types = list(domain_types or ())
    if not types:
        return None
    if any(value is not None and value != "identity" for value in types):
        return False
    if any(value is None for value in types):
        return None
    return True


def gather(root):
    """The ``iommu`` section of docs/facts.md for ``root`` (a :class:`host.root.Root`)."""
    groups = [name for name in root.listdir(GROUPS_DIR) if name.isdigit()]
    groups.sort(key=int)
    types = []
    for group in groups:
        # type appeared in Linux 5.11; older kernels simply lack it
        types.append(root.read_value("%s/%s/type" % (GROUPS_DIR, group), SUBSYSTEM, optional=True))
    counts = {}
    for value in types:
        if value is not None:
            counts[value] = counts.get(value, 0) + 1

    text = read_running_cmdline(root, SUBSYSTEM)
    params = parse_cmdline(text) if text is not None else None

    return {
        "enabled": bool(groups),
        "type": iommu_type(root.listdir(CLASS_DIR)),
        "groups": len(groups),
        "default_domain": dict(sorted(counts.items())),
        "cmdline": cmdline_switches(params),
        "passthrough": passthrough(types),
    }
