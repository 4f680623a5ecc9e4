# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU measurements run on a live host (issue 23; module ``host_measure``, docs/validation.md): host<->GPU and
GPU<->GPU copy bandwidth with nvbandwidth, the DCGM diagnostic (``dcgmi diag -r N -j``), DCGM's health
incidents (``dcgmi health -c -j``) and an NCCL all-reduce across the host's GPUs (nccl-tests
``all_reduce_perf``). Gathering only: nothing here judges.

:func:`plan_gpu` says what would run (the tool found in PATH through an injected ``which``, the argv, the
environment, the timeout) or why not: no NVIDIA GPU (no entry under ``/proc/driver/nvidia/gpus`` and no
``/dev/nvidia0``; both paths are arguments) or no tool. :func:`measure_gpu` runs each planned command with
``measure_host.run_bounded`` (own session, killed with its process group at its own timeout) and reads the
output with the parsers of ``measure/measure.py``.

Every result has the keys of its measurement whatever happens (:func:`empty_result`); a missing tool, a hang,
a non-zero exit without readable output or garbage is ``status: unknown`` with a one-line ``reason`` and no
figure. Nothing raises for bad input. Standard library only, Python 3.8+.
"""

from __future__ import absolute_import, division, print_function

import os
import re
import time

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.nvidia import normalise_bus_id
from ansible_collections.gpuhost.baseline.plugins.module_utils.measure import measure, measure_host

__metaclass__ = type

GPU_PROC = "/proc/driver/nvidia/gpus"
GPU_DEV = "/dev/nvidia0"

#: the GPU measurements, in the order they run
GPU_MEASUREMENTS = ("gpu_bw", "dcgm_diag", "dcgm_health", "nccl")
#: the program each one runs
GPU_TOOLS = {"gpu_bw": "nvbandwidth", "dcgm_diag": "dcgmi", "dcgm_health": "dcgmi", "nccl": "all_reduce_perf"}
#: where a missing program comes from (the end of an ``unknown`` reason)
TOOL_SOURCES = {
    "nvbandwidth": "build it from https://github.com/NVIDIA/nvbandwidth (needs the CUDA toolkit) and put it in PATH",
    "dcgmi": "install NVIDIA DCGM, the datacenter-gpu-manager package of NVIDIA's CUDA repository",
    "all_reduce_perf": "build https://github.com/NVIDIA/nccl-tests (make; needs CUDA and NCCL) and put its build/ "
                       "directory in PATH",
}
#: default seconds each run may take before it is killed (the module's *_timeout_s options)
GPU_TIMEOUTS = {"gpu_bw": 300, "dcgm_diag": 600, "dcgm_health": 60, "nccl": 300}
#: the nvbandwidth testcases run: host to each GPU, each GPU to host (copy engines), GPU to GPU (peer reads)
NVB_H2D = "host_to_device_memcpy_ce"
NVB_D2H = "device_to_host_memcpy_ce"
NVB_D2D = "device_to_device_memcpy_read_ce"
NVB_TESTCASES = (NVB_H2D, NVB_D2H, NVB_D2D)
#: CUDA numbers the GPUs in PCI bus order, as nvidia-smi does (CUDA's default puts the fastest first)
CUDA_ENV = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
#: the bus id in an nvbandwidth device string: ``NVIDIA H100 80GB HBM3 (00000000:18:00)``
_NVB_BUS_RE = re.compile(r"\(([0-9a-fA-F]{1,8}:[0-9a-fA-F]{1,2}:[0-9a-fA-F]{1,2})\)")
#: the line nvbandwidth -j's JSON starts on
_JSON_START_RE = re.compile(r"^[ \t]*\{", re.M)


def gpu_count(gpus_dir=GPU_PROC, dev=GPU_DEV, listdir=os.listdir, exists=os.path.exists):
    """``(count, present)``: the entries under ``gpus_dir`` (one per GPU the driver bound, named by bus id) and
    whether the host has an NVIDIA GPU at all (an entry there, or ``dev``)."""
    try:
        count = len([name for name in listdir(gpus_dir) if not name.startswith(".")])
    except (EnvironmentError, TypeError, ValueError):
        count = 0
    try:
        device = bool(exists(dev))
    except (EnvironmentError, TypeError, ValueError):
        device = False
    return count, count > 0 or device


def empty_result(name):
    """The keys of measurement ``name``'s result, before anything is known (``status: unknown``)."""
    result = {"status": "unknown", "reason": None, "command": None, "seconds": None}
    if name == "gpu_bw":
        # failure: nvbandwidth's own data check failed or it aborted (measure.nvbandwidth_failure; VAL-011)
        result.update(tool="nvbandwidth", version=None, gpus={}, pairs=[], testcases={}, failure=None)
    elif name == "dcgm_diag":
        result.update(level=None, overall=None, failed=[], entities={})
    elif name == "dcgm_health":
        result.update(overall=None, entities={})
    elif name == "nccl":
        # out_of_bounds_ok, wrong, checked, exit_status: the correctness of the all-reduce (VAL-010)
        # wrong_column: "#wrong" (wrong counts elements), "error"/"res" (older nccl-tests: the largest error)
        result.update(gpus=None, avg_busbw_gbs=None, max_busbw_gbs=None, out_of_bounds=None, out_of_bounds_ok=None,
                      wrong=[], checked=None, exit_status=None, wrong_column=None)
    return result


def gpu_argv(name, binary, level=1, gpus=1):
    """The argv of measurement ``name`` with the program at ``binary``."""
    if name == "gpu_bw":
        return [binary, "-j", "-t"] + list(NVB_TESTCASES)
    if name == "dcgm_diag":
        return [binary, "diag", "-r", str(level), "-j"]
    if name == "dcgm_health":
        return [binary, "health", "-c", "-j"]
    return [binary, "-b", "8M", "-e", "1G", "-f", "2", "-g", str(gpus)]


def plan_gpu(wanted, which, level=1, timeouts=None, gpus_dir=GPU_PROC, dev=GPU_DEV, listdir=os.listdir,
             exists=os.path.exists):
    """What :func:`measure_gpu` would run for each of ``wanted`` (names of :data:`GPU_MEASUREMENTS`):
    ``{name: {"status", "reason", "tool", "argv", "command", "env", "timeout_s", "level"|"gpus"}}``.
    ``status`` is ``ok`` (it will run ``argv``) or ``unknown`` with the reason (no GPU, no tool).
    ``which(name) -> path or None``."""
    timeouts = dict(GPU_TIMEOUTS, **(timeouts or {}))
    count, present = gpu_count(gpus_dir, dev, listdir, exists)
    plan = {}
    for name in GPU_MEASUREMENTS:
        if name not in (wanted or ()):
            continue
        tool = GPU_TOOLS[name]
        entry = {"status": "unknown", "reason": None, "tool": tool, "argv": None, "command": None, "env": {},
                 "timeout_s": timeouts[name]}
        if name == "dcgm_diag":
            entry["level"] = level
        if name == "nccl":
            entry["gpus"] = count
        plan[name] = entry
        if not present:
            entry["reason"] = "no NVIDIA GPU on this host (no entry under %s and no %s): nothing run" % (gpus_dir, dev)
            continue
        try:
            binary = which(tool)
        except Exception:  # an injected lookup that fails is a tool not found
            binary = None
        if not binary:
            entry["reason"] = "%s not found in PATH (%s)" % (tool, TOOL_SOURCES[tool])
            continue
        if name == "nccl" and count < 1:
            entry["reason"] = "GPU count unknown: no entry under %s (%s is there), so no -g for %s" % (
                gpus_dir, dev, tool)
            continue
        entry["argv"] = gpu_argv(name, binary, level, count)
        entry["command"] = " ".join(entry["argv"])
        if name in ("gpu_bw", "nccl"):
            entry["env"] = dict(CUDA_ENV)
        entry["status"] = "ok"
    return plan


def _bus_id(device):
    match = _NVB_BUS_RE.search(device or "")
    return normalise_bus_id(match.group(1) + ".0") if match else None


def _gbs(case, unit_ok=("GB/s",)):
    return case is not None and case.get("status") == "passed" and case.get("unit") in unit_ok


def read_gpu_bw(result, out):
    """Fill a ``gpu_bw`` result from nvbandwidth's output; returns the parser's reason or ``None``."""
    # nvbandwidth -j: a line on stderr may come first; [ \t]*, not \s*, which runs over the newlines of every
    # line after each line start (quadratic on a run of blank lines)
    start = _JSON_START_RE.search(out or "")
    parsed, error = measure.parse_nvbandwidth(out[start.start():] if start else out)
    # a data check that failed or an abort: the parser's, which names the testcase it happened in; read from the
    # whole output where nothing else could be read (the sanity check before any testcase), and from the lines
    # before -j's JSON, which the parser did not see; each line looked at once
    if error:
        result["failure"] = measure.nvbandwidth_failure(out)
        return error
    result["failure"] = parsed.get("failure")
    if result["failure"] is None and start is not None and start.start() > 0:
        result["failure"] = measure.nvbandwidth_failure(out[:start.start()])
    result["version"] = parsed.get("version")
    cases = parsed.get("testcases") or {}
    result["testcases"] = dict((name, {"status": case.get("status"), "error": case.get("error")})
                               for name, case in cases.items())
    gpus = {}
    for index, device in sorted((parsed.get("devices") or {}).items()):
        gpus[index] = {"name": device, "bus_id": _bus_id(device), "h2d_gbs": None, "d2h_gbs": None}
    for case_name, key in ((NVB_H2D, "h2d_gbs"), (NVB_D2H, "d2h_gbs")):
        case = cases.get(case_name)
        if not _gbs(case) or case.get("rows_are") != "cpu":
            continue
        for index, value in (case.get("per_gpu") or {}).items():
            gpus.setdefault(index, {"name": None, "bus_id": None, "h2d_gbs": None, "d2h_gbs": None})[key] = value
    result["gpus"] = gpus
    case = cases.get(NVB_D2D)
    if _gbs(case):
        result["pairs"] = [{"src": pair["src"], "dst": pair["dst"], "gbs": pair["value"]}
                           for pair in case.get("pairs") or []]
    figures = [gpu[key] for gpu in gpus.values() for key in ("h2d_gbs", "d2h_gbs") if gpu[key] is not None]
    if not figures and not result["pairs"]:
        seen = ["%s: %s" % (name, case["error"] or case["status"]) for name, case in sorted(result["testcases"].items())]
        return "nvbandwidth gave no GB/s figure of %s (%s)" % (", ".join(NVB_TESTCASES), "; ".join(seen)[:300])
    return None


def read_dcgm_diag(result, out):
    parsed, error = measure.parse_dcgm_diag(out)
    if error:
        return error
    result.update(overall=parsed["overall"], failed=parsed["failed"], entities=parsed["entities"])
    return None


def read_dcgm_health(result, out):
    parsed, error = measure.parse_dcgm_health(out)
    if error:
        return error
    result.update(overall=parsed["overall"], entities=parsed["entities"])
    return None


def read_nccl(result, out):
    parsed, error = measure.parse_nccl_tests(out)
    if error:
        return error
    wrong, checked = measure.nccl_wrong(parsed["rows"])
    result.update(avg_busbw_gbs=parsed["avg_busbw_gbs"], max_busbw_gbs=parsed["max_busbw_gbs"],
                  out_of_bounds=parsed["out_of_bounds"], out_of_bounds_ok=parsed["out_of_bounds_ok"],
                  # the footer's out-of-bounds line is printed with -c 0 too ("0 OK"): only a #wrong figure says
                  # the results were checked
                  wrong=wrong, checked=checked, wrong_column=parsed.get("wrong_column"))
    return None


READERS = {"gpu_bw": read_gpu_bw, "dcgm_diag": read_dcgm_diag, "dcgm_health": read_dcgm_health, "nccl": read_nccl}


def measure_one(name, entry, run=measure_host.run_bounded, clock=time.monotonic):
    """Run one planned measurement and read its output: the result of :func:`empty_result` filled in.

    The output is read first whatever the exit status (``dcgmi diag`` exits non-zero when a test fails and
    still prints its JSON; a figure read from output that parses is kept, the exit noted in ``reason``); only
    when it does not parse is the non-zero exit the reason. A run killed at its timeout gives no figure."""
    result = empty_result(name)
    if name == "dcgm_diag":
        result["level"] = entry.get("level")
    if name == "nccl":
        result["gpus"] = entry.get("gpus")
    result["command"] = entry.get("command")
    argv = entry.get("argv")
    if entry.get("status") != "ok" or not argv:
        result["reason"] = entry.get("reason") or "not run: no command planned"
        return result
    tool = os.path.basename(argv[0])
    began = clock()
    try:
        rc, out, reason = run(argv, entry.get("timeout_s") or GPU_TIMEOUTS[name], env=entry.get("env") or None)
    except Exception as exc:  # a runner that fails is an unknown, never a traceback
        rc, out, reason = None, "", "%s could not be run: %s" % (tool, str(exc)[:200] or type(exc).__name__)
    result["seconds"] = round(clock() - began, 2)
    if reason:
        result["reason"] = reason
        return result
    attempt = empty_result(name)
    attempt.update((key, result[key]) for key in ("command", "seconds", "level", "gpus") if key in result)
    try:
        error = READERS[name](attempt, out or "")
    except Exception as exc:  # a parser bug must not become a traceback on a host either
        error = "%s output could not be read: %s" % (tool, str(exc)[:200] or type(exc).__name__)
    if error:
        # the figures stay empty: a reader fills them only from output it read whole (gpu_bw keeps the
        # testcases and devices it saw, which say why there is no figure)
        if rc != 0:
            # the line that says what failed (an ASSERT, a CUDA error), not the version banner of line one
            line = measure.failure_line(out)
            error = "%s exited %s: %s" % (tool, rc, error if line.startswith(("{", "[")) else line)
        attempt.update(status="unknown", reason=error)
        return attempt
    attempt.update(status="ok", reason=None if rc == 0 else "%s exited %s after printing its result" % (tool, rc))
    if name == "nccl":
        # nccl-tests exits non-zero when its check of the results failed (VAL-010)
        attempt["exit_status"] = rc
    return attempt


def measure_gpu(plan, run=measure_host.run_bounded, clock=time.monotonic):
    """Run every planned measurement of ``plan`` (:func:`plan_gpu`) one after the other: ``{name: result}``."""
    return dict((name, measure_one(name, plan[name], run, clock)) for name in GPU_MEASUREMENTS if name in plan)
