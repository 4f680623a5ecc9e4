# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build ``report.json`` from evaluated findings (schema in ``docs/report.md``).

Controller side. ``build_report`` checks every host's findings against the report
contract and assembles the document; ``views.py`` and ``views_machine.py`` render it, ``report_dir.py`` writes the set.
"""

from __future__ import absolute_import, division, print_function

import copy
import datetime
import json
import math
import re
from collections.abc import Mapping
from json.decoder import scanstring

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.findings import (
    FAIL_ON_LEVELS, FINDING_KEYS, FINDING_KINDS, HOST_STATES, SEVERITIES, SEVERITY_RANK, STATUSES, STORED_SCHEMA,
    RulesTable, finding_kind, finding_reader, hosts_by_kind, rules_table, store_finding, summarize, unpack_findings)

__metaclass__ = type

#: ``schema`` of the document ``build_report`` makes and :func:`expand_document` gives back (every
#: finding a whole mapping); ``report.json`` stores it as schema :data:`findings.STORED_SCHEMA`.
SCHEMA = 1

#: format name -> file name written by ``write_reports``.
FORMAT_FILES = (
    ("json", "report.json"),
    ("md", "report.md"),
    ("html", "report.html"),
    ("junit", "junit.xml"),
    ("prom", "metrics.prom"),
    ("csv", "findings.csv"),
)
FORMATS = tuple(name for name, dummy in FORMAT_FILES)


class ReportError(ValueError):
    """The input handed to ``build_report`` breaks the findings contract."""


# ---------------------------------------------------------------------------
# building report.json
# ---------------------------------------------------------------------------

def _plain(value):
    """Return ``value`` as plain JSON types (Ansible hands us str/dict subclasses)."""
    cls = value.__class__
    if cls is str or cls is int or cls is bool or value is None:  # the most of a report: as they are
        return value
    if cls is dict:
        return dict((k if k.__class__ is str else str(k), _plain(v)) for k, v in value.items())
    if cls is list:
        return [_plain(v) for v in value]
    if isinstance(value, bool):
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
    out["pending"] = out["pending"] is True
    if out["area"] is None:
        out["area"] = rule_id.split("-", 1)[0].lower()
    if out["kind"] is None:
        out["kind"] = finding_kind(out["area"])
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


def _gather_seconds(value):
    """A host's ``gather_s`` (subsystem -> seconds its facts reader took): the entries whose name is text
    and whose value is a finite number of at least 0, in their order; ``None`` when there are none (a host
    judged from stored facts, an older self-audit)."""
    if not isinstance(value, dict):
        return None
    out = {}
    for name, seconds in value.items():
        if isinstance(name, str) and isinstance(seconds, (int, float)) and not isinstance(seconds, bool) \
                and 0 <= seconds < float("inf"):
            out[name] = round(float(seconds), 3)
    return out or None


#: what a figure's change before -> after the fixes is called (remediate.yml's gpuhost_prove, judge/prove.py)
PROVE_VERDICTS = ("better", "worse", "unchanged", "within noise", "unknown")
#: the numbers of a figure of ``prove``
_PROVE_NUMBERS = ("before", "after", "change", "change_pct", "noise")


def finite_number(value):
    """A finite int/float that is not a bool, else ``None`` (metrics.prom's sample values too)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return value
    return None


def _count(value):
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _normalize_prove(value):
    """A host's ``prove`` (what the fixes delivered, measured before and after them): ``fixes`` (rule ids),
    ``repeats`` (runs per phase), ``figures`` (each ``key``, ``label``, ``unit``, ``rule``, ``higher_is_better``,
    the numbers before, after, change, change_pct, noise, and ``verdict``), ``left_out`` and ``reason``. Text is
    kept as text, numbers when finite (else ``None``), an unknown verdict as ``unknown``; ``None`` when absent."""
    if not isinstance(value, dict):
        return None
    figures = []
    for entry in value.get("figures") or [] if isinstance(value.get("figures"), list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("key"), str):
            continue
        figure = dict((key, _plain(entry.get(key)) if isinstance(entry.get(key), str) else None)
                      for key in ("key", "label", "unit", "rule"))
        figure["label"] = figure["label"] or figure["key"]
        figure["unit"] = figure["unit"] or ""
        figure["higher_is_better"] = entry.get("higher_is_better") is not False
        figure.update((key, finite_number(entry.get(key))) for key in _PROVE_NUMBERS)
        figure["verdict"] = entry.get("verdict") if entry.get("verdict") in PROVE_VERDICTS else "unknown"
        figures.append(figure)
    repeats = value.get("repeats") if isinstance(value.get("repeats"), dict) else {}
    return {"fixes": [_plain(rule) for rule in value.get("fixes") or [] if isinstance(rule, str)]
            if isinstance(value.get("fixes"), list) else [],
            "repeats": dict((phase, _count(repeats.get(phase))) for phase in ("before", "after")),
            "figures": figures, "left_out": _count(value.get("left_out")),
            "reason": _plain(value["reason"]) if isinstance(value.get("reason"), str) else None}


def _normalize_gpus(value):
    """A host's GPUs (``host_report``'s ``gpus``) as metrics.prom joins them with dcgm-exporter's series:
    each ``{"index", "uuid", "bus_id", "name"}``, an integer index and text, the rest ``None``; an entry
    without a PCI address left out; ``None`` when there is none."""
    out = []
    for gpu in value if isinstance(value, list) else []:
        if not isinstance(gpu, dict) or not isinstance(gpu.get("bus_id"), str):
            continue
        index = gpu.get("index")
        out.append({"index": index if isinstance(index, int) and not isinstance(index, bool) else None,
                    "uuid": gpu.get("uuid") if isinstance(gpu.get("uuid"), str) else None,
                    "bus_id": gpu["bus_id"],
                    "name": gpu.get("name") if isinstance(gpu.get("name"), str) else None})
    return out or None


def _normalize_host(name, data, default_profile):
    if not isinstance(data, dict):
        raise ReportError("host %s: expected a mapping with findings, got %s" % (name, type(data).__name__))
    try:
        data = unpack_findings(data)
    except ValueError as exc:
        raise ReportError("host %s: %s" % (name, exc))
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
        "profile_reason": _plain(data.get("profile_reason")) if isinstance(data.get("profile_reason"), str) else None,
        "summary": summarize(findings),
        "findings": findings,
        "numa": _normalize_numa(_plain(data.get("numa"))),
        "facts_errors": _count_errors(data.get("facts_errors")),
        "pending": _normalize_pending(data.get("pending")) if data.get("pending") is not None
        else _pending_from_findings(findings),
    }
    gather_s = _gather_seconds(data.get("gather_s"))
    if gather_s is not None:
        host["gather_s"] = gather_s
    if isinstance(data.get("cluster"), str) and data["cluster"]:
        host["cluster"] = data["cluster"]  # gpuhost_cluster: a label of every series of the host
    prove = _normalize_prove(data.get("prove"))
    if prove is not None:
        host["prove"] = prove  # remediate.yml's gpuhost_prove: what the fixes delivered
    gpus = _normalize_gpus(data.get("gpus"))
    if gpus is not None:
        host["gpus"] = gpus
        if isinstance(data.get("hostname"), str) and data["hostname"]:
            host["hostname"] = data["hostname"]  # dcgm-exporter's Hostname label
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
    counts = dict((sev, 0) for sev in SEVERITIES)
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
    totals["hosts_by_kind"] = hosts_by_kind(hosts.values())
    return totals


def _generated_text(generated):
    if generated is None:
        generated = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    if isinstance(generated, datetime.datetime):
        if generated.tzinfo is None:
            generated = generated.replace(tzinfo=datetime.timezone.utc)
        return generated.isoformat()
    return str(generated)


def _host_names(hosts, profile):
    """``(names in document order, default profile)`` of a ``hosts`` mapping given to the builders."""
    if hosts is None:
        hosts = {}
    if not isinstance(hosts, Mapping):
        raise ReportError("hosts must map inventory_hostname to findings, got %s" % type(hosts).__name__)
    return sorted(hosts, key=str), _plain(profile) or None


def _document(hosts, default_profile, generated, collection_version):
    """The head of a document (``schema`` to ``totals``) of ``hosts`` (name -> normalized host, or
    what :func:`_totals` reads of one: :func:`_light`)."""
    profiles = sorted(set(h["profile"] for h in hosts.values() if h["profile"]))
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
        "totals": _totals(hosts),
    }


def _document_tail(document, started, preview, remediation):
    """``started`` and ``preview`` (:func:`build_report`) added to ``document``."""
    if isinstance(started, str) and started:
        try:
            datetime.datetime.fromisoformat(started)
        except ValueError:
            pass  # not a time stamp: no duration rather than a wrong one
        else:
            document["started"] = started
    if preview is True and remediation:
        document["preview"] = True
    return document


def build_report(hosts, profile=None, generated=None, collection_version=None, started=None, preview=False):
    """The report.json document for ``hosts`` as its readers see it (schema 1: every finding a whole
    mapping, rule text included): :func:`expand_document` of :func:`build_stored`, the one builder.
    Arguments and errors as :func:`build_stored`'s."""
    return expand_document(build_stored(hosts, profile=profile, generated=generated,
                                        collection_version=collection_version, started=started, preview=preview))


def _light(host):
    """What :func:`_document` reads of a normalized host: its state, profile, summary and failing findings."""
    return {"state": host["state"], "profile": host["profile"], "summary": host["summary"],
            "findings": [f for f in host["findings"] if f["status"] == "fail"]}


def build_stored(hosts, profile=None, generated=None, collection_version=None, started=None, preview=False):
    """The one builder of a report: the document ``report.json`` stores (schema 3) for ``hosts``,
    used by the controller (``baseline_report``) and the self-audit alike.

    ``hosts`` maps inventory_hostname -> ``{"findings", "profile", "numa", "facts_errors", "state",
    "message", "before", "pending", "gather_s"}`` (all but findings optional). ``started``: when the
    run began (ISO 8601), stored as ``started`` for the run's duration; left out when not given or not
    a time stamp. ``preview``: the run was ``--check``; a remediation (hosts with ``before``) then
    stores ``preview: true``: no fix was applied, ``after`` is the state as it was. Summaries are
    recomputed from the findings so they can never disagree with them. Raises :class:`ReportError`
    when a finding breaks the contract (unknown status, no rule id).

    The fleet's findings with their rule text are never held together: each host is normalized
    twice, once to state the rules (:class:`findings.RulesTable`) and count the totals, once to be
    stored with them, and only its stored form is kept, as its text in ``report.json`` (``hosts`` a
    :class:`StoredHosts`: read-only, a host decoded when it is read; :func:`update_hosts` adds values
    to hosts). At 1,000 hosts the built document as objects would be the largest thing the writer
    holds (about 100 MB on the benchmark fleet; its text is 20 MB). ``hosts`` is read twice (a
    mapping that builds a host when it is read, as ``baseline_report`` gives, builds it twice)."""
    names, default_profile = _host_names(hosts, profile)
    table = RulesTable()
    light = {}
    remediation = False
    for name in names:
        host = _normalize_host(str(name), hosts[name], default_profile)
        for finding in _findings_of(host):
            table.add(finding)
        light[str(name)] = _light(host)
        remediation = remediation or isinstance(host.get("before"), dict)
    document = _document(light, default_profile, generated, collection_version)
    del light
    rules = table.table()
    document["rules"] = rules
    document["hosts"] = StoredHosts((str(name), _store_host(_normalize_host(str(name), hosts[name], default_profile), rules))
                                    for name in names)
    document["schema"] = STORED_SCHEMA
    return _document_tail(document, started, preview, remediation)


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


def failing_to_drain(report, severities, kinds):
    """``[(host, finding)]`` of the audited hosts' failing findings whose severity is one of ``severities``
    and whose kind (``drift``, ``fault``) one of ``kinds``: what ``gpuhost_on_fail`` drains on. A finding
    of a severity outside the known ones counts as ``critical`` (as for ``gpuhost_fail_on``); an unknown,
    waived or passing finding never drains, nor a host that was not audited (unreachable, failed)."""
    severities, kinds = set(severities), set(kinds)
    out = []
    for name, host in report["hosts"].items():
        if (host.get("state") or "audited") != "audited":
            continue
        for finding in host["findings"]:
            severity = finding.get("severity") if finding.get("severity") in SEVERITY_RANK else "critical"
            kind = finding.get("kind") or finding_kind(finding.get("area"))
            if finding["status"] == "fail" and severity in severities and kind in kinds:
                out.append((name, finding))
    return out


#: Options of the ``baseline_report`` action plugin, shared with its documentation module.
ARGUMENT_SPEC = dict(
    report_dir=dict(type="path", required=True),
    # the hosts' results: given (hosts), or read by the action from the play, host by host (play_hosts)
    hosts=dict(type="dict"),
    play_hosts=dict(type="list", elements="str"),
    profile=dict(type="str"),
    formats=dict(type="list", elements="str", default=list(FORMATS), choices=list(FORMATS)),
    template_dir=dict(type="path"),
    collection_version=dict(type="str"),
    generated=dict(type="str"),
    started=dict(type="str"),
    preview=dict(type="bool", default=False),
    fail_on=dict(type="str", default="none", choices=list(FAIL_ON_LEVELS)),
    host_notes=dict(type="dict", default={}),
    # drift history (plugins/plugin_utils/report/history.py): off without a directory
    history_dir=dict(type="path"),
    history_keep=dict(type="int", default=50),
    # the console summary printed as plain lines on the controller's display, whatever the stdout callback
    print_console=dict(type="bool", default=False),
    # what gpuhost_on_fail drains on (drain_hosts): failing findings of these severities and kinds
    drain_severities=dict(type="list", elements="str", default=["critical"], choices=list(SEVERITIES)),
    drain_kinds=dict(type="list", elements="str", default=["fault"], choices=list(FINDING_KINDS)),
)


# ---------------------------------------------------------------------------
# report.json as stored (schema 3): rule text once under ``rules``, findings as named keys
# ---------------------------------------------------------------------------

#: Top-level keys of a stored document that only the stored layouts have (schema 2 and 3).
_STORED_ONLY = ("rules", "finding_row", "finding_defaults")


def map_host_findings(host, convert):
    """A copy of ``host`` (a host's part of a report) with ``convert`` (list -> list) applied to its
    ``findings`` and to its ``before``'s, packed ones read first (``findings.unpack_findings``); a list
    missing, or ``host`` not a mapping, left as it is."""
    if not isinstance(host, dict):
        return host
    try:
        host = dict(unpack_findings(host))
    except ValueError:  # a packed text that is no list: build_report rejects it with the reason
        return host
    if isinstance(host.get("findings"), list):
        host["findings"] = convert(host["findings"])
    before = host.get("before")
    if isinstance(before, dict) and isinstance(before.get("findings"), list):
        host["before"] = dict(before, findings=convert(before["findings"]))
    return host


def _findings_of(host):
    """A host's findings, then its ``before``'s."""
    yield from host.get("findings") or []
    yield from (host.get("before") or {}).get("findings") or []


def _host_findings(report):
    """Every finding of ``report`` (hosts' and their ``before``), in document order."""
    for host in report["hosts"].values():
        yield from _findings_of(host)


def _store_host(host, rules):
    """A host of the document as ``report.json`` stores it, its findings stored with ``rules``."""
    def store(findings):
        return [store_finding(f, rules.get(f.get("id"))) for f in findings]

    host = dict(host, findings=store(host.get("findings") or []))
    if isinstance(host.get("before"), dict):
        host["before"] = dict(host["before"], findings=store(host["before"].get("findings") or []))
    return host


class HostsRead(Mapping):
    """``hosts`` (name -> a host's part) read through ``read`` (a host -> the host as the reader
    wants it) each time a host is read: a writer that walks the hosts one at a time never holds
    the fleet's converted findings together, only the host it reads. Read-only; each read makes
    a fresh host (nothing is cached)."""

    def __init__(self, hosts, read):
        self._hosts = hosts
        self._read = read

    def __getitem__(self, name):
        return self._read(self._hosts[name])

    def __iter__(self):
        return iter(self._hosts)

    def __len__(self):
        return len(self._hosts)


_JSON_SPACE = re.compile(r"[ \t\n\r]*")


def _scan_error(text, index, what):
    return json.JSONDecodeError("report.json: expected %s" % what, text, index)


def loads_stored(text):
    """The document of ``text`` (``report.json``'s text) as :func:`json.loads` gives it, but with
    its ``hosts`` a :class:`HostsRead` that decodes a host from its span of ``text`` each time it
    is read: the reader holds the text (about a fifth of the decoded objects' size) and one host's
    objects at a time. Each host is decoded once here to find where it ends, and dropped.
    Malformed text raises :class:`json.JSONDecodeError`, as ``json.loads`` does; text that is no
    JSON object, or whose ``hosts`` is no object, comes back as ``json.loads`` gives it."""
    decoder = json.JSONDecoder()

    def space(index):
        return _JSON_SPACE.match(text, index).end()

    def key_at(index):
        if text[index:index + 1] != '"':
            raise _scan_error(text, index, "a key")
        key, index = scanstring(text, index + 1)
        index = space(index)
        if text[index:index + 1] != ":":
            raise _scan_error(text, index, "':'")
        return key, space(index + 1)

    def members(index, value_at):
        """``index`` just after ``{``: ``value_at(key, index) -> end`` for each member; the end."""
        index = space(index)
        if text[index:index + 1] == "}":
            return index + 1
        while True:
            key, index = key_at(index)
            index = space(value_at(key, index))
            if text[index:index + 1] == ",":
                index = space(index + 1)
                continue
            if text[index:index + 1] != "}":
                raise _scan_error(text, index, "',' or '}'")
            return index + 1

    start = space(0)
    if text[start:start + 1] != "{":
        return json.loads(text)
    doc = {}
    spans = {}
    as_text = object()  # doc["hosts"] while it is the object read as spans

    def host_at(name, index):
        dummy, end = decoder.raw_decode(text, index)
        spans[name] = (index, end)
        return end

    def top_at(key, index):
        if key == "hosts" and text[index:index + 1] == "{":
            spans.clear()
            doc[key] = as_text
            return members(index + 1, host_at)
        doc[key], end = decoder.raw_decode(text, index)  # a key given twice: its last value, first place
        return end

    end = space(members(start + 1, top_at))
    if end != len(text):
        raise _scan_error(text, end, "the end of the text")
    if doc.get("hosts") is as_text:
        doc["hosts"] = HostsRead(dict(spans), lambda span: json.loads(text[span[0]:span[1]]))
    return doc


def compact_document(report, lazy=False):
    """The document as ``report.json`` stores it (schema 3, docs/report.md): each rule's text
    (``findings.RULE_TEXT_FIELDS``) once in a top-level ``rules`` mapping, each finding a mapping
    of named keys without what its rule states (``findings.store_finding``).
    :func:`expand_document` gives the document back exactly. ``lazy``: its ``hosts`` a
    :class:`HostsRead` that compacts a host when it is read (``report_dir.stored_text`` writes them
    one at a time: the fleet is never held twice)."""
    rules = rules_table(_host_findings(report))

    def compact(host):
        return _store_host(host, rules)

    out = {}
    for key, value in report.items():
        if key == "hosts":
            out["rules"] = rules
            out["hosts"] = HostsRead(value, compact) if lazy else dict(
                (name, compact(host)) for name, host in value.items())
        elif key not in _STORED_ONLY:
            out[key] = value
    out["schema"] = STORED_SCHEMA
    return out


# -- schema 2 (archived reports): a finding a positional row ----------------------------------

#: A schema-2 row: ``[id, status, subject, observed, message]``, then ``expected`` when it is not
#: the rule's (or when the extras follow), then a mapping of the finding's other keys.
_ROW_KEYS = ("id", "status", "subject", "observed", "message")


def _read_row(row, rules, defaults):
    if not isinstance(row, list) or len(row) < len(_ROW_KEYS):
        return row  # not a stored row: as it is
    found = dict(zip(_ROW_KEYS, row))
    rule = rules.get(found["id"]) if isinstance(rules.get(found["id"]), dict) else {}
    rest = row[len(_ROW_KEYS):]
    found["expected"] = rest[0] if rest else rule.get("expected")
    extras = rest[1] if len(rest) > 1 and isinstance(rest[1], dict) else {}
    item = {}
    for key in FINDING_KEYS:
        if key in extras:
            item[key] = extras[key]
        elif key in found:
            item[key] = found[key]
        elif key in rule:
            item[key] = rule[key]
    for key, value in rule.items():
        if key != "expected":
            item.setdefault(key, value)
    if "kind" not in item and isinstance(item.get("area"), str):
        item["kind"] = finding_kind(item["area"])
    for key, value in extras.items():
        item.setdefault(key, value)
    for key, value in defaults.items():
        item.setdefault(key, value)
    return item


def _reader(report):
    """The function that turns a stored finding of ``report`` back into a full one."""
    rules = report.get("rules") if isinstance(report.get("rules"), dict) else {}
    if report.get("schema") == 2:
        defaults = report.get("finding_defaults") if isinstance(report.get("finding_defaults"), dict) else {}
        return lambda row: _read_row(row, rules, defaults)
    return finding_reader(rules)


def expand_document(report, lazy=False):
    """The document :func:`build_report` made (schema 1: every finding a whole mapping, rule text
    included) from a stored ``report.json``: schema 3 (findings with named keys, rule text under
    ``rules``), schema 2 (archived reports: findings as positional rows) or schema 1 (as it is).
    The one reader: the views, JUnit, the metrics, the console and the caller stats call it first,
    so they take any layout. Anything else comes back as it is. ``lazy``: its ``hosts`` a
    :class:`HostsRead` that expands a host when it is read (the report writer: one host's findings
    with their rule text at a time); an expanded document given again comes back as it is."""
    if not isinstance(report, dict) or not isinstance(report.get("hosts"), Mapping):
        return report
    if report.get("schema") not in (2, STORED_SCHEMA) or not isinstance(report.get("rules"), dict):
        return report
    read = _reader(report)

    def expand(findings):
        return [read(f) for f in findings]

    out = dict((k, v) for k, v in report.items() if k not in _STORED_ONLY)
    out["schema"] = SCHEMA
    if lazy:
        out["hosts"] = HostsRead(report["hosts"], lambda host: map_host_findings(host, expand))
    else:
        out["hosts"] = dict((name, map_host_findings(host, expand)) for name, host in report["hosts"].items())
    return out


def _one(value):
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=False)


def host_text(host):
    """A host's value in ``report.json`` as :func:`dumps_document` writes it: its fields on the
    first line, then a line per finding, then ``]}``; anything but a mapping with a findings list on
    one line."""
    fields = [(k, v) for k, v in host.items() if k != "findings"] if isinstance(host, dict) else None
    if fields is None or not isinstance(host.get("findings"), list):
        return _one(host)
    head = ",".join("%s:%s" % (_one(k), _one(v)) for k, v in fields)
    findings = host["findings"]
    return "\n".join(['{%s%s"findings":[' % (head, "," if head else "")]
                     + [_one(f) + ("," if j < len(findings) - 1 else "") for j, f in enumerate(findings)] + ["]}"])


class StoredHost(dict):
    """A host read from a :class:`StoredHosts`: a fresh copy, so a value set on it would be lost;
    setting or deleting a top-level key raises :class:`TypeError` naming :func:`update_hosts`, the
    way to change a stored host. Otherwise a plain ``dict`` (``json``, ``dict(host, ...)``)."""

    def _refuse(self, *args, **kwargs):
        raise TypeError("a host of a stored report is read-only (a copy of its text): use report.update_hosts")

    __setitem__ = __delitem__ = setdefault = pop = popitem = clear = update = _refuse

    # a copy (copy, deepcopy, pickle) is a plain dict: the caller's own, free to change
    def __copy__(self):
        return dict(self)

    def __deepcopy__(self, memo):
        return copy.deepcopy(dict(self), memo)

    def __reduce__(self):
        return (dict, (dict(self),))


class StoredHosts(Mapping):
    """``hosts`` of a stored document (name -> host) holding each host as its text in
    ``report.json`` (:func:`host_text`), about a fifth of its objects: a host is encoded once, when the
    mapping is made from ``(name, host)`` pairs (read one at a time), and decoded each time it is read
    (a :class:`StoredHost`, read-only); :func:`dumps_document` writes the text as it is. Immutable:
    :meth:`merged` gives a new mapping with values added to some hosts (:func:`update_hosts`)."""

    def __init__(self, pairs=(), texts=None):
        self._text = dict(texts) if texts is not None else {}
        for name, host in pairs:
            self._text[name] = host_text(host)

    def __getitem__(self, name):
        host = json.loads(self._text[name])
        return StoredHost(host) if isinstance(host, dict) else host

    def __iter__(self):
        return iter(self._text)

    def __len__(self):
        return len(self._text)

    def text_of(self, name):
        return self._text[name]

    def merged(self, values):
        """A new :class:`StoredHosts`: each host named in ``values`` (name -> ``{key: value}``) with
        those values set, the others' texts shared."""
        texts = dict(self._text)
        for name, extra in values.items():
            texts[name] = host_text(dict(self[name], **extra))
        return StoredHosts(texts=texts)


def update_hosts(document, values):
    """Set ``values`` (name -> ``{key: value}``) on the hosts of ``document`` (any shape: built,
    stored, read back), replacing ``document["hosts"]`` with a mapping of the same kind; a name that
    is no host of the document is ignored. The one way to add a value to a host after the build (the
    drift history's ``changes``, the self-audit's ``duration_seconds``): a stored host read is a copy."""
    hosts = document["hosts"]
    values = dict((name, extra) for name, extra in values.items() if name in hosts)
    if isinstance(hosts, StoredHosts):
        document["hosts"] = hosts.merged(values)
    else:
        document["hosts"] = dict((name, dict(host, **values[name]) if name in values else host)
                                 for name, host in hosts.items())


def dumps_document(stored):
    """``report.json``'s text: compact JSON, a line per rule and per finding (so ``grep`` and
    ``diff`` work line by line), no indentation to pay for at 1,000 hosts. Hosts held as text
    (:class:`StoredHosts`) are written as they are held."""
    lines = ["{"]
    keys = list(stored)
    for position, key in enumerate(keys):
        value = stored[key]
        last = "" if position == len(keys) - 1 else ","
        if key == "rules" and isinstance(value, dict) and value:
            lines.append('%s:{' % _one(key))
            items = list(value.items())
            lines.extend("%s:%s%s" % (_one(k), _one(v), "," if i < len(items) - 1 else "") for i, (k, v) in enumerate(items))
            lines.append("}" + last)
        elif key == "hosts" and isinstance(value, Mapping) and not value:
            lines.append("%s:{}%s" % (_one(key), last))
        elif key == "hosts" and isinstance(value, Mapping):
            lines.append('%s:{' % _one(key))
            names = list(value)
            text_of = value.text_of if isinstance(value, StoredHosts) else lambda name: host_text(value[name])
            lines.extend("%s:%s%s" % (_one(name), text_of(name), "," if i < len(names) - 1 else "")
                         for i, name in enumerate(names))
            lines.append("}" + last)
        else:
            lines.append("%s:%s%s" % (_one(key), _one(value), last))
    lines.append("}")
    return "\n".join(lines) + "\n"
