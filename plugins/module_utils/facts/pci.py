# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PCI devices from sysfs, and a decoder of binary PCI configuration space.

:func:`parse_config` reads the bytes of ``/sys/bus/pci/devices/*/config`` over the
offsets of the PCI Local Bus and PCI Express Base specifications (type 0/1/2 headers,
the capability list, the PCI Express capability, the extended capability list with
ACS and AER). It never raises: fields that need bytes that were not read are ``None``
and the result says why in ``reason``. :func:`gather` builds the ``pci`` section of
``ansible_facts.gpuhost`` (docs/facts.md). :func:`devctl_with` is the pure half of a
read-modify-write of the Device Control register, used by the fix modules.

:func:`peer_bridges` (with :func:`port_type`) finds the bridges that peer-to-peer traffic crosses,
pure over the ``pci.devices`` facts: rule PCI-006 (through ``plugin_utils/derive/derive_pcie.py`` on the
controller) and the ``pcie_tune`` fix (on the host, ``acs: auto``) must agree on them, so the one
definition lives here, on the host side, where both can import it.
"""

from __future__ import absolute_import, division, print_function

import posixpath
import re

__metaclass__ = type

SUBSYSTEM = "pci"
DEVICES_DIR = "/sys/bus/pci/devices"

# Offsets in the type 0/1/2 configuration header.
_VENDOR_ID = 0x00
_DEVICE_ID = 0x02
_STATUS = 0x06
_HEADER_TYPE = 0x0E
_CAP_PTR = 0x34
_CARDBUS_CAP_PTR = 0x14
_STATUS_CAP_LIST = 0x10
_HEADER_BYTES = 64
_STD_SPACE = 256
_EXT_SPACE = 4096

_CAP_ID_EXP = 0x10
_EXT_ID_AER = 0x0001
_EXT_ID_ACS = 0x000D

# Registers relative to the PCI Express capability.
EXP_FLAGS = 0x02
EXP_DEVCAP = 0x04
EXP_DEVCTL = 0x08
EXP_LNKCAP = 0x0C
EXP_LNKSTA = 0x12

_DEVCTL_RELAXED_ORDERING = 1 << 4
_DEVCTL_PAYLOAD_SHIFT = 5
_DEVCTL_EXT_TAG = 1 << 8
_DEVCTL_NO_SNOOP = 1 << 11
_DEVCTL_READRQ_SHIFT = 12

#: Link speed encodings of LnkCap/LnkSta (the Supported Link Speeds Vector index).
#: PCI vendor id -> the short name reports and learned device models use (the one vendor table:
#: derive_pcie.py labels subjects with it, inventory_observe.py names device models with it)
VENDOR_NAMES = {"0x10de": "NVIDIA", "0x15b3": "Mellanox", "0x8086": "Intel", "0x14e4": "Broadcom",
                "0x1022": "AMD", "0x1002": "AMD", "0x1000": "Broadcom/LSI", "0x1077": "QLogic",
                "0x1924": "Solarflare", "0x19e5": "Huawei", "0x1dd8": "Pensando", "0x8088": "Wangxun"}

SPEEDS = {1: "2.5GT/s", 2: "5GT/s", 3: "8GT/s", 4: "16GT/s", 5: "32GT/s", 6: "64GT/s"}

#: Payload bits per transferred bit of each generation's link encoding: 8b/10b (1.0, 2.0), 128b/130b
#: (3.0 to 5.0), FLIT mode (6.0: 236 payload bytes of each 256-byte FLIT; the rest is CRC, FEC and the
#: FLIT header). With :data:`SPEEDS` (GT/s per lane) this gives the link's data rate per direction.
ENCODING = {1: 8 / 10, 2: 8 / 10, 3: 128 / 130, 4: 128 / 130, 5: 128 / 130, 6: 236 / 256}

#: Device/Port Type field of the PCI Express Capabilities register.
PORT_TYPES = {
    0x0: "endpoint",
    0x1: "legacy_endpoint",
    0x4: "root_port",
    0x5: "upstream_port",
    0x6: "downstream_port",
    0x7: "pcie_to_pci_bridge",
    0x8: "pci_to_pcie_bridge",
    0x9: "rc_integrated_endpoint",
    0xA: "rc_event_collector",
}
# Root complex integrated functions have no link: their link registers are reserved.
_NO_LINK_TYPES = (0x9, 0xA)

#: ACS Capability / ACS Control bits, in register order.
ACS_BITS = (
    "source_validation",
    "translation_blocking",
    "request_redirect",
    "completion_redirect",
    "upstream_forwarding",
    "egress_control",
    "direct_translated",
)

#: Payload and read request sizes a 3-bit field can encode (0..5; 6 and 7 are reserved).
SIZES = (128, 256, 512, 1024, 2048, 4096)

#: sysfs AER counter files -> key under ``aer.counters``.
AER_FILES = (
    ("correctable", "aer_dev_correctable"),
    ("fatal", "aer_dev_fatal"),
    ("nonfatal", "aer_dev_nonfatal"),
)

ROOT_HINT = "capabilities need root; run with become: true"

_ADDRESS_RE = re.compile(r"^([0-9a-f]{4,8}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])$")
_HOST_BRIDGE_RE = re.compile(r"^pci[0-9a-f]{4,8}:[0-9a-f]{2}$")
_AER_LINE_RE = re.compile(r"^\s*([A-Za-z0-9_]+)\s+([0-9]+)\s*$")


# -- little-endian register reads that refuse to look past what was read -------------
def _word(data, offset, end):
    if offset < 0 or offset + 2 > end:
        return None
    return data[offset] | (data[offset + 1] << 8)


def _dword(data, offset, end):
    if offset < 0 or offset + 4 > end:
        return None
    return data[offset] | (data[offset + 1] << 8) | (data[offset + 2] << 16) | (data[offset + 3] << 24)


def _size(code):
    return SIZES[code] if 0 <= code < len(SIZES) else None


def _size_code(value, name):
    if isinstance(value, bool) or not isinstance(value, int) or value not in SIZES:
        raise ValueError(
            "%s must be one of %s bytes, got %r" % (name, ", ".join(str(size) for size in SIZES), value)
        )
    return SIZES.index(value)


def devctl_with(devctl_raw, max_read_request=None, max_payload=None):
    """Return ``devctl_raw`` with Max_Read_Request_Size and/or Max_Payload_Size replaced.

    Sizes are bytes (128..4096, powers of two); other bits are kept as they are, so the
    result can be written back to Device Control (PCIe capability + 8).

    :raises ValueError: ``devctl_raw`` is not a 16-bit value or a size is not encodable.
    """
    if isinstance(devctl_raw, bool) or not isinstance(devctl_raw, int) or not 0 <= devctl_raw <= 0xFFFF:
        raise ValueError("devctl_raw must be a 16-bit register value, got %r" % (devctl_raw,))
    value = devctl_raw
    if max_read_request is not None:
        code = _size_code(max_read_request, "max_read_request")
        value = (value & ~(0x7 << _DEVCTL_READRQ_SHIFT)) | (code << _DEVCTL_READRQ_SHIFT)
    if max_payload is not None:
        code = _size_code(max_payload, "max_payload")
        value = (value & ~(0x7 << _DEVCTL_PAYLOAD_SHIFT)) | (code << _DEVCTL_PAYLOAD_SHIFT)
    return value


def _decode_pcie(data, cap, end):
    """Fields of the PCI Express capability at ``cap``; ``(dict, complete)``."""
    flags = _word(data, cap + EXP_FLAGS, end)
    devcap = _dword(data, cap + EXP_DEVCAP, end)
    devctl = _word(data, cap + EXP_DEVCTL, end)
    port = None if flags is None else (flags >> 4) & 0xF
    has_link = port is not None and port not in _NO_LINK_TYPES
    lnkcap = _dword(data, cap + EXP_LNKCAP, end) if has_link else None
    lnksta = _word(data, cap + EXP_LNKSTA, end) if has_link else None
    pcie = {
        "version": None if flags is None else flags & 0xF,
        "port_type": None if port is None else PORT_TYPES.get(port),
        "max_payload_supported": None if devcap is None else _size(devcap & 0x7),
        "max_payload": None if devctl is None else _size((devctl >> _DEVCTL_PAYLOAD_SHIFT) & 0x7),
        "max_read_request": None if devctl is None else _size((devctl >> _DEVCTL_READRQ_SHIFT) & 0x7),
        "relaxed_ordering": None if devctl is None else bool(devctl & _DEVCTL_RELAXED_ORDERING),
        "extended_tag": None if devctl is None else bool(devctl & _DEVCTL_EXT_TAG),
        "no_snoop": None if devctl is None else bool(devctl & _DEVCTL_NO_SNOOP),
        "devctl_raw": devctl,
        "link_cap_speed": None if lnkcap is None else SPEEDS.get(lnkcap & 0xF),
        "link_cap_width": None if lnkcap is None else (lnkcap >> 4) & 0x3F,
        "link_speed": None if lnksta is None else SPEEDS.get(lnksta & 0xF),
        "link_width": None if lnksta is None else (lnksta >> 4) & 0x3F,
    }
    complete = None not in (flags, devcap, devctl) and (not has_link or None not in (lnkcap, lnksta))
    return pcie, complete


def _acs_bits(value):
    return dict((name, bool(value & (1 << bit))) for bit, name in enumerate(ACS_BITS))


def _walk_capabilities(data, result, problems):
    """Walk the standard capability list; return True when it ended inside the bytes read."""
    end = min(len(data), _STD_SPACE)
    layout = result["header_type"]
    if layout in (0, 1):
        pointer_at = _CAP_PTR
    elif layout == 2:
        pointer_at = _CARDBUS_CAP_PTR
    else:
        problems.append("header type %d is not defined by the PCI specification: capabilities not decoded" % layout)
        return True
    offset = data[pointer_at] & 0xFC
    seen = set()
    while offset:
        if offset < _HEADER_BYTES:
            problems.append("capability pointer 0x%02x points into the 64-byte header: capability list is corrupt" % offset)
            return True
        if offset + 2 > end:
            return False
        if offset in seen:
            problems.append("capability list loops back to 0x%02x: stopped there" % offset)
            return True
        seen.add(offset)
        cap_id = data[offset]
        if cap_id == 0xFF:
            problems.append("capability at 0x%02x has ID 0xff: capability list is corrupt" % offset)
            return True
        result["capabilities"].append({"offset": offset, "id": cap_id})
        if cap_id == _CAP_ID_EXP and result["pcie_cap_offset"] is None:
            result["pcie_cap_offset"] = offset
        offset = data[offset + 1] & 0xFC
    return True


def _walk_extended(data, result, problems):
    """Walk the extended capability list from 0x100; return True when it ended inside the bytes read."""
    end = min(len(data), _EXT_SPACE)
    offset = _STD_SPACE
    seen = set()
    while offset:
        if offset < _STD_SPACE:
            problems.append(
                "extended capability pointer 0x%03x points below 0x100: extended capability list is corrupt" % offset
            )
            return True
        header = _dword(data, offset, end)
        if header is None:
            return False
        if offset in seen:
            problems.append("extended capability list loops back to 0x%03x: stopped there" % offset)
            return True
        seen.add(offset)
        # An empty or all-ones first header means the function implements no extended capability.
        if header in (0, 0xFFFFFFFF):
            return True
        cap_id = header & 0xFFFF
        result["extended_capabilities"].append({"offset": offset, "id": cap_id, "version": (header >> 16) & 0xF})
        if cap_id == _EXT_ID_AER:
            result["aer"] = True
        elif cap_id == _EXT_ID_ACS and result["acs"] is None:
            cap = _word(data, offset + 4, end)
            ctl = _word(data, offset + 6, end)
            if cap is None or ctl is None:
                return False
            result["acs"] = {"cap": _acs_bits(cap), "ctl": _acs_bits(ctl)}
        offset = (header >> 20) & 0xFFC
    return True


def parse_config(data):
    """Decode PCI configuration space bytes (as read from sysfs ``config``).

    Returns a dict: ``length``, ``vendor_id``, ``device_id``, ``header_type`` (layout,
    bits 6:0), ``multifunction``, ``capabilities`` (``[{"offset", "id"}]``),
    ``pcie_cap_offset``, ``pcie`` (the ``pcie`` dict of docs/facts.md or ``None``),
    ``extended_capabilities`` (``[{"offset", "id", "version"}]``, ``None`` when the
    extended space was not read), ``acs``, ``aer`` (``True``/``False``, ``None`` when
    unknown) and ``reason`` (why something is ``None``, or ``None``).
    Never raises; input that is not bytes counts as empty.
    """
    if isinstance(data, bytearray):
        data = bytes(data)
    if not isinstance(data, bytes):
        data = b""
    length = len(data)
    result = {
        "length": length,
        "vendor_id": None,
        "device_id": None,
        "header_type": None,
        "multifunction": None,
        "capabilities": [],
        "pcie_cap_offset": None,
        "pcie": None,
        "extended_capabilities": None,
        "acs": None,
        "aer": None,
        "reason": None,
    }
    if length < _HEADER_BYTES:
        result["reason"] = (
            "config space is %d bytes, shorter than the 64-byte PCI header: the read or capture was cut short; "
            "read it again" % length
        )
        return result
    result["vendor_id"] = _word(data, _VENDOR_ID, length)
    result["device_id"] = _word(data, _DEVICE_ID, length)
    if result["vendor_id"] in (0xFFFF, 0x0000):
        result["reason"] = (
            "config space reads vendor 0x%04x: the function did not answer (removed, powered off or in error "
            "recovery); check dmesg" % result["vendor_id"]
        )
        return result
    result["header_type"] = data[_HEADER_TYPE] & 0x7F
    result["multifunction"] = bool(data[_HEADER_TYPE] & 0x80)
    problems = []

    has_caps = bool(_word(data, _STATUS, length) & _STATUS_CAP_LIST)
    caps_complete = True
    if has_caps:
        caps_complete = _walk_capabilities(data, result, problems)
    if not caps_complete:
        # A non-root read of sysfs config stops at 64 bytes (128 for CardBus bridges).
        problems.insert(0, "config space is %d bytes: %s" % (length, ROOT_HINT))

    cap = result["pcie_cap_offset"]
    if cap is not None:
        pcie, complete = _decode_pcie(data, cap, min(length, _STD_SPACE))
        result["pcie"] = pcie
        if not complete and caps_complete and length >= _STD_SPACE:
            # every standard byte was read: a capability that runs past them is garbage, not a short read
            problems.insert(0, "config space is unreadable: the PCI Express capability at 0x%02x runs past the "
                               "256-byte standard space, which no real device does; the function may be in error "
                               "or the capture is damaged (compare with lspci -vvv)" % cap)
        elif not complete and caps_complete:
            problems.insert(
                0,
                "config space is %d bytes: the PCI Express capability at 0x%02x is cut off; %s" % (length, cap, ROOT_HINT),
            )

    if length > _STD_SPACE:
        result["extended_capabilities"] = []
        result["aer"] = False
        if not _walk_extended(data, result, problems):
            result["aer"] = None if result["aer"] is False else result["aer"]
            problems.append(
                "config space is %d bytes: the extended capability list runs past it, ACS/AER may be missing; "
                "read all 4096 bytes as root" % length
            )
    elif cap is not None:
        # Only PCI Express (and PCI-X 2.0) functions have extended space, so only then is 256 a loss.
        problems.append(
            "config space is %d bytes: extended capabilities (ACS/AER) unavailable; the kernel has no extended "
            "config access to this device or the capture kept only %d bytes" % (length, length)
        )
    if problems:
        result["reason"] = "; ".join(problems)
    return result


def _aer_lines(text):
    """``(counters, bad_lines)`` of an ``aer_dev_*`` file."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", "replace")
    if not isinstance(text, str):
        return {}, []
    counters = {}
    bad = []
    for line in text.splitlines():
        if not line.strip():
            continue
        match = _AER_LINE_RE.match(line)
        if match is None:
            bad.append(line)
            continue
        counters[match.group(1)] = int(match.group(2))
    return counters, bad


def parse_aer_counters(text):
    """Counters of a sysfs ``aer_dev_correctable``/``_fatal``/``_nonfatal`` file.

    Lines are ``NAME count`` (``TOTAL_ERR_COR 0``); lines of another shape are skipped.
    Accepts text or bytes; never raises.
    """
    return _aer_lines(text)[0]


def kind(vendor_id, class_id):
    """Classify a device as ``gpu``, ``nic``, ``bridge``, ``nvme`` or ``other``.

    Accepts ints or sysfs text (``0x10de``, ``0x030200``); unreadable values give ``other``.
    """
    vendor = _to_int(vendor_id)
    klass = _to_int(class_id)
    if klass is None:
        return "other"
    base_sub = (klass >> 8) & 0xFFFF
    if base_sub == 0x0302 or (base_sub == 0x0300 and vendor in (0x10DE, 0x1002)):
        return "gpu"
    if base_sub in (0x0200, 0x0207):
        return "nic"
    if base_sub == 0x0604:
        return "bridge"
    if base_sub == 0x0108:
        return "nvme"
    return "other"


def link_rate_gbs(speed, width):
    """Theoretical data rate of a PCIe link per direction, in GB/s (10^9 bytes): GT/s per lane x the
    encoding's payload share / 8 bits x lanes. ``speed`` is a generation (``5``) or a speed as the facts
    give it (``"32GT/s"``), ``width`` the lanes (``16`` or ``"x16"``). Gen5 x16 is 63.015, Gen4 x16 31.508.
    Transaction-layer overhead (TLP headers, flow control) is not subtracted: a measured copy reaches
    a fraction of this, which is what a profile's fractions say. ``None`` for anything else."""
    generation = None
    if isinstance(speed, int) and not isinstance(speed, bool):
        generation = speed if speed in SPEEDS else None
    elif isinstance(speed, str):
        text = speed.strip().replace(" ", "")
        generation = dict((value, gen) for gen, value in SPEEDS.items()).get(text)
        if generation is None and re.match(r"^(?:gen)?[1-6]$", text, re.I):
            generation = int(text[-1])
    if isinstance(width, str) and re.match(r"^x?\d{1,2}$", width.strip(), re.I):
        width = int(width.strip().lstrip("xX"))
    if generation is None or not isinstance(width, int) or isinstance(width, bool) or not 1 <= width <= 32:
        return None
    gts = float(SPEEDS[generation][:-len("GT/s")])
    return round(gts * ENCODING[generation] / 8 * width, 3)


def _to_int(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip(), 16)
        except ValueError:
            return None
    return None


def upstream_from_path(device_path):
    """PCI addresses between the host bridge and the device in a resolved sysfs path.

    ``/sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0`` gives ``["0000:40:01.1"]``;
    ``None`` when the path has no ``pciDDDD:BB`` host bridge or does not end in a device.
    """
    if not isinstance(device_path, str):
        return None
    parts = [part for part in device_path.split("/") if part]
    hosts = [index for index, part in enumerate(parts) if _HOST_BRIDGE_RE.match(part)]
    if not hosts or not parts or not _ADDRESS_RE.match(parts[-1].lower()):
        return None
    # Only the components after the first host bridge: a VMD domain adds a second one below.
    return [part.lower() for part in parts[hosts[0] + 1:-1] if _ADDRESS_RE.match(part.lower())]


def _address_key(address):
    match = _ADDRESS_RE.match(address)
    if match is None:
        return (1, address)
    return (0, tuple(int(group, 16) for group in match.groups()))


def _device(root, name):
    path = posixpath.join(DEVICES_DIR, name)
    errors = []
    vendor = root.read_value(path + "/vendor", SUBSYSTEM)
    device_id = root.read_value(path + "/device", SUBSYSTEM)
    class_id = root.read_value(path + "/class", SUBSYSTEM)
    entry = {
        "address": name.lower(),
        "vendor_id": None if vendor is None else vendor.lower(),
        "device_id": None if device_id is None else device_id.lower(),
        "class_id": None if class_id is None else class_id.lower(),
        "kind": kind(vendor, class_id),
        "driver": None,
        "numa_node": root.read_int(path + "/numa_node", SUBSYSTEM),
        "local_cpulist": root.read_value(path + "/local_cpulist", SUBSYSTEM),
        "upstream": None,
        "config_bytes": None,
        "pcie": None,
        "acs": None,
        "aer": None,
        "error": None,
    }

    driver_link = path + "/driver"
    target = root.readlink(driver_link)
    if target is not None:
        entry["driver"] = posixpath.basename(target.rstrip("/")) or None
    elif root.exists(driver_link):
        # Present but not a link (a capture that flattened links): unknown, not "no driver".
        root.readlink(driver_link, SUBSYSTEM)

    resolved = root.resolve_link(path, SUBSYSTEM)
    if resolved is not None:
        entry["upstream"] = upstream_from_path(resolved)
        if entry["upstream"] is None:
            root.error(
                SUBSYSTEM, path,
                "device link resolves to %s, which is not below a pciDDDD:BB host bridge: upstream bridges unknown"
                % resolved,
            )

    config_path = path + "/config"
    data = root.read_bytes(config_path, SUBSYSTEM, limit=_EXT_SPACE)
    if data is None:
        errors.append("cannot read %s: PCI Express, ACS and AER unknown (see errors)" % config_path)
        parsed = parse_config(b"")
        parsed["reason"] = None
    else:
        entry["config_bytes"] = len(data)
        parsed = parse_config(data)
        if parsed["reason"]:
            errors.append(parsed["reason"])
            root.error(SUBSYSTEM, config_path, parsed["reason"])
    entry["pcie"] = parsed["pcie"]
    entry["acs"] = parsed["acs"]

    counters = {}
    any_counter_file = False
    for key, filename in AER_FILES:
        counter_path = path + "/" + filename
        text = root.read_text(counter_path, SUBSYSTEM, optional=True)
        if text is None:
            counters[key] = {}
            continue
        any_counter_file = True
        values, bad = _aer_lines(text)
        counters[key] = values
        if bad:
            reason = "%d line(s) are not 'NAME count', first: %r" % (len(bad), bad[0][:60])
            root.error(SUBSYSTEM, counter_path, reason)
            errors.append("%s: %s" % (counter_path, reason))
    # The kernel creates aer_dev_* only for functions with an AER capability, so the files
    # prove AER even when a non-root read hid the extended space.
    if parsed["aer"] or any_counter_file:
        entry["aer"] = {"present": True, "counters": counters}

    if errors:
        entry["error"] = "; ".join(errors)
    return entry


def gather(root):
    """The ``pci`` section of the facts (docs/facts.md) for a :class:`host.root.Root`."""
    names = root.listdir(DEVICES_DIR, SUBSYSTEM)
    devices = [_device(root, name) for name in names]
    devices.sort(key=lambda entry: _address_key(entry["address"]))
    return {"devices": devices, "count": len(devices)}


# -- peer-to-peer paths through the PCIe tree ---------------------------------------------------

def port_type(device):
    """``pcie.port_type`` of a device mapping, or ``None``."""
    pcie = device.get("pcie") if isinstance(device, dict) else None
    return pcie.get("port_type") if isinstance(pcie, dict) else None


def peer_bridges(gpus, nics, by_addr):
    """``(bridges, unresolved)`` for GPU-GPU and GPU-NIC peer traffic.

    ``bridges`` maps the address of every bridge that such traffic crosses below the point
    where the two devices' upstream paths split to the set of peer addresses behind it. Only
    switch downstream ports redirect peer traffic that would otherwise turn around inside
    the switch (root ports send it through the root complex anyway), so bridges known to be
    another port type are left out; a bridge whose type is unknown is kept when it carries a
    read error (so the error is reported), and a path entry missing from ``by_addr`` is kept
    (the caller names it). ``unresolved`` lists peers whose upstream path is unknown.
    """
    bridges = {}
    unresolved = []
    for i, a in enumerate(gpus):
        for b in list(gpus[i + 1:]) + list(nics):
            ua, ub = a.get("upstream"), b.get("upstream")
            if not isinstance(ua, list) or not isinstance(ub, list):
                for dev in (a, b):
                    if not isinstance(dev.get("upstream"), list) and dev["address"] not in unresolved:
                        unresolved.append(dev["address"])
                continue
            common = 0
            while common < min(len(ua), len(ub)) and ua[common] == ub[common]:
                common += 1
            for side, path in ((a, ua[common:]), (b, ub[common:])):
                for addr in path:
                    bridge = by_addr.get(addr)
                    port = port_type(bridge) if bridge else None
                    if bridge is not None and port not in (None, "downstream_port"):
                        continue
                    if bridge is not None and port is None and not bridge.get("error"):
                        continue
                    # name the devices behind the bridge, not every device it talks to
                    bridges.setdefault(addr, set()).add(side["address"])
    return bridges, unresolved
