# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the fixes delivered: ``remediate.yml`` with ``gpuhost_prove`` measures the host before and after
its fixes (``host_measure``, the validate measurements, ``repeats`` runs in a row each time); this turns the
two measurements into figures, their change and whether the change exceeds the measurement's own noise.

A figure is one number a measurement gives (the lowest and the median CPU clock under load, a NUMA node's
memory bandwidth, a GPU's copy bandwidth, NCCL's bus bandwidth, a site workload's figure). Per figure:
the median of each phase's runs, the change (after - before, and in percent of before), and the noise:
the largest spread (highest - lowest) of one phase's runs. A change no larger than the noise is said as
``within noise``; with one run per phase the noise is not known and the change is said without it.

Standard library only, Python 3.8+ (the judge's module set).
"""

from __future__ import absolute_import, division, print_function

from statistics import median

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_validation import _num, measure_runs

__metaclass__ = type

#: at most this many figures per host (a host with 512 CPUs has 2 CPU figures, not 512; 8 GPUs have 16 copy
#: figures): the rest are left out and counted
MAX_FIGURES = 64


def _ok(section):
    return section if isinstance(section, dict) and section.get("status") == "ok" else None


def _node_key(key):
    return (0, int(key), "") if str(key).isdigit() else (1, 0, str(key))


def run_figures(run):
    """``[(key, label, unit, rule, higher_is_better, value)]`` of one measurement run (a mapping with the keys of
    ``derive_validation.MEASURE_KEYS``, as ``host_measure`` returns them); a measurement that is not ``ok`` gives none."""
    run = run if isinstance(run, dict) else {}
    out = []
    cpu = _ok(run.get("cpu_freq"))
    if cpu is not None:
        clocks = [_num((entry or {}).get("observed_khz")) for entry in (cpu.get("cpus") or {}).values()
                  if isinstance(entry, dict)] if isinstance(cpu.get("cpus"), dict) else []
        clocks = [khz / 1000.0 for khz in clocks if khz is not None]
        if clocks:
            out.append(("cpu_freq/lowest", "lowest CPU clock under load", "MHz", "VAL-001", True, min(clocks)))
            out.append(("cpu_freq/median", "median CPU clock under load", "MHz", "VAL-001", True, median(clocks)))
    mem = _ok(run.get("mem_bw"))
    if mem is not None:
        for group, rule in (("nodes", "VAL-003"), ("cross", "VAL-004")):
            entries = mem.get(group) if isinstance(mem.get(group), dict) else {}
            for key in sorted(entries, key=_node_key):
                entry = entries[key] if isinstance(entries[key], dict) else {}
                value = _num(entry.get("bandwidth_mbs")) if entry.get("status") == "ok" else None
                if value is None:
                    continue
                if group == "cross":
                    label = "node %s CPUs to node %s memory" % tuple((str(key).split("->") + ["?"])[:2])
                else:
                    label = "memory bandwidth (one unbound run)" if key == "all" else "node %s memory bandwidth" % key
                out.append(("mem_bw/%s" % key, label, "GB/s", rule, True, value / 1000.0))
    gpu = _ok(run.get("gpu_bw"))
    if gpu is not None:
        gpus = gpu.get("gpus") if isinstance(gpu.get("gpus"), dict) else {}
        for index in sorted(gpus, key=_node_key):
            entry = gpus[index] if isinstance(gpus[index], dict) else {}
            for field, what in (("h2d_gbs", "host to device"), ("d2h_gbs", "device to host")):
                value = _num(entry.get(field))
                if value is not None:
                    out.append(("gpu_bw/%s/%s" % (index, field[:3]), "GPU %s copy %s" % (index, what), "GB/s",
                                "VAL-005", True, value))
        pairs = [_num(pair.get("gbs")) for pair in gpu.get("pairs") or [] if isinstance(pair, dict)] \
            if isinstance(gpu.get("pairs"), list) else []
        pairs = [value for value in pairs if value is not None]
        if pairs:
            out.append(("gpu_bw/pairs/lowest", "lowest GPU to GPU copy", "GB/s", "VAL-006", True, min(pairs)))
    nccl = _ok(run.get("nccl"))
    if nccl is not None and _num(nccl.get("avg_busbw_gbs")) is not None:
        out.append(("nccl/avg_busbw", "NCCL all_reduce average bus bandwidth", "GB/s", "VAL-009", True,
                    _num(nccl["avg_busbw_gbs"])))
    for entry in run.get("workloads") or [] if isinstance(run.get("workloads"), list) else []:
        if not isinstance(entry, dict) or entry.get("status") != "ok" or _num(entry.get("value")) is None:
            continue
        lower = entry.get("lower_is_better") is True
        out.append(("workload/%s" % entry.get("name"), "workload %s" % entry.get("name"),
                    entry.get("unit") if isinstance(entry.get("unit"), str) else "",
                    "VAL-013" if lower else "VAL-012", not lower, _num(entry["value"])))
    return out


def _phase(runs):
    """``{key: (label, unit, rule, higher_is_better, [values])}`` over the runs of one phase, in first-seen order."""
    out = {}
    order = []
    for run in runs:
        for key, label, unit, rule, higher, value in run_figures(run):
            if key not in out:
                out[key] = (label, unit, rule, higher, [])
                order.append(key)
            out[key][4].append(value)
    return out, order


def _round(value):
    return None if value is None else round(value, 3)


def compare_figure(before, after, higher_is_better=True):
    """One figure's ``{"before", "after", "change", "change_pct", "noise", "verdict"}`` from its runs before and
    after (lists of numbers; either may be empty)."""
    entry = {"before": None, "after": None, "change": None, "change_pct": None, "noise": None, "verdict": "unknown"}
    if before:
        entry["before"] = median(before)
    if after:
        entry["after"] = median(after)
    spreads = [max(values) - min(values) for values in (before, after) if len(values) > 1]
    if spreads:
        entry["noise"] = max(spreads)
    if entry["before"] is not None and entry["after"] is not None:
        change = entry["change"] = entry["after"] - entry["before"]
        if entry["before"]:
            entry["change_pct"] = 100.0 * change / abs(entry["before"])
        if entry["noise"] is not None and abs(change) <= entry["noise"]:
            entry["verdict"] = "within noise"
        elif change == 0:
            entry["verdict"] = "unchanged"
        else:
            entry["verdict"] = "better" if (change > 0) == bool(higher_is_better) else "worse"
    return dict((key, _round(value) if key != "verdict" else value) for key, value in entry.items())


def prove_summary(prove, applied=None):
    """The ``prove`` part of a host's report from ``prove`` (``{"before": registered host_measure result,
    "after": the same after the fixes, "note": why the host was not measured}``, any of them missing) and
    ``applied`` (the rule ids whose fix ran). ``None`` when ``prove`` is not a mapping."""
    if not isinstance(prove, dict):
        return None
    fixes = sorted(set(rule for rule in applied or [] if isinstance(rule, str)))
    out = {"fixes": fixes, "repeats": {}, "figures": [], "left_out": 0, "reason": None}
    note = prove.get("note")
    if isinstance(note, str) and note:
        out["reason"] = note[:500]
        return out
    phases = {}
    reasons = []
    for phase in ("before", "after"):
        runs, why = measure_runs(prove.get(phase))
        out["repeats"][phase] = len(runs)
        phases[phase] = _phase(runs)
        if why:
            reasons.append("%s the fixes: %s" % (phase, why))
    if reasons:
        out["reason"] = "; ".join(reasons)
    (before, order), (after, after_order) = phases["before"], phases["after"]
    keys = order + [key for key in after_order if key not in before]
    for key in keys:
        label, unit, rule, higher, dummy = before.get(key) or after.get(key)
        entry = {"key": key, "label": label, "unit": unit, "rule": rule, "higher_is_better": higher}
        entry.update(compare_figure(before[key][4] if key in before else [],
                                    after[key][4] if key in after else [], higher))
        out["figures"].append(entry)
    if len(out["figures"]) > MAX_FIGURES:
        out["left_out"] = len(out["figures"]) - MAX_FIGURES
        out["figures"] = out["figures"][:MAX_FIGURES]
    return out
