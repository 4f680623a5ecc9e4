# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm node state: the parser of ``scontrol show node -o <name>`` and the drain reason this tool writes.

Pure functions over text that never raise; the module ``slurm_node`` runs ``scontrol`` and acts.

Format (one line per node with ``-o``; real lines in tests/fixtures/slurm/README.md)::

    NodeName=gpu01 Arch=x86_64 ... State=IDLE+DRAIN ThreadsPerCore=1 ... Reason=gpuhost: PCI-001 [root@2026-12-04T09:50:40]

``State=`` is a base state (``IDLE``, ``ALLOCATED``, ``MIXED``, ``DOWN`` ...) and ``+FLAG`` suffixes
(``DRAIN``, ``NOT_RESPONDING``, ``MAINTENANCE`` ...). ``Reason=`` holds free text with spaces, then
`` [user@time]``; it comes after the other fields, before the optional ``Comment=``/``Extra=``.
"""

from __future__ import absolute_import, division, print_function

import re

__metaclass__ = type

#: what starts the drain reason this tool writes; a drain whose reason lacks it is someone else's
REASON_MARKER = "gpuhost:"

#: Slurm's reason field is free text; ours is kept short (the ids that failed, then "+N more")
MAX_REASON_CHARS = 200

#: bound on the text parsed (one node's line is about 1 KiB)
MAX_TEXT = 1 << 16

_FIELD_RE = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z_]{0,40})=")
#: fields scontrol prints after Reason= (free text ends where one of them starts)
_AFTER_REASON = ("Comment", "Extra", "InstanceId", "InstanceType", "ResumeAfter", "TopologyAddr")
_REASON_TAIL_RE = re.compile(r"\s*\[[^\[\]@]*@[^\[\]]*\]\s*$")
#: a base state and +FLAGs; sinfo-style suffixes (``*`` not responding, ``~`` powered off ...) may follow
#: the base state or the whole (``DOWN*+DRAIN``, seen in rackslab/Slurm-web issue 153)
_SUFFIXES = "*~#!%$@^-"
_STATE_RE = re.compile(r"^[A-Z_]+[*~#!%$@^-]?(?:\+[A-Z_]+[*~#!%$@^-]?)*$")
_RULE_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def parse_show_node(text, node=None):
    """``(node, None)`` or ``(None, message)``, never raises; ``node`` is
    ``{"name", "state", "flags", "drain", "reason", "reason_user"}``.

    ``state`` is the base state in lower case (``idle``), ``flags`` the ``+FLAG`` parts in lower case,
    ``drain`` true when ``DRAIN`` is among them, ``reason`` the text without the ``[user@time]`` tail
    (``None`` when there is no ``Reason=``). With ``node`` the line of that node is chosen.
    """
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str):
        return None, "no scontrol output"
    text = text[:MAX_TEXT]
    lines = []
    for line in text.splitlines():
        if line[:1].isspace() and lines and line.strip():
            lines[-1] += " " + line.strip()  # the form without -o: one field group per indented line
        elif line.strip():
            lines.append(line.strip())
    if not lines:
        return None, "scontrol printed nothing"
    candidates = [line for line in lines if line.startswith("NodeName=")]
    if not candidates:
        first = lines[0][:120]
        return None, "not the output of scontrol show node -o (first line: %r)" % first
    for line in candidates:
        fields = _fields(line)
        if node is None or fields.get("NodeName") == node:
            return _node(fields)
    return None, "scontrol show node printed no line for node %r" % node


def _fields(line):
    """``{key: value}`` of one ``-o`` line; the value of ``Reason`` may hold spaces."""
    fields = {}
    matches = list(_FIELD_RE.finditer(line))
    index = 0
    while index < len(matches):
        match = matches[index]
        key = match.group(1)
        end = len(line)
        following = index + 1
        if key == "Reason":
            while following < len(matches) and matches[following].group(1) not in _AFTER_REASON:
                following += 1
        if following < len(matches):
            end = matches[following].start()
        if key not in fields:
            fields[key] = line[match.end():end].strip()
        index = following
    return fields


def _node(fields):
    name = fields.get("NodeName") or ""
    if not name:
        return None, "a NodeName= line without a name"
    state_text = fields.get("State")
    if state_text is None:
        return None, "node %s: no State= field in scontrol's output" % name
    if not _STATE_RE.match(state_text):
        return None, "node %s: State=%r is not a Slurm node state" % (name, state_text[:60])
    parts = [part.rstrip(_SUFFIXES) for part in state_text.split("+")]
    flags = [part.lower() for part in parts[1:]]
    reason = fields.get("Reason")
    user = None
    if reason is not None:
        tail = _REASON_TAIL_RE.search(reason)
        if tail:
            user = tail.group(0).strip()[1:-1]
            reason = reason[:tail.start()].rstrip()
        if reason in ("", "(null)", "none"):
            reason = None
    return {
        "name": name,
        "state": parts[0].lower(),
        "flags": flags,
        "drain": "drain" in flags or parts[0] in ("DRAIN", "DRAINED", "DRAINING"),
        "reason": reason,
        "reason_user": user,
    }, None


def drain_reason(rule_ids, marker=REASON_MARKER, limit=MAX_REASON_CHARS):
    """``"gpuhost: PCI-001 KERNEL-003"``: the marker, then the failing rule ids (sorted, unique), cut
    to ``limit`` characters with ``+N more``. ``(reason, None)`` or ``(None, error)`` for an id
    that is not a plain rule id (it goes to a command line and into Slurm's state)."""
    ids = []
    for rule_id in rule_ids or []:
        rule_id = str(rule_id).strip()
        if not _RULE_ID_RE.match(rule_id):
            return None, "not a rule id: %r" % rule_id[:60]
        if rule_id not in ids:
            ids.append(rule_id)
    if not ids:
        return None, "no failing rule ids to name in the drain reason"
    ids.sort()
    reason = marker
    for number, rule_id in enumerate(ids):
        rest = len(ids) - number - 1
        more = " +%d more" % (rest + 1)
        if len(reason) + 1 + len(rule_id) + (len(" +%d more" % rest) if rest else 0) > limit:
            return reason + more, None
        reason += " " + rule_id
    return reason, None


def drained_by_us(node, marker=REASON_MARKER):
    """True when ``node`` (from :func:`parse_show_node`) is drained with a reason this tool wrote."""
    return bool(node and node.get("drain") and (node.get("reason") or "").startswith(marker))


#: the statuses of a rule in this run that release a drain naming it (findings.STATUSES: a waived
#: finding is a failure someone accepted until its date)
RELEASE_STATUSES = ("pass", "waived")

_MORE_RE = re.compile(r"^\+([0-9]{1,6})$")


def reason_rule_ids(reason, marker=REASON_MARKER):
    """``(ids, more)`` named by a drain reason this tool wrote (:func:`drain_reason`): the rule ids in
    their order and how many more it did not list (``+N more``, cut at ``MAX_REASON_CHARS``);
    ``(None, 0)`` for a reason without the marker or with a word that is no rule id. Never raises."""
    if not isinstance(reason, str) or not reason.startswith(marker):
        return None, 0
    words = reason[len(marker):].split()
    more = 0
    if len(words) >= 2 and words[-1] == "more" and _MORE_RE.match(words[-2]):
        more = int(words[-2][1:])
        words = words[:-2]
    if not words or not all(_RULE_ID_RE.match(word) for word in words):
        return None, 0
    return words, more


def rule_status_text(status):
    """``"unknown"``, ``"not applicable"``, ``"not judged by this run"`` for a rule's status (``None``: absent)."""
    if status is None:
        return "not judged by this run"
    return str(status).replace("_", " ")[:40]


def missing_evidence(reason, statuses, marker=REASON_MARKER):
    """Why the drain of ``reason`` (this tool's) may not be released on this run's ``statuses``
    (``{rule id: status}``, the host's statuses per rule, ``findings.STATUSES``): a list of
    ``"RULE-ID unknown"``, ``"RULE-ID not applicable"``, ``"RULE-ID not judged by this run"``, ... for
    each named rule not judged ``pass`` or ``waived``; empty when every rule it names passes now.

    A drain is released only on evidence: a rule whose facts were unreadable (``unknown``), that did not
    apply or that this playbook did not judge (a VAL rule in a plain audit) keeps it. A reason that lists
    only some of its rules (``+N more``) or that cannot be read keeps it too: the others cannot be checked.
    ``statuses`` that is not a mapping is no evidence. Never raises."""
    ids, more = reason_rule_ids(reason, marker)
    if ids is None:
        return ["the drain reason %r names no rule ids this tool can read" % (str(reason)[:80],)]
    if not isinstance(statuses, dict):
        return ["no rule statuses of this run were given"]
    lacking = []
    for rule_id in ids:
        status = statuses.get(rule_id)
        if status not in RELEASE_STATUSES:
            lacking.append("%s %s" % (rule_id, rule_status_text(status if isinstance(status, str) else None)))
    if more:
        lacking.append("%d more rule id%s not listed in the reason (cut at %d characters)"
                       % (more, "" if more == 1 else "s", MAX_REASON_CHARS))
    return lacking


def kept_rule_ids(reason, statuses, marker=REASON_MARKER):
    """The rule ids of this tool's drain ``reason`` that this run did not prove (not ``pass`` or
    ``waived`` in ``statuses``): a drain whose reason is rewritten for other failing rules keeps naming
    them, so that a rule gone ``unknown`` is not forgotten and released by a later run."""
    ids, unused_more = reason_rule_ids(reason, marker)
    if ids is None:
        return []
    statuses = statuses if isinstance(statuses, dict) else {}
    return [rule_id for rule_id in ids if statuses.get(rule_id) not in RELEASE_STATUSES]
