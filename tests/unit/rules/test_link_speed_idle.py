"""PCI-005 does not judge the link speed of an idle GPU (issue 13, item 3: precision fixes).

GPUs lower their PCIe link speed to save power when idle (performance state P8 and lower power,
nvidia-smi's ``gpu_idle`` clocks event reason): a GPU captured idle at 2.5 GT/s says nothing about
its link. A busy GPU (P0) at 2.5 GT/s against a 16 or 32 GT/s capability does, and fails. A GPU
without a known performance state is judged as before. The width (PCI-004) is judged either way.
"""
import pytest

from helpers.baseline_facts import GPU0, GPU1, NIC, device, healthy_facts

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.nvidia import parse_smi_xml
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge import evaluation
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive import derive
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_pcie import gpu_link_states
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.snapshot.snapgen import nvsmi

GPU_NAME = "NVIDIA RTX PRO 6000 Blackwell Server Edition"


def _slow_gpu(facts, address, index, state, speed="2.5GT/s", cap="32GT/s", reasons=None):
    pcie = device(facts, address)["pcie"]
    pcie.update(link_speed=speed, link_cap_speed=cap)
    gpu = facts["nvidia"]["gpus"][index]
    if state is not None:
        gpu["performance_state"] = state
    if reasons is not None:
        gpu["clocks_event_reasons"]["active"] = reasons


def _pci005(facts):
    result = evaluation.evaluate(facts, params={"smt": "on"}, host="gpu01", today="2026-06-01")
    return dict((f["subject"], f) for f in result["findings"] if f["id"] == "PCI-005"), result


@pytest.mark.parametrize("state", ["P8", "P12", "P15"])
def test_idle_gpu_at_2_5_gts_is_not_judged(state):
    facts = healthy_facts()
    _slow_gpu(facts, GPU0, 0, state)
    findings, result = _pci005(facts)
    f = findings[GPU0]
    assert f["status"] == "not_applicable"
    assert f["message"] == "not judged: GPU idle (%s) on %s (%s)" % (state, GPU0, GPU_NAME)
    assert (f["expected"], f["observed"]) == (None, None)
    assert "PCI-005" not in result["failing_ids"]
    # the other GPU and the NIC are judged as usual
    assert findings[GPU1]["status"] == "pass" and findings[NIC]["status"] == "pass"


@pytest.mark.parametrize("capability", ["16GT/s", "32GT/s"])
def test_busy_gpu_at_2_5_gts_fails(capability):
    facts = healthy_facts()
    _slow_gpu(facts, GPU0, 0, "P0", cap=capability)
    findings, result = _pci005(facts)
    f = findings[GPU0]
    assert f["status"] == "fail"
    assert f["message"] == "link speed is 2.5GT/s, expected %s on %s (%s, P0)" % (capability, GPU0, GPU_NAME)
    assert (f["observed"], f["expected"]) == ("2.5GT/s", capability)
    assert "PCI-005" in result["failing_ids"]


def test_gpu_without_a_known_performance_state_is_judged_as_before():
    facts = healthy_facts()
    _slow_gpu(facts, GPU0, 0, None)  # the key is absent: an older collection's facts, no <performance_state>
    assert "performance_state" not in facts["nvidia"]["gpus"][0]
    findings, _unused = _pci005(facts)
    assert findings[GPU0]["status"] == "fail"
    assert findings[GPU0]["message"] == "link speed is 2.5GT/s, expected 32GT/s on %s (%s)" % (GPU0, GPU_NAME)
    # nvidia-smi said N/A (parsed as null), or no nvidia-smi at all: the same
    facts["nvidia"]["gpus"][0]["performance_state"] = None
    assert _pci005(facts)[0][GPU0]["status"] == "fail"
    facts["nvidia"]["gpus"] = []
    assert _pci005(facts)[0][GPU0]["status"] == "fail"


def test_power_readings_state_stands_in_for_a_missing_performance_state():
    facts = healthy_facts()
    _slow_gpu(facts, GPU0, 0, None)
    facts["nvidia"]["gpus"][0]["power"]["state"] = "P8"
    assert _pci005(facts)[0][GPU0]["message"].startswith("not judged: GPU idle (P8) on ")
    facts["nvidia"]["gpus"][0]["performance_state"] = "P0"  # the performance state wins
    assert _pci005(facts)[0][GPU0]["status"] == "fail"


def test_gpu_idle_clocks_event_reason_alone_is_idle():
    facts = healthy_facts()
    _slow_gpu(facts, GPU0, 0, "P0", reasons=["gpu_idle"])
    f = _pci005(facts)[0][GPU0]
    assert f["status"] == "not_applicable"
    assert f["message"].startswith("not judged: GPU idle (P0, clocks event reason gpu_idle) on ")


def test_busy_gpu_at_its_capable_speed_passes_with_its_state():
    facts = healthy_facts()
    facts["nvidia"]["gpus"][0]["performance_state"] = "P2"
    f = _pci005(facts)[0][GPU0]
    assert f["status"] == "pass" and f["message"].endswith("(%s, P2)" % GPU_NAME)


def test_idle_gpu_width_is_still_judged():
    facts = healthy_facts()
    _slow_gpu(facts, GPU0, 0, "P8")
    device(facts, GPU0)["pcie"]["link_width"] = 8
    result = evaluation.evaluate(facts, params={"smt": "on"}, host="gpu01", today="2026-06-01")
    (width,) = [f for f in result["findings"] if f["id"] == "PCI-004" and f["subject"] == GPU0]
    assert width["status"] == "fail"


def test_a_slow_nic_still_fails():
    facts = healthy_facts()
    _slow_gpu(facts, GPU0, 0, "P8")
    device(facts, NIC)["pcie"]["link_speed"] = "16GT/s"
    findings, _unused = _pci005(facts)
    assert findings[NIC]["status"] == "fail" and findings[GPU0]["status"] == "not_applicable"


def test_derived_fields():
    facts = healthy_facts()
    facts["nvidia"]["gpus"][0]["performance_state"] = "P8"
    facts["nvidia"]["gpus"][1]["performance_state"] = "garbage"
    pcie = derive(facts, {})["derived"]["pcie"]
    gpus = dict((g["address"], g) for g in pcie["gpus"])
    assert (gpus[GPU0]["performance_state"], gpus[GPU0]["idle"], gpus[GPU0]["idle_reason"]) == \
        ("P8", True, "GPU idle (P8)")
    assert (gpus[GPU1]["performance_state"], gpus[GPU1]["idle"], gpus[GPU1]["idle_reason"]) == (None, False, None)
    speeds = dict((d["address"], d) for d in pcie["link_speed"])
    assert speeds[GPU0]["not_applicable"] == "not judged: GPU idle (P8)"
    assert speeds[GPU1]["not_applicable"] is None
    # the other PCIe rules' subjects are untouched by idleness
    assert all(d["not_applicable"] is None for d in pcie["peer_devices"])


ODD_GPUS = [None, 3, {"bus_id": 7}, {"bus_id": "0000:43:00.0", "performance_state": 8},
            {"bus_id": "0000:44:00.0", "performance_state": "P\u00b2"}]


@pytest.mark.parametrize("gpus", [None, "garbage", ODD_GPUS])
def test_odd_nvidia_facts_never_raise(gpus):
    facts = healthy_facts()
    facts["nvidia"]["gpus"] = gpus
    states = gpu_link_states(facts)
    assert all(s["idle_reason"] is None for s in states.values())


# -- the demo generator expresses the state (plugins/plugin_utils/snapshot/snapgen/nvsmi.py) ---------------------------

def _gpu(index, **kwargs):
    return nvsmi.Gpu(index, "0000:%02x:00.0" % (0x43 + index), GPU_NAME, "GPU-%d" % index, "1", **kwargs)


def test_snapgen_performance_state_reaches_the_facts():
    gpus = [_gpu(0, gen_current=1), _gpu(1, gen_current=1, performance_state="P0"),
            _gpu(2, processes=({"pid": 1, "name": "python3", "used_memory_mib": 10},))]
    parsed = parse_smi_xml(nvsmi.smi_xml(gpus, "575.57.08", "12.9", "Wed Jan 15 03:12:00 2025"))
    # idle by default, the given state, and P1 for a GPU with a process
    assert [g["performance_state"] for g in parsed["gpus"]] == ["P8", "P0", "P1"]


def test_busy_gen5_gpu_at_gen4_is_at_least_medium():
    """Issue 21 item 5: a busy Gen5 GPU trained at Gen4 has half its host-to-device bandwidth; the
    finding is at least medium (it was info). An idle one at Gen4 stays not judged."""
    facts = healthy_facts()
    _slow_gpu(facts, GPU0, 0, "P0", speed="16GT/s", cap="32GT/s")
    f = _pci005(facts)[0][GPU0]
    assert f["status"] == "fail" and f["severity"] in ("medium", "high", "critical")
    _slow_gpu(facts, GPU0, 0, "P8", speed="16GT/s", cap="32GT/s")
    assert _pci005(facts)[0][GPU0]["status"] == "not_applicable"
