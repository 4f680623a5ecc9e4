# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NUMA placement: the CPUs of each node and what is wrong with a container's cpuset against
the nodes of its GPUs (``derived.lxc``, :mod:`derive_lxc`).
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import cpu as facts_cpu
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_common import parse_cpulist
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.docpath import get as _get

__metaclass__ = type


def _nodes_cpus(facts):
    result = {}
    for node in _get(facts, "numa", "nodes") or []:
        if isinstance(node, dict) and isinstance(node.get("id"), int):
            result[node["id"]] = parse_cpulist(node.get("cpulist"))
    return result


def _pinning_problems(ct, gpu_nodes, node_cpus):
    problems = []
    allowed = set()
    for node in gpu_nodes:
        cpus = node_cpus.get(node)
        if cpus is None:
            return None
        allowed |= cpus
    wanted = ",".join(str(n) for n in sorted(gpu_nodes))
    cpuset = ct.get("cpuset")
    if not cpuset:
        problems.append("no lxc.cgroup2.cpuset.cpus (GPU node(s) %s)" % wanted)
    else:
        cpus = parse_cpulist(cpuset)
        if cpus is None:
            problems.append("cpuset %r unreadable" % cpuset)
        elif cpus - allowed:
            problems.append("cpus %s outside GPU node(s) %s" % (facts_cpu.format_cpulist(cpus - allowed), wanted))
    mems = ct.get("cpuset_mems")
    if mems in (None, ""):
        problems.append("no lxc.cgroup2.cpuset.mems (GPU node(s) %s)" % wanted)
    else:
        nodes = parse_cpulist(mems)
        if nodes is None:
            problems.append("cpuset.mems %r unreadable" % mems)
        elif nodes - set(gpu_nodes):
            problems.append("mems %s not GPU node(s) %s" % (facts_cpu.format_cpulist(nodes - set(gpu_nodes)), wanted))
    return problems
