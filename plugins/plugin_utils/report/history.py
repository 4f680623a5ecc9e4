# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Drift history: one JSON Lines file per host, one compact record per audit (docs/report.md,
"History and changes").

Controller side. A record holds the audit's time, the host's boot id
(``/proc/sys/kernel/random/boot_id``, fact ``kernel.boot_id``), the collection version and, per
rule and subject, the status and the observed value. ``baseline_report`` compares a host's new
record with its last one (:func:`compare`: new fails, resolved, other status changes, values
changed; same boot or across a reboot), appends it and prunes the file to a retention count
(:func:`record_audit`); ``baseline_evaluate`` hands the values seen earlier in the running boot
to the rules (:func:`earlier_in_boot`, PCI-008).

Reading never raises on a damaged file: a truncated, garbage or too deeply nested line is skipped
with a warning naming the file and the line (the first :data:`MAX_LINE_WARNINGS` of a file, then a
count). The tool runs as root on the controller and on every host (the self-audit), so a history
file is read only through ``files.read_bytes`` (a regular file, not through a link, never blocking,
at most :data:`MAX_FILE_BYTES`) and written only without following a link; a file that is refused
is renamed aside (``.<file>.refused``) by the next write, which starts the history afresh
(docs/self-audit.md, "A damaged or hostile history").
"""

from __future__ import absolute_import, division, print_function

import collections
import datetime
import hashlib
import json
import os
import re
import stat

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_model import AREA_PREFIX
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.files import (
    DirectoryLock, FileRefused, atomic_write, controller_path, loads_json, read_bytes)
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.isotime import epoch
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import expand_document, update_hosts

__metaclass__ = type

#: Version of the record format; a line with another version is skipped with a warning.
RECORD_SCHEMA = 1

#: File name suffix of a host's history.
SUFFIX = ".jsonl"

#: Retention count when none is given.
DEFAULT_KEEP = 50

#: Largest history file read (bytes); a larger one is refused. A record is about 11 KB on the
#: largest host the tests model (768 CPUs, 64 PCI devices, 8 GPUs; measured), so the self-audit's
#: 168 records are about 2 MB: 16 MiB leaves eight times that for bigger hosts or a longer
#: retention, and the worst file under it (all valid records, or one record of 16 MiB) parses in
#: well under the 512 MiB the bomb corpus allows (tests/fuzz/test_fuzz_history.py).
MAX_FILE_BYTES = 16 * 1024 * 1024

#: Damaged lines named per file read; the rest are counted in one more warning.
MAX_LINE_WARNINGS = 10

#: Damaged lines after which a file is not read on: it is not a history (a history holds records,
#: a few of them cut short by a crash at most). Parsing a crafted line costs microseconds; a file
#: at the cap holds some 300,000 of them.
MAX_DAMAGED_LINES = 1000

#: Deepest nesting of a finding's observed value in a record (real ones nest two or three levels);
#: a deeper one parses but would exhaust the recursion of the code that compares and renders it.
MAX_OBSERVED_DEPTH = 32

#: Suffix of the name a refused history file is renamed to, ``.<file>.refused`` in the same
#: directory: hidden like the tool's temporary files (``.<file>.<random>``), never a host's file
#: name (:func:`file_name` never starts with a dot), one per host (a later one replaces it).
REFUSED_SUFFIX = ".refused"

#: Largest counter value a record holds (64 bits); a larger one makes the record unusable.
MAX_COUNTER = 2 ** 64

#: Change kinds of :func:`compare`, in the order the reports show them.
CHANGE_KINDS = ("new_fails", "resolved", "status_changed", "values_changed")

#: Statuses after which a failing finding counts as resolved (``None``: no longer reported).
_RESOLVED = ("pass", "waived", "not_applicable", None)

#: Host names used as file names unchanged; anything else is rewritten and suffixed with a hash.
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
#: Every name :func:`file_name` gives (a rewritten name may start with ``_`` or ``-``) and the
#: aside name of a refused file: what this tool writes into a history directory.
_OWN_NAME = re.compile(r"^\.?[A-Za-z0-9_-][A-Za-z0-9._-]*\.jsonl(?:%s)?\Z" % re.escape(REFUSED_SUFFIX))


def is_history_file(name):
    """Whether ``name`` is one this tool writes into a history directory: a host's history
    (:func:`file_name`) or a refused one set aside (``.<file>.refused``)."""
    match = _OWN_NAME.match(name)
    return bool(match) and name.startswith(".") == name.endswith(REFUSED_SUFFIX)


class HistoryError(ValueError):
    """A history directory or file that cannot be used (the message names it and why)."""


# ---------------------------------------------------------------------------
# where
# ---------------------------------------------------------------------------

def file_name(host):
    """The history file name of inventory host ``host``, safe on any file system.

    A plain name (letters, digits, ``.``, ``_``, ``-``, not starting with a dot, at most 100
    characters) is used as it is; any other (``/``, ``..`` at the start, spaces, control
    characters, non-ASCII, empty, too long) becomes its safe characters plus the first 16 hex
    digits of the SHA-256 of the name, so it can neither leave the directory nor collide with
    another host's file."""
    name = host if isinstance(host, str) else str(host)
    if _PLAIN_NAME.match(name) and name not in (".", ".."):
        return name + SUFFIX
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    safe = _UNSAFE.sub("_", name).lstrip(".")[:60] or "host"
    return "%s-%s%s" % (safe, digest, SUFFIX)


def resolve_dir(directory):
    """``directory`` absolute on the controller: ``~`` expanded, a relative path taken from the
    working directory of the ansible-playbook process. Raises :class:`HistoryError` for an empty value."""
    if not isinstance(directory, str) or not directory.strip():
        raise HistoryError("no history directory given")
    try:
        return controller_path(directory)
    except OSError as exc:  # the working directory is gone
        raise HistoryError("cannot resolve the relative history directory %r: %s" % (directory, exc))


def history_path(directory, host):
    """Path of ``host``'s history file in ``directory`` (see :func:`file_name`); checked to stay in it."""
    base = resolve_dir(directory)
    path = os.path.join(base, file_name(host))
    if os.path.dirname(path) != base:  # file_name never makes one; kept as a guard
        raise HistoryError("history file of host %r would leave %s" % (host, base))
    return path


# ---------------------------------------------------------------------------
# records
# ---------------------------------------------------------------------------

def _plain(value):
    """``value`` as it reads back from JSON (tuples become lists, keys strings, other types text)."""
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def _time_text(value):
    if isinstance(value, datetime.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.timezone.utc)
        return value.isoformat()
    return str(value)


def make_record(host, findings, time, boot_id=None, collection_version=None, profile=None, state="audited",
                counters=None, prove=None):
    """The compact record of one audit of ``host``: ``findings`` (report.json findings, or any
    mappings with ``id``, ``subject``, ``status``, ``observed``) become ``[id, subject, status, observed]``;
    ``counters`` (``derive_counters.counter_values``: ``{"ib|mlx5_0/1|link_downed": 3}``), kept only
    when there are any, are what the counter rules judge the next audits' increases against. ``prove`` (the
    host's report ``prove``: remediate.yml with gpuhost_prove) keeps each figure as ``[key, unit, before, after,
    noise, verdict]`` with the fixes that ran, so the history says what each maintenance window delivered."""
    rows = []
    for finding in findings or []:
        if not isinstance(finding, dict) or not isinstance(finding.get("id"), str):
            continue
        subject = finding.get("subject")
        rows.append([finding["id"], None if subject is None else str(subject), finding.get("status"),
                     _plain(finding.get("observed"))])
    record = {
        "schema": RECORD_SCHEMA,
        "time": _time_text(time),
        "host": str(host),
        "boot_id": boot_id if isinstance(boot_id, str) and boot_id else None,
        "collection_version": None if collection_version is None else str(collection_version),
        "profile": None if profile is None else str(profile),
        "state": state,
        "findings": rows,
    }
    kept = _counters(counters)
    if kept:
        record["counters"] = kept
    if isinstance(prove, dict):
        record["prove"] = {
            "fixes": [str(rule) for rule in prove.get("fixes") or [] if isinstance(rule, str)],
            "figures": [[_plain(entry.get("key")), _plain(entry.get("unit")), entry.get("before"), entry.get("after"),
                         entry.get("noise"), _plain(entry.get("verdict"))]
                        for entry in prove.get("figures") or [] if isinstance(entry, dict)]}
    return record


def _counters(counters):
    """The valid entries of ``counters``: text keys of at most 200 characters, integer values from
    0 to 2**64 (a counter is at most 64 bits)."""
    if not isinstance(counters, dict):
        return {}
    return dict((k, v) for k, v in counters.items() if isinstance(k, str) and len(k) <= 200 and
                isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_COUNTER)


def encode(record):
    """One line of JSON (newlines inside strings are escaped), newline-terminated."""
    return json.dumps(record, sort_keys=True, ensure_ascii=True, separators=(",", ":"), default=str) + "\n"


def _check_record(record, host):
    """Why ``record`` is not a usable record (``None`` when it is)."""
    if not isinstance(record, dict):
        return "not a JSON object"
    if record.get("schema") != RECORD_SCHEMA:
        return "record schema %r, not %d" % (record.get("schema"), RECORD_SCHEMA)
    if epoch(record.get("time")) is None:
        return "no valid time"
    if host is not None and record.get("host") != str(host):
        return "record of host %r, not %r" % (record.get("host"), str(host))
    boot = record.get("boot_id")
    if boot is not None and not isinstance(boot, str):
        return "boot_id is not a string"
    rows = record.get("findings")
    if not isinstance(rows, list):
        return "no findings list"
    counters = record.get("counters")
    if counters is not None and (not isinstance(counters, dict) or len(_counters(counters)) != len(counters)):
        return "counters is not a mapping of names to counts from 0 to 2**64"
    prove = record.get("prove")
    if prove is not None and not (isinstance(prove, dict) and isinstance(prove.get("figures"), list)
                                  and all(isinstance(row, list) and len(row) == 6 for row in prove["figures"])):
        return "prove is not a mapping with figures [key, unit, before, after, noise, verdict]"
    for row in rows:
        if not (isinstance(row, list) and len(row) == 4 and isinstance(row[0], str)
                and (row[1] is None or isinstance(row[1], str)) and isinstance(row[2], str)):
            return "a finding is not [rule, subject, status, observed]"
        if isinstance(row[3], (list, dict)) and _deeper_than(row[3], MAX_OBSERVED_DEPTH):
            return "a finding's observed value nests deeper than %d levels" % MAX_OBSERVED_DEPTH
    return None


def _deeper_than(value, limit):
    """Whether ``value`` (parsed JSON) nests lists and objects more than ``limit`` deep; no recursion."""
    if not isinstance(value, (list, dict)):
        return False
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        for child in (item.values() if isinstance(item, dict) else item):
            if isinstance(child, (list, dict)):
                stack.append((child, depth + 1))
    return False


class _Reader:
    """One pass over the lines of a history file: :meth:`records` yields the valid records one at a
    time (a caller keeps what it needs, never a second copy of the file), :attr:`skipped` counts the
    damaged lines and :meth:`warnings` names the first :data:`MAX_LINE_WARNINGS` and counts the rest.
    After :data:`MAX_DAMAGED_LINES` damaged lines it stops (:attr:`abandoned`): the file is not a
    history, and its records so far are not to be used either."""

    def __init__(self, source, host):
        self.source = source
        self.host = host
        self.valid = 0
        self.skipped = 0
        self.abandoned = False
        self._named = []
        self.cut = False  # the last line has no newline

    def _skip(self, number, why):
        self.skipped += 1
        if len(self._named) < MAX_LINE_WARNINGS:
            self._named.append("%s line %d: %s; skipped" % (self.source, number, why))
        self.abandoned = self.skipped > MAX_DAMAGED_LINES

    def _why(self, line):
        """Why ``line`` (text) is not a record, or the record."""
        text = line.strip()
        cut = "; the line is cut short" if self.cut else ""
        if text[0] != "{" or text[-1] != "}":  # not an object: no need to ask the parser (a flood is fast)
            what = ("the object is not closed" if text[0] == "{" else
                    "not an object" if text[0] in "[\"-0123456789tfn" else "not JSON")
            return "not a JSON record (%s%s)" % (what, cut)
        try:
            record = loads_json(text)
        except ValueError as exc:  # RecursionError too (files.loads_json): a line of 100,000 "["
            return "not a JSON record (%s%s)" % (exc.msg if hasattr(exc, "msg") else exc, cut)
        return _check_record(record, self.host) or record

    def records(self, lines):
        for number, line in enumerate(lines, 1):
            if isinstance(line, bytes):
                line = line.decode("utf-8", "replace")
            self.cut = bool(line) and not line.endswith("\n")
            if not line.strip():
                continue
            record = self._why(line)
            if isinstance(record, str):
                self._skip(number, record)
                if self.abandoned:
                    return
                continue
            self.valid += 1
            yield record

    def warnings(self, then="judged as if there were no history"):
        """The warnings of this pass; ``then`` says what the caller does with an abandoned file."""
        if self.abandoned:
            return self._named + ["%s: more than %d damaged lines (the first %d listed above): not a history "
                                  "file; %s" % (self.source, MAX_DAMAGED_LINES, len(self._named), then)]
        if self.skipped <= len(self._named):
            return list(self._named)
        return self._named + ["%s: %d more damaged lines skipped (%d in all, the first %d listed above)" % (
            self.source, self.skipped - len(self._named), self.skipped, len(self._named))]


def _lines_of(data):
    """The lines of ``data`` (bytes), each with its newline, one at a time."""
    start, size = 0, len(data)
    while start < size:
        end = data.find(b"\n", start)
        end = size if end < 0 else end + 1
        yield data[start:end]
        start = end


def parse_lines(lines, source="history", host=None):
    """``(records, warnings)`` of the lines of a history file. A line that is not a complete,
    valid record (cut short by a crash, garbage, nested too deeply, another host's, another format)
    is skipped with a warning naming ``source`` and the line number, the first
    :data:`MAX_LINE_WARNINGS` of them, then one counting the rest; blank lines are ignored."""
    reader = _Reader(source, host)
    records = list(reader.records(lines))
    return ([] if reader.abandoned else records), reader.warnings()


def _source(path):
    return "history file %s" % path


def _load(path):
    """``(bytes, warnings)`` of the history file at ``path`` read by ``files.read_bytes``: ``b""``
    and no warning when it is missing, ``None`` and the reason when it cannot or may not be read."""
    try:
        return read_bytes(path, MAX_FILE_BYTES), []
    except FileNotFoundError:
        return b"", []
    except FileRefused as exc:
        return None, ["%s cannot be read: it %s; judged as if there were no history" % (_source(path), exc.why)]
    except (IOError, OSError) as exc:
        return None, ["%s cannot be read (%s); judged as if there were no history" % (
            _source(path), exc.strerror or exc)]


def read_history(path, host=None):
    """``(records, warnings)`` of the history file at ``path``, oldest first; a missing file is no
    history, one that is not a regular file, is reached through a link or is larger than
    :data:`MAX_FILE_BYTES` is refused with a warning (and no records)."""
    data, warnings = _load(path)
    if not data:
        return [], warnings
    return parse_lines(_lines_of(data), source=_source(path), host=host)


# ---------------------------------------------------------------------------
# comparing
# ---------------------------------------------------------------------------

def _index(rows):
    out = {}
    order = []
    for rule, subject, status, observed in rows:
        key = (rule, subject)
        if key not in out:
            out[key] = (status, observed)
            order.append(key)
    return out, order


#: rule id prefix of what validate.yml measures: an audit measures nothing (its VAL findings are not
#: applicable), so VAL findings are compared only between two records that both measured
_MEASURED_PREFIX = AREA_PREFIX["validation"] + "-"


def _measured(index):
    return any(rule.startswith(_MEASURED_PREFIX) and status != "not_applicable" for (rule, unused), (status, unused2)
               in index.items())


def _without_measurements(index, order):
    keep = [key for key in order if not key[0].startswith(_MEASURED_PREFIX)]
    return dict((key, index[key]) for key in keep), keep


def boot_relation(before, after):
    """``same`` (both boot ids known and equal), ``reboot`` (known and different) or ``unknown``."""
    if isinstance(before, str) and before and isinstance(after, str) and after:
        return "same" if before == after else "reboot"
    return "unknown"


def _summary_text(changes):
    """``since the audit of <time> (same boot): 1 new fail, 2 values changed`` (``no change``)."""
    previous = changes["previous"]
    if previous is None:
        return "first audit in the history: nothing to compare with"
    boot = {"same": "same boot",
            "reboot": "across a reboot: boot id %s, now %s" % (previous.get("boot_id"), changes.get("boot_id")),
            "unknown": "boot unknown: a boot id is missing"}[changes["boot"]]
    counts = changes["counts"]
    words = (("new_fails", "new fail", "new fails"), ("resolved", "resolved", "resolved"),
             ("status_changed", "other status change", "other status changes"),
             ("values_changed", "value changed", "values changed"))
    parts = ["%d %s" % (counts[kind], one if counts[kind] == 1 else many) for kind, one, many in words if counts[kind]]
    return "since the audit of %s (%s): %s" % (previous.get("time"), boot, ", ".join(parts) or "no change")


def compare(previous, current):
    """What changed from record ``previous`` (``None``: no earlier audit) to record ``current``.

    Per rule and subject: ``new_fails`` (now fail, before not, or not reported), ``resolved``
    (fail before; now pass, waived, not applicable or no longer reported), ``status_changed``
    (any other status move, a subject appearing or disappearing included) and ``values_changed``
    (same status, another observed value). The VAL findings (what validate.yml measured) are compared
    only when both records measured: an audit between two validate runs moves none of them. Each item: ``rule``, ``subject``, ``status_before``,
    ``status_after``, ``observed_before``, ``observed_after``. ``boot`` says whether both audits
    saw the same boot. ``last_change`` is the time since which the statuses are as they are now:
    this audit's when a status moved (or there is no earlier audit), else the earlier record's
    (values that move with load, such as free memory, do not count)."""
    changes = dict((kind, []) for kind in CHANGE_KINDS)
    changes.update(previous=None, boot=None, boot_id=current.get("boot_id"))
    if previous is None:
        changes["last_change"] = current["time"]
    else:
        changes["previous"] = {"time": previous.get("time"), "boot_id": previous.get("boot_id"),
                               "collection_version": previous.get("collection_version")}
        changes["boot"] = boot_relation(previous.get("boot_id"), current.get("boot_id"))
        before, before_order = _index(previous["findings"])
        after, after_order = _index(current["findings"])
        if not (_measured(before) and _measured(after)):
            # an audit beside a validate run: the measurements are neither resolved nor new
            before, before_order = _without_measurements(before, before_order)
            after, after_order = _without_measurements(after, after_order)
        for key in after_order + [k for k in before_order if k not in after]:
            old = before.get(key)
            new = after.get(key)
            status_before, observed_before = old if old else (None, None)
            status_after, observed_after = new if new else (None, None)
            item = {"rule": key[0], "subject": key[1], "status_before": status_before, "status_after": status_after,
                    "observed_before": observed_before, "observed_after": observed_after}
            if status_before != status_after:
                if status_after == "fail":
                    kind = "new_fails"
                elif status_before == "fail" and status_after in _RESOLVED:
                    kind = "resolved"
                else:
                    kind = "status_changed"
            elif old and new and observed_before != observed_after:
                kind = "values_changed"
            else:
                continue
            changes[kind].append(item)
        moved = any(changes[kind] for kind in ("new_fails", "resolved", "status_changed"))
        changes["last_change"] = current["time"] if moved else (
            previous.get("last_change") if epoch(previous.get("last_change")) is not None else previous.get("time"))
    changes["counts"] = dict((kind, len(changes[kind])) for kind in CHANGE_KINDS)
    changes["count"] = sum(changes["counts"].values())
    changes["last_change_timestamp"] = epoch(changes["last_change"])
    changes["summary"] = _summary_text(changes)
    # the words first, the lists last: report.json reads top down
    order = ("summary", "previous", "boot", "boot_id", "last_change", "last_change_timestamp", "count", "counts")
    return dict([(key, changes[key]) for key in order] + [(kind, changes[kind]) for kind in CHANGE_KINDS])


def fleet_summary(by_host):
    """Totals over ``{host: changes}`` (hosts without history included as ``first``)."""
    out = {"hosts": len(by_host), "hosts_compared": 0, "hosts_first_audit": 0, "hosts_changed": 0,
           "hosts_rebooted": 0, "hosts_with_new_fails": 0, "hosts_with_error": 0}
    out.update((kind, 0) for kind in CHANGE_KINDS)
    changed = []
    for name in sorted(by_host):
        changes = by_host[name]
        if not isinstance(changes, dict) or changes.get("error"):
            out["hosts_with_error"] += 1
            continue
        if changes.get("previous") is None:
            out["hosts_first_audit"] += 1
            continue
        out["hosts_compared"] += 1
        out["hosts_rebooted"] += changes.get("boot") == "reboot"
        out["hosts_with_new_fails"] += bool(changes["counts"]["new_fails"])
        for kind in CHANGE_KINDS:
            out[kind] += changes["counts"][kind]
        if changes["count"]:
            out["hosts_changed"] += 1
            changed.append(name)
    out["changed_hosts"] = changed
    return out


# ---------------------------------------------------------------------------
# the running boot, for the rules
# ---------------------------------------------------------------------------

def earlier_in_boot(records, boot_id, source=None, rules=None):
    """What the audits of the running boot saw, for ``facts["history"]`` (PCI-008 reads it).

    ``{"boot_id", "source", "audits", "first", "last", "reason", "earlier": {fact: {subject:
    [{"time", "value"}]}}}``: per name of ``rules`` (``{name: (rule id, ...)}``, the catalogue's
    ``history_values()``: the rules' ``history_as``; none by default), the
    values each subject had at the earlier audits with the same boot id, oldest first, a value
    listed again only when it changed. ``reason`` says why no audit can be matched to this boot.

    For the counter rules (``derive_counters.py``): ``counters`` (``{name: [[time, value]]}``, the
    counter values the audits of this boot recorded, oldest first) and ``other_boot`` (the time of
    the newest audit of another boot, or ``None``: the counters restarted since)."""
    rules = rules or {}
    out = {"boot_id": boot_id if isinstance(boot_id, str) and boot_id else None, "source": source,
           "audits": 0, "first": None, "last": None, "reason": None,
           "earlier": dict((fact, {}) for fact in rules), "counters": {}, "other_boot": None}
    if out["boot_id"] is None:
        out["reason"] = "this boot's id is unknown (fact kernel.boot_id), so no earlier audit can be matched to it"
        return out
    wanted = {}
    for fact, rule_ids in rules.items():
        for rule_id in rule_ids:
            wanted[rule_id] = fact
    for record in records:
        if record.get("boot_id") != out["boot_id"]:
            out["other_boot"] = record["time"]
            continue
        out["audits"] += 1
        for name, value in (record.get("counters") or {}).items():
            out["counters"].setdefault(name, []).append([record["time"], value])
        out["first"] = out["first"] or record["time"]
        out["last"] = record["time"]
        for rule, subject, status, observed in record["findings"]:
            fact = wanted.get(rule)
            if fact is None or subject is None or observed is None or status in ("unknown", "not_applicable"):
                continue
            seen = out["earlier"][fact].setdefault(subject, [])
            if not seen or seen[-1]["value"] != observed:
                seen.append({"time": record["time"], "value": observed})
    return out


def boot_id_of(facts):
    """The host's boot id (fact ``kernel.boot_id``), ``None`` when not gathered."""
    kernel = facts.get("kernel") if isinstance(facts, dict) else None
    boot_id = kernel.get("boot_id") if isinstance(kernel, dict) else None
    return boot_id if isinstance(boot_id, str) and boot_id else None


def with_history(facts, history_dir, host, now=None, rules=None):
    """``(facts, warnings)``: a shallow copy of ``facts`` with ``history`` (what the audits earlier in
    this boot saw, from ``host``'s file in ``history_dir``) for the rules (PCI-008, the counter
    rules); never raises. ``history.now`` is the time of this judgement (``now``, default the
    current time), what the counter rules measure their window back from.

    Used where a host is judged: ``baseline_evaluate`` on the controller, the self-audit runner on
    the host. ``rules``: as :func:`earlier_in_boot`'s."""
    now = _time_text(now if now is not None else datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0))
    try:
        path = history_path(history_dir, host)
    except HistoryError as exc:
        return dict(facts, history={"boot_id": boot_id_of(facts), "source": None, "audits": 0, "first": None,
                                    "last": None, "reason": str(exc), "earlier": {}, "counters": {},
                                    "other_boot": None, "now": now}), [str(exc)]
    data, warnings = _load(path)
    reader = _Reader(_source(path), host)
    # the records stream through earlier_in_boot: the file is held once, as bytes
    records = reader.records(_lines_of(data or b""))
    history = earlier_in_boot(records, boot_id_of(facts), source=path, rules=rules)
    for dummy in records:  # an unknown boot reads none of them: the damaged lines are still named
        pass
    if reader.abandoned:  # not a history: none of it is evidence
        history = earlier_in_boot([], boot_id_of(facts), source=path, rules=rules)
    history["now"] = now
    return dict(facts, history=history), warnings + reader.warnings()


# ---------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------

def _rewrite(path, lines):
    """Replace ``path`` by a file of ``lines`` (encoded records)."""
    # atomic_write replaces a link at ``path`` with the file, never writes through it
    atomic_write(path, "".join(lines))


#: Flags of the append: never through a link, never blocking on a FIFO or a device
_APPEND_FLAGS = (os.O_WRONLY | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
                 | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))


def _append(path, line, create):
    """Append ``line`` to the regular file ``path`` with one write; ``create``: the file must not
    exist yet (``O_EXCL``: a link or anything else put there since is an error, never followed)."""
    fd = os.open(path, _APPEND_FLAGS | (os.O_CREAT | os.O_EXCL if create else 0), 0o644)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise FileRefused(path, "is not a regular file (changed since it was read); not written")
        if create:
            os.fchmod(fd, 0o644)
        os.write(fd, line.encode("ascii"))
    finally:
        os.close(fd)


def _set_aside(path):
    """Rename the refused ``path`` (a link, a FIFO, a device, a directory, a file over the cap or
    not a history) to ``.<name>`` + :data:`REFUSED_SUFFIX` in the same directory, replacing an
    earlier one (never followed, never read); returns the new name. Raises ``OSError`` when it
    cannot be moved (a directory over a non-empty one)."""
    aside = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + REFUSED_SUFFIX)
    try:
        if not stat.S_ISDIR(os.lstat(aside).st_mode):
            os.unlink(aside)
    except FileNotFoundError:
        pass
    os.rename(path, aside)
    return aside


def record_audit(directory, host, record, keep=DEFAULT_KEEP):
    """Append ``record`` to ``host``'s history in ``directory`` and prune it to the last ``keep``
    records, under a lock on the directory. Returns ``(previous, changes, warnings)``: the last
    valid record before this one (``None`` when none), :func:`compare`'s result with
    ``last_change`` stored in the new record, and the warnings of reading the file.

    The file is read by ``files.read_bytes`` (at most :data:`MAX_FILE_BYTES`, a regular file not
    reached through a link, never blocking); one that is refused is renamed aside
    (:func:`_set_aside`, a warning says so) and the history starts afresh with this record. The
    file is appended to with one write (``O_NOFOLLOW``) while it holds fewer than ``keep`` valid
    lines, and rewritten (temporary file, rename) when it has to be pruned or held damaged lines.
    Raises ``OSError`` when the directory or the file cannot be read or written (the file is then
    left as it is)."""
    keep = max(1, int(keep))
    path = history_path(directory, host)
    base = os.path.dirname(path)
    os.makedirs(base, exist_ok=True)
    warnings = []
    with DirectoryLock(base):
        try:
            data, exists = read_bytes(path, MAX_FILE_BYTES), True
        except FileNotFoundError:
            data, exists = b"", False
        except FileRefused as exc:
            try:
                aside = _set_aside(path)
            except OSError as problem:
                raise HistoryError("%s cannot be read: it %s, and cannot be moved aside (%s); no history kept" % (
                    _source(path), exc.why, problem.strerror or problem))
            warnings.append("%s cannot be read: it %s; set aside as %s and started afresh" % (
                _source(path), exc.why, aside))
            data, exists = b"", False
        reader = _Reader(_source(path), host)
        # the last keep records only: a file of many small records is never held twice
        records = collections.deque(reader.records(_lines_of(data)), maxlen=keep)
        size = len(data)
        del data
        if reader.abandoned:
            aside = _set_aside(path)
            warnings.extend(reader.warnings(then="set aside as %s and started afresh" % aside))
            records.clear()
            reader.valid = reader.skipped = 0
            exists = False
        else:
            warnings.extend(reader.warnings())
        # a last line without its newline (cut short, or edited by hand) would swallow the append
        damaged = bool(reader.skipped) or (exists and reader.cut)
        previous = records[-1] if records else None
        changes = compare(previous, record)
        record = dict(record, last_change=changes["last_change"])
        line = encode(record)
        if damaged or reader.valid + 1 > keep or size + len(line) > MAX_FILE_BYTES:
            kept = list(records)
            count = _rewrite_within_cap(path, kept[max(0, len(kept) - keep + 1):] + [record], warnings)
        else:
            _append(path, line, create=not exists)
            count = reader.valid + 1
    changes["records"] = count
    return previous, changes, warnings


def _rewrite_within_cap(path, records, warnings):
    """Rewrite ``path`` with ``records`` (the last one this audit's), dropping the oldest while
    they would make a file over :data:`MAX_FILE_BYTES`: the tool never writes a history it would
    refuse to read. Returns the records written; a warning says when any were dropped."""
    lines = [encode(record) for record in records]
    total = sum(len(line) for line in lines)
    first = 0
    while total > MAX_FILE_BYTES and first < len(lines) - 1:
        total -= len(lines[first])
        first += 1
    if first:
        warnings.append("%s: %d records would be larger than %d bytes, the most a history file may hold; the %d "
                        "oldest dropped (keep fewer records: gpuhost_history_keep, gpuhost_self_audit_history_keep)"
                        % (_source(path), len(lines), MAX_FILE_BYTES, first))
    _rewrite(path, lines[first:])
    return len(lines) - first


def record_report(report, boot_ids, directory, keep=DEFAULT_KEEP, counters=None):
    """Append one record per host of ``report`` (the report.json document) that has findings to
    its history in ``directory``, and put what changed since its previous record into the document:
    ``hosts.<name>.changes`` (:func:`compare`, plus ``records``) and the fleet totals in ``changes``
    (:func:`fleet_summary`). ``boot_ids`` maps host names to the boot id their audit saw, ``counters``
    to the counter values it read (the host part's ``counters``). A host whose history cannot be
    written gets ``changes: {"error": ...}``. Returns the warnings."""
    warnings = []
    # a stored report.json too (any schema), each host expanded when it is read; changes go into ``report``
    read = expand_document(report, lazy=True)
    time = read.get("generated")
    if epoch(time) is None:
        time = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
    by_host = {}
    for name, seen in read.get("hosts", {}).items():
        if not isinstance(seen, dict) or not seen.get("findings"):
            continue  # unreachable, or failed before any finding: nothing seen, nothing to keep
        record = make_record(name, seen["findings"], time, boot_id=(boot_ids or {}).get(name),
                             collection_version=read.get("collection_version"), profile=seen.get("profile"),
                             state=seen.get("state") or "audited", counters=(counters or {}).get(name),
                             prove=seen.get("prove"))
        try:
            dummy, changes, problems = record_audit(directory, name, record, keep)
        except (HistoryError, IOError, OSError, RecursionError) as exc:  # never the report's end
            message = "history of host %s not kept in %s: %s" % (name, directory, exc)
            warnings.append(message)
            changes = {"error": message}
        else:
            warnings.extend(problems)
        by_host[name] = changes
    # added through report.update_hosts: a stored document's host read is a copy (report.StoredHosts)
    update_hosts(report, dict((name, {"changes": changes}) for name, changes in by_host.items()))
    summary = fleet_summary(by_host)
    summary["hosts_not_recorded"] = len(report.get("hosts", {})) - len(by_host)
    report["changes"] = summary
    return warnings
