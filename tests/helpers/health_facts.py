"""The ``health`` section (docs/facts.md) for helpers.baseline_facts, and the pass/fail cases of the
health rules (rules/health.yml) in the shape of ``CASES`` of tests/unit/rules/test_catalogue.py.

``add_health(facts)`` makes the healthy document of baseline_facts pass every health rule (HEALTH-010
with the parameter ``nccl_nic_per_gpu: true``; it is not applicable otherwise): it adds the section,
lists ``health`` as gathered, gives both GPUs remapped-row counters (nvidia-smi shows them on every
Ampere or newer GPU), 18 active NVLinks each through two NVSwitches whose Fabric Manager runs, and a
topo -m matrix with the GPUs at NV18 and the ConnectX behind the GPUs' switch (PXB).
"""
import copy

from helpers.baseline_facts import GPU0, GPU1, NIC

XID_79 = {"count": 1, "first_s": 81234.4, "last_s": 81234.4, "message": "GPU has fallen off the bus."}
XID_13 = {"count": 2, "first_s": 91100.25, "last_s": 91100.26,
          "message": "Graphics SM Warp Exception on (GPC 1, TPC 2, SM 0): Out Of Range Address"}


def _port(state="ACTIVE", state_code=4, phys="LinkUp", phys_code=5, rate=400.0, text="400 Gb/sec (4X NDR)"):
    return {"port": 1, "state": state, "state_code": state_code, "phys_state": phys, "phys_state_code": phys_code,
            "rate": text, "rate_gbps": rate, "link_layer": "InfiniBand", "error": None}


def _nvlink_gpu(index, active, speed="26.562", total=18):
    return {"index": index, "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "uuid": "GPU-%08d" % index,
            "supported": True, "links_total": total, "links_active": active,
            "speeds_gbps": {speed: active} if active else {}, "inactive": list(range(active, total)),
            "unknown": [], "note": None}


HEALTHY_HEALTH = {
    "nvidia_seen": True,
    "kernel_log": {"source": "journalctl -k -b", "lines": 2841, "truncated": False, "events": 0, "by_gpu": {},
                   "unparsed": 0, "unparsed_example": None, "error": None},
    "nvlink": {"gpus": [_nvlink_gpu(0, 18), _nvlink_gpu(1, 18)], "note": None, "error": None},
    "fabric_manager": {"nvswitches": ["0000:4a:00.0", "0000:4b:00.0"], "checked": True, "load_state": "loaded",
                       "active_state": "active", "sub_state": "running", "unit_file_state": "enabled", "error": None},
    "peermem": {"nvidia_peermem": True, "nv_peer_mem": False},
    "rdma": {"devices": [{"name": "mlx5_0", "pci_address": NIC, "ports": [_port()], "error": None}]},
    "edac": {"present": True, "controllers": [
        {"name": "mc%d" % n, "mc_name": "F1Ah", "ce_count": 0, "ue_count": 0, "ce_noinfo_count": 0,
         "ue_noinfo_count": 0, "dimms": [{"name": "dimm0", "label": "P%d_CH_A_DIMM_0" % n, "ce_count": 0,
                                          "ue_count": 0}]} for n in (0, 1)]},
}

TOPOLOGY = {
    "devices": ["GPU0", "GPU1", "NIC0"],
    "matrix": {"GPU0": {"GPU0": "X", "GPU1": "NV18", "NIC0": "PXB"},
               "GPU1": {"GPU0": "NV18", "GPU1": "X", "NIC0": "PXB"},
               "NIC0": {"GPU0": "PXB", "GPU1": "PXB", "NIC0": "X"}},
    "affinity": {"GPU0": {"cpu": "0-31", "numa": "0", "gpu_numa": None},
                 "GPU1": {"cpu": "0-31", "numa": "0", "gpu_numa": None}},
    "nic_names": {"NIC0": "mlx5_0"},
}


def add_health(facts):
    """Add the healthy ``health`` section (and what the health rules read of ``nvidia``) to ``facts``."""
    facts["health"] = copy.deepcopy(HEALTHY_HEALTH)
    if "health" not in facts["gathered"]:
        facts["gathered"].append("health")
    for gpu in facts["nvidia"]["gpus"]:
        gpu["remapped_rows"] = {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}
    facts["nvidia"]["topology"] = copy.deepcopy(TOPOLOGY)
    return facts


# -- cases --------------------------------------------------------------------------------------------
def _noop(facts):
    return None


def _xid(address, code, entry):
    def mutate(facts):
        facts["health"]["kernel_log"]["by_gpu"].setdefault(address, {})[code] = dict(entry)
        facts["health"]["kernel_log"]["events"] += entry["count"]
    return mutate


def _rows(index, key):
    def mutate(facts):
        facts["nvidia"]["gpus"][index]["remapped_rows"][key] = True
        facts["nvidia"]["gpus"][index]["remapped_rows"]["uncorrectable"] = 1
    return mutate


def _nvlink(active1, speed1="26.562"):
    """GPU1 with ``active1`` of its 18 NVLinks up, at ``speed1``."""
    def mutate(facts):
        facts["health"]["nvlink"]["gpus"][1] = _nvlink_gpu(1, active1, speed1)
    return mutate


def _fabric(active_state, sub_state):
    """The Fabric Manager of the NVSwitch baseboard in ``active_state`` (``sub_state``)."""
    def mutate(facts):
        facts["health"]["fabric_manager"].update(active_state=active_state, sub_state=sub_state)
    return mutate


def _no_gpudirect(facts):
    # a Hopper host (so the Blackwell open-module rule does not apply) on the proprietary module
    for gpu in facts["nvidia"]["gpus"]:
        gpu["name"] = "NVIDIA H100 80GB HBM3"
    for dev in facts["pci"]["devices"]:
        if dev["address"] in (GPU0, GPU1):
            dev["device_id"] = "0x2330"
    facts["nvidia"]["module"]["open"] = False
    facts["health"]["peermem"] = {"nvidia_peermem": False, "nv_peer_mem": False}


def _port_down(facts):
    facts["health"]["rdma"]["devices"][0]["ports"][0].update(state="DOWN", state_code=1, phys_state="Polling",
                                                             phys_state_code=2)


def _second_port(rate, text):
    def mutate(facts):
        facts["health"]["rdma"]["devices"].append(
            {"name": "mlx5_1", "pci_address": NIC, "ports": [_port(rate=rate, text=text)], "error": None})
    return mutate


def _nic_far_from(index):
    def mutate(facts):
        matrix = facts["nvidia"]["topology"]["matrix"]
        matrix["GPU%d" % index]["NIC0"] = matrix["NIC0"]["GPU%d" % index] = "NODE"
    return mutate


def _edac(name, key, value):
    def mutate(facts):
        for mc in facts["health"]["edac"]["controllers"]:
            if mc["name"] == name:
                mc[key] = value
                mc["dimms"][0][key] = value  # the DIMM that counted them
    return mutate


#: rule id -> ((params, mutate) passing, (params, mutate) failing); mutate runs after add_health
HEALTH_CASES = {
    "HEALTH-001": (({}, _noop), ({}, _xid(GPU0, "79", XID_79))),
    "HEALTH-002": (({}, _noop), ({}, _xid(GPU1, "13", XID_13))),
    "HEALTH-003": (({}, _noop), ({}, _rows(0, "pending"))),
    "HEALTH-004": (({}, _noop), ({}, _rows(1, "failure"))),
    "HEALTH-005": (({}, _noop), ({}, _nvlink(12))),
    "HEALTH-006": (({}, _noop), ({}, _fabric("failed", "failed"))),
    "HEALTH-007": (({}, _noop), ({}, _no_gpudirect)),
    "HEALTH-008": (({}, _noop), ({}, _port_down)),
    "HEALTH-009": (({}, _second_port(400.0, "400 Gb/sec (4X NDR)")), ({}, _second_port(200.0, "200 Gb/sec (4X HDR)"))),
    "HEALTH-010": (({"nccl_nic_per_gpu": True}, _noop), ({"nccl_nic_per_gpu": True}, _nic_far_from(1))),
    "HEALTH-011": (({}, _noop), ({}, _edac("mc0", "ue_count", 1))),
    "HEALTH-012": (({}, _noop), ({}, _edac("mc1", "ce_count", 5000))),
}
