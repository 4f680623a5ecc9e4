# -*- coding: utf-8 -*-
"""Bomb/fuzz corpus for the input kind "measure output": what nvbandwidth (text and ``-j``), ``dcgmi diag
-j``, ``dcgmi health -c -j``, nccl-tests, ``stress-ng --stream``, ``sysbench memory``, ``mbw`` and
``/proc/cpuinfo`` could hand the parsers of ``measure/measure.py`` on a broken or hostile host (issue 40
item 5, "No silent pass").

Each case writes the output to a file and runs the tool's parser over its bytes in a bounded child
(tests/helpers/bounded.py: 10 s, 512 MiB); nvbandwidth's text goes through ``measure_gpu.read_gpu_bw``
too, the reader the module runs. Per tool at least: a crafted header or line of a few MB made for the
quadratic paths the red team found (a regular expression that backtracks over a long line; nccl-tests'
column lookup per row over a header of a million tokens: 2 MB took 118 s of CPU before issue 40), NUL
bytes and invalid UTF-8, and figures printed as ``inf``, ``1e999``, ``nan`` or negative. Every case must end
within the bounds with either a result whose figures are all finite and not negative, or a reason; never
a traceback, a ``MemoryError`` or a hang. The checks say which of the two each case must give.
"""
import json
import os

import pytest

from helpers import bounded

from ansible_collections.gpuhost.baseline.plugins.module_utils.measure.measure import MAX_GPUS, MAX_LINE, MAX_TEXT

KIND = "measure output"
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MEASURE = os.path.join(HERE, "fixtures", "measure")
HOST = os.path.join(HERE, "fixtures", "host_measure")
#: the size of a crafted case: most of what the parsers read (MAX_TEXT, 4 MiB)
SIZE = 3 << 20

PARSE = bounded.case("""
    import math
    from ansible_collections.gpuhost.baseline.plugins.module_utils.measure import measure, measure_gpu
    tool, path = ARGS
    with open(path, "rb") as handle:
        data = handle.read()
    bad = []

    def walk(value, where):
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, "%s.%s" % (where, key))
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, "%s[%d]" % (where, index))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            if not math.isfinite(value) or value < 0:
                bad.append("%s=%r" % (where, value))

    if tool == "cpuinfo":
        result, error = measure.parse_cpuinfo_mhz(data), None
    elif tool == "read_gpu_bw":
        result = measure_gpu.empty_result("gpu_bw")
        error = measure_gpu.read_gpu_bw(result, data.decode("utf-8", "replace"))
    else:
        result, error = getattr(measure, tool)(data)
    walk(result, "result")
    json.dumps(result)  # plain data
    figures = []
    if isinstance(result, dict) and error is None:
        if tool == "parse_nvbandwidth":
            for case in result["testcases"].values():
                figures += [value for value in (case.get("per_gpu") or {}).values() if value is not None]
                figures += [pair["value"] for pair in case.get("pairs") or []]
        elif tool == "read_gpu_bw":
            figures = [gpu[key] for gpu in result["gpus"].values() for key in ("h2d_gbs", "d2h_gbs")
                       if gpu[key] is not None] + [pair["gbs"] for pair in result["pairs"]]
        elif tool == "parse_nccl_tests":
            figures = [result["avg_busbw_gbs"], result["max_busbw_gbs"]]
        elif tool == "cpuinfo":
            figures = list(result.values())
        elif "bandwidth_mbs" in result:
            figures = [result["bandwidth_mbs"]]
    report({"ok": error is None, "reason": (error or "")[:300], "bad": bad[:10], "figures": len(figures),
            "first": figures[:3], "rows": len(result.get("rows") or []) if isinstance(result, dict) else 0})
""")


def fixture(path):
    with open(path, "rb") as handle:
        return handle.read()


def _fill(line, size=SIZE):
    """``line`` (bytes, a newline added) repeated up to ``size`` bytes."""
    line += b"\n"
    return line * max(1, size // len(line))


LONG = MAX_LINE - 64  # a line the parsers still read (a longer one is skipped whole)


# -- nvbandwidth, text ------------------------------------------------------------------------------
NVB_TEXT = fixture(os.path.join(MEASURE, "nvbandwidth-v0.2-8x4090-ce.txt"))


def nvb_device_line_blanks():
    """``Device 0: x<blanks>y``: ``(.+?)\\s*$`` backtracked over the blanks for every character."""
    return _fill(b"Device 0: x" + b" " * LONG + b"y")


def nvb_one_huge_device_line():
    return b"Device 0: x" + b" " * SIZE + b"y\n" + NVB_TEXT


def nvb_blank_lines_before_json():
    """read_gpu_bw looked for the JSON with ``^\\s*\\{`` (MULTILINE): every line start ran over every blank after it."""
    return b"x\n" + b" \n" * (SIZE // 2)


def nvb_unit_and_sum_lines():
    return (_fill(b"Running " + b"a" * 60 + b".", SIZE // 3) + _fill(b"x bandwidth " + b"(a) " * (LONG // 4), SIZE // 3)
            + _fill(b"SUM " + b"a" * (LONG // 2) + b" " + b"b" * (LONG // 2 - 10) + b" x", SIZE // 3))


def nvb_huge_matrix():
    """A peer matrix of 255 GPUs, its rows again past MAX_GPUS: the rows past it are not read."""
    count = 255
    head = b"Running device_to_device_memcpy_read_ce.\nmemcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)\n"
    head += b" ".join(b"%d" % i for i in range(count)) + b"\n"
    rows = b"".join(b"%d" % i + b" 1.5" * count + b"\n" for i in range(count))
    return head + rows * max(1, SIZE // len(rows))


def nvb_many_testcases():
    """Matrices of 64 GPUs in as many testcases as fit: past MAX_CELLS figures, a testcase is not read."""
    count = 64
    rows = b"".join(b"%d" % i + b" 1" * count + b"\n" for i in range(count))
    case = (b"Running device_to_device_memcpy_read_ce.\nmemcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)\n"
            + b" ".join(b"%d" % i for i in range(count)) + b"\n" + rows)
    return b"".join(case.replace(b"read_ce", b"read_ce%d" % n) for n in range(SIZE // len(case)))


def nvb_bad_figures():
    return (NVB_TEXT.replace(b"25.50", b"1e999").replace(b"24.26", b"inf").replace(b"23.90", b"nan")
            .replace(b"26.30", b"-26.30").replace(b"SUM host_to_device_memcpy_ce 205.04", b"SUM host_to_device_memcpy_ce 1e999"))


def nvb_nul():
    return NVB_TEXT.replace(b"25.50", b"25\x0050")


def nvb_invalid_utf8():
    return NVB_TEXT.replace(b"Device 0: NVIDIA", b"Device 0: \xff\xfeNVIDIA").replace(b"25.50", b"25.5\xc3\x28")


def nvb_unicode_digits():
    """Header and row indices in digits ``isdigit()`` takes and ``int()`` refuses (superscripts)."""
    return NVB_TEXT.replace(b"          0         1", "          \u00b2         \u00b3".encode("utf-8"))


# -- nvbandwidth, -j --------------------------------------------------------------------------------
NVB_JSON = fixture(os.path.join(MEASURE, "nvbandwidth-json-2gpu.json"))


def _nvb_json(**change):
    doc = json.loads(NVB_JSON)
    doc["nvbandwidth"].update(change)
    return json.dumps(doc).encode()


def nvbj_device_blanks():
    return _nvb_json(**{"GPU Device list": ["0: x" + " " * LONG + "y"] * (SIZE // LONG)})


def nvbj_one_huge_device():
    return _nvb_json(**{"GPU Device list": ["0: x" + " " * SIZE + "y"]})


def nvbj_wide_matrix():
    case = {"name": "host_to_device_memcpy_ce", "status": "Passed", "sum": 1.0,
            "bandwidth_description": "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)",
            "bandwidth_matrix": [["1"] * (SIZE // 5)]}
    return _nvb_json(testcases=[case])


def nvbj_deep():
    return b'{"nvbandwidth": {"testcases": ' + b"[" * (SIZE // 2) + b"]" * (SIZE // 2) + b"}}"


def nvbj_bad_figures():
    return (NVB_JSON.replace(b'"55.6"', b"1e999").replace(b'"55.4"', b"-55.4").replace(b'"55.2"', b"NaN")
            .replace(b'"55.3"', b"Infinity").replace(b'"389.1"', b'"1e999"').replace(b"111.0", b"-Infinity"))


def nvbj_nul():
    return NVB_JSON.replace(b'"55.6"', b'"55\\u00006"').replace(b"v0.8", b"v0\x00.8")


def nvbj_invalid_utf8():
    return NVB_JSON.replace(b"H100", b"H\xff\xfe100").replace(b'"55.6"', b'"55\xc3\x28"')


# -- dcgmi diag -j ------------------------------------------------------------------------------------
DIAG = fixture(os.path.join(MEASURE, "dcgm-diag-v4-r2-memory-fail.json"))


def diag_many_results():
    result = {"entity_group": "GPU", "entity_id": 0, "status": "Fail",
              "warnings": [{"warning": "x" * 200, "error_id": 1}]}
    doc = {"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [
        {"name": "memory", "results": [result] * (SIZE // 300)}]}]}}
    return json.dumps(doc).encode()


def diag_long_message():
    doc = json.loads(DIAG)
    doc["DCGM Diagnostic"]["test_categories"][0]["tests"][0]["results"] = [
        {"entity_group": "GPU", "entity_id": 0, "status": "Fail", "warnings": [{"warning": " " * SIZE + "x"}]}]
    return json.dumps(doc).encode()


def diag_deep():
    return b'{"DCGM Diagnostic": {"test_categories": ' + b"[" * (SIZE // 2) + b"]" * (SIZE // 2) + b"}}"


def diag_odd_numbers():
    return (DIAG.replace(b'"entity_id": 0', b'"entity_id": 1e999').replace(b'"entity_id": 1', b'"entity_id": -1')
            .replace(b'"entity_id":0', b'"entity_id":NaN').replace(b'"entity_id":1', b'"entity_id":-Infinity'))


def diag_nul():
    return DIAG.replace(b"Diagnostic", b"Diag\x00nostic", 1)


def diag_invalid_utf8():
    return DIAG.replace(b"memory", b"mem\xff\xfeory")


# -- dcgmi health -c -j -------------------------------------------------------------------------------
HEALTH = fixture(os.path.join(MEASURE, "dcgm-health-pcie-warning.json"))


def health_many_entities():
    entity = {"value": "Warning", "children": {"Errors": {"children": {"PCIe system": {
        "value": "Warning", "overflow": ["replays " * 10]}}}}}
    doc = {"header": ["Health Monitor Report"], "body": {"Overall Health": {"value": "Warning"}, "GPU": {
        "children": dict(("%d" % i, entity) for i in range(SIZE // 300))}}}
    return json.dumps(doc).encode()


def health_error_line():
    return _fill(b"Error: " + b"x " * (LONG // 2))


def health_odd_numbers():
    return HEALTH.replace(b'"Warning"', b"1e999", 1).replace(b'"Healthy"', b"-1", 1)


def health_nul():
    return HEALTH.replace(b"Overall", b"Over\x00all")


def health_invalid_utf8():
    return HEALTH.replace(b"PCIe", b"PC\xff\xfeIe")


# dcgmi health -c (no -j): DCGM's text layout, a real one (an L4's power warning, DCGM 4.6.1)
HEALTH_TEXT = fixture(os.path.join(MEASURE, "dcgm-health-v4.6-l4-power-warning-text.txt"))
HEALTH_TEXT_LINES = HEALTH_TEXT.splitlines(True)
HEALTH_OVERFLOW_ROW = HEALTH_TEXT_LINES[8]  # a part of the message: a row with no label


def health_text_many_rows():
    """Millions of characters of message parts under the one system row: one result, the message clipped."""
    rows = HEALTH_OVERFLOW_ROW * ((SIZE - len(HEALTH_TEXT)) // len(HEALTH_OVERFLOW_ROW))
    return b"".join(HEALTH_TEXT_LINES[:9]) + rows + b"".join(HEALTH_TEXT_LINES[9:])


def health_text_deep():
    """A thousand rows each indented a level below the last (1.5 MB): a reason, not a deep document."""
    rows = b"".join(b"| " + b" " * (3 * level) + b"-> x | Warning |\n" for level in range(1000))
    return b"".join(HEALTH_TEXT_LINES[:4]) + rows + HEALTH_TEXT_LINES[-1]


def health_text_long_rows():
    """Rows of a few KiB with a bar in their value, filling the table: one result, each value clipped."""
    row = b"| -> " + b"7" * 20 + b" | " + b"Warning | " * (LONG // 12) + b"|\n"
    rows = row * ((SIZE - len(HEALTH_TEXT)) // len(row))
    return b"".join(HEALTH_TEXT_LINES[:5]) + rows + b"".join(HEALTH_TEXT_LINES[5:])


# -- nccl-tests ----------------------------------------------------------------------------------------
NCCL = fixture(os.path.join(MEASURE, "nccl-all-reduce-gb10-2rank.txt"))
NCCL_HEADER = b"#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong"
NCCL_ROW = b"        8192          2048     float     sum      -1    35.15    0.23    0.23       0    30.33    0.27    0.27       0"


def nccl_crafted_header():
    """The red team's case: a header of a million ``time`` tokens, then rows: each row looked up its columns
    by building and sorting the index list of every name (2 MB took 118 s of CPU before issue 40)."""
    header = NCCL_HEADER + b" time" * (SIZE // 2 // 5)
    return header + b"\n" + _fill(NCCL_ROW, SIZE // 2) + b"# Avg bus bandwidth    : 0.5\n"


def nccl_widest_header_read():
    """The widest header line still read (just under MAX_LINE), then rows."""
    header = NCCL_HEADER + b" time" * ((LONG - len(NCCL_HEADER)) // 5)
    return header + b"\n" + _fill(NCCL_ROW, SIZE) + b"# Avg bus bandwidth    : 0.5\n"


def nccl_header_many_short():
    """A header within MAX_NCCL_COLUMNS naming time and busbw many times, then rows."""
    header = b"# size count type redop root" + b" time algbw busbw #wrong" * 14
    return header + b"\n" + _fill(NCCL_ROW + b" 1.0" * 40, SIZE) + b"# Avg bus bandwidth    : 0.5\n"


def nccl_rank_lines():
    """``# Rank`` lines made for ``.*?\\bdevice`` and ``(.+?)\\s*$``: many ``device N [`` and long blanks."""
    return (_fill(b"# Rank 0 " + b"device 1 [" * (LONG // 10 - 1), SIZE // 2)
            + _fill(b"# Rank 0 device 1 [x] a" + b" " * (LONG - 30) + b"b", SIZE // 2) + NCCL)


def nccl_tag_prefixes():
    return _fill(b"[1,2]<stdout>:" * (LONG // 14)) + NCCL


def nccl_bad_figures():
    return (NCCL.replace(b"35.15    0.23    0.23", b"35.15    1e999    inf")
            .replace(b"Avg bus bandwidth    : 0.65375", b"Avg bus bandwidth    : -0.65375"))


def nccl_bad_average():
    return NCCL.replace(b"Avg bus bandwidth    : 0.65375", b"Avg bus bandwidth    : 1e999")


def nccl_huge_numbers():
    """A size of 400 digits (``float()`` gives ``inf``; ``int(inf)`` raised) and a rank of 5000 digits."""
    return (NCCL.replace(b"        8192  ", b"9" * 400 + b"  ", 1).replace(b"Rank  0", b"Rank " + b"1" * 5000)
            .replace(b"values : 0 OK", b"values : " + b"1" * 5000 + b" OK"))


def nccl_nul():
    return NCCL.replace(b"float", b"fl\x00oat", 1)


def nccl_invalid_utf8():
    return NCCL.replace(b"NVIDIA GB10", b"NVIDIA \xff\xfeGB10").replace(b"float", b"fl\xc3\x28oat")


# -- stress-ng --stream --------------------------------------------------------------------------------
SNG = fixture(os.path.join(HOST, "stress-ng-0.15.06-stream-2.txt"))


def sng_rate_lines():
    """Many ``stream: memory rate:`` on one line and no ``(instance``: ``.*?`` ran to the end from each."""
    return _fill(b"stream: memory rate: 1 MB read/sec, 1 MB write/sec" * (LONG // 52))


def sng_mean_lines():
    return _fill(b"stream " + b"x" * (LONG // 2) + b" memory read rate (MB per sec) " + b"(" * (LONG // 3))


def sng_bad_figures():
    return SNG.replace(b"2825.94 MB read/sec", b"1e999 MB read/sec").replace(b"1883.96 MB write/sec", b"-1 MB write/sec")


def sng_bad_means():
    lines = [line for line in SNG.split(b"\n") if b"(instance" not in line]
    return b"\n".join(lines).replace(b"2707.52 memory read", b"inf memory read").replace(b"1805.01 memory write", b"nan memory write")


def sng_nul():
    return SNG.replace(b"stream:", b"str\x00eam:", 1)


def sng_invalid_utf8():
    return SNG.replace(b"MB read/sec", b"MB r\xffead/sec", 1)


# -- sysbench memory -----------------------------------------------------------------------------------
SYSBENCH = fixture(os.path.join(HOST, "sysbench-1.0.20-memory-write.txt"))


def sysbench_lines():
    return (_fill(b" " * (LONG // 2) + b"1" * (LONG // 2 - 10) + b" MiB", SIZE // 2)
            + _fill(b"1 MiB transferred (" + b" " * (LONG // 2) + b"1" * (LONG // 2 - 40), SIZE // 2))


def sysbench_bad_figures():
    return SYSBENCH.replace(b"(6229.30 MiB/sec)", b"(1e999 MiB/sec)")


def sysbench_negative():
    return SYSBENCH.replace(b"18816.00 MiB transferred (6229.30", b"-18816.00 MiB transferred (-6229.30")


def sysbench_nul():
    return SYSBENCH.replace(b"MiB transferred", b"MiB trans\x00ferred")


def sysbench_invalid_utf8():
    return SYSBENCH.replace(b"sysbench 1.0.20", b"sysbench \xff\xfe1.0.20")


# -- mbw -----------------------------------------------------------------------------------------------
MBW = fixture(os.path.join(HOST, "mbw-1.2.2-memcpy.txt"))


def mbw_lines():
    return _fill(b"AVG\tMethod: " + b"x" * (LONG // 2) + b"\tElapsed: " + b" " * (LONG // 2 - 60) + b"1")


def mbw_copy_lines():
    return _fill(b"0\tMethod: M\tElapsed: 1\tMiB: 1\tCopy: " + b"1" * (LONG - 60))


def mbw_bad_figures():
    return MBW.replace(b"Copy: 3081.714 MiB/s", b"Copy: 1e999 MiB/s")


def mbw_negative():
    return MBW.replace(b"Copy: 3081.714 MiB/s", b"Copy: -3081.714 MiB/s")


def mbw_nul():
    return MBW.replace(b"AVG", b"A\x00VG")


def mbw_invalid_utf8():
    return MBW.replace(b"AVG\tMethod: MEMCPY", b"AVG\tMethod: MEM\xff\xfeCPY")


# -- /proc/cpuinfo -------------------------------------------------------------------------------------
CPUINFO = fixture(os.path.join(HOST, "proc-cpuinfo-kvm-epyc-2cpu.txt"))


def cpuinfo_many_blocks():
    return _fill(b"processor\t: 1\ncpu MHz\t\t: 2445.406")


def cpuinfo_long_lines():
    return _fill(b"cpu MHz\t\t: " + b"1" * LONG, SIZE // 2) + _fill(b"processor\t: " + b"9" * LONG, SIZE // 2) + CPUINFO


def cpuinfo_bad_figures():
    return (b"processor\t: 0\ncpu MHz\t\t: 1e999\n\nprocessor\t: 1\ncpu MHz\t\t: -2445.406\n\n"
            b"processor\t: 2\ncpu MHz\t\t: nan\n\nprocessor\t: 3\ncpu MHz\t\t: inf\n\n"
            + "processor\t: \u00b2\ncpu MHz\t\t: 2445.406\n\n".encode("utf-8") + b"processor\t: 4\ncpu MHz\t\t: 2445.406\n")


def cpuinfo_nul():
    return CPUINFO.replace(b"cpu MHz", b"cpu\x00MHz", 1)


def cpuinfo_invalid_utf8():
    return CPUINFO.replace(b"AuthenticAMD", b"Authentic\xff\xfeAMD")


# -- checks --------------------------------------------------------------------------------------------
def reason(*words):
    def check(out):
        assert not out["ok"] and out["bad"] == [], out
        assert all(word in out["reason"] for word in words), out
    return check


def result(figures=None, rows=None, most=None):
    """A result: no figure is non-finite or negative (checked for every case); ``figures`` the count read,
    ``most`` a bound on it."""
    def check(out):
        assert out["ok"] and out["bad"] == [], out
        if figures is not None:
            assert out["figures"] == figures, out
        if most is not None:
            assert 0 < out["figures"] <= most, out
        if rows is not None:
            assert out["rows"] == rows, out
    return check


def either(out):
    """A result without a non-finite or negative figure, or a reason."""
    assert out["bad"] == [], out
    assert out["ok"] or out["reason"], out


CASES = [
    # nvbandwidth text (parse_nvbandwidth) and the module's reader of it (read_gpu_bw)
    ("parse_nvbandwidth", nvb_device_line_blanks, reason("no testcase ran")),
    ("parse_nvbandwidth", nvb_one_huge_device_line, result(figures=16)),
    ("read_gpu_bw", nvb_blank_lines_before_json, reason("no testcase ran")),
    ("parse_nvbandwidth", nvb_unit_and_sum_lines, either),
    ("parse_nvbandwidth", nvb_huge_matrix, result(most=MAX_GPUS * MAX_GPUS)),
    ("read_gpu_bw", nvb_huge_matrix, result(most=MAX_GPUS * MAX_GPUS)),
    ("parse_nvbandwidth", nvb_many_testcases, result()),
    ("parse_nvbandwidth", nvb_bad_figures, result(figures=12)),
    ("read_gpu_bw", nvb_bad_figures, result(figures=12)),
    ("parse_nvbandwidth", nvb_nul, reason("NUL")),
    ("parse_nvbandwidth", nvb_invalid_utf8, result(figures=15)),
    ("parse_nvbandwidth", nvb_unicode_digits, result(figures=0)),  # no header: no matrix
    ("read_gpu_bw", nvb_unicode_digits, reason("gave no GB/s figure")),
    # nvbandwidth -j
    ("parse_nvbandwidth", nvbj_device_blanks, result()),
    ("parse_nvbandwidth", nvbj_one_huge_device, result()),
    ("parse_nvbandwidth", nvbj_wide_matrix, either),
    ("parse_nvbandwidth", nvbj_deep, reason("nvbandwidth")),
    ("parse_nvbandwidth", nvbj_bad_figures, result(figures=1)),  # only 389.4 is a figure
    ("read_gpu_bw", nvbj_bad_figures, result(figures=1)),
    ("parse_nvbandwidth", nvbj_nul, reason("NUL")),
    ("parse_nvbandwidth", nvbj_invalid_utf8, result(figures=5)),
    # dcgmi diag
    ("parse_dcgm_diag", diag_many_results, result()),
    ("parse_dcgm_diag", diag_long_message, result()),
    ("parse_dcgm_diag", diag_deep, reason("dcgmi diag")),
    ("parse_dcgm_diag", diag_odd_numbers, either),
    ("parse_dcgm_diag", diag_nul, reason("NUL")),
    ("parse_dcgm_diag", diag_invalid_utf8, result()),
    # dcgmi health
    ("parse_dcgm_health", health_many_entities, result()),
    ("parse_dcgm_health", health_error_line, reason("dcgmi health: Error:")),
    ("parse_dcgm_health", health_odd_numbers, either),
    ("parse_dcgm_health", health_nul, reason("NUL")),
    ("parse_dcgm_health", health_invalid_utf8, result()),
    ("parse_dcgm_health", health_text_many_rows, result()),
    ("parse_dcgm_health", health_text_deep, reason("dcgmi health", "below no row")),
    ("parse_dcgm_health", health_text_long_rows, result()),
    # nccl-tests
    ("parse_nccl_tests", nccl_crafted_header, reason("no result table header")),
    ("parse_nccl_tests", nccl_widest_header_read, reason("no result table header")),
    ("parse_nccl_tests", nccl_header_many_short, result(rows=10000)),
    ("parse_nccl_tests", nccl_rank_lines, result(rows=4)),
    ("parse_nccl_tests", nccl_tag_prefixes, result(rows=4)),
    ("parse_nccl_tests", nccl_bad_figures, reason("not finite numbers >= 0", "1e999")),
    ("parse_nccl_tests", nccl_bad_average, reason("not finite numbers >= 0", "average bus bandwidth '1e999'")),
    ("parse_nccl_tests", nccl_huge_numbers, either),
    ("parse_nccl_tests", nccl_nul, reason("NUL")),
    ("parse_nccl_tests", nccl_invalid_utf8, result(rows=4)),
    # stress-ng --stream
    ("parse_stress_ng_stream", sng_rate_lines, reason("no memory rate")),
    ("parse_stress_ng_stream", sng_mean_lines, reason("no memory rate")),
    ("parse_stress_ng_stream", sng_bad_figures, reason("not a positive number")),
    ("parse_stress_ng_stream", sng_bad_means, reason("no memory rate")),
    ("parse_stress_ng_stream", sng_nul, reason("NUL")),
    ("parse_stress_ng_stream", sng_invalid_utf8, result(figures=1)),
    # sysbench memory
    ("parse_sysbench_memory", sysbench_lines, reason("no 'MiB transferred' line")),
    ("parse_sysbench_memory", sysbench_bad_figures, reason("not a positive number")),
    ("parse_sysbench_memory", sysbench_negative, reason("not a positive number")),
    ("parse_sysbench_memory", sysbench_nul, reason("NUL")),
    ("parse_sysbench_memory", sysbench_invalid_utf8, result(figures=1)),
    # mbw
    ("parse_mbw", mbw_lines, reason("not mbw output")),
    ("parse_mbw", mbw_copy_lines, reason("not mbw output")),
    ("parse_mbw", mbw_bad_figures, reason("not a positive number")),
    ("parse_mbw", mbw_negative, reason("not a positive number")),
    ("parse_mbw", mbw_nul, reason("NUL")),
    ("parse_mbw", mbw_invalid_utf8, result(figures=1)),
    # /proc/cpuinfo (no reason: a CPU without a usable clock is left out)
    ("cpuinfo", cpuinfo_many_blocks, result(figures=1)),
    ("cpuinfo", cpuinfo_long_lines, result(figures=2)),
    ("cpuinfo", cpuinfo_bad_figures, result(figures=1)),
    ("cpuinfo", cpuinfo_nul, result(figures=1)),
    ("cpuinfo", cpuinfo_invalid_utf8, result(figures=2)),
]


@pytest.mark.parametrize("tool, build, check", CASES,
                         ids=["%s-%s" % (tool, build.__name__) for tool, build, unused in CASES])
def test_measure_output(tmp_path, tool, build, check):
    data = build()
    assert len(data) <= MAX_TEXT + (1 << 20)
    path = tmp_path / "output"
    path.write_bytes(data)
    outcome = bounded.run_case(KIND, PARSE, tool, str(path))
    check(outcome.result)
