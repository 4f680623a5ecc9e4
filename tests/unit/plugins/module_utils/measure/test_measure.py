"""Parsers of the GPU measurement tools (plugins/module_utils/measure/measure.py) and the PCIe link rate
(facts/pci.py link_rate_gbs), on the real-format fixtures of tests/fixtures/measure/ (provenance in its
README.md) and hostile variants: empty, garbage, truncated, non-UTF-8, NUL bytes. No parser raises; a
bad input is a reason, never a result. About 0.3 s."""
import json
import os

import pytest

from ansible_collections.gpuhost.baseline.plugins.module_utils.measure import measure
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.pci import ENCODING, SPEEDS, link_rate_gbs

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "fixtures", "measure")


def fixture(name, mode="r"):
    with open(os.path.join(FIXTURES, name), mode) as handle:
        return handle.read()


PARSERS = (measure.parse_nvbandwidth, measure.parse_dcgm_diag, measure.parse_dcgm_health, measure.parse_nccl_tests)


# -- nvbandwidth ----------------------------------------------------------------------------------
def test_nvbandwidth_text_host_device_per_gpu():
    result, error = measure.parse_nvbandwidth(fixture("nvbandwidth-v0.2-8x4090-ce.txt"))
    assert error is None
    assert result["version"] == "v0.2" and result["driver_version"] == "545.29.06"
    assert result["cuda_runtime_version"] == "12030" and len(result["devices"]) == 8
    h2d = result["testcases"]["host_to_device_memcpy_ce"]
    assert h2d["status"] == "passed" and h2d["unit"] == "GB/s" and h2d["rows_are"] == "cpu"
    assert h2d["direction"] == "->" and h2d["sum"] == 205.04
    assert h2d["per_gpu"]["0"] == 25.50 and h2d["per_gpu"]["7"] == 26.31 and len(h2d["per_gpu"]) == 8
    d2h = result["testcases"]["device_to_host_memcpy_ce"]
    assert d2h["direction"] == "<-" and d2h["per_gpu"]["5"] == 27.11
    assert abs(sum(d2h["per_gpu"].values()) - d2h["sum"]) < 0.05  # the matrix is printed rounded


def test_nvbandwidth_text_one_gpu_with_bus_id_and_note():
    result, error = measure.parse_nvbandwidth(fixture("nvbandwidth-v0.8-a100-h2d-sm.txt"))
    assert error is None
    assert result["devices"] == {"0": "NVIDIA A100-SXM4-40GB (00000000:99:00)"}
    assert result["testcases"]["host_to_device_memcpy_sm"]["per_gpu"] == {"0": 25.13}


def test_nvbandwidth_text_peer_pairs_skip_the_diagonal():
    result, error = measure.parse_nvbandwidth(fixture("nvbandwidth-v0.8-6xa6000-d2d-read.txt"))
    assert error is None
    case = result["testcases"]["device_to_device_memcpy_read_ce"]
    assert case["rows_are"] == "gpu" and len(case["pairs"]) == 30
    assert {"src": "0", "dst": "3", "value": 21.95} in case["pairs"]
    assert case["matrix"][0][0] is None and case["sum"] == 715.53
    # the README's example writes 0.00 on the diagonal (older versions) and "<-": column to row
    result, error = measure.parse_nvbandwidth(fixture("nvbandwidth-readme-d2d-write.txt"))
    case = result["testcases"]["device_to_device_memcpy_write_ce"]
    assert error is None and len(case["pairs"]) == 56 and case["direction"] == "<-"
    assert {"src": "1", "dst": "0", "value": 276.07} in case["pairs"]


# -- nvbandwidth v0.10 (issue 36 item 5): no Device lines, three matrices per bidirectional testcase, CoV --------

def _cells(case):
    return [value for row in case["matrix"] for value in row if value is not None]


@pytest.mark.parametrize("name, testcase, gpus, total", [
    ("nvbandwidth-v0.10-8xh100-h2d-ce.txt", "host_to_device_memcpy_ce", 8, 442.87),
    ("nvbandwidth-v0.10-8xh100-d2h-ce.txt", "device_to_host_memcpy_ce", 8, 441.72),
    ("nvbandwidth-v0.10-8xh100-d2d-read-ce.txt", "device_to_device_memcpy_read_ce", 8, 22126.64),
])
def test_nvbandwidth_v0_10_without_device_lines(name, testcase, gpus, total):
    result, error = measure.parse_nvbandwidth(fixture(name))
    assert error is None and result["version"] == "v0.10.0" and result["driver_version"] == "595.71.05"
    assert result["devices"] == {} and result["failure"] is None
    case = result["testcases"][testcase]
    assert case["status"] == "passed" and case["sum"] == total and case["cov"] == 0.0
    assert abs(sum(_cells(case)) - total) < 0.01 * len(_cells(case))  # every figure read (printed rounded)
    if case["rows_are"] == "cpu":
        assert sorted(case["per_gpu"], key=int) == [str(i) for i in range(gpus)]
    else:
        assert len(case["pairs"]) == gpus * (gpus - 1)


def test_nvbandwidth_v0_10_three_matrices_give_the_total_and_list_each():
    result, error = measure.parse_nvbandwidth(fixture("nvbandwidth-v0.10-7xb300-full-run.txt"))
    assert error is None and result["devices"] == {} and result["driver_version"] == "610.57.04"
    assert [n for n, c in result["testcases"].items() if c["status"] != "passed"] == []
    read = result["testcases"]["device_to_device_bidirectional_memcpy_read_ce"]
    assert sorted(read["matrices"]) == ["device_to_device_bidirectional_memcpy_read_ce_" + k
                                        for k in ("read1", "read2", "total")]
    assert read["matrices"]["device_to_device_bidirectional_memcpy_read_ce_read1"] == {
        "description": "memcpy CE GPU(row) <-> GPU(column) Read1 bandwidth (GB/s)", "sum": 31945.78, "cov": None}
    # the case's own figures are the total's: 42 pairs, its SUM and its CoV
    assert read["sum"] == 63869.90 and read["cov"] == 0.0 and read["direction"] == "<->" and len(read["pairs"]) == 42
    assert abs(sum(_cells(read)) - 63869.90) < 0.01 * 42
    assert {"src": "0", "dst": "1", "value": 1521.22} in read["pairs"]
    # the poster's output ends after the write testcase's total SUM: no CoV line for it
    write = result["testcases"]["device_to_device_bidirectional_memcpy_write_ce"]
    assert write["sum"] == 64669.78 and write["cov"] is None and len(write["pairs"]) == 42
    h2d = result["testcases"]["host_to_device_memcpy_ce"]
    assert h2d["per_gpu"]["6"] == 55.58 and "matrices" not in h2d


def test_nvbandwidth_several_matrices_without_a_total_are_refused_by_name():
    text = fixture("nvbandwidth-v0.10-7xb300-full-run.txt").replace("_read_ce_total", "_read_ce_sum3")
    case = measure.parse_nvbandwidth(text)[0]["testcases"]["device_to_device_bidirectional_memcpy_read_ce"]
    assert case["status"] == "error" and "pairs" not in case
    assert case["error"] == ("3 matrices (device_to_device_bidirectional_memcpy_read_ce_read1, "
                             "device_to_device_bidirectional_memcpy_read_ce_read2, "
                             "device_to_device_bidirectional_memcpy_read_ce_sum3) and not one total: not read")


@pytest.mark.parametrize("text, kind, line", [
    (None, None, None),
    ("nvbandwidth Version: v0.10.0\n", None, None),
    (" Invalid value when checking the pattern at 0x1\n Current offset : 3 \nASSERT in expression h_errorFlag == 0 in f() : memcpy.cpp:165\n",
     "data_check", "Invalid value when checking the pattern at 0x1"),
    ("[CUDA_ERROR_OUT_OF_MEMORY] out of memory in expression cuMemAlloc(&b, s) in f() : memcpy.cpp:40\n",
     "cuda_error", "[CUDA_ERROR_OUT_OF_MEMORY] out of memory in expression cuMemAlloc(&b, s) in f() : memcpy.cpp:40"),
    ("[cudaErrorDevicesUnavailable] CUDA-capable device(s) is/are busy or unavailable in expression x\n",
     "cuda_error", "[cudaErrorDevicesUnavailable] CUDA-capable device(s) is/are busy or unavailable in expression x"),
    ("CUDA runtime sanity check failed: cudaSetDevice(i) returned all CUDA-capable devices are busy\n",
     "sanity_check", "CUDA runtime sanity check failed: cudaSetDevice(i) returned all CUDA-capable devices are busy"),
    ("ASSERT in expression x == 0 in f() : a.cpp:1\n", "assert", "ASSERT in expression x == 0 in f() : a.cpp:1"),
    ("a line that mentions ASSERT in expression later\n", None, None),
    # bytes that are not UTF-8 are replaced, and the line still quoted
    (b"\xff\xfe Invalid value when checking the pattern at 0x2\n", "data_check",
     "\ufffd\ufffd Invalid value when checking the pattern at 0x2"),
])
def test_nvbandwidth_failure_lines(text, kind, line):
    failure = measure.nvbandwidth_failure(text)
    assert (failure and failure["kind"], failure and failure["line"]) == (kind, line)


def test_nvbandwidth_data_check_abort_names_the_testcase():
    result, error = measure.parse_nvbandwidth(fixture("nvbandwidth-v0.7-8xa100-pattern-assert.txt"))
    assert error is None and result["failure"]["kind"] == "data_check"
    assert result["failure"]["testcase"] == "device_to_device_memcpy_read_ce"
    assert result["failure"]["lines"][1].startswith("ASSERT in expression h_errorFlag == 0")
    assert result["testcases"]["device_to_device_memcpy_read_ce"]["status"] == "error"


def test_nvbandwidth_json():
    result, error = measure.parse_nvbandwidth(fixture("nvbandwidth-json-2gpu.json"))
    assert error is None and result["format"] == "json" and result["version"] == "v0.8"
    assert result["devices"]["1"].startswith("NVIDIA H100 80GB HBM3 (00000000:2a:00)")
    cases = result["testcases"]
    assert cases["host_to_device_memcpy_ce"]["per_gpu"] == {"0": 55.6, "1": 55.4}
    assert cases["device_to_device_memcpy_read_ce"]["pairs"] == [
        {"src": "0", "dst": "1", "value": 389.1}, {"src": "1", "dst": "0", "value": 389.4}]
    assert cases["host_to_all_memcpy_ce"]["status"] == "waived"


def test_nvbandwidth_truncated_matrix_is_an_error_of_that_testcase():
    text = fixture("nvbandwidth-v0.8-6xa6000-d2d-read.txt")
    cut = text[:text.index(" 3     21.82") + 20]
    result, error = measure.parse_nvbandwidth(cut)
    assert error is None
    case = result["testcases"]["device_to_device_memcpy_read_ce"]
    assert case["status"] == "error" and "truncated" in case["error"]
    result, error = measure.parse_nvbandwidth(text[:text.index("memcpy CE")])
    assert result["testcases"]["device_to_device_memcpy_read_ce"]["status"] == "error"


def test_nvbandwidth_error_and_waived_lines():
    text = "Running host_to_device_memcpy_ce.\nERROR: cuMemAlloc failed: out of memory\n"
    result, error = measure.parse_nvbandwidth(text)
    assert result["testcases"]["host_to_device_memcpy_ce"]["status"] == "error"
    assert "out of memory" in result["testcases"]["host_to_device_memcpy_ce"]["error"]
    text = "Running device_to_device_memcpy_read_ce.\nWaived: not enough GPUs\n"
    result, error = measure.parse_nvbandwidth(text)
    assert result["testcases"]["device_to_device_memcpy_read_ce"]["status"] == "waived"


@pytest.mark.parametrize("text, reason", [
    ("", "empty output"),
    ("   \n", "empty output"),
    ("bash: nvbandwidth: command not found\n", "no testcase ran"),
    ('{"nvbandwidth": {"testca', "does not parse"),
    ('{"other": 1}', "not nvbandwidth -j output"),
    ('{"nvbandwidth": {"error": "cuInit failed: no CUDA-capable device is detected"}}', "no CUDA-capable device"),
])
def test_nvbandwidth_bad_input_is_a_reason(text, reason):
    result, error = measure.parse_nvbandwidth(text)
    assert result is None and reason in error


# -- dcgmi diag -----------------------------------------------------------------------------------
def test_dcgm_diag_v3_all_skipped():
    result, error = measure.parse_dcgm_diag(fixture("dcgm-diag-v3-r3-t400-skip.json"))
    assert error is None and result["dcgm_format"] == 3
    assert result["overall"] == "skip" and result["entities"] == {"GPU 0": "skip"} and result["failed"] == []
    assert [t["name"] for t in result["tests"]] == ["PCIe", "GPU Memory", "Diagnostic", "EUD Test", "Targeted Stress"]


def test_dcgm_diag_v3_fail_and_warn_of_the_host():
    result, error = measure.parse_dcgm_diag(fixture("dcgm-diag-v3-r1-fail.json"))
    assert error is None and result["overall"] == "fail" and result["entities"] == {}
    assert result["failed"] == ["Persistence Mode: fail", "Environment Variables: warn"]


def test_dcgm_diag_v3_gpu_ids_name_the_gpu():
    # DCGM 3.0-3.2 write the one GPU of a result under the plural key, as a string
    for name, count in (("dcgm-diag-v3.1-r2-gpu-ids.json", 11), ("dcgm-diag-v3.1-r3-gpu-ids.json", 16)):
        result, error = measure.parse_dcgm_diag(fixture(name))
        assert error is None and result["dcgm_format"] == 3 and result["overall"] == "pass"
        assert result["entities"] == {"GPU 0": "pass"} and len(result["tests"]) == count
        pcie = [t for t in result["tests"] if t["name"] == "PCIe"][0]
        assert [r["entity"] for r in pcie["results"]] == ["GPU 0"]
        deployment = [t for t in result["tests"] if t["category"] == "Deployment"][0]
        assert [r["entity"] for r in deployment["results"]] == [None]  # the host's own result


def test_dcgm_diag_v3_gpu_ids_failure_names_its_gpu():
    # the real r3 output with its GPU's memory test failed (the status changed here, nothing else)
    obj = json.loads(fixture("dcgm-diag-v3.1-r3-gpu-ids.json"))
    memory = [t for c in obj["DCGM GPU Diagnostic"]["test_categories"] for t in c["tests"] if t["name"] == "GPU Memory"][0]
    memory["results"][0].update(status="Fail", warnings="Error using CUDA API cudaMalloc")
    result, error = measure.parse_dcgm_diag(json.dumps(obj))
    assert error is None and result["overall"] == "fail" and result["entities"] == {"GPU 0": "fail"}
    assert result["failed"] == ["GPU Memory on GPU 0: Error using CUDA API cudaMalloc"]


def test_nvvs_gpu_ids_list_of_several_gpus():
    # nvvs's own JSON: one deployment result for all GPUs ("0,1,...,7"), integer ids, null holes, a stray line first
    result, error = measure.parse_dcgm_diag(fixture("nvvs-v3.1-8gpu-gpu-ids-csv.json"))
    assert error is None and result["overall"] == "pass"
    assert result["entities"] == dict(("GPU %d" % i, "pass") for i in range(8))
    denylist = [t for t in result["tests"] if t["name"] == "Denylist"][0]
    assert [r["entity"] for r in denylist["results"]] == ["GPU %d" % i for i in range(8)]


@pytest.mark.parametrize("ids, entities", [
    ("0,1, 3", ["GPU 0", "GPU 1", "GPU 3"]),
    ("gpu0,gpu2", ["GPU 0", "GPU 2"]),
    (5, ["GPU 5"]),
    ([0, "1"], ["GPU 0", "GPU 1"]),
    ("0,0", ["GPU 0"]),
    ("nvswitch", ["GPU nvswitch"]),  # not an index: kept as written, so the result still names it
    (None, []),  # null: the host's own result
])
def test_dcgm_diag_gpu_ids_forms(ids, entities):
    text = json.dumps({"DCGM GPU Diagnostic": {"test_categories": [{"category": "c", "tests": [
        {"name": "t", "results": [{"gpu_ids": ids, "status": "Warn", "warnings": "w"}]}]}]}})
    result, error = measure.parse_dcgm_diag(text)
    assert error is None and sorted(result["entities"]) == sorted(entities)
    assert result["failed"] == ["t%s: w" % (" on " + ", ".join(entities) if entities else "")]


def test_dcgm_diag_v4_per_gpu_with_message():
    result, error = measure.parse_dcgm_diag(fixture("dcgm-diag-v4-r2-memory-fail.json"))
    assert error is None and result["dcgm_format"] == 4 and result["overall"] == "fail"
    assert result["entities"] == {"GPU 0": "pass", "GPU 1": "fail"}
    assert result["failed"] == ["memory on GPU 1: Couldn't allocate at least 75.0% of GPU memory on GPU 1"]
    pcie = [t for t in result["tests"] if t["name"] == "pcie"][0]
    assert pcie["status"] == "pass" and pcie["results"][1]["status"] == "skip"


@pytest.mark.parametrize("text, reason", [
    (None, "no output"),
    ("Error: unable to establish a connection to the specified host: localhost\n", "printed no JSON"),
    ('{"DCGM GPU Diagnostic": {"test_categories": [{"category": "Deployment", "tests": [{"na', "does not parse"),
    ('{"DCGM Diagnostic": {"test_categories": []}}', "without test_categories"),
    ('{"DCGM Diagnostic": {"test_categories": [{"category": "x", "tests": ["garbage"]}]}}', "no test"),
    ("[1, 2]", "printed no JSON"),
])
def test_dcgm_diag_bad_input_is_a_reason(text, reason):
    result, error = measure.parse_dcgm_diag(text)
    assert result is None and reason in error, error


def test_dcgm_diag_runtime_error_is_a_reason():
    result, error = measure.parse_dcgm_diag(fixture("dcgm-diag-v4-runtime-error.json"))
    assert result is None and error == "dcgmi diag could not run: The GPU is busy: one or more processes are using it"


def test_dcgm_diag_unknown_status_is_unknown_not_pass():
    text = '{"DCGM Diagnostic": {"test_categories": [{"category": "x", "tests": [{"name": "t", "results": ' \
           '[{"entity_group": "GPU", "entity_id": 0, "status": "Weird"}], "test_summary": {"status": "Pass"}}]}]}}'
    result, error = measure.parse_dcgm_diag(text)
    assert result["overall"] == "unknown" and result["entities"] == {"GPU 0": "unknown"}


# -- dcgmi health ---------------------------------------------------------------------------------
def test_dcgm_health_real_healthy_host():
    result, error = measure.parse_dcgm_health(fixture("dcgm-health-healthy-real.json"))
    assert error is None and result["overall"] == "healthy" and result["entities"] == {}


def test_dcgm_health_real_healthy_while_a_gpu_waits_for_a_reset():
    # NVIDIA/DCGM issue 263: GPU 1 of 8 needs a reset (nvidia-smi's gpu_recovery_action), the watches see nothing
    result, error = measure.parse_dcgm_health(fixture("dcgm-health-healthy-gpu-reset-pending-real.json"))
    assert error is None and result == {"overall": "healthy", "entities": {}}


def test_dcgm_health_healthy_and_warning():
    result, error = measure.parse_dcgm_health(fixture("dcgm-health-healthy.json"))
    assert error is None and result == {"overall": "healthy", "entities": {}}
    result, error = measure.parse_dcgm_health(fixture("dcgm-health-pcie-warning.json"))
    assert error is None and result["overall"] == "warning"
    assert result["entities"] == {"GPU 0": {"health": "warning", "systems": {"PCIe system": {
        "health": "warning", "message": "Detected more than 8 PCIe replays per minute for GPU 0 : 13"}}}}


L4_POWER = "dcgm-health-v4.6-l4-power-warning-text.txt"


def test_dcgm_health_real_text_power_warning():
    # dcgmi health -c (no -j) of DCGM 4.6.1 on an L4 running a training job at its 72 W power limit
    result, error = measure.parse_dcgm_health(fixture(L4_POWER))
    assert error is None and result["overall"] == "warning"
    assert result["entities"] == {"GPU 0": {"health": "warning", "systems": {"Power system": {
        "health": "warning", "message": "Detected clocks event due to power violation in GPU 0. Monitor the power "
                                        "conditions. This GPU can still perform workload."}}}}


def test_dcgm_health_text_is_read_as_the_json_document_of_the_same_report():
    # DcgmiOutputTree and DcgmiOutputJson print the one tree: the text gives what -j would have printed
    document, error = measure._health_tree(fixture(L4_POWER))
    assert error is None and document == {"header": ["Health Monitor Report"], "body": {
        "Overall Health": {"value": "Warning"},
        "GPU": {"children": {"0": {"value": "Warning", "children": {"Errors": {"children": {"Power system": {
            "value": "Warning", "overflow": ["Detected clocks event due to power violation in GPU 0.",
                                             "Monitor the power conditions. This GPU can still",
                                             "perform workload."]}}}}}}}}}


def test_dcgm_health_real_text_healthy_and_pasted_indented():
    # NVIDIA/DCGM issue 313: a GB200 with a GPU of 54.7e9 corrected ECC errors, DCGM 4.5.2 says Healthy
    result, error = measure.parse_dcgm_health(fixture("dcgm-health-v4.5-gb200-healthy-text.txt"))
    assert error is None and result == {"overall": "healthy", "entities": {}}
    # the same report pasted into a Markdown list or a log, every line indented alike
    indented = "".join("    " + line for line in fixture(L4_POWER).splitlines(True))
    assert measure.parse_dcgm_health(indented) == measure.parse_dcgm_health(fixture(L4_POWER))


def test_dcgm_health_text_cut_anywhere_is_a_reason():
    # a report cut before its closing frame line could have lost the rows of a failing GPU: never a result
    data = fixture(L4_POWER, "rb")
    for end in range(len(data.rstrip(b"\n"))):
        result, error = measure.parse_dcgm_health(data[:end])
        assert result is None and error, (end, result)


def _l4_lines(change):
    lines = fixture(L4_POWER).splitlines()
    change(lines)
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("text, reason", [
    (_l4_lines(lambda lines: lines.pop()), "without its frame"),  # the closing frame line lost
    (_l4_lines(lambda lines: lines.__setitem__(2, lines[2].replace("=", "-"))), "without a header"),
    (_l4_lines(lambda lines: lines.__setitem__(5, lines[5].replace("| -> 0    ", "|    -> 0 "))), "below no row"),
    (_l4_lines(lambda lines: lines.__setitem__(6, lines[6].replace("-> Errors", "   Errors"))), "without its '->'"),
    (_l4_lines(lambda lines: lines.__setitem__(4, "| GPU")), "not a row"),
    (_l4_lines(lambda lines: lines.pop(3)), "Overall Health"),
])
def test_dcgm_health_broken_text_is_a_reason(text, reason):
    result, error = measure.parse_dcgm_health(text)
    assert result is None and reason in error, error


@pytest.mark.parametrize("text, reason", [
    (fixture("dcgm-health-watches-off.txt"), "Health watches not enabled"),
    ('{"body": {"GPU": {}}, "header": ["Health Monitor Report"]}', "Overall Health"),
    ('{"body": {"Overall Health": {"val', "does not parse"),
    (b"\xff\xfe\x00garbage", "NUL"),
])
def test_dcgm_health_bad_input_is_a_reason(text, reason):
    result, error = measure.parse_dcgm_health(text)
    assert result is None and reason in error, error


def test_dcgm_health_internal_error_is_unknown():
    result, error = measure.parse_dcgm_health('{"body": {"Overall Health": {"value": "Internal error"}}}')
    assert result["overall"] == "unknown"


# -- nccl-tests -----------------------------------------------------------------------------------
def test_nccl_all_reduce():
    result, error = measure.parse_nccl_tests(fixture("nccl-all-reduce-gb10-2rank.txt"))
    assert error is None
    assert result["collective"] == "all_reduce_perf" and result["avg_busbw_gbs"] == 0.65375
    assert result["out_of_bounds"] == 0 and result["out_of_bounds_ok"] is True
    assert result["max_busbw_gbs"] == 1.01 and len(result["rows"]) == 4
    assert result["rows"][0] == {"size_bytes": 8192, "count": 2048, "type": "float", "redop": "sum",
                                 "out_of_place": {"time_us": 35.15, "algbw_gbs": 0.23, "busbw_gbs": 0.23, "wrong": 0.0},
                                 "in_place": {"time_us": 30.33, "algbw_gbs": 0.27, "busbw_gbs": 0.27, "wrong": 0.0}}
    assert result["devices"] == [{"rank": 0, "device": 0, "bus": "000f:01:00", "name": "NVIDIA GB10"},
                                 {"rank": 1, "device": 0, "bus": "000f:01:00", "name": "NVIDIA GB10"}]


def test_nccl_error_column_of_2_x_without_its_hash_marks():
    # a real 2.0-2.12 output whose "#" were lost in a paste: the header, the units row and the summary read
    result, error = measure.parse_nccl_tests(fixture("nccl-all-gather-8gpu-error-column-failed-nohash.txt"))
    assert error is None and result["wrong_column"] == "error" and result["avg_busbw_gbs"] == 128.942
    assert result["out_of_bounds"] == 2 and result["out_of_bounds_ok"] is False
    (row,) = result["rows"]
    assert row["size_bytes"] == 4294967296 and row["redop"] is None  # all_gather has no redop column
    assert row["out_of_place"] == {"time_us": 29122.0, "algbw_gbs": 129.05, "busbw_gbs": 129.05, "wrong": 1.0}
    assert measure.nccl_wrong(result["rows"]) == ([
        {"size_bytes": 4294967296, "placement": "out_of_place", "wrong": 1},
        {"size_bytes": 4294967296, "placement": "in_place", "wrong": 1}], True)


#: the 1.x layout as nccl-tests v1.0.0 prints it (src/common.cu and src/all_reduce.cu at dcf8189: the header
#: with "#" and the columns bytes, N, type, op, res; the summary lines with a blank instead of "#"); the
#: figures are made up (no published 1.x run with its table and summary was found)
NCCL_V1 = "\n".join([
    # nThread line and the average line end with a blank, as their format strings do
    "nThread 1 nGpus 2 minBytes 8 maxBytes 1048576 step: 2(factor) warmup iters: 5 iters: 20 validation: 1 ",
    "# NCCL Tests compiled with NCCL 2.2",
    "# Using devices",
    "#   Rank  0 on   gpu01 device  0 [0x3b] Tesla V100-SXM2-16GB",
    "#   Rank  1 on   gpu01 device  1 [0x5e] Tesla V100-SXM2-16GB",
    "",
    "#                                                 out-of-place                    in-place",
    "#       bytes             N    type      op     time  algbw  busbw      res     time  algbw  busbw      res",
    "           8             2   float     sum    0.029   0.00   0.00    0e+00    0.028   0.00   0.00    0e+00",
    "     1048576        262144   float     sum    0.101  10.38  10.38    2e+00    0.099  10.59  10.59    0e+00",
    " Out of bounds values : 1 FAILED",
    " Avg bus bandwidth    : 5.2425 ",
    "", ""])


def test_nccl_1_x_layout_with_its_blank_summary_lines_and_res_column():
    result, error = measure.parse_nccl_tests(NCCL_V1)
    assert error is None and result["wrong_column"] == "res" and result["avg_busbw_gbs"] == 5.2425
    assert result["out_of_bounds"] == 1 and result["out_of_bounds_ok"] is False
    assert [(r["size_bytes"], r["redop"], r["out_of_place"]["wrong"]) for r in result["rows"]] == [
        (8, "sum", 0.0), (1048576, "sum", 2.0)]
    assert result["devices"][1] == {"rank": 1, "device": 1, "bus": "0x5e", "name": "Tesla V100-SXM2-16GB"}


def test_nccl_cut_short_is_a_reason():
    result, error = measure.parse_nccl_tests(fixture("nccl-all-reduce-gb10-2rank-cut.txt"))
    assert result is None and "cut short: 4 rows" in error
    # mpirun --tag-output prefixes are read through
    result, error = measure.parse_nccl_tests(fixture("nccl-all-reduce-tagged-output-cut.txt"))
    assert result is None and "cut short: 3 rows" in error


def test_nccl_out_of_bounds_failed_and_unvalidated_rows():
    text = fixture("nccl-all-reduce-gb10-2rank.txt").replace("Out of bounds values : 0 OK",
                                                             "Out of bounds values : 50 FAILED")
    text = text.replace("0.23       0    30.33", "0.23     N/A    30.33")
    result, error = measure.parse_nccl_tests(text)
    assert error is None and result["out_of_bounds"] == 50 and result["out_of_bounds_ok"] is False
    assert result["rows"][0]["out_of_place"]["wrong"] is None


def test_nccl_messages_between_rows_are_skipped():
    text = fixture("nccl-all-reduce-gb10-2rank.txt")
    noise = "\n8 more processes have sent help message help-mtl-ofi.txt / OFI call fail"
    text = text.replace("\n       16384 ", noise + "\n       16384 ")
    result, error = measure.parse_nccl_tests(text)
    assert error is None and len(result["rows"]) == 4


@pytest.mark.parametrize("text, reason", [
    ("", "empty output"),
    ("all_reduce_perf: error while loading shared libraries: libnccl.so.2\n", "no result table header"),
    (fixture("nccl-all-reduce-gb10-2rank.txt").split("        8192")[0], "no result row"),
])
def test_nccl_bad_input_is_a_reason(text, reason):
    result, error = measure.parse_nccl_tests(text)
    assert result is None and reason in error, error


# -- every parser, hostile input ------------------------------------------------------------------
HOSTILE = [None, 42, b"", b"\x00" * 64, b"\xff\xfe\xfd garbage \xc3\x28", "{", "}", "[]", "{}", "null",
           '{"nvbandwidth": [], "DCGM Diagnostic": 5, "body": "x"}', "\n" * 1000, "# " * 10000,
           "Running x.\n" + "0 " * 5000, '{"a": ' * 2000]


@pytest.mark.parametrize("parser", PARSERS, ids=[p.__name__ for p in PARSERS])
@pytest.mark.parametrize("data", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_input_never_raises_and_never_passes(parser, data):
    result, error = parser(data)
    if result is None:
        assert isinstance(error, str) and error
    else:  # a parse that finds something reports no pass it did not see
        assert error is None
        assert json.dumps(result)  # plain data
        for case in (result.get("testcases") or {}).values():
            assert case["status"] != "passed" or case.get("per_gpu") or case.get("pairs") is not None


@pytest.mark.parametrize("parser, name", [
    (measure.parse_nvbandwidth, "nvbandwidth-v0.2-8x4090-ce.txt"),
    (measure.parse_dcgm_diag, "dcgm-diag-v4-r2-memory-fail.json"),
    (measure.parse_dcgm_health, "dcgm-health-pcie-warning.json"),
    (measure.parse_dcgm_health, L4_POWER),
    (measure.parse_nccl_tests, "nccl-all-reduce-gb10-2rank.txt"),
])
def test_every_truncation_of_a_real_output_is_handled(parser, name):
    data = fixture(name, "rb")
    for end in range(0, len(data), max(1, len(data) // 97)):
        result, error = parser(data[:end])
        assert (result is None) != (error is None)


# -- PCIe link rate -------------------------------------------------------------------------------
@pytest.mark.parametrize("speed, width, expected", [
    (5, 16, 63.015), ("32GT/s", "x16", 63.015), (4, 16, 31.508), ("16GT/s", 8, 15.754), (3, 16, 15.754),
    (1, 1, 0.25), (2, 4, 2.0), (6, 16, 118.0), ("Gen5", 16, 63.015),
])
def test_link_rate(speed, width, expected):
    assert link_rate_gbs(speed, width) == expected


@pytest.mark.parametrize("speed, width", [
    (None, 16), (7, 16), ("unknown", 16), (5, 0), (5, 64), (5, None), (True, 16), (5, "wide"), ("", 16),
])
def test_link_rate_of_nonsense_is_none(speed, width):
    assert link_rate_gbs(speed, width) is None


def test_encoding_covers_every_speed():
    assert set(ENCODING) == set(SPEEDS)


# -- no silent pass (issue 40): a figure that is not finite or is negative is no figure -------------
@pytest.mark.parametrize("token, value", [
    ("12.5", 12.5), (" 7 ", 7.0), ("0", 0.0), ("+3", 3.0), ("1e3", 1000.0), (55, 55.0), (0.5, 0.5),
    ("1e999", None), ("-1e999", None), ("inf", None), ("nan", None), ("-3.2", None), ("-0.5", None), ("N/A", None),
    (float("inf"), None), (float("nan"), None), (-1, None), (-2.5, None), (True, None), (10 ** 400, None),
    ("9" * 400, None), ("1" * 100, None), ("\u00b2", None), ("\u0661", None), (None, None), ([], None),
])
def test_number_refuses_non_finite_and_negative(token, value):
    assert measure._number(token) == value


def _h2d(values, total="205.04"):
    return ("Running host_to_device_memcpy_ce.\nmemcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)\n"
            "          0         1\n0     %s     %s\n\nSUM host_to_device_memcpy_ce %s\n" % (values + (total,)))


@pytest.mark.parametrize("bad", ["1e999", "inf", "nan", "-25.50", "-1e999"])
def test_nvbandwidth_text_refuses_a_non_finite_or_negative_rate(bad):
    result, error = measure.parse_nvbandwidth(_h2d((bad, "24.26"), total=bad))
    case = result["testcases"]["host_to_device_memcpy_ce"]
    assert error is None and case["per_gpu"] == {"0": None, "1": 24.26} and case["sum"] is None


@pytest.mark.parametrize("bad", ["1e999", "-55.6", "-1", "Infinity", "NaN", '"1e999"', '"-5"', "true"])
def test_nvbandwidth_json_refuses_a_non_finite_or_negative_rate(bad):
    text = fixture("nvbandwidth-json-2gpu.json").replace('"55.6"', bad).replace("111.0", bad)
    result, error = measure.parse_nvbandwidth(text)
    case = result["testcases"]["host_to_device_memcpy_ce"]
    assert error is None and case["per_gpu"] == {"0": None, "1": 55.4} and case["sum"] is None


def test_nvbandwidth_json_matrix_wider_than_any_host_is_an_error():
    text = json.dumps({"nvbandwidth": {"testcases": [{
        "name": "host_to_device_memcpy_ce", "status": "Passed",
        "bandwidth_description": "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)",
        "bandwidth_matrix": [["1.0"] * (measure.MAX_GPUS + 1)]}]}})
    result, error = measure.parse_nvbandwidth(text)
    case = result["testcases"]["host_to_device_memcpy_ce"]
    assert case["status"] == "error" and "more than %d GPUs" % measure.MAX_GPUS in case["error"]


@pytest.mark.parametrize("old, bad", [
    ("Avg bus bandwidth    : 0.65375", "1e999"), ("Avg bus bandwidth    : 0.65375", "-0.65375"),
    ("Avg bus bandwidth    : 0.65375", "nan"), ("0.23    0.23       0    30.33", "inf"),
    ("0.23    0.23       0    30.33", "-0.23"), ("35.15", "1e999"), ("2048     float", "-2048"),
])
def test_nccl_refuses_non_finite_or_negative_figures(old, bad):
    text = fixture("nccl-all-reduce-gb10-2rank.txt")
    assert old in text
    words = old.split()
    new = old.replace(words[-1] if "Avg" in old else words[1] if "30.33" in old else words[0], bad, 1)
    result, error = measure.parse_nccl_tests(text.replace(old, new, 1))
    assert result is None and "not finite numbers >= 0" in error and repr(bad) in error, error


def test_nccl_odd_numbers_never_raise():
    text = fixture("nccl-all-reduce-gb10-2rank.txt")
    # a size of 400 digits (float() gives inf; int(inf) raised), a rank of 5000 digits (int() refuses it)
    result, error = measure.parse_nccl_tests(text.replace("        8192  ", "9" * 400 + "  ", 1))
    assert (result is None) != (error is None)
    result, error = measure.parse_nccl_tests(text.replace("Rank  0", "Rank " + "1" * 5000, 1)
                                             .replace("values : 0 OK", "values : " + "1" * 5000 + " OK"))
    assert error is None and len(result["devices"]) == 1 and result["out_of_bounds"] is None


@pytest.mark.parametrize("parser, old, new", [
    (measure.parse_stress_ng_stream, "4965.67 MB read/sec", "1e999 MB read/sec"),
    (measure.parse_stress_ng_stream, "3310.44 MB write/sec", "-3310.44 MB write/sec"),
    (measure.parse_sysbench_memory, "(6229.30 MiB/sec)", "(1e999 MiB/sec)"),
    (measure.parse_sysbench_memory, "18816.00 MiB transferred", "-18816.00 MiB transferred"),
    (measure.parse_mbw, "Copy: 3081.714 MiB/s", "Copy: 1e999 MiB/s"),
    (measure.parse_mbw, "Copy: 3081.714 MiB/s", "Copy: inf MiB/s"),
])
def test_memory_tools_refuse_non_finite_or_negative_rates(parser, old, new):
    name = {measure.parse_stress_ng_stream: "stress-ng-0.15.06-stream-1.txt",
            measure.parse_sysbench_memory: "sysbench-1.0.20-memory-write.txt",
            measure.parse_mbw: "mbw-1.2.2-memcpy.txt"}[parser]
    text = host_fixture(name)
    assert old in text
    result, error = parser(text.replace(old, new))
    assert result is None and "not a positive number" in error


def test_cpuinfo_leaves_out_non_finite_or_negative_clocks_and_odd_cpu_numbers():
    text = ("processor\t: 0\ncpu MHz\t\t: 1e999\n\nprocessor\t: 1\ncpu MHz\t\t: -2445.406\n\n"
            "processor\t: 2\ncpu MHz\t\t: nan\n\nprocessor\t: \u00b2\ncpu MHz\t\t: 2445.406\n\n"
            "processor\t: 4\ncpu MHz\t\t: 2445.406\n")
    assert measure.parse_cpuinfo_mhz(text) == {4: 2445.406}


def test_nvbandwidth_header_of_non_ascii_digits_is_no_header():
    text = _h2d(("25.50", "24.26")).replace("          0         1\n", "          \u00b2         \u00b3\n")
    result, error = measure.parse_nvbandwidth(text)
    assert result["testcases"]["host_to_device_memcpy_ce"]["status"] == "error"


def host_fixture(name):
    with open(os.path.join(FIXTURES, "..", "host_measure", name)) as handle:
        return handle.read()
