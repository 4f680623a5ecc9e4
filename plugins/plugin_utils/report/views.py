# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The human views of ``report.json``: HTML and Markdown through templates, and the text helpers.

Every ``render_*`` function is a pure function of the document alone, so a view can be
regenerated from a stored ``report.json`` at any time. ``report.html`` and ``report.md`` come
from Jinja2 templates (``templates/`` of the collection, overridable by name from a site
directory). Every value coming from hosts (hostnames, GPU names, messages) is treated as
hostile: HTML through Jinja2's autoescape, Markdown cells through :func:`md_escape`.
The machine formats (junit.xml, metrics.prom) are in ``views_machine.py``; writing the set into
a report directory is ``report_dir.py``. ``render_junit``, ``render_prometheus`` and
``write_reports`` are still reachable here by their old names (docs/report.md).
"""

from __future__ import absolute_import, division, print_function

import hashlib
import html
import json
import os
import re

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_model import area_view_key
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.console import escape_controls, number_text
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.schema import COLLECTION_ROOT  # templates/ beside plugins/
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.findings import (
    FINDING_KINDS, KIND_LABELS, SEVERITIES, SEVERITY_RANK, STATUS_LABELS, STATUS_WORST_FIRST, STATUSES, STORED_SCHEMA,
    hosts_by_kind,
)
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import ReportError, expand_document

__metaclass__ = type

#: Names that moved out of this module and stay importable from it (docs/report.md shows
#: ``views.render_*`` and ``views.write_reports``): name -> the module that defines it now.
MOVED = {
    "render_junit": "views_machine",
    "render_prometheus": "views_machine",
    "write_reports": "report_dir",
    "ReportDirError": "report_dir",
}


def __getattr__(name):
    """``views.render_junit`` and the other moved names, imported on first use (PEP 562: the
    modules that hold them import this one, so not at import time)."""
    if name in MOVED:
        import importlib  # pylint: disable=import-outside-toplevel
        return getattr(importlib.import_module("ansible_collections.gpuhost.baseline.plugins.plugin_utils." + MOVED[name]), name)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


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


def _columns_and_order(hosts):
    """``(columns, order, folded)`` of ``hosts`` (name -> host, each read once).

    ``columns``: the fleet matrix's columns, ``[(area, id, title)]``, every rule that applies on
    at least one host (a finding of it with another status than not applicable), by area in the
    views' order (:func:`catalogue_model.area_view_key`: health first) then id; ``folded``: the
    other rules seen, in the same order: on every host their findings are not applicable or there
    are none (report.html names them under the matrix instead of a column of ``–``); ``order``:
    ``[(index, name)]`` worst host first (:func:`host_order_key`), ``index`` the host's place in
    ``hosts``."""
    rules = {}
    applies = set()
    keys = []
    for index, name in enumerate(hosts):
        host = hosts[name]
        for finding in host["findings"]:
            rules.setdefault(finding["id"], (finding.get("area") or "", finding.get("title") or finding["id"]))
            if finding["status"] != "not_applicable":
                applies.add(finding["id"])
        keys.append((host_order_key((name, host)), index, name))
    keys.sort(key=lambda item: item[:2])
    every = sorted(((area, rid, title) for rid, (area, title) in rules.items()),
                   key=lambda r: (area_view_key(r[0]), str(r[1])))
    columns = [column for column in every if column[1] in applies]
    folded = [column for column in every if column[1] not in applies]
    return columns, [(index, name) for dummy, index, name in keys], folded


def _rule_columns(report):
    """The fleet matrix's columns, ``[(area, id, title)]``: every rule that applies on at least one
    host, by area (health first: :func:`catalogue_model.area_view_key`) then id."""
    return _columns_and_order(report["hosts"])[0]


def _folded_columns(report):
    """The rules seen that apply on no host, ``[(area, id, title)]`` in the matrix's order: named
    under the matrix, not a column of it (:func:`_columns_and_order`)."""
    return _columns_and_order(report["hosts"])[2]


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


def _prove_rows(host):
    """The rows of a host's "what the fixes delivered" table (remediate.yml, gpuhost_prove): per figure
    ``(label, unit, rule, before, after, change, verdict)``, the numbers as text (``-`` when not measured), the change
    with its percent and the verdict with the noise when it is within it."""
    prove = host.get("prove") or {}
    rows = []
    for figure in prove.get("figures") or []:
        change = number_text(figure["change"])
        if figure["change"] is not None and figure["change"] > 0:
            change = "+" + change
        if figure["change_pct"] is not None:
            change += " (%+.1f %%)" % figure["change_pct"]
        verdict = figure["verdict"]
        if verdict == "within noise":
            verdict += " (%s %s)" % (number_text(figure["noise"]), figure["unit"])
        elif figure["noise"] is None and verdict != "unknown":
            verdict += ", noise not measured"
        rows.append((figure["label"], figure["unit"], figure["rule"] or "", number_text(figure["before"]),
                     number_text(figure["after"]), change if figure["change"] is not None else "-", verdict))
    return rows


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


def na_reason(finding):
    """Why a finding does not apply, in words: its message, which the judge writes in the rule's own
    words (``applies_to``, ``no_subjects``: evaluation.not_applicable_message) or the subject's
    reason (an idle GPU)."""
    message = " ".join((finding.get("message") or "").split())
    return message or "does not apply to this host: %s" % (finding.get("title") or finding.get("id") or "this rule")


def rule_na_reason(finding):
    """Why a not-applicable finding's rule does not apply (:func:`na_reason`) when that is the rule's
    own condition (its ``applies_when`` or an empty subject list: the same reason on every host, and a
    finding without a subject), else ``None`` (a subject's own reason, such as an idle GPU)."""
    return na_reason(finding) if finding.get("subject") is None else None


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
    hosts = report["hosts"]
    return [(index, name, hosts[name]) for index, name in _columns_and_order(hosts)[1]]


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

#: The bundled templates; a site's own directory is searched first (``template_dir``).
TEMPLATE_DIR = os.path.join(COLLECTION_ROOT, "templates")
#: format -> template file name
TEMPLATES = {"md": "report.md.j2", "html": "report.html.j2"}

#: What a single-subject matrix cell shows (several subjects show their count).
CELL_MARKS = {"pass": "&#10003;", "fail": "&#10007;", "unknown": "?", "waived": "W", "not_applicable": "&ndash;"}


#: Rendered rows :func:`_memo` keeps per view (hosts of a fleet share most of their findings).
MEMO_ROWS = 20000


def _memo(cache, macro, *args):
    """``macro(*args)``, remembered in ``cache`` by the JSON of the arguments: a finding row is a
    pure function of the finding and its anchor, and identical hosts have identical rows."""
    try:
        key = json.dumps([getattr(macro, "name", "")] + list(args), sort_keys=True, default=str)
    except (TypeError, ValueError):
        return macro(*args)
    out = cache.get(key)
    if out is None:
        out = macro(*args)
        if len(cache) < MEMO_ROWS:
            cache[key] = out
    return out


def _safe_url_filter(url):
    return _safe_url(url) or ""


_ENVIRONMENTS = {}


def template_environment(template_dir=None):
    """The environment of :func:`_template_environment` for ``template_dir``, made once per
    process: compiled templates are reused (Jinja2 reloads a template whose file changed)."""
    key = os.path.abspath(template_dir) if template_dir else None
    if key not in _ENVIRONMENTS:
        _ENVIRONMENTS[key] = _template_environment(template_dir)
    return _ENVIRONMENTS[key]


def _template_environment(template_dir=None):
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
        # Every value, in either view, carries no terminal escape or other control character
        # (console.escape_controls): `cat report.md` or a pager shows a host's strings, never
        # obeys them.
        if eval_ctx.autoescape and not isinstance(value, markupsafe.Markup):
            return markupsafe.Markup(html.escape(escape_controls(_text(value)), quote=True))
        if isinstance(value, str) and not isinstance(value, markupsafe.Markup):
            return escape_controls(value)
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
    # report_schema: the schema report.json is stored in (the stamp), not the expanded document's
    env.globals.update(report_schema=STORED_SCHEMA,
                       statuses=STATUSES, statuses_worst_first=STATUS_WORST_FIRST, status_labels=STATUS_LABELS,
                       cell_marks=CELL_MARKS, changes=_changes, prove_rows=_prove_rows, observed_view=observed_view,
                       expected_view=expected_view, hosts_worst_first=hosts_worst_first, memo=_memo)
    return env


def _template(fmt, template_dir=None):
    """``(template, where)`` of ``fmt``: the site's one by name, else the bundled one."""
    import jinja2  # pylint: disable=import-outside-toplevel

    name = TEMPLATES[fmt]
    where = "template %s" % name
    if template_dir:
        where += " (site directory %s, then the bundled templates)" % template_dir
    if template_dir and not os.path.isdir(template_dir):
        raise ReportError("report template directory %s does not exist or is not a directory "
                          "(gpuhost_report_templates)" % template_dir)
    try:
        return template_environment(template_dir).get_template(name), where
    except jinja2.TemplateSyntaxError as exc:
        raise ReportError("%s: syntax error in %s line %s: %s"
                          % (where, exc.filename or exc.name, exc.lineno, exc.message))
    except jinja2.TemplateNotFound as exc:
        raise ReportError("%s: template %s not found" % (where, exc.name))


def _render(template, where, report, **context):
    import jinja2  # pylint: disable=import-outside-toplevel

    try:
        return template.render(report=report, **context)
    except jinja2.TemplateSyntaxError as exc:
        raise ReportError("%s: syntax error in %s line %s: %s"
                          % (where, exc.filename or exc.name, exc.lineno, exc.message))
    except jinja2.TemplateNotFound as exc:
        raise ReportError("%s: template %s not found" % (where, exc.name))
    except jinja2.TemplateError as exc:
        raise ReportError("%s: cannot render: %s: %s" % (where, type(exc).__name__, exc))


def render_template(fmt, report, template_dir=None, **context):
    """``report`` through the template of ``fmt``; a missing or broken template is a
    :class:`ReportError` naming it (and the line, for a syntax error)."""
    template, where = _template(fmt, template_dir)
    return _render(template, where, report, **context)


def render_markdown(report, template_dir=None, inline_hosts=None, view=None):
    """Markdown for people and pull requests: fleet summary, then non-pass findings per host,
    worst host first; above ``inline_hosts`` hosts, by group (:func:`report_view`; ``view``:
    one already made from this document)."""
    report = expand_document(report)
    return render_template("md", report, template_dir, view=view or report_view(report, inline_hosts))


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


#: Hosts up to which report.html and report.md are one page: a matrix row and a detail section
#: per host. Above it the fleet page shows one row per group of hosts with the same problems and
#: each host's detail is a page of its own under ``hosts/`` (docs/report.md, "Fleet scale").
INLINE_HOSTS = 20
#: Directory of the per-host pages, next to report.html and report.md.
HOST_PAGES_DIR = "hosts"
#: Statuses that make a host's problems: hosts with the same ones (rule, subject, status) are a group.
PROBLEMS = ("fail", "unknown", "waived")
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,79}$")


def host_page_names(report):
    """``{host name: file stem}`` of the per-host pages (``hosts/<stem>.html``, ``.md``).

    A name that is a plain file name (letters, digits, ``.``, ``_``, ``-``, starting with a
    letter or digit, at most 80 characters) and unique whatever the case is its own stem; any
    other name (markup, ``/``, ``..``, spaces, control characters, a case twin) becomes its
    characters outside that set replaced by ``_``, cut to 40, plus ``-`` and 12 hex digits of
    the SHA-256 of the name: never a path, never a hidden file, one stem per host."""
    names = [str(n) for n in report["hosts"]]
    folded = {}
    for name in names:
        folded[name.lower()] = folded.get(name.lower(), 0) + 1
    out = {}
    for name in names:
        if _PLAIN_NAME.match(name) and folded[name.lower()] == 1:
            out[name] = name
    taken = set(stem.lower() for stem in out.values())
    for name in names:
        if name in out:
            continue
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
        base = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:40].lstrip("._-") or "host"
        stem = "%s-%s" % (base, digest[:12])
        if stem.lower() in taken:  # a host named like another's page: the whole digest
            stem = "%s-%s" % (base, digest)
        taken.add(stem.lower())
        out[name] = stem
    return out


def problem_key(host):
    """What a group of hosts shares: the state and every failing, unknown and waived finding
    as ``(rule, subject, status)``; clean hosts share the empty set, hosts not audited their state."""
    return (host["state"], tuple(sorted((str(f["id"]), f.get("subject") or "", f["status"])
                                        for f in host["findings"] if f["status"] in PROBLEMS)))


def _filter_classes(findings, area_index, rule_index):
    """``a<n> r<n>`` classes of the areas and rules with a problem, for the CSS filter."""
    areas = set(area_index.get(f.get("area") or "") for f in findings if f["status"] in PROBLEMS)
    rules = set(rule_index.get(f["id"]) for f in findings if f["status"] in PROBLEMS)
    return " ".join(["a%d" % a for a in sorted(x for x in areas if x is not None)]
                    + ["r%d" % r for r in sorted(x for x in rules if x is not None)])


def _host_view(index, name, host, columns, indexes=None, anchor_prefix=None):
    """What the page shows of one host: matrix cells, findings with their anchors (problems:
    fail, unknown, waived; then not applicable and passing ones, folded), changes, NUMA.
    ``anchor_prefix`` replaces ``host-<index>`` in the findings' anchors (a host's own page)."""
    hid = "host-%d" % index
    area_index, rule_index = indexes or ({}, {})
    entry = {"name": name, "id": hid, "host": host, "cells": None, "problems": [], "not_applicable": [],
             "passes": [], "changes": [], "numa": _numa_chart(host["numa"]), "fail_severities": fail_severities(host),
             "flt": _filter_classes(host["findings"], area_index, rule_index), "flt_rows": {}}
    if host["state"] != "audited":
        return entry
    entry["cells"] = _matrix_cells(columns, host["findings"])
    seen = set()
    for finding in _sort_findings(host["findings"]):
        # The first finding of a rule carries the anchor the matrix cell links to.
        key = "%s-%s" % (anchor_prefix or hid, finding["id"])
        anchor = "" if key in seen else key
        seen.add(key)
        group = {"pass": "passes", "not_applicable": "not_applicable"}.get(finding["status"], "problems")
        entry[group].append((finding, anchor))
    # rules that did not apply: by rule, severity says nothing about them
    entry["not_applicable"].sort(key=lambda pair: (pair[0]["id"], pair[0].get("subject") or ""))
    entry["changes"] = _changes(host)
    return entry


def _short_names(names, limit=6):
    """``a, b, c`` or ``a, b, c ... y, z`` (the first few and the last two)."""
    names = [str(n) for n in names]
    if len(names) <= limit:
        return ", ".join(names)
    return "%s ... %s" % (", ".join(names[:limit - 2]), ", ".join(names[-2:]))


class _GroupCells(object):
    """A group row's cells, gathered a host at a time (the group's hosts' own cells are not kept):
    per rule the worst status over the group's hosts; the subject count when every host has the
    same cell, else the status mark and, in the tooltip, how many hosts have which status (the
    problem statuses are the same on all of them by construction). ``first``: the cells of the
    group's first host (``None`` for hosts not audited: no cells)."""

    def __init__(self, first):
        self.first = first
        self.hosts = 1
        self.per_status = [{cell["status"]: 1} for cell in first or []]
        self.same = [True] * len(first or [])

    @staticmethod
    def _key(cell):
        return cell["status"], cell.get("count"), cell.get("counts")

    def add(self, cells):
        """One more host's cells (``_matrix_cells``, the same columns)."""
        self.hosts += 1
        for position, cell in enumerate(cells or []):
            seen = self.per_status[position]
            seen[cell["status"]] = seen.get(cell["status"], 0) + 1
            self.same[position] = self.same[position] and self._key(cell) == self._key(self.first[position])

    def cells(self, columns):
        if self.hosts == 1 or self.first is None:
            return self.first
        cells = []
        for position, (dummy, rid, dummy_title) in enumerate(columns):
            first, per_status, same = self.first[position], self.per_status[position], self.same[position]
            worst = next((s for s in STATUS_WORST_FIRST if s in per_status), None)
            if worst is None:
                cells.append({"rule": rid, "status": None})
                continue
            hosts_text = ", ".join("%s on %d host(s)" % (STATUS_LABELS.get(s, "not evaluated") if s else "not evaluated",
                                                         per_status[s])
                                   for s in list(STATUS_WORST_FIRST) + [None] if s in per_status)
            cells.append({"rule": rid, "status": worst, "count": first.get("count") if same else "",
                          "counts": first["counts"] if same else hosts_text, "mark": first.get("mark") if same else None})
        return cells


def _subject_fields(subjects):
    """``subject_list`` (``a, b ... y, z``) and ``subject_text`` (``8: a, b ... y, z``, the name alone
    for one) of a row that folds the findings of one rule on ``subjects``."""
    names = _short_names(subjects, 8)
    return {"subject_list": names, "subject_text": ("%d: %s" % (len(subjects), names)) if len(subjects) > 1 else names}


def _folded_problems(host, gid, rule_index):
    """The problems of a group's first host, one row per rule and status: the subjects, the
    first finding's message, how many more subjects."""
    rows = []
    by_key = {}
    for finding in _sort_findings(f for f in host["findings"] if f["status"] in PROBLEMS):
        key = (finding["id"], finding["status"])
        if key in by_key:
            by_key[key]["subjects"].append(finding.get("subject"))
            continue
        row = {"f": finding, "subjects": [finding.get("subject")],
               "anchor": "%s-%s" % (gid, finding["id"]) if not any(r["f"]["id"] == finding["id"] for r in rows) else "",
               "rule_ref": "rule-%d" % rule_index.get(finding["id"], 0)}
        by_key[key] = row
        rows.append(row)
    for row in rows:
        row.update(_subject_fields([s for s in row["subjects"] if s]))
    return rows


def _range(values):
    low, high = min(values), max(values)
    return str(low) if low == high else "%d-%d" % (low, high)


def _slim_entry(entry, index):
    """What the fleet page and the page writer keep of a host that is not its group's first: its
    name, place, counts, state and message (its matrix cells go into its group's row as it is read:
    :class:`_GroupCells`); its page is made again from report.json
    when it is written (:func:`iter_host_pages`), so the fleet's findings are never held together."""
    host = entry["host"]
    return {"name": entry["name"], "id": entry["id"], "index": index,
            "fail_severities": entry["fail_severities"], "flt": entry["flt"],
            "host": {"state": host["state"], "message": host.get("message"), "summary": host["summary"],
                     "profile": host.get("profile")}}


def kind_rows(report):
    """``[(kind, words, [(severity, hosts)])]`` of the report's hosts per kind of work
    (``totals.hosts_by_kind``; counted from the hosts for a document written before it), the
    severities without hosts left out."""
    totals = report.get("totals") if isinstance(report.get("totals"), dict) else {}
    counts = totals.get("hosts_by_kind")
    if not isinstance(counts, dict):
        hosts = report.get("hosts") or {}
        counts = hosts_by_kind(hosts[name] for name in hosts)
    rows = []
    for kind in FINDING_KINDS:
        per = counts.get(kind) if isinstance(counts.get(kind), dict) else {}
        rows.append((kind, KIND_LABELS[kind], [(sev, per[sev]) for sev in SEVERITIES if per.get(sev)]))
    return rows


def report_view(report, inline_hosts=None):
    """The view model of report.html and report.md.

    ``columns`` (the matrix's: the rules that apply on some host, by area, health first), ``areas``
    (header spans), ``folded`` and ``folded_areas`` (the rules that apply on no host, named under the
    matrix instead: :func:`_fold_view`), ``filter_areas`` and
    ``filter_rules`` (what the area/rule filter offers), ``hosts`` (one entry per host, worst
    first: :func:`host_order_key`; report.json keeps its own order) and ``mode``: ``hosts``
    (one page: a matrix row and a section per host) up to ``inline_hosts`` hosts
    (:data:`INLINE_HOSTS`), else ``groups``: ``groups`` holds one entry per set of hosts with
    the same problems (:func:`problem_key`), worst first, and each host's detail goes to its
    own page (``pages``: host name -> ``hosts/<stem>``; ``group_of``: host name -> its group's id,
    the host page's link back); ``rules`` (the fleet page's rules table)
    and ``rule_text`` (rule id -> its row's ``ref`` and finding there) hold the text of every rule a
    host page shows, once: the host pages link to it rather than repeat it.

    Each host is read twice (``report["hosts"]`` may expand a host each time it is read:
    ``report.HostsRead``): once for the columns and the order, once for its entry. Of a fleet
    in groups, only each group's first host keeps its whole entry; the others keep what the fleet
    page shows (:func:`_slim_entry`) and their pages are made from report.json one at a time."""
    inline_hosts = INLINE_HOSTS if inline_hosts is None else inline_hosts
    hosts_in = report["hosts"]
    columns, ordered, folded = _columns_and_order(hosts_in)
    areas = []
    for area, dummy, dummy2 in columns:
        if areas and areas[-1][0] == area:
            areas[-1][1] += 1
        else:
            areas.append([area, 1])
    # the folded rules get indexes after the columns' (the findings of a host's section carry them
    # too); the filter offers the columns only: a folded rule never has a problem to show
    area_index = dict((area, i) for i, (area, dummy) in enumerate(areas))
    for area, dummy, dummy2 in folded:
        area_index.setdefault(area, len(area_index))
    every = columns + folded
    rule_index = dict((rid, i) for i, (dummy, rid, dummy2) in enumerate(every))
    indexes = (area_index, rule_index)
    grouped = len(hosts_in) > inline_hosts
    view = {"columns": columns, "areas": areas, "hosts": [], "mode": "hosts", "groups": [], "pages": {},
            "folded": [], "folded_areas": [],
            "filter_areas": [("a%d" % i, area) for i, (area, dummy) in enumerate(areas)],
            "filter_rules": [("r%d" % i, rid, title) for i, (dummy, rid, title) in enumerate(columns)],
            "rules": [], "rule_text": {}, "pages_dir": HOST_PAGES_DIR, "back": None, "memo": {}, "group_of": {},
            "fclass": dict((rid, "a%d r%d" % (area_index[area], rule_index[rid])) for area, rid, dummy in every),
            "indexes": indexes, "kinds": kind_rows(report)}
    if not grouped:
        view["hosts"] = [_host_view(i, name, hosts_in[name], columns, indexes) for i, name in ordered]
        _fold_view(view, folded)
        return view
    view["mode"] = "groups"
    pages = host_page_names(report)
    view["pages"] = dict((name, "%s/%s" % (HOST_PAGES_DIR, stem)) for name, stem in pages.items())
    buckets = {}
    order = []
    # the rule text of every rule a host page names, stated on the fleet page once: the host pages
    # link to it instead of repeating it in each finding's row
    shown = {}
    gathered = {}
    for index, name in ordered:
        host = hosts_in[name]
        # on a host's own page the findings' anchors need not name the host: the same finding
        # renders the same row on every page (memo below)
        entry = _host_view(index, name, host, columns, indexes, "f")
        for finding, dummy in entry["problems"] + entry["passes"] + entry["not_applicable"]:
            shown.setdefault(finding["id"], finding)
        key = problem_key(host)
        if key not in buckets:
            buckets[key] = [entry]  # the group's first host: the fleet page shows its findings
            gathered[key] = _GroupCells(entry["cells"])
            order.append(key)
        else:
            gathered[key].add(entry["cells"])  # the group row's cells, without keeping the host's
            entry = _slim_entry(entry, index)
            buckets[key].append(entry)
        view["hosts"].append(entry)
        del host
    problem_rules = set()
    for number, key in enumerate(order):
        members = buckets[key]
        first = members[0]
        gid = "group-%d" % number
        audited = first["cells"] is not None
        summaries = [m["host"]["summary"] for m in members]
        group = {
            "id": gid, "count": len(members), "first": first, "host": first["host"], "state": first["host"]["state"],
            "members": [{"name": m["name"], "page": view["pages"][m["name"]], "host": m["host"],
                         "message": m["host"].get("message")} for m in members],
            "names_text": _short_names([m["name"] for m in members]),
            "cells": gathered[key].cells(columns) if audited else None,
            "problems": _folded_problems(first["host"], gid, rule_index) if audited else [],
            "fail_severities": first["fail_severities"], "flt": first["flt"],
            "sum": dict((s, _range([x[s] for x in summaries])) for s in STATUSES),
            "fail": first["host"]["summary"]["fail"],
        }
        problem_rules.update(row["f"]["id"] for row in group["problems"])
        view["groups"].append(group)
        view["group_of"].update((m["name"], gid) for m in members)
    for dummy, rid, dummy2 in every:
        if rid in problem_rules:
            finding = next(f for g in view["groups"] for f in (r["f"] for r in g["problems"]) if f["id"] == rid)
        elif rid in shown:
            finding = shown[rid]
        else:
            continue
        view["rules"].append({"id": rid, "ref": "rule-%d" % rule_index[rid], "f": finding})
        view["rule_text"][rid] = {"ref": "rule-%d" % rule_index[rid], "f": finding}
    _fold_view(view, folded)
    return view


def _fold_view(view, folded):
    """The view's ``folded`` (the rules that apply on no host: :func:`_columns_and_order`), each
    ``{"area", "id", "title", "ref"}``, ``ref`` the anchor that says why it does not apply: the
    first host's not-applicable finding of it on a page of hosts, the rules table's row on a page of
    groups (``None`` without one); and ``folded_areas``, ``[(area, [rule, ...])]`` in the same order."""
    if view["mode"] == "groups":
        refs = dict((rid, text["ref"]) for rid, text in view["rule_text"].items())
    else:
        refs = {}
        for entry in view["hosts"]:
            for finding, anchor in entry["not_applicable"]:
                if anchor:
                    refs.setdefault(finding["id"], anchor)
    for area, rid, title in folded:
        rule = {"area": area, "id": rid, "title": title, "ref": refs.get(rid)}
        view["folded"].append(rule)
        if view["folded_areas"] and view["folded_areas"][-1][0] == area:
            view["folded_areas"][-1][1].append(rule)
        else:
            view["folded_areas"].append((area, [rule]))


#: Lines a folded row lists when its findings' values (or reasons) differ, before "and N more".
FOLD_LINES = 4


def fold_findings(pairs, rule_text=None):
    """One row per rule of a host page's passing or not-applicable findings, ``pairs`` being
    ``[(finding, anchor)]`` of one of those statuses (``_host_view``'s ``passes`` or
    ``not_applicable``), rows in rule id order.

    A row: ``id``, ``title``, ``status``, ``count`` (findings), ``subjects``, ``subject_list``
    and ``subject_text`` (:func:`_subject_fields`; empty without subjects),
    ``anchor`` (the first non-empty anchor of the rule's findings: the matrix links to it),
    ``ref`` (the rule's row on the fleet page, ``rule_text``'s, else ``None``) and what the
    findings show: a passing finding its observed value (:func:`observed_view`), a not-applicable
    one its reason (:func:`na_reason`). When every finding of the rule shows the same, ``same`` is
    true and ``value`` holds it once (the ``observed_view`` dict, or the reason text); else
    ``value`` is ``None`` and ``lines`` lists ``subject: value`` for the first :data:`FOLD_LINES`
    findings and ``and N more (report.json)``. No message, rationale, fix or source: the fleet
    page states the rule's text once, report.json keeps every finding."""
    rule_text = rule_text or {}
    rows = {}
    for finding, anchor in pairs:
        rid = finding["id"]
        row = rows.get(rid)
        if row is None:
            row = rows[rid] = {"id": rid, "title": finding.get("title") or "", "status": finding["status"],
                               "anchor": "", "findings": []}
        row["findings"].append(finding)
        if anchor and not row["anchor"]:
            row["anchor"] = anchor
    out = []
    for rid in sorted(rows, key=str):
        row = rows[rid]
        found = row.pop("findings")
        shown = [na_reason(f) if f["status"] == "not_applicable" else observed_view(f) for f in found]
        subjects = [str(f["subject"]) for f in found if f.get("subject") not in (None, "")]
        row.update(_subject_fields(subjects), count=len(found), subjects=subjects,
                   ref=(rule_text.get(rid) or {}).get("ref"))
        row["same"] = all(value == shown[0] for value in shown[1:])
        row["value"] = shown[0] if row["same"] else None
        row["lines"] = []
        if not row["same"]:
            for finding, value in list(zip(found, shown))[:FOLD_LINES]:
                text = value if isinstance(value, str) else value["text"]
                subject = finding.get("subject")
                row["lines"].append("%s: %s" % ("(no subject)" if subject in (None, "") else subject, text))
            if len(found) > FOLD_LINES:
                row["lines"].append("and %d more (report.json)" % (len(found) - FOLD_LINES))
        out.append(row)
    return out


def group_na_rows(rows):
    """A host page's not-applicable rows (:func:`fold_findings`) by reason: ``[{"reason", "rows"}]``.

    The rules whose findings all give one reason share a group with the other rules of that reason
    (most reasons are a rule's ``applies_when`` in words, the same for several rules); a rule whose
    subjects give different reasons is a group of its own with ``reason`` ``None`` (its ``lines``
    say why, per subject). Groups in the order of their first rule, rules in rule id order."""
    groups = []
    by_reason = {}
    for row in rows:
        if not row["same"]:
            groups.append({"reason": None, "rows": [row]})
            continue
        group = by_reason.get(row["value"])
        if group is None:
            group = by_reason[row["value"]] = {"reason": row["value"], "rows": []}
            groups.append(group)
        group["rows"].append(row)
    return groups


def host_page_view(view, entry):
    """The view model of one host's page (``hosts/<stem>.html``, ``.md``): the fleet view's
    columns and filter, that host's entry alone, the link back to its group on the fleet page.
    The page shows the problems (fail, unknown, waived) in full, its passing findings one row per
    rule (the entry's ``pass_rows``, :func:`fold_findings`) and its not-applicable ones one row
    per reason (``na_groups``, :func:`group_na_rows` of ``na_rows``); a rule's title, rationale,
    fix and source are on the fleet page, once (``rule_text``), and the page links to them."""
    group = view["group_of"].get(entry["name"], "")
    na_rows = fold_findings(entry["not_applicable"], view["rule_text"])
    entry = dict(entry, pass_rows=fold_findings(entry["passes"], view["rule_text"]), na_rows=na_rows,
                 na_groups=group_na_rows(na_rows))
    return dict(view, mode="host", hosts=[entry], groups=[], back=group, rules=[])


#: The HTML view model (the Markdown view uses the same one).
html_view = report_view


def render_html(report, template_dir=None, inline_hosts=None, view=None):
    """One self-contained HTML page: inline CSS and SVG, no script, no external asset; above
    ``inline_hosts`` hosts the fleet page of groups (the host pages: :func:`render_host_pages`)."""
    report = expand_document(report)
    return render_template("html", report, template_dir, view=view or report_view(report, inline_hosts))


def iter_host_pages(report, fmt, template_dir=None, inline_hosts=None, view=None):
    """``(relative path, text)`` of each per-host page of ``fmt`` (``html`` or ``md``, or a list of
    them: each host's pages one after the other), one at a time in the order of the host pages'
    stems: ``hosts/<stem>.<ext>``, none when the fleet fits on one page. Each page is rendered
    when it is asked for, so a writer holds one page's text at a time; a host the view keeps only
    in part (:func:`_slim_entry`) is read from ``report`` again, once for all its pages."""
    report = expand_document(report)
    view = view or report_view(report, inline_hosts)
    if view["mode"] != "groups":
        return
    templates = [(fmt, "html" if fmt == "html" else "md") + _template(fmt, template_dir)
                 for fmt in ([fmt] if isinstance(fmt, str) else fmt)]
    for stem, entry in sorted((view["pages"][entry["name"]], entry) for entry in view["hosts"]):
        if "problems" not in entry:  # slim: its page is made from the host as report.json has it
            entry = _host_view(entry["index"], entry["name"], report["hosts"][entry["name"]], view["columns"],
                               view["indexes"], "f")
        for dummy, ext, template, where in templates:
            yield "%s.%s" % (stem, ext), _render(template, where, report, view=host_page_view(view, entry))


def render_host_pages(report, fmt, template_dir=None, inline_hosts=None, view=None):
    """``{relative path: text}`` of the per-host pages of ``fmt`` (``html`` or ``md``):
    ``hosts/<stem>.<ext>``, one per host, empty when the fleet fits on one page
    (:func:`iter_host_pages` gathered)."""
    return dict(iter_host_pages(report, fmt, template_dir, inline_hosts, view))
