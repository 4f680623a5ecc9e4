"""Which steps of a host's fix plan run (plugin_utils/remedy/fix_steps.py): the failing rules, the step's enabled
condition, and --tags / --skip-tags as Ansible applies them to a task with the step's rule ids and tags."""
import pytest

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.remedy.fix_steps import (
    applied_rules, select_steps, tags_select)

STEPS = [
    {"name": "numa", "rules": ["NUMA-001", "NUMA-006"], "tags": ["numa"]},
    {"name": "acs", "rules": ["PCI-006"], "tags": ["pcie"], "enabled": False},
    {"name": "cpu", "rules": ["CPU-003"], "tags": ["cpu"]},
    {"name": "cmdline", "rules": ["CPU-001", "IOMMU-001"], "tags": ["cpu", "iommu", "kernel"]},
]


def names(selected):
    return [step["name"] for step in selected]


@pytest.mark.parametrize("run, skip, wanted", [
    (["all"], [], True), (None, None, True), (["numa"], [], True), (["NUMA-001"], [], True),
    (["cpu"], [], False), (["tagged"], [], True), (["untagged"], [], False),
    (["all"], ["numa"], False), (["all"], ["NUMA-006"], False), (["all"], ["cpu"], True),
    (["all"], ["all"], False), (["all"], ["tagged"], False), (["numa"], ["NUMA-001"], False),
])
def test_tags_select_as_ansible_selects_a_task(run, skip, wanted):
    assert tags_select(["NUMA-001", "NUMA-006", "numa"], run, skip) is wanted


def test_only_steps_of_failing_rules_enabled_and_tagged_run():
    failing = ["NUMA-006", "PCI-006", "CPU-001", "KERNEL-009"]
    selected, left_out = select_steps(STEPS, failing, ["all"], [])
    assert names(selected) == ["numa", "cmdline"] and left_out == {"acs": "disabled"}
    selected, left_out = select_steps(STEPS, failing, ["kernel"], [])
    assert names(selected) == ["cmdline"] and left_out == {"acs": "disabled", "numa": "tags"}
    selected, left_out = select_steps(STEPS, failing, ["all"], ["cpu"])
    assert names(selected) == ["numa"] and left_out == {"acs": "disabled", "cmdline": "tags"}
    assert select_steps(STEPS, [], ["all"], []) == ([], {})


def test_applied_is_the_failing_rules_of_the_steps_that_ran_none_in_check_mode():
    selected, unused = select_steps(STEPS, ["NUMA-006", "CPU-001"], ["all"], [])
    assert applied_rules(selected, ["NUMA-006", "CPU-001"], check_mode=False) == ["CPU-001", "NUMA-006"]
    assert applied_rules(selected, ["NUMA-006", "CPU-001"], check_mode=True) == []
