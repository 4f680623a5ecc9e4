"""The health rules (rules/health.yml): a passing and a failing document each, the messages they
give, and derived.health (plugins/plugin_utils/derive/derive_health.py) on odd facts.

Cases live in helpers/health_facts.py (HEALTH_CASES) so the catalogue-wide test can take them too.
"""
import copy

import pytest

from helpers.baseline_facts import GPU0, GPU1, NIC, healthy_facts
from helpers.health_facts import HEALTH_CASES, XID_79, add_health

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive import xid_catalogue
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge import evaluation
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_load import load_catalogue
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive import derive
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_health import derive_health
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.xid_catalogue import SOURCE, XID_CATALOGUE, describe

TODAY = "2026-06-01"


@pytest.fixture(scope="module")
def catalogue():
    return load_catalogue()


def _facts(mutate=None):
    facts = add_health(healthy_facts())
    if mutate is not None:
        mutate(facts)
    return facts


def _run(params, mutate, profile="amd-epyc-nvidia"):
    return evaluation.evaluate(_facts(mutate), profile=profile, params=params, host="gpu01", today=TODAY)


def _of(result, rule_id):
    return [f for f in result["findings"] if f["id"] == rule_id]


def test_every_health_rule_has_cases_and_is_selected(catalogue):
    ids = set(r.id for r in catalogue.rules if r.area == "health")
    # HEALTH-025 never fails (it shows the lines it could not read as unknown): no failing pair
    assert ids == set(HEALTH_CASES) | {"HEALTH-025"}
    for profile in ("amd-epyc-nvidia", "generic-nvidia-inference"):
        assert ids <= set(catalogue.profile(profile).rule_ids)


def test_healthy_document_passes_every_health_rule():
    result = _run({"smt": "on", "nccl_nic_per_gpu": True}, None)
    health = [f for f in result["findings"] if f["area"] == "health"]
    assert len(set(f["id"] for f in health)) == len(HEALTH_CASES) + 1  # and HEALTH-025
    assert [(f["id"], f["status"], f["message"]) for f in health if f["status"] != "pass"] == []
    # and the rest of the catalogue is not disturbed by the health section
    assert [f["id"] for f in result["findings"] if f["status"] in ("fail", "unknown")] == []
    # without the locality parameter (the profiles' default) HEALTH-010 does not apply
    assert [f["status"] for f in _of(_run({"smt": "on"}, None), "HEALTH-010")] == ["not_applicable"]


def test_pcie_cards_without_nvlink_or_nvswitch_are_not_judged_for_them():
    def mutate(facts):
        facts["health"]["nvlink"]["gpus"] = [
            {"index": i, "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "uuid": None, "supported": False,
             "links_total": 0, "links_active": 0, "speeds_gbps": {}, "inactive": [], "unknown": [],
             "note": "NVML: Unable to retrieve NVLink information: Not Supported"} for i in (0, 1)]
        facts["health"]["fabric_manager"] = {"nvswitches": [], "checked": False, "load_state": None,
                                             "active_state": None, "sub_state": None, "unit_file_state": None,
                                             "error": None}
        for row in facts["nvidia"]["topology"]["matrix"].values():
            for other in row:
                if row[other] == "NV18":
                    row[other] = "PXB"
    result = _run({}, mutate)
    for rule_id in ("HEALTH-005", "HEALTH-006"):
        assert [f["status"] for f in _of(result, rule_id)] == ["not_applicable"]


@pytest.mark.parametrize("rule_id", sorted(HEALTH_CASES))
def test_rule_passes(rule_id):
    params, mutate = HEALTH_CASES[rule_id][0]
    findings = _of(_run(params, mutate), rule_id)
    assert findings, "no finding for %s" % rule_id
    assert [f["status"] for f in findings] == ["pass"] * len(findings), [f["message"] for f in findings]


@pytest.mark.parametrize("rule_id", sorted(HEALTH_CASES))
def test_rule_fails(rule_id):
    params, mutate = HEALTH_CASES[rule_id][1]
    result = _run(params, mutate)
    failing = [f for f in _of(result, rule_id) if f["status"] == "fail"]
    assert failing, [(f["status"], f["message"]) for f in _of(result, rule_id)]
    for f in failing:
        assert f["message"] and f["fix"] and f["source"].startswith("https://")
        assert f["observed"] is not None
    others = set(f["id"] for f in result["findings"] if f["status"] == "fail") - {rule_id}
    assert others == set(), others


# -- messages --------------------------------------------------------------------------------------
def test_xid_79_message_names_meaning_and_action():
    result = _run({}, HEALTH_CASES["HEALTH-001"][1][1])
    (f,) = [f for f in _of(result, "HEALTH-001") if f["status"] == "fail"]
    assert f["subject"] == GPU0
    (text,) = f["observed"]
    assert text.startswith("Xid 79 x1 (first 81234 s after boot): GPU has fallen off the bus [critical]; action: ")
    assert "drain and reboot the node" in text and text.endswith("log: GPU has fallen off the bus.")
    # the application-class rule stays quiet about it
    assert [g["status"] for g in _of(result, "HEALTH-002")] == ["pass", "pass"]


def test_a_finding_is_as_severe_as_its_worst_graded_event():
    """HEALTH-001 (rule severity high) takes its worst event's severity: a critical Xid 79 makes it
    critical; the NVLink 5 Xids by the word their lines state (real lines: tests/fixtures/health)."""
    import os

    from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.health import parse_kernel_log
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(here, "fixtures", "health", "nvrm-xid-nvlink5.txt"), encoding="utf-8") as handle:
        logged = parse_kernel_log(handle.read())["by_gpu"]

    def mutate(facts):
        facts["health"]["kernel_log"]["by_gpu"] = dict(logged, **{GPU0: {"79": dict(XID_79)}})
    findings = dict((f["subject"], f) for f in _of(_run({}, mutate), "HEALTH-001"))
    assert (findings[GPU0]["status"], findings[GPU0]["severity"]) == ("fail", "critical")
    assert findings[GPU1]["severity"] == "high"  # a passing finding keeps the rule's
    assert findings["0019:01:00.0"]["severity"] == "critical"  # 149 logged Fatal
    assert "NVLink NETIR error (link or peer device), logged fatal [critical]" in findings["0019:01:00.0"]["message"]
    assert findings["0018:01:00.0"]["severity"] == "medium"  # 145 logged Nonfatal
    assert findings["0000:01:00.0"]["severity"] == "medium"  # 144 logged Nonfatal
    # the Xid 45 "caused by previous Xid 149" is HEALTH-002's (application), at its own grade
    other = dict((f["subject"], f) for f in _of(_run({}, mutate), "HEALTH-002"))
    assert (other["0000:dc:00.0"]["status"], other["0000:dc:00.0"]["severity"]) == ("fail", "low")


def test_every_fault_kind_the_parser_knows_has_its_words_and_severity():
    from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.health import FAULT_KINDS
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_health import FAULTS
    assert sorted(FAULTS) == sorted(FAULT_KINDS)
    assert xid_catalogue.NVLINK5_CODES == frozenset(range(144, 151))


def test_a_profile_caps_a_graded_severity_and_the_report_keeps_it(catalogue):
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge.judge import judge_host
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.findings import expand_findings
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import build_report

    def mutate(facts):
        facts["health"]["kernel_log"]["by_gpu"][GPU0] = {"79": dict(XID_79), "63": dict(XID_79)}
    facts = _facts(mutate)
    rule = catalogue.by_id["HEALTH-001"]
    assert evaluation.graded_severity(rule, {"xid_hardware_severities": ["medium", "critical"]}) == "critical"
    assert evaluation.graded_severity(rule, {"xid_hardware_severities": ["bogus", 3]}) == "high"
    assert evaluation.graded_severity(rule, {"xid_hardware_severities": "low"}) == "low"
    # a profile whose rules.severity sets HEALTH-001 medium caps the graded severity (never raises it)
    import types
    capped = catalogue.for_profile(types.SimpleNamespace(severity={"HEALTH-001": "medium"}))
    view = capped.by_id["HEALTH-001"]
    assert (view.severity, view.severity_cap, rule.severity_cap) == ("medium", "medium", None)
    assert evaluation.graded_severity(view, {"xid_hardware_severities": ["critical"]}) == "medium"
    assert evaluation.graded_severity(view, {"xid_hardware_severities": ["low"]}) == "low"
    outcome = evaluation.evaluate(facts, profile="amd-epyc-nvidia", host="gpu01", today=TODAY, catalogue=capped)
    assert [f["severity"] for f in outcome["findings"] if f["id"] == "HEALTH-001"] == ["medium", "medium"]
    # through the host part and the report: the graded severity survives compaction and expansion
    judged = judge_host(facts, catalogue, {"host": "gpu01", "profile": "amd-epyc-nvidia", "today": TODAY})
    part = judged.part
    (kept,) = [f for f in part["findings"] if f["id"] == "HEALTH-001" and f.get("subject") == GPU0]
    assert kept["severity"] == "critical" and "title" not in kept
    (other,) = [f for f in part["findings"] if f["id"] == "HEALTH-001" and f.get("subject") == GPU1]
    assert "severity" not in other
    part["findings"] = expand_findings(part["findings"], catalogue)
    report = build_report({"gpu01": part})
    severities = dict((f.get("subject"), f["severity"]) for f in report["hosts"]["gpu01"]["findings"]
                      if f["id"] == "HEALTH-001")
    assert severities == {GPU0: "critical", GPU1: "high"}
    assert report["totals"]["fail_by_severity"]["critical"] >= 1


def test_row_remapping_messages():
    pending = [f for f in _of(_run({}, HEALTH_CASES["HEALTH-003"][1][1]), "HEALTH-003") if f["status"] == "fail"]
    assert [f["subject"] for f in pending] == [GPU0]
    assert pending[0]["observed"] == ["row remapping pending (0 correctable, 1 uncorrectable rows remapped): "
                                      "reset the GPU to apply it"]
    failed = [f for f in _of(_run({}, HEALTH_CASES["HEALTH-004"][1][1]), "HEALTH-004") if f["status"] == "fail"]
    assert [f["subject"] for f in failed] == [GPU1]
    assert "no spare row left" in failed[0]["observed"][0]


def test_nvlink_down_and_slow_links():
    (f,) = [f for f in _of(_run({}, HEALTH_CASES["HEALTH-005"][1][1]), "HEALTH-005") if f["status"] == "fail"]
    assert f["subject"] == GPU1
    assert f["observed"] == ["12 NVLink(s) active where other NVIDIA RTX PRO 6000 Blackwell Server Edition GPUs of "
                             "this host have 18 (inactive: link 12, 13, 14, 15, 16, 17)"]

    def slow(facts):
        facts["health"]["nvlink"]["gpus"][1]["speeds_gbps"] = {"26.562": 17, "13.281": 1}
    (f,) = [f for f in _of(_run({}, slow), "HEALTH-005") if f["status"] == "fail"]
    assert f["observed"] == ["NVLink(s) at 13.281 GB/s where the fastest run at 26.562 GB/s"]


def test_nvlink_all_inactive_on_an_nvswitch_board_fails_every_gpu():
    def mutate(facts):
        facts["health"]["nvlink"] = {"gpus": [], "error": None,
                                     "note": "NVML: Unable to retrieve Nvlink information as all links are inActive"}
    findings = _of(_run({}, mutate), "HEALTH-005")
    assert [f["status"] for f in findings] == ["fail", "fail"]
    assert findings[0]["observed"] == ["no active NVLink although 2 NVSwitch(es) are on the PCI bus (NVML: Unable "
                                       "to retrieve Nvlink information as all links are inActive)"]


def test_nvlink_unknown_state_is_unknown_not_fail():
    def mutate(facts):
        facts["health"]["nvlink"]["gpus"][0]["unknown"] = [{"link": 3, "text": "Status unavailable"}]
    f = _of(_run({}, mutate), "HEALTH-005")[0]
    assert f["status"] == "unknown" and "link 3: Status unavailable" in f["message"]


def test_fabric_manager_not_installed():
    def mutate(facts):
        facts["health"]["fabric_manager"].update(load_state="not-found", active_state="inactive", sub_state="dead")
    (f,) = _of(_run({}, mutate), "HEALTH-006")
    assert f["status"] == "fail" and "nvidia-fabricmanager.service is not installed, with 2 NVSwitch" in f["message"]


def test_gpudirect_by_dmabuf_passes_without_peermem():
    def mutate(facts):
        facts["health"]["peermem"] = {"nvidia_peermem": False, "nv_peer_mem": False}
    result = _run({}, mutate)
    (f,) = _of(result, "HEALTH-007")
    assert f["status"] == "pass"   # open module on 6.14: DMA-BUF
    doc = derive(_facts(mutate), {})
    assert doc["derived"]["health"]["gpudirect"]["dmabuf"] is True
    (f,) = _of(_run({}, HEALTH_CASES["HEALTH-007"][1][1]), "HEALTH-007")
    assert "the NVIDIA kernel module is the proprietary one" in f["message"] and "mlx5_0" in f["message"]


def test_rdma_port_down_says_why_and_rate_is_not_judged():
    result = _run({}, HEALTH_CASES["HEALTH-008"][1][1])
    (f,) = _of(result, "HEALTH-008")
    assert f["subject"] == "mlx5_0/1"
    assert f["observed"] == ["state 1: DOWN, physical state 2: Polling (no link partner: cable, transceiver or "
                             "switch port)"]
    assert f["message"].endswith("on mlx5_0/1 (mlx5_0 port 1 (%s, InfiniBand))" % NIC)
    (rate,) = _of(result, "HEALTH-009")
    assert rate["status"] == "unknown" and "not active" in rate["message"]


def test_rdma_slow_port_against_the_same_model():
    findings = _of(_run({}, HEALTH_CASES["HEALTH-009"][1][1]), "HEALTH-009")
    assert [(f["subject"], f["status"]) for f in findings] == [("mlx5_0/1", "pass"), ("mlx5_1/1", "fail")]
    assert findings[1]["observed"] == ["200 Gb/sec (4X HDR), where other active InfiniBand ports of the same NIC "
                                       "model run at 400 Gb/sec"]


def test_nccl_locality_per_gpu():
    findings = _of(_run({"nccl_nic_per_gpu": True}, HEALTH_CASES["HEALTH-010"][1][1]), "HEALTH-010")
    assert [(f["subject"], f["status"]) for f in findings] == [(GPU0, "pass"), (GPU1, "fail")]
    assert "nearest RDMA NIC mlx5_0 (NIC0) at NODE" in findings[1]["observed"][0]
    assert findings[0]["message"].endswith(", nearest RDMA NIC mlx5_0 (NIC0) at PXB)")


def test_nccl_locality_without_topology_is_unknown():
    def mutate(facts):
        facts["nvidia"]["topology"] = None
    findings = _of(_run({"nccl_nic_per_gpu": True}, mutate), "HEALTH-010")
    assert [f["status"] for f in findings] == ["unknown", "unknown"]
    assert "nvidia-smi topo -m was not read" in findings[0]["message"]


def test_edac_messages_name_the_dimm():
    (f,) = [f for f in _of(_run({}, HEALTH_CASES["HEALTH-011"][1][1]), "HEALTH-011") if f["status"] == "fail"]
    assert f["subject"] == "mc0" and f["observed"] == 1
    assert "dimm0 (P0_CH_A_DIMM_0): 0 corrected, 1 uncorrected" in f["message"]
    (f,) = [f for f in _of(_run({}, HEALTH_CASES["HEALTH-012"][1][1]), "HEALTH-012") if f["status"] == "fail"]
    assert (f["subject"], f["observed"], f["expected"]) == ("mc1", 5000, 100)


# -- unknowns and odd facts ------------------------------------------------------------------------
def test_unreadable_kernel_log_gives_unknown_with_the_reason():
    def mutate(facts):
        facts["health"]["kernel_log"] = {"source": None, "lines": None, "truncated": None, "events": None,
                                         "by_gpu": None, "unparsed": None, "unparsed_example": None,
                                         "error": "kernel log not read: journalctl not found in PATH"}
    result = _run({}, mutate)
    for rule_id in ("HEALTH-001", "HEALTH-002"):
        assert [f["status"] for f in _of(result, rule_id)] == ["unknown", "unknown"]
        assert "journalctl not found in PATH" in _of(result, rule_id)[0]["message"]


def test_health_not_gathered_is_unknown_naming_it():
    facts = healthy_facts()
    result = evaluation.evaluate(facts, profile="amd-epyc-nvidia", params={}, host="gpu01", today=TODAY)
    findings = [f for f in result["findings"] if f["area"] == "health"]
    assert findings and all(f["status"] in ("unknown", "not_applicable") for f in findings)
    assert any("the health facts were not gathered" in f["message"] for f in findings)


def test_gpu_only_in_the_kernel_log_is_a_subject():
    def mutate(facts):
        facts["health"]["kernel_log"]["by_gpu"]["0000:c1:00.0"] = {"79": dict(XID_79)}
    findings = _of(_run({}, mutate), "HEALTH-001")
    assert [(f["subject"], f["status"]) for f in findings] == [
        (GPU0, "pass"), (GPU1, "pass"), ("0000:c1:00.0", "fail")]
    assert "GPU in the kernel log only" in findings[2]["message"]


def test_truncated_log_is_said_in_the_message():
    def mutate(facts):
        HEALTH_CASES["HEALTH-001"][1][1](facts)
        facts["health"]["kernel_log"].update(truncated=True, lines=100000)
    (f,) = [f for f in _of(_run({}, mutate), "HEALTH-001") if f["status"] == "fail"]
    assert f["observed"][0].endswith("(only the newest 100000 kernel messages of this boot were read)")


def test_unreported_gpu_memory_state_is_unknown_with_the_smi_reason():
    def mutate(facts):
        del facts["nvidia"]["gpus"][1]
    result = _run({}, mutate)
    (f,) = [f for f in _of(result, "HEALTH-003") if f["subject"] == GPU1]
    assert f["status"] == "unknown" and "does not list this GPU" in f["message"]


@pytest.mark.parametrize("health", [None, {}, {"kernel_log": "x", "nvlink": [], "rdma": {"devices": "x"},
                                               "edac": {"controllers": [None, 3]}, "fabric_manager": 5,
                                               "peermem": None}])
def test_derive_health_never_raises_on_odd_facts(health):
    facts = _facts()
    facts["health"] = health
    result = derive_health(facts, {}, derive(copy.deepcopy(facts), {})["derived"])
    assert isinstance(result, dict)
    assert derive_health(None, None, None)["gpus"] is None


# -- the Xid table -------------------------------------------------------------------------------------
def test_xid_table_entries_are_complete():
    assert SOURCE.startswith("https://docs.nvidia.com/")
    for code, (klass, severity, meaning, action) in XID_CATALOGUE.items():
        assert klass in ("hardware", "application") and severity in ("critical", "high", "medium", "low"), code
        assert meaning and action, code
    for code in (48, 63, 64, 74, 79, 92, 94, 95, 119, 120):
        assert XID_CATALOGUE[code][0] == "hardware", code
    for code in (13, 31, 43, 45):
        assert XID_CATALOGUE[code][0] == "application", code


def test_unlisted_code_points_to_the_catalogue():
    info = describe("999")
    assert (info["code"], info["class"], info["listed"]) == (999, "application", False)
    assert SOURCE in info["action"]
    assert describe("x")["code"] is None


# -- issue 21: faults without an Xid, SXid, NVLink by UUID, the driver not loaded ------------------

def test_fallen_off_the_bus_without_xid_fails_health_013_for_the_gpu_named_critical():
    def lost(facts):
        facts["health"]["kernel_log"]["faults"] = {GPU1: {"fallen_off_bus": {
            "count": 1, "first_s": 1843.3, "last_s": 1843.3,
            "message": "fallen off the bus and is not responding to commands."}}}
    findings = _of(_run({"smt": "on"}, lost), "HEALTH-013")
    assert [(f["subject"], f["status"], f["severity"]) for f in findings] == \
        [(GPU0, "pass", "critical"), (GPU1, "fail", "critical")]
    assert "fallen off the bus" in findings[1]["message"] and "reboot" in findings[1]["message"]


def test_gsp_faults_fail_health_013_at_their_own_severity():
    """A GPU the driver marked for reset (a GSP line without an Xid, real lines: tests/fixtures/health)
    fails HEALTH-013 for the GPU the line names, graded high (the rule's critical is for a GPU lost);
    a line naming the GPU by the driver's index only is the "unknown GPU" subject's."""
    import os

    from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.health import parse_kernel_log
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(os.path.join(here, "fixtures", "health", "nvrm-gsp-reset.txt"), encoding="utf-8") as handle:
        parsed = parse_kernel_log(handle.read())

    def mutate(facts):
        facts["health"]["kernel_log"]["faults"] = {GPU0: parsed["faults"]["0000:07:00.0"]}
        facts["health"]["kernel_log"]["faults_no_address"] = parsed["faults_no_address"]
    findings = dict((f["subject"], f) for f in _of(_run({}, mutate), "HEALTH-013"))
    assert (findings[GPU0]["status"], findings[GPU0]["severity"]) == ("fail", "high")
    assert "the driver marked the GPU for reset" in findings[GPU0]["message"]
    assert findings[GPU1]["status"] == "pass" and findings[GPU1]["severity"] == "critical"
    unknown = findings["unknown GPU"]
    assert unknown["status"] == "fail" and unknown["severity"] == "high"
    assert "GSP) firmware stopped answering the driver (RPC or heartbeat timeout) x4" in unknown["message"]
    assert "failed (GspRm...) x1" in unknown["message"] and "[medium]" in unknown["message"]


def test_a_fault_line_naming_no_gpu_is_a_subject_of_its_own():
    def old(facts):
        facts["health"]["kernel_log"]["faults_no_address"] = {"no address": {"init_failed": {
            "count": 1, "first_s": 5.1, "last_s": 5.1, "message": "RmInitAdapter failed! (0x26:0xffff:1227)"}}}
    findings = _of(_run({"smt": "on"}, old), "HEALTH-013")
    assert [(f["subject"], f["status"]) for f in findings if f["status"] != "pass"] == [("unknown GPU", "fail")]


def test_sxid_judged_by_the_category_the_line_states():
    def sxid(facts):
        facts["health"]["kernel_log"]["nvswitch"] = {
            "0000:4a:00.0": {"name": "nvidia-nvswitch0", "codes": {
                "12028": {"count": 1, "lines": 3, "severity": "fatal", "first_s": 5521.4, "last_s": 5521.4,
                          "message": "Link 32 egress non-posted PRIV error (First)"},
                "22013": {"count": 2, "lines": 6, "severity": "non-fatal", "first_s": 38.2, "last_s": 38.2,
                          "message": "Link 44 Minion Link DLREQ interrupt"}}},
            # a switch in the log that is no longer on the bus, with an SXid whose lines state no category
            "0000:84:00.0": {"name": "nvidia-nvswitch1", "codes": {
                "20034": {"count": 0, "lines": 1, "severity": None, "first_s": 9.0, "last_s": 9.0, "message": None}}}}
    result = _run({"smt": "on"}, sxid)
    fatal = dict((f["subject"], f) for f in _of(result, "HEALTH-014"))
    nonfatal = dict((f["subject"], f) for f in _of(result, "HEALTH-015"))
    minor = dict((f["subject"], f) for f in _of(result, "HEALTH-017"))
    assert sorted(fatal) == ["0000:4a:00.0", "0000:4b:00.0", "0000:84:00.0"]
    assert [fatal[a]["status"] for a in sorted(fatal)] == ["fail", "pass", "fail"]
    # 12028 is non-fatal in NVIDIA's table, but its line says Fatal: the driver's word wins
    assert "SXid 12028 x1" in fatal["0000:4a:00.0"]["message"] and "22013" not in fatal["0000:4a:00.0"]["message"]
    assert "[critical; NVIDIA's SXid table: non-fatal" in fatal["0000:4a:00.0"]["message"]
    # 20034 states no category: the table lists it fatal
    assert "[critical; NVIDIA's SXid table: fatal, LTSSM fault up" in fatal["0000:84:00.0"]["message"]
    # 22013 ("can be safely ignored") is HEALTH-017's, at low severity, not HEALTH-015's
    assert [nonfatal[a]["status"] for a in sorted(nonfatal)] == ["pass", "pass", "pass"]
    assert [minor[a]["status"] for a in sorted(minor)] == ["fail", "pass", "pass"]
    assert "SXid 22013 x2" in minor["0000:4a:00.0"]["message"] and "[low;" in minor["0000:4a:00.0"]["message"]
    assert (fatal["0000:4a:00.0"]["severity"], minor["0000:4a:00.0"]["severity"]) == ("critical", "low")


def test_sxid_severity_of_the_table_and_its_defaults():
    def one(code, category):
        info = xid_catalogue.describe_sxid(code, category)
        return info["fatal"], info["severity"]
    assert one(12028, "non-fatal") == (False, "medium")       # stalls a link: HEALTH-015
    assert one(11012, "non-fatal") == (False, "low")          # a corrected single-bit ECC error: HEALTH-017
    assert one(19084, None) == (False, "high")                # usually comes with a fatal one
    assert one(23001, None) == (True, "critical")             # always fatal
    assert one(23001, "non-fatal") == (False, "high")         # listed fatal, logged non-fatal
    assert one(99999, "non-fatal") == (False, "medium")       # unlisted: the line's category
    assert one(99999, "fatal") == (True, "critical")
    assert one(99999, None) == (True, "critical")             # unlisted and unstated: fatal until looked up
    assert one("garbage", "bogus") == (True, "critical")
    assert one(10 ** 400, None) == (True, "critical")
    assert xid_catalogue.SXID_CATALOGUE_VERSION.startswith("NVIDIA Fabric Manager user guide DU-09883-001 v1.3")
    for code, (category, severity, meaning) in xid_catalogue.SXID_CATALOGUE.items():
        assert 10000 <= code < 30000 and meaning
        assert (category == "non-fatal") == (severity != "critical"), code


def test_previous_boot_fault_named_by_boot_id_and_judged_as_the_previous_boot():
    def previous(facts):
        facts["health"]["kernel_log_previous"]["faults"] = {
            GPU0: {"fallen_off_bus": {"count": 1, "first_s": 1843.3, "last_s": 1843.3,
                                      "message": "fallen off the bus and is not responding to commands."}}}
        facts["health"]["kernel_log_previous"]["by_gpu"] = {"0000:99:00.0": {"79": dict(XID_79)}}
        facts["health"]["kernel_log_previous"]["nvswitch"] = {"0000:4a:00.0": {"name": "nvidia-nvswitch0", "codes": {
            "22013": {"count": 1, "lines": 3, "severity": "non-fatal", "first_s": 3.0, "last_s": 3.0, "message": "x"},
            "23001": {"count": 1, "lines": 1, "severity": None, "first_s": 9.0, "last_s": 9.0, "message": None}}}}
    result = _run({"smt": "on"}, previous)
    (finding,) = _of(result, "HEALTH-016")
    assert finding["status"] == "fail" and finding["severity"] == "medium"
    assert finding["subject"] == "3c5e9a1f0b7d4c2e8a6f1d3b5c7e9a0f"
    message = finding["message"]
    # present now: the reboot recovered it, and the action of that boot (drain and reboot) is not repeated
    assert "GPU %s in the previous boot 3c5e9a1f0b7d4c2e8a6f1d3b5c7e9a0f: GPU has fallen off the bus" % GPU0 in message
    assert "[critical in that boot]" in message and "drain and reboot" not in message
    assert "nvidia-smi lists it now: the reboot recovered it" in message
    # a GPU gone since: said so
    assert "GPU 0000:99:00.0 in the previous boot" in message and "not on the PCI bus now" in message
    # fatal SXid listed, the ignorable one not
    assert "SXid 23001" in message and "SXid 22013" not in message
    # the current boot's rules are not touched by the previous boot's faults
    assert set(f["status"] for f in _of(result, "HEALTH-013")) == {"pass"}
    assert set(f["status"] for f in _of(result, "HEALTH-014")) == {"pass"}


@pytest.mark.parametrize("error", [
    "the kernel log is read with dmesg (journalctl is not installed): dmesg holds the current boot only, so the "
    "previous boot's kernel log is unknown",
    "journalctl --list-boots lists no previous boot (1 boot(s) in the journal): ..."])
def test_previous_boot_unknown_with_the_reason(error):
    def unread(facts):
        facts["health"]["kernel_log_previous"] = {"boot_id": None, "boot_offset": -1, "error": error}
    (finding,) = _of(_run({"smt": "on"}, unread), "HEALTH-016")
    assert finding["status"] == "unknown" and error[:40] in finding["message"]
    assert finding["subject"] == "previous boot"


def test_previous_boot_not_applicable_when_not_asked():
    def one_boot(facts):
        facts["health"]["kernel_log_boots"] = 1
        facts["health"]["kernel_log_previous"] = None
    (finding,) = _of(_run({"smt": "on"}, one_boot), "HEALTH-016")
    assert finding["status"] == "not_applicable"


def test_previous_boot_hostile_values_never_raise():
    for value in ("text", 5, [], {"by_gpu": "x"}, {"by_gpu": {"a": 5}, "faults": ["x"], "nvswitch": {"b": "c"}},
                  {"by_gpu": {"0000:41:00.0": {"79": "x", "x": {"count": "many"}}}, "faults": {"g": {"k": 5}}}):
        def hostile(facts, value=value):
            facts["health"]["kernel_log_previous"] = value
        findings = _of(_run({"smt": "on"}, hostile), "HEALTH-016")
        assert findings and all(f["status"] in ("pass", "fail", "unknown", "not_applicable") for f in findings)


def test_sxid_rules_unknown_when_the_kernel_log_was_not_read():
    def unread(facts):
        facts["health"]["kernel_log"] = {"error": "kernel log not read: journalctl not found in PATH; dmesg not found"}
    findings = _of(_run({"smt": "on"}, unread), "HEALTH-014")
    assert set(f["status"] for f in findings) == {"unknown"} and "journalctl not found" in findings[0]["message"]


GPU2 = "0000:46:00.0"


def _gpu_lost_in_the_middle(facts):
    """Three GPUs on the bus (0000:43, 0000:44, 0000:46); the middle one is lost: nvidia-smi -q -x
    lists the other two at positions 0 and 1, nvidia-smi nvlink -s numbers GPUs by the driver's
    index (0, 1 for the lost one, 2) and the third GPU has 6 of its 18 links down."""
    third = copy.deepcopy([d for d in facts["pci"]["devices"] if d["address"] == GPU1][0])
    third["address"] = GPU2
    facts["pci"]["devices"].append(third)
    smi = facts["nvidia"]["gpus"]
    last = copy.deepcopy(smi[1])
    last.update(index=1, bus_id=GPU2, uuid="GPU-00000002")
    facts["nvidia"]["gpus"] = [smi[0], last]
    facts["nvidia"]["attached_gpus"] = 3
    nvlink = facts["health"]["nvlink"]["gpus"]
    third_links = copy.deepcopy(nvlink[1])
    third_links.update(index=2, uuid="GPU-00000002", links_active=12, speeds_gbps={"26.562": 12},
                       inactive=[12, 13, 14, 15, 16, 17])
    nvlink[1].update(links_active=18)  # the lost GPU's entry (UUID GPU-00000001), as last seen
    facts["health"]["nvlink"]["gpus"] = [nvlink[0], nvlink[1], third_links]


def test_nvlink_matched_by_uuid_with_a_gpu_lost_in_the_middle():
    findings = dict((f["subject"], f) for f in _of(_run({"smt": "on"}, _gpu_lost_in_the_middle), "HEALTH-005"))
    assert findings[GPU0]["status"] == "pass"
    # the dead links are the third GPU's (by UUID), not the lost GPU's (nvlink -s "GPU 1")
    assert findings[GPU2]["status"] == "fail" and "inactive: link 12" in findings[GPU2]["message"]
    assert findings[GPU1]["status"] == "unknown" and "does not list" in findings[GPU1]["message"]


def test_nvlink_entry_without_uuid_is_unknown_not_matched_by_number():
    def no_uuid(facts):
        for gpu in facts["nvidia"]["gpus"]:
            gpu["uuid"] = None
    findings = _of(_run({"smt": "on"}, no_uuid), "HEALTH-005")
    assert set(f["status"] for f in findings) == {"unknown"} and "no UUID" in findings[0]["message"]


DRIVER_GONE = ("nvidia-smi -q -x exited 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
               "driver. Make sure that the latest NVIDIA driver is installed and running.")


def _driver_not_loaded(facts):
    facts["nvidia"].update(present=False, gpus=[], driver_version=None, cuda_version=None, attached_gpus=None,
                           topology=None, module={"version": None, "open": None, "raw": None},
                           smi={"available": False, "error": DRIVER_GONE})
    facts["health"]["nvlink"] = None
    for dev in facts["pci"]["devices"]:
        if dev["address"] in (GPU0, GPU1):
            dev["driver"] = None


def test_driver_not_loaded_makes_every_gpu_rule_unknown_naming_the_reason():
    result = _run({"smt": "on"}, _driver_not_loaded)
    per_gpu = ("NVIDIA-001", "NVIDIA-004", "NVIDIA-005", "NVIDIA-007", "NVIDIA-008", "NVIDIA-009",
               "HEALTH-003", "HEALTH-004")
    for rule in per_gpu:
        findings = _of(result, rule)
        assert [(f["subject"], f["status"]) for f in findings] == [(GPU0, "unknown"), (GPU1, "unknown")], rule
        assert all("couldn't communicate with the NVIDIA driver" in f["message"] for f in findings), rule
        assert all("module is not loaded" in f["message"] for f in findings), rule
    (ecc,) = _of(result, "NVIDIA-006")
    assert ecc["status"] == "unknown" and "couldn't communicate" in ecc["message"]
    (missing,) = _of(result, "NVIDIA-010")
    assert missing["status"] == "fail" and "0 of the 2 NVIDIA GPUs" in missing["message"]
    assert [f["status"] for f in _of(result, "NVIDIA-002")] == ["unknown"]


def test_gpus_passed_through_to_vms_without_the_driver_are_not_judged():
    def passthrough(facts):
        _driver_not_loaded(facts)
        for dev in facts["pci"]["devices"]:
            if dev["address"] in (GPU0, GPU1):
                dev["driver"] = "vfio-pci"
    result = _run({"smt": "on"}, passthrough)
    for rule in ("NVIDIA-001", "NVIDIA-004", "NVIDIA-006", "HEALTH-003"):
        assert [f["status"] for f in _of(result, rule)] == ["not_applicable"], rule


def test_the_report_states_the_xid_catalogue_version_and_how_to_update_it(catalogue):
    # the rule text is in every report (report.json rules, the HTML and Markdown rule notes)
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.xid_catalogue import CATALOGUE_VERSION
    (rule,) = [r for r in catalogue.rules if r.id == "HEALTH-001"]
    text = " ".join(rule.rationale.split())
    assert CATALOGUE_VERSION in text and "xid_catalogue.py" in text and rule.source == SOURCE


def test_the_report_states_the_sxid_catalogue_version_and_how_to_update_it(catalogue):
    """HEALTH-014's rationale (in every report) names the version of NVIDIA's guide the SXid table
    follows and the file to update; HEALTH-015 and HEALTH-017 name the guide's document too."""
    rules = dict((r.id, r) for r in catalogue.rules)
    text = " ".join(rules["HEALTH-014"].rationale.split())
    assert xid_catalogue.SXID_CATALOGUE_VERSION in text and "xid_catalogue.py" in text
    for rule_id in ("HEALTH-014", "HEALTH-015", "HEALTH-017"):
        assert rules[rule_id].source == xid_catalogue.SXID_SOURCE
        assert "DU-09883-001 v1.3" in " ".join(rules[rule_id].rationale.split()), rule_id
