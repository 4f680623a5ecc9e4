# -*- coding: utf-8 -*-
"""Bomb corpus: hostile contents of a report directory (issue 18, items 1, 3 and 8).

Each case writes a report set into a directory prepared here, in a child process bounded by
``helpers.bounded`` (10 s, 512 MiB): a FIFO or a link to ``/dev/zero`` in place of ``metrics.prom``
(read to keep the hosts a ``--limit`` run skipped), a sparse file of gigabytes there, the largest
accepted fleet file, a manifest that is a bomb, a deep tree and tens of thousands of foreign files,
and a disk that fills up mid-set (``RLIMIT_FSIZE``: a real ``EFBIG`` from the kernel on a write).
"""
import json
import os
import subprocess

import pytest

from helpers import bounded

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import metrics, report_dir
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import build_report

KIND = "report dir contents"
MANIFEST = ".gpuhost-report.json"
GENERATED = "2025-06-01T12:00:00+00:00"

#: the child: write a set of ``ARGS[1]`` hosts into ``ARGS[0]``, report the outcome
WRITE = bounded.case("""
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import report_dir
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import ReportError, build_report

def finding(status):
    return {"id": "PCI-001", "title": "t", "area": "pci", "severity": "high", "status": status, "subject": None,
            "expected": 4096, "observed": 512, "message": "m", "fix": "f", "reboot_required": False}

hosts = dict(("gpu-%02d" % i, {"findings": [finding("fail" if i % 2 else "pass")]}) for i in range(int(ARGS[1])))
rep = build_report(hosts, profile="auto", generated="2025-06-01T12:00:00+00:00", collection_version="child")
try:
    paths = report_dir.write_reports(rep, ARGS[0])
    report({"ok": sorted(paths)})
except ReportError as exc:
    report({"error": str(exc)})
""")


def finding(status):
    return {"id": "PCI-001", "title": "t", "area": "pci", "severity": "high", "status": status, "subject": None,
            "expected": 4096, "observed": 512, "message": "m", "fix": "f", "reboot_required": False}


def fleet(count, mark="parent"):
    hosts = dict(("gpu-%02d" % i, {"findings": [finding("fail" if i % 2 else "pass")]}) for i in range(count))
    return build_report(hosts, profile="auto", generated=GENERATED, collection_version=mark)


def reports(tmp_path, count=4):
    directory = str(tmp_path / "reports")
    report_dir.write_reports(fleet(count), directory)
    return directory


def write(directory, count=4):
    return bounded.run_case(KIND, WRITE, directory, count)


def refused(outcome, *words):
    message = outcome.result.get("error")
    assert message, outcome
    assert "\n" not in message and len(message) < 1500, message
    for word in words:
        assert word in message, (word, message)
    return message


# --- metrics.prom, read to keep the hosts a --limit run skipped ---------------------------------

def test_metrics_prom_as_a_fifo_is_refused_without_hanging(tmp_path):
    directory = reports(tmp_path)
    os.unlink(os.path.join(directory, "metrics.prom"))
    os.mkfifo(os.path.join(directory, "metrics.prom"))
    refused(write(directory), "metrics.prom", "FIFO")
    assert os.path.exists(os.path.join(directory, "metrics.prom"))  # left for the operator to look at


def test_metrics_prom_as_a_link_to_dev_zero_is_refused(tmp_path):
    directory = reports(tmp_path)
    os.unlink(os.path.join(directory, "metrics.prom"))
    os.symlink("/dev/zero", os.path.join(directory, "metrics.prom"))
    refused(write(directory), "metrics.prom", "link")


def test_a_sparse_metrics_prom_of_gigabytes_is_refused_reading_at_most_the_cap(tmp_path):
    directory = reports(tmp_path)
    with open(os.path.join(directory, "metrics.prom"), "wb") as handle:
        handle.truncate(8 << 30)
    refused(write(directory), "metrics.prom", "larger than")


MERGE = bounded.case("""
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import report_dir
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import build_report

finding = {"id": "PCI-001", "title": "t", "area": "pci", "severity": "high", "status": "fail", "subject": None,
           "expected": 4096, "observed": 512, "message": "m", "fix": "f", "reboot_required": False}
rep = build_report({"gpu-00": {"findings": [finding]}}, profile="auto", generated="2025-06-01T12:00:00+00:00")
paths = report_dir.write_reports(rep, ARGS[0], ["prom"])
usage = resource.getrusage(resource.RUSAGE_SELF)
report({"ok": sorted(paths), "cpu": usage.ru_utime + usage.ru_stime, "bytes": os.path.getsize(paths["prom"])})
""")


def test_the_largest_accepted_metrics_prom_merges_within_the_limits(tmp_path):
    # not a bomb but the worst input under the cap: metrics.EXISTING_CAP bytes of the shortest
    # line the merge keeps, each a host of its own with a last run in 2100 (about 480,000 hosts)
    directory = reports(tmp_path)
    path = os.path.join(directory, "metrics.prom")
    line = 'gpuhost_baseline_last_run_timestamp_seconds{host="h%07d"} 4102444800\n'
    count = metrics.EXISTING_CAP // len(line % 0)
    with open(path, "w", encoding="utf-8") as handle:
        handle.writelines(line % number for number in range(count))
    # its wall time depends on the runner's load (on 2 shared cores at load 5, 6.7 s of CPU took
    # 15 s): the CPU time is held to the 10 s, the wall time to 30 s
    outcome = bounded.run_case(KIND, MERGE, directory, seconds=30)
    assert outcome.result.get("ok") == ["json", "prom"], outcome
    assert outcome.result["cpu"] <= bounded.SECONDS, outcome
    assert outcome.result["bytes"] > metrics.EXISTING_CAP * 0.99, outcome


# --- the manifest (.gpuhost-report.json) --------------------------------------------------------

@pytest.mark.parametrize("shape", ["nested", "sparse", "fifo", "zero", "wrong"])
def test_a_manifest_bomb_is_refused(tmp_path, shape):
    directory = reports(tmp_path)
    path = os.path.join(directory, MANIFEST)
    os.unlink(path)
    if shape == "nested":
        with open(path, "w") as handle:
            handle.write("[" * 1000000)
    elif shape == "sparse":
        with open(path, "wb") as handle:
            handle.truncate(4 << 30)
    elif shape == "fifo":
        os.mkfifo(path)
    elif shape == "zero":
        os.symlink("/dev/zero", path)
    else:
        with open(path, "w") as handle:
            json.dump({"files": {"hosts/x.html": "not an entry"}, "complete": "yes"}, handle)
    refused(write(directory), MANIFEST)


# --- trees and crowds ---------------------------------------------------------------------------

def _deep(top, depth):
    fd = os.open(top, os.O_RDONLY)
    try:
        for unused in range(depth):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        with open(os.open("page.html", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as handle:
            handle.write("deep")
    finally:
        os.close(fd)


@pytest.fixture
def deep_tmp(tmp_path):
    """``tmp_path``, emptied with ``rm -rf`` afterwards: pytest's own clean-up (shutil.rmtree)
    recurses once per level and cannot remove a 3,000-deep tree."""
    yield tmp_path
    subprocess.run(["rm", "-rf", "--", str(tmp_path)], check=False)


def test_a_deep_tree_in_hosts_is_neither_walked_nor_removed(deep_tmp):
    tmp_path = deep_tmp
    directory = reports(tmp_path, 25)
    _deep(os.path.join(directory, "hosts"), 3000)
    outcome = write(directory, 4)  # back on one page: our pages go, the tree stays
    assert outcome.result.get("ok"), outcome
    assert os.listdir(os.path.join(directory, "hosts")) == ["d"]


def test_a_deep_tree_without_a_manifest_is_refused(deep_tmp):
    tmp_path = deep_tmp
    directory = str(tmp_path / "reports")
    os.makedirs(os.path.join(directory, "hosts"))
    _deep(os.path.join(directory, "hosts"), 3000)
    refused(write(directory), "hosts")


def test_thousands_of_foreign_files_are_refused_quickly(tmp_path):
    directory = str(tmp_path / "reports")
    os.makedirs(directory)
    for number in range(20000):
        open(os.path.join(directory, "f%05d.html" % number), "w").close()
    message = refused(write(directory), "more")
    assert message.count(".html") <= 6


def test_thousands_of_foreign_files_in_hosts_survive(tmp_path):
    directory = reports(tmp_path, 25)
    hosts = os.path.join(directory, "hosts")
    for number in range(20000):
        open(os.path.join(hosts, "f%05d.html" % number), "w").close()
    outcome = write(directory, 4)
    assert outcome.result.get("ok"), outcome
    assert len(os.listdir(hosts)) == 20000


# --- a disk that fills up mid-set ---------------------------------------------------------------

FULL = bounded.case("""
import hashlib, signal
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import report_dir
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import ReportError, build_report

def tree(top):
    out = {}
    for root, dirs, names in os.walk(top):
        for name in names:
            with open(os.path.join(root, name), "rb") as handle:
                out[os.path.relpath(os.path.join(root, name), top)] = hashlib.sha256(handle.read()).hexdigest()
    return out

def finding(status, message):
    return {"id": "PCI-001", "title": "t", "area": "pci", "severity": "high", "status": status, "subject": None,
            "expected": 4096, "observed": 512, "message": message, "fix": "f", "reboot_required": False}

def fleet(count, mark, message):
    hosts = dict(("gpu-%02d" % i, {"findings": [finding("fail", message)]}) for i in range(count))
    return build_report(hosts, profile="auto", generated="2025-06-01T12:00:00+00:00", collection_version=mark)

report_dir.write_reports(fleet(25, "old", "m"), ARGS[0])
before = tree(ARGS[0])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
resource.setrlimit(resource.RLIMIT_FSIZE, (int(ARGS[1]), int(ARGS[1])))
try:
    report_dir.write_reports(fleet(30, "new", "x" * 2000), ARGS[0])
    report({"ok": True})
except ReportError as exc:
    report({"error": str(exc), "same": tree(ARGS[0]) == before})
""")


@pytest.mark.parametrize("limit", [0, 4096, 60000])
def test_a_disk_full_mid_set_keeps_the_previous_set(tmp_path, limit):
    # RLIMIT_FSIZE: the kernel refuses a write past ``limit`` bytes of a file, as a full disk would
    outcome = bounded.run_case(KIND, FULL, str(tmp_path / "reports"), limit)
    assert outcome.result.get("error") and outcome.result["same"] is True, outcome
    assert "File too large" in outcome.result["error"]
