# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one evaluator: a host's facts judged against its profile's rules.

Controller side only (``baseline_evaluate`` action plugin). :func:`evaluate` takes the facts
document of one host, picks and resolves its profile from :mod:`catalogue`, adds the
relations of :mod:`derive`, runs every selected rule and returns the findings (pass / fail /
unknown / waived / not_applicable) with the summary, the fix plan and the pending items.
:func:`host_report` turns them into the host's part of ``report.json``.
"""

from __future__ import absolute_import, division, print_function

import datetime
import fnmatch
import re

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_load import load_catalogue
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_model import (
    AREA_SUBSYSTEM, OPERATORS, Budget, CatalogueError, CostExceeded, EvaluationError, plain, truthy,
)
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_params import resolve_profile, type_name
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.waivers import parse_date, validate_waivers
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive import derive
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_nvidia import PASSTHROUGH_DRIVERS
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue import sources
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.findings import (
    SEVERITY_RANK, STATUS_WORST_FIRST, compact_findings, finding_kind, summarize)
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.kernel import compare_kernel_release

__metaclass__ = type


_VERSION_RE = re.compile(r"^\s*v?(\d+(?:\.\d+)*)")


def compare_versions(a, b):
    """``-1``/``0``/``1`` comparing dotted numeric versions (``570.133.07`` < ``575``,
    ``12.8`` < ``12.10``); missing components count as 0. ``None`` when either is not a version."""
    def key(value):
        if isinstance(value, bool) or value is None:
            return None
        if isinstance(value, (int, float)):
            value = str(value)
        if not isinstance(value, str):
            return None
        match = _VERSION_RE.match(value)
        if not match:
            return None
        return [int(part) for part in match.group(1).split(".")]
    ka, kb = key(a), key(b)
    if ka is None or kb is None:
        return None
    width = max(len(ka), len(kb))
    ka += [0] * (width - len(ka))
    kb += [0] * (width - len(kb))
    return (ka > kb) - (ka < kb)


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _fmt(value, unit=""):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        text = ("%.2f" % value).rstrip("0").rstrip(".")
        return text + unit
    if _is_number(value):
        return "%d%s" % (value, unit)
    if isinstance(value, dict):
        if not value:
            return "none"
        return ", ".join("%s (%s)" % (k, _fmt(v)) for k, v in value.items())
    if isinstance(value, list):
        if not value:
            return "none"
        return ", ".join(_fmt(v, unit) for v in value)
    return "%s%s" % (value, unit)


def _members(value):
    """Values of a list, or the keys of a dict of counts (``{"performance": 128}``)."""
    if isinstance(value, dict):
        return list(value.keys())
    if isinstance(value, list):
        return value
    return None


def _judge(op, observed, expected, unit, label):
    """``(passed, message)``; ``passed`` None means the observation cannot be judged."""
    u = (" " + unit) if unit and not unit.startswith(" ") else unit
    obs = _fmt(observed, u)
    exp = _fmt(expected, u)
    if op == "equals":
        ok = observed == expected
        return ok, "%s is %s" % (label, obs) if ok else "%s is %s, expected %s" % (label, obs, exp)
    if op == "not_equals":
        ok = observed != expected
        return ok, "%s is %s" % (label, obs) if ok else "%s is %s, must not be" % (label, obs)
    if op in ("in", "not_in"):
        if not isinstance(expected, list):
            return None, "expected value %s is not a list" % exp
        inside = observed in expected
        if op == "in":
            return inside, "%s is %s" % (label, obs) if inside else "%s is %s, expected one of %s" % (label, obs, exp)
        return not inside, "%s is %s" % (label, obs) if not inside else "%s is %s, must not be one of %s" % (label, obs, exp)
    if op in ("min", "max"):
        if not _is_number(observed):
            return None, "%s is %r, not a number" % (label, observed)
        if not _is_number(expected):
            return None, "limit %r for %s is not a number" % (expected, label)
        if op == "min":
            ok = observed >= expected
            return ok, "%s %s %s %s" % (label, obs, ">=" if ok else "<", exp)
        ok = observed <= expected
        return ok, "%s %s %s %s" % (label, obs, "<=" if ok else ">", exp)
    if op in ("min_version", "min_kernel"):
        cmp = compare_kernel_release(observed, expected) if op == "min_kernel" else compare_versions(observed, expected)
        if cmp is None:
            return None, "cannot compare %s %s with %s" % (label, obs, exp)
        ok = cmp >= 0
        return ok, "%s %s %s %s" % (label, obs, "is at least" if ok else "is older than", exp)
    if op in ("all_equal", "all_in"):
        members = _members(observed)
        if members is None:
            return None, "%s is %s, not a list or counts per value" % (label, obs)
        if not members:
            return None, "%s has no values" % label
        if op == "all_equal":
            ok = all(m == expected for m in members)
            return ok, "%s all %s" % (label, exp) if ok else "%s not all %s: %s" % (label, exp, obs)
        if not isinstance(expected, list):
            return None, "expected value %s is not a list" % exp
        bad = [m for m in members if m not in expected]
        return not bad, "%s is %s" % (label, obs) if not bad else "%s is %s, expected only %s" % (label, obs, exp)
    if op == "uniform":
        members = _members(observed)
        if members is None:
            return None, "%s is %s, not a list or counts per value" % (label, obs)
        ok = len(set(_fmt(m) for m in members)) <= 1
        return ok, "%s uniform: %s" % (label, obs) if ok else "%s not uniform: %s" % (label, obs)
    if op == "empty":
        if not isinstance(observed, (list, dict)):
            return None, "%s is %s, not a list" % (label, obs)
        return not observed, "%s: none" % label if not observed else "%s: %s" % (label, obs)
    if op in ("true", "false"):
        if not isinstance(observed, bool):
            return None, "%s is %s, not true or false" % (label, obs)
        ok = observed is (op == "true")
        return ok, "%s is %s" % (label, obs)
    return None, "unknown operator %s" % op


# -- evaluation ------------------------------------------------------------------------------

def _finding(rule, status, subject, expected, observed, message, pending=False, waiver=None):
    return {
        "id": rule.id,
        "title": rule.title,
        "area": rule.area,
        "kind": finding_kind(rule.area),
        "severity": rule.severity,
        "status": status,
        "subject": subject,
        "expected": expected,
        "observed": observed,
        "message": message,
        "fix": rule.fix_hint,
        "reboot_required": rule.reboot_required,
        "rationale": rule.rationale,
        "source": rule.source,
        "fix_action": rule.fix_action,
        "pending": pending,
        "waiver": waiver,
    }


def _missing_reason(rule, doc):
    """Why a null observation is null, when the rule does not say: a subsystem not gathered
    or broken beats the generic 'no data'."""
    subsystem = AREA_SUBSYSTEM[rule.area]
    query_root = rule.query.text.split(".", 1)[0].split("[", 1)[0]
    if query_root in ("kernel", "cpu", "numa", "pci", "iommu", "nvidia", "lxc"):
        subsystem = query_root
    if subsystem not in doc:
        return "the %s facts were not gathered (host_facts option gather)" % subsystem
    if doc.get(subsystem) is None:
        reasons = [e.get("reason") for e in doc.get("errors") or []
                   if isinstance(e, dict) and e.get("subsystem") == subsystem and e.get("reason")]
        return "gathering %s failed%s" % (subsystem, (": " + reasons[0]) if reasons else "")
    return None


def _subject_label(value):
    if value is None:
        return None
    if isinstance(value, (dict, list)):
        return _fmt(value)
    return _fmt(value)


def _source_key(rule, text):
    """The :mod:`sources` key of ``text`` (a query of ``rule``) for the rule's subjects."""
    return sources.fact_key(text, rule.subjects.text if rule.subjects is not None else None)


def _stated_reason(rule, scope, budget):
    """The text the rule's ``unknown_reason`` gives for the subject in ``scope`` (a list joined), ``None`` when
    it has none or gives none."""
    if rule.unknown_reason is None:
        return None
    try:
        reason = rule.unknown_reason.search(scope, budget)
    except EvaluationError:
        return None
    if isinstance(reason, list):
        return "; ".join(_fmt(r) for r in reason if r) or None
    if reason is not None and not isinstance(reason, str):
        return _fmt(reason)
    return reason or None


def _null_reason(doc, key, element):
    """Why the fact ``key`` is null: the file or command it comes from and what its reader
    recorded (``sources``), else the generic 'no data'."""
    return sources.no_value(key, doc, element) or "no data: %s is null" % key


def _with_source(reason, key, element):
    """``reason`` (a rule's own ``unknown_reason``) naming the file or command it is about."""
    if sources.names_source(reason):
        return reason
    where = sources.read_from(key, element) if key else None
    return "%s (%s)" % (reason, where) if where else reason


def _evaluate_one(rule, doc, scope, params, subject, detail, budget):
    suffix = ""
    if subject is not None:
        suffix = " on %s" % subject
        if detail:
            suffix += " (%s)" % detail
    element = scope if rule.subjects is not None else None
    try:
        observed = rule.query.search(scope, budget)
        expected = rule.operand.resolve(params, scope, budget)
    except EvaluationError as exc:
        return _finding(rule, "unknown", subject, None, None, str(exc) + suffix)
    if observed is None:
        key = _source_key(rule, rule.query.text)
        reason = _missing_reason(rule, doc) if subject is None else None
        if not reason:
            reason = _stated_reason(rule, scope, budget)
            if reason:
                reason = _with_source(reason, key, element)
        if not reason:
            reason = _null_reason(doc, key or rule.query.text, element)
        return _finding(rule, "unknown", subject, expected, None, "%s unknown: %s%s" % (rule.label, reason, suffix))
    if expected is None and OPERATORS[rule.op] != "flag":
        what = rule.operand.describe()
        why = ""
        # the subject's own reason first (a site workload without a floor says where one comes from)
        stated = _stated_reason(rule, scope, budget)
        if stated:
            why = " (%s)" % stated
        elif rule.operand.query is not None:
            key = _source_key(rule, rule.operand.query.text)
            why = sources.no_value(key, doc, element) if key else None
            why = " (%s)" % why if why else ""
        return _finding(rule, "unknown", subject, None, observed,
                        "%s: expected value %s is null%s%s" % (rule.label, what, why, suffix))
    if OPERATORS[rule.op] == "flag":
        expected = {"empty": [], "true": True, "false": False, "uniform": "uniform"}[rule.op]
    passed, message = _judge(rule.op, observed, expected, rule.unit, rule.label)
    if passed is None:
        # a value that cannot be judged (garbage, wrong type): say which file or command gave it
        where = sources.read_from(_source_key(rule, rule.query.text), element)
        return _finding(rule, "unknown", subject, expected, observed,
                        message + (" (%s)" % where if where else "") + suffix)
    status = "pass" if passed else "fail"
    finding = _finding(rule, status, subject, expected, observed, message + suffix)
    if not passed and rule.severity_from is not None:
        finding["severity"] = graded_severity(rule, scope, budget)
    if not passed and rule.pending_when is not None:
        try:
            pending = rule.pending_when.search(scope, budget)
        except EvaluationError:
            pending = None
        if truthy(pending):
            finding["pending"] = True
            note = pending if isinstance(pending, str) else \
                _fmt(pending) if isinstance(pending, list) else "configured, takes effect after a reboot"
            finding["message"] += "; pending: %s" % note
    return finding


def graded_severity(rule, scope, budget=None):
    """The severity of a failing finding of ``rule``: the worst of the severities its ``severity_from``
    gives on ``scope`` (a severity or a list; anything else ignored), capped by a profile's
    ``rules.severity``; the rule's severity when it gives none."""
    try:
        graded = rule.severity_from.search(scope, budget)
    except EvaluationError:
        graded = None
    graded = [graded] if isinstance(graded, str) else graded if isinstance(graded, list) else []
    graded = [g for g in graded if isinstance(g, str) and g in SEVERITY_RANK]
    if not graded:
        return rule.severity
    worst = max(graded, key=SEVERITY_RANK.get)
    cap = rule.severity_cap
    return cap if cap is not None and SEVERITY_RANK[worst] > SEVERITY_RANK.get(cap, 0) else worst


def _evaluate_rule(rule, doc, params, budget=None):
    """The findings of ``rule`` on ``doc``. Its expressions share one :class:`Budget`: one that
    goes over the cost bound makes the rule one ``unknown`` finding naming the rule and the bound
    (a site rule is untrusted input; the bundled ones stay far below it)."""
    budget = budget if budget is not None else Budget()
    try:
        return _evaluate_rule_within(rule, doc, params, budget)
    except CostExceeded as exc:
        return [_finding(rule, "unknown", None, None, None, "%s not judged: its %s went over the cost bound of a rule (%s)"
                         % (rule.id, exc.field or "expression", exc.bound))]


def not_applicable_message(rule):
    """Why ``rule`` does not apply when its ``applies_when`` is false, in the rule's own words
    (``applies_to``): the message of its finding, which the views show as it is."""
    if rule.applies_to:
        return "applies only to %s" % rule.applies_to
    return "condition for this rule not met: %s" % rule.title


def no_subjects_message(rule):
    """Why ``rule`` has nothing to judge when its ``subjects`` list is empty, in its own words (``no_subjects``)."""
    if rule.no_subjects:
        return "nothing to check on this host (%s)" % rule.no_subjects
    return "nothing to check on this host for: %s" % rule.title


def _evaluate_rule_within(rule, doc, params, budget):
    if rule.applies_when is not None:
        try:
            applies = rule.applies_when.search(doc, budget)
        except EvaluationError as exc:
            return [_finding(rule, "unknown", None, None, None, str(exc))]
        if applies is None and _missing_reason(rule, doc):
            # null because the facts the condition reads are missing, not because it is false
            return [_finding(rule, "unknown", None, None, None,
                             "%s unknown: %s" % (rule.label, _missing_reason(rule, doc)))]
        if not truthy(applies):
            return [_finding(rule, "not_applicable", None, None, None, not_applicable_message(rule))]
    if rule.subjects is None:
        return [_evaluate_one(rule, doc, doc, params, None, None, budget)]
    try:
        elements = rule.subjects.search(doc, budget)
    except EvaluationError as exc:
        return [_finding(rule, "unknown", None, None, None, str(exc))]
    if elements is None:
        reason = _missing_reason(rule, doc) or _null_reason(
            doc, sources.fact_key(None, rule.subjects.text) or rule.subjects.text, None)
        return [_finding(rule, "unknown", None, None, None, "%s unknown: %s" % (rule.label, reason))]
    if not isinstance(elements, list):
        return [_finding(rule, "unknown", None, None, None,
                         "%s: %s is not a list" % (rule.label, rule.subjects.text))]
    if not elements:
        return [_finding(rule, "not_applicable", None, None, None, no_subjects_message(rule))]
    findings = []
    for index, element in enumerate(elements):
        try:
            subject = _subject_label(rule.subject.search(element, budget))
        except EvaluationError:
            subject = None
        if subject is None:
            subject = "#%d" % index
        detail = None
        if rule.detail is not None:
            try:
                detail = rule.detail.search(element, budget)
            except EvaluationError:
                detail = None
            detail = _fmt(detail) if detail not in (None, "", []) else None
        # an element may carry why no rule over it applies (derive_pcie.py: a device without the PCI
        # Express capability has none of the registers the PCIe rules judge)
        reason = element.get("not_applicable") if isinstance(element, dict) else None
        if isinstance(reason, str) and reason:
            findings.append(_finding(rule, "not_applicable", subject, None, None, "%s on %s%s" % (
                reason, subject, " (%s)" % detail if detail else "")))
            continue
        findings.append(_evaluate_one(rule, doc, element, params, subject, detail, budget))
    return findings


def _waiver_for(waivers, rule_id, host, subject):
    """The first matching waiver still valid, else the first matching expired one (or None)."""
    expired = None
    for waiver in waivers:
        if waiver["rule"] != rule_id:
            continue
        if not any(fnmatch.fnmatchcase(host or "", pat) for pat in waiver["hosts"]):
            continue
        if waiver["subjects"] is not None:
            if subject is None or not any(fnmatch.fnmatchcase(str(subject), pat) for pat in waiver["subjects"]):
                continue
        if not waiver.get("_expired"):
            return waiver
        if expired is None:
            expired = waiver
    return expired


def _apply_waiver(finding, waivers, host, today):
    if finding["status"] != "fail":
        return finding
    waiver = _waiver_for(waivers, finding["id"], host, finding["subject"])
    if waiver is None:
        return finding
    shown = {
        "reason": waiver["reason"],
        "expires": waiver["expires"].isoformat(),
        "hosts": list(waiver["hosts"]),
        "subjects": list(waiver["subjects"]) if waiver["subjects"] is not None else None,
        "expired": bool(waiver["_expired"]),
    }
    finding["waiver"] = shown
    if waiver["_expired"]:
        finding["message"] = "waiver expired %s: %s; %s" % (shown["expires"], waiver["reason"], finding["message"])
    else:
        finding["status"] = "waived"
        finding["message"] = "waived until %s: %s; %s" % (shown["expires"], waiver["reason"], finding["message"])
    return finding


def failing_lines(findings):
    """One short line per failing finding (what the audit role prints)."""
    lines = []
    for f in findings:
        if f["status"] != "fail":
            continue
        lines.append("%s [%s] %s%s%s" % (
            f["id"], f["severity"], f["message"],
            " [fix needs reboot]" if f["reboot_required"] and not f["pending"] else "",
            " [pending]" if f["pending"] else ""))
    return lines


def fix_plan(findings, facts=None, by_kind=None):
    """What the remediate role acts on: per ``fix.action``, each failing rule id with its failing
    subjects (host-wide findings add none). Waived findings are not fixed. With ``facts``, each entry
    of ``by_kind`` (rule id -> plan name: the rules' ``fix.subjects_by_kind``) adds
    ``plan[name] = {"gpu": [...], "nic": [...]}``: the failing subjects of those rules split by device
    kind, for tasks that take GPUs and NICs apart (``pcie_mrrs``: their MaxReadReq parameters differ)."""
    plan = {}
    for f in findings:
        if f["status"] != "fail":
            continue
        subjects = plan.setdefault(f.get("fix_action") or "manual", {}).setdefault(f["id"], [])
        if f.get("subject") is not None and f["subject"] not in subjects:
            subjects.append(f["subject"])
    if isinstance(facts, dict):
        devices = (facts.get("pci") or {}).get("devices") if isinstance(facts.get("pci"), dict) else None
        kinds = dict((d.get("address"), d.get("kind")) for d in devices or [] if isinstance(d, dict))
        for name in sorted(set((by_kind or {}).values())):
            plan[name] = {"gpu": [], "nic": []}
        for f in findings:
            name = (by_kind or {}).get(f["id"])
            if name is None or f["status"] != "fail":
                continue
            kind = kinds.get(f.get("subject"))
            if kind in plan[name] and f["subject"] not in plan[name][kind]:
                plan[name][kind].append(f["subject"])
    return plan


def pending_items(findings, catalogue=None, applied=None):
    """What is still open after fixing, one entry per failing finding, with why. ``kind``:

    * ``reboot``: configured, waits for a reboot (the finding is ``pending``);
    * ``manual``: the rule's ``fix.kind`` is manual (its hint says what to do and why not automatic);
    * ``opt-in``: the fix runs only with the rule's ``fix.variable`` set, and it did not run;
    * ``not-applied``: an automatic fix that did not run in this remediation (left out by
      ``--tags``/``--skip-tags``, a ``--check`` preview, a fix that failed before it);
    * ``not-fixed``: the fix ran (its rule id is in ``applied``) and the check still fails; without
      ``applied``, an automatic fix still failing, the message not saying whether it ran.

    ``applied`` lists the rule ids whose fix task ran (the remediate role passes them); ``None``
    (not known: an audit, a caller that does not say) never claims that a fix ran. The fix kinds
    come from the rules of ``catalogue`` (default: this collection's)."""
    catalogue = catalogue or load_catalogue()
    ran = None if applied is None else set(applied)
    items = []
    for f in findings:
        if f["status"] != "fail":
            continue
        rule = catalogue.by_id.get(f["id"])
        action = f.get("fix_action") or (rule.fix_action if rule is not None else "manual")
        kind = rule.fix_kind if rule is not None else "manual"
        if f.get("pending"):
            kind, why = "reboot", "pending a reboot"
        elif ran is not None and f["id"] in ran:
            kind, why = "not-fixed", "still failing after the %s fix" % action
        elif kind == "manual":
            why = "manual"
        elif kind == "opt_in":
            kind, why = "opt-in", "opt-in: the %s fix runs only with %s set, and did not run" % (action, rule.fix_variable)
        elif ran is None:
            kind, why = "not-fixed", "still failing (its fix is the automatic %s fix)" % action
        else:
            kind, why = "not-applied", ("the automatic %s fix did not run in this remediation (left out by --tags or "
                                        "--skip-tags, a --check preview, or an earlier fix failed)" % action)
        items.append({"id": f["id"], "subject": f.get("subject"), "kind": kind,
                      "message": "%s: %s (%s)" % (why, f.get("message") or f.get("title"), f.get("fix") or "")})
    return items


def host_report(facts, outcome, before=None, note=None, failure=None, catalogue=None):
    """This host's part of the report (the input of ``baseline_report``) from its facts and evaluation.
    ``catalogue``: the one the findings were judged with; a finding whose severity is not its rule's
    there (graded by ``severity_from``) keeps it (:func:`findings.compact_findings`).

    ``failure`` (why work on the host did not complete) makes its state ``failed`` with that
    message, findings kept."""
    numa = facts.get("numa") if isinstance(facts.get("numa"), dict) else {}
    errors = facts.get("errors")
    part = {
        "state": "audited",
        "hostname": facts.get("hostname"),
        "findings": compact_findings(outcome["findings"], catalogue),
        "profile": outcome["profile"],
        "numa": numa.get("nodes") or [],
        "facts_errors": len(errors) if isinstance(errors, list) else 0,
    }
    gpus = _gpu_identities(facts)
    if gpus:
        part["gpus"] = gpus  # metrics.prom joins the per-GPU findings with dcgm-exporter's series by them
    if isinstance(facts.get("durations_s"), dict):
        # what each facts reader cost on the host (STYLE 17): report.json and metrics.prom name the slow one
        part["gather_s"] = facts["durations_s"]
    if before is not None:
        part["before"] = {"findings": compact_findings(before, catalogue)}
        part["pending"] = outcome["pending_items"]
    if note:
        part["message"] = note
    if failure:
        part["state"] = "failed"
        part["message"] = "%s; %s" % (failure, note) if note else failure
    return part


def _gpu_identities(facts):
    """``[{"index", "uuid", "bus_id", "name"}]`` of the host's NVIDIA GPUs as nvidia-smi named them (what
    dcgm-exporter labels its series with); the ones without a bus id left out."""
    nvidia = facts.get("nvidia") if isinstance(facts.get("nvidia"), dict) else {}
    out = []
    for gpu in nvidia.get("gpus") or [] if isinstance(nvidia.get("gpus"), list) else []:
        if isinstance(gpu, dict) and isinstance(gpu.get("bus_id"), str):
            out.append(dict((key, gpu.get(key)) for key in ("index", "uuid", "bus_id", "name")))
    return out


def rule_statuses(findings):
    """``{rule id: status}``: each judged rule's status on the host, for acting on the verdict (the
    Slurm action releases its drain only when every rule the drain names is ``pass`` or ``waived``).

    A rule's status is its findings' worst (``findings.STATUS_WORST_FIRST``: fail, unknown, waived,
    pass, not_applicable): a rule passes when one subject passes and the others pass or do not apply,
    and is unknown when any subject is unknown. Rules this run did not judge are absent."""
    rank = dict((status, number) for number, status in enumerate(STATUS_WORST_FIRST))
    statuses = {}
    for finding in findings if isinstance(findings, list) else []:
        if not isinstance(finding, dict) or not isinstance(finding.get("id"), str):
            continue
        status = finding.get("status")
        status = status if status in rank else "unknown"
        known = statuses.get(finding["id"])
        if known is None or rank[status] < rank[known]:
            statuses[finding["id"]] = status
    return statuses


def _gpu_count_on_bus(facts):
    """NVIDIA GPUs (display/3D class, vendor 0x10de) in the PCI facts, passthrough ones left out."""
    pci = facts.get("pci") if isinstance(facts, dict) else None
    devices = pci.get("devices") if isinstance(pci, dict) else None
    return len([d for d in devices if isinstance(d, dict) and d.get("kind") == "gpu"
                and str(d.get("vendor_id")).lower() == "0x10de"
                and d.get("driver") not in PASSTHROUGH_DRIVERS]) if isinstance(devices, list) else 0


def busy_gpus(facts):
    """GPUs with compute processes, for the maintenance guard: ``[{"index", "bus_id", "processes"}]``.

    Fails closed: a GPU whose process list is not known (nvidia-smi gave none for it: no ``<processes>``
    in its output), and NVIDIA GPUs on the PCI bus that nvidia-smi did not list at all (it failed, hung
    or is missing), count as busy, with ``unknown`` set and the reason in ``processes``."""
    busy = []
    nvidia = facts.get("nvidia") if isinstance(facts, dict) else None
    gpus = nvidia.get("gpus") if isinstance(nvidia, dict) else None
    gpus = [gpu for gpu in gpus if isinstance(gpu, dict)] if isinstance(gpus, list) else []
    # facts come from hosts: a malformed section is no GPU, never a traceback
    for gpu in gpus:
        processes = gpu.get("processes")
        if not isinstance(processes, list):
            busy.append({"index": gpu.get("index"), "bus_id": gpu.get("bus_id"), "unknown": True,
                         "processes": ["GPU %s (%s): process list unknown" % (gpu.get("index"), gpu.get("bus_id"))]})
            continue
        procs = [p for p in processes if isinstance(p, dict)]
        if procs:
            busy.append({"index": gpu.get("index"), "bus_id": gpu.get("bus_id"),
                         "processes": ["%s (pid %s)" % (p.get("name"), p.get("pid")) for p in procs]})
    on_bus = _gpu_count_on_bus(facts)
    if on_bus > len(gpus):
        smi = nvidia.get("smi") if isinstance(nvidia, dict) else None
        error = smi.get("error") if isinstance(smi, dict) else None
        why = "nvidia-smi lists %d of the %d NVIDIA GPUs on the PCI bus%s" % (
            len(gpus), on_bus, ": %s" % str(error)[:200] if isinstance(error, str) and error else "")
        busy.append({"index": None, "bus_id": None, "unknown": True,
                     "processes": ["process list unknown (%s)" % why]})
    return busy


def busy_reason(busy):
    """Why the maintenance guards (the remediate and validate roles) leave a host alone: one sentence
    naming the compute processes of ``busy`` (:func:`busy_gpus`), or "" when no GPU is busy. A process
    list that is not known counts as busy (fail closed): the sentence says so."""
    processes = [name for gpu in busy if not gpu.get("unknown") for name in gpu["processes"]]
    unknown = [name for gpu in busy if gpu.get("unknown") for name in gpu["processes"]]
    parts = []
    if processes:
        parts.append("GPUs are running compute work (%s)" % ", ".join(processes))
    if unknown:
        parts.append("the GPUs' compute processes are not known, so they count as busy (%s)" % "; ".join(unknown))
    if not parts:
        return ""
    return "%s; drain the host or set gpuhost_force=true" % "; ".join(parts)


def _today(today):
    if today is None:
        return datetime.date.today()
    return parse_date(today, "today")


def evaluate(facts, profile="auto", params=None, waivers=None, host=None, today=None, base_dir=None,
             catalogue=None, waiver_files=None, applied=None):
    """Judge one host's facts document.

    Returns ``{"findings", "summary", "profile", "params", "failing", "failing_ids", "fix_plan",
    "busy_gpus", "busy_reason", "rule_status", "pending_items"}``. Raises
    :class:`CatalogueError` for a malformed catalogue, profile name, parameter or waiver.
    """
    catalogue = catalogue or load_catalogue(base_dir)
    if not isinstance(facts, dict):
        raise CatalogueError("facts must be the gpuhost facts mapping (ansible_facts.gpuhost), got %s"
                             % type_name(plain(facts)))
    facts = plain(facts)
    chosen, effective = resolve_profile(catalogue, profile, facts, params)
    checked = validate_waivers(waivers, catalogue, waiver_files)
    day = _today(today)
    for waiver in checked:
        waiver["_expired"] = waiver["expires"] < day
    doc = derive(facts, effective)
    doc["params"] = effective
    busy = busy_gpus(facts)
    findings = []
    for rid in chosen.rule_ids:
        for finding in _evaluate_rule(catalogue.by_id[rid], doc, effective):
            findings.append(_apply_waiver(finding, checked, host, day))
    return {
        "findings": findings,
        "summary": summarize(findings),
        "profile": chosen.name,
        "params": effective,
        "failing": failing_lines(findings),
        "failing_ids": sorted(set(f["id"] for f in findings if f["status"] == "fail")),
        "fix_plan": fix_plan(findings, facts, dict(
            (rule.id, rule.fix_by_kind) for rule in catalogue.by_id.values() if rule.fix_by_kind)),
        "busy_gpus": busy,
        "busy_reason": busy_reason(busy),
        "rule_status": rule_statuses(findings),
        "pending_items": pending_items(findings, catalogue, applied),
    }
