"""playbooks/remediate.yml end to end on writable copies of the incident snapshot (issue 4):
check mode changes nothing, fix mode repairs every fixable rule, a second run changes nothing,
the rest is reported pending or manual with the reason, and busy GPUs stop the host."""
import os
import re
import shutil

import pytest

from helpers.fixhost import copy_tree, tree_state
from helpers.runner import run_playbook, stdout_of
from helpers.report_file import load_report
from helpers.incident import incident_inventory

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.pci import parse_config

FIXED_BY_REMEDIATE = ["NUMA-001", "KERNEL-005", "PCI-001", "PCI-002", "CPU-003", "CPU-006", "NVIDIA-004", "NVIDIA-007"]
PENDING_REBOOT = ["CPU-001", "KERNEL-001", "KERNEL-002", "IOMMU-002"]
RULE_ID = re.compile(r"\b[A-Z]+-[0-9]{3}\b")


def inventory(root, **hostvars):
    return incident_inventory(root, **hostvars)


def read_report(directory):
    return load_report(directory)["hosts"]["gpu-incident"]


def statuses(findings, rule):
    return set(f["status"] for f in findings if f["id"] == rule)


@pytest.fixture(scope="module")
def remediated(remediated_incident):
    """check, apply and again on one incident copy (tests/integration/conftest.py: the session shares it
    with test_console_output.py)."""
    return remediated_incident


def test_check_diff_shows_changes_and_changes_nothing(remediated):
    check = remediated["check"]
    assert check.rc == 0, stdout_of(check)
    assert remediated["after_check"] == remediated["pristine"]
    out = stdout_of(check)
    assert "kernel.numa_balancing" in out and "amd_pstate=active" in out
    assert check.stats["changed"].get("gpu-incident", 0) > 0
    # issue 22: the summary and the reports say it was a preview ("fail 59 -> 59" alone did not)
    assert "remediation PREVIEW (--check: no fix was applied" in out
    assert load_report(remediated["tmp"] / "check")["preview"] is True
    with open(str(remediated["tmp"] / "check" / "report.md")) as handle:
        assert "Remediation preview (`--check`): no fix was applied." in handle.read()
    assert "preview" not in load_report(remediated["tmp"] / "apply")


def test_check_gathers_once_and_judges_the_kept_facts_again(remediated):
    """Issue 41 item 3: --check changes nothing, so the evaluation after its fix plan judges the facts the first
    gather kept in a file on the controller (none held in the play's memory); fix mode gathers again."""
    def sources(runner):
        return [(e["event_data"]["res"].get("facts_source"), "facts_file" in e["event_data"]["res"])
                for e in runner.events if e.get("event") == "runner_on_ok"
                and e["event_data"].get("task_action") == "gpuhost.baseline.baseline_evaluate"
                and e["event_data"].get("host") == "gpu-incident"]
    assert sources(remediated["check"]) == [("gathered", True), ("kept", False)]
    assert sources(remediated["apply"]) == [("gathered", False), ("gathered", False)]


def test_fix_mode_repairs_every_fixable_rule(remediated):
    apply = remediated["apply"]
    assert apply.rc == 0, stdout_of(apply)
    host = read_report(remediated["tmp"] / "apply")
    for rule in FIXED_BY_REMEDIATE:
        assert "fail" in statuses(host["before"]["findings"], rule), rule
        assert statuses(host["findings"], rule) == {"pass"}, rule
    for rule in PENDING_REBOOT:
        failing = [f for f in host["findings"] if f["id"] == rule and f["status"] == "fail"]
        assert failing and all(f["pending"] for f in failing), rule
    kinds = dict(((p["id"], p.get("subject")), p["kind"]) for p in host["pending"])
    assert all(kinds[(rule, None)] == "reboot" for rule in PENDING_REBOOT)
    assert set(k for k in kinds.values()) <= {"reboot", "opt-in", "manual"}  # nothing fixable left over
    assert any(p["id"] == "PCI-006" and p["kind"] == "opt-in" for p in host["pending"])


def test_fix_mode_wrote_the_intended_state(remediated):
    root = remediated["root"]

    def read(path):
        with open(os.path.join(root, path.lstrip("/")), "rb") as handle:
            return handle.read()

    assert read("/proc/sys/kernel/numa_balancing").strip() == b"0"
    assert b"kernel.numa_balancing = 0" in read("/etc/sysctl.d/90-gpuhost-baseline.conf")
    cmdline = read("/etc/kernel/cmdline").decode()
    assert "amd_pstate=active" in cmdline and "iommu=pt" in cmdline and "root=ZFS=rpool/ROOT/pve-1" in cmdline
    assert os.path.exists(os.path.join(root, "etc/systemd/system/gpuhost-pcie.service"))
    assert os.path.islink(os.path.join(root, "etc/systemd/system/multi-user.target.wants/gpuhost-pcie.service"))
    gpu = parse_config(read("/sys/bus/pci/devices/0000:43:00.0/config"))
    assert gpu["pcie"]["max_read_request"] == 4096 and gpu["pcie"]["max_payload"] == 256
    backups = [name for name in os.listdir(os.path.join(root, "etc/kernel")) if name.startswith("cmdline.")]
    assert backups, "the edited /etc/kernel/cmdline has a backup"


def fix_tasks_that_ran(runner, host="gpu-incident"):
    """Rule ids in the names of the fix steps that ran on ``host`` (host_fix's ``ran``: ok, changed or failed;
    its ``selected`` when the connection was cut; not left out) and of the other fix tasks that ran (the kernel
    package), from the run's events."""
    ran = set()
    for event in runner.events:
        data = event.get("event_data") or {}
        if event.get("event") in ("runner_on_ok", "runner_on_failed", "runner_on_unreachable") and data.get("host") == host:
            result = data.get("res") or {}
            names = result.get("ran") or result.get("selected") if "selected" in result else [data.get("task") or ""]
            for name in names or []:
                head = name.split(" - ", 1)
                if len(head) == 2:
                    ran.update(RULE_ID.findall(head[0]))
    return ran


def test_no_pending_item_says_a_fix_ran_that_did_not(remediated):
    """Issue 19: "still failing after the <action> fix" only for a rule whose fix task ran; in check
    mode no fix ran, so every automatic fix still failing is "not-applied"."""
    for run in ("check", "apply", "again"):
        ran = set() if run == "check" else fix_tasks_that_ran(remediated[run])
        host = read_report(remediated["tmp"] / run)
        for item in host["pending"]:
            if item["kind"] == "not-fixed":
                assert item["id"] in ran, (run, item)
            assert ("still failing after the" in item["message"]) == (item["kind"] == "not-fixed"), (run, item)
    check = dict(((p["id"], p.get("subject")), p) for p in read_report(remediated["tmp"] / "check")["pending"])
    assert "not-fixed" not in set(p["kind"] for p in check.values())
    for rule in FIXED_BY_REMEDIATE:
        items = [p for (rid, unused_subject), p in check.items() if rid == rule]
        assert items and all(p["kind"] == "not-applied" for p in items), (rule, items)
        assert all("fix did not run in this remediation" in p["message"] for p in items), items


def test_second_run_changes_nothing(remediated):
    again = remediated["again"]
    assert again.rc == 0, stdout_of(again)
    assert again.stats["changed"].get("gpu-incident", 0) == 0
    assert again.stats["ok"]["gpu-incident"] > 0
    assert remediated["after_again"] == remediated["after_apply"]


def test_a_fix_left_out_by_skip_tags_is_not_said_to_have_run(snapshot_trees, tmp_path):
    root = copy_tree(snapshot_trees["incident"], tmp_path / "skip")
    runner = run_playbook(tmp_path, "remediate.yml", inventory(root), cmdline="--skip-tags NUMA-001,NUMA-006",
                          extravars={"gpuhost_report_dir": str(tmp_path / "r")})
    assert runner.rc == 0, stdout_of(runner)
    host = read_report(tmp_path / "r")
    pending = dict((p["id"], p) for p in host["pending"] if p.get("subject") is None)
    assert statuses(host["findings"], "NUMA-001") == {"fail"} and statuses(host["findings"], "KERNEL-005") == {"pass"}
    assert pending["NUMA-001"]["kind"] == "not-applied"
    assert pending["NUMA-001"]["message"].startswith("the automatic sysctl fix did not run in this remediation")
    assert "NUMA-001" not in fix_tasks_that_ran(runner)


def test_tags_apply_only_the_fixes_they_name(snapshot_trees, tmp_path):
    """``--tags numa`` (docs/remediation.md's example) applies the NUMA fixes and no other: the fix block's
    `always` tag was inherited by every task of fix.yml, so each fix ran under any --tags."""
    root = copy_tree(snapshot_trees["incident"], tmp_path / "tags")
    runner = run_playbook(tmp_path, "remediate.yml", inventory(root), cmdline="--tags numa",
                          extravars={"gpuhost_report_dir": str(tmp_path / "r")})
    assert runner.rc == 0, stdout_of(runner)
    ran = fix_tasks_that_ran(runner)
    assert "NUMA-001" in ran and ran <= {"NUMA-001", "NUMA-002", "NUMA-006", "NUMA-007"}, ran
    host = read_report(tmp_path / "r")
    assert statuses(host["findings"], "NUMA-001") == {"pass"}
    for rule in ("KERNEL-005", "PCI-001", "CPU-003", "NVIDIA-004"):
        assert statuses(host["findings"], rule) == {"fail"}, rule
        assert set(p["kind"] for p in host["pending"] if p["id"] == rule) == {"not-applied"}, rule


def _make_busy(root):
    """A compute process on the GPUs of the snapshot ``root``; returns nothing."""
    xml = os.path.join(root, "commands", "nvidia-smi-q.xml")
    with open(xml) as handle:
        text = handle.read()
    busy = ("<processes>\n<process_info><gpu_instance_id>N/A</gpu_instance_id><compute_instance_id>N/A"
            "</compute_instance_id><pid>4242</pid><type>C</type><process_name>python3</process_name>"
            "<used_memory>81000 MiB</used_memory></process_info>\n")
    with open(xml, "w") as handle:
        handle.write(text.replace("<processes>\n", busy, 1))


@pytest.fixture(scope="module")
def failed_then_rerun(snapshot_trees, tmp_path_factory):
    """A fix that fails on gpu-broken beside gpu-fine, then a rerun once the cause is gone; the
    rerun has gpu-busy too (GPUs running compute work): one run shows both that a busy host is
    stopped without failing the run and that the rerun completes."""
    tmp = tmp_path_factory.mktemp("remediate-failed")
    broken = copy_tree(snapshot_trees["incident"], tmp / "broken")
    fine = copy_tree(snapshot_trees["incident"], tmp / "fine")
    busy = copy_tree(snapshot_trees["incident"], tmp / "busy")
    _make_busy(busy)
    busy_before = tree_state(busy)
    sysctl_d = os.path.join(broken, "etc", "sysctl.d")
    shutil.rmtree(sysctl_d, ignore_errors=True)
    with open(sysctl_d, "w") as handle:  # a file where the sysctl.d directory belongs: the sysctl fix fails
        handle.write("not a directory\n")
    hosts = {"all": {"hosts": {
        "gpu-broken": inventory(broken)["all"]["hosts"]["gpu-incident"],
        "gpu-fine": inventory(fine)["all"]["hosts"]["gpu-incident"],
    }}}
    first = run_playbook(tmp, "remediate.yml", hosts, extravars={"gpuhost_report_dir": str(tmp / "r1")})
    os.remove(sysctl_d)
    os.mkdir(sysctl_d)
    hosts["all"]["hosts"]["gpu-busy"] = inventory(busy)["all"]["hosts"]["gpu-incident"]
    rerun = run_playbook(tmp, "remediate.yml", hosts, extravars={"gpuhost_report_dir": str(tmp / "r2")})
    yield {"tmp": tmp, "first": first, "rerun": rerun, "busy": busy, "busy_before": busy_before,
           "busy_after": tree_state(busy)}
    shutil.rmtree(str(tmp), ignore_errors=True)


def test_busy_gpus_stop_the_host_unless_forced(failed_then_rerun):
    runner = failed_then_rerun["rerun"]
    assert runner.rc == 0, stdout_of(runner)
    assert "GPUs are running compute work" in stdout_of(runner) and "pid 4242" in stdout_of(runner)
    assert failed_then_rerun["busy_after"] == failed_then_rerun["busy_before"]
    host = load_report(failed_then_rerun["tmp"] / "r2")["hosts"]["gpu-busy"]
    assert "skipped" in host["message"]


def test_failed_fix_reports_the_host_failed_and_a_rerun_completes(failed_then_rerun):
    """A fix that fails keeps the host in the play: it is audited again, reported failed with the
    task and its error, the other host is fixed, the run fails; once the cause is gone a rerun completes."""
    tmp_path = failed_then_rerun["tmp"]
    first = failed_then_rerun["first"]
    out = stdout_of(first)
    assert first.rc != 0, out
    assert "remediation of gpu-broken did not complete" in out
    report = load_report(tmp_path / "r1")["hosts"]
    broken_host, fine_host = report["gpu-broken"], report["gpu-fine"]
    assert broken_host["state"] == "failed"
    assert "NUMA-001 NUMA-006" in broken_host["message"] and "failed" in broken_host["message"]
    # re-audited after the failure: findings and the before view are there, NUMA-001 still failing
    assert statuses(broken_host["findings"], "NUMA-001") == {"fail"}
    assert statuses(broken_host["before"]["findings"], "NUMA-001") == {"fail"}
    assert fine_host["state"] == "audited" and statuses(fine_host["findings"], "NUMA-001") == {"pass"}
    # the failed sysctl fix ran; the fixes after it did not, and the report says which is which
    pending = dict((p["id"], p) for p in broken_host["pending"] if p.get("subject") is None)
    assert pending["NUMA-001"]["kind"] == "not-fixed"
    assert pending["NUMA-001"]["message"].startswith("still failing after the sysctl fix")
    assert pending["KERNEL-005"]["kind"] == "not-applied", pending["KERNEL-005"]

    rerun = failed_then_rerun["rerun"]
    assert rerun.rc == 0, stdout_of(rerun)
    report = load_report(tmp_path / "r2")["hosts"]
    assert report["gpu-broken"]["state"] == "audited"
    assert statuses(report["gpu-broken"]["findings"], "NUMA-001") == {"pass"}
    assert report["gpu-fine"]["state"] == "audited"
