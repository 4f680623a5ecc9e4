# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA facts: kernel module version, ``nvidia-smi -q -x`` and ``nvidia-smi topo -m``.

The parsers are pure functions over text and never raise: bad input gives ``None``
or a partial result carrying an ``error``. :func:`gather` does the reads through a
:class:`host.root.Root` and builds the ``nvidia`` section of docs/facts.md.

GPU index: the position of the ``<gpu>`` element in the XML. nvidia-smi lists GPUs in
its own enumeration order (PCI bus order), which is the order ``nvidia-smi -i N`` and
the ``GPUn`` labels of ``nvidia-smi topo -m`` use. ``minor_number`` (the N of
``/dev/nvidiaN``) is kept as a separate key because it need not match that order.
"""

from __future__ import absolute_import, division, print_function

import re
import xml.etree.ElementTree as ET

__metaclass__ = type

SUBSYSTEM = "nvidia"
VERSION_PATH = "/proc/driver/nvidia/version"

# nvidia-smi writes these instead of a value; all of them mean "no value" to us.
_NO_VALUE = frozenset([
    "", "n/a", "none", "unknown error", "not supported", "[not supported]",
    "requested functionality has been deprecated", "insufficient permissions",
    "[insufficient permissions]", "unknown", "[unknown error]",
])

_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_NUMBER_RE = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)")
_BUS_ID_RE = re.compile(r"^(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])$")
_MODULE_RE = re.compile(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+(?:\.\d+)+)")
_REASON_PREFIXES = ("clocks_event_reason_", "clocks_throttle_reason_")


# -- /proc/driver/nvidia/version -------------------------------------------------
def parse_module_version(text):
    """``{"version", "open", "raw"}`` from ``/proc/driver/nvidia/version``, or ``None``.

    The open kernel module says ``Open Kernel Module for x86_64``; the proprietary one
    ``x86_64 Kernel Module``. ``raw`` is the NVRM line as written.
    """
    if not text:
        return None
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("NVRM version:"):
            continue
        match = _MODULE_RE.search(line)
        return {
            "version": match.group(1) if match else None,
            "open": "Open Kernel Module" in line,
            "raw": line,
        }
    return None


# -- helpers for nvidia-smi XML -----------------------------------------------------
def _clean(value):
    """Text of a leaf without nvidia-smi's placeholders (N/A, deprecated, ...) -> ``None``."""
    if value is None:
        return None
    value = value.strip()
    if value.lower() in _NO_VALUE:
        return None
    return value


def _find(elem, path):
    """``elem.find(path)`` for a path of plain tags (``"pcie_gen/max_link_gen"``): the first match in
    document order, as ElementPath finds it, without ElementPath's Python machinery (a simple tag is
    found in C): a gather looks up a few hundred such paths."""
    if "/" not in path:
        return elem.find(path)
    first, rest = path.split("/", 1)
    for child in elem.findall(first):
        found = _find(child, rest)
        if found is not None:
            return found
    return None


def _text(elem, path):
    if elem is None:
        return None
    found = _find(elem, path)
    if found is None:
        return None
    return _clean(found.text)


def _number(value):
    """Leading number of ``"600.00 W"``, ``"16x"``, ``"1005 MiB"``; ``None`` otherwise."""
    if value is None:
        return None
    match = _NUMBER_RE.match(value)
    if not match:
        return None
    number = float(match.group(1))
    # 400 digits overflow to infinity, which no reading is (and int() of it raises)
    return None if number in (float("inf"), float("-inf")) else number


def _int(value):
    number = _number(value)
    if number is None or number != int(number):
        return None
    return int(number)


def _watts(value):
    number = _number(value)
    return None if number is None else float(number)


def _enabled(value):
    if value is None:
        return None
    lowered = value.lower()
    if lowered == "enabled":
        return True
    if lowered == "disabled":
        return False
    return None


def _yes_no(value):
    if value is None:
        return None
    lowered = value.lower()
    if lowered == "yes":
        return True
    if lowered == "no":
        return False
    return None


def normalise_bus_id(value):
    """``00000000:41:00.0`` -> ``0000:41:00.0`` (lower case, 4-digit domain); ``None`` if not a bus id."""
    if not value:
        return None
    match = _BUS_ID_RE.match(value.strip())
    if not match:
        return None
    domain, bus, dev, func = match.groups()
    return "%04x:%02x:%02x.%s" % (int(domain or "0", 16), int(bus, 16), int(dev, 16), func)


def _first(elem, names):
    for name in names:
        found = elem.find(name)
        if found is not None:
            return found
    return None


# -- per-GPU sections ---------------------------------------------------------------
def _power(gpu):
    # Drivers >= 530 (DTD v12) split the old power_readings into gpu_power_readings and
    # module_power_readings; the GPU's own limits are the ones that matter here.
    readings = _first(gpu, ("gpu_power_readings", "power_readings"))
    if readings is None:
        return {"limit_w": None, "default_w": None, "max_w": None, "min_w": None, "draw_w": None,
                "state": None}
    limit = None
    for name in ("current_power_limit", "power_limit", "enforced_power_limit"):
        limit = _watts(_text(readings, name))
        if limit is not None:
            break
    draw = None
    for name in ("power_draw", "instant_power_draw", "average_power_draw"):
        draw = _watts(_text(readings, name))
        if draw is not None:
            break
    return {
        "limit_w": limit,
        "default_w": _watts(_text(readings, "default_power_limit")),
        "max_w": _watts(_text(readings, "max_power_limit")),
        "min_w": _watts(_text(readings, "min_power_limit")),
        "draw_w": draw,
        "state": _text(readings, "power_state"),
    }


def _clock_reasons(gpu):
    # Renamed from clocks_throttle_reasons to clocks_event_reasons in driver 535 (DTD v12).
    section = _first(gpu, ("clocks_event_reasons", "clocks_throttle_reasons"))
    if section is None:
        return None
    raw = {}
    active = []
    for child in section:
        name = child.tag
        for prefix in _REASON_PREFIXES:
            if name.startswith(prefix):
                name = name[len(prefix):]
                break
        value = _clean(child.text)
        raw[name] = value
        if value is not None and value.lower() == "active":
            active.append(name)
    return {"active": sorted(active), "raw": raw, "source": section.tag}


#: ``<temperature>`` children -> keys of ``nvidia.gpus[].temperature`` (degrees C; nvidia-smi writes
#: ``"27 C"``, or ``N/A`` where the GPU has no such sensor or threshold). Ada and later GPUs under newer
#: drivers (the v12 and v13 DTDs: 555, 590, 595 seen) report T.Limit values instead of the absolute
#: thresholds: ``gpu_temp_tlimit`` is the margin left to the GPU's T.Limit (NVML's "thermal margin
#: temperature"), and each threshold is relative to T.Limit (slowdown ``-2 C``, shutdown ``-5 C``/``-7 C``,
#: max operating ``0 C``); the absolute elements are then missing from the file.
_TEMPERATURES = (("gpu_temp", "gpu_c"), ("gpu_temp_slow_threshold", "slowdown_c"),
                 ("gpu_temp_max_threshold", "shutdown_c"), ("gpu_temp_max_gpu_threshold", "max_operating_c"),
                 ("gpu_target_temperature", "target_c"), ("memory_temp", "memory_c"),
                 ("gpu_temp_max_mem_threshold", "memory_max_c"),
                 ("gpu_temp_tlimit", "tlimit_margin_c"), ("gpu_temp_slow_tlimit_threshold", "slowdown_tlimit_c"),
                 ("gpu_temp_max_tlimit_threshold", "shutdown_tlimit_c"),
                 ("gpu_temp_max_gpu_tlimit_threshold", "max_operating_tlimit_c"),
                 ("gpu_temp_max_mem_tlimit_threshold", "memory_max_tlimit_c"))


def _temperature(gpu):
    """The GPU's temperature and its own thresholds (``None`` without a ``<temperature>`` section).
    A reading outside -50..200 C is not a temperature (a sensor that reports garbage): ``None``."""
    section = gpu.find("temperature")
    if section is None:
        return None
    out = {}
    for tag, key in _TEMPERATURES:
        value = _number(_text(section, tag))
        out[key] = int(value) if value is not None and -50 <= value <= 200 else None
    return out


#: a VBIOS version as nvidia-smi writes it (``96.00.74.00.0D``, ``92.00.36.00.02``): anything else
#: (a long or odd string from a hostile capture) is not kept
_VBIOS_RE = re.compile(r"^[0-9A-Za-z][0-9A-Za-z._-]{0,63}$")


def vbios_version(value):
    """``<vbios_version>`` as written, or ``None`` when it is not a version."""
    return value if isinstance(value, str) and _VBIOS_RE.match(value) else None


_PSTATE_RE = re.compile(r"^P([0-9]{1,2})$")


def performance_state(value):
    """``<performance_state>`` as ``"P0"``..``"P15"``; ``None`` for N/A, Unknown or anything else
    (NVML's states run from P0, maximum performance, to P15, minimum; 32 is 'unknown')."""
    match = _PSTATE_RE.match(value.strip().upper()) if isinstance(value, str) else None
    if not match or int(match.group(1)) > 15:
        return None
    return "P%d" % int(match.group(1))


#: The performance state from which on a GPU counts as idle (its PCIe link speed then says nothing):
#: nvidia-smi documents P0 (maximum performance) to P12 (minimum); NVIDIA's P-state table names P8
#: basic video playback and P12 minimum idle power, the states a GPU with nothing to do drops to,
#: lowering its link speed. Used by PCI-005 (derive) and by learn mode.
IDLE_PSTATE_MIN = 8


def pstate_number(value):
    """``8`` for ``"P8"`` (as :func:`performance_state` writes it, or as nvidia-smi prints it);
    ``None`` for anything that is not a performance state."""
    state = performance_state(value)
    return int(state[1:]) if state else None


def _pcie(gpu):
    link = _find(gpu, "pci/pci_gpu_link_info")
    return {
        "gen_current": _int(_text(link, "pcie_gen/current_link_gen")),
        "gen_max": _int(_text(link, "pcie_gen/max_link_gen")),
        "gen_host_max": _int(_text(link, "pcie_gen/max_host_link_gen")),
        "gen_device_current": _int(_text(link, "pcie_gen/device_current_link_gen")),
        "gen_device_max": _int(_text(link, "pcie_gen/max_device_link_gen")),
        "width_current": _int(_text(link, "link_widths/current_link_width")),
        "width_max": _int(_text(link, "link_widths/max_link_width")),
    }


def _retired_pages(gpu):
    section = gpu.find("retired_pages")
    if section is None or len(section) == 0:
        return None
    return {
        "single_bit": _int(_text(section, "multiple_single_bit_retirement/retired_count")),
        "double_bit": _int(_text(section, "double_bit_retirement/retired_count")),
        "pending_blacklist": _yes_no(_text(section, "pending_blacklist")),
        "pending_retirement": _yes_no(_text(section, "pending_retirement")),
    }


def _ecc_corrected(gpu):
    """Corrected ECC errors since the driver loaded (``ecc_errors/volatile``): ``sram_correctable``
    plus ``dram_correctable`` (Ampere and newer), or ``single_bit/total`` (older); ``None`` when
    nvidia-smi gives none (ECC off: N/A, a GPU without ECC, a trimmed capture)."""
    section = _find(gpu, "ecc_errors/volatile")
    if section is None:
        return None
    older = _int(_text(section, "single_bit/total"))
    if older is not None:
        return older
    values = [_int(_text(section, name)) for name in ("sram_correctable", "dram_correctable")]
    values = [v for v in values if v is not None]
    return sum(values) if values else None


def _remapped_rows(gpu):
    # GPUs before Ampere have no row remapper: nvidia-smi writes <remapped_rows>N/A</remapped_rows>.
    section = gpu.find("remapped_rows")
    if section is None or len(section) == 0:
        return None
    return {
        "correctable": _int(_text(section, "remapped_row_corr")),
        "uncorrectable": _int(_text(section, "remapped_row_unc")),
        "pending": _yes_no(_text(section, "remapped_row_pending")),
        "failure": _yes_no(_text(section, "remapped_row_failure")),
    }


def _processes(gpu):
    # A capture without <processes> (trimmed, truncated) says nothing about processes: None.
    section = gpu.find("processes")
    if section is None:
        return None
    result = []
    for proc in section.findall("process_info"):
        result.append({
            "pid": _int(_text(proc, "pid")),
            "name": _text(proc, "process_name"),
            "type": _text(proc, "type"),
            "used_memory_mib": _int(_text(proc, "used_memory")),
        })
    return result


def _mig(gpu):
    mode = gpu.find("mig_mode")
    devices_elem = gpu.find("mig_devices")
    if mode is None and devices_elem is None:
        return None
    devices = []
    if devices_elem is not None:
        for dev in devices_elem.findall("mig_device"):
            devices.append({
                "index": _int(_text(dev, "index")),
                "gpu_instance_id": _int(_text(dev, "gpu_instance_id")),
                "compute_instance_id": _int(_text(dev, "compute_instance_id")),
                "memory_total_mib": _int(_text(dev, "fb_memory_usage/total")),
            })
    return {
        "current": _text(mode, "current_mig"),
        "pending": _text(mode, "pending_mig"),
        "devices": devices,
    }


def _gpu(index, gpu):
    bus_id = normalise_bus_id(gpu.get("id")) or normalise_bus_id(_text(gpu, "pci/pci_bus_id"))
    return {
        "index": index,
        "minor_number": _int(_text(gpu, "minor_number")),
        "name": _text(gpu, "product_name"),
        "uuid": _text(gpu, "uuid"),
        "bus_id": bus_id,
        "persistence": _enabled(_text(gpu, "persistence_mode")),
        "ecc": {
            "current": _text(gpu, "ecc_mode/current_ecc"),
            "pending": _text(gpu, "ecc_mode/pending_ecc"),
            "volatile_corrected": _ecc_corrected(gpu),
        },
        "power": _power(gpu),
        "performance_state": performance_state(_text(gpu, "performance_state")),
        "clocks_event_reasons": _clock_reasons(gpu),
        "temperature": _temperature(gpu),
        "vbios_version": vbios_version(_text(gpu, "vbios_version")),
        "pcie": _pcie(gpu),
        "mig": _mig(gpu),
        "retired_pages": _retired_pages(gpu),
        "remapped_rows": _remapped_rows(gpu),
        "processes": _processes(gpu),
    }


# -- nvidia-smi -q -x ------------------------------------------------------------------
#: Characters XML 1.0 does not allow (its ``Char`` production): C0 controls other than tab, LF and
#: CR, lone surrogates, U+FFFE and U+FFFF. expat stops at the first one, so one control character
#: in a product or process name would cost every GPU after it; they are replaced before parsing.
_NOT_XML_RE = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
REPLACEMENT = "\ufffd"
#: The text is sanitised and fed to expat in pieces of this many characters, so that neither a
#: second copy of a large capture nor its UTF-8 encoding is ever held whole.
_CHUNK = 1 << 20
#: nvidia-smi writes an XML declaration and a DOCTYPE line before ``<nvidia_smi_log>``; a prolog
#: longer than this is refused rather than searched for entity declarations.
PROLOG_CHARS = 64 * 1024
#: Elements a document may hold: a GPU of nvidia-smi has a few hundred (up to about 1,500 with
#: long lists of supported clocks) plus about 7 per process, so a 16-GPU host stays far below. The
#: read stops beyond, which bounds its time and the tree held at any moment.
MAX_ELEMENTS = 500000
#: Children of ``<nvidia_smi_log>`` other than ``<gpu>`` that are read (the first of each).
_ROOT_FIELDS = ("driver_version", "cuda_version", "attached_gpus")

_SPACE_RE = re.compile(r"[ \t\r\n]*")
_LITERAL = r"""(?:"[^"]*"|'[^']*')"""
# <!DOCTYPE name>, <!DOCTYPE name SYSTEM "uri">, <!DOCTYPE name PUBLIC "id" "uri">, then ">" or
# "[" (the start of an internal subset, the only place a document can declare entities).
_DOCTYPE_RE = re.compile(r"<!DOCTYPE[ \t\r\n]+[^ \t\r\n\[>]+"
                         r"(?:[ \t\r\n]+(?:SYSTEM[ \t\r\n]+%s|PUBLIC[ \t\r\n]+%s[ \t\r\n]+%s))?"
                         r"[ \t\r\n]*([\[>])" % (_LITERAL, _LITERAL, _LITERAL))
_SUBSET = ("its DOCTYPE declares an internal DTD subset ([...]), where entities (<!ENTITY ...>) are "
           "declared; nvidia-smi writes only a DOCTYPE line naming its DTD")


def _refusal(text):
    """Why the prolog of ``text`` is refused (an internal DTD subset, or one too long to look
    through), or ``None``.

    Entities can only be declared in a DOCTYPE's internal subset (expat never loads the external
    DTD the DOCTYPE names), so a document without one cannot expand an entity bomb, whatever the
    expat version. The prolog is walked as expat reads it: whitespace, ``<?...?>``, ``<!--...-->``
    and one ``<!DOCTYPE ...>``; anything else ends it.
    """
    head = text[:PROLOG_CHARS]
    whole = len(text) <= len(head)
    pos = 1 if head.startswith("\ufeff") else 0
    while True:
        pos = _SPACE_RE.match(head, pos).end()
        if head.startswith("<?", pos):
            end = head.find("?>", pos + 2)
            pos = -1 if end < 0 else end + 2
        elif head.startswith("<!--", pos):
            end = head.find("-->", pos + 4)
            pos = -1 if end < 0 else end + 3
        elif head.startswith("<!DOCTYPE", pos):
            match = _DOCTYPE_RE.match(head, pos)
            if match is not None and match.group(1) == ">":
                pos = match.end()
                continue
            if match is None and whole and "[" not in head[pos:]:
                return None  # a DOCTYPE cut short, without a subset: expat finds no document
            return _SUBSET if match is not None else (
                "its DOCTYPE line is not one nvidia-smi writes and may open an internal DTD subset, "
                "where entities (<!ENTITY ...>) are declared: %r" % head[pos:pos + 80])
        elif pos < len(head) or whole:
            return None  # the root element (or something expat rejects)
        if pos < 0 or pos >= len(head):
            if whole:
                return None  # an unterminated comment or PI: expat finds no document
            return ("its prolog (before <nvidia_smi_log>) is longer than %d characters; nvidia-smi "
                    "writes two lines" % PROLOG_CHARS)


class _Stop(Exception):
    """The read ends here: the rest of the document is not read (the reason is the message)."""


def _read_smi(text):
    """``(found, fields, gpus, error, replaced)`` of ``nvidia-smi -q -x`` text, read as a stream.

    ``found`` is whether the root element is ``<nvidia_smi_log>``; ``fields`` the text of the first
    of each of :data:`_ROOT_FIELDS`. Characters XML does not allow are replaced (``replaced``
    counts them). The text is fed to expat a piece at a time; after each piece every child of the
    root that has ended (all but the last one) is turned into its facts (a ``<gpu>``) or its text
    and dropped from the tree, so memory holds about one GPU at a time. Where the input breaks
    (truncated, not well-formed, more than :data:`MAX_ELEMENTS` elements, counted at the end of
    each piece) the read stops with ``error`` saying why; the GPUs before, and the fields read of the GPU it stopped in, are kept.
    expat never fetches the external DTD named by the DOCTYPE line. Nothing here recurses over
    the tree: a deeply nested document costs its elements, nothing more.
    """
    parser = ET.XMLPullParser(events=("start",))
    root = None
    count = 0
    fields = {}
    gpus = []
    replaced = 0
    error = None

    def take(children):
        for child in children:
            if child.tag == "gpu":
                gpus.append(_gpu(len(gpus), child))
            elif child.tag in _ROOT_FIELDS and child.tag not in fields:
                fields[child.tag] = _clean(child.text)

    try:
        for at in range(0, len(text), _CHUNK):
            chunk, found = _NOT_XML_RE.subn(REPLACEMENT, text[at:at + _CHUNK])
            replaced += found
            parser.feed(chunk)
            try:
                for _event, elem in parser.read_events():
                    if root is None:
                        root = elem
                        if elem.tag != "nvidia_smi_log":
                            raise _Stop("not an nvidia_smi_log document")
                    count += 1
            finally:
                # the children that have ended, before the events of this piece can raise or stop
                if root is not None and root.tag == "nvidia_smi_log" and len(root) > 1:
                    ended = len(root) - 1
                    take(root[:ended])
                    del root[:ended]
            if count > MAX_ELEMENTS:
                raise _Stop("more than %d elements (a GPU of nvidia-smi has a few hundred): the rest was not read"
                            % MAX_ELEMENTS)
        parser.close()
        for _event, elem in parser.read_events():
            root = elem if root is None else root
    except _Stop as exc:
        error = str(exc)
    except ET.ParseError as exc:
        error = "not well-formed XML (%s)" % exc
    except Exception as exc:  # pylint: disable=broad-except
        # expat rejects some inputs with ValueError/UnicodeError rather than ParseError.
        error = "unreadable XML (%s: %s)" % (type(exc).__name__, exc)
    found = root is not None and root.tag == "nvidia_smi_log"
    if found:
        take(list(root))  # the last child: complete, or where the read stopped (what was read of it)
    return found, fields, gpus, error, replaced


def parse_smi_xml(text):
    """Parse ``nvidia-smi -q -x``.

    Returns ``None`` when the text holds no ``<nvidia_smi_log>`` element (empty, garbage,
    another document). Otherwise ``{"driver_version", "cuda_version", "attached_gpus",
    "gpus", "error", "replaced", "refused"}`` where ``error`` is ``None`` for a complete document
    and says why the document is incomplete (truncated, malformed, more elements than any
    nvidia-smi output) otherwise; GPUs read before the break are kept, fields after it are
    ``None``. ``replaced`` counts the characters XML 1.0 does not allow (control characters,
    U+FFFE/U+FFFF, lone surrogates) that were replaced by U+FFFD before parsing: the document is
    complete without them. ``refused`` is true, with no GPU and ``error`` saying why, for a
    document whose DOCTYPE opens an internal DTD subset (entity declarations: nvidia-smi writes
    none) or whose prolog is longer than :data:`PROLOG_CHARS`; nothing of it is parsed.
    """
    if not text or not isinstance(text, str):
        return None
    if "<" not in text:
        return None
    refused = _refusal(text)
    if refused is not None:
        return {"driver_version": None, "cuda_version": None, "attached_gpus": None, "gpus": [],
                "error": refused, "replaced": 0, "refused": True}
    found, fields, gpus, error, replaced = _read_smi(text)
    if not found:
        return None
    return {
        "driver_version": fields.get("driver_version"),
        "cuda_version": fields.get("cuda_version"),
        "attached_gpus": _int(fields.get("attached_gpus")),
        "gpus": gpus,
        "error": error,
        "replaced": replaced,
        "refused": False,
    }


# -- nvidia-smi topo -m ------------------------------------------------------------------
_AFFINITY_COLUMNS = {"CPU Affinity": "cpu", "NUMA Affinity": "numa", "GPU NUMA ID": "gpu_numa"}
_NIC_LEGEND_RE = re.compile(r"^\s*(NIC\d+):\s*(\S+)\s*$")
# Device columns: GPUn and NICn (drivers since about R470); older drivers name NICs by their
# RDMA device (mlx5_0, bnxt_re0): lower case, so glued names such as NIC8NIC9 or GPU0GPU1 do not pass.
_TOPO_DEVICE_RE = re.compile(r"^(GPU\d+|NIC\d+|[a-z][a-z0-9_]*\d)$")
#: The PCIe link types of the matrix legend, nearest first: PIX (one PCIe switch), PXB (several),
#: PHB (the host bridge), NODE (the NUMA node's host bridges), SYS (across the SMP interconnect);
#: SOC is the older drivers' name for SYS. Besides them: X (self) and NV# (a bonded set of # NVLinks).
TOPO_PCIE_LINKS = ("PIX", "PXB", "PHB", "NODE", "SYS", "SOC")
_TOPO_LINK_RE = re.compile(r"^(X|%s|NV\d+)$" % "|".join(TOPO_PCIE_LINKS))


#: ``nvidia-smi topo -m`` of 8 GPUs and 10 NICs is about 3 KB; 256 devices, 330 KB. Longer
#: output is not a topology matrix and is refused before it is split into lines.
MAX_TOPO_CHARS = 1024 * 1024
#: Device columns a matrix may have (a host has at most a few dozen GPUs and NICs).
MAX_TOPO_DEVICES = 256
_AFFINITY_NAMES = [(name, name.split()) for name in sorted(_AFFINITY_COLUMNS, key=len, reverse=True)]


class TopoError(ValueError):
    """A ``nvidia-smi topo -m`` matrix that does not read as the documented format."""


def strip_ansi(text):
    return _ANSI_RE.sub("", text)


def _split_header(line):
    if "\t" in line:
        return [cell.strip() for cell in line.split("\t") if cell.strip()]
    # Captures whose tabs were expanded to spaces: re-join the multi-word column names.
    cells = []
    words = line.split()
    i = 0
    while i < len(words):
        for name, parts in _AFFINITY_NAMES:
            if words[i:i + len(parts)] == parts:
                cells.append(name)
                i += len(parts)
                break
        else:
            cells.append(words[i])
            i += 1
    return cells


def _split_row(line, tabbed):
    # Tab-separated cells may be empty (padding); whitespace-split captures lose those.
    if tabbed:
        return [cell.strip() for cell in line.split("\t")]
    return line.split()


def parse_topo(text):
    """Parse ``nvidia-smi topo -m``.

    Returns ``{"devices", "matrix", "affinity", "nic_names"}`` or ``None`` when there
    is no header row starting with ``GPU0`` followed by at least one device row. ``matrix[a][b]`` is the
    link type (``X``, ``SYS``, ``NODE``, ``PHB``, ``PXB``, ``PIX``, ``NV12``...);
    ``affinity`` has the CPU list, NUMA node and GPU NUMA id per GPU (``None`` for
    ``N/A`` or empty cells); ``nic_names`` maps ``NICn`` to the device of the NIC legend.
    The connection legend after the matrix is not part of the result.

    Raises :class:`TopoError` for output longer than :data:`MAX_TOPO_CHARS` (before splitting
    it), and, naming the line, for a header of more than :data:`MAX_TOPO_DEVICES` devices or
    when the matrix does not read as the documented format: a device name other than
    ``GPUn``/``NICn``/an RDMA device name (columns that ran together, such as ``NIC8NIC9``), a
    link type outside the legend (``NODENODE``), or a row with more or fewer link cells than the
    header has devices. Guessing would invent devices and links.
    """
    if not text or not isinstance(text, str):
        return None
    if len(text) > MAX_TOPO_CHARS:
        raise TopoError("%d characters of output, more than any topology matrix (%d at most): not read"
                        % (len(text), MAX_TOPO_CHARS))
    lines = strip_ansi(text).replace("\r", "").split("\n")
    header_at = None
    for i, line in enumerate(lines):
        if "GPU0" not in line:
            continue
        cells = _split_header(line)
        # The header starts with GPU0 like the first row does, but only rows hold "X" (self).
        if cells and cells[0] == "GPU0" and "X" not in cells:
            header_at = i
            break
    if header_at is None:
        return None
    header = _split_header(lines[header_at])
    columns = len([cell for cell in header if cell not in _AFFINITY_COLUMNS])
    if columns > MAX_TOPO_DEVICES:
        raise TopoError("line %d: %d device columns, more than the %d of any host: %r"
                        % (header_at + 1, columns, MAX_TOPO_DEVICES, lines[header_at].strip()[:200]))
    for cell in header:
        if cell not in _AFFINITY_COLUMNS and not _TOPO_DEVICE_RE.match(cell):
            raise TopoError("line %d: column %r is not a device name (GPUn, NICn): columns run together? %r"
                            % (header_at + 1, cell, lines[header_at].strip()[:200]))
    devices = []
    extra = []
    for cell in header:
        if cell in _AFFINITY_COLUMNS:
            extra.append(_AFFINITY_COLUMNS[cell])
        elif not extra:
            devices.append(cell)
        else:
            # an unknown column after the affinity ones: keep positions aligned
            extra.append(cell)
    matrix = {}
    affinity = {}
    for number, line in enumerate(lines[header_at + 1:], start=header_at + 2):
        if not line.strip():
            break
        cells = _split_row(line, "\t" in line)
        name = cells[0].strip() if cells else ""
        if name not in devices:
            if _TOPO_DEVICE_RE.match(name) or not name.startswith(("GPU", "NIC")):
                continue
            raise TopoError("line %d: row %r is not a device of the header: columns run together? %r"
                            % (number, name, line.strip()[:200]))
        values = cells[1:]
        row = {}
        for j, other in enumerate(devices):
            value = values[j].strip() if j < len(values) else ""
            if not value:
                raise TopoError("line %d: row %s has no link type for %s (%d device columns): %r"
                                % (number, name, other, len(devices), line.strip()[:200]))
            if not _TOPO_LINK_RE.match(value):
                raise TopoError("line %d: %r (row %s, column %s) is not a link type of the legend "
                                "(X, SYS, NODE, PHB, PXB, PIX, NV#): %r"
                                % (number, value, name, other, line.strip()[:200]))
            row[other] = value
        matrix[name] = row
        # nvidia-smi writes an extra tab before "GPU NUMA ID" ("0-31\t0\t\tN/A") and empty
        # cells for NICs; unknown values are spelled N/A, so empty cells are only padding.
        rest = [cell for cell in values[len(devices):] if cell.strip()]
        if name.startswith("GPU"):
            entry = {"cpu": None, "numa": None, "gpu_numa": None}
            for k, key in enumerate(extra):
                if k < len(rest) and key in entry:
                    entry[key] = _clean(rest[k])
            affinity[name] = entry
    if not matrix:
        return None
    nic_names = {}
    for line in lines[header_at + 1:]:
        match = _NIC_LEGEND_RE.match(line)
        if match and match.group(1) in devices:
            nic_names[match.group(1)] = match.group(2)
    return {"devices": devices, "matrix": matrix, "affinity": affinity, "nic_names": nic_names}


# -- gather --------------------------------------------------------------------------
def topology_joins(attached, gpus, topology):
    """Whether ``GPUn`` of ``nvidia-smi topo -m`` is the GPU at position n of ``nvidia-smi -q -x``.

    topo -m numbers GPUs by the driver's index, -q -x lists the GPUs it can open: with a GPU lost
    in the middle of the bus (``attached_gpus`` 8, seven ``<gpu>`` elements) the positions after it
    are not those numbers, and neither output names a GPU otherwise in the matrix. Joined only
    when -q -x lists every attached GPU and the matrix has as many GPU rows.
    """
    if topology is None or not gpus:
        return False
    rows = len([name for name in topology["matrix"] if name.startswith("GPU")])
    return rows == len(gpus) and (attached is None or attached == len(gpus))


def _topology_of(topology, index):
    entry = None
    if topology is not None:
        entry = topology["affinity"].get("GPU%d" % index)
    entry = entry or {}
    return {
        "label": "GPU%d" % index if topology is not None else None,
        "cpu_affinity": entry.get("cpu"),
        "numa_affinity": entry.get("numa"),
        "gpu_numa_id": entry.get("gpu_numa"),
    }


def gather(root):
    """The ``nvidia`` section of the facts (docs/facts.md) read through ``root``."""
    module = None
    version_text = root.read_text(VERSION_PATH, SUBSYSTEM, optional=True)
    if version_text is not None:
        module = parse_module_version(version_text)
        if module is None:
            root.error(SUBSYSTEM, VERSION_PATH, "no 'NVRM version:' line: not an NVIDIA driver version file")
    module = module or {"version": None, "open": None, "raw": None}

    smi = {"available": False, "error": None, "bound": None}
    parsed = None
    xml_text, reason = root.command("nvidia-smi-q", SUBSYSTEM)
    if xml_text is None:
        smi["error"] = reason
        # timeout: the driver did not answer (HEALTH-024); output_cap: it flooded its output
        smi["bound"] = getattr(root, "capture_bounds", {}).get("nvidia-smi-q")
    else:
        parsed = parse_smi_xml(xml_text)
        if parsed is not None and parsed["replaced"]:
            root.error(SUBSYSTEM, "nvidia-smi -q -x",
                       "nvidia-smi -q -x output held %d character%s not allowed in XML (replaced by U+FFFD "
                       "before parsing)" % (parsed["replaced"], "" if parsed["replaced"] == 1 else "s"))
        if parsed is None:
            smi["error"] = ("nvidia-smi -q -x output has no <nvidia_smi_log> document (%d bytes): "
                            "check that nvidia-smi works on the host" % len(xml_text))
            root.error(SUBSYSTEM, "nvidia-smi -q -x", smi["error"])
        elif parsed["refused"]:
            smi["error"] = "nvidia-smi -q -x output refused unread: %s" % parsed["error"]
            root.error(SUBSYSTEM, "nvidia-smi -q -x", smi["error"])
            parsed = None
        elif parsed["error"]:
            smi["available"] = True
            smi["error"] = ("nvidia-smi -q -x output is incomplete, %s: values after that point are null; "
                            "capture it again" % parsed["error"])
            root.error(SUBSYSTEM, "nvidia-smi -q -x", smi["error"])
        else:
            smi["available"] = True

    topology = None
    topo_text = None
    if xml_text is not None:
        # Without nvidia-smi -q output (no binary, driver not talking) topo -m fails the same
        # way; asking again would only repeat the error.
        topo_text, _reason = root.command("nvidia-smi-topo", SUBSYSTEM)
    if topo_text is not None:
        try:
            topology = parse_topo(topo_text)
        except TopoError as exc:
            topology = None
            root.error(SUBSYSTEM, "nvidia-smi topo -m", "topology matrix not read: %s" % exc)
        else:
            if topology is None:
                root.error(SUBSYSTEM, "nvidia-smi topo -m",
                           "no topology matrix (header row with GPU0...) in nvidia-smi topo -m output")

    gpus = parsed["gpus"] if parsed else []
    joined = topology_joins(parsed["attached_gpus"] if parsed else None, gpus, topology)
    if topology is not None and gpus and not joined:
        root.error(SUBSYSTEM, "nvidia-smi topo -m",
                   "the matrix has %d GPU rows and nvidia-smi -q -x lists %d of %s attached GPUs: topo -m numbers "
                   "GPUs by the driver's index, so with a GPU missing its rows cannot be told apart; not joined to "
                   "the GPUs" % (len([n for n in topology["matrix"] if n.startswith("GPU")]), len(gpus),
                                 parsed["attached_gpus"]))
    for gpu in gpus:
        gpu["topology"] = _topology_of(topology if joined else None, gpu["index"])

    return {
        "present": bool(version_text is not None or gpus),
        "module": module,
        "smi": smi,
        "driver_version": parsed["driver_version"] if parsed else None,
        "cuda_version": parsed["cuda_version"] if parsed else None,
        "attached_gpus": parsed["attached_gpus"] if parsed else None,
        "gpus": gpus,
        "topology": topology,
    }
