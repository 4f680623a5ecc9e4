# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Relations between facts that a jmespath query cannot express on its own.

:func:`derive` returns a copy of the facts document with a ``derived`` key (every key is
documented in ``docs/rules.md``): PCIe paths between peer GPUs and NICs (ACS, MaxPayload,
AER), the NUMA placement of GPUs versus LXC container cpusets, kernel releases installed
but not booted, running versus configured command line, and per-GPU values the NVIDIA
rules compare. Pure functions of (facts, params): no I/O, never raises on odd facts;
anything that cannot be worked out is ``None`` and, where useful, a ``reason`` says why.
"""

from __future__ import absolute_import, division, print_function

import re

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import cpu as facts_cpu
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.nvidia import IDLE_PSTATE_MIN, pstate_number
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.kernel import cmdline_value, compare_kernel_release
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.pci import VENDOR_NAMES
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.pcie_paths import peer_bridges
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive_health import derive_health
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive_inventory import derive_inventory
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.docpath import get as _get

__metaclass__ = type

#: parameters :func:`derive` reads; every profile must define them
REQUIRED_PARAMS = ("idle_latency_max_us", "nic_min_link_width", "power_limit_policy", "nvidia_driver_min",
                   "lxc_host_reserve_gib_per_node", "swappiness_max", "max_read_request_bytes_gpu",
                   "max_read_request_bytes_nic")

#: command-line keys the boot loader adds by itself: never in the configured line
BOOTLOADER_KEYS = frozenset(("BOOT_IMAGE", "initrd", "ro", "rw", "root", "rootflags", "rootfstype", "boot"))

#: GPU architecture by marketing name (checked first) ...
_GENERATION_NAMES = (
    ("blackwell", re.compile(r"blackwell|\bG?B[12]\d\d\b|\bRTX 50\d\d|\bRTX PRO \d{4}\b", re.I)),
    ("hopper", re.compile(r"\bG?H(100|200|800|20)\b", re.I)),
    ("ada", re.compile(r"\bL40S?\b|\bL4\b|\bL20\b|\bRTX [0-9]+ Ada|\bRTX 40\d\d", re.I)),
    ("ampere", re.compile(r"\bA(100|800|40|30|16|10|2)\b|\bRTX A\d{4}|\bRTX 30\d\d", re.I)),
    ("turing", re.compile(r"\bT4\b|\bRTX [68]000\b|\bQuadro RTX|\bRTX 20\d\d|\bTITAN RTX", re.I)),
    ("volta", re.compile(r"\bV100\b|\bTITAN V\b", re.I)),
)
#: ... then by PCI device id range of vendor 0x10de (high byte)
_GENERATION_IDS = (
    ("blackwell", (0x29, 0x2b, 0x2c, 0x2d, 0x2f)),
    ("ada", (0x26, 0x27, 0x28)),
    ("hopper", (0x23,)),
    ("ampere", (0x20, 0x22, 0x24, 0x25)),
    ("turing", (0x1e, 0x1f, 0x21)),
)

#: clocks event reasons that mean the hardware is protecting itself (nvidia-smi names
#: with the ``clocks_event_reason_`` prefix removed)
THROTTLE_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown")

#: drivers that take a GPU from the host on purpose (passthrough to a VM): not nvidia's to answer for
PASSTHROUGH_DRIVERS = ("vfio-pci", "pci-stub")

_GPU_NODE_RE = re.compile(r"^/?dev/nvidia(\d+)$")
_ALLOW_RE = re.compile(r"^\s*([abc])(?:\s+(\*|\d+):(\*|\d+))?(?:\s+[rwm]+)?\s*$")


def _int(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return None


def parse_cpulist(text):
    """``"0-3,8"`` -> ``{0, 1, 2, 3, 8}`` in the kernel's whole cpulist grammar (``0-15:2/4`` groups
    too: the facts layer's :func:`~ansible_collections.gpuhost.baseline.plugins.module_utils.facts.cpu.parse_cpulist`,
    one parser for host and controller); an int is that one CPU; ``None`` for anything malformed."""
    if isinstance(text, int) and not isinstance(text, bool):
        return {text}
    if not isinstance(text, str):
        return None
    cpus = facts_cpu.parse_cpulist(text)
    return None if cpus is None else set(cpus)


# -- cpu ----------------------------------------------------------------------------------

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
    return {"amd_zen": amd_zen, "smt": smt, "deep_idle_enabled": deep,
            "power_boot_problems": boot["problems"], "power_boot_reason": boot["reason"]}


def _unit_state(section, unit_name):
    """Why a fix module's boot unit does not run its script at boot; ``None`` when it does."""
    unit = section.get("unit") if isinstance(section.get("unit"), dict) else {}
    script = section.get("script") if isinstance(section.get("script"), dict) else {}
    if not unit.get("present") and not script.get("present"):
        return "no %s installed" % unit_name
    if unit.get("masked"):
        return "%s is masked" % unit_name
    if not unit.get("present"):
        return "%s is missing (its script %s is there)" % (unit_name, script.get("path"))
    if not unit.get("runs_script"):
        return "%s does not run %s" % (unit_name, script.get("path"))
    if not section.get("enabled"):
        return "%s is not enabled (no multi-user.target.wants entry)" % unit_name
    if not script.get("present"):
        return "%s is missing, so %s runs nothing" % (script.get("path"), unit_name)
    if not script.get("managed"):
        return "%s was not written by the module (no settings line)" % script.get("path")
    if script.get("executable") is False:
        return "%s is not executable, so %s cannot run it at boot (chmod 0755 it, or rerun the fix)" % (
            script.get("path"), unit_name)
    return None


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
        elif not unit_state and cmdline_value(configured, "cpufreq.default_governor") != "performance":
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


# -- kernel -------------------------------------------------------------------------------

def _fmt_param(key, value):
    return key if value is True else "%s=%s" % (key, value)


def _kernel(facts, params):
    kernel = _get(facts, "kernel") or {}
    release = kernel.get("release") if isinstance(kernel, dict) else None
    installed = kernel.get("installed") if isinstance(kernel, dict) else None
    newer = None
    pending_upgrade = None
    if isinstance(release, str) and isinstance(installed, list):
        newer = [r for r in installed if isinstance(r, str) and compare_kernel_release(r, release) == 1]
        minimum = params.get("kernel_min")
        meeting = [r for r in newer if isinstance(minimum, str) and (compare_kernel_release(r, minimum) or -1) >= 0]
        if meeting:
            pending_upgrade = "%s is installed, reboot into it" % meeting[-1]
    newer_note = ("%s installed, not booted" % ", ".join(newer)) if newer else None

    running = _get(kernel, "cmdline", "params")
    configured = _get(kernel, "configured_cmdline", "params")
    diff = only_configured = None
    if isinstance(running, dict) and isinstance(configured, dict):
        diff, only_configured = [], []
        for key in sorted(set(running) | set(configured)):
            in_run, in_conf = key in running, key in configured
            if in_run and in_conf:
                if running[key] != configured[key]:
                    diff.append("%s: running %s, configured %s" % (
                        key, _fmt_param(key, running[key]), _fmt_param(key, configured[key])))
                    only_configured.append(_fmt_param(key, configured[key]))
            elif key in BOOTLOADER_KEYS:
                continue
            elif in_run:
                diff.append("%s only in the running cmdline" % _fmt_param(key, running[key]))
            else:
                diff.append("%s only in the configured cmdline" % _fmt_param(key, configured[key]))
                only_configured.append(_fmt_param(key, configured[key]))
    cmdline_pending = ("%s configured, reboot to apply" % ", ".join(only_configured)) if only_configured else None
    return {"newer_installed": newer, "newer_installed_note": newer_note, "pending_upgrade": pending_upgrade,
            "cmdline_diff": diff, "cmdline_pending": cmdline_pending, "sysctl_boot": _sysctl_boot(facts, params)}


#: sysctl name -> key in ``kernel.sysctl``
SYSCTL_KEYS = (("kernel.numa_balancing", "numa_balancing"), ("vm.zone_reclaim_mode", "zone_reclaim_mode"),
               ("vm.swappiness", "swappiness"))


def _kernel_default(name, facts):
    """``(value, text)`` the kernel starts with when nothing sets ``name``; value ``None`` when unknown.

    kernel.numa_balancing: mm/mempolicy.c turns balancing on at boot only when the kernel has it
    (CONFIG_NUMA_BALANCING), is built to enable it (CONFIG_NUMA_BALANCING_DEFAULT_ENABLED) and more
    than one node is online. The options come from the running kernel's configuration
    (``kernel.config``); without it the text says the build default is assumed, and from what.
    """
    if name == "kernel.numa_balancing":
        nodes = _int(_get(facts, "numa", "node_count"))
        config = _get(facts, "kernel", "config")
        config = config if isinstance(config, dict) else {}
        options = config.get("options") if isinstance(config.get("options"), dict) else None
        source = config.get("source") or "the kernel configuration"
        if options is not None:
            built = options.get("CONFIG_NUMA_BALANCING", "n")
            enabled = options.get("CONFIG_NUMA_BALANCING_DEFAULT_ENABLED", "n")
            if built != "y":
                return 0, "the kernel default 0 (CONFIG_NUMA_BALANCING is not set in %s: no automatic balancing)" % source
            if enabled != "y":
                return 0, "the kernel default 0 (CONFIG_NUMA_BALANCING_DEFAULT_ENABLED is not set in %s)" % source
            if nodes is None:
                return None, ("the kernel default (CONFIG_NUMA_BALANCING_DEFAULT_ENABLED=y in %s: 1 on a host "
                              "with several NUMA nodes, 0 on one; node count unknown)" % source)
            default = 1 if nodes > 1 else 0
            return default, ("the kernel default %d (CONFIG_NUMA_BALANCING_DEFAULT_ENABLED=y in %s, %d NUMA node%s)"
                             % (default, source, nodes, "s" if nodes != 1 else ""))
        why = config.get("reason") or "the kernel configuration was not gathered"
        if nodes is None:
            return None, "the kernel default (1 on a host with several NUMA nodes, 0 on one; node count unknown)"
        default = 1 if nodes > 1 else 0
        return default, ("the kernel default %d, assumed (on a %d-node host, CONFIG_NUMA_BALANCING_DEFAULT_ENABLED=y "
                         "as in Debian, Ubuntu, Proxmox and RHEL kernels; not confirmed: %s)" % (default, nodes, why))
    if name == "vm.zone_reclaim_mode":
        return 0, "the kernel default 0"
    return 60, "the kernel default 60"


def _default_governor_text(facts):
    """`` (schedutil, CONFIG_CPU_FREQ_DEFAULT_GOV_SCHEDUTIL=y in /boot/config-...)`` or ``""`` when unknown."""
    config = _get(facts, "kernel", "config")
    governor = config.get("default_governor") if isinstance(config, dict) else None
    if not isinstance(governor, str) or not governor:
        return ""
    return " (%s: CONFIG_CPU_FREQ_DEFAULT_GOV_%s=y in %s)" % (governor, governor.upper(), config.get("source"))


def _boot_cmdline_value(name, configured):
    """``(value text, parameter)`` the configured command line gives sysctl ``name``, or ``(None, None)``.

    ``sysctl.<name>=`` (kernel 5.8+, '.' or '/' as separator) is applied just before init and
    so overrides ``numa_balancing=enable|disable`` (applied earlier in boot).
    """
    found = (None, None)
    if name == "kernel.numa_balancing":
        value = cmdline_value(configured, "numa_balancing")
        if value in ("enable", "disable"):
            found = ("1" if value == "enable" else "0", "numa_balancing=%s" % value)
    for key, value in configured.items():
        if key.startswith("sysctl.") and key[len("sysctl."):].replace("/", ".") == name and value is not True:
            found = (str(value), "%s=%s" % (key, value))
    return found


def _sysctl_wanted(value, maximum):
    """swappiness may be at most ``maximum``; the other managed sysctls (``maximum`` None) must be 0."""
    return value == 0 if maximum is None else value <= maximum


def _sysctl_boot(facts, params):
    """Per sysctl the fix modules manage: the value after a reboot, where it comes from, and
    the problems when it is not what the profile wants (``derived.kernel.sysctl_boot``)."""
    persisted = _get(facts, "kernel", "sysctl_persisted")
    running = _get(facts, "kernel", "sysctl")
    configured = _get(facts, "kernel", "configured_cmdline", "params")
    configured = configured if isinstance(configured, dict) else {}
    result = {}
    for name, short in SYSCTL_KEYS:
        item = {"running": _int(_get(running, short)), "boot": None, "source": None, "problems": None, "reason": None}
        result[short] = item
        if not isinstance(persisted, dict):
            item["reason"] = "kernel.sysctl_persisted missing (the kernel facts were not gathered or failed)"
            continue
        entry = persisted.get(name) if isinstance(persisted.get(name), dict) else None
        cmd_value, cmd_param = _boot_cmdline_value(name, configured)
        if entry is not None:
            text, source = entry.get("value"), "%s sets %s = %s" % (entry.get("file"), name, entry.get("value"))
        elif cmd_value is not None:
            text, source = cmd_value, "the configured kernel command line sets %s" % cmd_param
        else:
            default, why = _kernel_default(name, facts)
            text = None if default is None else str(default)
            source = "nothing sets it at boot (no sysctl.d file%s), so %s applies" % (
                ", no sysctl.%s= or numa_balancing= on the configured kernel command line" % name
                if name == "kernel.numa_balancing" else ", no sysctl.%s= on the configured kernel command line" % name,
                why)
        item["source"] = source
        boot = _int(text)
        item["boot"] = boot
        if short == "swappiness":
            limit = params.get("swappiness_max")
            if _int(limit) is None:
                item["reason"] = "parameter swappiness_max is not set"
                continue
            want, maximum = "at most %d" % limit, limit
        else:
            want, maximum = "0", None
        if text is None:
            item["reason"] = "value of %s after a reboot unknown: %s" % (name, source)
            continue
        if boot is None:
            item["problems"] = ["%s: %r is not an integer, so systemd-sysctl rejects it and the boot value is the "
                                "kernel's own" % (source, text)]
            continue
        if _sysctl_wanted(boot, maximum):
            item["problems"] = []
            continue
        lost = "; the running value %d would be lost at reboot" % item["running"] \
            if item["running"] is not None and _sysctl_wanted(item["running"], maximum) else ""
        item["problems"] = ["%s would be %d after a reboot, wanted %s: %s%s" % (name, boot, want, source, lost)]
    return result


# -- pcie ---------------------------------------------------------------------------------

def _devices(facts):
    devices = _get(facts, "pci", "devices")
    if not isinstance(devices, list):
        return None
    return [d for d in devices if isinstance(d, dict) and isinstance(d.get("address"), str)]


def _gpu_names(facts):
    names = {}
    for gpu in _get(facts, "nvidia", "gpus") or []:
        if isinstance(gpu, dict) and isinstance(gpu.get("bus_id"), str) and gpu.get("name"):
            names[gpu["bus_id"].lower()] = str(gpu["name"])
    return names


def _label(device, gpu_names):
    address = device.get("address")
    kind = device.get("kind")
    if kind == "gpu" and address in gpu_names:
        return gpu_names[address]
    vendor_id = device.get("vendor_id")
    vendor = VENDOR_NAMES.get(str(vendor_id).lower(), vendor_id) if vendor_id else "vendor ?"
    ident = "%s %s" % (vendor, device.get("device_id") or "device ?")
    port = _get(device, "pcie", "port_type")
    if kind == "bridge":
        return "%s bridge%s" % (ident, " (%s)" % port.replace("_", " ") if port else "")
    return "%s %s" % (ident, {"gpu": "GPU", "nic": "NIC", "nvme": "NVMe"}.get(kind, "device"))


#: why the PCIe register rules do not apply to a device without a PCI Express capability
NO_PCIE_CAPABILITY = ("no PCI Express capability, so no MaxReadReq, MaxPayload or link register to judge "
                      "(a conventional PCI or paravirtual device)")


def pcie_capability(device):
    """True when the device has a PCI Express capability, False when its configuration space was read
    (at least the 64-byte header, without a read error) and its capability list holds none (conventional
    PCI, a virtio device on a PCI bus), None when that is not known."""
    if isinstance(device.get("pcie"), dict):
        return True
    config = device.get("config_bytes")
    if "pcie" in device and device.get("pcie") is None and not device.get("error") \
            and isinstance(config, int) and not isinstance(config, bool) and config >= 64:
        return False
    return None


def _with_label(device, gpu_names):
    item = dict(device)
    item["label"] = _label(device, gpu_names)
    item["pcie_capability"] = pcie_capability(device)
    # a subject element's not_applicable reason makes every rule over it not_applicable (evaluation.py)
    item["not_applicable"] = NO_PCIE_CAPABILITY if item["pcie_capability"] is False else None
    return item


def _is_data_nic(device, min_width):
    if device.get("kind") != "nic":
        return False
    width = _get(device, "pcie", "link_cap_width")
    # a NIC whose width cannot be read stays in, so its unknowns are reported
    return width is None or not isinstance(min_width, int) or width >= min_width


def _redirects(device):
    if device.get("error") and device.get("acs") is None:
        return None
    ctl = _get(device, "acs", "ctl")
    if device.get("acs") is None:
        return []
    if not isinstance(ctl, dict):
        return None
    return [bit for bit in ("request_redirect", "completion_redirect") if ctl.get(bit)]


def gpu_link_states(facts):
    """Per GPU bus id (lower case): ``{"performance_state", "idle_reason"}`` (the state from
    ``performance_state``, else ``power.state``). ``idle_reason`` says why
    the GPU's current link speed says nothing (``GPU idle (P8)``): a performance state of P8 or
    lower power, or nvidia-smi's ``gpu_idle`` clocks event reason; ``None`` when it is busy or its
    state is not known (then the speed is judged as for any device)."""
    states = {}
    for gpu in _get(facts, "nvidia", "gpus") or []:
        if not isinstance(gpu, dict) or not isinstance(gpu.get("bus_id"), str):
            continue
        # <performance_state>, else the same state in <gpu_power_readings>/<power_state> (power.state)
        pstate = next((v for v in (gpu.get("performance_state"), _get(gpu, "power", "state"))
                       if pstate_number(v) is not None), None)
        reasons = _get(gpu, "clocks_event_reasons", "active")
        why = None
        if pstate is not None and pstate_number(pstate) >= IDLE_PSTATE_MIN:
            why = "GPU idle (%s)" % pstate
        elif isinstance(reasons, list) and "gpu_idle" in reasons:
            why = "GPU idle (%sclocks event reason gpu_idle)" % ("%s, " % pstate if pstate else "")
        states[gpu["bus_id"].lower()] = {"performance_state": pstate, "idle_reason": why}
    return states


def _link_speed_subjects(peers):
    """PCI-005's subjects: the peers, an idle GPU not judged (its link speed drops to save power)."""
    subjects = []
    for dev in peers:
        item = dict(dev)
        if not item.get("not_applicable") and dev.get("idle_reason"):
            item["not_applicable"] = "not judged: %s" % dev["idle_reason"]
        state = dev.get("performance_state")
        item["speed_label"] = "%s, %s" % (dev["label"], state) if state and not item["not_applicable"] else dev["label"]
        subjects.append(item)
    return subjects


def _earlier_max_read_request(history, address, running):
    """``(evidence, checked)`` for PCI-008 from ``facts["history"]`` (the audits earlier in this boot,
    added by baseline_evaluate from the audit history): ``evidence`` is the text of a MaxReadReq
    seen different from ``running`` in this boot (``None`` when none); ``checked`` says what was
    looked at when there is none."""
    if not isinstance(history, dict):
        return None, "no audit history to compare with (gpuhost_history_dir is not set)"
    if history.get("reason"):
        return None, "audit history not usable: %s" % history["reason"]
    audits = _int(history.get("audits")) or 0
    if not audits:
        return None, "no earlier audit of this boot in the audit history"
    values = _get(history, "earlier", "max_read_request", address)
    values = [v for v in values if isinstance(v, dict) and _int(v.get("value")) is not None] \
        if isinstance(values, list) else []
    differing = [v for v in values if _int(v["value"]) != running]
    if differing:
        return "was %d B at the audit of %s earlier in this boot" % (_int(differing[-1]["value"]), differing[-1].get("time")), None
    if not values:
        return None, "the %d earlier audit%s of this boot did not record its MaxReadReq" % (audits, "" if audits == 1 else "s")
    return None, "the audit history shows %d B at %s of this boot (since %s)" % (
        running, "the one earlier audit" if audits == 1 else "all %d earlier audits" % audits, history.get("first"))


def _pcie_boot(dev, boot, want, facts=None):
    """``boot_max_read_request``, ``boot_problems``, ``boot_reason`` and ``boot_note`` of one GPU or
    NIC: whether its MaxReadReq holds after a reboot, failing only on evidence that it does not.

    Evidence is a boot mechanism that sets another value (the pcie_tune boot script with a smaller
    entry; pci=pcie_bus_perf on the configured command line, which caps it at MaxPayload), the
    pcie_tune script holding an entry for the device while its unit does not run it at boot (pcie_tune
    set the value at runtime, its boot half is broken), or a value seen different at an earlier audit
    of the same boot (``facts["history"]``) while nothing sets it at boot. Without evidence (a value the firmware programs at every boot) it passes and
    ``boot_note`` names what was checked."""
    result = {"boot_max_read_request": None, "boot_problems": None, "boot_reason": None, "boot_note": None}
    if not isinstance(boot, dict):
        result["boot_reason"] = "persistence facts not gathered (host_facts gather: persistence)"
        return result
    devices = boot.get("devices") if isinstance(boot.get("devices"), dict) else {}
    entry = devices.get(dev.get("address"))
    value = _int(entry.get("max_read_request")) if isinstance(entry, dict) else None
    result["boot_max_read_request"] = value
    if _int(want) is None:
        result["boot_reason"] = "parameter max_read_request_bytes_%s is not set" % dev.get("kind")
        return result
    script = _get(boot, "script", "path") or "the pcie_tune boot script"
    running = _int(_get(dev, "pcie", "max_read_request"))
    lost = "; the running %d B would be lost at reboot" % running if running is not None and running >= want else ""
    state = _unit_state(boot, "gpuhost-pcie.service")
    if value is not None and value < want:
        result["boot_problems"] = ["the boot script %s sets MaxReadReq %d B, below %d B%s" % (script, value, want, lost)]
        return result
    if value is not None:
        # set again at every boot and when the device comes back; or pcie_tune set it at runtime (its
        # script has the entry) and its boot half is broken: evidence that the running value goes at reboot
        result["boot_problems"] = [] if state is None else [
            "%s sets MaxReadReq %d B but %s, so it does not run at boot%s" % (script, value, state, lost)]
        return result
    if not _get(boot, "script", "present"):
        mechanism = "%s is not installed" % script
    else:
        mechanism = "no entry for it in %s" % script
    configured = _get(facts, "kernel", "configured_cmdline", "params")
    pci = cmdline_value(configured, "pci") if isinstance(configured, dict) else None
    payload = _int(_get(dev, "pcie", "max_payload"))
    if isinstance(pci, str) and "pcie_bus_perf" in pci.split(",") and payload is not None and payload < want:
        result["boot_problems"] = [
            "pci=pcie_bus_perf on the configured kernel command line sets MaxReadReq to at most MaxPayload "
            "(%d B) at boot, below %d B, and nothing raises it (%s)%s" % (payload, want, mechanism, lost)]
        return result
    if running is None:
        result["boot_reason"] = "running MaxReadReq unknown (%s) and nothing sets it at boot (%s)" % (
            dev.get("error") or "no PCI Express capability data", mechanism)
        return result
    evidence, checked = _earlier_max_read_request(_get(facts, "history"), dev.get("address"), running)
    if evidence and running >= want:
        result["boot_problems"] = ["MaxReadReq %s and is %d B now: it was changed at runtime and nothing sets it "
                                   "at boot (%s), so the running %d B would be lost at reboot"
                                   % (evidence, running, mechanism, running)]
        return result
    result["boot_problems"] = []
    if evidence:
        result["boot_note"] = ("MaxReadReq %s and is %d B now, below %d B (the MaxReadReq rule fails that), so a "
                               "reboot loses nothing wanted; %s" % (evidence, running, want, mechanism))
    elif running < want:
        result["boot_note"] = ("nothing wanted to lose at reboot: the running %d B is below %d B (the MaxReadReq rule "
                               "fails that) and nothing sets it at boot (%s)" % (running, want, mechanism))
    else:
        result["boot_note"] = ("no evidence the running %d B is lost at reboot: %s, no pci=pcie_bus_perf on the "
                               "configured kernel command line, %s; a value the firmware sets at every boot passes"
                               % (running, mechanism, checked))
    return result


def _pcie(facts, params):
    devices = _devices(facts)
    if devices is None:
        return {"gpus": None, "nics": None, "peer_devices": None, "link_speed": None, "acs_bridges": None,
                "mps_paths": None, "aer": None}
    names = _gpu_names(facts)
    by_addr = dict((d["address"], d) for d in devices)
    gpus = [_with_label(d, names) for d in devices if d.get("kind") == "gpu"]
    link_states = gpu_link_states(facts)
    for gpu in gpus:
        state = link_states.get(gpu["address"].lower()) or {}
        gpu["performance_state"] = state.get("performance_state")
        gpu["idle_reason"] = state.get("idle_reason")
        gpu["idle"] = gpu["idle_reason"] is not None
    nics = [_with_label(d, names) for d in devices if _is_data_nic(d, params.get("nic_min_link_width"))]
    for nic in nics:
        nic.update(performance_state=None, idle_reason=None, idle=False)
    peers = gpus + nics
    boot = _get(facts, "persistence", "pcie")
    for dev in peers:
        dev.update(_pcie_boot(dev, boot, params.get("max_read_request_bytes_%s" % dev.get("kind")), facts))

    # ACS: bridges traversed between every GPU pair and every GPU-NIC pair (facts/pcie_paths.py)
    bridges, unresolved = peer_bridges(gpus, nics, by_addr)
    acs = []
    for addr in sorted(bridges):
        bridge = by_addr.get(addr)
        behind = sorted(bridges[addr])
        item = {
            "address": addr,
            "label": _label(bridge, names) if bridge else "bridge not in pci.devices",
            "port_type": _get(bridge, "pcie", "port_type") if bridge else None,
            "redirects": _redirects(bridge) if bridge else None,
            "peers": behind,
            "peers_label": ", ".join("%s %s" % (by_addr[p].get("kind", "device").upper(), p) for p in behind),
            "reason": (bridge.get("error") if bridge else "%s is on a peer path but missing from pci.devices" % addr),
        }
        acs.append(item)
    for addr in unresolved:
        acs.append({"address": addr, "label": _label(by_addr[addr], names), "port_type": None, "redirects": None,
                    "peers": [], "peers_label": "",
                    "reason": "upstream path of %s unknown (sysfs device link not resolved)" % addr})

    # MaxPayload along each peer's path from its root port
    mps = []
    for dev in peers:
        chain = dev.get("upstream")
        item = {"address": dev["address"], "label": dev["label"], "path": None, "mismatches": None, "reason": None,
                "not_applicable": dev["not_applicable"]}
        if not isinstance(chain, list):
            item["reason"] = "upstream path unknown (sysfs device link not resolved)"
            mps.append(item)
            continue
        path = []
        for addr in chain + [dev["address"]]:
            node = by_addr.get(addr)
            value = _get(node, "pcie", "max_payload") if node else None
            if value is None:
                why = (node or {}).get("error") or "no PCI Express capability data"
                item["reason"] = "MaxPayload of %s unknown: %s" % (addr, why)
                path = None
                break
            path.append({"address": addr, "max_payload": value})
        if path is not None:
            item["path"] = path
            values = set(p["max_payload"] for p in path)
            item["mismatches"] = [] if len(values) <= 1 else \
                ["%s %s B" % (p["address"], p["max_payload"]) for p in path]
        mps.append(item)

    # AER on peers and the bridges above them
    interest = []
    for dev in peers:
        for addr in (dev.get("upstream") or []) + [dev["address"]]:
            if addr not in interest and addr in by_addr:
                interest.append(addr)
    aer = []
    for addr in sorted(interest):
        dev = by_addr[addr]
        info = dev.get("aer")
        if info is None and not dev.get("error"):
            continue  # no AER reporting on this device: nothing to count
        item = {"address": addr, "label": _label(dev, names), "errors": None, "reason": dev.get("error")}
        counters = _get(info, "counters")
        if isinstance(counters, dict):
            errors = []
            complete = True
            for group in ("fatal", "nonfatal"):
                values = counters.get(group)
                if not isinstance(values, dict) or not values:
                    complete = False
                    continue
                for name in sorted(values):
                    count = _int(values[name])
                    if count:
                        errors.append("%s %s=%d" % (group, name, count))
            if errors or complete:
                item["errors"] = errors
            else:
                item["reason"] = "AER counter files aer_dev_fatal/aer_dev_nonfatal missing"
        aer.append(item)
    return {"gpus": gpus, "nics": nics, "peer_devices": peers, "link_speed": _link_speed_subjects(peers),
            "acs_bridges": acs, "mps_paths": mps, "aer": aer}


# -- nvidia -------------------------------------------------------------------------------

def gpu_generation(name, device_id=None):
    """``blackwell``, ``hopper``, ``ada``, ``ampere``, ``turing``, ``volta`` or ``None``."""
    if isinstance(name, str):
        for gen, pattern in _GENERATION_NAMES:
            if pattern.search(name):
                return gen
    if isinstance(device_id, str):
        try:
            value = int(device_id, 16)
        except ValueError:
            return None
        high = (value >> 8) & 0xff
        for gen, highs in _GENERATION_IDS:
            if high in highs:
                return gen
    return None


def _bus_gpus(devices):
    """NVIDIA GPUs on the PCI bus the host's driver should drive: kind ``gpu`` (display/3D
    class) of vendor 0x10de, not bound to a passthrough driver (vfio-pci, pci-stub)."""
    return [d for d in devices if d.get("kind") == "gpu" and str(d.get("vendor_id")).lower() == "0x10de"
            and d.get("driver") not in PASSTHROUGH_DRIVERS]


def _smi_reason(facts, nvidia):
    """Why ``nvidia-smi -q -x`` gave no (or partial) GPU list: ``smi.error``, else the first
    ``errors`` entry of subsystem nvidia about nvidia-smi; ``None`` when it said nothing."""
    reason = _get(nvidia, "smi", "error")
    if isinstance(reason, str) and reason:
        return reason
    for err in _get(facts, "errors") or []:
        if isinstance(err, dict) and err.get("subsystem") == "nvidia" and err.get("reason") and \
                "nvidia-smi" in "%s %s" % (err.get("path"), err.get("reason")) and \
                "topo" not in str(err.get("path")):
            return str(err["reason"])
    return None


def _module_note(nvidia):
    if _get(nvidia, "module", "raw") is None and _get(nvidia, "module", "version") is None:
        return "; the nvidia kernel module is not loaded (/proc/driver/nvidia/version missing)"
    return ""


def _silence_reason(facts, nvidia, reported):
    """Why nvidia-smi does not list GPUs that are on the bus (``reported``: how many it lists)."""
    why = _smi_reason(facts, nvidia) or (
        "nvidia-smi -q -x lists no GPU" if not reported else "the driver does not report them")
    return why + _module_note(nvidia)


def _unreported_reason(facts, nvidia, device, reported, on_bus):
    """Why a GPU on the bus has no nvidia-smi values (the ``reason`` of its entry)."""
    smi = _smi_reason(facts, nvidia)
    if reported:
        text = "nvidia-smi -q -x does not list this GPU (it reports %d of the %d NVIDIA GPUs on the PCI bus)" \
            % (reported, on_bus)
        if smi:
            text += ": " + smi
    else:
        text = "nvidia-smi reports no GPU: %s" % (smi or "nvidia-smi -q -x lists no GPU")
    driver = device.get("driver")
    if not driver:
        text += "; no driver is bound to the GPU"
    elif driver != "nvidia":
        text += "; the GPU is bound to %s, not nvidia" % driver
    return text + _module_note(nvidia)


def _nvidia(facts, params, by_addr, pci_known):
    devices = list(by_addr.values())
    bus = _bus_gpus(devices) if pci_known else None
    bus_ids = [d["address"] for d in bus] if bus is not None else None
    nvidia = _get(facts, "nvidia")
    if not isinstance(nvidia, dict):
        return {"present": None, "gpus": None, "has_blackwell": None, "ecc_modes": None,
                "bus_gpus": bus_ids, "unreported": None, "smi_problems": None}
    driver = nvidia.get("driver_version") or _get(nvidia, "module", "version")
    minimums = params.get("nvidia_driver_min") if isinstance(params.get("nvidia_driver_min"), dict) else {}
    policy = params.get("power_limit_policy")
    gpus = []
    for gpu in nvidia.get("gpus") or []:
        if not isinstance(gpu, dict):
            continue
        bus_id = gpu.get("bus_id")
        pci = by_addr.get(bus_id) if isinstance(bus_id, str) else None
        generation = gpu_generation(gpu.get("name"), (pci or {}).get("device_id"))
        power = gpu.get("power") if isinstance(gpu.get("power"), dict) else {}
        ecc = gpu.get("ecc") if isinstance(gpu.get("ecc"), dict) else {}
        reasons = _get(gpu, "clocks_event_reasons", "active")
        node = (pci or {}).get("numa_node")
        if not isinstance(node, int) or isinstance(node, bool) or node < 0:
            node = _int(_get(gpu, "topology", "numa_affinity"))
        target = power.get("max_w") if policy == "max" else power.get("default_w") if policy == "default" else None
        gpus.append({
            "index": gpu.get("index"),
            "bus_id": bus_id,
            "name": gpu.get("name"),
            "label": "GPU%s %s" % (gpu.get("index"), gpu.get("name") or ""),
            "generation": generation,
            "driver_version": driver,
            "driver_min": minimums.get(generation or "default", minimums.get("default")),
            "persistence": gpu.get("persistence"),
            "ecc_current": ecc.get("current"),
            "ecc_pending": ecc.get("pending"),
            "ecc_pending_matches": None if ecc.get("current") is None or ecc.get("pending") is None
            else ecc.get("current") == ecc.get("pending"),
            "power_limit_w": power.get("limit_w"),
            "power_target_w": target,
            "throttle_active": None if not isinstance(reasons, list) else [r for r in reasons if r in THROTTLE_REASONS],
            "width_current": _get(gpu, "pcie", "width_current"),
            "width_max": _get(gpu, "pcie", "width_max"),
            "numa_node": node,
            "reported": True,
            "reason": None,
        })
    modes = {}
    for gpu in gpus:
        if gpu["ecc_current"] is None:
            modes = None
            break
        modes[gpu["ecc_current"]] = modes.get(gpu["ecc_current"], 0) + 1
    if not gpus:
        modes = None
    present = nvidia.get("present")
    has_bw = any(g["generation"] == "blackwell" for g in gpus)
    if not gpus:
        # no nvidia-smi data: fall back to PCI ids so Blackwell rules still apply
        has_bw = any(d.get("kind") == "gpu" and str(d.get("vendor_id")).lower() == "0x10de" and
                     gpu_generation(None, d.get("device_id")) == "blackwell" for d in devices)

    # GPUs on the bus that nvidia-smi does not list: subjects with null values and the reason,
    # so a driver that stopped answering gives unknown findings instead of no subjects
    unreported = problems = None
    if bus is not None:
        listed = set(g["bus_id"].lower() for g in gpus if isinstance(g["bus_id"], str))
        missing = [d for d in bus if d["address"].lower() not in listed]
        reported = len(bus) - len(missing)
        unreported = [d["address"] for d in missing]
        problems = []
        if missing:
            problems.append("nvidia-smi reports %d of the %d NVIDIA GPUs on the PCI bus, not %s: %s" % (
                reported, len(bus), ", ".join(unreported), _silence_reason(facts, nvidia, reported)))
        for dev in missing:
            generation = gpu_generation(None, dev.get("device_id"))
            node = dev.get("numa_node")
            gpus.append({
                "index": None, "bus_id": dev["address"], "name": None, "label": _label(dev, {}),
                "generation": generation, "driver_version": driver,
                "driver_min": minimums.get(generation or "default", minimums.get("default")),
                "persistence": None, "ecc_current": None, "ecc_pending": None, "ecc_pending_matches": None,
                "power_limit_w": None, "power_target_w": None, "throttle_active": None,
                "width_current": None, "width_max": None,
                "numa_node": node if isinstance(node, int) and not isinstance(node, bool) and node >= 0 else None,
                "reported": False,
                "reason": _unreported_reason(facts, nvidia, dev, reported, len(bus)),
            })
        if missing and all(isinstance(g["bus_id"], str) for g in gpus):
            gpus.sort(key=lambda g: g["bus_id"].lower())
        has_bw = has_bw or any(g["generation"] == "blackwell" for g in gpus)
    return {"present": present, "gpus": gpus, "has_blackwell": has_bw, "ecc_modes": modes,
            "bus_gpus": bus_ids, "unreported": unreported, "smi_problems": problems}


# -- lxc ----------------------------------------------------------------------------------

def _allows(devices_allow, major):
    """Whether ``lxc.cgroup2.devices.allow`` entries grant character major ``major``."""
    for entry in devices_allow:
        match = _ALLOW_RE.match(str(entry))
        if not match:
            continue
        kind, maj = match.group(1), match.group(2)
        if kind == "a" or (kind == "c" and (maj is None or maj == "*" or int(maj) == major)):
            return True
    return False


def _nodes_cpus(facts):
    result = {}
    for node in _get(facts, "numa", "nodes") or []:
        if isinstance(node, dict) and isinstance(node.get("id"), int):
            result[node["id"]] = parse_cpulist(node.get("cpulist"))
    return result


def _lxc(facts, params, gpus_by_index):
    lxc = _get(facts, "lxc")
    if not isinstance(lxc, dict):
        return {"containers": None, "gpu_containers": None, "host_memory_mib": None, "memory_limit_mib": None}
    nodes = [n for n in _get(facts, "numa", "nodes") or [] if isinstance(n, dict)]
    totals = [_int(n.get("mem_total_kb")) for n in nodes]
    host_mib = None if not totals or any(t is None for t in totals) else sum(totals) // 1024
    reserve = params.get("lxc_host_reserve_gib_per_node")
    limit = None
    if host_mib is not None and isinstance(reserve, (int, float)) and not isinstance(reserve, bool):
        limit = int(host_mib - reserve * 1024 * len([t for t in totals if t]))
    uvm = _int(lxc.get("nvidia_uvm_major"))
    node_cpus = _nodes_cpus(facts)
    containers = []
    for ct in lxc.get("containers") or []:
        if not isinstance(ct, dict):
            continue
        allow = [str(a) for a in ct.get("devices_allow") or []]
        sources = []
        for mount in ct.get("mounts") or []:
            if isinstance(mount, dict) and mount.get("source"):
                sources.append(str(mount["source"]))
        sources += [str(e) for e in ct.get("dev_entries") or [] if e]
        nodes_present = set(s if s.startswith("/") else "/" + s for s in sources)
        minors = sorted(set(int(m.group(1)) for m in (_GPU_NODE_RE.match(s) for s in nodes_present) if m))
        holds = bool(minors) or any(n in nodes_present for n in ("/dev/nvidiactl", "/dev/nvidia-uvm")) or \
            any(re.match(r"^\s*c\s+195:", a) for a in allow)
        item = {"id": ct.get("id"), "label": "CT %s" % ct.get("id"), "holds_gpus": holds, "gpu_minors": minors,
                "memory_mib": ct.get("memory_mib"), "memory_limit_mib": limit,
                "missing_majors": None, "missing_nodes": None, "gpu_numa_nodes": None,
                "numa_pinning_problems": None, "reason": None}
        if holds:
            missing = []
            if not _allows(allow, 195):
                missing.append("195 (nvidia)")
            if uvm is not None and not _allows(allow, uvm):
                missing.append("%d (nvidia-uvm, live major)" % uvm)
            if uvm is None and not missing:
                item["reason"] = "live nvidia-uvm major unknown: /proc/devices has no nvidia-uvm (module not loaded?)"
                missing = None
            item["missing_majors"] = missing
            item["missing_nodes"] = [n for n in ("/dev/nvidiactl", "/dev/nvidia-uvm") if n not in nodes_present] + \
                ([] if minors else ["/dev/nvidia<N> (no GPU device node)"])
            gpu_nodes = set()
            for minor in minors:
                gpu = gpus_by_index.get(minor)
                node = gpu.get("numa_node") if gpu else None
                if node is None:
                    gpu_nodes = None
                    item["reason"] = item["reason"] or "NUMA node of /dev/nvidia%d unknown" % minor
                    break
                gpu_nodes.add(node)
            if gpu_nodes is not None and minors:
                item["gpu_numa_nodes"] = sorted(gpu_nodes)
                item["numa_pinning_problems"] = _pinning_problems(ct, gpu_nodes, node_cpus)
            elif not minors:
                item["reason"] = item["reason"] or "no /dev/nvidia<N> mounted: no GPU to pin to"
        containers.append(item)
    return {"containers": containers, "gpu_containers": [c for c in containers if c["holds_gpus"]],
            "host_memory_mib": host_mib, "memory_limit_mib": limit}


def _pinning_problems(ct, gpu_nodes, node_cpus):
    problems = []
    allowed = set()
    for node in gpu_nodes:
        cpus = node_cpus.get(node)
        if cpus is None:
            return None
        allowed |= cpus
    wanted = ",".join(str(n) for n in sorted(gpu_nodes))
    cpuset = ct.get("cpuset")
    if not cpuset:
        problems.append("no lxc.cgroup2.cpuset.cpus (GPU node(s) %s)" % wanted)
    else:
        cpus = parse_cpulist(cpuset)
        if cpus is None:
            problems.append("cpuset %r unreadable" % cpuset)
        elif cpus - allowed:
            problems.append("cpus %s outside GPU node(s) %s" % (facts_cpu.format_cpulist(cpus - allowed), wanted))
    mems = ct.get("cpuset_mems")
    if mems in (None, ""):
        problems.append("no lxc.cgroup2.cpuset.mems (GPU node(s) %s)" % wanted)
    else:
        nodes = parse_cpulist(mems)
        if nodes is None:
            problems.append("cpuset.mems %r unreadable" % mems)
        elif nodes - set(gpu_nodes):
            problems.append("mems %s not GPU node(s) %s" % (facts_cpu.format_cpulist(nodes - set(gpu_nodes)), wanted))
    return problems


def derive(facts, params):
    """A shallow copy of ``facts`` with the ``derived`` key added."""
    facts = facts if isinstance(facts, dict) else {}
    params = params if isinstance(params, dict) else {}
    doc = dict(facts)
    devices = _devices(facts)
    by_addr = dict((d["address"], d) for d in devices or [])
    nvidia = _nvidia(facts, params, by_addr, devices is not None)
    gpus_by_index = dict((g["index"], g) for g in nvidia["gpus"] or [] if isinstance(g.get("index"), int))
    doc["derived"] = {
        "cpu": _cpu(facts, params),
        "kernel": _kernel(facts, params),
        "pcie": _pcie(facts, params),
        "nvidia": nvidia,
        "lxc": _lxc(facts, params, gpus_by_index),
        "inventory": derive_inventory(facts, params),  # golden inventory of learn mode (INV-*)
    }
    doc["derived"]["health"] = derive_health(facts, params, doc["derived"])  # plugin_utils/derive_health.py
    return doc
