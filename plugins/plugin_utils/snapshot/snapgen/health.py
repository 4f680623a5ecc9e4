"""GPU and fabric health files of the demo snapshots (facts/health.py reads them).

* ``commands/journalctl-k-b.txt``: the kernel log as ``host_snapshot`` stores it (a header line
  with the number of kernel messages, then only the ``NVRM: Xid`` lines);
* ``commands/nvidia-smi-nvlink-s.txt``: ``nvidia-smi nvlink -s`` of PCIe GPUs without NVLink;
* ``/sys/class/infiniband/mlx5_N`` for every ConnectX function ``.0`` (port 1: state, physical
  state, rate, link layer) with its ``device`` link to the PCI function;
* ``/sys/devices/system/edac/mc/mcN`` (one memory controller per NUMA node, two DIMMs each);
* ``/sys/module/nvidia_peermem`` on the healthy host.

The incident host adds an uncorrectable ECC error on its third GPU: Xid 48 and Xid 63 in the
log, and a pending row remapping with one uncorrectable remap in ``nvidia-smi -q -x``. The
hostile capture gets damaged versions of all of them.
"""

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.snapshot.snapgen.host import AER_CORRECTABLE, gpu_uuid

HEADER = "# gpuhost.baseline kernel log: %d lines read from journalctl -k -b, %d kept\n"


def _xid(seconds, host, address, code, text):
    bus = address[:-2]  # the NVRM line names domain:bus:device, no function
    return "[%12.6f] %s kernel: NVRM: Xid (PCI:%s): %d, %s" % (seconds, host, bus, code, text)


def _kernel_log(spec, gpus, incident):
    lines = []
    if incident:
        gpu = gpus[2].address
        lines = [
            _xid(81234.512034, spec.hostname, gpu, 48, "pid=402113, name=python3, An uncorrectable double bit "
                 "error (DBE) has been detected on GPU in the framebuffer at partition 5, subpartition 1."),
            _xid(81234.512901, spec.hostname, gpu, 63, "pid=402113, name=python3, Row Remapper: New row "
                 "(0x000000000003a9c0) marked for remapping, reset gpu to activate."),
        ]
    return HEADER % (2841, len(lines)) + "".join(line + "\n" for line in lines)


def _nvlink(spec, gpus):
    out = []
    for index, _dev in enumerate(gpus):
        out.append("GPU %d: %s (UUID: %s)\n" % (index, spec.gpu_name, gpu_uuid(spec.hostname, index)))
        out.append("\t NVML: Unable to retrieve NVLink information: Not Supported\n")
    return "".join(out)


def _infiniband(tree, nics):
    for index, dev in enumerate(nics):
        name = "mlx5_%d" % index
        ib_mode = dev.function.class_code >> 8 == 0x0207
        base = "%s/infiniband/%s" % (dev.sysfs_dir(), name)
        tree.rel_link("/sys/class/infiniband/%s" % name, base)
        tree.rel_link(base + "/device", dev.sysfs_dir())
        tree.text(base + "/node_type", "1: CA")
        port = base + "/ports/1"
        tree.text(port + "/state", "4: ACTIVE")
        tree.text(port + "/phys_state", "5: LinkUp")
        tree.text(port + "/rate", "400 Gb/sec (4X NDR)")
        tree.text(port + "/link_layer", "InfiniBand" if ib_mode else "Ethernet")
        # error counters since boot (facts/counters.py; judged over the audit history, HEALTH-020)
        for counter in ("link_downed", "link_error_recovery", "symbol_error", "port_rcv_errors"):
            tree.text("%s/counters/%s" % (port, counter), 0)


def _aer_correctable(tree, devices, incident):
    """``aer_dev_correctable`` of every GPU and NIC (as Linux 5.x/6.x prints it); the incident's first
    GPU has corrected receiver errors since boot (HEALTH-021 judges their increase over the history)."""
    names = AER_CORRECTABLE
    first_gpu = next((d for d in devices if d.kind == "gpu"), None)
    for dev in devices:
        if dev.kind not in ("gpu", "nic"):
            continue
        rx = 7 if incident and dev is first_gpu else 0
        tree.text(dev.sysfs_dir() + "/aer_dev_correctable",
                  "".join("%s %d\n" % (n, rx if n == "RxErr" else 0) for n in names) + "TOTAL_ERR_COR %d" % rx)


def _edac(tree, spec):
    mc_name = {25: "F19h", 26: "F1Ah"}.get(spec.family, "Intel_10nm Socket#0 IMC#0") \
        if spec.vendor == "AuthenticAMD" else "Intel_10nm Socket#0 IMC#0"
    for node in range(spec.numa_nodes):
        base = "/sys/devices/system/edac/mc/mc%d" % node
        tree.text(base + "/mc_name", mc_name)
        tree.text(base + "/ce_count", 3 if node == 1 and spec.hostname == "gpu-incident" else 0)
        tree.text(base + "/ue_count", 0)
        tree.text(base + "/ce_noinfo_count", 0)
        tree.text(base + "/ue_noinfo_count", 0)
        for dimm in range(2):
            dbase = "%s/dimm%d" % (base, dimm)
            tree.text(dbase + "/dimm_label", "P%d_CH_%s_DIMM_0" % (node, "AB"[dimm]))
            ce = 3 if node == 1 and dimm == 0 and spec.hostname == "gpu-incident" else 0
            tree.text(dbase + "/dimm_ce_count", ce)
            tree.text(dbase + "/dimm_ue_count", 0)


def _pending_row(tree, gpu_index):
    """Mark a row remapping pending (one uncorrectable remap) on one GPU of nvidia-smi -q -x."""
    path = "/commands/nvidia-smi-q.xml"
    xml = tree.files[path].decode("utf-8")
    at = -1
    for _unused in range(gpu_index + 1):
        at = xml.index("<remapped_rows>", at + 1)
    end = xml.index("</remapped_rows>", at)
    section = xml[at:end].replace("<remapped_row_unc>0<", "<remapped_row_unc>1<") \
        .replace("<remapped_row_pending>No<", "<remapped_row_pending>Yes<")
    tree.file(path, xml[:at] + section + xml[end:])


def _hostile(tree, nics):
    tree.file("/commands/journalctl-k-b.txt",
              b"# gpuhost.baseline kernel log: banana lines\n"
              b"[   12.000000] h kernel: NVRM: Xid (PCI:zzzz:41:00): 79, GPU has fallen off the bus.\n"
              b"[   13.000000] h kernel: NVRM: Xid (PCI:0000:41:00): 79, <script>alert(1)</script>\xff\xfe\n"
              b"[   14.000000] h kernel: NVRM: Xid (PCI:0000:4")
    tree.file("/commands/nvidia-smi-nvlink-s.txt", b"\x1b[31mGPU 0: \xff (UUID: GPU-x)\n\t Link 0: fast\n\t Link")
    if nics:
        base = "%s/infiniband/mlx5_0/ports/1" % nics[0].sysfs_dir()
        tree.file(base + "/state", b"\xff\xfe\n")
        tree.file(base + "/rate", b"fast\n")
        tree.remove(base + "/phys_state")
    tree.link("/sys/class/infiniband/mlx5_9", "../../devices/pci0000:ff/0000:ff:00.0/infiniband/mlx5_9")
    tree.file("/sys/devices/system/edac/mc/mc0/ce_count", b"banana\n")
    if nics:
        tree.file("%s/infiniband/mlx5_0/ports/1/counters/link_downed" % nics[0].sysfs_dir(), b"-1\xff\n")
        tree.file(nics[0].sysfs_dir() + "/aer_dev_correctable", b"RxErr <b>lots</b>\n")
    tree.file("/sys/devices/system/edac/mc/mc1/ue_count", b"")


def add(tree, spec, devices, name):
    """Add the health files of scenario ``name`` to a freshly built tree."""
    gpus = [d for d in devices if d.kind == "gpu"]
    nics = [d for d in devices if d.kind == "nic" and d.address.endswith(".0")
            and d.function.vendor == 0x15B3]
    _edac(tree, spec)
    if not spec.nvidia:
        return
    incident = name == "incident"
    tree.file("/commands/journalctl-k-b.txt", _kernel_log(spec, gpus, incident))
    tree.file("/commands/nvidia-smi-nvlink-s.txt", _nvlink(spec, gpus))
    _infiniband(tree, nics)
    _aer_correctable(tree, devices, incident)
    if name == "healthy":
        tree.text("/sys/module/nvidia_peermem/initstate", "live")
    if incident and len(gpus) > 2:
        _pending_row(tree, 2)
    if name == "hostile":
        _hostile(tree, nics)
