# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``derived.inventory``: a host compared with the golden inventory of its profile.

The profile's parameter ``inventory`` (written by ``playbooks/learn.yml``, format in
``docs/profiles.md`` "Learn a golden host") holds what a known-good host looked like; the rules of
``rules/inventory.yml`` (INV-*) judge the lists built here. Pure function of (facts, params): no
I/O, never raises on odd facts or a hand-edited inventory. Every list element carries ``subject``,
``detail``, ``reason`` (why the observation is null) and ``not_applicable`` (why it is not judged);
without an inventory every list is empty and ``present`` is false (the rules are not applicable).
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.docpath import get as _get
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.inventory_observe import (
    DEFAULT_MEMORY_TOLERANCE_PCT, fact_reason, idle_state, observe, performance_state, speed_gts,
)

__metaclass__ = type

_SECTIONS = ("cpu", "memory", "gpus", "nics", "topology", "versions")
_CPU_FIELDS = (("model_name", "model"), ("vendor", "vendor"), ("sockets", "sockets"), ("cores", "cores"),
               ("threads", "threads"), ("smt", "SMT active"))
_VERSION_FIELDS = (("kernel", "kernel release"), ("driver", "NVIDIA driver"), ("cuda", "CUDA (driver API)"),
                   ("fabric_manager", "Fabric Manager"))
_LISTS = ("cpu", "memory", "gpus", "nics", "links", "speeds", "topology", "numa", "versions", "power", "firmware")
#: per device kind: (inventory key, what it is, where it is read) of the firmware INV-012 compares
_FIRMWARE = {"gpus": ("vbios", "VBIOS", "nvidia-smi -q -x <vbios_version>"),
             "nics": ("firmware", "firmware", "/sys/class/infiniband/<dev>/fw_ver")}


def _empty(present, reason=None, learned_from=None):
    out = dict((key, []) for key in _LISTS)
    out.update(present=present, reason=reason, learned_from=learned_from)
    return out


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _item(subject, detail=None, **values):
    item = {"subject": subject, "detail": detail, "reason": None, "not_applicable": None}
    item.update(values)
    return item


def _fmt(value):
    if isinstance(value, bool):
        return "on" if value else "off"
    return "unknown" if value is None else str(value)


# -- cpu, memory, versions -------------------------------------------------------------------

def _cpu(golden, seen, facts):
    if not isinstance(golden, dict):
        return [_item("cpu", observed=None, expected=None,
                      reason="params.inventory.cpu must be a mapping, got %r" % (golden,))]
    items = []
    for key, label in _CPU_FIELDS:
        if key not in golden:
            continue
        expected = golden[key]
        item = _item(label, observed=seen.get(key), expected=expected)
        if expected is None:
            item["not_applicable"] = "not judged: the golden host's CPU %s was unknown when it was learned" % label
        elif item["observed"] is None:
            item["reason"] = "CPU %s: %s" % (label, fact_reason(facts, "cpu.smt" if key == "smt" else "cpu"))
        items.append(item)
    return items


def _memory(golden, seen, facts):
    if not isinstance(golden, dict) or not isinstance(golden.get("nodes"), list):
        return [_item("memory", observed_kb=None, min_kb=None,
                      reason="params.inventory.memory.nodes must be a list of {node, mem_total_kb}")]
    tolerance = golden.get("tolerance_pct", DEFAULT_MEMORY_TOLERANCE_PCT)
    if not _is_number(tolerance) or not 0 <= tolerance <= 100:
        tolerance = DEFAULT_MEMORY_TOLERANCE_PCT
    now = dict((n["node"], n["mem_total_kb"]) for n in seen or [])
    items = []
    for node in golden["nodes"]:
        if not isinstance(node, dict) or not _is_int(node.get("node")):
            continue
        want = node.get("mem_total_kb")
        label = "node%d" % node["node"]
        if not _is_int(want):
            items.append(_item(label, observed_kb=None, min_kb=None, golden_kb=None,
                               not_applicable="not judged: the golden host's MemTotal of %s was unknown" % label))
            continue
        minimum = int(want * (100 - tolerance) / 100)
        item = _item(label, "golden %d kB, tolerance %s%%" % (want, _fmt(tolerance)), golden_kb=want,
                     min_kb=minimum, observed_kb=None)
        if seen is None:
            item["reason"] = "NUMA nodes: %s" % fact_reason(facts, "numa")
        elif node["node"] not in now:
            item["observed_kb"] = 0
            item["detail"] += "; the node is missing"
        elif now[node["node"]] is None:
            item["reason"] = "MemTotal of %s: %s" % (label, fact_reason(
                facts, "numa", "/sys/devices/system/node/%s/meminfo" % label))
        else:
            item["observed_kb"] = now[node["node"]]
        items.append(item)
    return items


def _versions(golden, seen, facts):
    if not isinstance(golden, dict):
        return [_item("versions", observed=None, expected=None,
                      reason="params.inventory.versions must be a mapping, got %r" % (golden,))]
    items = []
    for key, label in _VERSION_FIELDS:
        if key not in golden:
            continue
        expected = golden[key]
        if key == "fabric_manager" and expected is None and seen.get(key) is None:
            continue  # neither host runs Fabric Manager (no NVSwitch)
        item = _item(key, label, observed=seen.get(key), expected=None if expected is None else str(expected))
        if expected is None:
            item["not_applicable"] = "not judged: the golden host's %s version was unknown" % label
        elif item["observed"] is None:
            if key == "fabric_manager":
                why = _get(facts, "health", "fabric_manager", "version_error") or "nv-fabricmanager --version: not reported"
            else:
                why = fact_reason(facts, "kernel" if key == "kernel" else "nvidia")
            item["reason"] = "%s version: %s" % (label, why)
        items.append(item)
    return items


# -- devices ---------------------------------------------------------------------------------

def _golden_devices(golden, kind):
    """``(devices by address, reason)`` of ``params.inventory.<kind>``."""
    if not isinstance(golden, list):
        return None, "params.inventory.%s must be a list of devices, got %r" % (kind, golden)
    out = {}
    for device in golden:
        if isinstance(device, dict) and isinstance(device.get("address"), str):
            out[device["address"].lower()] = device
    return out, None


def _label(device, kind):
    name = device.get("name") if kind == "gpus" else None
    return name or device.get("model") or ("GPU" if kind == "gpus" else "NIC")


def _presence(golden, seen, kind, facts):
    """Per address of the golden host and of this host: what is missing, extra or another model."""
    noun = "GPU" if kind == "gpus" else "NIC"
    if seen is None:
        reason = "%ss on the PCI bus: %s" % (noun, fact_reason(facts, "pci"))
        return [_item(address, _label(dev, kind), problems=None, reason=reason)
                for address, dev in sorted(golden.items())]
    now = dict((d["address"], d) for d in seen)
    items = []
    for address in sorted(set(golden) | set(now)):
        want, have = golden.get(address), now.get(address)
        problems = []
        if have is None:
            problems.append("missing: the golden host has %s %s here; it is not on this host's PCI bus" % (
                noun, _label(want, kind)))
        elif want is None:
            problems.append("extra: %s %s is not on the golden host" % (noun, _label(have, kind)))
        else:
            if want.get("model") and have.get("model") and want["model"] != have["model"]:
                problems.append("model %s, golden host %s" % (have["model"], want["model"]))
            if kind == "gpus" and want.get("name") and have.get("name") and want["name"] != have["name"]:
                problems.append("name %s, golden host %s" % (have["name"], want["name"]))
        items.append(_item(address, _label(have or want, kind), problems=problems))
    return items


def _link_items(goldens, seen_by_addr, facts):
    """Width and settings (links), speed (speeds), NUMA node (numa) and power (power) of every
    golden GPU and NIC that is on this host."""
    gpus_now = dict((g["bus_id"].lower(), g) for g in (facts.get("nvidia") or {}).get("gpus") or []
                    if isinstance(g, dict) and isinstance(g.get("bus_id"), str)) \
        if isinstance(facts.get("nvidia"), dict) else {}
    errors = {}
    for device in (facts.get("pci") or {}).get("devices") or [] if isinstance(facts.get("pci"), dict) else []:
        if isinstance(device, dict) and isinstance(device.get("address"), str) and device.get("error"):
            errors[device["address"].lower()] = str(device["error"])
    links, speeds, numa, power = [], [], [], []
    for kind, golden in goldens:
        for address in sorted(golden):
            want, have = golden[address], seen_by_addr.get(address)
            if have is None:
                continue  # missing: INV-003/INV-004 say so
            label = _label(have, kind)
            why = errors.get(address) or "PCI Express registers of %s not read" % address
            item = _item(address, label, link_width=have.get("link_width"), golden_link_width=want.get("link_width"))
            item["settings_problems"] = _settings_problems(want, have)
            if item["link_width"] is None:
                item["reason"] = why
            if item["settings_problems"] is None:
                item["settings_reason"] = why
            if want.get("link_width") is None and want.get("max_read_request") is None \
                    and want.get("max_payload") is None:
                item["not_applicable"] = "not judged: the golden host's PCIe registers of %s were unknown" % address
            links.append(item)
            speeds.append(_speed_item(address, label, kind, want, have, gpus_now.get(address), why))
            numa_item = _item(address, label, numa_node=have.get("numa_node"), golden_numa_node=want.get("numa_node"))
            if want.get("numa_node") is None:
                numa_item["not_applicable"] = "not judged: the golden host's NUMA node of %s was unknown" % address
            elif numa_item["numa_node"] is None:
                numa_item["reason"] = "numa_node of %s: %s" % (address, fact_reason(
                    facts, "pci", "/sys/bus/pci/devices/%s/numa_node" % address))
            numa.append(numa_item)
            if kind == "gpus" and want.get("power_limit_w") is not None:
                power_item = _item(address, label, power_limit_w=have.get("power_limit_w"),
                                   golden_power_limit_w=want.get("power_limit_w"))
                if power_item["power_limit_w"] is None:
                    power_item["reason"] = "power limit of %s: %s" % (
                        address, "nvidia-smi does not list this GPU" if address not in gpus_now
                        else "nvidia-smi -q reports no power limit")
                power.append(power_item)
    return links, speeds, numa, power


def _settings_problems(want, have):
    """MaxReadReq and MaxPayload below the golden host's; ``None`` when this host's are unknown."""
    problems = []
    for key, label in (("max_read_request", "MaxReadReq"), ("max_payload", "MaxPayload")):
        golden = want.get(key)
        if not _is_int(golden):
            continue
        value = have.get(key)
        if value is None:
            return None
        if value < golden:
            problems.append("%s %d B, golden host %d B" % (label, value, golden))
    return problems


def _speed_item(address, label, kind, want, have, gpu, why):
    item = _item(address, label, link_speed_gts=speed_gts(have.get("link_speed")),
                 golden_link_speed_gts=speed_gts(want.get("link_speed")))
    if item["link_speed_gts"] is None:
        item["reason"] = why
    if kind == "gpus":
        idle = idle_state(gpu) if gpu is not None else None
        slower = item["link_speed_gts"] is not None and item["golden_link_speed_gts"] is not None \
            and item["link_speed_gts"] < item["golden_link_speed_gts"]
        if idle is not None:
            item["not_applicable"] = "not judged: GPU idle (%s)" % idle
        elif slower and performance_state(gpu) is None:
            # a GPU lowers its link speed when idle: without its performance state a slower link proves nothing
            item["link_speed_gts"] = None
            item["reason"] = "not judged: the GPU's performance state is unknown (%s), and an idle GPU lowers its " \
                "link speed" % ("nvidia-smi does not list it" if gpu is None else "nvidia-smi -q reports none")
    if item["golden_link_speed_gts"] is None and item["not_applicable"] is None:
        item["not_applicable"] = "not judged: the golden host's link speed of %s was not learned (unknown, or the GPU " \
            "was idle)" % address
    return item


def _firmware(goldens, seen_by_addr):
    """INV-012: the VBIOS of every golden GPU and the firmware of every golden NIC that is on this
    host, compared only on a device of the same model (and, for a NIC, the same board id when both are
    known: a firmware image is built for one board); another model is INV-003/INV-004's finding."""
    items = []
    for kind, golden in goldens:
        key, what, where = _FIRMWARE[kind]
        for address in sorted(golden):
            want, have = golden[address], seen_by_addr.get(address)
            if have is None or key not in want or (want.get(key) is None and have.get(key) is None):
                # missing (INV-003/INV-004), a golden host learned before firmware was recorded, or nothing to
                # compare on either host (a NIC without an RDMA device has no fw_ver)
                continue
            label = _label(have, kind)
            item = _item(address, "%s %s" % (label, what), observed=have.get(key), expected=want.get(key))
            other = [k for k in ("model", "board_id") if want.get(k) and have.get(k) and want[k] != have[k]]
            if other:
                item["not_applicable"] = "not judged: %s %s, golden host %s (another %s)" % (
                    other[0].replace("_", " "), have[other[0]], want[other[0]], "model" if other[0] == "model" else
                    "board")
            elif want.get(key) is None:
                item["not_applicable"] = "not judged: the golden host's %s of %s was unknown" % (what, address)
            elif item["observed"] is None:
                item["reason"] = "%s of %s: not read (%s)" % (what, address, where)
            items.append(item)
    return items


# -- topology --------------------------------------------------------------------------------

def _topology(golden, seen, present):
    if not isinstance(golden, dict) or not isinstance(golden.get("links"), list):
        if isinstance(golden, dict) and golden.get("links") is None:
            return []  # the golden host had no topo -m: nothing to compare
        return [_item("topology", link=None, golden_link=None,
                      reason="params.inventory.topology.links must be a list of {a, b, link}")]
    now = {}
    for link in seen.get("links") or []:
        now[(link["a"], link["b"])] = link["link"]
    items = []
    for link in golden["links"]:
        if not isinstance(link, dict) or not all(isinstance(link.get(k), str) for k in ("a", "b", "link")):
            continue
        a, b = sorted((link["a"].lower() if ":" in link["a"] else link["a"],
                       link["b"].lower() if ":" in link["b"] else link["b"]))
        if any(end not in present for end in (a, b) if ":" in end):
            continue  # a GPU of the pair is missing: INV-003 says so
        item = _item("%s ~ %s" % (a, b), None, link=now.get((a, b)), golden_link=link["link"])
        if seen.get("links") is None:
            item["reason"] = seen.get("reason")
        elif item["link"] is None:
            item["reason"] = "nvidia-smi topo -m shows no link between %s and %s" % (a, b)
        items.append(item)
    return items


# -- entry point -----------------------------------------------------------------------------

def derive_inventory(facts, params):
    """``derived.inventory`` (documented in docs/rules.md)."""
    facts = facts if isinstance(facts, dict) else {}
    golden = params.get("inventory") if isinstance(params, dict) else None
    if golden is None or golden == {}:
        return _empty(False)
    if not isinstance(golden, dict):
        out = _empty(True, "params.inventory must be a mapping, got %r" % (golden,))
        out["cpu"] = [_item("inventory", observed=None, expected=None, reason=out["reason"])]
        return out
    if not any(key in golden for key in _SECTIONS):
        return _empty(False, "params.inventory holds none of %s" % ", ".join(_SECTIONS))
    seen = observe(facts)
    out = _empty(True, learned_from=golden.get("learned_from"))
    if "cpu" in golden:
        out["cpu"] = _cpu(golden["cpu"], seen["cpu"], facts)
    if "memory" in golden:
        out["memory"] = _memory(golden["memory"], seen["memory"]["nodes"], facts)
    if "versions" in golden:
        out["versions"] = _versions(golden["versions"], seen["versions"], facts)
    goldens = []
    seen_by_addr = {}
    for kind in ("gpus", "nics"):
        if kind not in golden or golden[kind] is None:
            continue
        devices, reason = _golden_devices(golden[kind], kind)
        if devices is None:
            out[kind] = [_item(kind, problems=None, reason=reason)]
            continue
        out[kind] = _presence(devices, seen[kind], kind, facts)
        goldens.append((kind, devices))
        seen_by_addr.update((d["address"], d) for d in seen[kind] or [])
    out["links"], out["speeds"], out["numa"], out["power"] = _link_items(goldens, seen_by_addr, facts)
    out["firmware"] = _firmware(goldens, seen_by_addr)
    if "topology" in golden:
        present = set(seen_by_addr) if seen["gpus"] is not None else set()
        if seen["gpus"] is None:
            present = set(a for _unused, devices in goldens for a in devices)
        out["topology"] = _topology(golden["topology"], seen["topology"], present)
    return out
