"""Learn mode: plugin_utils/inputs/learn.py (facts -> golden inventory, the profile document) and
plugin_utils/derive/derive_inventory.py (derived.inventory: a host compared with it)."""
import copy

import pytest
import yaml

from helpers.baseline_facts import GPU0, GPU1, MGMT_NIC, NIC, device, healthy_facts
from helpers.inventory import TOPOLOGY, golden, host_facts, set_device

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive import inventory_observe
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.inputs import learn
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive import derive
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_inventory import derive_inventory
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.schema import SchemaError, check


def inv_of(facts, inventory):
    return derive_inventory(facts, {"inventory": inventory})


def by_subject(items):
    return dict((item["subject"], item) for item in items)


# -- learning ------------------------------------------------------------------------------------

def test_learns_the_whole_inventory_of_a_host():
    inventory = learn.learn_inventory(host_facts(), 3)
    assert inventory["learned_from"] == "gpu01" and inventory["source"] == "/snap"
    assert inventory["cpu"] == {"vendor": "AuthenticAMD", "model_name": "AMD EPYC 9335 32-Core Processor",
                                "sockets": 1, "cores": 32, "threads": 64, "smt": True}
    assert inventory["memory"] == {"tolerance_pct": 3, "nodes": [{"node": 0, "mem_total_kb": 263475712},
                                                                 {"node": 1, "mem_total_kb": 263475712}]}
    assert [g["address"] for g in inventory["gpus"]] == [GPU0, GPU1]
    assert inventory["gpus"][0] == {
        "address": GPU0, "model": "NVIDIA 0x2bb5", "numa_node": 0, "link_width": 16, "link_speed": "32GT/s",
        "max_read_request": 4096, "max_payload": 256, "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "power_limit_w": 600.0, "vbios": "98.02.52.00.02"}
    # every NIC, the 1 GbE management port too: a NIC missing is a NIC missing
    assert [(n["address"], n["model"], n["link_width"]) for n in inventory["nics"]] == [
        (MGMT_NIC, "Intel 0x1533", 1), (NIC, "Mellanox 0x1021", 16)]
    # topo -m columns named by PCI address (GPUn -> nvidia-smi GPU n) and RDMA name (NICn), each pair once
    assert inventory["topology"]["links"] == [
        {"a": GPU0, "b": GPU1, "link": "PXB"}, {"a": GPU0, "b": "mlx5_0", "link": "PXB"},
        {"a": GPU1, "b": "mlx5_0", "link": "PXB"}]
    assert inventory["versions"] == {"kernel": "6.14.8-2-pve", "driver": "575.57.08", "cuda": "12.9",
                                     "fabric_manager": None}   # no health facts here: no NVSwitch seen
    assert inventory["unknown"] == []


def test_profile_document_is_valid_yaml_and_passes_the_profile_schema():
    inventory = learn.learn_inventory(host_facts())
    profile = learn.build_profile(inventory, "amd-epyc-nvidia", [])
    text = learn.render_profile(profile, "/c/schemas/profile.schema.json", yaml)
    assert text.startswith("# yaml-language-server: $schema=/c/schemas/profile.schema.json\n")
    loaded = yaml.safe_load(text)
    assert loaded == profile and "rules" not in loaded
    check("profile", loaded)
    assert "gpu01" in loaded["description"] and loaded["extends"] == "amd-epyc-nvidia"
    assert learn.build_profile(inventory, "site", ["INV-001"])["rules"] == {"include": ["INV-001"]}


@pytest.mark.parametrize("change, message", [
    (lambda inv: inv["topology"]["links"][0].update(link="NODENODE"), "topology.links.0.link must be a link type"),
    (lambda inv: inv["gpus"][0].update(address="43:00.0"), "gpus.0.address must be a PCI address"),
    (lambda inv: inv["memory"].update(tolerance_pct=120), "memory.tolerance_pct must be a number from 0 to 100"),
    (lambda inv: inv["cpu"].update(sockets="two"), "'two' is not of type"),
    (lambda inv: inv.update(colour="blue"), "unknown key(s) colour"),
])
def test_profile_schema_rejects_a_malformed_inventory(change, message):
    inventory = learn.learn_inventory(host_facts())
    change(inventory)
    with pytest.raises(SchemaError) as err:
        check("profile", learn.build_profile(inventory, "amd-epyc-nvidia", []))
    assert message in str(err.value)


def test_idle_golden_gpu_below_its_capable_speed_does_not_teach_a_speed():
    facts = host_facts()
    device(facts, GPU0)["pcie"]["link_speed"] = "2.5GT/s"
    facts["nvidia"]["gpus"][0]["power"]["state"] = "P8"
    facts["nvidia"]["gpus"][1]["power"]["state"] = "P8"  # idle at its full speed: the speed still counts
    inventory = learn.learn_inventory(facts)
    assert [g["link_speed"] for g in inventory["gpus"]] == [None, "32GT/s"]
    assert inventory["unknown"] == ["GPU %s: link speed 2.5GT/s not learned: GPU idle (P8), below its capable 32GT/s" % GPU0]
    assert "performance_state" not in inventory["gpus"][0]


def test_unreadable_values_are_null_with_the_file_or_command_named():
    facts = host_facts()
    facts["cpu"]["model_name"] = None
    facts["numa"]["nodes"][1]["mem_total_kb"] = None
    facts["nvidia"].update(driver_version=None, cuda_version=None, topology=None, gpus=[])
    facts["nvidia"]["module"]["version"] = None
    facts["nvidia"]["smi"] = {"available": False, "error": "nvidia-smi not found in PATH"}
    facts["errors"] = [{"subsystem": "numa", "path": "/sys/devices/system/node/node1/meminfo", "reason": "missing"}]
    inventory = learn.learn_inventory(facts)
    assert inventory["cpu"]["model_name"] is None and inventory["versions"]["driver"] is None
    assert inventory["unknown"] == [
        "cpu.model_name: /proc/cpuinfo: not reported",
        "memory of node1: /sys/devices/system/node/node1/meminfo: missing",
        "GPU %s: name, power_limit_w, vbios unknown (nvidia-smi -q -x does not list it: nvidia-smi not found in PATH)" % GPU0,
        "GPU %s: name, power_limit_w, vbios unknown (nvidia-smi -q -x does not list it: nvidia-smi not found in PATH)" % GPU1,
        "GPU/NIC topology: no topology: nvidia-smi not found in PATH",
        "cuda version: nvidia-smi -q -x: nvidia-smi not found in PATH",
        "driver version: nvidia-smi -q -x: nvidia-smi not found in PATH",
    ]
    check("profile", learn.build_profile(inventory, "amd-epyc-nvidia", []))


@pytest.mark.parametrize("facts", [None, {}, {"pci": "garbage", "cpu": [], "numa": {"nodes": "x"}, "nvidia": 5},
                                   {"pci": {"devices": [{"address": 7}, "x", {"address": GPU0, "kind": "gpu", "pcie": 3}]},
                                    "nvidia": {"gpus": [None, {"bus_id": 4}], "topology": {"devices": "GPU0"}}}])
def test_garbage_facts_give_unknowns_never_an_exception(facts):
    inventory = learn.learn_inventory(facts)
    assert inventory["unknown"]
    check("profile", learn.build_profile(inventory, "amd-epyc-nvidia", []))
    derive_inventory(facts, {"inventory": inventory})


def test_topology_is_not_matched_when_topo_and_smi_count_gpus_differently():
    facts = host_facts()
    del facts["nvidia"]["gpus"][1]
    seen = inventory_observe.observe_topology(facts)
    assert seen["links"] is None
    assert seen["reason"] == ("nvidia-smi topo -m lists 2 GPUs and nvidia-smi -q 1: their GPUn labels cannot be "
                              "matched to PCI addresses")


@pytest.mark.parametrize("text, name", [("gpu07", "gpu07"), ("Demo_Host.example.com", "demo-host-example-com"),
                                        ("--", None), (None, None)])
def test_profile_name(text, name):
    assert learn.profile_name(text) == name


@pytest.mark.parametrize("gpu, idle", [
    ({"power": {"state": "P8"}}, "P8"), ({"performance_state": "P12"}, "P12"), ({"power": {"state": "P0"}}, None),
    ({"power": {"state": "P2"}, "clocks_event_reasons": {"active": ["gpu_idle"]}}, "P2"),
    ({"clocks_event_reasons": {"active": ["gpu_idle"]}}, "gpu_idle"), ({"power": {"state": "N/A"}}, None), (None, None),
])
def test_idle_state(gpu, idle):
    assert inventory_observe.idle_state(gpu) == idle


# -- judging a host against the inventory ----------------------------------------------------

def test_without_an_inventory_nothing_is_judged():
    for params in ({}, {"inventory": {}}, {"inventory": None}):
        out = derive_inventory(host_facts(), params)
        assert out["present"] is False and out["gpus"] == [] and out["cpu"] == []
    assert derive(host_facts(), {"inventory": {}})["derived"]["inventory"]["present"] is False


def test_the_golden_host_matches_itself():
    out = inv_of(host_facts(), golden())
    assert out["present"] is True and out["learned_from"] == "gpu01"
    assert all(i["problems"] == [] for i in out["gpus"] + out["nics"])
    assert all(i["observed"] == i["expected"] for i in out["cpu"] + out["versions"])
    assert all(i["link_width"] == i["golden_link_width"] and i["settings_problems"] == [] for i in out["links"])
    assert all(i["link"] == i["golden_link"] for i in out["topology"]) and len(out["topology"]) == 3


def test_missing_and_extra_gpus_by_address():
    facts = host_facts()
    facts["pci"]["devices"] = [d for d in facts["pci"]["devices"] if d["address"] != GPU1]
    facts["pci"]["devices"].append(dict(device(host_facts(), GPU1), address="0000:46:00.0"))
    out = inv_of(facts, golden())
    gpus = by_subject(out["gpus"])
    assert gpus[GPU1]["problems"] == ["missing: the golden host has GPU NVIDIA RTX PRO 6000 Blackwell Server Edition "
                                      "here; it is not on this host's PCI bus"]
    assert gpus["0000:46:00.0"]["problems"] == ["extra: GPU NVIDIA 0x2bb5 is not on the golden host"]
    assert gpus[GPU0]["problems"] == []
    # the missing GPU is judged once (INV-003): no link, NUMA or topology items for it
    assert GPU1 not in by_subject(out["links"]) and GPU1 not in by_subject(out["numa"])
    assert [i["subject"] for i in out["topology"]] == ["%s ~ mlx5_0" % GPU0]


def test_narrower_link_lower_settings_other_node_and_power():
    facts = host_facts()
    device(facts, GPU0)["pcie"].update(link_width=8, max_read_request=512)
    device(facts, NIC)["numa_node"] = 1
    facts["nvidia"]["gpus"][1]["power"]["limit_w"] = 450.0
    out = inv_of(facts, golden())
    links = by_subject(out["links"])
    assert (links[GPU0]["link_width"], links[GPU0]["golden_link_width"]) == (8, 16)
    assert links[GPU0]["settings_problems"] == ["MaxReadReq 512 B, golden host 4096 B"]
    assert (by_subject(out["numa"])[NIC]["numa_node"], by_subject(out["numa"])[NIC]["golden_numa_node"]) == (1, 0)
    power = by_subject(out["power"])
    assert (power[GPU1]["power_limit_w"], power[GPU1]["golden_power_limit_w"]) == (450.0, 600.0)


def test_slower_link_of_an_idle_gpu_is_not_judged():
    facts = host_facts()
    device(facts, GPU0)["pcie"]["link_speed"] = "2.5GT/s"
    device(facts, GPU1)["pcie"]["link_speed"] = "2.5GT/s"
    facts["nvidia"]["gpus"][0]["power"]["state"] = "P8"
    facts["nvidia"]["gpus"][1]["power"]["state"] = "P0"
    speeds = by_subject(inv_of(facts, golden())["speeds"])
    assert speeds[GPU0]["not_applicable"] == "not judged: GPU idle (P8)"
    assert (speeds[GPU1]["not_applicable"], speeds[GPU1]["link_speed_gts"], speeds[GPU1]["golden_link_speed_gts"]) == \
        (None, 2.5, 32.0)
    # without a performance state a slower GPU link proves nothing: unknown with the reason
    del facts["nvidia"]["gpus"][1]["power"]["state"]
    speeds = by_subject(inv_of(facts, golden())["speeds"])
    assert speeds[GPU1]["link_speed_gts"] is None and "performance state is unknown" in speeds[GPU1]["reason"]


def test_memory_below_the_tolerance_and_a_missing_node():
    facts = host_facts()
    facts["numa"]["nodes"][0]["mem_total_kb"] = 263475712 - 263475712 // 100  # 1 % less: within 2 %
    del facts["numa"]["nodes"][1]
    memory = by_subject(inv_of(facts, golden())["memory"])
    assert memory["node0"]["observed_kb"] >= memory["node0"]["min_kb"]
    assert memory["node1"]["observed_kb"] == 0 and memory["node1"]["detail"].endswith("the node is missing")


def test_topology_moved_nic_and_versions():
    facts = host_facts()
    facts["nvidia"]["topology"] = copy.deepcopy(TOPOLOGY)
    facts["nvidia"]["topology"]["matrix"]["GPU0"]["NIC0"] = "SYS"
    facts["kernel"]["release"] = "6.8.12-4-pve"
    out = inv_of(facts, golden())
    topo = by_subject(out["topology"])
    assert (topo["%s ~ mlx5_0" % GPU0]["link"], topo["%s ~ mlx5_0" % GPU0]["golden_link"]) == ("SYS", "PXB")
    versions = by_subject(out["versions"])
    assert (versions["kernel"]["observed"], versions["kernel"]["expected"]) == ("6.8.12-4-pve", "6.14.8-2-pve")


def test_facts_missing_give_reasons_not_guesses():
    facts = host_facts()
    del facts["pci"]
    facts["nvidia"]["topology"] = None
    out = inv_of(facts, golden())
    assert all(i["problems"] is None and "the pci facts were not gathered" in i["reason"] for i in out["gpus"])
    assert out["links"] == []
    assert {i["reason"] for i in out["topology"]} == {"no topology: nvidia-smi topo -m gave no matrix"}


@pytest.mark.parametrize("inventory, key", [
    ("not a mapping", "cpu"), ({"gpus": "x"}, "gpus"), ({"memory": {"nodes": 3}}, "memory"),
    ({"cpu": [1]}, "cpu"), ({"versions": 7}, "versions"), ({"topology": {"links": "x"}}, "topology"),
])
def test_hand_edited_inventory_errors_are_reasons(inventory, key):
    out = derive_inventory(host_facts(), {"inventory": inventory})
    assert out["present"] is True
    (item,) = out[key]
    assert "params.inventory" in item["reason"]


def test_golden_value_unknown_is_not_judged():
    out = inv_of(host_facts(), golden(set_device(GPU0, "numa_node", None),
                                      lambda inv: inv["cpu"].update(model_name=None)))
    assert by_subject(out["numa"])[GPU0]["not_applicable"].startswith("not judged: the golden host's NUMA node")
    assert by_subject(out["cpu"])["model"]["not_applicable"].startswith("not judged: the golden host's CPU model")


def test_healthy_facts_helper_is_unchanged_by_learning():
    facts = healthy_facts()
    before = copy.deepcopy(facts)
    learn.learn_inventory(facts)
    derive_inventory(facts, {"inventory": golden()})
    assert facts == before
