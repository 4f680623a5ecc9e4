# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Measurements that need no GPU, run on a live host: the CPU clock under load and memory bandwidth per
NUMA node (issue 23; module ``host_measure``, docs/validation.md). Gathering only: nothing here judges.

* :func:`plan_cpu_freq` / :func:`measure_cpu_freq`: the CPUs to load (every online CPU, or an evenly spread
  sample of ``max_cpus``), a busy worker pinned to each (``os.sched_setaffinity``), all loaded at once, and
  the highest ``scaling_cur_freq`` (cpufreq) or ``/proc/cpuinfo`` ``cpu MHz`` seen per CPU while they run,
  against the CPU's rated clock (:func:`rated_clock`). Reads go through an injectable ``read`` and the
  directories are arguments, so a test runs the sampler on a fake sysfs tree; workers are injectable too.
* :func:`plan_mem_bw` / :func:`measure_mem_bw`: the first installed tool of ``stress-ng``, ``sysbench``,
  ``mbw``, run once per NUMA node with CPUs under ``numactl --cpunodebind=N --membind=N`` (one unbound run
  without numactl), then once per node across the interconnect (``--membind`` the next node), each run in
  its own session and killed with its process group at its timeout (:func:`run_bounded`, which
  ``measure/measure_gpu.py`` uses too).

Nothing raises for a missing source, a tool's garbage, a non-zero exit or a hang: the measurement (or the
node) is ``unknown`` with the reason. Standard library only, Python 3.8+.
"""

from __future__ import absolute_import, division, print_function

import os
import subprocess
import sys
import time

from ansible_collections.gpuhost.baseline.plugins.module_utils.host import runner
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.cpu import format_cpulist, parse_cpulist
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import MAX_LARGE_BYTES, read_regular
from ansible_collections.gpuhost.baseline.plugins.module_utils.measure import measure

__metaclass__ = type

CPU_SYS = "/sys/devices/system/cpu"
NODE_SYS = "/sys/devices/system/node"
PROC_CPUINFO = "/proc/cpuinfo"

#: memory bandwidth tools in the order of preference (docs/validation.md says why): the order of
#: measure.MEM_BW_PARSERS, which names each tool once
MEM_TOOLS = tuple(measure.MEM_BW_PARSERS)
#: stress-ng's stream stressor prints no rate for a run shorter than about 5 s
STRESS_NG_MIN_S = 6
#: instances (threads) per node at most: enough to load the memory channels of one node, bounded in memory
#: (each stress-ng stream instance allocates three arrays of four times the L3 size)
MEM_THREADS_MAX = 16
#: seconds a tool may run past its own duration (start-up, allocation, the report) before it is killed
MEM_GRACE_S = 30
#: seconds between two samples of the CPU clock
SAMPLE_INTERVAL_S = 0.2

#: the rated clock a CPU's observed clock is compared to, first present wins (see :func:`rated_clock`)
RATED_SOURCES = ("base_frequency", "amd_pstate_max_freq", "cpuinfo_max_freq")


def _read(path, limit=None):
    """Text of a sysfs/procfs file or ``None`` (missing, unreadable, not a regular file)."""
    try:
        data = read_regular(path, path, cap=MAX_LARGE_BYTES, limit=limit)
    except EnvironmentError:
        return None
    return data.decode("utf-8", "replace")


def _khz(text):
    try:
        value = int((text or "").strip())
    except ValueError:
        return None
    return value if value > 0 else None


#: the most CPUs loaded at once (one worker process each), whatever ``max_cpus`` says (``0``: all): the
#: kernel's largest x86 NR_CPUS, so a garbage cpulist with no affinity mask to narrow it starts no more
#: the least and most runs of the measurements one host_measure run makes (its ``repeats``; remediate.yml's
#: gpuhost_prove_repeats, checked against the same bounds)
REPEATS_BOUNDS = (1, 10)
MAX_WORKERS = 8192


def sample_cpus(online, max_cpus):
    """``(sampled, rule)``: every online CPU when there are at most ``max_cpus``, else ``max_cpus`` of them
    evenly spread over the sorted list (the first and the last included), so every socket and NUMA node of a
    large host is represented; ``rule`` says which. ``max_cpus`` ``0`` (all) or above :data:`MAX_WORKERS`
    counts as :data:`MAX_WORKERS`."""
    online = sorted(online)
    max_cpus = MAX_WORKERS if max_cpus <= 0 else min(max_cpus, MAX_WORKERS)
    if len(online) <= max_cpus:
        return online, "all online CPUs"
    if max_cpus == 1:
        return online[:1], "1 of %d online CPUs (max_cpus)" % len(online)
    step = (len(online) - 1) / float(max_cpus - 1)
    picked = sorted(set(online[int(round(index * step))] for index in range(max_cpus)))
    return picked, "%d of %d online CPUs, evenly spread (max_cpus)" % (len(picked), len(online))


def rated_clock(cpu, read=_read, cpu_sys=CPU_SYS):
    """``(khz, source, figures)`` of one CPU's rated clock from its cpufreq directory.

    ``figures`` holds every one present of ``base_frequency`` (intel_pstate: the guaranteed clock with all
    cores busy), ``amd_pstate_max_freq`` (amd_pstate: the highest clock the hardware advertises, whatever the
    boost switch says) and ``cpuinfo_max_freq`` (the cpufreq driver's highest, boost included where boost is
    on). The one compared to is the first present in that order: with every sampled CPU busy at once a
    healthy Intel core runs at or above its base clock but below its single-core turbo, so base is what it
    must reach; on AMD ``amd_pstate_max_freq`` keeps the hardware's figure when boost was switched off (which
    lowers ``cpuinfo_max_freq`` to the nominal clock and would hide it); elsewhere (acpi-cpufreq, other
    drivers) ``cpuinfo_max_freq`` is all there is. ``(None, None, {})`` without a cpufreq directory.
    """
    base = "%s/cpu%d/cpufreq/" % (cpu_sys, cpu)
    figures = {}
    for name in RATED_SOURCES:
        value = _khz(read(base + name))
        if value is not None:
            figures[name] = value
    for name in RATED_SOURCES:
        if name in figures:
            return figures[name], name, figures
    return None, None, figures


def _allowed():
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def plan_cpu_freq(max_cpus=256, read=_read, cpu_sys=CPU_SYS, cpuinfo=PROC_CPUINFO, allowed=_allowed):
    """What :func:`measure_cpu_freq` would do: ``{"status", "reason", "online", "cpus", "sample", "source",
    "not_allowed", "rated": {cpu: {"khz", "source", "figures"}}}``. Only the online CPUs this process may run
    on (``os.sched_getaffinity``: a cpuset or a container can narrow them) are loaded; the others are listed
    in ``not_allowed``. ``source`` is ``scaling_cur_freq`` where every sampled CPU has one, else
    ``/proc/cpuinfo`` where it gives a ``cpu MHz`` per CPU, else ``None`` with ``status: unknown`` and the
    reason."""
    plan = {"status": "ok", "reason": None, "online": None, "cpus": [], "sample": None, "source": None, "rated": {},
            "not_allowed": ""}
    online = parse_cpulist(read(cpu_sys + "/online"))
    if not online:
        plan.update(status="unknown", reason="%s/online is missing or not a CPU list" % cpu_sys)
        return plan
    permitted = allowed()
    if permitted is not None:
        plan["not_allowed"] = format_cpulist([cpu for cpu in online if cpu not in permitted])
        online = [cpu for cpu in online if cpu in permitted]
        if not online:
            plan.update(status="unknown", reason="this process may run on none of the online CPUs (sched_getaffinity)")
            return plan
    cpus, rule = sample_cpus(online, max_cpus)
    plan.update(online=len(online), cpus=cpus, sample=rule)
    for cpu in cpus:
        khz, source, figures = rated_clock(cpu, read, cpu_sys)
        plan["rated"][cpu] = {"khz": khz, "source": source, "figures": figures}
    if all(_khz(read("%s/cpu%d/cpufreq/scaling_cur_freq" % (cpu_sys, cpu))) for cpu in cpus):
        plan["source"] = "scaling_cur_freq"
    elif all(cpu in measure.parse_cpuinfo_mhz(read(cpuinfo)) for cpu in cpus):
        plan["source"] = "/proc/cpuinfo"
    else:
        plan.update(status="unknown", reason="no frequency source: %s/cpuN/cpufreq/scaling_cur_freq is missing "
                                             "(no cpufreq driver) and %s has no 'cpu MHz' for every CPU" % (cpu_sys, cpuinfo))
    return plan


_WORKER = ("import os, sys, time\n"
           "os.sched_setaffinity(0, {int(sys.argv[1])})\n"
           "end = time.monotonic() + float(sys.argv[2])\n"
           "while time.monotonic() < end:\n"
           "    for _ in range(20000):\n"
           "        pass\n")


def start_workers(cpus, seconds):
    """One busy Python worker per CPU, pinned with ``os.sched_setaffinity``; each also stops by itself after
    ``seconds`` (so none outlives a module killed from outside). Returns the :class:`subprocess.Popen` list."""
    workers = []
    try:
        for cpu in cpus:
            # a worker that runs beside the module, not a command run_command would run to its end
            # pylint: disable-next=ansible-bad-function
            workers.append(subprocess.Popen([sys.executable, "-I", "-S", "-c", _WORKER, str(cpu), "%.3f" % seconds],
                                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL, close_fds=True))
    except Exception:
        stop_workers(workers)
        raise
    return workers


def stop_workers(workers):
    """Kill and reap every worker (``SIGKILL``); returns the pids."""
    pids = []
    for worker in workers:
        pids.append(worker.pid)
        try:
            worker.kill()
        except OSError:
            pass
    for worker in workers:
        try:
            worker.wait(timeout=5)
        except Exception:  # a worker that cannot be reaped in 5 s after SIGKILL: nothing more to do
            pass
    return pids


def measure_cpu_freq(plan, duration_s, read=_read, cpu_sys=CPU_SYS, cpuinfo=PROC_CPUINFO,
                     start=start_workers, stop=stop_workers, clock=time.monotonic, sleep=time.sleep,
                     interval_s=SAMPLE_INTERVAL_S):
    """Load ``plan["cpus"]`` at once for ``duration_s`` and sample their clock; the workers are always
    stopped (``try``/``finally``). Returns ``{"status", "reason", "source", "sample", "online", "duration_s",
    "samples", "workers", "cpus": {"N": {"observed_khz", "rated_khz", "rated_source", "rated", "fraction",
    "reason"}}}``: ``fraction`` is observed / rated, ``None`` with a ``reason`` where either is missing."""
    result = {"status": plan["status"], "reason": plan["reason"], "source": plan["source"], "sample": plan["sample"],
              "online": plan["online"], "not_allowed": plan.get("not_allowed", ""), "duration_s": duration_s,
              "samples": 0, "workers": [], "cpus": {}}
    if plan["status"] != "ok":
        return result
    cpus = plan["cpus"]
    best = dict((cpu, None) for cpu in cpus)
    workers = []
    began = clock()
    try:
        try:
            workers = start(cpus, duration_s + 2)
        except OSError as exc:
            result.update(status="unknown", reason="the load workers could not be started: %s" % (exc.strerror or exc))
            return result
        sleep(min(interval_s, duration_s))  # let the governor see the load before the first sample
        while True:
            if plan["source"] == "scaling_cur_freq":
                now = dict((cpu, _khz(read("%s/cpu%d/cpufreq/scaling_cur_freq" % (cpu_sys, cpu)))) for cpu in cpus)
            else:
                mhz = measure.parse_cpuinfo_mhz(read(cpuinfo))
                now = dict((cpu, int(round(mhz[cpu] * 1000)) if cpu in mhz else None) for cpu in cpus)
            for cpu, khz in now.items():
                if khz is not None and (best[cpu] is None or khz > best[cpu]):
                    best[cpu] = khz
            result["samples"] += 1
            if clock() - began >= duration_s:
                break
            sleep(interval_s)
    finally:
        result["workers"] = stop(workers)
    result["duration_s"] = round(clock() - began, 2)
    for cpu in cpus:
        rated = plan["rated"][cpu]
        entry = {"observed_khz": best[cpu], "rated_khz": rated["khz"], "rated_source": rated["source"],
                 "rated": rated["figures"], "fraction": None, "reason": None}
        if best[cpu] is None:
            entry["reason"] = "no sample of %s could be read during the load" % plan["source"]
        elif rated["khz"] is None:
            entry["reason"] = "no rated clock: %s/cpu%d/cpufreq has none of %s (no cpufreq driver, e.g. a VM guest)" % (
                cpu_sys, cpu, ", ".join(RATED_SOURCES))
        else:
            entry["fraction"] = round(best[cpu] / float(rated["khz"]), 3)
        result["cpus"][str(cpu)] = entry
    if all(entry["observed_khz"] is None for entry in result["cpus"].values()):
        result.update(status="unknown", reason="no clock sample could be read during the load")
    return result


# -- memory bandwidth --------------------------------------------------------------------------------
def numa_nodes(read=_read, node_sys=NODE_SYS, listdir=os.listdir):
    """``{node: [cpus]}`` of the NUMA nodes with CPUs, and ``[node]`` of those without (memory-only nodes:
    CXL memory, a Grace Hopper GPU's memory), from ``/sys/devices/system/node/nodeN/cpulist``."""
    with_cpus, without = {}, []
    try:
        names = listdir(node_sys)
    except EnvironmentError:
        names = []
    for name in sorted(names, key=lambda item: (len(item), item)):
        if not (name.startswith("node") and name[4:].isdigit()):
            continue
        cpus = parse_cpulist(read("%s/%s/cpulist" % (node_sys, name)))
        if cpus:
            with_cpus[int(name[4:])] = cpus
        else:
            without.append(int(name[4:]))
    return with_cpus, without


def tool_argv(tool, binary, threads, duration_s):
    """The argv that measures memory bandwidth with ``tool`` for about ``duration_s`` on ``threads`` CPUs."""
    if tool == "stress-ng":
        return [binary, "--stream", str(threads), "-t", "%ds" % max(STRESS_NG_MIN_S, duration_s), "--metrics-brief"]
    if tool == "sysbench":
        return [binary, "memory", "--memory-block-size=64M", "--memory-total-size=1T", "--memory-oper=write",
                "--time=%d" % max(1, duration_s), "--threads=%d" % threads, "run"]
    # mbw has no duration and no threads: 10 copies of a 256 MiB array (about a second per GB/s of bandwidth
    # short of 2.5 GB/s), one thread
    return [binary, "-q", "-n", "10", "-t", "0", "256"]


def plan_mem_bw(which, duration_s, tools=MEM_TOOLS, threads_max=MEM_THREADS_MAX, read=_read, node_sys=NODE_SYS,
                listdir=os.listdir, cpu_sys=CPU_SYS, cross=True):
    """What :func:`measure_mem_bw` would run: ``{"status", "reason", "tool", "looked_for", "bound", "numactl",
    "runs": [{"node", "cpus", "argv"}], "cross_runs": [{"cpu_node", "mem_node", "cpus", "argv"}],
    "nodes_without_cpus"}``. ``which(name) -> path or None``.

    ``cross_runs`` (with ``cross``, numactl and at least two nodes with CPUs): one run per node N with the CPUs
    of N and the memory of the next node in the sorted list (the last wraps to the first), so n runs, not n^2;
    each crosses the interconnect once."""
    plan = {"status": "ok", "reason": None, "tool": None, "looked_for": list(tools), "bound": False,
            "numactl": None, "runs": [], "cross_runs": [], "nodes_without_cpus": []}
    for tool in tools:
        binary = which(tool)
        if binary:
            plan["tool"] = tool
            break
    else:
        plan.update(status="unknown", reason="no memory bandwidth tool installed: looked for %s in PATH "
                                             "(Debian/Ubuntu: apt-get install stress-ng)" % ", ".join(tools))
        return plan
    numactl = which("numactl")
    nodes, without = numa_nodes(read, node_sys, listdir)
    plan["nodes_without_cpus"] = without
    if numactl and nodes:
        plan.update(bound=True, numactl=numactl)
        for node in sorted(nodes):
            threads = min(len(nodes[node]), threads_max)
            plan["runs"].append({"node": str(node), "cpus": format_cpulist(nodes[node]),
                                 "argv": [numactl, "--cpunodebind=%d" % node, "--membind=%d" % node]
                                 + tool_argv(plan["tool"], binary, threads, duration_s)})
        order = sorted(nodes)
        if cross and len(order) >= 2:
            for index, node in enumerate(order):
                memory = order[(index + 1) % len(order)]
                threads = min(len(nodes[node]), threads_max)
                plan["cross_runs"].append({"cpu_node": str(node), "mem_node": str(memory),
                                           "cpus": format_cpulist(nodes[node]),
                                           "argv": [numactl, "--cpunodebind=%d" % node, "--membind=%d" % memory]
                                           + tool_argv(plan["tool"], binary, threads, duration_s)})
    else:
        cpus = parse_cpulist(read(cpu_sys + "/online")) or [0]
        plan["reason"] = ("numactl not found: one run, not bound to a node" if not numactl
                          else "no NUMA node with CPUs under %s: one run, not bound" % node_sys)
        plan["runs"].append({"node": "all", "cpus": format_cpulist(cpus),
                             "argv": tool_argv(plan["tool"], binary, min(len(cpus), threads_max), duration_s)})
    return plan


def tool_name(argv):
    """The name of the tool ``argv`` runs: its first word's basename, or, for ``numactl OPTIONS TOOL ...``,
    the tool's (a reason names mbw, not the numactl that started it)."""
    name = os.path.basename(argv[0])
    if name == "numactl":
        for word in argv[1:]:
            if not word.startswith("-"):
                return os.path.basename(word)
    return name


def run_bounded(argv, timeout_s, env=None):
    """``(rc, output, reason)``: ``argv`` run by the one command runner (:mod:`runner`) with stdout and
    stderr together, its output bounded while read (:data:`measure.MAX_TEXT`); at ``timeout_s``, or past
    that much output, its whole process group is killed and ``rc`` is ``None`` with the reason; so it is
    at the runner's deadline (``host_measure``'s ``deadline_s``: the task's timeout less a margin), or not
    started past it. ``env``: variables set for the run on top of this process's environment (and
    ``LC_ALL=C``)."""
    result = runner.run(argv, timeout=max(1, timeout_s), cap=measure.MAX_TEXT, env=env, merge_stderr=True)
    text = result.stdout.decode("utf-8", "replace")
    name = tool_name(argv)
    if result.bound == runner.TIMEOUT and result.deadline:
        return None, text, result.describe(name)
    if result.bound == runner.TIMEOUT:
        return None, text, "%s did not finish within %d s: killed with its process group" % (name, timeout_s)
    if result.bound == runner.OUTPUT_CAP:
        return None, text, "%s wrote more than %d bytes of output: killed with its process group" % (
            name, measure.MAX_TEXT)
    if result.rc == 127 and not result.stdout and result.stderr.startswith(b"cannot run "):
        return None, "", result.stderr.decode("utf-8", "replace")
    return result.rc, text, None


def _mem_run(argv, cpus, parser, deadline, timeout_s, own, run, clock):
    """One memory bandwidth run within ``deadline``: ``{"status", "reason", "bandwidth_mbs", "detail", "cpus",
    "command", "seconds"}``."""
    entry = {"status": "unknown", "reason": None, "bandwidth_mbs": None, "detail": None, "cpus": cpus,
             "command": " ".join(argv), "seconds": None}
    left = deadline - clock()
    if left < own + 1:
        entry["reason"] = "not run: %.0f s left of timeout_s %d, the run needs %d s" % (max(0, left), timeout_s, own + 1)
        return entry
    began = clock()
    rc, out, reason = run(argv, int(min(left, own + MEM_GRACE_S)))
    entry["seconds"] = round(clock() - began, 2)
    if reason:
        entry["reason"] = reason
        return entry
    if rc != 0:
        entry["reason"] = "%s exited %s: %s" % (os.path.basename(argv[0]), rc, measure.failure_line(out))
        return entry
    detail, error = parser(out)
    if error:
        entry["reason"] = error
        return entry
    entry.update(status="ok", bandwidth_mbs=detail["bandwidth_mbs"], detail=detail)
    return entry


def measure_mem_bw(plan, timeout_s, duration_s, run=run_bounded, clock=time.monotonic):
    """Run ``plan["runs"]`` one after the other (never two nodes at once: they would share the memory
    controllers' bandwidth across the interconnect), then ``plan["cross_runs"]``, each with its own timeout
    (``duration_s`` plus :data:`MEM_GRACE_S`), all within ``timeout_s``. Returns ``{"status", "reason", "tool",
    "looked_for", "bound", "unit": "MB/s", "nodes": {"N": {"status", "reason", "bandwidth_mbs", "detail",
    "command", "cpus", "seconds"}}, "cross": {"N->M": {"cpu_node", "mem_node", ... the same keys}}}``; a run is
    ``unknown`` with the reason for a non-zero exit, a hang, output the parser does not read, or no time left.
    ``status`` says whether a node of ``nodes`` was measured (``cross`` does not count)."""
    result = dict((key, plan[key]) for key in ("status", "reason", "tool", "looked_for", "bound", "nodes_without_cpus"))
    result.update(unit="MB/s", nodes={}, cross={})
    if plan["status"] != "ok":
        return result
    parser = measure.MEM_BW_PARSERS[plan["tool"]]
    deadline = clock() + timeout_s
    own = max(STRESS_NG_MIN_S, duration_s) if plan["tool"] == "stress-ng" else duration_s
    for entry in plan["runs"]:
        result["nodes"][entry["node"]] = _mem_run(entry["argv"], entry["cpus"], parser, deadline, timeout_s, own,
                                                  run, clock)
    for entry in plan.get("cross_runs") or []:
        crossed = {"cpu_node": entry["cpu_node"], "mem_node": entry["mem_node"]}
        crossed.update(_mem_run(entry["argv"], entry["cpus"], parser, deadline, timeout_s, own, run, clock))
        result["cross"]["%s->%s" % (entry["cpu_node"], entry["mem_node"])] = crossed
    if result["nodes"] and all(node["status"] != "ok" for node in result["nodes"].values()):
        result.update(status="unknown", reason="no node measured: %s" % "; ".join(
            "%s: %s" % (name, node["reason"]) for name, node in sorted(result["nodes"].items())))
    return result
