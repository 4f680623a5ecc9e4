# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``derived.health``: the judgements of the health rules (rules/health.yml) over the facts.

:func:`derive_health` is called by ``derive.derive`` with the facts, the effective parameters and
the ``derived`` keys computed before it (``derived.nvidia.gpus``, ``derived.pcie.nics``). Pure:
no I/O, never raises on odd facts; what cannot be worked out is ``None`` with a ``*_reason``
saying why (the rules show it as the ``unknown`` message). Every key is documented in
docs/rules.md ("Derived keys").
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.kernel import compare_kernel_release
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.nvidia import TOPO_PCIE_LINKS
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.xid_catalogue import describe, describe_sxid
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.docpath import get as _get

__metaclass__ = type

#: distances at which NCCL uses a NIC for a GPU without crossing the CPU (NCCL_NET_GDR_LEVEL default)
NCCL_NEAR = ("PIX", "PXB")
#: the first Linux release whose RDMA stack imports GPU memory through DMA-BUF (no peer-memory module)
DMABUF_KERNEL = "5.12"


def _bus_key(value):
    return value.lower() if isinstance(value, str) and value else None


def _int(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    return None


def _list(value):
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _num(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value


def _fmt_speed(value):
    return ("%g" % value) if isinstance(value, (int, float)) else str(value)


# -- Xid ------------------------------------------------------------------------------------

def _grade(severity, action, past=False, detail=""):
    """The severity and action of an event text: ``[high]; action: reset the GPU``; for an event of the
    previous boot (``past``) ``[high in that boot]``: its severity is that boot's, and the action it asked
    for then (drain, reset, reboot) was overtaken by the reboot. ``detail`` goes inside the brackets."""
    if past:
        return "[%s in that boot%s]" % (severity, detail)
    return "[%s%s]; action: %s" % (severity, detail, action)


def _xid_text(code, entry, past=False):
    """``(class, text, severity)`` of one Xid code's events (``entry`` of ``kernel_log.by_gpu``)."""
    info = describe(code, entry.get("stated"))
    count = _int(entry.get("count")) or 0
    when = entry.get("first_s")
    text = "Xid %s x%d%s: %s %s" % (
        code, count, " (first %.0f s after boot)" % when if isinstance(when, (int, float)) else "",
        info["meaning"], _grade(info["severity"], info["action"], past))
    message = entry.get("message")
    if isinstance(message, str) and message:
        text += "; log: %s" % message[:160]
    return info["class"], text, info["severity"]


def _xids(kernel_log, address, past=False, severities=None):
    """``(hardware, other, reason)`` lists of one GPU's Xid events (``past``: of the previous boot, :func:`_grade`);
    ``severities`` (a dict), when given, gets ``hardware`` and ``other``: the severity of each event of the list."""
    if not isinstance(kernel_log, dict):
        return None, None, "the kernel log was not read (no NVIDIA driver or GPU seen when the facts were gathered)"
    if kernel_log.get("error") or not isinstance(kernel_log.get("by_gpu"), dict):
        return None, None, kernel_log.get("error") or "the kernel log holds no readable Xid summary"
    events = kernel_log["by_gpu"].get(address)
    lists = {"hardware": ([], []), "other": ([], [])}
    if isinstance(events, dict):
        for code in sorted(events, key=lambda c: int(c) if str(c).isdigit() else 1 << 30):
            if not isinstance(events[code], dict):
                continue
            klass, text, severity = _xid_text(code, events[code], past)
            texts, graded = lists["hardware" if klass == "hardware" else "other"]
            texts.append(text)
            graded.append(severity)
    hardware, other = lists["hardware"][0], lists["other"][0]
    if kernel_log.get("truncated"):
        note = "only the newest %s kernel messages of this boot were read" % kernel_log.get("lines")
        hardware = [h + " (%s)" % note for h in hardware]
        other = [o + " (%s)" % note for o in other]
    if severities is not None:
        severities.update(hardware=lists["hardware"][1], other=lists["other"][1])
    return hardware, other, None


#: GPU faults the driver logs without an Xid number: kind -> (what happened, severity, action)
FAULTS = {
    "fallen_off_bus": ("GPU has fallen off the bus (no longer answers on PCIe)", "critical",
                       "drain and reboot the node; check the slot, riser, power, cooling and the AER errors of its "
                       "PCIe path"),
    "init_failed": ("the driver failed to initialise the GPU (RmInitAdapter): it is on the bus but unusable", "critical",
                    "check the kernel log around the failure, the driver and firmware versions and the GPU's power; "
                    "reboot, then reseat or service the GPU if it repeats"),
    "reset_required": ("the driver marked the GPU for reset (NV_ERR_RESET_REQUIRED: its firmware stopped answering, "
                       "every further request to it fails)", "high",
                       "drain the GPU and reset it (nvidia-smi -r) or reboot the node; update the driver if it repeats"),
    "gsp_timeout": ("the GPU System Processor (GSP) firmware stopped answering the driver (RPC or heartbeat timeout)",
                    "high", "drain and reset the GPU or reboot the node; update the driver if it repeats"),
    "gsp_rpc_failed": ("a request of the driver to the GPU System Processor (GSP) failed (GspRm...)", "medium",
                       "look for a GSP timeout or Xid 119/120 around it; reset the GPU if requests keep failing"),
}


def _fault_texts(kinds, note, past=False, severities=None):
    """The texts of one GPU's faults without an Xid number; ``severities`` (a list), when given, gets each one's."""
    texts = []
    for kind in sorted(kinds):
        entry = kinds[kind]
        if not isinstance(entry, dict):
            continue
        meaning, severity, action = FAULTS.get(kind, (kind, "critical", "see the kernel log"))
        when = entry.get("first_s")
        text = "%s x%d%s %s" % (
            meaning, _int(entry.get("count")) or 0,
            " (first %.0f s after boot)" % when if isinstance(when, (int, float)) else "", _grade(severity, action, past))
        if isinstance(entry.get("message"), str) and entry["message"]:
            text += "; log: %s" % entry["message"][:160]
        texts.append(text + note)
        if severities is not None:
            severities.append(severity)
    return texts


def _faults(kernel_log, address, severities=None):
    """``(faults, reason)``: the texts of one GPU's faults without an Xid number (fallen off the
    bus, failed to initialise, GSP faults, reset required); ``address`` ``None`` for those of lines
    naming no GPU; ``severities`` (a list) gets each one's severity."""
    if not isinstance(kernel_log, dict):
        return None, "the kernel log was not read (no NVIDIA driver or GPU seen when the facts were gathered)"
    if kernel_log.get("error"):
        return None, kernel_log["error"]
    table = kernel_log.get("faults") if address else kernel_log.get("faults_no_address")
    if not isinstance(table, dict):
        return None, "the kernel log summary has no fault list (facts gathered by an older collection)"
    kinds = table.get(address or "no address")
    return _fault_texts(kinds if isinstance(kinds, dict) else {}, _truncated_note(kernel_log),
                        severities=severities), None


def _truncated_note(kernel_log):
    if kernel_log.get("truncated"):
        return " (only the newest %s kernel messages of this boot were read)" % kernel_log.get("lines")
    return ""


# -- NVSwitch SXid ------------------------------------------------------------------------------

def _sxid_texts(kernel_log, switch, past=False, severities=None):
    """``(fatal, nonfatal, minor)`` texts of one NVSwitch's SXid events (``switch`` its entry of
    ``kernel_log.nvswitch``), sorted by the severity of :func:`xid_catalogue.describe_sxid`:
    fatal (critical), non-fatal with an impact (high, medium), non-fatal without (low)."""
    fatal, nonfatal, minor = [], [], []
    graded = []
    codes = switch.get("codes") if isinstance(switch.get("codes"), dict) else {}
    for code in sorted(codes, key=lambda c: int(c) if str(c).isdigit() else 1 << 30):
        entry = codes[code]
        if not isinstance(entry, dict):
            continue
        info = describe_sxid(code, entry.get("severity"))
        when = entry.get("first_s")
        logged = entry.get("message") if isinstance(entry.get("message"), str) else None
        text = "SXid %s x%d%s: %s %s" % (
            code, max(_int(entry.get("count")) or 0, 1),
            " (first %.0f s after boot)" % when if isinstance(when, (int, float)) else "",
            logged or info["meaning"], _grade(info["severity"], info["action"], past, "; " + (
                "NVIDIA's SXid table: %s, %s" % (info["category"], info["meaning"]) if info["listed"]
                else "not in this collection's SXid table")))
        bucket = fatal if info["fatal"] else minor if info["severity"] == "low" else nonfatal
        bucket.append(text + _truncated_note(kernel_log))
        if bucket is nonfatal:
            graded.append(info["severity"])
    if severities is not None:
        severities["nonfatal"] = graded
    return fatal, nonfatal, minor


def _nvswitches(facts, kernel_log):
    """``derived.health.nvswitches``: the NVSwitches on the bus or in the kernel log, with their
    SXid events split by severity (:func:`_sxid_texts`): ``sxid_fatal`` (HEALTH-014),
    ``sxid_nonfatal`` (HEALTH-015, with ``sxid_nonfatal_severities``, each event's severity), ``sxid_minor``
    (HEALTH-017)."""
    on_bus = _get(facts, "health", "fabric_manager", "nvswitches")
    on_bus = [a for a in on_bus if isinstance(a, str)] if isinstance(on_bus, list) else []
    logged = kernel_log.get("nvswitch") if isinstance(kernel_log, dict) else None
    logged = logged if isinstance(logged, dict) else {}
    result = []
    for address in sorted(set(on_bus) | set(a for a in logged if isinstance(a, str))):
        switch = logged.get(address) if isinstance(logged.get(address), dict) else {}
        name = switch.get("name") if isinstance(switch.get("name"), str) else None
        item = {"address": address, "name": name,
                "label": "NVSwitch%s%s" % (" " + name if name else "", "" if address in on_bus
                                           else " (in the kernel log only, not on the PCI bus now)"),
                "sxid_fatal": None, "sxid_nonfatal": None, "sxid_nonfatal_severities": None, "sxid_minor": None,
                "reason": None}
        if not isinstance(kernel_log, dict):
            item["reason"] = "the kernel log was not read (no NVIDIA driver or GPU seen when the facts were gathered)"
        elif kernel_log.get("error") or not isinstance(kernel_log.get("nvswitch"), dict):
            item["reason"] = kernel_log.get("error") or \
                "the kernel log summary has no SXid list (facts gathered by an older collection)"
        else:
            severities = {}
            item["sxid_fatal"], item["sxid_nonfatal"], item["sxid_minor"] = _sxid_texts(
                kernel_log, switch, severities=severities)
            item["sxid_nonfatal_severities"] = severities["nonfatal"]  # HEALTH-015 takes the worst
        result.append(item)
    return result


# -- the previous boot's kernel log ---------------------------------------------------------------

def _now(address, present):
    """What the current boot shows of the GPU at ``address`` that failed in the previous boot."""
    state = present.get(address)
    if state is None:
        return ("the GPU is not on the PCI bus now (the rules of this boot judge a missing GPU)"
                if address else "the log names no GPU")
    if state:
        return "the GPU is on the bus and nvidia-smi lists it now: the reboot recovered it, check it before it fails again"
    return "the GPU is on the bus but nvidia-smi does not list it now (the rules of this boot judge it)"


def _previous_boot(facts, derived):
    """``derived.health.previous_boot``: ``[]`` when the previous boot's kernel log was not asked for
    (``gpuhost_kernel_log_boots`` 1), else one item ``{boot_id, label, faults, reason}``: the GPU
    faults (hardware Xids, fallen off the bus, failed to initialise) and fatal SXids of the
    previous boot, each saying what the current boot shows of that GPU; ``faults`` null with the
    reason when that log is unknown (dmesg fallback, a journal without an earlier boot)."""
    previous = _get(facts, "health", "kernel_log_previous")
    if not isinstance(previous, dict):
        return []
    boot_id = previous.get("boot_id") if isinstance(previous.get("boot_id"), str) else None
    item = {"boot_id": boot_id or "previous boot",
            "label": "previous boot %s" % boot_id if boot_id else "previous boot (boot id unknown)",
            "faults": None, "reason": None}
    if previous.get("error") or not isinstance(previous.get("by_gpu"), dict):
        item["reason"] = previous.get("error") or "the previous boot's kernel log holds no readable summary"
        return [item]
    present = dict((_bus_key(g.get("bus_id")), bool(g.get("reported"))) for g in _list(_get(derived, "nvidia", "gpus"))
                   if _bus_key(g.get("bus_id")))
    where = "in the previous boot %s" % (boot_id or "")
    texts = []
    for address in sorted(a for a in previous["by_gpu"] if isinstance(a, str)):
        hardware, unused_other, unused_reason = _xids(dict(previous, truncated=False), address, past=True)
        texts.extend("GPU %s %s: %s; now: %s" % (address, where.strip(), text, _now(address, present))
                     for text in hardware or [])
    for key, table in (("faults", previous.get("faults")), ("faults_no_address", previous.get("faults_no_address"))):
        for address in sorted(a for a in (table or {}) if isinstance(a, str)) if isinstance(table, dict) else []:
            kinds = table[address] if isinstance(table[address], dict) else {}
            gpu = address if key == "faults" else None
            texts.extend("GPU %s %s: %s; now: %s" % (gpu or "(not named)", where.strip(), text, _now(gpu, present))
                         for text in _fault_texts(kinds, "", past=True))
    switches = previous.get("nvswitch") if isinstance(previous.get("nvswitch"), dict) else {}
    for address in sorted(a for a in switches if isinstance(a, str)):
        if isinstance(switches[address], dict):
            fatal, unused_nonfatal, unused_minor = _sxid_texts(dict(previous, truncated=False), switches[address],
                                                               past=True)
            texts.extend("NVSwitch %s %s: %s; now: check the fabric (HEALTH-014 judges this boot's SXids)"
                         % (address, where.strip(), text) for text in fatal)
    if previous.get("truncated"):
        texts = [t + " (only the newest %s kernel messages of that boot were read)" % previous.get("lines")
                 for t in texts]
    item["faults"] = texts
    return [item]


# -- GPU memory (row remapping, page retirement) -------------------------------------------

def _memory(gpu):
    """``(pending, failures, reason)`` of one nvidia-smi GPU."""
    rows = gpu.get("remapped_rows") if isinstance(gpu.get("remapped_rows"), dict) else None
    pages = gpu.get("retired_pages") if isinstance(gpu.get("retired_pages"), dict) else None
    if rows is None and pages is None:
        return None, None, ("nvidia-smi -q -x reports neither remapped rows nor retired pages for this GPU "
                            "(no row remapper, ECC off or not supported, or MIG instances active)")
    pending, failures = [], []
    unknown = []
    if rows is not None:
        counts = "%s correctable, %s uncorrectable rows remapped" % (rows.get("correctable"), rows.get("uncorrectable"))
        if rows.get("pending") is True:
            pending.append("row remapping pending (%s): reset the GPU to apply it" % counts)
        elif rows.get("pending") is None:
            unknown.append("remapped_row_pending")
        if rows.get("failure") is True:
            failures.append("row remapping failed (%s): the GPU has no spare row left for a failing one" % counts)
        elif rows.get("failure") is None:
            unknown.append("remapped_row_failure")
    if pages is not None:
        if pages.get("pending_retirement") is True or pages.get("pending_blacklist") is True:
            pending.append("page retirement pending (%s single-bit, %s double-bit pages retired): reset the GPU or "
                           "reload the driver to apply it" % (pages.get("single_bit"), pages.get("double_bit")))
        elif rows is None and pages.get("pending_retirement") is None and pages.get("pending_blacklist") is None:
            unknown.append("pending_retirement")
    if unknown and not pending and not failures:
        return None, None, "nvidia-smi -q -x gives no value for %s" % ", ".join(unknown)
    return pending, failures, None


# -- NVLink ---------------------------------------------------------------------------------

def _nvlink_expected(facts, nvlink_gpus, switches):
    matrix = _get(facts, "nvidia", "topology", "matrix")
    if isinstance(matrix, dict):
        for row in matrix.values():
            if isinstance(row, dict) and any(isinstance(v, str) and v.startswith("NV") for v in row.values()):
                return True
    if switches:
        return True
    return any((_int(g.get("links_active")) or 0) > 0 for g in nvlink_gpus)


def _nvlink_fabric(facts, label):
    """Why the GPU of topo -m row ``label`` (``GPUn``, ``None`` when not joined) must have an active
    NVLink, or ``None``: NVSwitches on the bus, or NV# links of the GPU in the topo -m matrix."""
    switches = _get(facts, "health", "fabric_manager", "nvswitches")
    if isinstance(switches, list) and switches:
        return "%d NVSwitch(es) are on the PCI bus" % len(switches)
    row = _get(facts, "nvidia", "topology", "matrix", label) if isinstance(label, str) else None
    if isinstance(row, dict):
        links = sorted("%s %s" % (other, v) for other, v in row.items() if isinstance(v, str) and v.startswith("NV"))
        if links:
            return "nvidia-smi topo -m shows %s" % ", ".join(links[:4])
    return None


def _nvlink_problems(entry, peers, fabric):
    """Problems of one GPU's ``nvidia-smi nvlink -s`` entry against the GPUs of the same name;
    ``fabric`` names why the GPU must have active links whatever its peers show (NVSwitch, NV# in
    topo -m), or is ``None``."""
    if entry.get("unknown"):
        return None, "nvidia-smi nvlink -s shows link state(s) not known to this check: %s" % ", ".join(
            "link %s: %s" % (u.get("link"), u.get("text")) for u in _list(entry["unknown"]))
    active = _int(entry.get("links_active")) or 0
    best = max([_int(p.get("links_active")) or 0 for p in peers] + [active])
    problems = []
    if active == 0 and best == 0 and fabric:
        problems.append("no active NVLink although %s%s" % (fabric, " (%s)" % entry["note"] if entry.get("note") else ""))
    if active < best:
        inactive = entry.get("inactive") or []
        problems.append("%d NVLink(s) active where other %s GPUs of this host have %d%s" % (
            active, entry.get("name") or "", best,
            " (inactive: link %s)" % ", ".join(str(i) for i in inactive) if inactive else
            " (%s)" % entry.get("note") if entry.get("note") else ""))
    speeds = [float(s) for s in (entry.get("speeds_gbps") or {}) if _is_number(s)]
    peer_speeds = [float(s) for p in peers for s in (p.get("speeds_gbps") or {}) if _is_number(s)]
    top = max(speeds + peer_speeds) if speeds + peer_speeds else None
    slow = sorted(s for s in speeds if top is not None and s < top)
    if slow:
        problems.append("NVLink(s) at %s GB/s where the fastest run at %s GB/s" % (
            ", ".join(_fmt_speed(s) for s in slow), _fmt_speed(top)))
    return problems, None


def _is_number(text):
    try:
        float(text)
    except (TypeError, ValueError):
        return False
    return True


# -- GPU to NIC locality (NCCL) ----------------------------------------------------------

def _nearest_nic(topology, gpu_label, rdma_names):
    """``(nic_text, link, reason)``: the nearest RDMA NIC of ``GPUn`` in the topo -m matrix."""
    if not isinstance(topology, dict) or not isinstance(topology.get("matrix"), dict):
        return None, None, "nvidia-smi topo -m was not read (see the nvidia errors): GPU to NIC distances unknown"
    row = topology["matrix"].get(gpu_label)
    if not isinstance(row, dict):
        return None, None, "%s is not in the nvidia-smi topo -m matrix" % gpu_label
    names = topology.get("nic_names") if isinstance(topology.get("nic_names"), dict) else {}
    best = None
    for column, link in row.items():
        if column.startswith("GPU") or link not in TOPO_PCIE_LINKS:
            continue
        device = names.get(column, column)
        if rdma_names and device not in rdma_names:
            continue
        rank = TOPO_PCIE_LINKS.index(link)
        if best is None or rank < best[0] or (rank == best[0] and device < best[1]):
            best = (rank, device, column, link)
    if best is None:
        return None, None, "the nvidia-smi topo -m matrix lists no RDMA NIC"
    text = "%s (%s) at %s" % (best[1], best[2], best[3]) if best[1] != best[2] else "%s at %s" % (best[1], best[3])
    return text, best[3], None


# -- RDMA ports -------------------------------------------------------------------------------

def _rdma(facts, derived):
    devices = _list(_get(facts, "health", "rdma", "devices"))
    by_addr = dict((d.get("address"), d) for d in _list(_get(facts, "pci", "devices")))
    judged = set(n.get("address") for n in _list(_get(derived, "pcie", "nics")))
    rdma_devices, ports = [], []
    for dev in devices:
        address = dev.get("pci_address")
        pci = by_addr.get(address) or {}
        rdma_devices.append({"name": dev.get("name"), "pci_address": address,
                             "device_id": "%s:%s" % (pci.get("vendor_id"), pci.get("device_id")) if pci else None,
                             "pcie_judged": address in judged if address else None})
        for port in _list(dev.get("ports")):
            label = "%s port %s (%s%s)" % (dev.get("name"), port.get("port"), address or "PCI function unknown",
                                           ", %s" % port["link_layer"] if port.get("link_layer") else "")
            item = {"subject": "%s/%s" % (dev.get("name"), port.get("port")), "device": dev.get("name"),
                    "pci_address": address, "label": label, "link_layer": port.get("link_layer"),
                    "state": port.get("state"), "phys_state": port.get("phys_state"), "rate": port.get("rate"),
                    "rate_gbps": port.get("rate_gbps"), "group": (pci.get("vendor_id"), pci.get("device_id"),
                                                                  port.get("link_layer")),
                    "problems": None, "reason": None, "rate_problems": None, "rate_reason": None}
            if port.get("state") is None or port.get("phys_state") is None:
                item["reason"] = port.get("error") or "port state unreadable"
            else:
                problems = []
                if port.get("state") != "ACTIVE" or port.get("phys_state") != "LinkUp":
                    problems.append("state %s: %s, physical state %s: %s%s" % (
                        port.get("state_code"), port.get("state"), port.get("phys_state_code"), port.get("phys_state"),
                        " (no link partner: cable, transceiver or switch port)" if port.get("phys_state") == "Polling"
                        else " (link up, no subnet manager has configured it)"
                        if port.get("phys_state") == "LinkUp" and port.get("state") in ("INIT", "ARMED") else
                        " (port disabled)" if port.get("phys_state") == "Disabled" else ""))
                item["problems"] = problems
            ports.append(item)
    # rate: an active port below the fastest active port of the same NIC model and link layer
    for item in ports:
        if item["problems"] is None:
            item["rate_reason"] = item["reason"]
            continue
        if item["problems"]:
            item["rate_reason"] = "the port is not active, so its rate says nothing (see HEALTH-008)"
            continue
        if _num(item["rate_gbps"]) is None:
            item["rate_reason"] = "rate unreadable: %s" % (item["rate"] or "no rate file")
            continue
        peers = [p["rate_gbps"] for p in ports if p["group"] == item["group"] and p["problems"] == []
                 and _num(p["rate_gbps"]) is not None]
        top = max(peers)
        item["rate_problems"] = [] if item["rate_gbps"] >= top else [
            "%s, where other active %s ports of the same NIC model run at %s Gb/sec" % (
                item["rate"], item["link_layer"] or "", _fmt_speed(top))]
    for item in ports:
        item["group"] = None if item["group"] == (None, None, None) else "%s %s %s" % item["group"]
    return rdma_devices, ports


def _gpudirect(facts, rdma_devices):
    result = {"rdma_devices": [d["name"] for d in rdma_devices], "peermem": None, "dmabuf": None,
              "problems": None, "reason": None}
    peermem = _get(facts, "health", "peermem")
    if not isinstance(peermem, dict):
        result["reason"] = "peer-memory module state not gathered"
        return result
    loaded = [name for name in sorted(peermem) if peermem[name] is True]
    result["peermem"] = loaded[0] if loaded else None
    release = _get(facts, "kernel", "release")
    open_module = _get(facts, "nvidia", "module", "open")
    newer = compare_kernel_release(release, DMABUF_KERNEL) if isinstance(release, str) else None
    result["dmabuf"] = None if open_module is None or newer is None else bool(open_module and newer >= 0)
    if loaded or result["dmabuf"]:
        result["problems"] = []
        return result
    if result["dmabuf"] is None:
        result["reason"] = ("no peer-memory module loaded, and whether DMA-BUF can replace it is unknown "
                            "(kernel release or NVIDIA module flavour unknown)")
        return result
    why = "the NVIDIA kernel module is the proprietary one" if not open_module else \
        "Linux %s is older than %s" % (release, DMABUF_KERNEL)
    result["problems"] = ["no nvidia_peermem module loaded (/sys/module/nvidia_peermem missing) while RDMA devices "
                          "%s are present, and no DMA-BUF path either (%s): NCCL falls back to copies through host "
                          "memory" % (", ".join(result["rdma_devices"]), why)]
    return result


# -- Fabric Manager ---------------------------------------------------------------------------

def _fabric(facts):
    section = _get(facts, "health", "fabric_manager")
    if not isinstance(section, dict) or not section.get("nvswitches"):
        return None, None
    if section.get("error") or section.get("active_state") is None:
        return None, section.get("error") or "nvidia-fabricmanager.service state unknown"
    if section.get("load_state") == "not-found":
        return ["nvidia-fabricmanager.service is not installed, with %d NVSwitch(es) on the PCI bus: the GPUs cannot "
                "use NVLink peer-to-peer (CUDA reports them unavailable until Fabric Manager configures the fabric)"
                % len(section["nvswitches"])], None
    if section.get("active_state") != "active":
        return ["nvidia-fabricmanager.service is %s (%s), not active, with %d NVSwitch(es) on the PCI bus" % (
            section.get("active_state"), section.get("sub_state"), len(section["nvswitches"]))], None
    return [], None


# -- EDAC -------------------------------------------------------------------------------------

def _edac(facts, params):
    result = []
    for mc in _list(_get(facts, "health", "edac", "controllers")):
        dimms = [d for d in _list(mc.get("dimms")) if _int(d.get("ce_count")) or _int(d.get("ue_count"))]
        detail = "; ".join("%s%s: %s corrected, %s uncorrected" % (
            d.get("name"), " (%s)" % d["label"] if d.get("label") else "", d.get("ce_count"), d.get("ue_count"))
            for d in dimms)
        result.append({"name": mc.get("name"),
                       "label": "%s%s%s" % (mc.get("mc_name") or "memory controller",
                                            "; " if detail else "", detail),
                       "ce_count": _int(mc.get("ce_count")), "ue_count": _int(mc.get("ue_count")),
                       "ce_max": params.get("edac_ce_max"),
                       "reason": None if _int(mc.get("ce_count")) is not None and _int(mc.get("ue_count")) is not None
                       else "%s: ce_count/ue_count unreadable (see errors)" % mc.get("name")})
    return result


# -- per GPU ----------------------------------------------------------------------------------

def derive_health(facts, params, derived):
    """The ``derived.health`` document (docs/rules.md)."""
    facts = facts if isinstance(facts, dict) else {}
    params = params if isinstance(params, dict) else {}
    derived = derived if isinstance(derived, dict) else {}
    health = _get(facts, "health")
    if not isinstance(health, dict):
        return {"gpus": None, "nvlink_expected": None, "fabric_problems": None, "fabric_reason": None,
                "gpudirect": None, "rdma_devices": None, "rdma_ports": None, "memory_controllers": None,
                "nvswitches": None, "previous_boot": None}
    kernel_log = health.get("kernel_log")
    nvlink = health.get("nvlink") if isinstance(health.get("nvlink"), dict) else None
    nvlink_gpus = _list(nvlink.get("gpus")) if nvlink else []
    switches = _get(health, "fabric_manager", "nvswitches") or []
    expected = _nvlink_expected(facts, nvlink_gpus, switches)
    rdma_devices, ports = _rdma(facts, derived)
    rdma_names = set(d["name"] for d in rdma_devices if d.get("name"))
    # nvidia-smi's GPUs by PCI address: an index is a position in one command's output, and
    # another command run on a host with a GPU lost in the middle of the bus numbers them otherwise
    smi_gpus = dict((_bus_key(g.get("bus_id")), g) for g in _list(_get(facts, "nvidia", "gpus"))
                    if _bus_key(g.get("bus_id")))

    gpus = []
    seen = set()
    for dgpu in _list(_get(derived, "nvidia", "gpus")):
        address = dgpu.get("bus_id")
        seen.add(address)
        gpus.append(_gpu(dgpu, smi_gpus.get(_bus_key(address)) if dgpu.get("reported") else None, kernel_log,
                         nvlink, nvlink_gpus, facts, rdma_names))
    logged = set()
    for key in ("by_gpu", "faults"):
        table = kernel_log.get(key) if isinstance(kernel_log, dict) else None
        if isinstance(table, dict):
            logged.update(a for a in table if isinstance(a, str))
    for address in sorted(a for a in logged if a not in seen):
        # a GPU the log names that is neither on the bus nor listed by nvidia-smi (gone since)
        gpus.append(_gpu({"bus_id": address, "index": None, "label": "GPU in the kernel log only", "reported": False,
                          "reason": "neither nvidia-smi nor the PCI bus shows this GPU now"},
                         None, kernel_log, nvlink, nvlink_gpus, facts, rdma_names))
    unplaced = _get(kernel_log, "faults_no_address", "no address") if isinstance(kernel_log, dict) else None
    if isinstance(unplaced, dict) and unplaced:
        # a fault line naming no GPU (older drivers' "NVRM: RmInitAdapter failed!")
        gpus.append(_gpu({"bus_id": "unknown GPU", "index": None, "reported": False,
                          "label": "a GPU the kernel log does not name",
                          "reason": "the kernel log line names no GPU"},
                         None, kernel_log, nvlink, nvlink_gpus, facts, rdma_names))
    fabric_problems, fabric_reason = _fabric(facts)
    return {
        "gpus": gpus,
        "nvlink_expected": expected,
        "fabric_problems": fabric_problems,
        "fabric_reason": fabric_reason,
        "gpudirect": _gpudirect(facts, rdma_devices) if rdma_devices else None,
        "rdma_devices": rdma_devices,
        "rdma_ports": ports,
        "memory_controllers": _edac(facts, params),
        "nvswitches": _nvswitches(facts, kernel_log),
        "previous_boot": _previous_boot(facts, derived),
    }


def _gpu(dgpu, smi, kernel_log, nvlink, nvlink_gpus, facts, rdma_names):
    address = dgpu.get("bus_id")
    index = dgpu.get("index")
    not_listed = dgpu.get("reason") or "nvidia-smi does not list this GPU"
    item = {"bus_id": address, "index": index, "label": dgpu.get("label"),
            "xid_hardware": None, "xid_other": None, "xid_reason": None,
            "xid_hardware_severities": None, "xid_other_severities": None, "faults": None, "faults_reason": None,
            "faults_severities": None,
            "memory_pending": None, "memory_failures": None, "memory_reason": None,
            "nvlink_active": None, "nvlink_problems": None, "nvlink_reason": None,
            "nccl_nic": None, "nccl_link": None, "nccl_problems": None, "nccl_reason": None}
    if address == "unknown GPU":
        item["xid_hardware"] = item["xid_other"] = []
        item["xid_hardware_severities"] = item["xid_other_severities"] = []
        item["faults_severities"] = []
        item["faults"], item["faults_reason"] = _faults(kernel_log, None, item["faults_severities"])
    else:
        severities = {}
        item["xid_hardware"], item["xid_other"], item["xid_reason"] = _xids(kernel_log, address, severities=severities)
        # each event's severity, in the order of its text: HEALTH-001/002 take the worst (severity_from)
        item["xid_hardware_severities"] = severities.get("hardware")
        item["xid_other_severities"] = severities.get("other")
        item["faults_severities"] = []
        item["faults"], item["faults_reason"] = _faults(kernel_log, address, item["faults_severities"])
    if smi is None:
        item["memory_reason"] = item["nvlink_reason"] = item["nccl_reason"] = not_listed
        return item
    item["memory_pending"], item["memory_failures"], item["memory_reason"] = _memory(smi)
    label = _get(smi, "topology", "label")
    if "label" not in (smi.get("topology") or {}) and isinstance(index, int):
        label = "GPU%d" % index  # facts gathered before the join was checked

    if nvlink is None:
        item["nvlink_reason"] = "nvidia-smi nvlink -s was not run (the nvidia module was not loaded)"
    elif nvlink.get("gpus") is None:
        item["nvlink_reason"] = nvlink.get("error") or "nvidia-smi nvlink -s not read"
    else:
        # matched by UUID, never by the "GPU n" number: nvidia-smi nvlink -s numbers the GPUs it can
        # open, so with a GPU lost in the middle of the bus its numbers and -q -x's positions differ
        uuid = dgpu.get("uuid")
        entry = [g for g in nvlink_gpus if uuid and g.get("uuid") == uuid]
        if not entry and nvlink.get("note"):
            # one NVML message for every GPU ("... as all links are inActive", "Not Supported")
            entry = [{"index": index, "uuid": uuid, "name": dgpu.get("name"), "links_active": 0,
                      "note": nvlink["note"]}]
        if not entry:
            item["nvlink_reason"] = ("nvidia-smi -q -x gives no UUID for this GPU: its nvidia-smi nvlink -s entry cannot "
                                     "be told apart" if not uuid else
                                     "nvidia-smi nvlink -s does not list this GPU (UUID %s)" % uuid)
        else:
            peers = [g for g in nvlink_gpus if g.get("uuid") != uuid and g.get("name") == entry[0].get("name")]
            item["nvlink_active"] = entry[0].get("links_active")
            item["nvlink_problems"], item["nvlink_reason"] = _nvlink_problems(entry[0], peers,
                                                                              _nvlink_fabric(facts, label))

    if isinstance(label, str):
        item["nccl_nic"], item["nccl_link"], reason = _nearest_nic(_get(facts, "nvidia", "topology"),
                                                                   label, rdma_names)
        if reason:
            item["nccl_reason"] = reason
        else:
            item["nccl_problems"] = [] if item["nccl_link"] in NCCL_NEAR else [
                "nearest RDMA NIC %s: no NIC behind the same PCIe switch (PIX/PXB), so NCCL's GPUDirect RDMA "
                "crosses the CPU" % item["nccl_nic"]]
    elif _get(facts, "nvidia", "topology") is None:
        item["nccl_reason"] = "nvidia-smi topo -m was not read (see the nvidia errors): GPU to NIC distances unknown"
    else:
        item["nccl_reason"] = ("nvidia-smi topo -m is not joined to this GPU (its GPUn rows follow the driver's index, "
                               "and nvidia-smi -q -x does not list every attached GPU)")
    return item
