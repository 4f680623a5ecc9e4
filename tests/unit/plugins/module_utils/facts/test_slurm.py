"""``scontrol show node`` parser and drain reason (plugins/module_utils/facts/slurm.py) and the decision of the
``slurm_node`` module, on real outputs of Debian 12's Slurm 22.05.8 (tests/fixtures/slurm/README.md). The
module against real daemons: tests/integration/test_slurm_action.py. About 0.1 s."""
import os

import pytest

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import slurm
from ansible_collections.gpuhost.baseline.plugins.modules.slurm_node import decide, merged_reason

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "fixtures", "slurm")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def test_idle_node():
    node, error = slurm.parse_show_node(fixture("show-node-idle.txt"), "vm")
    assert error is None
    assert node == {"name": "vm", "state": "idle", "flags": [], "drain": False,
                    "reason": None, "reason_user": None}


def test_drained_by_gpuhost():
    node, error = slurm.parse_show_node(fixture("show-node-drain-gpuhost.txt"))
    assert error is None and node["state"] == "idle" and node["flags"] == ["drain"] and node["drain"]
    assert node["reason"] == "gpuhost: GPU-004 PCI-001" and node["reason_user"] == "root@2026-12-04T09:51:41"
    assert slurm.drained_by_us(node)


def test_drained_by_an_administrator_with_a_comment_after_the_reason():
    for name in ("show-node-drain-admin.txt", "show-node-drain-comment.txt"):
        node, error = slurm.parse_show_node(fixture(name), "vm")
        assert error is None and node["drain"]
        assert node["reason"] == "replacing DIMM B3, ticket 4711", name
        assert not slurm.drained_by_us(node)


def test_the_form_without_o_and_several_nodes():
    node, error = slurm.parse_show_node(fixture("show-node-multiline.txt"), "vm")
    assert error is None and node["state"] == "idle" and node["flags"] == ["not_responding"]
    node, error = slurm.parse_show_node(fixture("show-node-all.txt"), "vm")
    assert error is None and node["name"] == "vm"
    node, error = slurm.parse_show_node(fixture("show-node-all.txt"), "gpu99")
    assert node is None and "no line for node 'gpu99'" in error


@pytest.mark.parametrize("state, base, flags, drain", [
    ("IDLE", "idle", [], False),
    ("MIXED+DRAIN", "mixed", ["drain"], True),
    ("DOWN*+DRAIN", "down", ["drain"], True),  # rackslab/Slurm-web issue 153
    ("ALLOCATED+DRAIN+NOT_RESPONDING", "allocated", ["drain", "not_responding"], True),
    ("DRAINED", "drained", [], True),
    ("IDLE~", "idle", [], False),
])
def test_states(state, base, flags, drain):
    node, error = slurm.parse_show_node("NodeName=gpu01 Arch=x86_64 State=%s ThreadsPerCore=1" % state)
    assert error is None and (node["state"], node["flags"], node["drain"]) == (base, flags, drain)


@pytest.mark.parametrize("text, reason", [
    ("", "printed nothing"),
    (None, "no scontrol output"),
    (fixture("show-node-not-found.txt"), "not the output of scontrol show node"),
    ("NodeName=gpu01 Arch=x86_64", "no State= field"),
    ("NodeName=gpu01 State=idle; rm -rf /", "not a Slurm node state"),
    ("NodeName= State=IDLE", "without a name"),
    (b"\xff\xfe\x00\x01garbage", "not the output"),
])
def test_bad_output_is_a_reason(text, reason):
    node, error = slurm.parse_show_node(text)
    assert node is None and reason in error


def test_drain_reason_names_sorted_unique_ids_and_stays_short():
    assert slurm.drain_reason(["PCI-001", "KERNEL-003", "PCI-001"]) == ("gpuhost: KERNEL-003 PCI-001", None)
    many = ["RULE-%03d" % number for number in range(60)]
    reason, error = slurm.drain_reason(many)
    assert error is None and len(reason) <= slurm.MAX_REASON_CHARS and reason.startswith("gpuhost: RULE-000 ")
    shown = reason.split()[1:-2]
    assert reason.endswith(" +%d more" % (60 - len(shown)))
    assert slurm.drain_reason([])[1] == "no failing rule ids to name in the drain reason"
    assert "not a rule id" in slurm.drain_reason(["PCI-001 Reason=x"])[1]
    assert "not a rule id" in slurm.drain_reason(["x" * 80])[1]


def node(drain=False, reason=None):
    return {"name": "gpu01", "state": "idle", "flags": ["drain"] if drain else [], "drain": drain,
            "reason": reason, "reason_user": None}


@pytest.mark.parametrize("before, state, action", [
    (node(), "drained", "drain"),
    (node(True, "gpuhost: PCI-001"), "drained", "none"),
    (node(True, "gpuhost: GPU-004"), "drained", "update_reason"),
    (node(True, "bad DIMM"), "drained", "none"),
    (node(True, None), "drained", "none"),
    (node(True, "gpuhost: PCI-001"), "resumed", "undrain"),
    (node(True, "gpuhost: PCI-001 GPU-004"), "resumed", "none"),  # GPU-004 not judged pass in this run
    (node(True, "bad DIMM"), "resumed", "none"),
    (node(True, "GPUHOST: PCI-001"), "resumed", "none"),
    (node(), "resumed", "none"),
    (dict(node(), reason="gpuhost: PCI-001"), "resumed", "none"),  # a reason left on an undrained node
])
def test_decide(before, state, action):
    decided, args, message = decide(before, state, "gpuhost: PCI-001" if state == "drained" else None,
                                    {"PCI-001": "pass", "GPU-004": "unknown"})
    assert decided == action, message
    assert (args is None) == (action == "none")
    if action == "undrain":
        assert args == ["update", "NodeName=gpu01", "State=UNDRAIN"]
    if action in ("drain", "update_reason"):
        assert args == ["update", "NodeName=gpu01", "State=DRAIN", "Reason=gpuhost: PCI-001"]


@pytest.mark.parametrize("reason, ids, more", [
    ("gpuhost: CPU-001 PCI-001", ["CPU-001", "PCI-001"], 0),
    ("gpuhost: CPU-001 +3 more", ["CPU-001"], 3),
    ("gpuhost:CPU-001", ["CPU-001"], 0),
    ("gpuhost: VAL-003", ["VAL-003"], 0),
    ("gpuhost:", None, 0),
    ("gpuhost: +3 more", None, 0),
    ("gpuhost: CPU-001; reboot", None, 0),
    ("bad DIMM", None, 0),
    (None, None, 0),
    (7, None, 0),
])
def test_reason_rule_ids(reason, ids, more):
    assert slurm.reason_rule_ids(reason) == (ids, more)


def test_a_drain_is_released_only_on_evidence():
    """Issue 40, item 3: every rule id of the drain reason judged pass (or waived) in this run."""
    reason = "gpuhost: CPU-001 VAL-003"
    assert slurm.missing_evidence(reason, {"CPU-001": "pass", "VAL-003": "waived", "X-1": "fail"}) == []
    assert slurm.missing_evidence(reason, {"CPU-001": "unknown", "VAL-003": "pass"}) == ["CPU-001 unknown"]
    # a plain audit after validate.yml: the VAL rule is not applicable, or not judged at all
    assert slurm.missing_evidence(reason, {"CPU-001": "pass", "VAL-003": "not_applicable"}) == \
        ["VAL-003 not applicable"]
    assert slurm.missing_evidence(reason, {"CPU-001": "pass"}) == ["VAL-003 not judged by this run"]
    assert slurm.missing_evidence(reason, {"CPU-001": "fail", "VAL-003": 5}) == \
        ["CPU-001 fail", "VAL-003 not judged by this run"]
    assert slurm.missing_evidence(reason, None) == ["no rule statuses of this run were given"]
    assert slurm.missing_evidence(reason, ["CPU-001"]) == ["no rule statuses of this run were given"]
    assert slurm.missing_evidence("gpuhost: CPU-001 +2 more", {"CPU-001": "pass"}) == \
        ["2 more rule ids not listed in the reason (cut at 200 characters)"]
    assert "names no rule ids" in slurm.missing_evidence("gpuhost: ???", {})[0]


def test_a_rewritten_drain_keeps_the_rules_without_evidence():
    drained = node(True, "gpuhost: CPU-001 PCI-001")
    # CPU-001 unknown now, PCI-001 passes, GPU-004 fails: the new reason keeps CPU-001
    assert merged_reason(drained, "gpuhost: GPU-004", ["GPU-004"], {"CPU-001": "unknown", "PCI-001": "pass"}) == \
        "gpuhost: CPU-001 GPU-004"
    assert merged_reason(drained, "gpuhost: GPU-004", ["GPU-004"], {"CPU-001": "pass", "PCI-001": "pass"}) == \
        "gpuhost: GPU-004"
    assert merged_reason(drained, "gpuhost: GPU-004", ["GPU-004"], None) == "gpuhost: GPU-004"
    assert merged_reason(node(True, "bad DIMM"), "gpuhost: GPU-004", ["GPU-004"], {}) == "gpuhost: GPU-004"
    assert merged_reason(node(), "gpuhost: GPU-004", ["GPU-004"], {}) == "gpuhost: GPU-004"


def test_decide_says_which_rules_lack_evidence():
    action, args, message = decide(node(True, "gpuhost: CPU-001 VAL-003"), "resumed", None,
                                   {"CPU-001": "unknown"})
    assert action == "none" and args is None
    assert message == ("gpu01 stays drained (gpuhost: CPU-001 VAL-003): no evidence that its rules pass now: "
                       "CPU-001 unknown; VAL-003 not judged by this run")
    action, args, message = decide(node(True, "gpuhost: CPU-001"), "resumed", None, None)
    assert action == "none" and "no rule statuses" in message
