# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fix logic of ``gpuhost.baseline.pcie_tune``: Device Control and ACS Control, now and at boot.

Runtime changes are read-modify-writes of one 16-bit register in the sysfs ``config`` file
of a device: ``os.pwrite`` of exactly two bytes at the register's offset (the kernel turns
an aligned 2-byte write into one config word write), then a read back. This, not ``setpci``,
because it needs nothing installed, touches only the bits of the mask, and works the same on
a writable copy of a snapshot, where ``config`` is a plain file.

The boot-time half is a shell script that uses ``setpci`` with ``value:mask`` (present on
real hosts), run by a systemd oneshot unit at boot and by a udev rule when one of the
devices is added again (hot-plug, rescan after a reset or link recovery) or a driver binds
to it (a driver may reprogram Device Control in its probe).

Pure functions decide (:func:`select_devices`, :func:`plan_devctl`, :func:`check_payload`,
:func:`plan_acs`, :func:`auto_acs_bridges`, :func:`parse_script`, :func:`merge_entries`,
:func:`render_script`, :func:`render_unit`, :func:`render_udev`); :func:`apply` reads every
input, checks everything, and only then writes (config registers first, verified by read
back, then the files), undoing its register writes when a later step fails.
"""

from __future__ import absolute_import, division, print_function

import errno
import os
import re
import struct

from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.base import (
    UDEV_RELOAD, FixError, errno_hint, file_diff, printable, to_bytes, to_text)
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.pci import (
    DEVICES_DIR, EXP_DEVCTL, ROOT_HINT, SIZES, devctl_with, gather, parse_config, peer_bridges, port_type)
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.persist import (
    ACSCTL_REG, DEVCTL_REG, PCIE_SCRIPT_MARKER as SCRIPT_MARKER, PCIE_SCRIPT_PATH as SCRIPT_PATH,
    PCIE_UDEV_PATH as UDEV_PATH, PCIE_UNIT_LINK as UNIT_LINK, PCIE_UNIT_NAME as UNIT_NAME,
    PCIE_UNIT_PATH as UNIT_PATH, parse_pcie_script as parse_script)

__metaclass__ = type

KINDS = ("gpu", "nic", "bridge", "nvme", "other")

READRQ_MASK = 0x7000
PAYLOAD_MASK = 0x00E0
ACS_CTL = 0x06
#: ACS Control: P2P Request Redirect (bit 2) and P2P Completion Redirect (bit 3), nothing else
ACS_REDIRECT_MASK = 0x000C
_EXT_ID_ACS = 0x000D

_ADDRESS_RE = re.compile(r"^(?:([0-9a-f]{1,8}):)?([0-9a-f]{1,2}):([0-9a-f]{1,2})\.([0-7])$")
_VENDOR_RE = re.compile(r"^(?:0x)?([0-9a-f]{1,4})$")


# -- input -----------------------------------------------------------------------------------

def normalize_address(text):
    """``41:00.0`` / ``0000:41:00.0`` -> ``0000:41:00.0``; ``None`` when it is not a PCI address."""
    if not isinstance(text, str):
        return None
    match = _ADDRESS_RE.match(text.strip().lower())
    if match is None:
        return None
    domain, bus, dev, fn = match.groups()
    if int(dev, 16) > 0x1F:
        return None
    return "%04x:%02x:%02x.%s" % (int(domain or "0", 16), int(bus, 16), int(dev, 16), fn)


def normalize_vendor(text):
    """``10de`` / ``0x10DE`` -> ``0x10de``; ``None`` when it is not a 16-bit hex id."""
    if not isinstance(text, str):
        return None
    match = _VENDOR_RE.match(text.strip().lower())
    return None if match is None else "0x%04x" % int(match.group(1), 16)


def _addresses(values, option):
    result = []
    for value in values or []:
        address = normalize_address(value)
        if address is None:
            raise FixError("%s: %s is not a PCI address: write it as DDDD:BB:DD.F, e.g. 0000:41:00.0"
                           % (option, printable(value)))
        if address not in result:
            result.append(address)
    return result


def select_devices(devices, addresses=None, vendors=None, kinds=None):
    """Devices (``facts.pci.gather`` entries) matching every selector given; raises :class:`FixError`.

    An address asked for that does not exist, or that another selector filters out, is an
    error rather than silently skipped: the user named that device.
    """
    wanted = _addresses(addresses, "addresses")
    vendor_ids = []
    for value in vendors or []:
        vendor = normalize_vendor(value)
        if vendor is None:
            raise FixError("vendor: %s is not a PCI vendor id: write it in hex, e.g. 0x10de (NVIDIA)"
                           % printable(value))
        vendor_ids.append(vendor)
    kinds = list(kinds or [])
    for value in kinds:
        if value not in KINDS:
            raise FixError("kinds: %s is not one of %s" % (printable(value), ", ".join(KINDS)))
    by_address = dict((dev["address"], dev) for dev in devices)
    missing = [address for address in wanted if address not in by_address]
    if missing:
        raise FixError("PCI device %s does not exist in %s: check the address with lspci -D"
                       % (", ".join(missing), DEVICES_DIR), missing=missing)
    selected = []
    for dev in devices:
        listed = dev["address"] in wanted
        if wanted and not listed:
            continue
        reasons = []
        if vendor_ids and dev.get("vendor_id") not in vendor_ids:
            reasons.append("vendor %s is not one of %s" % (dev.get("vendor_id"), ", ".join(vendor_ids)))
        if kinds and dev.get("kind") not in kinds:
            reasons.append("it is a %s, not one of kinds %s" % (dev.get("kind"), ", ".join(kinds)))
        if reasons:
            if listed:
                raise FixError("%s is listed in addresses but %s: selectors are combined (all must match); "
                               "remove it or widen vendor/kinds" % (dev["address"], " and ".join(reasons)))
            continue
        selected.append(dev)
    return selected


# -- registers ---------------------------------------------------------------------------------

def word_at(data, offset):
    if offset is None or offset < 0 or offset + 2 > len(data):
        return None
    return data[offset] | (data[offset + 1] << 8)


def acs_offset(parsed):
    """Offset of the ACS extended capability in a ``parse_config`` result, or ``None``."""
    for cap in parsed.get("extended_capabilities") or []:
        if cap.get("id") == _EXT_ID_ACS:
            return cap["offset"]
    return None


def describe_devctl(value):
    return "MaxPayload %s MaxReadReq %s" % (_size_text((value >> 5) & 7), _size_text((value >> 12) & 7))


def describe_acsctl(value):
    return "ReqRedir%s CmpltRedir%s" % ("+" if value & 0x4 else "-", "+" if value & 0x8 else "-")


def _size_text(code):
    return str(SIZES[code]) if code < len(SIZES) else "reserved(%d)" % code


def truncation_message(address, data, need, what):
    return ("PCI config of %s is %d bytes, %s needs %d: reading beyond 64 bytes (256 for capabilities, 4096 "
            "for extended ones) needs root; run with become: true (a snapshot captured without root cannot be "
            "tuned)" % (address, len(data), what, need))


def express_registers(address, data, explicit):
    """``(parsed, cap_offset)`` of a device, ``(parsed, None)`` for a function without PCI Express.

    Raises :class:`FixError` when the bytes are cut short (not root) or garbage, and for a
    function without PCI Express capability when ``explicit`` (named in ``addresses``).
    """
    parsed = parse_config(data)
    if parsed["vendor_id"] is None or parsed["vendor_id"] in (0xFFFF, 0x0000):
        raise FixError("cannot tune %s: %s" % (address, parsed["reason"]), address=address)
    cap = parsed["pcie_cap_offset"]
    if cap is None:
        if ROOT_HINT in (parsed["reason"] or ""):
            raise FixError(truncation_message(address, data, 256, "the PCI Express capability"), address=address)
        if explicit:
            raise FixError("%s has no PCI Express capability (a conventional PCI function or a host bridge): it has "
                           "no MaxReadReq/MaxPayload; remove it from addresses" % address, address=address)
        return parsed, None
    if word_at(data, cap + EXP_DEVCTL) is None or parsed["pcie"]["max_payload_supported"] is None:
        raise FixError(truncation_message(address, data, cap + EXP_DEVCTL + 2, "Device Control"), address=address)
    return parsed, cap


def plan_devctl(address, data, cap, max_read_request=None, max_payload=None):
    """The Device Control write of one device: dict with ``before``/``after``/``offset``."""
    before = word_at(data, cap + EXP_DEVCTL)
    after = devctl_with(before, max_read_request=max_read_request, max_payload=max_payload)
    mask = (READRQ_MASK if max_read_request is not None else 0) | (PAYLOAD_MASK if max_payload is not None else 0)
    return {"address": address, "register": DEVCTL_REG, "offset": cap + EXP_DEVCTL, "mask": mask,
            "value": after & mask, "before": before, "after": after}


def plan_acs(address, data, parsed, explicit):
    """The ACS Control write that clears both redirect bits; ``None`` without ACS capability.

    Raises :class:`FixError` when the extended config space was not read whole (not root),
    and for a bridge named in ``acs_bridges`` (``explicit``) that has no ACS capability.
    """
    express = parsed["pcie_cap_offset"] is not None
    if ROOT_HINT in (parsed["reason"] or "") or (express and parsed["extended_capabilities"] is None) \
            or "runs past" in (parsed["reason"] or ""):
        raise FixError(truncation_message(address, data, 4096, "the ACS extended capability"), address=address)
    offset = acs_offset(parsed)
    if offset is None:
        if explicit:
            raise FixError("%s has no ACS capability: there is no request/completion redirect to disable; remove "
                           "it from acs_bridges" % address, address=address)
        return None
    before = word_at(data, offset + ACS_CTL)
    if before is None:
        raise FixError(truncation_message(address, data, offset + ACS_CTL + 2, "ACS Control"), address=address)
    return {"address": address, "register": ACSCTL_REG, "offset": offset + ACS_CTL, "mask": ACS_REDIRECT_MASK,
            "value": 0, "before": before, "after": before & ~ACS_REDIRECT_MASK}


def auto_acs_bridges(devices):
    """Bridges whose ACS redirect sends GPU-GPU / GPU-NIC peer traffic up to the root complex.

    The same set rule PCI-006 reports (``derived.pcie.acs_bridges``, both from ``facts/pci.py``): switch
    downstream ports on the path between two peers, below the point where the paths split.
    Root ports and switch upstream ports are not in it (peer traffic through a root port goes
    through the root complex anyway).
    """
    devices = [d for d in devices or [] if isinstance(d, dict) and isinstance(d.get("address"), str)]
    by_addr = dict((d["address"], d) for d in devices)
    bridges, unused_unresolved = peer_bridges([d for d in devices if d.get("kind") == "gpu"],
                                              [d for d in devices if d.get("kind") == "nic"], by_addr)
    return [addr for addr in sorted(bridges) if addr in by_addr and port_type(by_addr[addr])]


def payload_of(devctl):
    """MaxPayload bytes of a Device Control value (``None`` for a reserved encoding)."""
    code = (devctl >> 5) & 7
    return SIZES[code] if code < len(SIZES) else None


def check_payload(inventory, writes, max_payload):
    """Refuse a MaxPayload a device or a port on its path cannot take; raises :class:`FixError`.

    ``inventory``: ``{address: {"parsed", "upstream"}}`` of every device; ``writes``: the
    planned Device Control writes by address. The value must be within the DevCap of each
    device and of every port above it. Where a device's MaxPayload changes, both ends of each
    link it is on must end up with the same MaxPayload (a receiver drops a TLP larger than
    its own MaxPayload as malformed), so raising it means raising the whole path in one task.
    """
    def after(address):
        if address in writes:
            return payload_of(writes[address]["after"])
        pcie = inventory[address]["parsed"]["pcie"] if address in inventory else None
        return pcie["max_payload"] if pcie else None

    for address in sorted(writes):
        entry = inventory[address]
        supported = entry["parsed"]["pcie"]["max_payload_supported"]
        if max_payload > supported:
            raise FixError("MaxPayload %d is more than %s supports (%d bytes in its DevCap): ask for %d or less"
                           % (max_payload, address, supported, supported), address=address)
        if entry["upstream"] is None:
            raise FixError("cannot check the ports above %s for MaxPayload %d: its sysfs link does not resolve below a "
                           "host bridge; leave max_payload unset" % (address, max_payload), address=address)
        for port in entry["upstream"]:
            pcie = inventory[port]["parsed"]["pcie"] if port in inventory else None
            if pcie is None or pcie.get("max_payload_supported") is None:
                raise FixError("MaxPayload support of the port %s above %s is unknown (no readable PCI Express "
                               "capability): cannot check MaxPayload %d; leave max_payload unset"
                               % (port, address, max_payload), address=address, port=port)
            if max_payload > pcie["max_payload_supported"]:
                raise FixError("MaxPayload %d is more than the port %s above %s supports (%d bytes in its DevCap): "
                               "ask for %d or less" % (max_payload, port, address, pcie["max_payload_supported"],
                                                       pcie["max_payload_supported"]), address=address, port=port)
    for address in sorted(writes):
        if payload_of(writes[address]["after"]) == payload_of(writes[address]["before"]):
            continue
        neighbours = []
        upstream = inventory[address]["upstream"]
        if upstream:
            neighbours.append(upstream[-1])
        for other in sorted(inventory):
            entry = inventory[other]
            if entry["upstream"] and entry["upstream"][-1] == address and entry["parsed"]["pcie"] is not None:
                neighbours.append(other)
        for other in neighbours:
            theirs = after(other)
            if theirs is None:
                raise FixError("MaxPayload of %s, on the link to %s, is unknown: cannot change MaxPayload of %s safely; "
                               "leave max_payload unset" % (other, address, address), address=address)
            if theirs != max_payload:
                raise FixError(
                    "MaxPayload %d on %s would differ from %d on %s at the other end of its link: a receiver drops "
                    "TLPs larger than its own MaxPayload as malformed; change the whole path in one task (add %s to "
                    "addresses) or leave max_payload unset" % (max_payload, address, theirs, other, other),
                    address=address, port=other)


# -- persisted files ---------------------------------------------------------------------------
# Paths, register names and the script parser (parse_script) live in _persist, shared with the
# persistence facts, so that the audit reads the script exactly as this module does.

def merge_entries(old, new):
    """``old`` with ``new`` laid over it bit by bit: a new mask's bits take the new value."""
    merged = dict(old)
    for key, (value, mask) in new.items():
        old_value, old_mask = merged.get(key, (0, 0))
        merged[key] = (((old_value & ~mask) | (value & mask)) & (old_mask | mask), old_mask | mask)
    return merged


def covers(entries, wanted):
    """True when every bit of every ``wanted`` entry is set to its value in ``entries``."""
    for key, (value, mask) in wanted.items():
        have_value, have_mask = entries.get(key, (0, 0))
        if have_mask & mask != mask or have_value & mask != value & mask:
            return False
    return True


def _entry_comment(register, value, mask):
    parts = []
    if register == DEVCTL_REG:
        if mask & READRQ_MASK:
            parts.append("MaxReadReq %s" % _size_text((value >> 12) & 7))
        if mask & PAYLOAD_MASK:
            parts.append("MaxPayload %s" % _size_text((value >> 5) & 7))
    elif register == ACSCTL_REG and mask & ACS_REDIRECT_MASK:
        parts.append(describe_acsctl(value).replace(" ", ", ") if mask == ACS_REDIRECT_MASK else "ACS bits")
    return ", ".join(parts) or "bits %04x" % mask


def render_script(entries):
    """The boot-time script for ``{(address, register): (value, mask)}`` (sorted, stable)."""
    lines = [
        "#!/bin/sh",
        "# Managed by Ansible (gpuhost.baseline.pcie_tune): edits are overwritten.",
        SCRIPT_MARKER,
        "# Re-applies PCIe Device Control (CAP_EXP+8) and ACS Control (ECAP_ACS+6) bits that the GPU host",
        "# baseline set at runtime. Run at boot by %s and, for one device, by the udev rule" % UNIT_NAME,
        "# %s when the device is added again or a driver binds to it." % UDEV_PATH,
        "# setpci writes VALUE:MASK, i.e. only the bits of MASK, so every other bit stays as the kernel set it.",
        "# Usage: gpuhost-pcie-apply [DDDD:BB:DD.F]   (no argument: every device below)",
        "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
        "only=\"${1:-}\"",
        "rc=0",
        "apply() {",
        "    [ -n \"$only\" ] && [ \"$only\" != \"$1\" ] && return 0",
        "    if [ ! -e \"/sys/bus/pci/devices/$1\" ]; then",
        "        echo \"gpuhost-pcie-apply: $1 is not present, skipped\" >&2",
        "        return 0",
        "    fi",
        "    if ! setpci -s \"$1\" \"$2=$3\"; then",
        "        echo \"gpuhost-pcie-apply: setpci -s $1 $2=$3 failed\" >&2",
        "        rc=1",
        "    fi",
        "}",
    ]
    for (address, register) in sorted(entries):
        value, mask = entries[(address, register)]
        lines.append("apply %s %s %04x:%04x  # %s" % (address, register, value, mask,
                                                      _entry_comment(register, value, mask)))
    lines.append("exit $rc")
    return "\n".join(lines) + "\n"


def render_unit():
    return "\n".join([
        "# Managed by Ansible (gpuhost.baseline.pcie_tune): edits are overwritten.",
        "[Unit]",
        "Description=Re-apply the PCIe tuning of the GPU host baseline (MaxReadReq, MaxPayload, ACS redirect)",
        "Documentation=https://github.com/gpuhost/baseline",
        "After=systemd-udevd.service systemd-modules-load.service",
        "ConditionPathExists=" + SCRIPT_PATH,
        "",
        "[Service]",
        "Type=oneshot",
        "RemainAfterExit=yes",
        "ExecStart=" + SCRIPT_PATH,
        "",
        "[Install]",
        "WantedBy=multi-user.target",
        "",
    ])


def render_udev(entries):
    """One rule per device of the script: ``add`` (hot-plug, rescan) and ``bind`` (driver probe)."""
    lines = [
        "# Managed by Ansible (gpuhost.baseline.pcie_tune): edits are overwritten.",
        "# Re-applies %s to a device when it is added again (hot-plug, rescan after a reset or" % SCRIPT_PATH,
        "# link recovery) or a driver binds to it (a driver probe may reprogram Device Control).",
    ]
    for address in sorted(set(address for address, _register in entries)):
        lines.append('ACTION=="add|bind", SUBSYSTEM=="pci", KERNEL=="%s", RUN+="%s %%k"' % (address, SCRIPT_PATH))
    return "\n".join(lines) + "\n"


# -- acting ------------------------------------------------------------------------------------

def _config_path(address):
    return "%s/%s/config" % (DEVICES_DIR, address)


def _open_config(host, address, flags):
    try:
        # the device directory is a sysfs link (resolved inside a snapshot root); config itself never is
        return os.open(host.path(_config_path(address), follow_last=False), flags | getattr(os, "O_NOFOLLOW", 0))
    except EnvironmentError as exc:
        raise FixError("cannot open %s for writing: %s; nothing was changed"
                       % (_config_path(address), errno_hint(exc)), address=address,
                       errno=errno.errorcode.get(exc.errno))


class ConfigWriter:
    """Two-byte register writes to sysfs ``config`` files, verified and undoable."""

    def __init__(self, host):
        self.host = host
        self.done = []

    def precheck(self, writes):
        """Open every file that will be written, before the first write (read-only sysfs, EACCES)."""
        for write in writes:
            os.close(_open_config(self.host, write["address"], os.O_RDWR))

    def write(self, write):
        fd = _open_config(self.host, write["address"], os.O_RDWR)
        try:
            raw = os.pread(fd, 2, write["offset"])
            if len(raw) != 2:
                raise FixError("cannot read %s of %s at 0x%x: the config file ended" %
                               (write["register"], write["address"], write["offset"]), address=write["address"])
            current = struct.unpack("<H", raw)[0]
            # read-modify-write on what the register holds now, not on what was planned from
            after = (current & ~write["mask"]) | (write["value"] & write["mask"])
            try:
                os.pwrite(fd, struct.pack("<H", after), write["offset"])
            except EnvironmentError as exc:
                raise FixError("cannot write %s of %s: %s" % (write["register"], write["address"], errno_hint(exc)),
                               address=write["address"])
            self.done.append((write, current))
            back = os.pread(fd, 2, write["offset"])
            readback = struct.unpack("<H", back)[0] if len(back) == 2 else None
        finally:
            os.close(fd)
        if readback is None or readback & write["mask"] != after & write["mask"]:
            raise FixError("%s of %s reads back %s after writing 0x%04x (mask 0x%04x): the device did not take the "
                           "value; it may not implement it, check dmesg" % (
                               write["register"], write["address"],
                               "nothing" if readback is None else "0x%04x" % readback, after, write["mask"]),
                           address=write["address"])
        write["after"] = readback
        return readback

    def undo(self):
        failed = []
        while self.done:
            write, old = self.done.pop()
            try:
                fd = _open_config(self.host, write["address"], os.O_RDWR)
                try:
                    os.pwrite(fd, struct.pack("<H", old), write["offset"])
                finally:
                    os.close(fd)
            except (EnvironmentError, FixError):
                failed.append("%s %s" % (write["address"], write["register"]))
        return failed


def _inventory(host):
    if not host.reader.isdir(DEVICES_DIR):
        raise FixError("%s does not exist under %s: no PCI devices to tune (is sysfs mounted?)"
                       % (DEVICES_DIR, host.reader.root))
    devices = gather(host.reader)["devices"]
    return devices


def _read_config(host, address):
    data = host.read_file(_config_path(address))
    if data is None:
        raise FixError("cannot read %s: the device has no config file" % _config_path(address), address=address)
    return data


def _persist_state(host, want_entries):
    script_text = to_text(host.read_file(SCRIPT_PATH))
    unit_text = to_text(host.read_file(UNIT_PATH))
    udev_text = to_text(host.read_file(UDEV_PATH))
    link = host.readlink(UNIT_LINK)
    have = parse_script(script_text)
    return {"script_text": script_text, "unit_text": unit_text, "udev_text": udev_text, "link": link,
            "entries": have, "covers": covers(have, want_entries)}


def _persisted_report(script_after, unit_after, udev_after, link_after, want_entries):
    entries = parse_script(script_after)
    return {
        "script": {"path": SCRIPT_PATH, "present": script_after is not None,
                   "matching": script_after is not None and script_after == render_script(entries) and bool(entries)},
        "unit": {"path": UNIT_PATH, "present": unit_after is not None, "matching": unit_after == render_unit()},
        "udev": {"path": UDEV_PATH, "present": udev_after is not None,
                 "matching": udev_after is not None and udev_after == render_udev(entries)},
        "enabled": link_after == UNIT_PATH,
        "covers": covers(entries, want_entries) and unit_after == render_unit() and link_after == UNIT_PATH
        and udev_after is not None and udev_after == render_udev(entries),
    }


def _device_report(dev, write, parsed):
    pcie = parsed["pcie"]
    before = write["before"] if write else pcie["devctl_raw"]
    after = write["after"] if write else before
    return {
        "address": dev["address"], "kind": dev["kind"],
        "devctl_before": "0x%04x" % before, "devctl_after": "0x%04x" % after,
        "max_read_request_before": SIZES[(before >> 12) & 7] if (before >> 12) & 7 < 6 else None,
        "max_read_request_after": SIZES[(after >> 12) & 7] if (after >> 12) & 7 < 6 else None,
        "max_payload_before": SIZES[(before >> 5) & 7] if (before >> 5) & 7 < 6 else None,
        "max_payload_after": SIZES[(after >> 5) & 7] if (after >> 5) & 7 < 6 else None,
        "max_payload_supported": pcie["max_payload_supported"],
        "changed": before != after,
    }


def _bridge_report(address, write):
    return {
        "address": address, "acsctl_before": "0x%04x" % write["before"], "acsctl_after": "0x%04x" % write["after"],
        "request_redirect_before": bool(write["before"] & 0x4), "request_redirect_after": bool(write["after"] & 0x4),
        "completion_redirect_before": bool(write["before"] & 0x8),
        "completion_redirect_after": bool(write["after"] & 0x8),
        "changed": write["before"] != write["after"],
    }


def _request(params):
    """The checked request of a task: sizes, selectors, ACS mode and bridge list."""
    req = {
        "max_read_request": params.get("max_read_request"),
        "max_payload": params.get("max_payload"),
        "acs_disable": params.get("acs_redirect") == "disable",
        "selectors": params.get("addresses") or params.get("vendor") or params.get("kinds"),
    }
    for name in ("max_read_request", "max_payload"):
        if req[name] is not None and req[name] not in SIZES:
            raise FixError("%s must be one of %s bytes, got %s" % (name, ", ".join(str(s) for s in SIZES), req[name]))
    sizes = req["max_read_request"] is not None or req["max_payload"] is not None
    if not sizes and not req["acs_disable"]:
        raise FixError("nothing to do: set max_read_request, max_payload or acs_redirect: disable")
    if sizes and not req["selectors"]:
        raise FixError("max_read_request/max_payload need devices: select them with addresses, vendor or kinds")
    if req["selectors"] and not sizes:
        raise FixError("addresses/vendor/kinds select devices for max_read_request or max_payload, and neither is set")
    acs_list = params.get("acs_bridges") or ["auto"]
    req["acs_auto"] = acs_list == ["auto"]
    req["acs_list"] = _addresses(acs_list, "acs_bridges") if req["acs_disable"] and not req["acs_auto"] else acs_list
    return req


def _plan_devices(host, devices, params, req):
    """``(inventory, writes, skipped)``: the Device Control writes of the selected devices, every
    read and check done before the first write (MaxPayload checked along each path)."""
    selected = select_devices(devices, params.get("addresses"), params.get("vendor"), params.get("kinds")) \
        if req["selectors"] else []
    explicit = set(_addresses(params.get("addresses"), "addresses"))
    inventory, writes, skipped = {}, {}, []
    for dev in selected:
        data = _read_config(host, dev["address"])
        parsed, cap = express_registers(dev["address"], data, dev["address"] in explicit)
        if cap is None:
            skipped.append({"address": dev["address"], "reason": "no PCI Express capability"})
            continue
        inventory[dev["address"]] = {"parsed": parsed, "upstream": dev.get("upstream"), "data": data}
        writes[dev["address"]] = plan_devctl(dev["address"], data, cap, req["max_read_request"], req["max_payload"])
    if not selected and req["selectors"]:
        raise FixError("no PCI device matches vendor %s and kinds %s: nothing to tune"
                       % (", ".join(params.get("vendor") or ["any"]), ", ".join(params.get("kinds") or ["any"])))
    if req["max_payload"] is not None:
        for dev in devices:
            if dev["address"] in inventory:
                continue
            try:
                data = _read_config(host, dev["address"])
            except FixError:
                continue
            inventory[dev["address"]] = {"parsed": parse_config(data), "upstream": dev.get("upstream"), "data": data}
        check_payload(inventory, writes, req["max_payload"])
    return inventory, writes, skipped


def _plan_bridges(host, devices, by_address, req):
    """``(acs_writes, acs_skipped)``: the ACS Control writes of ``acs_redirect: disable``."""
    acs_writes, acs_skipped = {}, []
    if not req["acs_disable"]:
        return acs_writes, acs_skipped
    bridges = auto_acs_bridges(devices) if req["acs_auto"] else req["acs_list"]
    missing = [address for address in bridges if address not in by_address]
    if missing:
        raise FixError("acs_bridges: PCI device %s does not exist in %s: check the address with lspci -D"
                       % (", ".join(missing), DEVICES_DIR), missing=missing)
    for address in bridges:
        if by_address[address].get("kind") != "bridge":
            raise FixError("acs_bridges: %s is a %s, not a PCI bridge: ACS redirect is a property of switch "
                           "and root ports" % (address, by_address[address].get("kind")), address=address)
        data = _read_config(host, address)
        write = plan_acs(address, data, parse_config(data), not req["acs_auto"])
        if write is None:
            acs_skipped.append({"address": address, "reason": "no ACS capability"})
        else:
            acs_writes[address] = write
    if req["acs_auto"] and not bridges:
        acs_skipped.append({"address": None, "reason": "no switch port lies between two GPUs or a GPU and a NIC"})
    return acs_writes, acs_skipped


def _plan_files(host, want, persist):
    """The boot-time files as they are (``before``) and as they should be (``after``):
    ``{"state", "after": {script, unit, udev, link}, "file_changes", "link_change"}``."""
    state = _persist_state(host, want)
    after = {"script": state["script_text"], "unit": state["unit_text"], "udev": state["udev_text"],
             "link": state["link"]}
    if persist:
        entries = merge_entries(state["entries"], want)
        after = {"script": render_script(entries), "unit": render_unit(), "udev": render_udev(entries),
                 "link": UNIT_PATH}
        if host.live and not host.module.get_bin_path("setpci"):
            raise FixError("setpci not found in PATH: the boot-time script %s needs it; install pciutils or set "
                           "persist: false" % SCRIPT_PATH)
    file_changes = [(path, before, new) for path, before, new in (
        (SCRIPT_PATH, state["script_text"], after["script"]),
        (UNIT_PATH, state["unit_text"], after["unit"]),
        (UDEV_PATH, state["udev_text"], after["udev"])) if before != new]
    return {"state": state, "after": after, "file_changes": file_changes, "link_change": after["link"] != state["link"]}


def _diff(runtime_writes, files):
    """The ``diff`` entries: registers (runtime), then each boot-time file and the unit link."""
    entries = []
    lines_before, lines_after = [], []
    for write in runtime_writes:
        describe = describe_devctl if write["register"] == DEVCTL_REG else describe_acsctl
        line = "%s %s 0x%04x %s\n"
        lines_before.append(line % (write["address"], write["register"], write["before"], describe(write["before"])))
        lines_after.append(line % (write["address"], write["register"], write["after"], describe(write["after"])))
    if runtime_writes:
        entries.append({"before_header": "PCI config space (runtime)", "after_header": "PCI config space (runtime)",
                        "before": "".join(lines_before), "after": "".join(lines_after)})
    for path, before, after in files["file_changes"]:
        entries.append(file_diff(path, before, after))
    if files["link_change"]:
        entries.append({"before_header": UNIT_LINK, "after_header": UNIT_LINK,
                        "before": "%s\n" % (files["state"]["link"] or "(absent)"),
                        "after": "-> %s\n" % files["after"]["link"]})
    return entries


def _act(host, runtime_writes, files):
    """Write the registers, then the files; on a failure put the registers written back."""
    writer = ConfigWriter(host)
    writer.precheck(runtime_writes)
    try:
        for write in runtime_writes:
            writer.write(write)
        for path, _before, after in files["file_changes"]:
            host.write_file(path, to_bytes(after), mode=0o755 if path == SCRIPT_PATH else 0o644)
        if files["link_change"]:
            host.symlink(UNIT_LINK, UNIT_PATH)
        _commands(host, files["file_changes"], files["link_change"])
    except FixError as exc:
        wrote = len(writer.done)
        undone = writer.undo()
        if undone:
            exc.msg += "; could not put back the register(s) %s: check them with lspci -vvv" % ", ".join(undone)
        elif wrote:
            exc.msg += "; the %d register write(s) of this task were put back" % wrote
        raise


def apply(host, params, diff=False):
    """Decide and (outside check mode) act; returns the module result (see the module's RETURN)."""
    req = _request(params)
    devices = _inventory(host)
    by_address = dict((dev["address"], dev) for dev in devices)
    inventory, writes, skipped = _plan_devices(host, devices, params, req)
    acs_writes, acs_skipped = _plan_bridges(host, devices, by_address, req)
    runtime_writes = [w for w in list(writes.values()) + list(acs_writes.values()) if w["before"] != w["after"]]
    want = dict(((w["address"], w["register"]), (w["value"], w["mask"]))
                for w in list(writes.values()) + list(acs_writes.values()))
    files = _plan_files(host, want, params.get("persist"))
    after, state = files["after"], files["state"]

    def runtime_report():
        return {"devices": [_device_report(by_address[a], writes[a], inventory[a]["parsed"]) for a in sorted(writes)],
                "bridges": [_bridge_report(a, acs_writes[a]) for a in sorted(acs_writes)],
                "skipped": skipped + acs_skipped}

    result = {
        "changed": bool(runtime_writes or files["file_changes"] or files["link_change"]),
        "runtime": runtime_report(),
        "persisted": _persisted_report(after["script"], after["unit"], after["udev"], after["link"], want),
        "persisted_before": _persisted_report(state["script_text"], state["unit_text"], state["udev_text"],
                                              state["link"], want),
        "warnings": [],
    }
    if req["acs_disable"] and acs_writes:
        result["warnings"].append(
            "ACS request/completion redirect %s disabled on %s: peer traffic below these ports is no longer checked "
            "by the IOMMU; never do this on a host that passes devices to VMs"
            % ("would be" if host.check_mode else "is", ", ".join(sorted(acs_writes))))
    if diff:
        result["diff"] = _diff(runtime_writes, files)
    if host.check_mode:
        _commands(host, files["file_changes"], files["link_change"])
        return result
    _act(host, runtime_writes, files)
    result["runtime"] = runtime_report()  # the registers as read back after the writes
    return result


def _commands(host, file_changes, link_change):
    paths = [path for path, _b, _a in file_changes]
    if UNIT_PATH in paths or link_change:
        host.run(["systemctl", "daemon-reload"], "so systemd does not know the new %s yet" % UNIT_NAME)
    if UDEV_PATH in paths:
        host.run(list(UDEV_RELOAD), "so udev has not read %s yet" % UDEV_PATH)


#: The module's own options (pcie_tune; host_fix's steps with module pcie_tune), besides root and backup.
ARGUMENT_SPEC = dict(
    addresses=dict(type="list", elements="str"),
    vendor=dict(type="list", elements="str"),
    kinds=dict(type="list", elements="str", choices=list(KINDS)),
    max_read_request=dict(type="int", choices=SIZES),
    max_payload=dict(type="int", choices=SIZES),
    acs_redirect=dict(type="str", choices=["keep", "disable"], default="keep"),
    acs_bridges=dict(type="list", elements="str", default=["auto"]),
    persist=dict(type="bool", default=True),
)
REQUIRED_ONE_OF = []


def apply_params(host, p, diff=False):
    """:func:`apply` with the module's validated options ``p``."""
    return apply(host, p, diff)
