# -*- coding: utf-8 -*-
"""What gpuhost_on_fail drains on (issue 38 item 4): the audited hosts' failing findings of the chosen
severities and kinds (default: critical faults), never an unknown, waived or passing finding, never a host
that was not audited; the on_fail role's defaults are the report action's."""

import os

import yaml

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import (
    ARGUMENT_SPEC, build_report, failing_to_drain)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def finding(rule, status="fail", severity="critical", area=None, subject=None):
    return {"id": rule, "status": status, "severity": severity, "subject": subject,
            "area": area or {"HEALTH": "health", "CPU": "cpu", "PCI": "pcie"}[rule.split("-")[0]]}


def drained(doc, severities=("critical",), kinds=("fault",)):
    return sorted((host, f["id"]) for host, f in failing_to_drain(doc, severities, kinds))


def test_critical_faults_by_default_and_nothing_else():
    doc = build_report({
        "xid": {"findings": [finding("HEALTH-001", subject="0000:47:00.0"), finding("CPU-001", severity="high")]},
        "drift": {"findings": [finding("CPU-001"), finding("PCI-001", severity="high")]},
        "medium-fault": {"findings": [finding("HEALTH-003", severity="medium")]},
        "unknown": {"findings": [finding("HEALTH-001", status="unknown")]},
        "waived": {"findings": [finding("HEALTH-001", status="waived")]},
        "odd-severity": {"findings": [finding("HEALTH-002", severity="dire")]},  # counts as critical
        "gone": {"state": "unreachable", "findings": []},
        "broken": {"state": "failed", "message": "facts failed", "findings": [finding("HEALTH-001")]},
    })
    assert drained(doc) == [("odd-severity", "HEALTH-002"), ("xid", "HEALTH-001")]
    assert drained(doc, ("critical", "high"), ("drift", "fault")) == [
        ("drift", "CPU-001"), ("drift", "PCI-001"), ("odd-severity", "HEALTH-002"), ("xid", "CPU-001"),
        ("xid", "HEALTH-001")]
    assert drained(doc, ("medium",), ("fault",)) == [("medium-fault", "HEALTH-003")]
    assert drained(doc, (), ("drift", "fault")) == []


def test_the_on_fail_role_defaults_are_the_report_actions():
    with open(os.path.join(REPO, "roles", "on_fail", "defaults", "main.yml"), encoding="utf-8") as handle:
        defaults = yaml.safe_load(handle)
    with open(os.path.join(REPO, "roles", "on_fail", "meta", "argument_specs.yml"), encoding="utf-8") as handle:
        options = yaml.safe_load(handle)["argument_specs"]["main"]["options"]
    for var, option in (("gpuhost_drain_severities", "drain_severities"), ("gpuhost_drain_kinds", "drain_kinds")):
        assert defaults[var] == options[var]["default"] == ARGUMENT_SPEC[option]["default"], var
        assert options[var]["choices"] == ARGUMENT_SPEC[option]["choices"], var
