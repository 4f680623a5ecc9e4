# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""LXC facts: are we inside a container, which cgroup limits do we see, and (on a
Proxmox VE host) how every container in ``/etc/pve/lxc/<id>.conf`` is configured.

Container detection reads files only (``systemd-detect-virt`` would be a command, and
commands only come from captures). The parsers are pure functions over text and never
raise; :func:`gather` does the reads through a :class:`host.root.Root` and builds the
``lxc`` section of docs/facts.md.
"""

from __future__ import absolute_import, division, print_function

import math
import re

from urllib.parse import unquote

__metaclass__ = type

SUBSYSTEM = "lxc"
PVE_DIR = "/etc/pve"
PVE_LXC_DIR = "/etc/pve/lxc"

# Same shapes pve-container accepts: "key: value" for its own keys, "lxc.key: value" or
# "lxc.key = value" for raw LXC keys, "[name]" for snapshot and pending sections.
_SECTION_RE = re.compile(r"^\[([^\]]+)\]\s*$")
_LXC_KEY_RE = re.compile(r"^(lxc\.[A-Za-z0-9_.\-]+)\s*(?::|=)\s*(.*?)\s*$")
_KEY_RE = re.compile(r"^([a-z][a-z_]*\d*):\s*(.*?)\s*$")
_MOUNT_POINT_RE = re.compile(r"^mp\d+$")
_DEV_RE = re.compile(r"^dev\d+$")
PENDING_SECTION = "pve:pending"
# ASCII digits only: str.isdigit() also takes characters such as "¹" that int() refuses
_DECIMAL = re.compile(r"[0-9]+\Z")

# cgroup v1 reports "no limit" as the largest page-aligned counter (9223372036854771712).
_V1_UNLIMITED = 1 << 62

_CGROUP_HINTS = (
    (re.compile(r"(^|/)lxc(\.payload[^/]*)?(/|$)"), "lxc"),
    (re.compile(r"(^|/)docker([-/]|$)"), "docker"),
    (re.compile(r"(^|/)kubepods"), "kubernetes"),
    (re.compile(r"(^|/)libpod-"), "podman"),
)


# -- Proxmox container configuration ----------------------------------------------------------
def _int(value):
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        return None


def _number(value):
    """``"8"`` -> 8, ``"0.5"`` -> 0.5 (``cpulimit`` is fractional); ``None`` when not a number."""
    if value is None:
        return None
    value = value.strip()
    try:
        return int(value)
    except ValueError:
        pass
    try:
        number = float(value)
    except ValueError:
        return None
    if math.isnan(number) or math.isinf(number):
        return None
    return number


def _bool(value):
    if value is None:
        return None
    if value.strip() in ("1", "yes", "true", "on"):
        return True
    if value.strip() in ("0", "no", "false", "off"):
        return False
    return None


def _property_string(value, default_key):
    """Proxmox ``a,b=c,d=e``: the first bare item is ``default_key``. Returns a dict."""
    options = {}
    for i, item in enumerate(value.split(",")):
        item = item.strip()
        if not item:
            continue
        if "=" in item:
            key, unused_sep, val = item.partition("=")
            options[key.strip()] = val.strip()
        elif i == 0:
            options[default_key] = item
        else:
            options[item] = None
    return options


def parse_mount_entry(value):
    """``lxc.mount.entry`` is an fstab line: ``source target type options [dump [pass]]``."""
    fields = value.split()
    return {
        "source": fields[0] if len(fields) > 0 else None,
        "target": fields[1] if len(fields) > 1 else None,
        "type": fields[2] if len(fields) > 2 else None,
        "options": fields[3] if len(fields) > 3 else None,
    }


def _new_section():
    return {"description": [], "keys": {}, "lxc": {}, "order": []}


def _summarise(section):
    """The per-container keys of docs/facts.md for one section (current, snapshot, pending)."""
    keys = section["keys"]
    lxc = section["lxc"]

    def last_lxc(*names):
        for name in names:
            values = lxc.get(name)
            if values:
                return values[-1]
        return None

    devices_allow = []
    devices_deny = []
    mounts = []
    for key, value in section["order"]:
        if key in ("lxc.cgroup2.devices.allow", "lxc.cgroup.devices.allow"):
            devices_allow.append(value)
        elif key in ("lxc.cgroup2.devices.deny", "lxc.cgroup.devices.deny"):
            devices_deny.append(value)
        elif key == "lxc.mount.entry":
            mounts.append(parse_mount_entry(value))

    devs = []
    mount_points = []
    for key in sorted(keys, key=_key_order):
        if _DEV_RE.match(key):
            options = _property_string(keys[key], "path")
            devs.append({"key": key, "path": options.pop("path", None), "options": options})
        elif _MOUNT_POINT_RE.match(key):
            options = _property_string(keys[key], "volume")
            mount_points.append({"key": key, "volume": options.pop("volume", None),
                                 "mp": options.pop("mp", None), "options": options})

    return {
        "hostname": keys.get("hostname"),
        "description": "\n".join(section["description"]) if section["description"] else None,
        # pve-container's default for a missing "unprivileged" is 0: a privileged container
        "unprivileged": _bool(keys.get("unprivileged", "0")),
        "memory_mib": _int(keys.get("memory")),
        "swap_mib": _int(keys.get("swap")),
        "cores": _int(keys.get("cores")),
        "cpulimit": _number(keys.get("cpulimit")),
        "cpuset": last_lxc("lxc.cgroup2.cpuset.cpus", "lxc.cgroup.cpuset.cpus"),
        "cpuset_mems": last_lxc("lxc.cgroup2.cpuset.mems", "lxc.cgroup.cpuset.mems"),
        "devices_allow": devices_allow,
        "devices_deny": devices_deny,
        "mounts": mounts,
        "dev_entries": [dev["path"] for dev in devs if dev["path"]],
        "devs": devs,
        "mount_points": mount_points,
        "raw": dict(keys),
        "lxc": dict((name, list(values)) for name, values in lxc.items()),
    }


def _key_order(key):
    # dev10 after dev9, not between dev1 and dev2
    match = re.match(r"^([a-z_]*?)(\d+)$", key)
    if match:
        return (match.group(1), int(match.group(2)))
    return (key, -1)


def parse_pve_lxc_conf(text):
    """Parse a Proxmox ``/etc/pve/lxc/<id>.conf``.

    Returns the current configuration summarised as in docs/facts.md plus
    ``"snapshots"`` (``{name: summary}`` of the ``[name]`` sections), ``"pending"``
    (summary of ``[pve:pending]`` or ``None``) and ``"problems"`` (lines that were
    not understood, ``"line N: ..."``). ``raw`` holds the scalar Proxmox keys (last
    value wins, as in pve-container); ``lxc`` every raw ``lxc.*`` key with all its
    values in order, since those may repeat. Comment lines are the description
    (Proxmox stores it percent-encoded). ``None`` only for non-text input.
    """
    if not isinstance(text, str):
        return None
    current = _new_section()
    sections = {}
    order = []
    section = current
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            section["description"].append(unquote(stripped[1:]))
            continue
        match = _SECTION_RE.match(stripped)
        if match:
            name = match.group(1).strip()
            if name in sections:
                problems.append("line %d: section [%s] repeated; later lines of it are merged" % (number, name))
                section = sections[name]
            else:
                section = sections[name] = _new_section()
                order.append(name)
            continue
        match = _LXC_KEY_RE.match(stripped)
        if match:
            key, value = match.group(1), match.group(2)
            section["lxc"].setdefault(key, []).append(value)
            section["order"].append((key, value))
            continue
        match = _KEY_RE.match(stripped)
        if match:
            key, value = match.group(1), match.group(2)
            section["keys"][key] = value
            section["order"].append((key, value))
            continue
        problems.append("line %d: not 'key: value', '[section]' or a comment: %r" % (number, stripped[:80]))

    result = _summarise(current)
    result["snapshots"] = dict((name, _summarise(sections[name])) for name in order if name != PENDING_SECTION)
    result["pending"] = _summarise(sections[PENDING_SECTION]) if PENDING_SECTION in sections else None
    result["problems"] = problems
    return result


# -- /proc/devices -------------------------------------------------------------------------
def parse_proc_devices(text):
    """``{name: major}`` of the character devices in ``/proc/devices``; ``None`` without that section."""
    if not isinstance(text, str):
        return None
    result = None
    in_char = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped == "Character devices:":
            in_char = True
            result = {} if result is None else result
            continue
        if stripped.endswith("devices:"):
            in_char = False
            continue
        if not in_char or not stripped:
            continue
        parts = stripped.split(None, 1)
        if len(parts) != 2 or not _DECIMAL.match(parts[0]):
            continue
        # the first major registered under a name is the one device nodes use
        result.setdefault(parts[1].strip(), int(parts[0]))
    return result


# -- container detection -------------------------------------------------------------------
#: PID 1's environment: container managers set ``container=<manager>`` there.
ENVIRON_PATH = "/proc/1/environ"


def environ_for_snapshot(data):
    """What a snapshot stores of :data:`ENVIRON_PATH`: its ``container=`` entry, nothing else.

    Detection (:func:`_detect`) reads only that entry, so a snapshot of these bytes gives the
    same facts, while the rest of PID 1's environment (which may hold credentials) never
    leaves the host. Returns ``b"container=<value>\\0"``, or ``b""`` when there is none.
    """
    value = (parse_environ(data) or {}).get("container")
    if value is None:
        return b""
    return ("container=%s\0" % value).encode("utf-8")


def parse_environ(data):
    """``{name: value}`` of a NUL-separated ``/proc/PID/environ`` (bytes or text)."""
    if data is None:
        return None
    if isinstance(data, bytes):
        data = data.decode("utf-8", "replace")
    result = {}
    for item in data.split("\0"):
        if "=" in item:
            key, unused_sep, value = item.partition("=")
            result[key] = value
    return result


def cgroup_hints(text):
    """Container managers named by the paths in ``/proc/1/cgroup``: ``[(manager, line)]``."""
    hints = []
    if not isinstance(text, str):
        return hints
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        path = parts[2].strip()
        for pattern, manager in _CGROUP_HINTS:
            if pattern.search(path):
                hints.append((manager, line.strip()))
                break
    return hints


def _detect(root):
    evidence = []
    managers = []
    environ_read = False

    environ = root.read_bytes(ENVIRON_PATH, SUBSYSTEM, optional=True)
    if environ is not None:
        environ_read = True
        value = parse_environ(environ).get("container")
        if value:
            evidence.append("/proc/1/environ: container=%s" % value)
            managers.append(value)

    manager = root.read_value("/run/host/container-manager", SUBSYSTEM, optional=True)
    if manager:
        evidence.append("/run/host/container-manager: %s" % manager)
        managers.append(manager)

    cgroup = root.read_text("/proc/1/cgroup", SUBSYSTEM, optional=True)
    for name, line in cgroup_hints(cgroup):
        evidence.append("/proc/1/cgroup: %s" % line)
        managers.append(name)

    for path in ("/dev/.lxc-boot-id", "/dev/.lxc"):
        if root.exists(path):
            evidence.append("%s exists" % path)
            managers.append("lxc")

    if evidence:
        inside = True
    elif environ_read:
        inside = False
    else:
        # PID 1's environment is the one signal every manager sets; without it (not root,
        # not captured) an absence of other hints proves nothing.
        inside = None
    return inside, evidence, (managers[0] if managers else None)


def _cgroup_value(text, unlimited_at=None):
    if text is None:
        return None
    if text == "max":
        return "max"
    try:
        value = int(text)
    except ValueError:
        return None
    if unlimited_at is not None and value >= unlimited_at:
        return "max"
    return value


def _cgroup(root):
    base = "/sys/fs/cgroup"
    if root.exists(base + "/cgroup.controllers"):
        # At the host's root cgroup these files do not exist: no limit to report.
        memory = root.read_value(base + "/memory.max", SUBSYSTEM, optional=True)
        return {
            "version": 2,
            "memory_max": _cgroup_value(memory),
            "cpuset_cpus": root.read_value(base + "/cpuset.cpus.effective", SUBSYSTEM, optional=True),
            "cpuset_mems": root.read_value(base + "/cpuset.mems.effective", SUBSYSTEM, optional=True),
        }
    if root.isdir(base + "/memory") or root.isdir(base + "/cpuset"):
        memory = root.read_value(base + "/memory/memory.limit_in_bytes", SUBSYSTEM, optional=True)
        return {
            "version": 1,
            "memory_max": _cgroup_value(memory, unlimited_at=_V1_UNLIMITED),
            "cpuset_cpus": root.read_value(base + "/cpuset/cpuset.effective_cpus", SUBSYSTEM, optional=True),
            "cpuset_mems": root.read_value(base + "/cpuset/cpuset.effective_mems", SUBSYSTEM, optional=True),
        }
    return {"version": None, "memory_max": None, "cpuset_cpus": None, "cpuset_mems": None}


def _container_id(filename):
    stem = filename[:-len(".conf")]
    return int(stem) if _DECIMAL.match(stem) else stem


def _containers(root):
    containers = []
    names = root.listdir(PVE_LXC_DIR, pattern="*.conf")
    for name in sorted(names, key=lambda n: (0, int(n[:-5]), n) if _DECIMAL.match(n[:-5]) else (1, 0, n)):
        path = "%s/%s" % (PVE_LXC_DIR, name)
        text = root.read_text(path, SUBSYSTEM)
        if text is None:
            continue
        parsed = parse_pve_lxc_conf(text)
        for problem in parsed.pop("problems"):
            root.error(SUBSYSTEM, path, "%s: line ignored; fix the file or edit it with pct set" % problem)
        entry = {"id": _container_id(name)}
        entry.update(parsed)
        containers.append(entry)
    return containers


def gather(root):
    """The ``lxc`` section of the facts (docs/facts.md) read through ``root``."""
    inside, evidence, manager = _detect(root)
    proxmox = root.isdir(PVE_DIR)
    devices_text = root.read_text("/proc/devices", SUBSYSTEM)
    majors = parse_proc_devices(devices_text)
    if devices_text is not None and majors is None:
        root.error(SUBSYSTEM, "/proc/devices", "no 'Character devices:' section: not a /proc/devices file")
    majors = majors or {}
    return {
        "inside_container": inside,
        "evidence": evidence,
        "manager": manager,
        "cgroup": _cgroup(root),
        "proxmox": proxmox,
        "containers": _containers(root) if proxmox else [],
        "nvidia_uvm_major": majors.get("nvidia-uvm"),
        "nvidia_majors": dict((name, major) for name, major in majors.items() if name.startswith("nvidia")),
    }
