# -*- coding: utf-8 -*-
"""Bomb/fuzz corpus for the input kind "workload output": what a site's benchmark could hand the parsers of
``measure/workload.py`` (VAL-012/013) on a broken or hostile host: output of several MB, a line past the line
bound, thousands of lines that look like the start of JSON, JSON nested a million deep, NUL bytes and invalid
UTF-8, figures printed as ``inf``, ``1e999``, ``nan`` or negative. Each case runs the parser over the bytes in a
bounded child (tests/helpers/bounded.py: 10 s, 512 MiB) and must end with either a finite figure of at least 0
or a one-line reason; never a traceback, a ``MemoryError`` or a hang."""
import pytest

from helpers import bounded

from ansible_collections.gpuhost.baseline.plugins.module_utils.measure.measure import MAX_LINE

KIND = "workload output"
SIZE = 3 << 20
PATTERN = r"throughput: (?P<value>\S+)"

PARSE = bounded.case("""
    import math
    from ansible_collections.gpuhost.baseline.plugins.module_utils.measure import workload
    parser, spec, path = ARGS
    with open(path, "rb") as handle:
        data = handle.read()
    kwargs = {"pattern": spec} if parser == "regex" else {"path": spec}
    result, error = workload.parse_workload(data, parser, **kwargs)
    value = result["value"] if result else None
    assert value is None or (math.isfinite(value) and value >= 0), value
    assert (result is None) != (error is None)
    report({"ok": error is None, "value": value, "reason": (error or "")[:300], "one_line": "\\n" not in (error or "")})
""")


def _fill(line, size=SIZE):
    line += b"\n"
    return line * max(1, size // len(line))


CASES = [
    # (parser, pattern or path, bytes, a figure expected)
    ("regex", PATTERN, _fill(b"x" * 1000, 5 << 20) + b"throughput: 5\n", False),  # past MAX_TEXT: cut before it
    ("regex", PATTERN, b"throughput: 5\n" + _fill(b"throughput: 7"), True),
    ("regex", PATTERN, b"throughput: 1 " + b" " * (MAX_LINE * 4) + b"\n", False),  # one line past the bound
    ("regex", PATTERN, _fill(b"throughput: " + b"9" * (MAX_LINE - 20)), False),  # a figure of 8000 digits
    ("regex", PATTERN, b"throughput: 1e999\nthroughput: inf\nthroughput: nan\n", False),
    ("regex", PATTERN, b"throughput: -3\n", False),
    ("regex", PATTERN, b"\x00\xff\xfe throughput: 4\n", True),
    ("json", "[0].avg_ts", _fill(b"[INFO] not json"), False),  # many lines that start like JSON
    ("json", "[0].avg_ts", b"[" * 1000000 + b"]" * 1000000, False),
    ("json", "a", b'{"a": 1e999}', False),
    ("json", "a", b'{"a": ' + b"9" * 5000 + b"}", False),
    ("json", "a.b", b'{"a": {"b": ' + b'"x"' * 1 + b"}}", False),
    ("json", "a", b"log line\n" + b'{"a": 12.5}' + b"\n", True),
    ("json", "0." * 400 + "0", b"[" * 401 + b"1" + b"]" * 401, True),
]


@pytest.mark.parametrize("parser, spec, data, figure", CASES, ids=["%s-%d" % (c[0], n) for n, c in enumerate(CASES)])
def test_workload_output(tmp_path, parser, spec, data, figure):
    path = tmp_path / "out"
    path.write_bytes(data)
    outcome = bounded.run_case(KIND, PARSE, parser, spec, str(path))
    assert outcome.result["ok"] is figure, outcome.result
    assert outcome.result["one_line"], outcome.result
