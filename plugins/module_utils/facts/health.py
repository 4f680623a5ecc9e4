# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU and fabric health: Xid events, NVLink, Fabric Manager, RDMA ports, GPUDirect, EDAC.

Passive and cheap: nothing here loads the GPUs or the network. The parsers are pure functions
over text that never raise; :func:`gather` reads through a :class:`host.root.Root` and builds
the ``health`` section of docs/facts.md. Judging (which Xid codes matter, what a link or a port
should look like) is the controller's (``plugins/plugin_utils/derive/derive_health.py``).

Sources of the formats (real outputs are quoted in tests/fixtures/health/README.md):

* ``NVRM: Xid (PCI:0000:41:00): 79, pid=..., name=..., GPU has fallen off the bus.``: the NVIDIA
  driver's kernel log line (https://docs.nvidia.com/deploy/xid-errors/index.html); older drivers
  write no ``pid=`` and ``(0000:41:00)`` without ``PCI:``.
* Faults without an Xid number: ``NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus.``; the
  newer drivers' multi-line ``NVRM: The NVIDIA GPU 0000:b3:00.0`` / ``NVRM: (PCI ID: 10de:26b5)
  installed in this system has`` / ``NVRM: fallen off the bus and is not responding to commands.``
  (one kernel record: the lines after the first carry no timestamp and are indented); the
  probe and initialisation failures ``NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x22:0x56:894)``
  and ``NVRM: GPU 0000:01:00.0: rm_init_adapter failed, device minor number 0`` (older drivers
  name no GPU: ``NVRM: RmInitAdapter failed! (...)``).
* NVSwitch events: ``nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 44 ...``
  (or ``Fatal,``), with ``Data {...}`` and ``Severity 0 ...`` lines of the same code after it
  (https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html, "NVSwitch SXid
  errors").
* ``nvidia-smi nvlink -s``: ``GPU 0: <name> (UUID: GPU-...)`` then ``\\t Link N: 26.562 GB/s`` or
  ``Link N: <inactive>``; a GPU without NVLink gets ``NVML: Unable to retrieve NVLink information:
  Not Supported``, one whose links are all down ``... as all links are inActive``.
* ``/sys/class/infiniband/<dev>/ports/<n>/{state,phys_state,rate,link_layer}``: ``4: ACTIVE``,
  ``5: LinkUp``, ``400 Gb/sec (4X NDR)``, ``InfiniBand`` or ``Ethernet``
  (https://www.kernel.org/doc/Documentation/ABI/stable/sysfs-class-infiniband).
* ``/sys/devices/system/edac/mc/mcN/{ce_count,ue_count}`` and ``dimmN/dimm_{ce,ue}_count``
  (https://docs.kernel.org/admin-guide/ras.html).
"""

from __future__ import absolute_import, division, print_function

import posixpath
import re

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.counters import gather as gather_counters
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import COMMAND_ARGV

__metaclass__ = type

SUBSYSTEM = "health"

NVIDIA_VERSION_PATH = "/proc/driver/nvidia/version"
PCI_DEVICES = "/sys/bus/pci/devices"
INFINIBAND_DIR = "/sys/class/infiniband"
EDAC_MC_DIR = "/sys/devices/system/edac/mc"
#: kernel modules that give GPUDirect RDMA through the peer-memory interface
PEERMEM_MODULES = ("nvidia_peermem", "nv_peer_mem")
#: ``journalctl -n``: the newest kernel messages of the boot that are read (bounded output)
KERNEL_LOG_LINES = int(COMMAND_ARGV["kernel-log"][-1])

#: first line of a stored (reduced) kernel log capture: how many lines the host's log had. Counts
#: are at most 12 digits (int() of thousands of digits raises, or takes quadratic time).
_HEADER_RE = re.compile(r"# gpuhost\.baseline kernel log: (\d{1,12}) lines? read from ([^\n]{1,200}?), "
                        r"(\d{1,12}) kept[^\S\n]*(?:\n|\Z)")
_HEADER = "# gpuhost.baseline kernel log: %d lines read from %s, %d kept\n"
#: (GPU, Xid code) pairs kept in ``by_gpu``: a host has a few GPUs and a few dozen codes exist. A
#: log naming more (a flood written to /dev/kmsg) has its events counted, not kept pair by pair.
MAX_XID_ENTRIES = 1024
#: the lines not understood kept as examples (HEALTH-025 shows them on the host's report)
UNPARSED_EXAMPLES = 3
#: Xid lines read one by one: as many as the kernel log lines a live read returns. A capture with
#: more (only a hostile snapshot holds them) has the rest counted, not read.
MAX_XID_LINES = KERNEL_LOG_LINES
#: the kernel log is read a megabyte at a time (never a list of every line: 64 MiB of blank lines
#: would be 512 MiB of pointers)
_PIECE = 1 << 20

_XID_MARK = "NVRM: Xid"
#: GPU firmware (GSP) faults and reset-required states the driver logs without an Xid number on the
#: line (the format strings of NVIDIA/open-gpu-kernel-modules, kernel_gsp.c and vgpu/rpc.c): the words
#: of a line -> its kind, the first that matches winning (a "GSP RPC timeout ... GPU marked for reset"
#: assertion is a reset required)
_GSP_MARKS = (
    (("NV_ERR_RESET_REQUIRED", "GPU marked for reset", "needs to be reset", "need to be reset"), "reset_required"),
    (("GSP RPC timeout", "rpcRecvPoll timedout", "eartbeat timed out"), "gsp_timeout"),
    (("GspRmAlloc failed", "GspRmControl failed", "GspRmFree failed"), "gsp_rpc_failed"),
)
#: what makes a kernel log line one the audit keeps (and a snapshot stores): Xid and SXid events,
#: a GPU fallen off the bus or failing to initialise, the first line of the multi-line
#: "The NVIDIA GPU <address> ... fallen off the bus" message, and the GSP and reset lines above
_MARKS = (_XID_MARK, "SXid (", "fallen off the bus", "RmInitAdapter failed", "rm_init_adapter failed",
          "NVRM: The NVIDIA GPU") + tuple(mark for marks, unused_kind in _GSP_MARKS for mark in marks)
_MARK_RE = re.compile("|".join(re.escape(m) for m in _MARKS))
_ADDR = r"([0-9A-Fa-f]{1,8}):([0-9A-Fa-f]{1,2}):([0-9A-Fa-f]{1,2})(?:\.([0-7]))?"
_STAMP = r"(?:\s*\[\s*(\d{1,12}\.\d{1,9})\])?"
# NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus. / NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (...)
# NVRM: The NVIDIA GPU 0000:b3:00.0 [(PCI ID: 10de:26b5) installed in this system has fallen off ...]
_GPU_LINE_RE = re.compile(_STAMP + r".*?NVRM: (?:The NVIDIA )?GPU (?:at )?(?:PCI:)?" + _ADDR + r"\b:?\s*(.*)$")
_STAMP_RE = re.compile(_STAMP)
# nvidia-nvswitch3: SXid (PCI:0000:04:00.0): 22013, Non-fatal, Link 44 Minion Link DLREQ interrupt
_SXID_RE = re.compile(_STAMP + r".*?(?:(nvidia-nvswitch\d{0,4}): )?SXid \((?:PCI:)?" + _ADDR +
                      r"\):\s*(\d{1,6})\s*(?:,\s*(.*))?$")
_SXID_SEVERITY_RE = re.compile(r"^(Fatal|Non-fatal|Nonfatal)\b,?\s*", re.I)
#: kinds of GPU faults without an Xid number: key -> what the entry's message starts with
FAULT_KINDS = ("fallen_off_bus", "init_failed") + tuple(kind for unused_marks, kind in _GSP_MARKS)
# "... for GPU at PCI:0000:07:00 ...": the address of a GSP line that names its GPU inside the message
_GPU_AT_RE = re.compile(r"\bGPU at PCI:" + _ADDR + r"\b")
# NVRM: Xid (PCI:0000:41:00): 79, pid=1234, name=python3, GPU has fallen off the bus.
_XID_RE = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f]{1,8}):([0-9A-Fa-f]{1,2}):([0-9A-Fa-f]{1,2})(?:\.([0-7]))?\):"
                     r"\s*(\d{1,5})\s*(?:,\s*(.*))?$")
# The same with the timestamp that starts the line ("[ 1234.567890]" of dmesg and journalctl -o
# short-monotonic) in one match: group 1 the seconds, then the groups of _XID_RE. The lazy .*?
# finds the first mark that reads, as search() does.
_XID_EVENT_RE = re.compile(r"(?:\s*\[\s*(\d{1,12}\.\d{1,9})\])?.*?" + _XID_RE.pattern)
_PID_NAME_RE = re.compile(r"^(?:pid=[^,]*,\s*)?(?:name=[^,]*,\s*)?")
# The NVLink 5 Xids (144-150) state the driver's fatal/non-fatal word after the unit, before the
# cross-containment field: "149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x...)", "145, RLW_RXPIPE
# Nonfatal XC0 ..." (NVIDIA's Xid catalogue, WORKFLOW_NVLINK5_ERR; the driver pads the word with spaces)
_XID_STATED_RE = re.compile(r"^\S{1,64}\s+(Fatal|Nonfatal)\s+XC\d", re.IGNORECASE)

_NVLINK_GPU_RE = re.compile(r"^GPU (\d+): (.*?)(?: \(UUID: ([^)]*)\))?(?:\s+(NVML:.*))?\s*$")
_NVLINK_LINK_RE = re.compile(r"^Link (\d+): (.*?)\s*$")
_NVLINK_SPEED_RE = re.compile(r"^(\d+(?:\.\d+)?) GB/s$")

_IB_STATE_RE = re.compile(r"^(\d+): ?(\S.*?)\s*$")
_IB_RATE_RE = re.compile(r"^(\d+(?:\.\d+)?) Gb/sec(?: \((.*)\))?\s*$")
_ADDRESS_RE = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


# -- kernel log ---------------------------------------------------------------------
#: seconds between two audits the self-audit's kernel log watcher starts (gpuhost_self_audit_watch_interval):
#: the bounds, checked by the role's inputs on the controller and by the runner on the host
WATCH_INTERVAL_BOUNDS = (1, 3600)


def is_fault_line(text):
    """Whether a kernel log line is one the audit keeps (:data:`_MARKS`: Xid, SXid, a GPU fallen off
    the bus or failing to initialise, GSP and reset-required lines): the self-audit's watcher starts
    an audit on such a line."""
    return isinstance(text, str) and _MARK_RE.search(text) is not None


def _scan(text, start=0):
    """``(lines, picked)`` per megabyte of ``text[start:]`` (cut after a newline): the number
    of non-empty lines in it and its lines the audit keeps (:data:`_MARKS`), without carriage
    returns.

    ``lines`` counts every line with a character (a carriage return alone does not count): the
    kernel's messages are never empty. Splitting, counting and picking run in C; only the picked
    lines are handled one by one in Python.
    """
    size = len(text)
    while start < size:
        end = text.find("\n", start + _PIECE)
        end = size if end < 0 else end + 1
        piece = text[start:end]
        start = end
        marked = _MARK_RE.search(piece) is not None
        if not marked and not _has_empty_line(piece):
            # a kernel log as it comes: no line to pick and none to leave out, so no split
            yield piece.count("\n") + (0 if piece.endswith("\n") else 1), []
            continue
        lines = piece.split("\n")
        count = len(lines) - lines.count("") - lines.count("\r")
        picked = [line for line in lines if _MARK_RE.search(line)] if marked else []
        if picked and "\r" in piece:
            picked = [line.replace("\r", "") for line in picked]
        yield count, picked


def _has_empty_line(piece):
    """Whether a line of ``piece`` other than the empty one after a final newline is empty or a
    lone carriage return."""
    return ("\n\n" in piece or "\n\r\n" in piece or piece.startswith(("\n", "\r\n")) or piece == "\r"
            or piece.endswith("\n\r"))


def reduce_kernel_log(text, source):
    """What a snapshot stores of a kernel log: a header with the line count, then the lines the
    audit reads (Xid and SXid events, GPUs fallen off the bus or failing to initialise).

    The kernel log holds much more than the audit needs (other drivers' messages, addresses);
    only those lines are kept, as written (timestamps and the indentation of a multi-line
    message's continuation lines included), so the stored log parses to the same facts.
    """
    if not isinstance(text, str):
        text = ""
    total = 0
    kept = []
    for count, picked in _scan(text):
        total += count
        kept.extend(picked)
    return _HEADER % (total, source, len(kept)) + "".join(line + "\n" for line in kept)


def _address(groups):
    domain, bus, dev, func = groups
    return "%04x:%02x:%02x.%s" % (int(domain, 16), int(bus, 16), int(dev, 16), func or "0")


def _seconds(text):
    return float(text) if text is not None else None


def _count(entry, seconds):
    entry["count"] += 1
    if seconds is not None:
        if entry["first_s"] is None or seconds < entry["first_s"]:
            entry["first_s"] = seconds
        if entry["last_s"] is None or seconds > entry["last_s"]:
            entry["last_s"] = seconds


def _is_continuation(line):
    """A line of a multi-line kernel record after its first: indented, without a timestamp."""
    return line[:1] in (" ", "\t") and _STAMP_RE.match(line).group(1) is None


class _Log:
    """The state of one :func:`parse_kernel_log` run: the entries kept and the bounds."""

    def __init__(self):
        self.by_gpu, self.faults, self.faults_no_address, self.nvswitch = {}, {}, {}, {}
        self.events = self.unparsed = self.dropped = self.pairs = 0
        self.example = None
        self.examples = []  # the first UNPARSED_EXAMPLES lines not understood
        self.header = None  # (address, seconds) of the last "The NVIDIA GPU <address>" line
        self.init_lines = {}  # address -> [RmInitAdapter lines, rm_init_adapter lines]

    def entry(self, table, key, sub, seconds, message, extra=None):
        """The entry ``table[key][sub]``, made when the pair bound allows (else ``None``)."""
        group = table.get(key)
        entry = group.get(sub) if group is not None else None
        if entry is None:
            if self.pairs >= MAX_XID_ENTRIES:
                self.dropped += 1
                return None
            self.pairs += 1
            entry = table.setdefault(key, {})[sub] = {
                "count": 0, "first_s": seconds, "last_s": seconds, "message": (message or "").strip()[:200] or None}
            entry.update(extra or {})
        return entry

    def odd(self, line):
        self.unparsed += 1
        self.example = self.example or line.strip()[:200]
        if len(self.examples) < UNPARSED_EXAMPLES:
            self.examples.append(line.strip()[:200])

    def xid(self, line):
        match = _XID_EVENT_RE.match(line)
        if match is None:
            self.odd(line)
            return
        self.events += 1
        seconds, domain, bus, dev, func, code, rest = match.groups()
        rest = _PID_NAME_RE.sub("", (rest or "").strip())
        entry = self.entry(self.by_gpu, _address((domain, bus, dev, func)), str(int(code)), _seconds(seconds), rest)
        if entry is not None:
            _count(entry, _seconds(seconds))
            stated = _XID_STATED_RE.match(rest)
            if stated:
                # any line of the code saying Fatal makes the entry fatal (as for SXids)
                word = "fatal" if stated.group(1).lower() == "fatal" else "non-fatal"
                entry["stated"] = "fatal" if entry.get("stated") == "fatal" else word

    def sxid(self, line):
        match = _SXID_RE.match(line)
        if match is None:
            self.odd(line)
            return
        seconds, name, domain, bus, dev, func, code, rest = match.groups()
        rest = (rest or "").strip()
        severity = _SXID_SEVERITY_RE.match(rest)
        address = _address((domain, bus, dev, func))
        switch = self.nvswitch.get(address)
        if switch is None and self.pairs >= MAX_XID_ENTRIES:
            self.dropped += 1
            return
        switch = self.nvswitch.setdefault(address, {"name": name, "codes": {}})
        switch["name"] = switch["name"] or name
        entry = self.entry(switch, "codes", str(int(code)), _seconds(seconds),
                           rest[severity.end():] if severity else None, {"severity": None, "lines": 0})
        if entry is None:
            return
        entry["lines"] += 1
        if severity is None:
            return  # "Data {...}", "Severity 0 Engine instance ...": more of the same event
        self.events += 1
        entry["severity"] = "fatal" if severity.group(1).lower() == "fatal" or entry["severity"] == "fatal" \
            else "non-fatal"
        if entry["message"] is None:
            entry["message"] = rest[severity.end():][:200] or None
        _count(entry, _seconds(seconds))

    def fault(self, line):
        """A GPU fallen off the bus or failing to initialise (no Xid number)."""
        if "NVRM" not in line:
            return  # another driver's words
        match = _GPU_LINE_RE.match(line)
        continuation = _is_continuation(line)
        if match is not None:
            seconds, address, rest = _seconds(match.group(1)), _address(match.group(2, 3, 4, 5)), match.group(6)
            if "NVRM: The NVIDIA GPU" in line:
                self.header = (address, seconds)
        else:
            rest = line.strip()
            rest = rest[rest.index("NVRM:") + 5:].strip()
            if continuation and self.header is not None:
                address, seconds = self.header
            else:
                address, seconds = None, _seconds(_STAMP_RE.match(line).group(1))
        if not continuation and "NVRM: The NVIDIA GPU" not in line:
            self.header = None
        if "fallen off the bus" in line:
            kind = "fallen_off_bus"
        elif "RmInitAdapter failed" in line or "rm_init_adapter failed" in line:
            kind = "init_failed"
        else:
            kind = _gsp_kind(line)
            if kind is None:
                return  # the first line of a multi-line message: its continuation says what happened
            at = _GPU_AT_RE.search(line) if address is None else None
            if at is not None:
                address = _address(at.group(1, 2, 3, 4))
        self.events += 1
        table, key = (self.faults, address) if address else (self.faults_no_address, "no address")
        if kind == "init_failed":
            lines = self.init_lines.setdefault(key, [0, 0])
            first = "RmInitAdapter failed" in line
            lines[0 if first else 1] += 1
            if lines[0 if first else 1] <= lines[1 if first else 0]:
                self.events -= 1  # the second line of one failure (RmInitAdapter, then rm_init_adapter)
                return
        entry = self.entry(table, key, kind, seconds, rest)
        if entry is not None:
            _count(entry, seconds)


def _gsp_kind(line):
    """The kind of a GSP fault or reset-required line (:data:`_GSP_MARKS`), else None."""
    for marks, kind in _GSP_MARKS:
        if any(mark in line for mark in marks):
            return kind
    return None


def parse_kernel_log(text):
    """GPU and NVSwitch events of a kernel log (``journalctl -k -b -o short-monotonic`` or
    ``dmesg`` text, whole or as :func:`reduce_kernel_log` stored it).

    Returns ``{"lines", "source", "events", "by_gpu", "faults", "faults_no_address", "nvswitch",
    "unparsed", "unparsed_example", "unparsed_lines", "dropped", "skipped"}``: ``lines`` the kernel messages read
    (non-empty lines; from the header of a stored capture), ``by_gpu`` maps the PCI address of the
    NVRM Xid line (``0000:41:00.0``; the line names no function, so ``.0``) to ``{code (str):
    {"count", "first_s", "last_s", "message"}}`` (plus ``stated``, ``"fatal"`` or ``"non-fatal"``, when
    its lines state the driver's word, as the NVLink 5 Xids 144-150 do; seconds since boot, the text after the code
    without ``pid=``/``name=``, at most 200 characters). ``faults`` maps a GPU's PCI address to
    ``{kind: {"count", "first_s", "last_s", "message"}}`` (kinds :data:`FAULT_KINDS`: ``fallen_off_bus``,
    ``init_failed``, and the GSP lines without an Xid, ``reset_required``, ``gsp_timeout``,
    ``gsp_rpc_failed``; a GSP line names its GPU by a PCI address, ``GPU at PCI:...``, or by the
    driver's index only, ``GPU0``, and then counts under ``faults_no_address``) for the faults
    the driver logs without an Xid number (one RmInitAdapter/rm_init_adapter pair is one failure);
    ``faults_no_address`` holds those of lines naming no GPU under the key ``"no address"``.
    ``nvswitch`` maps an NVSwitch's PCI address to ``{"name": "nvidia-nvswitch3", "codes": {code:
    {"count" (events: lines saying Fatal or Non-fatal), "lines", "severity" ("fatal",
    "non-fatal", None when no line said), "first_s", "last_s", "message"}}}``. ``events`` counts
    the events read; the first :data:`MAX_XID_ENTRIES` (subject, code or kind) pairs are kept
    and ``dropped`` counts the events of the pairs beyond. ``unparsed`` counts ``NVRM: Xid`` and
    ``SXid`` lines of another shape, ``unparsed_lines`` holds the first :data:`UNPARSED_EXAMPLES` of them
    (HEALTH-025 shows them, so a new format is noticed). The first :data:`MAX_XID_LINES` picked lines are read;
    ``skipped`` counts those after. Never raises; non-text gives ``None``. Memory is bounded by a
    megabyte of lines and the pairs kept.
    """
    if not isinstance(text, str):
        return None
    total = 0
    source = None
    start = 0
    header = _HEADER_RE.match(text)
    if header:
        start, source = header.end(), header.group(2)
    log = _Log()
    read = 0
    skipped = 0
    for count, picked in _scan(text, start):
        total += count
        room = MAX_XID_LINES - read
        if len(picked) > room:
            skipped += len(picked) - max(room, 0)
            picked = picked[:max(room, 0)]
        read += len(picked)
        for line in picked:
            if _XID_MARK in line:
                log.xid(line)
            elif "SXid (" in line:
                log.sxid(line)
            else:
                log.fault(line)
    if header:
        total = int(header.group(1))
    return {"lines": total, "source": source, "events": log.events, "by_gpu": log.by_gpu,
            "faults": log.faults, "faults_no_address": log.faults_no_address, "nvswitch": log.nvswitch,
            "unparsed": log.unparsed, "unparsed_example": log.example, "unparsed_lines": log.examples,
            "dropped": log.dropped, "skipped": skipped}


# -- journalctl --list-boots ------------------------------------------------------------
#: the previous boot's kernel log is read only when asked (``gpuhost_kernel_log_boots``): 1 reads the
#: current boot, 2 the previous one too. Not more: each boot is one more journal read of up to
#: :data:`KERNEL_LOG_LINES` lines at every audit (and every self-audit run) and one more reduced log
#: in a snapshot, and a boot before the previous one is two reboots old: its faults were seen (and
#: judged as the previous boot's) by the audits of the boot in between.
MAX_KERNEL_LOG_BOOTS = 2
#: ``-1 0a1b...(32 hex) Mon 2024-03-04 10:00:01 UTC—Mon 2024-03-04 18:12:40 UTC`` (systemd 247 to 252:
#: Debian 11 and 12, RHEL 9) or, under an ``IDX BOOT ID FIRST ENTRY LAST ENTRY`` header, the same
#: columns as a table (newer systemd)
_BOOT_RE = re.compile(r"^\s*(-?\d{1,9})\s+([0-9A-Fa-f]{32})(?:\s+(\S.*?))?\s*$")
#: the boot list is read from its end (the current and previous boots are its last lines): at most
#: this many characters of it
_BOOTS_TAIL = 1 << 20


def parse_list_boots(text):
    """``journalctl --list-boots`` as ``{"current", "previous", "boots", "unrecognised"}``:
    ``current`` and ``previous`` the ``{"offset", "boot_id", "span"}`` of the boots at offsets 0 and
    -1 (``None`` when the list has no such line), ``boots`` the number of boot lines, ``unrecognised``
    the other non-empty lines (a header line is not counted). ``boot_id`` is the 32 hex digits in
    lower case, ``span`` the first and last entry's times as printed (at most 120 characters).
    Only the last megabyte of a longer text is read (the list is ordered oldest first). Never
    raises; non-text gives ``None``."""
    if not isinstance(text, str):
        return None
    if len(text) > _BOOTS_TAIL:
        text = text[-_BOOTS_TAIL:]
        text = text[text.find("\n") + 1:]
    result = {"current": None, "previous": None, "boots": 0, "unrecognised": 0}
    for line in text.replace("\r", "").split("\n"):
        if not line.strip():
            continue
        match = _BOOT_RE.match(line)
        if match is None:
            if not line.strip().upper().startswith("IDX"):
                result["unrecognised"] += 1
            continue
        result["boots"] += 1
        offset = int(match.group(1))
        if offset in (0, -1):
            result["current" if offset == 0 else "previous"] = {
                "offset": offset, "boot_id": match.group(2).lower(), "span": (match.group(3) or "")[:120] or None}
    return result


def check_kernel_log_boots(value):
    """``(boots, error)``: ``value`` as a number of boots to read (1 or 2), else ``(1, why)``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_KERNEL_LOG_BOOTS:
        return 1, ("kernel_log_boots must be an integer from 1 to %d, not %r: the current boot only is read"
                   % (MAX_KERNEL_LOG_BOOTS, value if not isinstance(value, str) else value[:40]))
    return value, None


# -- nvidia-smi nvlink -s -------------------------------------------------------------
def _nvml_note(text):
    """``(supported, note)`` of an ``NVML: Unable to retrieve NVLink information...`` message."""
    lowered = text.lower()
    if "not supported" in lowered:
        return False, text
    if "inactive" in lowered:
        return True, text
    return None, text


def parse_nvlink_status(text):
    """Parse ``nvidia-smi nvlink -s`` (``--status``).

    Returns ``{"gpus": [...], "unrecognised": [lines], "note"}`` or ``None`` when neither a ``GPU n:``
    header nor an ``NVML:`` message is found (empty, garbage); ``note`` is an ``NVML:`` message
    printed before any ``GPU n:`` line (it then concerns every GPU). Per GPU: ``{"index", "name", "uuid", "supported" (False when NVML says
    Not Supported, True with links or "all links are inActive", else None), "links_total",
    "links_active", "speeds_gbps" ({"26.562": 12}), "inactive" ([link numbers]), "unknown" (links
    whose state is neither a speed nor ``<inactive>``: ``{"link", "text"}``), "note" (the NVML
    message)}``. A link is active only with a positive speed: ``0 GB/s`` counts as inactive.
    """
    if not isinstance(text, str):
        return None
    gpus = []
    current = None
    unrecognised = []
    note = None
    for raw in text.replace("\r", "").split("\n"):
        line = raw.strip()
        if not line:
            continue
        header = _NVLINK_GPU_RE.match(line)
        if header:
            current = {"index": int(header.group(1)), "name": header.group(2).strip() or None,
                       "uuid": header.group(3), "supported": None, "links_total": 0, "links_active": 0,
                       "speeds_gbps": {}, "inactive": [], "unknown": [], "note": None}
            gpus.append(current)
            if header.group(4):
                current["supported"], current["note"] = _nvml_note(header.group(4))
            continue
        if current is None:
            if line.startswith("NVML:"):
                note = note or line[:200]  # printed without a GPU line: it is about every GPU
            else:
                unrecognised.append(line[:200])
            continue
        if line.startswith("NVML:"):
            current["supported"], current["note"] = _nvml_note(line)
            continue
        link = _NVLINK_LINK_RE.match(line)
        if link is None:
            unrecognised.append(line[:200])
            continue
        number, state = int(link.group(1)), link.group(2)
        current["links_total"] += 1
        current["supported"] = True
        speed = _NVLINK_SPEED_RE.match(state)
        if speed and float(speed.group(1)) > 0:
            current["links_active"] += 1
            key = speed.group(1)
            current["speeds_gbps"][key] = current["speeds_gbps"].get(key, 0) + 1
        elif speed or state.lower() == "<inactive>":
            current["inactive"].append(number)
        else:
            current["unknown"].append({"link": number, "text": state[:80]})
    if not gpus and note is None:
        return None
    return {"gpus": gpus, "unrecognised": unrecognised, "note": note}


# -- systemctl show -------------------------------------------------------------------
def parse_systemctl_show(text):
    """``KEY=VALUE`` lines of ``systemctl show --property=...`` as a dict (``None`` without any)."""
    if not isinstance(text, str):
        return None
    result = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() and re.match(r"^[A-Za-z]+$", key.strip()):
            result[key.strip()] = value.strip()
    return result or None


# -- nv-fabricmanager --version ----------------------------------------------------------
#: ``Fabric Manager version is : 535.161.08`` (the whole output of ``nv-fabricmanager --version``)
_FM_VERSION_RE = re.compile(r"Fabric Manager version is\s*:\s*(\d{1,4}(?:\.\d{1,6}){1,3})\s*$", re.MULTILINE)


def parse_fabricmanager_version(text):
    """``"535.161.08"`` from ``nv-fabricmanager --version`` output; ``None`` without that line."""
    if not isinstance(text, str):
        return None
    match = _FM_VERSION_RE.search(text[:4096])
    return match.group(1) if match else None


# -- /sys/class/infiniband -------------------------------------------------------------
def parse_ib_state(text):
    """``"4: ACTIVE"`` -> ``(4, "ACTIVE")``; ``"5: LinkUp"`` -> ``(5, "LinkUp")``; else ``None``."""
    if not isinstance(text, str):
        return None
    match = _IB_STATE_RE.match(text.strip())
    if match is None:
        return None
    return int(match.group(1)), match.group(2)


def parse_ib_rate(text):
    """``"400 Gb/sec (4X NDR)"`` -> ``(400.0, "4X NDR")``; ``"10 Gb/sec"`` -> ``(10.0, None)``; else ``None``."""
    if not isinstance(text, str):
        return None
    match = _IB_RATE_RE.match(text.strip())
    if match is None:
        return None
    return float(match.group(1)), match.group(2)


#: ``/sys/class/infiniband/<dev>/{fw_ver,board_id,hca_type}``: ``28.42.1000`` (the HCA firmware),
#: ``MT_0000000838`` (the board's PSID: the OEM board model a firmware image is built for), ``MT4129``
_IB_IDENTITY = {"fw_ver": re.compile(r"^\d{1,5}(?:\.\d{1,6}){1,3}$"),
                "board_id": re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$"),
                "hca_type": re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$")}


def parse_ib_identity(name, text):
    """The value of ``/sys/class/infiniband/<dev>/<name>`` (``fw_ver``, ``board_id``, ``hca_type``)
    stripped, or ``None`` when it is not in the documented form."""
    if name not in _IB_IDENTITY or not isinstance(text, str):
        return None
    value = text.strip()
    return value if _IB_IDENTITY[name].match(value) else None


# -- gather -------------------------------------------------------------------------------
def _quietly(root, function, *args):
    """Call ``function``; drop the errors it records (another subsystem reports those reads)."""
    mark = len(root.errors)
    try:
        return function(*args)
    finally:
        del root.errors[mark:]


def _bus_scan(root):
    """``(nvidia_gpu_on_bus, nvswitch_addresses)`` from vendor and class of every PCI function.

    NVSwitch: vendor 0x10de with class 0x0680 (bridge, other), as HGX baseboards show them.
    """
    gpu = False
    switches = []
    for name in root.listdir(PCI_DEVICES):
        base = posixpath.join(PCI_DEVICES, name)
        vendor = root.read_value(base + "/vendor", SUBSYSTEM, optional=True)
        klass = root.read_value(base + "/class", SUBSYSTEM, optional=True)
        if not vendor or not klass or vendor.lower() != "0x10de":
            continue
        klass = klass.lower()
        if klass.startswith("0x03"):
            gpu = True
        elif klass.startswith("0x0680"):
            switches.append(name.lower())
    return gpu, sorted(switches)


def _record(root, capture, text):
    """Keep ``text`` as the capture's output in a snapshot being recorded. A live ``Root.command``
    records it already; a ``Root`` over a snapshot does not, and a capture made from a snapshot
    must hold what the facts were computed from."""
    if root.recorder is not None:
        root.recorder.command(capture, text)


_LOG_KEYS = ("source", "lines", "truncated", "events", "by_gpu", "faults", "faults_no_address", "nvswitch",
             "unparsed", "unparsed_example", "unparsed_lines", "error")


def _kernel_log(root):
    section = dict((key, None) for key in _LOG_KEYS)
    section["boot_id"] = None
    text, reason = root.command("kernel-log", SUBSYSTEM)
    source = "journalctl -k -b"
    if text is None and reason and "journalctl not found" in reason:
        mark = len(root.errors)
        text, second = root.command("kernel-log-dmesg", SUBSYSTEM)
        if text is not None:
            del root.errors[mark - 1:mark]  # the journal's absence is not an error when dmesg answers
            source, reason = "dmesg", None
        else:
            reason = "%s; %s" % (reason, second)
    if text is None:
        section["error"] = "kernel log not read: %s" % reason
        return section
    _read_log(root, section, text, source, "kernel-log-dmesg" if source == "dmesg" else "kernel-log", "this boot")
    return section


def _read_log(root, section, text, source, capture, which):
    """Fill ``section`` from the kernel log ``text`` (read by ``capture``; ``which`` names the boot
    in messages); a snapshot being recorded keeps the reduced log."""
    if root.recorder is not None:
        stored = _HEADER_RE.match(text) is not None
        _record(root, capture, text if stored else reduce_kernel_log(text, source))
    # the whole log, or the stored reduction of it, parse to the same events and line count
    parsed = parse_kernel_log(text)
    dropped, skipped = parsed.pop("dropped"), parsed.pop("skipped")
    section.update(parsed)
    section["source"] = parsed["source"] or source
    if not parsed["lines"]:
        section["events"] = section["by_gpu"] = section["faults"] = section["faults_no_address"] = None
        section["nvswitch"] = None
        section["error"] = ("the kernel log of %s is empty (%s printed nothing): the journal is not readable "
                            "by this user (run with become: true) or keeps no kernel messages" % (which, section["source"]))
        root.error(SUBSYSTEM, section["source"], section["error"])
        return
    section["truncated"] = section["source"].startswith("journalctl") and parsed["lines"] >= KERNEL_LOG_LINES
    if parsed["unparsed"]:
        root.error(SUBSYSTEM, section["source"], "%d NVRM Xid or SXid line(s) not in the known format, first: %r"
                   % (parsed["unparsed"], parsed["unparsed_example"]))
    if skipped:
        root.error(SUBSYSTEM, section["source"], "%d NVRM Xid line(s) after the first %d not read (a journal read "
                   "returns at most %d lines)" % (skipped, MAX_XID_LINES, KERNEL_LOG_LINES))
    if dropped:
        root.error(SUBSYSTEM, section["source"], "%d Xid event(s) name more than %d GPU and code pairs: counted in "
                   "events, not kept in by_gpu, faults or nvswitch" % (dropped, MAX_XID_ENTRIES))


def _previous_kernel_log(root, current):
    """The ``kernel_log_previous`` section: the kernel log of the boot before this one, named by its
    boot id (``journalctl --list-boots``), read with ``journalctl -k -b -1``; ``error`` says why it
    is unknown (dmesg holds one boot, a journal that keeps no earlier boot, a failed read)."""
    section = dict((key, None) for key in _LOG_KEYS)
    section.update(boot_id=None, boot_offset=-1, span=None)
    if current.get("source") == "dmesg" or (current.get("error") and "journalctl not found" in current["error"]):
        section["error"] = ("the kernel log is read with dmesg (journalctl is not installed): dmesg holds the current "
                            "boot only, so the previous boot's kernel log is unknown")
        return section
    text, reason = root.command("kernel-boots", SUBSYSTEM)
    if text is None:
        section["error"] = "the journal's boots were not listed: %s" % reason
        return section
    _record(root, "kernel-boots", text)
    boots = parse_list_boots(text)
    if boots["unrecognised"]:
        root.error(SUBSYSTEM, "journalctl --list-boots", "%d line(s) not in the known format" % boots["unrecognised"])
    if boots["current"] is not None:
        current["boot_id"] = boots["current"]["boot_id"]
    if boots["previous"] is None:
        section["error"] = ("journalctl --list-boots lists no previous boot (%d boot(s) in the journal): the journal "
                            "keeps no earlier boot (Storage=volatile, or Storage=auto without /var/log/journal) or it "
                            "was rotated away, so the previous boot's kernel log is unknown" % boots["boots"])
        return section
    section["boot_id"], section["span"] = boots["previous"]["boot_id"], boots["previous"]["span"]
    text, reason = root.command("kernel-log-previous", SUBSYSTEM)
    if text is None:
        section["error"] = "kernel log of the previous boot %s not read: %s" % (section["boot_id"], reason)
        return section
    _read_log(root, section, text, "journalctl -k -b -1", "kernel-log-previous", "the previous boot")
    return section


def _nvlink(root):
    section = {"gpus": None, "note": None, "error": None}
    text, reason = root.command("nvidia-smi-nvlink", SUBSYSTEM)
    if text is None:
        section["error"] = reason
        return section
    _record(root, "nvidia-smi-nvlink", text)
    parsed = parse_nvlink_status(text)
    if parsed is None:
        section["error"] = ("nvidia-smi nvlink -s printed no 'GPU n:' line and no NVML message (%d bytes): NVLink "
                            "state unknown"
                            % len(text))
        root.error(SUBSYSTEM, "nvidia-smi nvlink -s", section["error"])
        return section
    section["gpus"] = parsed["gpus"]
    section["note"] = parsed["note"]
    odd = parsed["unrecognised"] + ["Link %d: %s" % (u["link"], u["text"]) for g in parsed["gpus"] for u in g["unknown"]]
    if odd:
        root.error(SUBSYSTEM, "nvidia-smi nvlink -s", "%d line(s) not in the known format, first: %r" % (len(odd), odd[0]))
    return section


def _fabric_manager(root, switches):
    section = {"nvswitches": switches, "checked": False, "load_state": None, "active_state": None,
               "sub_state": None, "unit_file_state": None, "version": None, "version_error": None, "error": None}
    if not switches:
        return section  # no NVSwitch: no Fabric Manager to ask (its absence is no error)
    _fabric_manager_version(root, section)
    text, reason = root.command("fabricmanager-state", SUBSYSTEM)
    section["checked"] = True
    if text is None:
        section["error"] = reason
        return section
    _record(root, "fabricmanager-state", text)
    props = parse_systemctl_show(text)
    if props is None or "ActiveState" not in props:
        section["error"] = "systemctl show nvidia-fabricmanager.service printed no ActiveState= line"
        root.error(SUBSYSTEM, "systemctl show nvidia-fabricmanager.service", section["error"])
        return section
    section.update(load_state=props.get("LoadState"), active_state=props.get("ActiveState"),
                   sub_state=props.get("SubState"), unit_file_state=props.get("UnitFileState"))
    return section


def _fabric_manager_version(root, section):
    """``section["version"]`` from ``nv-fabricmanager --version`` (the installed Fabric Manager, which
    must match the driver); ``version_error`` says why it is null."""
    text, reason = root.command("fabricmanager-version", SUBSYSTEM)
    if text is None:
        section["version_error"] = reason
        return
    _record(root, "fabricmanager-version", text)
    section["version"] = parse_fabricmanager_version(text)
    if section["version"] is None:
        section["version_error"] = "nv-fabricmanager --version printed no 'Fabric Manager version is : N' line (%d bytes)" \
            % len(text)
        root.error(SUBSYSTEM, "nv-fabricmanager --version", section["version_error"])


def _port(root, base, port):
    path = "%s/%s" % (base, port)
    item = {"port": int(port) if port.isdigit() else port, "state": None, "state_code": None, "phys_state": None,
            "phys_state_code": None, "rate": None, "rate_gbps": None, "link_layer": None, "error": None}
    problems = []
    for key, parser in (("state", parse_ib_state), ("phys_state", parse_ib_state)):
        text = root.read_value("%s/%s" % (path, key), SUBSYSTEM)
        value = parser(text) if text is not None else None
        if value is None:
            problems.append("%s/%s %s" % (path, key, "unreadable" if text is None else "is not 'N: NAME': %r" % text[:40]))
            if text is not None:
                root.error(SUBSYSTEM, "%s/%s" % (path, key), "not 'N: NAME': %r" % text[:40])
            continue
        item[key + "_code"], item[key] = value
    rate_text = root.read_value(path + "/rate", SUBSYSTEM)
    if rate_text is not None:
        item["rate"] = rate_text[:80]
        rate = parse_ib_rate(rate_text)
        if rate is None:
            problems.append("%s/rate is not 'N Gb/sec (...)': %r" % (path, rate_text[:40]))
            root.error(SUBSYSTEM, path + "/rate", "not 'N Gb/sec (...)': %r" % rate_text[:40])
        else:
            item["rate_gbps"] = rate[0]
    else:
        problems.append("%s/rate unreadable" % path)
    item["link_layer"] = root.read_value(path + "/link_layer", SUBSYSTEM, optional=True)
    item["error"] = "; ".join(problems) or None
    return item


def _rdma(root):
    devices = []
    for name in root.listdir(INFINIBAND_DIR):
        base = posixpath.join(INFINIBAND_DIR, name)
        # /sys/class/infiniband/<dev> is a link into the device tree; its "device" link is relative to there
        real = root.resolve_link(base) or base
        target = root.resolve_link(real + "/device", SUBSYSTEM)
        address = posixpath.basename(target).lower() if target else None
        entry = {"name": name, "pci_address": address if address and _ADDRESS_RE.match(address) else None,
                 "ports": [], "error": None}
        for key in sorted(_IB_IDENTITY):   # firmware and board: absent on some providers (rxe), never an error
            text = root.read_value("%s/%s" % (base, key), SUBSYSTEM, optional=True)
            entry[key] = parse_ib_identity(key, text)
            if text is not None and entry[key] is None:
                root.error(SUBSYSTEM, "%s/%s" % (base, key), "not a %s value: %r" % (key, text[:40]))
        if target is not None and entry["pci_address"] is None:
            entry["error"] = "%s/device points to %s, not a PCI function" % (base, target)
            root.error(SUBSYSTEM, base + "/device", entry["error"])
        elif target is None:
            entry["error"] = "%s/device is not a readable link: the PCI function of this RDMA device is unknown" % base
        ports_dir = base + "/ports"
        for port in root.listdir(ports_dir, SUBSYSTEM):
            entry["ports"].append(_port(root, ports_dir, port))
        devices.append(entry)
    return {"devices": devices}


def _edac(root):
    controllers = []
    for name in root.listdir(EDAC_MC_DIR, pattern="mc[0-9]*"):
        base = posixpath.join(EDAC_MC_DIR, name)
        item = {"name": name, "mc_name": root.read_value(base + "/mc_name", SUBSYSTEM, optional=True),
                "ce_count": root.read_int(base + "/ce_count", SUBSYSTEM),
                "ue_count": root.read_int(base + "/ue_count", SUBSYSTEM),
                "ce_noinfo_count": root.read_int(base + "/ce_noinfo_count", SUBSYSTEM, optional=True),
                "ue_noinfo_count": root.read_int(base + "/ue_noinfo_count", SUBSYSTEM, optional=True),
                "dimms": []}
        for dimm in root.listdir(base, pattern="dimm[0-9]*"):
            dbase = posixpath.join(base, dimm)
            item["dimms"].append({
                "name": dimm,
                "label": root.read_value(dbase + "/dimm_label", SUBSYSTEM, optional=True),
                "ce_count": root.read_int(dbase + "/dimm_ce_count", SUBSYSTEM, optional=True),
                "ue_count": root.read_int(dbase + "/dimm_ue_count", SUBSYSTEM, optional=True),
            })
        controllers.append(item)
    return {"present": bool(controllers) or root.isdir(EDAC_MC_DIR), "controllers": controllers}


def gather(root, kernel_log_boots=1):
    """The ``health`` section of the facts (docs/facts.md) read through ``root``; with
    ``kernel_log_boots`` 2 the previous boot's kernel log too (``kernel_log_previous``)."""
    boots, problem = check_kernel_log_boots(kernel_log_boots)
    if problem:
        root.error(SUBSYSTEM, "kernel_log_boots", problem)
    module_loaded = root.exists(NVIDIA_VERSION_PATH)
    gpu_on_bus, switches = _quietly(root, _bus_scan, root)
    nvidia = module_loaded or gpu_on_bus
    kernel_log = _kernel_log(root) if nvidia else None
    previous = _previous_kernel_log(root, kernel_log) if nvidia and boots >= 2 else None
    nvlink = _nvlink(root) if module_loaded else None
    return {
        "nvidia_seen": nvidia,
        "kernel_log_boots": boots,
        "kernel_log": kernel_log,
        "kernel_log_previous": previous,
        "nvlink": nvlink,
        "fabric_manager": _fabric_manager(root, switches),
        "peermem": dict((name, root.exists("/sys/module/" + name)) for name in PEERMEM_MODULES),
        "rdma": _rdma(root),
        "edac": _edac(root),
        # error counters judged over the audit history (facts/counters.py)
        "counters": gather_counters(root, any(g.get("links_total") for g in (nvlink or {}).get("gpus") or [])),
    }
