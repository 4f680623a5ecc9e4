# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus text exposition of ``report.json`` (metric list in docs/report.md, "metrics.prom").

Controller side, pure functions of the report document (as ``build_report`` makes it, or as
``report.json`` stores it: each function expands a stored document first):

- :func:`render_metrics` is the whole document (``metrics.prom`` of one run);
- :func:`render_host_metrics` is one host's series (the node_exporter textfile a host writes
  for itself);
- :func:`merge_metrics` is the fleet file: this run's series plus, from the file already
  there, the series of the hosts this run did not audit (``--limit``), unless they are older
  than ``keep_seconds``.

Every series has a label set that does not depend on a finding's status or a host's state, so a
status change changes a value and never starts a new series: a finding is one series per
(host, rule, subject) with a 0/1 ``failing`` value, a host's state is one 0/1 series per possible
state. Every series of a host also has an ``origin`` label, the audit that wrote it (:data:`ORIGINS`),
so the fleet file and a host's own textfile can lie in one node_exporter textfile directory
without giving one series twice (docs/report.md, "The origin label"). Label values come from hosts
and are hostile: they are escaped as the exposition format
wants (backslash, double quote, newline), and text UTF-8 cannot carry (lone surrogates) is
replaced by U+FFFD. Every family is a gauge with HELP and TYPE; ``promtool check metrics``
passes on the output.
"""

from __future__ import absolute_import, division, print_function

import json
import math
import os
import re
import stat
from collections.abc import Mapping

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base import files
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.findings import HOST_STATES, SEVERITY_RANK, STATUSES, finding_kind, hosts_by_kind
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.isotime import epoch_seconds
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import expand_document
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import finite_number as _number

__metaclass__ = type

#: A host the fleet file keeps from an earlier run (one a ``--limit`` run skipped) is dropped when
#: its ``gpuhost_baseline_last_run_timestamp_seconds`` is older than this, counted from the
#: generation time of the report being written: seven days, long enough for a weekly audit of a
#: part of the fleet, short enough that a host taken out of the inventory leaves the file.
KEEP_SECONDS = 7 * 86400

#: ``origin`` label of the series the controller's fleet file holds (audit.yml, remediate.yml)
ORIGIN_CONTROLLER = "controller"
#: ``origin`` label of the series a host's self-audit writes into its own textfile
ORIGIN_SELF_AUDIT = "self_audit"
#: Every value the ``origin`` label has. Both files may lie in one textfile directory (the
#: controller or the monitoring host is also an audited host): node_exporter serves the files of a
#: directory as one set, and a series given by two files is an error it logs ("was collected before
#: with the same name and label values") while it drops one of them. The label keeps them two series.
ORIGINS = (ORIGIN_CONTROLLER, ORIGIN_SELF_AUDIT)

#: ``(name, label names, help)`` of every family, in the order the file lists them. The first two
#: describe the run; every other one has ``host`` as its first label and ``origin`` as its second.
FAMILIES = (
    ("gpuhost_baseline_info", ("version", "profile"),
     "Collection version and profile of the run that wrote this file (always 1)."),
    ("gpuhost_baseline_report_timestamp_seconds", (),
     "Unix time the report of the run that wrote this file was generated."),
    ("gpuhost_baseline_hosts_with_work", ("kind", "severity"),
     "Hosts of the run that wrote this file with a failing finding of the kind (drift: configuration; fault: "
     "hardware or GPU health), each counted once per kind at its worst failing severity of it."),
    ("gpuhost_baseline_host_info", ("host", "origin", "profile", "version"),
     "Resolved profile and collection version of the last audit of the host (always 1)."),
    ("gpuhost_baseline_host_up", ("host", "origin"),
     "1 if the last audit of the host ran, 0 if the host was unreachable or its audit failed."),
    ("gpuhost_baseline_host_state", ("host", "origin", "state"),
     "State of the last audit of the host: 1 for its state, 0 for the others (audited, unreachable, failed)."),
    ("gpuhost_baseline_last_run_timestamp_seconds", ("host", "origin"),
     "Unix time of the last audit run that included the host, whatever its outcome."),
    ("gpuhost_baseline_run_duration_seconds", ("host", "origin"),
     "Wall time of the last audit run that included the host, when the report records it."),
    ("gpuhost_baseline_last_change_timestamp_seconds", ("host", "origin"),
     "Unix time of the last change of a finding of the host seen by the drift history."),
    ("gpuhost_baseline_findings", ("host", "origin", "status"),
     "Number of findings of the host per status (pass, fail, unknown, waived, not_applicable)."),
    ("gpuhost_baseline_failures", ("host", "origin", "severity"),
     "Number of failing findings of the host per rule severity."),
    ("gpuhost_baseline_facts_errors", ("host", "origin"),
     "Number of facts that could not be read on the host."),
    ("gpuhost_baseline_gather_duration_seconds", ("host", "origin", "subsystem"),
     "Seconds the facts reader of the subsystem took on the host at its last audit (as node_exporter's "
     "node_scrape_collector_duration_seconds)."),
    ("gpuhost_baseline_finding_failing", ("host", "origin", "rule", "subject", "severity", "area", "kind"),
     "1 if the rule fails on the subject of the host, 0 if it does not (pass, unknown, waived, not applicable); "
     "kind is drift (configuration) or fault (hardware or GPU health)."),
    ("gpuhost_baseline_finding_observed", ("host", "origin", "rule", "subject"),
     "The value the rule observed on the subject of the host, where it is a number (MaxReadReq bytes, link "
     "generation and width, power limit watts, error counts, measured bandwidths)."),
    ("gpuhost_baseline_finding_expected", ("host", "origin", "rule", "subject"),
     "The value the rule expects on the subject of the host, where it is a number (beside finding_observed)."),
    ("gpuhost_baseline_gpu_info", ("host", "origin", "subject", "gpu", "UUID", "pci_bus_id", "Hostname", "hostname"),
     "1 for each NVIDIA GPU of the host: its findings' subject (the PCI address) with dcgm-exporter's labels "
     "gpu (the index), UUID, pci_bus_id and Hostname (hostname since its 2026-05 main branch), to join the two "
     "(docs/report.md)."),
    ("gpuhost_baseline_prove_figure", ("host", "origin", "figure", "unit", "phase"),
     "A figure of the validate measurements of the host before (phase before) and after (phase after) the fixes of "
     "its last remediation with gpuhost_prove: the median of the phase's runs (hosts.<host>.prove)."),
    ("gpuhost_baseline_prove_noise", ("host", "origin", "figure", "unit"),
     "The noise of the figure at the host's last remediation with gpuhost_prove: the largest spread of one phase's "
     "runs; a change no larger than it is within noise."),
    ("gpuhost_baseline_numa_free_memory_ratio", ("host", "origin", "node"),
     "Free memory of the NUMA node as a ratio of its total (0 to 1) at audit time."),
)

#: every family of a host's series ends with the ``cluster`` label (``gpuhost_cluster``, empty when not set):
#: two clusters' hosts in one Prometheus stay apart
FAMILIES = tuple((name, labels + ("cluster",) if "host" in labels else labels, help_text)
                 for name, labels, help_text in FAMILIES)
FAMILY_LABELS = dict((name, labels) for name, labels, dummy in FAMILIES)
RUN_FAMILIES = tuple(name for name, labels, dummy in FAMILIES if "host" not in labels)

_SURROGATE = re.compile(u"[\ud800-\udfff]")
_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
# a sample value as Prometheus writes and reads it (Go's ParseFloat would take more; we keep only these)
_VALUE = r"(?:[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]?Inf|NaN)"
_UNESCAPE = {"\\": "\\", '"': '"', "n": "\n"}


class MetricsError(ValueError):
    """A request the renderer cannot answer (a host the report does not have)."""


# ---------------------------------------------------------------------------
# values and labels
# ---------------------------------------------------------------------------

def label_text(value):
    """A label value as text: ``None`` is empty, booleans are ``true``/``false``, other non-strings JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, sort_keys=True)


def prom_escape(value):
    """Escape a label value per the text exposition format (backslash, double quote, newline);
    lone surrogates, which UTF-8 cannot encode, become U+FFFD."""
    text = _SURROGATE.sub(u"\ufffd", label_text(value))
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _value_text(value):
    if isinstance(value, float):
        return repr(value)
    return str(value)


# ---------------------------------------------------------------------------
# the series of a report
# ---------------------------------------------------------------------------

def _run_samples(report):
    samples = {"gpuhost_baseline_info": [((label_text(report.get("collection_version")), label_text(report.get("profile"))), 1)]}
    stamp = epoch_seconds(report.get("generated"))
    if stamp is not None:
        samples["gpuhost_baseline_report_timestamp_seconds"] = [((), stamp)]
    counts = report.get("totals", {}).get("hosts_by_kind") if isinstance(report.get("totals"), dict) else None
    if not isinstance(counts, dict):  # a document written before the counts
        counts = hosts_by_kind(report.get("hosts", {}).values() if isinstance(report.get("hosts"), Mapping) else ())
    samples["gpuhost_baseline_hosts_with_work"] = [
        ((label_text(kind), label_text(sev)), n) for kind in sorted(counts) if isinstance(counts[kind], dict)
        for sev, n in sorted(counts[kind].items()) if _number(n) is not None]
    return samples


def _duration(report, host):
    """Seconds the run took for ``host``: its own ``duration_seconds`` when the report has it, else
    ``generated`` minus the run's ``started`` when the report has both; ``None`` otherwise."""
    own = _number(host.get("duration_seconds"))
    if own is not None and own >= 0:
        return own
    started = epoch_seconds(report.get("started"))
    generated = epoch_seconds(report.get("generated"))
    if started is None or generated is None or generated < started:
        return None
    return generated - started


def _free_ratio(node):
    total = _number(node.get("mem_total_kb"))
    free = _number(node.get("mem_free_kb"))
    if total and total > 0 and free is not None:
        ratio = free / total
    else:
        pct = _number(node.get("free_pct"))
        if pct is None:
            return None
        ratio = pct / 100.0
    if not 0 <= ratio <= 1:
        return None  # garbage counters (free above total) are not a ratio worth alerting on
    return round(ratio, 6)


#: The family of a series per finding: most of a fleet file's lines. The report writer makes them
#: host by host as it writes them (:func:`iter_fleet_metrics`) rather than holding them.
BULK_FAMILY = "gpuhost_baseline_finding_failing"


def _cluster(host):
    """The host's ``cluster`` label value (``gpuhost_cluster``): text, empty when it has none."""
    cluster = host.get("cluster")
    return cluster if isinstance(cluster, str) else ""


def _finding_samples(name, host, origin):
    """``[(label values, value)]`` of :data:`BULK_FAMILY` for one host: 1 for a failing finding, else 0."""
    seen = {}
    failing = []
    cluster = label_text(_cluster(host))
    for finding in host.get("findings") or []:  # the bulk of a fleet file: written without add()
        if not isinstance(finding, dict):
            continue
        rid, subject, severity, area, kind = (
            v if v.__class__ is str else label_text(v)
            for v in (finding.get("id"), finding.get("subject"), finding.get("severity"), finding.get("area"),
                      finding.get("kind") or finding_kind(finding.get("area"))))
        count = seen[(rid, subject)] = seen.get((rid, subject), 0) + 1
        if count > 1:
            # two findings of one rule on one subject would be one series twice, which the
            # textfile collector rejects: the repeats are numbered
            subject = "%s#%d" % (subject, count)
        failing.append(((name, origin, rid, subject, severity, area, kind, cluster), 1 if finding.get("status") == "fail" else 0))
    return failing


def _host_samples(report, name, host, origin, bulk=True):
    """``{family: [(label values, value)]}`` of one host of ``report``, written by ``origin``
    (without :data:`BULK_FAMILY` when ``bulk`` is false)."""
    out = {}
    cluster = (label_text(_cluster(host)),)

    def add(family, labels, value):
        out.setdefault(family, []).append(((name, origin) + tuple(label_text(v) for v in labels) + cluster, value))

    state = host.get("state") or "audited"
    add("gpuhost_baseline_host_info", (host.get("profile"), report.get("collection_version")), 1)
    add("gpuhost_baseline_host_up", (), 1 if state == "audited" else 0)
    for one in HOST_STATES:
        add("gpuhost_baseline_host_state", (one,), 1 if state == one else 0)
    stamp = epoch_seconds(report.get("generated"))
    if stamp is not None:
        add("gpuhost_baseline_last_run_timestamp_seconds", (), stamp)
    duration = _duration(report, host)
    if duration is not None:
        add("gpuhost_baseline_run_duration_seconds", (), duration)
    changes = host.get("changes")
    if isinstance(changes, dict):
        changed = epoch_seconds(changes.get("last_change"))
        if changed is not None:
            add("gpuhost_baseline_last_change_timestamp_seconds", (), changed)
    findings = [f for f in host.get("findings") or [] if isinstance(f, dict)]
    summary = host.get("summary") or {}
    for status in STATUSES:
        count = _number(summary.get(status))
        add("gpuhost_baseline_findings", (status,),
            count if count is not None else sum(1 for f in findings if f.get("status") == status))
    per_severity = dict((sev, 0) for sev in SEVERITY_RANK)
    for finding in findings:
        if finding.get("status") == "fail":
            sev = label_text(finding.get("severity")) or "unknown"
            per_severity[sev] = per_severity.get(sev, 0) + 1
    for sev in sorted(per_severity):
        add("gpuhost_baseline_failures", (sev,), per_severity[sev])
    errors = _number(host.get("facts_errors"))
    add("gpuhost_baseline_facts_errors", (), errors if errors is not None else 0)
    gather_s = host.get("gather_s")
    for subsystem, seconds in sorted(gather_s.items()) if isinstance(gather_s, dict) else ():
        seconds = _number(seconds)
        if seconds is not None:
            add("gpuhost_baseline_gather_duration_seconds", (subsystem,), seconds)
    if bulk:
        out[BULK_FAMILY] = _finding_samples(name, host, origin)
    for finding in findings:
        for key, family in (("observed", "gpuhost_baseline_finding_observed"),
                            ("expected", "gpuhost_baseline_finding_expected")):
            value = finding.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                add(family, (finding.get("id"), finding.get("subject")), value)
    prove = host.get("prove")
    for figure in prove.get("figures") or [] if isinstance(prove, dict) else ():
        if not isinstance(figure, dict):
            continue
        for phase in ("before", "after"):
            value = _number(figure.get(phase))
            if value is not None:
                add("gpuhost_baseline_prove_figure", (figure.get("key"), figure.get("unit"), phase), value)
        noise = _number(figure.get("noise"))
        if noise is not None:
            add("gpuhost_baseline_prove_noise", (figure.get("key"), figure.get("unit")), noise)
    hostname = host.get("hostname") or name
    for gpu in host.get("gpus") or []:
        if isinstance(gpu, dict) and isinstance(gpu.get("bus_id"), str):
            add("gpuhost_baseline_gpu_info", (gpu["bus_id"], gpu.get("index"), gpu.get("uuid"),
                                              dcgm_bus_id(gpu["bus_id"]), hostname, hostname), 1)
    for index, node in enumerate(host.get("numa") or []):
        if isinstance(node, dict):
            ratio = _free_ratio(node)
            if ratio is not None:
                node_id = node.get("id")
                add("gpuhost_baseline_numa_free_memory_ratio", (index if node_id is None else node_id,), ratio)
    return out


def dcgm_bus_id(address):
    """A PCI address as dcgm-exporter's ``pci_bus_id`` label writes it (NVML's bus id: an 8-digit domain,
    upper-case hex): ``0000:47:00.0`` -> ``00000000:47:00.0``, ``0000:c3:00.0`` -> ``00000000:C3:00.0``."""
    parts = address.split(":")
    if len(parts) != 3:
        return address.upper()
    return ("%s:%s:%s" % (parts[0].zfill(8), parts[1], parts[2])).upper()


def _template(name, labels):
    if not labels:
        return name + " %s"
    return name + "{" + ",".join('%s="%%s"' % k for k in labels) + "} %s"


#: family -> ``%`` template of its sample line (label values, then the value)
_TEMPLATES = dict((name, _template(name, labels)) for name, labels, dummy in FAMILIES)


class _Escaped(dict):
    """``prom_escape`` of each label value, computed once per value (a fleet repeats them a lot)."""

    def __missing__(self, key):
        value = self[key] = prom_escape(key)
        return value


def _lines(samples, escaped=None):
    """``{family: [(host, sample line)]}`` of ``{family: [(label values, value)]}``; ``escaped``: the
    :class:`_Escaped` cache to share (a fleet's hosts repeat the same label values)."""
    escaped = _Escaped() if escaped is None else escaped
    out = {}
    for family, series in samples.items():
        template = _TEMPLATES[family]
        out[family] = [(values[0] if values else "",
                        template % (tuple(escaped[v] for v in values) + (_value_text(value),)))
                       for values, value in series]
    return out


def iter_exposition(lines_by_family, streamed=None):
    """The text of ``{family: [(host, sample line)]}`` a family at a time: families in
    :data:`FAMILIES` order, each with HELP and TYPE, none without samples (joined:
    :func:`_exposition`; the report writer writes the chunks as they come). ``streamed``: the
    :data:`BULK_FAMILY` lines as an iterable of one host's ``[(host, sample line)]`` after another,
    each written as it comes, in place of that family's lines in ``lines_by_family``."""
    for name, dummy, help_text in FAMILIES:
        if streamed is not None and name == BULK_FAMILY:
            parts = streamed
        else:
            parts = (lines_by_family.get(name),)
        started = False
        for series in parts:
            if not series:
                continue
            if not started:
                yield "# HELP %s %s\n# TYPE %s gauge\n" % (name, help_text, name)
                started = True
            yield "\n".join(line for dummy2, line in series) + "\n"


def _exposition(lines_by_family):
    return "".join(iter_exposition(lines_by_family))


def _hosts(report):
    hosts = report.get("hosts") or {}
    return hosts if isinstance(hosts, Mapping) else {}


def _report_lines(report, bulk=True, escaped=None):
    """``{family: [(host, sample line)]}`` of the run and of every host of ``report`` (expanded),
    each host's samples made lines as it is read: the fleet's samples are never held together.
    Without ``bulk``, no :data:`BULK_FAMILY` lines."""
    escaped = _Escaped() if escaped is None else escaped
    lines = _lines(_run_samples(report), escaped)
    hosts = _hosts(report)
    for name in hosts:
        host = hosts[name]
        if isinstance(host, dict):
            for family, series in _lines(_host_samples(report, name, host, ORIGIN_CONTROLLER, bulk),
                                         escaped).items():
                lines.setdefault(family, []).extend(series)
    return lines


def iter_fleet_metrics(report, existing, now=None, keep_seconds=KEEP_SECONDS):
    """:func:`merge_metrics`'s text a piece at a time, for the report writer. With no host to keep
    from ``existing`` (a run over the whole fleet), the lines of :data:`BULK_FAMILY` are made host
    by host as they are written (each host read once more), so the writer holds the other families'
    lines only; with hosts to keep (a ``--limit`` run) every family is held and sorted, as
    :func:`merge_metrics` does."""
    report = expand_document(report, lazy=True)
    if kept_hosts(report, existing, now=now, keep_seconds=keep_seconds):
        yield from iter_exposition(merged_lines(report, existing, now, keep_seconds))
        return
    del existing  # the file being replaced keeps no host: not held while the new one is written
    escaped = _Escaped()
    lines = _report_lines(report, bulk=False, escaped=escaped)
    hosts = _hosts(report)

    def per_host():
        for name in hosts:
            host = hosts[name]  # read once: a host of the writer's document is expanded on each read
            if isinstance(host, dict):
                yield _lines({BULK_FAMILY: _finding_samples(name, host, ORIGIN_CONTROLLER)}, escaped)[BULK_FAMILY]

    yield from iter_exposition(lines, streamed=per_host())


def render_metrics(report):
    """``metrics.prom`` of ``report``: the run's two series and every host's (``origin="controller"``)."""
    return _exposition(_report_lines(expand_document(report, lazy=True)))


def render_host_metrics(report, host, origin=ORIGIN_SELF_AUDIT):
    """The series of one host of ``report`` (every family that has ``host`` as a label), for the
    node_exporter textfile a host writes for itself (``origin``, by default ``self_audit``). Raises
    :class:`MetricsError` when the report has no such host or ``origin`` is not one of :data:`ORIGINS`."""
    if origin not in ORIGINS:
        raise MetricsError("origin %r is none of %s" % (origin, ", ".join(ORIGINS)))
    report = expand_document(report)
    hosts = _hosts(report)
    if host not in hosts or not isinstance(hosts[host], dict):
        raise MetricsError("the report has no host %r (hosts: %s)" % (host, ", ".join(sorted(map(str, hosts))) or "none"))
    return _exposition(_lines(_host_samples(report, host, hosts[host], origin)))


# ---------------------------------------------------------------------------
# reading an existing file, and the fleet file
# ---------------------------------------------------------------------------

_LABEL_VALUE = r'[^"\\\n]*(?:\\[\\"n][^"\\\n]*)*'  # only the three escapes, no raw quote or newline
_PAIR = r'[a-zA-Z_][a-zA-Z0-9_]*="%s"' % _LABEL_VALUE
_SAMPLE = re.compile(r'(%s)(?:\{((?:%s(?:,%s)*,?)?)\})? (%s)' % (_NAME, _PAIR, _PAIR, _VALUE))
_PAIRS = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="(%s)"' % _LABEL_VALUE)
_ESCAPE = re.compile(r'\\(.)')
#: what a kept line without the origin label gets (:func:`merge_metrics`): one string replacement,
#: as cheap as keeping the line (a fleet file may hold 470,000 lines: EXISTING_CAP)
_OLD_LINE_ORIGIN = '{origin="%s",' % ORIGIN_CONTROLLER
# the origin label is optional: a fleet file written before it had none
_LAST_RUN = re.compile(r'^gpuhost_baseline_last_run_timestamp_seconds\{host="(%s)"(?:,[a-zA-Z_][a-zA-Z0-9_]*="%s")*,?\} (%s)$'
                       % (_LABEL_VALUE, _LABEL_VALUE, _VALUE), re.M)
#: labels a kept line written before them gets (:func:`merged_lines`): the value from the line's other labels
_ADDED_LABELS = {"cluster": lambda labels: "", "kind": lambda labels: finding_kind(labels.get("area"))}


def _unescape(value):
    return _ESCAPE.sub(lambda m: _UNESCAPE[m.group(1)], value) if "\\" in value else value


def _parsed(text):
    """``(family, {label: value}, value text, line)`` of each well-formed sample line of ``text``."""
    for line in text.split("\n"):
        if not line or line[0] == "#":
            continue
        match = _SAMPLE.fullmatch(line)
        if not match:
            continue
        pairs = [(k, _unescape(v)) for k, v in _PAIRS.findall(match.group(2))] if match.group(2) else []
        labels = dict(pairs)
        if len(labels) != len(pairs):
            continue  # a label given twice
        yield match.group(1), labels, match.group(3), line


def _last_runs(text):
    """``{host: last run}`` from the ``gpuhost_baseline_last_run_timestamp_seconds`` lines of ``text``."""
    stamps = {}
    for host, value in _LAST_RUN.findall(text):
        stamp = float(value)
        if math.isfinite(stamp):
            host = _unescape(host)
            stamps[host] = max(stamp, stamps.get(host, stamp))
    return stamps


def _no_surrogates(text):
    """``text`` with each lone surrogate (a byte that was not UTF-8) replaced; ``text`` itself, not a
    copy, when it has none (a fleet file may be 32 MiB)."""
    return _SURROGATE.sub(u"\ufffd", text) if _SURROGATE.search(text) else text


def kept_hosts(report, existing, now=None, keep_seconds=KEEP_SECONDS):
    """``{host: last run}`` of the hosts of ``existing`` (exposition text) that the fleet file keeps:
    not in ``report``, with a last-run time no older than ``keep_seconds`` before ``now`` (default:
    the report's generation time). A host without a last-run time cannot be dated and is dropped."""
    if now is None:
        now = epoch_seconds(report.get("generated"))
    if now is None or not existing:
        return {}
    current = set(_hosts(report))
    existing = _no_surrogates(existing)
    return dict((host, stamp) for host, stamp in _last_runs(existing).items()
                if host not in current and now - stamp <= keep_seconds)


def merge_metrics(report, existing, now=None, keep_seconds=KEEP_SECONDS):
    """The fleet ``metrics.prom``: the series of ``report``, plus the series that ``existing`` (the
    text of the file being replaced; empty or ``None`` for none) has for the hosts in
    :func:`kept_hosts`. A kept line must belong to a family of :data:`FAMILIES` with its current
    label names (a line of a renamed or reshaped family is dropped) and not repeat a series; it is
    written as it was, but for a line without the ``origin`` label (a file of a version before it),
    which gets ``origin="controller"`` (the only writer of a fleet file) as its first label. Families
    stay contiguous, hosts in name order within each."""
    return _exposition(merged_lines(report, existing, now, keep_seconds))


def merged_lines(report, existing, now=None, keep_seconds=KEEP_SECONDS):
    """:func:`merge_metrics`'s ``{family: [(host, sample line)]}`` (its text: :func:`iter_exposition`)."""
    report = expand_document(report, lazy=True)
    lines = _report_lines(report)
    keep = kept_hosts(report, existing, now=now, keep_seconds=keep_seconds)
    if keep:
        seen = set()
        for family, labels, dummy, line in _parsed(_no_surrogates(existing)):
            names = FAMILY_LABELS.get(family)
            if not names or labels.get("host") not in keep or "host" not in names:
                continue
            if "origin" in names and "origin" not in labels:  # a line from before the origin label
                labels["origin"] = ORIGIN_CONTROLLER
                line = line.replace("{", _OLD_LINE_ORIGIN, 1)  # a name has no "{": the label set's
            if len(labels) != len(names):
                added = [k for k in names if k not in labels]
                if len(labels) + len(added) != len(names) or any(k not in _ADDED_LABELS for k in added):
                    continue
                # a line from before a label was added (cluster, kind): written again with it
                labels.update((k, _ADDED_LABELS[k](labels)) for k in added)
                line = _TEMPLATES[family] % (tuple(prom_escape(labels[k]) for k in names) + (line.rsplit(" ", 1)[1],))
            try:
                values = tuple(labels[k] for k in names)
            except KeyError:
                continue  # other label names
            if (family, values) in seen:
                continue
            seen.add((family, values))
            lines.setdefault(family, []).append((values[0], line))
        for family, series in lines.items():
            series.sort(key=lambda item: item[0])  # stable: each host's series keep their order
    return lines


#: The most of an existing fleet file :func:`read_existing` reads (bytes): about 1,100 hosts of the
#: demo incident's kind (8 GPUs, 29 kB of series each), 1,700 of the demo mix. Merging a file of this
#: size took 3.2 s of CPU and 320 MiB with demo series, at worst (the shortest line the merge keeps,
#: a host each: tests/fuzz/test_fuzz_report_dir.py) 6.7 s and 415 MiB; a larger file is refused.
#: Such lines from a file written before the origin label (each kept line grows by 20 bytes, 466,000
#: of them) took 5.6 s of CPU and 442 MiB (process peak, the input included) at a load of 20 on 2
#: cores, the code before the label 6.5 s on the same input.
EXISTING_CAP = 32 * 1024 * 1024


def _existing_bytes(path, cap):
    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            return b""
        return files.read_bytes(path, cap)
    except FileNotFoundError:
        return b""


def read_existing(path, cap=EXISTING_CAP):
    """Text of the fleet metrics file at ``path``; ``""`` when there is none (or a directory is in its
    place: the writer refuses to replace that). Read through ``files.read_bytes``: a regular file
    only, a link never followed, a FIFO never waited on, at most ``cap`` bytes; anything else raises
    ``files.FileRefused`` saying which file and why, another read error its ``OSError``. Bytes that
    are not UTF-8 are replaced (their lines still parse, or are dropped by the merge)."""
    return _existing_bytes(path, cap).decode("utf-8", "replace")


#: A ``gpuhost_baseline_last_run_timestamp_seconds`` line of a file's bytes (what :func:`_last_runs` reads).
_LAST_RUN_LINE = re.compile(br"^gpuhost_baseline_last_run_timestamp_seconds\{[^\n]*", re.M)


def existing_to_merge(report, path, cap=EXISTING_CAP, now=None, keep_seconds=KEEP_SECONDS):
    """:func:`read_existing`'s text of the file at ``path`` when it has a host to keep for ``report``
    (:func:`kept_hosts`: a ``--limit`` run), else ``""``: a run over the whole fleet, whose new file
    keeps nothing of the old one, never holds it (its last-run lines are read a piece at a time; the
    file is 9 MB at 300 hosts). Read and refused as :func:`read_existing` reads and refuses."""
    if not kept_hosts(report, _last_run_lines(path, cap), now=now, keep_seconds=keep_seconds):
        return ""
    return read_existing(path, cap)


def _last_run_lines(path, cap, size=1024 * 1024):
    """The last-run lines of the file at ``path``, as text, read a piece at a time (never the whole
    file: 30 MB at 1,000 hosts); refused as :func:`read_existing` refuses."""
    lines = []
    pending = bytearray()
    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            return ""
        for chunk in files.iter_bytes(path, cap, size):
            pending.extend(chunk)
            cut = pending.rfind(b"\n") + 1  # whole lines only: a line cut between two pieces waits
            if cut:
                lines.extend(_LAST_RUN_LINE.findall(pending, 0, cut))
                del pending[:cut]
    except FileNotFoundError:
        return ""
    lines.extend(_LAST_RUN_LINE.findall(pending))
    return "\n".join(bytes(line).decode("utf-8", "replace") for line in lines)


def fleet_metrics(report, path, keep_seconds=KEEP_SECONDS):
    """:func:`merge_metrics` of ``report`` with the file at ``path`` as it is now."""
    return merge_metrics(report, read_existing(path), keep_seconds=keep_seconds)
