"""The evaluator: operators, unknown/not_applicable paths, waivers, profiles, parameters,
rejection of malformed catalogues, and the action plugins run through ansible-playbook."""
import datetime
import json
import os
import subprocess
import sys
import textwrap

import pytest

from helpers.baseline_facts import GPU0, GPU1, device, healthy_facts
from helpers.catalogue_tree import copy_catalogue, edit

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue import catalogue_load, catalogue_model, catalogue_params
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge import evaluation
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import findings
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_model import CatalogueError

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
TODAY = "2026-06-01"


def evaluate(facts=None, **kwargs):
    kwargs.setdefault("host", "gpu01")
    kwargs.setdefault("today", TODAY)
    kwargs.setdefault("params", {"smt": "on"})
    return evaluation.evaluate(healthy_facts() if facts is None else facts, **kwargs)


def of(result, rule_id):
    return [f for f in result["findings"] if f["id"] == rule_id]


# -- comparisons -------------------------------------------------------------------------------

@pytest.mark.parametrize("a, b, expected", [
    ("570.133.07", "575", -1),
    ("575.57.08", "575", 1),
    ("575", "575.0.0", 0),
    ("12.8", "12.10", -1),
    ("12.10", "12.8", 1),
    ("13.0", "12.9", 1),
    ("v1.2", "1.2", 0),
    (12.8, "12.8", 0),
    ("N/A", "12.8", None),
    (None, "1", None),
    (True, "1", None),
])
def test_compare_versions(a, b, expected):
    assert evaluation.compare_versions(a, b) == expected


@pytest.mark.parametrize("op, observed, expected, passed", [
    ("equals", 0, 0, True), ("equals", 1, 0, False),
    ("not_equals", "x", "y", True), ("not_equals", "y", "y", False),
    ("in", "madvise", ["always", "madvise"], True), ("in", "never", ["always", "madvise"], False),
    ("not_in", "a", ["b"], True), ("not_in", "b", ["b"], False),
    ("min", 4096, 4096, True), ("min", 512, 4096, False), ("min", 8.6, 5, True),
    ("max", 10, 10, True), ("max", 60, 10, False),
    ("min_version", "575.57.08", "570.124.06", True), ("min_version", "565.57.01", "570.124.06", False),
    ("min_kernel", "6.14.8-2-pve", "6.14", True), ("min_kernel", "6.8.12-4-pve", "6.14", False),
    ("min_kernel", "5.14.0-503.el9.x86_64", "5.14.0-427.el9", True),
    ("all_equal", {"performance": 128}, "performance", True), ("all_equal", {"performance": 1, "powersave": 1}, "performance", False),
    ("all_equal", ["a", "a"], "a", True),
    ("all_in", {"amd-pstate-epp": 4}, ["amd-pstate", "amd-pstate-epp"], True), ("all_in", {"acpi-cpufreq": 4}, ["amd-pstate"], False),
    ("uniform", {"Enabled": 8}, "uniform", True), ("uniform", {"Enabled": 7, "Disabled": 1}, "uniform", False),
    ("empty", [], [], True), ("empty", ["C2"], [], False), ("empty", {}, [], True),
    ("true", True, True, True), ("true", False, True, False), ("false", False, False, True),
])
def test_operators(op, observed, expected, passed):
    assert evaluation._judge(op, observed, expected, "", "x")[0] is passed


@pytest.mark.parametrize("op, observed, expected", [
    ("min", "512", 4096),            # a string is not a number
    ("min", True, 1),                # nor is a boolean
    ("min_kernel", "garbage", "6.14"),
    ("min_version", "N/A", "12.8"),
    ("all_equal", {}, "performance"),  # nothing to judge
    ("all_equal", "performance", "performance"),
    ("empty", "x", []),
    ("true", "yes", True),
])
def test_operators_cannot_judge_wrong_types(op, observed, expected):
    assert evaluation._judge(op, observed, expected, "", "x")[0] is None


# -- statuses ----------------------------------------------------------------------------------

def test_unknown_surfaces_the_device_error():
    facts = healthy_facts()
    dev = device(facts, GPU0)
    dev.update(pcie=None, acs=None, aer=None,
               error="config space is 64 bytes: capabilities need root; run with become: true")
    result = evaluate(facts)
    (f,) = [f for f in of(result, "PCI-001") if f["subject"] == GPU0]
    assert f["status"] == "unknown"
    assert "config space is 64 bytes: capabilities need root; run with become: true" in f["message"]
    assert f["observed"] is None
    assert [x["status"] for x in of(result, "PCI-001") if x["subject"] == GPU1] == ["pass"]
    assert "fail" not in set(x["status"] for x in result["findings"] if x["subject"] == GPU0)


def test_unknown_default_reason_names_the_file():
    facts = healthy_facts()
    facts["kernel"]["sysctl"]["numa_balancing"] = None
    (f,) = of(evaluate(facts), "NUMA-001")
    assert f["status"] == "unknown"
    assert f["message"] == "kernel.numa_balancing unknown: no value from /proc/sys/kernel/numa_balancing"
    # with the reader's error for that file, its reason is quoted
    facts["errors"] = [{"subsystem": "kernel", "path": "/proc/sys/kernel/numa_balancing", "reason": "empty file"}]
    (f,) = of(evaluate(facts), "NUMA-001")
    assert f["message"] == "kernel.numa_balancing unknown: no value from /proc/sys/kernel/numa_balancing: empty file"


def test_subsystem_not_gathered_is_unknown_not_not_applicable():
    facts = healthy_facts()
    del facts["nvidia"]
    result = evaluate(facts)
    (f,) = of(result, "NVIDIA-004")
    assert f["status"] == "unknown"
    assert "nvidia facts were not gathered" in f["message"]


def test_subsystem_that_crashed_reports_the_error():
    facts = healthy_facts()
    facts["cpu"] = None
    facts["errors"] = [{"subsystem": "cpu", "path": "/snap", "reason": "internal error while gathering cpu: boom"}]
    (f,) = of(evaluate(facts), "CPU-005")
    assert f["status"] == "unknown"
    assert "gathering cpu failed: internal error while gathering cpu: boom" in f["message"]


def test_jmespath_type_errors_on_odd_facts_give_unknown():
    facts = healthy_facts()
    facts["cpu"]["cpufreq"]["driver"] = "not-a-mapping"
    facts["cpu"]["amd_pstate"]["status"] = None
    result = evaluate(facts)
    (driver,) = of(result, "CPU-001")
    (mode,) = of(result, "CPU-002")
    assert driver["status"] == "unknown" and mode["status"] == "unknown"


def test_empty_subject_list_is_not_applicable():
    facts = healthy_facts()
    facts["lxc"]["containers"] = []
    (f,) = of(evaluate(facts), "LXC-001")
    assert f["status"] == "not_applicable"
    assert f["message"] == "nothing to check on this host (no LXC containers with a GPU)"  # the rule's no_subjects


def test_pending_flag_when_newer_kernel_is_installed():
    facts = healthy_facts()
    facts["kernel"]["release"] = "6.8.12-4-pve"
    result = evaluate(facts)
    (k1,) = of(result, "KERNEL-001")
    (k6,) = of(result, "KERNEL-006")
    assert k1["status"] == "fail" and k1["pending"] is True
    assert k1["message"].endswith("pending: 6.14.8-2-pve is installed, reboot into it")
    assert k6["status"] == "fail" and k6["pending"] is True
    assert any("[pending]" in line for line in result["failing"])


def test_not_pending_without_a_fix_in_place():
    facts = healthy_facts()
    facts["kernel"]["release"] = "6.8.12-4-pve"
    facts["kernel"]["installed"] = ["6.8.12-4-pve"]
    (k1,) = of(evaluate(facts), "KERNEL-001")
    assert k1["status"] == "fail" and k1["pending"] is False


def test_summary_counts_every_status():
    result = evaluate(params={})
    assert set(result["summary"]) == {"pass", "fail", "unknown", "waived", "not_applicable"}
    assert sum(result["summary"].values()) == len(result["findings"])
    inventory = [f for f in result["findings"] if f["area"] == "inventory"]  # the profile holds no golden inventory
    assert inventory and all(f["status"] == "not_applicable" for f in inventory)
    # HEALTH-006, HEALTH-014, HEALTH-015 and HEALTH-017 (Fabric Manager, SXid: no NVSwitch here), HEALTH-010
    # (nccl_nic_per_gpu off by default), HEALTH-016 (the previous boot is read only with kernel_log_boots 2),
    # HEALTH-020/021 (no InfiniBand port, no AER-capable function here), HEALTH-024 (these facts hold no health
    # section that saw an NVIDIA GPU, and nvidia-smi was not cut off)
    health = [f["id"] for f in result["findings"] if f["area"] == "health" and f["status"] == "not_applicable"]
    assert sorted(health) == ["HEALTH-006", "HEALTH-010", "HEALTH-014", "HEALTH-015", "HEALTH-016", "HEALTH-017",
                              "HEALTH-020", "HEALTH-021", "HEALTH-024"]
    assert [f["id"] for f in result["findings"] if f["area"] == "validation" and f["status"] != "pass"] == []
    assert result["summary"]["not_applicable"] == 1 + len(inventory) + len(health)  # CPU-007 with smt: any


def test_findings_have_the_report_keys():
    keys = {"id", "title", "area", "kind", "severity", "status", "subject", "expected", "observed", "message", "fix",
            "reboot_required", "rationale", "source", "fix_action", "pending", "waiver"}
    for f in evaluate()["findings"]:
        assert set(f) == keys
        json.dumps(f)


def test_host_report_leaves_rule_text_out_and_expand_puts_it_back():
    facts = healthy_facts()
    result = evaluate(facts)
    part = evaluation.host_report(facts, result, before=result["findings"])
    for f in part["findings"] + part["before"]["findings"]:
        assert not set(findings.RULE_TEXT_FIELDS) & set(f)
        assert {"id", "status", "subject", "expected", "observed", "message", "pending", "waiver"} <= set(f)
    assert len(json.dumps(part)) < len(json.dumps(result["findings"]))
    expanded = findings.expand_findings(part["findings"])
    assert expanded == result["findings"]
    assert [list(f) for f in expanded] == [list(f) for f in result["findings"]]  # same key order


def test_expand_keeps_what_it_cannot_or_need_not_fill():
    full = evaluate()["findings"][0]
    custom = dict(full, title="site title")
    odd = {"id": "SITE-999", "status": "fail"}
    out = findings.expand_findings([custom, odd, "garbage"])
    assert out[0]["title"] == "site title"
    assert out[1:] == [odd, "garbage"]
    assert findings.compact_findings(None) == []


# -- waivers -----------------------------------------------------------------------------------

def _low_free_node1():
    facts = healthy_facts()
    facts["numa"]["nodes"][0]["free_pct"] = 1.0
    facts["numa"]["nodes"][1]["free_pct"] = 2.0
    return facts


def test_valid_waiver_keeps_the_finding_visible():
    waiver = {"rule": "NUMA-003", "reason": "model cache", "expires": "2026-12-31"}
    result = evaluate(_low_free_node1(), waivers=[waiver])
    statuses = [(f["subject"], f["status"]) for f in of(result, "NUMA-003")]
    assert statuses == [("node0", "waived"), ("node1", "waived")]
    f = of(result, "NUMA-003")[0]
    assert f["waiver"] == {"reason": "model cache", "expires": "2026-12-31", "hosts": ["*"], "subjects": None,
                           "expired": False}
    assert f["message"].startswith("waived until 2026-12-31: model cache; free memory 1 % < 5 %")
    assert result["summary"]["waived"] == 2


def test_waiver_is_valid_through_its_expiry_day():
    waiver = {"rule": "NUMA-003", "reason": "r", "expires": TODAY}
    assert set(f["status"] for f in of(evaluate(_low_free_node1(), waivers=[waiver]), "NUMA-003")) == {"waived"}


def test_expired_waiver_is_a_fail_and_says_so():
    waiver = {"rule": "NUMA-003", "reason": "until the DIMM swap", "expires": datetime.date(2026, 1, 31)}
    result = evaluate(_low_free_node1(), waivers=[waiver])
    for f in of(result, "NUMA-003"):
        assert f["status"] == "fail"
        assert f["message"].startswith("waiver expired 2026-01-31: until the DIMM swap; free memory")
        assert f["waiver"]["expired"] is True


def test_subject_scoped_waiver():
    waiver = {"rule": "NUMA-003", "subjects": ["node1"], "reason": "r", "expires": "2026-12-31"}
    statuses = dict((f["subject"], f["status"]) for f in of(evaluate(_low_free_node1(), waivers=[waiver]), "NUMA-003"))
    assert statuses == {"node0": "fail", "node1": "waived"}


def test_host_scoped_waiver():
    waiver = {"rule": "NUMA-003", "hosts": ["gpu1*"], "reason": "r", "expires": "2026-12-31"}
    assert set(f["status"] for f in of(evaluate(_low_free_node1(), waivers=[waiver]), "NUMA-003")) == {"fail"}
    result = evaluate(_low_free_node1(), waivers=[waiver], host="gpu12")
    assert set(f["status"] for f in of(result, "NUMA-003")) == {"waived"}


def test_waiver_does_not_touch_passing_findings():
    waiver = {"rule": "NUMA-001", "reason": "r", "expires": "2026-12-31"}
    (f,) = of(evaluate(waivers=[waiver]), "NUMA-001")
    assert f["status"] == "pass" and f["waiver"] is None


def test_valid_waiver_wins_over_an_expired_one():
    waivers = [{"rule": "NUMA-003", "reason": "old", "expires": "2025-01-01"},
               {"rule": "NUMA-003", "reason": "new", "expires": "2026-12-31"}]
    f = of(evaluate(_low_free_node1(), waivers=waivers), "NUMA-003")[0]
    assert f["status"] == "waived" and f["waiver"]["reason"] == "new"


# -- profiles and parameters ---------------------------------------------------------------------

def test_auto_selects_amd_profile_for_epyc_with_nvidia():
    assert evaluate()["profile"] == "amd-epyc-nvidia"


def test_auto_falls_back_to_generic_for_intel():
    facts = healthy_facts()
    facts["cpu"].update(vendor="GenuineIntel", family=6)
    result = evaluate(facts)
    assert result["profile"] == "generic-nvidia-inference"
    assert not of(result, "CPU-001")


def test_auto_needs_nvidia_for_the_amd_profile():
    facts = healthy_facts()
    facts["nvidia"]["present"] = False
    facts["pci"]["devices"] = [d for d in facts["pci"]["devices"] if d["kind"] != "gpu"]
    # no NVIDIA GPU on the bus and no driver: a CPU node (issue 37 item 1)
    assert evaluate(facts)["profile"] == "cpu-node"


def test_a_host_without_nvidia_gpus_is_judged_as_a_cpu_node_with_no_gpu_motivated_rule():
    facts = healthy_facts()
    facts["nvidia"]["present"] = False
    facts["pci"]["devices"] = [d for d in facts["pci"]["devices"] if d["kind"] != "gpu"]
    # what made the demo's Intel CPU node fail under the GPU profile
    for device in facts["pci"]["devices"]:
        if device["kind"] == "nic":
            device["pcie"]["max_read_request"] = 512
    facts["cpu"]["cpufreq"]["governor"] = {"powersave": facts["cpu"]["cpufreq"]["policies"]}
    result = evaluate(facts)
    assert result["profile"] == "cpu-node"
    assert [f["id"] for f in result["findings"] if f["status"] == "fail"] == []
    ids = set(f["id"] for f in result["findings"])
    assert not ids & {"IOMMU-001", "IOMMU-002", "PCI-001", "PCI-002", "PCI-006", "PCI-008", "CPU-003", "CPU-006"}
    assert {"KERNEL-001", "NUMA-001", "PCI-007", "CPU-007", "HEALTH-011"} <= ids
    # the same host under the GPU profile, named: those fail
    named = evaluate(facts, profile="generic-nvidia-inference")
    assert {"PCI-002", "CPU-003"} <= set(f["id"] for f in named["findings"] if f["status"] == "fail")


@pytest.mark.parametrize("change", ["driver_only", "gpu_on_the_bus_only", "bus_unreadable"])
def test_a_host_that_may_have_a_gpu_is_no_cpu_node(change):
    facts = healthy_facts()
    if change == "driver_only":  # the driver loaded, its GPU not (yet) on the bus
        facts["pci"]["devices"] = [d for d in facts["pci"]["devices"] if d["kind"] != "gpu"]
    elif change == "gpu_on_the_bus_only":  # the driver not loaded: the GPU is still an NVIDIA GPU host
        facts["nvidia"]["present"] = False
    else:  # the PCI bus could not be read: nothing says the host has no GPU
        facts["nvidia"]["present"] = False
        facts["pci"]["devices"] = None
    assert evaluate(facts)["profile"] != "cpu-node"


def test_auto_selects_amd_profile_from_pci_ids_without_driver():
    facts = healthy_facts()
    facts["nvidia"]["present"] = None
    assert evaluate(facts)["profile"] == "amd-epyc-nvidia"


def test_profile_by_name_and_unknown_name():
    assert evaluate(profile="generic-nvidia-inference")["profile"] == "generic-nvidia-inference"
    with pytest.raises(CatalogueError, match=r"unknown profile 'epyc': known profiles are "
                                             r"amd-epyc-nvidia, cpu-node, generic-nvidia-inference, or auto"):
        evaluate(profile="epyc")


def test_parameter_override_changes_the_outcome():
    (f,) = of(evaluate(params={"kernel_min": "6.15"}), "KERNEL-001")
    assert f["status"] == "fail" and f["expected"] == "6.15"
    # (8192 B was used here before: no PCIe device can take it, and parameters are range-checked now)
    facts = healthy_facts()
    for dev in facts["pci"]["devices"]:
        if dev.get("kind") == "gpu":
            dev["pcie"]["max_read_request"] = 512
    assert set(f["status"] for f in of(evaluate(facts), "PCI-001")) == {"fail"}
    result = evaluate(facts, params={"max_read_request_bytes_gpu": 512})
    assert set(f["status"] for f in of(result, "PCI-001")) == {"pass"}
    assert result["params"]["max_read_request_bytes_gpu"] == 512
    assert result["params"]["kernel_min_cpu"]["zen5"] == "6.14"


def test_mapping_parameter_merges_one_level():
    result = evaluate(params={"nvidia_driver_min": {"blackwell": "580.65.06"}})
    assert result["params"]["nvidia_driver_min"]["hopper"] == "535.54.03"
    assert set(f["status"] for f in of(result, "NVIDIA-001")) == {"fail"}


def test_power_limit_policy_default():
    facts = healthy_facts()
    facts["nvidia"]["gpus"][0]["power"].update(limit_w=500.0, default_w=500.0)
    statuses = [f["status"] for f in of(evaluate(facts), "NVIDIA-007")]
    assert statuses == ["fail", "pass"]
    statuses = [f["status"] for f in of(evaluate(facts, params={"power_limit_policy": "default"}), "NVIDIA-007")]
    assert statuses == ["pass", "pass"]


def test_iommu_passthrough_false_makes_iommu_rules_not_applicable():
    result = evaluate(params={"iommu_passthrough": False})
    assert [f["status"] for f in of(result, "IOMMU-001") + of(result, "IOMMU-002")] == ["not_applicable"] * 2


@pytest.mark.parametrize("params, message", [
    ({"kernel_mni": "6.14"}, r"gpuhost_params.*: unknown parameter 'kernel_mni' \(known: .*kernel_min"),
    ({"kernel_min": 6.14}, r"parameter kernel_min must be a string like '[0-9.]+', got number 6.14 \(quote it\)"),
    ({"smt": "maybe"}, r"parameter smt must be one of on, off, any, got 'maybe'"),
    ({"iommu_passthrough": "yes"}, r"parameter iommu_passthrough must be a bool"),
    ({"nvidia_driver_min": {"blackwell": 575}}, r"parameter nvidia_driver_min.blackwell must be a string"),
    ("notamapping", r"parameters must be a mapping"),
])
def test_bad_parameters_rejected(params, message):
    with pytest.raises(CatalogueError, match=message):
        evaluate(params=params, profile="amd-epyc-nvidia")
    with pytest.raises(CatalogueError, match=message):
        catalogue_load.validate(params=params)


@pytest.mark.parametrize("waiver, message", [
    ({"rule": "PCI-999", "reason": "r", "expires": "2026-01-01"}, r"gpuhost_waivers\[0\] \(rule PCI-999\): unknown rule id 'PCI-999'"),
    ({"rule": "PCI-001", "reason": "r", "expires": "31.01.2026"}, r"\(rule PCI-001\): expires must be a date YYYY-MM-DD, got '31.01.2026'"),
    ({"rule": "PCI-001", "reason": "r", "expires": "2026-02-30"}, r"expires must be a date YYYY-MM-DD, got '2026-02-30'"),
    ({"rule": "PCI-001", "expires": "2026-01-01"}, r"\(rule PCI-001\): reason is required"),
    ({"rule": "PCI-001", "reason": "r"}, r"expires is required"),
    ({"rule": "PCI-001", "reason": "r", "expires": "2026-01-01", "host": "x"}, r"unknown key\(s\) host"),
    ({"rule": "PCI-001", "reason": "r", "expires": "2026-01-01", "hosts": [1]}, r"hosts must be a list of host name patterns"),
    ("PCI-001", r"gpuhost_waivers\[0\]: must be a mapping"),
])
def test_bad_waivers_rejected(waiver, message):
    with pytest.raises(CatalogueError, match=message):
        evaluate(waivers=[waiver])
    with pytest.raises(CatalogueError, match=message):
        catalogue_load.validate(waivers=[waiver])


def test_validate_returns_profiles_and_params():
    out = catalogue_load.validate()
    assert out["profiles"] == ["amd-epyc-nvidia", "cpu-node", "generic-nvidia-inference"]
    assert out["rules"] == len(catalogue_load.load_catalogue().rules)
    assert out["params"]["amd-epyc-nvidia"]["kernel_min_cpu"]["zen5"] == "6.14"
    assert catalogue_load.validate(profile="generic-nvidia-inference")["profiles"] == ["generic-nvidia-inference"]


# -- malformed catalogues --------------------------------------------------------------------------

@pytest.fixture
def tree(tmp_path):
    return copy_catalogue(tmp_path)


def _load(tree):
    return catalogue_load.load_catalogue(str(tree))


def test_copied_catalogue_loads(tree):
    assert len(_load(tree).rules) == len(catalogue_load.load_catalogue().rules)


@pytest.mark.parametrize("file, old, new, message", [
    ("rules/pcie.yml", "    min: {param: max_read_request_bytes_gpu}", "    at_least: 4096",
     r"rules/pcie.yml: rule PCI-001: unknown operator 'at_least' \(known: equals, "),
    ("rules/pcie.yml", "  query: pcie.max_read_request\n  unknown_reason: error\n  expect:\n    min: {param: max_read_request_bytes_gpu}",
     "  query: pcie.max_read_request[\n  unknown_reason: error\n  expect:\n    min: {param: max_read_request_bytes_gpu}",
     r"rules/pcie.yml: rule PCI-001: query: bad jmespath 'pcie.max_read_request\['"),
    ("rules/pcie.yml", "- id: PCI-002", "- id: PCI-001",
     r"rules/pcie.yml: rule PCI-001: duplicate id PCI-001 \(already defined in rules/pcie.yml\)"),
    ("rules/pcie.yml", "{param: max_read_request_bytes_gpu}", "{param: max_read_request_gpu}",
     r"profiles/generic-nvidia-inference.yml: profile generic-nvidia-inference: rule PCI-001 \(rules/pcie.yml\) "
     r"references unknown parameter 'max_read_request_gpu'"),
    ("rules/cpu.yml", "applies_when: \"params.smt != 'any'\"", "applies_when: \"params.smtx != 'any'\"",
     r"rule CPU-007 \(rules/cpu.yml\) references unknown parameter 'smtx'"),
    ("rules/pcie.yml", "  severity: high\n  label: MaxReadReq", "  severity: urgent\n  label: MaxReadReq",
     r"rules/pcie.yml: rule PCI-001: unknown severity 'urgent'"),
    ("rules/pcie.yml", "- id: PCI-001", "- id: NUMA-901", r"rule NUMA-901: id must look like PCI-NNN for area pcie"),
    ("rules/pcie.yml", "  title: GPU MaxReadReq at least max_read_request_bytes_gpu\n",
     "", r"rules/pcie.yml: rule PCI-001: missing required key\(s\) title"),
    ("rules/pcie.yml", "    action: pcie_tune\n    hint: raise MaxReadReq in the Device Control",
     "    action: setpci\n    hint: raise MaxReadReq in the Device Control", r"rule PCI-001: unknown fix action 'setpci'"),
    ("rules/pcie.yml", "  title: GPU MaxReadReq at least max_read_request_bytes_gpu\n",
     "  title: GPU MaxReadReq at least max_read_request_bytes_gpu\n  severty: high\n",
     r"rule PCI-001: unknown key\(s\) severty"),
    ("rules/pcie.yml", "    min: {param: max_read_request_bytes_gpu}", "    min: '4096'", r"rule PCI-001: expect: operator min needs a number"),
    ("rules/kernel.yml", "    min_kernel: {query: derived.kernel.kernel_min}", "    min_kernel: 6.14",
     r"rule KERNEL-001: expect: operator min_kernel needs a version string such as '6.14' \(quoted\)"),
    ("rules/pcie.yml", "  reboot_required: false", "  reboot_required: maybe", r"rule PCI-001: reboot_required must be true or false"),
    ("rules/pcie.yml", "  source: https://enterprise", "  source: see the vendor guide #", r"rule PCI-001: source must be an https:// URL"),
    ("rules/pcie.yml", "- id: PCI-001", "- id: PCI-001\n  - broken", r"rules/pcie.yml: not valid YAML"),
    ("profiles/amd-epyc-nvidia.yml", "extends: generic-nvidia-inference", "extends: generic",
     r"profiles/amd-epyc-nvidia.yml: profile amd-epyc-nvidia: extends unknown profile 'generic'"),
    ("profiles/amd-epyc-nvidia.yml", "include: [CPU-001, CPU-002]", "include: [CPU-001, CPU-099]",
     r"profile amd-epyc-nvidia: rules: unknown rule id 'CPU-099'"),
    ("profiles/generic-nvidia-inference.yml", "kernel_min: \"5.14\"", "kernel_min: 5.14",
     # the profile schema's parameter bounds (params.properties) speak first for a profile file
     r"profile generic-nvidia-inference: params.kernel_min must be a version such as '6.14' or '570.124.06' \(quoted\), "
     r"got 5.14"),
    ("profiles/generic-nvidia-inference.yml", "    zen4: \"6.3\"", "    zen6: \"6.3\"",
     r"profile generic-nvidia-inference: params.kernel_min_cpu"),
    ("profiles/generic-nvidia-inference.yml", "    zen5: \"6.14\"", "    zen5: 6.14",
     r"profile generic-nvidia-inference: params.kernel_min_cpu.zen5 must be a version such as '6.14'"),
    ("profiles/generic-nvidia-inference.yml", "swappiness_max: 10", "swappiness_max: 300",
     r"profile generic-nvidia-inference: params.swappiness_max must be between 0 and 200, got 300"),
    ("profiles/generic-nvidia-inference.yml", "smt: any", "smt: sometimes",
     r"profile generic-nvidia-inference: params.smt must be one of on, off, any, got 'sometimes'"),
    ("profiles/amd-epyc-nvidia.yml", "priority: 100", "priority: high", r"priority must be an integer"),
    ("profiles/amd-epyc-nvidia.yml", "match: >-", "matches: >-", r"profile amd-epyc-nvidia: unknown key\(s\) matches"),
    ("profiles/amd-epyc-nvidia.yml", "cpu.vendor == 'AuthenticAMD'", "cpu.vendor === 'AuthenticAMD'",
     r"profile amd-epyc-nvidia: match: bad jmespath"),
    ("profiles/generic-nvidia-inference.yml", "priority: 0", "priority: 0\nextends: amd-epyc-nvidia",
     r"extends cycle"),
    ("profiles/generic-nvidia-inference.yml", "  idle_latency_max_us: 100\n", "",
     r"profile generic-nvidia-inference: missing parameter\(s\) idle_latency_max_us"),
])
def test_malformed_catalogue_rejected(tree, file, old, new, message):
    edit(tree / file, old, new)
    with pytest.raises(CatalogueError, match=message):
        _load(tree)


def test_rule_file_of_unknown_area_rejected(tree):
    (tree / "rules" / "gpu.yml").write_text("- id: GPU-001\n")
    with pytest.raises(CatalogueError, match=r"rules/gpu.yml: no such area 'gpu'"):
        _load(tree)


def test_rule_in_wrong_file_rejected(tree):
    text = (tree / "rules" / "iommu.yml").read_text()
    (tree / "rules" / "numa.yml").write_text((tree / "rules" / "numa.yml").read_text() + text.split("\n", 1)[1])
    with pytest.raises(CatalogueError, match=r"rules/numa.yml: rule IOMMU-001: area 'iommu' does not match its file"):
        _load(tree)


def test_fallback_profile_required(tree):
    os.rename(str(tree / "profiles" / "generic-nvidia-inference.yml"), str(tree / "profiles" / "generic.yml"))
    edit(tree / "profiles" / "amd-epyc-nvidia.yml", "extends: generic-nvidia-inference", "extends: generic")
    edit(tree / "profiles" / "cpu-node.yml", "extends: generic-nvidia-inference", "extends: generic")
    with pytest.raises(CatalogueError, match=r"the fallback profile generic-nvidia-inference is missing"):
        _load(tree)


def test_operator_written_as_yaml_boolean_key(tree):
    # `true: true` in YAML is a boolean key; it still means the operator "true"
    catalogue = _load(tree)
    assert catalogue.by_id["CPU-005"].op == "true"


def test_catalogue_is_cached_until_a_file_changes(tree):
    first = _load(tree)
    assert _load(tree) is first
    path = tree / "rules" / "pcie.yml"
    edit(path, "title: GPU MaxReadReq at least", "title: GPU MaxReadReq >=")
    st = os.stat(str(path))
    os.utime(str(path), ns=(st.st_atime_ns, st.st_mtime_ns + 10 ** 9))
    assert _load(tree).by_id["PCI-001"].title.startswith("GPU MaxReadReq >=")


def test_missing_jmespath_gives_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "jmespath", None)
    with pytest.raises(CatalogueError, match=r"needs the Python library jmespath on the controller"):
        catalogue_model._jmespath()


def test_module_utils_import_needs_no_third_party_library():
    # the module_utils import sanity test imports the file without jmespath/yaml available
    code = ("import sys; sys.modules['jmespath'] = None; sys.modules['yaml'] = None; "
            "sys.path.insert(0, %r); "
            "import ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_load as r; print(r.DEFAULT_PROFILE)"
            % os.path.join(REPO, "build", "collections"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "generic-nvidia-inference"


# -- the action plugins through ansible-playbook ----------------------------------------------------

def _playbook(tmp_path, tasks):
    playbook = tmp_path / "play.yml"
    playbook.write_text(textwrap.dedent("""\
        - hosts: localhost
          connection: local
          gather_facts: false
          tasks:
        """) + textwrap.indent(textwrap.dedent(tasks), "    "))
    env = dict(os.environ)
    env.update(ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, "build", "collections"),
               ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0")
    return subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
                           "-e", "ansible_python_interpreter=%s" % sys.executable, str(playbook)],
                          capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=300, check=False)


def _evaluate_in_a_playbook(tmp_path, options, before=""):
    """baseline_evaluate over the healthy facts with numa_balancing 1 and ``options`` (YAML lines
    of the task), after the tasks ``before``; returns its registered result."""
    facts = healthy_facts()
    facts["kernel"]["sysctl"]["numa_balancing"] = 1
    (tmp_path / "facts.json").write_text(json.dumps(facts))
    task = textwrap.dedent("""\
        - name: Evaluate
          gpuhost.baseline.baseline_evaluate:
            facts: "{{ lookup('ansible.builtin.file', 'facts.json') | from_json }}"
        """) + textwrap.indent(textwrap.dedent(options), " " * 4) + textwrap.dedent("""\
          register: baseline
        - name: Keep the result
          ansible.builtin.copy:
            content: "{{ baseline | to_json }}"
            dest: "{{ playbook_dir }}/result.json"
            mode: "0644"
        """)
    out = _playbook(tmp_path, textwrap.dedent(before) + task)
    assert out.returncode == 0, out.stdout + out.stderr
    return json.loads((tmp_path / "result.json").read_text())


def test_action_plugin_in_a_playbook(tmp_path):
    result = _evaluate_in_a_playbook(tmp_path, """\
        params: {smt: "on"}
        waivers:
          - rule: PCI-001
            reason: r
            expires: 2030-01-01
        today: "2026-06-01"
        """, before="""\
        - name: Validate
          gpuhost.baseline.baseline_validate:
            params: {smt: "on"}
        """)
    assert result["changed"] is False
    assert result["profile"] == "amd-epyc-nvidia"
    fails = [f for f in result["findings"] if f["status"] == "fail"]
    assert [(f["id"], f["observed"], f["expected"]) for f in fails] == [("NUMA-001", 1, 0)]
    assert result["summary"]["fail"] == 1
    assert result["failing"] == ["NUMA-001 [high] kernel.numa_balancing is 1, expected 0"]


def test_evaluate_action_without_findings_keeps_only_the_host_report(tmp_path):
    """return_findings false (what the roles pass: Ansible keeps every host's registered result
    until the play ends): no findings, failing or pending_items; host_report holds the findings
    without their rule text (as one JSON text), and what the remediate role acts on stays."""
    result = _evaluate_in_a_playbook(tmp_path, "return_findings: false\n")
    assert not set(result) & {"findings", "failing", "pending_items"}, sorted(result)
    assert result["failing_ids"] == ["NUMA-001"] and result["summary"]["fail"] == 1
    assert result["fix_plan"] and result["params"]["max_read_request_bytes_gpu"] == 4096
    # once, as one JSON text (a third of the memory of the same findings as dicts in the controller)
    assert "findings" not in result["host_report"]
    fails = [f for f in json.loads(result["host_report"]["findings_json"]) if f["status"] == "fail"]
    assert [(f["id"], f["observed"]) for f in fails] == [("NUMA-001", 1)]
    assert "rationale" not in fails[0] and "title" not in fails[0]


def test_validate_action_fails_before_any_host_with_the_reason(tmp_path):
    out = _playbook(tmp_path, """\
        - name: Validate
          gpuhost.baseline.baseline_validate:
            waivers:
              - rule: PCI-001
                reason: r
                expires: "2026-13-01"
        """)
    assert out.returncode != 0
    assert "invalid baseline configuration: gpuhost_waivers[0] (rule PCI-001): expires must be a date YYYY-MM-DD" \
        in out.stdout + out.stderr


def test_evaluate_action_rejects_an_unknown_profile(tmp_path):
    out = _playbook(tmp_path, """\
        - name: Evaluate
          gpuhost.baseline.baseline_evaluate:
            facts: {schema: 1}
            profile: nope
        """)
    assert out.returncode != 0
    assert "baseline evaluation of localhost: unknown profile 'nope'" in out.stdout + out.stderr


def test_fix_plan_groups_failing_subjects_by_action_and_skips_waived():
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge.evaluation import fix_plan

    def f(rid, status, subject, action):
        return {"id": rid, "status": status, "subject": subject, "fix_action": action}

    plan = fix_plan([f("PCI-001", "fail", "0000:43:00.0", "pcie_tune"), f("PCI-001", "fail", "0000:44:00.0", "pcie_tune"),
                     f("PCI-001", "pass", "0000:45:00.0", "pcie_tune"), f("NUMA-001", "fail", None, "sysctl"),
                     f("CPU-003", "waived", None, "cpu_power")])
    assert plan == {"pcie_tune": {"PCI-001": ["0000:43:00.0", "0000:44:00.0"]}, "sysctl": {"NUMA-001": []}}


def test_busy_gpus_lists_compute_processes_and_tolerates_garbage():
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge.evaluation import busy_gpus

    facts = {"nvidia": {"gpus": [{"index": 0, "bus_id": "0000:43:00.0",
                                  "processes": [{"pid": 7, "name": "python3"}]},
                                 {"index": 1, "bus_id": "0000:44:00.0", "processes": []}]}}
    assert busy_gpus(facts) == [{"index": 0, "bus_id": "0000:43:00.0", "processes": ["python3 (pid 7)"]}]
    assert busy_gpus({"nvidia": None}) == [] and busy_gpus(None) == []
    # malformed sections (what test_derive's fuzzing feeds evaluate) give no GPU, not a traceback
    assert busy_gpus({"nvidia": [None]}) == [] and busy_gpus({"nvidia": {"gpus": {"0": {}}}}) == []
    assert busy_gpus({"nvidia": {"gpus": [None, "gpu0"]}}) == []


def test_an_unknown_process_list_is_busy():
    """Issue 40, item 4: a GPU whose process list nvidia-smi did not give, or NVIDIA GPUs on the bus that
    nvidia-smi does not list (it failed or hung), count as busy: the guards fail closed."""
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge.evaluation import busy_gpus, busy_reason

    none_given = busy_gpus({"nvidia": {"gpus": [{"index": 2, "bus_id": "0000:45:00.0", "processes": None},
                                                {"index": 3, "processes": 5}]}})
    assert [gpu["index"] for gpu in none_given] == [2, 3] and all(gpu["unknown"] for gpu in none_given)
    reason = busy_reason(none_given)
    assert reason == ("the GPUs' compute processes are not known, so they count as busy (GPU 2 (0000:45:00.0): "
                      "process list unknown; GPU 3 (None): process list unknown); drain the host or set gpuhost_force=true")
    gpu = {"kind": "gpu", "vendor_id": "0x10de", "driver": "nvidia"}
    smi_failed = {"nvidia": {"gpus": [], "smi": {"available": False, "error": "nvidia-smi timed out after 30 s"}},
                  "pci": {"devices": [gpu, dict(gpu), dict(gpu, driver="vfio-pci"), dict(gpu, vendor_id="0x1002"),
                                      {"kind": "nic", "vendor_id": "0x10de"}, None]}}
    busy = busy_gpus(smi_failed)
    assert len(busy) == 1 and busy[0]["unknown"]
    assert busy_reason(busy) == (
        "the GPUs' compute processes are not known, so they count as busy (process list unknown (nvidia-smi lists 0 of "
        "the 2 NVIDIA GPUs on the PCI bus: nvidia-smi timed out after 30 s)); drain the host or set gpuhost_force=true")
    # no NVIDIA GPU on the bus, or only passthrough ones: nothing to be busy
    assert busy_gpus({"nvidia": {"gpus": []}, "pci": {"devices": [dict(gpu, driver="vfio-pci")]}}) == []
    assert busy_gpus({"nvidia": {"gpus": []}, "pci": {"devices": "garbage"}}) == []
    both = busy_gpus({"nvidia": {"gpus": [{"index": 0, "processes": [{"pid": 7, "name": "python3"}]},
                                          {"index": 1, "processes": None}]}})
    assert busy_reason(both) == ("GPUs are running compute work (python3 (pid 7)); the GPUs' compute processes are not "
                                 "known, so they count as busy (GPU 1 (None): process list unknown); drain the host or "
                                 "set gpuhost_force=true")


def test_rule_statuses_are_each_rules_worst_finding():
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge.evaluation import rule_statuses

    findings = [{"id": "A", "status": "pass"}, {"id": "A", "status": "not_applicable"},
                {"id": "B", "status": "pass"}, {"id": "B", "status": "unknown"},
                {"id": "C", "status": "not_applicable"}, {"id": "D", "status": "waived"}, {"id": "D", "status": "pass"},
                {"id": "E", "status": "pass"}, {"id": "E", "status": "fail"}, {"id": "F", "status": "bogus"},
                None, {"status": "pass"}, {"id": 5, "status": "pass"}]
    assert rule_statuses(findings) == {"A": "pass", "B": "unknown", "C": "not_applicable", "D": "waived",
                                       "E": "fail", "F": "unknown"}
    assert rule_statuses(None) == {} and rule_statuses("x") == {}


def test_busy_reason_names_every_compute_process_once_for_both_guards():
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge.evaluation import busy_gpus, busy_reason

    facts = {"nvidia": {"gpus": [{"index": 0, "processes": [{"pid": 7, "name": "python3"}]},
                                 {"index": 1, "processes": [{"pid": 8, "name": "vllm"}, {"pid": 9, "name": "x"}]}]}}
    assert busy_reason(busy_gpus(facts)) == (
        "GPUs are running compute work (python3 (pid 7), vllm (pid 8), x (pid 9)); drain the host or set gpuhost_force=true")
    assert busy_reason(busy_gpus({"nvidia": {"gpus": [{"index": 0, "processes": []}]}})) == ""
    assert busy_reason([]) == ""


def test_pending_items_say_why_each_failure_is_still_open():
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge.evaluation import pending_items

    def f(rid, action, pending=False, status="fail"):
        return {"id": rid, "status": status, "subject": None, "fix_action": action, "pending": pending,
                "message": "m", "fix": "h"}

    kinds = [(i["id"], i["kind"]) for i in pending_items([
        f("CPU-001", "kernel_cmdline", pending=True), f("PCI-006", "pcie_tune"), f("NUMA-003", "manual"),
        f("LXC-001", "lxc_config"), f("NUMA-001", "sysctl"), f("NUMA-002", "sysctl", status="pass")])]
    assert kinds == [("CPU-001", "reboot"), ("PCI-006", "opt-in"), ("NUMA-003", "manual"), ("LXC-001", "manual"),
                     ("NUMA-001", "not-fixed")]


def test_fix_plan_splits_maxreadreq_devices_by_kind():
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge.evaluation import fix_plan

    facts = {"pci": {"devices": [{"address": "0000:43:00.0", "kind": "gpu"}, {"address": "0000:49:00.0", "kind": "nic"},
                                 {"address": "0000:44:00.0", "kind": "gpu"}]}}
    findings = [{"id": "PCI-001", "status": "fail", "subject": "0000:43:00.0", "fix_action": "pcie_tune"},
                {"id": "PCI-008", "status": "fail", "subject": "0000:44:00.0", "fix_action": "pcie_tune"},
                {"id": "PCI-008", "status": "fail", "subject": "0000:49:00.0", "fix_action": "pcie_tune"},
                {"id": "PCI-008", "status": "fail", "subject": "0000:43:00.0", "fix_action": "pcie_tune"}]
    by_kind = {"PCI-001": "pcie_mrrs", "PCI-002": "pcie_mrrs", "PCI-008": "pcie_mrrs"}
    assert fix_plan(findings, facts, by_kind)["pcie_mrrs"] == {"gpu": ["0000:43:00.0", "0000:44:00.0"],
                                                               "nic": ["0000:49:00.0"]}
    assert fix_plan(findings, {"pci": None}, by_kind)["pcie_mrrs"] == {"gpu": [], "nic": []}
    assert "pcie_mrrs" not in fix_plan(findings, facts)


def test_the_shipped_catalogue_binds_the_maxreadreq_rules_to_one_plan_entry():
    """The rules, not the evaluator, say which failing devices the MaxReadReq tasks take (issue 35)."""
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_load import load_catalogue

    catalogue = load_catalogue()
    assert dict((r.id, r.fix_by_kind) for r in catalogue.by_id.values() if r.fix_by_kind) == {
        "PCI-001": "pcie_mrrs", "PCI-002": "pcie_mrrs", "PCI-008": "pcie_mrrs"}


def test_catalogue_disk_cache_follows_the_files(tmp_path, monkeypatch):
    import os
    import shutil
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base import schema
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue import catalogue_load

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    base = tmp_path / "coll"
    for sub in ("rules", "profiles"):
        shutil.copytree(os.path.join(schema.COLLECTION_ROOT, sub), str(base / sub))
    first = catalogue_load.load_catalogue(str(base))
    assert os.listdir(str(tmp_path / "cache" / "gpuhost-baseline"))
    catalogue_load._CACHE.clear()
    assert catalogue_load.load_catalogue(str(base)).by_id["NUMA-001"].title == first.by_id["NUMA-001"].title
    path = base / "rules" / "numa.yml"
    text = path.read_text().replace("automatic NUMA balancing disabled", "automatic NUMA balancing off", 1)
    path.write_text(text + "\n")
    catalogue_load._CACHE.clear()
    assert catalogue_load.load_catalogue(str(base)).by_id["NUMA-001"].title == "automatic NUMA balancing off"


def test_catalogue_disk_cache_keeps_the_newest_files(tmp_path, monkeypatch):
    """Every edit of a catalogue file makes a new cache key: the directory keeps the newest
    DISK_CACHE_KEEP files (the one just written among them) and nothing but its own files goes."""
    import os
    import shutil
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base import schema
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue import catalogue_load

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    cache = tmp_path / "cache" / "gpuhost-baseline"
    cache.mkdir(parents=True, mode=0o700)
    old = []
    for number in range(catalogue_load.DISK_CACHE_KEEP + 4):
        path = cache / ("catalogue-%024d.json" % number)
        path.write_text("{}")
        os.utime(str(path), (1000000 + number, 1000000 + number))  # older than the one written below
        old.append(path.name)
    (cache / "notes.txt").write_text("mine")
    (cache / "catalogue-mine.json").write_text("{}")  # not a name the cache gives: never removed
    os.utime(str(cache / "catalogue-mine.json"), (1000, 1000))
    base = tmp_path / "coll"
    for sub in ("rules", "profiles"):
        shutil.copytree(os.path.join(schema.COLLECTION_ROOT, sub), str(base / sub))
    catalogue_load._CACHE.clear()
    catalogue_load.load_catalogue(str(base))
    names = sorted(os.listdir(str(cache)))
    kept = [name for name in names if name.startswith("catalogue-") and name != "catalogue-mine.json"]
    assert len(kept) == catalogue_load.DISK_CACHE_KEEP and "notes.txt" in names and "catalogue-mine.json" in names
    # the newest old ones and the new one
    assert set(kept) == set(old[-(catalogue_load.DISK_CACHE_KEEP - 1):]) | set(
        name for name in kept if name not in old)
    assert len([name for name in kept if name not in old]) == 1
    catalogue_load._CACHE.clear()


def _cached_catalogue(tmp_path, monkeypatch):
    import os
    import shutil
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base import schema
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue import catalogue_load

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    base = tmp_path / "coll"
    for sub in ("rules", "profiles"):
        shutil.copytree(os.path.join(schema.COLLECTION_ROOT, sub), str(base / sub))
    catalogue_load._CACHE.clear()
    catalogue_load.load_catalogue(str(base))
    catalogue_load._CACHE.clear()
    directory = tmp_path / "cache" / "gpuhost-baseline"
    (cached,) = [directory / name for name in os.listdir(str(directory))]
    return catalogue_load, base, directory, cached


def test_catalogue_cache_is_private_json_never_code(tmp_path, monkeypatch):
    import json
    import os
    import stat
    loader, base, directory, cached = _cached_catalogue(tmp_path, monkeypatch)
    assert cached.name.endswith(".json")
    assert stat.S_IMODE(os.stat(str(cached)).st_mode) == 0o600
    assert not stat.S_IMODE(os.stat(str(directory)).st_mode) & 0o077
    documents = json.loads(cached.read_text())
    assert sorted(documents) == ["profiles", "rules"]
    # what is read back is rebuilt with the code checks: a cached document that breaks them is rejected
    rel, area, rules = documents["rules"][0]
    rules[0]["id"] = "NUMA-001" if area != "numa" else "CPU-001"
    cached.write_text(json.dumps(documents))
    with pytest.raises(CatalogueError, match="id must look like"):
        loader.load_catalogue(str(base))


def test_catalogue_cache_not_used_when_others_may_write_it(tmp_path, monkeypatch):
    import json
    import os
    loader, base, directory, cached = _cached_catalogue(tmp_path, monkeypatch)

    def plant():
        documents = json.loads(cached.read_text())
        for files in documents["rules"]:
            for rule in files[2]:
                if rule["id"] == "NUMA-001":
                    rule["title"] = "planted title"
        cached.write_text(json.dumps(documents))
        os.chmod(str(cached), 0o600)
        loader._CACHE.clear()

    plant()
    os.chmod(str(cached), 0o666)  # anyone could have written it: ignored (and replaced), the files are parsed
    assert loader.load_catalogue(str(base)).by_id["NUMA-001"].title != "planted title"
    plant()
    os.chmod(str(directory), 0o777)
    assert loader.load_catalogue(str(base)).by_id["NUMA-001"].title != "planted title"
    os.chmod(str(directory), 0o700)
    plant()
    # owned and private: used (why the two checks above matter)
    assert loader.load_catalogue(str(base)).by_id["NUMA-001"].title == "planted title"


@pytest.mark.parametrize("params, message", [
    ({"swappiness_max": float("nan")}, r"parameter swappiness_max must be a finite number, got nan"),
    ({"swappiness_max": float("inf")}, r"parameter swappiness_max must be a finite number"),
    ({"swappiness_max": -1}, r"parameter swappiness_max must be between 0 and 200, got -1"),
    ({"numa_free_min_pct": 150}, r"parameter numa_free_min_pct must be between 0 and 100"),
    ({"nic_min_link_width": 0}, r"parameter nic_min_link_width must be between 1 and 32"),
    ({"max_read_request_bytes_gpu": 3000}, r"parameter max_read_request_bytes_gpu must be a PCIe size"),
    ({"kernel_min": "latest"}, r"parameter kernel_min must be a version such as '6.14'"),
    ({"nvidia_driver_min": {"blackwell": "r570"}}, r"parameter nvidia_driver_min.blackwell must be a version"),
])
def test_out_of_range_and_non_version_parameters_rejected(params, message):
    with pytest.raises(CatalogueError, match=message):
        catalogue_load.validate(params=params)


def test_bundled_profiles_pass_the_parameter_ranges():
    for name, profile in catalogue_load.load_catalogue().profiles.items():
        catalogue_params.merge_params(profile.params, profile.params, "profile %s" % name)
