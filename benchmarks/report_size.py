"""Benchmark: the report files' bytes per host, the report writer alone (issue 20).

The hosts are the demo incident, healthy and intel snapshots cycled (as ``benchmarks/fleet.py``
builds a fleet), each as ``audit.yml`` judged it: their parts of the golden ``report.json``
(tests/fixtures/golden/, written by the audit of the demo snapshots), as ``baseline_evaluate``
registers them (no rule text), copied under ``node-0001``... The writer then runs as ``baseline_report`` runs it (``report.build_stored``, then
``report.dumps_document`` and ``write_stored``) into a temporary directory, and each file's size is printed, in all and
per host, with the writer's time and the process's peak RSS. No Ansible run: the figures of the
whole audit are ``benchmarks/fleet.py``'s.

Target: all report files together <= 60 kB per host at 1,000 hosts.

Usage: python benchmarks/report_size.py [--hosts 300] [--formats json,md,html,junit,prom] [--keep]
"""
import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time

from common import REPO, import_collection, tree_size

GOLDEN = os.path.join(REPO, "tests", "fixtures", "golden", "report.json")
SNAPSHOTS = ("demo-incident", "demo-healthy", "demo-intel")


def fleet_hosts(count):
    """``{name: host part}`` of ``count`` hosts cycling through :data:`SNAPSHOTS`, each a copy of its
    own as ``baseline_evaluate`` registers it (findings without their rule text: ``compact_findings``)."""
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.findings import compact_findings
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import expand_document
    with open(GOLDEN) as handle:
        golden = expand_document(json.load(handle))
    hosts = {}
    for index in range(count):
        part = golden["hosts"][SNAPSHOTS[index % len(SNAPSHOTS)]]
        hosts["node-%04d" % (index + 1)] = json.loads(json.dumps(dict(part, findings=compact_findings(part["findings"]))))
    return hosts, golden


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=300)
    parser.add_argument("--formats", default="json,md,html,junit,prom")
    parser.add_argument("--keep", action="store_true", help="keep the report directory and print it")
    args = parser.parse_args()
    import_collection()
    from ansible_collections.gpuhost.baseline.plugins.action.baseline_report import with_rule_text
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_load import load_catalogue
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import build_stored, dumps_document
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report_dir import MANIFEST, write_stored
    hosts, golden = fleet_hosts(args.hosts)
    work = tempfile.mkdtemp(prefix="gpuhost-report-size-")
    reports = os.path.join(work, "reports")
    start = time.perf_counter()
    cpu = time.process_time()
    # as baseline_report does: the rule text put back into a host's findings when build_stored reads it,
    # the document built as report.json stores it
    report = build_stored(with_rule_text(hosts, load_catalogue()), generated=golden["generated"],
                          collection_version=golden["collection_version"])
    # as baseline_report does: the built document dropped once report.json's text is made
    text = dumps_document(report)
    del report
    write_stored(text, reports, args.formats.split(","))
    took, cpu = time.perf_counter() - start, time.process_time() - cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print("%d hosts (%s cycled): build_stored, dumps_document, write_stored %.1f s wall, %.1f s CPU; peak RSS %.0f MiB"
          % (args.hosts, ", ".join(SNAPSHOTS), took, cpu, peak))
    total = 0
    for name in sorted(os.listdir(reports)):
        if name == MANIFEST:
            continue
        path = os.path.join(reports, name)
        size, count = tree_size(path) if os.path.isdir(path) else (os.path.getsize(path), 1)
        total += size
        label = name + ("/" if os.path.isdir(path) else "")
        files = " (%d files)" % count if count > 1 else ""
        print("  %-14s %10.2f MB %8.1f kB/host%s" % (label, size / 1e6, size / 1e3 / args.hosts, files))
    print("  %-14s %10.2f MB %8.1f kB/host (target <= 60 kB at 1,000 hosts)" % ("all", total / 1e6, total / 1e3 / args.hosts))
    if args.keep:
        print("kept: %s" % work)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
