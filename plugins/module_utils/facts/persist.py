# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Boot-time state: what the fix modules installed so that a setting survives a reboot.

The ``persistence`` section of docs/facts.md. Runtime values (sysfs, config space) say how
the host runs now; these files say what it will do after the next boot:

* ``pcie``: the script, systemd unit, ``multi-user.target.wants`` link and udev rule of
  ``gpuhost.baseline.pcie_tune``; the script's ``apply`` lines give per-device settings.
* ``cpu_power``: the script and unit of ``gpuhost.baseline.cpu_power``; the script carries
  its settings as one JSON comment line.

The paths and the two script parsers live here, not in the fix modules, because the facts
(this module) and the fix modules (``fix.pcie``, ``fix.cpu``) must read the same files the
same way; the fix modules import them from here. sysctl.d and the configured kernel command
line are read by ``facts.kernel`` (``kernel.sysctl_persisted``, ``kernel.configured_cmdline``).

Pure parsers (:func:`parse_pcie_script_lines`, :func:`parse_pcie_script`,
:func:`pcie_device_settings`, :func:`parse_udev_rules`, :func:`parse_unit`,
:func:`cpu_script_settings`) never raise; :func:`gather` reads through a ``Root``. Every file
here is optional: a host the fix modules never touched simply has none of them.
"""

from __future__ import absolute_import, division, print_function

import json
import posixpath
import re

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.pci import SIZES

__metaclass__ = type

SUBSYSTEM = "persistence"

SYSTEMD_DIR = "/etc/systemd/system"
WANTS_DIR = SYSTEMD_DIR + "/multi-user.target.wants"

# -- gpuhost.baseline.pcie_tune ----------------------------------------------------------------

PCIE_SCRIPT_PATH = "/usr/local/sbin/gpuhost-pcie-apply"
PCIE_UNIT_NAME = "gpuhost-pcie.service"
PCIE_UNIT_PATH = SYSTEMD_DIR + "/" + PCIE_UNIT_NAME
PCIE_UNIT_LINK = WANTS_DIR + "/" + PCIE_UNIT_NAME
PCIE_UDEV_PATH = "/etc/udev/rules.d/90-gpuhost-pcie.rules"
PCIE_SCRIPT_MARKER = "# gpuhost.baseline.pcie_tune script format 1"

#: setpci register names: PCI Express capability + 8 (Device Control), ACS capability + 6 (ACS Control)
DEVCTL_REG = "CAP_EXP+8.w"
ACSCTL_REG = "ECAP_ACS+6.w"
REGISTERS = (DEVCTL_REG, ACSCTL_REG)

_READRQ_MASK = 0x7000
_PAYLOAD_MASK = 0x00E0
_ACS_REQ_REDIRECT = 0x0004
_ACS_CMPLT_REDIRECT = 0x0008

_SCRIPT_LINE_RE = re.compile(r"^apply\s+([0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])\s+(\S+)\s+"
                             r"([0-9a-f]{4}):([0-9a-f]{4})(?:\s|$)")

# -- gpuhost.baseline.cpu_power ----------------------------------------------------------------

CPU_SCRIPT_PATH = "/usr/local/sbin/gpuhost-cpu-power"
CPU_UNIT_NAME = "gpuhost-cpu-power.service"
CPU_UNIT_PATH = SYSTEMD_DIR + "/" + CPU_UNIT_NAME
CPU_WANTS_LINK = WANTS_DIR + "/" + CPU_UNIT_NAME
CPU_SETTINGS_MARK = "# gpuhost-cpu-power-settings: "
#: runs the script again when a cpufreq driver module loads (after the unit, it starts with the default governor)
CPU_UDEV_PATH = "/etc/udev/rules.d/90-gpuhost-cpu-power.rules"

#: settings key -> accepted Python type(s) (bool is checked apart: it is an int too)
_CPU_SETTING_TYPES = {"governor": str, "epp": str, "boost": bool, "idle_latency_max_us": int}

_UDEV_PAIR_RE = re.compile(r'([A-Za-z_]+(?:\{[^}]*\})?)\s*(==|!=|\+=|-=|:=|=)\s*"([^"]*)"')


# -- pure parsers -------------------------------------------------------------------------------

def parse_pcie_script_lines(text):
    """``(entries, bad)`` of a pcie_tune boot script.

    ``entries``: ``{(address, register): (value, mask)}`` of its ``apply`` lines (a later
    line for the same register wins, as when the script runs); ``bad``: the ``apply`` lines
    that do not have the form pcie_tune writes (they would make setpci fail or do nothing).
    """
    entries = {}
    bad = []
    for line in (text or "").splitlines():
        stripped = line.strip()
        # calls of the script's apply function (not its definition "apply() {")
        if stripped != "apply" and not stripped.startswith(("apply ", "apply\t")):
            continue
        match = _SCRIPT_LINE_RE.match(stripped)
        if match and match.group(2) in REGISTERS:
            entries[(match.group(1), match.group(2))] = (int(match.group(3), 16), int(match.group(4), 16))
        else:
            bad.append(stripped[:120])
    return entries, bad


def parse_pcie_script(text):
    """``{(address, register): (value, mask)}`` of the ``apply`` lines of the pcie_tune boot script."""
    return parse_pcie_script_lines(text)[0]


def _size(code):
    return SIZES[code] if code < len(SIZES) else None


def pcie_device_settings(entries):
    """Per device, what the script sets: ``{address: {"max_read_request", "max_payload",
    "acs_request_redirect", "acs_completion_redirect"}}``; ``None`` where the script leaves
    a field alone (its mask does not cover all of the field's bits)."""
    devices = {}
    for (address, register), (value, mask) in sorted(entries.items()):
        item = devices.setdefault(address, {"max_read_request": None, "max_payload": None,
                                            "acs_request_redirect": None, "acs_completion_redirect": None})
        if register == DEVCTL_REG:
            if mask & _READRQ_MASK == _READRQ_MASK:
                item["max_read_request"] = _size((value >> 12) & 7)
            if mask & _PAYLOAD_MASK == _PAYLOAD_MASK:
                item["max_payload"] = _size((value >> 5) & 7)
        elif register == ACSCTL_REG:
            if mask & _ACS_REQ_REDIRECT:
                item["acs_request_redirect"] = bool(value & _ACS_REQ_REDIRECT)
            if mask & _ACS_CMPLT_REDIRECT:
                item["acs_completion_redirect"] = bool(value & _ACS_CMPLT_REDIRECT)
    return devices


def parse_udev_rules(text, program, subsystem="pci"):
    """Device names (``KERNEL==`` values: PCI addresses, module name patterns) of the rules in
    ``text`` that match ``SUBSYSTEM==<subsystem>`` and run ``program``."""
    devices = []
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        pairs = _UDEV_PAIR_RE.findall(line)
        kernel = [value for key, op, value in pairs if key == "KERNEL" and op == "=="]
        subsystems = [value for key, op, value in pairs if key == "SUBSYSTEM" and op == "=="]
        runs = [value for key, op, value in pairs if key == "RUN" and op in ("+=", "=", ":=")]
        if kernel and subsystems == [subsystem] and any(value.split()[:1] == [program] for value in runs if value.strip()):
            if kernel[0] not in devices:
                devices.append(kernel[0])
    return sorted(devices)


def parse_unit(text):
    """The parts of a systemd unit file that decide what runs at boot.

    ``{"exec_start": [paths of the programs], "wanted_by": [...], "type": str or None}``;
    ``None`` for text with no ``[Service]`` section. Continuation lines (``\\``), comments and
    ExecStart prefixes (``-``, ``@``, ``:``, ``+``, ``!``) are handled as systemd does.
    """
    if text is None:
        return None
    section = None
    logical = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line[0] in "#;"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        logical.append(pending)
    found = {"exec_start": [], "wanted_by": [], "type": None}
    seen_service = False
    for line in logical:
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            seen_service = seen_service or section == "Service"
            continue
        key, sep, value = line.partition("=")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if section == "Service" and key == "ExecStart":
            if not value:
                found["exec_start"] = []  # an empty assignment resets the list
                continue
            program = value.split()[0].lstrip("-@:+!")
            found["exec_start"].append(program)
        elif section == "Service" and key == "Type":
            found["type"] = value or None
        elif section == "Install" and key == "WantedBy":
            found["wanted_by"].extend(value.split())
    return found if seen_service else None


def cpu_script_settings(text):
    """The settings a cpu_power boot script re-applies; ``None`` for any other file."""
    for line in (text or "").splitlines():
        if line.startswith(CPU_SETTINGS_MARK):
            try:
                settings = json.loads(line[len(CPU_SETTINGS_MARK):])
            except ValueError:
                return None
            return settings if isinstance(settings, dict) else None
    return None


def checked_cpu_settings(settings):
    """``(settings, problems)``: only the known keys with the right type are kept."""
    kept = {}
    problems = []
    for key, value in sorted((settings or {}).items()):
        kind = _CPU_SETTING_TYPES.get(key)
        if kind is None:
            problems.append("unknown setting %s" % key)
        elif (kind is int and (isinstance(value, bool) or not isinstance(value, int))) or \
                (kind is not int and not isinstance(value, kind)):
            problems.append("%s is %r, not a %s" % (key, value, kind.__name__))
        else:
            kept[key] = value
    return kept, problems


def link_target(link_path, target):
    """Absolute host path a stored link target means (relative targets resolve from the link's directory)."""
    if target is None:
        return None
    return posixpath.normpath(posixpath.join(posixpath.dirname(link_path), target))


# -- reading ------------------------------------------------------------------------------------

def _unit(root, path, script_path, name):
    target = root.readlink(path)
    masked = target is not None and link_target(path, target) == "/dev/null"
    text = None if masked else root.read_text(path, SUBSYSTEM, optional=True)
    parsed = parse_unit(text)
    if text is not None and parsed is None:
        root.error(SUBSYSTEM, path, "no [Service] section: not a service unit; rewrite it with the module that "
                   "installs %s" % name)
    return {
        "path": path,
        "present": masked or text is not None,
        "masked": masked,
        "runs_script": bool(parsed and script_path in parsed["exec_start"]),
        "exec_start": parsed["exec_start"] if parsed else [],
        "wanted_by": parsed["wanted_by"] if parsed else [],
    }


def _enabled(root, link, unit):
    # systemd starts what the wants/ entry names; the link's target only matters for a unit
    # outside the search path, so any entry with the unit's name counts (as `systemctl is-enabled`)
    return root.exists(link) and unit["present"] and not unit["masked"]


def _executable(root, path, text):
    """Whether the boot script may be executed (an execute bit set); ``None`` when absent or
    its mode cannot be read. systemd's ExecStart= needs the bit, even for root."""
    if text is None:
        return None
    mode = root.mode(path)
    return None if mode is None else bool(mode & 0o111)


def _gather_pcie(root):
    script_text = root.read_text(PCIE_SCRIPT_PATH, SUBSYSTEM, optional=True)
    entries, bad = parse_pcie_script_lines(script_text)
    managed = script_text is not None and PCIE_SCRIPT_MARKER in script_text.splitlines()
    if script_text is not None and not managed:
        root.error(SUBSYSTEM, PCIE_SCRIPT_PATH, "no '%s' line: not written by gpuhost.baseline.pcie_tune, so "
                   "its settings are not read; rewrite it with pcie_tune (persist: true)" % PCIE_SCRIPT_MARKER)
        entries = {}
    elif bad:
        root.error(SUBSYSTEM, PCIE_SCRIPT_PATH, "%d apply line(s) not in the form pcie_tune writes (first: %r): they "
                   "are ignored; rewrite the script with pcie_tune (persist: true)" % (len(bad), bad[0]))
    executable = _executable(root, PCIE_SCRIPT_PATH, script_text)
    unit = _unit(root, PCIE_UNIT_PATH, PCIE_SCRIPT_PATH, "gpuhost.baseline.pcie_tune")
    enabled = _enabled(root, PCIE_UNIT_LINK, unit)
    udev_text = root.read_text(PCIE_UDEV_PATH, SUBSYSTEM, optional=True)
    udev_devices = parse_udev_rules(udev_text, PCIE_SCRIPT_PATH)
    devices = pcie_device_settings(entries)
    for address, item in devices.items():
        item["udev"] = address in udev_devices
    return {
        "script": {"path": PCIE_SCRIPT_PATH, "present": script_text is not None, "managed": managed,
                   "entries": len(entries), "executable": executable},
        "unit": unit,
        "enabled": enabled,
        "udev": {"path": PCIE_UDEV_PATH, "present": udev_text is not None, "devices": udev_devices},
        "active": bool(managed and unit["runs_script"] and enabled and executable is not False),
        "devices": devices,
    }


def _gather_cpu_power(root):
    script_text = root.read_text(CPU_SCRIPT_PATH, SUBSYSTEM, optional=True)
    settings = cpu_script_settings(script_text)
    if script_text is not None and settings is None:
        root.error(SUBSYSTEM, CPU_SCRIPT_PATH, "no readable '%s{...}' line: not written by gpuhost.baseline.cpu_power, "
                   "so its settings are unknown; rewrite it with cpu_power (persist: systemd)"
                   % CPU_SETTINGS_MARK.strip())
    elif settings is not None:
        settings, problems = checked_cpu_settings(settings)
        if problems:
            root.error(SUBSYSTEM, CPU_SCRIPT_PATH, "settings line: %s (ignored); rewrite it with cpu_power"
                       % "; ".join(problems))
    executable = _executable(root, CPU_SCRIPT_PATH, script_text)
    unit = _unit(root, CPU_UNIT_PATH, CPU_SCRIPT_PATH, "gpuhost.baseline.cpu_power")
    enabled = _enabled(root, CPU_WANTS_LINK, unit)
    udev_text = root.read_text(CPU_UDEV_PATH, SUBSYSTEM, optional=True)
    return {
        "script": {"path": CPU_SCRIPT_PATH, "present": script_text is not None, "managed": settings is not None,
                   "executable": executable},
        "unit": unit,
        "enabled": enabled,
        "udev": {"path": CPU_UDEV_PATH, "present": udev_text is not None,
                 "modules": parse_udev_rules(udev_text, CPU_SCRIPT_PATH, subsystem="module")},
        "active": bool(settings is not None and unit["runs_script"] and enabled and executable is not False),
        "settings": settings,
    }


def gather(root):
    """The ``persistence`` section of docs/facts.md for ``root`` (a :class:`host.root.Root`)."""
    return {"pcie": _gather_pcie(root), "cpu_power": _gather_cpu_power(root)}
