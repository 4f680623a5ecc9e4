"""nvidia_gpu logic: GPU selection, power targets, the maintenance guard, command plans, snapshot roots."""
import os
import shutil

import pytest

from helpers.fixhost import FakeModule

from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.base import FixError, Host
from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.nvidia import (
    PERSISTENCED, apply, busy_gpus, format_watts, guard_message, plan, power_target, select_gpus, unit_installed)
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.nvidia import parse_smi_xml

REALDATA = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "realdata", "nvidia-smi")


class StubModule(FakeModule):
    """No binary exists and any command fails: a snapshot root must never run one."""

    def __init__(self, check_mode=False):
        super(StubModule, self).__init__(check_mode=check_mode, binaries=False,
                                         answers={"nvidia-smi": (1, "", "must not run"),
                                                  "systemctl": (1, "", "must not run")})


def gpu(index, persistence=False, limit=450.0, default=600.0, high=700.0, low=150.0, processes=()):
    return {"index": index, "bus_id": "0000:%02x:00.0" % (0x43 + index), "uuid": "GPU-%d" % index, "name": "H100",
            "persistence": persistence,
            "power": {"limit_w": limit, "default_w": default, "max_w": high, "min_w": low},
            "processes": list(processes)}


def params(**kwargs):
    base = {"persistence": None, "persistence_method": "auto", "power_limit": None, "gpus": [], "force": False,
            "nvidia_smi": "nvidia-smi"}
    base.update(kwargs)
    return base


@pytest.fixture
def tree(snapshot_trees, tmp_path):
    target = str(tmp_path / "incident")
    shutil.copytree(snapshot_trees["incident"], target, symlinks=True)
    return target


def tree_bytes(root):
    found = {}
    for base, dirs, files in os.walk(root):
        for name in files + dirs:
            path = os.path.join(base, name)
            found[path] = os.readlink(path) if os.path.islink(path) else (
                open(path, "rb").read() if os.path.isfile(path) else None)
    return found


def test_select_by_index_bus_id_and_uuid():
    gpus = [gpu(0), gpu(1), gpu(2)]
    assert select_gpus(gpus, []) == gpus
    assert [g["index"] for g in select_gpus(gpus, ["2", "00000000:44:00.0", "gpu-0", "2"])] == [2, 1, 0]
    with pytest.raises(FixError) as info:
        select_gpus(gpus, ["7"])
    assert "names no GPU" in info.value.msg and "0 0000:43:00.0" in info.value.msg


def test_power_target():
    board = gpu(0)
    assert power_target(board, "max") == 700.0
    assert power_target(board, "default") == 600.0
    assert power_target(board, "350") == 350.0
    assert power_target(board, "350W") == 350.0
    with pytest.raises(FixError, match="outside what GPU 0"):
        power_target(board, "800")
    with pytest.raises(FixError, match="not max, default or a number"):
        power_target(board, "lots")
    blank = gpu(0, high=None)
    with pytest.raises(FixError, match="reports no max power limit"):
        power_target(blank, "max")
    assert format_watts(700.0) == "700" and format_watts(312.5) == "312.50"


def test_guard_lists_compute_processes_only():
    gpus = [gpu(0, processes=[{"pid": 10, "name": "Xorg", "type": "G"}]),
            gpu(1, processes=[{"pid": 4242, "name": "python3", "type": "C"},
                              {"pid": 77, "name": "vllm", "type": "C+G"}, {"pid": 5, "name": "x", "type": None}])]
    found, unknown = busy_gpus(gpus)
    assert [p["pid"] for p in found] == [4242, 77, 5] and unknown == []
    message = guard_message(found, unknown)
    assert "GPU 1 (0000:44:00.0): pid 4242 python3" in message and "force: true" in message
    nothing = gpu(2)
    nothing["processes"] = None
    assert busy_gpus([nothing]) == ([], [2])
    assert "cannot be ruled out" in guard_message([], [2])


def test_plan_smi_commands_only_for_what_differs():
    gpus = [gpu(0, persistence=True, limit=700.0), gpu(1)]
    decided = plan(gpus, gpus, persistence=True, power_limit="max", method="smi", nvidia_smi="/x/nvidia-smi")
    assert decided["commands"] == [["/x/nvidia-smi", "-i", "1", "-pm", "1"], ["/x/nvidia-smi", "-i", "1", "-pl", "700"]]
    assert [g["changed"] for g in decided["gpus"]] == [False, True]
    assert decided["gpus"][1]["power_limit_after_w"] == 700.0
    # within the tolerance nvidia-smi's rounding needs: no change
    assert plan([gpu(0, limit=699.8)], [gpu(0, limit=699.8)], power_limit="max")["commands"] == []


def test_plan_daemon_states():
    off = [gpu(0)]
    on = [gpu(0, persistence=True)]
    assert plan(off, off, True, None, "daemon", {"enabled": False, "active": False})["commands"] == [
        ["systemctl", "enable", "--now", PERSISTENCED]]
    assert plan(off, off, True, None, "daemon", {"enabled": True, "active": False})["commands"] == [
        ["systemctl", "start", PERSISTENCED]]
    assert plan(off, off, True, None, "daemon", {"enabled": True, "active": True})["commands"] == [
        ["systemctl", "restart", PERSISTENCED]]
    assert plan(on, on, True, None, "daemon", {"enabled": True, "active": True})["commands"] == []
    assert plan(on, on, True, None, "daemon", {"enabled": True, "active": None})["commands"] == []
    assert plan(on, on, False, None, "daemon", {"enabled": True, "active": True})["commands"] == [
        ["systemctl", "disable", "--now", PERSISTENCED]]
    assert plan(on, on, False, None, "smi")["commands"] == [["nvidia-smi", "-i", "0", "-pm", "0"]]


def test_real_capture_parses_into_a_plan():
    with open(os.path.join(REALDATA, "a100-sxm4-v12.xml")) as handle:
        state = parse_smi_xml(handle.read())
    decided = plan(state["gpus"], state["gpus"], persistence=True, power_limit="default", method="smi")
    assert len(decided["gpus"]) == len(state["gpus"]) >= 1
    for entry, board in zip(decided["gpus"], state["gpus"]):
        assert entry["power_limit_after_w"] == board["power"]["default_w"]


def test_snapshot_root_runs_nothing_and_updates_only_the_captured_xml(tree):
    before = tree_bytes(tree)
    module = StubModule()
    result = apply(Host(module, tree), params(persistence=True, power_limit="max"), diff=True)
    assert result["changed"] and result["persistence_method"] == "smi"
    assert len(result["gpus"]) == 8
    assert module.ran == []
    after = tree_bytes(tree)
    assert [k for k in after if after[k] != before.get(k)] == [os.path.join(tree, "commands", "nvidia-smi-q.xml")]
    gpus = parse_smi_xml(open(os.path.join(tree, "commands", "nvidia-smi-q.xml")).read())["gpus"]
    assert all(g["persistence"] is True and g["power"]["limit_w"] == 600.0 for g in gpus)
    again = apply(Host(StubModule(), tree), params(persistence=True, power_limit="max"))
    assert not again["changed"] and tree_bytes(tree) == after
    assert "persistence off, power limit 450 W" in result["diff"][0]["before"]
    assert "persistence on, power limit 600 W" in result["diff"][0]["after"]


def test_snapshot_root_commands_are_listed(tree):
    host = Host(StubModule(), tree)
    apply(host, params(persistence=True, power_limit="max", gpus=["0"]))
    assert host.commands == ["nvidia-smi -i 0 -pm 1", "nvidia-smi -i 0 -pl 600"]


def test_snapshot_with_installed_daemon_enables_it(tree):
    os.makedirs(os.path.join(tree, "lib/systemd/system"))
    open(os.path.join(tree, "lib/systemd/system", PERSISTENCED), "w").close()
    host = Host(StubModule(), tree)
    assert unit_installed(host) == "/lib/systemd/system/" + PERSISTENCED
    result = apply(host, params(persistence=True))
    assert result["persistence_method"] == "daemon"
    assert host.commands == ["systemctl enable --now " + PERSISTENCED]
    # masked: the admin switched it off, so nvidia-smi is used
    os.makedirs(os.path.join(tree, "etc/systemd/system"), exist_ok=True)
    os.symlink("/dev/null", os.path.join(tree, "etc/systemd/system", PERSISTENCED))
    assert unit_installed(Host(StubModule(), tree)) is None
    with pytest.raises(FixError, match="is not installed"):
        apply(Host(StubModule(), tree), params(persistence=True, persistence_method="daemon"))


def test_snapshot_already_fixed_is_unchanged(snapshot_trees):
    result = apply(Host(StubModule(), snapshot_trees["healthy"]), params(persistence=True, power_limit="max"))
    assert not result["changed"]


def test_bad_state_inputs(tree):
    xml = os.path.join(tree, "commands", "nvidia-smi-q.xml")
    with open(xml, "w") as handle:
        handle.write("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n")
    with pytest.raises(FixError, match="is not nvidia-smi XML"):
        apply(Host(StubModule(), tree), params(persistence=True))
    with open(xml, "w") as handle:
        handle.write('<?xml version="1.0" ?>\n<nvidia_smi_log><gpu id="00000000:43:00.0"><persistence_mode>')
    with pytest.raises(FixError, match="incomplete"):
        apply(Host(StubModule(), tree), params(persistence=True))
    os.unlink(xml)
    with pytest.raises(FixError, match="is missing under"):
        apply(Host(StubModule(), tree), params(persistence=True))
    with pytest.raises(FixError, match="nothing to do"):
        apply(Host(StubModule(), tree), params())


def test_power_limit_checked_before_the_guard_and_any_command(tree):
    host = Host(StubModule(), tree)
    with pytest.raises(FixError, match="outside what GPU 0"):
        apply(host, params(power_limit="5000"))
    assert host.commands == []


def test_updated_smi_xml_rewrites_only_persistence_and_power_limit(snapshot_trees):
    import os
    from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.nvidia import updated_smi_xml
    from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.nvidia import parse_smi_xml

    with open(os.path.join(snapshot_trees["incident"], "commands", "nvidia-smi-q.xml")) as handle:
        text = handle.read()
    before = parse_smi_xml(text)
    out = updated_smi_xml(text, {0: {"persistence": True, "power_limit_w": 600.0},
                                 3: {"persistence": True, "power_limit_w": None}})
    after = parse_smi_xml(out)
    assert after["gpus"][0]["persistence"] is True and after["gpus"][0]["power"]["limit_w"] == 600.0
    assert after["gpus"][3]["persistence"] is True
    assert after["gpus"][3]["power"]["limit_w"] == before["gpus"][3]["power"]["limit_w"]
    assert after["gpus"][1] == before["gpus"][1]
    assert len(out.splitlines()) == len(text.splitlines())
    changed = [i for i, (a, b) in enumerate(zip(text.splitlines(), out.splitlines())) if a != b]
    assert len(changed) == 3
    assert updated_smi_xml(text, {99: {"persistence": True, "power_limit_w": None}}) is None
