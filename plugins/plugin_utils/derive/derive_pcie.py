# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``derived.pcie``: the PCI devices with labels, links of GPUs and data NICs (speed, width,
performance state), peer paths between them (ACS bridges, redirects, MaxPayload, AER), MaxReadReq and
its next-boot setting. Part of :func:`derive.derive`.
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.kernel import cmdline_value
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.nvidia import IDLE_PSTATE_MIN, pstate_number
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.pci import VENDOR_NAMES, peer_bridges
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_common import _int, _unit_state
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.docpath import get as _get

__metaclass__ = type


def _devices(facts):
    devices = _get(facts, "pci", "devices")
    if not isinstance(devices, list):
        return None
    return [d for d in devices if isinstance(d, dict) and isinstance(d.get("address"), str)]


def _gpu_names(facts):
    names = {}
    for gpu in _get(facts, "nvidia", "gpus") or []:
        if isinstance(gpu, dict) and isinstance(gpu.get("bus_id"), str) and gpu.get("name"):
            names[gpu["bus_id"].lower()] = str(gpu["name"])
    return names


def _label(device, gpu_names):
    address = device.get("address")
    kind = device.get("kind")
    if kind == "gpu" and address in gpu_names:
        return gpu_names[address]
    vendor_id = device.get("vendor_id")
    vendor = VENDOR_NAMES.get(str(vendor_id).lower(), vendor_id) if vendor_id else "vendor ?"
    ident = "%s %s" % (vendor, device.get("device_id") or "device ?")
    port = _get(device, "pcie", "port_type")
    if kind == "bridge":
        return "%s bridge%s" % (ident, " (%s)" % port.replace("_", " ") if port else "")
    return "%s %s" % (ident, {"gpu": "GPU", "nic": "NIC", "nvme": "NVMe"}.get(kind, "device"))


#: why the PCIe register rules do not apply to a device without a PCI Express capability
NO_PCIE_CAPABILITY = ("no PCI Express capability, so no MaxReadReq, MaxPayload or link register to judge "
                      "(a conventional PCI or paravirtual device)")


def pcie_capability(device):
    """True when the device has a PCI Express capability, False when its configuration space was read
    (at least the 64-byte header, without a read error) and its capability list holds none (conventional
    PCI, a virtio device on a PCI bus), None when that is not known."""
    if isinstance(device.get("pcie"), dict):
        return True
    config = device.get("config_bytes")
    if "pcie" in device and device.get("pcie") is None and not device.get("error") \
            and isinstance(config, int) and not isinstance(config, bool) and config >= 64:
        return False
    return None


def _with_label(device, gpu_names):
    item = dict(device)
    item["label"] = _label(device, gpu_names)
    item["pcie_capability"] = pcie_capability(device)
    # a subject element's not_applicable reason makes every rule over it not_applicable (evaluation.py)
    item["not_applicable"] = NO_PCIE_CAPABILITY if item["pcie_capability"] is False else None
    return item


def _is_data_nic(device, min_width):
    if device.get("kind") != "nic":
        return False
    width = _get(device, "pcie", "link_cap_width")
    # a NIC whose width cannot be read stays in, so its unknowns are reported
    return width is None or not isinstance(min_width, int) or width >= min_width


def _redirects(device):
    if device.get("error") and device.get("acs") is None:
        return None
    ctl = _get(device, "acs", "ctl")
    if device.get("acs") is None:
        return []
    if not isinstance(ctl, dict):
        return None
    return [bit for bit in ("request_redirect", "completion_redirect") if ctl.get(bit)]


def gpu_link_states(facts):
    """Per GPU bus id (lower case): ``{"performance_state", "idle_reason"}`` (the state from
    ``performance_state``, else ``power.state``). ``idle_reason`` says why
    the GPU's current link speed says nothing (``GPU idle (P8)``): a performance state of P8 or
    lower power, or nvidia-smi's ``gpu_idle`` clocks event reason; ``None`` when it is busy or its
    state is not known (then the speed is judged as for any device)."""
    states = {}
    for gpu in _get(facts, "nvidia", "gpus") or []:
        if not isinstance(gpu, dict) or not isinstance(gpu.get("bus_id"), str):
            continue
        # <performance_state>, else the same state in <gpu_power_readings>/<power_state> (power.state)
        pstate = next((v for v in (gpu.get("performance_state"), _get(gpu, "power", "state"))
                       if pstate_number(v) is not None), None)
        reasons = _get(gpu, "clocks_event_reasons", "active")
        why = None
        if pstate is not None and pstate_number(pstate) >= IDLE_PSTATE_MIN:
            why = "GPU idle (%s)" % pstate
        elif isinstance(reasons, list) and "gpu_idle" in reasons:
            why = "GPU idle (%sclocks event reason gpu_idle)" % ("%s, " % pstate if pstate else "")
        states[gpu["bus_id"].lower()] = {"performance_state": pstate, "idle_reason": why}
    return states


def _link_speed_subjects(peers):
    """PCI-005's subjects: the peers, an idle GPU not judged (its link speed drops to save power)."""
    subjects = []
    for dev in peers:
        item = dict(dev)
        if not item.get("not_applicable") and dev.get("idle_reason"):
            item["not_applicable"] = "not judged: %s" % dev["idle_reason"]
        state = dev.get("performance_state")
        item["speed_label"] = "%s, %s" % (dev["label"], state) if state and not item["not_applicable"] else dev["label"]
        subjects.append(item)
    return subjects


def _earlier_max_read_request(history, address, running):
    """``(evidence, checked)`` for PCI-008 from ``facts["history"]`` (the audits earlier in this boot,
    added by baseline_evaluate from the audit history): ``evidence`` is the text of a MaxReadReq
    seen different from ``running`` in this boot (``None`` when none); ``checked`` says what was
    looked at when there is none."""
    if not isinstance(history, dict):
        return None, "no audit history to compare with (gpuhost_history_dir is not set)"
    if history.get("reason"):
        return None, "audit history not usable: %s" % history["reason"]
    audits = _int(history.get("audits")) or 0
    if not audits:
        return None, "no earlier audit of this boot in the audit history"
    values = _get(history, "earlier", "max_read_request", address)
    values = [v for v in values if isinstance(v, dict) and _int(v.get("value")) is not None] \
        if isinstance(values, list) else []
    differing = [v for v in values if _int(v["value"]) != running]
    if differing:
        return "was %d B at the audit of %s earlier in this boot" % (_int(differing[-1]["value"]), differing[-1].get("time")), None
    if not values:
        return None, "the %d earlier audit%s of this boot did not record its MaxReadReq" % (audits, "" if audits == 1 else "s")
    return None, "the audit history shows %d B at %s of this boot (since %s)" % (
        running, "the one earlier audit" if audits == 1 else "all %d earlier audits" % audits, history.get("first"))


def _pcie_boot(dev, boot, want, facts=None):
    """``boot_max_read_request``, ``boot_problems``, ``boot_reason`` and ``boot_note`` of one GPU or
    NIC: whether its MaxReadReq holds after a reboot, failing only on evidence that it does not.

    Evidence is a boot mechanism that sets another value (the pcie_tune boot script with a smaller
    entry; pci=pcie_bus_perf on the configured command line, which caps it at MaxPayload), the
    pcie_tune script holding an entry for the device while its unit does not run it at boot (pcie_tune
    set the value at runtime, its boot half is broken), or a value seen different at an earlier audit
    of the same boot (``facts["history"]``) while nothing sets it at boot. Without evidence (a value the firmware programs at every boot) it passes and
    ``boot_note`` names what was checked."""
    result = {"boot_max_read_request": None, "boot_problems": None, "boot_reason": None, "boot_note": None}
    if not isinstance(boot, dict):
        result["boot_reason"] = "persistence facts not gathered (host_facts gather: persistence)"
        return result
    devices = boot.get("devices") if isinstance(boot.get("devices"), dict) else {}
    entry = devices.get(dev.get("address"))
    value = _int(entry.get("max_read_request")) if isinstance(entry, dict) else None
    result["boot_max_read_request"] = value
    if _int(want) is None:
        result["boot_reason"] = "parameter max_read_request_bytes_%s is not set" % dev.get("kind")
        return result
    script = _get(boot, "script", "path") or "the pcie_tune boot script"
    running = _int(_get(dev, "pcie", "max_read_request"))
    lost = "; the running %d B would be lost at reboot" % running if running is not None and running >= want else ""
    state = _unit_state(boot, "gpuhost-pcie.service")
    if value is not None and value < want:
        result["boot_problems"] = ["the boot script %s sets MaxReadReq %d B, below %d B%s" % (script, value, want, lost)]
        return result
    if value is not None:
        # set again at every boot and when the device comes back; or pcie_tune set it at runtime (its
        # script has the entry) and its boot half is broken: evidence that the running value goes at reboot
        result["boot_problems"] = [] if state is None else [
            "%s sets MaxReadReq %d B but %s, so it does not run at boot%s" % (script, value, state, lost)]
        return result
    if not _get(boot, "script", "present"):
        mechanism = "%s is not installed" % script
    else:
        mechanism = "no entry for it in %s" % script
    configured = _get(facts, "kernel", "configured_cmdline", "params")
    pci = cmdline_value(configured, "pci") if isinstance(configured, dict) else None
    payload = _int(_get(dev, "pcie", "max_payload"))
    if isinstance(pci, str) and "pcie_bus_perf" in pci.split(",") and payload is not None and payload < want:
        result["boot_problems"] = [
            "pci=pcie_bus_perf on the configured kernel command line sets MaxReadReq to at most MaxPayload "
            "(%d B) at boot, below %d B, and nothing raises it (%s)%s" % (payload, want, mechanism, lost)]
        return result
    if running is None:
        result["boot_reason"] = "running MaxReadReq unknown (%s) and nothing sets it at boot (%s)" % (
            dev.get("error") or "no PCI Express capability data", mechanism)
        return result
    evidence, checked = _earlier_max_read_request(_get(facts, "history"), dev.get("address"), running)
    if evidence and running >= want:
        result["boot_problems"] = ["MaxReadReq %s and is %d B now: it was changed at runtime and nothing sets it "
                                   "at boot (%s), so the running %d B would be lost at reboot"
                                   % (evidence, running, mechanism, running)]
        return result
    result["boot_problems"] = []
    if evidence:
        result["boot_note"] = ("MaxReadReq %s and is %d B now, below %d B (the MaxReadReq rule fails that), so a "
                               "reboot loses nothing wanted; %s" % (evidence, running, want, mechanism))
    elif running < want:
        result["boot_note"] = ("nothing wanted to lose at reboot: the running %d B is below %d B (the MaxReadReq rule "
                               "fails that) and nothing sets it at boot (%s)" % (running, want, mechanism))
    else:
        result["boot_note"] = ("no evidence the running %d B is lost at reboot: %s, no pci=pcie_bus_perf on the "
                               "configured kernel command line, %s; a value the firmware sets at every boot passes"
                               % (running, mechanism, checked))
    return result


def _pcie(facts, params):
    devices = _devices(facts)
    if devices is None:
        return {"gpus": None, "nics": None, "peer_devices": None, "link_speed": None, "acs_bridges": None,
                "mps_paths": None, "aer": None}
    names = _gpu_names(facts)
    by_addr = dict((d["address"], d) for d in devices)
    gpus = [_with_label(d, names) for d in devices if d.get("kind") == "gpu"]
    link_states = gpu_link_states(facts)
    for gpu in gpus:
        state = link_states.get(gpu["address"].lower()) or {}
        gpu["performance_state"] = state.get("performance_state")
        gpu["idle_reason"] = state.get("idle_reason")
        gpu["idle"] = gpu["idle_reason"] is not None
    nics = [_with_label(d, names) for d in devices if _is_data_nic(d, params.get("nic_min_link_width"))]
    for nic in nics:
        nic.update(performance_state=None, idle_reason=None, idle=False)
    peers = gpus + nics
    boot = _get(facts, "persistence", "pcie")
    for dev in peers:
        dev.update(_pcie_boot(dev, boot, params.get("max_read_request_bytes_%s" % dev.get("kind")), facts))

    # ACS: bridges traversed between every GPU pair and every GPU-NIC pair (facts/pci.py)
    bridges, unresolved = peer_bridges(gpus, nics, by_addr)
    acs = []
    for addr in sorted(bridges):
        bridge = by_addr.get(addr)
        behind = sorted(bridges[addr])
        item = {
            "address": addr,
            "label": _label(bridge, names) if bridge else "bridge not in pci.devices",
            "port_type": _get(bridge, "pcie", "port_type") if bridge else None,
            "redirects": _redirects(bridge) if bridge else None,
            "peers": behind,
            "peers_label": ", ".join("%s %s" % (by_addr[p].get("kind", "device").upper(), p) for p in behind),
            "reason": (bridge.get("error") if bridge else "%s is on a peer path but missing from pci.devices" % addr),
        }
        acs.append(item)
    for addr in unresolved:
        acs.append({"address": addr, "label": _label(by_addr[addr], names), "port_type": None, "redirects": None,
                    "peers": [], "peers_label": "",
                    "reason": "upstream path of %s unknown (sysfs device link not resolved)" % addr})

    # MaxPayload along each peer's path from its root port
    mps = []
    for dev in peers:
        chain = dev.get("upstream")
        item = {"address": dev["address"], "label": dev["label"], "path": None, "mismatches": None, "reason": None,
                "not_applicable": dev["not_applicable"]}
        if not isinstance(chain, list):
            item["reason"] = "upstream path unknown (sysfs device link not resolved)"
            mps.append(item)
            continue
        path = []
        for addr in chain + [dev["address"]]:
            node = by_addr.get(addr)
            value = _get(node, "pcie", "max_payload") if node else None
            if value is None:
                why = (node or {}).get("error") or "no PCI Express capability data"
                item["reason"] = "MaxPayload of %s unknown: %s" % (addr, why)
                path = None
                break
            path.append({"address": addr, "max_payload": value})
        if path is not None:
            item["path"] = path
            values = set(p["max_payload"] for p in path)
            item["mismatches"] = [] if len(values) <= 1 else \
                ["%s %s B" % (p["address"], p["max_payload"]) for p in path]
        mps.append(item)

    # AER on peers and the bridges above them
    interest = []
    for dev in peers:
        for addr in (dev.get("upstream") or []) + [dev["address"]]:
            if addr not in interest and addr in by_addr:
                interest.append(addr)
    aer = []
    for addr in sorted(interest):
        dev = by_addr[addr]
        info = dev.get("aer")
        if info is None and not dev.get("error"):
            continue  # no AER reporting on this device: nothing to count
        item = {"address": addr, "label": _label(dev, names), "errors": None, "reason": dev.get("error")}
        counters = _get(info, "counters")
        if isinstance(counters, dict):
            errors = []
            complete = True
            for group in ("fatal", "nonfatal"):
                values = counters.get(group)
                if not isinstance(values, dict) or not values:
                    complete = False
                    continue
                for name in sorted(values):
                    count = _int(values[name])
                    if count:
                        errors.append("%s %s=%d" % (group, name, count))
            if errors or complete:
                item["errors"] = errors
            else:
                item["reason"] = "AER counter files aer_dev_fatal/aer_dev_nonfatal missing"
        aer.append(item)
    return {"gpus": gpus, "nics": nics, "peer_devices": peers, "link_speed": _link_speed_subjects(peers),
            "acs_bridges": acs, "mps_paths": mps, "aer": aer}
