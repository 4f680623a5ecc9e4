"""The audit's gather task timeout (roles/audit/tasks/evaluate.yml, issue 40): a backstop derived from the
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

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import root, runner

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def gather_task():
    with open(os.path.join(REPO, "roles", "audit", "tasks", "evaluate.yml")) as handle:
        tasks = yaml.safe_load(handle)
    (task,) = [t for t in tasks if "gpuhost.baseline.baseline_evaluate" in t]
    return task


def render(variables):
    task = gather_task()
    values = dict(task["vars"], **variables)
    return int(str(Templar(loader=DataLoader(), variables=values).template(trust_as_template(task["timeout"]))).strip())


def test_the_table_is_the_commands_host_facts_may_run():
    counts = collections.Counter(argv[0] for argv in root.COMMAND_ARGV.values())
    table = gather_task()["vars"]["gpuhost_gather_commands"]
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
