# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``derived.validation``: what the host delivered in ``playbooks/validate.yml``'s measurements, set
beside the figure each is compared to, for the VAL rules (``rules/validation.yml``, docs/validation.md).

The measurements are the ``host_measure`` module's result, put into the facts document as its
``measure`` key by the ``validate`` role; an audit has no such key, and every VAL rule is then
not applicable (``measured`` false). Per measurement:

* ``cpus``: per sampled CPU the highest clock seen under all-core load against its rated clock, and
  the fraction (VAL-001);
* ``nodes``: memory bandwidth per NUMA node against the best node of the host (``peer_fraction``,
  VAL-002) and against the profile minimum (VAL-003);
* ``cross``: bandwidth with the CPUs of one node and the memory of another against the local
  figure of the CPUs' node (VAL-004);
* ``gpus``: host-to-device and device-to-host copy bandwidth per GPU against the theoretical rate of
  its PCIe link per direction (``facts/pci.py``'s ``link_rate_gbs`` of the GPU's capable generation,
  bounded by the slot's, and width) (VAL-005); ``pairs``: peer-to-peer copies against the slower of
  the two GPUs' link rates (VAL-006). Every GPU nvidia-smi lists has an element: one that nvbandwidth
  gave no figure for (not in its output) is ``unknown`` naming nvbandwidth, and so, with more than
  one GPU, is one that is in no peer-to-peer pair;
* ``dcgm_diag`` / ``dcgm_health`` (VAL-007/008) and ``nccl`` (all_reduce bus bandwidth against the
  slowest GPU link, VAL-009; ``unknown`` when all_reduce_perf ran on fewer GPUs than nvidia-smi lists);
  ``nccl_check``: whether the all-reduce's results were correct by the tool's own check (``#wrong``, the
  out-of-bounds line, its exit status; VAL-010); ``gpu_bw_check``: whether nvbandwidth's copies were correct
  by its own pattern check and it did not abort (VAL-011). Where nvbandwidth (v0.10) prints no bus ids, its
  GPUs are matched to nvidia-smi's by PCI order (the runner sets ``CUDA_DEVICE_ORDER=PCI_BUS_ID``), and
  each such element says so;
* ``workloads``: per site workload (``host_measure``'s ``workloads``, docs/validation.md "Site workloads") its
  figure (``value``) against its ``floor``, with the unit and how the figure was read (VAL-012; VAL-013 for a
  ``lower_is_better`` workload, a time or a latency, which passes at or below it); one that gave
  no figure is ``unknown`` with the module's reason (killed after its timeout, the last line of a non-zero exit,
  what was expected of garbage output).

A measurement that did not run or could not be read becomes one element (or a null observation)
with the module's reason, so its rule is ``unknown`` saying why, never a pass. Pure, no I/O, never
raises on odd facts; Python 3.8+ (the self-audit bundle carries it, though it never measures).
"""

from __future__ import absolute_import, division, print_function

import math

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.pci import link_rate_gbs
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.docpath import get as _get

__metaclass__ = type

#: the parameters :func:`derive_validation` reads (every profile defines them)
PARAMS = ("val_cpu_clock_min_fraction", "val_mem_peer_min_fraction", "val_mem_min_mbs",
          "val_mem_cross_min_fraction", "val_gpu_copy_min_fraction", "val_gpu_p2p_min_fraction",
          "val_nccl_busbw_min_fraction")


def _dict(value):
    return value if isinstance(value, dict) else {}


def _num(value):
    """A finite number as ``float``; ``None`` for anything else (a bool, a string, NaN)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _ratio(part, whole):
    part, whole = _num(part), _num(whole)
    if part is None or whole is None or whole <= 0:
        return None
    return round(part / whole, 3)


def _order(key):
    text = str(key)
    return (0, int(text), text) if text.isascii() and text.isdigit() and len(text) < 19 else (1, 0, text)


def _not_run(section, what):
    """The reason a measurement has no figures: the module's reason, else that it did not run."""
    if not section:
        return "%s was not measured (not in host_measure's measurements)" % what
    return section.get("reason") or "%s: %s" % (what, section.get("status") or "no result")


def _mhz(khz):
    return None if khz is None else int(round(khz / 1000.0))


def _cpus(measure):
    section = _dict(measure.get("cpu_freq"))
    cpus = _dict(section.get("cpus"))
    if section.get("status") != "ok" or not cpus:
        return [{"cpu": "all", "observed_mhz": None, "rated_mhz": None, "rated_source": None, "fraction": None,
                 "detail": "CPU clock under load", "reason": _not_run(section, "the CPU clock under load")}]
    out = []
    for key in sorted(cpus, key=_order):
        entry = _dict(cpus[key])
        observed, rated = _num(entry.get("observed_khz")), _num(entry.get("rated_khz"))
        detail = "%s MHz under load of %s MHz rated (%s)" % (_mhz(observed), _mhz(rated), entry.get("rated_source")) \
            if rated is not None else "%s MHz under load, no rated clock" % _mhz(observed)
        out.append({"cpu": "cpu%s" % key, "observed_mhz": _mhz(observed), "rated_mhz": _mhz(rated),
                    "rated_source": entry.get("rated_source"), "fraction": _ratio(observed, rated),
                    "detail": detail, "reason": entry.get("reason")})
    return out


def _nodes(measure):
    section = _dict(measure.get("mem_bw"))
    nodes = _dict(section.get("nodes"))
    if section.get("status") != "ok" or not nodes:
        reason = _not_run(section, "memory bandwidth")
        return [{"node": "all", "bandwidth_mbs": None, "best_mbs": None, "peer_fraction": None, "tool": None,
                 "detail": "memory bandwidth", "reason": reason, "peer_reason": reason}], {}
    measured = dict((key, _num(_dict(entry).get("bandwidth_mbs"))) for key, entry in nodes.items()
                    if _dict(entry).get("status") == "ok")
    best_key = max(measured, key=lambda key: measured[key] or 0) if measured else None
    best = measured.get(best_key)
    out = []
    for key in sorted(nodes, key=_order):
        entry = _dict(nodes[key])
        value = measured.get(key)
        reason = entry.get("reason") if value is None else None
        if value is not None and len(measured) < 2:
            peer_reason = "only one NUMA node measured: no peer to compare with"
        else:
            peer_reason = reason
        label = "node%s" % key if str(key).isdigit() else "all CPUs (not bound to a node)"
        out.append({"node": label, "bandwidth_mbs": value, "best_mbs": best,
                    "peer_fraction": _ratio(value, best) if len(measured) >= 2 else None,
                    "tool": section.get("tool"), "reason": reason, "peer_reason": peer_reason,
                    "detail": "%s MB/s with %s%s" % (
                        None if value is None else int(round(value)), section.get("tool"),
                        "" if len(measured) < 2 else ", best node%s %d MB/s" % (best_key, int(round(best))))})
    return out, measured


def _cross(measure, local):
    section = _dict(_dict(measure.get("mem_bw")).get("cross"))
    out = []
    for key in sorted(section):
        entry = _dict(section[key])
        value = _num(entry.get("bandwidth_mbs")) if entry.get("status") == "ok" else None
        cpu_node = str(entry.get("cpu_node"))
        base = local.get(cpu_node)
        reason = entry.get("reason") if value is None else (
            None if base is not None else "node%s's own bandwidth was not measured: nothing to compare with" % cpu_node)
        out.append({"pair": "CPUs node%s, memory node%s" % (cpu_node, entry.get("mem_node")),
                    "bandwidth_mbs": value, "local_mbs": base, "fraction": _ratio(value, base), "reason": reason,
                    "detail": "%s MB/s against %s MB/s local" % (
                        None if value is None else int(round(value)), None if base is None else int(round(base)))})
    return out


def _norm_bus(value):
    """``00000000:99:00.0`` / ``0000:99:00.0`` / ``00000000:99:00`` -> ``0000:99:00.0`` (lower case)."""
    if not isinstance(value, str) or value.count(":") != 2:
        return None
    domain, bus, rest = value.strip().lower().split(":")
    if "." not in rest:
        rest += ".0"
    return "%04x:%s:%s" % (int(domain, 16), bus, rest) if all(c in "0123456789abcdef" for c in domain) and domain \
        else None


def _link_of(gpu, device):
    """``(gb/s per direction, label, reason)``: the theoretical rate of a GPU's capable link."""
    pcie = _dict(gpu.get("pcie"))
    gens = [g for g in (pcie.get("gen_max"), pcie.get("gen_host_max")) if isinstance(g, int) and not isinstance(g, bool)]
    width = pcie.get("width_max")
    if gens and width:
        rate = link_rate_gbs(min(gens), width)
        if rate:
            return rate, "Gen%d x%s" % (min(gens), width), None
    dev_pcie = _dict(_dict(device).get("pcie"))
    rate = link_rate_gbs(dev_pcie.get("link_cap_speed"), dev_pcie.get("link_cap_width"))
    if rate:
        return rate, "%s x%s" % (dev_pcie.get("link_cap_speed"), dev_pcie.get("link_cap_width")), None
    return None, None, "the GPU's PCIe link generation and width are unknown (nvidia-smi and lspci gave none)"


def _gpus(facts, measure):
    section = _dict(measure.get("gpu_bw"))
    smi = [g for g in (_get(facts, "nvidia", "gpus") or []) if isinstance(g, dict)]
    devices = dict((_norm_bus(d.get("address")), d) for d in (_get(facts, "pci", "devices") or [])
                   if isinstance(d, dict))
    by_bus = dict((_norm_bus(g.get("bus_id")), g) for g in smi)
    by_index = dict((str(g.get("index")), g) for g in smi)
    links = {}
    gpus_out = []
    measured = _dict(section.get("gpus"))
    if section.get("status") != "ok" or not measured:
        reason = _not_run(section, "GPU copy bandwidth")
        return ([{"gpu": "all", "h2d_gbs": None, "d2h_gbs": None, "link_gbs": None, "fraction": None,
                  "detail": "host<->device copy bandwidth", "reason": reason}],
                [{"pair": "all", "gbs": None, "link_gbs": None, "fraction": None, "detail": "peer-to-peer copies",
                  "reason": reason}], links)
    seen = {}  # id() of an nvidia-smi GPU -> the nvbandwidth index that measured it
    by_order, order_note = _pci_order(smi, measured)
    for key in sorted(measured, key=_order):
        entry = _dict(measured[key])
        bus = _norm_bus(entry.get("bus_id"))
        if by_order is not None:
            gpu = by_order.get(str(key)) or {}
        else:
            gpu = by_bus.get(bus) or (by_index.get(str(key)) if bus is None else None) or {}
        if gpu:
            seen.setdefault(id(gpu), str(key))
        bus = bus or _norm_bus(gpu.get("bus_id"))
        rate, label, reason = _link_of(gpu, devices.get(bus)) if gpu else (
            None, None, order_note or "GPU %s (%s) is not among nvidia-smi's GPUs: no link to compare with" % (
                key, bus))
        links[str(key)] = rate
        h2d, d2h = _num(entry.get("h2d_gbs")), _num(entry.get("d2h_gbs"))
        figures = [value for value in (h2d, d2h) if value is not None]
        worst = min(figures) if figures else None
        if worst is None:
            reason = "nvbandwidth gave no host<->device figure for GPU %s" % key
        # reason is None here only when both the figure and the link rate are known
        gpus_out.append({"gpu": "GPU%s %s" % (key, bus or ""), "h2d_gbs": h2d, "d2h_gbs": d2h, "link_gbs": rate,
                         "link": label, "fraction": _ratio(worst, rate), "reason": reason,
                         "detail": "H2D %s, D2H %s GB/s of %s GB/s per direction (%s)%s" % (
                             h2d, d2h, rate, label, "; " + order_note if by_order is not None and gpu else "")})
    # every GPU of the host is judged: one nvbandwidth did not report (a GPU it could not open, a run cut
    # down to some GPUs) is unknown naming the tool, never left out
    missing = []
    for gpu in smi:
        if id(gpu) in seen:
            continue
        bus = _norm_bus(gpu.get("bus_id"))
        name = "GPU %s (%s)" % (gpu.get("index"), bus)
        missing.append(name)
        rate, label, dummy = _link_of(gpu, devices.get(bus))
        gpus_out.append({"gpu": "GPU%s %s" % (gpu.get("index"), bus or ""), "h2d_gbs": None, "d2h_gbs": None,
                         "link_gbs": rate, "link": label, "fraction": None,
                         "reason": "nvbandwidth gave no figure for %s: it is not in nvbandwidth's output (%d GPUs "
                                   "there, %d listed by nvidia-smi)" % (name, len(measured), len(smi)),
                         "detail": "not in nvbandwidth's output; %s GB/s per direction (%s)" % (rate, label)})
    pairs_out = []
    for pair in section.get("pairs") or []:
        pair = _dict(pair)
        src, dst, value = str(pair.get("src")), str(pair.get("dst")), _num(pair.get("gbs"))
        rates = [links.get(src), links.get(dst)]
        rate = min(rates) if None not in rates else None
        pairs_out.append({"pair": "GPU%s -> GPU%s" % (src, dst), "gbs": value, "link_gbs": rate,
                          "fraction": _ratio(value, rate),
                          "reason": None if value is not None and rate is not None else
                          "no peer-to-peer figure or no link rate for GPU%s -> GPU%s" % (src, dst),
                          "detail": "%s GB/s of %s GB/s (the slower link)" % (value, rate)})
    if not pairs_out:
        cases = _dict(section.get("testcases"))
        why = "; ".join("%s: %s" % (name, _dict(case).get("error") or _dict(case).get("status"))
                        for name, case in sorted(cases.items()) if "device_to_device" in name)
        if len(measured) > 1 or len(smi) > 1:
            pairs_out.append({"pair": "all", "gbs": None, "link_gbs": None, "fraction": None,
                              "detail": "peer-to-peer copies",
                              "reason": "no peer-to-peer figure from nvbandwidth%s" % (": " + why if why else "")})
    else:
        pairs_out.extend(_unpaired(smi, seen, measured, section.get("pairs") or []))
    return gpus_out, pairs_out, links


def _pci_order(smi, measured):
    """nvbandwidth v0.10 prints no ``Device N: ... (bus id)`` lines: its GPUs are CUDA's indices, which the
    collection's runner orders by PCI bus id (``CUDA_DEVICE_ORDER=PCI_BUS_ID``), so index ``k`` is the ``k``-th
    of nvidia-smi's GPUs sorted by bus id. ``(None, None)`` when nvbandwidth named a bus id (they are used);
    ``({index: gpu}, note)`` when the counts agree; ``({}, reason)`` when they do not (no GPU is matched: the
    order of a host that lost a GPU says nothing of which one)."""
    if not measured or any(_norm_bus(_dict(entry).get("bus_id")) for entry in measured.values()):
        return None, None
    ordered = sorted((g for g in smi if _norm_bus(g.get("bus_id"))), key=lambda g: _norm_bus(g.get("bus_id")))
    if len(ordered) != len(measured) or not all(str(k).isdigit() and int(k) < len(ordered) for k in measured):
        return {}, ("nvbandwidth printed no bus ids and measured %d GPUs where nvidia-smi lists %d: its GPUs "
                    "cannot be matched by PCI order" % (len(measured), len(ordered)))
    return (dict((str(k), ordered[int(k)]) for k in measured),
            "bus id by PCI order (nvbandwidth printed none; CUDA_DEVICE_ORDER=PCI_BUS_ID)")


def _unpaired(smi, seen, measured, pairs):
    """An unknown element per GPU of the host (nvidia-smi's, else nvbandwidth's) that no peer-to-peer figure
    names: its peer copies were not measured, so VAL-006 cannot pass for it."""
    paired = set()
    for pair in pairs:
        pair = _dict(pair)
        if _num(pair.get("gbs")) is not None:
            paired.update((str(pair.get("src")), str(pair.get("dst"))))
    if smi:
        gpus = [(seen.get(id(gpu)), "GPU %s (%s)" % (gpu.get("index"), _norm_bus(gpu.get("bus_id")))) for gpu in smi]
    else:
        gpus = [(str(key), "GPU %s (%s)" % (key, _norm_bus(_dict(measured[key]).get("bus_id"))))
                for key in sorted(measured, key=_order)]
    out = []
    for key, name in gpus:
        if key is not None and key in paired:
            continue
        why = "it is not in nvbandwidth's output" if key is None else \
            "nvbandwidth printed no peer-to-peer figure from or to it (N/A: no peer access?)"
        out.append({"pair": "%s -> any" % name, "gbs": None, "link_gbs": None, "fraction": None,
                    "detail": "peer-to-peer copies of %s" % name,
                    "reason": "nvbandwidth gave no peer-to-peer figure for %s: %s" % (name, why)})
    return out


def _health_problems(section):
    """One line per entity and subsystem dcgmi health does not call healthy."""
    out = []
    for entity, detail in sorted(_dict(section.get("entities")).items()):
        for system, state in sorted(_dict(_dict(detail).get("systems")).items()):
            state = _dict(state)
            if state.get("health") != "healthy":
                out.append("%s %s: %s %s" % (entity, system, state.get("health"), state.get("message") or ""))
    return out


def _tool(measure, key, what):
    """``dcgmi diag`` / ``dcgmi health``: the overall verdict and what failed, or why there is none."""
    section = _dict(measure.get(key))
    ok = section.get("status") == "ok" and bool(section.get("overall"))
    problems = section.get("failed") if key == "dcgm_diag" else _health_problems(section)
    return {"name": section.get("command") or what, "overall": section.get("overall") if ok else None,
            "problems": [str(line).strip()[:300] for line in problems or []][:20],
            "reason": None if ok else _not_run(section, what),
            "command": section.get("command")}


def _nccl(measure, links, host_gpus):
    section = _dict(measure.get("nccl"))
    busbw = _num(section.get("avg_busbw_gbs")) if section.get("status") == "ok" else None
    rates = [rate for rate in links.values() if rate]
    slowest = min(rates) if rates else None
    ran = section.get("gpus")
    ran = ran if isinstance(ran, int) and not isinstance(ran, bool) else None
    reason = None
    if busbw is None:
        reason = _not_run(section, "NCCL all_reduce bus bandwidth")
    elif slowest is None:
        reason = "no GPU link rate to compare the bus bandwidth with (nvbandwidth did not run or no link is known)"
    elif ran is not None and ran < host_gpus:
        # an all-reduce of some GPUs says nothing of the paths to the others
        reason = "all_reduce_perf ran on %d of the %d GPUs nvidia-smi lists (-g %d): the all-reduce of every GPU " \
                 "was not measured" % (ran, host_gpus, ran)
    return {"name": section.get("command") or "all_reduce_perf", "busbw_gbs": busbw,
            "max_busbw_gbs": _num(section.get("max_busbw_gbs")), "link_gbs": slowest,
            "fraction": _ratio(busbw, slowest) if reason is None else None, "gpus": section.get("gpus"),
            "reason": reason,
            "out_of_bounds": section.get("out_of_bounds"),
            "detail": "average bus bandwidth %s GB/s of %s GB/s (slowest GPU link per direction)" % (busbw, slowest)}


def _nccl_check(measure):
    """Whether all_reduce_perf's own check of its results passed (VAL-010): every ``#wrong`` figure 0, the
    ``# Out of bounds values`` line ``0 OK`` and the tool's exit 0. ``problems`` says what failed (the sizes and
    counts); ``reason`` why it is unknown (the run gave no table, or checked nothing: ``-c 0``)."""
    section = _dict(measure.get("nccl"))
    name = section.get("command") or "all_reduce_perf"
    if section.get("status") != "ok":
        return {"name": name, "problems": None, "reason": _not_run(section, "NCCL all_reduce result check"),
                "detail": None}
    problems = []
    # nccl-tests before 2.13 print the largest error of the results (``error``, ``res``), not a count
    counted = section.get("wrong_column") in (None, "#wrong")
    for row in section.get("wrong") or []:
        if isinstance(row, dict):
            problems.append("%s %s at %s bytes (%s)" % (
                row.get("wrong") if counted else "largest error",
                "wrong elements" if counted else row.get("wrong"),
                row.get("size_bytes"), str(row.get("placement") or "").replace("_", "-")))
    if section.get("out_of_bounds_ok") is False:
        problems.append("Out of bounds values : %s FAILED" % section.get("out_of_bounds"))
    exit_status = section.get("exit_status")
    if isinstance(exit_status, int) and not isinstance(exit_status, bool) and exit_status != 0:
        problems.append("all_reduce_perf exited %d after printing its table (it exits non-zero when its check "
                        "failed)" % exit_status)
    if not problems and not section.get("checked"):
        return {"name": name, "problems": None, "detail": None,
                "reason": "all_reduce_perf did not check its results (#wrong is N/A in every row: run it without -c 0)"}
    return {"name": name, "problems": problems, "reason": None,
            "detail": "; ".join(problems) if problems else "every #wrong figure 0, out of bounds values 0 OK"}


#: what each kind of nvbandwidth failure means (measure.nvbandwidth_failure) and its severity for VAL-011
NVB_FAILURES = {
    "data_check": ("a copy returned wrong data (nvbandwidth's pattern check failed)", "critical"),
    "assert": ("nvbandwidth aborted on a failed check", "high"),
    "cuda_error": ("nvbandwidth aborted on a CUDA error", "high"),
    "sanity_check": ("nvbandwidth's CUDA sanity check failed before any copy", "high"),
}


def _gpu_bw_check(measure):
    """Whether nvbandwidth's copies were correct and it ran to its end (VAL-011): ``problems`` names the
    testcase and quotes the line that says what failed (the data check's ``Invalid value when checking the
    pattern``, the ``ASSERT`` or CUDA error it aborted on); ``severities`` grades it (a data check that
    failed is critical: wrong data); ``reason`` says why it is unknown (nvbandwidth did not run)."""
    section = _dict(measure.get("gpu_bw"))
    name = section.get("command") or "nvbandwidth"
    failure = _dict(section.get("failure"))
    meaning, severity = NVB_FAILURES.get(failure.get("kind"), (None, None))
    if meaning:
        where = " in %s" % failure["testcase"] if failure.get("testcase") else ""
        lines = [str(line) for line in failure.get("lines") or [] if line != failure.get("line")]
        problem = "%s%s: %s%s" % (meaning, where, failure.get("line"), " (then: %s)" % "; ".join(lines) if lines else "")
        return {"name": name, "problems": [problem], "severities": [severity], "reason": None, "detail": problem}
    if section.get("status") != "ok":
        return {"name": name, "problems": None, "severities": [], "detail": None,
                "reason": _not_run(section, "nvbandwidth's check of its copies")}
    return {"name": name, "problems": [], "severities": [], "reason": None,
            "detail": "no data check failed and nvbandwidth ran every testcase to its end"}


def _fmt(value):
    """A figure as a finding shows it: ``123.4``, ``200`` (no ``.0``)."""
    return "%g" % value if isinstance(value, float) and abs(value) < 1e15 else str(value)


def _workloads(measure, learned=None):
    """One element per site workload: ``name``, ``value`` (the figure, ``None`` when unknown), ``floor`` (the
    least that passes, or with ``lower_is_better`` the most: the workload's own, else the one the profile learned
    from a golden host, ``learned`` = its parameter ``workload_floors``, name -> number), ``lower_is_better``
    (VAL-013, else VAL-012), ``unit``, ``how``, ``detail`` and ``reason``."""
    section = measure.get("workloads")
    if not isinstance(section, list):
        return []
    learned = learned if isinstance(learned, dict) else {}
    out = []
    for index, entry in enumerate(section):
        entry = _dict(entry)
        name = entry.get("name")
        name = str(name)[:200] if name not in (None, "") else "workload %d" % (index + 1)
        floor, whose = _num(entry.get("floor")), ""
        if floor is None and _num(learned.get(name)) is not None:
            floor, whose = _num(learned.get(name)), " (learned)"
        unit = str(entry.get("unit") or "")[:40]
        suffix = " " + unit if unit else ""
        value = _num(entry.get("value")) if entry.get("status") == "ok" else None
        reason = None
        if value is None:
            reason = entry.get("reason") or "%s: %s" % (name, entry.get("status") or "no result")
        elif floor is None:
            reason = ("%s: no floor to compare %s%s with: the workload sets none and the profile learned none (learn.yml "
                      "with gpuhost_learn_workloads on a golden host)" % (name, _fmt(value), suffix))
        lower = entry.get("lower_is_better") is True
        figure = "no figure" if value is None else _fmt(value) + suffix
        detail = "%s, %s %s%s%s" % (figure, "at most" if lower else "floor", "none" if floor is None else _fmt(floor),
                                    suffix, whose)
        if value is not None and entry.get("how"):
            detail += ", read with %s" % str(entry.get("how"))[:200]
        out.append({"name": name, "value": value, "floor": floor, "lower_is_better": lower, "unit": unit,
                    "how": entry.get("how"),
                    "command": entry.get("command"), "seconds": entry.get("seconds"),
                    "detail": detail, "reason": None if reason is None else str(reason)[:500]})
    return out


#: the measurement keys of a ``host_measure`` result (one run)
MEASURE_KEYS = ("cpu_freq", "mem_bw", "gpu_bw", "dcgm_diag", "dcgm_health", "nccl", "workloads")


def measure_runs(result):
    """``(runs, reason)`` of a registered ``host_measure`` result: its ``runs`` (``repeats`` above 1) or the
    one run its measurement keys hold; ``reason`` says why there is none (a failed, unreachable or skipped
    task, its message)."""
    if not isinstance(result, dict):
        return [], "not measured"
    if result.get("unreachable") or result.get("failed"):
        return [], "host_measure did not complete: %s" % str(result.get("msg") or "no message")[:300]
    if result.get("skipped"):
        return [], "not measured"
    if isinstance(result.get("runs"), list):
        return [run for run in result["runs"] if isinstance(run, dict)], None
    run = dict((key, result[key]) for key in MEASURE_KEYS if key in result)
    return ([run], None) if run else ([], "host_measure returned no measurement")


def derive_validation(facts, params=None):
    """``derived.validation`` of ``facts`` (see the module docstring); of ``params`` only ``workload_floors`` is
    read (the floors learned from a golden host, for workloads without their own); the other rules compare with
    the parameters themselves. ``measured`` is false without a ``measure`` key."""
    learned = params.get("workload_floors") if isinstance(params, dict) else None
    measure = facts.get("measure") if isinstance(facts, dict) else None
    if not isinstance(measure, dict):
        return {"measured": False, "cpus": [], "nodes": [], "cross": [], "gpus": [], "pairs": [],
                "dcgm_diag": {}, "dcgm_health": {}, "nccl": {}, "nccl_check": {}, "gpu_bw_check": {}, "workloads": []}
    nodes, local = _nodes(measure)
    gpus, pairs, links = _gpus(facts, measure)
    return {"measured": True, "cpus": _cpus(measure), "nodes": nodes, "cross": _cross(measure, local),
            "gpus": gpus, "pairs": pairs,
            "dcgm_diag": _tool(measure, "dcgm_diag", "dcgmi diag"),
            "dcgm_health": _tool(measure, "dcgm_health", "dcgmi health"),
            "nccl": _nccl(measure, links, len([g for g in (_get(facts, "nvidia", "gpus") or [])
                                               if isinstance(g, dict)])),
            "nccl_check": _nccl_check(measure), "gpu_bw_check": _gpu_bw_check(measure),
            "workloads": _workloads(measure, learned)}
