# -*- coding: utf-8 -*-
"""The shipped Prometheus alerting rules and the metrics they read, checked by ``promtool``.

``promtool check rules`` and ``promtool test rules`` on prometheus/ (faults, drift, stale and failing
runs in prometheus/tests/gpuhost_baseline_alerts_test.yml), mutated copies of the rules that the unit
tests must catch, the rules over the demo audit's own metrics.prom (tests/fixtures/golden: one alert
per failing rule, the critical fault of the incident host at once), and ``promtool check metrics`` on
the metrics of the demo snapshot audit (the report.json of tests/fixtures/golden), on each of its
hosts alone, on a hostile report and on a merged fleet file. promtool comes from Debian's prometheus package (``make test-deps``); these
tests fail, not skip, when it is missing.
"""

import collections
import fnmatch
import json
import os
import shutil
import subprocess

import pytest
import yaml

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import metrics
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import build_report
from helpers.prom import parse_metrics

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROMTOOL = "/usr/bin/promtool"
RULES = os.path.join(REPO, "prometheus", "gpuhost_baseline_alerts.yml")
RULES_TEST = os.path.join(REPO, "prometheus", "tests", "gpuhost_baseline_alerts_test.yml")
DEMO_REPORT = os.path.join(REPO, "tests", "fixtures", "golden", "report.json")
DEMO_METRICS = os.path.join(REPO, "tests", "fixtures", "golden", "metrics.prom")
#: the finding alerts' severities: medium and above (docs/report.md, "Alerting rules")
ALERTING = ("critical", "high", "medium")

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
    assert rc == 0 and "SUCCESS: 5 rules found" in out, out


def test_unit_tests_of_the_rules(promtool):
    rc, out = run([promtool, "test", "rules", os.path.basename(RULES_TEST)], cwd=os.path.dirname(RULES_TEST))
    assert rc == 0 and "SUCCESS" in out, out


def load_rules():
    with open(RULES) as handle:
        return yaml.safe_load(handle)["groups"][0]["rules"]


def test_rules_cover_faults_drift_stale_and_failing_runs():
    rules = load_rules()
    assert [r["alert"] for r in rules] == ["GpuhostBaselineFault", "GpuhostBaselineFault", "GpuhostBaselineDrift",
                                           "GpuhostBaselineAuditStale", "GpuhostBaselineAuditFailing"]
    with open(RULES_TEST) as handle:
        tested = set(t["alertname"] for group in yaml.safe_load(handle)["tests"] for t in group["alert_rule_test"])
    assert tested == set(r["alert"] for r in rules)
    critical, other, drift = rules[:3]
    # a critical fault does not wait; the finding alerts take their severity from the finding
    assert "for" not in critical and other["for"] == drift["for"] == "10m"
    assert critical["labels"] == {"severity": "critical"} and 'severity="critical"' in critical["expr"]
    assert "labels" not in other and "labels" not in drift
    for rule in (critical, other, drift):
        assert "by (cluster, host, rule, subject, area, severity, kind)" in rule["expr"], rule["alert"]
    stale = rules[3]["expr"]
    assert "2 * 3600" in stale, "the audit interval is written out in the expression (docs/report.md)"


def replace_in(index, old, new):
    """A mutation: ``old`` replaced by ``new`` in the expression of rule ``index``."""
    def mutate(rules):
        assert old in rules[index]["expr"], (old, rules[index]["expr"])
        rules[index]["expr"] = rules[index]["expr"].replace(old, new)
    return mutate


def setting(index, key, value):
    """A mutation: rule ``index``'s ``key`` set to ``value`` (None: removed)."""
    def mutate(rules):
        if value is None:
            del rules[index][key]
        else:
            rules[index][key] = value
    return mutate


MUTATIONS = {
    # faults
    "critical fault waits": setting(0, "for", "10m"),
    "high fault at once": setting(1, "for", None),
    "medium fault not alerting": replace_in(1, 'severity=~"high|medium"', 'severity="high"'),
    "low fault alerting": replace_in(1, 'severity=~"high|medium"', 'severity=~"high|medium|low"'),
    "fault duplicates summed": replace_in(0, "max by", "sum by"),
    "faults of a rule merged": replace_in(1, "max by (cluster, host, rule, subject,", "max by (cluster, host, rule,"),
    "fault severity fixed": setting(1, "labels", {"severity": "warning"}),
    "fault without kind ignored": replace_in(1, 'kind="", area="health"', 'kind="fault", area="health"'),
    "drift counted as fault": replace_in(0, 'kind="fault", severity', 'kind=~"fault|drift", severity'),
    # drift
    "drift at once": setting(2, "for", None),
    "drift later": setting(2, "for", "1h"),
    "medium drift not alerting": replace_in(2, 'severity=~"critical|high|medium"', 'severity=~"critical|high"'),
    "low drift alerting": replace_in(2, 'severity=~"critical|high|medium"', 'severity=~"critical|high|medium|low"'),
    "drift duplicates summed": replace_in(2, "max by", "sum by"),
    "drift per host only": replace_in(2, "count by (cluster, host, rule, area, severity, kind)", "count by (cluster, host)"),
    "drift per subject": replace_in(2, "count by (cluster, host, rule, area,", "count by (cluster, host, rule, subject, area,"),
    "drift severity fixed": setting(2, "labels", {"severity": "warning"}),
    "drift without kind ignored": replace_in(2, 'kind="", area!="health"', 'kind="drift", area!="health"'),
    "old fault counted as drift": replace_in(2, 'area!="health"', 'area=~".+"'),
    "old series kept apart": replace_in(2, '"kind", "drift", "", ""', '"origin", "old", "", ""'),
    # stale and failing runs
    "stale one interval later": replace_in(3, "> 2 * 3600", "> 3 * 3600"),
    "stale one interval earlier": replace_in(3, "> 2 * 3600", "> 1 * 3600"),
    "failed audit not alerting": replace_in(4, 'state=~"unreachable|failed"', 'state="unreachable"'),
    "failing run at once": setting(4, "for", "0m"),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_the_rule_tests_catch_a_changed_rule(promtool, tmp_path, name):
    with open(RULES) as handle:
        document = yaml.safe_load(handle)
    MUTATIONS[name](document["groups"][0]["rules"])
    (tmp_path / "tests").mkdir()
    with open(str(tmp_path / os.path.basename(RULES)), "w") as handle:
        yaml.safe_dump(document, handle, sort_keys=False)
    rc, out = run([promtool, "check", "rules", str(tmp_path / os.path.basename(RULES))])
    assert rc == 0, out  # the mutant is a valid rule file: the unit tests, not promtool, must reject it
    shutil.copy(RULES_TEST, str(tmp_path / "tests"))
    rc, out = run([promtool, "test", "rules", os.path.basename(RULES_TEST)], cwd=str(tmp_path / "tests"))
    assert rc != 0 and "FAILED" in out, out


def series_text(name, labels):
    """A series of promtool's input_series, its label values quoted as PromQL strings."""
    return "%s{%s}" % (name, ",".join("%s=%s" % (k, json.dumps(v)) for k, v in sorted(labels.items())))


def test_the_demo_fleet_alerts_per_rule(promtool, tmp_path):
    """The rules over the demo audit's metrics.prom (the golden file the audit playbook wrote): every
    failing fault of medium and above is an alert of its own (host, rule, subject), the critical ones
    at the first evaluation; every failing drift rule of medium and above one alert per (host, rule,
    severity) after 10 minutes, its value the number of subjects; each with the finding's severity.
    The incident host's critical health fault (HEALTH-001 on a GPU) and its critical drift (LXC-001)
    are among them. The expected alerts are worked out here from the series; the annotations, tested
    by the unit tests, are left out of this copy of the rules."""
    with open(DEMO_METRICS, encoding="utf-8") as handle:
        samples = [(lb, v) for n, lb, v in parse_metrics(handle.read()) if n == "gpuhost_baseline_finding_failing"]
    failing = set((lb["host"], lb["rule"], lb["subject"], lb["area"], lb["severity"], lb["kind"], lb["cluster"])
                  for lb, v in samples if v == 1 and lb["severity"] in ALERTING)
    faults = sorted(f for f in failing if f[5] == "fault")
    subjects = collections.Counter((h, r, a, sev, c) for h, r, s, a, sev, k, c in failing if k == "drift")

    def nonempty(**labels):  # Prometheus keeps no empty label (subject of a host-wide rule, no cluster)
        return dict((k, v) for k, v in labels.items() if v)

    def fault(host, rule, subject, area, severity, kind, cluster):
        return {"exp_labels": nonempty(host=host, rule=rule, subject=subject, area=area, severity=severity,
                                       kind=kind, cluster=cluster)}

    def drift(key, count):
        host, rule, area, severity, cluster = key
        return {"exp_labels": nonempty(host=host, rule=rule, area=area, severity=severity, kind="drift",
                                       cluster=cluster, value=str(count))}

    critical = [fault(*f) for f in faults if f[4] == "critical"]
    assert fault("demo-incident", "HEALTH-001", "0000:47:00.0", "health", "critical", "fault", "lab-a") in critical
    assert ("demo-incident", "LXC-001", "lxc", "critical", "lab-a") in subjects
    assert any(f[4] != "critical" for f in faults) and max(subjects.values()) > 1

    # the drift alert's value as a label, so that promtool compares it
    with open(RULES) as handle:
        document = yaml.safe_load(handle)
    for rule in document["groups"][0]["rules"]:
        rule.pop("annotations", None)
        if rule["alert"] == "GpuhostBaselineDrift":
            rule["labels"] = {"value": "{{ $value }}"}
    test = {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": [{"series": series_text("gpuhost_baseline_finding_failing", lb), "values": "%gx20" % v}
                         for lb, v in samples],
        "alert_rule_test": [
            {"eval_time": "0m", "alertname": "GpuhostBaselineFault", "exp_alerts": critical},
            {"eval_time": "0m", "alertname": "GpuhostBaselineDrift", "exp_alerts": []},
            {"eval_time": "9m", "alertname": "GpuhostBaselineDrift", "exp_alerts": []},
            {"eval_time": "10m", "alertname": "GpuhostBaselineFault", "exp_alerts": [fault(*f) for f in faults]},
            {"eval_time": "10m", "alertname": "GpuhostBaselineDrift",
             "exp_alerts": [drift(k, c) for k, c in sorted(subjects.items())]},
        ]}]}
    with open(str(tmp_path / "rules.yml"), "w") as handle:
        yaml.safe_dump(document, handle, sort_keys=False)
    with open(str(tmp_path / "test.yml"), "w") as handle:
        yaml.safe_dump(test, handle, sort_keys=False)
    rc, out = run([promtool, "test", "rules", "test.yml"], cwd=str(tmp_path))
    assert rc == 0 and "SUCCESS" in out, out


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
