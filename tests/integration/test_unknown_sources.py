"""Unknown findings name the file or command that gave no value (issue 13, item 3).

On the hostile snapshot (build/snapshots/hostile: garbage, truncated and missing files and a cut
nvidia-smi capture) and on the incident snapshot turned hostile by test_hostile_snapshot.build
(links out of the tree, a FIFO, a device node, a 1 GB file), every unknown finding says where
its value should have come from instead of "no data: <fact key> is null".
"""
import re

import pytest

from test_hostile_snapshot import build

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.gather import gather_facts
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge.evaluation import evaluate

#: a file the readers read (an absolute path under a system tree) or a command they run
# gpuhost_history_dir: the error counter rules (HEALTH-020..023) are unknown without a history to compare
# with, and name the variable that gives them one
NAMES_A_SOURCE = re.compile(r"/(proc|sys|etc|usr|lib|boot|run)/|nvidia-smi|journalctl|dmesg|systemctl|gpuhost_history_dir")
BARE_NULL = re.compile(r"no data: [A-Za-z_.\[\]?!`0-9 =]+ is null")
pytestmark = pytest.mark.slow  # gathers four generated snapshots


def _unknowns(root):
    facts = gather_facts(Root(root))
    result = evaluate(facts, profile="auto", host="gpu-hostile", today="2026-06-01")
    return [f for f in result["findings"] if f["status"] == "unknown"]


def _check(unknowns):
    assert unknowns, "the hostile snapshot gives no unknown finding: the test would prove nothing"
    bare = [(f["id"], f["message"]) for f in unknowns if BARE_NULL.search(f["message"])]
    assert bare == []
    nameless = [(f["id"], f["message"]) for f in unknowns if not NAMES_A_SOURCE.search(f["message"])]
    assert nameless == []


def test_hostile_snapshot_unknowns_name_their_source(snapshot_trees):
    unknowns = _unknowns(snapshot_trees["hostile"])
    _check(unknowns)
    by_id = dict((f["id"], f["message"]) for f in unknowns)
    # the reader's own reason for the file is quoted
    assert by_id["NUMA-002"] == "vm.zone_reclaim_mode unknown: no value from /proc/sys/vm/zone_reclaim_mode: empty file"
    assert "no value from nvidia-smi -q -x (<clocks_event_reasons>): nvidia-smi -q -x output is incomplete" \
        in by_id["NVIDIA-008"]


def test_hostile_links_fifo_and_device_unknowns_name_their_source(snapshot_trees, tmp_path):
    root, unused_decoy = build(snapshot_trees["incident"], tmp_path)
    unknowns = _unknowns(root)
    _check(unknowns)
    messages = " | ".join(f["message"] for f in unknowns)
    assert "/proc/sys/kernel/numa_balancing" in messages and "leaves the snapshot root" in messages


@pytest.mark.parametrize("name", ["incident", "healthy", "intel"])
def test_demo_snapshots_have_no_bare_null_message(snapshot_trees, name):
    facts = gather_facts(Root(snapshot_trees[name]))
    result = evaluate(facts, profile="auto", host=name, today="2026-06-01")
    assert [f["message"] for f in result["findings"] if BARE_NULL.search(f["message"] or "")] == []
