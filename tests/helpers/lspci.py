"""lspci as the reference decoder of PCI configuration space, for tests.

* :func:`parse_dump` reads the hex-dump format of ``lspci -x``/``-xxx``/``-xxxx`` that
  ``lspci -F FILE`` accepts (a device line ``[DDDD:]BB:DD.F ...`` followed by lines
  ``xx: hh hh ...``; anything else is ignored, like lspci does).
* :func:`write_dump` writes ``{address: bytes}`` back in that format.
* :func:`parse_verbose` reads what ``lspci -vvv`` prints about the PCI Express, ACS and
  AER capabilities into the vocabulary of ``facts.pci.parse_config``.
* :func:`lspci_crosscheck` decodes the same bytes with lspci and with ``parse_config``
  and asserts that they agree, field by field.
"""
import os
import re
import subprocess
import tempfile

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.pci import parse_config

_DEVICE_LINE = re.compile(r"^(?:([0-9a-fA-F]{4,8}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])(?:\s|$)")
_HEX_LINE = re.compile(r"^([0-9a-fA-F]{1,4}):((?:\s+[0-9a-fA-F]{2})+)\s*$")
_CAP_LINE = re.compile(r"^\tCapabilities: \[([0-9a-f]+)(?: v(\d+))?\] (.*)$")
_LABEL_LINE = re.compile(r"^\t\t([A-Za-z0-9]+):\s*(.*)$")

#: lspci's spelling of the Device/Port Type -> parse_config's.
PORT_TYPES = {
    "Endpoint": "endpoint",
    "Legacy Endpoint": "legacy_endpoint",
    "Root Port": "root_port",
    "Upstream Port": "upstream_port",
    "Downstream Port": "downstream_port",
    "PCI-Express to PCI/PCI-X Bridge": "pcie_to_pci_bridge",
    "PCI/PCI-X to PCI-Express Bridge": "pci_to_pcie_bridge",
    "Root Complex Integrated Endpoint": "rc_integrated_endpoint",
    "Root Complex Event Collector": "rc_event_collector",
}

#: lspci's ACS flag names -> parse_config's.
ACS_FLAGS = (
    ("SrcValid", "source_validation"),
    ("TransBlk", "translation_blocking"),
    ("ReqRedir", "request_redirect"),
    ("CmpltRedir", "completion_redirect"),
    ("UpstreamFwd", "upstream_forwarding"),
    ("EgressCtrl", "egress_control"),
    ("DirectTrans", "direct_translated"),
)


def normalise_address(domain, bus, dev, fn):
    return "%04x:%02x:%02x.%d" % (int(domain or "0", 16), int(bus, 16), int(dev, 16), int(fn))


def parse_dump(text):
    """``{address: bytes}`` of every device in an lspci hex dump, in file order."""
    devices = {}
    current = None
    for line in text.splitlines():
        match = _DEVICE_LINE.match(line)
        if match:
            current = normalise_address(*match.groups())
            devices[current] = bytearray()
            continue
        match = _HEX_LINE.match(line)
        if match and current is not None:
            offset = int(match.group(1), 16)
            values = bytes(int(item, 16) for item in match.group(2).split())
            buf = devices[current]
            if len(buf) < offset + len(values):
                buf.extend(b"\0" * (offset + len(values) - len(buf)))
            buf[offset:offset + len(values)] = values
    return dict((address, bytes(buf)) for address, buf in devices.items())


def write_dump(config_by_address, path):
    """Write ``{address: bytes}`` as an lspci -F dump (rows of 16 bytes)."""
    lines = []
    for address, data in sorted(config_by_address.items()):
        lines.append("%s Device under test" % address)
        for offset in range(0, len(data), 16):
            row = data[offset:offset + 16]
            lines.append("%02x: %s" % (offset, " ".join("%02x" % byte for byte in row)))
        lines.append("")
    with open(path, "w") as handle:
        handle.write("\n".join(lines))


def run_lspci(dump_path):
    """``lspci -D -F DUMP -vvv`` stdout (``-D``: always print the domain)."""
    proc = subprocess.run(
        ["lspci", "-D", "-F", dump_path, "-vvv"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False,
    )
    assert proc.returncode == 0, "lspci -F %s failed: %s" % (dump_path, proc.stderr)
    return proc.stdout


def _flag(text, name):
    match = re.search(r"(?:^|\s)%s([+-])" % re.escape(name), text)
    assert match, "no %s+/- in %r" % (name, text)
    return match.group(1) == "+"


def _size(text):
    value = int(text)
    # lspci prints the reserved encodings 6 and 7 as 8192/16384; the spec has no such size.
    return value if value <= 4096 else None


def _speed(text):
    return None if text.startswith("unknown") else text


def _decode_express(cap_text, labels):
    match = re.match(r"Express \(v(\d+)\) (.*?)(?: \(Slot[+-]\))?, MSI [0-9a-f]+$", cap_text)
    assert match, "unrecognised Express capability line %r" % cap_text
    decoded = {"version": int(match.group(1)), "port_type": PORT_TYPES.get(match.group(2))}
    if "DevCap" in labels:
        found = re.search(r"MaxPayload (\d+) bytes", labels["DevCap"])
        decoded["max_payload_supported"] = _size(found.group(1))
    if "DevCtl" in labels:
        text = labels["DevCtl"]
        decoded["relaxed_ordering"] = _flag(text, "RlxdOrd")
        decoded["extended_tag"] = _flag(text, "ExtTag")
        decoded["no_snoop"] = _flag(text, "NoSnoop")
        found = re.search(r"MaxPayload (\d+) bytes, MaxReadReq (\d+) bytes", text)
        decoded["max_payload"] = _size(found.group(1))
        decoded["max_read_request"] = _size(found.group(2))
    for label, prefix in (("LnkCap", "link_cap_"), ("LnkSta", "link_")):
        if label in labels:
            found = re.search(r"Speed ([^,]+?)(?: \([a-z]+\))?, Width x(\d+)", labels[label])
            assert found, "unrecognised %s %r" % (label, labels[label])
            decoded[prefix + "speed"] = _speed(found.group(1))
            decoded[prefix + "width"] = int(found.group(2))
    return decoded


def parse_verbose(text):
    """What ``lspci -vvv`` says per device about Express, ACS and AER.

    ``{address: {"express_offset", "express" (dict of parse_config's pcie keys that lspci
    printed) or None, "acs" ({"cap", "ctl"}) or None, "aer" (bool), "access_denied" (bool),
    "labels" (Express register lines)}}``.
    """
    devices = {}
    device = None
    cap = None
    label = None
    for line in text.splitlines():
        match = _DEVICE_LINE.match(line)
        if match:
            device = {
                "express_offset": None, "express_line": None, "express": None, "acs_labels": {},
                "aer": False, "access_denied": False, "labels": {},
            }
            devices[normalise_address(*match.groups())] = device
            cap = label = None
            continue
        if device is None:
            continue
        if line.startswith("\tCapabilities: <access denied>"):
            device["access_denied"] = True
            cap = label = None
            continue
        match = _CAP_LINE.match(line)
        if match:
            offset, name = int(match.group(1), 16), match.group(3)
            label = None
            if name.startswith("Express (") and device["express_offset"] is None:
                cap = "express"
                device["express_offset"] = offset
                device["express_line"] = name
            elif name.startswith("Access Control Services"):
                cap = "acs"
            else:
                cap = "other"
                if name.startswith("Advanced Error Reporting"):
                    device["aer"] = True
            continue
        if not line.startswith("\t\t"):
            cap = label = None
            continue
        match = _LABEL_LINE.match(line)
        target = {"express": device["labels"], "acs": device["acs_labels"]}.get(cap)
        if match:
            label = match.group(1)
            if target is not None:
                target[label] = match.group(2)
        elif line.startswith("\t\t\t") and target is not None and label in target:
            target[label] += " " + line.strip()
    for device in devices.values():
        if device["express_line"] is not None:
            device["express"] = _decode_express(device["express_line"], device["labels"])
        acs = device.pop("acs_labels")
        if "ACSCap" in acs and "ACSCtl" in acs:
            device["acs"] = {
                "cap": dict((ours, _flag(acs["ACSCap"], theirs)) for theirs, ours in ACS_FLAGS),
                "ctl": dict((ours, _flag(acs["ACSCtl"], theirs)) for theirs, ours in ACS_FLAGS),
            }
        else:
            device["acs"] = None
    return devices


_LABEL_FIELDS = {
    "DevCap": ("max_payload_supported",),
    "DevCtl": ("relaxed_ordering", "extended_tag", "no_snoop", "max_payload", "max_read_request"),
    "LnkCap": ("link_cap_speed", "link_cap_width"),
    "LnkSta": ("link_speed", "link_width"),
}


def compare(address, data, reference):
    """Assert that ``parse_config(data)`` agrees with lspci's ``reference`` for one device.

    Returns the number of Express fields compared (0 for a device without Express).
    """
    ours = parse_config(data)
    where = "%s (%d bytes)" % (address, len(data))
    compared = 0
    if reference["express"] is None:
        assert ours["pcie"] is None, "%s: lspci shows no Express capability, we decoded %r" % (where, ours["pcie"])
        assert ours["pcie_cap_offset"] is None, where
    else:
        assert ours["pcie"] is not None, "%s: lspci shows %r, we found none (%s)" % (
            where, reference["express_line"], ours["reason"])
        assert ours["pcie_cap_offset"] == reference["express_offset"], where
        theirs = reference["express"]
        for key in ("version", "port_type"):
            assert ours["pcie"][key] == theirs[key], "%s: %s ours %r, lspci %r" % (where, key, ours["pcie"][key], theirs[key])
            compared += 1
        for label, keys in _LABEL_FIELDS.items():
            for key in keys:
                if label in reference["labels"]:
                    assert ours["pcie"][key] == theirs[key], "%s: %s ours %r, lspci %r (%s: %s)" % (
                        where, key, ours["pcie"][key], theirs[key], label, reference["labels"][label])
                    compared += 1
                elif len(data) >= 256:
                    # lspci prints no such line when the registers do not exist. (From a shorter
                    # read it also drops lines whose registers we could read: it fetches the whole
                    # capability structure at once, so there is nothing to compare then.)
                    assert ours["pcie"][key] is None, "%s: lspci prints no %s but we decoded %s=%r" % (
                        where, label, key, ours["pcie"][key])
    assert ours["acs"] == reference["acs"], "%s: ACS ours %r, lspci %r" % (where, ours["acs"], reference["acs"])
    if reference["aer"]:
        assert ours["aer"] is True, "%s: lspci shows AER, we say %r" % (where, ours["aer"])
    else:
        assert ours["aer"] is not True, "%s: lspci shows no AER, we say present" % where
        if len(data) > 256 and ours["extended_capabilities"] is not None:
            assert ours["aer"] is False, where
    if reference["access_denied"]:
        assert ours["reason"] and "need root" in ours["reason"], where
    return compared


def lspci_crosscheck(config_by_address):
    """Decode ``{address: bytes}`` with lspci and parse_config; assert they agree.

    Returns ``{"devices": n, "express": n with an Express capability, "fields": n compared}``.
    """
    fd, path = tempfile.mkstemp(prefix="lspci-crosscheck-", suffix=".dump")
    os.close(fd)
    try:
        write_dump(config_by_address, path)
        reference = parse_verbose(run_lspci(path))
    finally:
        os.unlink(path)
    assert sorted(reference) == sorted(config_by_address), "lspci decoded %s, we wrote %s" % (
        sorted(reference), sorted(config_by_address))
    summary = {"devices": 0, "express": 0, "fields": 0}
    for address, data in sorted(config_by_address.items()):
        summary["devices"] += 1
        if reference[address]["express"] is not None:
            summary["express"] += 1
        summary["fields"] += compare(address, data, reference[address])
    return summary
