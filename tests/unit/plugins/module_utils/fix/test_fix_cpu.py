"""cpu_power fix logic: plan (governor, EPP rules, boost, idle states), summaries, boot script and unit."""
import os
import re
import shutil
import subprocess

import pytest

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.cpu import CPU_DIR
from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.base import FixError, Host, fail_with_rollback
from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.cpu import (
    PUT_ATTEMPTS, SCRIPT_PATH, UDEV_PATH, UNIT_PATH, WANTS_LINK, apply, check_name, group_writes, plan, read_state, render_script,
    render_unit, script_settings, settings_of, summarize)
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.persist import parse_udev_rules
from helpers.fixhost import FakeModule, changed_paths, copy_tree, make_readonly, read, tree_state

POLICY0 = CPU_DIR + "/cpufreq/policy0/"


def _state(snapshot_trees, name):
    return read_state(Host(FakeModule(), snapshot_trees[name]))


def test_incident_plan(snapshot_trees):
    state = _state(snapshot_trees, "incident")
    decided = plan(state, governor="performance", epp="performance", boost=True, idle_latency_max_us=10)
    writes = decided["writes"]
    governors = [w for w in writes if w[0].endswith("scaling_governor")]
    disables = [w for w in writes if w[0].endswith("/disable")]
    assert len(governors) == 128 and all(old == "ondemand" and new == "performance" for _p, old, new in governors)
    # C2 (400 us) on every CPU; POLL (0) and C1 (1) stay
    assert len(disables) == 128 and all("/state2/" in path for path, _o, _n in disables)
    assert len(writes) == 256  # boost already on, no EPP with acpi-cpufreq
    assert decided["unsupported"] == {
        "epp": "128 of 128 policies have no energy_performance_preference (driver acpi-cpufreq)"}
    assert "amd_pstate=active" in decided["warnings"][0]
    assert group_writes(writes) == [
        "/sys/devices/system/cpu/cpufreq/N/scaling_governor: ondemand -> performance on 0-127 (128 files)",
        "/sys/devices/system/cpu/N/cpuidle/state2/disable: 0 -> 1 on 0-127 (128 files)"]


def test_healthy_needs_nothing(snapshot_trees):
    state = _state(snapshot_trees, "healthy")
    decided = plan(state, governor="performance", epp="performance", boost=True, idle_latency_max_us=10)
    assert decided == {"writes": [], "warnings": [], "unsupported": {}}


def test_intel_epp_is_written_before_the_governor(snapshot_trees):
    state = _state(snapshot_trees, "intel")
    writes = plan(state, governor="performance", epp="performance")["writes"]
    order = [path.rsplit("/", 2)[1:] for path, _o, _n in writes]
    policies = sorted(set(policy for policy, _attr in order))
    assert len(order) == 2 * len(policies) > 0
    for policy in policies:
        # while the governor is still powersave, EPP goes in; then the governor
        assert order.index([policy, "energy_performance_preference"]) < order.index([policy, "scaling_governor"])


def test_intel_boost_goes_through_no_turbo(snapshot_trees):
    state = _state(snapshot_trees, "intel")
    assert plan(state, boost=False)["writes"] == [(CPU_DIR + "/intel_pstate/no_turbo", "0", "1")]
    assert plan(state, boost=True)["writes"] == []


def test_performance_governor_with_another_epp_is_refused(snapshot_trees):
    state = _state(snapshot_trees, "healthy")
    with pytest.raises(FixError) as info:
        plan(state, governor="performance", epp="balance_power")
    assert "amd-pstate-epp" in info.value.msg and "EBUSY" in info.value.msg and "powersave" in info.value.msg
    # under powersave any EPP is allowed: the governor leaves performance first, then EPP is written
    writes = plan(state, governor="powersave", epp="balance_power")["writes"]
    assert [path.rsplit("/", 2)[1:] for path, _old, _new in writes[:4]] == [
        ["policy0", "scaling_governor"], ["policy0", "energy_performance_preference"],
        ["policy1", "scaling_governor"], ["policy1", "energy_performance_preference"]]
    assert len(writes) == 256


def test_epp_under_the_performance_governor_is_not_written(snapshot_trees):
    state = _state(snapshot_trees, "healthy")
    for policy in state["policies"]:
        policy["epp"] = "balance_performance"  # impossible live, possible in a doctored snapshot
    decided = plan(state, epp="performance")
    assert decided["writes"] == []
    assert "holds at performance" in decided["warnings"][0]


@pytest.mark.parametrize("kwargs, words", [
    ({"governor": "schedutil"}, "not offered by policy0 (driver amd-pstate-epp): it offers performance powersave"),
    ({"epp": "turbo"}, "EPP turbo is not offered by policy0"),
    ({"governor": "perf ormance"}, "not a governor/EPP name"),
    ({"epp": "$(reboot)"}, "not a governor/EPP name"),
    ({"idle_latency_max_us": -1}, "0 or more"),
])
def test_bad_values_fail_before_any_write(snapshot_trees, kwargs, words):
    with pytest.raises(FixError) as info:
        plan(_state(snapshot_trees, "healthy"), **kwargs)
    assert words in info.value.msg


def test_hostile_garbage_fails_naming_the_file(snapshot_trees):
    state = _state(snapshot_trees, "hostile")
    with pytest.raises(FixError) as info:
        plan(state, idle_latency_max_us=10)
    assert re.search(r"/sys/devices/system/cpu/cpu\d+/cpuidle/state2/latency holds 'forever'", info.value.msg)


def test_hostile_missing_governor_file_fails_at_the_write(snapshot_trees, tmp_path):
    # hostile policies offer performance but have no scaling_governor file: the kernel would
    # have one, so the write names it and everything is put back
    root = copy_tree(snapshot_trees["hostile"], tmp_path / "hostile")
    before = tree_state(root)
    host = _host(root)
    with pytest.raises(FixError) as info:
        apply(host, "performance", None, None, None, "systemd")
    assert info.value.msg.startswith("cannot write 'performance' to "
                                     "/sys/devices/system/cpu/cpufreq/policy0/scaling_governor")
    assert "ENOENT" in info.value.msg
    fail_with_rollback(host, info.value)
    assert tree_state(root) == before


def test_no_cpufreq_at_all(tmp_path):
    os.makedirs(str(tmp_path / "sys/devices/system/cpu/cpu0"))
    state = read_state(Host(FakeModule(), str(tmp_path)))
    with pytest.raises(FixError) as info:
        plan(state, governor="performance")
    assert "no cpufreq driver" in info.value.msg
    decided = plan(state, boost=True, idle_latency_max_us=10)
    assert decided["writes"] == [] and "boost" in decided["unsupported"] and len(decided["warnings"]) == 2


def test_check_name():
    assert check_name("governor", "performance") == "performance"
    assert check_name("epp", None) is None


def test_summary_counts_and_overrides(snapshot_trees):
    state = _state(snapshot_trees, "incident")
    summary = summarize(state)
    assert summary["governor"] == {"ondemand": 128} and summary["epp"] == {} and summary["boost"] is True
    assert summary["idle_states"][2] == {"index": 2, "name": "C2", "latency_us": 400, "enabled_cpus": 128,
                                         "disabled_cpus": 0}
    writes = plan(state, governor="performance", idle_latency_max_us=10)["writes"]
    after = summarize(state, dict((path, new) for path, _old, new in writes))
    assert after["governor"] == {"performance": 128}
    assert after["idle_states"][2]["disabled_cpus"] == 128


def test_script_settings_round_trip():
    settings = settings_of("performance", "performance", True, 10)
    assert script_settings(render_script(settings)) == settings
    assert script_settings("#!/bin/sh\necho hi\n") is None
    assert script_settings("# gpuhost-cpu-power-settings: {broken\n") is None
    assert script_settings(None) is None


def test_unit_runs_the_script_at_boot():
    unit = render_unit()
    assert "Type=oneshot" in unit and "ExecStart=%s" % SCRIPT_PATH in unit and "WantedBy=multi-user.target" in unit


@pytest.mark.skipif(shutil.which("sh") is None, reason="no POSIX shell")
def test_boot_script_applies_what_the_module_applies(snapshot_trees, tmp_path):
    """The generated script, run on one copy, gives the runtime state the module gives on another."""
    settings = settings_of("performance", "performance", True, 10)
    by_script = copy_tree(snapshot_trees["healthy"], tmp_path / "script")
    by_module = copy_tree(snapshot_trees["healthy"], tmp_path / "module")
    for root in (by_script, by_module):
        # start out of baseline: ondemand-like state on a amd-pstate-epp host
        for number in range(8):
            with open(os.path.join(root, "sys/devices/system/cpu/cpufreq/policy%d/scaling_governor" % number), "w") as f:
                f.write("powersave\n")
            with open(os.path.join(root, "sys/devices/system/cpu/cpufreq/policy%d/energy_performance_preference"
                                   % number), "w") as f:
                f.write("balance_power\n")
    script = render_script(settings).replace("cpu=/sys/devices/system/cpu", "cpu=%s/sys/devices/system/cpu" % by_script)
    path = tmp_path / "gpuhost-cpu-power"
    path.write_text(script)
    assert subprocess.run(["sh", "-n", str(path)], check=False).returncode == 0
    proc = subprocess.run(["sh", str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    assert proc.returncode == 0, proc.stderr
    apply(Host(FakeModule(), by_module), "performance", "performance", True, 10, persist="none")
    script_view = summarize(read_state(Host(FakeModule(), by_script)))
    module_view = summarize(read_state(Host(FakeModule(), by_module)))
    assert script_view == module_view
    assert script_view["governor"] == {"performance": 128} and script_view["epp"] == {"performance": 128}


def _sleep_shim(tmp_path, body):
    """A ``sleep`` first on PATH that runs ``body`` instead of waiting (the script's retry pause)."""
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "sleep").write_text("#!/bin/sh\n" + body + "\n")
    (shim / "sleep").chmod(0o755)
    return dict(os.environ, PATH="%s:%s" % (shim, os.environ.get("PATH", "/usr/bin:/bin")))


@pytest.mark.skipif(shutil.which("sh") is None, reason="no POSIX shell")
def test_boot_script_tries_a_refused_write_again(tmp_path):
    """A policy its driver is still setting up refuses the governor write (EBUSY at boot): the
    script waits and writes again; the write lands and the script succeeds."""
    cpu = tmp_path / "cpu"
    policy = cpu / "cpufreq" / "policy0"
    (policy / "scaling_governor").mkdir(parents=True)  # a directory: the first write fails
    # the pause ends the setup: the attribute becomes writable
    env = _sleep_shim(tmp_path, 'rmdir "%s" && echo schedutil > "%s" && echo slept >> "%s"'
                      % (policy / "scaling_governor", policy / "scaling_governor", tmp_path / "log"))
    script = render_script({"governor": "performance"}).replace("cpu=/sys/devices/system/cpu", "cpu=%s" % cpu)
    proc = subprocess.run(["sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    assert (policy / "scaling_governor").read_text() == "performance\n"
    assert (tmp_path / "log").read_text() == "slept\n"


@pytest.mark.skipif(shutil.which("sh") is None, reason="no POSIX shell")
def test_boot_script_gives_up_after_its_attempts(tmp_path):
    cpu = tmp_path / "cpu"
    policy = cpu / "cpufreq" / "policy0"
    (policy / "scaling_governor").mkdir(parents=True)  # never writable
    env = _sleep_shim(tmp_path, 'echo slept >> "%s"' % (tmp_path / "log"))
    script = render_script({"governor": "performance"}).replace("cpu=/sys/devices/system/cpu", "cpu=%s" % cpu)
    proc = subprocess.run(["sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, check=False)
    assert proc.returncode == 1
    assert ("cannot write performance to %s/scaling_governor (%d attempts)" % (policy, PUT_ATTEMPTS)).encode() \
        in proc.stderr
    assert (tmp_path / "log").read_text() == "slept\n" * (PUT_ATTEMPTS - 1)


def test_boot_script_reports_garbage_latency(snapshot_trees, tmp_path):
    root = copy_tree(snapshot_trees["hostile"], tmp_path / "hostile")
    script = render_script({"idle_latency_max_us": 10}).replace("cpu=/sys/devices/system/cpu",
                                                                "cpu=%s/sys/devices/system/cpu" % root)
    proc = subprocess.run(["sh", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    assert proc.returncode == 1 and b"unreadable latency" in proc.stderr


# -- apply on snapshot copies -----------------------------------------------------------------------------

def _host(root, check=False):
    return Host(FakeModule(check_mode=check), root, True)


def test_incident_four_runs(snapshot_trees, tmp_path):
    root = copy_tree(snapshot_trees["incident"], tmp_path / "incident")
    before = tree_state(root)
    args = ("performance", "performance", True, 10, "systemd")

    host = _host(root, check=True)
    result = apply(host, *args, diff=True)
    assert result["changed"] and host.commands == ["systemctl daemon-reload", "udevadm control --reload"]
    assert result["runtime_after"]["governor"] == {"performance": 128}
    assert [entry["after_header"] for entry in result["diff"]] == ["runtime (sysfs)", SCRIPT_PATH, UNIT_PATH,
                                                                   WANTS_LINK, UDEV_PATH]
    assert result["persisted_before"] == {"unit": False, "enabled": False, "script": False, "settings": None,
                                          "unit_current": False, "udev": False}
    assert tree_state(root) == before

    host = _host(root)
    result = apply(host, *args)
    assert result["changed"] and host.commands == ["systemctl daemon-reload", "udevadm control --reload"]
    assert host.module.ran == []  # a snapshot root: the commands are listed, never run
    assert result["runtime_after"]["governor"] == {"performance": 128}
    assert result["runtime_after"]["idle_states"][2]["disabled_cpus"] == 128
    assert result["persisted_after"] == {"unit": True, "enabled": True, "script": True, "unit_current": True,
                                         "udev": True,
                                         "settings": {"governor": "performance", "epp": "performance", "boost": True,
                                                      "idle_latency_max_us": 10}}
    changed = changed_paths(before, tree_state(root))
    expected = set("sys/devices/system/cpu/cpufreq/policy%d/scaling_governor" % n for n in range(128))
    expected |= set("sys/devices/system/cpu/cpu%d/cpuidle/state2/disable" % n for n in range(128))
    expected |= {"usr", "usr/local", "usr/local/sbin", "usr/local/sbin/gpuhost-cpu-power", "etc/systemd",
                 "etc/systemd/system", "etc/systemd/system/gpuhost-cpu-power.service",
                 "etc/systemd/system/multi-user.target.wants",
                 "etc/systemd/system/multi-user.target.wants/gpuhost-cpu-power.service",
                 "etc/udev", "etc/udev/rules.d", "etc/udev/rules.d/90-gpuhost-cpu-power.rules"}
    new_dirs = {"usr", "usr/local", "usr/local/sbin", "etc/systemd", "etc/systemd/system",
                "etc/systemd/system/multi-user.target.wants", "etc/udev", "etc/udev/rules.d"}
    assert set(changed) == (expected - new_dirs) | (new_dirs - set(before))
    assert read(root, "/sys/devices/system/cpu/cpu5/cpuidle/state2/disable") == "1\n"
    assert read(root, "/sys/devices/system/cpu/cpu5/cpuidle/state1/disable") == "0\n"
    assert os.readlink(os.path.join(root, WANTS_LINK.lstrip("/"))) == UNIT_PATH
    assert os.stat(os.path.join(root, SCRIPT_PATH.lstrip("/"))).st_mode & 0o777 == 0o755
    assert parse_udev_rules(read(root, UDEV_PATH), SCRIPT_PATH, subsystem="module") == ["*cpufreq*|*pstate*"]

    after = tree_state(root)
    for check in (True, False):
        host = _host(root, check=check)
        result = apply(host, *args)
        assert not result["changed"] and host.commands == [] and result["runtime_changes"] == []
    assert tree_state(root) == after


def test_new_settings_rewrite_the_script_with_a_backup(snapshot_trees, tmp_path):
    root = copy_tree(snapshot_trees["incident"], tmp_path / "incident")
    apply(_host(root), "performance", None, None, 10, "systemd")
    host = _host(root)
    result = apply(host, "performance", None, None, 2, "systemd")
    assert result["persisted_before"]["settings"] == {"governor": "performance", "idle_latency_max_us": 10}
    assert result["persisted_after"]["settings"] == {"governor": "performance", "idle_latency_max_us": 2}
    assert host.commands == []  # only the script changed: no daemon-reload
    assert list(host.backups) == [SCRIPT_PATH]
    assert script_settings(read(root, os.path.relpath(host.backups[SCRIPT_PATH], root))) == {
        "governor": "performance", "idle_latency_max_us": 10}


def test_persist_none_leaves_boot_files_alone(snapshot_trees, tmp_path):
    root = copy_tree(snapshot_trees["incident"], tmp_path / "incident")
    result = apply(_host(root), "performance", None, None, None, "none")
    assert result["persisted_after"] == result["persisted_before"]
    assert not os.path.exists(os.path.join(root, UNIT_PATH.lstrip("/")))


def test_refused_write_names_the_file_and_undoes_the_others(snapshot_trees, tmp_path):
    root = copy_tree(snapshot_trees["incident"], tmp_path / "incident")
    target = "/sys/devices/system/cpu/cpufreq/policy5/scaling_governor"
    make_readonly(root, target)
    before = tree_state(root)
    host = _host(root)
    with pytest.raises(FixError) as info:
        apply(host, "performance", None, None, 10, "systemd")
    assert target in info.value.msg and "EACCES" in info.value.msg
    msg, _result = fail_with_rollback(host, info.value)
    # policies 0-4 had been switched (numeric order) and were put back
    assert "5 earlier write(s) of this task were undone" in msg
    assert tree_state(root) == before
