"""host_measure's site workloads end to end (issue 39 item 2, VAL-012): the module's own code (``check_params``
and ``gather``) with the real runner on a small stand-in benchmark, tests/fixtures/workload/fake_bench.py,
which prints ``throughput: 123.4 tok/s`` or JSON, hangs with a child, prints garbage, exits non-zero or floods
its output; then the figure judged against its floor by the one judge (derive_validation and VAL-012). About
4 s (one run killed at its 1 s timeout, one at its output cap)."""
import os
import shutil
import sys
import time

import pytest

from helpers import baseline_facts

from ansible_collections.gpuhost.baseline.plugins.modules import host_measure
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge import evaluation
from ansible_collections.gpuhost.baseline.plugins.module_utils.measure import measure_workload

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "fixtures", "workload",
                     "fake_bench.py")
PATTERN = r"^throughput: (?P<value>\S+) tok/s"


def params(*workloads):
    values = dict((name, spec.get("default")) for name, spec in host_measure.ARGUMENT_SPEC.items())
    values["measurements"] = []
    values["workloads"] = [dict({"timeout": 20, "unit": "tok/s", "env": {}, "pattern": None, "path": None}, **w)
                           for w in workloads]
    assert host_measure.check_params(values) is None
    return values


def bench(name, *args, **kwargs):
    spec = {"name": name, "argv": [sys.executable, BENCH] + list(args), "parser": "regex", "pattern": PATTERN,
            "floor": 100.0}
    spec.update(kwargs)
    return spec


def run(*workloads):
    result = host_measure.gather(params(*workloads), shutil.which, False)
    return dict((entry["name"], entry) for entry in result["workloads"])


def test_a_figure_above_its_floor_and_one_below():
    out = run(bench("above"), bench("below", floor=200.0), bench("json", "--json", "--figure", "118.88",
                                                                 parser="json", path="[0].avg_ts", pattern=None))
    assert out["above"]["status"] == "ok" and out["above"]["value"] == 123.4 and out["above"]["reason"] is None
    assert out["above"]["how"] == "regex %r, the one matching line" % PATTERN
    assert out["above"]["exit_status"] == 0 and out["above"]["unit"] == "tok/s" and out["above"]["floor"] == 100.0
    assert out["below"]["value"] == 123.4 and out["below"]["floor"] == 200.0
    assert out["json"]["value"] == 118.88 and out["json"]["how"] == "json path [0].avg_ts"


def _alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_a_hang_is_killed_with_its_process_group(tmp_path):
    pidfile = tmp_path / "pids"
    began = time.monotonic()
    out = run(bench("hang", "--hang", "--pidfile", str(pidfile), timeout=1))
    assert time.monotonic() - began < 8
    entry = out["hang"]
    assert entry["status"] == "unknown" and entry["value"] is None
    assert entry["reason"] == "killed after 1 s (its timeout), with its process group"
    pids = [int(pid) for pid in pidfile.read_text().split()]
    assert len(pids) == 2
    deadline = time.monotonic() + 3
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in pids if _alive(pid)], "the benchmark or its child outlived the timeout"


def test_garbage_nonzero_exit_flood_and_missing_program():
    out = run(bench("garbage", "--garbage"), bench("fail", "--fail", "3"),
              bench("flood", "--flood"),
              {"name": "missing", "argv": ["no-such-benchmark-here"], "parser": "regex", "pattern": PATTERN,
               "floor": 1.0})
    assert out["garbage"]["status"] == "unknown" and out["garbage"]["value"] is None
    assert out["garbage"]["reason"] == (
        "no line matched the pattern %r; the output began: fake_bench 1.0 warming up | "
        "?[31mno figure here?[0m: segments 7, ok" % PATTERN)
    # the last non-empty line of stderr, not the first
    assert out["fail"]["reason"] == "exited 3: RuntimeError: CUDA out of memory (fake)"
    assert out["fail"]["exit_status"] == 3
    assert out["flood"]["reason"] == ("wrote more than %d bytes to stdout: killed with its process group, "
                                      "no figure read" % measure_workload.OUTPUT_CAP)
    assert out["missing"]["reason"] == "no-such-benchmark-here not found in PATH or not executable"
    assert out["missing"]["command"] is None and out["missing"]["seconds"] is None


def test_check_mode_plans_and_runs_nothing(tmp_path):
    pidfile = tmp_path / "pids"
    result = host_measure.gather(params(bench("hang", "--hang", "--pidfile", str(pidfile), timeout=1)),
                                 shutil.which, True)
    assert "workloads" not in result and not pidfile.exists()
    planned = result["plan"]["workloads"][0]
    assert planned["status"] == "ok" and planned["timeout_s"] == 1 and planned["parser"] == "regex"
    assert planned["command"].startswith(sys.executable) and "argv" not in planned


@pytest.mark.parametrize("workload, message", [
    ({"name": "x", "argv": ["x"], "parser": "regex", "pattern": r"(\d+)", "floor": 1.0}, "no named group value"),
    ({"name": "x", "argv": ["x"], "parser": "json", "path": None, "floor": 1.0}, "needs a path"),
    ({"name": "x", "argv": ["x"], "parser": "regex", "pattern": PATTERN, "floor": 1.0, "timeout": 0}, "timeout must"),
])
def test_a_bad_definition_is_that_workloads_unknown_and_the_others_run(workload, message):
    values = dict((name, spec.get("default")) for name, spec in host_measure.ARGUMENT_SPEC.items())
    values["measurements"] = []
    values["workloads"] = [dict({"timeout": 20, "unit": "", "env": {}, "pattern": None, "path": None}, **workload),
                           dict(bench("good"), timeout=20, unit="tok/s", env={}, path=None)]
    assert host_measure.check_params(values) is None
    result = host_measure.gather(values, shutil.which, False)
    bad, good = result["workloads"]
    assert bad["status"] == "unknown" and message in bad["reason"] and bad["command"] is None
    assert good["status"] == "ok" and good["value"] == 123.4
    assert message in host_measure.gather(values, shutil.which, True)["plan"]["workloads"][0]["reason"]
    # a name given twice fails the module: each name is its finding's subject
    values["workloads"] = [values["workloads"][0], values["workloads"][0]]
    values["workloads"][0] = dict(values["workloads"][0], pattern=PATTERN, parser="regex", timeout=5)
    values["workloads"][1] = values["workloads"][0]
    assert "defined twice" in host_measure.check_params(values)


def test_the_figures_judged_against_their_floors():
    """VAL-012 per workload: pass at or above the floor, fail below, unknown with the module's reason."""
    measured = run(bench("above"), bench("below", floor=200.0), bench("garbage", "--garbage"),
                   bench("slow", floor=100.0, lower_is_better=True), bench("quick", floor=200.0, lower_is_better=True))
    facts = baseline_facts.healthy_facts()
    facts["measure"]["workloads"] = [measured[name] for name in ("above", "below", "garbage", "slow", "quick")]
    result = evaluation.evaluate(facts, profile="amd-epyc-nvidia", params={"smt": "on"}, host="gpu01",
                                 today="2026-06-01")
    findings = dict((f["subject"], f) for f in result["findings"] if f["id"] == "VAL-012")
    assert findings["above"]["status"] == "pass" and findings["above"]["observed"] == 123.4
    assert findings["above"]["expected"] == 100.0
    assert findings["below"]["status"] == "fail"
    assert findings["below"]["message"] == (
        "site workload figure 123.4 < 200 on below (123.4 tok/s, floor 200 tok/s, read with regex %r, the one "
        "matching line)" % PATTERN)
    assert findings["garbage"]["status"] == "unknown" and "no line matched" in findings["garbage"]["message"]
    lower = dict((f["subject"], f["status"]) for f in result["findings"] if f["id"] == "VAL-013")
    assert lower == {"slow": "fail", "quick": "pass"}


def test_the_modules_deadline_ends_a_workload_before_its_own_timeout(tmp_path):
    """deadline_s (the validate task's timeout less a margin) bounds a workload as every other tool run."""
    from ansible_collections.gpuhost.baseline.plugins.module_utils.host import runner  # pylint: disable=import-outside-toplevel
    pidfile = tmp_path / "pids"
    runner.set_deadline(2, "the module's deadline (deadline_s 2)")
    try:
        began = time.monotonic()
        out = run(bench("hang", "--hang", "--pidfile", str(pidfile), timeout=60), bench("after"))
    finally:
        runner.set_deadline(0)
    assert time.monotonic() - began < 10
    assert out["hang"]["status"] == "unknown"
    assert "was still running at the module's deadline (deadline_s 2)" in out["hang"]["reason"]
    assert out["after"]["status"] == "unknown" and "not run: the module's deadline" in out["after"]["reason"]


def test_repeats_run_every_measurement_again_and_keep_each_run():
    """gpuhost_prove's noise: repeats 3 gives three runs, the module's own keys being the last one's."""
    values = params(bench("above"))
    values["repeats"] = 3
    result = host_measure.gather(values, shutil.which, False)
    assert len(result["runs"]) == 3
    assert [run["workloads"][0]["value"] for run in result["runs"]] == [123.4] * 3
    assert result["workloads"] == result["runs"][-1]["workloads"]
    values["repeats"] = 1
    assert "runs" not in host_measure.gather(values, shutil.which, False)
    for wrong in (0, 11):
        values["repeats"] = wrong
        assert host_measure.check_params(values) == "repeats must be 1 to 10, not %d" % wrong
    values["repeats"] = 3
    assert "runs" not in host_measure.gather(values, shutil.which, True)  # check mode runs nothing
