"""GPU measurements (issue 23, measure/measure_gpu.py): the plan (no GPU, a tool missing, the commands, the
environment, the timeouts) on injected paths and an injected ``which``; reading each tool's recorded output
(tests/fixtures/measure/, provenance in its README.md) with an injected runner; a non-zero exit, a hang,
garbage, a runner or output that would raise: ``unknown`` with a one-line reason, every key of the result
there, no figure. Under a second."""
import os

import pytest

from helpers.gpu_host import gpu_host

from ansible_collections.gpuhost.baseline.plugins.module_utils.measure import measure_gpu

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "fixtures", "measure")
ALL = list(measure_gpu.GPU_MEASUREMENTS)
KEYS = {
    "gpu_bw": {"status", "reason", "command", "seconds", "tool", "version", "gpus", "pairs", "testcases", "failure"},
    "dcgm_diag": {"status", "reason", "command", "seconds", "level", "overall", "failed", "entities"},
    "dcgm_health": {"status", "reason", "command", "seconds", "overall", "entities"},
    "nccl": {"status", "reason", "command", "seconds", "gpus", "avg_busbw_gbs", "max_busbw_gbs", "out_of_bounds",
             "out_of_bounds_ok", "wrong", "checked", "exit_status", "wrong_column"},
}
FIGURES = {"gpu_bw": ("pairs",), "dcgm_diag": ("overall", "failed", "entities"),
           "dcgm_health": ("overall", "entities"),
           "nccl": ("avg_busbw_gbs", "max_busbw_gbs", "out_of_bounds", "out_of_bounds_ok", "wrong", "checked",
                    "exit_status")}


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def which_of(*names):
    return lambda name: "/opt/bin/" + name if name in names else None


def planned(name, level=1, gpus=2):
    binary = "/opt/bin/" + measure_gpu.GPU_TOOLS[name]
    argv = measure_gpu.gpu_argv(name, binary, level, gpus)
    return {"status": "ok", "reason": None, "tool": measure_gpu.GPU_TOOLS[name], "argv": argv,
            "command": " ".join(argv), "env": dict(measure_gpu.CUDA_ENV) if name in ("gpu_bw", "nccl") else {},
            "timeout_s": 7, "level": level, "gpus": gpus}


def run_with(rc, out, reason=None, seen=None):
    def run(argv, timeout_s, env=None):
        if seen is not None:
            seen.append((argv, timeout_s, env))
        return rc, out, reason
    return run


def assert_no_figure(name, result):
    assert set(result) == KEYS[name], result
    assert result["status"] == "unknown" and result["reason"] and "\n" not in result["reason"]
    for key in FIGURES[name]:
        assert not result[key] and result[key] != 0, (key, result)
    for gpu in result["gpus"].values() if name == "gpu_bw" else ():
        assert gpu["h2d_gbs"] is None and gpu["d2h_gbs"] is None, result


# -- the plan -------------------------------------------------------------------------------------------
def test_no_gpu_every_measurement_unknown_and_no_tool_looked_up(tmp_path):
    looked = []
    plan = measure_gpu.plan_gpu(ALL, lambda name: looked.append(name) or "/opt/bin/" + name,
                                gpus_dir=str(tmp_path / "absent"), dev=str(tmp_path / "nvidia0"))
    assert set(plan) == set(ALL) and looked == []
    for name in ALL:
        assert plan[name]["status"] == "unknown" and plan[name]["argv"] is None
        assert plan[name]["reason"].startswith("no NVIDIA GPU on this host (")
    results = measure_gpu.measure_gpu(plan, run=lambda *args, **kwargs: pytest.fail("ran %s" % (args,)))
    for name in ALL:
        assert_no_figure(name, results[name])
        assert results[name]["command"] is None and results[name]["seconds"] is None


def test_an_empty_gpu_directory_is_no_gpu_and_dev_nvidia0_is_one(tmp_path):
    (tmp_path / "gpus").mkdir()
    assert measure_gpu.gpu_count(str(tmp_path / "gpus"), str(tmp_path / "nvidia0")) == (0, False)
    (tmp_path / "nvidia0").write_text("")
    assert measure_gpu.gpu_count(str(tmp_path / "gpus"), str(tmp_path / "nvidia0")) == (0, True)
    plan = measure_gpu.plan_gpu(ALL, which_of(*measure_gpu.GPU_TOOLS.values()),
                                gpus_dir=str(tmp_path / "gpus"), dev=str(tmp_path / "nvidia0"))
    assert plan["gpu_bw"]["status"] == "ok" and plan["dcgm_diag"]["status"] == "ok"
    assert plan["nccl"]["status"] == "unknown" and "GPU count unknown" in plan["nccl"]["reason"]


def test_the_commands_environment_and_timeouts(tmp_path):
    gpus_dir, dev = gpu_host(tmp_path, 4)
    plan = measure_gpu.plan_gpu(ALL, which_of("nvbandwidth", "dcgmi", "all_reduce_perf"), level=3,
                                timeouts={"dcgm_diag": 5400}, gpus_dir=gpus_dir, dev=dev)
    assert plan["gpu_bw"]["argv"] == ["/opt/bin/nvbandwidth", "-j", "-t", "host_to_device_memcpy_ce",
                                      "device_to_host_memcpy_ce", "device_to_device_memcpy_read_ce"]
    assert plan["dcgm_diag"]["command"] == "/opt/bin/dcgmi diag -r 3 -j" and plan["dcgm_diag"]["level"] == 3
    assert plan["dcgm_health"]["command"] == "/opt/bin/dcgmi health -c -j"
    assert plan["nccl"]["command"] == "/opt/bin/all_reduce_perf -b 8M -e 1G -f 2 -g 4" and plan["nccl"]["gpus"] == 4
    assert plan["gpu_bw"]["env"] == plan["nccl"]["env"] == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert plan["dcgm_diag"]["env"] == {}
    assert [plan[name]["timeout_s"] for name in ALL] == [300, 5400, 60, 300]
    assert all(plan[name]["status"] == "ok" and plan[name]["reason"] is None for name in ALL)


@pytest.mark.parametrize("tool, names", [("nvbandwidth", ["gpu_bw"]), ("dcgmi", ["dcgm_diag", "dcgm_health"]),
                                         ("all_reduce_perf", ["nccl"])])
def test_a_missing_tool_is_unknown_naming_it_and_where_to_get_it(tmp_path, tool, names):
    gpus_dir, dev = gpu_host(tmp_path)
    others = [name for name in measure_gpu.GPU_TOOLS.values() if name != tool]
    plan = measure_gpu.plan_gpu(ALL, which_of(*others), gpus_dir=gpus_dir, dev=dev)
    for name in names:
        assert plan[name]["status"] == "unknown" and plan[name]["command"] is None
        assert plan[name]["reason"].startswith("%s not found in PATH (" % tool)
        assert "http" in plan[name]["reason"] or "package" in plan[name]["reason"]
        result = measure_gpu.measure_one(name, plan[name], run=lambda *args, **kwargs: pytest.fail("ran"))
        assert_no_figure(name, result)
    assert all(plan[name]["status"] == "ok" for name in ALL if name not in names)


def test_only_the_measurements_asked_for_and_a_which_that_raises(tmp_path):
    gpus_dir, dev = gpu_host(tmp_path)

    def broken(name):
        raise OSError("no PATH")

    plan = measure_gpu.plan_gpu(["nccl", "cpu_freq"], broken, gpus_dir=gpus_dir, dev=dev)
    assert list(plan) == ["nccl"] and "not found in PATH" in plan["nccl"]["reason"]
    assert measure_gpu.plan_gpu(None, broken, gpus_dir=gpus_dir, dev=dev) == {}


# -- reading the recorded outputs ------------------------------------------------------------------------
def test_gpu_bw_from_nvbandwidth_json():
    seen = []
    result = measure_gpu.measure_one("gpu_bw", planned("gpu_bw"), run=run_with(0, fixture("nvbandwidth-json-2gpu.json"),
                                                                               seen=seen))
    assert set(result) == KEYS["gpu_bw"] and result["status"] == "ok" and result["reason"] is None
    assert seen[0][1] == 7 and seen[0][2] == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert result["tool"] == "nvbandwidth" and result["version"] == "v0.8" and result["seconds"] is not None
    assert result["gpus"]["0"] == {"name": "NVIDIA H100 80GB HBM3 (00000000:18:00): (gpu01)", "bus_id": "0000:18:00.0",
                                   "h2d_gbs": 55.6, "d2h_gbs": 55.2}
    assert result["gpus"]["1"]["bus_id"] == "0000:2a:00.0" and result["gpus"]["1"]["d2h_gbs"] == 55.3
    assert result["pairs"] == [{"src": "0", "dst": "1", "gbs": 389.1}, {"src": "1", "dst": "0", "gbs": 389.4}]
    assert result["testcases"]["host_to_all_memcpy_ce"] == {"status": "waived", "error": None}
    assert result["testcases"]["device_to_device_memcpy_read_ce"]["status"] == "passed"


def test_gpu_bw_from_nvbandwidth_text_and_a_line_before_the_json():
    result = measure_gpu.measure_one("gpu_bw", planned("gpu_bw"),
                                     run=run_with(0, fixture("nvbandwidth-v0.2-8x4090-ce.txt")))
    assert result["status"] == "ok" and len(result["gpus"]) == 8 and result["pairs"] == []
    assert result["gpus"]["0"] == {"name": "NVIDIA GeForce RTX 4090", "bus_id": None, "h2d_gbs": 25.5, "d2h_gbs": 26.77}
    result = measure_gpu.measure_one("gpu_bw", planned("gpu_bw"),
                                     run=run_with(0, "WARNING: a note\n" + fixture("nvbandwidth-json-2gpu.json")))
    assert result["status"] == "ok" and result["gpus"]["1"]["h2d_gbs"] == 55.4


def test_gpu_bw_pairs_alone_and_the_bus_id_of_a_text_device_line():
    result = measure_gpu.measure_one("gpu_bw", planned("gpu_bw"),
                                     run=run_with(0, fixture("nvbandwidth-v0.8-6xa6000-d2d-read.txt")))
    assert result["status"] == "ok" and len(result["pairs"]) == 30 and result["gpus"] == {}
    assert all(pair["src"] != pair["dst"] and pair["gbs"] > 0 for pair in result["pairs"])
    result = measure_gpu.measure_one("gpu_bw", planned("gpu_bw"),
                                     run=run_with(0, fixture("nvbandwidth-v0.8-a100-h2d-sm.txt")))
    # the SM testcase is not one of the three run: no figure, and the reason names what it saw
    assert_no_figure("gpu_bw", result)
    assert "host_to_device_memcpy_sm: passed" in result["reason"]
    assert result["gpus"]["0"]["bus_id"] == "0000:99:00.0" and result["version"] == "v0.8"


def test_dcgm_diag_that_failed_a_test_exits_non_zero_and_is_still_read():
    result = measure_gpu.measure_one("dcgm_diag", planned("dcgm_diag", level=2),
                                     run=run_with(226, fixture("dcgm-diag-v4-r2-memory-fail.json")))
    assert set(result) == KEYS["dcgm_diag"] and result["status"] == "ok" and result["level"] == 2
    assert result["overall"] == "fail" and result["entities"] == {"GPU 0": "pass", "GPU 1": "fail"}
    assert result["failed"] == ["memory on GPU 1: Couldn't allocate at least 75.0% of GPU memory on GPU 1"]
    assert result["reason"] == "dcgmi exited 226 after printing its result"
    assert result["command"] == "/opt/bin/dcgmi diag -r 2 -j"


@pytest.mark.parametrize("name, overall", [("dcgm-diag-v3-r3-t400-skip.json", "skip"),
                                           ("dcgm-diag-v3-r1-fail.json", "fail"),
                                           ("dcgm-diag-v3.1-r3-gpu-ids.json", "pass")])
def test_dcgm_diag_v3_layouts(name, overall):
    result = measure_gpu.measure_one("dcgm_diag", planned("dcgm_diag"), run=run_with(0, fixture(name)))
    assert result["status"] == "ok" and result["overall"] == overall and result["reason"] is None


def test_dcgm_diag_runtime_error_is_unknown_with_dcgms_message():
    result = measure_gpu.measure_one("dcgm_diag", planned("dcgm_diag"),
                                     run=run_with(1, fixture("dcgm-diag-v4-runtime-error.json")))
    assert_no_figure("dcgm_diag", result)
    assert result["reason"].startswith("dcgmi exited 1: dcgmi diag could not run")


def test_dcgm_health():
    result = measure_gpu.measure_one("dcgm_health", planned("dcgm_health"),
                                     run=run_with(0, fixture("dcgm-health-pcie-warning.json")))
    assert set(result) == KEYS["dcgm_health"] and result["status"] == "ok" and result["overall"] == "warning"
    assert result["entities"]["GPU 0"]["systems"]["PCIe system"]["health"] == "warning"
    healthy = measure_gpu.measure_one("dcgm_health", planned("dcgm_health"),
                                      run=run_with(0, fixture("dcgm-health-healthy.json")))
    assert healthy["status"] == "ok" and healthy["overall"] == "healthy" and healthy["entities"] == {}
    off = measure_gpu.measure_one("dcgm_health", planned("dcgm_health"),
                                  run=run_with(0, fixture("dcgm-health-watches-off.txt")))
    assert_no_figure("dcgm_health", off)
    assert "Health watches not enabled" in off["reason"]


def test_nccl():
    result = measure_gpu.measure_one("nccl", planned("nccl", gpus=2),
                                     run=run_with(0, fixture("nccl-all-reduce-gb10-2rank.txt")))
    assert result == {"status": "ok", "reason": None, "command": "/opt/bin/all_reduce_perf -b 8M -e 1G -f 2 -g 2",
                      "seconds": result["seconds"], "gpus": 2, "avg_busbw_gbs": 0.65375, "max_busbw_gbs": 1.01,
                      "out_of_bounds": 0, "out_of_bounds_ok": True, "wrong": [], "checked": True, "exit_status": 0,
                      "wrong_column": "#wrong"}
    cut = measure_gpu.measure_one("nccl", planned("nccl"), run=run_with(0, fixture("nccl-all-reduce-gb10-2rank-cut.txt")))
    assert_no_figure("nccl", cut)
    assert "cut short" in cut["reason"] and cut["gpus"] == 2


# -- what goes wrong ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("outcome, reason", [
    ((0, "Segmentation fault\nmore\n", None), "Segmentation fault"),
    ((1, "cudaErrorNoDevice: no CUDA-capable device is detected\n", None), "exited 1: cudaErrorNoDevice"),
    ((1, "", None), "exited 1: no output"),
    ((None, "partial\n", "tool did not finish within 7 s: killed with its process group"), "killed"),
    ((None, "", "cannot run /opt/bin/tool: Permission denied"), "cannot run"),
])
def test_a_bad_run_is_unknown_with_a_one_line_reason(name, outcome, reason):
    result = measure_gpu.measure_one(name, planned(name), run=run_with(*outcome))
    assert_no_figure(name, result)
    assert reason in result["reason"] or (reason == "Segmentation fault" and "Segmentation fault" in result["reason"])


@pytest.mark.parametrize("name, good", [("gpu_bw", "nvbandwidth-json-2gpu.json"),
                                        ("dcgm_diag", "dcgm-diag-v4-r2-memory-fail.json"),
                                        ("dcgm_health", "dcgm-health-pcie-warning.json"),
                                        ("nccl", "nccl-all-reduce-gb10-2rank.txt")])
def test_a_hang_gives_no_figure_even_after_good_output(name, good):
    result = measure_gpu.measure_one(name, planned(name), run=run_with(None, fixture(good), "killed at 7 s"))
    assert_no_figure(name, result)
    assert result["reason"] == "killed at 7 s" and result["seconds"] is not None


@pytest.mark.parametrize("name", ALL)
def test_a_runner_that_raises_is_unknown(name):
    def run(argv, timeout_s, env=None):
        raise ValueError("boom")

    result = measure_gpu.measure_one(name, planned(name), run=run)
    assert_no_figure(name, result)
    assert "could not be run: boom" in result["reason"]


HOSTILE = ["", "\x00\x01", "{", "[]", "{}", '{"nvbandwidth": []}', '{"DCGM Diagnostic": {"test_categories": [1]}}',
           '{"body": {"Overall Health": 3}}', "# size count type redop root time algbw busbw\n8 2 float sum -1 x y z\n",
           "[" * 100000, "\xff\xfe garbage", '{"nvbandwidth": {"testcases": [{"name": "x", "bandwidth_matrix": [[1]]}]}}']


@pytest.mark.parametrize("name", ALL)
@pytest.mark.parametrize("rc", [0, 3])
def test_hostile_output_never_raises_and_never_gives_a_figure(name, rc):
    for text in HOSTILE:
        result = measure_gpu.measure_one(name, planned(name), run=run_with(rc, text))
        assert_no_figure(name, result)


@pytest.mark.parametrize("name, good", [("gpu_bw", "nvbandwidth-json-2gpu.json"),
                                        ("dcgm_diag", "dcgm-diag-v4-r2-memory-fail.json"),
                                        ("dcgm_health", "dcgm-health-pcie-warning.json"),
                                        ("nccl", "nccl-all-reduce-gb10-2rank.txt")])
def test_every_truncation_keeps_the_shape(name, good):
    text = fixture(good)
    for cut in range(0, len(text), max(1, len(text) // 97)):
        result = measure_gpu.measure_one(name, planned(name), run=run_with(0, text[:cut]))
        assert set(result) == KEYS[name] and result["status"] in ("ok", "unknown")
        if result["status"] == "unknown":
            assert_no_figure(name, result)


def test_a_plan_entry_missing_keys_does_not_raise():
    result = measure_gpu.measure_one("nccl", {})
    assert_no_figure("nccl", result)
    assert measure_gpu.measure_gpu({}) == {}


# -- the reason of a failed run quotes the line that says what failed (issue 36 item 6) ----------------------

def test_an_nvbandwidth_data_check_abort_names_the_check_not_the_banner():
    result = measure_gpu.measure_one("gpu_bw", planned("gpu_bw"),
                                     run=run_with(134, fixture("nvbandwidth-v0.7-8xa100-pattern-assert.txt")))
    assert_no_figure("gpu_bw", result)
    assert result["reason"].startswith("nvbandwidth exited 134: Invalid value when checking the pattern at "
                                       "0x70a640000000"), result["reason"]
    assert "nvbandwidth Version" not in result["reason"]


def test_an_nccl_failure_names_the_failing_call():
    result = measure_gpu.measure_one("nccl", planned("nccl", gpus=2),
                                     run=run_with(2, fixture("nccl-all-reduce-2x3090-nccl-failure.txt")))
    assert_no_figure("nccl", result)
    assert result["reason"] == ("all_reduce_perf exited 2: ArchLinux: Test NCCL failure all_reduce.cu:44 "
                                "'unhandled cuda error / '"), result["reason"]


@pytest.mark.parametrize("text, line", [
    ("nvbandwidth Version: v0.7\n\nRunning x.\n Invalid value  when checking\nASSERT in y\n", "Invalid value when checking"),
    ("first line\nsecond line\n", "first line"),
    ("", "no output"),
    ("\n\n  \n", "no output"),
    (b"\x00binary", "binary output (NUL bytes), not the tool's text"),
    ("x" * 9000 + "\nCUDA error: out of memory\n", "CUDA error: out of memory"),
    ("dcgmi: the diagnostic failed to start\n", "dcgmi: the diagnostic failed to start"),
])
def test_failure_line(text, line):
    from ansible_collections.gpuhost.baseline.plugins.module_utils.measure import measure  # pylint: disable=import-outside-toplevel

    got = measure.failure_line(text)
    assert got == line and len(got) <= 200 and "\n" not in got
