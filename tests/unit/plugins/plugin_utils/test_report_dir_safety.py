# -*- coding: utf-8 -*-
"""The report directory under a tool that runs as root (issue 18, items 1, 3 and the report-dir part of 8).

* only files this tool wrote (named in the manifest ``.gpuhost-report.json`` of the previous run) are
  removed; ``hosts/`` is never followed when it is a link; a directory holding other files and no
  manifest, and a system directory, are refused before anything is written there;
* the report set is written to temporary names first and renamed only when every file exists: a
  failure (a full disk, a renderer bug) leaves the previous set exactly as it was and no temporary file;
* errors are :class:`~plugin_utils.report.report.ReportError` with a one-line message naming the directory.

The FIFO, ``/dev/zero`` and bomb cases of the report directory are in ``tests/fuzz/test_fuzz_report_dir.py``.
"""

import errno
import hashlib
import json
import os

import pytest

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base import files
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import history, report_dir
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import ReportError, build_report

GENERATED = "2025-06-01T12:00:00+00:00"
MANIFEST = ".gpuhost-report.json"
TOP = ("report.json", "report.md", "report.html", "junit.xml", "metrics.prom", "findings.csv")


def finding(rule="PCI-001", status="fail"):
    return {"id": rule, "title": rule + " title", "area": "pci", "severity": "high", "status": status,
            "subject": None, "expected": 4096, "observed": 512, "message": "m", "fix": "f",
            "reboot_required": False}


def fleet(count, mark="0.1.0", prefix="gpu"):
    """``count`` hosts, one failing finding each; ``mark`` is stamped in every view."""
    hosts = dict(("%s-%02d" % (prefix, i), {"findings": [finding(status="fail" if i % 2 else "pass")]})
                 for i in range(count))
    return build_report(hosts, profile="auto", generated=GENERATED, collection_version=mark)


def tree(directory):
    """``{relative path: bytes}`` of every file below ``directory`` (links as ``link -> target``)."""
    out = {}
    for root, dirs, names in os.walk(directory):
        for name in names + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, directory)
            if os.path.islink(path):
                out[rel] = "link -> %s" % os.readlink(path)
            else:
                with open(path, "rb") as handle:
                    out[rel] = handle.read()
    return out


# --- only files this tool wrote are removed -----------------------------------------------------

def test_a_foreign_page_in_hosts_survives_a_small_fleet(tmp_path):
    report_dir.write_reports(fleet(4), str(tmp_path))
    (tmp_path / "hosts").mkdir()
    (tmp_path / "hosts" / "notes.html").write_text("mine")
    (tmp_path / "hosts" / "runbook.md").write_text("mine too")
    report_dir.write_reports(fleet(4), str(tmp_path))
    assert (tmp_path / "hosts" / "notes.html").read_text() == "mine"
    assert (tmp_path / "hosts" / "runbook.md").read_text() == "mine too"


def test_a_foreign_page_in_hosts_survives_a_fleet_with_pages(tmp_path):
    report_dir.write_reports(fleet(25), str(tmp_path))
    (tmp_path / "hosts" / "notes.html").write_text("mine")
    report_dir.write_reports(fleet(23), str(tmp_path))  # gpu-23 and gpu-24 are gone: their pages go
    names = sorted(os.listdir(str(tmp_path / "hosts")))
    assert "notes.html" in names and "gpu-24.html" not in names and "gpu-22.md" in names
    report_dir.write_reports(fleet(4), str(tmp_path))  # back on one page: every page of ours goes
    assert os.listdir(str(tmp_path / "hosts")) == ["notes.html"]
    assert (tmp_path / "hosts" / "notes.html").read_text() == "mine"


@pytest.mark.parametrize("count", [4, 25])
def test_hosts_as_a_link_out_of_the_directory_is_refused_and_never_followed(tmp_path, count):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "index.html").write_text("keep")
    (outside / "gpu-01.md").write_text("keep")
    reports = tmp_path / "reports"
    report_dir.write_reports(fleet(count), str(reports))
    before = tree(str(reports))
    if (reports / "hosts").exists():
        for name in os.listdir(str(reports / "hosts")):
            os.unlink(str(reports / "hosts" / name))
        os.rmdir(str(reports / "hosts"))
        before = tree(str(reports))
    os.symlink(str(outside), str(reports / "hosts"))
    with pytest.raises(ReportError) as info:
        report_dir.write_reports(fleet(count, mark="next"), str(reports))
    message = str(info.value)
    assert "hosts" in message and "link" in message and "\n" not in message
    assert sorted(os.listdir(str(outside))) == ["gpu-01.md", "index.html"]
    assert (outside / "index.html").read_text() == "keep" and (outside / "gpu-01.md").read_text() == "keep"
    before["hosts"] = "link -> %s" % outside
    assert tree(str(reports)) == before  # nothing replaced either


def test_hosts_as_a_file_is_refused(tmp_path):
    report_dir.write_reports(fleet(4), str(tmp_path))
    (tmp_path / "hosts").write_text("not a directory")
    with pytest.raises(ReportError, match="hosts"):
        report_dir.write_reports(fleet(25), str(tmp_path))
    assert (tmp_path / "hosts").read_text() == "not a directory"


def test_a_forged_manifest_cannot_name_a_file_outside_hosts(tmp_path):
    reports = tmp_path / "reports"
    report_dir.write_reports(fleet(25), str(reports))
    (tmp_path / "victim.html").write_text("keep")
    (reports / "notes.md").write_text("keep")
    manifest = json.loads((reports / MANIFEST).read_text())
    for name in ("hosts/../../victim.html", "hosts/../notes.md", "/etc/passwd", "hosts/.hidden.html",
                 "../victim.html", "hosts/a/b.html"):
        manifest["files"][name] = {"bytes": 1, "sha256": "0" * 64}
    (reports / MANIFEST).write_text(json.dumps(manifest))
    report_dir.write_reports(fleet(4), str(reports))
    assert (tmp_path / "victim.html").read_text() == "keep"
    assert (reports / "notes.md").read_text() == "keep"


# --- what is refused ----------------------------------------------------------------------------

def test_a_directory_with_foreign_files_and_no_manifest_is_refused(tmp_path):
    site = tmp_path / "www"
    site.mkdir()
    (site / "index.html").write_text("<h1>site</h1>")
    (site / "app.conf").write_text("x=1")
    (site / "junit.xml").write_text("<testsuites/>")  # someone else's junit.xml is not overwritten
    before = tree(str(site))
    with pytest.raises(ReportError) as info:
        report_dir.write_reports(fleet(4), str(site))
    message = str(info.value)
    assert str(site) in message and "index.html" in message and "app.conf" in message
    assert MANIFEST in message and "\n" not in message
    assert tree(str(site)) == before  # not even a temporary file


def test_many_foreign_files_are_named_a_few_and_counted(tmp_path):
    for number in range(40):
        (tmp_path / ("photo-%02d.jpg" % number)).write_text("x")
    with pytest.raises(ReportError) as info:
        report_dir.write_reports(fleet(4), str(tmp_path))
    message = str(info.value)
    assert message.count("photo-") <= 5 and "more" in message and len(message) < 1200


def test_an_empty_or_new_directory_is_accepted_and_gets_the_manifest(tmp_path):
    (tmp_path / "empty").mkdir()
    report_dir.write_reports(fleet(4), str(tmp_path / "new" / "reports"))
    report_dir.write_reports(fleet(4), str(tmp_path / "empty"))
    for directory in (tmp_path / "new" / "reports", tmp_path / "empty"):
        assert MANIFEST in os.listdir(str(directory))


def test_a_directory_of_an_earlier_version_is_accepted(tmp_path):
    # reports of an earlier version (no manifest): only the tool's names, the host pages, a history
    # directory and the temporary file of a killed run
    for name in TOP:
        (tmp_path / name).write_text("old")
    (tmp_path / ".report.html.k2j4h1_a").write_text("half")
    (tmp_path / "hosts").mkdir()
    (tmp_path / "hosts" / "old-host.html").write_text("old page")
    (tmp_path / "history").mkdir()
    (tmp_path / "history" / "gpu-01.jsonl").write_text("{}\n")
    report_dir.write_reports(fleet(4), str(tmp_path))
    assert (tmp_path / "report.md").read_text() != "old"
    assert MANIFEST in os.listdir(str(tmp_path))
    # nothing of the earlier version is removed: no manifest says it was written by this tool
    assert (tmp_path / "hosts" / "old-host.html").read_text() == "old page"
    assert (tmp_path / "history" / "gpu-01.jsonl").read_text() == "{}\n"


@pytest.mark.parametrize("host", ["_gpu", "-x", "\x1b[31mgpu", "a/b", "gpu-01"])
def test_a_history_directory_holds_every_name_the_history_writes(tmp_path, host):
    # the self-audit keeps history/ inside its report directory: whatever host name the history
    # rewrites (a leading "_" or "-" too) and a refused file set aside do not make it foreign
    (tmp_path / "history").mkdir()
    name = history.file_name(host)
    (tmp_path / "history" / name).write_text("{}\n")
    (tmp_path / "history" / ("." + name + history.REFUSED_SUFFIX)).write_text("garbage")
    report_dir.write_reports(fleet(1), str(tmp_path))
    assert MANIFEST in os.listdir(str(tmp_path))


def test_a_history_directory_with_another_file_is_foreign(tmp_path):
    (tmp_path / "history").mkdir()
    (tmp_path / "history" / "notes.txt").write_text("mine")
    with pytest.raises(report_dir.ReportDirError, match="history/"):
        report_dir.write_reports(fleet(1), str(tmp_path))


def test_foreign_files_added_after_a_run_are_left_alone(tmp_path):
    report_dir.write_reports(fleet(4), str(tmp_path))
    (tmp_path / "README.txt").write_text("ours")
    report_dir.write_reports(fleet(4, mark="next"), str(tmp_path))  # the manifest marks the directory
    assert (tmp_path / "README.txt").read_text() == "ours"


def test_a_system_directory_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    system = tmp_path / "sys"
    system.mkdir()
    link = tmp_path / "link"
    os.symlink(str(system), str(link))
    monkeypatch.setattr(report_dir, "SYSTEM_DIRECTORIES", (str(system),), raising=False)
    for directory in (system, link):
        with pytest.raises(ReportError) as info:
            report_dir.write_reports(fleet(4), str(directory))
        assert "system directory" in str(info.value) and str(directory) in str(info.value)
    assert os.listdir(str(system)) == []


def _no_writes(monkeypatch):
    """Make any write (the earlier atomic_write or the new write_temporary) an error, so a test that
    points the writer at a real system directory can never leave a file there."""
    def refuse(*args, **kwargs):
        raise AssertionError("a file was about to be written: %r" % (args[:1],))

    monkeypatch.setattr(files, "write_temporary", refuse)
    monkeypatch.setattr(files, "atomic_write", refuse)
    monkeypatch.setattr(report_dir, "atomic_write", refuse, raising=False)
    monkeypatch.setattr(report_dir, "write_temporary", refuse, raising=False)


@pytest.mark.parametrize("directory", ["/etc", "/", "/usr", "/var", "/root", "/etc/../etc/"])
def test_real_system_directories_are_refused(directory, monkeypatch):
    _no_writes(monkeypatch)
    before = sorted(os.listdir(directory))
    with pytest.raises(ReportError) as info:
        report_dir.write_reports(fleet(4), directory)
    assert "system directory" in str(info.value)
    assert sorted(os.listdir(directory)) == before


def test_a_link_to_a_system_directory_is_refused(tmp_path, monkeypatch):
    _no_writes(monkeypatch)
    os.symlink("/etc", str(tmp_path / "reports"))
    with pytest.raises(ReportError, match="system directory"):
        report_dir.write_reports(fleet(4), str(tmp_path / "reports"))


def test_a_file_in_place_of_the_directory_is_a_report_error(tmp_path):
    (tmp_path / "reports").write_text("a file")
    with pytest.raises(ReportError) as info:
        report_dir.write_reports(fleet(4), str(tmp_path / "reports"))
    assert "not a directory" in str(info.value)


def test_a_directory_in_place_of_a_report_file_is_refused_before_anything_changes(tmp_path):
    report_dir.write_reports(fleet(25), str(tmp_path))
    os.unlink(str(tmp_path / "junit.xml"))
    (tmp_path / "junit.xml").mkdir()
    before = tree(str(tmp_path))
    with pytest.raises(ReportError, match="junit.xml"):
        report_dir.write_reports(fleet(25, mark="next"), str(tmp_path))
    assert tree(str(tmp_path)) == before


def test_a_damaged_manifest_is_refused_clearly(tmp_path):
    report_dir.write_reports(fleet(4), str(tmp_path))
    (tmp_path / MANIFEST).write_text("[" * 100000)
    with pytest.raises(ReportError) as info:
        report_dir.write_reports(fleet(4), str(tmp_path))
    assert MANIFEST in str(info.value) and len(str(info.value)) < 1000


# --- the set is atomic as a whole ---------------------------------------------------------------

class DiskFull:
    """``files.write_temporary`` that fails with ENOSPC from its ``after``-th call on."""

    def __init__(self, after):
        self.after = after
        self.calls = 0
        self.real = files.write_temporary

    def __call__(self, path, text, sync=True):
        self.calls += 1
        if self.calls > self.after:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self.real(path, text, sync)


@pytest.mark.parametrize("after", [0, 1, 3, 5, 20, 40, 65])  # 65: the first manifest
def test_a_full_disk_mid_set_leaves_the_previous_set_entirely(tmp_path, monkeypatch, after):
    report_dir.write_reports(fleet(25), str(tmp_path))
    before = tree(str(tmp_path))
    full = DiskFull(after)
    monkeypatch.setattr(files, "write_temporary", full)
    with pytest.raises(ReportError) as info:
        report_dir.write_reports(fleet(30, mark="next"), str(tmp_path))
    assert full.calls == after + 1
    message = str(info.value)
    assert "No space left on device" in message and str(tmp_path) in message and "\n" not in message
    assert tree(str(tmp_path)) == before  # no new report.json, no temporary file, no new page


def test_a_full_disk_at_the_last_manifest_leaves_the_new_set_marked_incomplete(tmp_path, monkeypatch):
    report_dir.write_reports(fleet(25), str(tmp_path))
    monkeypatch.setattr(files, "write_temporary", DiskFull(67))  # 66 files and the first manifest
    with pytest.raises(ReportError) as info:
        report_dir.write_reports(fleet(30, mark="next"), str(tmp_path))
    assert "complete" in str(info.value)
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    assert manifest["complete"] is False and len(manifest["files"]) == 66
    monkeypatch.undo()
    report_dir.write_reports(fleet(4), str(tmp_path))  # the next run finishes, and knows every page
    assert not (tmp_path / "hosts").exists()
    assert json.loads((tmp_path / MANIFEST).read_text())["complete"] is True


def test_a_run_killed_between_renames_is_cleaned_up_by_the_next(tmp_path, monkeypatch):
    report_dir.write_reports(fleet(22, prefix="old"), str(tmp_path))
    real, done = files.publish, []

    def killed(tmp, path):
        if len(done) == 30:
            raise KeyboardInterrupt
        done.append(path)
        return real(tmp, path)

    monkeypatch.setattr(files, "publish", killed)
    with pytest.raises(KeyboardInterrupt):
        report_dir.write_reports(fleet(25, prefix="new"), str(tmp_path))
    monkeypatch.undo()
    assert json.loads((tmp_path / MANIFEST).read_text())["complete"] is False
    assert not [n for n in os.listdir(str(tmp_path)) + os.listdir(str(tmp_path / "hosts")) if n.startswith(".")
                and n != MANIFEST]  # no temporary file left
    (tmp_path / "hosts" / "notes.html").write_text("mine")
    report_dir.write_reports(fleet(4), str(tmp_path))  # pages of both earlier runs go, nothing else
    assert os.listdir(str(tmp_path / "hosts")) == ["notes.html"]


def test_a_full_empty_disk_leaves_no_lone_report_json(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "write_temporary", DiskFull(1))
    with pytest.raises(ReportError):
        report_dir.write_reports(fleet(25), str(tmp_path / "reports"))
    assert tree(str(tmp_path / "reports")) == {}
    assert not (tmp_path / "reports" / "hosts").exists()


@pytest.mark.parametrize("where", ["md", "junit stream"])
def test_a_renderer_bug_leaves_the_previous_set_entirely(tmp_path, monkeypatch, where):
    report_dir.write_reports(fleet(4), str(tmp_path))
    before = tree(str(tmp_path))

    def broken(*args, **kwargs):
        raise RuntimeError("renderer bug")

    def broken_stream(*args, **kwargs):
        # junit.xml is written host by host from a generator: a bug after some hosts were written
        yield "<?xml version='1.0'?>\n<testsuites>\n"
        raise RuntimeError("renderer bug")

    if where == "md":
        monkeypatch.setitem(report_dir.RENDERERS, "md", broken)
    else:
        monkeypatch.setattr(report_dir, "iter_junit", broken_stream)
    with pytest.raises(RuntimeError):
        report_dir.write_reports(fleet(4, mark="next"), str(tmp_path))
    assert tree(str(tmp_path)) == before


def test_the_manifest_names_the_set_and_its_digests(tmp_path):
    report_dir.write_reports(fleet(25), str(tmp_path))
    first = json.loads((tmp_path / MANIFEST).read_text())
    report_dir.write_reports(fleet(24, mark="next"), str(tmp_path))
    manifest = json.loads((tmp_path / MANIFEST).read_text())
    assert manifest["complete"] is True and manifest["generation"] != first["generation"]
    assert set(manifest["files"]) == set(TOP) | set("hosts/gpu-%02d.%s" % (i, ext) for i in range(24)
                                                    for ext in ("html", "md"))
    for name, entry in manifest["files"].items():
        with open(str(tmp_path / name), "rb") as handle:
            data = handle.read()
        assert entry == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}, name
    assert oct(os.stat(str(tmp_path / MANIFEST)).st_mode & 0o777) == "0o644"


def test_the_report_paths_returned_are_the_same(tmp_path):
    paths = report_dir.write_reports(fleet(4), str(tmp_path), ["json", "prom"])
    assert paths == {"json": str(tmp_path / "report.json"), "prom": str(tmp_path / "metrics.prom")}
    assert sorted(os.listdir(str(tmp_path))) == sorted([MANIFEST, "metrics.prom", "report.json"])


# --- the action plugin: a clear failure, never a traceback --------------------------------------

def test_baseline_report_fails_with_the_refusal(tmp_path):
    from ansible.playbook.play_context import PlayContext
    from ansible.playbook.task import Task
    from ansible.parsing.dataloader import DataLoader
    from unittest import mock

    from ansible_collections.gpuhost.baseline.plugins.action import baseline_report

    (tmp_path / "index.html").write_text("site")
    task = Task()
    task.args = {"report_dir": str(tmp_path), "hosts": {"gpu-01": {"findings": []}}, "generated": GENERATED}
    action = baseline_report.ActionModule(task, mock.MagicMock(), PlayContext(), DataLoader(), None, None)
    result = action.run(task_vars={})
    assert result.get("failed") is True, result
    assert result["msg"].startswith("baseline_report: ") and "index.html" in result["msg"]
    assert "Traceback" not in result["msg"] and os.listdir(str(tmp_path)) == ["index.html"]
