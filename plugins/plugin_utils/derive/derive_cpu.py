# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``derived.cpu``: SMT, deep idle states, and whether the configured CPU power settings (kernel
command line, systemd units, the default governor) hold at the next boot. Part of :func:`derive.derive`.
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.kernel import cmdline_value
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_common import _int, _unit_state
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.docpath import get as _get

__metaclass__ = type


#: AMD family 0x19 model ranges of Zen 3 and Zen 4, as arch/x86/kernel/cpu/amd.c (bsp_init_amd, kernel
#: 6.9+) sets X86_FEATURE_ZEN3 / X86_FEATURE_ZEN4: Milan 0x00-0x0f, Genoa 0x10-0x1f, Bergamo/Siena 0xa0-0xaf
_ZEN_19H = ((0x00, 0x0f, "zen3"), (0x10, 0x1f, "zen4"), (0x20, 0x5f, "zen3"), (0x60, 0xaf, "zen4"))


def cpu_generation(cpu):
    """``zen3``, ``zen4`` (AMD family 0x19 by model), ``zen5`` (family 0x1a and later: the newest
    generation known here), ``intel`` (GenuineIntel), or ``None`` (another vendor or family, or the
    CPU facts unread)."""
    if not isinstance(cpu, dict):
        return None
    vendor = cpu.get("vendor")
    family, model = _int(cpu.get("family")), _int(cpu.get("model"))
    if vendor == "GenuineIntel":
        return "intel"
    if vendor != "AuthenticAMD" or family is None:
        return None
    if family >= 0x1a:
        return "zen5"
    if family == 0x19 and model is not None:
        for low, high, name in _ZEN_19H:
            if low <= model <= high:
                return name
    return None


def _cpu(facts, params):
    cpu = _get(facts, "cpu") or {}
    vendor = cpu.get("vendor") if isinstance(cpu, dict) else None
    family = _int(cpu.get("family")) if isinstance(cpu, dict) else None
    if vendor is None:
        amd_zen = None
    elif vendor != "AuthenticAMD":
        amd_zen = False
    else:
        amd_zen = None if family is None else family >= 0x19
    active = _get(cpu, "smt", "active")
    smt = None if not isinstance(active, bool) else ("on" if active else "off")

    limit = params.get("idle_latency_max_us")
    states = _get(cpu, "cpuidle", "states")
    deep = None
    if isinstance(states, list) and _int(limit) is not None:
        deep = []
        for state in states:
            if not isinstance(state, dict):
                deep = None
                break
            enabled = _int(state.get("enabled_cpus"))
            latency = _int(state.get("latency_us"))
            if enabled is None or latency is None:
                deep = None
                break
            if latency > limit and enabled > 0:
                disabled = _int(state.get("disabled_cpus")) or 0
                deep.append("%s (exit latency %d us) enabled on %d of %d CPUs" % (
                    state.get("name") or "state%s" % state.get("index"), latency, enabled, enabled + disabled))
    boot = _cpu_boot(facts, limit, deep)
    return {"amd_zen": amd_zen, "generation": cpu_generation(cpu), "smt": smt, "deep_idle_enabled": deep,
            "power_boot_problems": boot["problems"], "power_boot_reason": boot["reason"]}


def _cmdline_idle(configured, driver, states, limit):
    """How the configured command line keeps idle states above ``limit`` off at boot, or ``None``.

    Counted only when it really achieves the bound: ``idle=poll`` (no idle state at all);
    ``cpuidle.off=1`` / ``idle=halt`` (cpuidle off, the CPU halts in HLT, the C1 of the state
    table) when C1's exit latency is within the bound; ``processor.max_cstate=N`` under
    ``acpi_idle`` and ``intel_idle.max_cstate=N`` (N >= 1) under ``intel_idle``, which register
    only states 1..N (state 0 is POLL), when every state above the bound has a higher index.
    ``intel_idle.max_cstate=0`` does not count: it turns intel_idle off and acpi_idle takes over
    with the firmware's states. ``idle=nomwait`` bounds nothing.
    """
    idle = cmdline_value(configured, "idle")
    if idle == "poll":
        return "idle=poll"
    deep = [_int(s.get("index")) for s in states if (_int(s.get("latency_us")) or 0) > limit]
    shallow = [_int(s.get("latency_us")) for s in states if _int(s.get("index")) == 1]
    if idle == "halt" or str(cmdline_value(configured, "cpuidle.off")) == "1":
        if shallow and shallow[0] is not None and shallow[0] <= limit:
            return "idle=halt" if idle == "halt" else "cpuidle.off=1"
    for param, wanted_driver, minimum in (("processor.max_cstate", "acpi_idle", 0),
                                          ("intel_idle.max_cstate", "intel_idle", 1)):
        value = _int(cmdline_value(configured, param))
        if value is None or value < minimum or driver != wanted_driver:
            continue
        highest = max(value, 1)
        if all(index is not None and index > highest for index in deep):
            return "%s=%d" % (param, value)
    return None


def _cpu_boot(facts, limit, deep_now):
    """Whether governor performance and the idle-state bound are set again at boot."""
    cpu = _get(facts, "cpu")
    section = _get(facts, "persistence", "cpu_power")
    if not isinstance(section, dict):
        return {"problems": None, "reason": "persistence facts not gathered (host_facts gather: persistence)"}
    if not isinstance(cpu, dict):
        return {"problems": None, "reason": "cpu facts missing"}
    configured = _get(facts, "kernel", "configured_cmdline", "params")
    configured = configured if isinstance(configured, dict) else {}
    runs = section.get("active") and _get(section, "script", "executable") is not False
    settings = section.get("settings") if runs and isinstance(section.get("settings"), dict) else {}
    unit_name = "gpuhost-cpu-power.service"
    unit_state = _unit_state(section, unit_name)
    tuned = _tuned_settings(cpu) if not runs else None
    if tuned is not None:
        # no unit of cpu_power runs at boot, tuned does: its active child profile holds the settings
        settings, unit_name, unit_state = tuned[0], tuned[1], None
    problems = []

    policies = _int(_get(cpu, "cpufreq", "policies"))
    if policies:
        governors = _get(cpu, "cpufreq", "governor")
        running_ok = isinstance(governors, dict) and list(governors) == ["performance"]
        if settings.get("governor") != "performance" and \
                cmdline_value(configured, "cpufreq.default_governor") != "performance":
            if unit_state:
                why = unit_state
            elif "governor" in settings:
                why = "%s sets governor %s" % (unit_name, settings["governor"])
            else:
                why = "%s sets no governor" % unit_name
            problems.append("governor performance is not set at boot: %s, and the configured kernel command line has "
                            "no cpufreq.default_governor=performance%s" % (
                                why, "; the running performance governor would be lost at reboot" if running_ok else ""))
        elif not unit_state and tuned is None and cmdline_value(configured, "cpufreq.default_governor") != "performance":
            udev = section.get("udev") if isinstance(section.get("udev"), dict) else {}
            if not udev.get("modules"):
                problems.append("governor performance may not survive a reboot: no udev rule runs %s when a cpufreq "
                                "driver module loads (%s), and a driver loaded after %s ran (acpi-cpufreq usually "
                                "is a module) starts with the kernel's default governor%s; run cpu_power again"
                                % (_get(section, "script", "path"), udev.get("path") or "its rule file", unit_name,
                                   _default_governor_text(facts)))

    states = _get(cpu, "cpuidle", "states")
    if not isinstance(limit, int) or isinstance(limit, bool):
        return {"problems": None, "reason": "parameter idle_latency_max_us is not set"}
    if not isinstance(states, list):
        return {"problems": None, "reason": "cpuidle states not readable"}
    if states:
        states = [s for s in states if isinstance(s, dict)]
        above = [s for s in states if (_int(s.get("latency_us")) or 0) > limit]
        bound = _int(settings.get("idle_latency_max_us"))
        if (above and (bound is None or bound > limit)
                and _cmdline_idle(configured, _get(cpu, "cpuidle", "driver"), states, limit) is None):
            names = ", ".join("%s %d us" % (s.get("name") or "state%s" % s.get("index"), _int(s["latency_us"]))
                              for s in above)
            if unit_state:
                why = unit_state
            elif bound is not None:
                why = "%s disables only states above %d us" % (unit_name, bound)
            else:
                why = "%s sets no idle-state bound" % unit_name
            lost = "; they are disabled now, which would be lost at reboot" if deep_now == [] else ""
            problems.append("idle states above %d us (%s) are not disabled at boot: %s, and the configured kernel "
                            "command line has no idle=poll, cpuidle.off=1, processor.max_cstate= or "
                            "intel_idle.max_cstate= that excludes them%s" % (limit, names, why, lost))
    return {"problems": problems, "reason": None}


def _tuned_settings(cpu):
    """``(settings, name)`` of the tuned child profile cpu_power wrote when tuned applies it at boot
    (enabled, the single active profile, the settings line readable), else ``None``."""
    tuned = cpu.get("tuned")
    if not isinstance(tuned, dict) or tuned.get("enabled") is not True:
        return None
    profile = tuned.get("profile")
    if not isinstance(profile, dict) or profile.get("name") != tuned.get("active_profile"):
        return None
    settings = profile.get("settings")
    if not isinstance(settings, dict):
        return None
    return settings, "tuned profile %s (%s)" % (profile.get("name"), profile.get("path"))


def _default_governor_text(facts):
    """`` (schedutil, CONFIG_CPU_FREQ_DEFAULT_GOV_SCHEDUTIL=y in /boot/config-...)`` or ``""`` when unknown."""
    config = _get(facts, "kernel", "config")
    governor = config.get("default_governor") if isinstance(config, dict) else None
    if not isinstance(governor, str) or not governor:
        return ""
    return " (%s: CONFIG_CPU_FREQ_DEFAULT_GOV_%s=y in %s)" % (governor, governor.upper(), config.get("source"))
