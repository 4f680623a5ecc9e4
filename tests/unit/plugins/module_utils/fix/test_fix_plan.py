"""host_fix's plan (module_utils/fix/plan.py): every step's options checked first with its module's own argument
spec, the steps applied in order on a snapshot copy, a failing step rolled back and the rest not run, check mode
writing nothing, a second run changing nothing."""

import pytest

from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.plan import MODULES, PlanError, apply_plan, check_steps
from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.sysctl import DEFAULT_FILE
from helpers.fixhost import FakeModule, changed_paths, copy_tree, read, tree_state

NUMA = {"name": "NUMA-001 - numa balancing", "module": "kernel_sysctl", "rules": ["NUMA-001"],
        "args": {"key": "kernel.numa_balancing", "value": "0"}}
SWAP = {"name": "KERNEL-005 - swappiness", "module": "kernel_sysctl", "rules": ["KERNEL-005"],
        "args": {"key": "vm.swappiness", "value": "10"}}
CMDLINE = {"name": "CPU-001 - amd_pstate", "module": "kernel_cmdline", "rules": ["CPU-001"],
           "args": {"add": ["amd_pstate=active"]}}


def test_every_fix_module_is_in_the_plan_with_its_spec():
    assert sorted(MODULES) == ["cpu_power", "kernel_cmdline", "kernel_sysctl", "nvidia_gpu", "pcie_tune"]
    for kind in MODULES.values():
        assert kind.ARGUMENT_SPEC and callable(kind.apply_params)


@pytest.mark.parametrize("steps, wanted", [
    ([dict(NUMA, args={"key": "kernel.numa_balancing"})], "missing required arguments: value"),
    ([dict(NUMA, module="sysctl")], "module 'sysctl' is none of"),
    ([NUMA, dict(SWAP, name=NUMA["name"])], "a second step of that name"),
    ([dict(CMDLINE, args={})], "one of the following is required: add, remove"),
    ([dict(NUMA, args=dict(NUMA["args"], colour="red"))], "colour"),
])
def test_a_step_its_module_would_refuse_refuses_the_whole_plan(steps, wanted):
    with pytest.raises(PlanError) as info:
        check_steps(steps)
    assert wanted in info.value.msg and info.value.msg.startswith("no fix applied")


def test_steps_apply_in_order_check_first_then_once(snapshot_trees, tmp_path):
    root = copy_tree(snapshot_trees["incident"], tmp_path / "incident")
    before = tree_state(root)
    preview = apply_plan(FakeModule(check_mode=True), [NUMA, SWAP], root, True, True)
    assert preview["changed"] and preview["ran"] == [NUMA["name"], SWAP["name"]]
    assert [entry["after_header"] for entry in preview["diff"]][0] == "/proc/sys/kernel/numa_balancing (runtime)"
    assert tree_state(root) == before

    done = apply_plan(FakeModule(), [NUMA, SWAP], root, True, False)
    assert done["changed"] and set(done["steps"]) == {NUMA["name"], SWAP["name"]}
    assert "diff" not in done and done["reboot_required"] is False
    assert read(root, "/proc/sys/kernel/numa_balancing") == "0\n" and read(root, "/proc/sys/vm/swappiness") == "10\n"
    assert "kernel.numa_balancing = 0\nvm.swappiness = 10\n" in read(root, DEFAULT_FILE)
    # the second step replaced the file the first wrote: its backup is the first step's file
    assert list(done["steps"][SWAP["name"]]["backup_files"]) == [DEFAULT_FILE]

    after = tree_state(root)
    again = apply_plan(FakeModule(), [NUMA, SWAP], root, True, False)
    assert not again["changed"] and tree_state(root) == after


def test_a_failing_step_is_rolled_back_the_earlier_ones_stay_the_later_ones_do_not_run(snapshot_trees, tmp_path):
    root = copy_tree(snapshot_trees["incident"], tmp_path / "incident")
    before = tree_state(root)
    bad = dict(SWAP, name="KERNEL-005 - swappiness out of range", args={"key": "vm.swappiness", "value": "900"})
    with pytest.raises(PlanError) as info:
        apply_plan(FakeModule(), [NUMA, bad, CMDLINE], root, False, False)
    result = info.value.result
    assert info.value.msg.startswith("fix task 'KERNEL-005 - swappiness out of range' failed: ")
    assert result["ran"] == [NUMA["name"], bad["name"]] and result["changed"]
    assert result["steps"][bad["name"]]["failed"]
    assert changed_paths(before, tree_state(root)) == ["etc/sysctl.d/90-gpuhost-baseline.conf",
                                                       "proc/sys/kernel/numa_balancing"]


def test_reboot_required_comes_from_the_cmdline_step(snapshot_trees, tmp_path):
    root = copy_tree(snapshot_trees["incident"], tmp_path / "incident")
    done = apply_plan(FakeModule(), [CMDLINE], root, False, False)
    assert done["changed"] and done["reboot_required"] is True
