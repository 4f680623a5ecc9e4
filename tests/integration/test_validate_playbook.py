"""playbooks/validate.yml for real on this machine (issue 23, docs/validation.md).

One inventory, two runs of the playbook (a module-scoped set-up shared by the tests):

* ``localhost`` (local connection, no become: the CI machine is root anyway) measured for real: the CPU clock
  under 1 s of load and memory bandwidth with the distribution's ``mbw`` (in the Makefile's
  DEB_TEST_PACKAGES). Its VAL findings carry the figures, the drift history keeps them, the console
  has its progress lines. This machine has no NVIDIA GPU: the GPU measurements are asked for and say so,
  and their rules are not applicable (the GPU runner with recorded outputs is tested in
  tests/unit/plugins/modules/test_host_measure_gpu.py);
* ``gpu-busy``, a copy of the incident snapshot whose nvidia-smi lists a compute process: the maintenance
  guard measures nothing there and the report says why;
* ``gpu-snap``, the healthy snapshot: a snapshot is never measured (validate measures live hosts).

The second run is ``--check``: it prints what each host would run, runs nothing, and judges no figure.
``localhost`` also runs the site's workloads of :data:`WORKLOADS` (VAL-012, one finding each: pass, fail and
unknown). About 25 s.
"""
import json
import os
import sys

import pytest

from helpers.fixhost import copy_tree
from helpers.report_file import load_report
from helpers.runner import run_playbook, stdout_of

BUSY = ("<processes>\n<process_info><gpu_instance_id>N/A</gpu_instance_id><compute_instance_id>N/A"
        "</compute_instance_id><pid>4343</pid><type>C</type><process_name>vllm</process_name>"
        "<used_memory>81000 MiB</used_memory></process_info>\n")
BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "workload", "fake_bench.py")
PATTERN = r"^throughput: (?P<value>\S+) tok/s"
#: the site's workloads (VAL-012), the stand-in benchmark of tests/fixtures/workload/: above its floor, below
#: it (JSON), and garbage; and one lower-is-better figure below its limit (VAL-013)
WORKLOADS = [
    {"name": "bench-pass", "argv": [sys.executable, BENCH], "timeout": 30, "parser": "regex", "pattern": PATTERN,
     "unit": "tok/s", "floor": 100},
    {"name": "bench-json-fail", "argv": [sys.executable, BENCH, "--json", "--figure", "61.5"], "timeout": 30,
     "parser": "json", "path": "[0].avg_ts", "unit": "tok/s", "floor": 100.5},
    {"name": "bench-garbage", "argv": [sys.executable, BENCH, "--garbage"], "timeout": 30, "parser": "regex",
     "pattern": PATTERN, "unit": "tok/s", "floor": 1},
    {"name": "bench-latency", "argv": [sys.executable, BENCH, "--figure", "71.02"], "timeout": 30, "parser": "regex",
     "pattern": PATTERN, "unit": "ms", "floor": 80, "lower_is_better": True},
]
MEASURE = {"gpuhost_validate_measurements": ["cpu_freq", "mem_bw", "gpu_bw", "dcgm_diag", "dcgm_health", "nccl"],
           "gpuhost_validate_mem_tools": ["mbw"], "gpuhost_validate_duration_s": 1,
           "gpuhost_validate_workloads": WORKLOADS}


def _inventory(snapshot_trees, tmp_path):
    busy = copy_tree(snapshot_trees["incident"], tmp_path / "busy")
    xml = os.path.join(busy, "commands", "nvidia-smi-q.xml")
    with open(xml) as handle:
        text = handle.read()
    with open(xml, "w") as handle:
        handle.write(text.replace("<processes>\n", BUSY, 1))
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    return {"all": {"hosts": {
        "localhost": dict(local, gpuhost_become=False),
        "gpu-busy": dict(local, gpuhost_root=busy),
        "gpu-snap": dict(local, gpuhost_root=snapshot_trees["healthy"]),
    }}}


@pytest.fixture(scope="module")
def runs(snapshot_trees, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("validate")
    hosts = _inventory(snapshot_trees, tmp_path)
    out = {}
    for name, cmdline in (("real", None), ("check", "--check")):
        extravars = dict(MEASURE, gpuhost_report_dir=str(tmp_path / name / "r"),
                         gpuhost_history_dir=str(tmp_path / name / "h"))
        runner = run_playbook(tmp_path, "validate.yml", hosts, extravars=extravars, cmdline=cmdline)
        out[name] = (runner, tmp_path / name)
    return out


def _host(where, host):
    return load_report(os.path.join(str(where), "r", "report.json"))["hosts"][host]


def _val(part, rule=None):
    return [f for f in part["findings"] if f["id"].startswith("VAL-") and (rule is None or f["id"] == rule)]


def test_localhost_is_measured_and_judged_with_its_figures(runs):
    runner, where = runs["real"]
    assert runner.rc == 0, stdout_of(runner)
    part = _host(where, "localhost")
    assert part["state"] == "audited"
    clocks = _val(part, "VAL-001")
    assert clocks and all(f["subject"].startswith("cpu") for f in clocks)
    for finding in clocks:
        if finding["status"] == "unknown":  # a VM guest without cpufreq: no rated clock to compare with
            assert "no rated clock" in finding["message"] and "MHz under load" in finding["message"]
        else:
            assert isinstance(finding["observed"], float) and "MHz under load of" in finding["message"]
    memory = _val(part, "VAL-003")
    assert memory and all(f["status"] == "pass" and f["observed"] > 0 for f in memory)
    assert all("MB/s with mbw" in f["message"] for f in memory)
    # no GPU here: asked for, not run, and the GPU rules do not apply
    for rule in ("VAL-005", "VAL-006", "VAL-007", "VAL-008", "VAL-009", "VAL-010", "VAL-011"):
        assert [f["status"] for f in _val(part, rule)] == ["not_applicable"], rule


def test_the_site_workloads_are_judged_against_their_floors(runs):
    dummy, where = runs["real"]
    findings = dict((f["subject"], f) for f in _val(_host(where, "localhost"), "VAL-012"))
    assert sorted(findings) == ["bench-garbage", "bench-json-fail", "bench-pass"]
    passed, failed, unknown = findings["bench-pass"], findings["bench-json-fail"], findings["bench-garbage"]
    assert (passed["status"], passed["observed"], passed["expected"]) == ("pass", 123.4, 100.0)
    assert "123.4 tok/s, floor 100 tok/s, read with regex" in passed["message"]
    assert (failed["status"], failed["observed"], failed["expected"]) == ("fail", 61.5, 100.5)
    assert "61.5 tok/s, floor 100.5 tok/s, read with json path [0].avg_ts" in failed["message"]
    assert unknown["status"] == "unknown" and unknown["observed"] is None
    assert "no line matched the pattern" in unknown["message"] and "no figure here" in unknown["message"]
    (latency,) = _val(_host(where, "localhost"), "VAL-013")
    assert (latency["subject"], latency["status"], latency["observed"], latency["expected"]) == (
        "bench-latency", "pass", 71.0, 80.0)
    assert "71 ms, at most 80 ms" in latency["message"]
    for host in ("gpu-busy", "gpu-snap"):  # the guards: not measured, so not applicable
        for rule in ("VAL-012", "VAL-013"):
            assert [f["status"] for f in _val(_host(where, host), rule)] == ["not_applicable"]


def test_the_history_keeps_the_figures(runs):
    dummy, where = runs["real"]
    with open(os.path.join(str(where), "h", "localhost.jsonl")) as handle:
        (record,) = [json.loads(line) for line in handle if line.strip()]
    figures = [row for row in record["findings"] if row[0] == "VAL-003"]
    assert figures and all(isinstance(row[3], float) and row[3] > 0 for row in figures)


def test_a_progress_line_per_host_says_what_runs_and_what_came_out(runs):
    runner, dummy = runs["real"]
    out = stdout_of(runner)
    assert "localhost: measuring cpu_freq, mem_bw, gpu_bw, dcgm_diag, dcgm_health, nccl" in out
    assert "localhost: cpu_freq ok; mem_bw ok; gpu_bw unknown (no NVIDIA GPU on this host" in " ".join(out.split())
    assert "workloads bench-pass, bench-json-fail, bench-garbage, bench-latency" in " ".join(out.split())
    assert "workload bench-pass ok (123.4 tok/s); workload bench-json-fail ok (61.5 tok/s)" in " ".join(out.split())


def test_busy_gpus_and_snapshots_are_not_measured_and_the_report_says_why(runs):
    runner, where = runs["real"]
    busy = _host(where, "gpu-busy")
    assert "not measured: GPUs are running compute work" in busy["message"] and "4343" in busy["message"]
    assert "gpuhost_force=true" in busy["message"]
    snap = _host(where, "gpu-snap")
    assert "not measured" in snap["message"] and "is a snapshot" in snap["message"]
    for part in (busy, snap):
        assert {f["status"] for f in _val(part)} == {"not_applicable"}
    assert "gpu-busy: not measured: GPUs are running compute work" in " ".join(stdout_of(runner).split())


def test_check_mode_says_what_would_run_and_runs_nothing(runs):
    runner, where = runs["check"]
    assert runner.rc == 0, stdout_of(runner)
    out = " ".join(stdout_of(runner).split())
    assert "localhost: would measure cpu_freq, mem_bw" in out
    assert "localhost would run:" in out and "mbw" in out and "fake_bench.py --json --figure 61.5" in out
    assert {f["status"] for f in _val(_host(where, "localhost"))} == {"not_applicable"}
