#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: host_measure
short_description: Measure what a host delivers without a GPU, the CPU clock under load and memory bandwidth per NUMA node
version_added: 0.1.0
description:
  - Runs short, time-bounded measurements on the live host and returns the figures. It gathers only; nothing
    is judged here (the C(validate) role that judges them as VAL rules is still to come, C(docs/validation.md)).
  - >-
    B(cpu_freq) - loads every online CPU this process may run on (C(os.sched_getaffinity); the others are
    listed in C(not_allowed)) at once (on a host with more than O(max_cpus) online CPUs, O(max_cpus) of
    them evenly spread over the CPU numbers, the first and last included) with one busy worker process pinned
    to it (C(os.sched_setaffinity)) for O(duration_s) seconds, samples each CPU's clock every 0.2 s from
    C(/sys/devices/system/cpu/cpuN/cpufreq/scaling_cur_freq) or, without cpufreq, from the C(cpu MHz) lines of
    C(/proc/cpuinfo), and returns per CPU the highest clock seen, the rated clock it is compared to and the
    fraction. The workers are killed and reaped when sampling ends, also on an error, and each stops by
    itself after O(duration_s) + 2 s.
  - >-
    The rated clock is the first present of C(base_frequency) (intel_pstate: the clock guaranteed with all
    cores busy; the single-core turbo in C(cpuinfo_max_freq) is not reached with every CPU loaded),
    C(amd_pstate_max_freq) (amd_pstate: the hardware's highest clock, kept when boost is switched off, which
    lowers C(cpuinfo_max_freq) and would hide it) and C(cpuinfo_max_freq) (acpi-cpufreq and other drivers).
    Every one present is returned. Without a cpufreq directory (many VM guests) the observed clock comes from
    C(/proc/cpuinfo) and the fraction is V(null) with the reason.
  - >-
    B(mem_bw) - memory bandwidth per NUMA node with CPUs, with the first installed of O(mem_tools): C(stress-ng)
    (its C(--stream) stressor, a STREAM variant: copy, scale, add and triad over arrays four times the L3
    size, read and write rates per instance, several instances), C(sysbench memory) (writes 64 MiB blocks,
    threads) or C(mbw) (C(memcpy) of a 256 MiB array, one thread, no duration). That order because stress-ng
    measures the STREAM kernels with arrays sized past the cache and runs one instance per CPU of the node;
    sysbench's figure is write-only and mbw's single-threaded, which loads a node's memory channels less.
    All three are packaged by Debian, Ubuntu and RHEL (EPEL).
  - Each node is measured alone, with C(numactl --cpunodebind=N --membind=N) and as many instances as the
    node has CPUs (at most 16). Without C(numactl) there is one run, not bound to a node, and the result
    says so. Nodes without CPUs (CXL memory, a Grace Hopper GPU's memory) are listed and not measured.
  - Each tool run gets its own session and is killed with its whole process group at its timeout; a missing
    tool, a non-zero exit, a hang or output the parser cannot read makes the node (or the measurement)
    C(unknown) with the reason, never a figure.
  - The whole call takes about O(duration_s) plus O(mem_duration_s) (at least 6 s with stress-ng) per NUMA
    node, and never more than O(timeout_s) for the measurements.
author:
  - gpuhost.baseline maintainers (@gpuhost-baseline)
options:
  measurements:
    description: The measurements to run.
    type: list
    elements: str
    choices: [cpu_freq, mem_bw]
    default: [cpu_freq, mem_bw]
  duration_s:
    description: Seconds every sampled CPU is loaded while its clock is sampled (1 to 60).
    type: int
    default: 3
  max_cpus:
    description:
      - At most this many CPUs are loaded and sampled; on a host with more online CPUs, this many evenly
        spread over them. V(0) loads every online CPU.
    type: int
    default: 256
  mem_duration_s:
    description:
      - Seconds of one memory bandwidth run per NUMA node (1 to 120). stress-ng runs at least 6 s, the least
        its stream stressor reports a rate for; mbw has no duration (10 copies of 256 MiB).
    type: int
    default: 6
  mem_tools:
    description: The memory bandwidth tools looked for in PATH, the first found is used.
    type: list
    elements: str
    choices: [stress-ng, sysbench, mbw]
    default: [stress-ng, sysbench, mbw]
  timeout_s:
    description:
      - Seconds all the measurements may take together; must exceed O(duration_s). A tool run that would not
        fit in what is left is not started (its node is C(unknown), saying so); one that runs past its own
        timeout (its duration plus 30 s, or what is left) is killed.
    type: int
    default: 120
attributes:
  check_mode:
    description:
      - Reads C(/sys) and PATH to say what it would run (RV(plan)) and runs nothing, no worker and no tool.
    support: full
  diff_mode:
    description: No diff; the host is never changed.
    support: none
notes:
  - It never changes the host's configuration; C(changed) is always V(false). It does load the CPUs and the
    memory for the time it runs, so run it in a maintenance window, not beside a serving model.
  - A CPU's clock under emulation (a VM guest) is whatever the hypervisor reports; its figures are not a
    statement about the hardware.
  - The figures are documented in C(docs/validation.md) of the collection.
"""

EXAMPLES = r"""
- name: Both measurements with the defaults (about 3 s + 6 s per NUMA node)
  gpuhost.baseline.host_measure:
  become: true

- name: The CPU clock only, 5 s of load on at most 64 CPUs
  gpuhost.baseline.host_measure:
    measurements: [cpu_freq]
    duration_s: 5
    max_cpus: 64

- name: What would run (nothing is run in check mode)
  gpuhost.baseline.host_measure:
  check_mode: true
  register: plan
"""

RETURN = r"""
cpu_freq:
  description:
    - The CPU clock under load; absent when not in O(measurements) and in check mode.
    - C(status) V(ok) or V(unknown) (with C(reason)); C(source) V(scaling_cur_freq) or V(/proc/cpuinfo);
      C(sample) which CPUs were loaded; C(online) the online CPUs it may run on; C(not_allowed) the online CPUs
      outside its affinity (a cpuset), not loaded; C(duration_s) the seconds of load;
      C(samples) the samples taken; C(workers) the worker pids (all killed and reaped before the result).
    - C(cpus) per CPU number, C(observed_khz) (the highest clock seen), C(rated_khz) and C(rated_source)
      (the figure compared to), C(rated) (every rated figure present), C(fraction) (observed / rated, or
      V(null) with C(reason)).
  returned: when cpu_freq is measured and not in check mode
  type: dict
  sample: {"status": "ok", "reason": null, "source": "scaling_cur_freq", "sample": "all online CPUs", "online": 2,
           "duration_s": 3.01, "samples": 15, "workers": [4101, 4102],
           "cpus": {"0": {"observed_khz": 3690000, "rated_khz": 3700000, "rated_source": "amd_pstate_max_freq",
                          "rated": {"amd_pstate_max_freq": 3700000, "cpuinfo_max_freq": 3700000},
                          "fraction": 0.997, "reason": null}}}
mem_bw:
  description:
    - Memory bandwidth per NUMA node; absent when not in O(measurements) and in check mode.
    - C(status) V(ok) when at least one node was measured, else V(unknown) with C(reason); C(tool) the tool
      used, C(looked_for) the tools looked for; C(bound) whether the runs were bound with numactl (C(reason)
      says why not); C(unit) V(MB/s) (10^6 bytes per second); C(nodes_without_cpus) the nodes not measured.
    - C(nodes) per node number (V(all) for one unbound run), C(status), C(reason), C(bandwidth_mbs) (stress-ng
      read plus write, sysbench write, mbw memcpy rate), C(detail) (the parser's figures), C(command), C(cpus)
      and C(seconds).
  returned: when mem_bw is measured and not in check mode
  type: dict
  sample: {"status": "ok", "reason": null, "tool": "stress-ng", "looked_for": ["stress-ng", "sysbench", "mbw"],
           "bound": true, "unit": "MB/s", "nodes_without_cpus": [],
           "nodes": {"0": {"status": "ok", "reason": null, "bandwidth_mbs": 8276.11, "cpus": "0-1", "seconds": 6.3,
                           "command": "/usr/bin/numactl --cpunodebind=0 --membind=0 /usr/bin/stress-ng --stream 2 -t 6s --metrics-brief",
                           "detail": {"tool": "stress-ng", "instances": 2, "read_mbs": 4965.67, "write_mbs": 3310.44}}}}
plan:
  description:
    - What runs (or, in check mode, would run); C(cpu_freq) has C(cpus) (a CPU list), C(not_allowed), C(sample), C(source),
      C(duration_s), C(workers) (how many), C(status) and C(reason); C(mem_bw) has C(tool), C(looked_for),
      C(bound), C(commands), C(duration_s), C(status) and C(reason). C(timeout_s) bounds them together.
  returned: always
  type: dict
  sample: {"timeout_s": 120, "cpu_freq": {"status": "ok", "cpus": "0-1", "sample": "all online CPUs",
           "source": "/proc/cpuinfo", "duration_s": 3, "workers": 2, "reason": null},
           "mem_bw": {"status": "ok", "tool": "stress-ng", "bound": true, "duration_s": 6, "reason": null,
                      "commands": ["/usr/bin/numactl --cpunodebind=0 --membind=0 /usr/bin/stress-ng --stream 2 -t 6s --metrics-brief"]}}
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import measure_host
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.cpu import format_cpulist


def main():
    module = AnsibleModule(
        argument_spec=dict(
            measurements=dict(type="list", elements="str", choices=["cpu_freq", "mem_bw"],
                              default=["cpu_freq", "mem_bw"]),
            duration_s=dict(type="int", default=3),
            max_cpus=dict(type="int", default=256),
            mem_duration_s=dict(type="int", default=6),
            mem_tools=dict(type="list", elements="str", choices=list(measure_host.MEM_TOOLS),
                           default=list(measure_host.MEM_TOOLS)),
            timeout_s=dict(type="int", default=120),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if not 1 <= params["duration_s"] <= 60:
        module.fail_json(msg="duration_s must be 1 to 60, not %d" % params["duration_s"])
    if not 1 <= params["mem_duration_s"] <= 120:
        module.fail_json(msg="mem_duration_s must be 1 to 120, not %d" % params["mem_duration_s"])
    if params["timeout_s"] <= params["duration_s"]:
        module.fail_json(msg="timeout_s (%d) must exceed duration_s (%d)" % (params["timeout_s"], params["duration_s"]))
    if params["max_cpus"] < 0:
        module.fail_json(msg="max_cpus must be 0 (all) or more, not %d" % params["max_cpus"])
    began = time.monotonic()
    wanted = params["measurements"]
    plan = {"timeout_s": params["timeout_s"]}
    cpu_plan = mem_plan = None
    if "cpu_freq" in wanted:
        cpu_plan = measure_host.plan_cpu_freq(params["max_cpus"])
        plan["cpu_freq"] = {"status": cpu_plan["status"], "reason": cpu_plan["reason"],
                            "cpus": format_cpulist(cpu_plan["cpus"]), "sample": cpu_plan["sample"],
                            "source": cpu_plan["source"], "duration_s": params["duration_s"],
                            "not_allowed": cpu_plan["not_allowed"],
                            "workers": len(cpu_plan["cpus"]) if cpu_plan["status"] == "ok" else 0}
    if "mem_bw" in wanted:
        mem_plan = measure_host.plan_mem_bw(module.get_bin_path, params["mem_duration_s"], tools=params["mem_tools"])
        plan["mem_bw"] = {"status": mem_plan["status"], "reason": mem_plan["reason"], "tool": mem_plan["tool"],
                          "looked_for": mem_plan["looked_for"], "bound": mem_plan["bound"],
                          "duration_s": params["mem_duration_s"],
                          "commands": [" ".join(run["argv"]) for run in mem_plan["runs"]]}
    result = dict(changed=False, plan=plan)
    if module.check_mode:
        result["msg"] = "check mode: nothing run"
        module.exit_json(**result)
    if cpu_plan is not None:
        result["cpu_freq"] = measure_host.measure_cpu_freq(cpu_plan, params["duration_s"])
    if mem_plan is not None:
        left = params["timeout_s"] - (time.monotonic() - began)
        result["mem_bw"] = measure_host.measure_mem_bw(mem_plan, max(0, int(left)), params["mem_duration_s"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
