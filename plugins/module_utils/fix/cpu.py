# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fix logic of ``gpuhost.baseline.cpu_power``: governor, EPP, boost and idle states.

Runtime settings are per-CPU (per cpufreq policy, per cpuidle state) sysfs writes; the
persisted form is a boot-time oneshot unit running a small generated shell script.

Kernel rules the plan follows (Documentation/admin-guide/pm/amd-pstate.rst and
intel_pstate.rst): with ``amd-pstate-epp`` or ``intel_pstate`` in active mode the
``performance`` governor holds EPP at ``performance`` and the kernel refuses other EPP
values under it (EBUSY; amd-pstate refuses any EPP write under it). So EPP is written
*before* the governor, only on policies whose governor is not yet ``performance``, and asking
for governor ``performance`` together with another EPP fails before anything is written.

Pure functions: :func:`check_name`, :func:`plan`, :func:`summarize`, :func:`group_writes`,
:func:`render_script`, :func:`render_unit`, :func:`script_settings`. :func:`read_state` and
:func:`apply` act through a :class:`fix.base.Host`.
"""

from __future__ import absolute_import, division, print_function

import json
import re
import shlex

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.cpu import (
    CPU_DIR, CPUFREQ_DIR, _numeric_dirs, count_values, format_cpulist)
from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.base import (
    UDEV_RELOAD, FixError, file_diff, printable, to_bytes, to_text)
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.persist import (
    CPU_SCRIPT_PATH as SCRIPT_PATH, CPU_SETTINGS_MARK as SETTINGS_MARK, CPU_UDEV_PATH as UDEV_PATH,
    CPU_UNIT_NAME as UNIT_NAME, CPU_UNIT_PATH as UNIT_PATH, CPU_WANTS_LINK as WANTS_LINK,
    cpu_script_settings as script_settings)
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import tuned as tuned_facts

__metaclass__ = type

#: Drivers whose performance governor pins EPP to "performance" and refuses other EPP writes.
EPP_PINNING_DRIVERS = ("amd-pstate-epp", "intel_pstate")

_NAME_RE = re.compile(r"^[a-z0-9_-]{1,64}$")


def check_name(option, value):
    """Governor and EPP names go into sysfs and into a shell script: plain words only."""
    if value is None:
        return None
    if not _NAME_RE.match(value):
        raise FixError("%s %s is not a governor/EPP name (lower-case letters, digits, '_' and '-')"
                       % (option, printable(value)))
    return value


def _int(text):
    try:
        return int((text or "").strip(), 10)
    except ValueError:
        return None


# -- reading ------------------------------------------------------------------------------------

def read_state(host):
    """Every attribute the plan needs, with its host path (``None`` values: file absent)."""
    state = {"policies": [], "boost": None, "idle": []}
    for number, name in _numeric_dirs(host.listdir(CPUFREQ_DIR, pattern="policy*"), "policy"):
        base = CPUFREQ_DIR + "/" + name + "/"
        available = host.read_attr(base + "scaling_available_governors", optional=True)
        epp_available = host.read_attr(base + "energy_performance_available_preferences", optional=True)
        state["policies"].append({
            "number": number,
            "name": name,
            "driver": host.read_attr(base + "scaling_driver", optional=True),
            "governor": host.read_attr(base + "scaling_governor", optional=True),
            "governor_path": base + "scaling_governor",
            "available_governors": available.split() if available else None,
            "epp": host.read_attr(base + "energy_performance_preference", optional=True),
            "epp_path": base + "energy_performance_preference",
            "available_epp": epp_available.split() if epp_available else None,
            "boost": host.read_attr(base + "boost", optional=True),
            "boost_path": base + "boost",
        })
    if host.exists(CPUFREQ_DIR + "/boost"):
        state["boost"] = {"kind": "cpufreq", "paths": [CPUFREQ_DIR + "/boost"],
                          "values": [host.read_attr(CPUFREQ_DIR + "/boost")]}
    elif host.exists(CPU_DIR + "/intel_pstate/no_turbo"):
        state["boost"] = {"kind": "no_turbo", "paths": [CPU_DIR + "/intel_pstate/no_turbo"],
                          "values": [host.read_attr(CPU_DIR + "/intel_pstate/no_turbo")]}
    else:
        with_boost = [p for p in state["policies"] if p["boost"] is not None]
        if with_boost:
            state["boost"] = {"kind": "policy", "paths": [p["boost_path"] for p in with_boost],
                              "values": [p["boost"] for p in with_boost]}
    for cpu, cpu_name in _numeric_dirs(host.listdir(CPU_DIR, pattern="cpu*"), "cpu"):
        idle_dir = CPU_DIR + "/" + cpu_name + "/cpuidle"
        for index, state_name in _numeric_dirs(host.listdir(idle_dir, pattern="state*"), "state"):
            base = idle_dir + "/" + state_name + "/"
            state["idle"].append({
                "cpu": cpu,
                "index": index,
                "name": host.read_attr(base + "name", optional=True),
                "latency": host.read_attr(base + "latency", optional=True),
                "latency_path": base + "latency",
                "disable": host.read_attr(base + "disable", optional=True),
                "disable_path": base + "disable",
            })
    return state


# -- deciding --------------------------------------------------------------------------------------

def _boost_on(kind, value):
    number = _int(value)
    if number is None:
        return None
    return number == 0 if kind == "no_turbo" else number != 0


def plan(state, governor=None, epp=None, boost=None, idle_latency_max_us=None):
    """Writes needed, in order: ``{"writes": [(path, old, new)], "warnings": [...], "unsupported": {...}}``.

    Everything is checked before anything is written: a governor or EPP the driver does not
    offer, an EPP the performance governor would refuse, an unreadable latency or disable flag
    raise :class:`FixError` naming the file.
    """
    governor = check_name("governor", governor)
    epp = check_name("epp", epp)
    writes = []
    warnings = []
    unsupported = {}
    policies = state["policies"]
    if (governor or epp) and not policies:
        raise FixError("no cpufreq policy under %s: no cpufreq driver is loaded (a VM, or a BIOS that keeps CPU "
                       "power control), so governor and EPP cannot be set" % CPUFREQ_DIR)
    if governor:
        for policy in policies:
            available = policy["available_governors"]
            if available is None:
                raise FixError("%s/%s/scaling_available_governors is missing or empty: cannot tell whether governor %s "
                               "exists; nothing was changed" % (CPUFREQ_DIR, policy["name"], governor))
            if governor not in available:
                raise FixError("governor %s is not offered by %s (driver %s): it offers %s; nothing was changed"
                               % (governor, policy["name"], policy["driver"], " ".join(available)))

    epp_writes = {}
    if epp:
        without = []
        for policy in policies:
            if policy["epp"] is None:
                without.append(policy)
                continue
            available = policy["available_epp"]
            if available is not None and epp not in available:
                raise FixError("EPP %s is not offered by %s (driver %s): it offers %s; nothing was changed"
                               % (epp, policy["name"], policy["driver"], " ".join(available)))
            pinning = policy["driver"] in EPP_PINNING_DRIVERS
            target_governor = governor or policy["governor"]
            if pinning and target_governor == "performance" and epp != "performance":
                raise FixError("EPP %s cannot be set on %s: with driver %s the performance governor holds EPP at "
                               "performance and the kernel refuses other values (EBUSY); ask for governor powersave "
                               "with this EPP, or EPP performance; nothing was changed"
                               % (epp, policy["name"], policy["driver"]))
            if policy["epp"] == epp:
                continue
            if pinning and policy["governor"] == "performance" and target_governor == "performance":
                # the kernel already holds EPP at performance and would answer EBUSY
                warnings.append("%s reads EPP %s under the performance governor, which %s holds at performance; "
                                "not written" % (policy["epp_path"], printable(policy["epp"]), policy["driver"]))
                continue
            epp_writes[policy["name"]] = (policy["epp_path"], policy["epp"], epp)
        if without:
            drivers = sorted(set(str(policy["driver"]) for policy in without))
            unsupported["epp"] = "%d of %d policies have no energy_performance_preference (driver %s)" % (
                len(without), len(policies), ", ".join(drivers))
            warnings.append("EPP not set: %s; the driver exposes no EPP (amd-pstate needs amd_pstate=active on the "
                            "kernel command line; acpi-cpufreq has none)" % unsupported["epp"])

    # per policy, EPP is written while the governor is not performance: before switching to
    # performance, after switching away from it
    for policy in policies:
        governor_write = None
        if governor and policy["governor"] != governor:
            governor_write = (policy["governor_path"], policy["governor"], governor)
        epp_write = epp_writes.get(policy["name"])
        if (governor or policy["governor"]) == "performance":
            ordered = (epp_write, governor_write)
        else:
            ordered = (governor_write, epp_write)
        writes.extend(write for write in ordered if write is not None)

    if boost is not None:
        found = state["boost"]
        if found is None:
            unsupported["boost"] = "no cpufreq/boost, intel_pstate/no_turbo or per-policy boost file"
            warnings.append("boost not set: %s (the driver or firmware controls it; check the BIOS)" % unsupported["boost"])
        else:
            for path, value in zip(found["paths"], found["values"]):
                current = _boost_on(found["kind"], value)
                if current is None:
                    raise FixError("%s holds %s, not 0 or 1: cannot tell whether boost is on; nothing was changed"
                                   % (path, printable(value)))
                if current != boost:
                    wanted = ("0" if boost else "1") if found["kind"] == "no_turbo" else ("1" if boost else "0")
                    writes.append((path, value, wanted))

    if idle_latency_max_us is not None:
        if idle_latency_max_us < 0:
            raise FixError("idle_latency_max_us must be 0 or more, not %d" % idle_latency_max_us)
        for entry in state["idle"]:
            latency = _int(entry["latency"])
            disable = _int(entry["disable"])
            if latency is None:
                raise FixError("%s holds %s, not a latency in microseconds: cannot tell whether idle state %s must "
                               "be disabled; nothing was changed" % (entry["latency_path"], printable(entry["latency"]),
                                                                     entry["name"]))
            if latency > idle_latency_max_us:
                if disable is None:
                    raise FixError("%s holds %s, not 0 or 1; nothing was changed"
                                   % (entry["disable_path"], printable(entry["disable"])))
                if disable == 0:
                    writes.append((entry["disable_path"], entry["disable"], "1"))
        if not state["idle"]:
            warnings.append("no cpuidle states under %s/cpu*/cpuidle: nothing to disable (idle=poll, a VM, or "
                            "cpuidle disabled)" % CPU_DIR)
    return {"writes": writes, "warnings": warnings, "unsupported": unsupported}


def summarize(state, overrides=None):
    """Runtime view for the result: counts per value, as in the facts (docs/facts.md ``cpu``).

    ``overrides`` maps paths to values to show a state after planned writes (check mode).
    """
    overrides = overrides or {}

    def value(path, current):
        return overrides.get(path, current)

    policies = state["policies"]
    boost = None
    found = state["boost"]
    if found is not None:
        values = [_boost_on(found["kind"], value(path, current)) for path, current in zip(found["paths"], found["values"])]
        if values and all(v is not None for v in values):
            boost = all(values)
    states = {}
    for entry in state["idle"]:
        item = states.setdefault(entry["index"], {"index": entry["index"], "name": entry["name"],
                                                  "latency_us": _int(entry["latency"]),
                                                  "enabled_cpus": 0, "disabled_cpus": 0})
        disable = _int(value(entry["disable_path"], entry["disable"]))
        if disable:
            item["disabled_cpus"] += 1
        elif disable == 0:
            item["enabled_cpus"] += 1
    return {
        "policies": len(policies),
        "driver": count_values(p["driver"] for p in policies),
        "governor": count_values(value(p["governor_path"], p["governor"]) for p in policies),
        "epp": count_values(value(p["epp_path"], p["epp"]) for p in policies if p["epp"] is not None),
        "boost": boost,
        "idle_states": [states[index] for index in sorted(states)],
    }


_CPU_IN_PATH = re.compile(r"/(?:cpu|policy)(\d+)/")


def group_writes(writes):
    """``[(path, old, new)]`` -> lines like ``scaling_governor ondemand -> performance on 0-127 (128 files)``."""
    groups = {}
    order = []
    for path, old, new in writes:
        match = _CPU_IN_PATH.search(path)
        attribute = _CPU_IN_PATH.sub("/N/", path) if match else path
        key = (attribute, old, new)
        if key not in groups:
            groups[key] = []
            order.append(key)
        if match:
            groups[key].append(int(match.group(1)))
    lines = []
    for attribute, old, new in order:
        numbers = groups[(attribute, old, new)]
        where = " on %s (%d files)" % (format_cpulist(numbers), len(numbers)) if numbers else ""
        lines.append("%s: %s -> %s%s" % (attribute, old if old is not None else "(unreadable)", new, where))
    return lines


def _summary_text(summary):
    lines = ["governor: %s" % json.dumps(summary["governor"], sort_keys=True),
             "epp: %s" % json.dumps(summary["epp"], sort_keys=True),
             "boost: %s" % json.dumps(summary["boost"])]
    for item in summary["idle_states"]:
        lines.append("idle state%d %s (%s us): %d CPUs disabled, %d enabled"
                     % (item["index"], item["name"], item["latency_us"], item["disabled_cpus"], item["enabled_cpus"]))
    return "\n".join(lines) + "\n"


# -- persisting ---------------------------------------------------------------------------------------
# Paths and the settings-line parser (script_settings) live in _persist, shared with the
# persistence facts, so that the audit reads the script exactly as this module does.

def settings_of(governor=None, epp=None, boost=None, idle_latency_max_us=None):
    settings = {}
    for name, value in (("governor", governor), ("epp", epp), ("boost", boost),
                        ("idle_latency_max_us", idle_latency_max_us)):
        if value is not None:
            settings[name] = value
    return settings


#: how often the boot script tries a write before it reports it failed (one second apart)
PUT_ATTEMPTS = 5


def render_script(settings):
    """The boot-time script for ``settings`` (written to a file and run by the unit, never by Ansible)."""
    q = shlex.quote
    lines = [
        "#!/bin/sh",
        "# Managed by Ansible (gpuhost.baseline.cpu_power): re-applies the CPU power settings of the GPU host",
        "# baseline at boot, run by %s. Edits are overwritten on the next run of the module." % UNIT_NAME,
        SETTINGS_MARK + json.dumps(settings, sort_keys=True),
        "cpu=/sys/devices/system/cpu",
        "status=0",
        "",
        "# a cpufreq policy whose driver is still setting it up (acpi-cpufreq loading while this runs at",
        "# boot) refuses writes for a moment (EBUSY): a write is tried up to %d times, a second apart" % PUT_ATTEMPTS,
        "attempts=%d" % PUT_ATTEMPTS,
        "",
        "put() {",
        "    # a file that does not exist is a feature this CPU or driver lacks",
        "    [ -e \"$1\" ] || return 0",
        "    try=1",
        "    until printf '%s\\n' \"$2\" > \"$1\" 2>/dev/null; do",
        "        if [ \"$try\" -ge \"$attempts\" ]; then",
        "            echo \"gpuhost-cpu-power: cannot write $2 to $1 ($try attempts)\" >&2",
        "            status=1",
        "            return 0",
        "        fi",
        "        try=$((try + 1))",
        "        sleep 1",
        "    done",
        "}",
        "",
    ]
    epp_lines = governor_lines = []
    if "epp" in settings:
        epp_lines = [
            "# under the performance governor amd-pstate-epp and intel_pstate hold EPP at performance",
            "# and refuse EPP writes: EPP goes in while another governor is selected",
            "for policy in \"$cpu\"/cpufreq/policy[0-9]*; do",
            "    [ \"$(cat \"$policy/scaling_governor\" 2>/dev/null)\" = performance ] && continue",
            "    put \"$policy/energy_performance_preference\" %s" % q(settings["epp"]),
            "done",
        ]
    if "governor" in settings:
        governor_lines = [
            "for policy in \"$cpu\"/cpufreq/policy[0-9]*; do",
            "    put \"$policy/scaling_governor\" %s" % q(settings["governor"]),
            "done",
        ]
    if settings.get("governor") == "performance":
        lines += epp_lines + governor_lines
    else:
        lines += governor_lines + epp_lines
    if "boost" in settings:
        on = settings["boost"]
        lines += [
            "if [ -e \"$cpu/cpufreq/boost\" ]; then",
            "    put \"$cpu/cpufreq/boost\" %d" % (1 if on else 0),
            "elif [ -e \"$cpu/intel_pstate/no_turbo\" ]; then",
            "    put \"$cpu/intel_pstate/no_turbo\" %d" % (0 if on else 1),
            "else",
            "    for policy in \"$cpu\"/cpufreq/policy[0-9]*; do put \"$policy/boost\" %d; done" % (1 if on else 0),
            "fi",
        ]
    if "idle_latency_max_us" in settings:
        lines += [
            "# disable every idle state whose exit latency exceeds %d us, on every CPU" % settings["idle_latency_max_us"],
            "for state in \"$cpu\"/cpu[0-9]*/cpuidle/state[0-9]*; do",
            "    [ -e \"$state/latency\" ] || continue",
            "    latency=$(cat \"$state/latency\" 2>/dev/null)",
            "    case $latency in",
            "        ''|*[!0-9]*) echo \"gpuhost-cpu-power: unreadable latency in $state\" >&2; status=1; continue ;;",
            "    esac",
            "    [ \"$latency\" -gt %d ] && put \"$state/disable\" 1" % settings["idle_latency_max_us"],
            "done",
        ]
    lines += ["exit $status", ""]
    return "\n".join(lines)


def render_unit():
    return "\n".join([
        "# Managed by Ansible (gpuhost.baseline.cpu_power). Edits are overwritten on the next run of the module.",
        "[Unit]",
        "Description=gpuhost.baseline: re-apply CPU governor, EPP, boost and idle-state limits",
        "Documentation=https://github.com/gpuhost/baseline",
        "# after the tools that would otherwise set their own governor",
        "After=systemd-modules-load.service tuned.service cpupower.service power-profiles-daemon.service",
        "ConditionPathIsDirectory=/sys/devices/system/cpu",
        "",
        "[Service]",
        "Type=oneshot",
        "RemainAfterExit=yes",
        "ExecStart=%s" % SCRIPT_PATH,
        "",
        "[Install]",
        "WantedBy=multi-user.target",
        "",
    ])


#: kernel module names of cpufreq drivers (acpi_cpufreq, amd_pstate, intel_pstate, cppc_cpufreq, ...)
UDEV_MODULES = "*cpufreq*|*pstate*"


def render_udev():
    """The rule that runs the script again when a cpufreq driver module loads.

    acpi-cpufreq (a module in Debian, Ubuntu, RHEL and Proxmox kernels) is loaded by udev while
    the system boots, and may come after the unit ran: its policies then start with the
    kernel's default governor (schedutil). The module's ``add`` uevent comes once its init has
    registered the policies, so the script finds them (seen under QEMU: docs/vm-tests.md).
    """
    return "\n".join([
        "# Managed by Ansible (gpuhost.baseline.cpu_power): edits are overwritten.",
        "# Re-applies %s when a cpufreq driver module loads: one loaded after %s ran" % (SCRIPT_PATH, UNIT_NAME),
        "# (acpi-cpufreq usually is a module) starts every policy with the kernel's default governor.",
        'ACTION=="add", SUBSYSTEM=="module", KERNEL=="%s", RUN+="%s"' % (UDEV_MODULES, SCRIPT_PATH),
        "",
    ])


def persisted_view(script, unit, link, udev=None):
    return {
        "unit": unit is not None,
        "enabled": link == UNIT_PATH,
        "script": script is not None,
        "settings": script_settings(script),
        "unit_current": unit == render_unit(),
        "udev": udev == render_udev(),
    }


# -- tuned ----------------------------------------------------------------------------------------------
# Where tuned runs (RHEL family: its profile sets governor, EPP and C-state limits at every start) the
# settings go into a child profile of a tuned performance profile, selected with tuned-adm, instead of a
# boot unit that would compete with tuned (docs/remediation.md, "CPU power and tuned").

TUNED_PROFILE = tuned_facts.MANAGED_PROFILE
#: distribution profiles whose [cpu] already asks for the performance governor: kept as the parent
#: when one of them is the active profile
PERFORMANCE_PARENTS = ("accelerator-performance", "latency-performance", "network-latency",
                       "throughput-performance", "hpc-compute")
#: the parent otherwise (a powersave or balanced profile, none): the first one the host ships
DEFAULT_PARENTS = ("accelerator-performance", "latency-performance", "throughput-performance")

TUNED_BOOST_LINES = {
    "cpufreq": CPUFREQ_DIR + "/boost=%d",
    "no_turbo": CPU_DIR + "/intel_pstate/no_turbo=%d",
    "policy": CPUFREQ_DIR + "/policy*/boost=%d",
}


def choose_parents(active, current_include, shipped):
    """The profiles the child includes.

    ``active``: the names of ``/etc/tuned/active_profile`` (``[]`` or ``None`` when none);
    ``current_include``: the ``include`` of the child profile already written (``None`` when
    absent); ``shipped``: ``callable(name) -> bool``, whether the host has that profile.
    Kept, in this order: the child's current parents while the child is active (a second run
    changes nothing); the active profiles when every one is in :data:`PERFORMANCE_PARENTS`;
    else the first of :data:`DEFAULT_PARENTS` the host ships; ``[]`` when it ships none.
    """
    active = list(active or [])

    def usable(names):
        return bool(names) and all(name in PERFORMANCE_PARENTS and shipped(name) for name in names)

    if active == [TUNED_PROFILE] and usable(current_include):
        return list(current_include)
    if usable(active):
        return active
    for name in DEFAULT_PARENTS:
        if shipped(name):
            return [name]
    return []


def idle_indices_above(state, bound):
    """Indices of the idle states whose exit latency is above ``bound`` (on any CPU)."""
    if bound is None:
        return []
    return sorted(set(entry["index"] for entry in state["idle"]
                      if _int(entry["latency"]) is not None and _int(entry["latency"]) > bound))


def render_tuned_conf(settings, parents, boost_kind=None, idle_indices=()):
    """``tuned.conf`` of the child profile: ``include=`` the parents, then the settings as tuned
    plugin options. The governor through ``[cpu] governor=``; EPP through ``[cpu]
    energy_performance_preference=`` (tuned 2.21 and later), left out when it is ``performance``
    with governor ``performance`` (amd-pstate-epp and intel_pstate hold EPP at performance under
    that governor and refuse EPP writes); boost and the idle states above the bound through
    ``[sysfs]`` (every tuned release; the idle states are this host's, ``idle_indices``)."""
    lines = [
        "# Managed by Ansible (gpuhost.baseline.cpu_power): the CPU power settings of the GPU host baseline as a",
        "# tuned child profile, selected with tuned-adm profile %s. Edits are overwritten on the next run."
        % TUNED_PROFILE,
        SETTINGS_MARK + json.dumps(settings, sort_keys=True),
        "",
        "[main]",
        "summary=gpuhost.baseline: %s with the GPU host baseline's CPU power settings"
        % (", ".join(parents) if parents else "no parent profile"),
    ]
    if parents:
        lines.append("include=" + ",".join(parents))
    cpu = []
    if "governor" in settings:
        cpu.append("governor=%s" % settings["governor"])
    if "epp" in settings:
        if settings.get("governor") == "performance" and settings["epp"] == "performance":
            cpu.append("# EPP performance: the performance governor holds it there (amd-pstate-epp, intel_pstate)")
        else:
            cpu.append("energy_performance_preference=%s" % settings["epp"])
    if cpu:
        lines += ["", "[cpu]"] + cpu
    sysfs = []
    if "boost" in settings and boost_kind in TUNED_BOOST_LINES:
        on = settings["boost"]
        sysfs.append(TUNED_BOOST_LINES[boost_kind] % ((0 if on else 1) if boost_kind == "no_turbo" else (1 if on else 0)))
    if "idle_latency_max_us" in settings:
        sysfs.append("# idle states with an exit latency above %d us, on every CPU" % settings["idle_latency_max_us"])
        sysfs += ["%s/cpu*/cpuidle/state%d/disable=1" % (CPU_DIR, index) for index in idle_indices]
    if sysfs:
        lines += ["", "[sysfs]"] + sysfs
    return "\n".join(lines) + "\n"


def tuned_profile_path(host):
    """Where the child profile goes: tuned 2.23 and later read user profiles from
    ``/etc/tuned/profiles`` (and ship theirs in ``/usr/lib/tuned/profiles``), earlier releases
    from ``/etc/tuned``."""
    base = tuned_facts.USER_PROFILES_DIR if host.reader.isdir(tuned_facts.SYSTEM_PROFILES_DIR) \
        else tuned_facts.TUNED_ETC
    return base + "/" + TUNED_PROFILE + "/" + tuned_facts.PROFILE_FILE


def _apply_tuned(host, state, settings, decided, tuned_state, args, diff):
    """The tuned half of :func:`apply`: child profile, competing unit disabled, tuned-adm, runtime."""
    conf_path = tuned_profile_path(host)
    conf_before = to_text(host.read_file(conf_path))
    existing = tuned_facts.parse_tuned_conf(conf_before)
    active_before = tuned_state["profiles"] or []
    parents = choose_parents(active_before, existing["include"] if existing else None,
                             lambda name: tuned_facts.system_profile_exists(host.reader, name))
    boost_kind = state["boost"]["kind"] if state["boost"] else None
    conf_after = render_tuned_conf(settings, parents, boost_kind,
                                   idle_indices_above(state, settings.get("idle_latency_max_us")))

    script_before = to_text(host.read_file(SCRIPT_PATH))
    unit_before = to_text(host.read_file(UNIT_PATH))
    link_before = host.readlink(WANTS_LINK)
    udev_before = to_text(host.read_file(UDEV_PATH))
    # the competing unit: no longer started at boot nor by udev (the script and unit file stay, inert)
    removals = [(path, before) for path, before in ((WANTS_LINK, link_before), (UDEV_PATH, udev_before))
                if before is not None or host.exists(path)]
    conf_changed = conf_after != conf_before
    select = conf_changed or active_before != [TUNED_PROFILE]
    warnings = list(decided["warnings"])
    if parents and parents != active_before and active_before and active_before != [TUNED_PROFILE]:
        warnings.append("tuned profile %s is replaced by %s (include=%s): it is not a performance profile"
                        % (" ".join(active_before), TUNED_PROFILE, ",".join(parents)))
    if not parents:
        warnings.append("no tuned performance profile (%s) on this host: %s includes none"
                        % (", ".join(DEFAULT_PARENTS), TUNED_PROFILE))

    runtime_before = summarize(state)
    overrides = dict((path, new) for path, _old, new in decided["writes"])
    result = {
        "changed": bool(decided["writes"] or conf_changed or removals or select),
        "runtime_before": runtime_before,
        "runtime_after": summarize(state, overrides),
        "runtime_changes": group_writes(decided["writes"]),
        "persist": "tuned",
        "persisted_before": persisted_view(script_before, unit_before, link_before, udev_before),
        "persisted_after": persisted_view(script_before, unit_before, None, None),
        "tuned": {"profile": TUNED_PROFILE, "path": conf_path, "include": parents,
                  "active_before": tuned_state["active_profile"], "active_after": TUNED_PROFILE,
                  "disabled": [path for path, _before in removals]},
        "unsupported": decided["unsupported"],
        "warnings": warnings,
        "unit": UNIT_PATH,
        "script": SCRIPT_PATH,
        "udev_rule": UDEV_PATH,
    }
    if diff:
        entries = []
        if decided["writes"]:
            entries.append({"before_header": "runtime (sysfs)", "after_header": "runtime (sysfs)",
                            "before": _summary_text(runtime_before), "after": _summary_text(result["runtime_after"])})
        if conf_changed:
            entries.append(file_diff(conf_path, conf_before, conf_after))
        if select:
            entries.append({"before_header": tuned_facts.ACTIVE_PROFILE_PATH,
                            "after_header": tuned_facts.ACTIVE_PROFILE_PATH,
                            "before": (tuned_state["active_profile"] or "") + "\n", "after": TUNED_PROFILE + "\n"})
        for path, before in removals:
            entries.append(file_diff(path, ("-> %s\n" % before) if path == WANTS_LINK else before, None))
        result["diff"] = entries

    if not host.check_mode:
        if conf_changed:
            host.write_file(conf_path, to_bytes(conf_after), mode=0o644)
        for path, _before in removals:
            host.remove(path)
    if any(path == WANTS_LINK for path, _before in removals):
        host.run(["systemctl", "daemon-reload"], "systemd still has %s enabled; run systemctl daemon-reload" % UNIT_NAME)
    if any(path == UDEV_PATH for path, _before in removals):
        host.run(list(UDEV_RELOAD), "udev still has %s; run udevadm control --reload" % UDEV_PATH)
    if select:
        host.run(["tuned-adm", "profile", TUNED_PROFILE], "tuned has not selected profile %s (%s)"
                 % (TUNED_PROFILE, conf_path))
    if not host.check_mode:
        # tuned applied the profile: write what it left (settings an older tuned lacks), then read back
        writes = plan(read_state(host), *args)["writes"] if host.live and select else decided["writes"]
        for path, _old, new in writes:
            host.write_attr(path, new)
        if writes or select:
            result["runtime_after"] = summarize(read_state(host))
    return result


# -- acting ---------------------------------------------------------------------------------------------

def apply(host, governor=None, epp=None, boost=None, idle_latency_max_us=None, persist="auto", diff=False):
    """Decide and (outside check mode) write runtime attributes, then the boot unit or, where tuned
    runs (``persist`` ``auto`` or ``tuned``), the tuned child profile; returns the result."""
    state = read_state(host)
    decided = plan(state, governor, epp, boost, idle_latency_max_us)
    writes = decided["writes"]
    settings = settings_of(governor, epp, boost, idle_latency_max_us)
    if persist in ("auto", "tuned"):
        tuned_state = tuned_facts.gather(host.reader)
        if tuned_state["running"]:
            return _apply_tuned(host, state, settings, decided, tuned_state,
                                (governor, epp, boost, idle_latency_max_us), diff)
        if persist == "tuned":
            raise FixError("persist tuned: tuned is not running (no %s naming a live tuned process); start it "
                           "(systemctl enable --now tuned) or use persist systemd; nothing was changed"
                           % tuned_facts.PID_PATH)
        persist = "systemd"

    script_before = to_text(host.read_file(SCRIPT_PATH))
    unit_before = to_text(host.read_file(UNIT_PATH))
    link_before = host.readlink(WANTS_LINK)
    udev_before = to_text(host.read_file(UDEV_PATH))
    persisted_before = persisted_view(script_before, unit_before, link_before, udev_before)
    file_changes = []
    if persist == "systemd":
        script_after, unit_after, udev_after = render_script(settings), render_unit(), render_udev()
        if script_after != script_before:
            file_changes.append(("file", SCRIPT_PATH, script_before, script_after, 0o755))
        if unit_after != unit_before:
            file_changes.append(("file", UNIT_PATH, unit_before, unit_after, 0o644))
        if link_before != UNIT_PATH:
            file_changes.append(("link", WANTS_LINK, link_before, UNIT_PATH, None))
        if udev_after != udev_before:
            file_changes.append(("file", UDEV_PATH, udev_before, udev_after, 0o644))
        persisted_after = persisted_view(script_after, unit_after, UNIT_PATH, udev_after)
    else:
        persisted_after = persisted_before

    runtime_before = summarize(state)
    overrides = dict((path, new) for path, _old, new in writes)
    result = {
        "changed": bool(writes or file_changes),
        "runtime_before": runtime_before,
        "runtime_after": summarize(state, overrides),
        "runtime_changes": group_writes(writes),
        "persist": persist,
        "persisted_before": persisted_before,
        "persisted_after": persisted_after,
        "unsupported": decided["unsupported"],
        "warnings": decided["warnings"],
        "unit": UNIT_PATH,
        "script": SCRIPT_PATH,
        "udev_rule": UDEV_PATH,
    }
    if diff:
        entries = []
        if writes:
            entries.append({"before_header": "runtime (sysfs)", "after_header": "runtime (sysfs)",
                            "before": _summary_text(runtime_before), "after": _summary_text(result["runtime_after"])})
        for kind, path, before, after, _mode in file_changes:
            if kind == "link":
                entries.append(file_diff(path, "-> %s\n" % before if before else None, "-> %s\n" % after))
            else:
                entries.append(file_diff(path, before, after))
        result["diff"] = entries
    unit_changed = any(path in (UNIT_PATH, WANTS_LINK) for _kind, path, _b, _a, _m in file_changes)

    if not host.check_mode:
        for path, _old, new in writes:
            host.write_attr(path, new)
        for kind, path, _before, after, mode in file_changes:
            if kind == "link":
                host.symlink(path, after)
            else:
                host.write_file(path, to_bytes(after), mode=mode)
    if unit_changed:
        host.run(["systemctl", "daemon-reload"], "systemd has not loaded %s; run systemctl daemon-reload" % UNIT_NAME)
    if any(path == UDEV_PATH for _kind, path, _b, _a, _m in file_changes):
        host.run(list(UDEV_RELOAD), "udev has not read %s; run udevadm control --reload" % UDEV_PATH)
    if writes and not host.check_mode:
        # what the kernel made of it (EPP follows the performance governor on a live host)
        result["runtime_after"] = summarize(read_state(host))
    return result


#: The module's own options (cpu_power; host_fix's steps with module cpu_power), besides root and backup.
ARGUMENT_SPEC = dict(
    governor=dict(type="str"),
    epp=dict(type="str"),
    boost=dict(type="bool"),
    idle_latency_max_us=dict(type="int"),
    persist=dict(type="str", default="auto", choices=["auto", "systemd", "tuned", "none"]),
)
REQUIRED_ONE_OF = [["governor", "epp", "boost", "idle_latency_max_us"]]


def apply_params(host, p, diff=False):
    """:func:`apply` with the module's validated options ``p``."""
    return apply(host, p["governor"], p["epp"], p["boost"], p["idle_latency_max_us"], p["persist"], diff)
