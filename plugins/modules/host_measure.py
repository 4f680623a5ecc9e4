#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: host_measure
short_description: Measure what a host delivers, the CPU clock under load, memory bandwidth per NUMA node and its GPUs
version_added: 0.1.0
description:
  - Runs short, time-bounded measurements on the live host and returns the figures. It gathers only; the
    C(validate) role (C(playbooks/validate.yml)) judges the figures as the VAL rules (C(docs/validation.md)).
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
  - >-
    With O(mem_cross), C(numactl) and two or more nodes with CPUs, one more run per node N follows, with the
    CPUs of N and the memory of the next node in the sorted list (the last node's CPUs with the first node's
    memory), C(--cpunodebind=N --membind=M); n runs across the interconnect, not n x n. They share
    O(timeout_s) with the per-node runs.
  - >-
    B(gpu_bw) - C(nvbandwidth -j -t host_to_device_memcpy_ce device_to_host_memcpy_ce
    device_to_device_memcpy_read_ce): copy-engine bandwidth from the host to each GPU, from each GPU to the
    host, and between each pair of GPUs (peer reads), per GPU in CUDA's numbering with
    C(CUDA_DEVICE_ORDER=PCI_BUS_ID) (so the numbers are nvidia-smi's) and the GPU's bus id.
  - B(dcgm_diag) - C(dcgmi diag -r) O(dcgm_diag_level) C(-j), the DCGM diagnostic (needs the DCGM host engine
    running); the overall result, one line per failed or warned test, the worst result per GPU.
  - B(dcgm_health) - C(dcgmi health -c -j), the incidents DCGM's health watches recorded (the watches must
    have been set with C(dcgmi health -s), else it is C(unknown) with DCGM's message).
  - B(nccl) - nccl-tests C(all_reduce_perf -b 8M -e 1G -f 2 -g N), an all-reduce across the host's N GPUs (N from
    C(/proc/driver/nvidia/gpus)), with C(CUDA_DEVICE_ORDER=PCI_BUS_ID); the average and highest bus bandwidth.
  - The GPU measurements run only on a host with an NVIDIA GPU (an entry under C(/proc/driver/nvidia/gpus) or
    C(/dev/nvidia0)); elsewhere each is C(unknown) and nothing is run. Each runs only when its tool is in PATH
    (else C(unknown) saying where to get it), one after the other, each with its own timeout
    (O(gpu_bw_timeout_s), O(dcgm_diag_timeout_s), O(dcgm_health_timeout_s), O(nccl_timeout_s)), not bounded by
    O(timeout_s). The output is read first whatever the exit status (C(dcgmi diag) exits non-zero when a test
    fails and still prints its result); output that cannot be read, a non-zero exit without readable
    output, or a hang (killed with its process group) is C(unknown) with a one-line reason, never a figure.
  - Each tool run gets its own session and is killed with its whole process group at its timeout; a missing
    tool, a non-zero exit, a hang or output the parser cannot read makes the node (or the measurement)
    C(unknown) with the reason, never a figure.
  - >-
    B(workloads) - the site's own workloads (O(workloads)), after the GPU measurements, one after the other:
    each C(argv) as given (no shell), no stdin, its own session, stdout and stderr each bounded while read
    (4 MiB; past that it is killed), killed with its whole process group at its C(timeout). The figure is read
    from stdout with a regular expression (C(parser=regex), a named group C(value), the last matching line) or
    a dotted path into its JSON (C(parser=json)). A definition that cannot work (a pattern without a C(value)
    group, no path), a program not found, a hang, a non-zero exit (the reason is the last non-empty line of
    stderr, else stdout) or output without the figure is C(unknown) with the reason, never a figure; the other
    measurements and workloads still run. A name given twice fails the module. The C(validate) role judges each figure against its C(floor) as rule VAL-012.
  - The CPU and memory measurements take about O(duration_s) plus O(mem_duration_s) (at least 6 s with
    stress-ng) per NUMA node, twice that with O(mem_cross) on a multi-node host, and never more than
    O(timeout_s). The GPU measurements take what their tools take, each at most its own timeout; DCGM's
    documentation gives C(dcgmi diag -r 1) seconds, C(-r 2) about two minutes, C(-r 3) about 15 minutes.
author:
  - gpuhost.baseline maintainers (@gpuhost-baseline)
options:
  measurements:
    description: The measurements to run.
    type: list
    elements: str
    choices: [cpu_freq, mem_bw, gpu_bw, dcgm_diag, dcgm_health, nccl]
    default: [cpu_freq, mem_bw, gpu_bw, dcgm_diag, dcgm_health, nccl]
  duration_s:
    description: Seconds every sampled CPU is loaded while its clock is sampled (1 to 60).
    type: int
    default: 3
  max_cpus:
    description:
      - At most this many CPUs are loaded and sampled; on a host with more online CPUs, this many evenly
        spread over them. V(0) loads every online CPU. At most 8192 (one worker process each).
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
  mem_cross:
    description:
      - Also measure memory bandwidth across NUMA nodes (the CPUs of each node with the memory of the next),
        on a host with two or more nodes with CPUs and C(numactl).
    type: bool
    default: true
  timeout_s:
    description:
      - Seconds the CPU clock and memory bandwidth measurements may take together (the GPU measurements have
        their own timeouts); must exceed O(duration_s). A tool run that would not fit in what is left is not
        started (its node is C(unknown), saying so); one that runs past its own timeout (its duration plus 30 s,
        or what is left) is killed.
    type: int
    default: 120
  deadline_s:
    description:
      - >-
        Seconds from the module's start by which every tool it runs has ended (0, the default: no deadline,
        0 to 86400). Each tool run's own timeout is cut to what is left; a run that would get less than a
        second is not started; either way its measurement (or node) is C(unknown) saying the deadline ended
        it. The C(validate) role sets it to the task's C(timeout) less a margin (C(docs/validation.md)), so the
        module ends its tools and returns what it measured before Ansible stops waiting for it: a task timeout
        by itself ends neither the module nor the tools it started.
      - If the module's process is killed (C(SIGKILL), the OOM killer), a guard process ends the tool then
        running with its process group and every process holding its output (docs/security.md, "Commands on a host").
    type: int
    default: 0
  gpu_bw_timeout_s:
    description: Seconds nvbandwidth may run before it is killed with its process group (1 to 14400).
    type: int
    default: 300
  dcgm_diag_timeout_s:
    description:
      - Seconds C(dcgmi diag) may run before it is killed with its process group (1 to 14400). Level 3 (about 15
        minutes) needs more than the default; raise this with O(dcgm_diag_level=3).
    type: int
    default: 600
  dcgm_health_timeout_s:
    description: Seconds C(dcgmi health -c) may run before it is killed with its process group (1 to 14400).
    type: int
    default: 60
  nccl_timeout_s:
    description: Seconds C(all_reduce_perf) may run before it is killed with its process group (1 to 14400).
    type: int
    default: 300
  dcgm_diag_level:
    description: The DCGM diagnostic level, C(dcgmi diag -r) 1 (quick, seconds), 2 (medium, about two minutes) or 3
      (long, about 15 minutes).
    type: int
    choices: [1, 2, 3]
    default: 1
  repeats:
    description:
      - Run all the measurements this many times in a row (1 to 10). The results of the last run are the
        module's keys; with more than one, C(runs) holds every run. The spread of the runs is the measurement's
        own noise (C(remediate.yml) with C(gpuhost_prove)).
      - O(timeout_s) bounds the CPU and memory measurements of each run; O(deadline_s) bounds them all.
    type: int
    default: 1
  workloads:
    description:
      - The site's workloads (C(docs/validation.md), "Site workloads"), run after the other measurements whenever
        the list is not empty.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: The workload's name (unique; the finding's subject).
        type: str
        required: true
      argv:
        description:
          - The program and its arguments, run without a shell; a program without a slash is looked up in PATH.
        type: list
        elements: str
        required: true
      timeout:
        description: Seconds it may run before it is killed with its process group (1 to 14400).
        type: int
        default: 300
      parser:
        description:
          - How the figure is read from its stdout, V(regex) (O(workloads[].pattern)) or V(json)
            (O(workloads[].path)).
        type: str
        choices: [regex, json]
        required: true
      pattern:
        description:
          - With V(regex), a Python regular expression with a named group C(value), searched line by line; the
            last line that matches gives the figure.
        type: str
      path:
        description:
          - With V(json), a dotted path into the JSON document the command prints (C(results.0.throughput),
            C([0].avg_ts); a segment of digits indexes a list, V(-1) its last element).
        type: str
      unit:
        description: The figure's unit, shown in the finding (V(tok/s)).
        type: str
        default: ""
      floor:
        description:
          - The least figure that passes VAL-012 (a number of at least 0); with O(workloads[].lower_is_better), the
            most that passes VAL-013. Returned as given.
          - Without it the judge takes the floor the profile learned from a golden host (its parameter
            C(workload_floors), written by C(learn.yml) with C(gpuhost_learn_workloads)); with neither the workload is
            measured and its rule is V(unknown), saying so.
        type: float
      lower_is_better:
        description:
          - The figure is a time or a latency (TPOT, TTFT in ms), which passes at or below O(workloads[].floor),
            judged by VAL-013 instead of VAL-012.
        type: bool
        default: false
      env:
        description: Variables set for the run, on top of the module's environment and C(LC_ALL=C).
        type: dict
        default: {}
attributes:
  check_mode:
    description:
      - Reads C(/sys), C(/proc/driver/nvidia/gpus) and PATH to say what it would run (RV(plan)) and runs
        nothing, no worker and no tool.
    support: full
  diff_mode:
    description: No diff; the host is never changed.
    support: none
notes:
  - It never changes the host's configuration; C(changed) is always V(false). It does load the CPUs, the
    memory and the GPUs for the time it runs, so run it in a maintenance window, not beside a serving model.
  - A CPU's clock under emulation (a VM guest) is whatever the hypervisor reports; its figures are not a
    statement about the hardware.
  - The figures are documented in C(docs/validation.md) of the collection.
"""

EXAMPLES = r"""
- name: Every measurement with the defaults (CPU and memory about 3 s + 12 s per NUMA node, then the GPUs)
  gpuhost.baseline.host_measure:
  become: true

- name: The GPU measurements only, the medium DCGM diagnostic
  gpuhost.baseline.host_measure:
    measurements: [gpu_bw, dcgm_diag, dcgm_health, nccl]
    dcgm_diag_level: 2
    dcgm_diag_timeout_s: 1800
  become: true

- name: The CPU clock only, 5 s of load on at most 64 CPUs
  gpuhost.baseline.host_measure:
    measurements: [cpu_freq]
    duration_s: 5
    max_cpus: 64

- name: The site's workload, llama.cpp's llama-bench, judged against a floor of 100 tok/s (VAL-012)
  gpuhost.baseline.host_measure:
    measurements: []
    workloads:
      - name: llama-bench tg128
        argv: [llama-bench, -m, /models/model.gguf, -p, "0", -n, "128", -o, json]
        timeout: 600
        parser: json
        path: "[0].avg_ts"
        unit: tok/s
        floor: 100

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
    - C(cross) per C(N->M) (the CPUs of node N, the memory of node M), C(cpu_node), C(mem_node) and the keys of
      a node; empty without O(mem_cross), numactl or a second node. C(status) counts C(nodes) only.
  returned: when mem_bw is measured and not in check mode
  type: dict
  sample: {"status": "ok", "reason": null, "tool": "stress-ng", "looked_for": ["stress-ng", "sysbench", "mbw"],
           "bound": true, "unit": "MB/s", "nodes_without_cpus": [],
           "nodes": {"0": {"status": "ok", "reason": null, "bandwidth_mbs": 8276.11, "cpus": "0-1", "seconds": 6.3,
                           "command": "/usr/bin/numactl --cpunodebind=0 --membind=0 /usr/bin/stress-ng --stream 2 -t 6s --metrics-brief",
                           "detail": {"tool": "stress-ng", "instances": 2, "read_mbs": 4965.67, "write_mbs": 3310.44}}},
           "cross": {}}
gpu_bw:
  description:
    - nvbandwidth's copy bandwidth; absent when not in O(measurements) and in check mode.
    - C(status) V(ok) when at least one figure was read, else V(unknown) with C(reason) (no GPU, no nvbandwidth,
      a hang, a non-zero exit, output that cannot be read); C(reason) may note a non-zero exit beside figures.
      C(tool) V(nvbandwidth), C(version), C(command), C(seconds).
    - C(gpus) per CUDA index (PCI bus order), C(name) (nvbandwidth's device string), C(bus_id) (V(0000:18:00.0),
      V(null) when the string has none), C(h2d_gbs) and C(d2h_gbs) (GB/s, V(null) when not measured).
    - C(pairs) the GPU to GPU figures, C(src), C(dst) (CUDA indices) and C(gbs); C(testcases) per testcase
      C(status) (V(passed), V(waived), V(not_found), V(error)) and C(error).
  returned: when gpu_bw is in O(measurements) and not in check mode
  type: dict
  sample: {"status": "ok", "reason": null, "tool": "nvbandwidth", "version": "v0.8", "seconds": 41.2,
           "command": "/usr/local/bin/nvbandwidth -j -t host_to_device_memcpy_ce device_to_host_memcpy_ce device_to_device_memcpy_read_ce",
           "gpus": {"0": {"name": "NVIDIA H100 80GB HBM3 (00000000:18:00)", "bus_id": "0000:18:00.0",
                          "h2d_gbs": 55.6, "d2h_gbs": 55.2}},
           "pairs": [{"src": "0", "dst": "1", "gbs": 389.1}],
           "testcases": {"host_to_device_memcpy_ce": {"status": "passed", "error": null}}}
dcgm_diag:
  description:
    - The DCGM diagnostic; absent when not in O(measurements) and in check mode.
    - C(status) V(ok) when its JSON was read (whatever the tests found), else V(unknown) with C(reason);
      C(level), C(command), C(seconds).
    - C(overall) the worst test result, V(fail), V(warn), V(unknown), V(pass) or V(skip) (V(null) when
      C(status) is V(unknown)); C(failed) one line per failed or warned test; C(entities) the worst result
      per entity (V(GPU 0)).
  returned: when dcgm_diag is in O(measurements) and not in check mode
  type: dict
  sample: {"status": "ok", "reason": "dcgmi exited 226 after printing its result", "level": 2, "seconds": 95.1,
           "command": "/usr/bin/dcgmi diag -r 2 -j", "overall": "fail",
           "failed": ["memory on GPU 1: Couldn't allocate at least 75.0% of GPU memory on GPU 1"],
           "entities": {"GPU 0": "pass", "GPU 1": "fail"}}
dcgm_health:
  description:
    - DCGM's health incidents; absent when not in O(measurements) and in check mode.
    - C(status) V(ok) when its JSON was read, else V(unknown) with C(reason) (also when the health watches are
      not set); C(command), C(seconds).
    - C(overall) V(healthy), V(warning), V(failure) or V(unknown) (V(null) when C(status) is V(unknown));
      C(entities) the entities with incidents, C(health) and C(systems) (per system, C(health) and C(message)).
  returned: when dcgm_health is in O(measurements) and not in check mode
  type: dict
  sample: {"status": "ok", "reason": null, "command": "/usr/bin/dcgmi health -c -j", "seconds": 0.4,
           "overall": "warning", "entities": {"GPU 0": {"health": "warning", "systems": {"PCIe system": {
             "health": "warning", "message": "Detected more than 8 PCIe replays per minute for GPU 0 : 13"}}}}}
nccl:
  description:
    - An NCCL all-reduce across the host's GPUs; absent when not in O(measurements) and in check mode.
    - C(status) V(ok) when its table and average were read, else V(unknown) with C(reason); C(gpus) the GPUs
      used (C(-g)), C(command), C(seconds).
    - C(avg_busbw_gbs) nccl-tests' average bus bandwidth, C(max_busbw_gbs) the highest of its rows (GB/s),
      C(out_of_bounds) the count of its footer's C(Out of bounds values) line and C(out_of_bounds_ok) whether it
      says OK (it says V(0 OK) when nothing was checked, too).
    - C(wrong) the rows whose C(#wrong) column counts elements outside the tolerance
      (C(size_bytes), C(placement), C(wrong); at most 20), C(checked) whether any row printed a C(#wrong) figure
      (C(-c 0) prints N/A) and C(exit_status) the tool's exit status (non-zero when its check failed); rule VAL-010.
  returned: when nccl is in O(measurements) and not in check mode
  type: dict
  sample: {"status": "ok", "reason": null, "gpus": 8, "seconds": 22.5,
           "command": "/opt/nccl-tests/build/all_reduce_perf -b 8M -e 1G -f 2 -g 8",
           "avg_busbw_gbs": 112.4, "max_busbw_gbs": 180.2, "out_of_bounds": 0, "out_of_bounds_ok": true,
           "wrong": [], "checked": true, "exit_status": 0}
workloads:
  description:
    - One result per workload of O(workloads), in their order; absent when there are none and in check mode.
    - C(name), C(unit), C(floor), C(lower_is_better), C(parser) and C(timeout_s) as defined; C(status) V(ok) when the figure was read,
      else V(unknown) with C(reason) (not found, killed after its timeout, a non-zero exit with the last line it
      printed, too much output, output without the figure with an excerpt); C(value) the figure (V(null) when
      unknown); C(how) how it was read; C(command), C(seconds), C(exit_status).
  returned: when O(workloads) is not empty and not in check mode
  type: list
  elements: dict
  sample: [{"name": "llama-bench tg128", "status": "ok", "reason": null, "value": 118.88, "unit": "tok/s",
            "floor": 100.0, "lower_is_better": false, "parser": "json", "how": "json path [0].avg_ts", "timeout_s": 600, "seconds": 41.3,
            "command": "/usr/local/bin/llama-bench -m /models/m.gguf -p 0 -n 128 -o json", "exit_status": 0}]
runs:
  description:
    - Every run of the measurements, in order, each a mapping with the keys above (C(cpu_freq), C(mem_bw), ...);
      the module's own keys are the last run's.
  returned: when O(repeats) is above 1 and not in check mode
  type: list
  elements: dict
  sample: [{"cpu_freq": {"status": "ok", "cpus": {"0": {"observed_khz": 1500000}}}},
           {"cpu_freq": {"status": "ok", "cpus": {"0": {"observed_khz": 1510000}}}}]
plan:
  description:
    - What runs (or, in check mode, would run); C(cpu_freq) has C(cpus) (a CPU list), C(not_allowed), C(sample), C(source),
      C(duration_s), C(workers) (how many), C(status) and C(reason); C(mem_bw) has C(tool), C(looked_for),
      C(bound), C(commands), C(cross_commands), C(duration_s), C(status) and C(reason). C(timeout_s) bounds them together.
    - Each GPU measurement asked for has C(status) (V(ok) it runs, V(unknown) it cannot, C(reason) says why, no
      GPU, no tool), C(tool), C(command) (V(null) when it cannot run), C(env) (the variables set for the run),
      C(timeout_s), and C(level) (dcgm_diag) or C(gpus) (nccl).
    - C(workloads) (when O(workloads) is not empty) one entry per workload, C(name), C(status), C(reason),
      C(command), C(env), C(timeout_s), C(parser).
  returned: always
  type: dict
  sample: {"timeout_s": 120, "cpu_freq": {"status": "ok", "cpus": "0-1", "sample": "all online CPUs",
           "source": "/proc/cpuinfo", "duration_s": 3, "workers": 2, "reason": null},
           "mem_bw": {"status": "ok", "tool": "stress-ng", "bound": true, "duration_s": 6, "reason": null,
                      "commands": ["/usr/bin/numactl --cpunodebind=0 --membind=0 /usr/bin/stress-ng --stream 2 -t 6s --metrics-brief"],
                      "cross_commands": []},
           "dcgm_health": {"status": "ok", "reason": null, "tool": "dcgmi", "command": "/usr/bin/dcgmi health -c -j",
                           "env": {}, "timeout_s": 60},
           "nccl": {"status": "unknown", "tool": "all_reduce_perf", "command": null, "env": {}, "timeout_s": 300, "gpus": 8,
                    "reason": "all_reduce_perf not found in PATH (build https://github.com/NVIDIA/nccl-tests ...)"}}
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuhost.baseline.plugins.module_utils.host import runner
from ansible_collections.gpuhost.baseline.plugins.module_utils.measure import measure_gpu, measure_host
from ansible_collections.gpuhost.baseline.plugins.module_utils.measure import measure_workload, workload
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.cpu import format_cpulist

HOST_MEASUREMENTS = ["cpu_freq", "mem_bw"]
MEASUREMENTS = HOST_MEASUREMENTS + list(measure_gpu.GPU_MEASUREMENTS)
#: the option of each GPU measurement's timeout
GPU_TIMEOUT_OPTIONS = dict((name, "%s_timeout_s" % name) for name in measure_gpu.GPU_MEASUREMENTS)
#: the most seconds one GPU tool run may be given (DCGM documents about 15 minutes for a level 3 diagnostic)
GPU_TIMEOUT_MAX = 4 * 3600

ARGUMENT_SPEC = dict(
    measurements=dict(type="list", elements="str", choices=MEASUREMENTS, default=MEASUREMENTS),
    duration_s=dict(type="int", default=3),
    max_cpus=dict(type="int", default=256),
    mem_duration_s=dict(type="int", default=6),
    mem_tools=dict(type="list", elements="str", choices=list(measure_host.MEM_TOOLS),
                   default=list(measure_host.MEM_TOOLS)),
    mem_cross=dict(type="bool", default=True),
    timeout_s=dict(type="int", default=120),
    deadline_s=dict(type="int", default=0),
    gpu_bw_timeout_s=dict(type="int", default=measure_gpu.GPU_TIMEOUTS["gpu_bw"]),
    dcgm_diag_timeout_s=dict(type="int", default=measure_gpu.GPU_TIMEOUTS["dcgm_diag"]),
    dcgm_health_timeout_s=dict(type="int", default=measure_gpu.GPU_TIMEOUTS["dcgm_health"]),
    nccl_timeout_s=dict(type="int", default=measure_gpu.GPU_TIMEOUTS["nccl"]),
    dcgm_diag_level=dict(type="int", choices=[1, 2, 3], default=1),
    repeats=dict(type="int", default=1),
    workloads=dict(type="list", elements="dict", default=[], options=dict(
        name=dict(type="str", required=True),
        argv=dict(type="list", elements="str", required=True),
        timeout=dict(type="int", default=300),
        parser=dict(type="str", choices=list(workload.PARSERS), required=True),
        pattern=dict(type="str"),
        path=dict(type="str"),
        unit=dict(type="str", default=""),
        floor=dict(type="float"),
        lower_is_better=dict(type="bool", default=False),
        env=dict(type="dict", default={}),
    )),
)


def check_params(params):
    """The message of the first parameter out of its bounds, or ``None``."""
    if not 1 <= params["duration_s"] <= 60:
        return "duration_s must be 1 to 60, not %d" % params["duration_s"]
    if not 1 <= params["mem_duration_s"] <= 120:
        return "mem_duration_s must be 1 to 120, not %d" % params["mem_duration_s"]
    if params["timeout_s"] <= params["duration_s"]:
        return "timeout_s (%d) must exceed duration_s (%d)" % (params["timeout_s"], params["duration_s"])
    least, most = measure_host.REPEATS_BOUNDS
    if not least <= params["repeats"] <= most:
        return "repeats must be %d to %d, not %d" % (least, most, params["repeats"])
    if not 0 <= params["deadline_s"] <= 86400:
        return "deadline_s must be 0 (none) to 86400, not %d" % params["deadline_s"]
    if not 0 <= params["max_cpus"] <= measure_host.MAX_WORKERS:
        return "max_cpus must be 0 (all) to %d, not %d" % (measure_host.MAX_WORKERS, params["max_cpus"])
    for option in sorted(GPU_TIMEOUT_OPTIONS.values()):
        if not 1 <= params[option] <= GPU_TIMEOUT_MAX:
            return "%s must be 1 to %d, not %d" % (option, GPU_TIMEOUT_MAX, params[option])
    # a workload whose definition cannot work (a pattern without a value group) is that workload's unknown, with
    # the reason (measure_workload.plan_workloads), not the module's failure: the other measurements still run
    names = set()
    for spec in params.get("workloads") or []:
        name = spec.get("name") if isinstance(spec, dict) else None
        if name in names:
            return "workload %s is defined twice: each workload's name is its finding's subject" % name
        names.add(name)
    return None


def gather(params, which, check_mode, gpus_dir=None, dev=None):
    """The module's result (less ``changed``) for checked ``params``; ``which(name) -> path or None`` finds the
    tools. Check mode returns the plan and runs nothing."""
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
        mem_plan = measure_host.plan_mem_bw(which, params["mem_duration_s"], tools=params["mem_tools"],
                                            cross=params["mem_cross"])
        plan["mem_bw"] = {"status": mem_plan["status"], "reason": mem_plan["reason"], "tool": mem_plan["tool"],
                          "looked_for": mem_plan["looked_for"], "bound": mem_plan["bound"],
                          "duration_s": params["mem_duration_s"],
                          "commands": [" ".join(run["argv"]) for run in mem_plan["runs"]],
                          "cross_commands": [" ".join(run["argv"]) for run in mem_plan["cross_runs"]]}
    gpu_plan = measure_gpu.plan_gpu(
        wanted, which, level=params["dcgm_diag_level"],
        timeouts=dict((name, params[option]) for name, option in GPU_TIMEOUT_OPTIONS.items()),
        gpus_dir=gpus_dir or measure_gpu.GPU_PROC, dev=dev or measure_gpu.GPU_DEV)
    for name, entry in gpu_plan.items():
        plan[name] = dict((key, value) for key, value in entry.items() if key != "argv")
    workloads = params.get("workloads") or []
    work_plan = measure_workload.plan_workloads(workloads, which)
    if workloads:
        plan["workloads"] = [dict((key, value) for key, value in entry.items() if key != "argv")
                             for entry in work_plan]
    result = dict(plan=plan)
    if check_mode:
        result["msg"] = "check mode: nothing run"
        return result
    runs = []
    for dummy in range(params.get("repeats") or 1):
        run = {}
        if cpu_plan is not None:
            run["cpu_freq"] = measure_host.measure_cpu_freq(cpu_plan, params["duration_s"])
        if mem_plan is not None:
            # timeout_s bounds the CPU and memory measurements of each run
            left = params["timeout_s"] - (time.monotonic() - began)
            run["mem_bw"] = measure_host.measure_mem_bw(mem_plan, max(0, int(left)), params["mem_duration_s"])
        run.update(measure_gpu.measure_gpu(gpu_plan))
        if workloads:
            run["workloads"] = measure_workload.measure_workloads(workloads, work_plan)
        runs.append(run)
        began = time.monotonic()
    result.update(runs[-1])
    if len(runs) > 1:
        result["runs"] = runs  # remediate.yml's gpuhost_prove: the spread of the runs is the measurement's noise
    return result


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    error = check_params(module.params)
    if error:
        module.fail_json(msg=error)
    runner.set_deadline(module.params["deadline_s"], "the module's deadline (deadline_s %d)" % module.params["deadline_s"])
    result = gather(module.params, module.get_bin_path, module.check_mode)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
