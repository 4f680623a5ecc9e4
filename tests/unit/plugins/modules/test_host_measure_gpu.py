"""host_measure's GPU measurements end to end (issue 23): the module's own code (``check_params`` and
``gather``, what ``main`` runs between AnsibleModule's parsing and ``exit_json``) with the real runner on
fake tools, small shell scripts in a tmp directory that print the recorded outputs of
tests/fixtures/measure/, print garbage, exit 1, or sleep past their timeout, on a fake GPU host (an
injected ``/proc/driver/nvidia/gpus``). ansible-playbook runs the module once in
tests/integration/test_host_measure.py. About 2 s (one run killed at its 1 s timeout)."""
import os
import shutil
import time

import pytest

from helpers.gpu_host import gpu_host

from ansible_collections.gpuhost.baseline.plugins.modules import host_measure

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "fixtures", "measure")
GPU = ["gpu_bw", "dcgm_diag", "dcgm_health", "nccl"]


def params(**overrides):
    values = dict((name, spec.get("default")) for name, spec in host_measure.ARGUMENT_SPEC.items())
    values["measurements"] = list(GPU)
    values.update(overrides)
    assert host_measure.check_params(values) is None
    return values


def fake_tools(tmp_path, scripts):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name, body in scripts.items():
        (bindir / name).write_text("#!/bin/sh\necho \"$0 $*\" >> %s/ran\n%s\n" % (tmp_path, body))
        (bindir / name).chmod(0o755)
    return lambda name: shutil.which(name, path=str(bindir))


def cat(name):
    return "cat '%s'" % os.path.join(FIXTURES, name)


RECORDED = {
    # nvbandwidth and all_reduce_perf print their output only when CUDA numbers the GPUs in bus order
    "nvbandwidth": '[ "$CUDA_DEVICE_ORDER" = PCI_BUS_ID ] || { echo "CUDA_DEVICE_ORDER unset"; exit 2; }\n'
                   + cat("nvbandwidth-json-2gpu.json"),
    "dcgmi": 'case "$1" in\n diag) %s; exit 226;;\n health) %s;;\n *) exit 9;;\nesac'
             % (cat("dcgm-diag-v4-r2-memory-fail.json"), cat("dcgm-health-pcie-warning.json")),
    "all_reduce_perf": '[ "$CUDA_DEVICE_ORDER" = PCI_BUS_ID ] || exit 2\n[ "$7 $8" = "-g 2" ] || exit 3\n'
                       + cat("nccl-all-reduce-gb10-2rank.txt"),
}


def test_figures_from_the_recorded_outputs(tmp_path):
    gpus_dir, dev = gpu_host(tmp_path)
    which = fake_tools(tmp_path, RECORDED)
    result = host_measure.gather(params(dcgm_diag_level=2), which, False, gpus_dir=gpus_dir, dev=dev)
    bw = result["gpu_bw"]
    assert bw["status"] == "ok" and bw["reason"] is None and bw["version"] == "v0.8", bw
    assert bw["gpus"]["0"]["h2d_gbs"] == 55.6 and bw["gpus"]["1"]["d2h_gbs"] == 55.3
    assert bw["gpus"]["1"]["bus_id"] == "0000:2a:00.0" and bw["pairs"][0] == {"src": "0", "dst": "1", "gbs": 389.1}
    assert bw["command"].endswith("nvbandwidth -j -t host_to_device_memcpy_ce device_to_host_memcpy_ce "
                                  "device_to_device_memcpy_read_ce") and bw["seconds"] >= 0
    diag = result["dcgm_diag"]
    assert diag["status"] == "ok" and diag["overall"] == "fail" and diag["level"] == 2, diag
    assert "exited 226" in diag["reason"] and diag["failed"][0].startswith("memory on GPU 1")
    assert diag["command"].endswith("dcgmi diag -r 2 -j")
    health = result["dcgm_health"]
    assert health["status"] == "ok" and health["overall"] == "warning" and "GPU 0" in health["entities"]
    nccl = result["nccl"]
    assert nccl["status"] == "ok" and nccl["gpus"] == 2 and nccl["avg_busbw_gbs"] == 0.65375, nccl
    assert nccl["max_busbw_gbs"] == 1.01 and nccl["out_of_bounds"] == 0
    assert "cpu_freq" not in result and "mem_bw" not in result
    assert len((tmp_path / "ran").read_text().splitlines()) == 4


def test_garbage_a_failing_tool_and_a_hang(tmp_path):
    gpus_dir, dev = gpu_host(tmp_path)
    which = fake_tools(tmp_path, {
        "nvbandwidth": "echo 'Segmentation fault (core dumped)'; head -c 300 /dev/urandom | tr -d '\\000'",
        "dcgmi": "echo 'Error: unable to establish a connection to the specified host: localhost' >&2; exit 1",
        "all_reduce_perf": "sleep 30 &\necho $! > %s/child.pid\nwait" % tmp_path,
    })
    began = time.monotonic()
    result = host_measure.gather(params(nccl_timeout_s=1), which, False, gpus_dir=gpus_dir, dev=dev)
    assert time.monotonic() - began < 15
    bw = result["gpu_bw"]
    assert bw["status"] == "unknown" and "not nvbandwidth output" in bw["reason"] and bw["gpus"] == {}
    for name in ("dcgm_diag", "dcgm_health"):
        assert result[name]["status"] == "unknown" and result[name]["overall"] is None
        assert result[name]["reason"] == "dcgmi exited 1: Error: unable to establish a connection to the " \
                                         "specified host: localhost"
    nccl = result["nccl"]
    assert nccl["status"] == "unknown" and nccl["avg_busbw_gbs"] is None
    assert nccl["reason"] == "all_reduce_perf did not finish within 1 s: killed with its process group"
    assert 1 <= nccl["seconds"] < 10
    child = int((tmp_path / "child.pid").read_text())
    for dummy in range(50):
        if not os.path.exists("/proc/%d" % child):
            break
        time.sleep(0.1)
    assert not os.path.exists("/proc/%d" % child), "the hanging tool's child survived"
    for entry in (result[name] for name in GPU):
        assert "\n" not in entry["reason"]


def test_a_missing_tool_is_unknown_naming_it(tmp_path):
    gpus_dir, dev = gpu_host(tmp_path)
    which = fake_tools(tmp_path, {"dcgmi": "%s" % cat("dcgm-health-healthy.json")})
    result = host_measure.gather(params(measurements=["gpu_bw", "dcgm_health", "nccl"]), which, False,
                                 gpus_dir=gpus_dir, dev=dev)
    assert result["gpu_bw"]["status"] == "unknown" and result["gpu_bw"]["reason"].startswith(
        "nvbandwidth not found in PATH (build it from https://github.com/NVIDIA/nvbandwidth")
    assert result["nccl"]["status"] == "unknown" and result["nccl"]["reason"].startswith(
        "all_reduce_perf not found in PATH (")
    assert result["gpu_bw"]["command"] is None and result["nccl"]["seconds"] is None
    assert result["dcgm_health"]["status"] == "ok" and result["dcgm_health"]["overall"] == "healthy"
    assert "dcgm_diag" not in result and "dcgm_diag" not in result["plan"]


def test_no_gpu_runs_nothing(tmp_path):
    which = fake_tools(tmp_path, RECORDED)
    result = host_measure.gather(params(), which, False, gpus_dir=str(tmp_path / "absent"),
                                 dev=str(tmp_path / "nvidia0"))
    for name in GPU:
        assert result[name]["status"] == "unknown" and result[name]["seconds"] is None
        assert result[name]["reason"].startswith("no NVIDIA GPU on this host (")
        assert result["plan"][name]["command"] is None
    assert not (tmp_path / "ran").exists()


def test_check_mode_plans_the_commands_and_runs_nothing(tmp_path):
    gpus_dir, dev = gpu_host(tmp_path, 8)
    which = fake_tools(tmp_path, dict((name, body) for name, body in RECORDED.items() if name != "nvbandwidth"))
    result = host_measure.gather(params(dcgm_diag_level=3, dcgm_diag_timeout_s=7200), which, True,
                                 gpus_dir=gpus_dir, dev=dev)
    plan = result["plan"]
    assert set(result) == {"plan", "msg"} and not (tmp_path / "ran").exists()
    assert plan["gpu_bw"]["status"] == "unknown" and "nvbandwidth not found" in plan["gpu_bw"]["reason"]
    assert plan["dcgm_diag"]["command"].endswith("dcgmi diag -r 3 -j") and plan["dcgm_diag"]["timeout_s"] == 7200
    assert plan["dcgm_health"]["command"].endswith("dcgmi health -c -j")
    assert plan["nccl"]["command"].endswith("all_reduce_perf -b 8M -e 1G -f 2 -g 8") and plan["nccl"]["gpus"] == 8
    assert plan["nccl"]["env"] == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"} and "argv" not in plan["nccl"]


def test_mem_cross_reaches_the_plan(tmp_path):
    which = fake_tools(tmp_path, {"mbw": "exit 0", "numactl": "exit 0"})
    for cross in (True, False):
        plan = host_measure.gather(params(measurements=["mem_bw"], mem_tools=["mbw"], mem_cross=cross), which,
                                   True)["plan"]
        assert plan["mem_bw"]["tool"] == "mbw" and isinstance(plan["mem_bw"]["cross_commands"], list)
        if not cross:
            assert plan["mem_bw"]["cross_commands"] == []


@pytest.mark.parametrize("option, value", [("gpu_bw_timeout_s", 0), ("dcgm_diag_timeout_s", -5),
                                           ("nccl_timeout_s", 4 * 3600 + 1), ("dcgm_health_timeout_s", 0)])
def test_gpu_timeouts_are_bounded(option, value):
    values = dict((name, spec.get("default")) for name, spec in host_measure.ARGUMENT_SPEC.items())
    values[option] = value
    assert host_measure.check_params(values).startswith("%s must be 1 to 14400" % option)


def test_the_defaults():
    spec = host_measure.ARGUMENT_SPEC
    assert spec["measurements"]["default"] == ["cpu_freq", "mem_bw", "gpu_bw", "dcgm_diag", "dcgm_health", "nccl"]
    assert [spec["%s_timeout_s" % name]["default"] for name in GPU] == [300, 600, 60, 300]
    assert spec["dcgm_diag_level"] == {"type": "int", "choices": [1, 2, 3], "default": 1}
    assert spec["mem_cross"] == {"type": "bool", "default": True}


@pytest.mark.parametrize("value", [-1, 8193, 10 ** 6])
def test_max_cpus_is_bounded(value):
    """One worker process per CPU loaded: max_cpus is 0 (all) to 8192, the module refuses the rest."""
    values = dict((name, spec.get("default")) for name, spec in host_measure.ARGUMENT_SPEC.items())
    values["max_cpus"] = value
    assert host_measure.check_params(values).startswith("max_cpus must be 0 (all) to 8192")
