# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Learn mode: a golden host's facts become the expected inventory of a site profile.

Controller side only (``baseline_learn`` action plugin, ``playbooks/learn.yml``). Pure functions:
:func:`learn_inventory` records for the golden host what ``inventory_observe.observe`` reads from
one facts document (``docs/facts.md``) in the inventory shape (``params.inventory`` of a profile,
``docs/profiles.md`` "Learn a golden host"), which ``derive_inventory.py`` computes again for every
audited host to compare; :func:`build_profile` and :func:`render_profile` make the site profile.
Nothing here reads a file or raises on odd facts: a value that cannot be read is ``None`` and
:func:`learn_inventory` lists why in ``unknown``.
"""

from __future__ import absolute_import, division, print_function

import re
from statistics import median

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.docpath import get as _get
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_validation import measure_runs
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.inventory_observe import (
    DEFAULT_MEMORY_TOLERANCE_PCT, _number, _pci_devices, _smi_gpus, _text, fact_reason, idle_state, observe, speed_gts,
)

__metaclass__ = type

_NAME_BAD_RE = re.compile(r"[^a-z0-9-]+")
#: how far below the golden host's median figure a learned workload floor lies (above it for a lower-is-better
#: workload), in percent: runs on identical hosts differ by a few percent
DEFAULT_WORKLOAD_MARGIN_PCT = 10.0


def _unknowns(facts, inventory):
    """One line per value the golden host did not give, naming the fact and why."""
    out = []
    for key, value in sorted(inventory["cpu"].items()):
        if value is None:
            out.append("cpu.%s: %s" % (key, fact_reason(facts, "cpu.smt" if key == "smt" else "cpu")))
    nodes = inventory["memory"]["nodes"]
    if nodes is None:
        out.append("memory per NUMA node: %s" % fact_reason(facts, "numa"))
    else:
        for node in nodes:
            if node["mem_total_kb"] is None:
                out.append("memory of node%d: %s" % (node["node"], fact_reason(
                    facts, "numa", "/sys/devices/system/node/node%d/meminfo" % node["node"])))
    if inventory["gpus"] is None:
        out.append("GPUs and NICs: %s" % fact_reason(facts, "pci"))
    smi = _smi_gpus(facts)
    for kind in ("gpus", "nics"):
        for device in inventory[kind] or []:
            address = device["address"]
            missing = sorted(k for k, v in device.items() if v is None and k in _PCI_FIELDS)
            if missing:
                out.append("%s %s: %s unknown (%s)" % (kind[:-1].upper(), address, ", ".join(missing),
                                                       _device_error(facts, address)))
            missing = sorted(k for k, v in device.items() if v is None and k in _SMI_FIELDS)
            if missing:
                why = "nvidia-smi -q -x does not list it" if address not in smi else "nvidia-smi -q -x reports none"
                smi_error = _get(facts, "nvidia", "smi", "error")
                out.append("GPU %s: %s unknown (%s%s)" % (address, ", ".join(missing), why,
                                                          ": %s" % smi_error if smi_error else ""))
    if inventory["topology"]["links"] is None:
        out.append("GPU/NIC topology: %s" % inventory["topology"]["reason"])
    switches = _get(facts, "health", "fabric_manager", "nvswitches")
    for key, value in sorted(inventory["versions"].items()):
        if key == "fabric_manager" and value is None and not switches:
            continue  # no NVSwitch: no Fabric Manager, nothing unknown
        if key == "fabric_manager" and value is None:
            out.append("fabric_manager version: %s" % (_get(facts, "health", "fabric_manager", "version_error")
                                                       or "nv-fabricmanager --version: not reported"))
        elif value is None:
            out.append("%s version: %s" % (key, fact_reason(facts, "kernel" if key == "kernel" else "nvidia")))
    return out


#: device values read from sysfs and the config space, and from nvidia-smi
_PCI_FIELDS = ("model", "numa_node", "link_width", "link_speed", "max_read_request", "max_payload")

_SMI_FIELDS = ("name", "power_limit_w", "vbios")


def _device_error(facts, address):
    for device in _pci_devices(facts) or []:
        if device["address"].lower() == address and device.get("error"):
            return str(device["error"])
    return fact_reason(facts, "pci", "/sys/bus/pci/devices/%s" % address)


def learn_inventory(facts, tolerance_pct=DEFAULT_MEMORY_TOLERANCE_PCT, source=None):
    """The expected inventory learned from a golden host's ``facts`` (``params.inventory`` of a site
    profile): ``observe(facts)`` plus where it was learned, the memory tolerance, and ``unknown``,
    one line per value that could not be read (a profile with unknowns still judges the rest)."""
    facts = facts if isinstance(facts, dict) else {}
    seen = observe(facts)
    tolerance = _number(tolerance_pct)
    if tolerance is None or not 0 <= tolerance <= 100:
        tolerance = DEFAULT_MEMORY_TOLERANCE_PCT
    inventory = {
        "learned_from": _text(facts.get("hostname")),
        "source": source if isinstance(source, str) else _text(facts.get("root")),
        "cpu": seen["cpu"],
        "memory": {"tolerance_pct": tolerance, "nodes": seen["memory"]["nodes"]},
        "gpus": seen["gpus"],
        "nics": seen["nics"],
        "topology": {"links": seen["topology"]["links"]},
        "versions": seen["versions"],
    }
    unknown = _unknowns(facts, dict(seen, memory=inventory["memory"]))
    inventory["unknown"] = unknown + _forget_idle_speeds(facts, inventory["gpus"])
    return inventory


def _forget_idle_speeds(facts, gpus):
    """An idle GPU (P8 and lower power) lowers its link speed: a speed below the device's capable one
    learned then says nothing, so it is not recorded (not judged) and a line in ``unknown`` says why.
    The performance state itself is not part of the inventory."""
    notes = []
    caps = dict((d["address"].lower(), speed_gts(_get(d, "pcie", "link_cap_speed"))) for d in _pci_devices(facts) or [])
    smi = _smi_gpus(facts)
    for gpu in gpus or []:
        gpu.pop("performance_state", None)
        idle = idle_state(smi.get(gpu["address"]))
        speed, cap = speed_gts(gpu.get("link_speed")), caps.get(gpu["address"])
        if idle is not None and speed is not None and (cap is None or speed < cap):
            notes.append("GPU %s: link speed %s not learned: GPU idle (%s), below its capable %s" % (
                gpu["address"], gpu["link_speed"], idle, "speed (unknown)" if cap is None else "%gGT/s" % cap))
            gpu["link_speed"] = None
    return notes


def learn_workload_floors(result, margin_pct=DEFAULT_WORKLOAD_MARGIN_PCT):
    """The floors of the site's workloads learned from the golden host's runs of them: ``result`` is the registered
    ``host_measure`` result (``runs`` when repeated). Returns ``(floors, learned, notes)``: ``floors`` maps each
    workload with a figure to the median of its runs less ``margin_pct`` percent (plus, for a lower-is-better one),
    rounded to 3 decimals (the profile parameter ``workload_floors``); ``learned`` says per workload the median,
    the runs, the spread and the unit; ``notes`` one line per workload without a figure (or why nothing ran)."""
    margin = _number(margin_pct)
    margin = DEFAULT_WORKLOAD_MARGIN_PCT if margin is None or not 0 <= margin < 100 else margin
    runs, why = measure_runs(result)
    if why:
        return {}, {}, ["no workload floor learned: %s" % why]
    figures, lower, units, reasons, order = {}, {}, {}, {}, []
    for run in runs:
        for entry in run.get("workloads") or [] if isinstance(run.get("workloads"), list) else []:
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
                continue
            name = entry["name"]
            if name not in figures:
                figures[name], order = [], order + [name]
            lower[name] = entry.get("lower_is_better") is True
            units[name] = entry.get("unit") if isinstance(entry.get("unit"), str) else ""
            value = _number(entry.get("value")) if entry.get("status") == "ok" else None
            if value is None:
                reasons[name] = _text(entry.get("reason")) or "no figure"
            else:
                figures[name].append(value)
    floors, learned, notes = {}, {}, []
    for name in order:
        values = sorted(figures[name])
        if not values:
            notes.append("workload %s: no floor learned, no run gave a figure (%s)" % (name, reasons.get(name)))
            continue
        middle = median(values)
        factor = 1 + margin / 100.0 if lower[name] else 1 - margin / 100.0
        floors[name] = round(middle * factor, 3)
        learned[name] = {"median": round(middle, 3), "runs": len(values), "spread": round(values[-1] - values[0], 3),
                         "unit": units[name], "lower_is_better": lower[name], "margin_pct": margin}
        if len(values) < len(runs):
            notes.append("workload %s: %d of %d run(s) gave no figure (%s); the floor is the others' median" % (
                name, len(runs) - len(values), len(runs), reasons.get(name)))
    return floors, learned, notes


def profile_name(text):
    """A profile name (``^[a-z0-9][a-z0-9-]*$``) made of ``text``: lower case, other characters as
    dashes; ``None`` when nothing is left."""
    if not isinstance(text, str):
        return None
    name = _NAME_BAD_RE.sub("-", text.strip().lower()).strip("-")
    return name or None


def build_profile(inventory, extends, rule_ids, description=None, workload_floors=None):
    """The profile document: ``extends`` the bundled (or site) profile, adds the inventory rules
    ``rule_ids`` by id and holds the inventory as the parameter ``inventory`` (and the learned floors of the site's
    workloads as ``workload_floors``, when there are any)."""
    host = inventory.get("learned_from") or "the golden host"
    where = inventory.get("source")
    text = description or "Hosts that must look like %s%s (learned by playbooks/learn.yml): %s plus the " \
        "hardware inventory rules." % (host, " (%s)" % where if where and where != "/" else "", extends)
    profile = {"description": text, "extends": extends}
    if rule_ids:
        profile["rules"] = {"include": list(rule_ids)}
    profile["params"] = {"inventory": inventory}
    if workload_floors:
        profile["params"]["workload_floors"] = dict(workload_floors)
    return profile


def render_profile(profile, schema_path, yaml_module):
    """The YAML text of ``profile`` with the editor modeline naming ``schema_path``."""
    body = yaml_module.safe_dump(profile, default_flow_style=False, sort_keys=False, allow_unicode=False,
                                 width=110)
    return ("# yaml-language-server: $schema=%s\n"
            "# Written by gpuhost.baseline playbooks/learn.yml (baseline_learn); docs/profiles.md, \"Learn a golden host\".\n"
            "# Edit params.inventory to accept a difference for every host of this profile.\n%s"
            % (schema_path, body))
