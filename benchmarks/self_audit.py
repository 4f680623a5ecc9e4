"""Benchmark: CPU seconds of one self-audit run on the 768-CPU synthetic host of benchmarks/facts.py.

The self_audit role's timer runs /usr/local/sbin/gpuhost-self-audit (a zip application built by
roles/self_audit/files/make_bundle.py) on each host. This builds that bundle from the checkout,
generates the synthetic host (2 sockets x 192 cores x 2 threads, 8 NUMA nodes, 64 PCI devices with
8 GPUs behind switches: tools/make_fixtures.py --only large), and runs the bundle over it as the
timer would, each run a fresh Python process, measuring the process's user + system CPU time
(getrusage of the child) and its wall time:

  * cold: the first run, which unpacks the bundle and parses and schema-checks the catalogue;
  * warm: the runs after it (what every timer run costs), median of N;
  * in-process split of one warm run: gather facts, evaluate, write (report.json and textfile).

Usage: python benchmarks/self_audit.py [--runs 5] [--keep DIR]
"""
import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from common import REPO, import_collection, large_host

import_collection()

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.gather import gather_facts  # noqa: E402
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root  # noqa: E402
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge import self_audit  # noqa: E402


def child_run(argv, env):
    """``(cpu seconds, wall seconds, completed process)`` of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                          check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, done


def split(large, workdir):
    """Seconds of each stage of one in-process run (process CPU time)."""
    clock = time.process_time
    config = {"host": "large", "report_dir": os.path.join(workdir, "split-r"), "textfile_dir": os.path.join(workdir, "split-t")}
    t0 = clock()
    gather_facts(Root(large))
    t1 = clock()
    name, part = self_audit.audit_host(config, root=large)  # gathers again, then evaluates
    t2 = clock()
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import build_report
    report = build_report({name: part}, profile=part.get("profile"))
    self_audit.write_outputs(report, name, config["report_dir"], config["textfile_dir"], time.monotonic(), clock())
    t3 = clock()
    return {"gather": t1 - t0, "evaluate": (t2 - t1) - (t1 - t0), "write": t3 - t2}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--keep", help="generate the large host into this directory and keep it")
    args = parser.parse_args()
    workdir = args.keep or tempfile.mkdtemp(prefix="gpuhost-bench-")
    large = large_host(workdir, quiet=True)
    bundle = os.path.join(workdir, "gpuhost-self-audit")
    cache = os.path.join(workdir, "cache")
    shutil.rmtree(cache, ignore_errors=True)
    subprocess.run([sys.executable, os.path.join(REPO, "roles", "self_audit", "files", "make_bundle.py"), REPO, bundle],
                   check=True, stdout=subprocess.DEVNULL)
    env = dict(os.environ, GPUHOST_SELF_AUDIT_CACHE=cache, XDG_CACHE_HOME=cache)
    argv = [sys.executable, bundle, "--config", "none", "--root", large, "--host", "large",
            "--report-dir", os.path.join(workdir, "r"), "--textfile-dir", os.path.join(workdir, "t")]
    runs = []
    for index in range(args.runs + 1):
        cpu, wall, done = child_run(argv, env)
        if done.returncode != 0:
            sys.exit("self-audit run %d failed (exit %d): %s" % (index, done.returncode, done.stderr.strip()))
        runs.append((cpu, wall))
    with open(os.path.join(workdir, "r", "report.json")) as handle:
        totals = json.load(handle)["totals"]
    prom = os.path.getsize(os.path.join(workdir, "t", "gpuhost_baseline.prom"))
    print("synthetic host: %s findings (%d fail); textfile %d bytes" % (
        sum(totals[s] for s in ("pass", "fail", "unknown", "waived", "not_applicable")), totals["fail"], prom))
    print("python: %s" % sys.version.split()[0])
    print()
    print("%-52s %10s %10s" % ("self-audit run (fresh process each)", "CPU s", "wall s"))
    print("%-52s %10.3f %10.3f" % ("cold (unpack bundle, parse + check catalogue)", runs[0][0], runs[0][1]))
    warm = runs[1:]
    print("%-52s %10.3f %10.3f" % ("warm, median of %d (every timer run)" % len(warm),
                                   statistics.median(c for c, w in warm), statistics.median(w for c, w in warm)))
    print("%-52s %10.3f %10s" % ("warm, max", max(c for c, w in warm), ""))
    stages = split(large, workdir)
    print()
    print("in-process split of one run (CPU s): gather %.3f, evaluate %.3f, write report.json + textfile %.3f"
          % (stages["gather"], stages["evaluate"], stages["write"]))
    per_day = statistics.median(c for c, w in warm) * 24
    print("at the default interval (1 h): %.1f CPU s per day per host" % per_day)
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
