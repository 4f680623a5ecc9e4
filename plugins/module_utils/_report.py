# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build ``report.json`` from evaluated findings and render its views.

``build_report`` assembles the document (schema in ``docs/report.md``); every
``render_*`` function is a pure function of that document alone, so a view can
be regenerated from a stored ``report.json`` at any time. Every value coming
from hosts (hostnames, GPU names, messages) is treated as hostile: HTML through
``html.escape``, XML through ``xml.etree``, Prometheus label values and Markdown
cells through their own escaping.
"""

from __future__ import absolute_import, division, print_function

import datetime
import html
import json
import math
import os
import re
import tempfile
import xml.etree.ElementTree as ET

__metaclass__ = type

SCHEMA = 1

#: Finding statuses, in the order summaries list them.
STATUSES = ("pass", "fail", "unknown", "waived", "not_applicable")

#: Worst first: the status a matrix cell shows when a rule has several subjects.
STATUS_WORST_FIRST = ("fail", "unknown", "waived", "pass", "not_applicable")

STATUS_LABELS = {
    "pass": "pass",
    "fail": "fail",
    "unknown": "unknown",
    "waived": "waived",
    "not_applicable": "n/a",
}

#: Value of ``gpuhost_baseline_rule_status``; 0 is the one to alert on.
PROM_STATUS_VALUES = {
    "fail": 0,
    "pass": 1,
    "waived": 2,
    "not_applicable": 3,
    "unknown": -1,
}

#: Severity rank: higher is worse. ``info`` findings never trip ``fail_on``.
SEVERITY_RANK = {"info": 0, "low": 1, "medium": 2, "high": 3, "critical": 4}

HOST_STATES = ("audited", "unreachable", "failed")

#: format name -> file name written by ``write_reports``.
FORMAT_FILES = (
    ("json", "report.json"),
    ("md", "report.md"),
    ("html", "report.html"),
    ("junit", "junit.xml"),
    ("prom", "metrics.prom"),
)
FORMATS = tuple(name for name, dummy in FORMAT_FILES)

FINDING_KEYS = (
    "id", "title", "area", "severity", "status", "subject", "expected", "observed",
    "message", "rationale", "source", "fix", "reboot_required",
)


class ReportError(ValueError):
    """The input handed to ``build_report`` breaks the findings contract."""


# ---------------------------------------------------------------------------
# building report.json
# ---------------------------------------------------------------------------

def _plain(value):
    """Return ``value`` as plain JSON types (Ansible hands us str/dict subclasses)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        # NaN/inf are not JSON: keep them readable instead of producing an invalid document.
        if math.isnan(value) or math.isinf(value):
            return str(value)
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, dict):
        return dict((str(k), _plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_plain(v) for v in value]
        if isinstance(value, (set, frozenset)):
            items.sort(key=lambda v: json.dumps(v, sort_keys=True))
        return items
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    return str(value)


def summarize(findings):
    """Count findings per status (all five keys, zero included)."""
    summary = dict((status, 0) for status in STATUSES)
    for finding in findings:
        summary[finding["status"]] = summary.get(finding["status"], 0) + 1
    return summary


def _normalize_finding(host, finding, where):
    if not isinstance(finding, dict):
        raise ReportError("host %s: %s entry is %s, not a finding mapping" % (host, where, type(finding).__name__))
    plain = _plain(finding)
    rule_id = plain.get("id")
    if not rule_id or not isinstance(rule_id, str):
        raise ReportError("host %s: a %s entry has no rule id: %s" % (host, where, json.dumps(plain, sort_keys=True)[:200]))
    status = plain.get("status")
    if status not in STATUSES:
        raise ReportError(
            "host %s, rule %s: status %r is not one of %s; the evaluator must produce one of them"
            % (host, rule_id, status, ", ".join(STATUSES))
        )
    out = {}
    for key in FINDING_KEYS:
        out[key] = plain.get(key)
    out["reboot_required"] = bool(out["reboot_required"])
    if out["area"] is None:
        out["area"] = rule_id.split("-", 1)[0].lower()
    if out["title"] is None:
        out["title"] = rule_id
    if out["subject"] is not None and not isinstance(out["subject"], str):
        out["subject"] = str(out["subject"])
    # Keys the evaluator adds beyond the contract (waiver, params...) travel along.
    for key in sorted(plain):
        if key not in out:
            out[key] = plain[key]
    return out


def _normalize_numa(nodes):
    if not isinstance(nodes, list):
        return []
    out = []
    for index, node in enumerate(nodes):
        if not isinstance(node, dict):
            continue
        total = node.get("mem_total_kb")
        free = node.get("mem_free_kb")
        total = total if isinstance(total, (int, float)) and not isinstance(total, bool) else None
        free = free if isinstance(free, (int, float)) and not isinstance(free, bool) else None
        pct = node.get("free_pct")
        if not isinstance(pct, (int, float)) or isinstance(pct, bool):
            pct = round(100.0 * free / total, 2) if total and free is not None else None
        node_id = node.get("id", index)
        out.append({
            "id": _plain(node_id),
            "mem_total_kb": _plain(total),
            "mem_free_kb": _plain(free),
            "free_pct": _plain(pct),
        })
    return out


def _normalize_pending(pending):
    if pending is None:
        return []
    if not isinstance(pending, (list, tuple)):
        pending = [pending]
    out = []
    for item in pending:
        item = _plain(item)
        out.append(item if isinstance(item, dict) else {"message": str(item)})
    return out


def _pending_from_findings(findings):
    """The evaluator marks a finding ``pending`` when its fix is configured but waits for a reboot."""
    return [{"id": f["id"], "subject": f.get("subject"), "message": f.get("message") or f.get("title")}
            for f in findings if f.get("pending") is True]


def _count_errors(value):
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, (list, tuple, dict)):
        return len(value)
    return 0


def _normalize_host(name, data, default_profile):
    if not isinstance(data, dict):
        raise ReportError("host %s: expected a mapping with findings, got %s" % (name, type(data).__name__))
    findings = data.get("findings") or []
    if not isinstance(findings, (list, tuple)):
        raise ReportError("host %s: findings must be a list, got %s" % (name, type(findings).__name__))
    findings = [_normalize_finding(name, f, "findings") for f in findings]
    state = data.get("state") or "audited"
    if state not in HOST_STATES:
        raise ReportError("host %s: state %r is not one of %s" % (name, state, ", ".join(HOST_STATES)))
    host = {
        "state": state,
        "message": _plain(data.get("message")) or None,
        "profile": _plain(data.get("profile")) or default_profile,
        "summary": summarize(findings),
        "findings": findings,
        "numa": _normalize_numa(_plain(data.get("numa"))),
        "facts_errors": _count_errors(data.get("facts_errors")),
        "pending": _normalize_pending(data.get("pending")) if data.get("pending") is not None
        else _pending_from_findings(findings),
    }
    before = data.get("before")
    if before is not None:
        if isinstance(before, dict):
            before = before.get("findings") or []
        if not isinstance(before, (list, tuple)):
            raise ReportError("host %s: before must be a list of findings" % name)
        before = [_normalize_finding(name, f, "before") for f in before]
        host["before"] = {"summary": summarize(before), "findings": before}
    return host


def _fail_by_severity(hosts):
    counts = dict((sev, 0) for sev in sorted(SEVERITY_RANK, key=SEVERITY_RANK.get, reverse=True))
    for host in hosts.values():
        for finding in host["findings"]:
            if finding["status"] == "fail":
                sev = finding.get("severity") or "unknown"
                counts[sev] = counts.get(sev, 0) + 1
    return counts


def _totals(hosts):
    totals = {"hosts": len(hosts)}
    for state in HOST_STATES:
        totals[state] = sum(1 for h in hosts.values() if h["state"] == state)
    for status in STATUSES:
        totals[status] = sum(h["summary"][status] for h in hosts.values())
    totals["hosts_failing"] = sum(1 for h in hosts.values() if h["summary"]["fail"])
    totals["reboot_required"] = sum(
        1 for h in hosts.values() if any(f["reboot_required"] and f["status"] == "fail" for f in h["findings"])
    )
    totals["fail_by_severity"] = _fail_by_severity(hosts)
    return totals


def _generated_text(generated):
    if generated is None:
        generated = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    if isinstance(generated, datetime.datetime):
        if generated.tzinfo is None:
            generated = generated.replace(tzinfo=datetime.timezone.utc)
        return generated.isoformat()
    return str(generated)


def build_report(hosts, profile=None, generated=None, collection_version=None):
    """Return the report.json document for ``hosts``.

    ``hosts`` maps inventory_hostname -> ``{"findings", "profile", "numa", "facts_errors",
    "state", "message", "before", "pending"}`` (all but findings optional). Summaries are
    recomputed from the findings so they can never disagree with them. Raises
    :class:`ReportError` when a finding breaks the contract (unknown status, no rule id).
    """
    if hosts is None:
        hosts = {}
    if not isinstance(hosts, dict):
        raise ReportError("hosts must map inventory_hostname to findings, got %s" % type(hosts).__name__)
    default_profile = _plain(profile) or None
    out_hosts = {}
    for name in sorted(hosts, key=str):
        out_hosts[str(name)] = _normalize_host(str(name), hosts[name], default_profile)
    profiles = sorted(set(h["profile"] for h in out_hosts.values() if h["profile"]))
    if len(profiles) == 1:
        top_profile = profiles[0]
    elif len(profiles) > 1:
        top_profile = "mixed"
    else:
        top_profile = default_profile or "unknown"
    return {
        "schema": SCHEMA,
        "generated": _generated_text(generated),
        "collection_version": _plain(collection_version) or "unknown",
        "profile": top_profile,
        "totals": _totals(out_hosts),
        "hosts": out_hosts,
    }


def failing_at_or_above(report, severity):
    """``[(host, finding)]`` failing with a severity ranked at or above ``severity``."""
    threshold = SEVERITY_RANK[severity]
    out = []
    for name, host in report["hosts"].items():
        for finding in host["findings"]:
            rank = SEVERITY_RANK.get(finding.get("severity"), SEVERITY_RANK["critical"])
            if finding["status"] == "fail" and rank >= threshold:
                out.append((name, finding))
    return out


# ---------------------------------------------------------------------------
# helpers shared by the views
# ---------------------------------------------------------------------------

def _text(value):
    """Human text for an expected/observed value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True)


def _rule_columns(report):
    """Every rule id seen on any host, ``[(area, id, title)]`` sorted by area then id."""
    rules = {}
    for host in report["hosts"].values():
        for finding in host["findings"]:
            rules.setdefault(finding["id"], (finding.get("area") or "", finding.get("title") or finding["id"]))
    return sorted(((area, rid, title) for rid, (area, title) in rules.items()), key=lambda r: (r[0], r[1]))


def _cell(findings):
    """Worst status of a rule's findings on one host, and how many subjects have it."""
    statuses = [f["status"] for f in findings]
    for status in STATUS_WORST_FIRST:
        if status in statuses:
            return status, statuses.count(status)
    return None, 0


def _by_rule(findings):
    out = {}
    for finding in findings:
        out.setdefault(finding["id"], []).append(finding)
    return out


def _sort_findings(findings):
    order = dict((s, i) for i, s in enumerate(STATUS_WORST_FIRST))
    return sorted(
        findings,
        key=lambda f: (order.get(f["status"], 9), -SEVERITY_RANK.get(f.get("severity"), 0), f["id"], f.get("subject") or ""),
    )


def _severity_order(sev):
    return -SEVERITY_RANK.get(sev, -1)


def _pending_text(item):
    if not isinstance(item, dict):
        return str(item)
    head = " ".join(_text(item[k]) for k in ("id", "subject") if item.get(k) is not None)
    body = item.get("message")
    if body is None:
        rest = dict((k, v) for k, v in item.items() if k not in ("id", "subject"))
        body = _text(rest) if rest else ""
    return ("%s: %s" % (head, _text(body))) if head else _text(body)


def _waiver_text(waiver):
    """``reason (until 2026-03-31)`` from the evaluator's waiver mapping; other shapes as text."""
    if not waiver:
        return ""
    if isinstance(waiver, dict):
        text = _text(waiver.get("reason") or "no reason given")
        if waiver.get("expires"):
            text += " (%s %s)" % ("EXPIRED" if waiver.get("expired") else "until", _text(waiver["expires"]))
        return text
    return _text(waiver)


def _safe_url(url):
    """Only http(s) URLs become links; anything else (javascript:, data:) stays text."""
    if isinstance(url, str) and re.match(r"^https?://[^\s<>\"']+$", url):
        return url
    return None


def _kib(kb):
    if kb is None:
        return "?"
    return "%.1f GiB" % (kb / 1048576.0)


def _changes(host):
    """(rule id, subject, before status, after status) for each finding whose status moved."""
    before = host.get("before")
    if not before:
        return []
    after = dict(((f["id"], f.get("subject")), f["status"]) for f in host["findings"])
    seen = set()
    out = []
    for f in before["findings"]:
        key = (f["id"], f.get("subject"))
        seen.add(key)
        now = after.get(key)
        if now != f["status"]:
            out.append((f["id"], f.get("subject"), f["status"], now))
    for f in host["findings"]:
        key = (f["id"], f.get("subject"))
        if key not in seen:
            out.append((f["id"], f.get("subject"), None, f["status"]))
    return out


# ---------------------------------------------------------------------------
# Markdown
# ---------------------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|#<>&~])")


def md_escape(value):
    """Escape a value for a Markdown table cell or heading: no markup, no links, one line."""
    text = _text(value)
    text = _MD_SPECIAL.sub(lambda m: {"<": "&lt;", ">": "&gt;", "&": "&amp;"}.get(m.group(1), "\\" + m.group(1)), text)
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "<br>")


def _md_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for dummy in header) + "|"]
    for row in rows:
        lines.append("| " + " | ".join(row) + " |")
    return lines


def render_markdown(report):
    """Markdown for people and pull requests: fleet summary, then non-pass findings per host."""
    totals = report["totals"]
    lines = [
        "# GPU host baseline report",
        "",
        "Collection gpuhost.baseline %s, profile %s, generated %s."
        % (md_escape(report["collection_version"]), md_escape(report["profile"]), md_escape(report["generated"])),
        "",
        "%d host(s): %d audited, %d unreachable, %d failed; %d with failing rules. "
        "Findings: %d pass, %d fail, %d unknown, %d waived, %d not applicable."
        % (totals["hosts"], totals["audited"], totals["unreachable"], totals["failed"], totals["hosts_failing"],
           totals["pass"], totals["fail"], totals["unknown"], totals["waived"], totals["not_applicable"]),
        "",
        "## Fleet",
        "",
    ]
    rows = []
    for name, host in report["hosts"].items():
        s = host["summary"]
        rows.append([md_escape(name), md_escape(host["state"]), md_escape(host["profile"])]
                    + [str(s[k]) for k in STATUSES] + [str(host["facts_errors"])])
    lines += _md_table(["host", "state", "profile", "pass", "fail", "unknown", "waived", "n/a", "facts errors"], rows)
    for name, host in report["hosts"].items():
        lines += ["", "## %s" % md_escape(name), ""]
        if host["state"] != "audited":
            lines.append("**%s**: %s" % (md_escape(host["state"]), md_escape(host.get("message") or "no reason given")))
            continue
        if host.get("message"):
            lines += [md_escape(host["message"]), ""]
        problems = [f for f in _sort_findings(host["findings"]) if f["status"] != "pass"]
        if problems:
            rows = []
            for f in problems:
                rows.append([md_escape(STATUS_LABELS[f["status"]]), md_escape(f.get("severity")), md_escape(f["id"]),
                             md_escape(f.get("subject") or ""), md_escape(f.get("expected")), md_escape(f.get("observed")),
                             md_escape(f.get("message") or ""), md_escape(f.get("fix") or ""),
                             "pending" if f.get("pending") is True else ("yes" if f["reboot_required"] else "")])
            lines += _md_table(["status", "severity", "rule", "subject", "expected", "observed", "message", "fix", "reboot"],
                               rows)
        else:
            lines.append("All %d findings pass." % host["summary"]["pass"])
        if host["summary"]["pass"] and problems:
            lines += ["", "%d passing finding(s) not listed." % host["summary"]["pass"]]
        if host["pending"]:
            lines += ["", "Pending (takes effect after reboot or action):", ""]
            lines += ["- %s" % md_escape(_pending_text(p)) for p in host["pending"]]
        changes = _changes(host)
        if changes:
            lines += ["", "Before -> after remediation:", ""]
            lines += _md_table(["rule", "subject", "before", "after"],
                               [[md_escape(r), md_escape(s or ""), md_escape(b or "-"), md_escape(a or "-")]
                                for r, s, b, a in changes])
        if host["facts_errors"]:
            lines += ["", "%d fact(s) could not be read; see the host's facts errors." % host["facts_errors"]]
    lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# HTML
# ---------------------------------------------------------------------------

def h(value):
    """HTML-escape any value, quotes included (safe in text and attribute values)."""
    return html.escape(_text(value), quote=True)


_CSS = """
:root{--pass:#2f9e44;--pass-bg:#d3f9d8;--fail:#c92a2a;--fail-bg:#ffc9c9;--unknown:#e67700;--unknown-bg:#ffec99;
--waived:#5f3dc4;--waived-bg:#e5dbff;--na:#868e96;--na-bg:#f1f3f5;--line:#dee2e6;--ink:#212529;--muted:#6c757d}
*{box-sizing:border-box}
body{font:13px/1.4 -apple-system,"Segoe UI",Roboto,"DejaVu Sans","Liberation Sans",Arial,sans-serif;color:var(--ink);
margin:0;padding:16px 20px;background:#fff}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:22px 0 6px;border-bottom:2px solid var(--line);padding-bottom:3px}
h3{font-size:14px;margin:14px 0 6px}
.stamp{color:var(--muted);margin-bottom:10px}
.stamp b{color:var(--ink)}
.mono,code{font-family:"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:12px}
table{border-collapse:collapse}
.totals td,.totals th{padding:2px 10px 2px 0;text-align:left}
.legend{display:flex;flex-wrap:wrap;gap:12px;margin:8px 0 10px;align-items:center}
.legend span.sw{display:inline-block;width:14px;height:14px;border-radius:2px;vertical-align:-2px;margin-right:4px;
border:1px solid rgba(0,0,0,.15)}
.matrix-wrap{overflow-x:auto;max-width:100%}
table.matrix th,table.matrix td{border:1px solid var(--line);padding:0}
table.matrix th.rule{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap;font-weight:600;
font-size:11px;padding:4px 2px;height:80px;text-align:left}
table.matrix th.area{font-size:11px;text-transform:uppercase;letter-spacing:.04em;background:#f8f9fa;padding:2px 4px}
table.matrix th.host{text-align:left;padding:2px 8px;white-space:nowrap;font-weight:600;max-width:260px;
overflow:hidden;text-overflow:ellipsis}
table.matrix td.c{width:26px;min-width:26px;height:22px;text-align:center;font-size:11px;font-weight:700}
table.matrix td.c a{display:block;color:inherit;text-decoration:none;line-height:22px}
table.matrix td.unreach{padding:2px 8px;font-style:italic}
table.matrix td.sum{padding:2px 6px;white-space:nowrap;font-size:12px;text-align:right}
.st-pass{background:var(--pass-bg);color:var(--pass)}.st-fail{background:var(--fail-bg);color:var(--fail)}
.st-unknown{background:var(--unknown-bg);color:var(--unknown)}.st-waived{background:var(--waived-bg);color:var(--waived)}
.st-not_applicable{background:var(--na-bg);color:var(--na)}.st-none{background:#fff;color:#ced4da}
.st-unreachable,.st-failed{background:repeating-linear-gradient(45deg,#fff,#fff 6px,#f1f3f5 6px,#f1f3f5 12px);color:var(--fail)}
.badge{display:inline-block;padding:0 6px;border-radius:9px;font-size:11px;font-weight:700;margin-right:4px;
border:1px solid rgba(0,0,0,.08)}
.sev-critical{background:#c92a2a;color:#fff}.sev-high{background:#f76707;color:#fff}.sev-medium{background:#fab005;color:#212529}
.sev-low{background:#dee2e6;color:#212529}.sev-info{background:#e7f5ff;color:#1864ab}
section.host{margin-top:18px}
.hosthead{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start}
.hostmeta{min-width:300px}
.hostmeta div{margin:1px 0}
table.findings{width:100%;margin-top:6px;table-layout:fixed}
table.findings th{background:#f8f9fa;text-align:left;font-size:12px;border-bottom:2px solid var(--line);padding:3px 6px}
table.findings td{border-bottom:1px solid var(--line);padding:3px 6px;vertical-align:top;overflow-wrap:anywhere}
table.findings td.obs{font-weight:600}
table.findings tr.st-fail td:first-child{border-left:4px solid var(--fail)}
table.findings tr.st-unknown td:first-child{border-left:4px solid var(--unknown)}
table.findings tr.st-waived td:first-child{border-left:4px solid var(--waived)}
table.findings tr.st-not_applicable td:first-child{border-left:4px solid var(--na)}
table.findings tr.st-pass td:first-child{border-left:4px solid var(--pass)}
table.findings tr{background:#fff;color:var(--ink)}
.why{color:var(--muted);font-size:12px}
.fix{font-size:12px}
.reboot{color:var(--fail);font-weight:700;font-size:11px}
details{margin-top:6px}
summary{cursor:pointer;color:var(--muted)}
.numa svg{display:block}
.pending li{margin:2px 0}
.err{color:var(--fail)}
footer{margin-top:28px;color:var(--muted);font-size:11px;border-top:1px solid var(--line);padding-top:6px}
@media print{.matrix-wrap{overflow:visible}details{display:block}}
"""


def _svg_numa(nodes):
    """Per-node memory bars (used vs free), scaled to the largest node so a missing DIMM shows short."""
    if not nodes:
        return ""
    width, bar_h, gap, label_w, text_w = 300, 16, 6, 64, 270
    largest = max([n["mem_total_kb"] or 0 for n in nodes] + [1])
    height = len(nodes) * (bar_h + gap) + 4
    parts = ['<svg class="numa-chart" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img" '
             'aria-label="NUMA memory per node">' % (label_w + width + text_w, height)]
    for i, node in enumerate(nodes):
        y = 2 + i * (bar_h + gap)
        total = node["mem_total_kb"]
        free = node["mem_free_kb"]
        pct = node["free_pct"]
        parts.append('<g class="numa-node" data-node="%s">' % h(node["id"]))
        parts.append('<text x="0" y="%d" font-size="12" fill="#212529">node %s</text>' % (y + 12, h(node["id"])))
        if total:
            full = width * total / largest
            free_w = full * max(0.0, min(1.0, (free or 0) / float(total)))
            parts.append('<rect class="used" x="%d" y="%d" width="%.1f" height="%d" fill="#495057"><title>used %s</title></rect>'
                         % (label_w, y, full - free_w, bar_h, h(_kib(total - (free or 0)))))
            parts.append('<rect class="free" x="%.1f" y="%d" width="%.1f" height="%d" fill="#69db7c"><title>free %s</title></rect>'
                         % (label_w + full - free_w, y, free_w, bar_h, h(_kib(free))))
            label = "%s%% free (%s of %s)" % ("?" if pct is None else ("%.1f" % pct), _kib(free), _kib(total))
        else:
            parts.append('<rect class="nomem" x="%d" y="%d" width="%d" height="%d" fill="#f1f3f5" stroke="#ced4da"/>'
                         % (label_w, y, width, bar_h))
            label = "no memory reported"
        parts.append('<text class="pct" x="%d" y="%d" font-size="12" fill="#212529">%s</text>'
                     % (label_w + width + 6, y + 12, h(label)))
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)


def _badge_status(status, count=None):
    label = STATUS_LABELS.get(status, status)
    if count is not None:
        label = "%d %s" % (count, label)
    return '<span class="badge st-%s">%s</span>' % (h(status), h(label))


def _badge_sev(sev):
    if not sev:
        return ""
    return '<span class="badge sev-%s">%s</span>' % (h(sev), h(sev))


def _finding_row(f, anchor):
    src = _safe_url(f.get("source"))
    if src:
        source = '<a href="%s" rel="noopener noreferrer">source</a>' % h(src)
    elif f.get("source"):
        source = '<span class="mono">%s</span>' % h(f["source"])
    else:
        source = ""
    why = []
    if f.get("rationale"):
        why.append(h(f["rationale"]))
    if f.get("waiver"):
        why.append("<b>waiver:</b> %s" % h(_waiver_text(f["waiver"])))
    fix = h(f.get("fix") or "")
    if f.get("pending") is True:
        fix += ' <span class="reboot">pending reboot</span>'
    elif f["reboot_required"]:
        fix += ' <span class="reboot">reboot required</span>'
    return (
        '<tr class="st-%s" id="%s"><td>%s%s</td><td class="mono">%s<br>%s</td>'
        '<td class="mono">%s</td><td class="mono">%s</td><td class="mono obs">%s</td>'
        '<td>%s<div class="why">%s</div></td><td class="fix">%s<div>%s</div></td></tr>'
        % (h(f["status"]), h(anchor), _badge_status(f["status"]), _badge_sev(f.get("severity")), h(f["id"]),
           h(f.get("title") or ""), h(f.get("subject") or ""), h(f.get("expected")), h(f.get("observed")),
           h(f.get("message") or ""), "<br>".join(why), fix, source)
    )


#: What a single-subject matrix cell shows (several subjects show their count).
_CELL_MARKS = {"pass": "&#10003;", "fail": "&#10007;", "unknown": "?", "waived": "W", "not_applicable": "&ndash;"}

_FINDINGS_HEAD = ('<colgroup><col style="width:124px"><col style="width:17%"><col style="width:9%">'
                  '<col style="width:9%"><col style="width:9%"><col><col style="width:20%"></colgroup>'
                  '<thead><tr><th>status</th><th>rule</th><th>subject</th><th>expected</th><th>observed</th>'
                  '<th>message / rationale</th><th>fix / source</th></tr></thead>')


def render_html(report):
    """One self-contained HTML page: inline CSS and SVG, no script, no external asset."""
    columns = _rule_columns(report)
    host_ids = dict((name, "host-%d" % i) for i, name in enumerate(report["hosts"]))
    totals = report["totals"]
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="generator" content="gpuhost.baseline %s">' % h(report["collection_version"]),
        "<title>GPU host baseline: %d host(s), %d failing finding(s)</title>" % (totals["hosts"], totals["fail"]),
        "<style>%s</style></head><body>" % _CSS,
        "<h1>GPU host baseline report</h1>",
        '<div class="stamp">collection <b>gpuhost.baseline %s</b> &middot; profile <b>%s</b> &middot; generated <b>%s</b>'
        " &middot; report schema %s</div>"
        % (h(report["collection_version"]), h(report["profile"]), h(report["generated"]), h(report["schema"])),
        '<table class="totals"><tr><th>hosts</th><td>%d (%d audited, %d unreachable, %d failed)</td>'
        "<th>with failures</th><td>%d</td><th>needing reboot</th><td>%d</td><th>failing by severity</th><td>%s</td>"
        "</tr></table>"
        % (totals["hosts"], totals["audited"], totals["unreachable"], totals["failed"], totals["hosts_failing"],
           totals["reboot_required"],
           " ".join(_badge_sev(sev) + h(n) for sev, n in totals["fail_by_severity"].items() if n) or "none"),
        '<div class="legend">findings: %s</div>' % " ".join(_badge_status(s, totals[s]) for s in STATUS_WORST_FIRST),
        '<div class="legend"><span><span class="sw st-fail"></span>fail</span>'
        '<span><span class="sw st-unknown"></span>unknown (facts missing)</span>'
        '<span><span class="sw st-waived"></span>waived</span><span><span class="sw st-pass"></span>pass</span>'
        '<span><span class="sw st-not_applicable"></span>not applicable</span>'
        '<span><span class="sw st-none"></span>not evaluated</span>'
        '<span><span class="sw st-unreachable"></span>host unreachable / failed</span>'
        '<span class="why">cell number = subjects (GPUs, bridges, nodes) in the shown, worst status</span></div>',
        "<h2>Fleet matrix</h2>",
        '<div class="matrix-wrap"><table class="matrix" id="matrix"><thead>',
    ]
    # Area header row: one cell spanning the rules of each area.
    areas = []
    for area, dummy, dummy2 in columns:
        if areas and areas[-1][0] == area:
            areas[-1][1] += 1
        else:
            areas.append([area, 1])
    out.append('<tr><th class="area"></th>%s<th class="area"></th></tr>'
               % "".join('<th class="area" colspan="%d">%s</th>' % (n, h(a)) for a, n in areas))
    out.append('<tr><th class="host">host</th>%s<th class="area">fail / unknown / pass</th></tr></thead><tbody>'
               % "".join('<th class="rule" data-rule="%s" title="%s">%s</th>' % (h(rid), h(title), h(rid))
                         for dummy, rid, title in columns))
    for name, host in report["hosts"].items():
        hid = host_ids[name]
        row = ['<tr class="hostrow" data-state="%s"><th class="host" title="%s"><a href="#%s">%s</a></th>'
               % (h(host["state"]), h(name), hid, h(name))]
        if host["state"] != "audited":
            row.append('<td class="unreach st-%s" colspan="%d">%s: %s</td>'
                       % (h(host["state"]), max(len(columns), 1), h(host["state"]), h(host.get("message") or "")))
        else:
            rules = _by_rule(host["findings"])
            for dummy, rid, title in columns:
                found = rules.get(rid)
                if not found:
                    row.append('<td class="c st-none" title="%s: not evaluated on this host">&middot;</td>' % h(rid))
                    continue
                status, count = _cell(found)
                counts = ", ".join("%d %s" % (sum(1 for f in found if f["status"] == s), STATUS_LABELS[s])
                                   for s in STATUS_WORST_FIRST if any(f["status"] == s for f in found))
                mark = str(count) if len(found) > 1 else _CELL_MARKS[status]
                row.append('<td class="c st-%s" data-rule="%s" data-count="%d" title="%s on %s: %s">'
                           '<a href="#%s-%s">%s</a></td>'
                           % (h(status), h(rid), count, h(rid), h(name), h(counts), hid, h(rid), mark))
        s = host["summary"]
        row.append('<td class="sum">%d / %d / %d</td></tr>' % (s["fail"], s["unknown"], s["pass"]))
        out.append("".join(row))
    out.append("</tbody></table></div>")

    out.append("<h2>Hosts</h2>")
    for name, host in report["hosts"].items():
        hid = host_ids[name]
        out.append('<section class="host" id="%s" data-state="%s">' % (hid, h(host["state"])))
        out.append('<h3 class="hostname">%s</h3>' % h(name))
        meta = ['<div class="hostmeta">',
                "<div>state <b>%s</b> &middot; profile <b>%s</b></div>" % (h(host["state"]), h(host["profile"]))]
        if host.get("message"):
            meta.append('<div class="err">%s</div>' % h(host["message"]))
        if host["state"] == "audited":
            meta.append("<div>%s</div>" % " ".join(_badge_status(st, host["summary"][st]) for st in STATUS_WORST_FIRST))
        if host["facts_errors"]:
            meta.append('<div class="err">%d fact(s) could not be read (see facts errors)</div>' % host["facts_errors"])
        if host["pending"]:
            meta.append('<div>pending:</div><ul class="pending">%s</ul>'
                        % "".join("<li>%s</li>" % h(_pending_text(p)) for p in host["pending"]))
        meta.append("</div>")
        out.append('<div class="hosthead">%s' % "".join(meta))
        if host["numa"]:
            out.append('<div class="numa"><div class="why">NUMA memory per node (dark used, green free; '
                       'bar length = node size)</div>%s</div>' % _svg_numa(host["numa"]))
        out.append("</div>")
        if host["state"] == "audited":
            ordered = _sort_findings(host["findings"])
            problems = [f for f in ordered if f["status"] != "pass"]
            passes = [f for f in ordered if f["status"] == "pass"]
            seen = set()

            def anchor(f):
                # The first finding of a rule carries the anchor the matrix cell links to.
                key = "%s-%s" % (hid, f["id"])
                if key in seen:
                    return ""
                seen.add(key)
                return key

            if problems:
                out.append('<table class="findings problems">%s<tbody>' % _FINDINGS_HEAD)
                out.extend(_finding_row(f, anchor(f)) for f in problems)
                out.append("</tbody></table>")
            else:
                out.append("<p>Every finding passes.</p>")
            if passes:
                out.append('<details class="passes"><summary>%d passing finding(s)</summary>'
                           '<table class="findings">%s<tbody>' % (len(passes), _FINDINGS_HEAD))
                out.extend(_finding_row(f, anchor(f)) for f in passes)
                out.append("</tbody></table></details>")
            changes = _changes(host)
            if changes:
                out.append('<details class="changes" open><summary>before &rarr; after (%d change(s))</summary>'
                           '<table class="findings"><thead><tr><th>rule</th><th>subject</th><th>before</th>'
                           '<th>after</th></tr></thead><tbody>' % len(changes))
                for rid, subj, before, after in changes:
                    out.append("<tr><td class=\"mono\">%s</td><td class=\"mono\">%s</td><td>%s</td><td>%s</td></tr>"
                               % (h(rid), h(subj or ""), _badge_status(before) if before else "&ndash;",
                                  _badge_status(after) if after else "&ndash;"))
                out.append("</tbody></table></details>")
        out.append("</section>")
    out.append('<footer>gpuhost.baseline %s &middot; a view of report.json (schema %s) generated %s</footer>'
               % (h(report["collection_version"]), h(report["schema"]), h(report["generated"])))
    out.append("</body></html>\n")
    return "\n".join(out)


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

def prom_escape(value):
    """Escape a label value per the text exposition format (backslash, double quote, newline)."""
    return _text(value).replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")


def _labels(pairs):
    return "{" + ",".join('%s="%s"' % (k, prom_escape(v)) for k, v in pairs) + "}"


def _epoch(iso):
    text = str(iso).strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        stamp = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=datetime.timezone.utc)
    return (stamp - datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)).total_seconds()


def _num(value):
    if isinstance(value, float):
        return repr(value)
    return str(value)


def render_prometheus(report):
    """Text exposition for node_exporter's textfile collector (metric list in docs/report.md)."""
    out = []

    def metric(name, help_text, samples):
        out.append("# HELP %s %s" % (name, help_text))
        out.append("# TYPE %s gauge" % name)
        for labels, value in samples:
            out.append("%s%s %s" % (name, _labels(labels) if labels else "", _num(value)))

    metric("gpuhost_baseline_info", "Collection version and profile of the baseline report (always 1).",
           [([("version", report["collection_version"]), ("profile", report["profile"])], 1)])
    stamp = _epoch(report["generated"])
    if stamp is not None:
        metric("gpuhost_baseline_report_timestamp_seconds", "Unix time the baseline report was generated.",
               [([], stamp)])
    hosts = report["hosts"]
    metric("gpuhost_baseline_host_up", "1 if the host was audited, 0 if unreachable or its audit failed.",
           [([("host", n)], 1 if hs["state"] == "audited" else 0) for n, hs in hosts.items()])
    metric("gpuhost_baseline_host_info", "Audit state and resolved profile of each host (always 1).",
           [([("host", n), ("state", hs["state"]), ("profile", hs["profile"])], 1) for n, hs in hosts.items()])
    metric("gpuhost_baseline_findings", "Number of findings per host and status.",
           [([("host", n), ("status", st)], hs["summary"][st]) for n, hs in hosts.items() for st in STATUSES])
    fail_samples = []
    for n, hs in hosts.items():
        per_sev = dict((sev, 0) for sev in SEVERITY_RANK)
        for f in hs["findings"]:
            if f["status"] == "fail":
                sev = f.get("severity") or "unknown"
                per_sev[sev] = per_sev.get(sev, 0) + 1
        fail_samples.extend(([("host", n), ("severity", sev)], c) for sev, c in sorted(per_sev.items()))
    metric("gpuhost_baseline_failures", "Number of failing findings per host and severity.", fail_samples)
    metric("gpuhost_baseline_facts_errors", "Number of facts that could not be read on the host.",
           [([("host", n)], hs["facts_errors"]) for n, hs in hosts.items()])
    rule_samples = []
    for n, hs in hosts.items():
        seen = {}
        for f in hs["findings"]:
            subject = f.get("subject") or ""
            key = (f["id"], subject)
            seen[key] = seen.get(key, 0) + 1
            if seen[key] > 1:
                # Two findings of one rule on one subject would be duplicate series, which
                # the textfile collector rejects: number the repeats.
                subject = "%s#%d" % (subject, seen[key])
            rule_samples.append(([("host", n), ("rule", f["id"]), ("subject", subject),
                                  ("severity", f.get("severity") or ""), ("area", f.get("area") or ""),
                                  ("status", f["status"])], PROM_STATUS_VALUES[f["status"]]))
    metric("gpuhost_baseline_rule_status",
           "Finding per rule and subject: 1 pass, 0 fail, -1 unknown, 2 waived, 3 not applicable.", rule_samples)
    numa_samples = []
    for n, hs in hosts.items():
        for node in hs["numa"]:
            if node["free_pct"] is not None:
                numa_samples.append(([("host", n), ("node", node["id"])], node["free_pct"]))
    if numa_samples:
        metric("gpuhost_baseline_numa_free_percent", "Free memory of each NUMA node in percent at audit time.",
               numa_samples)
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------

RENDERERS = {
    "md": render_markdown,
    "html": render_html,
    "junit": render_junit,
    "prom": render_prometheus,
}


def _atomic_write(path, text):
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_reports(report, directory, formats=None):
    """Write report.json, then each requested view rendered from it; return ``{format: path}``.

    report.json is always written: every other file is a view of it. Each file is
    written to a temporary name and renamed, so a reader never sees half a report.
    """
    formats = list(FORMATS if formats is None else formats)
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise ReportError("unknown report format(s) %s; choose from %s" % (", ".join(map(str, unknown)), ", ".join(FORMATS)))
    if not os.path.isdir(directory):
        os.makedirs(directory)
    files = dict(FORMAT_FILES)
    text = json.dumps(report, indent=2, sort_keys=False, ensure_ascii=False) + "\n"
    paths = {"json": os.path.join(directory, files["json"])}
    _atomic_write(paths["json"], text)
    # Views render from the document as stored, so they can never show more than report.json.
    stored = json.loads(text)
    for name in FORMATS:
        if name == "json" or name not in formats:
            continue
        paths[name] = os.path.join(directory, files[name])
        _atomic_write(paths[name], RENDERERS[name](stored))
    return paths


#: Options of the ``baseline_report`` action plugin, shared with its documentation module.
ARGUMENT_SPEC = dict(
    report_dir=dict(type="path", required=True),
    hosts=dict(type="dict", required=True),
    profile=dict(type="str"),
    formats=dict(type="list", elements="str", default=list(FORMATS), choices=list(FORMATS)),
    collection_version=dict(type="str"),
    generated=dict(type="str"),
    fail_on=dict(type="str", default="none", choices=["critical", "high", "medium", "low", "none"]),
)
