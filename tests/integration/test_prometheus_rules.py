# -*- coding: utf-8 -*-
"""The shipped Prometheus alerting rules and the metrics they read, checked by ``promtool``.

``promtool check rules`` and ``promtool test rules`` on prometheus/ (drift, stale and failing runs
in prometheus/tests/gpuhost_baseline_alerts_test.yml), mutated copies of the rules that the unit
tests must catch, and ``promtool check metrics`` on the metrics of the demo snapshot audit (the
report.json of tests/fixtures/golden), on each of its hosts alone, on a hostile report and on a
merged fleet file. promtool comes from Debian's prometheus package (``make test-deps``); these
tests fail, not skip, when it is missing.
"""

import fnmatch
import json
import os
import shutil
import subprocess

import pytest
import yaml

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import metrics
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import build_report

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROMTOOL = "/usr/bin/promtool"
RULES = os.path.join(REPO, "prometheus", "gpuhost_baseline_alerts.yml")
RULES_TEST = os.path.join(REPO, "prometheus", "tests", "gpuhost_baseline_alerts_test.yml")
DEMO_REPORT = os.path.join(REPO, "tests", "fixtures", "golden", "report.json")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def promtool():
    assert os.access(PROMTOOL, os.X_OK), (
        "Debian's prometheus package provides %s: run `make test-deps` (apt-get install prometheus)" % PROMTOOL)
    return PROMTOOL


def run(args, stdin=None, cwd=None):
    proc = subprocess.run(args, input=stdin, cwd=cwd, check=False, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=120)
    return proc.returncode, proc.stdout.decode("utf-8", "replace")


def check_metrics(promtool, text):
    """``promtool check metrics`` exits 0 and says nothing (a lint remark is a finding too)."""
    rc, out = run([promtool, "check", "metrics"], stdin=text.encode("utf-8"))
    assert rc == 0 and out.strip() == "", out


# --- alerting rules ------------------------------------------------------------------

def test_check_rules(promtool):
    rc, out = run([promtool, "check", "rules", RULES])
    assert rc == 0 and "SUCCESS: 3 rules found" in out, out


def test_unit_tests_of_the_rules(promtool):
    rc, out = run([promtool, "test", "rules", os.path.basename(RULES_TEST)], cwd=os.path.dirname(RULES_TEST))
    assert rc == 0 and "SUCCESS" in out, out


def test_rules_cover_drift_stale_and_failing_runs():
    with open(RULES) as handle:
        rules = yaml.safe_load(handle)["groups"][0]["rules"]
    assert [r["alert"] for r in rules] == ["GpuhostBaselineDrift", "GpuhostBaselineAuditStale", "GpuhostBaselineAuditFailing"]
    with open(RULES_TEST) as handle:
        tested = set(t["alertname"] for group in yaml.safe_load(handle)["tests"] for t in group["alert_rule_test"])
    assert tested == set(r["alert"] for r in rules)
    stale = rules[1]["expr"]
    assert "2 * 3600" in stale, "the audit interval is written out in the expression (docs/report.md)"


@pytest.mark.parametrize("old, new", [
    ('severity=~"critical|high"}', 'severity=~"critical|high|medium"}'),  # medium would alert
    ('severity=~"critical|high"}', 'severity="critical"}'),  # high would not
    ("max by (host, rule, subject)", "sum by (host, rule, subject)"),  # a series scraped twice counted twice
    ("> 2 * 3600", "> 3 * 3600"),  # stale one interval later
    ("> 2 * 3600", "> 1 * 3600"),  # stale one interval earlier
    ('state=~"unreachable|failed"', 'state="unreachable"'),  # a failed audit would not alert
    ("for: 10m", "for: 0m"),  # a finding fixed within minutes would alert
])
def test_the_rule_tests_catch_a_changed_rule(promtool, tmp_path, old, new):
    with open(RULES) as handle:
        text = handle.read()
    assert old in text
    (tmp_path / "tests").mkdir()
    (tmp_path / os.path.basename(RULES)).write_text(text.replace(old, new))
    shutil.copy(RULES_TEST, str(tmp_path / "tests"))
    rc, out = run([promtool, "test", "rules", os.path.basename(RULES_TEST)], cwd=str(tmp_path / "tests"))
    assert rc != 0 and "FAILED" in out, out


def test_rules_ship_in_the_collection_artifact():
    with open(os.path.join(REPO, "galaxy.yml")) as handle:
        ignore = yaml.safe_load(handle).get("build_ignore") or []
    for path in (RULES, RULES_TEST):
        rel = os.path.relpath(path, REPO)
        parts = rel.split("/")
        prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
        dropped = [p for p in ignore for prefix in prefixes if fnmatch.fnmatch(prefix, p)]
        assert dropped == [], "galaxy.yml build_ignore drops %s: %s" % (rel, dropped)


# --- metrics -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def demo():
    with open(DEMO_REPORT) as handle:
        return json.load(handle)


def test_check_metrics_of_the_demo_audit(promtool, demo):
    assert len(demo["hosts"]) >= 4
    check_metrics(promtool, metrics.render_metrics(demo))
    for host in demo["hosts"]:
        check_metrics(promtool, metrics.render_host_metrics(demo, host))


def test_promtool_flags_what_the_renderer_avoids(promtool):
    # the check means something only if promtool rejects the mistakes the renderer is written against
    # (a series written twice it does not flag: tests/helpers/prom.py parse_families does)
    for bad in ('# HELP x_y h\n# TYPE x_y gauge\nx_y{host="a\nb"} 1\n',  # a raw newline in a value
                '# HELP x_y h\n# TYPE x_y gauge\nx_y{host="a"b"} 1\n',  # a raw quote
                'x_y{host="a"} 1\n'):  # no HELP (lint)
        rc, out = run([promtool, "check", "metrics"], stdin=bad.encode("utf-8"))
        assert rc != 0, bad


def test_check_metrics_of_a_hostile_report(promtool):
    names = ['back\\slash', 'quo"te', 'new\nline', '"} 1\ngpuhost_baseline_host_up{host="evil"} 1', 'cr\rtab\t',
             u'nul\x00bell\x07', u'sep\u2028', u'\u00e9\u4e2d', 'trailing\\', '', u'lone\ud800']
    hosts = dict((name, {"profile": name, "message": name, "numa": [{"id": name, "free_pct": 12.5}], "findings": [
        {"id": "PCI-001", "status": "fail", "severity": name, "area": name, "subject": name},
        {"id": "PCI-001", "status": "pass", "severity": "high", "subject": name},
        {"id": name or "X", "status": "unknown", "subject": None}]}) for name in names)
    hosts["down\n"] = {"state": "unreachable", "message": "ssh"}
    report = build_report(hosts, profile='p"\\\n', generated="2025-06-01T12:00:00Z", collection_version='0"\n')
    report["hosts"][names[0]]["changes"] = {"last_change": "2025-06-01T11:00:00Z"}
    report["started"] = "2025-06-01T11:59:00Z"
    text = metrics.render_metrics(report)
    check_metrics(promtool, text)
    assert "gpuhost_baseline_last_change_timestamp_seconds" in text and "gpuhost_baseline_run_duration_seconds" in text
    for host in report["hosts"]:
        check_metrics(promtool, metrics.render_host_metrics(report, host))
    limited = build_report({"new": {"findings": []}}, generated="2025-06-02T12:00:00Z")
    merged = metrics.merge_metrics(limited, text)
    assert len(metrics.kept_hosts(limited, text)) == len(report["hosts"])
    check_metrics(promtool, merged)
