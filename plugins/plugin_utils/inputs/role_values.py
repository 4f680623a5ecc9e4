# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuhost.baseline contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The roles' variables checked beyond what an argument spec can say, before any host is contacted.

``baseline_validate`` (``role_spec``) checks every host's role variables against the role's
``meta/argument_specs.yml`` in one task; the spec language has types and choices but no bounds, and its
``list`` type turns a string into a list by commas while the role's tasks use the variable as it is (a
string is then iterated per character). This module adds, per host:

* :data:`INT_BOUNDS`: the least and most value of the integer options (a timeout of 0 switched the
  validate task's timeout off; a GPU tool's timeout could not be raised at all);
* a ``list`` option given as anything but a list is refused;
* a ``path`` option (and :data:`PATH_STRINGS`, and each element of a list of paths) with a control or
  other non-printable character (a newline, ESC, a bidi override) is refused, never created as given;
* :data:`TIMEOUT_DICTS`: each entry of ``gpuhost_command_timeouts`` (tool name -> seconds) is a number of
  seconds the command runner takes (``runner.checked_timeouts``: 1 to 86400; the host-side check of the
  modules and of the self-audit's config is the same function);

and, for the playbooks whose play keywords are computed from inventory variables (:data:`SERIAL_ROLES`),
:func:`serial_problem` and :func:`max_fail_problem`: ``serial: "{{ gpuhost_serial }}"`` crashed Ansible with
a traceback on ``abc`` and ran every host at once on ``0`` or ``-1``.

Messages quote values through ``files.clip`` (escaped, cut). Python 3.8+, standard library only.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.health import WATCH_INTERVAL_BOUNDS
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.runner import checked_timeouts
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.files import clip

#: (least, most) of each integer role option; documented in the roles' argument specs
INT_BOUNDS = {
    "gpuhost_history_keep": (1, 100000),
    "gpuhost_reboot_timeout": (1, 86400),
    # host_measure's repeats (module_utils/measure/measure_host.REPEATS_BOUNDS, which controller code may not
    # import: tests/unit/plugins/plugin_utils/test_role_values.py holds the two equal)
    "gpuhost_prove_repeats": (1, 10),
    "gpuhost_self_audit_nice": (-20, 19),
    "gpuhost_self_audit_history_keep": (1, 100000),
    "gpuhost_self_audit_command_timeout": (1, 3600),
    "gpuhost_self_audit_watch_interval": WATCH_INTERVAL_BOUNDS,  # the runner's own (--watch-interval)
    "gpuhost_validate_duration_s": (1, 60),
    "gpuhost_validate_mem_duration_s": (1, 120),
    "gpuhost_validate_timeout_s": (2, 86400),
    "gpuhost_validate_task_timeout_s": (1, 86400),
    "gpuhost_validate_gpu_bw_timeout_s": (1, 14400),
    "gpuhost_validate_dcgm_diag_timeout_s": (1, 14400),
    "gpuhost_validate_dcgm_health_timeout_s": (1, 14400),
    "gpuhost_validate_nccl_timeout_s": (1, 14400),
}
#: dict options of tool name -> seconds, checked entry by entry as the command runner checks them
TIMEOUT_DICTS = ("gpuhost_command_timeouts",)
#: role options of type str that hold a path (an empty string: the default place)
PATH_STRINGS = ("gpuhost_history_dir", "gpuhost_report_templates", "gpuhost_self_audit_history_dir")
#: the roles whose playbook computes ``serial`` and ``max_fail_percentage`` from gpuhost_serial and
#: gpuhost_max_fail_percentage
SERIAL_ROLES = ("remediate", "validate")

_WHOLE = re.compile(r"\A[+-]?[0-9]+\Z")
_PERCENT = re.compile(r"\A([+-]?[0-9]+)%\Z")


def _shown(value):
    return clip(repr(value) if isinstance(value, str) else value, 80)


def _unprintable(text):
    return isinstance(text, str) and not text.isprintable()


def option_problems(options, raw, validated):
    """What is wrong with one host's values of a role's options beyond its argument spec: ``options`` the
    spec, ``raw`` the values as the inventory gives them, ``validated`` the same after the spec's conversions
    (an option whose conversion failed is missing there: the spec's own error names it). A list of messages."""
    problems = []
    for name in sorted(raw):
        spec = options.get(name) if isinstance(options.get(name), dict) else {}
        value = raw[name]
        kind = spec.get("type")
        if kind == "list" and value is not None and not isinstance(value, (list, tuple)):
            problems.append("%s must be a list (in YAML [a, b]; with -e, JSON: -e '{\"%s\": [...]}'), not %s"
                            % (name, name, _shown(value)))
            continue
        paths = []
        if kind == "path" or name in PATH_STRINGS:
            paths = [value]
        elif kind == "list" and spec.get("elements") == "path":
            paths = list(value or [])
        bad = [path for path in paths if _unprintable(path)]
        if bad:
            problems.append("%s %s holds a control or other non-printable character (escaped here); a path "
                            "with a newline, an escape or a bidi control is refused, never created as given"
                            % (name, _shown(bad[0])))
        if name in INT_BOUNDS and isinstance(validated.get(name), int) and not isinstance(validated[name], bool):
            least, most = INT_BOUNDS[name]
            if not least <= validated[name] <= most:
                problems.append("%s must be %d to %d, not %s" % (name, least, most, _shown(value)))
        if name in TIMEOUT_DICTS and isinstance(validated.get(name), dict):
            problems.extend(_timeouts_problems(name, validated[name]))
    timeout, duration = validated.get("gpuhost_validate_timeout_s"), validated.get("gpuhost_validate_duration_s")
    if isinstance(timeout, int) and isinstance(duration, int) and timeout <= duration and \
            ("gpuhost_validate_timeout_s" in raw or "gpuhost_validate_duration_s" in raw):
        problems.append("gpuhost_validate_timeout_s (%d) must exceed gpuhost_validate_duration_s (%d)"
                        % (timeout, duration))
    return problems


def _timeouts_problems(name, value):
    """The first entry of ``value`` (tool name -> seconds) the command runner would refuse, as one message."""
    for tool in sorted(value, key=str):
        try:
            checked_timeouts({tool: value[tool]})
        except ValueError:
            return ["%s: %s must be a number of seconds from 1 to 86400 (a tool's time bound), not %s"
                    % (name, clip(str(tool), 80), _shown(value[tool]))]
    return []


def serial_problem(value):
    """Why ``value`` (gpuhost_serial) cannot be the play's ``serial``, or ``None``: a whole number of hosts
    per batch of at least 1, a percentage of the hosts from 1% to 100%, or a non-empty list of them (the
    batches in turn, the last repeated). Ansible itself ran every host at once for 0 or a negative number,
    and died with a traceback on a word or ``12.5%``."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if not items:
        return _serial_refusal(value, "an empty list")
    for item in items:
        why = None
        if isinstance(item, bool) or not isinstance(item, (int, str)):
            why = "not a number of hosts"
        elif isinstance(item, int):
            why = None if item >= 1 else "fewer than 1 host per batch (Ansible would run every host at once)"
        else:
            text = item.strip()
            whole, percent = _WHOLE.match(text), _PERCENT.match(text)
            if whole:
                why = None if int(text) >= 1 else "fewer than 1 host per batch (Ansible would run every host at once)"
            elif percent:
                why = None if 1 <= int(percent.group(1)) <= 100 else "a percentage outside 1% to 100%"
            else:
                why = "not a whole number of hosts or a whole percentage"
        if why:
            return _serial_refusal(value, "%s is %s" % (_shown(item), why) if len(items) > 1 or item is not value
                                   else why)
    return None


def _serial_refusal(value, why):
    return ("gpuhost_serial %s cannot be the play's serial (%s): give a whole number of hosts per batch, at least 1 "
            "(-e gpuhost_serial=2), a percentage of the hosts from 1%% to 100%% (-e gpuhost_serial=25%%), or a list "
            "of them; no host was contacted" % (_shown(value), why))


def max_fail_problem(value):
    """Why ``value`` (gpuhost_max_fail_percentage) cannot be the play's ``max_fail_percentage``, or ``None``:
    a number from 0 to 100 (``%`` allowed after it)."""
    number = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str):
        try:
            number = float(value.strip().rstrip("%"))
        except ValueError:
            number = None
    if number is not None and math.isfinite(number) and 0 <= number <= 100:
        return None
    return ("gpuhost_max_fail_percentage %s cannot be the play's max_fail_percentage: give a number from 0 to 100 "
            "(the share of a batch's hosts that may fail before the run stops); no host was contacted" % _shown(value))
