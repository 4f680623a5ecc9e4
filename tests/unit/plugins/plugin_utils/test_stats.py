# -*- coding: utf-8 -*-
"""The totals for callers (custom stats ``gpuhost_baseline``) as a pure function of report.json."""

import copy
import json
import os

import pytest

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import findings
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import build_report
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.stats import (
    SEVERITIES, STATUSES, StatsError, caller_stats)

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "..", "..", "fixtures", "report", "hosts.json")
GENERATED = "2025-06-01T12:00:00+00:00"
HOST_KEYS = {"state", "message", "profile", "fail_by_severity", "reboot_required", "facts_errors", "pending"} | set(STATUSES)


def finding(rule, status, severity="high", subject=None, reboot=False):
    return {"id": rule, "title": rule, "area": rule.split("-")[0].lower(), "severity": severity, "status": status,
            "subject": subject, "expected": 1, "observed": 0, "message": "m", "fix": "f", "reboot_required": reboot}


def fleet_hosts():
    return {
        "gpu01": {"profile": "amd-epyc-nvidia", "facts_errors": ["a", "b"],
                  "findings": [finding("PCI-001", "fail", "high", "0000:41:00.0"),
                               finding("PCI-001", "fail", "high", "0000:42:00.0"),
                               finding("KRN-001", "fail", "critical", reboot=True),
                               finding("CPU-001", "fail", "medium"),
                               finding("NUMA-001", "pass"), finding("NUMA-002", "unknown"),
                               finding("GPU-001", "waived"), finding("LXC-001", "not_applicable")]},
        "gpu02": {"state": "unreachable", "message": "Failed to connect to the host via ssh", "profile": "auto"},
        "gpu03": {"state": "failed", "message": "facts failed", "profile": "amd-epyc-nvidia"},
        "gpu04": {"profile": "amd-epyc-nvidia",
                  "findings": [finding("NUMA-001", "pass"), finding("INFO-001", "fail", "info")],
                  "pending": [{"id": "KRN-003", "message": "kernel installed, not booted"}]},
    }


@pytest.fixture()
def report():
    return build_report(fleet_hosts(), profile="auto", generated=GENERATED, collection_version="0.1.0")


def without_extras(fleet):
    return dict((k, v) for k, v in fleet.items() if k not in ("facts_errors", "names"))


def test_fleet_equals_the_reports_totals(report):
    stats = caller_stats(report)
    assert without_extras(stats["fleet"]) == report["totals"]
    assert stats["fleet"]["facts_errors"] == 2
    assert stats["fleet"]["names"] == {"unreachable": ["gpu02"], "failed": ["gpu03"], "failing": ["gpu01", "gpu04"]}
    assert stats["schema"] == 1
    assert (stats["generated"], stats["profile"], stats["collection_version"]) == (GENERATED, "mixed", "0.1.0")


def test_per_host_counts(report):
    hosts = caller_stats(report)["hosts"]
    assert list(hosts) == ["gpu01", "gpu02", "gpu03", "gpu04"]
    for name, host in hosts.items():
        assert set(host) == HOST_KEYS, name
        assert dict((s, host[s]) for s in STATUSES) == report["hosts"][name]["summary"]
    gpu01 = hosts["gpu01"]
    assert gpu01["fail_by_severity"] == {"critical": 1, "high": 2, "medium": 1, "low": 0, "info": 0}
    assert (gpu01["state"], gpu01["reboot_required"], gpu01["facts_errors"], gpu01["pending"]) == ("audited", True, 2, 0)
    assert hosts["gpu02"] == {"state": "unreachable", "message": "Failed to connect to the host via ssh",
                              "profile": "auto", "pass": 0, "fail": 0, "unknown": 0, "waived": 0,
                              "not_applicable": 0, "fail_by_severity": dict((s, 0) for s in SEVERITIES),
                              "reboot_required": False, "facts_errors": 0, "pending": 0}
    assert hosts["gpu04"]["fail_by_severity"]["info"] == 1
    assert hosts["gpu04"]["pending"] == 1
    # the hosts' severities add up to the fleet's
    fleet = caller_stats(report)["fleet"]["fail_by_severity"]
    for severity in SEVERITIES:
        assert sum(h["fail_by_severity"][severity] for h in hosts.values()) == fleet[severity]


def test_same_from_the_stored_document_and_json_safe(report):
    stored = json.loads(json.dumps(report))
    paths = {"json": "/r/report.json", "prom": "/r/metrics.prom"}
    stats = caller_stats(stored, paths=paths, report_dir="/r")
    assert stats == caller_stats(report, paths=paths, report_dir="/r")
    assert json.loads(json.dumps(stats)) == stats
    assert stats["reports"] == {"dir": "/r", "json": "/r/report.json", "prom": "/r/metrics.prom"}
    assert caller_stats(report)["reports"] == {}


def test_input_is_not_modified(report):
    before = copy.deepcopy(report)
    caller_stats(report, paths={"json": "x"})
    assert report == before


def test_bundled_fixture_fleet_matches_totals():
    with open(FIXTURE) as handle:
        hosts = json.load(handle)["hosts"]
    report = build_report(hosts, profile="auto", generated=GENERATED)
    stats = caller_stats(report)
    assert without_extras(stats["fleet"]) == report["totals"]
    assert set(stats["hosts"]) == set(report["hosts"])


def test_unknown_severity_is_counted_apart_like_the_report():
    report = build_report({"h": {"findings": [dict(finding("X-001", "fail"), severity=None)]}})
    stats = caller_stats(report)
    assert stats["hosts"]["h"]["fail_by_severity"]["unknown"] == 1
    assert without_extras(stats["fleet"]) == report["totals"]


def test_empty_report():
    report = build_report({})
    stats = caller_stats(report)
    assert stats["hosts"] == {}
    assert without_extras(stats["fleet"]) == report["totals"]
    assert stats["fleet"]["hosts"] == 0
    assert caller_stats({})["fleet"]["hosts"] == 0


@pytest.mark.parametrize("document, words", [
    (["not", "a", "report"], "expected a report.json document (a mapping), got list"),
    ({"hosts": ["gpu01"]}, "hosts must be a mapping of host name to host, got list"),
    ({"hosts": {"gpu01": "audited"}}, "host gpu01: expected a mapping, got str"),
    ({"hosts": {"gpu01": {"findings": "none"}}}, "host gpu01: findings must be a list, got str"),
    ({"hosts": {"gpu01": {"findings": [1]}}}, "host gpu01: finding 0 is not a mapping"),
    ({"hosts": {"gpu01": {"findings": [{"id": "PCI-001", "status": "broken"}]}}},
     "host gpu01: finding PCI-001 has status 'broken', not one of pass, fail, unknown, waived, not_applicable"),
])
def test_bad_input_is_named(document, words):
    with pytest.raises(StatsError) as exc:
        caller_stats(document)
    assert words in str(exc.value)


def test_statuses_and_states_are_the_finding_contract():
    # stats.py counts with the contract's statuses and severities (findings.py), no copies
    assert STATUSES is findings.STATUSES
    assert SEVERITIES is findings.SEVERITIES
