"""The Kubernetes example of docs/acting-on-the-verdict.md, run as written after audit.yml (issue 38 item 6).

No Kubernetes API server can be installed on the test machines from the package sources CI uses, so
``kubernetes.core`` is a recorder (tests/fixtures/kubernetes_core_recorder/): its ``k8s_taint`` and ``k8s``
write each call's arguments to a file. What this proves is the example's selection, from the audit's own
registered results: which node is tainted, untainted or labelled, which hosts are left alone, and that
past its budget nothing is tainted. Two audits of five hosts (about a minute on a 2-core machine).
"""
import json
import os
import re

import pytest
import yaml

from helpers.runner import run_playbook, stdout_of

from test_audit_playbook import fleet

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC = os.path.join(REPO, "docs", "acting-on-the-verdict.md")
RECORDER = os.path.join(REPO, "tests", "fixtures", "kubernetes_core_recorder")


def example_play():
    """The one yaml block of the doc's Kubernetes section, parsed."""
    with open(DOC, encoding="utf-8") as handle:
        text = handle.read()
    section = text[text.index("## Kubernetes"):]
    section = section[:section.index("\n## ", 1)]
    (block,) = re.findall(r"```yaml\n(.*?)```", section, re.S)
    plays = yaml.safe_load(block)
    assert len(plays) == 1 and plays[0]["hosts"] == "all", plays
    return plays


def run(tmp_path, snapshot_trees, percent):
    book = tmp_path / "k8s.yml"
    plays = [{"ansible.builtin.import_playbook": os.path.join(REPO, "playbooks", "audit.yml")}] + example_play()
    book.write_text(yaml.safe_dump(plays, sort_keys=False), encoding="utf-8")
    inventory = fleet(snapshot_trees, {"ghost": {
        "ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 9,
        "ansible_ssh_common_args": "-o ConnectTimeout=3 -o BatchMode=yes",
        "ansible_python_interpreter": "/usr/bin/python3", "k8s_node_name": "node-ghost"}}, live=False)
    hosts = inventory["all"]["children"]["snapshots"]["hosts"]
    for name in ("incident", "healthy", "intel"):
        hosts["demo-" + name]["k8s_node_name"] = "node-" + name  # demo-hostile stands for no node
    record = tmp_path / "k8s-calls.jsonl"
    runner = run_playbook(tmp_path, str(book), inventory,
                          extravars={"gpuhost_report_dir": str(tmp_path / "reports"), "gpuhost_fail_on": "none",
                                     "k8s_taint_max_percent": percent},
                          env={"GPUHOST_K8S_RECORD": str(record),
                               "ANSIBLE_COLLECTIONS_PATH": RECORDER + os.pathsep + os.environ["ANSIBLE_COLLECTIONS_PATH"]})
    calls = []
    if record.exists():
        calls = [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()]
    return runner, calls


@pytest.fixture(scope="module")
def trees(snapshot_trees):
    return dict((name, snapshot_trees[name]) for name in ("incident", "healthy", "intel", "hostile"))


def test_taints_the_faulty_node_labels_every_audited_one(trees, tmp_path):
    runner, calls = run(tmp_path, trees, 50)
    out = stdout_of(runner)
    assert runner.rc == 4, out  # the unreachable host; every audited host stays in the play (fail_on none)
    taints = dict((c["args"]["name"], c["args"]["state"]) for c in calls if c["module"] == "k8s_taint")
    assert taints == {"node-incident": "present", "node-healthy": "absent", "node-intel": "absent"}, calls
    assert all(c["args"]["taints"] == [{"key": "gpuhost.baseline/fault", "effect": "NoSchedule"}]
               for c in calls if c["module"] == "k8s_taint")
    labels = dict((c["args"]["name"], c["args"]["definition"]["metadata"]["labels"]["gpuhost.baseline/verdict"])
                  for c in calls if c["module"] == "k8s")
    assert labels == {"node-incident": "fail", "node-healthy": "pass", "node-intel": "fail"}, calls
    assert set(c["host"] for c in calls) == {"demo-incident", "demo-healthy", "demo-intel"}  # not ghost, not hostile


def test_past_the_budget_nothing_is_tainted(trees, tmp_path):
    runner, calls = run(tmp_path, trees, 10)  # 10 % of 5 hosts: 1; the incident and hostile hosts have faults
    out = stdout_of(runner)
    assert runner.rc != 0 and calls == [], (runner.rc, calls)
    assert re.search(r"2 of 5 hosts to taint, more than 10 %: demo-hostile, demo-incident; no node tainted", out), out
