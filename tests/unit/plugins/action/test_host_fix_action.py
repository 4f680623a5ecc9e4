"""The host_fix action on the controller: nothing started on the host when no step applies; the module run once
with the chosen steps; a connection lost under the fixes fails the task with "connection lost during the fixes"
(the remediate role's rescue reports the host failed), every chosen step counted as applied."""
from unittest import mock

from ansible.errors import AnsibleConnectionFailure
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.play_context import PlayContext
from ansible.playbook.task import Task

from ansible_collections.gpuhost.baseline.plugins.action import host_fix

STEPS = [
    {"name": "NUMA-001 - balancing", "module": "kernel_sysctl", "rules": ["NUMA-001"], "tags": ["numa"],
     "args": {"key": "kernel.numa_balancing", "value": "0"}},
    {"name": "CPU-003 - governor", "module": "cpu_power", "rules": ["CPU-003"], "tags": ["cpu"],
     "args": {"governor": "performance"}},
]


def _run(failing, execute, check_mode=False, run_tags=("all",)):
    task = Task()
    task.args = {"fixes": STEPS, "failing": failing, "root": "/srv/copy"}
    task.check_mode = check_mode
    action = host_fix.ActionModule(task, mock.MagicMock(), PlayContext(), DataLoader(), None, None)
    with mock.patch.object(action, "_execute_module", side_effect=execute) as executed:
        result = action.run(task_vars={"ansible_run_tags": list(run_tags), "ansible_skip_tags": []})
    return result, executed


def test_no_step_applies_nothing_runs_on_the_host():
    result, executed = _run(["KERNEL-009"], AssertionError("no module may run"))
    assert not executed.called
    assert result["skipped"] and result["applied"] == [] and result["selected"] == []
    result, executed = _run(["CPU-003"], AssertionError("no module may run"), run_tags=("numa",))
    assert not executed.called and result["left_out"] == {"CPU-003 - governor": "tags"}


def test_the_chosen_steps_run_in_one_module_run():
    answer = {"changed": True, "ran": ["NUMA-001 - balancing", "CPU-003 - governor"], "steps": {}}
    result, executed = _run(["NUMA-001", "CPU-003"], lambda **kwargs: dict(answer))
    assert executed.call_count == 1
    args = executed.call_args.kwargs
    assert args["module_name"] == "gpuhost.baseline.host_fix"
    assert [step["name"] for step in args["module_args"]["fixes"]] == answer["ran"]
    assert result["applied"] == ["CPU-003", "NUMA-001"] and result["changed"]


def test_a_failed_step_counts_itself_and_those_before_it():
    answer = {"failed": True, "msg": "fix task 'NUMA-001 - balancing' failed: no", "ran": ["NUMA-001 - balancing"]}
    result, unused = _run(["NUMA-001", "CPU-003"], lambda **kwargs: dict(answer))
    assert result["failed"] and result["applied"] == ["NUMA-001"]


def test_a_lost_connection_fails_the_task_and_counts_every_chosen_step():
    def drop(**kwargs):
        raise AnsibleConnectionFailure("Data could not be sent to remote host")
    result, unused = _run(["NUMA-001", "CPU-003"], drop)
    assert result["failed"] and result["connection_lost"] and "unreachable" not in result
    assert result["msg"] == "connection lost during the fixes: Data could not be sent to remote host"
    assert result["applied"] == ["CPU-003", "NUMA-001"]
    result, unused = _run(["NUMA-001"], lambda **kwargs: {"unreachable": True, "msg": "gone"})
    assert result["failed"] and result["msg"] == "connection lost during the fixes: gone"


def test_check_mode_applies_nothing():
    answer = {"changed": True, "ran": ["NUMA-001 - balancing"]}
    result, unused = _run(["NUMA-001"], lambda **kwargs: dict(answer), check_mode=True)
    assert result["applied"] == [] and result["changed"]
