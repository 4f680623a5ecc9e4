"""Encoder for PCI configuration space, from a description to the bytes sysfs shows.

Independent of the collection's parser (plugins/module_utils/facts/pci.py) on purpose: the
two meet only through ``lspci``, the reference decoder. Offsets follow the PCI Local Bus
3.0 header layouts and the PCI Express Base Specification (capability structure,
Advanced Error Reporting and Access Control Services extended capabilities).

Layout used for every PCI Express function (fixed, so tests can reason about it):
``0x40`` Power Management, ``0x50`` MSI (64-bit, per-vector masking), ``0x70`` PCI
Express capability v2, then ``0x100`` AER v2 and, when present, ``0x148`` ACS.
Conventional functions (host bridges) carry no capabilities and 256 bytes.
"""

import struct

CAP_PM = 0x01
CAP_MSI = 0x05
CAP_EXP = 0x10
ECAP_AER = 0x0001
ECAP_ACS = 0x000D

PM_AT = 0x40
MSI_AT = 0x50
EXP_AT = 0x70
AER_AT = 0x100
ACS_AT = 0x148

#: Device/Port Type field (PCIe capability register bits 7:4).
PORT_TYPES = {
    "endpoint": 0x0,
    "legacy_endpoint": 0x1,
    "root_port": 0x4,
    "upstream_port": 0x5,
    "downstream_port": 0x6,
    "pcie_to_pci_bridge": 0x7,
    "pci_to_pcie_bridge": 0x8,
    "rc_integrated_endpoint": 0x9,
    "rc_event_collector": 0xA,
}

#: ACS capability/control bit per name (same bit in both registers).
ACS_BITS = {
    "source_validation": 0x01,
    "translation_blocking": 0x02,
    "request_redirect": 0x04,
    "completion_redirect": 0x08,
    "upstream_forwarding": 0x10,
    "egress_control": 0x20,
    "direct_translated": 0x40,
}

#: Link speed code per generation (LnkCap/LnkSta "speed" field): gen -> text.
LINK_SPEEDS = {1: "2.5GT/s", 2: "5GT/s", 3: "8GT/s", 4: "16GT/s", 5: "32GT/s", 6: "64GT/s"}

SIZES = (128, 256, 512, 1024, 2048, 4096)


def size_code(nbytes):
    """128 -> 0 ... 4096 -> 5: the 3-bit encoding of payload and read request sizes."""
    if nbytes not in SIZES:
        raise ValueError("PCIe payload/read request size must be one of %s, not %r" % (SIZES, nbytes))
    return SIZES.index(nbytes)


class Pcie:
    """Settings of the PCI Express capability of one function (sizes in bytes, speeds as gen)."""

    def __init__(self, port_type="endpoint", mps_supported=256, mps=256, mrrs=512,
                 relaxed_ordering=True, extended_tag=True, no_snoop=True,
                 link_cap_gen=5, link_cap_width=16, link_gen=None, link_width=None,
                 slot=None, port_number=0, flr=None):
        if port_type not in PORT_TYPES:
            raise ValueError("unknown PCIe port type %r" % (port_type,))
        self.port_type = port_type
        self.mps_supported = mps_supported
        self.mps = mps
        self.mrrs = mrrs
        self.relaxed_ordering = relaxed_ordering
        self.extended_tag = extended_tag
        self.no_snoop = no_snoop
        self.link_cap_gen = link_cap_gen
        self.link_cap_width = link_cap_width
        self.link_gen = link_cap_gen if link_gen is None else link_gen
        self.link_width = link_cap_width if link_width is None else link_width
        self.slot = slot  # physical slot number for root/downstream ports with a slot
        self.port_number = port_number
        self.flr = port_type == "endpoint" if flr is None else flr

    @property
    def is_port(self):
        return self.port_type in ("root_port", "downstream_port", "upstream_port")


class Function:
    """Everything the encoder needs to know about one PCI function."""

    def __init__(self, vendor, device, class_code, revision=0, header_type=0,
                 multifunction=False, subsys_vendor=0, subsys_device=0,
                 primary_bus=0, secondary_bus=0, subordinate_bus=0,
                 pcie=None, aer=True, acs_cap=(), acs_ctl=(), bars=(), irq_pin=1):
        self.vendor = vendor
        self.device = device
        self.class_code = class_code
        self.revision = revision
        self.header_type = header_type
        self.multifunction = multifunction
        self.subsys_vendor = subsys_vendor
        self.subsys_device = subsys_device
        self.primary_bus = primary_bus
        self.secondary_bus = secondary_bus
        self.subordinate_bus = subordinate_bus
        self.pcie = pcie
        self.aer = aer and pcie is not None
        self.acs_cap = tuple(acs_cap)
        self.acs_ctl = tuple(acs_ctl)
        self.bars = tuple(bars)
        self.irq_pin = irq_pin

    @property
    def full_size(self):
        """Bytes root reads from sysfs: 4096 with PCIe extended space, else 256."""
        return 4096 if self.pcie is not None else 256


def _bits(names):
    value = 0
    for name in names:
        value |= ACS_BITS[name]
    return value


def _put(buf, offset, fmt, *values):
    struct.pack_into("<" + fmt, buf, offset, *values)


def _header(buf, fn):
    has_caps = fn.pcie is not None
    _put(buf, 0x00, "HH", fn.vendor, fn.device)
    # Command: I/O + memory decode and bus mastering for bridges; memory + bus master and
    # INTx disabled (MSI in use) for endpoints.
    command = 0x0007 if fn.header_type == 1 else 0x0406
    status = 0x0010 if has_caps else 0x0000
    _put(buf, 0x04, "HH", command, status)
    _put(buf, 0x08, "B", fn.revision)
    _put(buf, 0x09, "BBB", fn.class_code & 0xFF, (fn.class_code >> 8) & 0xFF, (fn.class_code >> 16) & 0xFF)
    _put(buf, 0x0C, "BBBB", 0x10, 0x00, fn.header_type | (0x80 if fn.multifunction else 0), 0)
    if fn.header_type == 0:
        for index, value in enumerate(fn.bars[:6]):
            _put(buf, 0x10 + 4 * index, "I", value & 0xFFFFFFFF)
        _put(buf, 0x2C, "HH", fn.subsys_vendor, fn.subsys_device)
        # Host bridges and other conventional functions raise no INTx.
        _put(buf, 0x3C, "BB", 0xFF, fn.irq_pin if has_caps else 0)
    else:
        _put(buf, 0x18, "BBBB", fn.primary_bus, fn.secondary_bus, fn.subordinate_bus, 0)
        # Windows closed (base above limit): lspci prints them as [disabled].
        _put(buf, 0x1C, "BB", 0xF1, 0x01)
        _put(buf, 0x20, "HH", 0xFFF0, 0x0000)
        _put(buf, 0x24, "HH", 0xFFF1, 0x0001)
        _put(buf, 0x28, "II", 0xFFFFFFFF, 0x00000000)
        _put(buf, 0x3C, "BB", 0xFF, 0)
        _put(buf, 0x3E, "H", 0x0002)  # bridge control: SERR# forwarding
    _put(buf, 0x34, "B", PM_AT if has_caps else 0)


def _capabilities(buf, fn):
    pcie = fn.pcie
    # Power Management v3, D0, no soft reset on D3hot->D0.
    pmc = 0xC803 if fn.header_type == 1 else 0x0003
    _put(buf, PM_AT, "BBHH", CAP_PM, MSI_AT, pmc, 0x0008)
    # MSI: 64-bit, per-vector masking, 32 vectors capable, enabled with one vector.
    _put(buf, MSI_AT, "BBH", CAP_MSI, EXP_AT, 0x0181 | (5 << 1))
    _put(buf, MSI_AT + 4, "IIH", 0xFEE00000, 0x00000000, 0x4020)
    _put(buf, MSI_AT + 0x10, "II", 0xFFFFFFFE, 0)

    at = EXP_AT
    flags = 0x2 | (PORT_TYPES[pcie.port_type] << 4)
    if pcie.slot is not None:
        flags |= 0x0100
    _put(buf, at, "BBH", CAP_EXP, 0x00, flags)

    devcap = size_code(pcie.mps_supported) | (0x20 if pcie.extended_tag else 0)
    devcap |= (0x7 << 6) | (0x7 << 9)  # acceptable L0s/L1 latency: no limit
    devcap |= 1 << 15  # role-based error reporting
    if pcie.flr:
        devcap |= 1 << 28
    _put(buf, at + 0x04, "I", devcap)

    devctl = 0x000E  # non-fatal, fatal and unsupported-request reporting
    if pcie.relaxed_ordering:
        devctl |= 1 << 4
    devctl |= size_code(pcie.mps) << 5
    if pcie.extended_tag:
        devctl |= 1 << 8
    if pcie.no_snoop:
        devctl |= 1 << 11
    devctl |= size_code(pcie.mrrs) << 12
    _put(buf, at + 0x08, "HH", devctl, 0x0000)

    lnkcap = pcie.link_cap_gen | (pcie.link_cap_width << 4)
    lnkcap |= 0x2 << 10  # ASPM L1 supported
    lnkcap |= 0x6 << 15  # L1 exit latency 32-64 us
    if pcie.port_type in ("root_port", "downstream_port"):
        lnkcap |= (1 << 20) | (1 << 21)  # DLL link active reporting, bandwidth notification
    lnkcap |= (pcie.port_number & 0xFF) << 24
    lnkctl = 0x0040 if not pcie.is_port or pcie.port_type == "upstream_port" else 0x0000
    lnksta = pcie.link_gen | (pcie.link_width << 4) | 0x1000  # slot clock configuration
    if pcie.port_type in ("root_port", "downstream_port"):
        lnksta |= 0x2000  # data link layer link active
    _put(buf, at + 0x0C, "IHH", lnkcap, lnkctl, lnksta)

    if pcie.slot is not None:
        _put(buf, at + 0x14, "IHH", (pcie.slot & 0x1FFF) << 19, 0x0000, 0x0040)
    devcap2 = 0x0000001F  # completion timeout ranges A-D, disable supported
    if pcie.is_port:
        devcap2 |= 1 << 5  # ARI forwarding
    if pcie.link_cap_gen >= 4:
        devcap2 |= (1 << 16) | (1 << 17)  # 10-bit tag completer/requester
    _put(buf, at + 0x24, "IHH", devcap2, 0x0000, 0x0000)
    speeds = ((1 << pcie.link_cap_gen) - 1) << 1
    # Equalization ran once at 8GT/s or above; a later downtrain does not undo it.
    lnksta2 = 0x001E if pcie.link_cap_gen >= 3 else 0x0000
    _put(buf, at + 0x2C, "IHH", speeds, pcie.link_cap_gen, lnksta2)


def _extended(buf, fn):
    acs = bool(fn.acs_cap)
    if fn.aer:
        next_at = ACS_AT if acs else 0
        _put(buf, AER_AT, "I", ECAP_AER | (2 << 16) | (next_at << 20))
        _put(buf, AER_AT + 0x04, "III", 0, 0, 0x00462030)  # status, mask, default severity
        _put(buf, AER_AT + 0x10, "III", 0, 0x00002000, 0x000000A0)  # advisory non-fatal masked; ECRC capable
        if fn.pcie.port_type == "root_port":
            _put(buf, AER_AT + 0x2C, "III", 0x00000007, 0, 0)
    if acs:
        at = ACS_AT if fn.aer else AER_AT  # ACS alone starts the extended list
        _put(buf, at, "I", ECAP_ACS | (1 << 16))
        _put(buf, at + 4, "HH", _bits(fn.acs_cap), _bits(fn.acs_ctl))


def encode(fn, size=None):
    """Config space of ``fn`` as the first ``size`` bytes (default: what root reads).

    ``size=64`` gives what an unprivileged read of sysfs ``config`` returns.
    """
    full = bytearray(fn.full_size)
    _header(full, fn)
    if fn.pcie is not None:
        _capabilities(full, fn)
        _extended(full, fn)
    if size is None:
        size = fn.full_size
    return bytes(full[:size])


def snapshot_dump(snapshot_dir):
    """``lspci -F`` text for every device of a snapshot directory, from its config files.

    Works on generated and captured snapshots alike; devices whose ``config`` is missing
    or empty are left out (lspci cannot decode them and would stop).
    """
    import os

    base = os.path.join(snapshot_dir, "sys", "bus", "pci", "devices")
    entries = []
    for address in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        path = os.path.join(base, address, "config")
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        if data:
            entries.append((address, "device", data))
    return lspci_dump(entries)


def lspci_dump(entries):
    """Text for ``lspci -F FILE``: ``[(address, description, config_bytes), ...]``.

    ``address`` is ``dddd:bb:dd.f``; lines follow pciutils' dump format (address and
    text, then 16 bytes per line prefixed by the offset), one blank line per device.
    """
    out = []
    for address, description, data in entries:
        out.append("%s %s" % (address, description))
        for offset in range(0, len(data), 16):
            chunk = data[offset:offset + 16]
            out.append("%02x: %s" % (offset, " ".join("%02x" % b for b in chunk)))
        out.append("")
    return "\n".join(out) + "\n"
