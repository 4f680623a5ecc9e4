# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one finding contract (docs/report.md, "Findings"): what a finding is, everywhere.

A finding is the verdict of one rule on one subject of one host. This module holds what every
part of the collection knows about it, once: the statuses and their order, the severities and
their ranks, the host states, the keys of a finding, the fields a finding copies from its rule,
the summary of a list of findings, and its three forms:

* **full** (what ``evaluation.evaluate`` makes and ``report.build_report`` puts in the document):
  every key, rule text included;
* **compact** (a host's ``host_report``, sent from each worker to the controller): without the
  rule text (:func:`compact_findings`), which :func:`expand_findings` puts back from the catalogue;
  the roles' ``host_report`` holds them as one JSON text (:func:`pack_findings`, :func:`unpack_findings`);
* **stored** (``report.json`` schema 3): a mapping of named keys without what its rule states
  once in the document's ``rules`` (:func:`store_finding`, :func:`read_finding`).

It runs on managed hosts too (the self-audit bundle): standard library only, Python 3.8+.
"""

from __future__ import absolute_import, division, print_function

import json

__metaclass__ = type

#: Finding statuses, in the order summaries list them.
STATUSES = ("pass", "fail", "unknown", "waived", "not_applicable")

#: Worst first: the status a matrix cell shows when a rule has several subjects, and the order
#: of the counts on a console line.
STATUS_WORST_FIRST = ("fail", "unknown", "waived", "pass", "not_applicable")

#: How the views and the console name each status.
STATUS_LABELS = {
    "pass": "pass",
    "fail": "fail",
    "unknown": "unknown",
    "waived": "waived",
    "not_applicable": "n/a",
}

#: Severity rank: higher is worse. ``info`` findings never trip ``fail_on``.
SEVERITY_RANK = {"info": 0, "low": 1, "medium": 2, "high": 3, "critical": 4}
#: Worst first, as ``totals.fail_by_severity`` of report.json lists them.
SEVERITIES = tuple(sorted(SEVERITY_RANK, key=SEVERITY_RANK.get, reverse=True))
#: The values of ``gpuhost_fail_on``: a severity that can fail a host, or ``none``.
FAIL_ON_LEVELS = tuple(level for level in SEVERITIES if level != "info") + ("none",)

#: What became of a host in a run.
HOST_STATES = ("audited", "unreachable", "failed")

#: Keys of a finding in the report document, in their order (``report.build_report`` sets every one;
#: further keys the evaluation adds follow, sorted by name).
FINDING_KEYS = (
    "id", "title", "area", "kind", "severity", "status", "subject", "expected", "observed",
    "message", "rationale", "source", "fix", "reboot_required", "pending", "waiver",
)

#: What a finding copies from its rule: the same on every host with the same profile. A host's
#: part of the report leaves it out (:func:`compact_findings`) and the report writer puts it back
#: from the catalogue (:func:`expand_findings`); ``report.json`` states it once per rule (``rules``).
RULE_TEXT_FIELDS = ("title", "area", "kind", "severity", "fix", "reboot_required", "rationale", "source", "fix_action")

#: The two kinds of work a failing finding asks for: ``fault`` (hardware or GPU health: drain, reset,
#: RMA) for the findings of these areas, ``drift`` (configuration, fixed in a maintenance window) for
#: every other area
FAULT_AREAS = ("health",)
FINDING_KINDS = ("drift", "fault")
#: The kinds in words, as the console summary and report.html name them.
KIND_LABELS = {"drift": "drift (configuration)", "fault": "faults (hardware, GPU health)"}


def finding_kind(area):
    """``fault`` or ``drift`` (:data:`FINDING_KINDS`) of a finding of ``area``."""
    return "fault" if area in FAULT_AREAS else "drift"


#: The attribute of a catalogue rule each rule field comes from, where the names differ.
_RULE_ATTRIBUTES = {"fix": "fix_hint"}

#: Every key of a finding as the judge makes it, in its order, and the value of one left out.
JUDGED_KEYS = ("id", "title", "area", "kind", "severity", "status", "subject", "expected", "observed", "message",
               "fix", "reboot_required", "rationale", "source", "fix_action", "pending", "waiver")
DEFAULTS = {"pending": False}

#: ``report.json`` schema of the stored form (docs/report.md).
STORED_SCHEMA = 3

#: Keys a stored finding states by name: ``id`` and ``status`` always, the others unless null
#: (``jq`` reads a missing key as null).
STORED_KEYS = ("id", "status", "subject", "observed", "expected", "message")

#: Keys a stored finding leaves out while they have this value.
STORED_DEFAULTS = (("pending", False), ("waiver", None))


def hosts_by_kind(hosts):
    """``{kind: {severity: hosts}}`` of ``hosts`` (host mappings with ``findings``): a host with a
    failing finding of a kind (:data:`FINDING_KINDS`) counts once for that kind, at its worst failing
    severity of it, so the counts of a kind add up to the hosts that have work of that kind. Every
    kind and severity is present (zero included); a severity outside :data:`SEVERITIES` counts under
    its own name, ranked as critical. Anything that is not a finding mapping is passed over."""
    counts = dict((kind, dict((sev, 0) for sev in SEVERITIES)) for kind in FINDING_KINDS)
    for host in hosts:
        worst = {}
        for finding in (host.get("findings") if isinstance(host, dict) else None) or ():
            if not isinstance(finding, dict) or finding.get("status") != "fail":
                continue
            kind = finding.get("kind") or finding_kind(finding.get("area"))
            severity = finding.get("severity")
            severity = severity if isinstance(severity, str) and severity else "unknown"
            rank = SEVERITY_RANK.get(severity, SEVERITY_RANK["critical"])
            if kind not in worst or rank > worst[kind][0]:
                worst[kind] = (rank, severity)
        for kind, (dummy, severity) in worst.items():
            per_kind = counts.setdefault(kind, {})
            per_kind[severity] = per_kind.get(severity, 0) + 1
    return counts


def summarize(findings):
    """Count findings per status (all five keys, zero included)."""
    summary = dict((status, 0) for status in STATUSES)
    for finding in findings:
        summary[finding["status"]] = summary.get(finding["status"], 0) + 1
    return summary


def rule_text(rule):
    """The :data:`RULE_TEXT_FIELDS` of a catalogue rule (``catalogue_model.Rule``), as its findings carry them."""
    text = dict((field, getattr(rule, _RULE_ATTRIBUTES.get(field, field), None)) for field in RULE_TEXT_FIELDS
                if field != "kind")
    text["kind"] = finding_kind(text["area"])
    return text


def compact_findings(findings, catalogue=None):
    """``findings`` without the fields copied from their rule (:data:`RULE_TEXT_FIELDS`); with the
    ``catalogue`` they were judged with, a ``severity`` that is not the rule's there (graded by the
    rule's ``severity_from``) is kept."""
    rules = getattr(catalogue, "by_id", None) or {}

    def kept(finding, key):
        if key not in RULE_TEXT_FIELDS:
            return True
        rule = rules.get(finding.get("id")) if key == "severity" else None
        return rule is not None and finding.get("severity") != rule.severity

    return [dict((k, v) for k, v in f.items() if kept(f, k)) if isinstance(f, dict) else f for f in findings or []]


#: Key of a host_report (and of its ``before``) that holds its findings as one JSON text instead of
#: a list (``baseline_evaluate`` with ``return_findings: false``, what the roles pass): Ansible keeps
#: every host's registered result in the controller's memory until the play ends, and one string per
#: host is about a third of the memory of its findings as dicts and lists.
FINDINGS_TEXT = "findings_json"


def _packed(part, key_from, key_to, convert):
    part = dict(part)
    if key_from in part:
        part[key_to] = convert(part.pop(key_from))
    return part


def _dumps_findings(findings):
    return json.dumps(list(findings), separators=(",", ":"), ensure_ascii=False)


def _loads_findings(text):
    if not isinstance(text, str):
        raise ValueError("%s must be a JSON text, got %s" % (FINDINGS_TEXT, type(text).__name__))
    try:
        findings = json.loads(text)
    except ValueError as exc:
        raise ValueError("%s is not JSON: %s" % (FINDINGS_TEXT, exc))
    if not isinstance(findings, list):
        raise ValueError("%s must hold a list of findings, got %s" % (FINDINGS_TEXT, type(findings).__name__))
    return findings


def pack_findings(part):
    """A copy of ``part`` (a host_report) with its ``findings``, and those of its ``before``, as one
    JSON text each under :data:`FINDINGS_TEXT` (:func:`unpack_findings` reads them back). Anything
    but a mapping is returned as it is."""
    if not isinstance(part, dict):
        return part
    part = _packed(part, "findings", FINDINGS_TEXT, _dumps_findings)
    if isinstance(part.get("before"), dict):
        part["before"] = _packed(part["before"], "findings", FINDINGS_TEXT, _dumps_findings)
    return part


def unpack_findings(part):
    """``part`` with findings packed by :func:`pack_findings` back as lists (a copy; ``part`` itself
    when nothing is packed or it is no mapping). ValueError naming what is wrong when a packed text is
    no JSON list."""
    if not isinstance(part, dict):
        return part
    before = part.get("before")
    packed_before = isinstance(before, dict) and FINDINGS_TEXT in before
    if FINDINGS_TEXT not in part and not packed_before:
        return part
    part = _packed(part, FINDINGS_TEXT, "findings", _loads_findings)
    if packed_before:
        part["before"] = _packed(before, FINDINGS_TEXT, "findings", _loads_findings)
    return part


def expand_findings(findings, catalogue=None):
    """``findings`` with the fields of their rule put back where absent (inverse of
    :func:`compact_findings`), in the judge's key order; a finding whose id is not in the
    catalogue (default: the bundled one) is returned as it is."""
    if catalogue is None:
        # the loader imports this module: imported here, where it is needed
        from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_load import (  # pylint: disable=import-outside-toplevel
            load_catalogue)
        catalogue = load_catalogue()
    out = []
    for finding in findings or []:
        rule = catalogue.by_id.get(finding.get("id")) if isinstance(finding, dict) else None
        if rule is not None and any(k not in finding for k in RULE_TEXT_FIELDS):
            text = rule_text(rule)
            full = dict((k, finding[k] if k in finding else text[k] if k in text else DEFAULTS.get(k))
                        for k in JUDGED_KEYS)
            full.update((k, v) for k, v in finding.items() if k not in full)
            finding = full
        out.append(finding)
    return out


# -- the stored form (report.json schema 3) ----------------------------------------------------

#: Statuses whose findings may leave out what is usual for their rule in the report (``usual``):
#: the quiet ones. A ``fail``, ``unknown`` or ``waived`` finding always states everything itself.
QUIET_STATUSES = ("pass", "not_applicable")
#: Key of a rule's entry in ``report.json``'s ``rules`` that holds the usual values of its quiet findings.
USUAL = "usual"


def _json_key(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class RulesTable:
    """What :func:`rules_table` states once per rule, gathered a finding at a time (:meth:`add`),
    so that a writer can feed a fleet's findings host by host without holding them:
    :meth:`table` gives the same mapping as :func:`rules_table` of the same findings in the same
    order. Per rule it keeps the first finding's rule fields, the fields some finding lacks, and
    the counts of the quiet findings' ``expected`` and messages (:data:`USUAL`)."""

    def __init__(self):
        self._first = {}
        self._lacking = {}
        self._expected = {}
        self._messages = {}

    def add(self, finding):
        rule_id = finding.get("id")
        if rule_id not in self._first:
            self._first[rule_id] = dict((k, finding[k]) for k in RULE_TEXT_FIELDS if k in finding)
            self._lacking[rule_id] = set()
            self._expected[rule_id] = {}
            self._messages[rule_id] = {}
        self._lacking[rule_id].update(k for k in RULE_TEXT_FIELDS if k not in finding)
        status = finding.get("status")
        if status not in QUIET_STATUSES:
            return
        if finding.get("expected") is not None:
            count = self._expected[rule_id].setdefault(_json_key(finding["expected"]), [0, finding["expected"]])
            count[0] += 1
        subject = finding.get("subject")
        message = finding.get("message")
        if isinstance(message, str) and (subject is None or (isinstance(subject, str) and subject)):
            count = self._messages[rule_id].setdefault(status, {}).setdefault(subject or "", {}).setdefault(message, [0])
            count[0] += 1

    def table(self):
        """``{id: rule fields}``, sorted by rule id (:func:`rules_table`)."""
        table = {}
        for rule_id in sorted(self._first, key=str):
            entry = dict((k, v) for k, v in self._first[rule_id].items() if k not in self._lacking[rule_id])
            usual = _usual(self._expected[rule_id], self._messages[rule_id])
            if usual:
                entry[USUAL] = usual
            table[rule_id] = entry
        return table


def _usual(expected, messages):
    """``{"expected": value, "messages": {status: {subject or "": message}}}`` of one rule's quiet
    findings, from their counts (:class:`RulesTable`): the ``expected`` and, per status and subject,
    the ``message`` that at least two quiet findings share, the most common one (ties: the first
    seen). ``{}`` when nothing repeats. A fleet of alike hosts says "cpufreq scaling driver is
    amd-pstate-epp (128)" once, not once per host."""
    usual = {}
    best = max(expected.values(), key=lambda c: c[0]) if expected else None
    if best and best[0] > 1:
        usual["expected"] = best[1]
    chosen = {}
    for status, subjects in messages.items():
        for subject, counts in subjects.items():
            message, count = max(counts.items(), key=lambda item: item[1][0])
            if count[0] > 1:
                chosen.setdefault(status, {})[subject] = message
    if chosen:
        usual["messages"] = dict((status, chosen[status]) for status in QUIET_STATUSES if status in chosen)
    return usual


def rules_table(findings):
    """``{id: rule fields}`` stated once for ``findings`` (full findings of any hosts): the
    :data:`RULE_TEXT_FIELDS` of the first finding of each rule, leaving out a field some finding of
    the rule does not have (it stays with the findings that have it), and under :data:`USUAL` the
    values its quiet findings share (:func:`_usual`). Sorted by rule id."""
    table = RulesTable()
    for finding in findings:
        table.add(finding)
    return table.table()


def _usual_value(rule, finding, key):
    """``(True, value)`` of what :data:`USUAL` of ``rule`` says for ``key`` (``expected`` or
    ``message``) of the quiet ``finding``; ``(False, None)`` when it says nothing."""
    usual = rule.get(USUAL) if isinstance(rule, dict) else None
    if not isinstance(usual, dict) or finding.get("status") not in QUIET_STATUSES:
        return False, None
    if key == "expected":
        return ("expected" in usual), usual.get("expected")
    subject = finding.get("subject")
    if subject is not None and not (isinstance(subject, str) and subject):
        return False, None
    messages = (usual.get("messages") or {}).get(finding.get("status")) or {}
    if not isinstance(messages, dict) or (subject or "") not in messages:
        return False, None
    return True, messages[subject or ""]


def store_finding(finding, rule):
    """A full finding as ``report.json`` stores it: ``id`` and ``status``, ``subject``, ``observed``,
    ``expected`` and ``message`` unless null, then every other key whose value differs from its
    ``rule`` (the finding's entry of :func:`rules_table`) or from :data:`STORED_DEFAULTS` (a
    severity a profile changed, ``pending: true``, a ``waiver``, what else the evaluation added).
    A quiet finding (:data:`QUIET_STATUSES`) also leaves out an ``expected`` or ``message`` equal to
    its rule's :data:`USUAL` one (and states null where it has none but the rule has a usual one)."""
    rule = rule if isinstance(rule, dict) else {}
    defaults = dict(STORED_DEFAULTS)
    out = {"id": finding.get("id"), "status": finding.get("status")}
    for key in STORED_KEYS[2:]:
        value = finding.get(key)
        known, usual = _usual_value(rule, finding, key) if key in ("expected", "message") else (False, None)
        if known and _json_key(value) == _json_key(usual):
            continue  # the rule's usual value in this report (rules.<id>.usual)
        if value is not None or known:
            out[key] = value  # an explicit null where the usual one would otherwise be read back
    for key in sorted(finding):
        if key in STORED_KEYS or key == USUAL:
            continue
        value = finding[key]
        if key in rule and rule[key] == value:
            continue
        if key in defaults and defaults[key] == value:
            continue
        out[key] = value
    return out


#: :data:`FINDING_KEYS` as a set, for the reader's membership tests.
_FINDING_KEY_SET = frozenset(FINDING_KEYS)


def _rule_part(rule):
    """``(rule, base, extras, template)`` of a rule's entry in a report's ``rules``: the entry (``{}`` for
    none), what a finding of it reads where it has no key of its own (:data:`STORED_DEFAULTS`, then
    the rule's fields but :data:`USUAL`), the names of those outside :data:`FINDING_KEYS`, sorted, and
    the full finding of a stored one that has no key of its own (:data:`FINDING_KEYS`, then
    ``extras``, in that order): a reader copies it and puts the stored keys in their places."""
    rule = rule if isinstance(rule, dict) else {}
    base = dict(STORED_DEFAULTS)
    base.update((k, v) for k, v in rule.items() if k != USUAL)
    if "kind" not in base and isinstance(base.get("area"), str):
        base["kind"] = finding_kind(base["area"])  # a document written before findings had a kind
    extras = sorted(k for k in base if k not in _FINDING_KEY_SET)
    template = dict((key, base.get(key)) for key in FINDING_KEYS)
    template.update((key, base[key]) for key in extras)
    return rule, base, extras, template


def _read_with(stored, part):
    """The full finding of ``stored`` (a mapping with an ``id``) and its rule's :func:`_rule_part`:
    keys in :data:`FINDING_KEYS` order, then the others by name."""
    rule, base, extras, template = part
    out = template.copy()  # updating a key keeps its place: the order is the template's
    more = None
    for key, value in stored.items():
        if key in out:
            out[key] = value
        elif more is None:
            more = [key]
        else:
            more.append(key)
    if USUAL in rule:
        for key in ("expected", "message"):
            if key not in stored:
                known, usual = _usual_value(rule, stored, key)
                if known:
                    out[key] = usual
    if more:  # keys neither a finding's nor its rule's: every key past FINDING_KEYS again, by name
        for key in extras:
            del out[key]
        for key in sorted(extras + more):
            out[key] = stored[key] if key in stored else base[key]
    return out


def read_finding(stored, rule):
    """The full finding back from a stored one (inverse of :func:`store_finding`): its rule fields
    from ``rule`` where it has none of its own, null for a missing :data:`STORED_KEYS` key, the
    :data:`STORED_DEFAULTS` for the others; keys in :data:`FINDING_KEYS` order, then by name.
    Anything but a mapping with an ``id`` is returned as it is."""
    if not isinstance(stored, dict) or "id" not in stored:
        return stored
    return _read_with(stored, _rule_part(rule))


def finding_reader(rules):
    """``read(stored)``: :func:`read_finding` of ``stored`` with its rule's entry in ``rules`` (a
    report's ``rules``), with what comes from each rule (:func:`_rule_part`) worked out once per
    rule rather than once per finding (a fleet's report reads the same few rules' findings many times)."""
    rules = rules if isinstance(rules, dict) else {}
    cache = {}

    def part(rule_id):
        try:
            return _rule_part(rules.get(rule_id))
        except TypeError:  # an id that is no key (a list): no rule
            return _rule_part(None)

    def read(stored):
        if not isinstance(stored, dict) or "id" not in stored:
            return stored
        rule_id = stored["id"]
        try:
            found = cache.get(rule_id)
            if found is None:
                found = cache[rule_id] = part(rule_id)
        except TypeError:
            found = part(rule_id)
        return _read_with(stored, found)

    return read
