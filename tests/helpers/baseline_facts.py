"""A small, complete facts document (docs/facts.md) on which every baseline rule passes.

Tests copy it and break one thing at a time. Shape: one AMD EPYC Zen 5 host, two NUMA
nodes, a PCIe switch (root port 0000:40:01.1 -> upstream port 0000:41:00.0 -> downstream
ports 0000:42:0{0,1,2}.0) with two Blackwell GPUs and one ConnectX NIC behind it, a 1 GbE
management NIC on its own root port, and one Proxmox container holding GPU 0.
"""
import copy

GPU_NAME = "NVIDIA RTX PRO 6000 Blackwell Server Edition"


def _pcie(port_type, width=16, speed="32GT/s", mrrs=4096, mps=256):
    return {
        "version": 2, "port_type": port_type, "max_payload_supported": 512, "max_payload": mps,
        "max_read_request": mrrs, "relaxed_ordering": True, "extended_tag": True, "no_snoop": True,
        "link_cap_speed": speed, "link_cap_width": width, "link_speed": speed, "link_width": width,
        "devctl_raw": 0x5937,
    }


def _acs(redirect=False):
    bits = ("source_validation", "translation_blocking", "request_redirect", "completion_redirect",
            "upstream_forwarding", "egress_control", "direct_translated")
    ctl = dict((b, False) for b in bits)
    ctl["source_validation"] = True
    ctl["request_redirect"] = redirect
    ctl["completion_redirect"] = redirect
    return {"cap": dict((b, True) for b in bits), "ctl": ctl}


def _aer(fatal=0):
    return {"present": True, "counters": {
        "correctable": {"RxErr": 0, "TOTAL_ERR_COR": 0},
        "fatal": {"TLP": fatal, "TOTAL_ERR_FATAL": fatal},
        "nonfatal": {"CmpltTO": 0, "TOTAL_ERR_NONFATAL": 0}}}


def _device(address, kind, class_id, vendor, device, upstream, pcie, numa=0, acs=None, aer=None, driver=None):
    return {
        "address": address, "vendor_id": vendor, "device_id": device, "class_id": class_id, "kind": kind,
        "driver": driver, "numa_node": numa, "local_cpulist": "0-31", "upstream": upstream,
        "config_bytes": 4096, "pcie": pcie, "acs": acs, "aer": aer, "error": None,
    }


def _gpu(index, bus_id):
    return {
        "index": index, "name": GPU_NAME, "uuid": "GPU-%08d" % index, "bus_id": bus_id, "persistence": True,
        "ecc": {"current": "Enabled", "pending": "Enabled"},
        "power": {"limit_w": 600.0, "default_w": 600.0, "max_w": 600.0, "min_w": 150.0},
        "clocks_event_reasons": {"active": [], "raw": {}},
        "temperature": {"gpu_c": 34, "slowdown_c": 92, "shutdown_c": 95, "max_operating_c": 88, "target_c": None,
                        "memory_c": 40, "memory_max_c": 95},
        "vbios_version": "98.02.52.00.02",
        "pcie": {"gen_current": 5, "gen_max": 5, "gen_host_max": 5, "width_current": 16, "width_max": 16},
        "retired_pages": None, "remapped_rows": None, "processes": [],
        "topology": {"cpu_affinity": "0-31", "numa_affinity": "0"},
    }


ROOT, UP = "0000:40:01.1", "0000:41:00.0"
DOWN0, DOWN1, DOWN2 = "0000:42:00.0", "0000:42:01.0", "0000:42:02.0"
GPU0, GPU1, NIC = "0000:43:00.0", "0000:44:00.0", "0000:45:00.0"
MGMT_ROOT, MGMT_NIC = "0000:00:01.1", "0000:01:00.0"

_HEALTHY = {
    "schema": 1, "root": "/snap", "live": False, "hostname": "gpu01",
    "gathered": ["kernel", "cpu", "numa", "pci", "iommu", "nvidia", "lxc", "persistence"],
    "kernel": {
        "release": "6.14.8-2-pve",
        "version": "#1 SMP PREEMPT_DYNAMIC PMX 6.14.8-2 (2025-07-22T10:04Z)",
        "preempt": {"build": "PREEMPT_DYNAMIC", "cmdline": None, "debugfs": "voluntary", "model": "voluntary"},
        "cmdline": {"raw": "initrd=\\EFI\\proxmox\\initrd.img root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt amd_pstate=active",
                    "params": {"initrd": "\\EFI\\proxmox\\initrd.img", "root": "ZFS=rpool/ROOT/pve-1", "boot": "zfs",
                               "iommu": "pt", "amd_pstate": "active"}},
        "configured_cmdline": {"source": "/etc/kernel/cmdline", "bootloader": "systemd-boot",
                               "raw": "root=ZFS=rpool/ROOT/pve-1 boot=zfs iommu=pt amd_pstate=active",
                               "params": {"root": "ZFS=rpool/ROOT/pve-1", "boot": "zfs", "iommu": "pt",
                                          "amd_pstate": "active"}},
        "sysctl": {"numa_balancing": 0, "zone_reclaim_mode": 0, "swappiness": 10},
        "sysctl_persisted": {
            "kernel.numa_balancing": {"value": "0", "file": "/etc/sysctl.d/90-gpuhost-baseline.conf"},
            "vm.swappiness": {"value": "10", "file": "/etc/sysctl.d/90-gpuhost-baseline.conf"}},
        "thp": {"enabled": "madvise", "defrag": "madvise"},
        "installed": ["6.8.12-4-pve", "6.14.8-2-pve"],
        "installed_not_running": ["6.8.12-4-pve"],
        "os_release": {"id": "debian", "version_id": "12", "id_like": None, "pretty_name": "Debian 12"},
    },
    "cpu": {
        "vendor": "AuthenticAMD", "family": 26, "model": 2, "model_name": "AMD EPYC 9335 32-Core Processor",
        "sockets": 1, "cores": 32, "threads": 64, "online": "0-63",
        "smt": {"control": "on", "active": True},
        "cpufreq": {"policies": 64, "driver": {"amd-pstate-epp": 64}, "governor": {"performance": 64},
                    "epp": {"performance": 64}, "min_khz": {"1500000": 64}, "max_khz": {"4400000": 64},
                    "available_governors": ["performance", "powersave"]},
        "amd_pstate": {"status": "active"},
        "intel_pstate": {"status": None, "no_turbo": None},
        "boost": True,
        "cpuidle": {"driver": "acpi_idle", "governor": "menu", "states": [
            {"index": 0, "name": "POLL", "desc": "CPUIDLE CORE POLL IDLE", "latency_us": 0, "residency_us": 0,
             "enabled_cpus": 64, "disabled_cpus": 0},
            {"index": 1, "name": "C1", "desc": "ACPI FFH MWAIT 0x0", "latency_us": 1, "residency_us": 2,
             "enabled_cpus": 64, "disabled_cpus": 0},
            {"index": 2, "name": "C2", "desc": "ACPI IOPORT 0x814", "latency_us": 400, "residency_us": 800,
             "enabled_cpus": 0, "disabled_cpus": 64}]},
        "tuned": {"installed": True, "running": True, "enabled": True, "active_profile": "accelerator-performance",
                  "profiles": ["accelerator-performance"], "profile_mode": "manual", "profile": None},
    },
    "numa": {
        "nodes": [
            {"id": 0, "cpulist": "0-15,32-47", "cpus": 32, "mem_total_kb": 263475712, "mem_free_kb": 131737856,
             "file_pages_kb": 0, "anon_pages_kb": 0, "hugepages_total": 0, "hugepages_free": 0, "free_pct": 50.0,
             "distances": [10, 32]},
            {"id": 1, "cpulist": "16-31,48-63", "cpus": 32, "mem_total_kb": 263475712, "mem_free_kb": 126468342,
             "file_pages_kb": 0, "anon_pages_kb": 0, "hugepages_total": 0, "hugepages_free": 0, "free_pct": 48.0,
             "distances": [32, 10]}],
        "node_count": 2, "free_pct_min": 48.0, "free_pct_max": 50.0, "free_pct_spread": 2.0,
        "mem_total_spread_pct": 0.0, "processes": [],
    },
    "pci": {"devices": [
        _device(MGMT_ROOT, "bridge", "0x060400", "0x1022", "0x14ab", [], _pcie("root_port", width=1, speed="5GT/s", mrrs=512)),
        _device(MGMT_NIC, "nic", "0x020000", "0x8086", "0x1533", [MGMT_ROOT],
                _pcie("endpoint", width=1, speed="5GT/s", mrrs=512), driver="igb"),
        _device(ROOT, "bridge", "0x060400", "0x1022", "0x14ab", [], _pcie("root_port"), acs=_acs(True), aer=_aer()),
        _device(UP, "bridge", "0x060400", "0x1000", "0xc030", [ROOT], _pcie("upstream_port"), aer=_aer()),
        _device(DOWN0, "bridge", "0x060400", "0x1000", "0xc030", [ROOT, UP], _pcie("downstream_port"), acs=_acs(), aer=_aer()),
        _device(DOWN1, "bridge", "0x060400", "0x1000", "0xc030", [ROOT, UP], _pcie("downstream_port"), acs=_acs(), aer=_aer()),
        _device(DOWN2, "bridge", "0x060400", "0x1000", "0xc030", [ROOT, UP], _pcie("downstream_port"), acs=_acs(), aer=_aer()),
        _device(GPU0, "gpu", "0x030200", "0x10de", "0x2bb5", [ROOT, UP, DOWN0], _pcie("endpoint"), aer=_aer(), driver="nvidia"),
        _device(GPU1, "gpu", "0x030200", "0x10de", "0x2bb5", [ROOT, UP, DOWN1], _pcie("endpoint"), aer=_aer(), driver="nvidia"),
        _device(NIC, "nic", "0x020700", "0x15b3", "0x1021", [ROOT, UP, DOWN2], _pcie("endpoint"), aer=_aer(), driver="mlx5_core"),
    ], "count": 10},
    "iommu": {"enabled": True, "type": "AMD-Vi", "groups": 40, "default_domain": {"identity": 40},
              "cmdline": {"iommu": "pt", "amd_iommu": None, "intel_iommu": None, "iommu.passthrough": None},
              "passthrough": True},
    "nvidia": {
        "module": {"version": "575.57.08", "open": True, "raw": "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  575.57.08"},
        "smi": {"available": True, "error": None},
        "driver_version": "575.57.08", "cuda_version": "12.9",
        "gpus": [_gpu(0, GPU0), _gpu(1, GPU1)],
        "topology": None, "present": True,
    },
    "lxc": {
        "inside_container": False, "evidence": [],
        "cgroup": {"version": 2, "memory_max": "max", "cpuset_cpus": "0-63", "cpuset_mems": "0-1"},
        "proxmox": True,
        "nvidia_uvm_major": 508,
        "containers": [{
            "id": "101", "memory_mib": 262144, "swap_mib": 0, "cores": 16, "cpulimit": None,
            "cpuset": "0-15", "cpuset_mems": "0",
            "devices_allow": ["c 195:* rwm", "c 508:* rwm"],
            "mounts": [{"source": "/dev/nvidia0", "target": "dev/nvidia0", "type": "none", "options": "bind,optional,create=file"},
                       {"source": "/dev/nvidiactl", "target": "dev/nvidiactl", "type": "none", "options": "bind,optional,create=file"},
                       {"source": "/dev/nvidia-uvm", "target": "dev/nvidia-uvm", "type": "none", "options": "bind,optional,create=file"}],
            "dev_entries": [], "snapshots": {}}],
    },
    "persistence": {
        "pcie": {
            "script": {"path": "/usr/local/sbin/gpuhost-pcie-apply", "present": True, "managed": True, "entries": 6},
            "unit": {"path": "/etc/systemd/system/gpuhost-pcie.service", "present": True, "masked": False,
                     "runs_script": True, "exec_start": ["/usr/local/sbin/gpuhost-pcie-apply"],
                     "wanted_by": ["multi-user.target"]},
            "enabled": True,
            "udev": {"path": "/etc/udev/rules.d/90-gpuhost-pcie.rules", "present": True,
                     "devices": [DOWN0, DOWN1, DOWN2, GPU0, GPU1, NIC]},
            "active": True,
            "devices": dict(
                [(a, {"max_read_request": 4096, "max_payload": None, "acs_request_redirect": None,
                      "acs_completion_redirect": None, "udev": True}) for a in (GPU0, GPU1, NIC)] +
                [(a, {"max_read_request": None, "max_payload": None, "acs_request_redirect": False,
                      "acs_completion_redirect": False, "udev": True}) for a in (DOWN0, DOWN1, DOWN2)]),
        },
        "cpu_power": {
            "script": {"path": "/usr/local/sbin/gpuhost-cpu-power", "present": True, "managed": True},
            "unit": {"path": "/etc/systemd/system/gpuhost-cpu-power.service", "present": True, "masked": False,
                     "runs_script": True, "exec_start": ["/usr/local/sbin/gpuhost-cpu-power"],
                     "wanted_by": ["multi-user.target"]},
            "enabled": True,
            "udev": {"path": "/etc/udev/rules.d/90-gpuhost-cpu-power.rules", "present": True,
                     "modules": ["*cpufreq*|*pstate*"]},
            "active": True,
            "settings": {"governor": "performance", "epp": "performance", "boost": True, "idle_latency_max_us": 100},
        },
    },
    # what validate.yml's host_measure returned (VAL rules; plugins/plugin_utils/derive/derive_validation.py)
    "measure": {
        "cpu_freq": {"status": "ok", "reason": None, "source": "scaling_cur_freq", "sample": "all online CPUs",
                     "online": 2, "duration_s": 3.01, "samples": 15, "workers": [],
                     "cpus": dict((str(cpu), {"observed_khz": 3695000, "rated_khz": 3700000,
                                              "rated_source": "amd_pstate_max_freq",
                                              "rated": {"amd_pstate_max_freq": 3700000}, "fraction": 0.999,
                                              "reason": None}) for cpu in (0, 32))},
        "mem_bw": {"status": "ok", "reason": None, "tool": "stress-ng", "bound": True, "unit": "MB/s",
                   "nodes": {"0": {"status": "ok", "reason": None, "bandwidth_mbs": 182000.0, "cpus": "0-15,32-47"},
                             "1": {"status": "ok", "reason": None, "bandwidth_mbs": 176500.0, "cpus": "16-31,48-63"}},
                   "cross": {"0->1": {"cpu_node": "0", "mem_node": "1", "status": "ok", "reason": None,
                                      "bandwidth_mbs": 98000.0},
                             "1->0": {"cpu_node": "1", "mem_node": "0", "status": "ok", "reason": None,
                                      "bandwidth_mbs": 97000.0}}},
        "gpu_bw": {"status": "ok", "reason": None, "tool": "nvbandwidth",
                   "gpus": {"0": {"name": "NVIDIA RTX PRO 6000 (00000000:43:00)", "bus_id": GPU0, "h2d_gbs": 55.3,
                                  "d2h_gbs": 55.9},
                            "1": {"name": "NVIDIA RTX PRO 6000 (00000000:44:00)", "bus_id": GPU1, "h2d_gbs": 55.1,
                                  "d2h_gbs": 56.0}},
                   "pairs": [{"src": "0", "dst": "1", "gbs": 51.2}, {"src": "1", "dst": "0", "gbs": 51.0}],
                   "testcases": {}},
        "dcgm_diag": {"status": "ok", "reason": None, "level": 1, "overall": "pass", "failed": [], "entities": {},
                      "command": "dcgmi diag -r 1 -j"},
        "dcgm_health": {"status": "ok", "reason": None, "overall": "healthy", "entities": {},
                        "command": "dcgmi health -c -j"},
        "nccl": {"status": "ok", "reason": None, "gpus": 2, "avg_busbw_gbs": 41.7, "max_busbw_gbs": 47.9,
                 "out_of_bounds": 0, "out_of_bounds_ok": True, "wrong": [], "checked": True, "exit_status": 0,
                 "command": "all_reduce_perf -b 8M -e 1G -f 2 -g 2"},
        # site workloads (VAL-012): llama.cpp's llama-bench, its figure above its floor
        "workloads": [{"name": "llama-bench tg128", "status": "ok", "reason": None, "value": 118.88, "unit": "tok/s",
                       "floor": 100.0, "parser": "json", "how": "json path [0].avg_ts", "timeout_s": 600,
                       "command": "/usr/local/bin/llama-bench -m /models/model.gguf -p 0 -n 128 -o json",
                       "seconds": 41.3, "exit_status": 0, "lower_is_better": False},
                      # a lower-is-better one (VAL-013): vLLM's mean time per output token, below its limit
                      {"name": "vllm mean TPOT", "status": "ok", "reason": None, "value": 71.02, "unit": "ms",
                       "floor": 80.0, "lower_is_better": True, "parser": "regex", "timeout_s": 900,
                       "how": "regex '^Mean TPOT \\(ms\\):\\s+(?P<value>\\S+)', the one matching line",
                       "command": "/usr/local/bin/vllm bench serve --model m --dataset-name random",
                       "seconds": 95.0, "exit_status": 0}],
    },
    "errors": [],
}


def healthy_facts():
    """A fresh deep copy of the all-passing document."""
    return copy.deepcopy(_HEALTHY)


def device(facts, address):
    """The PCI device entry of ``address`` in ``facts`` (to mutate it)."""
    for dev in facts["pci"]["devices"]:
        if dev["address"] == address:
            return dev
    raise KeyError(address)
