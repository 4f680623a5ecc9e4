# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The views of ``report.json``, and writing them.

Every ``render_*`` function is a pure function of the document alone, so a view can be
regenerated from a stored ``report.json`` at any time. ``report.html`` and ``report.md`` come
from Jinja2 templates (``templates/`` of the collection, overridable by name from a site
directory); junit.xml and metrics.prom are written here. Every value coming from hosts
(hostnames, GPU names, messages) is treated as hostile: HTML through Jinja2's autoescape,
Markdown cells through :func:`md_escape`, XML through ``xml.etree``, Prometheus label values
through :func:`prom_escape`.
"""

from __future__ import absolute_import, division, print_function

import datetime
import html
import json
import os
import re
import tempfile
import xml.etree.ElementTree as ET

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import (
    FORMAT_FILES, FORMATS, PROM_STATUS_VALUES, SEVERITY_RANK, STATUS_LABELS, STATUS_WORST_FIRST, STATUSES, ReportError,
)

__metaclass__ = type


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
# values and reasons in words (HTML and Markdown views)
# ---------------------------------------------------------------------------

#: What an empty list, mapping or string reads as.
NOTHING = "nothing"


def _scalar_words(value):
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value if value.strip() else NOTHING
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def human_inline(value):
    """One line of words for any JSON value: lists comma-separated, mappings ``key: value``
    joined by ``;``, nested lists in parentheses, ``nothing`` for an empty one, ``""`` for null."""
    if isinstance(value, dict):
        if not value:
            return NOTHING
        return "; ".join("%s: %s" % (k, _nested_inline(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        if not value:
            return NOTHING
        return ", ".join(_nested_inline(v) for v in value)
    return _scalar_words(value)


def _nested_inline(value):
    if isinstance(value, (list, tuple)) and value:
        return "(%s)" % human_inline(value)
    if isinstance(value, dict) and value:
        return "(%s)" % ", ".join("%s: %s" % (k, _nested_inline(v)) for k, v in value.items())
    return human_inline(value)


def human_lines(value):
    """The lines a person reads for an expected/observed value: one per list item or
    mapping entry (``key: value``), ``["nothing"]`` for an empty one, ``[]`` for null."""
    if value is None:
        return []
    if isinstance(value, dict):
        return ["%s: %s" % (k, _nested_inline(v)) for k, v in value.items()] if value else [NOTHING]
    if isinstance(value, (list, tuple)):
        return [_nested_inline(v) if not isinstance(v, dict) else human_inline(v) for v in value] if value \
            else [NOTHING]
    return [_scalar_words(value)]


def _clip(text, limit):
    if len(text) <= limit:
        return text
    return " ".join(text.split())[:max(1, limit - 1)].rstrip() + "\u2026"


def humanise(value, max_items=4, max_chars=90):
    """What a view shows of an expected/observed value.

    ``{"lines", "text", "inline", "truncated", "full"}``: ``lines`` are at most ``max_items``
    lines of at most ``max_chars`` characters (longer ones cut with an ellipsis, then ``and N
    more``); ``text`` is them on one line (``, `` between items, ``; `` between keys);
    ``inline`` says that line reads well (short scalars, a single line); ``truncated`` says
    something was cut, and then ``full`` holds every line uncut (folded in a ``<details>``).
    """
    full = human_lines(value)
    shown = [_clip(line, max_chars) for line in full[:max_items]]
    truncated = len(full) > max_items or any(a != b for a, b in zip(shown, full))
    if truncated and len(full) > max_items:
        shown.append("and %d more" % (len(full) - max_items))
    if isinstance(value, (list, tuple)):
        scalars = not any(isinstance(v, (list, tuple, dict)) for v in value)
    else:
        scalars = not isinstance(value, dict)
    inline = len(shown) <= 1 or (scalars and len(", ".join(shown)) <= max_chars // 2)
    text = ("; " if isinstance(value, dict) else ", ").join(shown)
    return {"lines": shown, "text": text, "inline": inline, "truncated": truncated, "full": full if truncated else []}


def _repeats_message(value, message):
    """True when a value is only text the finding's message already says (the persisted-state
    rules observe a list of problems their message spells out)."""
    if not message or not value:
        return False
    items = value if isinstance(value, (list, tuple)) else [value]
    if not all(isinstance(v, str) and len(v) > 40 for v in items):
        return False
    flat = " ".join(message.split())
    return all(" ".join(v.split()) in flat for v in items)


def observed_view(finding):
    """``humanise`` of a finding's observed value, or a pointer to the message when the value
    repeats it word for word."""
    observed = finding.get("observed")
    if _repeats_message(observed, finding.get("message")):
        count = len(observed) if isinstance(observed, (list, tuple)) else 1
        note = "see message" if count == 1 else "%d problems, see message" % count
        return {"lines": [note], "text": note, "inline": True, "truncated": False, "full": [], "note": True}
    return humanise(observed)


def expected_view(finding):
    return humanise(finding.get("expected"))


#: Conditions of ``applies_when`` (split at top-level ``&&``) in words: "applies only to hosts ...".
APPLIES_WORDS = {
    "nvidia.present": "with the NVIDIA driver and GPUs present",
    "derived.nvidia.has_blackwell": "with a Blackwell GPU",
    "length(nvidia.gpus || `[]`) > `1`": "with more than one NVIDIA GPU",
    "derived.nvidia.bus_gpus || (derived.nvidia.bus_gpus == null && nvidia.present)":
        "with NVIDIA GPUs on the PCI bus",
    "lxc.proxmox": "running Proxmox VE",
    "params.lxc_numa_pinning": "whose profile asks for NUMA pinning of containers",
    "derived.cpu.amd_zen": "with an AMD Zen CPU",
    "cpu.cpufreq.policies != `0`": "where the kernel exposes CPU frequency scaling (cpufreq)",
    "cpu.cpufreq.epp != `{}`": "where the CPU exposes an energy-performance preference (EPP)",
    "params.smt != 'any'": "whose profile requires SMT on or off (this profile accepts either)",
    "numa.node_count != `1`": "with more than one NUMA node",
    "params.iommu_passthrough": "whose profile asks for IOMMU passthrough",
}

#: Subject lists of rules (``subjects``) in words, for "nothing to check" reasons.
SUBJECT_WORDS = {
    "derived.pcie.gpus": "no GPUs on the PCI bus",
    "derived.pcie.nics": "no network adapters on the PCI bus",
    "derived.pcie.mps_paths": "no PCIe paths from a root port to a GPU or NIC",
    "derived.pcie.peer_devices": "no GPUs or NICs for peer-to-peer transfers",
    "derived.pcie.acs_bridges": "no PCIe bridges between GPUs and NICs",
    "derived.pcie.aer": "no PCIe devices reporting AER error counters",
    "derived.nvidia.gpus": "no NVIDIA GPUs",
    "derived.lxc.gpu_containers": "no LXC containers with a GPU",
    "derived.lxc.containers": "no LXC containers",
}

_NA_CONDITION = re.compile(r"^not applicable: (?P<expr>.+) is (?P<value>[^ ]+)$", re.S)
_NA_SUBJECTS = re.compile(r"^not applicable: no subjects \((?P<expr>.+) is empty\)$", re.S)


def _split_and(expr):
    """Top-level ``&&`` operands of a jmespath expression (not inside parentheses or literals)."""
    parts, depth, quote, start, i = [], 0, None, 0, 0
    while i < len(expr):
        ch = expr[i]
        if quote:
            quote = None if ch == quote else quote
        elif ch in "`'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and expr.startswith("&&", i):
            parts.append(expr[start:i].strip())
            start = i + 2
            i += 1
        i += 1
    parts.append(expr[start:].strip())
    return parts


def na_reason(finding):
    """Why a rule did not apply, in words, from the evaluator's message (which names the
    ``applies_when`` or ``subjects`` expression; that text stays in report.json only)."""
    message = " ".join((finding.get("message") or "").split())
    title = finding.get("title") or finding.get("id") or "this rule"
    match = _NA_SUBJECTS.match(message)
    if match:
        words = SUBJECT_WORDS.get(match.group("expr").strip())
        return "nothing to check on this host (%s)" % words if words else \
            "nothing to check on this host for: %s" % title
    match = _NA_CONDITION.match(message)
    if match:
        parts = [APPLIES_WORDS.get(p) for p in _split_and(match.group("expr").strip())]
        if parts and all(parts):
            return "applies only to hosts %s" % " and ".join(parts)
        return "condition for this rule not met: %s" % title
    if message.startswith("not applicable") or not message:
        return "does not apply to this host: %s" % title
    return message


def _worst_fail_rank(host):
    ranks = [SEVERITY_RANK.get(f.get("severity"), SEVERITY_RANK["critical"])
             for f in host["findings"] if f["status"] == "fail"]
    return max(ranks) if ranks else -1


def host_order_key(item):
    """Sort key of ``(name, host)``, worst first: the worst failing severity, then the number of
    failing findings, then hosts that could not be audited before clean ones, then the name."""
    name, host = item
    return (-_worst_fail_rank(host), -host["summary"]["fail"], 0 if host["state"] != "audited" else 1, str(name))


def hosts_worst_first(report):
    """``[(index, name, host)]`` worst host first; ``index`` is the host's place in report.json
    (element ids stay ``host-<index>`` whatever the order)."""
    items = [(i, name, host) for i, (name, host) in enumerate(report["hosts"].items())]
    return sorted(items, key=lambda t: host_order_key((t[1], t[2])))


def fail_severities(host):
    """``[(severity, count)]`` of a host's failing findings, worst severity first."""
    counts = {}
    for f in host["findings"]:
        if f["status"] == "fail":
            sev = f.get("severity") or "unknown"
            counts[sev] = counts.get(sev, 0) + 1
    return sorted(counts.items(), key=lambda kv: -SEVERITY_RANK.get(kv[0], SEVERITY_RANK["critical"] + 1))


# ---------------------------------------------------------------------------
# Markdown
# ---------------------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|#<>&~])")


def md_escape(value):
    """Escape a value for a Markdown table cell or heading: no markup, no links, one line."""
    text = _text(value)
    text = _MD_SPECIAL.sub(lambda m: {"<": "&lt;", ">": "&gt;", "&": "&amp;"}.get(m.group(1), "\\" + m.group(1)), text)
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "<br>")


_MD_TEXT_SPECIAL = re.compile(r"([\\`*\[\]<>&~|]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")


def md_text(value):
    """Escape a value for Markdown prose (a list item, not a table cell): the same guarantees
    as :func:`md_escape` (no markup, no link, no HTML, one line) with fewer backslashes, so the
    file reads as plain text: ``_`` between letters or digits (``vm.zone_reclaim_mode``) cannot
    start emphasis and stays as it is; a leading ``#`` is escaped."""
    text = value if isinstance(value, str) else human_inline(value)
    text = _MD_TEXT_SPECIAL.sub(
        lambda m: {"<": "&lt;", ">": "&gt;", "&": "&amp;"}.get(m.group(1), "\\" + m.group(1)), text)
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "<br>")
    return "\\" + text if text.startswith("#") else text


# ---------------------------------------------------------------------------
# templates (report.md, report.html)
# ---------------------------------------------------------------------------

#: Collection root: templates/ lives next to plugins/.
COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: The bundled templates; a site's own directory is searched first (``template_dir``).
TEMPLATE_DIR = os.path.join(COLLECTION_ROOT, "templates")
#: format -> template file name
TEMPLATES = {"md": "report.md.j2", "html": "report.html.j2"}

#: What a single-subject matrix cell shows (several subjects show their count).
CELL_MARKS = {"pass": "&#10003;", "fail": "&#10007;", "unknown": "?", "waived": "W", "not_applicable": "&ndash;"}


def _safe_url_filter(url):
    return _safe_url(url) or ""


def template_environment(template_dir=None):
    """The Jinja2 environment of the report views.

    Templates are looked up by name in ``template_dir`` (a site's own directory) first, then
    in the bundled ``templates/``; the bundled ones are also reachable as ``gpuhost/<name>``
    so a site template can ``{% extends "gpuhost/report.html.j2" %}`` and replace blocks.
    Autoescape is on for ``*.html.j2``; undefined names are errors, not empty strings.
    """
    # controller only; both ship with ansible-core
    import jinja2  # pylint: disable=import-outside-toplevel
    import markupsafe  # pylint: disable=import-outside-toplevel

    @jinja2.pass_eval_context
    def finalize(eval_ctx, value):
        # Under autoescape, escape as html.escape(quote=True) does (&quot; &#x27;), the spelling
        # the reports have always used, instead of markupsafe's (&#34; &#39;); Markup (macro
        # output, constants marked safe) passes through.
        if eval_ctx.autoescape and not isinstance(value, markupsafe.Markup):
            return markupsafe.Markup(html.escape(_text(value), quote=True))
        return value

    bundled = jinja2.FileSystemLoader(TEMPLATE_DIR)
    loaders = [jinja2.PrefixLoader({"gpuhost": bundled}, delimiter="/")]
    if template_dir:
        loaders.append(jinja2.FileSystemLoader(template_dir))
    loaders.append(bundled)
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader(loaders),
        autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2", "html", "htm"), default_for_string=False),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        finalize=finalize,
    )
    env.filters.update(text=_text, md=md_escape, md_text=md_text, pending_text=_pending_text,
                       waiver_text=_waiver_text, safe_url=_safe_url_filter, kib=_kib, sort_findings=_sort_findings,
                       human=human_inline, humanise=humanise, na_reason=na_reason)
    env.globals.update(statuses=STATUSES, statuses_worst_first=STATUS_WORST_FIRST, status_labels=STATUS_LABELS,
                       cell_marks=CELL_MARKS, changes=_changes, observed_view=observed_view,
                       expected_view=expected_view, hosts_worst_first=hosts_worst_first)
    return env


def render_template(fmt, report, template_dir=None, **context):
    """``report`` through the template of ``fmt``; a missing or broken template is a
    :class:`ReportError` naming it (and the line, for a syntax error)."""
    import jinja2  # pylint: disable=import-outside-toplevel

    name = TEMPLATES[fmt]
    where = "template %s" % name
    if template_dir:
        where += " (site directory %s, then the bundled templates)" % template_dir
    if template_dir and not os.path.isdir(template_dir):
        raise ReportError("report template directory %s does not exist or is not a directory "
                          "(gpuhost_report_templates)" % template_dir)
    try:
        return template_environment(template_dir).get_template(name).render(report=report, **context)
    except jinja2.TemplateSyntaxError as exc:
        raise ReportError("%s: syntax error in %s line %s: %s"
                          % (where, exc.filename or exc.name, exc.lineno, exc.message))
    except jinja2.TemplateNotFound as exc:
        raise ReportError("%s: template %s not found" % (where, exc.name))
    except jinja2.TemplateError as exc:
        raise ReportError("%s: cannot render: %s: %s" % (where, type(exc).__name__, exc))


def render_markdown(report, template_dir=None):
    """Markdown for people and pull requests: fleet summary, then non-pass findings per host,
    worst host first."""
    return render_template("md", report, template_dir, view=report_view(report))


def _numa_chart(nodes):
    """Geometry of the per-node memory bars (used vs free), scaled to the largest node so a
    missing DIMM shows short; ``None`` without nodes."""
    if not nodes:
        return None
    width, bar_h, gap, label_w, text_w = 300, 16, 6, 64, 270
    largest = max([n["mem_total_kb"] or 0 for n in nodes] + [1])
    bars = []
    for i, node in enumerate(nodes):
        y = 2 + i * (bar_h + gap)
        total, free, pct = node["mem_total_kb"], node["mem_free_kb"], node["free_pct"]
        node_bar = {"id": node["id"], "total": total, "x": label_w, "y": y, "h": bar_h, "w": width,
                    "text_y": y + 12, "label_x": label_w + width + 6}
        if total:
            full = width * total / largest
            free_w = full * max(0.0, min(1.0, (free or 0) / float(total)))
            node_bar.update(
                used_w="%.1f" % (full - free_w), free_x="%.1f" % (label_w + full - free_w), free_w="%.1f" % free_w,
                used_text=_kib(total - (free or 0)), free_text=_kib(free),
                label="%s%% free (%s of %s)" % ("?" if pct is None else ("%.1f" % pct), _kib(free), _kib(total)))
        else:
            node_bar["label"] = "no memory reported"
        bars.append(node_bar)
    return {"width": label_w + width + text_w, "height": len(nodes) * (bar_h + gap) + 4, "bars": bars}


def _matrix_cells(columns, findings):
    """One cell per rule column: worst status, how many subjects have it, the per-status counts."""
    rules = _by_rule(findings)
    cells = []
    for dummy, rid, dummy_title in columns:
        found = rules.get(rid)
        if not found:
            cells.append({"rule": rid, "status": None})
            continue
        status, count = _cell(found)
        counts = ", ".join("%d %s" % (sum(1 for f in found if f["status"] == s), STATUS_LABELS[s])
                           for s in STATUS_WORST_FIRST if any(f["status"] == s for f in found))
        cells.append({"rule": rid, "status": status, "count": count, "counts": counts,
                      "mark": str(count) if len(found) > 1 else None})
    return cells


def _host_view(index, name, host, columns):
    """What the page shows of one host: matrix cells, findings with their anchors (problems:
    fail, unknown, waived; then not applicable and passing ones, folded), changes, NUMA."""
    hid = "host-%d" % index
    entry = {"name": name, "id": hid, "host": host, "cells": None, "problems": [], "not_applicable": [],
             "passes": [], "changes": [], "numa": _numa_chart(host["numa"]), "fail_severities": fail_severities(host)}
    if host["state"] != "audited":
        return entry
    entry["cells"] = _matrix_cells(columns, host["findings"])
    seen = set()
    for finding in _sort_findings(host["findings"]):
        # The first finding of a rule carries the anchor the matrix cell links to.
        key = "%s-%s" % (hid, finding["id"])
        anchor = "" if key in seen else key
        seen.add(key)
        group = {"pass": "passes", "not_applicable": "not_applicable"}.get(finding["status"], "problems")
        entry[group].append((finding, anchor))
    # rules that did not apply: by rule, severity says nothing about them
    entry["not_applicable"].sort(key=lambda pair: (pair[0]["id"], pair[0].get("subject") or ""))
    entry["changes"] = _changes(host)
    return entry


def report_view(report):
    """The view model of report.html and report.md: rule columns, area header spans, one entry
    per host, worst host first (:func:`host_order_key`); report.json keeps its own order."""
    columns = _rule_columns(report)
    areas = []
    for area, dummy, dummy2 in columns:
        if areas and areas[-1][0] == area:
            areas[-1][1] += 1
        else:
            areas.append([area, 1])
    hosts = [_host_view(i, name, host, columns) for i, name, host in hosts_worst_first(report)]
    return {"columns": columns, "areas": areas, "hosts": hosts}


#: The HTML view model (the Markdown view uses the same one).
html_view = report_view


def render_html(report, template_dir=None):
    """One self-contained HTML page: inline CSS and SVG, no script, no external asset."""
    return render_template("html", report, template_dir, view=report_view(report))


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


class _DirectoryLock:
    """An exclusive ``flock`` on the report directory itself (no lock file among the reports):
    two runs writing into one directory take turns, so the five files always come from one run."""

    def __init__(self, directory):
        self.directory = directory
        self.fd = None

    def __enter__(self):
        # the controller is Linux or macOS (ansible-core runs on nothing else)
        import fcntl  # pylint: disable=import-outside-toplevel

        self.fd = os.open(self.directory, os.O_RDONLY)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        os.close(self.fd)  # releases the lock
        return False


def write_reports(report, directory, formats=None, template_dir=None):
    """Write report.json, then each requested view rendered from it; return ``{format: path}``.

    report.json is always written: every other file is a view of it. Each file is
    written to a temporary name and renamed, so a reader never sees half a report; the
    whole set is written under a lock on the directory, so concurrent runs never mix files.
    """
    formats = list(FORMATS if formats is None else formats)
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise ReportError("unknown report format(s) %s; choose from %s" % (", ".join(map(str, unknown)), ", ".join(FORMATS)))
    os.makedirs(directory, exist_ok=True)  # two runs creating it at once both go on
    files = dict(FORMAT_FILES)
    text = json.dumps(report, indent=2, sort_keys=False, ensure_ascii=False) + "\n"
    paths = {"json": os.path.join(directory, files["json"])}
    with _DirectoryLock(directory):
        _atomic_write(paths["json"], text)
        # Views render from the document as stored, so they can never show more than report.json.
        stored = json.loads(text)
        for name in FORMATS:
            if name == "json" or name not in formats:
                continue
            paths[name] = os.path.join(directory, files[name])
            if template_dir and name in TEMPLATES:
                _atomic_write(paths[name], RENDERERS[name](stored, template_dir=template_dir))
            else:
                _atomic_write(paths[name], RENDERERS[name](stored))
    return paths
