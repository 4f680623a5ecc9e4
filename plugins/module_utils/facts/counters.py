# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Error counters that count since boot (or since the driver loaded): InfiniBand port counters,
PCIe AER correctable errors, NVLink replay/recovery/CRC errors. The ``health.counters`` section
of docs/facts.md; GPU ECC corrected counts come with the GPUs (``nvidia.gpus[].ecc``).

A counter's absolute value says little (it counts since boot); the rules judge its increase over
a window of the audit history (``plugins/plugin_utils/derive/derive_counters.py``). Here only reading:
the parsers are pure functions over text that never raise, :func:`gather` reads through a
:class:`host.root.Root`. Formats (real outputs quoted in tests/fixtures/counters/README.md):

* ``/sys/class/infiniband/<dev>/ports/<n>/counters/{link_downed,symbol_error,port_rcv_errors,
  link_error_recovery}``: one decimal number each
  (https://www.kernel.org/doc/Documentation/ABI/stable/sysfs-class-infiniband).
* ``/sys/bus/pci/devices/<dev>/aer_dev_correctable``: one ``<error name> <count>`` line per error
  type, then ``TOTAL_ERR_COR <count>``
  (https://www.kernel.org/doc/Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats).
* ``nvidia-smi nvlink -e``: ``GPU n: <name> (UUID: ...)`` then ``Link N: Replay Errors: 0``,
  ``Link N: Recovery Errors: 0``, ``Link N: CRC Errors: 0`` per link (newer drivers may add more
  counter names; every ``<Name> Errors`` is kept).
"""

from __future__ import absolute_import, division, print_function

import posixpath
import re

__metaclass__ = type

SUBSYSTEM = "health"

PCI_DEVICES = "/sys/bus/pci/devices"
INFINIBAND_DIR = "/sys/class/infiniband"
AER_FILE = "aer_dev_correctable"
#: the InfiniBand port counters read (files under ports/<n>/counters/)
IB_COUNTERS = ("link_downed", "symbol_error", "port_rcv_errors", "link_error_recovery")
#: the NVLink error counters summed per GPU: the ``nvidia-smi nvlink -e`` name, the key
NVLINK_COUNTERS = (("replay", "replay"), ("recovery", "recovery"), ("crc", "crc"))

# a counter is at most 20 digits (64 bits); int() of thousands of digits costs quadratic time
_COUNT_RE = re.compile(r"^\s*(\d{1,20})\s*$")
_AER_LINE_RE = re.compile(r"^(\S(?:.{0,78}\S)?)\s+(\d{1,20})\s*$")
_GPU_RE = re.compile(r"^GPU (\d{1,4}): (.*?)(?: \(UUID: ([^)]*)\))?\s*$")
_LINK_RE = re.compile(r"^Link (\d{1,3}): ([A-Za-z][A-Za-z ]{0,40}?) Errors: (\d{1,20})\s*$")


def parse_count(text):
    """``"12\\n"`` -> ``12``; anything but one non-negative decimal number -> ``None``."""
    if not isinstance(text, str):
        return None
    match = _COUNT_RE.match(text)
    return int(match.group(1)) if match else None


def parse_aer_correctable(text):
    """Parse ``aer_dev_correctable``: ``{"total": int or None, "counts": {name: int}}``, ``None``
    when no line reads ``<name> <count>`` (empty, garbage). ``total`` is ``TOTAL_ERR_COR``."""
    if not isinstance(text, str):
        return None
    counts = {}
    for line in text.splitlines()[:64]:
        match = _AER_LINE_RE.match(line.strip())
        if match:
            counts[match.group(1)] = int(match.group(2))
    if not counts:
        return None
    total = counts.pop("TOTAL_ERR_COR", None)
    return {"total": total, "counts": counts}


def parse_nvlink_errors(text):
    """Parse ``nvidia-smi nvlink -e`` (``--errorcounters``).

    Returns ``{"gpus": [{"index", "name", "uuid", "links" (number of links listed), "totals":
    {"replay", "recovery", "crc", ...: sum over the links}, "note"}], "unrecognised": [lines],
    "note"}`` or ``None`` when neither a ``GPU n:`` line nor an ``NVML:`` message is found. A
    counter name is lower-cased with ``_`` for spaces (``Replay`` -> ``replay``); a GPU whose
    NVLink is not supported has an ``NVML:`` note and no links."""
    if not isinstance(text, str):
        return None
    gpus, unrecognised, note, current = [], [], None, None
    for raw in text.replace("\r", "").split("\n"):
        line = raw.strip()
        if not line:
            continue
        header = _GPU_RE.match(line)
        if header:
            current = {"index": int(header.group(1)), "name": header.group(2).strip()[:120] or None,
                       "uuid": header.group(3), "links": 0, "totals": {}, "note": None}
            gpus.append(current)
            seen = set()
            continue
        if line.startswith("NVML:"):
            if current is None:
                note = note or line[:200]
            else:
                current["note"] = line[:200]
            continue
        match = _LINK_RE.match(line) if current is not None else None
        if match is None:
            unrecognised.append(line[:200])
            continue
        link, name, count = int(match.group(1)), match.group(2).strip().lower().replace(" ", "_"), int(match.group(3))
        if link not in seen:
            seen.add(link)
            current["links"] += 1
        current["totals"][name] = current["totals"].get(name, 0) + count
    if not gpus and note is None:
        return None
    return {"gpus": gpus, "unrecognised": unrecognised, "note": note}


# -- gather ---------------------------------------------------------------------------------
def _ib(root):
    ports = []
    for device in root.listdir(INFINIBAND_DIR):
        ports_dir = posixpath.join(INFINIBAND_DIR, device, "ports")
        for port in root.listdir(ports_dir):
            base = posixpath.join(ports_dir, port, "counters")
            item = {"device": device, "port": int(port) if port.isdigit() else port, "counters": {}, "error": None}
            missing = []
            for name in IB_COUNTERS:
                path = posixpath.join(base, name)
                text = root.read_value(path, SUBSYSTEM, optional=True)
                value = parse_count(text)
                if value is None and text is not None:
                    root.error(SUBSYSTEM, path, "not a counter: %r" % text[:40])
                item["counters"][name] = value
                if value is None:
                    missing.append(name)
            if missing:
                item["error"] = "%s/{%s} %s" % (base, ",".join(missing), "unreadable or not a number")
            ports.append(item)
    return ports


def _aer(root):
    devices = []
    for name in root.listdir(PCI_DEVICES):
        path = posixpath.join(PCI_DEVICES, name, AER_FILE)
        text = root.read_text(path, SUBSYSTEM, optional=True)
        if text is None:
            continue  # no AER capability (or a kernel before 4.19): nothing to count
        parsed = parse_aer_correctable(text)
        item = {"address": name.lower(), "correctable": parsed["total"] if parsed else None, "error": None}
        if item["correctable"] is None:
            item["error"] = "%s has no 'TOTAL_ERR_COR <count>' line: %r" % (path, text[:60])
            root.error(SUBSYSTEM, path, item["error"])
        devices.append(item)
    return devices


def _nvlink(root, wanted):
    """``nvidia-smi nvlink -e`` summed per GPU; ``None`` when no GPU has NVLinks (``wanted`` false)."""
    if not wanted:
        return None
    section = {"gpus": None, "note": None, "error": None}
    text, reason = root.command("nvidia-smi-nvlink-errors", SUBSYSTEM)
    if text is None:
        section["error"] = reason
        return section
    if root.recorder is not None:
        root.recorder.command("nvidia-smi-nvlink-errors", text)
    parsed = parse_nvlink_errors(text)
    if parsed is None:
        section["error"] = ("nvidia-smi nvlink -e printed no 'GPU n:' line and no NVML message (%d bytes): NVLink "
                            "error counters unknown" % len(text))
        root.error(SUBSYSTEM, "nvidia-smi nvlink -e", section["error"])
        return section
    section["gpus"], section["note"] = parsed["gpus"], parsed["note"]
    if parsed["unrecognised"]:
        root.error(SUBSYSTEM, "nvidia-smi nvlink -e", "%d line(s) not in the known format, first: %r"
                   % (len(parsed["unrecognised"]), parsed["unrecognised"][0]))
    return section


def gather(root, nvlink_in_use):
    """The ``health.counters`` section (docs/facts.md). ``nvlink_in_use``: ``nvidia-smi nvlink -s``
    listed links on some GPU, so ``nvidia-smi nvlink -e`` is worth running."""
    return {"ib": _ib(root), "aer": _aer(root), "nvlink": _nvlink(root, nvlink_in_use)}
