# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parsers of the measurement tools' outputs: nvbandwidth, ``dcgmi diag -j``, ``dcgmi health -c -j``
and nccl-tests (``all_reduce_perf`` and the other ``*_perf`` programs) for the GPUs; ``stress-ng --stream``,
``sysbench memory`` and ``mbw`` for memory bandwidth, and ``/proc/cpuinfo``'s ``cpu MHz`` for the CPU clock
(run by ``measure/measure_host.py``).

Pure functions over text (or bytes) that never raise: each returns ``(result, None)`` with plain data,
figures in one unit (``GB/s`` for bandwidth, ``us`` for time, bytes for sizes), or ``(None, reason)``
for output that is empty, garbage, truncated or says the tool could not run. A reason is one line that
names what was missing, so a caller reports the measurement ``unknown`` with it, never a pass.

Every figure is a finite number, never negative (:func:`_number`): a tool that prints ``inf``,
``1e999``, ``nan`` or ``-3.2`` gave no figure there, never one that passes. Every parser's time is
linear in its input: the text is bounded (:data:`MAX_TEXT`), a line longer than :data:`MAX_LINE` is
not read (no tool prints one), and no regular expression here backtracks over a line more than a
bounded number of times (the fuzz corpus, tests/fuzz/test_fuzz_measure.py, times a crafted case
per tool).

Running the tools (a GPU, timeouts, exit codes) and judging the figures (against the PCIe link rate of
``facts/pci.py``'s :func:`link_rate_gbs` with a profile's fractions) belong to their callers.

Formats (real outputs and where they come from: tests/fixtures/measure/README.md):

* nvbandwidth (https://github.com/NVIDIA/nvbandwidth, ``output.cpp`` and ``json_output.cpp``): text with
  ``Running <testcase>.``, a description line ``memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)``, a
  header of column indices, one row per source, ``SUM <testcase> <value>`` (from v0.9 then
  ``COEFFICIENT_OF_VARIATION <testcase> <value>``; v0.10 prints no ``Device N:`` lines, and its bidirectional
  device-to-device testcases print three matrices, ``<testcase>_read1``/``_read2``/``_total`` or
  ``_write1``/``_write2``/``_total``, each with its own SUM line); on a failed data check it prints
  ``Invalid value when checking the pattern at 0x...`` and aborts with ``ASSERT in expression ...``, a CUDA
  error as ``[CUDA_ERROR_X] ... in expression ...``; or with ``-j`` a JSON
  document ``{"nvbandwidth": {"testcases": [{"name", "status", "bandwidth_description",
  "bandwidth_matrix": [["12.3", "N/A", ...]], "sum"}], ...}}``.
* ``dcgmi diag -r N -j`` (https://github.com/NVIDIA/DCGM): ``{"DCGM GPU Diagnostic": {"test_categories":
  [{"category", "tests": [{"name", "results": [{"gpu_id", "status", "warnings"}]}]}]}}`` up to DCGM 3, and
  ``{"DCGM Diagnostic": {"test_categories": [... {"results": [{"entity_group", "entity_id", "status",
  "warnings"}], "test_summary": {"status"}}]}}`` from DCGM 4 (``testing/python3/dcgm_diag_schema.json``).
* ``dcgmi health -c -j`` (DCGM ``dcgmi/Health.cpp``, ``DcgmiOutput.cpp``): ``{"header": ["Health Monitor
  Report"], "body": {"Overall Health": {"value": "Healthy"}, "GPU": {"children": {"0": {"value":
  "Warning", "children": {"Errors": {"children": {"PCIe system": {"value": "Warning", "overflow":
  [message parts]}}}}}}}}}``; without ``-j`` the same tree as DCGM's text layout (``DcgmiOutputTree``): a frame
  of ``+---+---+`` lines, ``| Overall Health            | Warning |``, ``| -> 0 | Warning |``, each level 3 spaces
  deeper, a message's parts as rows without a label.
* nccl-tests (https://github.com/NVIDIA/nccl-tests, ``src/util.cu``): a ``#`` header naming the columns
  (``size count type redop root time algbw busbw #wrong time algbw busbw #wrong``, out-of-place then
  in-place), one row per message size, then ``# Out of bounds values : 0 OK`` and
  ``# Avg bus bandwidth    : 72.7724``.
* ``stress-ng --stream N --metrics-brief`` (on stderr): one ``stream: memory rate: 4965.67 MB read/sec,
  3310.44 MB write/sec, 433.91 Mflop/sec (instance 0)`` line per instance, or ``stream: run duration too
  short to determine memory rate``; ``metrc`` lines ``memory read rate (MB per sec) (geometic mean of N
  instances)`` (stress-ng's spelling); ``successful run completed``.
* ``sysbench memory ... run``: ``41071.00 MiB transferred (13655.19 MiB/sec)``.
* ``mbw -q -n N -t0 SIZE``: one line per iteration and ``AVG\tMethod: MEMCPY\tElapsed: 0.04154\tMiB:
  128.00000\tCopy: 3081.714 MiB/s``.
"""

from __future__ import absolute_import, division, print_function

import json
import math
import re

__metaclass__ = type

#: bound on the text parsed (a full nvbandwidth run on 8 GPUs is about 20 KiB)
MAX_TEXT = 4 << 20
#: bound on the GPUs (columns, rows) of one matrix (a host has 8 or 16; an NVL72 rack 72)
MAX_GPUS = 256
#: bound on the figures of all the matrices of one output: four of :data:`MAX_GPUS` GPUs (each figure
#: becomes a few hundred bytes of result: a bound on the memory too)
MAX_CELLS = 4 * MAX_GPUS * MAX_GPUS
#: a line longer than this is not read: the longest a tool prints is a matrix row of :data:`MAX_GPUS`
#: figures (an nvbandwidth row of 256 GPUs is about 2.6 KiB)
MAX_LINE = 8192
#: matrices one nvbandwidth testcase may print (v0.10's bidirectional testcases print 3)
MAX_MATRICES = 8
#: bound on the tokens of an nccl-tests header line (13 in every nccl-tests version)
MAX_NCCL_COLUMNS = 64

_NUMBER_RE = re.compile(r"^[+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$")
#: a token printed as a number, figure or not (``-1``, ``inf``, ``NaN``, ``1e999``): refused by :func:`_number` it
#: is a broken figure, not a word
_NUMERIC_RE = re.compile(r"^[+-]?(?:inf(?:inity)?|nan|[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)$", re.I)
#: the size column of an nccl-tests row: bytes in ASCII digits
_SIZE_RE = re.compile(r"^[0-9]{1,20}$")
#: a GPU index or a count as printed (ASCII digits, bounded: ``int()`` of it is cheap and never refused)
_INDEX_RE = re.compile(r"^[0-9]{1,6}$")


def _text(data):
    """``(text, None)`` or ``(None, reason)``: decoded, bounded, not empty."""
    if isinstance(data, bytes):
        data = data[:MAX_TEXT].decode("utf-8", "replace")
    if not isinstance(data, str):
        return None, "no output"
    data = data[:MAX_TEXT]
    if not data.strip():
        return None, "empty output"
    if "\x00" in data:
        return None, "binary output (NUL bytes), not the tool's text"
    return data, None


def _lines(text):
    """The lines of ``text`` that are at most :data:`MAX_LINE` characters long (a longer one is no
    tool's line: skipped, so that no regular expression sees it)."""
    for line in text.splitlines():
        if len(line) <= MAX_LINE:
            yield line


#: words of a line that says what failed: an assertion, a CUDA or driver error, a failure, a refusal
_FAILURE_RE = re.compile(r"(?i)(?:\bassert|\berror\b|\bfail(?:ed|ure)?\b|\binvalid\b|\bunsupported\b|"
                         r"\bnot supported\b|\babort|\bunable\b|\bcannot\b|out of memory|busy or unavailable|"
                         r"\bexception\b)")
#: the most lines :func:`failure_line` looks at
FAILURE_LINES_MAX = 10000


def failure_line(data, limit=200):
    """The line of a tool's output that says what failed, for the reason of a run that gave no figure: the
    first that names an assertion, an error, a failure or a refusal (nvbandwidth's ``Invalid value when
    checking the pattern at 0x...`` before its ``ASSERT ...``; nccl-tests' ``Test CUDA failure ... busy or
    unavailable``), else the first line; ``"no output"`` when there is none. At most ``limit`` characters,
    white space made single spaces; the first :data:`FAILURE_LINES_MAX` lines of at most :data:`MAX_LINE`
    characters are looked at."""
    text, error = _text(data)
    if error:
        return "no output" if error in ("empty output", "no output") else error
    first = None
    for number, line in enumerate(_lines(text)):
        if number >= FAILURE_LINES_MAX:
            break
        line = " ".join(line.split())
        if not line:
            continue
        if first is None:
            first = line
        if _FAILURE_RE.search(line):
            return line[:limit]
    return (first or "no output")[:limit]


def _number(token):
    """``float`` of a plain decimal token or a number, finite and not negative; ``None`` for anything
    else (``N/A``, ``nan``, ``inf``, ``1e999``, ``-1``, a bool): a figure no tool measures is no figure."""
    if isinstance(token, bool):
        return None
    if isinstance(token, int):
        value = float(token) if abs(token) < 1 << 1000 else math.inf
    elif isinstance(token, float):
        value = token
    elif isinstance(token, str) and len(token) <= 64 and _NUMBER_RE.match(token.strip()):
        value = float(token.strip())
    else:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _numeric(token):
    """Whether ``token`` is printed as a number (refused by :func:`_number` or not)."""
    return isinstance(token, str) and len(token) <= 64 and _NUMERIC_RE.match(token) is not None


def _index(token):
    """``int`` of a GPU index or a count printed in ASCII digits (at most six); ``None`` otherwise."""
    return int(token) if isinstance(token, str) and _INDEX_RE.match(token) else None


def _json_object(text, what):
    """The first JSON object in ``text`` (a tool may print a line before it): ``(obj, None)`` or ``(None, reason)``."""
    start = text.find("{")
    if start < 0:
        first = text.strip().splitlines()[0][:120]
        return None, "%s printed no JSON (first line: %r)" % (what, first)
    try:
        obj, dummy = json.JSONDecoder().raw_decode(text[start:])
    except ValueError as exc:
        return None, "%s printed JSON that does not parse (%s): truncated or not JSON" % (what, str(exc)[:80])
    except RecursionError:
        return None, "%s printed JSON nested too deeply to read" % what
    if not isinstance(obj, dict):
        return None, "%s printed JSON that is not an object" % what
    return obj, None


# -- nvbandwidth ------------------------------------------------------------------------------------
_NVB_RUNNING_RE = re.compile(r"^(Running|Waived|Not Found|Error)\s+([A-Za-z0-9_]+)\.\s*$")
_NVB_STATUS_RE = re.compile(r"^(Waived|Error|ERROR|Not Found)\s*:\s*(.*)$")
_NVB_UNIT_RE = re.compile(r"\(([^()]{1,16})\)\s*$")
_NVB_SUM_RE = re.compile(r"^SUM\s+([A-Za-z0-9_]+)\s+(\S+)\s*$")
_NVB_COV_RE = re.compile(r"^COEFFICIENT_OF_VARIATION\s+([A-Za-z0-9_]+)\s+(\S+)\s*$")
#: nvbandwidth's own words when a copy's data check failed or the tool aborted (``testcase.cpp``,
#: ``memcpy.cpp``, ``error_handling.h``): kind -> the line's pattern
_NVB_FAILURES = (
    ("data_check", re.compile(r"Invalid value when checking the pattern")),
    ("assert", re.compile(r"^ASSERT in expression ")),
    ("cuda_error", re.compile(r"^\[(?:CUDA_ERROR_[A-Z_]+|cuda[A-Z][A-Za-z]+)\]")),
    ("sanity_check", re.compile(r"^CUDA runtime sanity check failed")),
)
#: the kinds of :data:`_NVB_FAILURES`, worst first (derive_validation.NVB_FAILURES words each)
NVB_FAILURE_KINDS = tuple(kind for kind, dummy in _NVB_FAILURES)
_NVB_VERSION_RE = re.compile(r"^nvbandwidth Version:\s*(\S+)")
_NVB_DRIVER_RE = re.compile(r"^Driver Version:\s*(\S+)")
_NVB_RUNTIME_RE = re.compile(r"^CUDA Runtime Version:\s*(\S+)")
#: on a stripped line; ``(\\S.*)`` and not ``(.+?)\\s*$``, which backtracks quadratically over inner blanks
_NVB_DEVICE_RE = re.compile(r"^Device ([0-9]{1,4}):\s*(\S.*)$")
_NVB_JSON_DEVICE_RE = re.compile(r"^([0-9]{1,4}):\s*(\S.*)$")
_NVB_STATUSES = {"running": "passed", "passed": "passed", "waived": "waived", "not found": "not_found",
                 "error": "error"}


def _nvb_shape(description):
    """``(rows_are, direction)`` from a description: ``cpu``/``gpu`` rows; ``->``, ``<-`` or ``<->``."""
    rows_are = "cpu" if re.search(r"\bCPU\s*\(row\)", description or "") else "gpu"
    for arrow in ("<->", "->", "<-"):
        if arrow in (description or ""):
            return rows_are, arrow
    return rows_are, None


def _nvb_pick_total(case):
    """A testcase that printed several matrices (v0.10's bidirectional ones: ``_read1``, ``_read2``,
    ``_total``): ``matrices`` lists each (``{key: {"description", "sum", "cov"}}``) and the case's own figures
    are its ``_total`` matrix's; several without a total are refused by name (``error``)."""
    extra = case.pop("_extra", None)
    if not extra:
        return
    every = [dict((k, case.get(k)) for k in ("description", "unit", "_header", "_rows", "key", "sum", "cov"))] + extra
    case["matrices"] = dict((m["key"] or "matrix %d" % (i + 1), {"description": m["description"], "sum": m["sum"],
                                                                 "cov": m["cov"]}) for i, m in enumerate(every))
    total = [m for m in every if (m["key"] or "").endswith("_total")]
    if len(total) != 1:
        case.update(_rows=[], _header=None, status="error" if case["status"] == "passed" else case["status"],
                    error=case.get("error") or "%d matrices (%s) and not one total: not read" % (
                        len(every), ", ".join(sorted(case["matrices"]))))
        return
    case.update((k, total[0][k]) for k in ("description", "unit", "_header", "_rows", "key", "sum", "cov"))


def _nvb_finish(case):
    """Per GPU (CPU rows) or per pair (GPU rows) figures of a complete matrix; an error otherwise."""
    _nvb_pick_total(case)
    case.pop("key", None)
    matrix = case.pop("_rows", None)
    header = case.pop("_header", None)
    if case["status"] != "passed":
        return case
    if not header or not matrix:
        case.update(status="error", error=case.get("error") or "no bandwidth matrix (truncated output?)")
        return case
    if any(len(row) != len(header) + 1 for row in matrix):
        case.update(status="error", error="a matrix row has not one value per column (truncated output?)")
        return case
    unit = case.get("unit")
    case["matrix"] = [[_number(value) for value in row[1:]] for row in matrix]
    rows_are, arrow = _nvb_shape(case.get("description"))
    case["rows_are"], case["direction"] = rows_are, arrow
    if rows_are == "cpu":
        values = case["matrix"][0] if len(case["matrix"]) == 1 else None
        if values is None:
            case.update(status="error", error="a CPU row matrix with %d rows" % len(case["matrix"]))
            return case
        case["per_gpu"] = dict((str(column), value) for column, value in zip(header, values))
    else:
        pairs = []
        for row, values in zip(matrix, case["matrix"]):
            for column, value in zip(header, values):
                if str(row[0]) == str(column) or value is None:
                    continue
                src, dst = (str(row[0]), str(column)) if arrow != "<-" else (str(column), str(row[0]))
                pairs.append({"src": src, "dst": dst, "value": value})
        case["pairs"] = pairs
    case["unit"] = unit
    return case


def _nvb_text(text):
    info = {"format": "text", "version": None, "driver_version": None, "cuda_runtime_version": None,
            "devices": {}}
    cases = []
    case = None
    for raw in _lines(text):
        line = raw.strip()
        if not line:
            continue
        for key, regex in (("version", _NVB_VERSION_RE), ("driver_version", _NVB_DRIVER_RE),
                           ("cuda_runtime_version", _NVB_RUNTIME_RE)):
            match = regex.match(line)
            if match and info[key] is None:
                info[key] = match.group(1)
        match = _NVB_DEVICE_RE.match(line)
        if match and case is None and len(info["devices"]) < MAX_GPUS:
            info["devices"][match.group(1)] = match.group(2)[:300]
            continue
        match = _NVB_RUNNING_RE.match(line)
        if match:
            case = {"name": match.group(2), "status": _NVB_STATUSES[match.group(1).lower()],
                    "description": None, "unit": None, "sum": None, "cov": None, "key": None, "error": None,
                    "_rows": [], "_header": None, "_extra": []}
            matrix = case
            cases.append(case)
            continue
        if case is None:
            continue
        match = _NVB_STATUS_RE.match(line)
        if match:
            case["status"] = _NVB_STATUSES.get(match.group(1).lower(), "error")
            case["error"] = match.group(2)[:300] or match.group(1)
            continue
        match = _NVB_SUM_RE.match(line)
        if match:
            matrix["key"], matrix["sum"] = match.group(1)[:100], _number(match.group(2))
            continue
        match = _NVB_COV_RE.match(line)
        if match:
            matrix["cov"] = _number(match.group(2))
            continue
        tokens = line.split()
        is_description = "bandwidth" in line or "latency" in line
        if is_description and matrix["description"] is not None and matrix["_header"] is not None \
                and len(case["_extra"]) < MAX_MATRICES:
            # the next matrix of a testcase that prints several (v0.10: Read1, Read2, Total)
            matrix = {"description": None, "unit": None, "_header": None, "_rows": [], "key": None, "sum": None,
                      "cov": None}
            case["_extra"].append(matrix)
        if matrix["description"] is None and is_description:
            matrix["description"] = line[:200]
            unit = _NVB_UNIT_RE.search(line)
            matrix["unit"] = unit.group(1) if unit else None
        elif matrix["_header"] is None and len(tokens) <= MAX_GPUS and all(_index(token) is not None for token in tokens):
            matrix["_header"] = tokens
        elif matrix["_header"] is not None and _index(tokens[0]) is not None and len(matrix["_rows"]) < MAX_GPUS:
            matrix["_rows"].append(tokens)
    return info, cases


def _nvb_json(obj):
    root = obj.get("nvbandwidth")
    if not isinstance(root, dict):
        return None, None, "JSON without an \"nvbandwidth\" object: not nvbandwidth -j output"
    info = {"format": "json", "version": _str(root.get("version")), "driver_version": _str(root.get("Driver Version")),
            "cuda_runtime_version": _str(root.get("CUDA Runtime Version")), "devices": {}}
    devices = root.get("GPU Device list")
    for entry in devices[:MAX_GPUS] if isinstance(devices, list) else []:
        match = _NVB_JSON_DEVICE_RE.match(entry.strip() if isinstance(entry, str) and len(entry) <= MAX_LINE else "")
        if match:
            info["devices"][match.group(1)] = match.group(2)[:300]
    cases = []
    testcases = root.get("testcases")
    for item in testcases if isinstance(testcases, list) else []:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        status = _NVB_STATUSES.get(str(item.get("status", "")).lower(), "error")
        description = _str(item.get("bandwidth_description"))
        unit = _NVB_UNIT_RE.search(description or "")
        rows = item.get("bandwidth_matrix")
        rows = rows if isinstance(rows, list) and all(isinstance(row, list) for row in rows) else []
        width = max([len(row) for row in rows] or [0])
        error = _str(item.get("error"))
        if width > MAX_GPUS or len(rows) > MAX_GPUS:
            error, rows = "a bandwidth matrix of more than %d GPUs: not read" % MAX_GPUS, []
            width = 0
        case = {"name": item["name"][:100], "status": status, "description": description,
                "unit": unit.group(1) if unit else None, "sum": _number(item.get("sum")), "cov": None,
                "error": error,
                "_header": [str(column) for column in range(width)] if rows else None,
                "_rows": [[str(index)] + [_cell(value) for value in row] for index, row in enumerate(rows)]}
        cases.append(case)
    if root.get("error") and not cases:
        return None, None, "nvbandwidth reported an error: %s" % _str(root.get("error"))
    return info, cases, None


def _str(value):
    return value[:300] if isinstance(value, str) else (None if value is None else str(value)[:300])


def _cell(value):
    """A JSON matrix cell as the text parser sees it: a string (``"12.3"``, ``"N/A"``), a number as is."""
    return value[:64] if isinstance(value, str) else (value if isinstance(value, (int, float)) else "N/A")


def parse_nvbandwidth(data):
    """nvbandwidth's text or ``-j`` output -> ``(result, None)`` or ``(None, reason)``.

    ``result``: ``format`` (``text``/``json``), ``version``, ``driver_version``, ``cuda_runtime_version``,
    ``devices`` (``{"0": "NVIDIA A100 ... (00000000:99:00)"}``) and ``testcases`` ``{name: case}``; a case has
    ``status`` (``passed``, ``waived``, ``not_found``, ``error``), ``error``, ``description``, ``unit``
    (``GB/s``), ``sum``, and when passed ``matrix`` (``None`` for ``N/A``), ``rows_are`` (``cpu``/``gpu``),
    ``direction`` (``->``, ``<-``, ``<->``), ``per_gpu`` (CPU rows: ``{gpu: value}``) or ``pairs`` (GPU rows:
    ``[{"src", "dst", "value"}]``, the diagonal left out). A case whose matrix is cut short is ``error``.
    """
    text, error = _text(data)
    if error:
        return None, "nvbandwidth: %s" % error
    if text.lstrip().startswith("{"):
        obj, error = _json_object(text, "nvbandwidth")
        if error:
            return None, error
        info, cases, error = _nvb_json(obj)
        if error:
            return None, error
    else:
        info, cases = _nvb_text(text)
    budget = MAX_CELLS
    for case in cases:
        cells = sum(len(row) for m in [case] + case.get("_extra", []) for row in m["_rows"])
        if cells > budget:
            case.update(_rows=[], _header=None, _extra=[], error=case["error"] or
                        "more than %d figures in nvbandwidth's matrices: not read" % MAX_CELLS)
        budget -= min(cells, budget)
    if not cases:
        first = text.strip().splitlines()[0][:120]
        return None, "not nvbandwidth output: no testcase ran (first line: %r)" % first
    info["testcases"] = dict((case["name"], _nvb_finish(case)) for case in cases)
    info["failure"] = nvbandwidth_failure(text)
    if info["failure"] is not None and cases[-1]["status"] in ("passed", "error"):
        info["failure"]["testcase"] = cases[-1]["name"]
    return info, None


def nvbandwidth_failure(data):
    """``{"kind", "line", "lines", "testcase"}`` when nvbandwidth's output says a copy's data check failed or
    the tool aborted, else ``None``. ``kind``: ``data_check`` (``Invalid value when checking the pattern``: a
    copy returned wrong data), ``assert``, ``cuda_error`` or ``sanity_check``; the worst found wins (a data
    check before the ASSERT it causes). ``line`` is that line, ``lines`` up to three such lines as printed
    (white space made single), ``testcase`` the testcase it ran in (set by :func:`parse_nvbandwidth`)."""
    text, error = _text(data)
    if error:
        return None
    found, lines = None, []
    for number, raw in enumerate(_lines(text)):
        if number >= FAILURE_LINES_MAX:
            break
        line = " ".join(raw.split())
        for kind, regex in _NVB_FAILURES:
            if regex.search(line):
                if len(lines) < 3:
                    lines.append(line[:300])
                if found is None or NVB_FAILURE_KINDS.index(kind) < NVB_FAILURE_KINDS.index(found[0]):
                    found = (kind, line[:300])
                break
    if found is None:
        return None
    return {"kind": found[0], "line": found[1], "lines": lines, "testcase": None}


# -- dcgmi diag -j --------------------------------------------------------------------------------
#: worst first; a status dcgmi writes that is none of these is "unknown"
DIAG_STATUS_ORDER = ("fail", "warn", "unknown", "pass", "skip")
_DIAG_STATUSES = {"pass": "pass", "fail": "fail", "warn": "warn", "warning": "warn", "skip": "skip",
                  "not run": "skip", "notrun": "skip"}


def _worst(statuses, order=DIAG_STATUS_ORDER):
    found = [status for status in order if status in statuses]
    return found[0] if found else None


def _diag_messages(result):
    out = []
    for key in ("warnings", "errors"):
        items = result.get(key)
        # DCGM 3.0-3.2 write one string, 3.3 and 4 a list of strings or of {"warning", "error_id", ...}
        for item in [items] if isinstance(items, str) else items if isinstance(items, list) else []:
            if isinstance(item, dict):
                item = item.get("warning") or item.get("error") or item.get("message")
            if isinstance(item, str) and item.strip():
                out.append(item.strip()[:500])
    return out


#: a GPU of ``gpu_ids``: ``0`` or ``gpu0`` (nvvs's own form, JsonResult.hpp)
_DIAG_GPU_RE = re.compile(r"^(?:gpu)?([0-9]{1,4})$", re.IGNORECASE)


def _diag_entities(result):
    """The entities a ``dcgmi diag -j`` result is about (``["GPU 0"]``), ``[]`` for the whole host.

    DCGM 4 names one entity (``entity_group`` and ``entity_id``); 3.3 one GPU (``gpu_id``, a string, or an
    integer on a deployment error); 3.0-3.2 one GPU in ``gpu_ids`` (``"0"``: the key's name is older than
    its one value); nvvs's own JSON a comma-separated list in ``gpu_ids`` (``"0,1,2,3"``, ``"gpu0,gpu1"``).
    An id that is not a GPU index is kept as written (clipped), so the result still names it."""
    if "entity_id" in result:
        return ["%s %s" % (_str(result.get("entity_group")) or "GPU", _str(result.get("entity_id")))]
    key = "gpu_id" if "gpu_id" in result else "gpu_ids" if "gpu_ids" in result else None
    if key is None:
        return []  # a result of the whole host (DCGM 2/3 deployment tests)
    value = result.get(key)
    if value is None:
        return []
    parts = value if isinstance(value, list) else str(value).split(",") if isinstance(value, (str, int)) else [value]
    out = []
    for part in parts[:MAX_GPUS]:
        match = _DIAG_GPU_RE.match(str(part).strip()) if isinstance(part, (str, int)) else None
        entity = "GPU %d" % int(match.group(1)) if match else "GPU %s" % _str(part)
        if entity not in out:
            out.append(entity)
    return out


def parse_dcgm_diag(data):
    """``dcgmi diag -r N -j`` -> ``(result, None)`` or ``(None, reason)`` (DCGM 2/3 and 4 layouts).

    ``result``: ``dcgm_format`` (3 or 4), ``overall`` (the worst of ``fail``, ``warn``, ``unknown``,
    ``pass``, ``skip``), ``tests`` ``[{"category", "name", "status", "results": [{"entity", "status",
    "messages"}]}]`` (``entity`` is ``GPU 0``, ``None`` for the whole host; a result naming several GPUs is one
    entry per GPU; :func:`_diag_entities` reads each layout's key), ``entities`` ``{"GPU 0": worst status}`` and ``failed``
    (``"<test> on GPU 0: <message>"`` for each fail or warn). A ``runtime_error`` (the diagnostic could not
    run) is a reason, not a result.
    """
    text, error = _text(data)
    if error:
        return None, "dcgmi diag: %s" % error
    obj, error = _json_object(text, "dcgmi diag")
    if error:
        return None, error
    if isinstance(obj.get("DCGM Diagnostic"), dict):
        root, version = obj["DCGM Diagnostic"], 4
    elif isinstance(obj.get("DCGM GPU Diagnostic"), dict):
        root, version = obj["DCGM GPU Diagnostic"], 3
    else:
        return None, "JSON without a \"DCGM Diagnostic\" object: not dcgmi diag -j output"
    runtime = obj.get("runtime_error") or root.get("runtime_error")
    if runtime:
        return None, "dcgmi diag could not run: %s" % _str(runtime)
    categories = root.get("test_categories")
    if not isinstance(categories, list) or not categories:
        return None, "dcgmi diag -j output without test_categories (truncated?)"
    tests, entities, failed = [], {}, []
    for category in categories:
        items = category.get("tests") if isinstance(category, dict) else None
        for test in items if isinstance(items, list) else []:
            if not isinstance(test, dict) or not isinstance(test.get("name"), str):
                continue
            results = []
            for result in test.get("results") if isinstance(test.get("results"), list) else []:
                if not isinstance(result, dict):
                    continue
                status = _DIAG_STATUSES.get(str(result.get("status", "")).strip().lower(), "unknown")
                named = _diag_entities(result)
                messages = _diag_messages(result)
                for entity in named or [None]:
                    results.append({"entity": entity, "status": status, "messages": messages})
                    if entity is not None:
                        entities[entity] = _worst({entities.get(entity), status})
                if status in ("fail", "warn"):
                    failed.append("%s%s: %s" % (test["name"][:80], " on %s" % ", ".join(named) if named else "",
                                                "; ".join(messages) or status))
            summary = test.get("test_summary")
            summary_status = _DIAG_STATUSES.get(str(summary.get("status", "")).strip().lower(), "unknown") \
                if isinstance(summary, dict) else None
            statuses = set(result["status"] for result in results)
            if summary_status:
                statuses.add(summary_status)
            tests.append({"category": _str(category.get("category")), "name": test["name"][:100],
                          "status": _worst(statuses) or "unknown", "results": results})
    if not tests:
        return None, "dcgmi diag -j output with no test in its test_categories (truncated?)"
    return {"dcgm_format": version, "overall": _worst(set(test["status"] for test in tests)),
            "tests": tests, "entities": entities, "failed": failed}, None


# -- dcgmi health -c -j ---------------------------------------------------------------------------
_HEALTH = {"healthy": "healthy", "warning": "warning", "failure": "failure"}
#: a frame line of DCGM's text layout (``DcgmiOutputTree``: two columns, ``-`` or ``=`` under the header)
_TREE_HLINE_RE = re.compile(r"^\+[-=]+\+[-=]+\+$")
#: the deepest row of that layout read: ``dcgmi health -c`` writes 4 levels (section, entity, Errors, system)
TREE_MAX_LEVEL = 8


def _health(value):
    return _HEALTH.get(str(value or "").strip().lower(), "unknown")


def _health_tree(text):
    """``dcgmi health -c`` without ``-j``: DCGM's text layout (``dcgmi/DcgmiOutput.cpp`` ``DcgmiOutputTree``)
    -> ``(document, None)``, the document ``-j`` prints for the same report, or ``(None, reason)``.

    The layout: a frame of ``+---+---+`` lines, the header rows, a ``+===+===+`` line, then one row
    ``| <label> | <value> |`` per node, a child's label indented 3 spaces a level below its parent's and
    written ``-> <label>``, and after a node's row its ``overflow`` parts (a message cut in pieces of at most
    54 characters) as rows with no label. A text without its closing frame line is cut short: a reason."""
    lines = [line.strip() for line in _lines(text) if line.strip()]
    frames = [index for index, line in enumerate(lines) if _TREE_HLINE_RE.match(line)]
    if len(frames) < 3 or frames[-1] != len(lines) - 1:
        return None, "dcgmi health printed a table without its frame: truncated or not dcgmi health -c output"
    under_header = [index for index in frames if "=" in lines[index]]
    if not under_header:
        return None, "dcgmi health printed a table without a header: not dcgmi health -c output"
    header = [line.strip("|").strip() for line in lines[frames[0] + 1:under_header[0]]]
    body = {}
    path = []  # the nodes from the current section down to the last row read
    for line in lines[under_header[0] + 1:frames[-1]]:
        if _TREE_HLINE_RE.match(line):
            continue
        split = line.find("|", 1)
        if not line.startswith("|") or not line.endswith("|") or split < 0 or split == len(line) - 1:
            return None, "dcgmi health printed a table line that is not a row: %r" % line[:120]
        left = line[1:split]
        left = left[1:] if left.startswith(" ") else left  # the row's own blank after the bar
        label = left.strip()
        value = line[split + 1:-1].strip()
        if not label:
            if value and path:  # a part of the message of the node above
                path[-1].setdefault("overflow", []).append(value)
            continue
        indent = len(left) - len(left.lstrip(" "))
        if label.startswith("->"):
            level = indent // 3 + 1
            label = label[2:].strip()
        elif indent:
            return None, "dcgmi health printed a row indented without its '->': %r" % line[:120]
        else:
            level = 0
        if level > len(path) or level > TREE_MAX_LEVEL:
            return None, "dcgmi health printed a row below no row above it: %r" % line[:120]
        node = {"value": value} if value else {}
        if level == 0:
            body[label] = node
        else:
            path[level - 1].setdefault("children", {})[label] = node
        path[level:] = [node]
    return {"header": header, "body": body}, None


def _health_result(obj, table):
    """The result of :func:`parse_dcgm_health` from the document ``-j`` prints (``table``: read from the text layout)."""
    body = obj.get("body")
    overall = body.get("Overall Health") if isinstance(body, dict) else None
    if not isinstance(overall, dict) or "value" not in overall:
        if table:
            return None, "a table without an \"Overall Health\" row: not dcgmi health -c output (truncated?)"
        return None, "JSON without body.\"Overall Health\": not dcgmi health -c -j output (truncated?)"
    entities = {}
    for group, section in body.items():
        if group == "Overall Health" or not isinstance(section, dict):
            continue
        children = section.get("children")
        for entity_id, entity in (children.items() if isinstance(children, dict) else []):
            if not isinstance(entity, dict):
                continue
            systems = {}
            errors = (entity.get("children") or {}).get("Errors") if isinstance(entity.get("children"), dict) else None
            listed = errors.get("children") if isinstance(errors, dict) else None
            for system, detail in (listed.items() if isinstance(listed, dict) else []):
                if not isinstance(detail, dict):
                    continue
                parts = detail.get("overflow")
                message = " ".join(part.strip() for part in parts if isinstance(part, str)) \
                    if isinstance(parts, list) else ""
                systems[str(system)[:60]] = {"health": _health(detail.get("value")), "message": message[:1000]}
            entities["%s %s" % (str(group)[:30], str(entity_id)[:20])] = {
                "health": _health(entity.get("value")), "systems": systems}
    return {"overall": _health(overall.get("value")), "entities": entities}, None


def parse_dcgm_health(data):
    """``dcgmi health -c -j`` (or ``dcgmi health -c``, DCGM's text layout of the same report) -> ``(result,
    None)`` or ``(None, reason)``.

    ``result``: ``overall`` (``healthy``, ``warning``, ``failure``, ``unknown`` for DCGM's "Internal error" or
    anything else) and ``entities`` ``{"GPU 0": {"health", "systems": {"PCIe system": {"health",
    "message"}}}}``: only the entities with incidents are listed (DCGM lists no others).
    """
    text, error = _text(data)
    if error:
        return None, "dcgmi health: %s" % error
    first = text.lstrip()[:1]
    if first == "+":
        obj, error = _health_tree(text)
    else:
        if first != "{" and "Error:" in text:
            line = [line for line in text.splitlines() if "Error:" in line][0].strip()
            return None, "dcgmi health: %s" % line[:300]
        obj, error = _json_object(text, "dcgmi health")
    if error:
        return None, error
    return _health_result(obj, first == "+")


# -- nccl-tests -----------------------------------------------------------------------------------
#: the summary lines: with ``#`` since nccl-tests 2.0 (commit cbe7f65, 2019), with a blank instead in the 1.x
#: releases, and without it where a ``#`` was lost on the way (a Markdown paste)
_NCCL_AVG_RE = re.compile(r"^#?\s*Avg bus bandwidth\s*:\s*(\S+)")
_NCCL_OOB_RE = re.compile(r"^#?\s*Out of bounds values\s*:\s*([0-9]{1,18})(?![0-9])\s*(\w*)")
_NCCL_COLLECTIVE_RE = re.compile(r"^#?\s*Collective test (?:starting|concluded):\s*(\S+)")
#: ``#  Rank  0 Group  0 Pid 1666603 on spark-d708 device  0 [000f:01:00] NVIDIA GB10``: the rank, then the
#: device searched in the rest (a lazy ``.*?`` before it and ``(.+?)\\s*$`` after it backtracked
#: quadratically on a long line)
_NCCL_RANK_RE = re.compile(r"^#\s*Rank\s+([0-9]{1,6})\b")
_NCCL_DEVICE_RE = re.compile(r"\bdevice\s+([0-9]{1,6})\s+\[([^\]]{0,64})\]\s+(\S.*)")
#: mpirun --tag-output puts "[job,rank]<stdout>:" before each line
_NCCL_TAG_RE = re.compile(r"^\[\d{1,6},\d{1,6}\]<std(?:out|err)>:")
_NCCL_TIMES = ("time", "cputime")
#: the check's column: ``#wrong`` (elements outside the tolerance, since 2.13), ``error`` (2.0-2.12) and ``res``
#: (1.x): the largest error of the results, printed as a float (``0e+00``)
_NCCL_WRONG = ("#wrong", "error", "res")
#: the header's name of the message size (``bytes`` in 1.x) and of the reduction (``op`` in 1.x)
_NCCL_SIZES = ("size", "bytes")


#: the fields of a row and the header tokens that name each (``time`` or ``cputime``; ``#wrong`` or ``error``)
_NCCL_FIELDS = (("type", ("type",)), ("redop", ("redop", "op")), ("time", _NCCL_TIMES), ("algbw", ("algbw",)),
                ("busbw", ("busbw",)), ("wrong", _NCCL_WRONG))


def _nccl_header(tokens):
    """Whether a line's tokens (without its ``#``) are the result table's header."""
    return len(tokens) <= MAX_NCCL_COLUMNS and "busbw" in tokens and "algbw" in tokens and \
        any(name in tokens for name in _NCCL_SIZES)


def _nccl_columns(tokens):
    """Where each field is in a header line's tokens (without its ``#``), computed once per header:
    ``{field: (index of the first, index of the second)}`` (out-of-place, in-place)."""
    columns = {}
    for field, names in _NCCL_FIELDS:
        columns[field] = tuple(index for index, token in enumerate(tokens) if token in names)[:2]
    named = [token for token in tokens if token in _NCCL_WRONG]
    columns["wrong_column"] = named[0] if named else None
    return columns


def _nccl_row(tokens, columns):
    """``(row, None)``; ``(None, None)`` for a line that is no result row; ``(None, token)`` for a row with
    a figure printed as a number that is no figure (``inf``, ``nan``, ``-1``, ``1e999``)."""
    def at(field, which):
        indices = columns[field]
        return tokens[indices[which]] if len(indices) > which and indices[which] < len(tokens) else None

    if not _SIZE_RE.match(tokens[0]) or not _numeric(tokens[1]):
        return None, None
    count = _number(tokens[1])
    if count is None:
        return None, tokens[1]
    row = {"size_bytes": int(tokens[0]), "count": int(count), "type": at("type", 0), "redop": at("redop", 0)}
    for which, place in ((0, "out_of_place"), (1, "in_place")):
        texts = (at("time", which), at("algbw", which), at("busbw", which))
        time_us, algbw, busbw = [_number(token) for token in texts]
        if time_us is None or algbw is None or busbw is None:
            bad = [token for token in texts if _numeric(token) and _number(token) is None]
            return None, bad[0] if bad else None
        wrong = at("wrong", which)
        row[place] = {"time_us": time_us, "algbw_gbs": algbw, "busbw_gbs": busbw,
                      "wrong": None if wrong in (None, "N/A") else _number(wrong)}
    return row, None


#: the most rows with wrong elements kept (the count of the others is in ``wrong_rows``)
MAX_NCCL_WRONG = 20


def nccl_wrong(rows):
    """``(wrong, checked)`` of :func:`parse_nccl_tests`' ``rows``: ``wrong`` the rows whose ``#wrong`` column
    counts elements outside the tolerance, ``[{"size_bytes", "placement" (out_of_place or in_place),
    "wrong"}]`` (at most :data:`MAX_NCCL_WRONG`); ``checked`` whether any row printed a ``#wrong`` figure
    (``-c 0`` prints ``N/A``: the results were not checked)."""
    wrong, checked = [], False
    for row in rows:
        for placement in ("out_of_place", "in_place"):
            count = (row.get(placement) or {}).get("wrong")
            if count is None:
                continue
            checked = True
            if count > 0 and len(wrong) < MAX_NCCL_WRONG:
                wrong.append({"size_bytes": row["size_bytes"], "placement": placement,
                              "wrong": int(count) if count == int(count) else count})
    return wrong, checked


def parse_nccl_tests(data):
    """nccl-tests stdout (``all_reduce_perf`` ...) -> ``(result, None)`` or ``(None, reason)``.

    ``result``: ``collective`` (when the output names it), ``devices`` (``[{"rank", "device", "bus", "name"}]``
    from ``# Rank`` lines), ``rows`` (``[{"size_bytes", "count", "type", "redop", "out_of_place",
    "in_place"}]``, each with ``time_us``, ``algbw_gbs``, ``busbw_gbs``, ``wrong``), ``avg_busbw_gbs`` (the
    ``# Avg bus bandwidth`` line), ``max_busbw_gbs`` (the highest of the rows), ``out_of_bounds`` and
    ``out_of_bounds_ok``, ``wrong_column`` (``#wrong``: ``wrong`` counts elements; ``error`` or ``res``, the
    older releases: ``wrong`` is the largest error). Output without its table or its ``# Avg bus bandwidth``
    line (cut short) is a reason. The 1.x layout (summary lines without ``#``, ``bytes``/``N``/``op``/``res``
    columns) and a header or summary whose ``#`` was lost are read too.
    """
    text, error = _text(data)
    if error:
        return None, "nccl-tests: %s" % error
    columns = None
    rows, devices = [], []
    refused = []  # figures printed that are no figure (inf, nan, negative)
    result = {"collective": None, "avg_busbw_gbs": None, "out_of_bounds": None, "out_of_bounds_ok": None}
    for raw in _lines(text):
        line = _NCCL_TAG_RE.sub("", raw.strip(), count=1).strip()
        if not line:
            continue
        match = _NCCL_AVG_RE.match(line)
        if match:
            result["avg_busbw_gbs"] = _number(match.group(1))
            if result["avg_busbw_gbs"] is None:
                refused.append("average bus bandwidth %r" % match.group(1)[:40])
            continue
        match = _NCCL_OOB_RE.match(line)
        if match:
            result["out_of_bounds"] = int(match.group(1))
            result["out_of_bounds_ok"] = match.group(1) == "0" and match.group(2) != "FAILED"
            continue
        match = _NCCL_COLLECTIVE_RE.match(line)
        if match:
            result["collective"] = match.group(1)[:60]
            continue
        if not line.startswith("#") and not _SIZE_RE.match(line.split(None, 1)[0]) and _nccl_header(line.split()):
            columns = _nccl_columns(line.split())  # a header whose "#" was lost (a Markdown paste)
            continue
        if line.startswith("#"):
            match = _NCCL_RANK_RE.match(line)
            device = _NCCL_DEVICE_RE.search(line, match.end()) if match else None
            if device and len(devices) < MAX_GPUS:
                devices.append({"rank": int(match.group(1)), "device": int(device.group(1)),
                                "bus": device.group(2)[:20], "name": device.group(3).strip()[:100]})
                continue
            tokens = line.lstrip("#").split()
            if _nccl_header(tokens):
                columns = _nccl_columns(tokens)
            continue
        if columns is None:
            continue
        tokens = line.split()
        if len(tokens) < 8 or not _SIZE_RE.match(tokens[0]) or len(rows) >= 10000:
            continue  # MPI or NCCL messages between the rows
        row, bad = _nccl_row(tokens, columns)
        if row is not None:
            rows.append(row)
        elif bad is not None:
            refused.append("%r in the row of %s bytes" % (bad[:40], tokens[0][:20]))
    if columns is None:
        first = text.strip().splitlines()[0][:120]
        return None, "not nccl-tests output: no result table header (first line: %r)" % first
    if refused:
        return None, "nccl-tests printed figures that are not finite numbers >= 0 (%s): no figure" % (
            "; ".join(refused[:3]))
    if not rows:
        return None, "nccl-tests printed its table header but no result row (it failed or was cut short)"
    if result["avg_busbw_gbs"] is None:
        return None, "nccl-tests output ends before its '# Avg bus bandwidth' line (cut short: %d rows)" % len(rows)
    result.update(rows=rows, devices=devices, wrong_column=columns["wrong_column"],
                  max_busbw_gbs=max(max(row["out_of_place"]["busbw_gbs"], row["in_place"]["busbw_gbs"])
                                    for row in rows))
    return result, None


# -- memory bandwidth: stress-ng --stream, sysbench memory, mbw -------------------------------------
#: bytes in a MiB over bytes in a MB: every bandwidth is returned in MB/s (10**6 bytes per second)
MIB_IN_MB = 1.048576
# searched in a line: every part bounded (no ``.*?`` between two parts, which backtracks over the rest of
# the line at each ``stream:`` of a long one)
_SNG_RATE_RE = re.compile(r"stream:\s*memory rate:\s*(\S{1,64})\s*MB read/sec,\s*(\S{1,64})\s*MB write/sec"
                          r"[^()]{0,200}\(instance ([0-9]{1,6})\)")
_SNG_MEAN_RE = re.compile(r"stream\s+(\S{1,64})\s+memory (read|write) rate \(MB per sec\)\s*"
                          r"\(geome\w{0,20} mean of ([0-9]{1,6}) instances?\)")
_SNG_SHORT = "run duration too short to determine memory rate"
_SYSBENCH_RE = re.compile(r"^\s*(\S+)\s+MiB transferred\s*\(\s*(\S+)\s+MiB/sec\)")
_SYSBENCH_THREADS_RE = re.compile(r"^\s*Number of threads:\s*([0-9]{1,6})\b")
_SYSBENCH_OPER_RE = re.compile(r"^\s*operation:\s*(\w+)")
_MBW_RE = re.compile(r"^(AVG|[0-9]{1,9})\s+Method:\s*(\S+)\s+Elapsed:\s*(\S+)\s+MiB:\s*(\S+)\s+Copy:\s*(\S+)\s*MiB/s")


def _positive(value):
    """A figure above 0 (:func:`_number`); ``None`` otherwise."""
    number = _number(value)
    return number if number is not None and number > 0 else None


def parse_stress_ng_stream(data):
    """``stress-ng --stream N --metrics-brief`` output (stderr and stdout together) -> ``(result, None)`` or
    ``(None, reason)``.

    ``result``: ``tool`` (``stress-ng``), ``instances``, ``read_mbs`` and ``write_mbs`` (the sums over the
    instances), ``bandwidth_mbs`` (read plus write: the memory traffic of the copy, scale, add and triad
    loops), ``per_instance`` (``[{"instance", "read_mbs", "write_mbs"}]``). The per-instance ``memory rate``
    lines are read; without them the ``metrc`` geometric means times the instance count. A run too short for
    a rate, or output without any rate, is a reason.
    """
    text, error = _text(data)
    if error:
        return None, "stress-ng: %s" % error
    per = {}
    means = {}
    for line in _lines(text):
        match = _SNG_RATE_RE.search(line)
        if match:
            read, write = _positive(match.group(1)), _positive(match.group(2))
            if read is None or write is None:
                return None, "stress-ng printed a memory rate that is not a positive number: %r" % line.strip()[:200]
            per[int(match.group(3))] = {"instance": int(match.group(3)), "read_mbs": read, "write_mbs": write}
            continue
        match = _SNG_MEAN_RE.search(line)
        if match and _positive(match.group(1)) is not None:
            means[match.group(2)] = (_positive(match.group(1)), int(match.group(3)))
    if per:
        rows = [per[key] for key in sorted(per)]
        read = sum(row["read_mbs"] for row in rows)
        write = sum(row["write_mbs"] for row in rows)
        instances = len(rows)
    elif "read" in means and "write" in means:
        instances = means["read"][1]
        read, write = means["read"][0] * instances, means["write"][0] * instances
        rows = []
    elif _SNG_SHORT in text:
        return None, "stress-ng: %s (give the stream stressor at least 5 s)" % _SNG_SHORT
    else:
        first = text.strip().splitlines()[0][:120]
        return None, "not stress-ng --stream output: no memory rate (first line: %r)" % first
    return {"tool": "stress-ng", "instances": instances, "read_mbs": round(read, 2), "write_mbs": round(write, 2),
            "bandwidth_mbs": round(read + write, 2), "per_instance": rows}, None


def parse_sysbench_memory(data):
    """``sysbench memory ... run`` output -> ``(result, None)`` or ``(None, reason)``.

    ``result``: ``tool`` (``sysbench``), ``threads``, ``operation`` (``write``, ``read``), ``transferred_mib``,
    ``bandwidth_mbs`` (the ``MiB/sec`` figure in MB/s) and ``bandwidth_mibs`` (as printed).
    """
    text, error = _text(data)
    if error:
        return None, "sysbench: %s" % error
    result = {"tool": "sysbench", "threads": None, "operation": None}
    for line in _lines(text):
        match = _SYSBENCH_THREADS_RE.match(line)
        if match and result["threads"] is None:
            result["threads"] = int(match.group(1))
        match = _SYSBENCH_OPER_RE.match(line)
        if match and result["operation"] is None:
            result["operation"] = match.group(1)[:20]
        match = _SYSBENCH_RE.match(line)
        if match:
            mib, rate = _number(match.group(1)), _positive(match.group(2))
            if rate is None or mib is None:
                return None, "sysbench printed a transfer rate that is not a positive number: %r" % line.strip()[:200]
            result.update(transferred_mib=mib, bandwidth_mibs=rate, bandwidth_mbs=round(rate * MIB_IN_MB, 2))
            return result, None
    if "Running memory speed test" in text:
        return None, "sysbench memory output ends before its 'MiB transferred' line (it failed or was cut short)"
    first = text.strip().splitlines()[0][:120]
    return None, "not sysbench memory output: no 'MiB transferred' line (first line: %r)" % first


def parse_mbw(data):
    """``mbw -q -n N -t0 SIZE`` output -> ``(result, None)`` or ``(None, reason)``.

    ``result``: ``tool`` (``mbw``), ``method`` (``MEMCPY``), ``array_mib``, ``iterations`` (the numbered lines),
    ``bandwidth_mbs`` (the ``AVG`` line's copy rate in MB/s: bytes copied per second, each read once and
    written once) and ``bandwidth_mibs`` (as printed). Output without its ``AVG`` line is a reason.
    """
    text, error = _text(data)
    if error:
        return None, "mbw: %s" % error
    iterations = 0
    for line in _lines(text):
        match = _MBW_RE.match(line.strip())
        if not match:
            continue
        if match.group(1) != "AVG":
            iterations += 1
            continue
        rate = _positive(match.group(5))
        if rate is None:
            return None, "mbw printed an average copy rate that is not a positive number: %r" % line.strip()[:200]
        return {"tool": "mbw", "method": match.group(2)[:20], "array_mib": _number(match.group(4)),
                "iterations": iterations, "bandwidth_mibs": rate, "bandwidth_mbs": round(rate * MIB_IN_MB, 2)}, None
    if iterations:
        return None, "mbw output ends before its AVG line (cut short after %d iterations)" % iterations
    first = text.strip().splitlines()[0][:120]
    return None, "not mbw output: no 'Method: ... Copy: ... MiB/s' line (first line: %r)" % first


#: the parser of each memory bandwidth tool, by the name the module's ``mem_tools`` option uses, in the
#: order of preference (measure_host.MEM_TOOLS is this order; docs/validation.md says why)
MEM_BW_PARSERS = {"stress-ng": parse_stress_ng_stream, "sysbench": parse_sysbench_memory, "mbw": parse_mbw}


# -- CPU clock: /proc/cpuinfo ----------------------------------------------------------------------
def parse_cpuinfo_mhz(data):
    """``/proc/cpuinfo`` -> ``{cpu number: MHz}`` from each ``processor`` block's ``cpu MHz`` (x86; other
    architectures print none: ``{}``). Never raises; a block without a number is left out."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    out = {}
    if not isinstance(text, str):
        return out
    cpu = None
    for line in text[:MAX_TEXT].split("\n"):
        key, sep, value = line.partition(":")
        if not sep or len(line) > MAX_LINE:
            continue
        key = key.strip()
        if key == "processor":
            cpu = _index(value.strip())
        elif key == "cpu MHz" and cpu is not None:
            mhz = _positive(value)
            if mhz is not None:
                out[cpu] = mhz
    return out
