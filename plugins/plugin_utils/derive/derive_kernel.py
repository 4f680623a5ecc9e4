# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""``derived.kernel``: the running against the configured kernel command line, kernel releases
installed but not booted, and the sysctl values the next boot will apply. Part of :func:`derive.derive`.
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.kernel import cmdline_value, compare_kernel_release
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.sysctls import SYSCTLS
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_common import _int
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_cpu import cpu_generation
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.docpath import get as _get

__metaclass__ = type

#: command-line keys the boot loader adds by itself: never in the configured line
BOOTLOADER_KEYS = frozenset(("BOOT_IMAGE", "initrd", "ro", "rw", "root", "rootflags", "rootfstype", "boot"))


def _fmt_param(key, value):
    return key if value is True else "%s=%s" % (key, value)


#: how KERNEL-001 names a CPU generation of ``kernel_min_cpu``
GENERATION_LABELS = {"zen3": "AMD Zen 3 (family 0x19)", "zen4": "AMD Zen 4 (family 0x19)",
                     "zen5": "AMD Zen 5 (family 0x1a)", "intel": "Intel"}


def kernel_minimum(facts, params):
    """``(minimum, source)``: the oldest accepted running kernel, the newer of ``kernel_min`` (the site
    floor) and ``kernel_min_cpu[<generation of this CPU>]``; ``source`` says which. ``(None, reason)``
    when neither is a version string."""
    floor = params.get("kernel_min") if isinstance(params.get("kernel_min"), str) else None
    table = params.get("kernel_min_cpu") if isinstance(params.get("kernel_min_cpu"), dict) else {}
    generation = cpu_generation(_get(facts, "cpu"))
    specific = table.get(generation) if generation else None
    specific = specific if isinstance(specific, str) else None
    if specific is not None and (floor is None or (compare_kernel_release(specific, floor) or 0) > 0):
        return specific, "kernel_min_cpu.%s: %s" % (generation, GENERATION_LABELS.get(generation, generation))
    if floor is not None:
        if generation is None:
            why = "CPU generation unknown from vendor, family and model"
        elif specific is None:
            why = "no kernel_min_cpu entry for %s" % GENERATION_LABELS.get(generation, generation)
        else:
            why = "kernel_min_cpu.%s %s is not newer" % (generation, specific)
        return floor, "kernel_min (%s)" % why
    return None, "parameters kernel_min and kernel_min_cpu give no minimum"


def _kernel(facts, params):
    minimum, minimum_source = kernel_minimum(facts, params)
    kernel = _get(facts, "kernel") or {}
    release = kernel.get("release") if isinstance(kernel, dict) else None
    installed = kernel.get("installed") if isinstance(kernel, dict) else None
    newer = None
    pending_upgrade = None
    if isinstance(release, str) and isinstance(installed, list):
        newer = [r for r in installed if isinstance(r, str) and compare_kernel_release(r, release) == 1]
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
    return {"kernel_min": minimum, "kernel_min_source": minimum_source, "newer_installed": newer,
            "newer_installed_note": newer_note, "pending_upgrade": pending_upgrade,
            "cmdline_diff": diff, "cmdline_pending": cmdline_pending, "sysctl_boot": _sysctl_boot(facts, params)}


def _numa_balancing_default(facts):
    """``(value, text)`` the kernel starts kernel.numa_balancing with when nothing sets it (its
    ``boot_default`` in facts/sysctls.py is ``None``: the kernel's build and the host decide).

    mm/mempolicy.c turns balancing on at boot only when the kernel has it (CONFIG_NUMA_BALANCING), is
    built to enable it (CONFIG_NUMA_BALANCING_DEFAULT_ENABLED) and more than one node is online. The
    options come from the running kernel's configuration (``kernel.config``); without it the text says
    the build default is assumed, and from what.
    """
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


def _kernel_default(name, facts):
    """``(value, text)`` the kernel starts sysctl ``name`` with when nothing sets it; value ``None`` when unknown."""
    default = SYSCTLS[name]["boot_default"]
    if default is None:
        return _numa_balancing_default(facts)
    return default, "the kernel default %d" % default


def _boot_cmdline_value(name, configured):
    """``(value text, parameter)`` the configured command line gives sysctl ``name``, or ``(None, None)``.

    ``sysctl.<name>=`` (kernel 5.8+, '.' or '/' as separator) is applied just before init and
    so overrides the sysctl's own boot parameter (``boot_param``, e.g. ``numa_balancing=enable|disable``,
    applied earlier in boot).
    """
    found = (None, None)
    param = SYSCTLS[name]["boot_param"]
    if param:
        value = cmdline_value(configured, param["name"])
        if value in param["values"]:
            found = (str(param["values"][value]), "%s=%s" % (param["name"], value))
    for key, value in configured.items():
        if key.startswith("sysctl.") and key[len("sysctl."):].replace("/", ".") == name and value is not True:
            found = (str(value), "%s=%s" % (key, value))
    return found


def _boot_target(name, params):
    """``(wanted text, test, None)`` of the value sysctl ``name`` must have after a reboot (its
    ``boot_want``), or ``(None, None, reason)`` when the profile parameter it names is not set."""
    want = SYSCTLS[name]["boot_want"]
    if "equals" in want:
        return "%d" % want["equals"], lambda value: value == want["equals"], None
    limit = params.get(want["at_most_param"])
    if _int(limit) is None:
        return None, None, "parameter %s is not set" % want["at_most_param"]
    return "at most %d" % limit, lambda value: value <= limit, None


def _sysctl_boot(facts, params):
    """Per sysctl the fix modules manage: the value after a reboot, where it comes from, and
    the problems when it is not what the profile wants (``derived.kernel.sysctl_boot``)."""
    persisted = _get(facts, "kernel", "sysctl_persisted")
    running = _get(facts, "kernel", "sysctl")
    configured = _get(facts, "kernel", "configured_cmdline", "params")
    configured = configured if isinstance(configured, dict) else {}
    result = {}
    for name, spec in SYSCTLS.items():
        short = spec["fact"]
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
            param = spec["boot_param"]
            source = "nothing sets it at boot (no sysctl.d file, no sysctl.%s=%s on the configured kernel command " \
                     "line), so %s applies" % (name, " or %s=" % param["name"] if param else "", why)
        item["source"] = source
        boot = _int(text)
        item["boot"] = boot
        want, wanted, reason = _boot_target(name, params)
        if reason:
            item["reason"] = reason
            continue
        if text is None:
            item["reason"] = "value of %s after a reboot unknown: %s" % (name, source)
            continue
        if boot is None:
            item["problems"] = ["%s: %r is not an integer, so systemd-sysctl rejects it and the boot value is the "
                                "kernel's own" % (source, text)]
            continue
        if wanted(boot):
            item["problems"] = []
            continue
        lost = "; the running value %d would be lost at reboot" % item["running"] \
            if item["running"] is not None and wanted(item["running"]) else ""
        item["problems"] = ["%s would be %d after a reboot, wanted %s: %s%s" % (name, boot, want, source, lost)]
    return result
