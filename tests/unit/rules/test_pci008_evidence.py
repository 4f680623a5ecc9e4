# -*- coding: utf-8 -*-
"""PCI-008 fails only on evidence that a MaxReadReq is lost at reboot (issue 12, item 4): a boot
mechanism that sets another value, the collection's script for the device with its unit not
running, pci=pcie_bus_perf capping it, or another value earlier in the same boot (the history)."""
import pytest

from helpers.baseline_facts import GPU0, NIC, device, healthy_facts

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge.evaluation import evaluate
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_load import load_catalogue
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.history import earlier_in_boot, make_record

BOOT = "3f2a6c1e-9b7d-4e25-8c41-0d6f1a2b3c4d"
EARLIER = "2025-08-01T10:00:00+00:00"
#: the values the rules keep for the later audits of a boot (their history_as)
KEPT = load_catalogue().history_values()


def no_boot_mechanism(facts):
    """The pcie_tune script, unit and udev rule removed (a host tuned in its BIOS)."""
    facts["persistence"]["pcie"] = {
        "script": {"path": "/usr/local/sbin/gpuhost-pcie-apply", "present": False, "managed": False, "entries": 0},
        "unit": {"path": "/etc/systemd/system/gpuhost-pcie.service", "present": False, "masked": False,
                 "runs_script": False, "exec_start": [], "wanted_by": []},
        "enabled": False, "udev": {"path": "/etc/udev/rules.d/90-gpuhost-pcie.rules", "present": False, "devices": []},
        "active": False, "devices": {}}
    facts["kernel"]["boot_id"] = BOOT
    return facts


def with_history(facts, gpu0_values, boot=BOOT):
    records = [make_record("gpu01", [{"id": "PCI-001", "subject": GPU0, "status": "pass", "observed": value}],
                           "2025-08-01T%02d:00:00+00:00" % (10 + i), boot_id=boot)
               for i, value in enumerate(gpu0_values)]
    facts["history"] = earlier_in_boot(records, facts["kernel"]["boot_id"], source="/hist/gpu01.jsonl", rules=KEPT)
    return facts


def pci008(facts, subject=GPU0):
    result = evaluate(facts, profile="amd-epyc-nvidia", host="gpu01", today="2026-06-01")
    (found,) = [f for f in result["findings"] if f["id"] == "PCI-008" and f["subject"] == subject]
    return found, result


def test_firmware_set_value_without_history_passes_naming_what_was_checked():
    f, result = pci008(no_boot_mechanism(healthy_facts()))
    assert f["status"] == "pass"
    assert ("no evidence the running 4096 B is lost at reboot: /usr/local/sbin/gpuhost-pcie-apply is not installed, "
            "no pci=pcie_bus_perf on the configured kernel command line, no audit history to compare with "
            "(gpuhost_history_dir is not set)") in f["message"]
    assert "pcie_mrrs" not in result["fix_plan"] or GPU0 not in result["fix_plan"]["pcie_mrrs"]["gpu"]


def test_same_value_all_boot_long_passes():
    f, dummy = pci008(with_history(no_boot_mechanism(healthy_facts()), [4096, 4096]))
    assert f["status"] == "pass"
    assert "the audit history shows 4096 B at all 2 earlier audits of this boot (since %s)" % EARLIER in f["message"]


def test_another_value_earlier_in_this_boot_fails_and_says_why():
    f, result = pci008(with_history(no_boot_mechanism(healthy_facts()), [512, 512]))
    assert f["status"] == "fail"
    assert ("MaxReadReq was 512 B at the audit of %s earlier in this boot and is 4096 B now: it was changed at "
            "runtime and nothing sets it at boot (/usr/local/sbin/gpuhost-pcie-apply is not installed), so the "
            "running 4096 B would be lost at reboot" % EARLIER) in f["message"]
    assert GPU0 in result["fix_plan"]["pcie_mrrs"]["gpu"]
    # the other GPU has no history entry: no evidence, it passes
    other, dummy = pci008(with_history(no_boot_mechanism(healthy_facts()), [512]), subject=NIC)
    assert other["status"] == "pass"


def test_history_of_another_boot_is_no_evidence():
    facts = no_boot_mechanism(healthy_facts())
    records = [make_record("gpu01", [{"id": "PCI-001", "subject": GPU0, "status": "fail", "observed": 512}],
                           EARLIER, boot_id="9c0d1e2f-3a4b-4c5d-8e6f-7a8b9c0d1e2f")]
    facts["history"] = earlier_in_boot(records, BOOT, rules=KEPT)
    f, dummy = pci008(facts)
    assert f["status"] == "pass" and "no earlier audit of this boot in the audit history" in f["message"]


def test_boot_id_unknown_is_no_evidence_and_says_so():
    facts = with_history(no_boot_mechanism(healthy_facts()), [512])
    facts["kernel"]["boot_id"] = None
    facts["history"] = earlier_in_boot([], None, rules=KEPT)
    f, dummy = pci008(facts)
    assert f["status"] == "pass" and "audit history not usable: this boot's id is unknown" in f["message"]


def test_lowered_at_runtime_below_the_parameter_loses_nothing_wanted():
    facts = with_history(no_boot_mechanism(healthy_facts()), [4096])
    device(facts, GPU0)["pcie"]["max_read_request"] = 512
    f, dummy = pci008(facts)
    assert f["status"] == "pass" and "below 4096 B (the MaxReadReq rule fails that)" in f["message"]


def test_boot_script_with_a_smaller_value_fails_without_history():
    facts = healthy_facts()
    facts["persistence"]["pcie"]["devices"][GPU0]["max_read_request"] = 512
    f, dummy = pci008(facts)
    assert f["status"] == "fail" and "sets MaxReadReq 512 B, below 4096 B" in f["message"]


@pytest.mark.parametrize("change, words", [
    ({"enabled": False}, "is not enabled"),
    ({"unit": {"path": "/etc/systemd/system/gpuhost-pcie.service", "present": True, "masked": True,
               "runs_script": True}}, "is masked"),
])
def test_the_collections_script_with_its_unit_not_running_fails(change, words):
    facts = healthy_facts()
    facts["persistence"]["pcie"].update(change)
    f, dummy = pci008(facts)
    assert f["status"] == "fail" and words in f["message"] and "would be lost at reboot" in f["message"]


def test_pcie_bus_perf_caps_it_at_boot():
    facts = no_boot_mechanism(healthy_facts())
    facts["kernel"]["configured_cmdline"]["params"]["pci"] = "noaer,pcie_bus_perf"
    f, dummy = pci008(facts)
    assert f["status"] == "fail"
    assert "pci=pcie_bus_perf on the configured kernel command line sets MaxReadReq to at most MaxPayload (256 B)" \
        in f["message"]


def test_running_value_unknown_without_a_boot_mechanism_is_unknown():
    facts = no_boot_mechanism(healthy_facts())
    device(facts, GPU0)["pcie"]["max_read_request"] = None
    f, dummy = pci008(facts)
    assert f["status"] == "unknown" and "running MaxReadReq unknown" in f["message"]


@pytest.mark.parametrize("garbage", [None, "text", [], {"audits": "x"}, {"audits": 2, "earlier": "x"},
                                     {"audits": 2, "earlier": {"max_read_request": {GPU0: ["x", {"value": "y"}]}}}])
def test_a_garbage_history_key_is_no_evidence_never_a_traceback(garbage):
    facts = no_boot_mechanism(healthy_facts())
    facts["history"] = garbage
    f, dummy = pci008(facts)
    assert f["status"] == "pass"


def test_a_low_firmware_value_without_history_is_the_max_read_request_rules_problem():
    facts = no_boot_mechanism(healthy_facts())
    device(facts, GPU0)["pcie"]["max_read_request"] = 512
    f, result = pci008(facts)
    assert f["status"] == "pass"
    assert ("nothing wanted to lose at reboot: the running 512 B is below 4096 B (the MaxReadReq rule fails that) "
            "and nothing sets it at boot (/usr/local/sbin/gpuhost-pcie-apply is not installed)") in f["message"]
    assert [x["status"] for x in result["findings"] if x["id"] == "PCI-001" and x["subject"] == GPU0] == ["fail"]


def test_the_rules_say_which_values_the_history_keeps():
    """PCI-001 and PCI-002 keep their MaxReadReq per device for PCI-008 by rule data (history_as),
    not by a list in the history code (issue 35); without it no value is kept."""
    assert KEPT == {"max_read_request": ("PCI-001", "PCI-002")}
    records = [make_record("gpu01", [{"id": "PCI-001", "subject": GPU0, "status": "pass", "observed": 512}],
                           EARLIER, boot_id=BOOT)]
    assert earlier_in_boot(records, BOOT)["earlier"] == {}
    assert earlier_in_boot(records, BOOT, rules=KEPT)["earlier"]["max_read_request"][GPU0][0]["value"] == 512
