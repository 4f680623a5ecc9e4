# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``derived.nvidia``: per-GPU values the NVIDIA rules compare (generation, ECC modes,
persistence, power limit, throttle reasons, link width), the driver against its minimum, and the GPUs
on the bus nvidia-smi does not report (and why). Part of
:func:`derive.derive`.
"""

from __future__ import absolute_import, division, print_function

import re

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_common import _int
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_pcie import _label
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.docpath import get as _get

__metaclass__ = type

#: GPU architecture by marketing name (checked first) ...
_GENERATION_NAMES = (
    ("blackwell", re.compile(r"blackwell|\bG?B[12]\d\d\b|\bRTX 50\d\d|\bRTX PRO \d{4}\b", re.I)),
    ("hopper", re.compile(r"\bG?H(100|200|800|20)\b", re.I)),
    ("ada", re.compile(r"\bL40S?\b|\bL4\b|\bL20\b|\bRTX [0-9]+ Ada|\bRTX 40\d\d", re.I)),
    ("ampere", re.compile(r"\bA(100|800|40|30|16|10|2)\b|\bRTX A\d{4}|\bRTX 30\d\d", re.I)),
    ("turing", re.compile(r"\bT4\b|\bRTX [68]000\b|\bQuadro RTX|\bRTX 20\d\d|\bTITAN RTX", re.I)),
    ("volta", re.compile(r"\bV100\b|\bTITAN V\b", re.I)),
)

#: ... then by PCI device id range of vendor 0x10de (high byte)
_GENERATION_IDS = (
    ("blackwell", (0x29, 0x2b, 0x2c, 0x2d, 0x2f)),
    ("ada", (0x26, 0x27, 0x28)),
    ("hopper", (0x23,)),
    ("ampere", (0x20, 0x22, 0x24, 0x25)),
    ("turing", (0x1e, 0x1f, 0x21)),
)

#: clocks event reasons that mean the hardware is protecting itself (nvidia-smi names
#: with the ``clocks_event_reason_`` prefix removed)
THROTTLE_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown")

#: drivers that take a GPU from the host on purpose (passthrough to a VM): not nvidia's to answer for
PASSTHROUGH_DRIVERS = ("vfio-pci", "pci-stub")


def gpu_generation(name, device_id=None):
    """``blackwell``, ``hopper``, ``ada``, ``ampere``, ``turing``, ``volta`` or ``None``."""
    if isinstance(name, str):
        for gen, pattern in _GENERATION_NAMES:
            if pattern.search(name):
                return gen
    if isinstance(device_id, str):
        try:
            value = int(device_id, 16)
        except ValueError:
            return None
        high = (value >> 8) & 0xff
        for gen, highs in _GENERATION_IDS:
            if high in highs:
                return gen
    return None


def _bus_gpus(devices):
    """NVIDIA GPUs on the PCI bus the host's driver should drive: kind ``gpu`` (display/3D
    class) of vendor 0x10de, not bound to a passthrough driver (vfio-pci, pci-stub)."""
    return [d for d in devices if d.get("kind") == "gpu" and str(d.get("vendor_id")).lower() == "0x10de"
            and d.get("driver") not in PASSTHROUGH_DRIVERS]


def _smi_reason(facts, nvidia):
    """Why ``nvidia-smi -q -x`` gave no (or partial) GPU list: ``smi.error``, else the first
    ``errors`` entry of subsystem nvidia about nvidia-smi; ``None`` when it said nothing."""
    reason = _get(nvidia, "smi", "error")
    if isinstance(reason, str) and reason:
        return reason
    for err in _get(facts, "errors") or []:
        if isinstance(err, dict) and err.get("subsystem") == "nvidia" and err.get("reason") and \
                "nvidia-smi" in "%s %s" % (err.get("path"), err.get("reason")) and \
                "topo" not in str(err.get("path")):
            return str(err["reason"])
    return None


def _module_note(nvidia):
    if _get(nvidia, "module", "raw") is None and _get(nvidia, "module", "version") is None:
        return "; the nvidia kernel module is not loaded (/proc/driver/nvidia/version missing)"
    return ""


def _silence_reason(facts, nvidia, reported):
    """Why nvidia-smi does not list GPUs that are on the bus (``reported``: how many it lists)."""
    why = _smi_reason(facts, nvidia) or (
        "nvidia-smi -q -x lists no GPU" if not reported else "the driver does not report them")
    return why + _module_note(nvidia)


def _unreported_reason(facts, nvidia, device, reported, on_bus):
    """Why a GPU on the bus has no nvidia-smi values (the ``reason`` of its entry)."""
    smi = _smi_reason(facts, nvidia)
    if reported:
        text = "nvidia-smi -q -x does not list this GPU (it reports %d of the %d NVIDIA GPUs on the PCI bus)" \
            % (reported, on_bus)
        if smi:
            text += ": " + smi
    else:
        text = "nvidia-smi reports no GPU: %s" % (smi or "nvidia-smi -q -x lists no GPU")
    driver = device.get("driver")
    if not driver:
        text += "; no driver is bound to the GPU"
    elif driver != "nvidia":
        text += "; the GPU is bound to %s, not nvidia" % driver
    return text + _module_note(nvidia)


def _temperature(gpu):
    """NVIDIA-011's values: the GPU's temperature, its own slowdown threshold (nvidia-smi's
    ``gpu_temp_slow_threshold``, where the GPU starts to lower its clocks) and the headroom between
    them; ``temp_reason`` says why the headroom is unknown.

    Where nvidia-smi gives T.Limit values instead (Ada and later under newer drivers: no absolute
    thresholds), the headroom is the T.Limit margin (``gpu_temp_tlimit``) less the slowdown threshold
    relative to T.Limit (``gpu_temp_slow_tlimit_threshold``, e.g. ``-2 C``): a margin of 49 C with slowdown
    at -2 C is 51 C of headroom. ``temp_tlimit_c`` and ``temp_slowdown_tlimit_c`` then carry the two; the
    absolute slowdown temperature is not given, so ``temp_slowdown_c`` stays null."""
    temps = gpu.get("temperature") if isinstance(gpu.get("temperature"), dict) else None
    current = _int(temps.get("gpu_c")) if temps else None
    slowdown = _int(temps.get("slowdown_c")) if temps else None
    margin = _int(temps.get("tlimit_margin_c")) if temps else None
    slow_tlimit = _int(temps.get("slowdown_tlimit_c")) if temps else None
    reason = headroom = None
    if temps is None:
        reason = "nvidia-smi -q -x gives no <temperature> section for this GPU"
    elif current is not None and slowdown is not None:
        headroom = slowdown - current
    elif margin is not None and slow_tlimit is not None:
        headroom = margin - slow_tlimit
    elif current is None and margin is None:
        reason = "nvidia-smi -q -x gives no GPU temperature (<gpu_temp>) for this GPU"
    elif margin is None:
        reason = "nvidia-smi -q -x gives no slowdown threshold (<gpu_temp_slow_threshold>) for this GPU"
    else:
        reason = ("nvidia-smi -q -x gives a T.Limit margin (<gpu_temp_tlimit>) but no slowdown threshold, "
                  "absolute (<gpu_temp_slow_threshold>) or relative to T.Limit (<gpu_temp_slow_tlimit_threshold>), "
                  "for this GPU")
    tlimit = headroom is not None and (current is None or slowdown is None)
    return {"temperature_c": current, "temp_slowdown_c": slowdown, "temp_headroom_c": headroom,
            "temp_tlimit_c": margin if tlimit else None, "temp_slowdown_tlimit_c": slow_tlimit if tlimit else None,
            "temp_reason": reason}


def _nvidia(facts, params, by_addr, pci_known):
    devices = list(by_addr.values())
    bus = _bus_gpus(devices) if pci_known else None
    bus_ids = [d["address"] for d in bus] if bus is not None else None
    nvidia = _get(facts, "nvidia")
    if not isinstance(nvidia, dict):
        return {"present": None, "expected": bool(bus_ids), "gpus": None, "has_blackwell": None, "ecc_modes": None,
                "ecc_reason": None, "bus_gpus": bus_ids, "unreported": None, "smi_problems": None}
    driver = nvidia.get("driver_version") or _get(nvidia, "module", "version")
    minimums = params.get("nvidia_driver_min") if isinstance(params.get("nvidia_driver_min"), dict) else {}
    policy = params.get("power_limit_policy")
    gpus = []
    for gpu in nvidia.get("gpus") or []:
        if not isinstance(gpu, dict):
            continue
        bus_id = gpu.get("bus_id")
        pci = by_addr.get(bus_id) if isinstance(bus_id, str) else None
        generation = gpu_generation(gpu.get("name"), (pci or {}).get("device_id"))
        power = gpu.get("power") if isinstance(gpu.get("power"), dict) else {}
        ecc = gpu.get("ecc") if isinstance(gpu.get("ecc"), dict) else {}
        reasons = _get(gpu, "clocks_event_reasons", "active")
        node = (pci or {}).get("numa_node")
        if not isinstance(node, int) or isinstance(node, bool) or node < 0:
            node = _int(_get(gpu, "topology", "numa_affinity"))
        target = power.get("max_w") if policy == "max" else power.get("default_w") if policy == "default" else None
        gpus.append({
            "index": gpu.get("index"),
            "bus_id": bus_id,
            "uuid": gpu.get("uuid") if isinstance(gpu.get("uuid"), str) and gpu.get("uuid") else None,
            "name": gpu.get("name"),
            "label": "GPU%s %s" % (gpu.get("index"), gpu.get("name") or ""),
            "generation": generation,
            "driver_version": driver,
            "driver_min": minimums.get(generation or "default", minimums.get("default")),
            "persistence": gpu.get("persistence"),
            "ecc_current": ecc.get("current"),
            "ecc_pending": ecc.get("pending"),
            "ecc_pending_matches": None if ecc.get("current") is None or ecc.get("pending") is None
            else ecc.get("current") == ecc.get("pending"),
            "power_limit_w": power.get("limit_w"),
            "power_target_w": target,
            "throttle_active": None if not isinstance(reasons, list) else [r for r in reasons if r in THROTTLE_REASONS],
            **_temperature(gpu),
            "width_current": _get(gpu, "pcie", "width_current"),
            "width_max": _get(gpu, "pcie", "width_max"),
            "numa_node": node,
            "reported": True,
            "reason": None,
        })
    modes = {}
    for gpu in gpus:
        if gpu["ecc_current"] is None:
            modes = None
            break
        modes[gpu["ecc_current"]] = modes.get(gpu["ecc_current"], 0) + 1
    if not gpus:
        modes = None
    present = nvidia.get("present")
    has_bw = any(g["generation"] == "blackwell" for g in gpus)
    if not gpus:
        # no nvidia-smi data: fall back to PCI ids so Blackwell rules still apply
        has_bw = any(d.get("kind") == "gpu" and str(d.get("vendor_id")).lower() == "0x10de" and
                     gpu_generation(None, d.get("device_id")) == "blackwell" for d in devices)

    # GPUs on the bus that nvidia-smi does not list: subjects with null values and the reason,
    # so a driver that stopped answering gives unknown findings instead of no subjects
    unreported = problems = None
    if bus is not None:
        listed = set(g["bus_id"].lower() for g in gpus if isinstance(g["bus_id"], str))
        missing = [d for d in bus if d["address"].lower() not in listed]
        reported = len(bus) - len(missing)
        unreported = [d["address"] for d in missing]
        problems = []
        if missing:
            problems.append("nvidia-smi reports %d of the %d NVIDIA GPUs on the PCI bus, not %s: %s" % (
                reported, len(bus), ", ".join(unreported), _silence_reason(facts, nvidia, reported)))
        for dev in missing:
            generation = gpu_generation(None, dev.get("device_id"))
            node = dev.get("numa_node")
            gpus.append({
                "index": None, "bus_id": dev["address"], "uuid": None, "name": None, "label": _label(dev, {}),
                "generation": generation, "driver_version": driver,
                "driver_min": minimums.get(generation or "default", minimums.get("default")),
                "persistence": None, "ecc_current": None, "ecc_pending": None, "ecc_pending_matches": None,
                "power_limit_w": None, "power_target_w": None, "throttle_active": None,
                "temperature_c": None, "temp_slowdown_c": None, "temp_headroom_c": None, "temp_tlimit_c": None,
                "temp_slowdown_tlimit_c": None, "temp_reason": None,
                "width_current": None, "width_max": None,
                "numa_node": node if isinstance(node, int) and not isinstance(node, bool) and node >= 0 else None,
                "reported": False,
                "reason": _unreported_reason(facts, nvidia, dev, reported, len(bus)),
            })
        if missing and all(isinstance(g["bus_id"], str) for g in gpus):
            gpus.sort(key=lambda g: g["bus_id"].lower())
        has_bw = has_bw or any(g["generation"] == "blackwell" for g in gpus)
    # the per-GPU rules apply where the driver is loaded or NVIDIA GPUs are on the bus: a driver
    # that is not loaded makes their findings unknown (each GPU's reason), not not_applicable
    expected = bool(present) or bool(bus_ids)
    ecc_reason = None
    if modes is None and expected:
        unheard = [g for g in gpus if not g["reported"]]
        ecc_reason = unheard[0]["reason"] if unheard else \
            "nvidia-smi -q -x gives no current ECC mode for every GPU" if gpus else \
            "nvidia-smi reports no GPU: %s" % (_smi_reason(facts, nvidia) or "nvidia-smi -q -x lists no GPU")
    return {"present": present, "expected": expected, "gpus": gpus, "has_blackwell": has_bw, "ecc_modes": modes,
            "ecc_reason": ecc_reason, "bus_gpus": bus_ids, "unreported": unreported, "smi_problems": problems}
