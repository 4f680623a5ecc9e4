"""The bundled snapshots: the incident host, its healthy twin, an Intel CPU-only host,
a hostile capture, and the large benchmark host.

Each scenario states only what differs from :class:`snapgen.host.HostSpec`'s defaults
(which describe a healthy host), so a reviewer sees the incident in a few lines.
"""

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.snapshot.snapgen import health
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.snapshot.snapgen.host import build_host, cpulist
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.snapshot.snapgen.persisted import cpu_power_files, pcie_files
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.snapshot.snapgen.tree import replace_tree

GIB_KB = 1024 * 1024

#: 504 GiB over two nodes; node 0 is a little smaller (the kernel's own memory lives there).
TWO_NODE_504G = [263475712, 264174592]


def _mount(device):
    return "lxc.mount.entry: /dev/%s dev/%s none bind,optional,create=file" % (device, device)


def _gpu_ct(cores, memory, mac, swap, gpus, parent=None, snaptime=None, cpuset=None, uvm=False):
    """The Proxmox configuration (one section) of the GPU inference container: ``mac`` the last byte of
    its address, ``gpus`` the ``/dev/nvidiaN`` bound into it, ``cpuset`` ``(cpus, mems)`` when pinned,
    ``uvm`` with the nvidia-uvm devices (major 508) too."""
    lines = ["#GPU inference container (vLLM)", "arch: amd64", "cores: %d" % cores, "features: nesting=1",
             "hostname: llm-serve", "memory: %d" % memory,
             "net0: name=eth0,bridge=vmbr0,firewall=1,hwaddr=BC:24:11:5A:3E:%s,ip=dhcp,type=veth" % mac,
             "onboot: 1", "ostype: ubuntu"]
    lines += ["parent: %s" % parent] if parent else []
    lines += ["rootfs: local-zfs:subvol-101-disk-0,size=200G"]
    lines += ["snaptime: %d" % snaptime] if snaptime else []
    lines += ["swap: %d" % swap, "unprivileged: 0"]
    if cpuset:
        lines += ["lxc.cgroup2.cpuset.cpus: %s" % cpuset[0], "lxc.cgroup2.cpuset.mems: %s" % cpuset[1]]
    lines += ["lxc.cgroup2.devices.allow: c 195:* rwm"] + (["lxc.cgroup2.devices.allow: c 508:* rwm"] if uvm else [])
    devices = ["nvidia%d" % index for index in range(gpus)] + ["nvidiactl"]
    lines += [_mount(device) for device in devices + (["nvidia-uvm", "nvidia-uvm-tools"] if uvm else [])]
    return "\n".join(lines) + "\n"


#: the incident's container, all eight GPUs bound, with the snapshot taken before the upgrade (one GPU)
INCIDENT_CT = (_gpu_ct(64, 471040, "01", 8192, 8, parent="pre-upgrade") + "\n[pre-upgrade]\n"
               + _gpu_ct(32, 262144, "01", 8192, 1, snaptime=1733011200))

HEALTHY_CT = _gpu_ct(112, 458752, "02", 0, 8, cpuset=("8-63,72-127", "0-1"), uvm=True)

MONITOR_CT = """arch: amd64
cores: 2
hostname: monitor
memory: 2048
net0: name=eth0,bridge=vmbr0,firewall=1,hwaddr=BC:24:11:5A:3E:03,ip=dhcp,type=veth
ostype: debian
rootfs: local-zfs:subvol-102-disk-0,size=8G
swap: 512
unprivileged: 1
"""

RHEL_GRUB = """GRUB_TIMEOUT=5
GRUB_DISTRIBUTOR="$(sed 's, release .*$,,g' /etc/system-release)"
GRUB_DEFAULT=saved
GRUB_DISABLE_SUBMENU=true
GRUB_TERMINAL_OUTPUT="console"
GRUB_CMDLINE_LINUX="crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M resume=/dev/mapper/rhel-swap \
rd.lvm.lv=rhel/root rd.lvm.lv=rhel/swap intel_iommu=on"
GRUB_DISABLE_RECOVERY="true"
GRUB_ENABLE_BLSCFG=true
"""

RHEL_MACHINE_ID = "4f2a9c0e7b1d4a6c9e3f5a7b8c9d0e1f"
RHEL_OPTIONS = ("root=/dev/mapper/rhel-root ro crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M "
                "resume=/dev/mapper/rhel-swap rd.lvm.lv=rhel/root rd.lvm.lv=rhel/swap intel_iommu=on")


def _bls(release, title_version):
    return ("title Red Hat Enterprise Linux (%s) %s\nversion %s\nlinux /vmlinuz-%s\n"
            "initrd /initramfs-%s.img $tuned_initrd\noptions %s $tuned_params\n"
            "grub_users $grub_users\ngrub_arg --unrestricted\ngrub_class rhel\n"
            % (release, title_version, release, release, release, RHEL_OPTIONS))


def incident_options():
    """The host of the incident: every audited knob in the state that hurt inference."""
    return dict(
        hostname="gpu-incident",
        root_buses=(0x40, 0xC0),
        kernel_release="6.8.12-4-pve",
        kernel_version="#1 SMP PREEMPT_DYNAMIC PMX 6.8.12-4 (2024-11-06T15:04Z) x86_64",
        preempt_debugfs="none (voluntary) full",
        installed_kernels=("6.8.12-4-pve", "6.14.8-2-pve"),
        cpufreq_driver="acpi-cpufreq",
        governor="ondemand",
        available_governors="conservative ondemand userspace powersave performance schedutil",
        epp=None,
        cpuinfo_khz=(1500000, 3000000),
        scaling_khz=(1500000, 3000000),
        boost_global=1,
        boost_policy=None,
        amd_pstate_status=None,
        idle_states=(
            ("POLL", "CPUIDLE CORE POLL IDLE", 0, 0, False),
            ("C1", "ACPI FFH MWAIT 0x0", 1, 2, False),
            ("C2", "ACPI IOPORT 0x814", 400, 800, False),
        ),
        numa_balancing=1,
        thp_enabled="[always] madvise never",
        cmdline_params="quiet",
        node_mem_kb=TWO_NODE_504G,
        node_free_pct=[0.9, 8.6],
        node_file_share=[0.62, 0.08],
        mrrs_gpu=512,
        mrrs_nic=512,
        acs_redirect=True,
        iommu_domain="DMA-FQ",
        gpu_link_gen=1,
        nvidia_module="NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.133.07  Release Build  "
                      "(dvs-builder@U16-I3-B03-4-3)  Fri Mar 14 12:58:13 UTC 2025\n"
                      "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14) \n",
        driver_version="570.133.07",
        cuda_version="12.8",
        persistence=False,
        power=(450, 600, 150, 600),
        power_capped_gpus=(5,),
        smi_gen=(1, 5, 5),
        # captured under load: the links trained at 2.5 GT/s are a fault (PCI-005 fails); GPU 7 is
        # idle (P8), where 2.5 GT/s is the power saving state and PCI-005 does not judge it
        gpu_pstates=dict((index, "P0") for index in range(7)),
        containers={"101": INCIDENT_CT},
    )


def healthy_options():
    """The incident host after every fix (the defaults of HostSpec plus the host's identity)."""
    return dict(
        hostname="gpu-healthy",
        root_buses=(0x40, 0xC0),
        kernel_release="6.14.8-2-pve",
        installed_kernels=("6.8.12-4-pve", "6.14.8-2-pve"),
        cmdline_params="quiet amd_pstate=active iommu=pt",
        numa_balancing=0,
        swappiness=10,
        sysctl_files={"/etc/sysctl.d/90-gpuhost.conf":
                      "# gpuhost.baseline: NUMA balancing migrates pinned inference memory\n"
                      "kernel.numa_balancing = 0\n"
                      "vm.swappiness = 10\n"},
        node_mem_kb=TWO_NODE_504G,
        node_free_pct=[8.1, 8.4],
        node_file_share=[0.2, 0.2],
        mrrs_gpu=4096,
        mrrs_nic=4096,
        acs_redirect=False,
        iommu_domain="identity",
        containers={"101": HEALTHY_CT, "102": MONITOR_CT},
    )


def _remediated(tree, spec, devices):
    """The boot-time files remediate.yml leaves (pcie_tune and cpu_power with persistence on),
    rendered by the modules' own functions; sysctl is persisted by the admin's own file
    (``sysctl_files`` above), which the sysctl module honours instead of writing its own."""
    sizes = {"gpu": spec.mrrs_gpu, "nic": spec.mrrs_nic}
    pcie_files(tree, dict((dev.address, sizes[dev.kind]) for dev in devices if dev.kind in sizes))
    cpu_power_files(tree, governor=spec.governor, epp=spec.epp, boost=True, idle_latency_max_us=100)


def intel_options():
    return dict(
        hostname="cpu-intel",
        vendor="GenuineIntel",
        family=6,
        model=143,
        stepping=8,
        microcode="0x2b0004d0",
        model_name="Intel(R) Xeon(R) Gold 6448Y",
        base_mhz=2100,
        sockets=1,
        cores_per_socket=32,
        threads_per_core=2,
        numa_nodes=1,
        cpufreq_driver="intel_pstate",
        governor="powersave",
        available_governors="performance powersave",
        epp="balance_performance",
        cpuinfo_khz=(800000, 4100000),
        scaling_khz=(800000, 4100000),
        boost_global=None,
        boost_policy=None,
        amd_pstate_status=None,
        intel_pstate=("active", 0),
        cpuidle_driver="intel_idle",
        idle_states=(
            ("POLL", "CPUIDLE CORE POLL IDLE", 0, 0, False),
            ("C1", "MWAIT 0x00", 1, 1, False),
            ("C1E", "MWAIT 0x01", 2, 4, False),
            ("C6", "MWAIT 0x20", 290, 800, False),
        ),
        node_mem_kb=[263700480],
        node_free_pct=[42.0],
        os_release="rhel94",
        kernel_release="5.14.0-427.el9.x86_64",
        kernel_version="#1 SMP PREEMPT_DYNAMIC Fri Mar 29 23:54:04 EDT 2024",
        preempt_debugfs="none (voluntary) full",
        installed_kernels=("5.14.0-362.8.1.el9_3.x86_64", "5.14.0-427.el9.x86_64"),
        bootloader="bls",
        root_params="root=/dev/mapper/rhel-root ro",
        cmdline_params="crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M resume=/dev/mapper/rhel-swap "
                       "rd.lvm.lv=rhel/root rd.lvm.lv=rhel/swap intel_iommu=on",
        grub_default=RHEL_GRUB,
        bls_entries={
            "%s-5.14.0-427.el9.x86_64.conf" % RHEL_MACHINE_ID: _bls("5.14.0-427.el9.x86_64", "9.4 (Plow)"),
            "%s-5.14.0-362.8.1.el9_3.x86_64.conf" % RHEL_MACHINE_ID:
                _bls("5.14.0-362.8.1.el9_3.x86_64", "9.3 (Plow)"),
        },
        numa_balancing=0,
        thp_enabled="[always] madvise never",
        tuned_profile="throughput-performance",
        platform="intel",
        gpus=0,
        nics=1,
        nic_hw="e810",
        nvmes=1,
        iommu_type="DMAR",
        iommu_domain="DMA-FQ",
        nvidia=False,
        proxmox=False,
        containers=None,
        # What host_snapshot records on a host without nvidia-smi, so the facts match a live run.
        snapshot_extra={"commands": {"nvidia-smi-q": {"error": "nvidia-smi not found in PATH",
                                                      "where": "nvidia-smi"}}},
    )


def large_options():
    """The benchmark host: 768 CPUs, 8 NUMA nodes (NPS4), 64 PCI functions, 8 GPUs."""
    nodes = 8
    return dict(
        hostname="gpu-large",
        sockets=2,
        cores_per_socket=192,
        threads_per_core=2,
        numa_nodes=nodes,
        model=17,
        model_name="AMD EPYC 9965 192-Core Processor",
        base_mhz=2250,
        cpuinfo_khz=(400000, 3700000),
        scaling_khz=(400000, 3700000),
        gpus=8,
        pci_devices=64,
        node_mem_kb=[96 * GIB_KB - 1048576] * nodes,
        node_free_pct=[8.0 + 0.1 * n for n in range(nodes)],
        cmdline_params="quiet amd_pstate=active iommu=pt",
        iommu_domain="identity",
        mrrs_gpu=4096,
        mrrs_nic=4096,
        acs_redirect=False,
        containers={"101": _gpu_ct(112, 458752, "02", 0, 8, uvm=True,
                                   cpuset=(cpulist(list(range(8, 384)) + list(range(392, 768))), "0-7"))},
    )


# ---------------------------------------------------------------------- hostile
HOSTILE_HOSTNAME = '<script>alert(1)</script>"><img src=x onerror=alert(1)>&amp;'
HOSTILE_GPU = 'NVIDIA <script>alert(1)</script>"><img src=x onerror=alert(1)>&amp; RTX'

HOSTILE_CT = (
    b"#<script>alert(1)</script>%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E\n"
    b"arch: amd64\n"
    b"cores: -5\n"
    b"memory: lots\n"
    b"swap:\n"
    b"hostname: <img src=x onerror=alert(1)>\n"
    b"this line has no colon at all\n"
    b": value without key\n"
    b"lxc.cgroup2.devices.allow c 195\n"
    b"lxc.cgroup2.devices.allow: \n"
    b"lxc.cgroup2.cpuset.cpus: 0-9999999999999999999\n"
    b"lxc.mount.entry: \n"
    b"lxc.mount.entry: /dev/nvidia0\n"
    b"dev0: \"><script>alert(1)</script>\n"
    b"\xff\xfe\x00binary\x00garbage\n"
    b"[unterminated\n"
    b"[]\n"
    b"memory: 1024\n"
)


def _hostile(tree, spec, devices):
    """Damage a freshly built tree the way broken or hostile captures look."""
    sysd = "/sys/devices/system"
    # Non-root capture: config space is already 64 bytes (as_root False); also no debugfs,
    # no /proc/1/environ. Values below are empty, garbage, non-UTF-8 or markup.
    tree.file("/proc/sys/kernel/numa_balancing", b"yes\x00\xff")
    tree.file("/proc/sys/vm/zone_reclaim_mode", b"")
    tree.file("/proc/sys/vm/swappiness", b"99999999999999999999999999\n")
    tree.file("/proc/sys/kernel/osrelease", b"not-a-version<script>\n")
    tree.file("/proc/sys/kernel/version", b"\xff\xfe#1 SMP \x00\n")
    tree.file("/proc/cmdline", b'BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro quiet \xff\xfe= foo="unterminated x==y =\n')
    tree.file("/etc/default/grub", b'GRUB_CMDLINE_LINUX_DEFAULT="quiet $(reboot) `halt`\n'
                                   b"GRUB_CMDLINE_LINUX='unbalanced\n\xff\xfe\n")
    tree.file("/etc/kernel/cmdline", b"")
    tree.file("/etc/os-release", b'PRETTY_NAME="<b>Evil</b> \xff\xfe"\nID=\nVERSION_ID="12\n')
    tree.file("/etc/sysctl.d/90-gpuhost.conf", b"kernel.numa_balancing = \xff\n=== garbage ===\n"
                                               b"vm.swappiness\n")
    tree.file("/sys/kernel/mm/transparent_hugepage/enabled", b"always madvise never\n")
    tree.file("/sys/kernel/mm/transparent_hugepage/defrag", b"")
    tree.file("/lib/modules/not a kernel/modules.dep", b"")

    cpuinfo = tree.files["/proc/cpuinfo"].decode("utf-8")
    cpuinfo = cpuinfo.replace("model name\t: " + spec.model_name, "model name\t: ")
    cpuinfo += "processor\t: banana\nvendor_id\t:\ncpu family\t: \xff\n\n"
    tree.file("/proc/cpuinfo", cpuinfo.encode("utf-8", "surrogateescape"))
    tree.file(sysd + "/cpu/online", b"0-3,x\n")
    tree.file(sysd + "/cpu/smt/active", b"2\n")
    tree.file(sysd + "/cpu/amd_pstate/status", b"<script>alert(1)</script>\n")
    tree.remove(sysd + "/cpu/cpufreq/policy0/scaling_governor")
    tree.file(sysd + "/cpu/cpufreq/policy1/scaling_driver", b"\xff\xff\n")
    tree.file(sysd + "/cpu/cpufreq/policy2/scaling_max_freq", b"fast\n")
    tree.file(sysd + "/cpu/cpufreq/policy3/energy_performance_preference", b"")
    tree.file(sysd + "/cpu/cpu0/cpuidle/state2/latency", b"forever\n")
    tree.remove(sysd + "/cpu/cpu1/cpuidle/state1/disable")
    tree.file(sysd + "/cpu/cpu2/cpuidle/state0/name", b"")
    tree.remove(sysd + "/cpu/cpu3/cpuidle")
    tree.remove(sysd + "/cpu/cpuidle/current_governor")

    tree.file(sysd + "/node/node1/meminfo", b"")
    tree.file(sysd + "/node/node0/distance", b"10 abc\n")
    meminfo0 = tree.files[sysd + "/node/node0/meminfo"].replace(b"Node 0 HugePages_Free:", b"Node 0 HugePages_Free: x")
    tree.file(sysd + "/node/node0/meminfo", meminfo0)

    gpus = [d for d in devices if d.kind == "gpu"]
    nic = [d for d in devices if d.kind == "nic"][0]
    # One device stored as a plain directory, one dangling link, one driver link to nowhere.
    plain = nic.address
    tree.remove("/sys/bus/pci/devices/" + plain)
    for name in ("vendor", "device", "class", "config", "numa_node", "local_cpulist"):
        tree.file("/sys/bus/pci/devices/%s/%s" % (plain, name), tree.files["%s/%s" % (nic.sysfs_dir(), name)])
    tree.link("/sys/bus/pci/devices/0000:ff:1f.7", "../../../devices/pci0000:ff/0000:ff:1f.7")
    tree.link(gpus[1].sysfs_dir() + "/driver", "../../../../../../bus/pci/drivers/vanished")
    tree.file(gpus[0].sysfs_dir() + "/class", b"0xzzzz\n")
    tree.file(gpus[0].sysfs_dir() + "/numa_node", b"-1\n")
    tree.file(gpus[1].sysfs_dir() + "/vendor", b"")
    tree.file(gpus[0].sysfs_dir() + "/aer_dev_correctable", b"RxErr x\nTOTAL_ERR_COR banana\n\xff\n")
    tree.remove(gpus[1].sysfs_dir() + "/aer_dev_fatal")
    tree.file(gpus[1].sysfs_dir() + "/config", b"")

    groups = sorted(p for p in tree.files if p.startswith("/sys/kernel/iommu_groups/") and p.endswith("/type"))
    tree.file(groups[0], b'<img src=x onerror=alert(1)>\n')
    tree.remove(groups[1])

    tree.file("/proc/driver/nvidia/version", b"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  5")
    xml = tree.files["/commands/nvidia-smi-q.xml"].decode("utf-8")
    # Cut inside a tag name after the (escaped) product name, as a killed nvidia-smi leaves it.
    tree.file("/commands/nvidia-smi-q.xml", xml[:xml.index("<pci_bus_id>") + 5].encode("utf-8"))
    tree.file("/commands/nvidia-smi-topo-m.txt",
              b"\x1b[4m\x1b[0m\x1b[31m\x1b[1;32m\x1b]0;title\x07\x1b[2J\x1b[H\x1b[?25l\n\x1b[0m\n")
    tree.file("/proc/devices", b"Character devices:\n  x nvidia-uvm\n195\n999999999999 nvidia-frontend\n\xff\xfe\n")
    tree.file("/sys/fs/cgroup/cpuset.cpus.effective", b"\xff-\n")
    tree.file("/etc/pve/lxc/101.conf", HOSTILE_CT)
    tree.file("/etc/pve/lxc/102.conf", b"")
    tree.file("/etc/pve/lxc/abc.conf", b"memory: 1\n")


def hostile_options():
    return dict(
        hostname=HOSTILE_HOSTNAME,
        as_root=False,
        sockets=1,
        cores_per_socket=4,
        threads_per_core=2,
        numa_nodes=2,
        gpus=2,
        nics=1,
        nvmes=0,
        gpu_name=HOSTILE_GPU,
        node_mem_kb=[16 * GIB_KB, 16 * GIB_KB],
        containers={},
        snapshot_extra={"unreadable": {"/proc/1/environ": "permission denied (run with become: true)"}},
    )


SCENARIOS = {
    "incident": (incident_options, None),
    "healthy": (healthy_options, _remediated),
    "intel": (intel_options, None),
    "hostile": (hostile_options, _hostile),
    "large": (large_options, None),
}

#: Built by default; ``large`` is on request (benchmark), it is ~25k files.
DEFAULT = ("incident", "healthy", "intel", "hostile")


def build(name):
    """``(tree, spec, devices)`` of a named scenario."""
    options, damage = SCENARIOS[name]
    tree, spec, devices = build_host(**options())
    health.add(tree, spec, devices, name)  # Xid log, NVLink, RDMA ports, EDAC (tools/snapgen/health.py)
    if damage is not None:
        damage(tree, spec, devices)
    return tree, spec, devices


def write(name, outdir):
    tree, spec, devices = build(name)
    replace_tree(tree, outdir)
    return tree, spec, devices
