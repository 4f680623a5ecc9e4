# -*- coding: utf-8 -*-
"""Issue 18 (items 7-10, 14): the drift history and the self-audit as a root tool on a fleet.

A history line nested 100,000 deep is a parse error like any other (named, skipped, pruned); a
history file is read through files.read_bytes (bounded, regular files only, never blocking) and
written without following a link; a damaged file gives the first few warnings and a count; every
line the self-audit prints is escaped. The cases that would hang or exhaust memory before the
change are in tests/fuzz/test_fuzz_history.py (bounded child processes)."""
import json
import os

import pytest

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge import self_audit
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import history
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import build_report

T1, T2, T3 = "2025-08-01T10:00:00+00:00", "2025-08-01T11:00:00+00:00", "2025-08-01T12:00:00+00:00"
BOOT = "3f2a6c1e-9b7d-4e25-8c41-0d6f1a2b3c4d"
NESTED = "[" * 100000
#: the same inside an object: the JSON parser itself meets it (RecursionError before the change)
NESTED_OBJECT = '{"findings":' + "[" * 100000 + "}"
GENERATED = "2025-06-01T12:00:00+00:00"


def record(time, host="gpu01"):
    return history.make_record(host, [{"id": "PCI-001", "subject": "0000:43:00.0", "status": "pass",
                                       "observed": 4096}], time, boot_id=BOOT)


def lines_of(path):
    with open(path) as handle:
        return handle.read().splitlines()


# -- item 7: deeply nested JSON ----------------------------------------------------------------

def test_a_nested_line_is_a_parse_error_named_skipped_and_pruned(tmp_path):
    directory = str(tmp_path)
    path = history.history_path(directory, "gpu01")
    with open(path, "w") as handle:
        handle.write(history.encode(record(T1)) + NESTED + "\n" + NESTED_OBJECT + "\n" + history.encode(record(T2)))
    records, warnings = history.read_history(path, host="gpu01")
    assert [r["time"] for r in records] == [T1, T2]
    assert warnings == ["history file %s line 2: not a JSON record (not an object); skipped" % path,
                        "history file %s line 3: not a JSON record (nested too deeply to parse); skipped" % path]
    facts, judged = history.with_history({"kernel": {"boot_id": BOOT}}, directory, "gpu01")
    assert facts["history"]["audits"] == 2 and judged == warnings
    previous, changes, written = history.record_audit(directory, "gpu01", record(T3))
    assert previous["time"] == T2 and written == warnings
    assert [json.loads(line)["time"] for line in lines_of(path)] == [T1, T2, T3]  # the bad lines are gone


def test_a_nested_line_does_not_stop_the_controller_report(tmp_path):
    """baseline_report's history step: the report is still built, the host's changes computed."""
    path = history.history_path(str(tmp_path), "gpu01")
    with open(path, "w") as handle:
        handle.write(NESTED_OBJECT + "\n")
    doc = build_report({"gpu01": {"findings": [{"id": "PCI-001", "subject": "x", "status": "pass",
                                                "observed": 1}]}}, generated=T1)
    warnings = history.record_report(doc, {"gpu01": BOOT}, str(tmp_path))
    assert warnings == ["history file %s line 1: not a JSON record (nested too deeply to parse); skipped" % path]
    assert doc["hosts"]["gpu01"]["changes"]["previous"] is None
    assert len(lines_of(path)) == 1 and json.loads(lines_of(path)[0])["time"] == T1


def test_a_deep_but_parseable_observed_value_is_skipped(tmp_path):
    """A line the parser takes (900 levels) but that later code would recurse over is refused too."""
    path = history.history_path(str(tmp_path), "gpu01")
    deep = dict(record(T1), findings=[["PCI-001", "x", "pass", json.loads("[" * 900 + "]" * 900)]])
    with open(path, "w") as handle:
        handle.write(json.dumps(deep) + "\n")
    records, warnings = history.read_history(path, host="gpu01")
    assert records == [] and "line 1: a finding's observed value nests deeper than" in warnings[0]


@pytest.fixture
def out(tmp_path):
    return {"report": str(tmp_path / "reports"), "textfile": str(tmp_path / "textfile"), "tmp": tmp_path}


def self_audit_run(out, root, capsys, *more):
    argv = ["--config", "none", "--root", root, "--report-dir", out["report"], "--textfile-dir", out["textfile"],
            "--generated", GENERATED] + list(more)
    status = self_audit.main(argv)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    return status, captured.out, captured.err


def test_self_audit_with_a_nested_history_line_writes_report_and_textfile(healthy_copy, out, capsys):
    directory = os.path.join(out["report"], "history")
    os.makedirs(directory)
    path = os.path.join(directory, "h.jsonl")
    with open(path, "w") as handle:
        handle.write(NESTED_OBJECT + "\n")
    status, stdout, err = self_audit_run(out, healthy_copy, capsys, "--host", "h")
    assert status == 0, err
    assert "gpuhost-self-audit: warning: history file %s line 1: not a JSON record (nested too deeply" % path in err
    assert os.path.isfile(os.path.join(out["report"], "report.json"))
    assert os.path.isfile(os.path.join(out["textfile"], "gpuhost_baseline.prom"))
    assert [json.loads(line)["host"] for line in lines_of(path)] == ["h"]  # pruned at this run's write
    status, stdout, err = self_audit_run(out, healthy_copy, capsys, "--host", "h")
    assert status == 0 and "warning" not in err, err  # repaired: the next run is clean


# -- item 9: writes never follow a link ------------------------------------------------------

def test_a_dangling_link_at_the_history_file_is_set_aside_and_its_target_not_created(tmp_path):
    directory = tmp_path / "hist"
    directory.mkdir()
    target = tmp_path / "elsewhere" / "created-by-root"
    target.parent.mkdir()
    link = directory / "gpu01.jsonl"
    os.symlink(str(target), str(link))
    previous, changes, warnings = history.record_audit(str(directory), "gpu01", record(T1))
    assert not os.path.lexists(str(target))
    assert not os.path.islink(str(link)) and os.path.isfile(str(link))
    assert [json.loads(line)["time"] for line in lines_of(str(link))] == [T1]
    aside = str(directory / ".gpu01.jsonl.refused")
    assert os.readlink(aside) == str(target)  # the link itself, kept for whoever looks into it
    assert warnings == ["history file %s cannot be read: it is a symbolic link (not followed); set aside as %s "
                        "and started afresh" % (link, aside)]
    assert previous is None and changes["records"] == 1


def test_self_audit_with_a_planted_link_still_writes_report_and_textfile(healthy_copy, out, capsys):
    """The first run into a report directory whose history/h.jsonl is a dangling link: the link is
    set aside (hidden, like the tool's temporary files, so the report directory stays the tool's),
    its target is not created, and the run writes its report, textfile and a fresh history."""
    directory = os.path.join(out["report"], "history")
    os.makedirs(directory)
    target = str(out["tmp"] / "etc-cron.d-evil")
    os.symlink(target, os.path.join(directory, "h.jsonl"))
    status, stdout, err = self_audit_run(out, healthy_copy, capsys, "--host", "h")
    assert status == 0, err
    assert "is a symbolic link (not followed); set aside as %s" % os.path.join(directory, ".h.jsonl.refused") in err
    assert not os.path.lexists(target)
    assert os.path.isfile(os.path.join(out["report"], "report.json"))
    assert os.path.isfile(os.path.join(out["textfile"], "gpuhost_baseline.prom"))
    assert [json.loads(line)["host"] for line in lines_of(os.path.join(directory, "h.jsonl"))] == ["h"]


def test_a_link_to_a_regular_file_is_not_written_through(tmp_path):
    directory = tmp_path / "hist"
    directory.mkdir()
    target = tmp_path / "passwd"
    target.write_text("root:x:0:0::/root:/bin/sh\n")
    os.symlink(str(target), str(directory / "gpu01.jsonl"))
    records, warnings = history.read_history(str(directory / "gpu01.jsonl"), host="gpu01")
    assert records == [] and "is a symbolic link (not followed)" in warnings[0]
    history.record_audit(str(directory), "gpu01", record(T1))
    assert target.read_text() == "root:x:0:0::/root:/bin/sh\n"
    assert not os.path.islink(str(directory / "gpu01.jsonl"))


def test_a_link_swapped_in_before_the_append_is_not_followed(tmp_path, monkeypatch):
    """The append itself opens with O_NOFOLLOW: a link put there after the read is refused."""
    directory = str(tmp_path / "hist")
    history.record_audit(directory, "gpu01", record(T1))
    path = history.history_path(directory, "gpu01")
    target = tmp_path / "target"
    target.write_text("")
    real_read = history.read_bytes

    def read_then_swap(name, cap):
        data = real_read(name, cap)
        os.unlink(name)
        os.symlink(str(target), name)
        return data

    monkeypatch.setattr(history, "read_bytes", read_then_swap)
    with pytest.raises(OSError):
        history.record_audit(directory, "gpu01", record(T2))
    assert target.read_text() == ""


# -- item 10: warning floods -----------------------------------------------------------------

def test_a_garbage_file_gives_the_first_warnings_and_a_count(tmp_path):
    path = history.history_path(str(tmp_path), "gpu01")
    with open(path, "w") as handle:
        handle.write(history.encode(record(T1)) + "garbage\n" * 500 + history.encode(record(T2)))
    records, warnings = history.read_history(path, host="gpu01")
    assert len(records) == 2
    assert len(warnings) == history.MAX_LINE_WARNINGS + 1
    assert warnings[0] == "history file %s line 2: not a JSON record (not JSON); skipped" % path
    assert warnings[-1] == ("history file %s: 490 more damaged lines skipped (500 in all, the first %d listed "
                            "above)" % (path, history.MAX_LINE_WARNINGS))
    dummy, dummy2, warnings = history.record_audit(str(tmp_path), "gpu01", record(T3))
    assert len(warnings) == history.MAX_LINE_WARNINGS + 1
    assert [json.loads(line)["time"] for line in lines_of(path)] == [T1, T2, T3]


def test_a_file_over_the_cap_is_refused_set_aside_and_the_history_started_afresh(tmp_path, monkeypatch):
    monkeypatch.setattr(history, "MAX_FILE_BYTES", 4096)
    path = history.history_path(str(tmp_path), "gpu01")
    with open(path, "w") as handle:
        for minute in range(10, 60):
            handle.write(history.encode(record("2025-08-01T09:%d:00+00:00" % minute)))
    size = os.path.getsize(path)
    assert size > 4096
    records, warnings = history.read_history(path, host="gpu01")
    assert records == [] and warnings == [
        "history file %s cannot be read: it is larger than 4096 bytes (the limit for this kind of file); judged "
        "as if there were no history" % path]
    previous, changes, warnings = history.record_audit(str(tmp_path), "gpu01", record(T1))
    aside = os.path.join(str(tmp_path), ".gpu01.jsonl.refused")
    assert previous is None and "set aside as %s and started afresh" % aside in warnings[0]
    assert os.path.getsize(aside) == size and len(lines_of(path)) == 1


def test_the_tool_never_writes_a_history_over_the_cap(tmp_path, monkeypatch):
    """A large keep on big records would grow the file past the cap, and the next run would refuse
    it: the oldest records are dropped instead, with a warning that says to keep fewer."""
    monkeypatch.setattr(history, "MAX_FILE_BYTES", 2000)
    path = history.history_path(str(tmp_path), "gpu01")
    for minute in range(10, 40):
        dummy, changes, warnings = history.record_audit(str(tmp_path), "gpu01",
                                                        record("2025-08-01T09:%d:00+00:00" % minute), keep=1000)
        assert os.path.getsize(path) <= 2000 and changes["records"] == len(lines_of(path))
    assert "the most a history file may hold; the 1 oldest dropped (keep fewer records" in warnings[0]
    assert json.loads(lines_of(path)[-1])["time"] == "2025-08-01T09:39:00+00:00"
    assert history.read_history(path, host="gpu01")[1] == []


# -- item 8: the config file -----------------------------------------------------------------

def test_config_through_a_link_or_not_a_regular_file_exits_2(tmp_path, capsys):
    config = tmp_path / "real.json"
    config.write_text("{}")
    link = tmp_path / "config.json"
    os.symlink(str(config), str(link))
    out = {"report": str(tmp_path / "r"), "textfile": str(tmp_path / "t")}
    for path, why in ((str(link), "is a symbolic link (not followed)"), (str(tmp_path), "is a directory")):
        status = self_audit.main(["--config", path, "--root", str(tmp_path), "--report-dir", out["report"],
                                  "--textfile-dir", out["textfile"]])
        err = capsys.readouterr().err
        assert status == 2 and err.startswith("gpuhost-self-audit: cannot read the config file %s: %s" % (path, why)), err
        assert len(err.splitlines()) == 1
    assert not os.path.exists(out["report"])


def test_config_nested_too_deeply_exits_2(tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text(NESTED)
    status = self_audit.main(["--config", str(config), "--root", str(tmp_path)])
    err = capsys.readouterr().err
    assert status == 2 and err == ("gpuhost-self-audit: config file %s is not valid JSON: nested too deeply to "
                                   "parse\n" % config)


# -- item 14: every line the self-audit prints is escaped ------------------------------------

def test_the_journal_line_escapes_a_hostile_host_name(healthy_copy, out, capsys):
    status, stdout, err = self_audit_run(out, healthy_copy, capsys, "--host", "gpu\x1b[31mevil\x1b[0m\r\nfake line")
    assert status == 0, err
    assert "\x1b" not in stdout + err and "\r" not in stdout + err
    assert stdout.startswith("gpuhost-self-audit: gpu\\x1b[31mevil\\x1b[0m\\r\\nfake line audited with profile ")
    assert stdout.count("\n") == 1


def test_warnings_and_errors_are_escaped_too(healthy_copy, out, capsys):
    directory = os.path.join(str(out["tmp"]), "hist\x1b]0;owned\x07")
    os.makedirs(directory)
    with open(os.path.join(directory, "h.jsonl"), "w") as handle:
        handle.write("garbage\n")
    status, stdout, err = self_audit_run(out, healthy_copy, capsys, "--host", "h", "--history-dir", directory)
    assert status == 0, err
    assert "\x1b" not in err and "\x07" not in err and "hist\\x1b]0;owned\\x07" in err
    config = out["tmp"] / "config.json"
    config.write_text(json.dumps({"profile": "no-such-profile", "host": "\x1b[2Jgpu01"}))
    status, stdout, err = self_audit_run(out, healthy_copy, capsys, "--config", str(config))
    assert status == 1 and "\x1b" not in err and "baseline evaluation of \\x1b[2Jgpu01" in err, err
    assert len(err.splitlines()) == 1
