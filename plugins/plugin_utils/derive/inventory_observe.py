# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The inventory of one facts document: CPU, memory, GPU and NIC device lists with vendor/model
names, link speeds and performance states, and the GPU topology, in the shape of a profile's
``params.inventory`` (``docs/profiles.md`` "Learn a golden host").

Shared by learn mode (``learn.py`` records it for the golden host) and the comparison of every
audited host with it (``derive_inventory.py``). Pure functions: nothing here reads a file or raises
on odd facts; a value that cannot be read is ``None`` and :func:`fact_reason` says why.
"""

from __future__ import absolute_import, division, print_function

import re

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.nvidia import IDLE_PSTATE_MIN, TOPO_PCIE_LINKS, pstate_number
# vendor id -> name used in device models: the same names as the report labels
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.pci import VENDOR_NAMES
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.docpath import get as _get

__metaclass__ = type

#: percent of a golden node's MemTotal a host may lack before INV-002 fails (kernel reservations
#: such as crashkernel move MemTotal by well under 1 %; one missing DIMM of 16 is 6 %)
DEFAULT_MEMORY_TOLERANCE_PCT = 2

#: link types of ``nvidia-smi topo -m`` (facts/nvidia.py TOPO_PCIE_LINKS and NV#); anything else is not recorded
_NV_RE = re.compile(r"^NV\d+$")

_SPEED_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*GT/s")


def _int(value):
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _number(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


def _text(value):
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def speed_gts(value):
    """``"16GT/s"`` -> ``16.0``, ``"2.5GT/s"`` -> ``2.5``; ``None`` when not a PCIe speed."""
    if not isinstance(value, str):
        return None
    match = _SPEED_RE.match(value)
    return float(match.group(1)) if match else None


def performance_state(gpu):
    """The GPU's performance state as nvidia-smi reports it (``P0`` .. ``P15``), or ``None``."""
    if not isinstance(gpu, dict):
        return None
    for value in (gpu.get("performance_state"), _get(gpu, "power", "state")):
        if pstate_number(value) is not None:
            return value.strip()
    return None


def idle_state(gpu):
    """Why a GPU counts as idle (its link speed then says nothing), or ``None``: a performance
    state of P8 or higher (lower power), or nvidia-smi's ``gpu_idle`` clocks event reason."""
    state = performance_state(gpu)
    if state is not None and pstate_number(state) >= IDLE_PSTATE_MIN:
        return state
    reasons = _get(gpu, "clocks_event_reasons", "active")
    if isinstance(reasons, list) and "gpu_idle" in reasons:
        return state or "gpu_idle"
    return None


def device_model(device):
    """``Mellanox 0x1021`` from a PCI device's vendor and device ids."""
    vendor = _text(device.get("vendor_id"))
    ident = _text(device.get("device_id"))
    if vendor is None and ident is None:
        return None
    name = VENDOR_NAMES.get(vendor.lower(), vendor) if vendor else "vendor ?"
    return "%s %s" % (name, ident or "device ?")


def _smi_gpus(facts):
    """nvidia-smi GPUs by normalised bus id."""
    out = {}
    for gpu in _get(facts, "nvidia", "gpus") or []:
        if isinstance(gpu, dict) and isinstance(gpu.get("bus_id"), str):
            out[gpu["bus_id"].lower()] = gpu
    return out


def _numa_node(device, gpu):
    node = _int(device.get("numa_node")) if isinstance(device, dict) else None
    if node is not None and node >= 0:
        return node
    affinity = _get(gpu, "topology", "numa_affinity")
    if isinstance(affinity, str) and affinity.strip().isdigit():
        return int(affinity.strip())
    return node


def _pcie_fields(device):
    pcie = device.get("pcie") if isinstance(device.get("pcie"), dict) else {}
    return {
        "link_width": _int(pcie.get("link_width")),
        "link_speed": _text(pcie.get("link_speed")),
        "max_read_request": _int(pcie.get("max_read_request")),
        "max_payload": _int(pcie.get("max_payload")),
    }


def _pci_devices(facts):
    devices = _get(facts, "pci", "devices")
    if not isinstance(devices, list):
        return None
    return [d for d in devices if isinstance(d, dict) and isinstance(d.get("address"), str)]


def _rdma_by_address(facts):
    """RDMA devices of ``health.rdma`` by PCI address (the NIC function each belongs to)."""
    out = {}
    for dev in _get(facts, "health", "rdma", "devices") or []:
        if isinstance(dev, dict) and isinstance(dev.get("pci_address"), str):
            out.setdefault(dev["pci_address"].lower(), dev)
    return out


def observe_devices(facts):
    """``(gpus, nics)``: the GPUs and NICs of ``pci.devices`` in the inventory shape, sorted by
    address; ``(None, None)`` without a readable device list."""
    devices = _pci_devices(facts)
    if devices is None:
        return None, None
    smi = _smi_gpus(facts)
    rdma = _rdma_by_address(facts)
    gpus, nics = [], []
    for device in sorted(devices, key=lambda d: d["address"]):
        kind = device.get("kind")
        if kind not in ("gpu", "nic"):
            continue
        address = device["address"].lower()
        gpu = smi.get(address)
        item = {"address": address, "model": device_model(device),
                "numa_node": _numa_node(device, gpu)}
        item.update(_pcie_fields(device))
        if kind == "gpu":
            item["name"] = _text(gpu.get("name")) if gpu else None
            item["power_limit_w"] = _number(_get(gpu, "power", "limit_w"))
            item["performance_state"] = performance_state(gpu)
            item["vbios"] = _text(gpu.get("vbios_version")) if gpu else None
            gpus.append(item)
        else:
            hca = rdma.get(address) or {}
            item["firmware"] = _text(hca.get("fw_ver"))
            item["board_id"] = _text(hca.get("board_id"))
            nics.append(item)
    return gpus, nics


def topology_labels(facts):
    """``{column: identifier}`` of ``nvidia-smi topo -m``: ``GPUn`` -> the bus id of nvidia-smi's
    GPU n (the order of ``nvidia-smi -q``), ``NICn`` -> its RDMA device name (``mlx5_0``); an older
    driver's RDMA column names itself. ``(None, reason)`` when the columns cannot be matched."""
    topo = _get(facts, "nvidia", "topology")
    if not isinstance(topo, dict) or not isinstance(topo.get("devices"), list):
        reason = _get(facts, "nvidia", "smi", "error")
        for error in facts.get("errors") or [] if not reason and isinstance(facts, dict) else []:
            if isinstance(error, dict) and "topo" in str(error.get("path")) and error.get("reason"):
                reason = "%s: %s" % (error["path"], error["reason"])
                break
        return None, "no topology: %s" % (reason or "nvidia-smi topo -m gave no matrix")
    gpus = [g for g in _get(facts, "nvidia", "gpus") or [] if isinstance(g, dict)]
    columns = [c for c in topo["devices"] if isinstance(c, str)]
    gpu_columns = [c for c in columns if re.match(r"^GPU\d+$", c)]
    if len(gpu_columns) != len(gpus):
        return None, ("nvidia-smi topo -m lists %d GPUs and nvidia-smi -q %d: their GPUn labels cannot be "
                      "matched to PCI addresses" % (len(gpu_columns), len(gpus)))
    by_index = dict((g.get("index"), g) for g in gpus if isinstance(g.get("index"), int))
    names = topo.get("nic_names") if isinstance(topo.get("nic_names"), dict) else {}
    labels = {}
    for column in columns:
        if column in gpu_columns:
            bus = by_index.get(int(column[3:]), {}).get("bus_id")
            if not isinstance(bus, str):
                return None, "nvidia-smi -q gives no bus id for %s of topo -m" % column
            labels[column] = bus.lower()
        elif re.match(r"^NIC\d+$", column):
            labels[column] = str(names.get(column) or column)
        else:
            labels[column] = column
    return labels, None


def observe_topology(facts):
    """``{"links": [{"a", "b", "link"}], "reason"}``: the link type of every pair of ``topo -m``
    devices, named by PCI address (GPUs) or RDMA name (NICs), each pair once (``a`` < ``b``)."""
    labels, reason = topology_labels(facts)
    if labels is None:
        return {"links": None, "reason": reason}
    matrix = _get(facts, "nvidia", "topology", "matrix")
    if not isinstance(matrix, dict):
        return {"links": None, "reason": "no topology: nvidia-smi topo -m matrix missing"}
    pairs = {}
    for row, cells in matrix.items():
        if row not in labels or not isinstance(cells, dict):
            continue
        for column, link in cells.items():
            if column not in labels or column == row or not isinstance(link, str):
                continue
            if link not in TOPO_PCIE_LINKS and not _NV_RE.match(link):
                continue
            a, b = sorted((labels[row], labels[column]))
            if a != b:
                pairs.setdefault((a, b), link)
    links = [{"a": a, "b": b, "link": pairs[(a, b)]} for a, b in sorted(pairs)]
    return {"links": links, "reason": None}


def observe(facts):
    """The inventory shape of one host's facts (values ``None`` where unknown)."""
    facts = facts if isinstance(facts, dict) else {}
    cpu = _get(facts, "cpu") if isinstance(_get(facts, "cpu"), dict) else {}
    smt = _get(cpu, "smt", "active")
    nodes = []
    for node in _get(facts, "numa", "nodes") or []:
        if isinstance(node, dict) and _int(node.get("id")) is not None:
            nodes.append({"node": node["id"], "mem_total_kb": _int(node.get("mem_total_kb"))})
    gpus, nics = observe_devices(facts)
    nvidia = _get(facts, "nvidia") if isinstance(_get(facts, "nvidia"), dict) else {}
    driver = _text(nvidia.get("driver_version")) or _text(_get(nvidia, "module", "version"))
    return {
        "cpu": {
            "vendor": _text(cpu.get("vendor")),
            "model_name": _text(cpu.get("model_name")),
            "sockets": _int(cpu.get("sockets")),
            "cores": _int(cpu.get("cores")),
            "threads": _int(cpu.get("threads")),
            "smt": smt if isinstance(smt, bool) else None,
        },
        "memory": {"nodes": sorted(nodes, key=lambda n: n["node"]) if _get(facts, "numa", "nodes") is not None
                   else None},
        "gpus": gpus,
        "nics": nics,
        "topology": observe_topology(facts),
        "versions": {
            "kernel": _text(_get(facts, "kernel", "release")),
            "driver": driver,
            "cuda": _text(nvidia.get("cuda_version")),
            # only NVSwitch hosts run Fabric Manager: null elsewhere, and then neither learned nor judged
            "fabric_manager": _text(_get(facts, "health", "fabric_manager", "version")),
        },
    }


#: where each inventory value comes from (docs/facts.md): what an unknown value names
SOURCES = {
    "cpu": ("cpu", "/proc/cpuinfo"),
    "cpu.smt": ("cpu", "/sys/devices/system/cpu/smt/active"),
    "numa": ("numa", "/sys/devices/system/node"),
    "pci": ("pci", "/sys/bus/pci/devices"),
    "kernel": ("kernel", "/proc/sys/kernel/osrelease"),
    "nvidia": ("nvidia", "nvidia-smi"),
}


def fact_reason(facts, source, path=None):
    """Why a value of ``source`` (a key of :data:`SOURCES`) is missing, naming the file or command:
    not gathered, the first recorded error about ``path`` (default: the source's own path), or
    ``<path>: not reported``."""
    subsystem, default_path = SOURCES[source]
    path = path or default_path
    if not isinstance(facts, dict) or subsystem not in facts:
        return "the %s facts were not gathered (host_facts option gather)" % subsystem
    if subsystem == "nvidia":
        smi_error = _get(facts, "nvidia", "smi", "error")
        if smi_error:
            return "nvidia-smi -q -x: %s" % smi_error
    matches = []
    for error in facts.get("errors") or []:
        if isinstance(error, dict) and error.get("subsystem") == subsystem and error.get("reason"):
            where = str(error.get("path") or "")
            if where and (where.startswith(path) or path.startswith(where)):
                matches.append("%s: %s" % (where, error["reason"]))
    if matches:
        return matches[0]
    if facts.get(subsystem) is None:
        return "gathering %s failed" % subsystem
    return "%s: not reported" % path
