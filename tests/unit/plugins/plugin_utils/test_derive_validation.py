"""derived.validation and the VAL rules on what validate.yml measured: the figures set beside what they
are compared to, and every way a measurement can be missing or odd giving ``unknown`` with the reason
(or, for an audit that measured nothing, ``not_applicable``), never a pass and never an exception."""
import copy
import os

import pytest

from helpers.baseline_facts import GPU0, GPU1, healthy_facts

from ansible_collections.gpuhost.baseline.plugins.module_utils.measure import measure_gpu
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge import evaluation
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_validation import _norm_bus, derive_validation

TODAY = "2026-06-01"
MEASURE_FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "fixtures", "measure")


def _judge(facts, **params):
    params.setdefault("smt", "on")
    result = evaluation.evaluate(facts, profile="amd-epyc-nvidia", params=params, host="gpu01", today=TODAY)
    return [f for f in result["findings"] if f["area"] == "validation"]


def _of(findings, rule_id):
    return [f for f in findings if f["id"] == rule_id]


def test_an_audit_measures_nothing_so_no_val_rule_applies():
    facts = healthy_facts()
    del facts["measure"]
    assert derive_validation(facts)["measured"] is False
    findings = _judge(facts)
    assert {f["id"] for f in findings} == {"VAL-%03d" % n for n in range(1, 14)}
    assert {f["status"] for f in findings} == {"not_applicable"}


def test_healthy_measurements_pass_with_the_figures_they_were_compared_to():
    derived = derive_validation(healthy_facts())
    assert derived["cpus"][0] == {"cpu": "cpu0", "observed_mhz": 3695, "rated_mhz": 3700,
                                  "rated_source": "amd_pstate_max_freq", "fraction": 0.999, "reason": None,
                                  "detail": "3695 MHz under load of 3700 MHz rated (amd_pstate_max_freq)"}
    node1 = derived["nodes"][1]
    assert (node1["node"], node1["peer_fraction"], node1["best_mbs"]) == ("node1", 0.97, 182000.0)
    assert derived["cross"][0]["fraction"] == round(98000 / 182000.0, 3)
    gpu = derived["gpus"][0]
    assert (gpu["link"], gpu["link_gbs"], gpu["fraction"]) == ("Gen5 x16", 63.015, round(55.3 / 63.015, 3))
    assert derived["pairs"][0]["fraction"] == round(51.2 / 63.015, 3)
    assert derived["nccl"]["fraction"] == round(41.7 / 63.015, 3)
    findings = _judge(healthy_facts())
    assert [f["id"] for f in findings if f["status"] != "pass"] == []
    (cpu0,) = [f for f in _of(findings, "VAL-001") if f["subject"] == "cpu0"]
    assert (cpu0["expected"], cpu0["observed"]) == (0.9, 0.999)


def test_a_capped_cpu_fails_and_names_its_clock():
    facts = healthy_facts()
    facts["measure"]["cpu_freq"]["cpus"]["32"].update(observed_khz=1200000)
    (bad,) = [f for f in _of(_judge(facts), "VAL-001") if f["status"] == "fail"]
    assert bad["subject"] == "cpu32" and bad["observed"] == 0.324
    assert "1200 MHz under load of 3700 MHz rated" in bad["message"]


@pytest.mark.parametrize("cpu_freq, reason", [
    (None, "the CPU clock under load was not measured"),
    ({"status": "unknown", "reason": "no frequency source: no cpufreq and no cpu MHz"}, "no frequency source"),
    ("garbage", "was not measured"),
])
def test_a_clock_that_was_not_measured_is_unknown_with_the_reason(cpu_freq, reason):
    facts = healthy_facts()
    if cpu_freq is None:
        del facts["measure"]["cpu_freq"]
    else:
        facts["measure"]["cpu_freq"] = cpu_freq
    (finding,) = _of(_judge(facts), "VAL-001")
    assert finding["status"] == "unknown" and reason in finding["message"]


def test_a_guest_without_a_rated_clock_is_unknown_per_cpu():
    facts = healthy_facts()
    for entry in facts["measure"]["cpu_freq"]["cpus"].values():
        entry.update(rated_khz=None, rated_source=None, fraction=None,
                     reason="no rated clock: /sys/devices/system/cpu/cpu0/cpufreq has none (no cpufreq driver)")
    findings = _of(_judge(facts), "VAL-001")
    assert [f["status"] for f in findings] == ["unknown", "unknown"]
    assert "no rated clock" in findings[0]["message"]


def test_one_node_has_no_peers_and_an_unbound_run_is_judged_only_against_the_floor():
    facts = healthy_facts()
    facts["measure"]["mem_bw"].update(bound=False, cross={}, nodes={
        "all": {"status": "ok", "reason": None, "bandwidth_mbs": 15013.0}})
    findings = _judge(facts, val_mem_min_mbs=20000)
    assert [f["status"] for f in _of(findings, "VAL-002")] == ["not_applicable"]
    assert [f["status"] for f in _of(findings, "VAL-004")] == ["not_applicable"]
    (floor,) = _of(findings, "VAL-003")
    assert floor["status"] == "fail" and floor["subject"] == "all CPUs (not bound to a node)"


def test_a_node_whose_run_failed_is_unknown_and_its_peer_has_no_one_to_compare_with():
    facts = healthy_facts()
    facts["measure"]["mem_bw"]["nodes"]["1"] = {"status": "unknown", "bandwidth_mbs": None,
                                                "reason": "stress-ng did not finish within 36 s: killed"}
    by_subject = dict((f["subject"], f) for f in _of(_judge(facts), "VAL-002"))
    assert by_subject["node1"]["status"] == "unknown" and "killed" in by_subject["node1"]["message"]
    assert by_subject["node0"]["status"] == "unknown"
    assert "no peer to compare with" in by_subject["node0"]["message"]
    cross = dict((f["subject"], f) for f in _of(_judge(facts), "VAL-004"))
    assert cross["CPUs node1, memory node0"]["status"] == "unknown"
    assert "node1's own bandwidth was not measured" in cross["CPUs node1, memory node0"]["message"]


def test_no_memory_tool_is_unknown_naming_the_tools():
    facts = healthy_facts()
    facts["measure"]["mem_bw"] = {"status": "unknown", "nodes": {},
                                  "reason": "no memory bandwidth tool installed: looked for stress-ng, sysbench, mbw"}
    findings = _judge(facts)  # the bundled floor 0: VAL-003 still says that nothing was measured
    assert [f["status"] for f in _of(findings, "VAL-003")] == ["unknown"]
    assert "looked for stress-ng, sysbench, mbw" in _of(findings, "VAL-003")[0]["message"]
    assert [f["status"] for f in _of(findings, "VAL-002")] == ["not_applicable"]  # one element: no peers


def test_missing_gpu_tools_are_unknown_naming_the_tool():
    facts = healthy_facts()
    for key, tool in (("gpu_bw", "nvbandwidth"), ("dcgm_diag", "dcgmi"), ("dcgm_health", "dcgmi"),
                      ("nccl", "all_reduce_perf")):
        facts["measure"][key] = {"status": "unknown", "reason": "%s not found in PATH" % tool}
    findings = _judge(facts)
    for rule_id, tool in (("VAL-005", "nvbandwidth"), ("VAL-006", "nvbandwidth"), ("VAL-007", "dcgmi"),
                          ("VAL-008", "dcgmi"), ("VAL-009", "all_reduce_perf")):
        (finding,) = _of(findings, rule_id)
        assert finding["status"] == "unknown", rule_id
        assert "%s not found in PATH" % tool in finding["message"], rule_id


def test_gpus_are_matched_by_bus_id_not_by_cuda_index():
    facts = healthy_facts()
    facts["nvidia"]["gpus"][1]["pcie"].update(gen_max=4, gen_host_max=4)  # GPU1 on a Gen4 link
    gpus = facts["measure"]["gpu_bw"]["gpus"]
    gpus["0"], gpus["1"] = copy.deepcopy(gpus["1"]), copy.deepcopy(gpus["0"])  # CUDA's order differs
    by_gpu = dict((g["gpu"], g) for g in derive_validation(facts)["gpus"])
    assert by_gpu["GPU0 %s" % GPU1]["link"] == "Gen4 x16"
    assert by_gpu["GPU1 %s" % GPU0]["link"] == "Gen5 x16"


def test_the_link_falls_back_to_the_pci_facts_and_is_unknown_without_them():
    facts = healthy_facts()
    for gpu in facts["nvidia"]["gpus"]:
        gpu["pcie"] = {}
    gpu0 = derive_validation(facts)["gpus"][0]
    assert (gpu0["link"], gpu0["link_gbs"]) == ("32GT/s x16", 63.015)
    facts["pci"]["devices"] = []
    finding = _of(_judge(facts), "VAL-005")[0]
    assert finding["status"] == "unknown" and "link generation and width are unknown" in finding["message"]


def test_p2p_without_figures_says_why():
    facts = healthy_facts()
    facts["measure"]["gpu_bw"].update(pairs=[], testcases={"device_to_device_memcpy_read_ce": {
        "status": "waived", "error": "peer access is not supported between these GPUs"}})
    (finding,) = _of(_judge(facts), "VAL-006")
    assert finding["status"] == "unknown" and "peer access is not supported" in finding["message"]


def test_dcgm_failures_and_health_warnings_are_listed():
    facts = healthy_facts()
    facts["measure"]["dcgm_diag"].update(overall="warn", failed=["PCIe on 0: replay rate 12/min"])
    facts["measure"]["dcgm_health"].update(overall="failure", entities={"GPU 1": {"health": "failure", "systems": {
        "Memory": {"health": "failure", "message": "A double-bit ECC error"}}}})
    findings = _judge(facts)
    (diag,) = _of(findings, "VAL-007")
    assert diag["status"] == "fail" and "PCIe on 0: replay rate 12/min" in diag["message"]
    (health,) = _of(findings, "VAL-008")
    assert health["status"] == "fail" and "GPU 1 Memory: failure A double-bit ECC error" in health["message"]


def _dcgm_health_of(name):
    """What the module's runner records for ``dcgmi health -c -j`` printing fixture ``name`` (tests/fixtures/measure/)."""
    with open(os.path.join(MEASURE_FIXTURES, name)) as handle:
        out = handle.read()
    entry = {"status": "ok", "argv": ["/usr/bin/dcgmi", "health", "-c", "-j"], "command": "dcgmi health -c -j",
             "timeout_s": 60}
    return measure_gpu.measure_one("dcgm_health", entry, run=lambda argv, timeout_s, env=None: (0, out, None))


def test_dcgm_health_that_misses_a_gpu_waiting_for_a_reset_passes():
    """NVIDIA/DCGM issue 263 (a real ``dcgmi health -c -j``): GPU 1 of 8 needs a reset, DCGM says Healthy. VAL-008
    judges what DCGM's watches saw, so it passes; a pending recovery action is no health incident of DCGM's."""
    facts = healthy_facts()
    facts["measure"]["dcgm_health"] = _dcgm_health_of("dcgm-health-healthy-gpu-reset-pending-real.json")
    (health,) = _of(_judge(facts), "VAL-008")
    assert health["status"] == "pass" and health["observed"] == "healthy"


def test_a_real_dcgm_power_warning_fails_naming_the_gpu_and_the_system():
    """The L4 at its power limit (DCGM 4.6.1, text layout): VAL-008 fails at the rule's severity, naming GPU 0,
    its Power system and DCGM's message; derived.validation keeps the same line for the report."""
    facts = healthy_facts()
    facts["measure"]["dcgm_health"] = _dcgm_health_of("dcgm-health-v4.6-l4-power-warning-text.txt")
    line = ("GPU 0 Power system: warning Detected clocks event due to power violation in GPU 0. Monitor the power "
            "conditions. This GPU can still perform workload.")
    assert derive_validation(facts)["dcgm_health"]["problems"] == [line[:300]]
    (health,) = _of(_judge(facts), "VAL-008")
    assert health["status"] == "fail" and health["severity"] == "high" and health["observed"] == "warning"
    assert line in health["message"]


@pytest.mark.parametrize("measure", [
    {"cpu_freq": {"status": "ok", "cpus": {"0": "x", "1": {"observed_khz": "fast"}}}},
    {"mem_bw": {"status": "ok", "nodes": {"0": [], "1": {"status": "ok", "bandwidth_mbs": True}},
                "cross": {"x": "y", "0->1": {"status": "ok", "bandwidth_mbs": -5}}}},
    {"gpu_bw": {"status": "ok", "gpus": {"0": {"bus_id": "zz:1"}, "x": None}, "pairs": ["bad", {"gbs": "1"}]}},
    {"dcgm_diag": {"status": "ok", "overall": None}, "dcgm_health": {"status": "ok", "entities": {"a": "b"}},
     "nccl": {"status": "ok", "avg_busbw_gbs": float("nan")}},
    {"gpu_bw": "broken", "mem_bw": 3, "cpu_freq": []},
])
def test_odd_measurements_never_raise_and_never_pass(measure):
    facts = healthy_facts()
    facts["measure"] = measure
    derive_validation(facts)
    findings = _judge(facts)
    odd = [f for f in findings if f["status"] == "pass"]
    assert all(f["id"] not in ("VAL-001", "VAL-007", "VAL-008") for f in odd)


@pytest.mark.parametrize("text, bus", [
    ("00000000:99:00", "0000:99:00.0"), ("0000:43:00.0", "0000:43:00.0"), ("00000000:9A:00.1", "0000:9a:00.1"),
    ("99:00.0", None), (None, None), ("zz:99:00", None), ("", None),
])
def test_bus_ids_of_nvbandwidth_and_nvidia_smi_are_one_form(text, bus):
    assert _norm_bus(text) == bus


# -- no silent pass (issue 40): every GPU of the host is judged ----------------------------------
def _eight_gpus(facts, measured=True):
    """GPUs 2..7 added to nvidia-smi's list (and, with ``measured``, to nvbandwidth's copies)."""
    for index in range(2, 8):
        gpu = copy.deepcopy(facts["nvidia"]["gpus"][0])
        gpu.update(index=index, uuid="GPU-%08d" % index, bus_id="0000:%02x:00.0" % (0x50 + index))
        facts["nvidia"]["gpus"].append(gpu)
        if measured:
            facts["measure"]["gpu_bw"]["gpus"][str(index)] = {
                "name": "NVIDIA RTX PRO 6000", "bus_id": gpu["bus_id"], "h2d_gbs": 55.0, "d2h_gbs": 55.0}
    return facts


def test_gpus_missing_from_nvbandwidth_output_are_unknown_naming_the_tool():
    # the red team's case: nvbandwidth printed 1 of 8 GPUs; VAL-005 passed and the other 7 had no finding
    facts = _eight_gpus(healthy_facts(), measured=False)
    gpu_bw = facts["measure"]["gpu_bw"]
    del gpu_bw["gpus"]["1"]
    gpu_bw["pairs"] = []
    findings = _judge(facts)
    copies = _of(findings, "VAL-005")
    assert len(copies) == 8
    assert [f["subject"] for f in copies if f["status"] == "pass"] == ["GPU0 %s" % GPU0]
    unknown = [f for f in copies if f["status"] == "unknown"]
    others = ["GPU%d 0000:%02x:00.0" % (i, 0x50 + i) for i in range(2, 8)]
    assert [f["subject"] for f in unknown] == ["GPU1 %s" % GPU1] + others
    assert all("nvbandwidth gave no figure for GPU" in f["message"] for f in unknown)
    assert "nvbandwidth gave no figure for GPU 1 (%s)" % GPU1 in unknown[0]["message"]
    # one GPU measured, eight on the host: no peer-to-peer figure is unknown, not "not applicable"
    (p2p,) = _of(findings, "VAL-006")
    assert p2p["status"] == "unknown" and "no peer-to-peer figure from nvbandwidth" in p2p["message"]


def test_a_gpu_in_no_peer_pair_is_unknown_naming_the_tool():
    facts = _eight_gpus(healthy_facts())  # pairs only between GPU0 and GPU1
    findings = _of(_judge(facts), "VAL-006")
    assert [f["status"] for f in findings].count("pass") == 2
    unknown = [f for f in findings if f["status"] == "unknown"]
    assert [f["subject"] for f in unknown] == ["GPU %d (0000:%02x:00.0) -> any" % (i, 0x50 + i) for i in range(2, 8)]
    assert all("nvbandwidth gave no peer-to-peer figure for GPU" in f["message"] for f in unknown)


def test_complete_nvbandwidth_output_adds_no_element():
    derived = derive_validation(healthy_facts())
    assert [g["gpu"] for g in derived["gpus"]] == ["GPU0 %s" % GPU0, "GPU1 %s" % GPU1]
    assert [p["pair"] for p in derived["pairs"]] == ["GPU0 -> GPU1", "GPU1 -> GPU0"]


def test_nccl_on_fewer_gpus_than_the_host_has_is_unknown():
    facts = _eight_gpus(healthy_facts())
    (finding,) = _of(_judge(facts), "VAL-009")  # the facts' all_reduce_perf ran with -g 2
    assert finding["status"] == "unknown"
    assert "all_reduce_perf ran on 2 of the 8 GPUs nvidia-smi lists" in finding["message"]
    facts["measure"]["nccl"]["gpus"] = 8
    (finding,) = _of(_judge(facts), "VAL-009")
    assert finding["status"] == "pass"


def test_odd_gpu_indices_never_raise():
    facts = healthy_facts()
    gpus = facts["measure"]["gpu_bw"]["gpus"]
    gpus["\u00b2"], gpus["9" * 5000] = gpus.pop("0"), gpus.pop("1")  # isdigit() but not int()-able
    derived = derive_validation(facts)
    assert len(derived["gpus"]) == 2 and all(g["fraction"] is not None for g in derived["gpus"])


# -- VAL-010: the all-reduce's own check of its results (issue 36 item 4) --------------------------------------

def _nccl_run(fixture_name, rc=0):
    """measure.nccl as host_measure writes it for all_reduce_perf printing ``fixture_name`` and exiting ``rc``."""
    from ansible_collections.gpuhost.baseline.plugins.module_utils.measure import measure_gpu  # pylint: disable=import-outside-toplevel

    out = _fixture_text(fixture_name)
    entry = {"status": "ok", "argv": ["/opt/bin/all_reduce_perf", "-g", "2"], "command": "all_reduce_perf -g 2",
             "timeout_s": 7, "gpus": 2}
    return measure_gpu.measure_one("nccl", entry, run=lambda argv, timeout_s, env=None: (rc, out, None))


def _val010(nccl):
    facts = healthy_facts()
    facts["measure"]["nccl"] = nccl
    (finding,) = _of(_judge(facts), "VAL-010")
    return finding


def test_a_checked_run_with_every_wrong_count_zero_passes():
    finding = _val010(_nccl_run("nccl-all-reduce-gb10-2rank.txt"))
    assert finding["status"] == "pass" and finding["severity"] == "critical"


def test_wrong_elements_fail_naming_the_size_and_count_whatever_the_bandwidth():
    nccl = _nccl_run("nccl-all-reduce-gb10-2rank-wrong.txt", rc=1)
    assert nccl["status"] == "ok" and nccl["avg_busbw_gbs"] == 0.65375  # the figures are read: VAL-009 may pass
    assert nccl["wrong"] == [{"size_bytes": 32768, "placement": "in_place", "wrong": 7}]
    finding = _val010(nccl)
    assert finding["status"] == "fail"
    assert "7 wrong elements at 32768 bytes (in-place)" in finding["message"]
    assert "Out of bounds values : 1 FAILED" in finding["message"]
    assert "all_reduce_perf exited 1 after printing its table" in finding["message"]


def test_a_run_that_checked_nothing_is_unknown():
    nccl = _nccl_run("nccl-all-reduce-gb10-2rank-unchecked.txt")
    assert nccl["checked"] is False and nccl["out_of_bounds_ok"] is True  # the footer says 0 OK with -c 0 too
    finding = _val010(nccl)
    assert finding["status"] == "unknown"
    assert "did not check its results" in finding["message"] and "-c 0" in finding["message"]


def test_a_nonzero_exit_alone_fails():
    nccl = _nccl_run("nccl-all-reduce-gb10-2rank.txt", rc=3)
    assert _val010(nccl)["status"] == "fail"


def test_no_run_is_unknown_with_the_reason():
    facts = healthy_facts()
    facts["measure"]["nccl"] = {"status": "unknown", "reason": "all_reduce_perf not found: build nccl-tests"}
    (finding,) = _of(_judge(facts), "VAL-010")
    assert finding["status"] == "unknown" and "all_reduce_perf not found" in finding["message"]


# -- VAL-007 on DCGM 3.0-3.2 output: the GPU of a result is under "gpu_ids" (issue 36 item 7) -----------

def _dcgm_run(text, rc=0):
    """measure.dcgm_diag as host_measure writes it for dcgmi printing ``text`` and exiting ``rc``."""
    from ansible_collections.gpuhost.baseline.plugins.module_utils.measure import measure_gpu  # pylint: disable=import-outside-toplevel

    entry = {"status": "ok", "argv": ["/usr/bin/dcgmi", "diag", "-r", "3", "-j"], "command": "dcgmi diag -r 3 -j",
             "timeout_s": 60, "level": 3}
    return measure_gpu.measure_one("dcgm_diag", entry, run=lambda argv, timeout_s, env=None: (rc, text, None))


def _fixture_text(name):
    import os  # pylint: disable=import-outside-toplevel
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "fixtures", "measure", name)
    with open(path) as handle:
        return handle.read()


def test_dcgm_3_1_output_passes_and_a_failed_gpu_is_named():
    facts = healthy_facts()
    facts["measure"]["dcgm_diag"] = _dcgm_run(_fixture_text("dcgm-diag-v3.1-r3-gpu-ids.json"))
    (diag,) = _of(_judge(facts), "VAL-007")
    assert diag["status"] == "pass"
    # the same real output with its GPU's memory test failed (only that status and its warning changed here)
    import json  # pylint: disable=import-outside-toplevel
    obj = json.loads(_fixture_text("dcgm-diag-v3.1-r3-gpu-ids.json"))
    memory = [t for c in obj["DCGM GPU Diagnostic"]["test_categories"] for t in c["tests"] if t["name"] == "GPU Memory"][0]
    memory["results"][0].update(status="Fail", warnings="Error using CUDA API cudaMalloc")
    facts["measure"]["dcgm_diag"] = _dcgm_run(json.dumps(obj), rc=226)
    (diag,) = _of(_judge(facts), "VAL-007")
    assert diag["status"] == "fail" and "GPU Memory on GPU 0: Error using CUDA API cudaMalloc" in diag["message"]


# -- VAL-011: nvbandwidth's own check of its copies; v0.10 output without bus ids (issue 36 item 5) -----

def _gpu_bw_run(fixture_name, rc=0):
    """measure.gpu_bw as host_measure writes it for nvbandwidth printing ``fixture_name`` and exiting ``rc``."""
    from ansible_collections.gpuhost.baseline.plugins.module_utils.measure import measure_gpu  # pylint: disable=import-outside-toplevel

    entry = {"status": "ok", "argv": ["/opt/bin/nvbandwidth", "-j"], "command": "nvbandwidth -j", "timeout_s": 7,
             "env": dict(measure_gpu.CUDA_ENV)}
    return measure_gpu.measure_one("gpu_bw", entry,
                                   run=lambda argv, timeout_s, env=None: (rc, _fixture_text(fixture_name), None))


def _val(facts, rule_id):
    (finding,) = _of(_judge(facts), rule_id)
    return finding


def test_a_data_check_that_failed_fails_val011_critical_quoting_the_line():
    facts = healthy_facts()
    facts["measure"]["gpu_bw"] = _gpu_bw_run("nvbandwidth-v0.7-8xa100-pattern-assert.txt", rc=1)
    assert facts["measure"]["gpu_bw"]["status"] == "unknown"  # no figure: VAL-005 and VAL-006 are unknown
    finding = _val(facts, "VAL-011")
    assert finding["status"] == "fail" and finding["severity"] == "critical"
    assert ("a copy returned wrong data (nvbandwidth's pattern check failed) in device_to_device_memcpy_read_ce: "
            "Invalid value when checking the pattern at 0x70a640000000 (then: ASSERT in expression h_errorFlag == 0"
            in finding["message"])


def test_an_abort_on_a_cuda_error_fails_val011_high():
    facts = healthy_facts()
    facts["measure"]["gpu_bw"] = dict(facts["measure"]["gpu_bw"], failure={
        "kind": "cuda_error", "line": "[CUDA_ERROR_ILLEGAL_ADDRESS] an illegal memory access was encountered",
        "lines": ["[CUDA_ERROR_ILLEGAL_ADDRESS] an illegal memory access was encountered"],
        "testcase": "device_to_device_memcpy_read_ce"})
    finding = _val(facts, "VAL-011")
    assert finding["status"] == "fail" and finding["severity"] == "high"
    assert "aborted on a CUDA error in device_to_device_memcpy_read_ce: [CUDA_ERROR_ILLEGAL_ADDRESS]" in finding["message"]


def test_val011_passes_on_a_clean_run_and_is_unknown_without_one():
    facts = healthy_facts()
    assert _val(facts, "VAL-011")["status"] == "pass"
    facts["measure"]["gpu_bw"] = {"status": "unknown", "reason": "nvbandwidth not found in PATH (x)"}
    finding = _val(facts, "VAL-011")
    assert finding["status"] == "unknown" and "nvbandwidth not found in PATH" in finding["message"]


def _v010_measure(count):
    """measure.gpu_bw of nvbandwidth v0.10 (no Device lines) host-to-device on ``count`` GPUs, as host_measure reads it."""
    text = _fixture_text("nvbandwidth-v0.10-8xh100-h2d-ce.txt")
    if count == 2:  # the same run cut to its first two GPUs (the columns of the one row)
        text = text.replace("           0         1         2         3         4         5         6         7",
                            "           0         1").replace(
            " 0     55.37     55.36     55.37     55.36     55.36     55.36     55.36     55.33", " 0     55.37     55.36")
    from ansible_collections.gpuhost.baseline.plugins.module_utils.measure import measure_gpu  # pylint: disable=import-outside-toplevel
    result = measure_gpu.empty_result("gpu_bw")
    assert measure_gpu.read_gpu_bw(result, text) is None
    result["status"] = "ok"
    return result


def test_gpus_without_bus_ids_are_matched_by_pci_order_and_say_so():
    facts = healthy_facts()
    facts["measure"]["gpu_bw"] = _v010_measure(2)
    assert all(gpu["bus_id"] is None for gpu in facts["measure"]["gpu_bw"]["gpus"].values())
    # nvidia-smi numbers the GPUs otherwise than the bus orders them: the match follows the bus, not its index
    for gpu, index in zip(facts["nvidia"]["gpus"], (1, 0)):
        gpu["index"] = index
    gpus = derive_validation(facts)["gpus"]
    bus = sorted(g["bus_id"] for g in facts["nvidia"]["gpus"])
    assert [g["gpu"] for g in gpus] == ["GPU0 %s" % bus[0], "GPU1 %s" % bus[1]]
    assert all("bus id by PCI order" in g["detail"] and g["h2d_gbs"] in (55.37, 55.36) for g in gpus)


def test_gpus_without_bus_ids_and_another_count_are_not_matched():
    facts = healthy_facts()
    facts["measure"]["gpu_bw"] = _v010_measure(8)
    gpus = derive_validation(facts)["gpus"]
    measured = [g for g in gpus if g["h2d_gbs"] is not None]
    assert len(measured) == 8 and all(g["link_gbs"] is None for g in measured)
    assert all("cannot be matched by PCI order" in g["reason"] for g in measured)
    # nvidia-smi's two GPUs are unknown too: nvbandwidth gave them no figure that could be tied to them
    assert [g["reason"][:31] for g in gpus if g["h2d_gbs"] is None] == ["nvbandwidth gave no figure for "] * 2


def test_an_older_nccl_tests_error_column_fails_val010_as_the_largest_error():
    nccl = _nccl_run("nccl-all-gather-8gpu-error-column-failed-nohash.txt", rc=0)
    assert nccl["status"] == "ok" and nccl["wrong_column"] == "error"
    finding = _val010(nccl)
    assert finding["status"] == "fail"
    assert "largest error 1 at 4294967296 bytes (out-of-place)" in finding["message"]
    assert "Out of bounds values : 2 FAILED" in finding["message"]


def test_each_kind_of_nvbandwidth_failure_has_its_words_and_severity():
    # the kinds the parser reports (measure.NVB_FAILURE_KINDS) and the judge's words for them are one set
    from ansible_collections.gpuhost.baseline.plugins.module_utils.measure import measure  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_validation import NVB_FAILURES  # pylint: disable=import-outside-toplevel
    assert sorted(NVB_FAILURES) == sorted(measure.NVB_FAILURE_KINDS)


# -- site workloads (VAL-012) ----------------------------------------------------------------------
def test_a_workload_figure_beside_its_floor_unit_and_how_it_was_read():
    derived = derive_validation(healthy_facts())
    assert derived["workloads"][0] == {
        "name": "llama-bench tg128", "value": 118.88, "floor": 100.0, "lower_is_better": False, "unit": "tok/s",
        "how": "json path [0].avg_ts", "command": "/usr/local/bin/llama-bench -m /models/model.gguf -p 0 -n 128 -o json",
        "seconds": 41.3, "reason": None, "detail": "118.88 tok/s, floor 100 tok/s, read with json path [0].avg_ts"}
    assert derived["workloads"][1]["lower_is_better"] is True
    assert derived["workloads"][1]["detail"].startswith("71.02 ms, at most 80 ms, read with regex")
    findings = _judge(healthy_facts())
    # each workload is judged once: higher is better by VAL-012, lower is better by VAL-013
    assert [(f["status"], f["subject"], f["observed"], f["expected"]) for f in _of(findings, "VAL-012")] == [
        ("pass", "llama-bench tg128", 118.88, 100.0)]
    assert [(f["status"], f["subject"], f["observed"], f["expected"]) for f in _of(findings, "VAL-013")] == [
        ("pass", "vllm mean TPOT", 71.02, 80.0)]


def test_a_lower_is_better_workload_fails_above_its_limit():
    facts = healthy_facts()
    facts["measure"]["workloads"][1]["value"] = 80.01
    (finding,) = _of(_judge(facts), "VAL-013")
    assert finding["status"] == "fail"
    assert finding["message"].startswith("site workload time 80.01 > 80 on vllm mean TPOT (80.01 ms, at most 80 ms")


@pytest.mark.parametrize("entry, reason", [
    ({"name": "w", "status": "unknown", "value": None, "floor": 1.0, "reason": "exited 2: ImportError: no vllm"},
     "exited 2: ImportError: no vllm"),
    ({"name": "w", "status": "ok", "value": True, "floor": 1.0}, "w: ok"),
    ({"name": "w", "status": "ok", "value": float("nan"), "floor": 1.0}, "w: ok"),
    ({"name": "w", "status": "ok", "value": 5.0, "floor": "lots"}, "w: no floor to compare 5 with"),
    ({"name": "w", "status": "ok", "value": 5.0}, "w: no floor to compare 5 with"),
    ({"name": "w"}, "w: no result"),
    ("garbage", "workload 1: no result"),
])
def test_a_workload_without_a_figure_or_floor_is_unknown_with_the_reason(entry, reason):
    facts = healthy_facts()
    facts["measure"]["workloads"] = [entry]
    element = derive_validation(facts)["workloads"][0]
    assert element["reason"].startswith(reason)
    finding = _of(_judge(facts), "VAL-012")[0]
    assert finding["status"] == "unknown" and reason in finding["message"]
    if "no floor" in reason:
        # the judge says the expected value is null, and the element's reason why: where a floor comes from
        assert element["reason"].endswith("the workload sets none and the profile learned none (learn.yml with "
                                          "gpuhost_learn_workloads on a golden host)")
        assert "expected value {query: floor} is null (%s)" % element["reason"] in finding["message"]


@pytest.mark.parametrize("section", [None, {}, "x", []])
def test_no_workloads_defined_leaves_val_012_not_applicable(section):
    facts = healthy_facts()
    facts["measure"]["workloads"] = section
    assert derive_validation(facts)["workloads"] == []
    for rule in ("VAL-012", "VAL-013"):
        assert [f["status"] for f in _of(_judge(facts), rule)] == ["not_applicable"]
