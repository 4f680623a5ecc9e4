# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where each fact a rule reads comes from: the file or command behind a fact key.

Controller side. When a rule's observation is null, the evaluator (:mod:`evaluation`) names the
file or command that gave no value instead of the fact key, and quotes the reason the host's
reader recorded for it (``facts["errors"]``: ``{subsystem, path, reason}``, ``Root.error``)::

    kernel.numa_balancing unknown: no value from /proc/sys/kernel/numa_balancing: not an integer: 'yes'

A key is the rule's query for a host-wide rule (``kernel.sysctl.numa_balancing``) or
``<subjects>[].<query>`` for a rule over a list (``derived.nvidia.gpus[].power_limit_w``; filters
such as ``[?!idle]`` are dropped). :data:`SOURCES` maps keys to sources; a key without an entry
of its own takes the entry of its longest dotted prefix (``cpu.cpufreq`` covers
``cpu.cpufreq.governor``). A source's path may hold ``{field}`` placeholders filled from the
subject element (``/sys/bus/pci/devices/{address}/config``) and shell-style wildcards for a file
per CPU, node or device (``policy*``).
"""

from __future__ import absolute_import, division, print_function

import fnmatch
import re

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.cpu import CPU_DIR, CPUFREQ_DIR
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.iommu import GROUPS_DIR
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.kernel import SYSCTL_CONF, SYSCTL_DIRS
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.lxc import PVE_LXC_DIR
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.numa import NODE_DIR
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.nvidia import VERSION_PATH
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.pci import DEVICES_DIR
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.sysctls import REFERENCE_RE, SYSCTLS, proc_path
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.persist import (
    CPU_SCRIPT_PATH, CPU_UNIT_PATH, PCIE_SCRIPT_PATH, PCIE_UNIT_PATH,
)
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import COMMAND_ARGV, COMMAND_CAPTURES

__metaclass__ = type


SMI_Q = "nvidia-smi -q -x"
SMI_TOPO = "nvidia-smi topo -m"
KERNEL_LOG = "journalctl -k -b"
#: command as shown -> its capture (host/root.py): a reader's error names the command line it ran,
#: its program, or the capture file of a snapshot
_CAPTURES = {
    SMI_Q: "nvidia-smi-q",
    SMI_TOPO: "nvidia-smi-topo",
    KERNEL_LOG: "kernel-log",
    "dmesg": "kernel-log-dmesg",
    "nvidia-smi nvlink -s": "nvidia-smi-nvlink",
    "nvidia-smi nvlink -e": "nvidia-smi-nvlink-errors",
    "systemctl show nvidia-fabricmanager.service": "fabricmanager-state",
}


def _aliases(command):
    capture = _CAPTURES.get(command)
    argv = COMMAND_ARGV.get(capture) or []
    names = [COMMAND_CAPTURES.get(capture), " ".join(argv), argv[0] if argv else None]
    return tuple(name for name in names if name)


def _smi(element):
    """A value of ``nvidia-smi -q -x``, named by its XML element."""
    return (SMI_Q, element)


_POLICY = CPUFREQ_DIR + "/policy*/"
_IDLE_STATE = CPU_DIR + "/cpu*/cpuidle/state*/"
_MEMINFO = NODE_DIR + "/node*/meminfo"
_CONFIG = DEVICES_DIR + "/{address}/config"
_CT_CONF = PVE_LXC_DIR + "/{id}.conf"
# the directories the kernel facts read, in their order (facts/kernel.py), and sysctl.conf last
_SYSCTL_FILES = tuple(directory + "/*.conf" for directory in SYSCTL_DIRS) + (SYSCTL_CONF,)
_CMDLINE_FILES = ("/etc/kernel/cmdline", "/etc/default/grub", "/boot/loader/entries/*.conf")
_PCI_DEVICE = (_CONFIG,)
#: counter rules compare this audit's values with a record of the history (history/<host>.jsonl)
_COUNTER_HISTORY = ("/proc/sys/kernel/random/boot_id", "and the counter values of earlier audits in history/<host>.jsonl")
#: the measurements of validate.yml (module host_measure, docs/validation.md)
#: (a measurement is named "host_measure <its name>", what it ran)
_MEASURE_CPU = ("host_measure cpu_freq", "the CPU clock under load")
_MEASURE_MEM = ("host_measure mem_bw", "stress-ng, sysbench or mbw per NUMA node")
_MEASURE_GPU = ("host_measure gpu_bw", "nvbandwidth")
_MEASURE_WORKLOAD = ("host_measure workloads", "the site's workloads (gpuhost_validate_workloads)")

#: fact key -> sources: a path (``/...``, with ``{field}`` and wildcards) or command, or a pair
#: (path or command, what in it, or ``and ...`` for what else is read with it). Every key a shipped rule queries resolves here
#: (tests/unit/plugins/plugin_utils/test_sources.py checks the catalogue against it).
SOURCES = {
    # cpu
    "cpu": ("/proc/cpuinfo",),
    "cpu.cpufreq": (CPUFREQ_DIR + "/policy*",),
    "cpu.cpufreq.driver": (_POLICY + "scaling_driver",),
    "cpu.cpufreq.governor": (_POLICY + "scaling_governor",),
    "cpu.cpufreq.epp": (_POLICY + "energy_performance_preference",),
    "cpu.amd_pstate.status": (CPU_DIR + "/amd_pstate/status",),
    "cpu.intel_pstate": (CPU_DIR + "/intel_pstate/status", CPU_DIR + "/intel_pstate/no_turbo"),
    "cpu.boost": (CPUFREQ_DIR + "/boost", CPU_DIR + "/intel_pstate/no_turbo", _POLICY + "boost"),
    "cpu.smt": (CPU_DIR + "/smt/active", CPU_DIR + "/smt/control"),
    "cpu.cpuidle": (CPU_DIR + "/cpuidle/current_driver", _IDLE_STATE + "latency", _IDLE_STATE + "disable"),
    "derived.cpu.amd_zen": ("/proc/cpuinfo",),
    "derived.cpu.generation": ("/proc/cpuinfo",),
    "derived.cpu.smt": (CPU_DIR + "/smt/active",),
    "derived.cpu.deep_idle_enabled": (_IDLE_STATE + "latency", _IDLE_STATE + "disable"),
    "derived.cpu.power_boot_problems": (CPU_SCRIPT_PATH, CPU_UNIT_PATH) + _CMDLINE_FILES,
    # kernel
    "kernel.release": ("/proc/sys/kernel/osrelease",),
    "kernel.version": ("/proc/sys/kernel/version",),
    "kernel.cmdline": ("/proc/cmdline",),
    "kernel.configured_cmdline": _CMDLINE_FILES,
    "kernel.config": ("/boot/config-*", "/proc/config.gz"),
    "kernel.preempt": ("/sys/kernel/debug/sched/preempt", "/proc/sys/kernel/version", "/proc/cmdline"),
    "kernel.thp.enabled": ("/sys/kernel/mm/transparent_hugepage/enabled",),
    "kernel.thp.defrag": ("/sys/kernel/mm/transparent_hugepage/defrag",),
    "kernel.sysctl_persisted": _SYSCTL_FILES,
    "kernel.installed": ("/lib/modules", "/boot/vmlinuz-*"),
    "kernel.os_release": ("/etc/os-release", "/usr/lib/os-release"),
    "derived.kernel.cmdline_diff": ("/proc/cmdline",) + _CMDLINE_FILES,
    "derived.kernel.cmdline_pending": ("/proc/cmdline",) + _CMDLINE_FILES,
    "derived.kernel.kernel_min": (("profile parameter kernel_min_cpu", "per CPU generation from /proc/cpuinfo, and kernel_min"),),
    "derived.kernel.newer_installed": ("/proc/sys/kernel/osrelease", "/lib/modules", "/boot/vmlinuz-*"),
    "derived.kernel.pending_upgrade": ("/proc/sys/kernel/osrelease", "/lib/modules", "/boot/vmlinuz-*"),
    "derived.kernel.sysctl_boot": _SYSCTL_FILES,
    # numa
    "numa": (_MEMINFO, NODE_DIR + "/node*/cpulist"),
    "numa.nodes[]": (NODE_DIR + "/node{id}/meminfo", NODE_DIR + "/node{id}/cpulist"),
    "numa.nodes[].free_pct": (NODE_DIR + "/node{id}/meminfo",),
    "numa.nodes[].distances": (NODE_DIR + "/node{id}/distance",),
    "numa.free_pct_spread": (_MEMINFO,),
    "numa.mem_total_spread_pct": (_MEMINFO,),
    # iommu
    "iommu": (GROUPS_DIR, "/sys/class/iommu"),
    "iommu.passthrough": (GROUPS_DIR + "/*/type",),
    # pci: every list of devices derive_pcie.py builds from pci.devices
    "pci": (DEVICES_DIR,),
    "derived.pcie.gpus[]": _PCI_DEVICE,
    "derived.pcie.nics[]": _PCI_DEVICE,
    "derived.pcie.peer_devices[]": _PCI_DEVICE,
    "derived.pcie.link_speed[]": _PCI_DEVICE,
    "derived.pcie.peer_devices[].boot_problems": (PCIE_SCRIPT_PATH, PCIE_UNIT_PATH),
    "derived.pcie.mps_paths[]": ((_CONFIG, "and the config of each bridge above it"),),
    "derived.pcie.acs_bridges[]": _PCI_DEVICE,
    "derived.pcie.aer[]": (DEVICES_DIR + "/{address}/aer_dev_fatal", DEVICES_DIR + "/{address}/aer_dev_nonfatal"),
    # nvidia
    "nvidia": (VERSION_PATH, SMI_Q),
    "nvidia.module": (VERSION_PATH,),
    "nvidia.smi": (SMI_Q,),
    "nvidia.gpus": (SMI_Q,),
    "nvidia.driver_version": (_smi("<driver_version>"),),
    "nvidia.cuda_version": (_smi("<cuda_version>"),),
    "nvidia.topology": (SMI_TOPO,),
    "derived.nvidia.has_blackwell": (_smi("<product_name>"), DEVICES_DIR + "/*/device"),
    "derived.nvidia.ecc_modes": (_smi("<ecc_mode>/<current_ecc>"),),
    "derived.nvidia.bus_gpus": (DEVICES_DIR,),
    "derived.nvidia.smi_problems": (SMI_Q, DEVICES_DIR),
    "derived.nvidia.gpus[]": (SMI_Q,),
    "derived.nvidia.gpus[].driver_version": (_smi("<driver_version>"), VERSION_PATH),
    "derived.nvidia.gpus[].driver_min": (("profile parameter nvidia_driver_min", "per GPU generation, else default"),),
    "derived.nvidia.gpus[].persistence": (_smi("<persistence_mode>"),),
    "derived.nvidia.gpus[].ecc_current": (_smi("<ecc_mode>/<current_ecc>"),),
    "derived.nvidia.gpus[].ecc_pending": (_smi("<ecc_mode>/<pending_ecc>"),),
    "derived.nvidia.gpus[].ecc_pending_matches": (_smi("<ecc_mode>"),),
    "derived.nvidia.gpus[].power_limit_w": (_smi("<gpu_power_readings>/<current_power_limit>"),),
    "derived.nvidia.gpus[].power_target_w": (_smi("<gpu_power_readings>/<default_power_limit>, <max_power_limit>"),),
    "derived.nvidia.gpus[].throttle_active": (_smi("<clocks_event_reasons>"),),
    "derived.nvidia.gpus[].temp_headroom_c": (_smi("<temperature>/<gpu_temp>, <gpu_temp_slow_threshold>"),),
    "derived.nvidia.gpus[].width_current": (_smi("<pci>/<pci_gpu_link_info>/<link_widths>"),),
    "derived.nvidia.gpus[].width_max": (_smi("<pci>/<pci_gpu_link_info>/<link_widths>"),),
    "derived.nvidia.gpus[].numa_node": (DEVICES_DIR + "/{bus_id}/numa_node", SMI_TOPO),
    # lxc
    "lxc": (PVE_LXC_DIR + "/*.conf", "/proc/devices"),
    "derived.lxc.containers[]": (_CT_CONF,),
    "derived.lxc.containers[].memory_mib": ((_CT_CONF, "memory"),),
    "derived.lxc.containers[].memory_limit_mib": ((_MEMINFO, "MemTotal"),),
    "derived.lxc.gpu_containers[]": (_CT_CONF,),
    "derived.lxc.gpu_containers[].missing_majors": (_CT_CONF, "/proc/devices"),
    "derived.lxc.gpu_containers[].numa_pinning_problems": (
        _CT_CONF, DEVICES_DIR + "/*/numa_node", NODE_DIR + "/node*/cpulist"),
    # health (derive_health.py, facts/health.py)
    "derived.health": (KERNEL_LOG, SMI_Q, "/sys/class/infiniband", "/sys/devices/system/edac/mc"),
    "derived.health.gpus[]": (SMI_Q, KERNEL_LOG),
    "derived.health.gpus[].xid_hardware": (KERNEL_LOG, "dmesg"),
    "derived.health.gpus[].xid_other": (KERNEL_LOG, "dmesg"),
    "derived.health.gpus[].memory_pending": (_smi("<remapped_rows>, <retired_pages>"),),
    "derived.health.gpus[].memory_failures": (_smi("<remapped_rows>, <retired_pages>"),),
    "derived.health.gpus[].nvlink_problems": ("nvidia-smi nvlink -s",),
    # error counters judged by their increase over the history window (facts/counters.py, derive_counters.py)
    "derived.counters.ib_ports[]": (_COUNTER_HISTORY, "/sys/class/infiniband/*/ports/*/counters/*"),
    "derived.counters.ib_ports[].increases": (_COUNTER_HISTORY, "/sys/class/infiniband/*/ports/*/counters/*"),
    "derived.counters.aer_devices[]": (_COUNTER_HISTORY, DEVICES_DIR + "/*/aer_dev_correctable"),
    "derived.counters.aer_devices[].increases": (_COUNTER_HISTORY, DEVICES_DIR + "/*/aer_dev_correctable"),
    "derived.counters.nvlink_gpus[]": (_COUNTER_HISTORY, "nvidia-smi nvlink -e"),
    "derived.counters.nvlink_gpus[].increases": (_COUNTER_HISTORY, "nvidia-smi nvlink -e"),
    "derived.counters.ecc_gpus[]": (_COUNTER_HISTORY, _smi("<ecc_errors>/<volatile>")),
    "derived.counters.ecc_gpus[].increases": (_COUNTER_HISTORY, _smi("<ecc_errors>/<volatile>")),
    # what validate.yml measured (module host_measure, derive_validation.py)
    "derived.validation.cpus[]": (_MEASURE_CPU,),
    "derived.validation.cpus[].fraction": (_MEASURE_CPU,),
    "derived.validation.nodes[]": (_MEASURE_MEM,),
    "derived.validation.nodes[].peer_fraction": (_MEASURE_MEM,),
    "derived.validation.nodes[].bandwidth_mbs": (_MEASURE_MEM,),
    "derived.validation.cross[]": (_MEASURE_MEM,),
    "derived.validation.cross[].fraction": (_MEASURE_MEM,),
    "derived.validation.gpus[]": (_MEASURE_GPU,),
    "derived.validation.gpus[].fraction": (_MEASURE_GPU,),
    "derived.validation.pairs[]": (_MEASURE_GPU,),
    "derived.validation.pairs[].fraction": (_MEASURE_GPU,),
    "derived.validation.workloads[]": (_MEASURE_WORKLOAD,),
    "derived.validation.workloads[].value": (_MEASURE_WORKLOAD,),
    "derived.health.gpus[].nccl_problems": (SMI_TOPO, DEVICES_DIR + "/*"),
    "derived.health.fabric_problems": ("systemctl show nvidia-fabricmanager.service",),
    "derived.health.gpudirect": ("/sys/module/nvidia_peermem", "/sys/class/infiniband"),
    "derived.health.rdma_ports[]": ("/sys/class/infiniband/{device}/ports/*/state",
                                    "/sys/class/infiniband/{device}/ports/*/phys_state"),
    "derived.health.rdma_ports[].rate_problems": ("/sys/class/infiniband/{device}/ports/*/rate",),
    "derived.health.memory_controllers[]": ("/sys/devices/system/edac/mc/{name}",),
    "derived.health.memory_controllers[].ue_count": ("/sys/devices/system/edac/mc/{name}/ue_count",),
    "derived.health.memory_controllers[].ce_count": ("/sys/devices/system/edac/mc/{name}/ce_count",),
    # inventory (learn mode, derive_inventory.py): this host's facts compared with the golden host's
    "derived.inventory": (("profile parameter inventory", "written by learn"),),
    "derived.inventory.cpu[]": ("/proc/cpuinfo",),
    "derived.inventory.memory[]": (_MEMINFO,),
    "derived.inventory.gpus[]": (DEVICES_DIR, SMI_Q),
    "derived.inventory.nics[]": (DEVICES_DIR,),
    "derived.inventory.links[]": (DEVICES_DIR + "/{subject}/config",),
    "derived.inventory.speeds[]": (DEVICES_DIR + "/{subject}/config",),
    "derived.inventory.topology[]": (SMI_TOPO,),
    "derived.inventory.numa[]": (DEVICES_DIR + "/{subject}/numa_node",),
    "derived.inventory.versions[]": ("/proc/sys/kernel/osrelease", VERSION_PATH, SMI_Q),
    "derived.inventory.power[]": (_smi("<gpu_power_readings>/<current_power_limit>"),),
}
#: each managed sysctl's running value: its /proc/sys file (facts/sysctls.py)
SOURCES.update(("kernel.sysctl." + entry["fact"], (proc_path(name),)) for name, entry in SYSCTLS.items())

_PATH_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")
_FILTER_RE = re.compile(r"\[\?[^\]]*\]|\[\*?\]|\[\d+\]")
_FIELD_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: text that names a file (an absolute path) or one of the commands the readers run
_NAMES_SOURCE_RE = re.compile(r"(?:^|[\s(:'\"])/(?:proc|sys|etc|usr|lib|boot|run|var)\b|nvidia-smi|journalctl|dmesg|systemctl")


def _plain(text):
    """``text`` when it is a plain dotted fact path (not an expression), else ``None``."""
    if not isinstance(text, str):
        return None
    text = text.strip()
    return text if _PATH_RE.match(text) else None


def _sysctl_by_name(text):
    """The match of ``text`` when it is one sysctl a rule reads by its dotted name
    (``kernel.sysctl."vm.dirty_ratio"``, docs/architecture.md; ``facts.sysctls.REFERENCE_RE``), else None."""
    match = REFERENCE_RE.fullmatch(text.strip()) if isinstance(text, str) else None
    return match if match and match.group("name") else None


def fact_key(query, subjects=None):
    """The :data:`SOURCES` key of a rule's ``query`` over ``subjects`` (both jmespath texts):
    ``<query>``, ``<subjects>[].<query>``, or ``<subjects>[]`` when ``query`` is ``None`` or an
    expression rather than a path (then the element's sources stand for it); ``None`` for a
    host-wide expression."""
    if subjects is None and _sysctl_by_name(query):
        return query.strip()
    query = _plain(query)
    if subjects is None:
        return query
    base = _plain(_FILTER_RE.sub("", subjects.strip())) if isinstance(subjects, str) else None
    if base is None:
        return None
    return "%s[]" % base if query is None else "%s[].%s" % (base, query)


def lookup(key):
    """The sources of ``key``, else of the elements of the list ``key`` names (``key[]``), else of
    its longest dotted prefix with an entry; ``()`` when none. A sysctl read by its dotted name comes from
    its /proc/sys file (``kernel.sysctl."vm.dirty_ratio"``) or the sysctl.d files (``kernel.sysctl_persisted``)."""
    by_name = _sysctl_by_name(key)
    if by_name:
        return (proc_path(by_name.group("name")),) if by_name.group("fact") == "kernel.sysctl" else lookup(by_name.group("fact"))
    while key:
        for candidate in (key, key + "[]"):
            if candidate in SOURCES:
                return SOURCES[candidate]
        if "." not in key:
            break
        key = key.rsplit(".", 1)[0]
    return ()


def _fill(where, element):
    """``where`` with ``{field}`` taken from the subject element (``*`` when it has none)."""
    def value(match):
        got = element.get(match.group(1)) if isinstance(element, dict) else None
        return str(got) if isinstance(got, (str, int)) and not isinstance(got, bool) and str(got) else "*"
    return _FIELD_RE.sub(value, where)


def _matches(error_path, where):
    """Whether a recorded error about ``error_path`` is about source ``where``."""
    if not isinstance(error_path, str) or not error_path:
        return False
    if not where.startswith("/"):
        return error_path == where or error_path in _aliases(where)
    if error_path == where or fnmatch.fnmatchcase(error_path, where):
        return True
    # a file inside a source directory, or the directory (device link) above a source file
    return fnmatch.fnmatchcase(error_path, where + "/*") or \
        fnmatch.fnmatchcase(where, error_path.rstrip("/") + "/*")


def _errors(facts):
    errors = facts.get("errors") if isinstance(facts, dict) else None
    return [e for e in errors if isinstance(e, dict)] if isinstance(errors, list) else []


def resolve(key, facts=None, element=None):
    """``(names, error)`` for ``key``: the sources as shown (``[...]``, placeholders filled from
    ``element``) and the first recorded error about one of them as ``path: reason`` (``reason``
    alone when the path is the one source shown), or ``None``."""
    names, wheres = [], []
    for source in lookup(key):
        where, what = source if isinstance(source, tuple) else (source, None)
        where = _fill(where, element)
        # what in it, in parentheses ("<current_power_limit>", "MemTotal"), or "and ..." what else
        names.append(where if not what else "%s %s" % (where, what) if what.startswith("and ") else
                     "%s (%s)" % (where, what))
        wheres.append(where)
    for err in _errors(facts):
        for where in wheres:
            if _matches(err.get("path"), where) and err.get("reason"):
                reason = str(err["reason"])
                shown = reason if err["path"] == where and len(wheres) == 1 else "%s: %s" % (err["path"], reason)
                return names, shown
    return names, None


def _join(names):
    if len(names) <= 1:
        return "".join(names)
    return "%s or %s" % (", ".join(names[:-1]), names[-1])


def no_value(key, facts=None, element=None):
    """``no value from <source>[: <recorded reason>]`` for a null fact ``key``; ``None`` when no
    source is known for it."""
    names, error = resolve(key, facts, element)
    if not names:
        return None
    return "no value from %s%s" % (_join(names), ": %s" % error if error else "")


def read_from(key, element=None):
    """``read from <source>``: where a fact comes from, for a reason that does not say it; ``None``
    when no source is known."""
    names, _error = resolve(key, None, element)
    return "read from %s" % _join(names) if names else None


def names_source(text):
    """Whether ``text`` already names a file (absolute path) or a command the readers run."""
    return isinstance(text, str) and bool(_NAMES_SOURCE_RE.search(text))
