"""playbooks/audit.yml end to end through ansible-runner: the demo fleet, an unreachable host,
check mode, fail_on, and bad input rejected before any host is contacted (issue 3)."""
import json
import re
import shutil

import pytest

from helpers.runner import run_playbook, stdout_of
from helpers.report_file import load_report

INCIDENT_FINDINGS = {
    # the incident's own misconfigurations, each by its rule
    "CPU-001": "acpi-cpufreq instead of amd_pstate",
    "KERNEL-001": "kernel 6.8.12 too old for Zen 5",
    "NUMA-001": "kernel.numa_balancing=1",
    "CPU-006": "deep C-states enabled",
    "PCI-001": "MaxReadReq 512 instead of 4096",
    "NUMA-003": "node 0 with 0.9% free memory",
}


def fleet(snapshot_trees, extra_hosts=None, live=True):
    python = shutil.which("python3")
    hosts = dict(("demo-%s" % name, {"gpuhost_root": path}) for name, path in snapshot_trees.items())
    inventory = {"all": {"children": {
        "snapshots": {"vars": {"ansible_connection": "local", "ansible_python_interpreter": python},
                      "hosts": hosts},
    }}}
    if live:
        inventory["all"]["children"]["live"] = {"hosts": {"localhost": {
            "ansible_connection": "local", "ansible_python_interpreter": python, "gpuhost_become": False}}}
    if extra_hosts:
        inventory["all"]["children"]["other"] = {"hosts": extra_hosts}
    return inventory


def host_events(runner, action):
    """Per-host results (not start events) of tasks running ``action``."""
    return [e for e in runner.events if e.get("event") in ("runner_on_ok", "runner_on_failed", "runner_on_unreachable")
            and e["event_data"].get("task_action") == action]


@pytest.fixture(scope="module")
def audited(snapshot_trees, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("audit")
    unreachable = {"ghost": {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 9,
                             "ansible_ssh_common_args": "-o ConnectTimeout=3 -o BatchMode=yes",
                             "ansible_python_interpreter": "/usr/bin/python3"}}
    runner = run_playbook(tmp, "audit.yml", fleet(snapshot_trees, unreachable),
                          extravars={"gpuhost_report_dir": str(tmp / "reports")}, cmdline="--check")
    return runner, load_report(tmp / "reports" / "report.json"), tmp


def statuses(host, rule):
    return [f["status"] for f in host["findings"] if f["id"] == rule]


def test_check_run_succeeds_and_changes_nothing(audited):
    runner, report, unused_tmp = audited
    # 4: the fleet holds an unreachable host (the exit-code contract, docs/report.md); the
    # others were audited and nothing changed
    assert runner.rc == 4, stdout_of(runner)
    # every host ran tasks, none reported a change (ansible-runner lists only hosts with changes > 0)
    assert set(runner.stats["ok"]) >= {"demo-incident", "demo-healthy", "demo-intel", "demo-hostile", "localhost"}
    assert sum(runner.stats["changed"].values()) == 0, runner.stats["changed"]
    # one task per host gathers (one host_facts module run) and judges
    evaluated = host_events(runner, "gpuhost.baseline.baseline_evaluate")
    assert len(evaluated) == 6
    # the registered results keep the findings once (host_report), not also in full with their rule text
    audited_results = [e["event_data"]["res"] for e in evaluated
                       if e["event_data"]["res"].get("host_report", {}).get("state") == "audited"]
    assert len(audited_results) == 5
    # (the host_report's findings as one JSON text: the controller holds one string per host)
    assert all("findings" not in res and "findings" not in res["host_report"]
               and json.loads(res["host_report"]["findings_json"]) for res in audited_results)


def test_incident_shows_every_finding_of_the_incident(audited):
    unused_runner, report, unused_tmp = audited
    incident = report["hosts"]["demo-incident"]
    assert incident["state"] == "audited" and incident["profile"] == "amd-epyc-nvidia"
    for rule, what in INCIDENT_FINDINGS.items():
        assert "fail" in statuses(incident, rule), what
    mrrs = [f for f in incident["findings"] if f["id"] == "PCI-001"]
    assert len(mrrs) == 8 and all(f["observed"] == 512 and f["expected"] == 4096 for f in mrrs)
    assert len(set(f["subject"] for f in mrrs)) == 8
    node0 = [f for f in incident["findings"] if f["id"] == "NUMA-003" and f["status"] == "fail"]
    assert any("0.9" in f["message"] for f in node0)
    for finding in incident["findings"]:
        if finding["status"] == "fail":
            assert finding["fix"] and finding["message"], finding["id"]


def test_healthy_twin_passes_and_others_degrade_cleanly(audited):
    unused_runner, report, unused_tmp = audited
    healthy = report["hosts"]["demo-healthy"]
    assert healthy["summary"]["fail"] == 0, [f["message"] for f in healthy["findings"] if f["status"] == "fail"]
    intel = report["hosts"]["demo-intel"]
    # no NVIDIA GPU on its bus: judged as a CPU node, without the GPU-motivated rules (issue 37 item 1)
    assert intel["profile"] == "cpu-node"
    assert statuses(intel, "CPU-001") + statuses(intel, "IOMMU-002") + statuses(intel, "PCI-002") == []
    assert [f["id"] for f in intel["findings"] if f["status"] == "fail"] == ["KERNEL-005", "KERNEL-007"]
    hostile = report["hosts"]["demo-hostile"]
    assert hostile["state"] == "audited" and hostile["summary"]["unknown"] > 0
    assert report["hosts"]["localhost"]["state"] == "audited"


def test_unreachable_host_is_reported_and_others_still_written(audited):
    unused_runner, report, unused_tmp = audited
    ghost = report["hosts"]["ghost"]
    assert ghost["state"] == "unreachable" and ghost["message"]
    assert set(report["hosts"]) == {"demo-incident", "demo-healthy", "demo-intel", "demo-hostile", "localhost",
                                    "ghost"}


def test_reports_are_all_written(audited):
    unused_runner, unused_report, tmp = audited
    for name in ("report.json", "report.md", "report.html", "junit.xml", "metrics.prom"):
        assert (tmp / "reports" / name).stat().st_size > 0, name


def test_without_check_gives_the_same_findings(snapshot_trees, tmp_path, audited):
    unused_runner, checked, unused_tmp = audited
    inventory = fleet(dict((k, v) for k, v in snapshot_trees.items() if k == "incident"))
    runner = run_playbook(tmp_path, "audit.yml", inventory, extravars={"gpuhost_report_dir": str(tmp_path / "r")})
    assert runner.rc == 0, stdout_of(runner)
    report = load_report(tmp_path / "r" / "report.json")
    assert report["hosts"]["demo-incident"]["findings"] == checked["hosts"]["demo-incident"]["findings"]
    assert "demo-incident" in runner.stats["ok"] and sum(runner.stats["changed"].values()) == 0


def test_kernel_log_boots_travels_from_the_role_to_the_facts(snapshot_trees, tmp_path):
    """gpuhost_kernel_log_boots 2 reaches host_facts through baseline_evaluate: the demo snapshots were
    captured with one boot, so HEALTH-016 is unknown and names the capture it misses (issue 21)."""
    inventory = fleet({"incident": snapshot_trees["incident"]}, live=False)
    runner = run_playbook(tmp_path, "audit.yml", inventory, cmdline="--check",
                          extravars={"gpuhost_report_dir": str(tmp_path / "r"), "gpuhost_kernel_log_boots": 2})
    assert runner.rc == 0, stdout_of(runner)
    host = load_report(tmp_path / "r" / "report.json")["hosts"]["demo-incident"]
    (finding,) = [f for f in host["findings"] if f["id"] == "HEALTH-016"]
    assert finding["status"] == "unknown" and "journalctl-list-boots.txt not captured" in finding["message"]


def test_fail_on_severity_fails_the_run_after_writing(snapshot_trees, tmp_path):
    inventory = fleet(dict((k, v) for k, v in snapshot_trees.items() if k in ("incident", "healthy")))
    runner = run_playbook(tmp_path, "audit.yml", inventory, cmdline="--check",
                          extravars={"gpuhost_report_dir": str(tmp_path / "r"), "gpuhost_fail_on": "critical"})
    assert runner.rc != 0
    assert (tmp_path / "r" / "report.json").exists()
    runner = run_playbook(tmp_path, "audit.yml", fleet({"healthy": snapshot_trees["healthy"]}, live=False),
                          cmdline="--check",
                          extravars={"gpuhost_report_dir": str(tmp_path / "r2"), "gpuhost_fail_on": "low"})
    assert runner.rc == 0, stdout_of(runner)


def test_waivers_keep_findings_visible_and_expire(snapshot_trees, tmp_path):
    inventory = fleet({"incident": snapshot_trees["incident"]})
    waivers = [{"rule": "NUMA-001", "reason": "vendor ticket 42", "expires": "2099-01-01"},
               {"rule": "KERNEL-001", "reason": "waiting for 6.14 rollout", "expires": "2020-01-01"}]
    runner = run_playbook(tmp_path, "audit.yml", inventory, cmdline="--check",
                          extravars={"gpuhost_report_dir": str(tmp_path / "r"), "gpuhost_waivers": waivers})
    assert runner.rc == 0, stdout_of(runner)
    host = load_report(tmp_path / "r" / "report.json")["hosts"]["demo-incident"]
    assert statuses(host, "NUMA-001") == ["waived"]
    expired = [f for f in host["findings"] if f["id"] == "KERNEL-001"]
    assert expired[0]["status"] == "fail" and "expired" in expired[0]["message"]


@pytest.mark.parametrize("extravars, expected", [
    ({"gpuhost_waivers": [{"rule": "NOPE-999", "reason": "x", "expires": "2099-01-01"}]}, "NOPE-999"),
    ({"gpuhost_waivers": [{"rule": "NUMA-001", "reason": "x", "expires": "someday"}]}, "someday"),
    ({"gpuhost_profile": "no-such-profile"}, "no-such-profile"),
    ({"gpuhost_kernel_log_boots": 3}, "gpuhost_kernel_log_boots"),
])
def test_bad_input_is_rejected_before_any_host_is_contacted(snapshot_trees, tmp_path, extravars, expected):
    extravars = dict(extravars, gpuhost_report_dir=str(tmp_path / "r"))
    runner = run_playbook(tmp_path, "audit.yml", fleet(snapshot_trees), cmdline="--check", extravars=extravars)
    out = stdout_of(runner)
    assert runner.rc != 0
    assert expected in out
    assert [e for e in runner.events if e.get("event") == "runner_on_start"
            and e["event_data"].get("task_action") == "gpuhost.baseline.baseline_evaluate"] == []
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("playbook, role", [("audit.yml", "audit"), ("remediate.yml", "remediate"),
                                            ("validate.yml", "validate")])
def test_a_wrong_role_variable_is_named_for_its_hosts_before_any_host_is_contacted(snapshot_trees, tmp_path,
                                                                                   playbook, role):
    # the playbooks run their role with rolespec_validate=false: the first play checks the role's argument
    # spec for the whole fleet at once, and a group variable wrong on many hosts is one problem
    inventory = fleet(snapshot_trees, live=False)
    inventory["all"]["children"]["snapshots"]["vars"]["gpuhost_fail_on"] = "hihg"
    runner = run_playbook(tmp_path, playbook, inventory, cmdline="--check",
                          extravars={"gpuhost_report_dir": str(tmp_path / "r")})
    out = " ".join(stdout_of(runner).split())
    assert runner.rc != 0, out
    named = re.search(r"invalid variable\(s\) for role gpuhost\.baseline\.%s on host\(s\) ([^:]*): value of "
                      r"gpuhost_fail_on must be one of: [a-z, ]*, got: hihg" % role, out)
    assert named, out
    assert sorted(named.group(1).split(", ")) == ["demo-healthy", "demo-hostile", "demo-incident", "demo-intel"]
    assert [e for e in runner.events if e.get("event") == "runner_on_start"
            and e["event_data"].get("task_action") == "gpuhost.baseline.baseline_evaluate"] == []
    assert not (tmp_path / "r").exists()


def test_one_hosts_bad_waiver_is_named_and_stops_the_fleet(snapshot_trees, tmp_path):
    inventory = fleet(snapshot_trees, live=False)
    hosts = inventory["all"]["children"]["snapshots"]["hosts"]
    hosts["demo-intel"]["gpuhost_waivers"] = [{"rule": "CPU-003", "reason": "x", "expires": "2099-13-45"}]
    runner = run_playbook(tmp_path, "audit.yml", inventory, cmdline="--check",
                          extravars={"gpuhost_report_dir": str(tmp_path / "r")})
    out = stdout_of(runner)
    assert runner.rc != 0 and "host demo-intel" in out and "2099-13-45" in out
    assert not (tmp_path / "r").exists()


def test_waiver_files_waive_and_a_malformed_one_is_named_before_any_host(snapshot_trees, tmp_path):
    good = tmp_path / "waivers.yml"
    good.write_text("# yaml-language-server: $schema=../schemas/waivers.schema.json\n"
                    "- rule: NUMA-001\n  hosts: [demo-incident]\n  reason: model load test until Friday\n"
                    "  expires: 2099-01-01\n")
    inventory = fleet(dict(incident=snapshot_trees["incident"]), live=False)
    runner = run_playbook(tmp_path, "audit.yml", inventory, cmdline="--check",
                          extravars={"gpuhost_report_dir": str(tmp_path / "r"), "gpuhost_waiver_files": [str(good)]})
    assert runner.rc == 0, stdout_of(runner)
    host = load_report(tmp_path / "r" / "report.json")["hosts"]["demo-incident"]
    assert statuses(host, "NUMA-001") == ["waived"]

    bad = tmp_path / "bad-waivers.yml"
    bad.write_text("- rule: NUMA-001\n  reason: fine\n  expires: 2099-01-01\n"
                   "- rule: PCI-001\n  reason: fine\n  expires: next week\n")
    runner = run_playbook(tmp_path, "audit.yml", inventory, cmdline="--check",
                          extravars={"gpuhost_report_dir": str(tmp_path / "r2"), "gpuhost_waiver_files": [str(bad)]})
    out = stdout_of(runner)
    assert runner.rc != 0
    assert "%s: waiver #2 (rule PCI-001): expires must be a date YYYY-MM-DD, got 'next week'" % bad in out
    assert not (tmp_path / "r2").exists()


def test_self_audit_judges_every_demo_snapshot_as_the_audit_did(audited, snapshot_trees, tmp_path):
    """One judge (issue 19): the self-audit bundle, run with the standard library only on the same
    snapshots, gives each host the audit playbook's state, profile and findings, field by field."""
    from helpers.one_judge import differences, self_audit_hosts  # pylint: disable=import-outside-toplevel

    unused_runner, report, unused_tmp = audited
    roots = dict(("demo-%s" % name, path) for name, path in snapshot_trees.items())
    mine = self_audit_hosts(tmp_path, roots)
    assert sorted(mine) == sorted(roots) and all(mine[h]["findings"] for h in mine)
    assert differences(report["hosts"], mine) == []
