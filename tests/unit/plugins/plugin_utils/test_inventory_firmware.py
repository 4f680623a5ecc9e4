# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Firmware in learn's inventory and INV-012 (issue 21): GPU VBIOS and NIC (HCA) firmware of the golden
host, compared on devices of the same model (and board, for NICs) of every audited host."""

import pytest

from helpers.baseline_facts import GPU0, GPU1, MGMT_NIC, NIC, device
from helpers.health_facts import add_health
from helpers.inventory import host_facts

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.inputs import learn
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge import evaluation
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_inventory import derive_inventory


def facts_with_health():
    return add_health(host_facts())


def firmware_items(facts, inventory):
    return dict((i["subject"], i) for i in derive_inventory(facts, {"inventory": inventory})["firmware"])


def test_learn_records_vbios_firmware_and_board():
    inventory = learn.learn_inventory(facts_with_health())
    assert [g["vbios"] for g in inventory["gpus"]] == ["98.02.52.00.02", "98.02.52.00.02"]
    nics = dict((n["address"], n) for n in inventory["nics"])
    assert (nics[NIC]["firmware"], nics[NIC]["board_id"]) == ("28.42.1000", "MT_0000000838")
    # the management NIC has no RDMA device: no firmware, and not an unknown of learn either
    assert (nics[MGMT_NIC]["firmware"], nics[MGMT_NIC]["board_id"]) == (None, None)
    assert inventory["unknown"] == []


def test_learn_lists_a_vbios_nvidia_smi_does_not_give():
    facts = facts_with_health()
    facts["nvidia"]["gpus"][1]["vbios_version"] = None
    unknown = learn.learn_inventory(facts)["unknown"]
    assert unknown == ["GPU %s: vbios unknown (nvidia-smi -q -x reports none)" % GPU1]


def test_the_golden_host_matches_itself():
    facts = facts_with_health()
    items = firmware_items(facts, learn.learn_inventory(facts))
    assert sorted(items) == [GPU0, GPU1, NIC]
    assert all(i["observed"] == i["expected"] and i["not_applicable"] is None for i in items.values())


def test_other_vbios_and_firmware_fail():
    facts = facts_with_health()
    inventory = learn.learn_inventory(facts)
    facts["nvidia"]["gpus"][0]["vbios_version"] = "98.02.3C.00.01"
    facts["health"]["rdma"]["devices"][0]["fw_ver"] = "28.39.1002"
    result = evaluation.evaluate(facts, params={"inventory": inventory}, host="gpu01", today="2026-06-01")
    failing = dict((f["subject"], f) for f in result["findings"] if f["id"] == "INV-012" and f["status"] == "fail")
    assert sorted(failing) == [GPU0, NIC]
    assert (failing[GPU0]["observed"], failing[GPU0]["expected"]) == ("98.02.3C.00.01", "98.02.52.00.02")
    assert (failing[NIC]["observed"], failing[NIC]["expected"]) == ("28.39.1002", "28.42.1000")
    assert failing[GPU0]["severity"] == "medium"


@pytest.mark.parametrize("change, message", [
    (lambda f: device(f, NIC).update(device_id="0x101d"),
     "not judged: model Mellanox 0x101d, golden host Mellanox 0x1021 (another model)"),
    (lambda f: f["health"]["rdma"]["devices"][0].update(board_id="MT_0000000970"),
     "not judged: board id MT_0000000970, golden host MT_0000000838 (another board)"),
])
def test_another_model_or_board_is_not_judged(change, message):
    facts = facts_with_health()
    inventory = learn.learn_inventory(facts)
    facts["health"]["rdma"]["devices"][0]["fw_ver"] = "22.41.1000"
    change(facts)
    assert firmware_items(facts, inventory)[NIC]["not_applicable"] == message


def test_unread_firmware_is_unknown_and_an_old_inventory_judges_nothing():
    facts = facts_with_health()
    inventory = learn.learn_inventory(facts)
    del facts["health"]
    item = firmware_items(facts, inventory)[NIC]
    assert item["observed"] is None and item["reason"] == \
        "firmware of %s: not read (/sys/class/infiniband/<dev>/fw_ver)" % NIC
    for gpu in inventory["gpus"]:
        del gpu["vbios"]
    for nic in inventory["nics"]:
        del nic["firmware"]
    assert firmware_items(facts, inventory) == {}


@pytest.mark.parametrize("garbage", [None, "x", [1], {"devices": "x"}, {"devices": [None, {"pci_address": 7}]}])
def test_garbage_health_rdma_gives_no_exception(garbage):
    facts = facts_with_health()
    inventory = learn.learn_inventory(facts)
    facts["health"]["rdma"] = garbage
    assert firmware_items(facts, inventory)[NIC]["observed"] is None


# -- Fabric Manager version (INV-010) ---------------------------------------------------------------
def _versions(facts, inventory):
    return dict((i["subject"], i) for i in derive_inventory(facts, {"inventory": inventory})["versions"])


def test_fabric_manager_version_is_learned_and_compared():
    facts = facts_with_health()
    inventory = learn.learn_inventory(facts)
    assert inventory["versions"]["fabric_manager"] == "575.57.08" and inventory["unknown"] == []
    facts["health"]["fabric_manager"]["version"] = "570.133.20"
    item = _versions(facts, inventory)["fabric_manager"]
    assert (item["observed"], item["expected"], item["detail"]) == ("570.133.20", "575.57.08", "Fabric Manager")


def test_hosts_without_nvswitch_neither_learn_nor_judge_fabric_manager():
    facts = facts_with_health()
    facts["health"]["fabric_manager"] = {"nvswitches": [], "checked": False, "version": None, "version_error": None}
    inventory = learn.learn_inventory(facts)
    assert inventory["versions"]["fabric_manager"] is None and inventory["unknown"] == []
    assert "fabric_manager" not in _versions(facts, inventory)


def test_fabric_manager_not_read_on_an_nvswitch_host_is_unknown_naming_why():
    facts = facts_with_health()
    inventory = learn.learn_inventory(facts)
    facts["health"]["fabric_manager"].update(version=None, version_error="nv-fabricmanager not found in PATH")
    item = _versions(facts, inventory)["fabric_manager"]
    assert item["observed"] is None and item["reason"] == "Fabric Manager version: nv-fabricmanager not found in PATH"
    assert learn.learn_inventory(facts)["unknown"] == ["fabric_manager version: nv-fabricmanager not found in PATH"]
