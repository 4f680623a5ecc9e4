# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The machine views of ``report.json``: JUnit XML, the Prometheus text exposition and findings.csv.

Pure functions of the document, like the templates' views (``views.py``), but in Python: they are
formats with exact escaping rules, not layouts a site restyles. XML goes through ``xml.etree``
(characters XML 1.0 cannot carry replaced), Prometheus label values through ``metrics.prom_escape``.
"""

from __future__ import absolute_import, division, print_function

import csv
import io
import re
import xml.etree.ElementTree as ET


from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import metrics
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.findings import STATUS_LABELS, STATUSES, finding_kind
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import expand_document
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.views import _text, _waiver_text, rule_na_reason

__metaclass__ = type


# ---------------------------------------------------------------------------
# JUnit XML
# ---------------------------------------------------------------------------

# Characters XML 1.0 cannot carry at all, even escaped.
_XML_INVALID = re.compile(u"[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _x(value):
    return _XML_INVALID.sub(u"\ufffd", _text(value))


#: The rule text a testcase refers to instead of repeating it: stated once in the file, in the
#: ``<system-out>`` of the last suite, :data:`JUNIT_RULES_SUITE` (a finding whose text differs from
#: its rule's there keeps its own lines).
_JUNIT_RULE_TEXT = ("rationale", "source", "fix")
#: The name of the suite without testcases that states each rule's text once for the whole file.
JUNIT_RULES_SUITE = "gpuhost.baseline rules"
#: The ``<skipped>`` message of a finding whose rule does not apply by its own condition; the
#: condition in words is the rule's ``not applicable:`` line in :data:`JUNIT_RULES_SUITE`.
JUNIT_NA_RULE = "not applicable"


def _junit_details(f, rules):
    """A failing or unknown testcase's text: the finding (its message is the element's ``message``
    attribute, not repeated), the rule's text by reference to ``rules`` (the rules suite's)."""
    rule = rules.get(f["id"]) or {}
    stated = any(rule.get(key) for key in _JUNIT_RULE_TEXT)  # in the rules suite, with its title
    lines = ["rule: %s" % f["id"] if stated and (f.get("title") or "") == (rule.get("title") or "")
             else "rule: %s %s" % (f["id"], f.get("title") or "")]
    if f.get("subject") not in (None, ""):
        lines.append("subject: %s" % _text(f["subject"]))
    lines.extend(("severity: %s" % _text(f.get("severity")),
                  "expected: %s" % _text(f.get("expected")),
                  "observed: %s" % _text(f.get("observed"))))
    for key in _JUNIT_RULE_TEXT:
        if f.get(key) and f.get(key) != rule.get(key):
            lines.append("%s: %s" % (key, _text(f[key])))
    if stated:
        lines.append("title, rationale, source, fix: suite %s" % JUNIT_RULES_SUITE)
    if f.get("waiver"):
        lines.append("waiver: %s" % _waiver_text(f["waiver"]))
    if f.get("pending") is True:
        lines.append("pending: the fix is configured and waits for a reboot")
    if f["reboot_required"]:
        lines.append("reboot required")
    return _x("\n".join(lines))


def _junit_rules(findings, rules=None):
    """``rules`` (``{id: rule text}``, a new mapping when ``None``) with the rule of each finding not
    yet in it: its :data:`_JUNIT_RULE_TEXT` and title as its first finding states them; ``applies``,
    each distinct reason of the rule's not-applicable findings whose reason is the rule's
    (:func:`views.rule_na_reason`: a rule can be left out by its condition on one host and for lack of
    subjects on another), stated in the rules suite instead of in each ``<skipped>``."""
    rules = {} if rules is None else rules
    for f in findings:
        rule = rules.get(f.get("id"))
        if rule is None:
            rule = rules[f.get("id")] = dict((key, f.get(key)) for key in ("title",) + _JUNIT_RULE_TEXT)
            rule["applies"] = []
        if f.get("status") == "not_applicable":
            reason = rule_na_reason(f)
            if reason is not None and reason not in rule["applies"]:
                rule["applies"].append(reason)
    return rules


def _junit_rules_text(rules):
    blocks = []
    for rule_id, rule in sorted(rules.items(), key=lambda item: _text(item[0])):
        if not any(rule.get(key) for key in _JUNIT_RULE_TEXT + ("applies",)):
            continue
        lines = ["%s %s" % (rule_id, _text(rule.get("title") or ""))]
        lines.extend("  %s: %s" % (key, _text(rule[key])) for key in _JUNIT_RULE_TEXT if rule.get(key))
        lines.extend("  not applicable: %s" % _text(reason) for reason in rule.get("applies") or [])
        blocks.append("\n".join(lines))
    return _x("\n\n".join(blocks))


def _junit_rules_suite(report, rules):
    """The suite :data:`JUNIT_RULES_SUITE`: no testcase, each rule of the file's findings once in
    its ``<system-out>``; ``None`` when no rule has text."""
    text = _junit_rules_text(rules)
    if not text:
        return None
    suite = ET.Element("testsuite", {"name": JUNIT_RULES_SUITE, "timestamp": _x(report["generated"]), "time": "0",
                                     "tests": "0", "failures": "0", "errors": "0", "skipped": "0"})
    ET.SubElement(suite, "system-out").text = text
    return suite


def _junit_counts(host):
    """A suite's ``tests``, ``failures``, ``errors``, ``skipped`` from the host's summary (build_report
    counts it from the findings), without reading a finding."""
    summary = host.get("summary") if isinstance(host.get("summary"), dict) else {}
    extra = 0 if host.get("state") == "audited" else 1
    return {"tests": sum(int(summary.get(s) or 0) for s in STATUSES) + extra,
            "failures": int(summary.get("fail") or 0),
            "errors": int(summary.get("unknown") or 0) + extra,
            "skipped": int(summary.get("waived") or 0) + int(summary.get("not_applicable") or 0)}


def _junit_property(props, name, key, value):
    # unique over the whole file: readers that gather every suite's properties into one mapping
    # (xunitparser) refuse a name twice
    ET.SubElement(props, "property", {"name": _x("%s[%s]" % (key, name)), "value": _x(value)})


def _junit_suite(report, name, host, rules):
    """One host's ``<testsuite>`` element; ``host`` as :func:`report.expand_document` gives it; the
    rules of its findings are added to ``rules`` (the file's, stated once in the rules suite)."""
    suite = ET.Element("testsuite", {"name": _x(name), "hostname": _x(name),
                                     "timestamp": _x(report["generated"]), "time": "0"})
    props = ET.SubElement(suite, "properties")
    for key, value in (("collection_version", report["collection_version"]), ("profile", host["profile"]),
                       ("state", host["state"]), ("facts_errors", host["facts_errors"])):
        _junit_property(props, name, key, value)
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    if host["state"] != "audited":
        case = ET.SubElement(suite, "testcase", {"classname": "host", "name": _x("%s %s" % (host["state"], name)),
                                                 "time": "0"})
        err = ET.SubElement(case, "error", {"message": _x(host.get("message") or host["state"]),
                                            "type": _x(host["state"])})
        err.text = _x(host.get("message") or "")
        counts["tests"] += 1
        counts["errors"] += 1
    _junit_rules(host["findings"], rules)
    for f in host["findings"]:
        case_name = f["id"] if not f.get("subject") else "%s %s" % (f["id"], f["subject"])
        case = ET.SubElement(suite, "testcase", {"classname": _x(f.get("area") or "baseline"),
                                                 "name": _x(case_name), "time": "0"})
        counts["tests"] += 1
        status = f["status"]
        msg = _x(f.get("message")
                 or "%s: expected %s, observed %s" % (f["id"], _text(f.get("expected")), _text(f.get("observed"))))
        if status == "fail":
            el = ET.SubElement(case, "failure", {"message": msg, "type": _x(f.get("severity") or "fail")})
            el.text = _junit_details(f, rules)
            counts["failures"] += 1
        elif status == "unknown":
            el = ET.SubElement(case, "error", {"message": msg, "type": "unknown"})
            el.text = _junit_details(f, rules)
            counts["errors"] += 1
        elif status == "not_applicable" and rule_na_reason(f) is not None:
            # the rule's own condition, the same on every host: stated once, in the rules suite
            ET.SubElement(case, "skipped", {"message": JUNIT_NA_RULE})
            counts["skipped"] += 1
        elif status in ("waived", "not_applicable"):
            reason = _waiver_text(f.get("waiver")) if status == "waived" and f.get("waiver") else f.get("message")
            ET.SubElement(case, "skipped", {"message": _x("%s: %s" % (STATUS_LABELS[status], _text(reason or "")))})
            counts["skipped"] += 1
        # a pass is its testcase alone: its expected and observed values are in report.json
    for key, value in counts.items():
        suite.set(key, str(value))
    return suite


def _one_host(report, name, host):
    """The document with only ``name``'s part, expanded (:func:`report.expand_document`, the one reader)."""
    return expand_document(dict(report, hosts={name: host}))["hosts"][name]


def iter_junit(report):
    """JUnit XML in pieces, host by host: a testsuite per host, a testcase per finding, then the suite
    :data:`JUNIT_RULES_SUITE` with the rule text of the file's findings once (docs/report.md has the
    mapping). ``report`` is the document as stored (``report.json``) or expanded; each host is
    expanded on its own while its suite is written, so the whole expanded fleet is never held."""
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for host in report["hosts"].values():
        for key, value in _junit_counts(host).items():
            totals[key] += value
    root = ET.Element("testsuites", dict([("name", _x("gpuhost.baseline %s" % report["profile"])),
                                          ("timestamp", _x(report["generated"]))]
                                         + [(key, str(value)) for key, value in totals.items()]))
    head = ET.tostring(root, encoding="unicode")  # <testsuites ... />
    yield '<?xml version="1.0" encoding="UTF-8"?>\n' + head[:-3] + ">"
    rules = {}
    for name, host in report["hosts"].items():
        yield ET.tostring(_junit_suite(report, name, _one_host(report, name, host), rules), encoding="unicode")
    suite = _junit_rules_suite(report, rules)
    yield ("" if suite is None else ET.tostring(suite, encoding="unicode")) + "</testsuites>\n"


def render_junit(report):
    """JUnit XML as one string (:func:`iter_junit` joined)."""
    return "".join(iter_junit(report))


# ---------------------------------------------------------------------------
# Prometheus text exposition
# ---------------------------------------------------------------------------

def render_prometheus(report, existing=None):
    """Text exposition for node_exporter's textfile collector: ``metrics.render_metrics``, or with
    ``existing`` (the text of the file being replaced) the fleet file ``metrics.merge_metrics``."""
    if existing is None:
        return metrics.render_metrics(report)
    return metrics.merge_metrics(report, existing)


def iter_prometheus(report, existing):
    """The fleet file of :func:`render_prometheus` a piece at a time (``metrics.iter_fleet_metrics``:
    the report writer writes each as it comes; the series per finding are made host by host)."""
    return metrics.iter_fleet_metrics(report, existing)


# ---------------------------------------------------------------------------
# findings.csv
# ---------------------------------------------------------------------------

#: the columns of findings.csv, in order (docs/report.md, "findings.csv")
CSV_COLUMNS = ("host", "rule", "severity", "kind", "area", "status", "subject", "expected", "observed",
               "message", "fix", "first_seen")
#: the statuses findings.csv lists: the work items (a failing finding, or one that could not be judged)
CSV_STATUSES = ("fail", "unknown")
#: a cell starting with one of these is read as a formula by spreadsheet programs (OWASP, "CSV
#: Injection"): it gets a leading apostrophe, which they show as text
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value):
    """One cell's text: ``None`` empty, a string as it is, anything else as JSON-ish text
    (views._text); a formula start neutralised with a leading apostrophe."""
    text = "" if value is None else _text(value)
    return "'" + text if text.startswith(_FORMULA_START) else text


def _first_seen(report, host, f):
    """When a failing finding was first seen, as far as the drift history says: this audit's time when
    it is a new fail, ``before <time>`` when the previous audit saw it failing too, empty without
    history (or for an unknown finding)."""
    changes = host.get("changes") if isinstance(host.get("changes"), dict) else None
    if changes is None or f["status"] != "fail":
        return None
    key = (f["id"], f.get("subject"))
    if any((item.get("rule"), item.get("subject")) == key for item in changes.get("new_fails") or []):
        return report["generated"]
    previous = changes.get("previous") if isinstance(changes.get("previous"), dict) else None
    return "before %s" % previous.get("time") if previous and previous.get("time") else None


def iter_csv(report):
    """findings.csv in pieces, host by host (RFC 4180: CRLF line ends, fields quoted where needed):
    one row per failing or unknown finding, :data:`CSV_COLUMNS`; each host expanded on its own."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")

    def take(row):
        writer.writerow([csv_cell(value) for value in row])
        text = buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
        return text

    yield take(CSV_COLUMNS)
    for name, stored in report["hosts"].items():
        host = _one_host(report, name, stored)
        rows = []
        for f in host["findings"]:
            if f["status"] not in CSV_STATUSES:
                continue
            rows.append(take((name, f["id"], f.get("severity"), f.get("kind") or finding_kind(f.get("area")), f.get("area"),
                              f["status"], f.get("subject"), f.get("expected"), f.get("observed"),
                              f.get("message"), f.get("fix"), _first_seen(report, host, f))))
        yield "".join(rows)


def render_csv(report):
    """findings.csv as one string (:func:`iter_csv` joined)."""
    return "".join(iter_csv(report))
