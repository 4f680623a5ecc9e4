# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""tuned facts: whether the tuned daemon runs, is enabled at boot, and which profile it applies.

The ``cpu.tuned`` section of docs/facts.md. On RHEL-family hosts tuned owns the CPU power
settings (governor, EPP, C-state limits) through its active profile, and the cpu_power fix
writes a child profile there instead of a competing boot unit (``fix.cpu``).

What is read, and why it is reliable on a live host and on a snapshot alike (files only, no
command): ``/etc/tuned/active_profile`` (the profile names tuned applies, written by
``tuned-adm profile``), ``/etc/tuned/profile_mode`` (``manual`` or ``auto``),
``/etc/tuned/tuned-main.conf`` (the package's configuration: tuned is installed),
``/run/tuned/tuned.pid`` (written by ``tuned -P`` as tuned.service starts it, removed when it
stops) and ``/proc/<pid>/comm`` of that pid (a stale pid file names no tuned process), the
``multi-user.target.wants/tuned.service`` link (enabled at boot), and the ``tuned.conf`` of the
active profile when it is a user profile (``/etc/tuned/profiles/<name>`` from tuned 2.23,
``/etc/tuned/<name>`` before). Paths are tuned's own (``tuned/consts.py``).

Pure parsers (:func:`parse_active_profile`, :func:`parse_profile_mode`, :func:`parse_pid`,
:func:`parse_tuned_conf`, :func:`valid_profile_name`) never raise; :func:`gather` reads through
a ``Root``.
"""

from __future__ import absolute_import, division, print_function

import re

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.persist import (
    CPU_SETTINGS_MARK, WANTS_DIR, checked_cpu_settings, cpu_script_settings)
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import as_text

__metaclass__ = type

SUBSYSTEM = "cpu"

TUNED_ETC = "/etc/tuned"
ACTIVE_PROFILE_PATH = TUNED_ETC + "/active_profile"
PROFILE_MODE_PATH = TUNED_ETC + "/profile_mode"
MAIN_CONF_PATH = TUNED_ETC + "/tuned-main.conf"
PID_PATH = "/run/tuned/tuned.pid"
UNIT_NAME = "tuned.service"
WANTS_LINK = WANTS_DIR + "/" + UNIT_NAME
#: tuned >= 2.23 keeps profiles in <dir>/profiles/<name>; older releases in <dir>/<name>
SYSTEM_DIR = "/usr/lib/tuned"
SYSTEM_PROFILES_DIR = SYSTEM_DIR + "/profiles"
USER_PROFILES_DIR = TUNED_ETC + "/profiles"
PROFILE_FILE = "tuned.conf"
#: the child profile gpuhost.baseline.cpu_power writes and selects
MANAGED_PROFILE = "gpuhost-baseline"

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$")
_SECTION_RE = re.compile(r"^\[([^\]]+)\]$")


def valid_profile_name(name):
    """A tuned profile name this collection reads or writes a path for (no ``/``, no ``..``)."""
    return isinstance(name, str) and bool(_NAME_RE.match(name)) and ".." not in name


def parse_active_profile(text):
    """``/etc/tuned/active_profile`` -> the list of profile names (tuned merges several,
    separated by blanks); ``[]`` for an empty file (no profile: ``tuned-adm off``), ``None`` for
    no text or a name that is not a profile name."""
    text = as_text(text)
    if text is None:
        return None
    names = text.split()
    if not all(valid_profile_name(name) for name in names):
        return None
    return names


def parse_profile_mode(text):
    """``/etc/tuned/profile_mode`` -> ``manual`` or ``auto``; ``None`` otherwise."""
    text = as_text(text)
    value = text.strip() if text is not None else None
    return value if value in ("manual", "auto") else None


def parse_pid(text):
    """A pid file's text -> a positive int, ``None`` for anything else."""
    text = as_text(text)
    value = (text or "").strip()
    if not value.isdigit() or len(value) > 10:
        return None
    number = int(value)
    return number if number > 0 else None


def parse_tuned_conf(text):
    """A profile's ``tuned.conf`` -> ``{"include": [...], "summary", "sections": {name: {key: value}},
    "settings"}``; ``None`` for no text.

    ``include`` is ``[main] include=`` split on commas and blanks (tuned's list syntax);
    ``settings`` the cpu_power settings of a profile that cpu_power wrote (its
    ``# gpuhost-cpu-power-settings: {...}`` comment line, as in the boot script), else ``None``.
    Lines outside a section and lines without ``=`` are ignored, as tuned does with comments.
    """
    text = as_text(text)
    if text is None:
        return None
    sections = {}
    section = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        match = _SECTION_RE.match(line)
        if match:
            section = sections.setdefault(match.group(1).strip(), {})
            continue
        key, sep, value = line.partition("=")
        if section is None or not sep:
            continue
        section[key.strip()] = value.strip()
    main = sections.get("main", {})
    include = [name for name in re.split(r"[\s,;]+", main.get("include", "")) if name]
    return {
        "include": include,
        "summary": main.get("summary"),
        "sections": sections,
        "settings": cpu_script_settings(text),
    }


def profile_paths(name):
    """Where tuned looks for a user profile ``name``, in its order (a later directory wins)."""
    return [TUNED_ETC + "/" + name + "/" + PROFILE_FILE, USER_PROFILES_DIR + "/" + name + "/" + PROFILE_FILE]


def system_profile_exists(root, name):
    """Whether the distribution ships profile ``name`` (either layout)."""
    return valid_profile_name(name) and any(
        root.exists(base + "/" + name + "/" + PROFILE_FILE) for base in (SYSTEM_PROFILES_DIR, SYSTEM_DIR))


def _running(root, pid):
    """Whether ``pid`` is a live tuned process: its ``/proc/<pid>/comm`` says ``tuned``."""
    if pid is None:
        return False
    comm = root.read_value("/proc/%d/comm" % pid, SUBSYSTEM, optional=True)
    return comm == "tuned"


def _profile(root, name):
    for path in reversed(profile_paths(name)):
        text = root.read_text(path, SUBSYSTEM, optional=True)
        if text is None:
            continue
        parsed = parse_tuned_conf(text)
        settings = parsed["settings"]
        if settings is None and CPU_SETTINGS_MARK.strip() in text:
            root.error(SUBSYSTEM, path, "unreadable '%s{...}' line: its settings are unknown; rewrite it with "
                       "gpuhost.baseline.cpu_power" % CPU_SETTINGS_MARK.strip())
        elif settings is not None:
            settings, problems = checked_cpu_settings(settings)
            if problems:
                root.error(SUBSYSTEM, path, "settings line: %s (ignored); rewrite it with cpu_power"
                           % "; ".join(problems))
        return {"name": name, "path": path, "include": parsed["include"], "managed": settings is not None,
                "settings": settings}
    return None


def gather(root):
    """The ``cpu.tuned`` section of docs/facts.md for ``root`` (a :class:`host.root.Root`)."""
    active_text = root.read_text(ACTIVE_PROFILE_PATH, SUBSYSTEM, optional=True)
    profiles = parse_active_profile(active_text)
    if active_text is not None and profiles is None:
        root.error(SUBSYSTEM, ACTIVE_PROFILE_PATH, "not a list of tuned profile names: %r" % active_text[:60])
    pid = parse_pid(root.read_text(PID_PATH, SUBSYSTEM, optional=True))
    running = _running(root, pid)
    installed = root.exists(MAIN_CONF_PATH) or active_text is not None
    profile = _profile(root, profiles[0]) if profiles and len(profiles) == 1 else None
    return {
        "installed": bool(installed),
        "running": running,
        "enabled": bool(root.exists(WANTS_LINK)),
        "active_profile": " ".join(profiles) if profiles else None,
        "profiles": profiles,
        "profile_mode": parse_profile_mode(root.read_text(PROFILE_MODE_PATH, SUBSYSTEM, optional=True)),
        "profile": profile,
    }
