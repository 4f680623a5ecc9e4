# -*- coding: utf-8 -*-
"""Drift history (plugins/plugin_utils/report/history.py): file names, records, damaged files, comparing,
pruning, the running boot's earlier values, and the report views of the changes."""
import json
import os
import stat

import pytest

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import history
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_load import load_catalogue
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import build_report
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.views import render_html, render_markdown

T1, T2, T3 = "2025-08-01T10:00:00+00:00", "2025-08-01T11:00:00+00:00", "2025-08-01T12:00:00+00:00"
BOOT_A, BOOT_B = "3f2a6c1e-9b7d-4e25-8c41-0d6f1a2b3c4d", "9c0d1e2f-3a4b-4c5d-8e6f-7a8b9c0d1e2f"
GPU0, GPU1 = "0000:43:00.0", "0000:44:00.0"

#: the values the shipped rules keep for the later audits of a boot (their history_as)
KEPT = load_catalogue().history_values()


def finding(rule, subject, status, observed):
    return {"id": rule, "subject": subject, "status": status, "observed": observed}


def findings(gpu0_mrrs=4096, gpu0_status="pass", numa_free=8.1, extra=()):
    return [finding("PCI-001", GPU0, gpu0_status, gpu0_mrrs), finding("PCI-001", GPU1, "pass", 4096),
            finding("NUMA-001", None, "pass", 0), finding("NUMA-003", "node0", "pass", numa_free)] + list(extra)


def record(time=T1, boot=BOOT_A, **kwargs):
    return history.make_record("gpu01", findings(**kwargs), time, boot_id=boot, collection_version="0.2.0",
                               profile="amd-epyc-nvidia")


# -- file names --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["gpu01", "gpu01.example.com", "rack-3_node.7", "a" * 100])
def test_plain_inventory_names_are_the_file_name(name):
    assert history.file_name(name) == name + ".jsonl"


@pytest.mark.parametrize("name", ["../../etc/passwd", "/etc/shadow", "..", ".", "", ".hidden", "a/b", "a b",
                                  "gpu\n01", "nœud-01", "x" * 300, "a\\b", "-", "~root", "a\x00b"])
def test_hostile_inventory_names_stay_in_the_directory(tmp_path, name):
    fname = history.file_name(name)
    assert "/" not in fname and "\\" not in fname and "\x00" not in fname and not fname.startswith(".")
    assert fname.endswith(".jsonl") and len(fname) <= 100
    assert fname != name + ".jsonl"  # rewritten, with a hash of the name
    path = history.history_path(str(tmp_path), name)
    assert os.path.dirname(path) == str(tmp_path)


def test_rewritten_names_do_not_collide_with_each_other_or_plain_ones():
    names = ["a/b", "a_b", "a b", "a\tb", "../a_b", "a_b-" + "0" * 16]
    assert len(set(history.file_name(n) for n in names)) == len(names)


def test_relative_directory_is_taken_from_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert history.history_path("hist", "gpu01") == str(tmp_path / "hist" / "gpu01.jsonl")
    with pytest.raises(history.HistoryError):
        history.history_path("", "gpu01")


# -- records and damaged files -----------------------------------------------------------------

def test_record_is_one_compact_line_that_reads_back():
    rec = record(extra=[finding("KERNEL-002", None, "fail", ["iommu: running iommu=off\nconfigured pt"])])
    line = history.encode(rec)
    assert line.endswith("\n") and line.count("\n") == 1
    assert rec["findings"][0] == ["PCI-001", GPU0, "pass", 4096]
    records, warnings = history.parse_lines([line], host="gpu01")
    assert warnings == [] and records == [json.loads(line)]
    assert records[0]["boot_id"] == BOOT_A and records[0]["collection_version"] == "0.2.0"


def test_damaged_lines_are_skipped_with_a_warning_never_a_traceback():
    good = history.encode(record())
    lines = [
        good,
        "\n",
        "garbage that is not json\n",
        good[:40],  # cut short by a crash, no newline
        "[1, 2, 3]\n",
        json.dumps(dict(record(), schema=99)) + "\n",
        json.dumps(dict(record(), time="yesterday")) + "\n",
        json.dumps(dict(record(), host="other")) + "\n",
        json.dumps(dict(record(), findings=[["PCI-001"]])) + "\n",
        json.dumps(dict(record(), findings="nope")) + "\n",
        json.dumps(dict(record(), boot_id=5)) + "\n",
        b"\xff\xfe binary\n",
        good,
    ]
    records, warnings = history.parse_lines(lines, source="history file X", host="gpu01")
    assert len(records) == 2
    assert len(warnings) == 10
    assert all(w.startswith("history file X line ") and w.endswith("skipped") for w in warnings)
    assert "line 4: not a JSON record" in warnings[1] and "cut short" in warnings[1]
    assert any("record of host 'other', not 'gpu01'" in w for w in warnings)
    assert any("record schema 99" in w for w in warnings)


def test_reading_a_missing_or_unreadable_file(tmp_path):
    assert history.read_history(str(tmp_path / "none.jsonl")) == ([], [])
    records, warnings = history.read_history(str(tmp_path))  # a directory: cannot be read as a file
    assert records == [] and "cannot be read" in warnings[0]


# -- comparing ---------------------------------------------------------------------------------

def test_first_audit_has_nothing_to_compare():
    changes = history.compare(None, record())
    assert changes["previous"] is None and changes["count"] == 0 and changes["boot"] is None
    assert changes["last_change"] == T1 and changes["last_change_timestamp"] == 1754042400
    assert "first audit" in changes["summary"]


def test_a_lowered_value_is_exactly_one_new_fail_in_the_same_boot():
    changes = history.compare(record(), record(T2, gpu0_mrrs=512, gpu0_status="fail"))
    assert changes["new_fails"] == [{"rule": "PCI-001", "subject": GPU0, "status_before": "pass", "status_after": "fail",
                                     "observed_before": 4096, "observed_after": 512}]
    assert changes["count"] == 1 and changes["boot"] == "same"
    assert changes["summary"] == "since the audit of %s (same boot): 1 new fail" % T1
    assert changes["last_change"] == T2


VAL_AUDIT = (finding("VAL-001", None, "not_applicable", None), finding("VAL-003", None, "not_applicable", None))


def _validated(bandwidth, status="pass"):
    return (finding("VAL-001", "cpu0", "pass", 0.99), finding("VAL-003", "node0", status, bandwidth))


def test_an_audit_beside_validate_runs_moves_no_measurement():
    validated, audited = record(extra=_validated(180000.0)), record(T2, extra=VAL_AUDIT)
    for before, after in ((validated, audited), (audited, record(T3, extra=_validated(181000.0)))):
        changes = history.compare(before, after)
        assert changes["count"] == 0, changes
        assert changes["last_change"] == before["time"]
    # between two validate runs the measurements are compared as any finding
    changes = history.compare(validated, record(T3, extra=_validated(90000.0, "fail")))
    assert [(c["rule"], c["observed_before"], c["observed_after"]) for c in changes["new_fails"]] == [
        ("VAL-003", 180000.0, 90000.0)]
    # and the configuration findings are compared whatever was measured
    changes = history.compare(validated, record(T2, gpu0_mrrs=512, gpu0_status="fail", extra=VAL_AUDIT))
    assert [c["rule"] for c in changes["new_fails"]] == ["PCI-001"] and changes["count"] == 1


def test_across_a_reboot_and_unknown_boot():
    changes = history.compare(record(), record(T2, boot=BOOT_B))
    assert changes["boot"] == "reboot" and changes["count"] == 0
    assert "across a reboot: boot id %s, now %s" % (BOOT_A, BOOT_B) in changes["summary"]
    assert history.compare(record(), record(T2, boot=None))["boot"] == "unknown"
    assert history.compare(record(boot=None), record(T2, boot=None))["boot"] == "unknown"


def test_resolved_status_changes_values_and_subjects_appearing_or_going():
    before = record(gpu0_mrrs=512, gpu0_status="fail", extra=[finding("PCI-008", GPU0, "fail", ["x"]),
                                                              finding("CPU-003", None, "fail", {"powersave": 8}),
                                                              finding("LXC-003", "CT 101", "pass", 2048)])
    after = record(T2, numa_free=7.9, extra=[finding("PCI-008", GPU0, "unknown", None),
                                             finding("CPU-003", None, "pass", {"performance": 8}),
                                             finding("NVIDIA-004", GPU0, "fail", False)])
    changes = history.compare(before, after)
    assert [(i["rule"], i["status_before"], i["status_after"]) for i in changes["resolved"]] == [
        ("PCI-001", "fail", "pass"), ("CPU-003", "fail", "pass")]
    assert [(i["rule"], i["status_before"], i["status_after"]) for i in changes["new_fails"]] == [
        ("NVIDIA-004", None, "fail")]
    # fail -> unknown is not resolved; a subject that disappears is a status change to "not reported"
    assert [(i["rule"], i["status_before"], i["status_after"]) for i in changes["status_changed"]] == [
        ("PCI-008", "fail", "unknown"), ("LXC-003", "pass", None)]
    assert changes["values_changed"] == [{"rule": "NUMA-003", "subject": "node0", "status_before": "pass",
                                          "status_after": "pass", "observed_before": 8.1, "observed_after": 7.9}]
    assert changes["counts"] == {"new_fails": 1, "resolved": 2, "status_changed": 2, "values_changed": 1}


def test_last_change_moves_with_statuses_not_with_values():
    first = history.compare(None, record())
    rec1 = dict(record(), last_change=first["last_change"])
    only_values = history.compare(rec1, record(T2, numa_free=3.3))
    assert only_values["count"] == 1 and only_values["last_change"] == T1
    rec2 = dict(record(T2, numa_free=3.3), last_change=only_values["last_change"])
    moved = history.compare(rec2, record(T3, gpu0_mrrs=512, gpu0_status="fail"))
    assert moved["last_change"] == T3
    # an earlier record without last_change (or a bad one) counts from its own time
    assert history.compare(dict(record(), last_change="bad"), record(T2))["last_change"] == T1


def test_fleet_summary():
    same = history.compare(record(), record(T2, gpu0_mrrs=512, gpu0_status="fail"))
    reboot = history.compare(record(), record(T2, boot=BOOT_B))
    summary = history.fleet_summary({"a": same, "b": reboot, "c": history.compare(None, record()),
                                     "d": {"error": "disk full"}})
    assert summary["hosts_compared"] == 2 and summary["hosts_changed"] == 1 and summary["changed_hosts"] == ["a"]
    assert summary["hosts_rebooted"] == 1 and summary["hosts_first_audit"] == 1 and summary["hosts_with_error"] == 1
    assert summary["new_fails"] == 1 and summary["hosts_with_new_fails"] == 1


# -- the running boot, for the rules -----------------------------------------------------------

def test_earlier_values_of_this_boot_only_changes_kept():
    records = [record(T1, boot=BOOT_B, gpu0_mrrs=128), record(T1, gpu0_mrrs=512, gpu0_status="fail"),
               record(T2, gpu0_mrrs=512, gpu0_status="fail"), record(T3)]
    seen = history.earlier_in_boot(records, BOOT_A, source="f", rules=KEPT)
    assert seen["audits"] == 3 and seen["first"] == T1 and seen["last"] == T3 and seen["reason"] is None
    assert seen["earlier"]["max_read_request"][GPU0] == [{"time": T1, "value": 512}, {"time": T3, "value": 4096}]
    assert seen["earlier"]["max_read_request"][GPU1] == [{"time": T1, "value": 4096}]
    assert history.earlier_in_boot(records, "other")["audits"] == 0
    unknown = history.earlier_in_boot(records, None)
    assert unknown["audits"] == 0 and "boot's id is unknown" in unknown["reason"]


def test_unknown_and_not_applicable_observations_are_not_values():
    rec = history.make_record("gpu01", [finding("PCI-001", GPU0, "unknown", None),
                                        finding("PCI-002", "0000:49:00.0", "not_applicable", None)], T1, boot_id=BOOT_A)
    assert history.earlier_in_boot([rec], BOOT_A, rules=KEPT)["earlier"]["max_read_request"] == {}


# -- writing and pruning -----------------------------------------------------------------------

def lines_of(path):
    with open(path) as handle:
        return handle.read().splitlines()


def test_record_audit_appends_compares_and_prunes(tmp_path):
    directory = str(tmp_path / "hist")
    path = history.history_path(directory, "gpu01")
    previous, changes, warnings = history.record_audit(directory, "gpu01", record(T1), keep=3)
    assert previous is None and warnings == [] and changes["records"] == 1
    for number, time in enumerate(["2025-08-01T1%d:00:00+00:00" % h for h in range(1, 6)]):
        previous, changes, warnings = history.record_audit(directory, "gpu01", record(time), keep=3)
        assert previous is not None and warnings == []
    kept = [json.loads(line) for line in lines_of(path)]
    assert [r["time"] for r in kept] == ["2025-08-01T1%d:00:00+00:00" % h for h in (3, 4, 5)]
    assert all(r["last_change"] == T1 for r in kept)  # nothing moved since the first audit
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    assert os.listdir(directory) == ["gpu01.jsonl"]  # no temporary file left


def test_record_audit_drops_damaged_lines_and_repairs_a_cut_last_line(tmp_path):
    directory = str(tmp_path)
    path = history.history_path(directory, "gpu01")
    with open(path, "w") as handle:
        handle.write("not json\n" + history.encode(record(T1)) + history.encode(record(T2))[:30])
    previous, changes, warnings = history.record_audit(directory, "gpu01",
                                                       record(T3, gpu0_mrrs=512, gpu0_status="fail"))
    assert len(warnings) == 2 and previous["time"] == T1
    assert changes["counts"]["new_fails"] == 1
    assert [json.loads(line)["time"] for line in lines_of(path)] == [T1, T3]


def test_a_valid_last_line_without_newline_is_not_swallowed_by_the_append(tmp_path):
    path = history.history_path(str(tmp_path), "gpu01")
    with open(path, "w") as handle:
        handle.write(history.encode(record(T1)).rstrip("\n"))
    history.record_audit(str(tmp_path), "gpu01", record(T2))
    assert [json.loads(line)["time"] for line in lines_of(path)] == [T1, T2]


def test_record_report_puts_changes_into_the_document(tmp_path):
    hosts = {"gpu01": {"findings": findings(), "profile": "amd-epyc-nvidia"},
             "gone": {"state": "unreachable", "message": "no route"}}
    doc = build_report(hosts, generated=T1)
    assert history.record_report(doc, {"gpu01": BOOT_A}, str(tmp_path)) == []
    assert "changes" not in doc["hosts"]["gone"] and doc["changes"]["hosts_not_recorded"] == 1
    assert not os.path.exists(history.history_path(str(tmp_path), "gone"))
    hosts["gpu01"]["findings"] = findings(gpu0_mrrs=512, gpu0_status="fail")
    doc = build_report(hosts, generated=T2)
    history.record_report(doc, {"gpu01": BOOT_B}, str(tmp_path))
    changes = doc["hosts"]["gpu01"]["changes"]
    assert changes["boot"] == "reboot" and [i["subject"] for i in changes["new_fails"]] == [GPU0]
    assert doc["changes"]["hosts_changed"] == 1 and doc["changes"]["hosts_rebooted"] == 1
    json.dumps(doc)


def test_record_report_turns_an_unwritable_directory_into_a_warning(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    doc = build_report({"gpu01": {"findings": findings()}}, generated=T1)
    warnings = history.record_report(doc, {}, str(blocker / "hist"))
    assert len(warnings) == 1 and "history of host gpu01 not kept" in warnings[0]
    assert doc["hosts"]["gpu01"]["changes"] == {"error": warnings[0]}
    assert doc["changes"]["hosts_with_error"] == 1
    assert "drift history: history of host gpu01 not kept" in render_html(doc)
    assert "Drift history: history of host gpu01 not kept" in render_markdown(doc)


# -- the views ---------------------------------------------------------------------------------

def _changed_document(tmp_path, extra_after=()):
    hosts = {"gpu01": {"findings": findings()}}
    history.record_report(build_report(hosts, generated=T1), {"gpu01": BOOT_A}, str(tmp_path))
    hosts["gpu01"]["findings"] = findings(gpu0_mrrs=512, gpu0_status="fail", extra=extra_after)
    doc = build_report(hosts, generated=T2)
    history.record_report(doc, {"gpu01": BOOT_A}, str(tmp_path))
    return doc


def test_views_show_the_changes_and_escape_host_values(tmp_path):
    doc = _changed_document(tmp_path, extra_after=[finding("LXC-001", "<script>alert(1)</script>", "fail", ["|x|"])])
    html = render_html(doc)
    assert "Changes since the audit of %s (same boot): 2 new fails" % T1 in html
    assert '<tr class="chg-new_fails"><td>new fail</td><td class="mono">PCI-001</td><td class="mono">%s</td>' % GPU0 in html
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    md = render_markdown(doc)
    assert "### Changes since the last audit" in md
    assert "| new fail | PCI-001 | %s | pass 4096 | fail 512 |" % GPU0 in md
    assert "<script>" not in md and "\\|x\\|" in md


def test_views_of_a_first_audit_and_of_a_report_without_history(tmp_path):
    doc = build_report({"gpu01": {"findings": findings()}}, generated=T1)
    assert "Changes since" not in render_markdown(doc) and 'class="history"' not in render_html(doc)
    history.record_report(doc, {"gpu01": BOOT_A}, str(tmp_path))
    assert "first audit in the history" in render_markdown(doc)
    assert "first audit in the history" in render_html(doc)


def test_included_templates_render_nothing_without_a_host():
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.views import template_environment
    env = template_environment()
    for name in ("changes.html.j2", "changes.md.j2"):
        assert env.get_template(name).render().strip() == ""
        assert env.get_template(name).render(host={"changes": "garbage"}).strip() == ""
        assert env.get_template(name).render(entry={"host": {"changes": {"error": "x"}}}).strip() != ""


def test_fleet_templates_sum_up_the_changes(tmp_path):
    # templates/changes_fleet.*.j2: one line for the summary part of report.html / report.md
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.views import template_environment
    env = template_environment()
    doc = _changed_document(tmp_path, extra_after=[finding("LXC-001", "CT 101", "fail", [])])
    doc["changes"]["changed_hosts"] = ["<b>gpu01</b>"]
    html = env.get_template("changes_fleet.html.j2").render(report=doc)
    assert ("changes since the last audit: 1 of 1 compared host(s) changed (2 new fail(s), 0 resolved, "
            "0 other status change(s), 0 value(s) changed; 0 host(s) rebooted since)") in html
    assert "&lt;b&gt;gpu01&lt;/b&gt;" in html and "<b>gpu01" not in html
    md = env.get_template("changes_fleet.md.j2").render(report=doc)
    assert "Changes since the last audit: 1 of 1 compared host(s) changed (2 new fail(s)" in md
    for name in ("changes_fleet.html.j2", "changes_fleet.md.j2"):
        assert env.get_template(name).render(report={"hosts": {}}).strip() == ""
        assert env.get_template(name).render().strip() == ""
