"""The module host_measure run for real on localhost by ansible-playbook (issue 23, docs/validation.md).

One play, three tasks, PATH led by a directory of fake tools:

* for real: the CPU clock with 1 s of load on every online CPU (at most 4) and memory bandwidth with the
  distribution's ``mbw`` (about a second; in the Makefile's DEB_TEST_PACKAGES; ``unknown`` naming it where it is
  not installed): the result's
  shape, a clock per CPU, and every worker pid gone afterwards;
* a memory tool that hangs (a fake ``sysbench`` that sleeps): killed at ``timeout_s``, ``unknown`` with the
  reason, its child gone too;
* check mode with a fake ``stress-ng`` that would leave a marker: the plan names the command and the CPUs,
  no measurement runs, no marker is written.

The first task also asks for the GPU measurements (the default) with fake ``nvbandwidth``, ``dcgmi`` and
``all_reduce_perf`` in PATH that would leave a marker: on a host without an NVIDIA GPU (CI) each is
``unknown`` saying so and none of them runs. The GPU measurements with the fake tools on a fake GPU host
are tested in tests/unit/plugins/modules/test_host_measure_gpu.py, calling the module's code without
ansible-playbook.

About 10 s (three module runs: 1 s of load, mbw, a 4 s timeout).
"""
import json
import os
import shutil
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

HANG = """#!/bin/sh
sleep 60 &
echo $! > {dir}/hang-child.pid
wait
"""
MARKER = """#!/bin/sh
touch {dir}/ran
"""
GPU_MARKER = """#!/bin/sh
touch {dir}/gpu-ran
"""
GPU_MEASUREMENTS = ("gpu_bw", "dcgm_diag", "dcgm_health", "nccl")


def host_has_gpu():
    gpus = "/proc/driver/nvidia/gpus"
    return bool(os.path.isdir(gpus) and os.listdir(gpus)) or os.path.exists("/dev/nvidia0")


def play(tmp_path):
    out = str(tmp_path / "out")
    tasks = [
        {"name": "measure for real", "register": "real",
         "gpuhost.baseline.host_measure": {"duration_s": 1, "max_cpus": 4, "mem_tools": ["mbw"], "timeout_s": 60}},
        {"name": "a memory tool that hangs", "register": "hang",
         "gpuhost.baseline.host_measure": {"measurements": ["mem_bw"], "mem_tools": ["sysbench"],
                                           "mem_duration_s": 1, "duration_s": 1, "timeout_s": 4}},
        {"name": "check mode", "register": "check", "check_mode": True,
         "gpuhost.baseline.host_measure": {"mem_tools": ["stress-ng"]}},
        {"name": "results", "ansible.builtin.copy": {
            "dest": out, "content": "{{ {'real': real, 'hang': hang, 'check': check} | to_json }}"},
         "check_mode": False},
    ]
    path = tmp_path / "play.yml"
    path.write_text(json.dumps([{"hosts": "localhost", "gather_facts": False, "tasks": tasks}]))
    return str(path), out


def test_host_measure_on_localhost(tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for name, body in (("sysbench", HANG), ("stress-ng", MARKER), ("nvbandwidth", GPU_MARKER),
                       ("dcgmi", GPU_MARKER), ("all_reduce_perf", GPU_MARKER)):
        (bindir / name).write_text(body.format(dir=tmp_path))
        (bindir / name).chmod(0o755)
    path, out = play(tmp_path)
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", ANSIBLE_RETRY_FILES_ENABLED="0",
               PATH="%s:%s" % (bindir, os.environ.get("PATH", "")))
    argv = [PLAYBOOK, "-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=%s" % sys.executable, path]
    proc = subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:]
    with open(out) as handle:
        results = json.load(handle)

    real = results["real"]
    assert real["changed"] is False
    cpu = real["cpu_freq"]
    assert cpu["status"] == "ok", cpu
    assert cpu["source"] in ("scaling_cur_freq", "/proc/cpuinfo") and cpu["samples"] >= 2
    assert 0 < len(cpu["cpus"]) <= 4 and len(cpu["workers"]) == len(cpu["cpus"])
    assert cpu["duration_s"] >= 1
    for entry in cpu["cpus"].values():
        assert entry["observed_khz"] > 0
        assert (entry["fraction"] is None) == (entry["rated_khz"] is None)
        assert entry["fraction"] is not None or entry["reason"]
    for pid in cpu["workers"]:
        assert not os.path.exists("/proc/%d" % pid), "worker %d still there" % pid
    mem = real["mem_bw"]
    assert mem["looked_for"] == ["mbw"] and mem["unit"] == "MB/s"
    if shutil.which("mbw"):
        assert mem["status"] == "ok" and mem["tool"] == "mbw", mem
        node = list(mem["nodes"].values())[0]
        assert node["bandwidth_mbs"] > 0 and "mbw" in node["command"]
        assert mem["bound"] == bool(shutil.which("numactl"))
    else:
        assert mem["status"] == "unknown" and "mbw" in mem["reason"]
    assert isinstance(mem["cross"], dict)
    assert set(real["plan"]) == {"timeout_s", "cpu_freq", "mem_bw"} | set(GPU_MEASUREMENTS)
    if not host_has_gpu():
        for name in GPU_MEASUREMENTS:
            assert real[name]["status"] == "unknown" and "no NVIDIA GPU" in real[name]["reason"], real[name]
            assert real[name]["command"] is None and real[name]["seconds"] is None
            assert real["plan"][name]["status"] == "unknown" and real["plan"][name]["command"] is None
        assert not (tmp_path / "gpu-ran").exists(), "a GPU tool ran on a host without a GPU"

    hang = results["hang"]
    assert "cpu_freq" not in hang
    node = list(hang["mem_bw"]["nodes"].values())[0]
    assert hang["mem_bw"]["status"] == "unknown" and node["status"] == "unknown" and node["bandwidth_mbs"] is None
    assert "killed with its process group" in node["reason"], node
    child = int((tmp_path / "hang-child.pid").read_text())
    for dummy in range(50):
        if not os.path.exists("/proc/%d" % child):
            break
        time.sleep(0.1)
    assert not os.path.exists("/proc/%d" % child), "the hanging tool's child survived"

    check = results["check"]
    assert check["changed"] is False and "cpu_freq" not in check and "mem_bw" not in check
    assert not set(GPU_MEASUREMENTS) & set(check) and set(GPU_MEASUREMENTS) <= set(check["plan"])
    assert check["plan"]["mem_bw"]["tool"] == "stress-ng"
    assert str(bindir / "stress-ng") in check["plan"]["mem_bw"]["commands"][0]
    assert check["plan"]["cpu_freq"]["workers"] >= 1 and check["plan"]["cpu_freq"]["duration_s"] == 3
    assert not (tmp_path / "ran").exists(), "check mode ran the tool"
