"""The parsers of a site workload's output (plugins/module_utils/measure/workload.py, VAL-012): ``regex`` with a
named group ``value`` and ``json`` with a dotted path, on the fixtures of tests/fixtures/workload/ (provenance in
its README.md) and hostile variants: empty, garbage, a figure that is no number, huge output. No parser raises;
a bad input is a reason that says what was expected, with a bounded excerpt. About 0.2 s."""
import json
import os

import pytest

from ansible_collections.gpuhost.baseline.plugins.module_utils.measure import measure, workload

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "fixtures", "workload")
VLLM_PATTERN = r"^Output token throughput \(tok/s\):\s+(?P<value>\S+)"


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def spec(**overrides):
    values = {"name": "bench", "argv": ["bench", "-x"], "timeout": 10, "parser": "regex",
              "pattern": r"throughput: (?P<value>\S+)", "unit": "tok/s", "floor": 100.0}
    values.update(overrides)
    return values


# -- regex -----------------------------------------------------------------------------------------
def test_regex_reads_vllm_bench_serve_summary():
    parsed, error = workload.parse_workload(fixture("vllm-bench-serve-summary.txt"), "regex", VLLM_PATTERN)
    assert error is None
    assert parsed["value"] == 416.80 and parsed["matches"] == 1
    assert parsed["how"] == "regex %r, the one matching line" % VLLM_PATTERN


def test_regex_reads_a_latency_of_the_same_summary():
    parsed, error = workload.parse_workload(fixture("vllm-bench-serve-summary.txt"), "regex",
                                            r"^Mean TPOT \(ms\):\s+(?P<value>\S+)")
    assert error is None and parsed["value"] == 71.02


def test_regex_takes_the_last_matching_line():
    text = "iteration 1: throughput: 90.0 tok/s\nthroughput: 123.4 tok/s\n"
    parsed, error = workload.parse_workload(text, "regex", r"throughput: (?P<value>[0-9.]+)")
    assert error is None and parsed["value"] == 123.4
    assert "the last of 2 matching lines" in parsed["how"]


def test_regex_without_a_match_says_what_was_expected_with_an_excerpt():
    parsed, error = workload.parse_workload("warming up\nsegments 7, ok\n", "regex", r"throughput: (?P<value>\S+)")
    assert parsed is None
    assert error == "no line matched the pattern 'throughput: (?P<value>\\\\S+)'; the output began: " \
                    "warming up | segments 7, ok"


@pytest.mark.parametrize("figure", ["nan", "inf", "-3.2", "1e999", "fast", "12,5"])
def test_regex_figure_that_is_no_number_is_refused(figure):
    parsed, error = workload.parse_workload("throughput: %s tok/s\n" % figure, "regex", r"throughput: (?P<value>\S+)")
    assert parsed is None
    assert "not a finite number of at least 0" in error and figure[:5] in error


def test_regex_pattern_without_value_group_or_broken():
    assert "no named group value" in workload.parse_workload("x 1", "regex", r"x (\d+)")[1]
    assert "not a regular expression" in workload.parse_workload("x 1", "regex", r"x (?P<value>\d+")[1]


# -- json ------------------------------------------------------------------------------------------
def test_json_reads_llama_bench():
    text = fixture("llama-bench-tg128.json")
    for path in ("[0].avg_ts", "0.avg_ts", "-1.avg_ts"):
        parsed, error = workload.parse_workload(text, "json", path=path)
        assert error is None, path
        assert parsed == {"value": 118.88, "how": "json path %s" % path, "matches": 1}


def test_json_after_log_lines_and_nested_objects():
    text = "[INFO] loading\nINFO starting\n" + json.dumps({"results": [{"throughput": 7}, {"throughput": "8.5"}]})
    assert workload.parse_workload(text, "json", path="results.1.throughput")[0]["value"] == 8.5
    assert workload.parse_workload(text, "json", path="results[0].throughput")[0]["value"] == 7.0


def test_json_path_that_is_not_there_names_what_is():
    text = fixture("llama-bench-tg128.json")
    parsed, error = workload.parse_workload(text, "json", path="[0].tokens_per_s")
    assert parsed is None and error.startswith("path [0].tokens_per_s: no tokens_per_s in 0 (its keys: avg_ns, ")
    assert "element(s), no [3]" in workload.parse_workload(text, "json", path="[3].avg_ts")[1]
    assert "not a finite number" in workload.parse_workload(text, "json", path="[0].model_type")[1]
    assert "not a finite number" in workload.parse_workload('{"a": true}', "json", path="a")[1]


def test_json_garbage_and_truncated():
    parsed, error = workload.parse_workload("segments 7, ok\n", "json", path="a")
    assert parsed is None
    assert error == "expected JSON with a: no JSON document (no line starts with { or [); the output began: segments 7, ok"
    truncated = fixture("llama-bench-tg128.json")[:200]
    parsed, error = workload.parse_workload(truncated, "json", path="[0].avg_ts")
    assert parsed is None and "no JSON document that parses" in error and "truncated or not JSON" in error
    deep = "[" * 100000 + "]" * 100000
    assert workload.parse_workload(deep, "json", path="0")[0] is None


@pytest.mark.parametrize("data", ["", "   \n\n", None, b""])
def test_empty_output_is_a_reason(data):
    for parser, kwargs in (("regex", {"pattern": r"t: (?P<value>\S+)"}), ("json", {"path": "a.b"})):
        parsed, error = workload.parse_workload(data, parser, **kwargs)
        assert parsed is None and error.startswith(("empty output: expected", "no output: expected"))


def test_huge_output_is_truncated_to_the_bound():
    filler = ("x" * 1000 + "\n") * (measure.MAX_TEXT // 1000 + 10)
    # a figure within the bound is read; one past it is not (the text is cut at MAX_TEXT first)
    parsed, error = workload.parse_workload("throughput: 5 tok/s\n" + filler, "regex", r"throughput: (?P<value>\S+)")
    assert error is None and parsed["value"] == 5.0
    parsed, error = workload.parse_workload(filler + "throughput: 5 tok/s\n", "regex", r"throughput: (?P<value>\S+)")
    assert parsed is None and len(error) < 400
    # a line longer than the line bound is not searched
    long_line = "throughput: 6 " + "y" * (measure.MAX_LINE + 1)
    assert workload.parse_workload(long_line, "regex", r"throughput: (?P<value>\d+)")[0] is None


def test_excerpt_and_last_line_are_bounded_and_printable():
    assert workload.excerpt("a\x1b[31mb\n\n c  d \n") == "a?[31mb | c d"
    assert len(workload.excerpt("z" * 10000)) == workload.EXCERPT_CHARS
    assert workload.last_line("", "first\nlast one\n\n") == "last one"
    assert workload.last_line("err1\nerr2\n", "out") == "err2"
    assert workload.last_line(None, "") == "no output"


# -- definitions -----------------------------------------------------------------------------------
def test_a_good_definition_passes():
    assert workload.check_workload(spec()) is None
    assert workload.check_workload(spec(parser="json", pattern=None, path="[0].avg_ts", floor=0)) is None


@pytest.mark.parametrize("overrides, message", [
    ({"name": ""}, "needs a name"),
    ({"argv": "bench -x"}, "argv must be a non-empty list"),
    ({"argv": []}, "argv must be a non-empty list"),
    ({"timeout": 0}, "timeout must be 1 to 14400"),
    ({"timeout": True}, "timeout must be"),
    ({"parser": "jmespath"}, "parser must be one of regex, json"),
    ({"pattern": None}, "needs a pattern"),
    ({"pattern": r"(\d+)"}, "no named group value"),
    ({"parser": "json", "path": ""}, "needs a path"),
    ({"parser": "json", "path": "a..b"}, "empty segment"),
    ({"floor": -1}, "floor must be a number of at least 0"),
    ({"floor": float("nan")}, "floor must be"),
    ({"floor": "100"}, "floor must be"),
    ({"env": {"A=B": "c"}}, "env must map"),
    ({"lower_is_better": "yes"}, "lower_is_better must be true or false"),
])
def test_a_bad_definition_says_what_is_wrong(overrides, message):
    assert message in workload.check_workload(spec(**overrides))
