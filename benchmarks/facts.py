"""Benchmark: host_facts on a synthetic 768-CPU host against the floor of merely reading its files.

Prints, from one run:
  * host_facts: the full gather over a generated snapshot (2 sockets x 192 cores x 2 threads,
    8 NUMA nodes, 64 PCI devices with 8 GPUs behind switches), median of N runs;
  * floor: open+read of exactly the files host_facts read (learned by recording one gather) plus
    the directory listings it made, median of N runs;
  * the same gather on this machine's live /, and the time of lspci -vvv, numastat -m,
    cpupower frequency-info and cpupower idle-info here, for scale.
Target (issue 2): host_facts <= 2x floor.

Usage: python benchmarks/facts.py [--runs 7] [--keep DIR]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time

from common import import_collection, large_host

import_collection()

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.gather import gather_facts  # noqa: E402
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.root import Recorder, Root  # noqa: E402


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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--keep", help="generate the large host into this directory and keep it")
    args = parser.parse_args()
    workdir = args.keep or tempfile.mkdtemp(prefix="gpuhost-bench-")
    large = large_host(workdir)

    recorder = Recorder()
    facts = gather_facts(Root(large, recorder=recorder))
    cpu, pci, numa = facts["cpu"] or {}, facts["pci"] or {}, facts["numa"] or {}
    print("synthetic host: %s CPUs, %s NUMA nodes, %s PCI devices, %s GPUs (nvidia-smi)" % (
        cpu.get("threads"), numa.get("node_count"), pci.get("count"), len((facts["nvidia"] or {}).get("gpus") or [])))
    read_all, nfiles, ndirs, nlinks = floor_reader(large, recorder)
    print("files read by host_facts: %d files, %d directory listings, %d links" % (nfiles, ndirs, nlinks))

    read_all()  # warm the page cache for both sides alike
    t_facts = median_time(lambda: gather_facts(Root(large)), args.runs)
    t_floor = median_time(read_all, args.runs)
    t_live = median_time(lambda: gather_facts(Root("/", which=shutil.which,
                                                   run_command=lambda argv: (127, "", "not run in benchmark"))),
                         args.runs)
    rows = [("host_facts (768-CPU snapshot)", t_facts, None), ("floor: read the same files", t_floor, None),
            ("host_facts (this machine, live /)", t_live, None)]
    for argv in (["lspci", "-vvv"], ["numastat", "-m"], ["cpupower", "frequency-info"], ["cpupower", "idle-info"]):
        seconds, why = tool_time(argv)
        rows.append(("%s (this machine)" % " ".join(argv), seconds, why))
    print()
    print("%-40s %12s" % ("measurement (median of %d)" % args.runs, "ms"))
    for name, seconds, why in rows:
        print("%-40s %12s" % (name, "%.1f" % (seconds * 1000) if seconds is not None else why))
    ratio = t_facts / t_floor if t_floor else float("inf")
    print()
    print("ratio host_facts / floor = %.2f (target <= 2.0): %s" % (ratio, "OK" if ratio <= 2.0 else "OVER TARGET"))
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
