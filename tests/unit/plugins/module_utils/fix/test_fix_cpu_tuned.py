"""cpu_power where tuned runs: the child profile (rendering, parent choice), check mode, four runs,
the competing unit disabled, and hosts without tuned unchanged."""
import os

import pytest

from helpers.fixhost import FakeModule, changed_paths, copy_tree, read, tree_state
from helpers.tuned_tree import copy_with_tuned, lay_tuned

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import tuned as tuned_facts
from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.base import FixError, Host
from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.cpu import (
    UDEV_PATH, WANTS_LINK, apply, choose_parents, render_tuned_conf)

ARGS = ("performance", "performance", True, 10)
SETTINGS = {"governor": "performance", "epp": "performance", "boost": True, "idle_latency_max_us": 10}
CONF_219 = "/etc/tuned/gpuhost-baseline/tuned.conf"
CONF_224 = "/etc/tuned/profiles/gpuhost-baseline/tuned.conf"


def _host(root, check=False):
    return Host(FakeModule(check_mode=check), root, False)


def test_render_tuned_conf():
    text = render_tuned_conf(SETTINGS, ["accelerator-performance"], "cpufreq", [2, 3])
    parsed = tuned_facts.parse_tuned_conf(text)
    assert parsed["include"] == ["accelerator-performance"]
    assert parsed["settings"] == SETTINGS
    assert parsed["sections"]["cpu"] == {"governor": "performance"}  # EPP follows the performance governor
    assert parsed["sections"]["sysfs"] == {
        "/sys/devices/system/cpu/cpufreq/boost": "1",
        "/sys/devices/system/cpu/cpu*/cpuidle/state2/disable": "1",
        "/sys/devices/system/cpu/cpu*/cpuidle/state3/disable": "1"}
    other = tuned_facts.parse_tuned_conf(render_tuned_conf({"epp": "balance_performance", "boost": False}, [],
                                                           "no_turbo"))
    assert other["include"] == [] and "include=" not in render_tuned_conf({"epp": "power"}, [])
    assert other["sections"]["cpu"] == {"energy_performance_preference": "balance_performance"}
    assert other["sections"]["sysfs"] == {"/sys/devices/system/cpu/intel_pstate/no_turbo": "1"}


def test_choose_parents():
    shipped = {"accelerator-performance", "latency-performance", "throughput-performance", "balanced"}.__contains__
    assert choose_parents(["balanced"], None, shipped) == ["accelerator-performance"]
    assert choose_parents(["latency-performance"], None, shipped) == ["latency-performance"]
    assert choose_parents(["virtual-guest", "latency-performance"], None, shipped) == ["accelerator-performance"]
    assert choose_parents(["gpuhost-baseline"], ["latency-performance"], shipped) == ["latency-performance"]
    assert choose_parents([], None, {"latency-performance"}.__contains__) == ["latency-performance"]
    assert choose_parents(None, None, lambda name: False) == []


def test_profile_directory_follows_the_tuned_layout(snapshot_trees, tmp_path):
    root = copy_with_tuned(snapshot_trees["healthy"], tmp_path / "healthy", layout="2.24")
    result = apply(_host(root, check=True), *ARGS, persist="auto")
    assert result["tuned"]["path"] == CONF_224 and result["tuned"]["include"] == ["accelerator-performance"]


def test_four_runs_with_tuned(snapshot_trees, tmp_path):
    layout, conf = "2.19", CONF_219
    root = copy_with_tuned(snapshot_trees["incident"], tmp_path / "incident", layout=layout)
    before = tree_state(root)

    host = _host(root, check=True)
    result = apply(host, *ARGS, persist="auto", diff=True)
    assert result["changed"] and result["persist"] == "tuned"
    assert host.commands == ["tuned-adm profile gpuhost-baseline"]
    assert result["tuned"] == {"profile": "gpuhost-baseline", "path": conf, "include": ["accelerator-performance"],
                               "active_before": "balanced", "active_after": "gpuhost-baseline", "disabled": []}
    assert [entry["after_header"] for entry in result["diff"]] == ["runtime (sysfs)", conf,
                                                                   tuned_facts.ACTIVE_PROFILE_PATH]
    assert "include=accelerator-performance" in result["diff"][1]["after"]
    assert any("balanced is replaced" in warning for warning in result["warnings"])
    assert tree_state(root) == before  # check mode writes nothing

    host = _host(root)
    result = apply(host, *ARGS, persist="auto")
    assert result["changed"] and host.commands == ["tuned-adm profile gpuhost-baseline"]
    assert host.module.ran == []  # a snapshot root: tuned-adm is listed, never run
    changed = set(changed_paths(before, tree_state(root)))
    assert conf.lstrip("/") in changed
    assert not os.path.exists(os.path.join(root, "etc/systemd/system/gpuhost-cpu-power.service"))
    assert read(root, "/sys/devices/system/cpu/cpu5/cpuidle/state2/disable") == "1\n"
    parsed = tuned_facts.parse_tuned_conf(read(root, conf))
    assert parsed["settings"] == SETTINGS and parsed["include"] == ["accelerator-performance"]
    assert "/sys/devices/system/cpu/cpu*/cpuidle/state2/disable" in parsed["sections"]["sysfs"]

    # what tuned-adm profile does on the host: the active profile is the child
    lay_tuned(root, active="gpuhost-baseline", layout=layout)
    after = tree_state(root)
    for check in (True, False):
        host = _host(root, check=check)
        result = apply(host, *ARGS, persist="auto")
        assert not result["changed"] and host.commands == [] and result["runtime_changes"] == []
    assert tree_state(root) == after


def test_competing_unit_is_disabled(snapshot_trees, tmp_path):
    root = copy_tree(snapshot_trees["incident"], tmp_path / "incident")
    apply(_host(root), *ARGS, persist="systemd")
    assert os.path.islink(os.path.join(root, WANTS_LINK.lstrip("/")))
    lay_tuned(root, active="latency-performance")
    host = _host(root)
    result = apply(host, *ARGS, persist="auto", diff=True)
    assert result["tuned"]["disabled"] == [WANTS_LINK, UDEV_PATH]
    assert result["tuned"]["include"] == ["latency-performance"]  # a performance profile stays the parent
    assert host.commands == ["systemctl daemon-reload", "udevadm control --reload", "tuned-adm profile gpuhost-baseline"]
    assert not os.path.lexists(os.path.join(root, WANTS_LINK.lstrip("/")))
    assert not os.path.exists(os.path.join(root, UDEV_PATH.lstrip("/")))
    assert result["persisted_after"]["enabled"] is False and result["persisted_after"]["script"] is True


def test_rollback_when_tuned_adm_fails(snapshot_trees, tmp_path):
    root = copy_with_tuned(snapshot_trees["incident"], tmp_path / "incident")
    host = Host(FakeModule(answers={"tuned-adm": (1, "", "Cannot talk to TuneD daemon")}), root, False)
    host.live = True  # so the command runs (answered by FakeModule), as on a live host
    before = tree_state(root)
    with pytest.raises(FixError) as caught:
        apply(host, *ARGS, persist="tuned")
    assert "tuned-adm profile gpuhost-baseline exited 1" in caught.value.msg
    host.rollback()
    after = tree_state(root)
    assert after.pop("etc/tuned/gpuhost-baseline") == ("dir",)  # the empty directory stays, as for every fix
    assert after == before


def test_no_tuned(snapshot_trees, tmp_path):
    root = copy_tree(snapshot_trees["incident"], tmp_path / "incident")
    with pytest.raises(FixError, match="tuned is not running"):
        apply(_host(root), *ARGS, persist="tuned")
    lay_tuned(root, running=False)  # installed and stopped: auto keeps today's unit
    result = apply(_host(root, check=True), *ARGS, persist="auto")
    assert result["persist"] == "systemd" and "tuned" not in result
