"""Every rule of the shipped catalogue: a passing and a failing facts document each.

CASES is keyed by rule id; test_every_rule_has_cases makes a new rule without both cases
fail the suite. Each case is ``(params, mutate(facts))`` applied to helpers.baseline_facts.
"""
import os
import subprocess
import sys

import pytest

from helpers.baseline_facts import DOWN0, GPU0, GPU1, NIC, ROOT, device, healthy_facts
from helpers import inventory as inv
from helpers.health_facts import HEALTH_CASES, add_health

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue import load_catalogue
from ansible_collections.gpuhost.baseline.plugins.plugin_utils import evaluation

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TODAY = "2026-06-01"


def _set(path, value):
    def mutate(facts):
        cur = facts
        for key in path[:-1]:
            cur = cur[key]
        cur[path[-1]] = value
    return mutate


def _dev(address, *path_value):
    *path, value = path_value

    def mutate(facts):
        cur = device(facts, address)
        for key in path[:-1]:
            cur = cur[key]
        cur[path[-1]] = value
    return mutate


def _gpu(index, *path_value):
    *path, value = path_value

    def mutate(facts):
        cur = facts["nvidia"]["gpus"][index]
        for key in path[:-1]:
            cur = cur[key]
        cur[path[-1]] = value
    return mutate


def _ct(key, value):
    return _set(("lxc", "containers", 0, key), value)


def _noop(facts):
    return None


def _enable_c2(facts):
    facts["cpu"]["cpuidle"]["states"][2].update(enabled_cpus=64, disabled_cpus=0)


def _cmdline_differs(facts):
    facts["kernel"]["configured_cmdline"]["params"]["iommu"] = "off"


def _spread(facts):
    facts["numa"]["free_pct_spread"] = 40.0


def _ecc_mixed(facts):
    facts["nvidia"]["gpus"][1]["ecc"] = {"current": "Disabled", "pending": "Disabled"}


def _no_uvm_mount(facts):
    facts["lxc"]["containers"][0]["mounts"].pop()


def _mps_mismatch(facts):
    device(facts, ROOT)["pcie"]["max_payload"] = 512


def _unpersist_sysctl(name):
    def mutate(facts):
        del facts["kernel"]["sysctl_persisted"][name]
    return mutate


def _persist_sysctl(name, value):
    def mutate(facts):
        facts["kernel"]["sysctl_persisted"][name] = {"value": value, "file": "/etc/sysctl.d/99-local.conf"}
    return mutate


def _no_pcie_entry(facts):
    # nothing sets GPU0's MaxReadReq at boot, and the audit history saw 512 B earlier in this boot:
    # the running 4096 B was set at runtime (without the history it passes: a firmware-set value)
    del facts["persistence"]["pcie"]["devices"][GPU0]
    facts["history"] = {"boot_id": "b0", "audits": 1, "first": "2025-08-01T10:00:00+00:00", "reason": None,
                        "earlier": {"max_read_request": {GPU0: [{"time": "2025-08-01T10:00:00+00:00", "value": 512}]}}}


def _cpu_unit_disabled(facts):
    facts["persistence"]["cpu_power"].update(enabled=False, active=False)


def _smi_lost_gpu1(facts):
    # GPU1 is still on the PCI bus, but nvidia-smi lists only GPU0
    del facts["nvidia"]["gpus"][1]


# rule id -> ((params, mutate) passing, (params, mutate) failing)
CASES = {
    "CPU-001": (({}, _noop), ({}, _set(("cpu", "cpufreq", "driver"), {"acpi-cpufreq": 64}))),
    "CPU-002": (({}, _noop), ({}, _set(("cpu", "amd_pstate", "status"), "passive"))),
    "CPU-003": (({}, _noop), ({}, _set(("cpu", "cpufreq", "governor"), {"performance": 32, "powersave": 32}))),
    "CPU-004": (({}, _noop), ({}, _set(("cpu", "cpufreq", "epp"), {"balance_performance": 64}))),
    "CPU-005": (({}, _noop), ({}, _set(("cpu", "boost"), False))),
    "CPU-006": (({}, _noop), ({}, _enable_c2)),
    "CPU-007": (({"smt": "on"}, _noop), ({"smt": "off"}, _noop)),
    "CPU-008": (({}, _noop), ({}, _cpu_unit_disabled)),
    "KERNEL-001": (({}, _noop), ({}, _set(("kernel", "release"), "6.8.12-4-pve"))),
    "KERNEL-002": (({}, _noop), ({}, _cmdline_differs)),
    "KERNEL-003": (({}, _noop), ({}, _set(("kernel", "preempt", "model"), "full"))),
    "KERNEL-004": (({}, _noop), ({}, _set(("kernel", "thp", "enabled"), "never"))),
    "KERNEL-005": (({}, _noop), ({}, _set(("kernel", "sysctl", "swappiness"), 60))),
    "KERNEL-006": (({}, _noop), ({}, _set(("kernel", "installed"), ["6.8.12-4-pve", "6.14.8-2-pve", "6.17.2-1-pve"]))),
    "KERNEL-007": (({}, _noop), ({}, _unpersist_sysctl("vm.swappiness"))),
    "NUMA-001": (({}, _noop), ({}, _set(("kernel", "sysctl", "numa_balancing"), 1))),
    "NUMA-002": (({}, _noop), ({}, _set(("kernel", "sysctl", "zone_reclaim_mode"), 1))),
    "NUMA-003": (({}, _noop), ({}, _set(("numa", "nodes", 0, "free_pct"), 0.9))),
    "NUMA-004": (({}, _noop), ({}, _spread)),
    "NUMA-005": (({}, _noop), ({}, _set(("numa", "mem_total_spread_pct"), 12.5))),
    "NUMA-006": (({}, _noop), ({}, _unpersist_sysctl("kernel.numa_balancing"))),
    "NUMA-007": (({}, _noop), ({}, _persist_sysctl("vm.zone_reclaim_mode", "1"))),
    "PCI-001": (({}, _noop), ({}, _dev(GPU0, "pcie", "max_read_request", 512))),
    "PCI-002": (({}, _noop), ({}, _dev(NIC, "pcie", "max_read_request", 512))),
    "PCI-003": (({}, _noop), ({}, _mps_mismatch)),
    "PCI-004": (({}, _noop), ({}, _dev(GPU1, "pcie", "link_width", 8))),
    "PCI-005": (({}, _noop), ({}, _dev(NIC, "pcie", "link_speed", "16GT/s"))),
    "PCI-006": (({}, _noop), ({}, _dev(DOWN0, "acs", "ctl", "request_redirect", True))),
    "PCI-007": (({}, _noop), ({}, _dev(GPU0, "aer", "counters", "fatal", "TLP", 2))),
    "PCI-008": (({}, _noop), ({}, _no_pcie_entry)),
    "IOMMU-001": (({}, _noop), ({}, _set(("iommu", "enabled"), False))),
    "IOMMU-002": (({}, _noop), ({}, _set(("iommu", "passthrough"), False))),
    "NVIDIA-001": (({}, _noop), ({}, _set(("nvidia", "driver_version"), "565.57.01"))),
    "NVIDIA-002": (({}, _noop), ({}, _set(("nvidia", "module", "open"), False))),
    "NVIDIA-003": (({}, _noop), ({}, _set(("nvidia", "cuda_version"), "12.4"))),
    "NVIDIA-004": (({}, _noop), ({}, _gpu(1, "persistence", False))),
    "NVIDIA-005": (({}, _noop), ({}, _gpu(0, "ecc", "pending", "Disabled"))),
    "NVIDIA-006": (({}, _noop), ({}, _ecc_mixed)),
    "NVIDIA-007": (({}, _noop), ({}, _gpu(0, "power", "limit_w", 450.0))),
    "NVIDIA-008": (({}, _noop), ({}, _gpu(1, "clocks_event_reasons", "active", ["hw_thermal_slowdown", "sw_power_cap"]))),
    "NVIDIA-009": (({}, _noop), ({}, _gpu(0, "pcie", "width_current", 8))),
    "NVIDIA-010": (({}, _noop), ({}, _smi_lost_gpu1)),
    "LXC-001": (({}, _noop), ({}, _ct("devices_allow", ["c 195:* rwm", "c 509:* rwm"]))),
    "LXC-002": (({}, _noop), ({}, _no_uvm_mount)),
    "LXC-003": (({}, _noop), ({}, _ct("memory_mib", 2 * 1024 * 1024))),
    "LXC-004": (({}, _noop), ({}, _ct("cpuset", "16-31"))),
    # learn mode: the golden inventory (params.inventory) differs, the audited host is the healthy one
    "INV-001": (({"inventory": inv.golden()}, inv.with_topology),
                ({"inventory": inv.golden(inv.set_path(("cpu", "sockets"), 2))}, inv.with_topology)),
    "INV-002": (({"inventory": inv.golden()}, inv.with_topology),
                ({"inventory": inv.golden(inv.set_path(("memory", "nodes", 1, "mem_total_kb"), 526951424))},
                 inv.with_topology)),
    "INV-003": (({"inventory": inv.golden()}, inv.with_topology),
                ({"inventory": inv.golden(inv.add_gpu("0000:46:00.0"))}, inv.with_topology)),
    "INV-004": (({"inventory": inv.golden()}, inv.with_topology),
                ({"inventory": inv.golden(inv.set_device(NIC, "model", "Mellanox 0x101d"))}, inv.with_topology)),
    "INV-005": (({"inventory": inv.golden()}, inv.with_topology),
                ({"inventory": inv.golden(inv.set_device(GPU1, "link_width", 32))}, inv.with_topology)),
    "INV-006": (({"inventory": inv.golden()}, inv.with_topology),
                ({"inventory": inv.golden(inv.set_device(NIC, "link_speed", "64GT/s"))}, inv.with_topology)),
    "INV-007": (({"inventory": inv.golden()}, inv.with_topology),
                ({"inventory": inv.golden(inv.set_device(GPU0, "max_payload", 512))}, inv.with_topology)),
    "INV-008": (({"inventory": inv.golden()}, inv.with_topology),
                ({"inventory": inv.golden(inv.set_link(GPU0, "mlx5_0", "PIX"))}, inv.with_topology)),
    "INV-009": (({"inventory": inv.golden()}, inv.with_topology),
                ({"inventory": inv.golden(inv.set_device(GPU1, "numa_node", 1))}, inv.with_topology)),
    "INV-010": (({"inventory": inv.golden()}, inv.with_topology),
                ({"inventory": inv.golden(inv.set_path(("versions", "driver"), "570.133.07"))}, inv.with_topology)),
    "INV-011": (({"inventory": inv.golden()}, inv.with_topology),
                ({"inventory": inv.golden(inv.set_device(GPU0, "power_limit_w", 700.0))}, inv.with_topology)),
}

CASES.update(HEALTH_CASES)


def _without_inventory(finding):
    """Not an inventory rule left not_applicable because the profile holds no inventory."""
    return not (finding["area"] == "inventory" and finding["status"] == "not_applicable")


@pytest.fixture(scope="module")
def catalogue():
    return load_catalogue()


def _run(params, mutate, profile="amd-epyc-nvidia"):
    facts = add_health(healthy_facts())
    mutate(facts)
    return evaluation.evaluate(facts, profile=profile, params=params, host="gpu01", today=TODAY)


def _of(result, rule_id):
    return [f for f in result["findings"] if f["id"] == rule_id]


def test_every_rule_has_cases(catalogue):
    ids = set(r.id for r in catalogue.rules)
    assert ids == set(CASES), "rules without pass/fail cases: %s; cases without rule: %s" % (
        sorted(ids - set(CASES)), sorted(set(CASES) - ids))


def test_profile_amd_selects_every_rule(catalogue):
    assert set(catalogue.profile("amd-epyc-nvidia").rule_ids) == set(r.id for r in catalogue.rules)


def test_healthy_document_passes_everything():
    result = _run({"smt": "on", "nccl_nic_per_gpu": True}, _noop)
    bad = [(f["id"], f["status"], f["message"]) for f in result["findings"] if f["status"] != "pass"
           and _without_inventory(f)]
    assert bad == []


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_passes(rule_id):
    params, mutate = CASES[rule_id][0]
    findings = _of(_run(params, mutate), rule_id)
    assert findings, "no finding for %s" % rule_id
    assert [f["status"] for f in findings] == ["pass"] * len(findings), [f["message"] for f in findings]


@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_rule_fails(rule_id):
    params, mutate = CASES[rule_id][1]
    result = _run(params, mutate)
    findings = _of(result, rule_id)
    failing = [f for f in findings if f["status"] == "fail"]
    assert failing, [(f["status"], f["message"]) for f in findings]
    for f in failing:
        assert f["message"] and f["fix"] and f["source"].startswith("https://")
        assert f["observed"] is not None
    # one broken thing fails its own rule and no unrelated one (shared facts aside)
    others = set(f["id"] for f in result["findings"] if f["status"] == "fail") - {rule_id}
    allowed = {"PCI-004": {"NVIDIA-009"}, "NVIDIA-009": set(), "NUMA-003": set(),
               "KERNEL-001": {"KERNEL-006"}, "KERNEL-006": set()}.get(rule_id, set())
    assert others <= allowed


def test_failing_messages_are_specific():
    result = _run({}, _dev(GPU0, "pcie", "max_read_request", 512))
    (f,) = [f for f in _of(result, "PCI-001") if f["status"] == "fail"]
    assert f["message"] == ("MaxReadReq 512 B < 4096 B on 0000:43:00.0 "
                            "(NVIDIA RTX PRO 6000 Blackwell Server Edition)")
    assert (f["subject"], f["expected"], f["observed"]) == (GPU0, 4096, 512)


def test_intel_host_makes_amd_rules_not_applicable():
    def intel(facts):
        facts["cpu"].update(vendor="GenuineIntel", family=6, model=143)
        facts["cpu"]["cpufreq"]["driver"] = {"intel_pstate": 64}
        facts["cpu"]["amd_pstate"]["status"] = None
    result = _run({}, intel)
    for rid in ("CPU-001", "CPU-002"):
        (f,) = _of(result, rid)
        assert f["status"] == "not_applicable"


def test_no_gpu_makes_nvidia_rules_not_applicable():
    def no_gpu(facts):
        facts["nvidia"] = {"module": {"version": None, "open": None, "raw": None}, "smi": {"available": False, "error": None},
                           "driver_version": None, "cuda_version": None, "gpus": [], "topology": None, "present": False}
        facts["pci"]["devices"] = [d for d in facts["pci"]["devices"] if d["kind"] != "gpu"]
        facts["lxc"]["proxmox"] = False
    result = _run({}, no_gpu, profile="generic-nvidia-inference")
    for f in result["findings"]:
        if f["area"] in ("nvidia", "lxc") or f["id"] in ("PCI-001", "PCI-006"):
            assert f["status"] == "not_applicable", (f["id"], f["message"])


# -- device rules apply only to devices with the register they judge (issue 14, item 2) --------

VIRTIO_NIC = "0000:00:03.0"
#: the rules that read the PCI Express capability of a GPU or NIC (MaxReadReq, MaxPayload, link, boot MaxReadReq)
PCIE_REGISTER_RULES = ("PCI-002", "PCI-003", "PCI-004", "PCI-005", "PCI-008")


def _virtio_nic(config_bytes=256, error=None):
    """A virtio network function on a conventional PCI bus: no capability list entry for PCI Express."""
    def mutate(facts):
        facts["pci"]["devices"].insert(0, {
            "address": VIRTIO_NIC, "vendor_id": "0x1af4", "device_id": "0x1041", "class_id": "0x020000",
            "kind": "nic", "driver": "virtio-pci", "numa_node": None, "local_cpulist": "0-31", "upstream": [],
            "config_bytes": config_bytes, "pcie": None, "acs": None, "aer": None, "error": error})
    return mutate


def test_device_without_pcie_capability_is_not_applicable_with_the_reason():
    result = _run({"smt": "on", "nccl_nic_per_gpu": True}, _virtio_nic())
    for rule_id in PCIE_REGISTER_RULES:
        (f,) = [f for f in _of(result, rule_id) if f["subject"] == VIRTIO_NIC]
        assert f["status"] == "not_applicable", (rule_id, f["message"])
        assert f["message"] == ("no PCI Express capability, so no MaxReadReq, MaxPayload or link register to judge "
                                "(a conventional PCI or paravirtual device) on 0000:00:03.0 (0x1af4 0x1041 NIC)")
        assert (f["expected"], f["observed"]) == (None, None)
    # nothing for pcie_tune to fix on it, and the other devices are judged as before: all pass
    assert "pcie_tune" not in result["fix_plan"] and result["fix_plan"]["pcie_mrrs"] == {"gpu": [], "nic": []}
    others = [f for f in result["findings"] if f["subject"] != VIRTIO_NIC and f["status"] != "pass"
              and _without_inventory(f)]
    assert others == []


def test_device_with_pcie_capability_is_judged_as_before():
    def with_capability(facts):
        _virtio_nic()(facts)
        device(facts, VIRTIO_NIC)["pcie"] = dict(device(facts, NIC)["pcie"], max_read_request=512)
    result = _run({}, with_capability)
    (mrrs,) = [f for f in _of(result, "PCI-002") if f["subject"] == VIRTIO_NIC]
    assert (mrrs["status"], mrrs["observed"]) == ("fail", 512)
    (boot,) = [f for f in _of(result, "PCI-008") if f["subject"] == VIRTIO_NIC]
    # nothing sets it at boot, but without evidence that the running value was set at runtime it passes
    assert boot["status"] == "pass" and "no entry for it in /usr/local/sbin/gpuhost-pcie-apply" in boot["message"]
    assert VIRTIO_NIC in result["fix_plan"]["pcie_mrrs"]["nic"]


@pytest.mark.parametrize("config_bytes, error", [
    (None, "cannot read /sys/bus/pci/devices/0000:00:03.0/config: PCI Express, ACS and AER unknown (see errors)"),
    (64, "config space is 64 bytes: capabilities need root; run with become: true"),
])
def test_device_whose_capability_is_unknown_stays_unknown(config_bytes, error):
    # an unreadable or cut-short config space does not prove the capability absent
    result = _run({}, _virtio_nic(config_bytes, error))
    (f,) = [f for f in _of(result, "PCI-002") if f["subject"] == VIRTIO_NIC]
    assert f["status"] == "unknown" and error in f["message"], f["message"]
    assert [f["status"] for f in _of(result, "PCI-004") if f["subject"] == VIRTIO_NIC] == ["unknown"]


# -- the bundled snapshots ------------------------------------------------------------------

@pytest.fixture(scope="module")
def snapshots(tmp_path_factory):
    out = tmp_path_factory.mktemp("snapshots")
    subprocess.run([sys.executable, os.path.join(REPO, "tools", "make_fixtures.py"), str(out),
                    "--only", "incident", "--only", "healthy"], check=True, capture_output=True)
    return out


def _snapshot_result(snapshots, name):
    from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.gather import gather_facts
    from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.root import Root
    facts = gather_facts(Root(str(snapshots / name)))
    return evaluation.evaluate(facts, profile="auto", host=name, today=TODAY)


def test_incident_snapshot_shows_every_finding_of_the_incident(snapshots):
    result = _snapshot_result(snapshots, "incident")
    assert result["profile"] == "amd-epyc-nvidia"
    fails = [f for f in result["findings"] if f["status"] == "fail"]

    def failed(rule_id):
        return [f for f in fails if f["id"] == rule_id]

    assert "acpi-cpufreq" in failed("CPU-001")[0]["observed"]
    (kernel,) = failed("KERNEL-001")
    assert (kernel["observed"], kernel["expected"]) == ("6.8.12-4-pve", "6.14")
    assert kernel["pending"] and "6.14.8-2-pve" in kernel["message"]
    assert failed("NUMA-001")[0]["observed"] == 1
    assert "C2 (exit latency 400 us)" in failed("CPU-006")[0]["message"]
    gpus = failed("PCI-001")
    nics = failed("PCI-002")
    assert len(gpus) == 8 and len(nics) == 2
    assert all(f["observed"] == 512 for f in gpus + nics)
    (node,) = failed("NUMA-003")
    assert node["subject"] == "node0" and node["observed"] == 0.9
    assert failed("NUMA-004")
    acs = failed("PCI-006")
    assert acs and all("request_redirect" in f["observed"] for f in acs)
    assert len(failed("NVIDIA-004")) == 8
    assert len(failed("NVIDIA-007")) == 8
    (lxc,) = failed("LXC-001")
    assert "nvidia-uvm" in lxc["message"]


def test_healthy_snapshot_has_no_fail(snapshots):
    result = _snapshot_result(snapshots, "healthy")
    assert [f["message"] for f in result["findings"] if f["status"] == "fail"] == []
    assert result["summary"]["pass"] > 100


# -- docs/rules.md is generated from the YAML ------------------------------------------------

def test_rules_doc_is_up_to_date():
    proc = subprocess.run([sys.executable, os.path.join(REPO, "tools", "rules_doc.py"), "--check"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
