# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""CPU facts: identity and topology, cpufreq policies, amd_pstate/intel_pstate, boost, cpuidle, SMT.

Per-CPU and per-policy values are summarised as counts per distinct value (docs/facts.md,
section ``cpu``) so that a 768-CPU host gives a document of the same size as a 8-CPU one.
Reads are kept to what the summary needs: idle state descriptions are read once per state
(from the first CPU that has it) and only ``disable`` is read for every CPU.

Pure parsers (:func:`parse_cpuinfo`, :func:`parse_cpulist`, :func:`format_cpulist`,
:func:`count_values`, :func:`boost_state`) never raise; :func:`gather` reads through a
:class:`host.root.Root`.
"""

from __future__ import absolute_import, division, print_function

import re

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import tuned
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import as_text

__metaclass__ = type

SUBSYSTEM = "cpu"
CPU_DIR = "/sys/devices/system/cpu"
CPUFREQ_DIR = CPU_DIR + "/cpufreq"

_CPUINFO_KEYS = frozenset(("processor", "vendor_id", "cpu family", "model", "model name", "physical id", "core id"))


def _int_or_none(text):
    try:
        return int(text.strip(), 10)
    except (ValueError, AttributeError):
        return None


def parse_cpuinfo(text):
    """``/proc/cpuinfo`` -> ``{"vendor", "family", "model", "model_name", "sockets", "cores", "threads"}``.

    One linear pass. ``vendor``, ``family``, ``model`` and ``model_name`` come from the first
    CPU that has them; ``threads`` counts ``processor`` entries; ``sockets`` counts distinct
    ``physical id`` and ``cores`` distinct (``physical id``, ``core id``) pairs. Values that
    the text does not contain (a non-x86 CPU, a truncated file) are ``None``.
    """
    result = {"vendor": None, "family": None, "model": None, "model_name": None,
              "sockets": None, "cores": None, "threads": None}
    text = as_text(text)
    if not text:
        return result
    processors = 0
    sockets = set()
    cores = set()
    physical = core = None
    first = {}
    for line in text.split("\n"):
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip()
        if key not in _CPUINFO_KEYS:
            continue
        value = value.strip()
        if key == "processor":
            if physical is not None and core is not None:
                cores.add((physical, core))
            physical = core = None
            processors += 1
        elif key == "physical id":
            physical = value
            sockets.add(value)
        elif key == "core id":
            core = value
        elif key not in first and value:
            first[key] = value
    if physical is not None and core is not None:
        cores.add((physical, core))
    result["vendor"] = first.get("vendor_id")
    result["model_name"] = first.get("model name")
    result["family"] = _int_or_none(first.get("cpu family"))
    result["model"] = _int_or_none(first.get("model"))
    result["threads"] = processors or None
    result["sockets"] = len(sockets) or None
    result["cores"] = len(cores) or None
    return result


_RANGE_RE = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+)/(\d+))?)?$")


def parse_cpulist(text):
    """Kernel cpulist (``0-31,64-95``, also ``0-15:2/4`` groups) -> sorted list of ints.

    An empty list is ``[]`` (``/sys/devices/system/cpu/offline`` with nothing offline);
    malformed text gives ``None``.
    """
    text = as_text(text)
    if text is None:
        return None
    text = text.strip()
    if not text:
        return []
    cpus = set()
    for part in text.split(","):
        match = _RANGE_RE.match(part.strip())
        if not match:
            return None
        start = int(match.group(1))
        end = int(match.group(2)) if match.group(2) is not None else start
        if end < start or end - start > 1 << 20:
            return None
        if match.group(3) is not None:
            used, size = int(match.group(3)), int(match.group(4))
            if size == 0 or used == 0 or used > size:
                return None
            cpus.update(cpu for cpu in range(start, end + 1) if (cpu - start) % size < used)
        else:
            cpus.update(range(start, end + 1))
    return sorted(cpus)


def format_cpulist(cpus):
    """Sorted CPU numbers -> kernel cpulist text (``[0, 1, 2, 5]`` -> ``0-2,5``)."""
    ordered = sorted(set(cpus))
    parts = []
    index = 0
    while index < len(ordered):
        start = end = ordered[index]
        while index + 1 < len(ordered) and ordered[index + 1] == end + 1:
            index += 1
            end = ordered[index]
        parts.append(str(start) if start == end else "%d-%d" % (start, end))
        index += 1
    return ",".join(parts)


def count_values(values):
    """Counts per distinct value, keys as strings; ``None`` values are left out."""
    counts = {}
    for value in values:
        if value is None:
            continue
        key = str(value)
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


def boost_state(global_boost, no_turbo, policy_boosts):
    """Whether frequency boost is on (docs/facts.md ``cpu.boost``).

    ``global_boost``: ``cpufreq/boost`` as int or ``None``; ``no_turbo``: intel_pstate's
    ``no_turbo`` as bool or ``None``; ``policy_boosts``: the per-policy ``boost`` ints read.
    The first source present decides; per-policy boost is on only when every policy has it.
    """
    if global_boost is not None:
        return global_boost != 0
    if no_turbo is not None:
        return not no_turbo
    if policy_boosts:
        return all(value != 0 for value in policy_boosts)
    return None


def _numeric_dirs(names, prefix):
    """``cpu12`` / ``state3`` / ``policy7`` names -> sorted [(number, name)]."""
    found = []
    for name in names:
        if name.startswith(prefix) and name[len(prefix):].isdigit():
            found.append((int(name[len(prefix):]), name))
    found.sort()
    return found


def _cpufreq(root):
    policies = _numeric_dirs(root.listdir(CPUFREQ_DIR, pattern="policy*"), "policy")
    driver, governor, epp, min_khz, max_khz, boosts = [], [], [], [], [], []
    governors = set()
    for _number, name in policies:
        base = CPUFREQ_DIR + "/" + name + "/"
        driver.append(root.read_value(base + "scaling_driver", SUBSYSTEM))
        governor.append(root.read_value(base + "scaling_governor", SUBSYSTEM))
        epp.append(root.read_value(base + "energy_performance_preference", SUBSYSTEM, optional=True))
        min_khz.append(root.read_int(base + "scaling_min_freq", SUBSYSTEM))
        max_khz.append(root.read_int(base + "scaling_max_freq", SUBSYSTEM))
        available = root.read_value(base + "scaling_available_governors", SUBSYSTEM, optional=True)
        if available:
            governors.update(available.split())
        boost = root.read_int(base + "boost", SUBSYSTEM, optional=True)
        if boost is not None:
            boosts.append(boost)
    summary = {
        "policies": len(policies),
        "driver": count_values(driver),
        "governor": count_values(governor),
        "epp": count_values(epp),
        "min_khz": count_values(min_khz),
        "max_khz": count_values(max_khz),
        "available_governors": sorted(governors),
    }
    return summary, boosts


def _cpuidle(root, cpu_dirs):
    base = CPU_DIR + "/cpuidle/"
    governor = root.read_value(base + "current_governor", SUBSYSTEM, optional=True)
    if governor is None:
        governor = root.read_value(base + "current_governor_ro", SUBSYSTEM, optional=True)
    result = {
        "driver": root.read_value(base + "current_driver", SUBSYSTEM, optional=True),
        "governor": governor,
        "states": [],
    }
    states = {}
    unreadable = {}
    for _cpu, cpu_name in cpu_dirs:
        idle_dir = CPU_DIR + "/" + cpu_name + "/cpuidle"
        for index, state_name in _numeric_dirs(root.listdir(idle_dir, pattern="state*"), "state"):
            state_dir = idle_dir + "/" + state_name + "/"
            state = states.get(index)
            if state is None:
                # descriptions are the same on every CPU: read them from the first one only
                state = states[index] = {
                    "index": index,
                    "name": root.read_value(state_dir + "name", SUBSYSTEM),
                    "desc": root.read_value(state_dir + "desc", SUBSYSTEM, optional=True),
                    "latency_us": root.read_int(state_dir + "latency", SUBSYSTEM),
                    "residency_us": root.read_int(state_dir + "residency", SUBSYSTEM, optional=True),
                    "enabled_cpus": 0,
                    "disabled_cpus": 0,
                }
            # read quietly: one summary error per state instead of one per CPU
            saved = len(root.errors)
            disable = root.read_int(state_dir + "disable", SUBSYSTEM, optional=True)
            if disable is None:
                del root.errors[saved:]
                unreadable.setdefault(index, []).append(state_dir + "disable")
            elif disable:
                state["disabled_cpus"] += 1
            else:
                state["enabled_cpus"] += 1
    for index, paths in sorted(unreadable.items()):
        root.error(SUBSYSTEM, paths[0], "idle state %d: disable flag unreadable on %d CPU(s) (first: %s); "
                   "they are counted neither enabled nor disabled" % (index, len(paths), paths[0]))
    result["states"] = [states[index] for index in sorted(states)]
    return result


def gather(root):
    """The ``cpu`` section of docs/facts.md for ``root`` (a :class:`host.root.Root`)."""
    info = parse_cpuinfo(root.read_text("/proc/cpuinfo", SUBSYSTEM))
    if info["vendor"] is None and root.exists("/proc/cpuinfo"):
        root.error(SUBSYSTEM, "/proc/cpuinfo", "no vendor_id line: not an x86 CPU, or the file is truncated or "
                   "garbled; vendor-specific rules cannot be judged")

    cpu_dirs = _numeric_dirs(root.listdir(CPU_DIR, SUBSYSTEM, pattern="cpu*"), "cpu")
    smt_active = root.read_int(CPU_DIR + "/smt/active", SUBSYSTEM, optional=True)
    cpufreq, policy_boosts = _cpufreq(root)
    amd_status = root.read_value(CPU_DIR + "/amd_pstate/status", SUBSYSTEM, optional=True)
    intel_status = root.read_value(CPU_DIR + "/intel_pstate/status", SUBSYSTEM, optional=True)
    no_turbo = root.read_int(CPU_DIR + "/intel_pstate/no_turbo", SUBSYSTEM, optional=True)
    no_turbo = None if no_turbo is None else no_turbo != 0
    global_boost = root.read_int(CPUFREQ_DIR + "/boost", SUBSYSTEM, optional=True)

    result = {
        "vendor": info["vendor"],
        "family": info["family"],
        "model": info["model"],
        "model_name": info["model_name"],
        "sockets": info["sockets"],
        "cores": info["cores"],
        "threads": info["threads"],
        "online": root.read_value(CPU_DIR + "/online", SUBSYSTEM),
        "smt": {
            "control": root.read_value(CPU_DIR + "/smt/control", SUBSYSTEM, optional=True),
            "active": None if smt_active is None else smt_active != 0,
        },
        "cpufreq": cpufreq,
        "amd_pstate": {"status": amd_status},
        "intel_pstate": {"status": intel_status, "no_turbo": no_turbo},
        "boost": boost_state(global_boost, no_turbo, policy_boosts),
        "cpuidle": _cpuidle(root, cpu_dirs),
        "tuned": tuned.gather(root),
    }
    return result
