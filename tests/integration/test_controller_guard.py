"""A misspelled gpuhost_root does not fix the controller (issue 18, item 2).

An inventory host that is not named localhost, with ``ansible_connection: local`` and
``gpuhost_rot:`` (a typo) kept the default root ``/``: remediate.yml planned fixes for this
machine's own /proc/sys and /etc/sysctl.d. Now such a host fails before any fix, with a message
naming the typo and the closest known name; the other hosts go on. An unknown ``gpuhost_*``
variable fails its host in remediate and is a warning in the audit, which still audits.

The real (not --check) run is attempted only after the --check run has shown the guard
refusing: on a machine without the guard it would change this machine.
"""
import hashlib
import os
import shutil

import pytest

from helpers.fixhost import copy_tree, tree_state
from helpers.report_file import load_report
from helpers.runner import run_playbook, stdout_of

PYTHON = shutil.which("python3")
FAILED_HOSTS = 2
#: what the fixes would write on a live host with root "/" (docs/remediation.md)
PROC_SYS = ("kernel/numa_balancing", "vm/zone_reclaim_mode", "vm/swappiness")
CONTROLLER_FILES = ("/etc/default/grub", "/etc/kernel/cmdline", "/usr/local/sbin/gpuhost-pcie-apply",
                    "/usr/local/sbin/gpuhost-cpu-power", "/etc/systemd/system/gpuhost-pcie.service",
                    "/etc/systemd/system/gpuhost-cpu-power.service")


def controller_state():
    """What a fix of this machine would change: /etc/sysctl.d, a few /proc/sys values, the units."""
    state = {}
    for name in sorted(os.listdir("/etc/sysctl.d")) if os.path.isdir("/etc/sysctl.d") else []:
        path = os.path.join("/etc/sysctl.d", name)
        state[path] = os.readlink(path) if os.path.islink(path) else _digest(path)
    for key in PROC_SYS:
        path = os.path.join("/proc/sys", key)
        if os.path.exists(path):
            with open(path) as handle:
                state[path] = handle.read()
    for path in CONTROLLER_FILES:
        state[path] = _digest(path) if os.path.exists(path) else None
    return state


def _digest(path):
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()


def local_host(**hostvars):
    host = {"ansible_connection": "local", "ansible_python_interpreter": PYTHON,
            # root already: no sudo, and the typo'd host would really reach this machine's files
            "gpuhost_become": False}
    host.update(hostvars)
    return host


def events_of(runner, host, path_part=None, action=None):
    """Per-host results of ``host`` whose task file contains ``path_part`` / whose action is ``action``."""
    out = []
    for event in runner.events:
        data = event.get("event_data") or {}
        if event.get("event") not in ("runner_on_ok", "runner_on_failed", "runner_on_skipped", "runner_on_unreachable"):
            continue
        if data.get("host") != host:
            continue
        if path_part and path_part not in (data.get("task_path") or ""):
            continue
        if action and data.get("task_action") != action:
            continue
        out.append(event)
    return out


def guard_events(runner, host):
    return events_of(runner, host, path_part="roles/audit/tasks/controller_guard.yml",
                     action="gpuhost.baseline.baseline_validate")


def failed_hosts(runner):
    return set(host for host, count in ((runner.stats or {}).get("failures") or {}).items() if count)


def typo_fleet(snapshot_trees, tmp):
    """typo-host: gpuhost_rot (typo) on a local connection; gpu-misspelled: a snapshot host with a misspelled
    option; gpu-good: a snapshot host without a typo, that must go on (incident copies: there is work to do)."""
    target = copy_tree(snapshot_trees["incident"], tmp / "meant-for-typo-host")
    misspelled = copy_tree(snapshot_trees["incident"], tmp / "misspelled")
    good = copy_tree(snapshot_trees["incident"], tmp / "good")
    hosts = {"typo-host": local_host(gpuhost_rot=target),
             "gpu-misspelled": local_host(gpuhost_root=misspelled, gpuhost_fix_acss=True),
             "gpu-good": local_host(gpuhost_root=good)}
    return {"all": {"hosts": hosts}}, {"target": target, "misspelled": misspelled, "good": good}


@pytest.fixture(scope="module")
def typo_runs(snapshot_trees, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("controller-guard")
    inventory, roots = typo_fleet(snapshot_trees, tmp)
    states = dict((name, tree_state(root)) for name, root in roots.items())
    before = controller_state()
    check = run_playbook(tmp, "remediate.yml", inventory, cmdline="--check --diff",
                         extravars={"gpuhost_report_dir": str(tmp / "check")})
    after_check = controller_state()
    runs = {"tmp": tmp, "roots": roots, "states": states, "before": before,
            "check": check, "after_check": after_check, "apply": None}
    refused = [e for e in guard_events(check, "typo-host") if e["event"] == "runner_on_failed"]
    if refused and after_check == before:
        runs["apply"] = run_playbook(tmp, "remediate.yml", inventory, extravars={"gpuhost_report_dir": str(tmp / "apply")})
        runs["after_apply"] = controller_state()
    return runs


def assert_refused(runner, report_dir):
    out = stdout_of(runner)
    assert runner.rc == FAILED_HOSTS, out
    assert failed_hosts(runner) == {"typo-host", "gpu-misspelled"}, out
    # the guard failed typo-host, with the typo and the name it meant
    failed = [e for e in guard_events(runner, "typo-host") if e["event"] == "runner_on_failed"]
    assert len(failed) == 1, out
    msg = failed[0]["event_data"]["res"]["msg"]
    assert "gpuhost_rot" in msg and "did you mean gpuhost_root" in msg, msg
    assert "gpuhost_allow_controller" in msg, msg
    # before any fix: no task ran for it after the guard (not the audit, not a fix)
    assert events_of(runner, "typo-host", path_part="roles/remediate/tasks/fix.yml") == []
    assert events_of(runner, "typo-host", action="gpuhost.baseline.baseline_evaluate") == []
    # the misspelled option fails its host with the closest known name
    failed = [e for e in guard_events(runner, "gpu-misspelled") if e["event"] == "runner_on_failed"]
    assert len(failed) == 1, out
    msg = failed[0]["event_data"]["res"]["msg"]
    assert "gpuhost_fix_acss" in msg and "did you mean gpuhost_fix_acs" in msg, msg
    assert events_of(runner, "gpu-misspelled", path_part="roles/remediate/tasks/fix.yml") == []
    # the others go on, and the report says why the refused hosts were left alone
    assert events_of(runner, "gpu-good", path_part="roles/remediate/tasks/fix.yml")
    report = load_report(report_dir / "report.json")["hosts"]
    assert report["gpu-good"]["state"] == "audited"
    assert report["typo-host"]["state"] == "failed" and "gpuhost_rot" in report["typo-host"]["message"]
    assert report["gpu-misspelled"]["state"] == "failed" and "gpuhost_fix_acss" in report["gpu-misspelled"]["message"]


def test_check_diff_refuses_the_misspelled_root_before_any_fix(typo_runs):
    assert typo_runs["after_check"] == typo_runs["before"]
    assert_refused(typo_runs["check"], typo_runs["tmp"] / "check")
    assert "kernel.numa_balancing" in stdout_of(typo_runs["check"])  # gpu-good's plan is shown


def test_fix_mode_refuses_the_misspelled_root_and_writes_nothing_on_the_controller(typo_runs):
    apply = typo_runs["apply"]
    assert apply is not None, "the --check run did not refuse typo-host: the real run was not attempted\n" + \
        stdout_of(typo_runs["check"])
    assert typo_runs["after_apply"] == typo_runs["before"]
    assert_refused(apply, typo_runs["tmp"] / "apply")
    roots, states = typo_runs["roots"], typo_runs["states"]
    # the refused hosts' snapshots are untouched, the good host was fixed
    assert tree_state(roots["target"]) == states["target"]
    assert tree_state(roots["misspelled"]) == states["misspelled"]
    assert tree_state(roots["good"]) != states["good"]


def test_an_explicit_opt_in_lets_the_controller_through_the_guard(snapshot_trees, tmp_path):
    # --check only: the guard lets it through and nothing is changed on this machine
    before = controller_state()
    inventory = {"all": {"hosts": {"this-controller": local_host(gpuhost_allow_controller=True)}}}
    runner = run_playbook(tmp_path, "remediate.yml", inventory, cmdline="--check --diff --tags numa",
                          extravars={"gpuhost_report_dir": str(tmp_path / "reports")})
    out = stdout_of(runner)
    assert controller_state() == before
    guard = guard_events(runner, "this-controller")
    assert [e["event"] for e in guard] == ["runner_on_ok"], out
    assert events_of(runner, "this-controller", action="gpuhost.baseline.baseline_evaluate"), out


def test_the_audit_refuses_the_typo_and_audits_the_others(snapshot_trees, tmp_path):
    """Issue 40, item 4: the audit runs the same guard, inside its evaluation (baseline_evaluate's
    controller_guard: one task per host for both, issue 41): a typo'd host is not read as the controller
    under its name (a false pass of the host meant), it fails with the reason."""
    root = copy_tree(snapshot_trees["healthy"], tmp_path / "meant")
    inventory = {"all": {"hosts": {"typo-host": local_host(gpuhost_rot=root),
                                   "gpu-healthy": local_host(gpuhost_root=root)}}}
    runner = run_playbook(tmp_path, "audit.yml", inventory, cmdline="--check",
                          extravars={"gpuhost_report_dir": str(tmp_path / "reports")})
    out = stdout_of(runner)
    assert runner.rc == FAILED_HOSTS, out
    warnings = [w for e in runner.events if e.get("event") == "runner_on_ok"
                and e["event_data"].get("task_action") == "gpuhost.baseline.baseline_validate"
                for w in e["event_data"]["res"].get("warnings") or [] if "gpuhost_rot" in w]
    assert len(warnings) == 1, out
    assert "typo-host" in warnings[0] and "did you mean gpuhost_root" in warnings[0], warnings
    # no guard task of its own in the audit: the evaluation refuses, before anything is read
    assert guard_events(runner, "typo-host") == [] and guard_events(runner, "gpu-healthy") == []
    evaluated = events_of(runner, "typo-host", action="gpuhost.baseline.baseline_evaluate")
    assert [e["event"] for e in evaluated] == ["runner_on_failed"], out
    result = evaluated[0]["event_data"]["res"]
    assert "refusing to audit typo-host" in result["msg"]
    assert result["host_report"]["findings"] == [] and "ansible_facts" not in result and "summary" not in result
    assert "failing_ids" not in result
    report = load_report(tmp_path / "reports" / "report.json")["hosts"]
    assert set(report) == {"typo-host", "gpu-healthy"}
    assert report["gpu-healthy"]["state"] == "audited"
    assert report["typo-host"]["state"] == "failed" and "refusing to audit typo-host" in report["typo-host"]["message"]
    assert "did you mean gpuhost_root?" in report["typo-host"]["message"]
    assert failed_hosts(runner) == {"typo-host"}


def test_validate_refuses_to_measure_the_controller_under_a_typo(snapshot_trees, tmp_path):
    """validate.yml runs the same guard first: nothing is measured (nor planned) for the typo'd host."""
    root = copy_tree(snapshot_trees["healthy"], tmp_path / "meant")
    inventory = {"all": {"hosts": {"typo-host": local_host(gpuhost_rot=root),
                                   "gpu-healthy": local_host(gpuhost_root=root)}}}
    runner = run_playbook(tmp_path, "validate.yml", inventory, cmdline="--check",
                          extravars={"gpuhost_report_dir": str(tmp_path / "reports")})
    out = stdout_of(runner)
    assert runner.rc == FAILED_HOSTS, out
    failed = [e for e in guard_events(runner, "typo-host") if e["event"] == "runner_on_failed"]
    assert len(failed) == 1, out
    assert "refusing to validate typo-host" in failed[0]["event_data"]["res"]["msg"]
    assert events_of(runner, "typo-host", action="gpuhost.baseline.host_measure") == []
    assert events_of(runner, "typo-host", action="gpuhost.baseline.baseline_evaluate") == []
    report = load_report(tmp_path / "reports" / "report.json")["hosts"]
    assert report["gpu-healthy"]["state"] == "audited"
    assert report["typo-host"]["state"] == "failed" and "refusing to validate" in report["typo-host"]["message"]


def test_a_rolling_run_refuses_the_host_in_its_batch_and_reports_every_batch(snapshot_trees, tmp_path):
    # gpuhost_serial=2: typo-host and gpu-a in the first batch, gpu-b in the second; the first batch's
    # report has no evaluation of gpu-b yet, the last one holds all three
    hosts = {"typo-host": local_host(gpuhost_rot=copy_tree(snapshot_trees["incident"], tmp_path / "meant")),
             "gpu-a": local_host(gpuhost_root=copy_tree(snapshot_trees["incident"], tmp_path / "a")),
             "gpu-b": local_host(gpuhost_root=copy_tree(snapshot_trees["incident"], tmp_path / "b"))}
    before = controller_state()
    runner = run_playbook(tmp_path, "remediate.yml", {"all": {"hosts": hosts}}, cmdline="--check --diff",
                          extravars={"gpuhost_report_dir": str(tmp_path / "reports"), "gpuhost_serial": 2})
    out = stdout_of(runner)
    assert controller_state() == before
    assert runner.rc == FAILED_HOSTS, out
    assert failed_hosts(runner) == {"typo-host"}, out
    assert events_of(runner, "typo-host", path_part="roles/remediate/tasks/fix.yml") == []
    assert events_of(runner, "gpu-b", path_part="roles/remediate/tasks/fix.yml"), out
    report = load_report(tmp_path / "reports" / "report.json")["hosts"]
    assert dict((name, host["state"]) for name, host in report.items()) == {
        "typo-host": "failed", "gpu-a": "audited", "gpu-b": "audited"}
    # each batch's report (the report task's stats): the first without gpu-b, not evaluated yet; the
    # refused host in both (it failed in the first batch: the guard's report, read from the play)
    batches = [dict((name, host["state"]) for name, host in event["event_data"]["res"]["stats"]["hosts"].items())
               for event in runner.events if event.get("event") in ("runner_on_ok", "runner_on_failed")
               and event["event_data"].get("task_action") == "gpuhost.baseline.baseline_report"]
    assert batches == [{"typo-host": "failed", "gpu-a": "audited"},
                       {"typo-host": "failed", "gpu-a": "audited", "gpu-b": "audited"}], out


@pytest.mark.parametrize("playbook, action, verb", [
    ("learn.yml", "gpuhost.baseline.baseline_learn", "refusing to learn from typo-host"),
    ("snapshot.yml", "gpuhost.baseline.host_snapshot", "refusing to capture typo-host"),
])
def test_learn_and_snapshot_refuse_the_controller_under_a_typo(snapshot_trees, tmp_path, playbook, action, verb):
    """Every playbook runs the guard: learn.yml does not write the controller as typo-host's golden profile,
    snapshot.yml does not capture it under typo-host's name (--check: nothing is written either way)."""
    root = copy_tree(snapshot_trees["healthy"], tmp_path / "meant")
    inventory = {"all": {"hosts": {"typo-host": local_host(gpuhost_rot=root)}}}
    runner = run_playbook(tmp_path, playbook, inventory, cmdline="--check",
                          extravars={"gpuhost_learn_dir": str(tmp_path / "site"),
                                     "gpuhost_snapshot_dir": str(tmp_path / "snapshots")})
    out = stdout_of(runner)
    assert runner.rc == FAILED_HOSTS, out
    failed = [e for e in guard_events(runner, "typo-host") if e["event"] == "runner_on_failed"]
    assert len(failed) == 1, out
    assert verb in failed[0]["event_data"]["res"]["msg"], failed[0]["event_data"]["res"]["msg"]
    assert events_of(runner, "typo-host", action=action) == []
