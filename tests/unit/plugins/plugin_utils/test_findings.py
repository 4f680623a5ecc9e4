"""The one finding contract (plugins/plugin_utils/report/findings.py) and report.json schema 3 (issue 19):
a finding's full, compact and stored forms round-trip exactly; the stored findings are mappings
with named keys and no rule text; archived schema-2 and schema-1 documents still read."""
import copy
import json
import os
import re

import pytest

from helpers.baseline_facts import healthy_facts
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge import evaluation
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import findings
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import report as report_doc
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import build_report

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "..", "..", "fixtures", "report")
GENERATED = "2025-06-01T12:00:00+00:00"


def fixture_report():
    with open(os.path.join(FIXTURES, "hosts.json"), encoding="utf-8") as handle:
        hosts = json.load(handle)["hosts"]
    return build_report(hosts, profile="auto", generated=GENERATED, collection_version="0.1.0")


def judged_report():
    """Real findings of the judge on the healthy facts, with a remediation's before and a profile
    that changed one rule's severity on one host."""
    return build_report(judged_hosts(), generated=GENERATED, collection_version="0.1.0")


def judged_hosts():
    facts = healthy_facts()
    outcome = evaluation.evaluate(facts)
    part = evaluation.host_report(facts, outcome, before=outcome["findings"])
    full = dict(part, findings=findings.expand_findings(part["findings"]),
                before={"findings": findings.expand_findings(part["before"]["findings"])})
    other = copy.deepcopy(full)
    other["findings"][0]["severity"] = "info"
    other["findings"][1]["pending"] = True
    other["findings"][2]["waiver"] = {"reason": "vendor ticket", "expires": "2030-01-01", "expired": False}
    return {"gpu01": full, "gpu02": other}


def stored_of(report):
    return json.loads(report_doc.dumps_document(report_doc.compact_document(report)))


def test_round_trip_full_stored_read_back_is_the_original():
    for report in (fixture_report(), judged_report()):
        stored = stored_of(report)
        assert stored["schema"] == findings.STORED_SCHEMA == 3
        assert report_doc.expand_document(stored) == report
        # key order too: the views iterate findings as build_report made them
        for name, host in report_doc.expand_document(stored)["hosts"].items():
            assert [list(f) for f in host["findings"]] == [list(f) for f in report["hosts"][name]["findings"]]


def test_the_stored_document_built_a_host_at_a_time_is_the_compacted_report():
    """build_stored (the report writer's: a host normalized twice, only its stored form kept) gives
    compact_document(build_report(...)) of the same arguments, byte for byte as report.json."""
    with open(os.path.join(FIXTURES, "hosts.json"), encoding="utf-8") as handle:
        fixture = json.load(handle)["hosts"]
    judged = judged_hosts()
    remediated = dict(judged, gpu03={"state": "unreachable", "message": "no route", "findings": []})
    for hosts, kwargs in ((fixture, {"profile": "auto"}), (judged, {}), (remediated, {"preview": True}),
                          (judged, {"started": "2025-06-01T11:59:00+00:00", "collection_version": "9.9.9"}),
                          (judged, {"started": "not a time"}), ({}, {}), (None, {"profile": "amd-epyc-nvidia"})):
        kwargs = dict(kwargs, generated=GENERATED)
        expected = report_doc.compact_document(build_report(hosts, **kwargs))
        stored = report_doc.build_stored(hosts, **kwargs)
        assert stored == expected
        assert report_doc.dumps_document(stored) == report_doc.dumps_document(expected)
    assert report_doc.build_stored(remediated, preview=True)["preview"] is True
    # the same refusals, with the same reasons
    for bad in ([], {"gpu01": {"findings": [{"status": "pass"}]}}, {"gpu01": {"findings": "x"}}):
        with pytest.raises(report_doc.ReportError) as built:
            build_report(bad)
        with pytest.raises(report_doc.ReportError, match=re.escape(str(built.value))):
            report_doc.build_stored(bad)


def test_rules_table_fed_a_finding_at_a_time():
    """RulesTable (what build_stored feeds host by host): the first finding's rule fields, a field
    some finding lacks left out, and the usual message and expected of the quiet findings (the most
    common one shared by two or more; a tie goes to the first seen; fail findings never count)."""
    def finding(rule_id, status, message, expected=1, **more):
        return dict({"id": rule_id, "status": status, "subject": None, "message": message, "expected": expected,
                     "title": "t-" + rule_id, "severity": "high", "fix": "f"}, **more)

    table = findings.RulesTable()
    for f in (finding("A", "pass", "n", expected=2), finding("A", "pass", "m"), finding("A", "pass", "m"),
              finding("A", "fail", "n"), finding("A", "fail", "n"), finding("A", "pass", "n", expected=2),
              finding("B", "not_applicable", "x"), finding("B", "not_applicable", "y"),
              finding("B", "not_applicable", "y"), finding("B", "not_applicable", "x", fix=None),
              finding("C", "pass", "once")):
        if f.get("fix") is None:
            del f["fix"]
        table.add(f)
    rules = table.table()
    assert list(rules) == ["A", "B", "C"]
    assert rules["A"] == {"title": "t-A", "severity": "high", "fix": "f",
                          findings.USUAL: {"expected": 2, "messages": {"pass": {"": "n"}}}}
    # B: "x" and "y" twice each, "x" seen first; one finding has no fix, so the rule states none
    assert rules["B"] == {"title": "t-B", "severity": "high",
                          findings.USUAL: {"expected": 1, "messages": {"not_applicable": {"": "x"}}}}
    assert rules["C"] == {"title": "t-C", "severity": "high", "fix": "f"}  # nothing repeats
    assert findings.rules_table(iter([])) == {}


def test_finding_reader_reads_as_read_finding_does():
    """The reader of a whole report (each rule's part worked out once) gives what read_finding
    gives finding by finding, key order included, odd findings too."""
    for report in (fixture_report(), judged_report()):
        stored = stored_of(report)
        rules = stored["rules"]
        read = findings.finding_reader(rules)
        rows = [f for host in stored["hosts"].values() for f in host["findings"] + (host.get("before") or {}).get(
            "findings", [])]
        rows += [{"id": None, "status": "pass", "zz": 1}, {"id": "NOPE-001", "status": "fail"}, {"status": "pass"},
                 "not a finding", dict(rows[0], aaa=1, zzz=2), dict(rows[0], message=None)]
        for row in rows:
            rule = rules.get(row.get("id")) if isinstance(row, dict) else None
            want = findings.read_finding(row, rule)
            got = read(row)
            assert got == want and (not isinstance(want, dict) or list(got) == list(want))
    # an id that is no key reads with no rule, where looking it up would raise
    assert findings.finding_reader({})({"id": ["x"], "status": "pass"})["id"] == ["x"]


def test_stored_findings_have_named_keys_and_no_rule_text():
    report = judged_report()
    stored = stored_of(report)
    rules = stored["rules"]
    for rule in rules.values():
        assert set(rule) <= set(findings.RULE_TEXT_FIELDS) | {findings.USUAL}
    first = stored["hosts"]["gpu01"]["findings"][0]
    assert list(first)[:2] == ["id", "status"]
    for finding in stored["hosts"]["gpu01"]["findings"]:
        assert isinstance(finding, dict)
        assert not set(findings.RULE_TEXT_FIELDS) & set(finding), finding  # stated once under rules
        assert "pending" not in finding and "waiver" not in finding  # their defaults are left out
        assert None not in [finding.get(k) for k in finding if k in findings.STORED_KEYS]  # nulls left out
    other = stored["hosts"]["gpu02"]["findings"]
    assert other[0]["severity"] == "info"  # differs from its rule: stays with the finding
    assert other[1]["pending"] is True
    assert other[2]["waiver"]["reason"] == "vendor ticket"
    # the full finding's values are there by name (expected: by name, or the rule's usual one)
    full = report["hosts"]["gpu01"]["findings"][0]
    assert first["status"] == full["status"]
    assert first.get("observed") == full["observed"]
    assert first.get("expected", rules[first["id"]].get("usual", {}).get("expected")) == full["expected"]


def test_quiet_findings_leave_the_usual_message_and_expected_to_their_rule():
    """Two alike hosts: a pass finding's message (per rule, status and subject) and expected are
    stated once under rules.<id>.usual; fail findings always carry everything; a quiet finding with
    another value, or with none, states it (null explicitly); and it all reads back exactly."""
    report = judged_report()
    alike = copy.deepcopy(report)
    third = copy.deepcopy(alike["hosts"]["gpu01"])
    third["findings"][3]["message"] = "a message of its own"
    third["findings"][4]["expected"] = None
    third["findings"][5]["status"] = "fail"
    alike["hosts"]["gpu03"] = third
    stored = stored_of(alike)
    assert report_doc.expand_document(stored) == alike
    quiet = [f for f in stored["hosts"]["gpu01"]["findings"] if f["status"] in findings.QUIET_STATUSES]
    assert quiet and all("message" not in f for f in quiet)  # gpu01 and gpu02 say the same
    rule = stored["rules"][third["findings"][0]["id"]]
    assert rule["usual"]["messages"]["pass"]  # stated once, keyed by subject ("" for none)
    own = stored["hosts"]["gpu03"]["findings"]
    assert own[3]["message"] == "a message of its own"
    assert "expected" in own[4] and own[4]["expected"] is None
    failing = own[5]
    assert failing["status"] == "fail" and "message" in failing and "expected" in failing
    # a single host: a message is usual only where two quiet findings of one subject share it
    # (without a remediation's before, whose findings repeat the same ones)
    host = dict((k, v) for k, v in report["hosts"]["gpu01"].items() if k not in ("before", "pending"))
    single = build_report({"gpu01": host}, generated=GENERATED, collection_version="0.1.0")
    alone = stored_of(single)
    assert not [r for r in alone["rules"].values() if r.get("usual", {}).get("messages")]
    assert report_doc.expand_document(alone) == single


def test_store_and_read_one_finding():
    rule = {"title": "t", "area": "pcie", "severity": "high", "fix": "f", "reboot_required": False}
    full = build_report({"h": {"findings": [dict(rule, id="PCI-001", status="fail", subject="0000:41:00.0",
                                                 expected=4096, observed=512, message="m")]}},
                        generated=GENERATED)["hosts"]["h"]["findings"][0]
    table = findings.rules_table([full])
    stored = findings.store_finding(full, table["PCI-001"])
    assert stored == {"id": "PCI-001", "status": "fail", "subject": "0000:41:00.0", "observed": 512,
                      "expected": 4096, "message": "m"}
    assert findings.read_finding(stored, table["PCI-001"]) == full
    assert findings.read_finding("garbage", None) == "garbage"


def test_a_rule_field_only_some_findings_have_stays_with_them():
    report = fixture_report()
    host = report["hosts"]["gpu-incident-01"]
    host["findings"][0]["fix_action"] = "cpu_power"  # its rule's other findings have none
    stored = stored_of(report)
    assert stored["hosts"]["gpu-incident-01"]["findings"][0]["fix_action"] == "cpu_power"
    assert report_doc.expand_document(stored) == report


def test_archived_schema_2_report_still_reads():
    # written by the schema-2 writer from tests/fixtures/report/hosts.json (positional rows)
    with open(os.path.join(FIXTURES, "archived", "schema2-report.json"), encoding="utf-8") as handle:
        archived = json.load(handle)
    assert archived["schema"] == 2
    assert isinstance(archived["hosts"]["gpu-incident-01"]["findings"][0], list)
    read = report_doc.expand_document(archived)
    want = fixture_report()
    assert read["schema"] == 1 and set(read["hosts"]) == set(want["hosts"])
    for name, host in want["hosts"].items():
        got = read["hosts"][name]["findings"]
        # schema 2 carried no pending/waiver when no finding had them; today's build sets them
        assert [dict(f, pending=f.get("pending") is True, waiver=f.get("waiver")) for f in got] == host["findings"]
    # the views read it too
    assert report_doc.expand_document(stored_of(want)) == want


def test_schema_2_rows_with_defaults_and_extras():
    archived = {
        "schema": 2, "generated": GENERATED, "profile": "p", "totals": {},
        "rules": {"NUMA-001": {"title": "t", "area": "numa", "severity": "high", "fix": "f", "expected": 0}},
        "finding_row": ["id", "status", "subject", "observed", "message", "expected"],
        "finding_defaults": {"pending": False, "waiver": None},
        "hosts": {"h": {"state": "audited", "findings": [
            ["NUMA-001", "fail", None, 1, "numa_balancing is 1"],
            ["NUMA-001", "fail", "node1", 1, "m", 0, {"severity": "low", "pending": True}]]}},
    }
    read = report_doc.expand_document(archived)["hosts"]["h"]["findings"]
    assert read[0]["expected"] == 0 and read[0]["severity"] == "high" and read[0]["pending"] is False
    assert read[1]["severity"] == "low" and read[1]["pending"] is True and read[1]["title"] == "t"


def test_schema_1_and_other_documents_come_back_as_they_are():
    report = fixture_report()
    assert report_doc.expand_document(report) is report
    for value in (None, [], "text", {"schema": 3}, {"schema": 3, "hosts": {}}):
        assert report_doc.expand_document(value) == value


def test_compact_and_expand_findings_are_inverse():
    facts = healthy_facts()
    outcome = evaluation.evaluate(facts)
    compact = findings.compact_findings(outcome["findings"])
    assert not any(set(findings.RULE_TEXT_FIELDS) & set(f) for f in compact)
    expanded = findings.expand_findings(compact)
    assert expanded == outcome["findings"]
    assert [list(f) for f in expanded] == [list(f) for f in outcome["findings"]]


def test_packed_findings_read_back_and_build_the_same_report():
    """The roles' host_report holds its findings (and its before's) as one JSON text each: packed
    and read back they are the same, and the report built from the packed part is the report of
    the unpacked one (build_report and map_host_findings read both)."""
    facts = healthy_facts()
    outcome = evaluation.evaluate(facts)
    part = evaluation.host_report(facts, outcome, before=outcome["findings"])
    packed = findings.pack_findings(part)
    assert "findings" not in packed and isinstance(packed[findings.FINDINGS_TEXT], str)
    assert "findings" not in packed["before"] and isinstance(packed["before"][findings.FINDINGS_TEXT], str)
    assert json.loads(packed[findings.FINDINGS_TEXT]) == part["findings"]
    assert "findings" in part and "findings" in part["before"]  # a copy: the part itself is left as it was
    assert findings.unpack_findings(packed) == part
    assert findings.unpack_findings(part) is part  # nothing packed: the part itself
    assert report_doc.map_host_findings(packed, list) == part

    def built(host):
        return build_report({"gpu01": host}, generated=GENERATED, collection_version="0.1.0")
    assert built(packed) == built(part)
    for value in (None, "text", [], {"state": "failed", "message": "unreachable"}):
        assert findings.pack_findings(value) == value and findings.unpack_findings(value) == value


def test_a_packed_text_that_is_no_list_of_findings_is_refused_with_the_reason():
    for text, reason in (("{not json", "is not JSON"), ('{"id": "CPU-001"}', "must hold a list"),
                         (42, "must be a JSON text")):
        host = {"state": "audited", findings.FINDINGS_TEXT: text}
        with pytest.raises(ValueError, match=reason):
            findings.unpack_findings(host)
        with pytest.raises(report_doc.ReportError, match="host gpu01: findings_json " + reason):
            build_report({"gpu01": host}, generated=GENERATED)
        assert report_doc.map_host_findings(host, list) == host  # left for build_report to refuse


def test_the_contract_is_imported_from_findings_only():
    # the judge and its callers read the contract from findings.py; evaluation.py keeps no alias of it
    assert not hasattr(evaluation, "expand_findings") and not hasattr(evaluation, "RULE_TEXT_FIELDS")


def test_summarize_counts_every_status():
    assert findings.summarize([]) == dict((s, 0) for s in findings.STATUSES)
    assert findings.summarize([{"status": "fail"}, {"status": "fail"}])["fail"] == 2
    assert findings.SEVERITIES[0] == "critical" and findings.SEVERITIES[-1] == "info"
