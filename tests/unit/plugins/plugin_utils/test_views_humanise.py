# -*- coding: utf-8 -*-
"""The helpers that turn report.json values into words for report.html and report.md:
expected/observed values, not-applicable reasons, host order, Markdown prose escaping."""

import glob
import os

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import views
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.views import (
    hosts_worst_first, human_inline, human_lines, humanise, md_text, na_reason, observed_view, rule_na_reason,
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
# The judge writes them in the rule's words (evaluation.not_applicable_message); the views show the
# message as it is and parse nothing (issue 35).

@pytest.mark.parametrize("message, reason", [
    ("applies only to hosts with the NVIDIA driver and GPUs present",
     "applies only to hosts with the NVIDIA driver and GPUs present"),
    ("nothing to check on this host  (no GPUs\n on the PCI bus)", "nothing to check on this host (no GPUs on the PCI bus)"),
    ("not judged: GPU idle (P8)", "not judged: GPU idle (P8)"),
    (None, "does not apply to this host: Some rule"),
])
def test_na_reason_is_the_judges_words(message, reason):
    assert na_reason({"id": "X-001", "title": "Some rule", "message": message}) == reason


def test_the_rules_own_reason_is_that_of_a_finding_without_subject():
    assert rule_na_reason({"id": "X-001", "message": "applies only to hosts with an NVSwitch"}) == \
        "applies only to hosts with an NVSwitch"
    assert rule_na_reason({"id": "X-001", "subject": "0000:43:00.0", "message": "not judged: GPU idle"}) is None


def test_the_judge_words_a_rule_that_does_not_apply_from_the_rule():
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge.evaluation import (
        no_subjects_message, not_applicable_message)

    class Rule:
        title = "Some rule"
        applies_to = "hosts with an AMD Zen CPU"
        no_subjects = "no GPUs on the PCI bus"

    assert not_applicable_message(Rule) == "applies only to hosts with an AMD Zen CPU"
    assert no_subjects_message(Rule) == "nothing to check on this host (no GPUs on the PCI bus)"
    Rule.applies_to = Rule.no_subjects = None  # a site rule without words: its title
    assert not_applicable_message(Rule) == "condition for this rule not met: Some rule"
    assert no_subjects_message(Rule) == "nothing to check on this host for: Some rule"


def test_every_bundled_rule_says_in_words_why_it_does_not_apply():
    """A rule that does not apply says why in words, the same for every host: every bundled rule with
    ``applies_when`` has ``applies_to``, and every one with a ``subjects`` list that can be empty (not
    a one-element list literal) has ``no_subjects`` (host pages and the JUnit rules suite group and
    state not-applicable rules by that reason). The words never show jmespath."""
    seen = 0
    for path in glob.glob(os.path.join(views.COLLECTION_ROOT, "rules", "*.yml")):
        with open(path, encoding="utf-8") as handle:
            for rule in yaml.safe_load(handle) or []:
                if rule.get("applies_when"):
                    seen += 1
                    assert rule.get("applies_to", "").startswith("hosts "), rule["id"]
                subjects = rule.get("subjects")
                if subjects and not subjects.startswith("["):
                    assert rule.get("no_subjects", "").startswith("no "), rule["id"]
                for words in (rule.get("applies_to"), rule.get("no_subjects")):
                    assert not words or not any(mark in words for mark in ("`", "&&", "||", "derived.")), rule["id"]
    assert seen > 40


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
