# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``derived.lxc``: LXC containers' GPU device access (cgroup allow lines, device nodes), memory
against the host's reserve, and the NUMA pinning of their cpusets against their GPUs' nodes
(``derive_numa.py``). Part of :func:`derive.derive`.
"""

from __future__ import absolute_import, division, print_function

import re

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_common import _int
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_numa import _nodes_cpus, _pinning_problems
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.docpath import get as _get

__metaclass__ = type

_GPU_NODE_RE = re.compile(r"^/?dev/nvidia(\d+)$")

_ALLOW_RE = re.compile(r"^\s*([abc])(?:\s+(\*|\d+):(\*|\d+))?(?:\s+[rwm]+)?\s*$")


def _allows(devices_allow, major):
    """Whether ``lxc.cgroup2.devices.allow`` entries grant character major ``major``."""
    for entry in devices_allow:
        match = _ALLOW_RE.match(str(entry))
        if not match:
            continue
        kind, maj = match.group(1), match.group(2)
        if kind == "a" or (kind == "c" and (maj is None or maj == "*" or int(maj) == major)):
            return True
    return False


def _lxc(facts, params, gpus_by_index):
    lxc = _get(facts, "lxc")
    if not isinstance(lxc, dict):
        return {"containers": None, "gpu_containers": None, "host_memory_mib": None, "memory_limit_mib": None}
    nodes = [n for n in _get(facts, "numa", "nodes") or [] if isinstance(n, dict)]
    totals = [_int(n.get("mem_total_kb")) for n in nodes]
    host_mib = None if not totals or any(t is None for t in totals) else sum(totals) // 1024
    reserve = params.get("lxc_host_reserve_gib_per_node")
    limit = None
    if host_mib is not None and isinstance(reserve, (int, float)) and not isinstance(reserve, bool):
        limit = int(host_mib - reserve * 1024 * len([t for t in totals if t]))
    uvm = _int(lxc.get("nvidia_uvm_major"))
    node_cpus = _nodes_cpus(facts)
    containers = []
    for ct in lxc.get("containers") or []:
        if not isinstance(ct, dict):
            continue
        allow = [str(a) for a in ct.get("devices_allow") or []]
        sources = []
        for mount in ct.get("mounts") or []:
            if isinstance(mount, dict) and mount.get("source"):
                sources.append(str(mount["source"]))
        sources += [str(e) for e in ct.get("dev_entries") or [] if e]
        nodes_present = set(s if s.startswith("/") else "/" + s for s in sources)
        minors = sorted(set(int(m.group(1)) for m in (_GPU_NODE_RE.match(s) for s in nodes_present) if m))
        holds = bool(minors) or any(n in nodes_present for n in ("/dev/nvidiactl", "/dev/nvidia-uvm")) or \
            any(re.match(r"^\s*c\s+195:", a) for a in allow)
        item = {"id": ct.get("id"), "label": "CT %s" % ct.get("id"), "holds_gpus": holds, "gpu_minors": minors,
                "memory_mib": ct.get("memory_mib"), "memory_limit_mib": limit,
                "missing_majors": None, "missing_nodes": None, "gpu_numa_nodes": None,
                "numa_pinning_problems": None, "reason": None}
        if holds:
            missing = []
            if not _allows(allow, 195):
                missing.append("195 (nvidia)")
            if uvm is not None and not _allows(allow, uvm):
                missing.append("%d (nvidia-uvm, live major)" % uvm)
            if uvm is None and not missing:
                item["reason"] = "live nvidia-uvm major unknown: /proc/devices has no nvidia-uvm (module not loaded?)"
                missing = None
            item["missing_majors"] = missing
            item["missing_nodes"] = [n for n in ("/dev/nvidiactl", "/dev/nvidia-uvm") if n not in nodes_present] + \
                ([] if minors else ["/dev/nvidia<N> (no GPU device node)"])
            gpu_nodes = set()
            for minor in minors:
                gpu = gpus_by_index.get(minor)
                node = gpu.get("numa_node") if gpu else None
                if node is None:
                    gpu_nodes = None
                    item["reason"] = item["reason"] or "NUMA node of /dev/nvidia%d unknown" % minor
                    break
                gpu_nodes.add(node)
            if gpu_nodes is not None and minors:
                item["gpu_numa_nodes"] = sorted(gpu_nodes)
                item["numa_pinning_problems"] = _pinning_problems(ct, gpu_nodes, node_cpus)
            elif not minors:
                item["reason"] = item["reason"] or "no /dev/nvidia<N> mounted: no GPU to pin to"
        containers.append(item)
    return {"containers": containers, "gpu_containers": [c for c in containers if c["holds_gpus"]],
            "host_memory_mib": host_mib, "memory_limit_mib": limit}
