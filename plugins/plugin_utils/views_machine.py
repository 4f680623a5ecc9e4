# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The machine views of ``report.json``: JUnit XML and the Prometheus text exposition.

Pure functions of the document, like the templates' views (``views.py``), but in Python: they are
formats with exact escaping rules, not layouts a site restyles. XML goes through ``xml.etree``
(characters XML 1.0 cannot carry replaced), Prometheus label values through ``metrics.prom_escape``.
"""

from __future__ import absolute_import, division, print_function

import re
import xml.etree.ElementTree as ET

from ansible_collections.gpuhost.baseline.plugins.plugin_utils import metrics
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.findings import STATUS_LABELS, STATUSES
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import expand_document
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.views import _text, _waiver_text

__metaclass__ = type


# ---------------------------------------------------------------------------
# JUnit XML
# ---------------------------------------------------------------------------

# Characters XML 1.0 cannot carry at all, even escaped.
_XML_INVALID = re.compile(u"[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _x(value):
    return _XML_INVALID.sub(u"\ufffd", _text(value))


#: The rule text a testcase refers to instead of repeating it: stated once per suite, in its
#: ``<system-out>`` (a finding whose text differs from its rule's there keeps its own lines).
_JUNIT_RULE_TEXT = ("rationale", "source", "fix")


def _junit_details(f, rules):
    """A testcase's text: the finding, with the rule's text by reference to the suite's ``rules``."""
    rule = rules.get(f["id"]) or {}
    lines = [
        "rule: %s %s" % (f["id"], f.get("title") or ""),
        "subject: %s" % _text(f.get("subject") or "-"),
        "severity: %s" % _text(f.get("severity")),
        "expected: %s" % _text(f.get("expected")),
        "observed: %s" % _text(f.get("observed")),
    ]
    if f.get("message"):
        lines.append("message: %s" % _text(f["message"]))
    for key in _JUNIT_RULE_TEXT:
        if f.get(key) and f.get(key) != rule.get(key):
            lines.append("%s: %s" % (key, _text(f[key])))
    if any(rule.get(key) for key in _JUNIT_RULE_TEXT):
        lines.append("rationale, source and fix of %s: this suite's system-out" % f["id"])
    if f.get("waiver"):
        lines.append("waiver: %s" % _waiver_text(f["waiver"]))
    if f.get("pending") is True:
        lines.append("pending: the fix is configured and waits for a reboot")
    if f["reboot_required"]:
        lines.append("reboot required")
    return _x("\n".join(lines))


def _junit_rules(findings):
    """``{id: rule text}`` of a suite: each rule's :data:`_JUNIT_RULE_TEXT` as its first finding states it."""
    rules = {}
    for f in findings:
        if f.get("id") not in rules:
            rules[f.get("id")] = dict((key, f.get(key)) for key in ("title",) + _JUNIT_RULE_TEXT)
    return rules


def _junit_rules_text(rules):
    blocks = []
    for rule_id, rule in rules.items():
        if not any(rule.get(key) for key in _JUNIT_RULE_TEXT):
            continue
        lines = ["%s %s" % (rule_id, _text(rule.get("title") or ""))]
        lines.extend("  %s: %s" % (key, _text(rule[key])) for key in _JUNIT_RULE_TEXT if rule.get(key))
        blocks.append("\n".join(lines))
    return _x("\n\n".join(blocks))


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


def _junit_suite(report, name, host):
    """One host's ``<testsuite>`` element; ``host`` as :func:`report.expand_document` gives it."""
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
    rules = _junit_rules(host["findings"])
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
        elif status in ("waived", "not_applicable"):
            reason = _waiver_text(f.get("waiver")) if status == "waived" and f.get("waiver") else f.get("message")
            ET.SubElement(case, "skipped", {"message": _x("%s: %s" % (STATUS_LABELS[status], _text(reason or "")))})
            counts["skipped"] += 1
        else:
            out = ET.SubElement(case, "system-out")
            out.text = _junit_details(f, rules)
    text = _junit_rules_text(rules)
    if text:
        ET.SubElement(suite, "system-out").text = text
    for key, value in counts.items():
        suite.set(key, str(value))
    return suite


def _one_host(report, name, host):
    """The document with only ``name``'s part, expanded (:func:`report.expand_document`, the one reader)."""
    return expand_document(dict(report, hosts={name: host}))["hosts"][name]


def iter_junit(report):
    """JUnit XML in pieces, host by host: a testsuite per host, a testcase per finding (docs/report.md
    has the mapping). ``report`` is the document as stored (``report.json``) or expanded; each host is
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
    for name, host in report["hosts"].items():
        yield ET.tostring(_junit_suite(report, name, _one_host(report, name, host)), encoding="unicode")
    yield "</testsuites>\n"


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
