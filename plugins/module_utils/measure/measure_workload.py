# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The site's workloads run on a live host (issue 39 item 2; ``host_measure``'s ``workloads``,
docs/validation.md "Site workloads"). Gathering only: the figure is judged against its floor by VAL-012.

:func:`plan_workloads` says what would run: the argv as given (never a shell; ``argv[0]`` looked up in PATH
when it has no slash), the variables set, the timeout. :func:`measure_workloads` runs each one after the
other with the one command runner (``host/runner.py``): no stdin, its own session, stdout and stderr read
apart, each bounded while read (:data:`OUTPUT_CAP`), killed with its whole process group at its timeout
(or at ``host_measure``'s ``deadline_s``). The figure is read from stdout by ``measure/workload.py``'s
:func:`workload.parse_workload`.

Every result has the keys of :func:`empty_result`; a program not found, a hang, a non-zero exit (the reason
is the last non-empty line of stderr, else of stdout), too much output or output without the figure is
``status: unknown`` with a one-line ``reason`` and no ``value``. Nothing raises. Standard library only,
Python 3.8+.
"""

from __future__ import absolute_import, division, print_function

import os
import time

from ansible_collections.gpuhost.baseline.plugins.module_utils.host import runner
from ansible_collections.gpuhost.baseline.plugins.module_utils.measure import measure, workload

__metaclass__ = type

#: bytes kept of a workload's stdout and of its stderr each; past that it is killed (its figure unread)
OUTPUT_CAP = measure.MAX_TEXT


def empty_result(spec):
    """The keys of one workload's result, before it ran (``status: unknown``); ``name``, ``unit``,
    ``floor``, ``lower_is_better`` and ``parser`` as defined (the judge reads the floor from here)."""
    spec = spec if isinstance(spec, dict) else {}
    return {"name": spec.get("name"), "status": "unknown", "reason": None, "value": None,
            "unit": spec.get("unit") or "", "floor": spec.get("floor"),
            "lower_is_better": spec.get("lower_is_better") is True, "parser": spec.get("parser"),
            "how": None, "command": None, "seconds": None, "exit_status": None, "timeout_s": spec.get("timeout")}


def plan_workloads(specs, which):
    """``[{"name", "status", "reason", "argv", "command", "env", "timeout_s", "parser"}]`` in the order of
    ``specs``: ``status`` ``ok`` (it will run) or ``unknown`` with the reason (a bad definition, the program
    not found). ``which(name) -> path or None`` finds a program named without a slash."""
    plan = []
    for spec in specs or []:
        entry = {"name": spec.get("name") if isinstance(spec, dict) else None, "status": "unknown", "reason": None,
                 "argv": None, "command": None, "env": {}, "timeout_s": None, "parser": None}
        plan.append(entry)
        error = workload.check_workload(spec)
        if error:
            entry["reason"] = error
            continue
        entry.update(timeout_s=spec["timeout"], parser=spec["parser"], env=dict(spec.get("env") or {}))
        program = spec["argv"][0]
        if "/" in program:
            binary = program if os.access(program, os.X_OK) and os.path.isfile(program) else None
        else:
            try:
                binary = which(program)
            except Exception:  # an injected lookup that fails is a program not found
                binary = None
        if not binary:
            entry["reason"] = "%s not found%s or not executable" % (program[:200], "" if "/" in program else " in PATH")
            continue
        entry["argv"] = [binary] + list(spec["argv"][1:])
        entry["command"] = " ".join(entry["argv"])
        entry["status"] = "ok"
    return plan


def _describe(result, name, timeout_s):
    """The reason a bound ended the run, or ``None``."""
    if result.bound == runner.TIMEOUT and result.deadline:
        return result.describe(name)
    if result.bound == runner.TIMEOUT:
        return "killed after %s s (its timeout), with its process group" % timeout_s
    if result.bound == runner.OUTPUT_CAP:
        return "wrote more than %d bytes to %s: killed with its process group, no figure read" % (
            OUTPUT_CAP, result.stream or "its output")
    return None


def measure_one(spec, entry, run=runner.run, clock=time.monotonic):
    """Run one planned workload and read its figure: :func:`empty_result` filled in."""
    result = empty_result(spec)
    result["command"] = entry.get("command")
    if entry.get("status") != "ok" or not entry.get("argv"):
        result["reason"] = entry.get("reason") or "not run: no command planned"
        return result
    name = spec["name"]
    began = clock()
    try:
        ran = run(entry["argv"], timeout=entry["timeout_s"], cap=OUTPUT_CAP, env=entry.get("env") or None)
    except Exception as exc:  # a runner that fails is an unknown, never a traceback
        result["seconds"] = round(clock() - began, 2)
        result["reason"] = "could not be run: %s" % (str(exc)[:200] or type(exc).__name__)
        return result
    result["seconds"] = round(clock() - began, 2)
    result["exit_status"] = ran.rc
    reason = _describe(ran, name, entry["timeout_s"])
    if reason:
        result["reason"] = reason
        return result
    stdout = ran.stdout.decode("utf-8", "replace")
    stderr = ran.stderr.decode("utf-8", "replace")
    if ran.rc == 127 and not stdout and stderr.startswith("cannot run "):
        result["reason"] = workload.last_line(stderr)
        return result
    if ran.rc != 0:
        # what a failing program printed last says why (a traceback's last line, an error after the banner)
        result["reason"] = "exited %s: %s" % (ran.rc, workload.last_line(stderr, stdout))
        return result
    try:
        parsed, error = workload.parse_workload(stdout, spec["parser"], spec.get("pattern"), spec.get("path"))
    except Exception as exc:  # a parser bug must not become a traceback on a host
        parsed, error = None, "output could not be read: %s" % (str(exc)[:200] or type(exc).__name__)
    if error:
        result["reason"] = error
        return result
    result.update(status="ok", value=parsed["value"], how=parsed["how"])
    return result


def measure_workloads(specs, plan, run=runner.run, clock=time.monotonic):
    """Run every workload of ``plan`` (:func:`plan_workloads` of ``specs``) one after the other."""
    return [measure_one(spec, entry, run, clock) for spec, entry in zip(specs or [], plan)]
