"""Measurements that need no GPU (issue 23): the parsers of stress-ng --stream, sysbench memory, mbw and
/proc/cpuinfo (measure/measure.py) on the real outputs of tests/fixtures/host_measure/ (provenance in its
README.md) and hostile variants; the CPU clock sampler (measure/measure_host.py) on a fake sysfs tree with
fake workers and a fake clock, and once with real pinned workers; the memory bandwidth runner with fake
runs (non-zero exit, garbage, a hang) and once with a real hang killed with its process group. About 3 s."""
import json
import os
import time

import pytest

from ansible_collections.gpuhost.baseline.plugins.module_utils.measure import measure, measure_host

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "fixtures", "host_measure")


def fixture(name, mode="r"):
    with open(os.path.join(FIXTURES, name), mode) as handle:
        return handle.read()


MEM_PARSERS = (measure.parse_stress_ng_stream, measure.parse_sysbench_memory, measure.parse_mbw)


# -- parsers on the real outputs ----------------------------------------------------------------------
def test_stress_ng_one_instance():
    result, error = measure.parse_stress_ng_stream(fixture("stress-ng-0.15.06-stream-1.txt"))
    assert error is None
    assert result["tool"] == "stress-ng" and result["instances"] == 1
    assert result["read_mbs"] == 4965.67 and result["write_mbs"] == 3310.44 and result["bandwidth_mbs"] == 8276.11


def test_stress_ng_two_instances_are_summed():
    result, error = measure.parse_stress_ng_stream(fixture("stress-ng-0.15.06-stream-2.txt"))
    assert error is None and result["instances"] == 2
    assert [row["instance"] for row in result["per_instance"]] == [0, 1]
    assert result["read_mbs"] == round(2825.94 + 2594.05, 2) and result["write_mbs"] == round(1883.96 + 1729.37, 2)


def test_stress_ng_metrics_lines_alone_are_read():
    text = "\n".join(line for line in fixture("stress-ng-0.15.06-stream-2.txt").splitlines() if "(instance" not in line)
    result, error = measure.parse_stress_ng_stream(text)
    assert error is None and result["instances"] == 2 and result["read_mbs"] == round(2707.52 * 2, 2)


def test_stress_ng_too_short_is_a_reason():
    result, error = measure.parse_stress_ng_stream(fixture("stress-ng-0.15.06-stream-too-short.txt"))
    assert result is None and "too short" in error and "5 s" in error


def test_sysbench_memory():
    result, error = measure.parse_sysbench_memory(fixture("sysbench-1.0.20-memory-write.txt"))
    assert error is None
    assert result["threads"] == 2 and result["operation"] == "write" and result["bandwidth_mibs"] == 6229.30
    assert result["bandwidth_mbs"] == round(6229.30 * 1.048576, 2) and result["transferred_mib"] == 18816.0


def test_mbw():
    result, error = measure.parse_mbw(fixture("mbw-1.2.2-memcpy.txt"))
    assert error is None
    assert result["method"] == "MEMCPY" and result["iterations"] == 3 and result["array_mib"] == 128.0
    assert result["bandwidth_mibs"] == 3081.714 and result["bandwidth_mbs"] == round(3081.714 * 1.048576, 2)


def test_mbw_without_avg_is_cut_short():
    text = "\n".join(fixture("mbw-1.2.2-memcpy.txt").splitlines()[:2])
    result, error = measure.parse_mbw(text)
    assert result is None and "AVG" in error and "2 iterations" in error


def test_sysbench_cut_before_its_figure():
    text = fixture("sysbench-1.0.20-memory-write.txt").split("Threads started!")[0]
    result, error = measure.parse_sysbench_memory(text)
    assert result is None and "cut short" in error


@pytest.mark.parametrize("parser", MEM_PARSERS, ids=[p.__name__ for p in MEM_PARSERS])
def test_numactl_error_is_no_figure(parser):
    result, error = parser(fixture("numactl-2.0.16-bad-node.txt"))
    assert result is None and "libnuma" in error


@pytest.mark.parametrize("parser, name, line", [
    (measure.parse_stress_ng_stream, "stress-ng-0.15.06-stream-1.txt", "4965.67 MB read/sec"),
    (measure.parse_sysbench_memory, "sysbench-1.0.20-memory-write.txt", "(13655.19 MiB/sec)"),
    (measure.parse_mbw, "mbw-1.2.2-memcpy.txt", "Copy: 3081.714 MiB/s"),
])
def test_a_rate_that_is_not_a_number_is_a_reason(parser, name, line):
    text = fixture(name)
    bad = {"4965.67 MB read/sec": "nan MB read/sec", "(13655.19 MiB/sec)": "(x MiB/sec)",
           "Copy: 3081.714 MiB/s": "Copy: -1 MiB/s"}[line]
    if line not in text:  # sysbench's figure differs per run: replace the one in the file
        text = text.replace("(6229.30 MiB/sec)", bad)
    else:
        text = text.replace(line, bad)
    result, error = parser(text)
    assert result is None and error


def test_cpuinfo_mhz_of_this_machine():
    assert measure.parse_cpuinfo_mhz(fixture("proc-cpuinfo-kvm-epyc-2cpu.txt")) == {0: 2445.406, 1: 2445.406}
    assert measure.parse_cpuinfo_mhz(b"processor : 3\ncpu MHz : 1500.5\nprocessor : x\ncpu MHz : 9\n") == {3: 1500.5}
    assert measure.parse_cpuinfo_mhz(None) == {} and measure.parse_cpuinfo_mhz("processor : 0\ncpu MHz : nan\n") == {}


HOSTILE = [None, 42, b"", "", b"\x00" * 64, b"\xff\xfe\xfd garbage \xc3\x28", "\n" * 1000, "garbage\n",
           "stream: memory rate: x MB read/sec, y MB write/sec (instance 0)", "AVG Method: MEMCPY",
           "MiB transferred", "stress-ng: info:  [1] successful run completed in 6.21s\n"]


@pytest.mark.parametrize("parser", MEM_PARSERS + (measure.parse_cpuinfo_mhz,),
                         ids=[p.__name__ for p in MEM_PARSERS] + ["parse_cpuinfo_mhz"])
@pytest.mark.parametrize("data", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_input_never_raises_and_never_gives_a_figure(parser, data):
    if parser is measure.parse_cpuinfo_mhz:
        assert parser(data) == {}
        return
    result, error = parser(data)
    assert result is None and isinstance(error, str) and error


@pytest.mark.parametrize("parser, name", [
    (measure.parse_stress_ng_stream, "stress-ng-0.15.06-stream-2.txt"),
    (measure.parse_sysbench_memory, "sysbench-1.0.20-memory-write.txt"),
    (measure.parse_mbw, "mbw-1.2.2-memcpy.txt"),
])
def test_every_truncation_of_a_real_output_is_handled(parser, name):
    data = fixture(name, "rb")
    for end in range(0, len(data)):
        result, error = parser(data[:end])
        assert (result is None) != (error is None)
        if result is not None:
            assert result["bandwidth_mbs"] > 0 and json.dumps(result)


# -- the CPU clock sampler on a fake sysfs tree ---------------------------------------------------------
def sysfs(tmp_path, cpus, cpufreq=True, rated=None, cur=1000000, cpuinfo=None):
    cpu_sys = tmp_path / "cpu"
    cpu_sys.mkdir()
    (cpu_sys / "online").write_text("0-%d\n" % (cpus - 1))
    for cpu in range(cpus):
        directory = cpu_sys / ("cpu%d" % cpu) / "cpufreq"
        directory.mkdir(parents=True)
        if cpufreq:
            (directory / "scaling_cur_freq").write_text("%d\n" % cur)
            for name, value in (rated or {"cpuinfo_max_freq": 3000000}).items():
                (directory / name).write_text("%d\n" % value)
    info = tmp_path / "cpuinfo"
    info.write_text(cpuinfo if cpuinfo is not None else "")
    return str(cpu_sys), str(info)


class FakeLoad:
    """Workers that raise each CPU's scaling_cur_freq as time passes (a governor reacting to load)."""

    def __init__(self, cpu_sys, targets):
        self.cpu_sys, self.targets, self.now, self.started, self.stopped = cpu_sys, targets, 0.0, None, None

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds
        for cpu, target in self.targets.items():
            path = os.path.join(self.cpu_sys, "cpu%d" % cpu, "cpufreq", "scaling_cur_freq")
            if os.path.exists(path):
                value = int(target * min(1.0, 0.5 + self.now / 2.0))
                with open(path, "w") as handle:
                    handle.write("%d\n" % value)

    def start(self, cpus, seconds):
        self.started = (list(cpus), seconds)
        return ["w%d" % cpu for cpu in cpus]

    def stop(self, workers):
        self.stopped = list(workers)
        return [1000 + index for index in range(len(workers))]


def run_sampler(cpu_sys, info, load, duration=3, max_cpus=256):
    plan = measure_host.plan_cpu_freq(max_cpus, cpu_sys=cpu_sys, cpuinfo=info, allowed=lambda: None)
    return plan, measure_host.measure_cpu_freq(plan, duration, cpu_sys=cpu_sys, cpuinfo=info, start=load.start,
                                               stop=load.stop, clock=load.clock, sleep=load.sleep)


def test_sampler_cpufreq_highest_clock_and_fraction(tmp_path):
    cpu_sys, info = sysfs(tmp_path, 4)
    load = FakeLoad(cpu_sys, {0: 3000000, 1: 2900000, 2: 1200000, 3: 3000000})
    plan, result = run_sampler(cpu_sys, info, load)
    assert plan["source"] == "scaling_cur_freq" and plan["sample"] == "all online CPUs"
    assert load.started == ([0, 1, 2, 3], 5) and load.stopped == ["w0", "w1", "w2", "w3"]
    assert result["status"] == "ok" and result["samples"] >= 10 and result["workers"] == [1000, 1001, 1002, 1003]
    assert result["cpus"]["0"]["observed_khz"] == 3000000 and result["cpus"]["0"]["fraction"] == 1.0
    assert result["cpus"]["2"]["observed_khz"] == 1200000 and result["cpus"]["2"]["fraction"] == 0.4
    assert result["cpus"]["1"]["rated_source"] == "cpuinfo_max_freq" and result["cpus"]["1"]["rated_khz"] == 3000000
    assert json.dumps(result)


@pytest.mark.parametrize("rated, source, khz", [
    ({"cpuinfo_max_freq": 3900000, "base_frequency": 2100000}, "base_frequency", 2100000),
    ({"cpuinfo_max_freq": 2450000, "amd_pstate_max_freq": 3700000}, "amd_pstate_max_freq", 3700000),
    ({"cpuinfo_max_freq": 3500000}, "cpuinfo_max_freq", 3500000),
])
def test_rated_clock_choice(tmp_path, rated, source, khz):
    cpu_sys, info = sysfs(tmp_path, 1, rated=rated)
    got_khz, got_source, figures = measure_host.rated_clock(0, cpu_sys=cpu_sys)
    assert (got_khz, got_source, figures) == (khz, source, rated)


def test_sampler_without_cpufreq_uses_cpuinfo_and_has_no_fraction(tmp_path):
    cpu_sys, info = sysfs(tmp_path, 2, cpufreq=False, cpuinfo=fixture("proc-cpuinfo-kvm-epyc-2cpu.txt"))
    load = FakeLoad(cpu_sys, {})
    plan, result = run_sampler(cpu_sys, info, load, duration=1)
    assert plan["source"] == "/proc/cpuinfo" and result["status"] == "ok"
    entry = result["cpus"]["1"]
    assert entry["observed_khz"] == 2445406 and entry["fraction"] is None and entry["rated"] == {}
    assert "no rated clock" in entry["reason"] and "VM guest" in entry["reason"]


def test_sampler_without_any_source_is_unknown_and_starts_nothing(tmp_path):
    cpu_sys, info = sysfs(tmp_path, 2, cpufreq=False, cpuinfo="processor : 0\n")
    load = FakeLoad(cpu_sys, {})
    plan, result = run_sampler(cpu_sys, info, load)
    assert plan["status"] == "unknown" and "no frequency source" in plan["reason"]
    assert result["status"] == "unknown" and result["reason"] == plan["reason"] and load.started is None


def test_sampler_without_online_list_is_unknown(tmp_path):
    plan = measure_host.plan_cpu_freq(cpu_sys=str(tmp_path / "nothing"), cpuinfo=str(tmp_path / "none"))
    assert plan["status"] == "unknown" and "online" in plan["reason"]


def test_workers_are_stopped_when_sampling_fails(tmp_path):
    cpu_sys, info = sysfs(tmp_path, 2)
    load = FakeLoad(cpu_sys, {0: 1, 1: 1})
    plan = measure_host.plan_cpu_freq(cpu_sys=cpu_sys, cpuinfo=info, allowed=lambda: {0, 1, 2})

    def broken(path, limit=None):
        raise RuntimeError("sysfs went away")

    with pytest.raises(RuntimeError):
        measure_host.measure_cpu_freq(plan, 3, read=broken, cpu_sys=cpu_sys, start=load.start, stop=load.stop,
                                      clock=load.clock, sleep=load.sleep)
    assert load.stopped == ["w0", "w1"]


def test_only_the_cpus_this_process_may_use_are_loaded(tmp_path):
    cpu_sys, info = sysfs(tmp_path, 4)
    plan = measure_host.plan_cpu_freq(cpu_sys=cpu_sys, cpuinfo=info, allowed=lambda: {1, 3})
    assert plan["cpus"] == [1, 3] and plan["not_allowed"] == "0,2" and plan["status"] == "ok"
    plan = measure_host.plan_cpu_freq(cpu_sys=cpu_sys, cpuinfo=info, allowed=lambda: {9})
    assert plan["status"] == "unknown" and "sched_getaffinity" in plan["reason"]


def test_workers_that_cannot_start_are_unknown(tmp_path):
    cpu_sys, info = sysfs(tmp_path, 1)
    plan = measure_host.plan_cpu_freq(cpu_sys=cpu_sys, cpuinfo=info, allowed=lambda: None)

    def start(cpus, seconds):
        raise OSError(11, "Resource temporarily unavailable")

    result = measure_host.measure_cpu_freq(plan, 1, cpu_sys=cpu_sys, start=start, stop=lambda workers: [])
    assert result["status"] == "unknown" and "could not be started" in result["reason"] and result["cpus"] == {}


@pytest.mark.parametrize("online, max_cpus, expected", [
    (list(range(8)), 256, list(range(8))),
    (list(range(8)), 0, list(range(8))),
    (list(range(768)), 4, [0, 256, 511, 767]),
    (list(range(10)), 1, [0]),
    # 0 (all) and a max_cpus past it load at most MAX_WORKERS, a garbage cpulist of a million CPUs included
    (list(range(1 << 20)), 0, None),
    (list(range(1 << 20)), 1 << 20, None),
])
def test_sample_cpus(online, max_cpus, expected):
    cpus, rule = measure_host.sample_cpus(online, max_cpus)
    if expected is None:
        assert len(cpus) == measure_host.MAX_WORKERS == 8192 and cpus[0] == 0 and cpus[-1] == online[-1]
        assert "evenly spread" in rule
    else:
        assert cpus == expected and ("all" in rule) == (cpus == online)


def test_real_workers_are_pinned_and_gone_after_stop():
    cpu = sorted(os.sched_getaffinity(0))[0]
    workers = measure_host.start_workers([cpu], 10)
    try:
        time.sleep(0.3)
        assert all(worker.poll() is None for worker in workers)
        assert os.sched_getaffinity(workers[0].pid) == {cpu}
    finally:
        pids = measure_host.stop_workers(workers)
    for pid in pids:
        assert not os.path.exists("/proc/%d" % pid)


# -- memory bandwidth runner ----------------------------------------------------------------------------
def nodes_tree(tmp_path, nodes):
    node_sys = tmp_path / "node"
    node_sys.mkdir()
    for node, cpus in nodes.items():
        (node_sys / ("node%d" % node)).mkdir()
        (node_sys / ("node%d" % node) / "cpulist").write_text(cpus + "\n")
    return str(node_sys)


def which_of(*names):
    return lambda name: "/usr/bin/" + name if name in names else None


def test_plan_per_node_bound_with_numactl(tmp_path):
    node_sys = nodes_tree(tmp_path, {0: "0-31", 1: "32-63", 2: ""})
    plan = measure_host.plan_mem_bw(which_of("numactl", "sysbench", "stress-ng"), 6, node_sys=node_sys)
    assert plan["tool"] == "stress-ng" and plan["bound"] and plan["nodes_without_cpus"] == [2]
    assert [run["node"] for run in plan["runs"]] == ["0", "1"]
    assert plan["runs"][1]["argv"] == ["/usr/bin/numactl", "--cpunodebind=1", "--membind=1", "/usr/bin/stress-ng",
                                       "--stream", "16", "-t", "6s", "--metrics-brief"]


def test_plan_without_numactl_is_one_unbound_run(tmp_path):
    node_sys = nodes_tree(tmp_path, {0: "0-1"})
    plan = measure_host.plan_mem_bw(which_of("mbw"), 6, node_sys=node_sys)
    assert plan["tool"] == "mbw" and not plan["bound"] and "numactl not found" in plan["reason"]
    assert len(plan["runs"]) == 1 and plan["runs"][0]["node"] == "all"
    assert plan["runs"][0]["argv"][0] == "/usr/bin/mbw"


def test_no_tool_is_unknown_naming_the_tools(tmp_path):
    plan = measure_host.plan_mem_bw(which_of("numactl"), 6, node_sys=nodes_tree(tmp_path, {0: "0"}))
    result = measure_host.measure_mem_bw(plan, 60, 6, run=lambda argv, timeout: pytest.fail("ran %s" % argv))
    assert result["status"] == "unknown" and result["nodes"] == {}
    for tool in ("stress-ng", "sysbench", "mbw"):
        assert tool in result["reason"]


@pytest.mark.parametrize("outcome, reason", [
    ((1, fixture("numactl-2.0.16-bad-node.txt"), None), "numactl exited 1: libnuma: Warning"),
    ((0, "garbage\n", None), "not stress-ng --stream output"),
    ((0, fixture("stress-ng-0.15.06-stream-too-short.txt"), None), "too short"),
    ((None, "", "stress-ng did not finish within 36 s: killed with its process group"), "killed"),
])
def test_a_bad_run_is_unknown_with_the_reason(tmp_path, outcome, reason):
    plan = measure_host.plan_mem_bw(which_of("numactl", "stress-ng"), 6, node_sys=nodes_tree(tmp_path, {0: "0-1"}))
    result = measure_host.measure_mem_bw(plan, 120, 6, run=lambda argv, timeout: outcome)
    node = result["nodes"]["0"]
    assert node["status"] == "unknown" and node["bandwidth_mbs"] is None and reason in node["reason"]
    assert result["status"] == "unknown" and reason in result["reason"]


def test_a_good_run_and_the_time_left(tmp_path):
    plan = measure_host.plan_mem_bw(which_of("numactl", "stress-ng"), 6, node_sys=nodes_tree(tmp_path, {0: "0", 1: "1"}))
    now = [0.0]
    timeouts = []

    def run(argv, timeout):
        timeouts.append(timeout)
        now[0] += 6.5
        return 0, fixture("stress-ng-0.15.06-stream-1.txt"), None

    result = measure_host.measure_mem_bw(plan, 10, 6, run=run, clock=lambda: now[0])
    assert result["nodes"]["0"]["status"] == "ok" and result["nodes"]["0"]["bandwidth_mbs"] == 8276.11
    assert timeouts == [10] and result["status"] == "ok" and result["unit"] == "MB/s"
    assert result["nodes"]["1"]["status"] == "unknown" and "not run" in result["nodes"]["1"]["reason"]


def test_run_bounded_kills_a_hang_with_its_process_group(tmp_path):
    marker = tmp_path / "child.pid"
    script = "sleep 30 & echo $! > %s; wait" % marker
    began = time.monotonic()
    rc, out, reason = measure_host.run_bounded(["/bin/sh", "-c", script], 1)
    assert time.monotonic() - began < 10
    assert rc is None and "did not finish within 1 s" in reason
    child = int(marker.read_text())
    for dummy in range(50):  # the killed child is reaped by init
        if not os.path.exists("/proc/%d" % child):
            break
        time.sleep(0.1)
    assert not os.path.exists("/proc/%d" % child)


def test_run_bounded_exit_and_missing_binary(tmp_path):
    assert measure_host.run_bounded(["/bin/sh", "-c", "echo out; echo err >&2; exit 3"], 5) == (3, "out\nerr\n", None)
    rc, out, reason = measure_host.run_bounded([str(tmp_path / "absent")], 5)
    assert rc is None and "cannot run" in reason


def test_cross_node_runs_bind_the_cpus_of_one_node_and_the_memory_of_the_next(tmp_path):
    node_sys = nodes_tree(tmp_path, {0: "0-1", 1: "2-3", 3: "4-5", 2: ""})
    plan = measure_host.plan_mem_bw(which_of("numactl", "mbw"), 6, node_sys=node_sys)
    assert [(run["cpu_node"], run["mem_node"]) for run in plan["cross_runs"]] == [("0", "1"), ("1", "3"), ("3", "0")]
    assert plan["cross_runs"][1]["argv"][:3] == ["/usr/bin/numactl", "--cpunodebind=1", "--membind=3"]
    assert plan["cross_runs"][1]["cpus"] == "2-3"
    assert measure_host.plan_mem_bw(which_of("numactl", "mbw"), 6, node_sys=node_sys, cross=False)["cross_runs"] == []
    (tmp_path / "one").mkdir()
    one = measure_host.plan_mem_bw(which_of("numactl", "mbw"), 6, node_sys=nodes_tree(tmp_path / "one", {0: "0-1"}))
    assert one["cross_runs"] == []
    assert measure_host.plan_mem_bw(which_of("mbw"), 6, node_sys=node_sys)["cross_runs"] == []  # no numactl


def test_cross_node_results_and_the_shared_timeout(tmp_path):
    plan = measure_host.plan_mem_bw(which_of("numactl", "mbw"), 1, node_sys=nodes_tree(tmp_path, {0: "0", 1: "1"}))
    now = [0.0]
    ran = []

    def run(argv, timeout):
        ran.append(argv[1:3])
        now[0] += 3
        if argv[2] == "--membind=0" and argv[1] == "--cpunodebind=1":
            return 1, "libnuma: Warning: node 0 not allowed\n", None
        return 0, fixture("mbw-1.2.2-memcpy.txt"), None

    result = measure_host.measure_mem_bw(plan, 60, 1, run=run, clock=lambda: now[0])
    assert ran == [["--cpunodebind=0", "--membind=0"], ["--cpunodebind=1", "--membind=1"],
                   ["--cpunodebind=0", "--membind=1"], ["--cpunodebind=1", "--membind=0"]]
    assert set(result["cross"]) == {"0->1", "1->0"}
    good, bad = result["cross"]["0->1"], result["cross"]["1->0"]
    assert set(good) == {"cpu_node", "mem_node", "status", "reason", "bandwidth_mbs", "detail", "command", "cpus",
                         "seconds"}
    assert good["status"] == "ok" and good["cpu_node"] == "0" and good["mem_node"] == "1" and good["bandwidth_mbs"] > 0
    assert "--membind=1" in good["command"] and good["cpus"] == "0" and good["seconds"] == 3
    assert bad["status"] == "unknown" and bad["bandwidth_mbs"] is None and "exited 1" in bad["reason"]
    now[0] = 0.0
    short = measure_host.measure_mem_bw(plan, 7, 1, run=run, clock=lambda: now[0])
    assert short["nodes"]["1"]["status"] == "ok" and short["cross"]["0->1"]["status"] == "unknown"
    assert "not run" in short["cross"]["0->1"]["reason"] and short["cross"]["1->0"]["seconds"] is None


def test_cross_is_empty_without_cross_runs(tmp_path):
    plan = measure_host.plan_mem_bw(which_of("numactl", "mbw"), 1, node_sys=nodes_tree(tmp_path, {0: "0"}))
    result = measure_host.measure_mem_bw(plan, 60, 1, run=lambda argv, timeout: (0, fixture("mbw-1.2.2-memcpy.txt"), None))
    assert result["cross"] == {} and result["status"] == "ok"
    unknown = measure_host.measure_mem_bw(measure_host.plan_mem_bw(which_of(), 1), 60, 1)
    assert unknown["cross"] == {} and unknown["status"] == "unknown"


def test_unbound_fallback_reads_the_injected_cpu_directory(tmp_path):
    cpu_sys = tmp_path / "cpu"
    cpu_sys.mkdir()
    (cpu_sys / "online").write_text("0-5\n")
    plan = measure_host.plan_mem_bw(which_of("sysbench"), 2, node_sys=str(tmp_path / "absent"), cpu_sys=str(cpu_sys))
    assert plan["runs"][0]["cpus"] == "0-5" and "--threads=6" in plan["runs"][0]["argv"]


def test_run_bounded_sets_the_given_environment():
    rc, out, reason = measure_host.run_bounded(["/bin/sh", "-c", "echo $CUDA_DEVICE_ORDER $LC_ALL"], 5,
                                               env={"CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    assert (rc, out, reason) == (0, "PCI_BUS_ID C\n", None)


def test_run_bounded_env_may_override_the_locale():
    assert measure_host.run_bounded(["/bin/sh", "-c", "echo $LC_ALL"], 5, env={"LC_ALL": "C.UTF-8"}) == (0, "C.UTF-8\n", None)
