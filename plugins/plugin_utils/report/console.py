# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The console summary of an audit or remediation: a few lines of text built from ``report.json``.

Controller side, pure functions (no I/O). :func:`console_lines` is called by the ``baseline_report``
action plugin and printed by one task of the audit role (``docs/report.md``, "Console output"):

* a header with the fleet totals,
* one line per host (clean hosts too) with its state and counts by status and, for failing
  findings, by severity; ``before -> after`` counts after a remediation,
* per host with failing findings: one line per rule, worst severity first, the findings of a
  rule that fails the same way on several subjects folded into one line with the subject list;
  hosts whose lines are the same are one group, their lines shown once under
  ``33 hosts (gpu-001, gpu-002, ... gpu-033): same 12 failing finding(s), worst first``,
* the exit code the verdict tasks will give, and where the reports are.

Every value that comes from a host (messages, subjects, host names, notes) goes through
:func:`escape`: control and other non-printable characters are shown as Python escapes
(``\\x1b``, ``\\n``, ``\\u202e``), a backslash as ``\\\\``, and long values are cut, so a hostile
capture can neither move the cursor, recolour the terminal, fake a line nor flood the output.
"""

from __future__ import absolute_import, division, print_function

import math
import re
from collections.abc import Mapping

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.findings import (
    FINDING_KINDS, HOST_STATES, KIND_LABELS, SEVERITIES, SEVERITY_RANK, STATUS_LABELS, STATUS_WORST_FIRST, STATUSES,
    hosts_by_kind,
)
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import expand_document, map_host_findings

__metaclass__ = type

#: Longest host-provided value (a finding's message) shown, in characters after escaping;
#: longer ones end in "..." (report.md and report.html have them whole).
MAX_VALUE = 240
#: Longest host name, subject and note shown.
MAX_NAME = 60
#: Subjects listed in full on a folded line; more are shown as the first few, "...", the last two.
MAX_SUBJECTS = 8
#: Failing-finding lines shown per host; the rest are counted and left to the report files.
MAX_FINDING_LINES = 40
#: above this many hosts the summary folds: hosts in one line per state and message, clean hosts in one
#: line, a failing group's hosts on its header only, and the groups' finding lines share
#: :data:`FOLD_FINDING_LINES` (each group keeps its first line and a pointer to the reports)
FOLD_HOSTS = 20
FOLD_FINDING_LINES = 30

_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_PCI_ADDRESS = re.compile(r"^0000:([0-9a-f]{2}:[0-9a-f]{2}\.[0-7])$")

#: plural noun of a rule's subjects, by the last name of its ``subjects`` expression
_NOUNS = {
    "gpus": "GPUs", "nics": "NICs", "peer_devices": "devices", "mps_paths": "devices", "aer": "devices",
    "acs_bridges": "bridges", "containers": "containers", "gpu_containers": "containers", "nodes": "nodes",
    "link_speed": "devices",
}


def _char_escape(char):
    """``char`` itself when printable, else its escape (``\\x1b``, ``\\u202e``, ``\\U0001f600``); U+FFFD
    (what undecodable bytes became) is escaped too."""
    if char.isprintable() and char != "\ufffd":
        return char
    code = ord(char)
    return "\\x%02x" % code if code < 0x100 else "\\u%04x" % code if code < 0x10000 else "\\U%08x" % code


_NON_PRINTABLE = re.compile("[^\n\\w !-~]")


def escape_controls(text):
    """``text`` with every non-printable character except the newline escaped as :func:`escape`
    escapes it, nothing else changed and nothing cut: for the report views, which do their own
    markup escaping and line handling, so they carry no terminal escape either. U+FFFD (a byte the
    host's text did not decode) is printable and stays as it is there."""
    return _NON_PRINTABLE.sub(lambda m: m.group(0) if m.group(0).isprintable() else _char_escape(m.group(0)), text)


def escape(value, limit=MAX_VALUE):
    """``value`` as one line of printable text of at most ``limit`` characters.

    Non-printable characters (C0/C1 controls, escape, DEL, bidi overrides, lone surrogates...)
    and U+FFFD (what undecodable bytes became) become ``\\xNN``, ``\\uNNNN`` or ``\\UNNNNNNNN``; newline, carriage return and tab ``\\n``,
    ``\\r``, ``\\t``; a backslash ``\\\\``. A value cut short ends in ``...`` (never inside an escape)."""
    if value is None:
        text = "null"
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, bytes):
        text = value.decode("utf-8", "backslashreplace")
    else:
        text = value if isinstance(value, str) else str(value)
    pieces = []
    size = 0
    for char in text:
        piece = _ESCAPES.get(char) or _char_escape(char)
        if size + len(piece) > limit:
            while pieces and size + 3 > limit:
                size -= len(pieces.pop())
            pieces.append("...")
            break
        pieces.append(piece)
        size += len(piece)
    return "".join(pieces)


def subject_nouns(catalogue):
    """``{rule id: plural noun}`` for folded lines ("on 8 GPUs"), from each rule's ``subjects``
    expression (``derived.pcie.gpus`` -> ``GPUs``); ``subjects`` for lists it does not know."""
    nouns = {}
    for rule in getattr(catalogue, "rules", None) or []:
        expression = getattr(getattr(rule, "subjects", None), "text", None)
        if not isinstance(expression, str):
            continue
        name = re.sub(r"\[.*?\]", "", expression).rstrip(".").rsplit(".", 1)[-1].strip()
        nouns[rule.id] = _NOUNS.get(name, "subjects")
    return nouns


def _int(value):
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _summary(host):
    summary = host.get("summary") if isinstance(host.get("summary"), dict) else {}
    return dict((status, _int(summary.get(status))) for status in STATUSES)


def _findings(part):
    findings = part.get("findings") if isinstance(part, dict) else None
    return [f for f in findings if isinstance(f, dict)] if isinstance(findings, list) else []


def _rank(finding):
    """Severity rank, worst highest; a failing finding of unknown severity counts as critical
    (as for ``fail_on``)."""
    return SEVERITY_RANK.get(finding.get("severity"), SEVERITY_RANK["critical"])


def _by_severity(findings):
    counts = {}
    for finding in findings:
        if finding.get("status") == "fail":
            severity = finding.get("severity") if finding.get("severity") in SEVERITY_RANK else "unknown severity"
            counts[severity] = counts.get(severity, 0) + 1
    order = ("unknown severity",) + SEVERITIES  # critical ... info
    return ", ".join("%s %d" % (sev, counts[sev]) for sev in order if counts.get(sev))


def _counts(host):
    """``fail 58 (critical 1, high 40), unknown 2, waived 0, pass 80, n/a 5``; with a ``before``
    (remediation) each count reads ``before -> after``."""
    after = _summary(host)
    before = host.get("before") if isinstance(host.get("before"), dict) else None
    before_summary = _summary(before) if before is not None else None
    parts = []
    for status in STATUS_WORST_FIRST:  # what needs attention first
        text = "%s %d" % (STATUS_LABELS[status], after[status])
        if before_summary is not None:
            text = "%s %d -> %d" % (STATUS_LABELS[status], before_summary[status], after[status])
        if status == "fail":
            severities = _by_severity(_findings(host))
            if severities:
                text += " (%s)" % severities
        parts.append(text)
    return ", ".join(parts)


def _short_subject(subject):
    match = _PCI_ADDRESS.match(subject)
    return match.group(1) if match else subject


def _subject_list(subjects):
    shown = [escape(_short_subject(s), MAX_NAME) for s in subjects]
    if len(shown) > MAX_SUBJECTS:
        shown = shown[:MAX_SUBJECTS - 3] + ["..."] + shown[-2:]
    return " ".join(shown) if all(" " not in s for s in shown) else ", ".join(shown)


def _split(message, subject):
    """``(head, tail)`` of a message around its `` on <subject> (<detail>)`` part, or None."""
    marker = " on " + subject
    start = message.rfind(marker)
    if start < 0:
        return None
    end = start + len(marker)
    if message.startswith(" (", end):
        depth = 0
        for index in range(end + 1, len(message)):
            if message[index] == "(":
                depth += 1
            elif message[index] == ")":
                depth -= 1
                if depth == 0:
                    end = index + 1
                    break
        else:
            return None
    return message[:start], message[end:]


def _flags(finding):
    if finding.get("pending") is True:
        return " [pending]"
    if finding.get("reboot_required") is True:
        return " [fix needs reboot]"
    return ""


def finding_lines(findings, nouns=None):
    """One line per failing rule of one host, worst severity first (catalogue order within a
    severity): ``high     PCI-001 MaxReadReq 512 B < 4096 B on 8 GPUs: 43:00.0 ... c8:00.0``.
    Findings of one rule whose messages differ only in the subject are folded into one line."""
    nouns = nouns or {}
    groups = []
    index = {}
    for finding in findings:
        if finding.get("status") != "fail":
            continue
        rule = str(finding.get("id"))
        message = finding.get("message")
        message = message if isinstance(message, str) else str(finding.get("title") or "")
        subject = finding.get("subject")
        parts = _split(message, subject) if isinstance(subject, str) and subject else None
        key = (rule, parts, _flags(finding)) if parts is not None else (rule, id(finding))
        if key in index:
            groups[index[key]]["subjects"].append(subject)
            continue
        index[key] = len(groups)
        groups.append({"finding": finding, "rule": rule, "message": message, "parts": parts,
                       "subjects": [subject]})
    groups.sort(key=lambda group: -_rank(group["finding"]))  # stable: catalogue order within a severity
    lines = []
    for group in groups:
        finding = group["finding"]
        severity = finding.get("severity") if finding.get("severity") in SEVERITY_RANK else "?"
        if len(group["subjects"]) > 1:
            head, tail = group["parts"]
            text = "%s on %d %s: %s%s" % (
                escape(head), len(group["subjects"]), nouns.get(group["rule"], "subjects"),
                _subject_list(group["subjects"]), escape(tail) if tail else "")
        else:
            text = escape(group["message"])
        lines.append("  %-8s %s %s%s" % (severity, escape(group["rule"], MAX_NAME), text, _flags(finding)))
    return lines


def host_list(names):
    """``a, b, c`` or, for more than :data:`MAX_SUBJECTS`, the first five, ``...``, the last two."""
    if len(names) > MAX_SUBJECTS:
        names = list(names[:MAX_SUBJECTS - 3]) + ["..."] + list(names[-2:])
    return ", ".join(names)


def _failing_only(host):
    """``host`` with only its failing findings (and its ``before``'s): all the summary shows of
    them; the counts come from the summaries."""
    return map_host_findings(host, lambda findings: [f for f in findings if isinstance(f, dict)
                                                     and f.get("status") == "fail"])


def kind_line(counts):
    """``hosts with work: faults critical 1; drift high 3, medium 2`` of :func:`findings.hosts_by_kind`'s
    ``counts`` (each host once per kind, at its worst severity of it); ``None`` when no host fails."""
    parts = []
    for kind in FINDING_KINDS:
        per = counts.get(kind) or {}
        named = ["%s %d" % (sev, per[sev]) for sev in SEVERITIES if per.get(sev)]
        named += ["%s %d" % (escape(sev, MAX_NAME), n) for sev, n in sorted(per.items()) if sev not in SEVERITY_RANK and n]
        if named:
            parts.append("%s %s" % (KIND_LABELS[kind], ", ".join(named)))
    return "hosts with work: %s" % "; ".join(parts) if parts else None


def _verdict(hosts, fail_on):
    unreachable = sorted(name for name, host in hosts.items() if isinstance(host, dict)
                         and host.get("state") == "unreachable")
    failed = sorted(name for name, host in hosts.items() if isinstance(host, dict) and host.get("state") == "failed")
    drifted = []
    if fail_on in SEVERITY_RANK:
        threshold = SEVERITY_RANK[fail_on]
        drifted = sorted(name for name, host in hosts.items()
                         if any(f.get("status") == "fail" and _rank(f) >= threshold for f in _findings(host)))

    def names(items):
        return ", ".join(escape(n, MAX_NAME) for n in items)

    if unreachable:
        return "exit code 4: unreachable: %s" % names(unreachable)
    reasons = []
    if failed:
        reasons.append("not audited: %s" % names(failed))
    if drifted:
        reasons.append("failing findings at or above %s: %s" % (fail_on, names(drifted)))
    if reasons:
        return "exit code 2: %s" % "; ".join(reasons)
    if fail_on in SEVERITY_RANK:
        return "exit code 0: no failing finding at or above %s (gpuhost_fail_on)" % fail_on
    return "exit code 0: findings do not set it (gpuhost_fail_on=none; set critical, high, medium or low for CI)"


def console_lines(report, notes=None, fail_on="none", report_dir=None, nouns=None, max_finding_lines=MAX_FINDING_LINES):
    """The console summary of ``report`` (a ``report.json`` document) as a list of lines.

    ``notes`` maps host names to a word shown with the host (``gpuhost_note``, for example
    that a host is a hostile test capture); ``fail_on`` is ``gpuhost_fail_on``; ``nouns``
    comes from :func:`subject_nouns`. Never raises on odd input: what is not a mapping or a
    list counts as empty. Above :data:`FOLD_HOSTS` hosts the summary stays short whatever the fleet:
    the hosts without failing findings, and the unreachable or failed ones, are one line per state and
    message; a failing group names its hosts on its header only, and the groups share
    :data:`FOLD_FINDING_LINES` finding lines (each keeps its worst line and a pointer to the reports)."""
    report = report if isinstance(report, dict) else {}
    report = expand_document(report)  # a stored report.json: rule fields back in the findings
    hosts = report.get("hosts") if isinstance(report.get("hosts"), Mapping) else {}
    # each host read once (a writer's document expands a host each time it is read), and only
    # what the summary shows of it kept
    hosts = dict((name, _failing_only(hosts[name])) for name in hosts)
    notes = notes if isinstance(notes, dict) else {}
    remediation = any(isinstance(h, dict) and isinstance(h.get("before"), dict) for h in hosts.values())
    states = {}
    for host in hosts.values():
        state = host.get("state") if isinstance(host, dict) else None
        states[state] = states.get(state, 0) + 1
    failing_hosts = sum(1 for h in hosts.values() if isinstance(h, dict) and _summary(h)["fail"])
    if remediation and report.get("preview") is True:
        kind = "remediation PREVIEW (--check: no fix was applied; counts before -> after, after = as it was)"
    elif remediation:
        kind = "remediation (counts before -> after)"
    else:
        kind = "audit"
    lines = ["gpuhost baseline %s, profile %s: %d host(s), %d audited, %d unreachable, %d failed; "
             "%d with failing findings" % (
                 kind,
                 escape(report.get("profile"), MAX_NAME), len(hosts), states.get("audited", 0),
                 states.get("unreachable", 0), states.get("failed", 0), failing_hosts)]
    names = dict((name, escape(name, MAX_NAME)) for name in hosts)
    width = max([len(n) for n in names.values()] + [0])
    fold = len(hosts) > FOLD_HOSTS
    groups = {}
    order = []
    folded = {}  # fold: (state, message, note) -> host names, for the hosts not in a failing group
    for name in sorted(hosts, key=str):
        host = hosts[name] if isinstance(hosts[name], dict) else {}
        state = host.get("state") if host.get("state") in HOST_STATES else "failed"
        note = notes.get(name)
        note = " [%s]" % escape(note, MAX_VALUE) if note not in (None, "") else ""
        message = host.get("message")
        message = " - %s" % escape(message, 160) if message not in (None, "") else ""
        if state == "unreachable" or (state == "failed" and not _findings(host)):
            if fold:
                folded.setdefault((state, message or " - no message", note), []).append(names[name])
                continue
            lines.append("  %-*s  %-11s%s%s" % (width, names[name], state, message or " - no message", note))
            continue
        failing = finding_lines(_findings(host), nouns)
        if fold and not failing:
            folded.setdefault((state + " without failing findings", message, note), []).append(names[name])
        elif not fold:
            lines.append("  %-*s  %-11s %s%s%s" % (width, names[name], state, _counts(host), message, note))
        if failing:
            # hosts with the same lines (and note) are one group: their lines are shown once
            key = (tuple(failing), _summary(host)["fail"], note)
            if key not in groups:
                groups[key] = []
                order.append(key)
            groups[key].append(names[name])
    for (state, message, note), members in sorted(folded.items()):
        lines.append("  %d host(s) %s%s%s: %s" % (len(members), state, message, note, host_list(members)))
    budget = FOLD_FINDING_LINES
    for key in order:
        failing, count, note = key
        members = groups[key]
        if len(members) == 1:
            lines.append("%s: %d failing finding(s), worst first%s" % (members[0], count, note))
        else:
            lines.append("%d hosts (%s): same %d failing finding(s), worst first%s"
                         % (len(members), host_list(members), count, note))
        shown = max_finding_lines
        if fold:
            # the groups share the budget; each keeps at least its worst line
            shown = min(shown, max(1, budget))
            budget -= min(len(failing), shown)
        lines.extend(failing[:shown])
        if len(failing) > shown:
            lines.append("  ... %d more line(s) in report.md / report.html" % (len(failing) - shown))
    by_kind = kind_line(hosts_by_kind(hosts.values()))
    if by_kind:
        lines.append(by_kind)
    lines.append(_verdict(hosts, fail_on))
    if report_dir:
        lines.append("reports: %s" % escape(report_dir, MAX_VALUE))
    return lines


def measure_line(host, measure, names=None):
    """validate.yml's line of what was measured on ``host``: ``gpu01: cpu_freq ok; gpu_bw unknown (reason)``,
    every value escaped as :func:`escape` escapes it (a tool's message is the host's text: a bidi override
    or an escape in it must not reach the terminal). ``measure`` maps a measurement to its result (``status``,
    ``reason``); ``names`` the measurements asked for, in order (one without a result says ``no result``;
    default: those with a result). Never raises on odd input."""
    measure = measure if isinstance(measure, Mapping) else {}
    if not isinstance(names, (list, tuple)):
        names = [name for name, got in measure.items() if isinstance(got, Mapping) and "status" in got]
    parts = []
    for name in names:
        got = measure.get(name) if isinstance(name, str) else None
        got = got if isinstance(got, Mapping) else {}
        status = got.get("status")
        reason = got.get("reason")
        parts.append("%s %s%s" % (escape(name, MAX_NAME), escape(status, MAX_NAME) if status is not None else "no result",
                                  " (%s)" % escape(reason, MAX_VALUE) if reason not in (None, "") else ""))
    # the site's workloads (VAL-012): one part each, its figure or why there is none
    workloads = measure.get("workloads")
    for got in workloads if isinstance(workloads, list) else []:
        got = got if isinstance(got, Mapping) else {}
        status, reason, value = got.get("status"), got.get("reason"), got.get("value")
        said = reason if reason not in (None, "") else (
            "%s %s" % (value, got.get("unit") or "") if value is not None else "")
        parts.append("workload %s %s%s" % (escape(got.get("name"), MAX_NAME),
                                           escape(status, MAX_NAME) if status is not None else "no result",
                                           " (%s)" % escape(said.strip(), MAX_VALUE) if said.strip() else ""))
    return "%s: %s" % (escape(host, MAX_NAME), "; ".join(parts) if parts else "nothing measured")


def number_text(value):
    """``1,500``, ``61.3``, ``-`` (none or not a number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return "-"
    if abs(value) >= 100:
        return "{:,.0f}".format(value)
    return "{:,.2f}".format(value).rstrip("0").rstrip(".")


def figure_text(entry):
    """``lowest CPU clock under load 1,500 -> 3,400 MHz (+126.7 %, better)``: one figure of a host's ``prove``
    (``judge.prove.prove_summary``), its label and unit escaped."""
    unit = (" " + entry["unit"]) if entry.get("unit") else ""
    text = "%s %s -> %s%s" % (escape(entry.get("label"), MAX_NAME), number_text(entry.get("before")),
                              number_text(entry.get("after")), escape(unit, MAX_NAME))
    details = []
    if isinstance(entry.get("change_pct"), (int, float)) and not isinstance(entry.get("change_pct"), bool):
        details.append("%+.1f %%" % entry["change_pct"])
    verdict = entry.get("verdict")
    if verdict == "within noise":
        details.append("within noise (%s%s)" % (number_text(entry.get("noise")), unit))
    elif verdict == "unknown":
        details.append("not measured %s" % ("before" if entry.get("before") is None else "after"))
    else:
        verdict = escape(verdict, MAX_NAME)
        details.append(verdict if entry.get("noise") is not None else "%s, noise not measured (one run)" % verdict)
    return "%s (%s)" % (text, ", ".join(details))


def prove_line(host, summary):
    """remediate.yml's line of what the fixes delivered on ``host`` (``gpuhost_prove``): the fixes that ran, then
    each figure before -> after (:func:`figure_text`), from the host's ``prove`` (``judge.prove.prove_summary``).
    Host values escaped as every console line. Never raises on odd input."""
    host = escape(host, MAX_NAME)
    if not isinstance(summary, Mapping):
        return "%s: nothing measured" % host
    fixes = ", ".join(escape(rule, MAX_NAME) for rule in summary.get("fixes") or []) or "no fix"
    head = "%s: %s applied" % (host, fixes)
    figures = [entry for entry in summary.get("figures") or [] if isinstance(entry, Mapping)]
    reason = escape(summary.get("reason"), MAX_VALUE) if summary.get("reason") else None
    if not figures:
        return "%s; %s" % (head, reason or "nothing measured")
    return "%s: %s%s" % (head, "; ".join(figure_text(entry) for entry in figures), " (%s)" % reason if reason else "")
