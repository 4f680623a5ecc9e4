"""Benchmark: host_facts on a synthetic 768-CPU host against the floor of merely reading its files.

Prints, from one run, for the synthetic 768-CPU host (2 sockets x 192 cores x 2 threads, 8 NUMA
nodes, 64 PCI devices with 8 GPUs behind switches) and for each demo snapshot (incident, healthy,
intel, hostile: build/snapshots, made when missing):
  * host_facts: the full gather over the snapshot (path containment included);
  * bare read: open+read of exactly the files host_facts read (learned by recording one gather)
    plus the directory listings and links it made;
both in this process, interleaved (gather, read, gather, read, ...), as process CPU time (the
figure to trust on a busy machine), with the load average; the ratio is the median of the pairs'.
Then the same gather on this machine's live / and the time of lspci -vvv, numastat -m, cpupower
frequency-info and cpupower idle-info here, for scale.
Then, for the incident snapshot, the same per subsystem (each gatherer against the bare read of the
files it read), which says where the gather costs more than its reads.
Target (issues 20 and 41): host_facts <= 1.5x the bare read on every snapshot.

Usage: python benchmarks/facts.py [--runs 9] [--keep DIR]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time

from common import demo_snapshots, import_collection, large_host

import_collection()

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.gather import GATHERERS, gather_facts  # noqa: E402
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Recorder, Root  # noqa: E402


def median_time(func, runs):
    samples = []
    for unused_run in range(runs):
        start = time.perf_counter()
        func()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def floor_reader(snapshot, recorder):
    files = [os.path.join(snapshot, path.lstrip("/")) for path in sorted(recorder.files)]
    dirs = [os.path.join(snapshot, path.lstrip("/")) for path in sorted(recorder.dirs)]
    links = [os.path.join(snapshot, path.lstrip("/")) for path in sorted(recorder.links)]

    def read_all():
        for path in dirs:
            try:
                os.listdir(path)
            except OSError:
                pass
        for path in links:
            try:
                os.readlink(path)
            except OSError:
                pass
        for path in files:
            try:
                with open(path, "rb") as handle:
                    handle.read()
            except OSError:
                pass
    return read_all, len(files), len(dirs), len(links)


def tool_time(argv, runs=3):
    if shutil.which(argv[0]) is None:
        return None, "%s not installed" % argv[0]

    def run():
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return median_time(run, runs), None


def paired(gather, floor, runs):
    """Interleaved runs (gather, floor, gather, floor, ...): the medians of each side's process CPU
    seconds, and the median of the per-pair ratios."""
    clock = time.process_time
    sides = {"gather": [], "floor": []}
    for unused_run in range(runs):
        for name, func in (("gather", gather), ("floor", floor)):
            start = clock()
            func()
            sides[name].append(clock() - start)
    ratios = [g / f if f else float("inf") for g, f in zip(sides["gather"], sides["floor"])]
    return statistics.median(sides["gather"]), statistics.median(sides["floor"]), statistics.median(ratios)


def snapshot_pair(name, snapshot, runs):
    """Facts gathered over ``snapshot`` paired with the bare read of the files they read."""
    recorder = Recorder()
    gather_facts(Root(snapshot, recorder=recorder))
    read_all, nfiles, ndirs, nlinks = floor_reader(snapshot, recorder)
    read_all()  # warm the page cache for both sides alike
    t_facts, t_floor, ratio = paired(lambda: gather_facts(Root(snapshot)), read_all, runs)
    print("%s: %d files, %d directory listings, %d links read" % (name, nfiles, ndirs, nlinks))
    return t_facts, t_floor, ratio


#: the demo snapshots (tools/make_fixtures.py), each measured
DEMO = ("incident", "healthy", "intel", "hostile")


def subsystem_rows(snapshot, runs):
    """``[(subsystem, gather CPU s, bare read CPU s)]``: each gatherer of ``snapshot`` against the bare read
    of the files it read, interleaved, medians."""
    rows = []
    for name, gather in GATHERERS:
        recorder = Recorder()
        gather(Root(snapshot, recorder=recorder))
        read_all = floor_reader(snapshot, recorder)[0]
        read_all()
        t_gather, t_floor, unused_ratio = paired(lambda: gather(Root(snapshot)), read_all, runs)
        rows.append((name, t_gather, t_floor))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--keep", help="generate the large host into this directory and keep it")
    args = parser.parse_args()
    workdir = args.keep or tempfile.mkdtemp(prefix="gpuhost-bench-")
    large = large_host(workdir)
    snapshots = demo_snapshots(workdir, DEMO)

    facts = gather_facts(Root(large))
    cpu, pci, numa = facts["cpu"] or {}, facts["pci"] or {}, facts["numa"] or {}
    print("synthetic host: %s CPUs, %s NUMA nodes, %s PCI devices, %s GPUs (nvidia-smi)" % (
        cpu.get("threads"), numa.get("node_count"), pci.get("count"), len((facts["nvidia"] or {}).get("gpus") or [])))
    pairs = [("768-CPU snapshot", snapshot_pair("768-CPU snapshot", large, args.runs))]
    for name in DEMO:
        label = "%s snapshot" % name
        pairs.append((label, snapshot_pair(label, os.path.join(snapshots, name), args.runs)))
    per_subsystem = subsystem_rows(os.path.join(snapshots, "incident"), args.runs)
    t_live = median_time(lambda: gather_facts(Root("/", which=shutil.which,
                                                   run_command=lambda argv: (127, "", "not run in benchmark"))),
                         args.runs)
    print()
    print("load average: %.2f" % os.getloadavg()[0])
    print("%-40s %12s %12s %10s" % ("interleaved, median of %d (CPU ms)" % args.runs, "host_facts", "bare read", "ratio"))
    for name, (t_facts, t_floor, ratio) in pairs:
        print("%-40s %12.1f %12.1f %10.2f" % (name, t_facts * 1000, t_floor * 1000, ratio))
    rows = [("host_facts (this machine, live /, wall)", t_live, None)]
    for argv in (["lspci", "-vvv"], ["numastat", "-m"], ["cpupower", "frequency-info"], ["cpupower", "idle-info"]):
        seconds, why = tool_time(argv)
        rows.append(("%s (this machine, wall)" % " ".join(argv), seconds, why))
    print()
    print("%-40s %12s %12s %10s" % ("incident snapshot, by subsystem (CPU ms)", "gather", "bare read", "excess"))
    for name, t_gather, t_floor in per_subsystem:
        print("%-40s %12.2f %12.2f %10.2f" % (name, t_gather * 1000, t_floor * 1000, (t_gather - t_floor) * 1000))
    print()
    for name, seconds, why in rows:
        print("%-40s %12s" % (name, "%.1f ms" % (seconds * 1000) if seconds is not None else why))
    print()
    for name, (unused_facts, unused_floor, ratio) in pairs:
        print("ratio host_facts / bare read, %s = %.2f (target <= 1.5): %s"
              % (name, ratio, "OK" if ratio <= 1.5 else "OVER TARGET"))
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
