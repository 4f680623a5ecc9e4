"""Runtime vs persisted, end to end: a fix module run by ansible-playbook on a writable copy of
the incident snapshot, then the facts gathered from that copy and judged.

A fix applied with persistence makes both the runtime rule and its boot-time rule pass; the
same fix without persistence makes the runtime rule pass and the boot-time rule fail with
"would be lost at reboot". For MaxReadReq (PCI-008) that takes evidence: the audit history
showing the value before the fix in the same boot.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.gather import gather_facts
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge.evaluation import evaluate
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_load import load_catalogue
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.history import earlier_in_boot, make_record

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
GPUS_AND_NICS = 10


def run_tasks(tmp_path, tasks):
    """Run ``[(module, args)]`` on localhost in one play; every task must succeed."""
    book = tmp_path / "play.yml"
    book.write_text(json.dumps([{
        "name": "fix", "hosts": "localhost", "connection": "local", "gather_facts": False,
        "tasks": [{"name": "%s %d" % (module, index), "gpuhost.baseline.%s" % module: args}
                  for index, (module, args) in enumerate(tasks)]}]))
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_RETRY_FILES_ENABLED="0")
    assert "ANSIBLE_COLLECTIONS_PATH" in env  # set by tests/conftest.py
    proc = subprocess.run([ANSIBLE_PLAYBOOK, "-i", "localhost,", "-e", "ansible_python_interpreter=" + sys.executable,
                           str(book)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=REPO,
                          timeout=300, check=False)
    log = proc.stdout.decode("utf-8", "replace")
    assert proc.returncode == 0, log
    return log


def findings(root, earlier=None):
    """Findings per rule id; ``earlier``: findings of an earlier audit of the same boot (the history)."""
    facts = gather_facts(Root(root))
    if earlier is not None:
        record = make_record("copy", [f for fs in earlier.values() for f in fs], "2026-06-01T08:00:00+00:00",
                             boot_id=facts["kernel"]["boot_id"])
        facts["history"] = earlier_in_boot([record], facts["kernel"]["boot_id"], rules=load_catalogue().history_values())
    result = evaluate(facts, profile="amd-epyc-nvidia", host="copy", today="2026-06-01")
    by_id = {}
    for finding in result["findings"]:
        by_id.setdefault(finding["id"], []).append(finding)
    return by_id


def statuses(by_id, rule_id):
    return [f["status"] for f in by_id[rule_id]]


@pytest.fixture
def incident(snapshot_trees, tmp_path):
    root = str(tmp_path / "incident")
    shutil.copytree(snapshot_trees["incident"], root, symlinks=True)
    return root


def test_incident_fails_both_halves(incident):
    before = findings(incident)
    assert statuses(before, "PCI-001") == ["fail"] * 8 and statuses(before, "PCI-002") == ["fail"] * 2
    # nothing sets MaxReadReq at boot, but nothing says the running 512 B was set at runtime (PCI-001 fails it)
    assert statuses(before, "PCI-008") == ["pass"] * GPUS_AND_NICS
    assert statuses(before, "NUMA-001") == ["fail"] and statuses(before, "NUMA-006") == ["fail"]
    assert statuses(before, "CPU-008") == ["fail"]


def test_persisted_fixes_pass_runtime_and_boot_rules(incident, tmp_path):
    run_tasks(tmp_path, [
        ("pcie_tune", {"kinds": ["gpu", "nic"], "max_read_request": 4096, "persist": True, "root": incident}),
        ("kernel_sysctl", {"key": "kernel.numa_balancing", "value": "0", "root": incident}),
        ("cpu_power", {"governor": "performance", "idle_latency_max_us": 100, "persist": "systemd",
                       "root": incident}),
    ])
    after = findings(incident)
    for rule_id in ("PCI-001", "PCI-002", "PCI-008", "NUMA-001", "NUMA-006", "CPU-003", "CPU-006", "CPU-008"):
        assert set(statuses(after, rule_id)) == {"pass"}, [f["message"] for f in after[rule_id]]
    assert len(after["PCI-008"]) == GPUS_AND_NICS
    facts = gather_facts(Root(incident), ["persistence"])
    assert facts["errors"] == []
    assert facts["persistence"]["pcie"]["active"] and facts["persistence"]["cpu_power"]["active"]
    assert set(d["max_read_request"] for d in facts["persistence"]["pcie"]["devices"].values()) == {4096}


def test_runtime_only_fixes_are_lost_at_reboot(incident, tmp_path):
    before = findings(incident)
    run_tasks(tmp_path, [
        ("pcie_tune", {"kinds": ["gpu", "nic"], "max_read_request": 4096, "persist": False, "root": incident}),
        ("kernel_sysctl", {"key": "kernel.numa_balancing", "value": "0", "persist": False, "root": incident}),
        ("cpu_power", {"governor": "performance", "idle_latency_max_us": 100, "persist": "none", "root": incident}),
    ])
    # without the history, a running 4096 B could be the firmware's: no evidence, PCI-008 passes and says so
    alone = findings(incident)
    assert all(f["status"] == "pass" and "no evidence" in f["message"] for f in alone["PCI-008"])
    after = findings(incident, earlier=before)
    for rule_id in ("PCI-001", "PCI-002", "NUMA-001", "CPU-003", "CPU-006"):
        assert set(statuses(after, rule_id)) == {"pass"}, [f["message"] for f in after[rule_id]]
    for rule_id, count in (("PCI-008", GPUS_AND_NICS), ("NUMA-006", 1), ("CPU-008", 1)):
        failing = [f for f in after[rule_id] if f["status"] == "fail"]
        assert len(failing) == count, [f["message"] for f in after[rule_id]]
        assert all("would be lost at reboot" in f["message"] for f in failing), [f["message"] for f in failing]
