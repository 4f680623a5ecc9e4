# -*- coding: utf-8 -*-
"""The helpers that turn report.json values into words for report.html and report.md:
expected/observed values, not-applicable reasons, host order, Markdown prose escaping."""

import glob
import os

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from ansible_collections.gpuhost.baseline.plugins.plugin_utils import views
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.views import (
    hosts_worst_first, human_inline, human_lines, humanise, md_text, na_reason, observed_view,
)


# --- values -------------------------------------------------------------------

@pytest.mark.parametrize("value, lines", [
    (None, []),
    ([], ["nothing"]),
    ({}, ["nothing"]),
    ("", ["nothing"]),
    (True, ["yes"]),
    (False, ["no"]),
    (4096, ["4096"]),
    (0.9, ["0.9"]),
    (5.0, ["5"]),
    ("6.8.12-4-pve", ["6.8.12-4-pve"]),
    (["amd-pstate", "amd-pstate-epp"], ["amd-pstate", "amd-pstate-epp"]),
    ({"acpi-cpufreq": 128}, ["acpi-cpufreq: 128"]),
    ({"a": [1, 2], "b": {"c": None}}, ["a: (1, 2)", "b: (c: )"]),
    ([{"node": 0, "free": 3.2}], ["node: 0; free: 3.2"]),
    ([[1, 2], []], ["(1, 2)", "nothing"]),
])
def test_human_lines(value, lines):
    assert human_lines(value) == lines


def test_human_inline_joins_lists_and_mappings():
    assert human_inline(["a", "b"]) == "a, b"
    assert human_inline({"x": 1, "y": [2, 3]}) == "x: 1; y: (2, 3)"
    assert human_inline(None) == ""
    assert human_inline([]) == "nothing"


def test_humanise_short_list_is_inline():
    h = humanise(["amd-pstate", "amd-pstate-epp"])
    assert h["inline"] and h["text"] == "amd-pstate, amd-pstate-epp" and not h["truncated"]


def test_humanise_mapping_is_one_line_per_key():
    h = humanise({"powersave": 60, "performance": 4})
    assert h["lines"] == ["powersave: 60", "performance: 4"] and not h["inline"]
    assert h["text"] == "powersave: 60; performance: 4"


def test_humanise_truncates_long_values_and_keeps_the_full_one():
    long_item = "x" * 300
    h = humanise([long_item, "b", "c", "d", "e", "f"], max_items=4, max_chars=50)
    assert h["truncated"]
    assert len(h["lines"]) == 5 and h["lines"][-1] == "and 2 more"
    assert h["lines"][0].endswith("\u2026") and len(h["lines"][0]) == 50
    assert h["full"][0] == long_item and len(h["full"]) == 6


def test_humanise_null_is_blank_not_null():
    h = humanise(None)
    assert h["lines"] == [] and h["text"] == "" and not h["truncated"]


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=30),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                    max_leaves=12))
def test_humanise_never_shows_json_spelling(value):
    text = " ".join(humanise(value)["lines"] + humanise(value)["full"])
    if not _mentions_json(value):
        assert "[]" not in text and "{}" not in text and "null" not in text and '"' not in text


def _mentions_json(value):
    """Strings in the value itself may spell anything; only check generated text."""
    if isinstance(value, str):
        return any(s in value for s in ("[]", "{}", "null", '"'))
    if isinstance(value, list):
        return any(_mentions_json(v) for v in value)
    if isinstance(value, dict):
        return any(_mentions_json(k) or _mentions_json(v) for k, v in value.items())
    return False


def test_observed_that_repeats_the_message_points_to_it():
    problems = ["governor performance is not set at boot: no gpuhost-cpu-power.service installed",
                "idle states above 100 us (C6 290 us) are not disabled at boot: no service installed"]
    finding = {"observed": problems, "message": "persisted: " + ", ".join(problems)}
    h = observed_view(finding)
    assert h["lines"] == ["2 problems, see message"] and h.get("note")
    # a short value that happens to be in the message is still shown
    assert observed_view({"observed": "ondemand", "message": "governor is ondemand"})["text"] == "ondemand"


# --- not applicable reasons -----------------------------------------------------

@pytest.mark.parametrize("message, reason", [
    ("not applicable: nvidia.present is false", "applies only to hosts with the NVIDIA driver and GPUs present"),
    ("not applicable: nvidia.present && length(nvidia.gpus || `[]`) > `1` is false",
     "applies only to hosts with the NVIDIA driver and GPUs present and with more than one NVIDIA GPU"),
    ("not applicable: numa.node_count != `1` is false", "applies only to hosts with more than one NUMA node"),
    ("not applicable: no subjects (derived.pcie.gpus is empty)",
     "nothing to check on this host (no GPUs on the PCI bus)"),
    ("not applicable: no subjects (derived.pcie.brand_new is empty)",
     "nothing to check on this host for: Some rule"),
    ("not applicable: facts.unheard_of && x is null", "condition for this rule not met: Some rule"),
    ("Intel CPU: amd_pstate does not apply", "Intel CPU: amd_pstate does not apply"),
    (None, "does not apply to this host: Some rule"),
])
def test_na_reason_in_words(message, reason):
    assert na_reason({"id": "X-001", "title": "Some rule", "message": message}) == reason


def test_na_reason_never_shows_jmespath_for_known_conditions():
    for expr in views.APPLIES_WORDS:
        out = na_reason({"id": "X", "title": "t", "message": "not applicable: %s is false" % expr})
        assert expr not in out and "`" not in out and "&&" not in out


def test_every_bundled_rule_condition_is_in_words():
    """A rule that does not apply says why in words, the same for every host: each operand of
    every bundled rule's ``applies_when`` is in APPLIES_WORDS (host pages and the JUnit rules suite
    group and state not-applicable rules by that reason)."""
    seen = 0
    for path in glob.glob(os.path.join(views.COLLECTION_ROOT, "rules", "*.yml")):
        with open(path, encoding="utf-8") as handle:
            for rule in yaml.safe_load(handle) or []:
                expr = rule.get("applies_when")
                if not expr:
                    continue
                seen += 1
                out = na_reason({"id": rule["id"], "title": rule.get("title"),
                                 "message": "not applicable: %s is false" % expr})
                assert out.startswith("applies only to hosts "), (rule["id"], expr, out)
    assert seen > 40


def test_split_and_respects_parentheses_and_literals():
    assert views._split_and("a && (b && c) && `x&&y`") == ["a", "(b && c)", "`x&&y`"]


# --- host order -------------------------------------------------------------------

def _host(state="audited", fails=(), unknown=0):
    findings = [{"id": "R-%d" % i, "status": "fail", "severity": sev} for i, sev in enumerate(fails)]
    summary = {"pass": 0, "fail": len(fails), "unknown": unknown, "waived": 0, "not_applicable": 0}
    return {"state": state, "findings": findings, "summary": summary}


def test_hosts_worst_first():
    report = {"hosts": {
        "a-clean": _host(),
        "b-many-high": _host(fails=["high"] * 5),
        "c-one-critical": _host(fails=["critical"]),
        "d-down": _host(state="unreachable"),
        "e-two-critical": _host(fails=["critical", "low"]),
        "f-untyped": _host(fails=[None]),  # a failure without a known severity counts as critical
        "g-many-high": _host(fails=["high"] * 5),
    }}
    order = [name for dummy, name, dummy2 in hosts_worst_first(report)]
    assert order == ["e-two-critical", "c-one-critical", "f-untyped", "b-many-high", "g-many-high",
                     "d-down", "a-clean"]
    # the element index stays the host's place in report.json
    assert hosts_worst_first(report)[0][0] == 4


# --- Markdown prose ---------------------------------------------------------------

def test_md_text_keeps_identifiers_readable():
    assert md_text("vm.zone_reclaim_mode is 1") == "vm.zone_reclaim_mode is 1"
    assert md_text("_x_ *y* [l](javascript:1) <b> & `c` ~s~") == \
        "\\_x\\_ \\*y\\* \\[l\\](javascript:1) &lt;b&gt; &amp; \\`c\\` \\~s\\~"
    assert md_text("# heading") == "\\# heading"
    assert md_text("a\nb") == "a<br>b"


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_md_text_never_leaks_markup(text):
    out = md_text(text)
    assert "\n" not in out and "\r" not in out
    assert "<" not in out.replace("<br>", "")
    i = 0
    while i < len(out):
        if out[i] == "\\":
            i += 2  # an escape pair: the next character is literal
            continue
        assert out[i] not in "*`[]~\\", (text, out)
        if out[i] == "_":
            # a bare underscore only between letters or digits, where it cannot start emphasis
            assert 0 < i < len(out) - 1 and out[i - 1].isascii() and out[i - 1].isalnum() \
                and out[i + 1].isascii() and out[i + 1].isalnum(), (text, out)
        i += 1
