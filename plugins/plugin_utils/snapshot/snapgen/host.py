"""Describe a host with a few parameters; get the snapshot tree its gatherers would read.

:func:`build_host` turns a description (sockets, cores, NUMA nodes, GPUs, PCI device
count, and the state of every audited knob) into a :class:`~snapgen.tree.Tree`;
:func:`make_host` writes it. The fixtures (``incident``, ``healthy``, ``intel``,
``hostile``) and the benchmark's ``large`` host are all built through here, so the
paths are the ones listed in docs/facts.md and docs/snapshot-format.md.
"""

import hashlib
import json

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.snapshot.snapgen import nvsmi
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.snapshot.snapgen.pciconfig import ACS_BITS, LINK_SPEEDS, Function, Pcie, encode, lspci_dump
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.snapshot.snapgen.tree import Tree, replace_tree

CPU = "/sys/devices/system/cpu"
NODE = "/sys/devices/system/node"

AMD_FLAGS = (
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht "
    "syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good amd_lbr_v2 nopl nonstop_tsc cpuid "
    "extd_apicid aperfmperf rapl pni pclmulqdq monitor ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt "
    "aes xsave avx f16c rdrand lahf_lm cmp_legacy svm extapic cr8_legacy abm sse4a misalignsse 3dnowprefetch "
    "osvw ibs skinit wdt tce topoext perfctr_core perfctr_nb bpext perfctr_llc mwaitx cpb cat_l3 cdp_l3 "
    "hw_pstate ssbd mba perfmon_v2 ibrs ibpb stibp ibrs_enhanced vmmcall fsgsbase tsc_adjust bmi1 avx2 smep "
    "bmi2 erms invpcid cqm rdt_a avx512f avx512dq rdseed adx smap avx512ifma clflushopt clwb avx512cd sha_ni "
    "avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves cqm_llc cqm_occup_llc cqm_mbm_total cqm_mbm_local "
    "avx_vnni avx512_bf16 clzero irperf xsaveerptr rdpru wbnoinvd amd_ppin cppc arat npt lbrv svm_lock "
    "nrip_save tsc_scale vmcb_clean flushbyasid decodeassists pausefilter pfthreshold avic v_vmsave_vmload "
    "vgif x2avic v_spec_ctrl vnmi avx512vbmi umip pku ospke avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni "
    "avx512_bitalg avx512_vpopcntdq la57 rdpid movdiri movdir64b overflow_recov succor smca fsrm avx512_vp2intersect "
    "flush_l1d debug_swap")
AMD_BUGS = "sysret_ss_attrs spectre_v1 spectre_v2 spec_store_bypass srso"
INTEL_FLAGS = (
    "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush dts acpi mmx fxsr sse "
    "sse2 ss ht tm pbe syscall nx pdpe1gb rdtscp lm constant_tsc art arch_perfmon pebs bts rep_good nopl "
    "xtopology nonstop_tsc cpuid aperfmperf tsc_known_freq pni pclmulqdq dtes64 monitor ds_cpl vmx smx est "
    "tm2 ssse3 sdbg fma cx16 xtpr pdcm pcid dca sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes "
    "xsave avx f16c rdrand lahf_lm abm 3dnowprefetch cpuid_fault epb cat_l3 cat_l2 cdp_l3 invpcid_single "
    "intel_ppin cdp_l2 ssbd mba ibrs ibpb stibp ibrs_enhanced tpr_shadow flexpriority ept vpid ept_ad "
    "fsgsbase tsc_adjust bmi1 hle avx2 smep bmi2 erms invpcid rtm cqm rdt_a avx512f avx512dq rdseed adx "
    "smap avx512ifma clflushopt clwb intel_pt avx512cd sha_ni avx512bw avx512vl xsaveopt xsavec xgetbv1 "
    "xsaves cqm_llc cqm_occup_llc cqm_mbm_total cqm_mbm_local split_lock_detect avx_vnni avx512_bf16 "
    "wbnoinvd dtherm ida arat pln pts hfi vnmi avx512vbmi umip pku ospke waitpkg avx512_vbmi2 gfni vaes "
    "vpclmulqdq avx512_vnni avx512_bitalg tme avx512_vpopcntdq la57 rdpid bus_lock_detect cldemote "
    "movdiri movdir64b enqcmd fsrm md_clear serialize tsxldtrk pconfig arch_lbr ibt amx_bf16 avx512_fp16 "
    "amx_tile amx_int8 flush_l1d arch_capabilities")
INTEL_BUGS = "spectre_v1 spectre_v2 spec_store_bypass swapgs eibrs_pbrsb"

AER_CORRECTABLE = ("RxErr", "BadTLP", "BadDLLP", "Rollover", "Timeout", "NonFatalErr", "CorrIntErr", "HeaderOF")
AER_UNCORRECTABLE = ("Undefined", "DLP", "SDES", "TLP", "FCP", "CmpltTO", "CmpltAbrt", "UnxCmplt", "RxOF",
                     "MalfTLP", "ECRC", "UnsupReq", "ACSViol", "UncorrIntErr", "BlockedTLP",
                     "AtomicOpBlocked", "TLPBlockedErr", "PoisonTLPBlocked")

ACS_ALL = ("source_validation", "translation_blocking", "request_redirect", "completion_redirect",
           "upstream_forwarding", "direct_translated")
ACS_LINUX_DEFAULT = ("source_validation", "request_redirect", "completion_redirect", "upstream_forwarding")

PROC_DEVICES_CHAR = (
    (1, "mem"), (4, "/dev/vc/0"), (4, "tty"), (4, "ttyS"), (5, "/dev/tty"), (5, "/dev/console"),
    (5, "/dev/ptmx"), (7, "vcs"), (10, "misc"), (13, "input"), (21, "sg"), (29, "fb"), (89, "i2c"),
    (128, "ptm"), (136, "pts"), (162, "raw"), (180, "usb"), (189, "usb_device"), (202, "cpu/msr"),
    (203, "cpu/cpuid"), (226, "drm"), (240, "aux"), (241, "cec"), (242, "hidraw"), (243, "ttyDBC"),
    (244, "wwan_port"), (245, "bsg"), (246, "watchdog"), (247, "remoteproc"), (248, "ptp"), (249, "pps"),
    (250, "rtc"), (251, "dma_heap"), (252, "dax"), (253, "dimmctl"), (254, "gpiochip"),
)
PROC_DEVICES_BLOCK = ((7, "loop"), (8, "sd"), (9, "md"), (65, "sd"), (66, "sd"), (128, "sd"), (253, "device-mapper"),
                      (254, "mdp"), (259, "blkext"))


def cpulist(ids):
    """Kernel cpulist text for a collection of CPU ids (``0-31,64-95``)."""
    ranges = []
    for cpu in sorted(set(ids)):
        if ranges and cpu == ranges[-1][1] + 1:
            ranges[-1][1] = cpu
        else:
            ranges.append([cpu, cpu])
    return ",".join("%d" % low if low == high else "%d-%d" % (low, high) for low, high in ranges)


def stable_hex(seed, length):
    """Deterministic pseudo-random hex from a seed (serials, UUIDs, MACs)."""
    return hashlib.sha256(seed.encode("utf-8")).hexdigest()[:length]


class Device:
    """One PCI function placed in the tree."""

    def __init__(self, address, function, kind, description, driver, node, parent=None, extra=None):
        self.address = address
        self.function = function
        self.kind = kind
        self.description = description
        self.driver = driver
        self.node = node
        self.parent = parent
        self.extra = extra or {}

    @property
    def bus(self):
        return int(self.address.split(":")[1], 16)

    def sysfs_dir(self):
        chain = []
        dev = self
        while dev is not None:
            chain.append(dev.address)
            dev = dev.parent
        domain_bus = self.root_bus()
        return "/sys/devices/pci%s/%s" % (domain_bus, "/".join(reversed(chain)))

    def root_bus(self):
        dev = self
        while dev.parent is not None:
            dev = dev.parent
        return dev.address[:7]  # 0000:40


#: Catalogue of the hardware the fixtures use; IDs are real, names are lspci's.
HW = {
    "amd_rc": (0x1022, 0x14A4, 0x060000, "Host bridge: AMD Genoa/Bergamo Root Complex"),
    "amd_iommu": (0x1022, 0x149E, 0x080600, "IOMMU: AMD Genoa/Bergamo IOMMU"),
    "amd_dummy": (0x1022, 0x149F, 0x060000, "Host bridge: AMD Genoa/Bergamo Dummy Host Bridge"),
    "amd_rp": (0x1022, 0x14AB, 0x060400, "PCI bridge: AMD Genoa/Bergamo GPP Bridge"),
    "intel_rc": (0x8086, 0x09A2, 0x088000, "System peripheral: Intel Ice Lake Memory Map/VT-d"),
    "intel_rp": (0x8086, 0x352A, 0x060400, "PCI bridge: Intel PCI Express Root Port"),
    "switch": (0x1000, 0xC030, 0x060400, "PCI bridge: Broadcom / LSI PEX890xx PCIe Gen 5 Switch"),
    "rtx_pro_6000": (0x10DE, 0x2BB5, 0x030200, "3D controller: NVIDIA RTX PRO 6000 Blackwell Server Edition"),
    "cx7": (0x15B3, 0x1021, 0x020000, "Ethernet controller: Mellanox MT2910 Family [ConnectX-7]"),
    "cx7_ib": (0x15B3, 0x1021, 0x020700, "Infiniband controller: Mellanox MT2910 Family [ConnectX-7]"),
    "e810": (0x8086, 0x1592, 0x020000, "Ethernet controller: Intel Ethernet Controller E810-C for QSFP"),
    "pm9a3": (0x144D, 0xA80A, 0x010802, "Non-Volatile memory controller: Samsung NVMe SSD Controller PM9A1/PM9A3/980PRO"),
}


class HostSpec:
    """Every knob of a synthetic host; unknown keywords are an error, not silently dropped."""

    DEFAULTS = dict(
        hostname="gpu-host",
        captured="2025-01-15T03:12:00Z",
        as_root=True,
        # CPU
        vendor="AuthenticAMD",
        family=26,
        model=2,
        stepping=1,
        microcode="0xb002116",
        model_name="AMD EPYC 9335 32-Core Processor",
        base_mhz=3000,
        sockets=2,
        cores_per_socket=32,
        threads_per_core=2,
        numa_nodes=2,
        smt_control=None,  # default: "on" with 2 threads, "off" otherwise
        cpufreq_driver="amd-pstate-epp",
        governor="performance",
        available_governors="performance powersave",
        epp="performance",
        epp_available="default performance balance_performance balance_power power",
        cpuinfo_khz=(400000, 4400000),
        scaling_khz=(400000, 4400000),
        boost_global=1,
        boost_policy=1,
        amd_pstate_status="active",
        intel_pstate=None,  # (status, no_turbo)
        cpuidle_driver="acpi_idle",
        cpuidle_governor="menu",
        idle_states=(
            ("POLL", "CPUIDLE CORE POLL IDLE", 0, 0, False),
            ("C1", "ACPI FFH MWAIT 0x0", 1, 2, False),
            ("C2", "ACPI IOPORT 0x814", 400, 800, True),
        ),
        # memory
        node_mem_kb=None,  # list per node; default: 64 GiB per node less 1.2 %
        node_free_pct=None,  # list per node; default 8.0
        node_file_share=None,  # share of used memory that is page cache, per node
        distances=(10, 12, 32),  # local, same socket, other socket
        hugepages=0,
        # kernel and boot
        os_release="debian12",
        kernel_release="6.14.8-2-pve",
        kernel_version="#1 SMP PREEMPT_DYNAMIC PMX 6.14.8-2 (2025-07-22T10:04Z) x86_64",
        preempt_debugfs="none (voluntary) full lazy",
        installed_kernels=("6.8.12-4-pve", "6.14.8-2-pve"),
        bootloader="systemd-boot",  # systemd-boot (Proxmox), grub, bls
        root_params="root=ZFS=rpool/ROOT/pve-1 boot=zfs",
        cmdline_params="quiet",
        running_cmdline=None,  # default: what the boot loader passes
        grub_default=None,  # text of /etc/default/grub; default derived from cmdline_params
        bls_entries=None,  # {filename: text}
        numa_balancing=0,
        zone_reclaim_mode=0,
        swappiness=60,
        sysctl_files=None,  # {path: text} added to the distribution's defaults
        thp_enabled="always [madvise] never",
        thp_defrag="always defer defer+madvise [madvise] never",
        tuned_profile=None,
        # PCI and IOMMU
        platform="amd",  # amd or intel: host bridge/root port flavour
        root_buses=None,  # root bus number per root complex
        gpus=8,
        gpus_per_switch=2,
        gpu_hw="rtx_pro_6000",
        gpu_link_gen=5,  # current speed of GPU links
        nics=2,
        nic_hw=("cx7_ib", "cx7"),
        nvmes=1,
        pci_devices=None,  # pad with NVMe drives to exactly this many functions
        mrrs_gpu=512,
        mrrs_nic=512,
        mrrs_other=512,
        acs_redirect=True,
        aer_counts=None,  # {address: {"correctable": {...}}} non-zero counters
        iommu_type="AMD-Vi",
        iommu_domain="DMA-FQ",
        # NVIDIA
        nvidia=True,
        nvidia_module="NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  575.57.08  Release Build  "
                      "(dvs-builder@U22-I3-AM02-24-3)  Wed May 21 18:55:54 UTC 2025\n"
                      "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14+deb12u1) \n",
        driver_version="575.57.08",
        cuda_version="12.9",
        gpu_name="NVIDIA RTX PRO 6000 Blackwell Server Edition",
        persistence=True,
        ecc=("Enabled", "Enabled"),
        power=(600, 600, 150, 600),  # limit, default, min, max
        power_capped_gpus=(),  # indexes with sw_power_cap active
        gpu_pstates=None,  # {index: "P0"}: nvidia-smi performance state (default P8 idle, P1 with processes)
        smi_gen=(5, 5, 5),  # current, max, host max
        smi_timestamp="Wed Jan 15 03:12:00 2025",
        uvm_major=508,
        # containers
        proxmox=True,
        containers=None,  # {"101": text}
        # snapshot.json keys a capture adds to replay failures ("unreadable", "commands")
        snapshot_extra=None,
    )

    def __init__(self, **options):
        unknown = sorted(set(options) - set(self.DEFAULTS))
        if unknown:
            raise TypeError("unknown host option(s): %s" % ", ".join(unknown))
        values = dict(self.DEFAULTS)
        values.update(options)
        self.__dict__.update(values)
        if self.numa_nodes % self.sockets:
            raise ValueError("numa_nodes must be a multiple of sockets")
        if (self.cores_per_socket * self.sockets) % self.numa_nodes:
            raise ValueError("cores must split evenly over NUMA nodes")

    # -- CPU numbering (Linux enumerates thread 0 of every core first) ----------
    @property
    def cpus(self):
        return self.sockets * self.cores_per_socket * self.threads_per_core

    def cpu_id(self, socket, core, thread):
        return thread * self.sockets * self.cores_per_socket + socket * self.cores_per_socket + core

    def node_of(self, socket, core):
        per_socket = self.numa_nodes // self.sockets
        return socket * per_socket + core // (self.cores_per_socket // per_socket)

    def node_cpus(self, node):
        ids = []
        for socket in range(self.sockets):
            for core in range(self.cores_per_socket):
                if self.node_of(socket, core) == node:
                    ids.extend(self.cpu_id(socket, core, t) for t in range(self.threads_per_core))
        return sorted(ids)

    def socket_of_node(self, node):
        return node // (self.numa_nodes // self.sockets)


# --------------------------------------------------------------------------- CPU
def _cpuinfo(spec):
    blocks = []
    intel = spec.vendor == "GenuineIntel"
    order = []
    for thread in range(spec.threads_per_core):
        for socket in range(spec.sockets):
            for core in range(spec.cores_per_socket):
                order.append((spec.cpu_id(socket, core, thread), socket, core, thread))
    for cpu, socket, core, thread in sorted(order):
        apic = (socket << 8) | (core << 1) | thread
        lines = [
            ("processor", cpu), ("vendor_id", spec.vendor), ("cpu family", spec.family), ("model", spec.model),
            ("model name", spec.model_name), ("stepping", spec.stepping), ("microcode", spec.microcode),
            ("cpu MHz", "%.3f" % spec.base_mhz), ("cache size", "61440 KB" if intel else "1024 KB"),
            ("physical id", socket), ("siblings", spec.cores_per_socket * spec.threads_per_core),
            ("core id", core), ("cpu cores", spec.cores_per_socket), ("apicid", apic), ("initial apicid", apic),
            ("fpu", "yes"), ("fpu_exception", "yes"), ("cpuid level", 32 if intel else 16), ("wp", "yes"),
            ("flags", INTEL_FLAGS if intel else AMD_FLAGS), ("bugs", INTEL_BUGS if intel else AMD_BUGS),
            ("bogomips", "%.2f" % (spec.base_mhz * 2 - 0.2)),
        ]
        if not intel:
            lines.append(("TLB size", "3584 4K pages"))
        lines += [("clflush size", 64), ("cache_alignment", 64),
                  ("address sizes", "46 bits physical, 57 bits virtual" if intel
                   else "52 bits physical, 57 bits virtual")]
        # /proc/cpuinfo aligns the colons with one or two tabs; "power management" has none.
        text = ["%s%s: %s" % (key, "\t" if len(key) >= 8 else "\t\t", value) for key, value in lines]
        text.append("power management: %s" % ("" if intel else "ts ttp tm hwpstate cpb eff_freq_ro [13] [14] [15]"))
        blocks.append("\n".join(text) + "\n")
    return "\n".join(blocks) + "\n"


def _cpu(tree, spec):
    tree.file("/proc/cpuinfo", _cpuinfo(spec))
    all_cpus = range(spec.cpus)
    tree.text(CPU + "/online", cpulist(all_cpus))
    tree.text(CPU + "/possible", cpulist(all_cpus))
    tree.text(CPU + "/present", cpulist(all_cpus))
    control = spec.smt_control or ("on" if spec.threads_per_core > 1 else "off")
    tree.text(CPU + "/smt/control", control)
    tree.text(CPU + "/smt/active", 1 if spec.threads_per_core > 1 else 0)

    if spec.amd_pstate_status is not None:
        tree.text(CPU + "/amd_pstate/status", spec.amd_pstate_status)
        tree.text(CPU + "/amd_pstate/prefcore", "enabled")
    if spec.intel_pstate is not None:
        status, no_turbo = spec.intel_pstate
        tree.text(CPU + "/intel_pstate/status", status)
        tree.text(CPU + "/intel_pstate/no_turbo", no_turbo)
        tree.text(CPU + "/intel_pstate/max_perf_pct", 100)
        tree.text(CPU + "/intel_pstate/min_perf_pct", 10)
    if spec.boost_global is not None:
        tree.text(CPU + "/cpufreq/boost", spec.boost_global)

    tree.text(CPU + "/cpuidle/current_driver", spec.cpuidle_driver)
    tree.text(CPU + "/cpuidle/current_governor", spec.cpuidle_governor)
    tree.text(CPU + "/cpuidle/current_governor_ro", spec.cpuidle_governor)
    tree.text(CPU + "/cpuidle/available_governors", "ladder menu teo")

    for cpu in all_cpus:
        policy = "%s/cpufreq/policy%d" % (CPU, cpu)
        tree.text(policy + "/affected_cpus", cpu)
        tree.text(policy + "/related_cpus", cpu)
        tree.text(policy + "/cpuinfo_min_freq", spec.cpuinfo_khz[0])
        tree.text(policy + "/cpuinfo_max_freq", spec.cpuinfo_khz[1])
        tree.text(policy + "/scaling_min_freq", spec.scaling_khz[0])
        tree.text(policy + "/scaling_max_freq", spec.scaling_khz[1])
        tree.text(policy + "/scaling_driver", spec.cpufreq_driver)
        tree.text(policy + "/scaling_governor", spec.governor)
        tree.text(policy + "/scaling_available_governors", spec.available_governors)
        if spec.epp is not None:
            tree.text(policy + "/energy_performance_preference", spec.epp)
            tree.text(policy + "/energy_performance_available_preferences", spec.epp_available)
        if spec.boost_policy is not None:
            tree.text(policy + "/boost", spec.boost_policy)
        cpu_dir = "%s/cpu%d" % (CPU, cpu)
        tree.rel_link(cpu_dir + "/cpufreq", policy)
        tree.text(cpu_dir + "/online", 1)
        for index, (name, desc, latency, residency, disabled) in enumerate(spec.idle_states):
            state = "%s/cpuidle/state%d" % (cpu_dir, index)
            tree.text(state + "/name", name)
            tree.text(state + "/desc", desc)
            tree.text(state + "/latency", latency)
            tree.text(state + "/residency", residency)
            tree.text(state + "/disable", 1 if disabled else 0)
            tree.text(state + "/default_status", "enabled")


# -------------------------------------------------------------------------- NUMA
def node_memory(spec):
    """Per node ``(total_kb, free_kb, file_kb, anon_kb)``."""
    totals = spec.node_mem_kb or [67108864 - 805306] * spec.numa_nodes
    free_pct = spec.node_free_pct or [8.0] * spec.numa_nodes
    file_share = spec.node_file_share or [0.3] * spec.numa_nodes
    result = []
    for total, pct, share in zip(totals, free_pct, file_share):
        free = int(round(total * pct / 100.0))
        used = total - free
        kernel = total // 100  # slab, page tables, stacks
        file_kb = int((used - kernel) * share)
        anon_kb = used - kernel - file_kb
        result.append((total, free, file_kb, anon_kb))
    return result


def _node_meminfo(node, total, free, file_kb, anon_kb, hugepages):
    used = total - free
    slab = total // 200
    rows = [
        ("MemTotal", total), ("MemFree", free), ("MemUsed", used), ("SwapCached", 0),
        ("Active", anon_kb // 2 + file_kb // 2), ("Inactive", anon_kb - anon_kb // 2 + file_kb - file_kb // 2),
        ("Active(anon)", anon_kb // 2), ("Inactive(anon)", anon_kb - anon_kb // 2),
        ("Active(file)", file_kb // 2), ("Inactive(file)", file_kb - file_kb // 2),
        ("Unevictable", 0), ("Mlocked", 0), ("Dirty", 128), ("Writeback", 0),
        ("FilePages", file_kb), ("Mapped", file_kb // 8), ("AnonPages", anon_kb), ("Shmem", 2048),
        ("KernelStack", 40960), ("PageTables", anon_kb // 512), ("SecPageTables", 0),
        ("NFS_Unstable", 0), ("Bounce", 0), ("WritebackTmp", 0), ("KReclaimable", slab // 2),
        ("Slab", slab), ("SReclaimable", slab // 2), ("SUnreclaim", slab - slab // 2),
        ("AnonHugePages", (anon_kb // 2048) * 1024), ("ShmemHugePages", 0), ("ShmemPmdMapped", 0),
        ("FileHugePages", 0), ("FilePmdMapped", 0), ("Unaccepted", 0),
    ]
    lines = ["Node %d %-16s%9d kB" % (node, key + ":", value) for key, value in rows]
    for key, value in (("HugePages_Total", hugepages), ("HugePages_Free", hugepages), ("HugePages_Surp", 0)):
        lines.append("Node %d %-16s%6d" % (node, key + ":", value))
    return "\n".join(lines) + "\n"


def _numa(tree, spec):
    nodes = range(spec.numa_nodes)
    tree.text(NODE + "/online", cpulist(nodes))
    tree.text(NODE + "/possible", cpulist(nodes))
    tree.text(NODE + "/has_memory", cpulist(nodes))
    tree.text(NODE + "/has_cpu", cpulist(nodes))
    local, near, far = spec.distances
    for node, (total, free, file_kb, anon_kb) in zip(nodes, node_memory(spec)):
        base = "%s/node%d" % (NODE, node)
        tree.text(base + "/cpulist", cpulist(spec.node_cpus(node)))
        tree.file(base + "/meminfo", _node_meminfo(node, total, free, file_kb, anon_kb, spec.hugepages))
        row = []
        for other in nodes:
            if other == node:
                row.append(local)
            elif spec.socket_of_node(other) == spec.socket_of_node(node):
                row.append(near)
            else:
                row.append(far)
        tree.text(base + "/distance", " ".join(str(d) for d in row))


# --------------------------------------------------------------------------- PCI
def plan_pci(spec):
    """Place root complexes, root ports, switches and endpoints; return devices by address."""
    amd = spec.platform == "amd"
    count_rc = spec.numa_nodes
    if spec.root_buses is not None:
        buses = list(spec.root_buses)
    else:
        step = 256 // count_rc
        buses = [i * step for i in range(count_rc)]
    if len(buses) != count_rc:
        raise ValueError("root_buses needs one bus per NUMA node (%d)" % count_rc)
    next_bus = {node: buses[node] + 1 for node in range(count_rc)}
    slots = {node: 0 for node in range(count_rc)}
    devices = []
    redirect = ACS_LINUX_DEFAULT if spec.acs_redirect else ("source_validation",)

    def addr(bus, dev, fn):
        return "0000:%02x:%02x.%d" % (bus, dev, fn)

    def add(address, hw, kind, driver, node, parent=None, pcie=None, header_type=0, buses3=(0, 0, 0),
            acs=False, multifunction=False, subsys=(0, 0), bars=(), revision=0):
        vendor, device, class_code, text = HW[hw]
        fn = Function(vendor, device, class_code, revision=revision, header_type=header_type,
                      multifunction=multifunction, subsys_vendor=subsys[0], subsys_device=subsys[1],
                      primary_bus=buses3[0], secondary_bus=buses3[1], subordinate_bus=buses3[2],
                      pcie=pcie, acs_cap=ACS_ALL if acs else (), acs_ctl=redirect if acs else (), bars=bars)
        dev = Device(address, fn, kind, text, driver, node, parent)
        devices.append(dev)
        return dev

    for node in range(count_rc):
        bus = buses[node]
        if amd:
            add(addr(bus, 0, 0), "amd_rc", "other", None, node, multifunction=True)
            add(addr(bus, 0, 2), "amd_iommu", "other", None, node)
            add(addr(bus, 1, 0), "amd_dummy", "other", None, node, multifunction=True)
        else:
            add(addr(bus, 0, 0), "intel_rc", "other", None, node)

    def root_port(node, width=16, gen=5, link_gen=None):
        index = slots[node]
        slots[node] += 1
        if amd:
            dev_no, fn_no = 1 + 2 * (index // 2), 1 + index % 2
        else:
            dev_no, fn_no = 1 + index, 0
        bus = buses[node]
        secondary = next_bus[node]
        port = add(addr(bus, dev_no, fn_no), "amd_rp" if amd else "intel_rp", "bridge", "pcieport", node,
                   header_type=1, buses3=(bus, secondary, secondary), acs=True, multifunction=amd and fn_no == 1,
                   pcie=Pcie("root_port", mps_supported=512, mps=256, mrrs=spec.mrrs_other, link_cap_gen=gen,
                             link_cap_width=width, link_gen=link_gen, slot=index + 1 + 16 * node,
                             port_number=index + 1))
        return port

    def close(port, last_bus):
        port.function.subordinate_bus = last_bus
        next_bus[port.node] = last_bus + 1

    def endpoint(parent, hw, kind, driver, pcie, bars, subsys=(0, 0), revision=0, function=0, multifunction=False):
        bus = parent.function.secondary_bus
        return add(addr(bus, 0, function), hw, kind, driver, parent.node, parent=parent, pcie=pcie, bars=bars,
                   subsys=subsys, revision=revision, multifunction=multifunction)

    def mem_bar(bus):
        return 0xE0000000 + (bus << 20)

    # GPUs behind switches: upstream port, one downstream port per GPU.
    switches = (spec.gpus + spec.gpus_per_switch - 1) // spec.gpus_per_switch if spec.gpus else 0
    gpu_left = spec.gpus
    for index in range(switches):
        node = index * count_rc // switches
        gen = spec.gpu_link_gen
        rp = root_port(node)
        usp_bus = rp.function.secondary_bus
        in_switch = min(spec.gpus_per_switch, gpu_left)
        gpu_left -= in_switch
        usp = add(addr(usp_bus, 0, 0), "switch", "bridge", "pcieport", node, parent=rp, header_type=1,
                  buses3=(usp_bus, usp_bus + 1, usp_bus + 1 + in_switch),
                  pcie=Pcie("upstream_port", mps_supported=2048, mps=256, mrrs=spec.mrrs_other))
        for port_no in range(in_switch):
            dsp_bus = usp_bus + 1
            gpu_bus = usp_bus + 2 + port_no
            dsp = add(addr(dsp_bus, port_no, 0), "switch", "bridge", "pcieport", node, parent=usp, header_type=1,
                      buses3=(dsp_bus, gpu_bus, gpu_bus), acs=True,
                      pcie=Pcie("downstream_port", mps_supported=2048, mps=256, mrrs=spec.mrrs_other,
                                link_gen=gen, slot=100 + 8 * index + port_no, port_number=port_no))
            prefetch = 0x0000000C  # 64-bit prefetchable BAR; the address sits in the upper dword
            endpoint(dsp, spec.gpu_hw, "gpu", "nvidia" if spec.nvidia else None,
                     Pcie("endpoint", mps_supported=256, mps=256, mrrs=spec.mrrs_gpu, link_gen=gen),
                     bars=(mem_bar(gpu_bus), prefetch, 0x40 + gpu_bus, prefetch, 0x20 + gpu_bus, 0),
                     subsys=(0x10DE, 0x204E), revision=0xA1)
        close(rp, usp_bus + 1 + in_switch)

    nic_hw = spec.nic_hw if isinstance(spec.nic_hw, (list, tuple)) else (spec.nic_hw,)
    for index in range(spec.nics):
        node = index * count_rc // spec.nics
        hw = nic_hw[index % len(nic_hw)]
        vendor_driver = "mlx5_core" if hw.startswith("cx7") else "ice"
        rp = root_port(node)
        endpoint(rp, hw, "nic", vendor_driver,
                 Pcie("endpoint", mps_supported=512, mps=256, mrrs=spec.mrrs_nic,
                      link_cap_gen=5 if hw.startswith("cx7") else 4),
                 bars=(0x0000000C, 0x4000 + rp.function.secondary_bus, 0, 0, 0, 0),
                 subsys=(HW[hw][0], 0x0023))
        close(rp, rp.function.secondary_bus)

    def nvme(node):
        rp = root_port(node, width=4, gen=4)
        endpoint(rp, "pm9a3", "nvme", "nvme",
                 Pcie("endpoint", mps_supported=512, mps=256, mrrs=spec.mrrs_other, link_cap_gen=4,
                      link_cap_width=4),
                 bars=(mem_bar(rp.function.secondary_bus) | 0x4, 0, 0, 0, 0, 0), subsys=(0x144D, 0xA813))
        close(rp, rp.function.secondary_bus)

    for index in range(spec.nvmes):
        nvme(index * count_rc // max(spec.nvmes, 1))

    if spec.pci_devices is not None:
        missing = spec.pci_devices - len(devices)
        if missing < 0:
            raise ValueError("pci_devices=%d is fewer than the %d functions the topology needs"
                             % (spec.pci_devices, len(devices)))
        extra = 0
        while missing >= 2:
            nvme(extra % count_rc)
            extra += 1
            missing -= 2
        if missing:
            # A second port of the last NIC: one function, no extra root port.
            nic = [d for d in devices if d.kind == "nic"][-1]
            nic.function.multifunction = True
            second = endpoint(nic.parent, _hw_key(nic), "nic", nic.driver,
                              Pcie("endpoint", mps_supported=512, mps=256, mrrs=spec.mrrs_nic),
                              bars=(0x0000000C, 0x5000 + nic.bus, 0, 0, 0, 0), function=1, multifunction=True)
            second.function.class_code = nic.function.class_code
    return sorted(devices, key=lambda d: d.address)


def _hw_key(device):
    for key, (vendor, dev_id, _class, _text) in HW.items():
        if vendor == device.function.vendor and dev_id == device.function.device:
            return key
    raise KeyError(device.address)


def _aer_text(names, total_name, counts):
    lines = ["%s %d" % (name, counts.get(name, 0)) for name in names]
    lines.append("%s %d" % (total_name, sum(counts.get(name, 0) for name in names)))
    return "\n".join(lines) + "\n"


def _pci(tree, spec, devices):
    config_size = None if spec.as_root else 64
    node_lists = {node: cpulist(spec.node_cpus(node)) for node in range(spec.numa_nodes)}
    tree.mkdir("/sys/bus/pci/drivers")
    for group, dev in enumerate(devices):
        path = dev.sysfs_dir()
        fn = dev.function
        tree.rel_link("/sys/bus/pci/devices/" + dev.address, path)
        tree.text(path + "/vendor", "0x%04x" % fn.vendor)
        tree.text(path + "/device", "0x%04x" % fn.device)
        tree.text(path + "/subsystem_vendor", "0x%04x" % fn.subsys_vendor)
        tree.text(path + "/subsystem_device", "0x%04x" % fn.subsys_device)
        tree.text(path + "/class", "0x%06x" % fn.class_code)
        tree.text(path + "/revision", "0x%02x" % fn.revision)
        tree.text(path + "/numa_node", dev.node)
        tree.text(path + "/local_cpulist", node_lists[dev.node])
        tree.text(path + "/enable", 1)
        tree.file(path + "/config", encode(fn, config_size))
        if fn.pcie is not None:
            tree.text(path + "/max_link_speed", _speed_text(fn.pcie.link_cap_gen))
            tree.text(path + "/max_link_width", fn.pcie.link_cap_width)
            tree.text(path + "/current_link_speed", _speed_text(fn.pcie.link_gen))
            tree.text(path + "/current_link_width", fn.pcie.link_width)
        if fn.aer:
            counts = (spec.aer_counts or {}).get(dev.address, {})
            tree.file(path + "/aer_dev_correctable",
                      _aer_text(AER_CORRECTABLE, "TOTAL_ERR_COR", counts.get("correctable", {})))
            tree.file(path + "/aer_dev_fatal",
                      _aer_text(AER_UNCORRECTABLE, "TOTAL_ERR_FATAL", counts.get("fatal", {})))
            tree.file(path + "/aer_dev_nonfatal",
                      _aer_text(AER_UNCORRECTABLE, "TOTAL_ERR_NONFATAL", counts.get("nonfatal", {})))
        if dev.driver:
            driver_dir = "/sys/bus/pci/drivers/" + dev.driver
            tree.rel_link(path + "/driver", driver_dir)
            tree.rel_link(driver_dir + "/" + dev.address, path)
        if spec.iommu_type:
            group_dir = "/sys/kernel/iommu_groups/%d" % group
            tree.text(group_dir + "/type", spec.iommu_domain)
            tree.rel_link(group_dir + "/devices/" + dev.address, path)
            tree.rel_link(path + "/iommu_group", group_dir)


def _speed_text(gen):
    return {1: "2.5 GT/s PCIe", 2: "5.0 GT/s PCIe", 3: "8.0 GT/s PCIe", 4: "16.0 GT/s PCIe",
            5: "32.0 GT/s PCIe", 6: "64.0 GT/s PCIe"}[gen]


def _iommu(tree, spec, devices):
    if spec.iommu_type == "AMD-Vi":
        units = [d for d in devices if d.function.class_code == 0x080600]
        for index, unit in enumerate(units):
            target = "%s/iommu/ivhd%d" % (unit.sysfs_dir(), index)
            tree.mkdir(target)
            tree.rel_link("/sys/class/iommu/ivhd%d" % index, target)
    elif spec.iommu_type == "DMAR":
        for index in range(max(1, spec.sockets)):
            target = "/sys/devices/virtual/iommu/dmar%d" % index
            tree.mkdir(target)
            tree.rel_link("/sys/class/iommu/dmar%d" % index, target)


def lspci_entries(devices, size=None):
    """``[(address, description, config bytes)]`` for :func:`pciconfig.lspci_dump`."""
    return [(d.address, d.description, encode(d.function, size)) for d in devices]


# ------------------------------------------------------------------------ NVIDIA
def gpu_uuid(hostname, index):
    raw = stable_hex("%s/gpu/%d" % (hostname, index), 32)
    return "GPU-%s-%s-%s-%s-%s" % (raw[:8], raw[8:12], raw[12:16], raw[16:20], raw[20:])


def _nvidia(tree, spec, devices):
    if not spec.nvidia:
        return
    tree.file("/proc/driver/nvidia/version", spec.nvidia_module)
    gpus = [d for d in devices if d.kind == "gpu"]
    nics = [d for d in devices if d.kind == "nic" and d.address.endswith(".0")]
    limit, default, low, high = spec.power
    smi_gpus = []
    for index, dev in enumerate(gpus):
        smi_gpus.append(nvsmi.Gpu(
            index, dev.address, spec.gpu_name, gpu_uuid(spec.hostname, index),
            "17%011d" % int(stable_hex("%s/serial/%d" % (spec.hostname, index), 8), 16),
            device_id=dev.function.device, persistence=spec.persistence, ecc=spec.ecc,
            power_limit=limit, power_default=default, power_min=low, power_max=high,
            active_reasons=("sw_power_cap",) if index in spec.power_capped_gpus else (),
            gen_current=spec.smi_gen[0], gen_max=spec.smi_gen[1], gen_host_max=spec.smi_gen[2],
            performance_state=(spec.gpu_pstates or {}).get(index)))
    tree.file("/commands/nvidia-smi-q.xml",
              nvsmi.smi_xml(smi_gpus, spec.driver_version, spec.cuda_version, spec.smi_timestamp))

    labels = {}
    for index, dev in enumerate(gpus):
        labels["GPU%d" % index] = dev
    for index, dev in enumerate(nics):
        labels["NIC%d" % index] = dev
    order = ["GPU%d" % i for i in range(len(gpus))] + ["NIC%d" % i for i in range(len(nics))]

    def switch_of(dev):
        chain = []
        parent = dev.parent
        while parent is not None:
            chain.append(parent)
            parent = parent.parent
        # the upstream port of a switch is the bridge right below the root port
        return chain[-2].address if len(chain) >= 2 else None

    def link(a, b):
        da, db = labels[a], labels[b]
        if da.node != db.node:
            return "SYS"
        if switch_of(da) is not None and switch_of(da) == switch_of(db):
            return "PXB"
        return "NODE"

    affinity = {"GPU%d" % i: (cpulist(spec.node_cpus(dev.node)), dev.node) for i, dev in enumerate(gpus)}
    tree.file("/commands/nvidia-smi-topo-m.txt",
              nvsmi.topo_text(order, link, affinity, ["mlx5_%d" % i for i in range(len(nics))]))


# ------------------------------------------------------------------ kernel, boot
OS_RELEASE = {
    "debian12": (
        'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\nVERSION_ID="12"\n'
        'VERSION="12 (bookworm)"\nVERSION_CODENAME=bookworm\nID=debian\nHOME_URL="https://www.debian.org/"\n'
        'SUPPORT_URL="https://www.debian.org/support"\nBUG_REPORT_URL="https://bugs.debian.org/"\n'),
    "rhel94": (
        'NAME="Red Hat Enterprise Linux"\nVERSION="9.4 (Plow)"\nID="rhel"\nID_LIKE="fedora"\nVERSION_ID="9.4"\n'
        'PLATFORM_ID="platform:el9"\nPRETTY_NAME="Red Hat Enterprise Linux 9.4 (Plow)"\nANSI_COLOR="0;31"\n'
        'LOGO="fedora-logo-icon"\nCPE_NAME="cpe:/o:redhat:enterprise_linux:9::baseos"\n'
        'HOME_URL="https://www.redhat.com/"\n'
        'DOCUMENTATION_URL="https://access.redhat.com/documentation/en-us/red_hat_enterprise_linux/9"\n'
        'BUG_REPORT_URL="https://issues.redhat.com/"\n\nREDHAT_BUGZILLA_PRODUCT="Red Hat Enterprise Linux 9"\n'
        'REDHAT_BUGZILLA_PRODUCT_VERSION=9.4\nREDHAT_SUPPORT_PRODUCT="Red Hat Enterprise Linux"\n'
        'REDHAT_SUPPORT_PRODUCT_VERSION="9.4"\n'),
}

DEBIAN_GRUB = """# If you change this file, run 'update-grub' afterwards to update
# /boot/grub/grub.cfg.
# For full documentation of the options in this file, see:
#   info -f grub -n 'Simple configuration'

GRUB_DEFAULT=0
GRUB_TIMEOUT=5
GRUB_DISTRIBUTOR="Proxmox VE"
GRUB_CMDLINE_LINUX_DEFAULT="%s"
GRUB_CMDLINE_LINUX="%s"

# If your computer has multiple users, set this to protect the boot menu
#GRUB_DISABLE_OS_PROBER=false

# Uncomment to disable graphical terminal
#GRUB_TERMINAL=console

# Uncomment if you don't want GRUB to pass "root=UUID=xxx" parameter to Linux
#GRUB_DISABLE_LINUX_UUID=true

# Disable generation of recovery mode menu entries
GRUB_DISABLE_RECOVERY="true"
"""

DEBIAN_SYSCTL_CONF = """#
# /etc/sysctl.conf - Configuration file for setting system variables
# See /etc/sysctl.d/ for additional system variables.
# See sysctl.conf (5) for information.
#

#kernel.domainname = example.com

# Uncomment the following to stop low-level messages on console
#kernel.printk = 3 4 1 3

# Functions previously found in netbase
#

# Uncomment the next two lines to enable Spoof protection (reverse-path filter)
#net.ipv4.conf.default.rp_filter=1
#net.ipv4.conf.all.rp_filter=1

# Uncomment the next line to enable packet forwarding for IPv4
#net.ipv4.ip_forward=1

# Do not accept ICMP redirects (prevent MITM attacks)
#net.ipv4.conf.all.accept_redirects = 0

# Log Martian Packets
#net.ipv4.conf.all.log_martians = 1
#
"""


# An excerpt of /boot/config-<release> as Debian's and Proxmox's kernel packages install it
# (scripts/kconfig's format): the options host_facts keeps (kernel.config), with the values of those
# distributions' x86_64 kernels, whose build enables automatic NUMA balancing by default.
KERNEL_CONFIG = """#
# Automatically generated file; DO NOT EDIT.
# Linux/x86 %s Kernel Configuration
#
CONFIG_NUMA_BALANCING=y
CONFIG_NUMA_BALANCING_DEFAULT_ENABLED=y
# CONFIG_CPU_FREQ_DEFAULT_GOV_PERFORMANCE is not set
# CONFIG_CPU_FREQ_DEFAULT_GOV_POWERSAVE is not set
CONFIG_CPU_FREQ_DEFAULT_GOV_SCHEDUTIL=y
CONFIG_X86_AMD_PSTATE=y
CONFIG_X86_AMD_PSTATE_DEFAULT_MODE=3
# CONFIG_PREEMPT_NONE is not set
CONFIG_PREEMPT_VOLUNTARY=y
# CONFIG_PREEMPT is not set
CONFIG_PREEMPT_DYNAMIC=y
CONFIG_TRANSPARENT_HUGEPAGE=y
# CONFIG_TRANSPARENT_HUGEPAGE_ALWAYS is not set
CONFIG_TRANSPARENT_HUGEPAGE_MADVISE=y
"""


def _kernel(tree, spec):
    tree.text("/proc/sys/kernel/hostname", spec.hostname)
    tree.text("/proc/sys/kernel/osrelease", spec.kernel_release)
    # a boot id (UUID, as the kernel makes one at boot) fixed per host name: regenerated trees agree
    digest = hashlib.sha256(("boot:" + spec.hostname).encode()).hexdigest()
    tree.text("/proc/sys/kernel/random/boot_id", "%s-%s-4%s-8%s-%s" % (
        digest[:8], digest[8:12], digest[13:16], digest[17:20], digest[20:32]))
    tree.text("/proc/sys/kernel/version", spec.kernel_version)
    if spec.as_root and spec.preempt_debugfs:
        tree.text("/sys/kernel/debug/sched/preempt", spec.preempt_debugfs)
    tree.text("/proc/sys/kernel/numa_balancing", spec.numa_balancing)
    tree.text("/proc/sys/vm/zone_reclaim_mode", spec.zone_reclaim_mode)
    tree.text("/proc/sys/vm/swappiness", spec.swappiness)
    tree.text("/sys/kernel/mm/transparent_hugepage/enabled", spec.thp_enabled)
    tree.text("/sys/kernel/mm/transparent_hugepage/defrag", spec.thp_defrag)
    tree.file("/etc/os-release", OS_RELEASE.get(spec.os_release, spec.os_release))
    if spec.os_release == "rhel94":
        tree.text("/etc/redhat-release", "Red Hat Enterprise Linux release 9.4 (Plow)")
        tree.link("/etc/system-release", "redhat-release")
    if spec.tuned_profile:
        tree.text("/etc/tuned/active_profile", spec.tuned_profile)

    for release in spec.installed_kernels:
        tree.file("/lib/modules/%s/modules.dep" % release, "")
        tree.file("/boot/vmlinuz-%s" % release, "")
        tree.file("/boot/config-%s" % release, KERNEL_CONFIG % release)

    configured = ("%s %s" % (spec.root_params, spec.cmdline_params)).strip()
    if spec.bootloader == "systemd-boot":
        tree.text("/etc/kernel/cmdline", configured)
        # proxmox-boot-tool's list of ESPs: what makes Proxmox boot through systemd-boot.
        tree.text("/etc/kernel/proxmox-boot-uuids", "9A1B-2C3D")
        release = spec.kernel_release
        running = "initrd=\\EFI\\proxmox\\%s\\initrd.img-%s %s" % (release, release, configured)
        tree.file("/etc/default/grub", spec.grub_default or DEBIAN_GRUB % (spec.cmdline_params, ""))
    elif spec.bootloader == "grub":
        running = "BOOT_IMAGE=/boot/vmlinuz-%s %s ro %s" % (
            spec.kernel_release, spec.root_params, spec.cmdline_params)
        tree.file("/etc/default/grub", spec.grub_default or DEBIAN_GRUB % (spec.cmdline_params, ""))
    else:  # bls: /etc/default/grub plus /boot/loader/entries written by the scenario
        running = "BOOT_IMAGE=(hd0,gpt2)/vmlinuz-%s %s %s" % (
            spec.kernel_release, spec.root_params, spec.cmdline_params)
        if spec.grub_default:
            tree.file("/etc/default/grub", spec.grub_default)
        for name, text in sorted((spec.bls_entries or {}).items()):
            tree.file("/boot/loader/entries/" + name, text)
    tree.text("/proc/cmdline", (spec.running_cmdline or running).strip())

    if spec.os_release == "debian12":
        tree.file("/etc/sysctl.conf", DEBIAN_SYSCTL_CONF)
        tree.link("/etc/sysctl.d/99-sysctl.conf", "../sysctl.conf")
        tree.file("/usr/lib/sysctl.d/50-pid-max.conf",
                  "# This file is part of systemd.\n\nkernel.pid_max = 4194304\n")
        if spec.proxmox:
            tree.file("/usr/lib/sysctl.d/10-pve-ct-inotify.conf",
                      "# increase kernel limits for inotify\nfs.inotify.max_queued_events = 8388608\n"
                      "fs.inotify.max_user_instances = 65536\nfs.inotify.max_user_watches = 4194304\n")
            tree.file("/usr/lib/sysctl.d/pve.conf",
                      "net.bridge.bridge-nf-call-ip6tables = 0\nnet.bridge.bridge-nf-call-iptables = 0\n"
                      "net.bridge.bridge-nf-call-arptables = 0\nnet.bridge.bridge-nf-filter-vlan-tagged = 0\n"
                      "net.ipv4.igmp_max_memberships = 1024\nfs.aio-max-nr = 1048576\n")
    else:
        tree.file("/etc/sysctl.conf", "# sysctl settings are defined through files in\n"
                                      "# /usr/lib/sysctl.d/, /run/sysctl.d/, and /etc/sysctl.d/.\n")
        tree.file("/usr/lib/sysctl.d/50-default.conf",
                  "# This file is part of systemd.\nkernel.sysrq = 16\nkernel.core_uses_pid = 1\n"
                  "fs.protected_hardlinks = 1\nfs.protected_symlinks = 1\n")
    for path, text in sorted((spec.sysctl_files or {}).items()):
        tree.file(path, text)


# ------------------------------------------------------------------ containers
def _containers(tree, spec):
    chars = list(PROC_DEVICES_CHAR)
    if spec.nvidia:
        chars.append((195, "nvidia-frontend"))
        if spec.uvm_major:
            chars.append((spec.uvm_major, "nvidia-uvm"))
            chars.append((spec.uvm_major + 1, "nvidia-caps"))
    chars.sort(key=lambda item: item[0])
    lines = ["Character devices:"] + ["%3d %s" % item for item in chars]
    lines += ["", "Block devices:"] + ["%3d %s" % item for item in PROC_DEVICES_BLOCK]
    tree.file("/proc/devices", "\n".join(lines) + "\n")

    # PID 1 of a host: systemd, no container= in its environment.
    tree.file("/proc/1/cgroup", "0::/init.scope\n")
    if spec.as_root:
        tree.file("/proc/1/environ", b"HOME=/\x00init=/sbin/init\x00TERM=linux\x00BOOT_IMAGE=/boot/vmlinuz\x00")
    tree.text("/sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc")
    tree.text("/sys/fs/cgroup/cpuset.cpus.effective", cpulist(range(spec.cpus)))
    tree.text("/sys/fs/cgroup/cpuset.mems.effective", cpulist(range(spec.numa_nodes)))
    if spec.proxmox:
        tree.mkdir("/etc/pve/lxc")
        tree.mkdir("/etc/pve/qemu-server")
        for ctid, text in sorted((spec.containers or {}).items()):
            tree.file("/etc/pve/lxc/%s.conf" % ctid, text)


# ------------------------------------------------------------------- assembly
def snapshot_json(spec):
    doc = {"format": 1, "hostname": spec.hostname, "captured": spec.captured, "as_root": spec.as_root,
           "generator": "tools/make_fixtures.py"}
    doc.update(spec.snapshot_extra or {})
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=True) + "\n"


def build_host(**options):
    """Return ``(tree, spec, devices)`` for a host described by :class:`HostSpec` options."""
    spec = HostSpec(**options)
    tree = Tree()
    devices = plan_pci(spec)
    _kernel(tree, spec)
    _cpu(tree, spec)
    _numa(tree, spec)
    _pci(tree, spec, devices)
    _iommu(tree, spec, devices)
    _nvidia(tree, spec, devices)
    _containers(tree, spec)
    tree.file("/snapshot.json", snapshot_json(spec))
    return tree, spec, devices


def make_host(outdir, sockets=2, cores_per_socket=32, threads_per_core=2, numa_nodes=2, gpus=8,
              pci_devices=None, **options):
    """Build a host and write it to ``outdir`` (replacing an earlier generated snapshot)."""
    tree, spec, devices = build_host(sockets=sockets, cores_per_socket=cores_per_socket,
                                     threads_per_core=threads_per_core, numa_nodes=numa_nodes, gpus=gpus,
                                     pci_devices=pci_devices, **options)
    replace_tree(tree, outdir)
    return tree, spec, devices


__all__ = ["HostSpec", "build_host", "make_host", "plan_pci", "lspci_entries", "lspci_dump", "cpulist",
           "node_memory", "gpu_uuid", "LINK_SPEEDS", "ACS_BITS"]
