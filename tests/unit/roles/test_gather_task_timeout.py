"""The audit's gather task timeout (roles/audit/tasks/evaluate.yml, issue 40) and the snapshot capture's
(playbooks/snapshot.yml), both gpuhost_gather_bound_s of roles/audit/vars/main.yml: a backstop derived from the
command timeouts, so a fleet run waits a bounded time for a host whose gather hangs outside a command.

Its table of the commands host_facts may run (tool: [how many, the runner's time bound]) must stay equal
to root.COMMAND_ARGV and runner.TIMEOUTS; the expression, rendered by Ansible's templar, gives the sum
of each command's bound plus 5 s (kill and reap) and 120 s for the rest, follows gpuhost_command_timeouts,
and is 0 (no timeout) for a snapshot and for a second judgement that gathers nothing.
"""
import collections
import os

import pytest
import yaml

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

try:
    from ansible.template import trust_as_template
except ImportError:  # ansible-core before 2.19 templates every string
    def trust_as_template(text):
        return text

from ansible_collections.gpuhost.baseline.plugins.module_utils.host import root, runner

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def gather_task():
    with open(os.path.join(REPO, "roles", "audit", "tasks", "evaluate.yml")) as handle:
        tasks = yaml.safe_load(handle)
    (task,) = [t for t in tasks if "gpuhost.baseline.baseline_evaluate" in t]
    return task


def role_vars():
    with open(os.path.join(REPO, "roles", "audit", "vars", "main.yml")) as handle:
        values = yaml.safe_load(handle)
    # as Ansible loads a vars file: its strings are templates
    values["gpuhost_gather_bound_s"] = trust_as_template(values["gpuhost_gather_bound_s"])
    return values


def snapshot_capture_task():
    with open(os.path.join(REPO, "playbooks", "snapshot.yml")) as handle:
        plays = yaml.safe_load(handle)
    (play,) = [p for p in plays if p.get("name") == "Capture gpuhost snapshots"]
    assert play["vars_files"] == ["../roles/audit/vars/main.yml"]
    for task in play["tasks"]:
        for inner in task.get("block", []):
            if "gpuhost.baseline.host_snapshot" in inner:
                return inner
    raise AssertionError("no host_snapshot task in playbooks/snapshot.yml")


#: how the audit's task reads the bound: looked up only in the branch that uses it (a name in the expression would
#: be resolved, its loop template rendered, also for a snapshot)
BOUND_LOOKUP = "lookup('ansible.builtin.vars', 'gpuhost_gather_bound_s')"


def render(variables, task=None):
    """The task's timeout with ``variables``; the vars lookup (not loadable in this process, which has no collection
    loader) read as the variable itself, which is what it returns."""
    task = task or gather_task()
    values = dict(role_vars(), **variables)
    source = task["timeout"].replace(BOUND_LOOKUP, "gpuhost_gather_bound_s")
    return int(str(Templar(loader=DataLoader(), variables=values).template(trust_as_template(source))).strip())


def test_the_audit_reads_the_bound_only_where_it_applies():
    source = gather_task()["timeout"]
    assert BOUND_LOOKUP in source and "gpuhost_gather_bound_s" not in source.replace(BOUND_LOOKUP, "")


def test_the_table_is_the_commands_host_facts_may_run():
    counts = collections.Counter(argv[0] for argv in root.COMMAND_ARGV.values())
    table = role_vars()["gpuhost_gather_commands"]
    assert dict((tool, spec[0]) for tool, spec in table.items()) == dict(counts)
    assert dict((tool, spec[1]) for tool, spec in table.items()) == dict(
        (tool, runner.timeout_for(tool)) for tool in counts)


def test_the_bound_with_the_defaults():
    expected = 120 + sum((runner.timeout_for(argv[0]) + 5) for argv in root.COMMAND_ARGV.values())
    assert render({"gpuhost_root": "/", "gpuhost_command_timeouts": {}}) == expected == 650


def test_the_bound_follows_gpuhost_command_timeouts():
    assert render({"gpuhost_root": "/", "gpuhost_command_timeouts": {"nvidia-smi": 5, "journalctl": "10.5"}}) == (
        650 - 4 * 40 - 3 * 49.5 + 0.5)


@pytest.mark.parametrize("variables", [{"gpuhost_root": "/srv/snapshots/node01"},
                                       {"gpuhost_root": "/", "gpuhost_eval_facts": {"measure": {}}}])
def test_no_timeout_where_nothing_is_run(variables):
    assert render(dict(variables, gpuhost_command_timeouts={})) == 0


def test_the_snapshot_capture_is_bounded_alike():
    """host_snapshot runs the commands host_facts runs: its task has the same bound (it had none)."""
    task = snapshot_capture_task()
    assert render({"gpuhost_command_timeouts": {}}, task) == 650
    assert render({"gpuhost_command_timeouts": {"nvidia-smi": 5}}, task) == 650 - 4 * 40
