"""The exit-code contract of playbooks/audit.yml and playbooks/remediate.yml (issue 10, item 7;
docs/report.md, "Exit codes and gpuhost_fail_on"): 0 clean or findings below gpuhost_fail_on,
2 findings at or above it or a host that failed, 4 a host that is unreachable, whatever else
happened; report.json is written every time, before anything fails.

``runner.rc`` is ansible-playbook's exit code (ansible-runner passes it through)."""
import os
import shutil

from ansible.module_utils.compat.version import LooseVersion
from ansible.release import __version__ as ANSIBLE_VERSION

from helpers.fixhost import copy_tree
from helpers.runner import run_playbook, stdout_of
from helpers.report_file import load_report

PYTHON = shutil.which("python3")
#: no sshd listens on the discard port: the connection is refused at once
GHOST = {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 9,
         "ansible_ssh_common_args": "-o ConnectTimeout=3 -o BatchMode=yes",
         "ansible_python_interpreter": "/usr/bin/python3"}
CLEAN, FINDINGS, FAILED_HOSTS, UNREACHABLE = 0, 2, 2, 4


def snapshot_host(root):
    return {"ansible_connection": "local", "ansible_python_interpreter": PYTHON, "gpuhost_root": str(root)}


def run(tmp_path, playbook, hosts, fail_on, cmdline=None, **extravars):
    """Run ``playbook`` on ``hosts`` ({name: hostvars}); return the runner and report.json."""
    reports = tmp_path / "reports"
    extravars.update(gpuhost_report_dir=str(reports), gpuhost_fail_on=fail_on)
    runner = run_playbook(tmp_path, playbook, {"all": {"hosts": hosts}}, cmdline=cmdline, extravars=extravars)
    path = reports / "report.json"
    assert path.exists(), "no report.json:\n" + stdout_of(runner)
    return runner, load_report(path)


def verdict_task_hosts(runner):
    """Hosts the baseline_verdict task ran for (ok or failed)."""
    return set(event["event_data"].get("host") for event in runner.events
               if event.get("event") in ("runner_on_ok", "runner_on_failed")
               and (event.get("event_data") or {}).get("task", "").startswith("Give the verdict"))


def states(report):
    return dict((name, host["state"]) for name, host in report["hosts"].items())


def failed_hosts(runner):
    """Hosts the PLAY RECAP counts as failed / unreachable."""
    stats = runner.stats or {}
    return (set(host for host, count in (stats.get("failures") or {}).items() if count),
            set(host for host, count in (stats.get("dark") or {}).items() if count))


# -- audit.yml ----------------------------------------------------------------------------


def test_audit_clean_exits_0(snapshot_trees, tmp_path):
    # the healthy twin has no failing finding at all: the strictest threshold still gives 0
    runner, report = run(tmp_path, "audit.yml", {"demo-healthy": snapshot_host(snapshot_trees["healthy"])},
                         "low", cmdline="--check")
    assert runner.rc == CLEAN, stdout_of(runner)
    assert states(report) == {"demo-healthy": "audited"}
    assert report["totals"]["fail"] == 0


def test_audit_findings_at_or_above_fail_on_exit_2_and_fail_only_the_drifted_host(snapshot_trees, tmp_path):
    hosts = {"demo-incident": snapshot_host(snapshot_trees["incident"]),
             "demo-healthy": snapshot_host(snapshot_trees["healthy"])}
    runner, report = run(tmp_path, "audit.yml", hosts, "high", cmdline="--check")
    out = stdout_of(runner)
    assert runner.rc == FINDINGS, out
    assert states(report) == {"demo-incident": "audited", "demo-healthy": "audited"}
    assert report["totals"]["fail_by_severity"]["high"] > 0
    assert failed_hosts(runner) == ({"demo-incident"}, set())
    assert "demo-incident: " in out and "failing finding(s) at or above severity high" in out
    assert "KERNEL-001 (high)" in out and "more. Reports were written to %s" % (tmp_path / "reports") in out
    # the passing host ends the role before the verdict task on ansible-core 2.18 and later (meta end_role): no
    # worker forked for it; before 2.18 the task runs for it and passes it
    if LooseVersion(ANSIBLE_VERSION) >= LooseVersion("2.18"):
        assert verdict_task_hosts(runner) == {"demo-incident"}
    else:
        assert verdict_task_hosts(runner) == {"demo-incident", "demo-healthy"}


def test_audit_findings_below_fail_on_exit_0(snapshot_trees, tmp_path):
    # the incident's critical findings (LXC-001, and HEALTH-001 graded critical by its Xid 48) waived:
    # high ones are left, below the threshold
    waivers = [{"rule": "LXC-001", "reason": "container limits reviewed", "expires": "2099-01-01"},
               {"rule": "HEALTH-001", "reason": "GPU reset scheduled", "expires": "2099-01-01"}]
    runner, report = run(tmp_path, "audit.yml", {"demo-incident": snapshot_host(snapshot_trees["incident"])},
                         "critical", cmdline="--check", gpuhost_waivers=waivers)
    assert runner.rc == CLEAN, stdout_of(runner)
    assert states(report) == {"demo-incident": "audited"}
    totals = report["totals"]
    assert totals["fail_by_severity"]["critical"] == 0 and totals["fail_by_severity"]["high"] > 0
    assert totals["waived"] > 0


def test_audit_unreachable_host_exits_4(snapshot_trees, tmp_path):
    hosts = {"demo-healthy": snapshot_host(snapshot_trees["healthy"]), "ghost": GHOST}
    runner, report = run(tmp_path, "audit.yml", hosts, "critical", cmdline="--check")
    assert runner.rc == UNREACHABLE, stdout_of(runner)
    assert states(report) == {"demo-healthy": "audited", "ghost": "unreachable"}
    assert report["totals"]["unreachable"] == 1 and report["hosts"]["ghost"]["message"]
    assert failed_hosts(runner) == (set(), {"ghost"})


def test_audit_failed_host_exits_2(snapshot_trees, tmp_path):
    # facts cannot be gathered from a snapshot root that does not exist; fail_on none: the host alone fails the run
    hosts = {"demo-healthy": snapshot_host(snapshot_trees["healthy"]),
             "demo-gone": snapshot_host(tmp_path / "no-such-snapshot")}
    runner, report = run(tmp_path, "audit.yml", hosts, "none", cmdline="--check")
    out = stdout_of(runner)
    assert runner.rc == FAILED_HOSTS, out
    assert states(report) == {"demo-healthy": "audited", "demo-gone": "failed"}
    assert "not a directory" in report["hosts"]["demo-gone"]["message"]
    assert failed_hosts(runner) == ({"demo-gone"}, set())
    assert "demo-gone could not be audited" in out


def test_audit_unreachable_wins_over_failed_hosts_and_findings(snapshot_trees, tmp_path):
    hosts = {"demo-incident": snapshot_host(snapshot_trees["incident"]),
             "demo-gone": snapshot_host(tmp_path / "no-such-snapshot"), "ghost": GHOST}
    runner, report = run(tmp_path, "audit.yml", hosts, "high", cmdline="--check")
    assert runner.rc == UNREACHABLE, stdout_of(runner)
    assert states(report) == {"demo-incident": "audited", "demo-gone": "failed", "ghost": "unreachable"}
    assert failed_hosts(runner) == ({"demo-incident", "demo-gone"}, {"ghost"})


# -- remediate.yml (on writable copies) ---------------------------------------------------


def test_remediate_clean_exits_0(snapshot_trees, tmp_path):
    root = copy_tree(snapshot_trees["healthy"], tmp_path / "healthy")
    runner, report = run(tmp_path, "remediate.yml", {"gpu-healthy": snapshot_host(root)}, "low")
    assert runner.rc == CLEAN, stdout_of(runner)
    assert states(report) == {"gpu-healthy": "audited"}
    assert report["totals"]["fail"] == 0


def test_remediate_findings_left_at_or_above_fail_on_exit_2(snapshot_trees, tmp_path):
    # the fixes run; what waits for a reboot (amd_pstate, IOMMU passthrough, the kernel: high) still fails
    root = copy_tree(snapshot_trees["incident"], tmp_path / "incident")
    runner, report = run(tmp_path, "remediate.yml", {"gpu-incident": snapshot_host(root)}, "high")
    out = stdout_of(runner)
    assert runner.rc == FINDINGS, out
    host = report["hosts"]["gpu-incident"]
    assert host["state"] == "audited" and host["before"]["summary"]["fail"] > host["summary"]["fail"] > 0
    assert "gpu-incident: " in out and "failing finding(s) at or above severity high" in out
    assert failed_hosts(runner) == ({"gpu-incident"}, set())


def test_remediate_unreachable_host_exits_4(snapshot_trees, tmp_path):
    root = copy_tree(snapshot_trees["healthy"], tmp_path / "healthy")
    runner, report = run(tmp_path, "remediate.yml", {"gpu-healthy": snapshot_host(root), "ghost": GHOST}, "critical")
    assert runner.rc == UNREACHABLE, stdout_of(runner)
    assert states(report) == {"gpu-healthy": "audited", "ghost": "unreachable"}
    assert failed_hosts(runner) == (set(), {"ghost"})


def test_remediate_failed_fix_exits_2(snapshot_trees, tmp_path):
    broken = copy_tree(snapshot_trees["incident"], tmp_path / "broken")
    sysctl_d = os.path.join(broken, "etc", "sysctl.d")
    shutil.rmtree(sysctl_d, ignore_errors=True)
    with open(sysctl_d, "w") as handle:  # a file where the sysctl.d directory belongs: the sysctl fix fails
        handle.write("not a directory\n")
    healthy = copy_tree(snapshot_trees["healthy"], tmp_path / "healthy")
    hosts = {"gpu-broken": snapshot_host(broken), "gpu-healthy": snapshot_host(healthy)}
    runner, report = run(tmp_path, "remediate.yml", hosts, "none")
    out = stdout_of(runner)
    assert runner.rc == FAILED_HOSTS, out
    assert states(report) == {"gpu-broken": "failed", "gpu-healthy": "audited"}
    assert "failed" in report["hosts"]["gpu-broken"]["message"]
    assert "remediation of gpu-broken did not complete" in out
    assert failed_hosts(runner) == ({"gpu-broken"}, set())


def test_a_report_that_cannot_be_written_fails_the_run(snapshot_trees, tmp_path):
    # the report task is not failed by findings (verdict.yml fails the hosts), but still by an error
    blocker = tmp_path / "reports"
    blocker.write_text("a file where the report directory belongs\n")
    runner = run_playbook(tmp_path, "audit.yml", {"all": {"hosts": {"demo-healthy": snapshot_host(snapshot_trees["healthy"])}}},
                          cmdline="--check", extravars={"gpuhost_report_dir": str(blocker), "gpuhost_fail_on": "low"})
    out = stdout_of(runner)
    assert runner.rc == FAILED_HOSTS, out
    assert "cannot write the reports into %s: it is not a directory" % blocker in out
