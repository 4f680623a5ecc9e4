# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``derived.counters``: error counters judged by their increase over a window of the audit history.

Operators judge an error counter by how much it grew lately (an InfiniBand link that went down
three times in three hours), not by its value since boot. The facts hold the values now
(``health.counters``, ``nvidia.gpus[].ecc.volatile_corrected``); the judge's history
(``facts["history"]``, ``history.with_history``) holds the values the earlier audits of this boot
recorded (``history.make_record``'s ``counters``, from :func:`counter_values`). Per counter:

* the baseline is the oldest audit of this boot inside the window (``counter_window_hours``), or,
  when none is inside it, the newest one before it (the span is then longer than the window and
  the message says so: the span shown is always the real one);
* a reboot restarts every counter: only audits of the running boot count (the message says when
  an earlier boot was left out); a counter that went down within the boot (reset by hand, driver
  reloaded) is judged from the first audit after the drop;
* without an earlier audit of this boot there is no increase to judge: ``unknown`` with the reason.

Pure: no I/O, never raises on odd facts or history. :data:`COUNTERS` is the one binding of a
counter family to its counters and their threshold parameters; docs/rules.md documents the keys.
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.docpath import get as _get
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.isotime import epoch, iso

__metaclass__ = type

#: counter family -> ((counter, threshold parameter: the most increase accepted per window), ...)
COUNTERS = {
    "ib": (("link_downed", "ib_link_downed_max"), ("link_error_recovery", "ib_link_error_recovery_max"),
           ("symbol_error", "ib_symbol_error_max"), ("port_rcv_errors", "ib_port_rcv_errors_max")),
    "aer": (("correctable", "aer_correctable_max"),),
    "nvlink": (("replay", "nvlink_replay_max"), ("recovery", "nvlink_recovery_max"), ("crc", "nvlink_crc_max")),
    "ecc": (("corrected", "ecc_corrected_max"),),
}
#: the window parameter (hours)
WINDOW_PARAM = "counter_window_hours"
#: the parameters the counter rules read (every profile defines them)
PARAMS = (WINDOW_PARAM,) + tuple(param for family in COUNTERS.values() for unused, param in family)
#: separator of a history counter name: ``<family>|<subject>|<counter>``
SEP = "|"


def _list(value):
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _count(value):
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


# -- the values now ---------------------------------------------------------------------------

def _ib_ports(facts):
    """``[(subject, label, {counter: value}, error)]`` of the InfiniBand/RoCE ports."""
    address = dict((d.get("name"), d.get("pci_address")) for d in _list(_get(facts, "health", "rdma", "devices")))
    out = []
    for port in _list(_get(facts, "health", "counters", "ib")):
        subject = "%s/%s" % (port.get("device"), port.get("port"))
        values = port.get("counters") if isinstance(port.get("counters"), dict) else {}
        label = "%s port %s (%s)" % (port.get("device"), port.get("port"),
                                     address.get(port.get("device")) or "PCI function unknown")
        out.append((subject, label, dict((name, _count(values.get(name))) for name, unused in COUNTERS["ib"]),
                    port.get("error")))
    return out


def _aer_devices(facts, labels=None):
    out = []
    for dev in _list(_get(facts, "health", "counters", "aer")):
        label = (labels or {}).get(dev.get("address")) or "PCI function"
        out.append((dev.get("address"), label, {"correctable": _count(dev.get("correctable"))}, dev.get("error")))
    return out


def _nvlink_gpus(facts):
    section = _get(facts, "health", "counters", "nvlink")
    if not isinstance(section, dict):
        return []
    by_index = dict((g.get("index"), g) for g in _list(_get(facts, "nvidia", "gpus")))
    out = []
    for gpu in _list(section.get("gpus")):
        if not gpu.get("links"):
            continue  # no NVLink on this GPU (Not Supported): nothing counts
        smi = by_index.get(gpu.get("index")) or {}
        subject = smi.get("bus_id") or "GPU %s" % gpu.get("index")
        totals = gpu.get("totals") if isinstance(gpu.get("totals"), dict) else {}
        out.append((subject, "GPU %s, %s, %d NVLinks" % (gpu.get("index"), gpu.get("name"), gpu.get("links")),
                    dict((name, _count(totals.get(name))) for name, unused in COUNTERS["nvlink"]), None))
    return out


def _ecc_gpus(facts):
    out = []
    for gpu in _list(_get(facts, "nvidia", "gpus")):
        ecc = gpu.get("ecc") if isinstance(gpu.get("ecc"), dict) else {}
        if ecc.get("current") != "Enabled":
            continue  # ECC off or not supported: no corrected errors to count
        value = _count(ecc.get("volatile_corrected"))
        out.append((gpu.get("bus_id") or "GPU %s" % gpu.get("index"), "GPU %s, %s" % (gpu.get("index"), gpu.get("name")),
                    {"corrected": value},
                    None if value is not None else "nvidia-smi -q -x gives no volatile corrected ECC count"))
    return out


_SUBJECTS = (("ib", "ib_ports", _ib_ports), ("aer", "aer_devices", _aer_devices),
             ("nvlink", "nvlink_gpus", _nvlink_gpus), ("ecc", "ecc_gpus", _ecc_gpus))


def _pcie_labels(derived):
    """``{address: label}`` of the PCI functions ``derived.pcie`` names (GPUs, NICs, bridges on their paths)."""
    labels = {}
    for key in ("aer", "gpus", "nics"):
        for item in _list(_get(derived, "pcie", key)):
            if isinstance(item.get("address"), str) and isinstance(item.get("label"), str):
                labels.setdefault(item["address"], item["label"])
    return labels


def counter_values(facts):
    """``{"<family>|<subject>|<counter>": value}`` of every counter read now: what the history keeps
    of an audit for the counter rules of the next ones (``history.make_record``)."""
    facts = facts if isinstance(facts, dict) else {}
    out = {}
    for family, unused, subjects in _SUBJECTS:
        for subject, unused_label, values, unused_error in subjects(facts):
            for name, value in values.items():
                if value is not None:
                    out[SEP.join((family, str(subject), name))] = value
    return out


# -- judging the increase ---------------------------------------------------------------------

def span_text(seconds):
    """``3h``, ``2h30m``, ``45m``, ``2d4h``, ``40s``: how long an increase took, for the messages."""
    minutes = int(max(0, seconds) // 60)
    if minutes < 1:
        return "%ds" % int(max(0, seconds))
    days, rest = divmod(minutes, 1440)
    hours, mins = divmod(rest, 60)
    if days:
        return "%dd%s" % (days, "%dh" % hours if hours else "")
    if hours:
        return "%dh%s" % (hours, "%dm" % mins if mins else "")
    return "%dm" % mins


def _hours(value):
    return ("%g" % value) if isinstance(value, (int, float)) else str(value)


def _no_history_reason(history, window):
    """Why no counter of this host can be judged from ``history`` (``None`` when one may be)."""
    if not isinstance(history, dict):
        return ("no audit history to compare with (gpuhost_history_dir is not set): error counters are judged by "
                "their increase over %sh (counter_window_hours), not by their value since boot" % _hours(window))
    if history.get("reason"):
        return "audit history not usable: %s" % history["reason"]
    if epoch(history.get("now")) is None:
        return "the time of this audit is unknown, so no window can be measured"
    if not history.get("audits"):
        if history.get("other_boot"):
            return ("no earlier audit of this boot in the audit history: the counters restarted at the reboot after "
                    "the audit of %s; the increase is judged from the next audit on" % history["other_boot"])
        return "no earlier audit in the audit history (first audit): an increase needs two audits; judged from the next one on"
    return None


def _judge_counter(series, now, value, window_s, limit):
    """``(problem, reason, note)`` of one counter: ``series`` the ``[time, value]`` of the earlier
    audits of this boot, ``now`` (epoch) and ``value`` this audit's, ``limit`` the most increase accepted."""
    points = [(epoch(p[0]), p[1]) for p in series if isinstance(p, list) and len(p) == 2
              and epoch(p[0]) is not None and _count(p[1]) is not None]
    points.append((now, value))
    note = None
    start = 0
    for i in range(1, len(points)):
        if points[i][1] < points[i - 1][1]:
            start = i
    if start:
        if start == len(points) - 1:
            return None, "went down from %d to %d since the audit of %s (counter reset): judged from this audit on" % (
                points[-2][1], value, iso(points[-2][0])), None
        note = "reset since %s, judged from then" % iso(points[start][0])
    earlier = points[start:-1]
    if not earlier:
        return None, "not recorded by the earlier audits of this boot: judged from the next audit on", None
    inside = [p for p in earlier if p[0] >= now - window_s]
    base = inside[0] if inside else earlier[-1]
    increase = value - base[1]
    if limit is None or increase <= limit:
        return None, None, note
    text = "+%d in %s (%d at the audit of %s, %d now; at most +%d per %gh%s)" % (
        increase, span_text(now - base[0]), base[1], iso(base[0]), value, limit, window_s / 3600,
        "; " + note if note else "")
    return text, None, note


def _judge(family, subject, label, values, error, history, params, common):
    item = {"subject": subject, "label": label, "now": values, "increases": None, "reason": None}
    unreadable = [name for name, value in values.items() if value is None]
    if unreadable:
        item["reason"] = error or "%s unreadable" % ", ".join(unreadable)
        return item
    if common:
        item["reason"] = common  # the whole host's reason: _fold tells it once, with the values now
        return item
    window_s = float(params.get(WINDOW_PARAM)) * 3600
    now = epoch(history.get("now"))
    problems, reasons = [], []
    for name, param in COUNTERS[family]:
        series = (history.get("counters") or {}).get(SEP.join((family, str(subject), name)))
        problem, reason, unused = _judge_counter(series if isinstance(series, list) else [], now, values[name],
                                                 window_s, params.get(param))
        if problem:
            problems.append("%s %s" % (name, problem))
        elif reason:
            reasons.append("%s %s" % (name, reason))
    if problems or not reasons:
        if problems and history.get("other_boot"):
            problems.append("judged from this boot only (the audit of %s saw an earlier boot)" % history["other_boot"])
        item["increases"] = problems
    else:
        item["reason"] = "; ".join(reasons)
    return item


#: the subject of the one item that stands for every readable subject of a family when none can be
#: judged for a reason of the whole host (no history, first audit, a bad window): :func:`_fold`
ALL_SUBJECTS = "all"
#: what a family's subjects are, for the folded item's label
NOUNS = {"ib": "ports", "aer": "PCI functions", "nvlink": "GPUs", "ecc": "GPUs"}
#: subjects a folded item's label and its values name by name, at most
_NAMED = 4


def _names(names):
    shown = ", ".join(str(n) for n in names[:_NAMED])
    return shown + (" and %d more" % (len(names) - _NAMED) if len(names) > _NAMED else "")


def _now_summary(readable):
    """``link_downed 0 on all 2; correctable 7 on 0000:43:00.0, 0 on the other 29``: the values now
    of the ``readable`` items (``_judge``'s, every value a count), per counter, the non-zero ones by subject."""
    parts = []
    for name in readable[0]["now"]:
        nonzero = [(item["subject"], item["now"][name]) for item in readable if item["now"][name]]
        if not nonzero:
            parts.append("%s 0 on all %d" % (name, len(readable)))
            continue
        named = ", ".join("%d on %s" % (value, subject) for subject, value in nonzero[:_NAMED])
        more = len(nonzero) - _NAMED
        rest = len(readable) - len(nonzero)
        parts.append("%s %s%s%s" % (name, named, ", more on %d other(s)" % more if more > 0 else "",
                                    ", 0 on the other %d" % rest if rest else ""))
    return "; ".join(parts)


def _readable(item):
    """Every counter of ``item`` (``_judge``'s) was read: with a reason of the whole host, that is its reason."""
    return all(value is not None for value in item["now"].values())


def _fold(family, items, common):
    """``items`` of a family none of which can be judged for the host-wide reason ``common``: the
    unreadable ones as they are (each has its own reason), the readable ones as one item of subject
    :data:`ALL_SUBJECTS`, in the place of the first, naming them and their values now (a single one
    stays itself). The same unknown told once per subject would be a finding per port, function and
    GPU (30 and more on a GPU server) saying the same thing."""
    readable = [item for item in items if _readable(item)]
    if len(readable) == 1:
        readable[0]["reason"] = "%s (now: %s)" % (common, ", ".join("%s %d" % kv for kv in readable[0]["now"].items()))
    if len(readable) < 2:
        return items
    folded = {"subject": ALL_SUBJECTS,
              "label": "%d %s: %s" % (len(readable), NOUNS[family], _names([item["subject"] for item in readable])),
              "now": None, "increases": None,
              "reason": "%s (now: %s)" % (common, _now_summary(readable))}
    out = []
    for item in items:
        if not _readable(item):
            out.append(item)
        elif item is readable[0]:
            out.append(folded)
    return out


def derive_counters(facts, params, derived=None):
    """The ``derived.counters`` document (docs/rules.md): per family a list of ``{"subject", "label",
    "now" ({counter: value}), "increases" (the counters over their threshold, as ``+N in <span>``
    texts; empty when none), "reason" (why not judged)}``, and ``window_hours``. ``derived``: the
    ``derived`` keys computed before (``derived.pcie`` labels the PCI functions)."""
    facts = facts if isinstance(facts, dict) else {}
    params = params if isinstance(params, dict) else {}
    window = params.get(WINDOW_PARAM)
    history = facts.get("history")
    if isinstance(window, bool) or not isinstance(window, (int, float)) or window <= 0:
        common = "counter_window_hours is %r, not a positive number of hours" % (window,)
    else:
        common = _no_history_reason(history, window)
    out = {"window_hours": window}
    labels = _pcie_labels(derived)
    for family, key, subjects in _SUBJECTS:
        found = subjects(facts, labels) if family == "aer" else subjects(facts)
        items = [_judge(family, subject, label, values, error, history if isinstance(history, dict) else {},
                        params, common)
                 for subject, label, values, error in found]
        out[key] = _fold(family, items, common) if common else items
    return out
