"""A driver that stops answering must not hide the GPUs (issue 10, item 8).

The incident demo snapshot has 8 Blackwell GPUs on the PCI bus and the nvidia module loaded.
Without usable ``nvidia-smi -q -x`` output the per-GPU NVIDIA rules used to find no subjects
(not_applicable) and the host's 16 NVIDIA fails disappeared. Now the GPUs known from the bus
are the subjects (``derived.nvidia.gpus``): the rules give ``unknown`` with the reason from the
facts, and NVIDIA-010 fails. Facts are gathered from a copy of the snapshot, as the audit does.
"""
import os
import re
import shutil

import pytest

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.gather import gather_facts
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge.evaluation import evaluate

TODAY = "2026-06-01"
SMI_XML = os.path.join("commands", "nvidia-smi-q.xml")
BUS_GPUS = ["0000:43:00.0", "0000:44:00.0", "0000:47:00.0", "0000:48:00.0",
            "0000:c3:00.0", "0000:c4:00.0", "0000:c7:00.0", "0000:c8:00.0"]
PER_GPU_UNKNOWN = ("NVIDIA-004", "NVIDIA-005", "NVIDIA-007", "NVIDIA-008", "NVIDIA-009")
GARBAGE = "\x00\x1bNVIDIA-SMI has failed <<< garbage\n"


def _copy(snapshot_trees, tmp_path, name="incident"):
    dest = tmp_path / name
    shutil.copytree(snapshot_trees[name], str(dest), symlinks=True)
    return dest


def _audit(path):
    facts = gather_facts(Root(str(path)))
    return facts, evaluate(facts, profile="auto", host="gpu-incident", today=TODAY)


def _of(result, rule_id):
    return [f for f in result["findings"] if f["id"] == rule_id]


def _break_smi(tree, how):
    xml = tree / SMI_XML
    if how == "deleted":
        xml.unlink()
    elif how == "garbage":
        xml.write_text(GARBAGE)
    else:
        xml.write_text("")


@pytest.mark.parametrize("how, reason_part", [
    ("deleted", "nvidia-smi-q.xml"),
    ("garbage", "no <nvidia_smi_log> document"),
    ("empty", "no <nvidia_smi_log> document (0 bytes)"),
])
def test_silent_nvidia_smi_gives_unknown_per_gpu_and_fails_nvidia_010(snapshot_trees, tmp_path, how, reason_part):
    tree = _copy(snapshot_trees, tmp_path)
    _break_smi(tree, how)
    facts, result = _audit(tree)
    assert facts["nvidia"]["present"] is True and facts["nvidia"]["gpus"] == []
    smi_error = facts["nvidia"]["smi"]["error"]
    assert reason_part in smi_error
    assert any(e["subsystem"] == "nvidia" and e["reason"] == smi_error for e in facts["errors"])

    for rule_id in PER_GPU_UNKNOWN:
        findings = _of(result, rule_id)
        assert [f["subject"] for f in findings] == BUS_GPUS, rule_id
        for f in findings:
            assert f["status"] == "unknown", (rule_id, f["message"])
            assert "nvidia-smi reports no GPU: " + smi_error in f["message"]
            assert f["message"].endswith("on %s (NVIDIA 0x2bb5 GPU%s)" % (
                f["subject"], ", current null, pending null" if rule_id == "NVIDIA-005" else ""))

    # the loaded module still tells the driver version: NVIDIA-001 is judged, not hidden
    driver = _of(result, "NVIDIA-001")
    assert [f["subject"] for f in driver] == BUS_GPUS
    assert all(f["status"] == "pass" and f["observed"] == "570.133.07" for f in driver)

    (silent,) = _of(result, "NVIDIA-010")
    assert silent["status"] == "fail" and silent["severity"] == "high" and silent["fix_action"] == "manual"
    assert silent["message"] == (
        "GPUs missing from nvidia-smi: nvidia-smi reports 0 of the 8 NVIDIA GPUs on the PCI bus, not %s: %s"
        % (", ".join(BUS_GPUS), smi_error))
    assert "NVIDIA-010" in result["failing_ids"]
    # nothing of the NVIDIA area turned not_applicable, the multi-GPU ECC comparison included: it is
    # unknown with a GPU's reason (issue 21)
    not_applicable = set(f["id"] for f in result["findings"]
                         if f["area"] == "nvidia" and f["status"] == "not_applicable")
    assert not_applicable == set()
    (ecc,) = [f for f in result["findings"] if f["id"] == "NVIDIA-006"]
    assert ecc["status"] == "unknown" and reason_part in ecc["message"]


def test_one_gpu_missing_from_nvidia_smi(snapshot_trees, tmp_path):
    tree = _copy(snapshot_trees, tmp_path)
    xml = tree / SMI_XML
    text = xml.read_text()
    gpus = list(re.finditer(r"<gpu id=\"[^\"]*\">.*?</gpu>\s*", text, re.S))
    assert len(gpus) == 8
    last = gpus[-1]
    xml.write_text(text[:last.start()] + text[last.end():])   # attached_gpus still says 8
    facts, result = _audit(tree)
    assert len(facts["nvidia"]["gpus"]) == 7 and facts["nvidia"]["smi"]["error"] is None

    (silent,) = _of(result, "NVIDIA-010")
    assert silent["status"] == "fail"
    assert silent["observed"] == ["nvidia-smi reports 7 of the 8 NVIDIA GPUs on the PCI bus, not 0000:c8:00.0: "
                                  "the driver does not report them"]
    for rule_id in PER_GPU_UNKNOWN:
        findings = _of(result, rule_id)
        assert [f["subject"] for f in findings] == BUS_GPUS
        (lost,) = [f for f in findings if f["subject"] == "0000:c8:00.0"]
        assert lost["status"] == "unknown"
        assert "nvidia-smi -q -x does not list this GPU (it reports 7 of the 8 NVIDIA GPUs on the PCI bus)" \
            in lost["message"]
    # the seven GPUs nvidia-smi reports are judged as before (the incident's persistence and power fails)
    assert len([f for f in _of(result, "NVIDIA-004") if f["status"] == "fail"]) == 7
    assert len([f for f in _of(result, "NVIDIA-007") if f["status"] == "fail"]) == 7


def test_answering_driver_passes_nvidia_010_and_keeps_the_incident_fails(snapshot_trees):
    _facts, result = _audit(snapshot_trees["incident"])
    (ok,) = _of(result, "NVIDIA-010")
    assert (ok["status"], ok["message"]) == ("pass", "GPUs missing from nvidia-smi: none")
    for rule_id in ("NVIDIA-004", "NVIDIA-007"):
        findings = _of(result, rule_id)
        assert [f["status"] for f in findings] == ["fail"] * 8
        assert all(re.search(r"\(GPU\d NVIDIA ", f["message"]) for f in findings)


def test_host_without_nvidia_gpu_or_driver_stays_not_applicable(snapshot_trees):
    facts, result = _audit(snapshot_trees["intel"])
    assert facts["nvidia"]["present"] is False
    for f in result["findings"]:
        if f["area"] == "nvidia":
            assert f["status"] == "not_applicable", (f["id"], f["message"])
