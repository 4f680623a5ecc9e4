# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fix logic of ``gpuhost.baseline.nvidia_gpu``: persistence mode and power limit per GPU.

The state comes from ``nvidia-smi -q -x`` parsed by ``facts.nvidia.parse_smi_xml`` (on a snapshot
root: ``commands/nvidia-smi-q.xml``). Pure functions decide (:func:`select_gpus`,
:func:`power_target`, :func:`busy_gpus`, :func:`plan`); :func:`apply` reads, refuses while
compute work runs (unless forced), runs the planned commands through ``Host.run`` (only on
the live host, outside check mode; elsewhere they are listed) and reads the state again to
prove every GPU took its setting. On a live host it writes no file; on a snapshot root it updates the captured nvidia-smi XML.
"""

from __future__ import absolute_import, division, print_function

import os
import posixpath
import re

from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.base import (
    FixError, command_line, printable, run_host_command, to_bytes)
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.nvidia import normalise_bus_id, parse_smi_xml
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import COMMAND_CAPTURES

__metaclass__ = type

PERSISTENCED = "nvidia-persistenced.service"
#: where systemd looks for unit files, in its order of precedence
UNIT_DIRS = ("/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system",
             "/usr/lib/systemd/system", "/lib/systemd/system")
#: watts closer than this count as equal (nvidia-smi prints two decimals, boards round to 1 W or less)
TOLERANCE_W = 0.5


def select_gpus(gpus, wanted):
    """GPUs of the parsed XML named by ``wanted`` (index, bus id or UUID); all when empty."""
    if not wanted:
        return list(gpus)
    chosen = []
    for item in wanted:
        text = str(item).strip()
        found = None
        for gpu in gpus:
            if text.isdigit() and gpu["index"] == int(text):
                found = gpu
            elif normalise_bus_id(text) is not None and gpu.get("bus_id") == normalise_bus_id(text):
                found = gpu
            elif gpu.get("uuid") and gpu["uuid"].lower() == text.lower():
                found = gpu
            if found is not None:
                break
        if found is None:
            raise FixError("gpus: %s names no GPU of this host (there are %d: %s); use an index, a PCI bus id or a "
                           "UUID as nvidia-smi -L shows them" % (printable(text), len(gpus), ", ".join(
                               "%d %s" % (g["index"], g.get("bus_id")) for g in gpus)), gpu=text)
        if found not in chosen:
            chosen.append(found)
    return chosen


def format_watts(value):
    return ("%d" % value) if float(value).is_integer() else ("%.2f" % value)


def power_target(gpu, power_limit):
    """Watts ``power_limit`` (``max``, ``default`` or a number) means for ``gpu``; raises :class:`FixError`."""
    power = gpu.get("power") or {}
    name = "GPU %d (%s)" % (gpu["index"], gpu.get("bus_id"))
    text = str(power_limit).strip().lower()
    if text in ("max", "default"):
        value = power.get("%s_w" % text)
        if value is None:
            raise FixError("%s reports no %s power limit (nvidia-smi -q shows N/A): this board does not allow setting "
                           "one; leave power_limit unset for it" % (name, text), gpu=gpu["index"])
        return value
    try:
        value = float(text.rstrip("w").strip())
    except ValueError:
        raise FixError("power_limit %s is not max, default or a number of watts" % printable(str(power_limit)))
    low, high = power.get("min_w"), power.get("max_w")
    if low is None or high is None:
        raise FixError("%s reports no min/max power limit: cannot check %s W against them; leave power_limit unset"
                       % (name, format_watts(value)), gpu=gpu["index"])
    if not low <= value <= high:
        raise FixError("power_limit %s W is outside what %s allows (%s to %s W)"
                       % (format_watts(value), name, format_watts(low), format_watts(high)), gpu=gpu["index"])
    return value


def busy_gpus(gpus):
    """``(processes, unknown)``: compute processes per GPU, and GPUs whose processes are not known.

    A process whose type is not given counts as compute: when in doubt, refuse.
    """
    found = []
    unknown = []
    for gpu in gpus:
        if gpu.get("processes") is None:
            unknown.append(gpu["index"])
            continue
        for proc in gpu["processes"]:
            kind = (proc.get("type") or "C").upper()
            if "C" in kind:
                found.append({"gpu": gpu["index"], "bus_id": gpu.get("bus_id"), "pid": proc.get("pid"),
                              "name": proc.get("name"), "type": proc.get("type")})
    return found, unknown


def guard_message(processes, unknown):
    parts = ["GPU %d (%s): pid %s %s" % (p["gpu"], p["bus_id"], p["pid"], p["name"] or "?") for p in processes]
    reasons = []
    if parts:
        reasons.append("compute processes run on this host's GPUs (%s)" % "; ".join(parts))
    if unknown:
        reasons.append("nvidia-smi lists no processes section for GPU %s, so running work cannot be ruled out"
                       % ", ".join(str(i) for i in unknown))
    return ("refusing to change GPU settings: %s. Stop the work (drain the node) and run again, or set force: true "
            "to change them anyway" % " and ".join(reasons))


def plan(gpus, selected, persistence=None, power_limit=None, method="smi", daemon=None, nvidia_smi="nvidia-smi"):
    """Commands and per-GPU before/after for the selected GPUs.

    ``method``: ``daemon`` (nvidia-persistenced's unit) or ``smi`` (``nvidia-smi -pm``).
    ``daemon``: ``{"enabled", "active"}`` of the unit (``active`` may be ``None``: unknown).
    Returns ``{"commands": [argv...], "gpus": [...]}``.
    """
    commands = []
    report = []
    persistence_off = [g for g in selected if g.get("persistence") is not (persistence is True)] \
        if persistence is not None else []
    if persistence is True and method == "daemon":
        daemon = daemon or {}
        if not daemon.get("enabled"):
            commands.append(["systemctl", "enable", "--now", PERSISTENCED])
        elif daemon.get("active") is False or (daemon.get("active") is None and persistence_off):
            commands.append(["systemctl", "start", PERSISTENCED])
        elif persistence_off:
            commands.append(["systemctl", "restart", PERSISTENCED])
    elif persistence is False and method == "daemon":
        daemon = daemon or {}
        if daemon.get("enabled") or daemon.get("active") or (daemon.get("active") is None and persistence_off):
            commands.append(["systemctl", "disable", "--now", PERSISTENCED])
    if persistence is not None and method == "smi":
        for gpu in persistence_off:
            commands.append([nvidia_smi, "-i", str(gpu["index"]), "-pm", "1" if persistence else "0"])
    for gpu in selected:
        entry = {"index": gpu["index"], "bus_id": gpu.get("bus_id"), "name": gpu.get("name"),
                 "persistence_before": gpu.get("persistence"), "persistence_after": gpu.get("persistence"),
                 "power_limit_before_w": (gpu.get("power") or {}).get("limit_w"),
                 "power_limit_after_w": (gpu.get("power") or {}).get("limit_w")}
        if persistence is not None:
            entry["persistence_after"] = persistence
        if power_limit is not None:
            target = power_target(gpu, power_limit)
            entry["power_limit_after_w"] = target
            current = entry["power_limit_before_w"]
            if current is None or abs(current - target) > TOLERANCE_W:
                commands.append([nvidia_smi, "-i", str(gpu["index"]), "-pl", format_watts(target)])
        entry["changed"] = (entry["persistence_after"] != entry["persistence_before"]
                            or entry["power_limit_after_w"] != entry["power_limit_before_w"])
        report.append(entry)
    return {"commands": commands, "gpus": report}


def unit_installed(host):
    """Path of nvidia-persistenced's unit file under the root, ``None`` when absent or masked."""
    for directory in UNIT_DIRS:
        path = posixpath.join(directory, PERSISTENCED)
        if host.exists(path):
            if host.readlink(path) == "/dev/null":
                return None
            return path
    return None


def unit_enabled_by_links(host):
    for name in host.listdir("/etc/systemd/system", pattern="*.wants"):
        if host.exists(posixpath.join("/etc/systemd/system", name, PERSISTENCED)):
            return True
    return False


class SmiReader:
    """``nvidia-smi -q -x`` of the live host (through ``run_command``) or of a snapshot root."""

    def __init__(self, host, nvidia_smi):
        self.host = host
        self.nvidia_smi = nvidia_smi

    def binary(self):
        if "/" in self.nvidia_smi:
            found = self.nvidia_smi if os.path.isfile(self.nvidia_smi) and os.access(self.nvidia_smi, os.X_OK) else None
        else:
            found = self.host.module.get_bin_path(self.nvidia_smi)
        if not found:
            raise FixError("%s not found%s: install the NVIDIA driver utilities or set nvidia_smi to its path"
                           % (self.nvidia_smi, "" if "/" in self.nvidia_smi else " in PATH"))
        return found

    def read(self):
        if not self.host.live:
            rel = COMMAND_CAPTURES["nvidia-smi-q"]
            data = self.host.read_file("/" + rel)
            if data is None:
                raise FixError("%s is missing under %s: a snapshot without nvidia-smi output has no GPU state to fix"
                               % (rel, self.host.reader.root))
            text = data.decode("utf-8", "replace")
            where = rel
        else:
            argv = [self.binary(), "-q", "-x"]
            result = run_host_command(self.host.module, argv)
            rc, text, err = result
            where = command_line(argv)
            if result.bound is not None:
                raise FixError("%s: cannot read the GPU state; the driver does not answer" % result.reason,
                               command=where, rc=rc)
            if rc != 0:
                lines = (err or text or "").strip().splitlines()
                raise FixError("%s exited %d (%s): cannot read the GPU state; is the NVIDIA driver loaded?"
                               % (where, rc, lines[-1][:300] if lines else "no output"))
        parsed = parse_smi_xml(text)
        if parsed is None:
            raise FixError("%s is not nvidia-smi XML (%s): cannot read the GPU state" % (where, printable(text)))
        if parsed["error"]:
            raise FixError("%s is incomplete (%s): refusing to decide on partial GPU state" % (where, parsed["error"]))
        if not parsed["gpus"]:
            raise FixError("%s lists no GPU: nothing to set" % where)
        parsed["xml"] = text
        return parsed


def _daemon_state(host, module_run):
    enabled = unit_enabled_by_links(host)
    active = None
    if host.live:
        rc, out, _err = module_run(["systemctl", "is-enabled", PERSISTENCED])
        enabled = out.strip() in ("enabled", "enabled-runtime", "alias", "static", "indirect", "generated") \
            if rc == 0 else False
        rc, out, _err = module_run(["systemctl", "is-active", PERSISTENCED])
        active = out.strip() == "active"
    return {"enabled": enabled, "active": active}


def apply(host, params, diff=False):
    """Decide, guard and (live, outside check mode) act; returns the module result."""
    persistence = params.get("persistence")
    power_limit = params.get("power_limit")
    if persistence is None and power_limit is None:
        raise FixError("nothing to do: set persistence and/or power_limit")
    reader = SmiReader(host, params.get("nvidia_smi") or "nvidia-smi")
    state = reader.read()
    gpus = state["gpus"]
    selected = select_gpus(gpus, params.get("gpus"))
    if power_limit is not None:
        for gpu in selected:
            power_target(gpu, power_limit)

    method = params.get("persistence_method") or "auto"
    unit = unit_installed(host)
    if method == "auto":
        method = "daemon" if unit else "smi"
    elif method == "daemon" and not unit and persistence is not None:
        raise FixError("persistence_method is daemon but %s is not installed in %s: install the driver's "
                       "nvidia-persistenced package or use persistence_method: smi"
                       % (PERSISTENCED, ", ".join(UNIT_DIRS)))
    daemon = None
    smi_argv0 = params.get("nvidia_smi") or "nvidia-smi"
    if persistence is not None and method == "daemon":
        def run_query(argv):
            binary = host.module.get_bin_path(argv[0])
            if not binary:
                return 1, "", "%s not found" % argv[0]
            result = run_host_command(host.module, [binary] + argv[1:])
            if result.bound is not None:
                return 1, result.stdout, result.reason
            return result
        daemon = _daemon_state(host, run_query)
    decided = plan(gpus, selected, persistence, power_limit, method, daemon, smi_argv0)

    result = {
        "changed": bool(decided["commands"]),
        "gpus": decided["gpus"],
        "persistence_method": method if persistence is not None else None,
        "driver_version": state.get("driver_version"),
        "warnings": [],
    }
    if power_limit is not None and decided["commands"]:
        result["warnings"].append("a power limit set with nvidia-smi lasts until the driver unloads or the host "
                                  "reboots; run this task at every boot (or from the remediate role) to keep it")
    if diff:
        before = "".join("GPU %d %s: persistence %s, power limit %s W\n" % (
            g["index"], g["bus_id"], _onoff(g["persistence_before"]), _watts(g["power_limit_before_w"]))
            for g in decided["gpus"])
        after = "".join("GPU %d %s: persistence %s, power limit %s W\n" % (
            g["index"], g["bus_id"], _onoff(g["persistence_after"]), _watts(g["power_limit_after_w"]))
            for g in decided["gpus"])
        result["diff"] = [{"before_header": "nvidia-smi -q (runtime)", "after_header": "nvidia-smi -q (runtime)",
                           "before": before, "after": after}]
    if decided["commands"] and not params.get("force"):
        processes, unknown = busy_gpus(gpus)
        if processes or unknown:
            raise FixError(guard_message(processes, unknown), processes=processes, gpus=decided["gpus"])

    if host.live and not host.check_mode and decided["commands"]:
        smi = reader.binary()
        for argv in decided["commands"]:
            if argv[0] == smi_argv0:
                argv = [smi] + argv[1:]
            host.run(argv, "the GPU setting was not changed")
        verify = reader.read()
        now = dict((g["index"], g) for g in verify["gpus"])
        problems = []
        for entry in decided["gpus"]:
            gpu = now.get(entry["index"])
            if gpu is None:
                problems.append("GPU %d is gone from nvidia-smi" % entry["index"])
                continue
            if persistence is not None and gpu.get("persistence") is not persistence:
                problems.append("GPU %d (%s) still reports persistence mode %s" % (
                    entry["index"], entry["bus_id"], _onoff(gpu.get("persistence"))))
            limit = (gpu.get("power") or {}).get("limit_w")
            if power_limit is not None and (limit is None or abs(limit - entry["power_limit_after_w"]) > TOLERANCE_W):
                problems.append("GPU %d (%s) reports a power limit of %s W, not %s W" % (
                    entry["index"], entry["bus_id"], _watts(limit), _watts(entry["power_limit_after_w"])))
            entry["persistence_after"] = gpu.get("persistence")
            entry["power_limit_after_w"] = limit
        if problems:
            raise FixError("the commands ran but %s: check nvidia-smi -q and the kernel log" % "; ".join(problems),
                           gpus=decided["gpus"])
    elif decided["commands"]:
        # check mode or snapshot root: list what would run, with the binary as asked for
        for argv in decided["commands"]:
            host.run(argv, "")
        if not host.live and not host.check_mode:
            # A snapshot stands for the host: its captured nvidia-smi output is the GPU state, as
            # /proc/sys files are the sysctl state, so it is updated to what the commands would leave.
            changes = dict((g["index"], {"persistence": g["persistence_after"], "power_limit_w": g["power_limit_after_w"]})
                           for g in decided["gpus"])
            text = updated_smi_xml(state["xml"], changes)
            if text is None:
                raise FixError("cannot update %s in the snapshot: the GPU blocks do not match what was read"
                               % SNAPSHOT_XML)
            host.write_file("/" + SNAPSHOT_XML, to_bytes(text), mode=0o644)
    return result


SNAPSHOT_XML = "commands/nvidia-smi-q.xml"
_GPU_BLOCK = re.compile(r"<gpu\b[^>]*>.*?</gpu>", re.S)


def updated_smi_xml(text, changes):
    """``nvidia-smi -q -x`` text with persistence mode and the current power limit of the GPUs in
    ``changes`` (``{index: {"persistence": bool|None, "power_limit_w": float|None}}``) rewritten;
    every other byte is kept. ``None`` when the text has fewer GPU blocks than an index needs."""
    blocks = list(_GPU_BLOCK.finditer(text or ""))
    if any(index >= len(blocks) for index in changes):
        return None
    out, last = [], 0
    for index, match in enumerate(blocks):
        block = match.group(0)
        change = changes.get(index) or {}
        if change.get("persistence") is not None:
            block = re.sub(r"(<persistence_mode>)[^<]*(</persistence_mode>)",
                           r"\g<1>%s\g<2>" % ("Enabled" if change["persistence"] else "Disabled"), block, count=1)
        if change.get("power_limit_w") is not None:
            watts = "%.2f W" % change["power_limit_w"]
            block = re.sub(r"(<(?:current_)?power_limit>)[^<]*(</(?:current_)?power_limit>)",
                           r"\g<1>%s\g<2>" % watts, block, count=1)
        out.append(text[last:match.start()])
        out.append(block)
        last = match.end()
    out.append(text[last:])
    return "".join(out)


def _onoff(value):
    return {True: "on", False: "off"}.get(value, "unknown")


def _watts(value):
    return "unknown" if value is None else format_watts(value)


#: The module's own options (nvidia_gpu; host_fix's steps with module nvidia_gpu), besides root.
ARGUMENT_SPEC = dict(
    persistence=dict(type="bool"),
    persistence_method=dict(type="str", choices=["auto", "daemon", "smi"], default="auto"),
    power_limit=dict(type="str"),
    gpus=dict(type="list", elements="str", default=[]),
    force=dict(type="bool", default=False),
    nvidia_smi=dict(type="str", default="nvidia-smi"),
)
REQUIRED_ONE_OF = []


def apply_params(host, p, diff=False):
    """:func:`apply` with the module's validated options ``p``."""
    return apply(host, p, diff)
