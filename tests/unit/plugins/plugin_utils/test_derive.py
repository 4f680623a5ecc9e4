"""derive(): relations between facts (docs/rules.md, derived keys)."""
import json

from hypothesis import HealthCheck, given, settings
import pytest
from hypothesis import strategies as st

from helpers.baseline_facts import (DOWN0, DOWN1, DOWN2, GPU0, GPU1, MGMT_NIC, NIC, ROOT, UP, device,
                                    healthy_facts)

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import cpu as facts_cpu
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive import REQUIRED_PARAMS, derive
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_common import parse_cpulist
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_cpu import cpu_generation
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_nvidia import gpu_generation
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.schema import profile_param_schemas
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_load import load_catalogue

PARAMS = dict(load_catalogue().profile("amd-epyc-nvidia").params)


def d(facts, **params):
    p = dict(PARAMS)
    p.update(params)
    return derive(facts, p)["derived"]


def test_derive_copies_and_does_not_modify_facts():
    facts = healthy_facts()
    before = json.dumps(facts, sort_keys=True)
    doc = derive(facts, PARAMS)
    assert json.dumps(facts, sort_keys=True) == before
    assert "derived" in doc and "derived" not in facts
    assert set(REQUIRED_PARAMS) <= set(PARAMS)


def test_parse_cpulist():
    assert parse_cpulist("0-3,8") == {0, 1, 2, 3, 8}
    assert parse_cpulist("") == set()
    assert parse_cpulist(" 5 ") == {5}
    assert parse_cpulist("3-1") is None
    assert parse_cpulist("a-b") is None
    assert parse_cpulist(None) is None
    assert parse_cpulist("0-99999999") is None
    assert parse_cpulist(7) == {7}


def test_parse_cpulist_is_the_kernel_grammar_of_the_facts_layer():
    # one parser for host and controller (issue 19): the kernel's group syntax parses here too,
    # as it does in facts/cpu.py, instead of None on the controller only
    assert parse_cpulist("0-15:2/4") == {0, 1, 4, 5, 8, 9, 12, 13}
    for text in ("0-3,8", "", "3-1", "0-15:2/4", "1,,2", "0-7:0/4"):
        expected = facts_cpu.parse_cpulist(text)
        assert parse_cpulist(text) == (None if expected is None else set(expected))


def test_gpu_generation():
    assert gpu_generation("NVIDIA RTX PRO 6000 Blackwell Server Edition") == "blackwell"
    assert gpu_generation("NVIDIA B200") == "blackwell"
    assert gpu_generation("NVIDIA H100 80GB HBM3") == "hopper"
    assert gpu_generation("NVIDIA H200 NVL") == "hopper"
    assert gpu_generation("NVIDIA L40S") == "ada"
    assert gpu_generation("NVIDIA A100-SXM4-80GB") == "ampere"
    assert gpu_generation("Tesla T4") == "turing"
    assert gpu_generation(None, "0x2bb5") == "blackwell"
    assert gpu_generation(None, "0x2330") == "hopper"
    assert gpu_generation("unknown thing", "0x1234") is None
    assert gpu_generation(None, "garbage") is None


@pytest.mark.parametrize("cpu, generation", [
    ({"vendor": "AuthenticAMD", "family": 0x19, "model": 0x01}, "zen3"),    # EPYC 7003 Milan
    ({"vendor": "AuthenticAMD", "family": 0x19, "model": 0x11}, "zen4"),    # EPYC 9004 Genoa
    ({"vendor": "AuthenticAMD", "family": 0x19, "model": 0xa0}, "zen4"),    # EPYC 97x4 Bergamo
    ({"vendor": "AuthenticAMD", "family": 0x1a, "model": 0x02}, "zen5"),    # EPYC 9005 Turin
    ({"vendor": "AuthenticAMD", "family": 0x1b, "model": 0x00}, "zen5"),    # a later family: the newest known
    ({"vendor": "GenuineIntel", "family": 6, "model": 143}, "intel"),       # Sapphire Rapids
    ({"vendor": "AuthenticAMD", "family": 0x17, "model": 0x31}, None),      # Zen 2: no generation minimum
    ({"vendor": "AuthenticAMD", "family": 0x19, "model": 0xf0}, None),      # a model outside the known ranges
    ({"vendor": "AuthenticAMD", "family": "garbage", "model": None}, None),
    ({"vendor": "HygonGenuine", "family": 0x18, "model": 0}, None),
    (None, None), ("garbage", None),
])
def test_cpu_generation(cpu, generation):
    assert cpu_generation(cpu) == generation
    if generation is not None:   # every generation it names is a key the profile schema accepts
        assert generation in profile_param_schemas()["kernel_min_cpu"]["propertyNames"]["enum"]


def test_kernel_minimum_per_cpu_generation():
    facts = healthy_facts()   # Zen 5
    table = {"zen4": "6.3", "zen5": "6.14", "intel": "5.14"}
    kernel = d(facts, kernel_min="5.14", kernel_min_cpu=table)["kernel"]
    assert kernel["kernel_min"] == "6.14" and kernel["kernel_min_source"] == "kernel_min_cpu.zen5: AMD Zen 5 (family 0x1a)"
    facts["cpu"].update(family=0x19, model=0x11)
    assert d(facts, kernel_min="5.14", kernel_min_cpu=table)["kernel"]["kernel_min"] == "6.3"
    # the site floor wins when it is newer
    kernel = d(facts, kernel_min="6.15", kernel_min_cpu=table)["kernel"]
    assert kernel["kernel_min"] == "6.15" and "kernel_min_cpu.zen4 6.3 is not newer" in kernel["kernel_min_source"]
    facts["cpu"] = {"vendor": None}
    kernel = d(facts, kernel_min="5.14", kernel_min_cpu=table)["kernel"]
    assert kernel["kernel_min"] == "5.14" and "CPU generation unknown" in kernel["kernel_min_source"]
    # garbage parameters: no minimum, and a reason instead of an exception
    kernel = d(facts, kernel_min=None, kernel_min_cpu="garbage")["kernel"]
    assert kernel["kernel_min"] is None and "give no minimum" in kernel["kernel_min_source"]


def test_cpu_keys():
    facts = healthy_facts()
    cpu = d(facts)["cpu"]
    assert cpu == {"amd_zen": True, "generation": "zen5", "smt": "on", "deep_idle_enabled": [], "power_boot_problems": [],
                   "power_boot_reason": None}
    facts["cpu"]["cpuidle"]["states"][2].update(enabled_cpus=60, disabled_cpus=4)
    assert d(facts)["cpu"]["deep_idle_enabled"] == ["C2 (exit latency 400 us) enabled on 60 of 64 CPUs"]
    assert d(facts, idle_latency_max_us=500)["cpu"]["deep_idle_enabled"] == []
    facts["cpu"]["cpuidle"]["states"][1]["latency_us"] = None
    assert d(facts)["cpu"]["deep_idle_enabled"] is None
    facts["cpu"].update(vendor="AuthenticAMD", family=23)
    assert d(facts)["cpu"]["amd_zen"] is False
    facts["cpu"]["vendor"] = None
    assert d(facts)["cpu"]["amd_zen"] is None


def test_kernel_newer_installed_and_pending_upgrade():
    facts = healthy_facts()
    facts["kernel"]["release"] = "6.8.12-4-pve"
    facts["kernel"]["installed"] = ["6.8.12-2-pve", "6.8.12-4-pve", "6.8.12-9-pve", "6.14.8-2-pve"]
    k = d(facts)["kernel"]
    assert k["newer_installed"] == ["6.8.12-9-pve", "6.14.8-2-pve"]
    assert k["pending_upgrade"] == "6.14.8-2-pve is installed, reboot into it"
    assert d(facts, kernel_min="6.15")["kernel"]["pending_upgrade"] is None
    facts["kernel"]["installed"] = None
    assert d(facts)["kernel"]["newer_installed"] is None


def test_cmdline_diff_ignores_boot_loader_keys():
    facts = healthy_facts()
    k = d(facts)["kernel"]
    assert k["cmdline_diff"] == [] and k["cmdline_pending"] is None
    facts["kernel"]["cmdline"]["params"]["BOOT_IMAGE"] = "/vmlinuz-6.14.8-2-pve"
    facts["kernel"]["cmdline"]["params"]["quiet"] = True
    facts["kernel"]["configured_cmdline"]["params"]["iommu"] = "off"
    facts["kernel"]["configured_cmdline"]["params"]["nosmt"] = True
    k = d(facts)["kernel"]
    assert k["cmdline_diff"] == ["iommu: running iommu=pt, configured iommu=off",
                                 "nosmt only in the configured cmdline",
                                 "quiet only in the running cmdline"]
    assert k["cmdline_pending"] == "iommu=off, nosmt configured, reboot to apply"
    facts["kernel"]["configured_cmdline"]["params"] = None
    assert d(facts)["kernel"]["cmdline_diff"] is None


def test_pcie_peers_skip_management_nic():
    p = d(healthy_facts())["pcie"]
    assert [g["address"] for g in p["gpus"]] == [GPU0, GPU1]
    assert [n["address"] for n in p["nics"]] == [NIC]
    assert MGMT_NIC not in [x["address"] for x in p["peer_devices"]]
    assert p["gpus"][0]["label"] == "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    assert p["nics"][0]["label"] == "Mellanox 0x1021 NIC"


def test_acs_bridges_are_the_downstream_ports_behind_the_split():
    facts = healthy_facts()
    acs = d(facts)["pcie"]["acs_bridges"]
    # the root port (ACS redirect on) is above the split and a root port: not reported
    assert [(b["address"], b["peers"], b["redirects"]) for b in acs] == [
        (DOWN0, [GPU0], []), (DOWN1, [GPU1], []), (DOWN2, [NIC], [])]
    device(facts, DOWN1)["acs"]["ctl"]["completion_redirect"] = True
    acs = dict((b["address"], b) for b in d(facts)["pcie"]["acs_bridges"])
    assert acs[DOWN1]["redirects"] == ["completion_redirect"]
    assert acs[DOWN1]["peers_label"] == "GPU %s" % GPU1


def test_acs_bridge_unreadable_is_unknown_with_reason():
    facts = healthy_facts()
    device(facts, DOWN0).update(pcie=None, acs=None, error="config space is 64 bytes: run with become: true")
    acs = dict((b["address"], b) for b in d(facts)["pcie"]["acs_bridges"])
    assert acs[DOWN0]["redirects"] is None
    assert acs[DOWN0]["reason"] == "config space is 64 bytes: run with become: true"


def test_acs_unresolved_upstream_path():
    facts = healthy_facts()
    device(facts, GPU1)["upstream"] = None
    acs = d(facts)["pcie"]["acs_bridges"]
    assert acs[-1]["address"] == GPU1 and acs[-1]["redirects"] is None
    assert "upstream path of %s unknown" % GPU1 in acs[-1]["reason"]


def test_gpus_under_different_root_ports_only_report_switch_ports():
    facts = healthy_facts()
    other_root = "0000:c0:01.1"
    facts["pci"]["devices"].append(dict(device(facts, ROOT), address=other_root))
    device(facts, GPU1)["upstream"] = [other_root]
    acs = d(facts)["pcie"]["acs_bridges"]
    assert [b["address"] for b in acs] == [DOWN0, DOWN2]


def test_mps_path_mismatch():
    facts = healthy_facts()
    paths = dict((m["address"], m) for m in d(facts)["pcie"]["mps_paths"])
    assert paths[GPU0]["mismatches"] == []
    assert [h["address"] for h in paths[GPU0]["path"]] == [ROOT, UP, DOWN0, GPU0]
    device(facts, UP)["pcie"]["max_payload"] = 128
    paths = dict((m["address"], m) for m in d(facts)["pcie"]["mps_paths"])
    assert paths[NIC]["mismatches"] == ["%s 256 B" % ROOT, "%s 128 B" % UP, "%s 256 B" % DOWN2, "%s 256 B" % NIC]
    device(facts, DOWN0).update(pcie=None, error="truncated")
    paths = dict((m["address"], m) for m in d(facts)["pcie"]["mps_paths"])
    assert paths[GPU0]["mismatches"] is None
    assert paths[GPU0]["reason"] == "MaxPayload of %s unknown: truncated" % DOWN0


def test_aer_counts_uncorrectable_only():
    facts = healthy_facts()
    aer = dict((a["address"], a) for a in d(facts)["pcie"]["aer"])
    assert set(aer) == {ROOT, UP, DOWN0, DOWN1, DOWN2, GPU0, GPU1, NIC}
    assert all(a["errors"] == [] for a in aer.values())
    device(facts, GPU0)["aer"]["counters"]["correctable"]["RxErr"] = 7
    device(facts, DOWN2)["aer"]["counters"]["nonfatal"].update(CmpltTO=3, TOTAL_ERR_NONFATAL=3)
    aer = dict((a["address"], a) for a in d(facts)["pcie"]["aer"])
    assert aer[GPU0]["errors"] == []
    assert aer[DOWN2]["errors"] == ["nonfatal CmpltTO=3", "nonfatal TOTAL_ERR_NONFATAL=3"]
    device(facts, NIC)["aer"]["counters"]["fatal"] = {}
    aer = dict((a["address"], a) for a in d(facts)["pcie"]["aer"])
    assert aer[NIC]["errors"] is None and "aer_dev_fatal" in aer[NIC]["reason"]


def test_nvidia_gpu_view():
    facts = healthy_facts()
    n = d(facts)["nvidia"]
    assert n["has_blackwell"] is True and n["ecc_modes"] == {"Enabled": 2}
    g = n["gpus"][0]
    assert (g["generation"], g["driver_min"], g["power_target_w"], g["numa_node"]) == ("blackwell", "570.124.06", 600.0, 0)
    assert d(facts, power_limit_policy="default")["nvidia"]["gpus"][0]["power_target_w"] == 600.0
    facts["nvidia"]["gpus"][1]["clocks_event_reasons"]["active"] = ["gpu_idle", "hw_slowdown", "sw_power_cap"]
    facts["nvidia"]["gpus"][0]["ecc"]["pending"] = None
    n = d(facts)["nvidia"]
    assert n["gpus"][1]["throttle_active"] == ["hw_slowdown"]
    assert n["gpus"][0]["ecc_pending_matches"] is None
    assert [g["idle"] for g in d(facts)["pcie"]["gpus"]] == [False, True]
    facts["nvidia"]["gpus"][0]["ecc"]["current"] = None
    assert d(facts)["nvidia"]["ecc_modes"] is None


def test_blackwell_from_pci_ids_without_nvidia_smi():
    facts = healthy_facts()
    facts["nvidia"]["gpus"] = []
    assert d(facts)["nvidia"]["has_blackwell"] is True


SMI_EXIT_9 = ("nvidia-smi -q -x exited 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
              "driver. Make sure that the latest NVIDIA driver is installed and running.")


def _smi_silent(facts, reason=SMI_EXIT_9):
    """The nvidia section gather() gives when nvidia-smi answers nothing (facts.nvidia.gather)."""
    facts["nvidia"].update(smi={"available": False, "error": reason}, driver_version=None, cuda_version=None,
                           gpus=[], topology=None)
    facts["errors"] = [{"subsystem": "nvidia", "path": "nvidia-smi -q -x", "reason": reason}]


def test_nvidia_healthy_gpus_are_the_nvidia_smi_ones():
    n = d(healthy_facts())["nvidia"]
    assert [(g["index"], g["bus_id"], g["reported"], g["reason"]) for g in n["gpus"]] == [
        (0, GPU0, True, None), (1, GPU1, True, None)]
    assert (n["bus_gpus"], n["unreported"], n["smi_problems"]) == ([GPU0, GPU1], [], [])


def test_nvidia_bus_gpus_are_subjects_when_nvidia_smi_fails():
    facts = healthy_facts()
    _smi_silent(facts)
    n = d(facts)["nvidia"]
    assert [g["bus_id"] for g in n["gpus"]] == [GPU0, GPU1]
    g = n["gpus"][1]
    assert (g["index"], g["name"], g["label"], g["generation"], g["reported"]) == (
        None, None, "NVIDIA 0x2bb5 GPU", "blackwell", False)
    # the loaded module still says which driver it is
    assert (g["driver_version"], g["driver_min"], g["numa_node"]) == ("575.57.08", "570.124.06", 0)
    for key in ("persistence", "ecc_current", "ecc_pending", "ecc_pending_matches", "power_limit_w",
                "power_target_w", "throttle_active", "width_current", "width_max"):
        assert g[key] is None, key
    assert g["reason"] == "nvidia-smi reports no GPU: " + SMI_EXIT_9
    assert n["unreported"] == [GPU0, GPU1]
    assert n["smi_problems"] == ["nvidia-smi reports 0 of the 2 NVIDIA GPUs on the PCI bus, not %s, %s: %s"
                                 % (GPU0, GPU1, SMI_EXIT_9)]
    assert n["has_blackwell"] is True and n["ecc_modes"] is None
    # no nvidia-smi index: LXC GPU minors are not matched to them
    assert d(facts)["lxc"]["containers"][0]["numa_pinning_problems"] is None


def test_nvidia_smi_garbage_and_missing_binary_reasons():
    facts = healthy_facts()
    garbage = ("nvidia-smi -q -x output has no <nvidia_smi_log> document (37 bytes): "
               "check that nvidia-smi works on the host")
    _smi_silent(facts, garbage)
    assert d(facts)["nvidia"]["gpus"][0]["reason"] == "nvidia-smi reports no GPU: " + garbage
    # no smi.error (older facts): the errors entry of subsystem nvidia says why
    facts["nvidia"]["smi"]["error"] = None
    facts["errors"] = [{"subsystem": "nvidia", "path": "nvidia-smi topo -m", "reason": "no topology matrix"},
                       {"subsystem": "nvidia", "path": "nvidia-smi", "reason": "nvidia-smi not found in PATH"}]
    assert d(facts)["nvidia"]["gpus"][0]["reason"] == "nvidia-smi reports no GPU: nvidia-smi not found in PATH"
    facts["errors"] = []
    assert d(facts)["nvidia"]["gpus"][0]["reason"] == "nvidia-smi reports no GPU: nvidia-smi -q -x lists no GPU"


def test_nvidia_gpu_missing_from_nvidia_smi_is_added_in_bus_order():
    facts = healthy_facts()
    del facts["nvidia"]["gpus"][0]                   # GPU0 stays on the bus, nvidia-smi lists GPU1 only
    device(facts, GPU0)["driver"] = None
    n = d(facts)["nvidia"]
    assert [(g["bus_id"], g["reported"]) for g in n["gpus"]] == [(GPU0, False), (GPU1, True)]
    assert n["gpus"][0]["reason"] == ("nvidia-smi -q -x does not list this GPU (it reports 1 of the 2 NVIDIA GPUs "
                                      "on the PCI bus); no driver is bound to the GPU")
    assert n["gpus"][1]["label"] == "GPU1 NVIDIA RTX PRO 6000 Blackwell Server Edition"
    assert n["unreported"] == [GPU0]
    assert n["smi_problems"] == ["nvidia-smi reports 1 of the 2 NVIDIA GPUs on the PCI bus, not %s: "
                                 "the driver does not report them" % GPU0]
    # the ECC modes are those nvidia-smi reports
    assert n["ecc_modes"] == {"Enabled": 1}
    device(facts, GPU0)["driver"] = "nouveau"
    assert d(facts)["nvidia"]["gpus"][0]["reason"].endswith("; the GPU is bound to nouveau, not nvidia")


def test_nvidia_bus_gpus_without_driver_module():
    facts = healthy_facts()
    _smi_silent(facts, "nvidia-smi not found in PATH")
    facts["nvidia"].update(module={"version": None, "open": None, "raw": None}, present=False)
    n = d(facts)["nvidia"]
    assert n["smi_problems"] == [
        "nvidia-smi reports 0 of the 2 NVIDIA GPUs on the PCI bus, not %s, %s: nvidia-smi not found in PATH; "
        "the nvidia kernel module is not loaded (/proc/driver/nvidia/version missing)" % (GPU0, GPU1)]
    assert n["gpus"][0]["driver_version"] is None


def test_nvidia_bus_gpus_skip_passthrough_other_vendors_and_other_classes():
    facts = healthy_facts()
    _smi_silent(facts)
    device(facts, GPU0)["driver"] = "vfio-pci"      # passed through to a VM: not nvidia's
    device(facts, NIC)["vendor_id"] = "0x10de"      # an NVIDIA (Mellanox) NIC is no GPU
    n = d(facts)["nvidia"]
    assert n["bus_gpus"] == [GPU1] and [g["bus_id"] for g in n["gpus"]] == [GPU1]
    device(facts, GPU1)["vendor_id"] = "0x1002"     # an AMD GPU
    device(facts, GPU0)["driver"] = "pci-stub"
    n = d(facts)["nvidia"]
    assert (n["bus_gpus"], n["gpus"], n["unreported"], n["smi_problems"]) == ([], [], [], [])


def test_nvidia_bus_gpus_unknown_without_pci_facts():
    facts = healthy_facts()
    del facts["pci"]
    n = d(facts)["nvidia"]
    assert (n["bus_gpus"], n["unreported"], n["smi_problems"]) == (None, None, None)
    assert [g["reported"] for g in n["gpus"]] == [True, True]
    facts = healthy_facts()
    del facts["nvidia"]
    n = d(facts)["nvidia"]
    assert (n["gpus"], n["bus_gpus"], n["unreported"], n["smi_problems"]) == (None, [GPU0, GPU1], None, None)


def test_lxc_container_checks():
    facts = healthy_facts()
    lxc = d(facts)["lxc"]
    (ct,) = lxc["gpu_containers"]
    assert (ct["missing_majors"], ct["missing_nodes"], ct["numa_pinning_problems"], ct["gpu_minors"]) == ([], [], [], [0])
    assert lxc["host_memory_mib"] == 2 * 263475712 // 1024
    assert lxc["memory_limit_mib"] == lxc["host_memory_mib"] - 2 * 8 * 1024
    conf = facts["lxc"]["containers"][0]
    conf["devices_allow"] = ["c 195:0 rwm", "c 195:255 rwm"]
    conf["cpuset"] = "0-20"
    conf["cpuset_mems"] = "0-1"
    ct = d(facts)["lxc"]["gpu_containers"][0]
    assert ct["missing_majors"] == ["508 (nvidia-uvm, live major)"]
    assert ct["numa_pinning_problems"] == ["cpus 16-20 outside GPU node(s) 0", "mems 1 not GPU node(s) 0"]
    conf["devices_allow"] = ["a"]
    assert d(facts)["lxc"]["gpu_containers"][0]["missing_majors"] == []
    conf["devices_allow"] = ["c *:* rwm"]
    assert d(facts)["lxc"]["gpu_containers"][0]["missing_majors"] == []


def test_lxc_unknown_uvm_major():
    facts = healthy_facts()
    facts["lxc"]["nvidia_uvm_major"] = None
    ct = d(facts)["lxc"]["gpu_containers"][0]
    assert ct["missing_majors"] is None and "nvidia-uvm" in ct["reason"]
    facts["lxc"]["containers"][0]["devices_allow"] = []
    assert d(facts)["lxc"]["gpu_containers"][0]["missing_majors"] == ["195 (nvidia)"]


def test_lxc_container_without_gpu_is_not_a_gpu_container():
    facts = healthy_facts()
    facts["lxc"]["containers"].append({"id": "200", "memory_mib": 1024, "devices_allow": [], "mounts": [],
                                       "dev_entries": [], "cpuset": None, "cpuset_mems": None})
    lxc = d(facts)["lxc"]
    assert [c["id"] for c in lxc["containers"]] == ["101", "200"]
    assert [c["id"] for c in lxc["gpu_containers"]] == ["101"]


def test_lxc_dev_entries_count_as_mounted():
    facts = healthy_facts()
    conf = facts["lxc"]["containers"][0]
    conf["mounts"] = []
    conf["dev_entries"] = ["/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm"]
    ct = d(facts)["lxc"]["gpu_containers"][0]
    assert ct["gpu_minors"] == [1] and ct["missing_nodes"] == []


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5000) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20)
_section = st.one_of(_json, st.just(healthy_facts()["pci"]))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.fixed_dictionaries({}, optional={
    "kernel": _json, "cpu": _json, "numa": _json, "pci": _section, "iommu": _json, "nvidia": _json, "lxc": _json,
    "persistence": _json}))
def test_derive_never_raises_on_garbage(facts):
    doc = derive(facts, PARAMS)
    json.dumps(doc["derived"])


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["kernel", "cpu", "numa", "pci", "nvidia", "lxc", "persistence"]), st.text(max_size=5), _json)
def test_derive_survives_one_corrupted_value(section, key, value):
    facts = healthy_facts()
    if isinstance(facts[section], dict):
        facts[section][key or "x"] = value
    for sub in facts[section].values():
        if isinstance(sub, list) and sub and isinstance(sub[0], dict):
            sub[0][key or "x"] = value
    json.dumps(derive(facts, PARAMS)["derived"])


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["kernel", "cpu", "numa", "pci", "iommu", "nvidia", "lxc", "persistence"]), _json)
def test_evaluation_never_raises_on_a_garbage_section(section, value):
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge.evaluation import evaluate
    facts = healthy_facts()
    facts[section] = value
    result = evaluate(facts, profile="amd-epyc-nvidia", host="h", today="2026-01-01")
    assert sum(result["summary"].values()) == len(result["findings"])
    json.dumps(result)


@pytest.mark.parametrize("section, rule", [("pcie", "PCI-008"), ("cpu_power", "CPU-008")])
def test_a_boot_script_without_execute_bit_does_not_count(section, rule):
    # systemd's ExecStart= refuses a script without an execute bit, even for root
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge.evaluation import evaluate
    facts = healthy_facts()
    assert set(f["status"] for f in evaluate(facts, profile="amd-epyc-nvidia", today="2026-06-01")["findings"]
               if f["id"] == rule) == {"pass"}
    facts["persistence"][section]["script"]["executable"] = False
    findings = [f for f in evaluate(facts, profile="amd-epyc-nvidia", today="2026-06-01")["findings"] if f["id"] == rule]
    assert findings and set(f["status"] for f in findings) == {"fail"}
    assert all("is not executable" in f["message"] for f in findings), findings[0]["message"]


# -- NUMA-006: the boot default of kernel.numa_balancing comes from the kernel's own configuration ---
def _numa_boot(config, nodes=2):
    facts = healthy_facts()
    facts["numa"]["node_count"] = nodes
    facts["kernel"]["sysctl_persisted"] = {}
    facts["kernel"]["configured_cmdline"] = {"params": {}}
    facts["kernel"]["config"] = config
    return d(facts)["kernel"]["sysctl_boot"]["numa_balancing"]


def _config(**options):
    return {"source": "/boot/config-6.8.12-4-pve", "options": options, "default_governor": None, "reason": None}


def test_numa_balancing_boot_default_enabled_by_the_kernel_config_fails_with_the_option_named():
    item = _numa_boot(_config(CONFIG_NUMA_BALANCING="y", CONFIG_NUMA_BALANCING_DEFAULT_ENABLED="y"))
    assert item["boot"] == 1
    assert "CONFIG_NUMA_BALANCING_DEFAULT_ENABLED=y in /boot/config-6.8.12-4-pve, 2 NUMA nodes" in item["source"]
    assert "assumed" not in item["source"]
    assert item["problems"]


@pytest.mark.parametrize("options, words", [
    ({"CONFIG_NUMA_BALANCING": "y", "CONFIG_NUMA_BALANCING_DEFAULT_ENABLED": "n"},
     "CONFIG_NUMA_BALANCING_DEFAULT_ENABLED is not set in /boot/config-6.8.12-4-pve"),
    ({"CONFIG_NUMA_BALANCING": "n"}, "CONFIG_NUMA_BALANCING is not set in /boot/config-6.8.12-4-pve"),
])
def test_numa_balancing_boot_default_off_in_the_kernel_config_passes(options, words):
    item = _numa_boot(_config(**options))
    assert item["boot"] == 0 and not item["problems"], item
    assert words in item["source"]


def test_numa_balancing_boot_default_without_kernel_config_is_an_assumption_saying_why():
    reason = "the running kernel's configuration was not found (/boot/config-6.8.12-4-pve, /proc/config.gz)"
    item = _numa_boot({"source": None, "options": None, "default_governor": None, "reason": reason})
    assert item["boot"] == 1
    assert "assumed" in item["source"] and reason in item["source"]
    one_node = _numa_boot(_config(CONFIG_NUMA_BALANCING="y", CONFIG_NUMA_BALANCING_DEFAULT_ENABLED="y"), nodes=1)
    assert one_node["boot"] == 0 and not one_node["problems"]
