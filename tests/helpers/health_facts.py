"""The ``health`` section (docs/facts.md) for helpers.baseline_facts, and ``HEALTH_CASES``: the first
passing and failing example of each health rule (rules/examples/health.yml, read by
helpers.rule_examples) as ``{rule id: ((params, mutate) passing, (params, mutate) failing)}``.

``add_health(facts)`` makes the healthy document of baseline_facts pass every health rule (HEALTH-010
with the parameter ``nccl_nic_per_gpu: true``; it is not applicable otherwise): it adds the section,
lists ``health`` as gathered, gives both GPUs remapped-row counters (nvidia-smi shows them on every
Ampere or newer GPU), 18 active NVLinks each through two NVSwitches whose Fabric Manager runs, and a
topo -m matrix with the GPUs at NV18 and the ConnectX behind the GPUs' switch (PXB).
"""
import copy

from helpers.baseline_facts import GPU0, GPU1, NIC
from helpers.rule_examples import case_pairs

XID_79 = {"count": 1, "first_s": 81234.4, "last_s": 81234.4, "message": "GPU has fallen off the bus."}


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
                   "faults": {}, "faults_no_address": {}, "nvswitch": {},
                   "unparsed": 0, "unparsed_example": None, "unparsed_lines": [], "error": None,
                   "boot_id": "9f1c2b3a4d5e6f708192a3b4c5d6e7f8"},
    # gpuhost_kernel_log_boots 2: the previous boot was read and holds no fault (HEALTH-016 passes)
    "kernel_log_boots": 2,
    "kernel_log_previous": {"source": "journalctl -k -b -1", "lines": 2210, "truncated": False, "events": 0,
                            "by_gpu": {}, "faults": {}, "faults_no_address": {}, "nvswitch": {}, "unparsed": 0,
                            "unparsed_example": None, "unparsed_lines": [], "error": None,
                            "boot_id": "3c5e9a1f0b7d4c2e8a6f1d3b5c7e9a0f",
                            "boot_offset": -1, "span": "Wed 2026-12-02 08:01:12 UTC—Thu 2026-12-03 22:40:05 UTC"},
    "nvlink": {"gpus": [_nvlink_gpu(0, 18), _nvlink_gpu(1, 18)], "note": None, "error": None},
    "fabric_manager": {"nvswitches": ["0000:4a:00.0", "0000:4b:00.0"], "checked": True, "load_state": "loaded",
                       "active_state": "active", "sub_state": "running", "unit_file_state": "enabled",
                       "version": "575.57.08", "version_error": None, "error": None},
    "peermem": {"nvidia_peermem": True, "nv_peer_mem": False},
    "rdma": {"devices": [{"name": "mlx5_0", "pci_address": NIC, "ports": [_port()], "error": None,
                          "fw_ver": "28.42.1000", "board_id": "MT_0000000838", "hca_type": "MT4129"}]},
    "edac": {"present": True, "controllers": [
        {"name": "mc%d" % n, "mc_name": "F1Ah", "ce_count": 0, "ue_count": 0, "ce_noinfo_count": 0,
         "ue_noinfo_count": 0, "dimms": [{"name": "dimm0", "label": "P%d_CH_A_DIMM_0" % n, "ce_count": 0,
                                          "ue_count": 0}]} for n in (0, 1)]},
    # error counters (facts/counters.py): the same values an hour ago, in HISTORY
    "counters": {
        "ib": [{"device": "mlx5_0", "port": 1, "error": None,
                "counters": {"link_downed": 1, "symbol_error": 0, "port_rcv_errors": 0, "link_error_recovery": 0}}],
        "aer": [{"address": GPU0, "correctable": 0, "error": None}, {"address": GPU1, "correctable": 2, "error": None},
                {"address": NIC, "correctable": 0, "error": None}],
        "nvlink": {"gpus": [{"index": i, "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "uuid": "GPU-%08d" % i,
                             "links": 18, "totals": {"replay": 0, "recovery": 0, "crc": 0}, "note": None}
                            for i in (0, 1)], "note": None, "error": None},
    },
}

#: the counter values of HEALTHY_HEALTH as the history holds them (derive_counters.counter_values)
COUNTERS_RECORDED = {
    "ib|mlx5_0/1|link_downed": 1, "ib|mlx5_0/1|symbol_error": 0, "ib|mlx5_0/1|port_rcv_errors": 0,
    "ib|mlx5_0/1|link_error_recovery": 0, "aer|%s|correctable" % GPU0: 0, "aer|%s|correctable" % GPU1: 2,
    "aer|%s|correctable" % NIC: 0, "ecc|%s|corrected" % GPU0: 0, "ecc|%s|corrected" % GPU1: 0}
for _gpu in (GPU0, GPU1):
    COUNTERS_RECORDED.update(("nvlink|%s|%s" % (_gpu, name), 0) for name in ("replay", "recovery", "crc"))

#: ``facts["history"]`` (history.with_history) of the healthy document: one audit an hour earlier in
#: this boot, with the same counter values, so the counter rules (HEALTH-020..023) pass
HISTORY = {"boot_id": None, "source": "/var/lib/gpuhost/history/gpu01.jsonl", "audits": 1,
           "first": "2025-08-01T10:00:00+00:00", "last": "2025-08-01T10:00:00+00:00", "reason": None,
           "earlier": {"max_read_request": {}}, "other_boot": None, "now": "2025-08-01T11:00:00+00:00",
           "counters": dict((name, [["2025-08-01T10:00:00+00:00", value]]) for name, value in COUNTERS_RECORDED.items())}

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
        gpu.setdefault("ecc", {})["volatile_corrected"] = 0
    facts["nvidia"]["topology"] = copy.deepcopy(TOPOLOGY)
    facts["history"] = copy.deepcopy(HISTORY)
    facts["history"]["boot_id"] = facts["kernel"].get("boot_id")
    return facts


# -- cases: rules/examples/health.yml -------------------------------------------------------------
#: rule id -> ((params, mutate) passing, (params, mutate) failing); mutate runs after add_health
HEALTH_CASES = case_pairs("health")
