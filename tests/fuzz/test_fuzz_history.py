# -*- coding: utf-8 -*-
"""Bomb corpus: the drift history (JSON Lines) and the self-audit's config file (issue 18, items 7,
8 and 10). Each case reads, judges with and appends to a hostile history in a bounded child
(tests/helpers/bounded.py: 10 s, 512 MiB) that must end by itself with the expected result."""
import json
import os

import pytest

from helpers import bounded

KIND = "history JSONL"
HOST = "h"
BOOT = "3f2a6c1e-9b7d-4e25-8c41-0d6f1a2b3c4d"

#: what a run does with host h's history in ARGS[0]: judge with it (with_history), then append
#: (record_audit); the self-audit and baseline_evaluate + baseline_report alike
HISTORY_CASE = bounded.case("""
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import history
    directory = ARGS[0]
    path = history.history_path(directory, "h")
    facts, read_warnings = history.with_history({"kernel": {"boot_id": %(boot)r}}, directory, "h")
    record = history.make_record("h", [{"id": "PCI-001", "subject": "x", "status": "pass", "observed": 1}],
                                 "2030-01-01T00:00:00+00:00", boot_id=%(boot)r)
    previous, changes, write_warnings = history.record_audit(directory, "h", record, keep=168)
    report({"records": facts["history"]["audits"], "read": read_warnings[:40], "read_count": len(read_warnings),
            "write": write_warnings[:40], "write_count": len(write_warnings), "kept": changes["records"],
            "size_after": os.path.getsize(path), "regular_after": os.path.isfile(path) and not os.path.islink(path),
            "aside": sorted(n for n in os.listdir(directory) if n.endswith(".refused"))})
""" % {"boot": BOOT})

CONFIG_CASE = bounded.case("""
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge import self_audit
    try:
        self_audit.load_config(ARGS[0])
        report({"error": None})
    except self_audit.SelfAuditError as exc:
        report({"error": str(exc), "status": exc.status})
""")


def ASIDE(path):  # noqa: N802  history._set_aside's name for a refused file
    return os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".refused")


def record_line(time="2025-08-01T10:00:00+00:00", findings=()):
    return json.dumps({"schema": 1, "time": time, "host": HOST, "boot_id": BOOT, "collection_version": "0",
                       "profile": None, "state": "audited", "findings": list(findings)},
                      separators=(",", ":")) + "\n"


def history_dir(tmp_path):
    directory = tmp_path / "history"
    directory.mkdir()
    return directory


def fill(path, line, size):
    """Write ``line`` (bytes) over and over to ``path`` until it holds at least ``size`` bytes,
    a megabyte at a time (the test process never holds the file)."""
    chunk = line * max(1, (1 << 20) // len(line))
    written = 0
    with open(path, "wb") as handle:
        while written < size:
            handle.write(chunk)
            written += len(chunk)
    return written


def run_history(directory):
    return bounded.run_case(KIND, HISTORY_CASE, str(directory)).result


def cap():
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import history
    return history.MAX_FILE_BYTES


@pytest.mark.parametrize("depth", [100000, 10 * 1000 * 1000])
@pytest.mark.parametrize("wrap, why", [("%s", "not an object"), ('{"findings":%s}', "nested too deeply to parse")])
def test_nested_line(tmp_path, depth, wrap, why):
    directory = history_dir(tmp_path)
    path = directory / "h.jsonl"
    with open(str(path), "w") as handle:
        handle.write(record_line() + wrap % ("[" * depth) + "\n" + record_line("2025-08-01T11:00:00+00:00"))
    result = run_history(directory)
    assert result["records"] == 2 and result["kept"] == 3
    assert result["read"] == ["history file %s line 2: not a JSON record (%s); skipped" % (path, why)]
    assert result["write"] == result["read"] and result["aside"] == []
    assert "[[[" not in path.read_text()


def test_deep_but_parseable_observed_value(tmp_path):
    directory = history_dir(tmp_path)
    path = directory / "h.jsonl"
    with open(str(path), "w") as handle:
        handle.write(record_line(findings=[["PCI-001", "x", "pass", json.loads("[" * 900 + "]" * 900)]]))
    result = run_history(directory)
    assert result["records"] == 0 and result["kept"] == 1
    assert "nests deeper than" in result["read"][0]


def test_fifo_at_the_history_file(tmp_path):
    directory = history_dir(tmp_path)
    os.mkfifo(str(directory / "h.jsonl"))
    result = run_history(directory)
    assert "cannot be read: it is a FIFO, not a regular file" in result["read"][0]
    assert result["write_count"] == 1 and "set aside as" in result["write"][0]
    assert result["regular_after"] and result["aside"] == [".h.jsonl.refused"] and result["kept"] == 1


def test_link_to_dev_zero_at_the_history_file(tmp_path):
    directory = history_dir(tmp_path)
    os.symlink("/dev/zero", str(directory / "h.jsonl"))
    result = run_history(directory)
    assert "cannot be read: it is a symbolic link (not followed)" in result["read"][0]
    assert result["regular_after"] and result["aside"] == [".h.jsonl.refused"]
    assert os.readlink(str(directory / ".h.jsonl.refused")) == "/dev/zero"


def test_100_mb_of_garbage(tmp_path):
    directory = history_dir(tmp_path)
    path = str(directory / "h.jsonl")
    try:
        size = fill(path, b"\x00\xff garbage that is not a record, line of ~50 b\n", 100 * 1000 * 1000)
        result = run_history(directory)
        assert result["read_count"] == 1 and result["write_count"] == 1
        assert ("cannot be read: it is larger than %d bytes" % cap()) in result["read"][0]
        assert result["aside"] == [".h.jsonl.refused"] and os.path.getsize(ASIDE(path)) == size
        assert result["kept"] == 1 and result["regular_after"]
    finally:
        for name in (path, ASIDE(path)):
            if os.path.lexists(name):
                os.unlink(name)


@pytest.mark.parametrize("line", [b"\x00\xff garbage that is not a record, line of ~50 b\n",
                                  b'{"garbage": that the parser has to read, ~50 b}\n',
                                  b'{"schema": 2, "note": "valid JSON, not a record"}\n'])
def test_garbage_just_under_the_cap(tmp_path, line):
    """The flood itself: ~300,000 damaged lines under the cap. At most MAX_LINE_WARNINGS are named
    and one more line says the file is not a history (read no further than MAX_DAMAGED_LINES)."""
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import history
    directory = history_dir(tmp_path)
    path = str(directory / "h.jsonl")
    try:
        with open(path, "wb") as handle:
            for dummy in range((cap() - (1 << 20)) // len(line) // 1000):
                handle.write(line * 1000)
        size = os.path.getsize(path)
        result = run_history(directory)
        for key, then in (("read", "judged as if there were no history"),
                          ("write", "set aside as %s and started afresh" % ASIDE(path))):
            assert result[key + "_count"] == history.MAX_LINE_WARNINGS + 1
            assert result[key][-1] == ("history file %s: more than %d damaged lines (the first %d listed above): "
                                       "not a history file; %s" % (path, history.MAX_DAMAGED_LINES,
                                                                   history.MAX_LINE_WARNINGS, then))
        assert result["kept"] == 1 and os.path.getsize(path) < 1000 and result["aside"] == [".h.jsonl.refused"]
        assert os.path.getsize(ASIDE(path)) == size
    finally:
        for name in (path, ASIDE(path)):
            if os.path.lexists(name):
                os.unlink(name)


@pytest.mark.parametrize("shape", ["many small records", "one huge record"])
def test_valid_records_up_to_the_cap(tmp_path, shape):
    """A file at the cap full of valid records: the worst the cap lets through, within the bounds."""
    directory = history_dir(tmp_path)
    path = str(directory / "h.jsonl")
    limit = cap() - 4096
    try:
        if shape == "many small records":
            line = record_line(findings=[["PCI-001", "0000:43:00.0", "pass", 4096]]).encode()
            with open(path, "wb") as handle:
                for dummy in range(limit // len(line)):
                    handle.write(line)
        else:
            row = ["PCI-001", "0000:43:00.0", "pass", 4096]
            rows = (limit - 300) // (len(json.dumps(row, separators=(",", ":"))) + 1)
            with open(path, "w") as handle:
                handle.write(record_line(findings=[row] * rows))
        result = run_history(directory)
        assert result["read_count"] == 0 and result["write_count"] == 0 and result["records"] >= 1
        assert result["kept"] == min(168, result["records"] + 1)
    finally:
        os.unlink(path)


@pytest.mark.parametrize("make", ["fifo", "dev zero link", "nested"])
def test_self_audit_config(tmp_path, make):
    path = str(tmp_path / "config.json")
    if make == "fifo":
        os.mkfifo(path)
    elif make == "dev zero link":
        os.symlink("/dev/zero", path)
    else:
        with open(path, "w") as handle:
            handle.write("[" * 100000)
    result = bounded.run_case("self-audit config", CONFIG_CASE, path).result
    assert result["status"] == 2, result
    assert result["error"] == {"fifo": "cannot read the config file %s: is a FIFO, not a regular file" % path,
                               "dev zero link": "cannot read the config file %s: is a symbolic link (not followed)"
                               % path,
                               "nested": "config file %s is not valid JSON: nested too deeply to parse" % path}[make]
