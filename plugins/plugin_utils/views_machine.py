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
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.findings import STATUS_LABELS
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


def _junit_details(f):
    lines = [
        "rule: %s %s" % (f["id"], f.get("title") or ""),
        "subject: %s" % _text(f.get("subject") or "-"),
        "severity: %s" % _text(f.get("severity")),
        "expected: %s" % _text(f.get("expected")),
        "observed: %s" % _text(f.get("observed")),
    ]
    for key in ("message", "rationale", "source", "fix"):
        if f.get(key):
            lines.append("%s: %s" % (key, _text(f[key])))
    if f.get("waiver"):
        lines.append("waiver: %s" % _waiver_text(f["waiver"]))
    if f.get("pending") is True:
        lines.append("pending: the fix is configured and waits for a reboot")
    if f["reboot_required"]:
        lines.append("reboot required")
    return _x("\n".join(lines))


def render_junit(report):
    """JUnit XML: a testsuite per host, a testcase per finding (see docs/report.md for the mapping)."""
    report = expand_document(report)
    root = ET.Element("testsuites", {
        "name": _x("gpuhost.baseline %s" % report["profile"]),
        "timestamp": _x(report["generated"]),
    })
    all_counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for name, host in report["hosts"].items():
        suite = ET.SubElement(root, "testsuite", {"name": _x(name), "hostname": _x(name),
                                                  "timestamp": _x(report["generated"]), "time": "0"})
        props = ET.SubElement(suite, "properties")
        for key, value in (("collection_version", report["collection_version"]), ("profile", host["profile"]),
                           ("state", host["state"]), ("facts_errors", host["facts_errors"])):
            ET.SubElement(props, "property", {"name": key, "value": _x(value)})
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        if host["state"] != "audited":
            case = ET.SubElement(suite, "testcase", {"classname": "host", "name": _x("%s %s" % (host["state"], name)),
                                                     "time": "0"})
            err = ET.SubElement(case, "error", {"message": _x(host.get("message") or host["state"]),
                                                "type": _x(host["state"])})
            err.text = _x(host.get("message") or "")
            counts["tests"] += 1
            counts["errors"] += 1
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
                el.text = _junit_details(f)
                counts["failures"] += 1
            elif status == "unknown":
                el = ET.SubElement(case, "error", {"message": msg, "type": "unknown"})
                el.text = _junit_details(f)
                counts["errors"] += 1
            elif status in ("waived", "not_applicable"):
                reason = _waiver_text(f.get("waiver")) if status == "waived" and f.get("waiver") else f.get("message")
                ET.SubElement(case, "skipped", {"message": _x("%s: %s" % (STATUS_LABELS[status], _text(reason or "")))})
                counts["skipped"] += 1
            else:
                out = ET.SubElement(case, "system-out")
                out.text = _junit_details(f)
        for key, value in counts.items():
            suite.set(key, str(value))
            all_counts[key] += value
    for key, value in all_counts.items():
        root.set(key, str(value))
    body = ET.tostring(root, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"


# ---------------------------------------------------------------------------
# Prometheus text exposition
# ---------------------------------------------------------------------------

def render_prometheus(report, existing=None):
    """Text exposition for node_exporter's textfile collector: ``metrics.render_metrics``, or with
    ``existing`` (the text of the file being replaced) the fleet file ``metrics.merge_metrics``."""
    if existing is None:
        return metrics.render_metrics(report)
    return metrics.merge_metrics(report, existing)
