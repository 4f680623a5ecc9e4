# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers the ``derive_*`` areas share: a lenient integer, the cpulist adapter, a systemd
unit's state. Pure functions, no I/O, never raise on odd facts.
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import cpu as facts_cpu

__metaclass__ = type


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
