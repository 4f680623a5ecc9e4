"""``nvidia-smi -q -x`` (DTD nvsmi_device_v13) and ``nvidia-smi topo -m`` text.

The element structure follows what current drivers print (tab indentation, the v13
names such as ``clocks_event_reasons`` and ``gpu_power_readings``); the values are
synthetic and chosen per scenario.
"""

from xml.sax.saxutils import escape

#: Names of the v13 ``clocks_event_reasons`` children, without the common prefix.
EVENT_REASONS = (
    "gpu_idle",
    "applications_clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "sync_boost",
    "sw_thermal_slowdown",
    "display_clocks_setting",
)


class Gpu:
    """One GPU as nvidia-smi reports it (power in W, memory in MiB)."""

    def __init__(self, index, bus_id, name, uuid, serial, device_id=0x2BB5, subsys_id=0x204E,
                 persistence=False, ecc=("Enabled", "Enabled"), power_limit=600, power_default=600,
                 power_min=150, power_max=600, power_draw=32.5, active_reasons=(),
                 gen_current=5, gen_max=5, gen_host_max=5, width_current=16, width_max=16,
                 memory_total=97887, processes=(), brand="NVIDIA RTX", architecture="Blackwell",
                 vbios="98.02.52.00.02", performance_state=None):
        self.__dict__.update(locals())
        del self.__dict__["self"]
        if performance_state is None:
            # idle (P8, link speed lowered to save power) unless something runs on it
            self.performance_state = "P8" if not processes else "P1"


def _render(node, depth, out):
    tag, value = node[0], node[1]
    attrs = node[2] if len(node) > 2 else None
    indent = "\t" * depth
    open_tag = tag if not attrs else "%s %s" % (tag, " ".join('%s="%s"' % (k, escape(v, {'"': "&quot;"})) for k, v in attrs))
    if isinstance(value, list):
        out.append("%s<%s>" % (indent, open_tag))
        for child in value:
            _render(child, depth + 1, out)
        out.append("%s</%s>" % (indent, tag))
    else:
        out.append("%s<%s>%s</%s>" % (indent, open_tag, escape(str(value)), tag))


def _na(*tags):
    return [(tag, "N/A") for tag in tags]


def _gpu_node(gpu):
    domain_bus_id = "0000" + gpu.bus_id.upper()  # 0000:43:00.0 -> 00000000:43:00.0
    bus = gpu.bus_id.split(":")[1].upper()
    reasons = [("clocks_event_reason_" + name, "Active" if name in gpu.active_reasons else "Not Active")
               for name in EVENT_REASONS]
    processes = [("process_info", [
        ("gpu_instance_id", "N/A"), ("compute_instance_id", "N/A"), ("pid", str(proc["pid"])),
        ("type", proc.get("type", "C")), ("process_name", proc["name"]),
        ("used_memory", "%d MiB" % proc["used_memory_mib"])]) for proc in gpu.processes]
    used = sum(proc["used_memory_mib"] for proc in gpu.processes)
    reserved = 539
    children = [
        ("product_name", gpu.name),
        ("product_brand", gpu.brand),
        ("product_architecture", gpu.architecture),
        ("display_mode", "Disabled"),
        ("display_attached", "No"),
        ("display_active", "Disabled"),
        ("persistence_mode", "Enabled" if gpu.persistence else "Disabled"),
        ("addressing_mode", "HMM"),
        ("mig_mode", [("current_mig", "Disabled"), ("pending_mig", "Disabled")]),
        ("mig_devices", "None"),
        ("accounting_mode", "Disabled"),
        ("accounting_mode_buffer_size", "4000"),
        ("driver_model", _na("current_dm", "pending_dm")),
        ("serial", gpu.serial),
        ("uuid", gpu.uuid),
        ("minor_number", str(gpu.index)),
        ("vbios_version", gpu.vbios),
        ("multigpu_board", "No"),
        ("board_id", "0x%x" % (int(bus, 16) << 8)),
        ("board_part_number", "900-2G153-0000-000"),
        ("gpu_part_number", "%04X-895-A1" % gpu.device_id),
        ("gpu_fru_part_number", "N/A"),
        ("inforom_version", [("img_version", "G153.0200.00.02"), ("oem_object", "2.1"),
                             ("ecc_object", "7.16"), ("pwr_object", "N/A")]),
        ("gpu_operation_mode", _na("current_gom", "pending_gom")),
        ("c2c_mode", "N/A"),
        ("gpu_virtualization_mode", [("virtualization_mode", "None"), ("host_vgpu_mode", "N/A"),
                                     ("vgpu_heterogeneous_mode", "N/A")]),
        ("gpu_recovery_action", "None"),
        ("gsp_firmware_version", "N/A"),
        ("pci", [
            ("pci_bus", bus),
            ("pci_device", "00"),
            ("pci_domain", "0000"),
            ("pci_base_class", "3"),
            ("pci_sub_class", "2"),
            ("pci_device_id", "%04X10DE" % gpu.device_id),
            ("pci_bus_id", domain_bus_id),
            ("pci_sub_system_id", "%04X10DE" % gpu.subsys_id),
            ("pci_gpu_link_info", [
                ("pcie_gen", [
                    ("max_link_gen", str(gpu.gen_max)),
                    ("current_link_gen", str(gpu.gen_current)),
                    ("device_current_link_gen", str(gpu.gen_current)),
                    ("max_device_link_gen", str(gpu.gen_max)),
                    ("max_host_link_gen", str(gpu.gen_host_max)),
                ]),
                ("link_widths", [("max_link_width", "%dx" % gpu.width_max),
                                 ("current_link_width", "%dx" % gpu.width_current)]),
            ]),
            ("pci_bridge_chip", _na("bridge_chip_type", "bridge_chip_fw")),
            ("replay_counter", "0"),
            ("replay_rollover_counter", "0"),
            ("tx_util", "0 KB/s"),
            ("rx_util", "0 KB/s"),
            ("atomic_caps_outbound", "N/A"),
            ("atomic_caps_inbound", "N/A"),
        ]),
        ("fan_speed", "N/A"),
        ("performance_state", gpu.performance_state),
        ("clocks_event_reasons", reasons),
        ("clocks_event_reasons_counters", [
            ("clocks_event_reasons_counters_sw_power_cap",
             "%d us" % (1843200000 if "sw_power_cap" in gpu.active_reasons else 0)),
            ("clocks_event_reasons_counters_sync_boost", "0 us"),
            ("clocks_event_reasons_counters_sw_therm_slowdown", "0 us"),
            ("clocks_event_reasons_counters_hw_therm_slowdown", "0 us"),
            ("clocks_event_reasons_counters_hw_power_brake", "0 us"),
        ]),
        ("sparse_operation_mode", "N/A"),
        ("fb_memory_usage", [("total", "%d MiB" % gpu.memory_total), ("reserved", "%d MiB" % reserved),
                             ("used", "%d MiB" % used),
                             ("free", "%d MiB" % (gpu.memory_total - reserved - used))]),
        ("bar1_memory_usage", [("total", "131072 MiB"), ("used", "1 MiB"), ("free", "131071 MiB")]),
        ("cc_protected_memory_usage", [("total", "0 MiB"), ("used", "0 MiB"), ("free", "0 MiB")]),
        ("compute_mode", "Default"),
        ("utilization", [("gpu_util", "0 %"), ("memory_util", "0 %"), ("encoder_util", "0 %"),
                         ("decoder_util", "0 %"), ("jpeg_util", "0 %"), ("ofa_util", "0 %")]),
        ("ecc_mode", [("current_ecc", gpu.ecc[0]), ("pending_ecc", gpu.ecc[1])]),
        ("ecc_errors", [
            ("volatile", [("sram_correctable", "0"), ("sram_uncorrectable_parity", "0"),
                          ("sram_uncorrectable_secded", "0"), ("dram_correctable", "0"),
                          ("dram_uncorrectable", "0")]),
            ("aggregate", [("sram_correctable", "0"), ("sram_uncorrectable_parity", "0"),
                           ("sram_uncorrectable_secded", "0"), ("dram_correctable", "0"),
                           ("dram_uncorrectable", "0"), ("sram_threshold_exceeded", "No")]),
            ("channel_repair_pending", "No"),
            ("tpc_repair_pending", "No"),
        ]),
        ("retired_pages", [
            ("multiple_single_bit_retirement", _na("retired_count", "retired_pagelist")),
            ("double_bit_retirement", _na("retired_count", "retired_pagelist")),
            ("pending_blacklist", "N/A"),
            ("pending_retirement", "N/A"),
        ]),
        ("remapped_rows", [
            ("remapped_row_corr", "0"),
            ("remapped_row_unc", "0"),
            ("remapped_row_pending", "No"),
            ("remapped_row_failure", "No"),
            ("row_remapper_histogram", [
                ("row_remapper_histogram_max", "3072 bank(s)"),
                ("row_remapper_histogram_high", "0 bank(s)"),
                ("row_remapper_histogram_partial", "0 bank(s)"),
                ("row_remapper_histogram_low", "0 bank(s)"),
                ("row_remapper_histogram_none", "0 bank(s)"),
            ]),
        ]),
        ("temperature", [("gpu_temp", "34 C"), ("gpu_temp_tlimit", "53 C"),
                         ("gpu_temp_max_threshold", "95 C"), ("gpu_temp_slow_threshold", "92 C"),
                         ("gpu_temp_max_gpu_threshold", "88 C"), ("gpu_target_temperature", "N/A"),
                         ("memory_temp", "40 C"), ("gpu_temp_max_mem_threshold", "95 C")]),
        ("gpu_power_readings", [
            ("power_state", gpu.performance_state),
            ("average_power_draw", "%.2f W" % gpu.power_draw),
            ("instant_power_draw", "%.2f W" % gpu.power_draw),
            ("current_power_limit", "%.2f W" % gpu.power_limit),
            ("requested_power_limit", "%.2f W" % gpu.power_limit),
            ("default_power_limit", "%.2f W" % gpu.power_default),
            ("min_power_limit", "%.2f W" % gpu.power_min),
            ("max_power_limit", "%.2f W" % gpu.power_max),
        ]),
        ("gpu_memory_power_readings", _na("average_power_draw", "instant_power_draw")),
        ("module_power_readings", _na("power_state", "average_power_draw", "instant_power_draw",
                                      "current_power_limit", "requested_power_limit",
                                      "default_power_limit", "min_power_limit", "max_power_limit")),
        ("clocks", [("graphics_clock", "180 MHz"), ("sm_clock", "180 MHz"), ("mem_clock", "405 MHz"),
                    ("video_clock", "600 MHz")]),
        ("applications_clocks", [("graphics_clock", "2430 MHz"), ("mem_clock", "14001 MHz")]),
        ("default_applications_clocks", [("graphics_clock", "2430 MHz"), ("mem_clock", "14001 MHz")]),
        ("max_clocks", [("graphics_clock", "3090 MHz"), ("sm_clock", "3090 MHz"),
                        ("mem_clock", "14001 MHz"), ("video_clock", "3090 MHz")]),
        ("clock_policy", [("auto_boost", "N/A"), ("auto_boost_default", "N/A")]),
        ("supported_clocks", [("supported_mem_clock", [
            ("value", "14001 MHz"),
            ("supported_graphics_clock", "3090 MHz"),
            ("supported_graphics_clock", "2430 MHz"),
            ("supported_graphics_clock", "180 MHz"),
        ])]),
        ("processes", processes),
        ("accounted_processes", []),
        ("capabilities", [("egm", "disabled")]),
    ]
    return ("gpu", children, [("id", domain_bus_id)])


def smi_xml(gpus, driver_version, cuda_version, timestamp):
    """Full ``nvidia-smi -q -x`` document for ``gpus`` (a list of :class:`Gpu`)."""
    out = ['<?xml version="1.0" ?>', '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v13.dtd">', "<nvidia_smi_log>"]
    for node in (("timestamp", timestamp), ("driver_version", driver_version),
                 ("cuda_version", cuda_version), ("attached_gpus", str(len(gpus)))):
        _render(node, 1, out)
    for gpu in gpus:
        _render(_gpu_node(gpu), 1, out)
        out.append("")
    out.append("</nvidia_smi_log>")
    return "\n".join(out) + "\n"


LEGEND = """
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""


def topo_text(devices, link, affinity, nic_names):
    """``nvidia-smi topo -m`` output.

    ``devices``: ordered labels (``GPU0``..., ``NIC0``...); ``link(a, b)``: the
    connection label between two of them; ``affinity[gpu]``: ``(cpulist, numa)``;
    ``nic_names``: device names for the NIC legend. Like the real tool, the header
    row is underlined with ANSI escapes and cells are tab separated.
    """
    header = "\t\x1b[4m" + "\t".join(devices + ["CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]) + "\x1b[0m"
    rows = [header]
    for row in devices:
        cells = [" X " if row == col else link(row, col) for col in devices]
        if row in affinity:
            cpus, numa = affinity[row]
            cells += [cpus, str(numa), "", "N/A"]
        rows.append("\x1b[1m%s\x1b[0m\t%s" % (row, "\t".join(cells)))
    text = "\n".join(rows) + "\n" + LEGEND
    if nic_names:
        text += "\nNIC Legend:\n\n" + "".join("  NIC%d: %s\n" % (i, name) for i, name in enumerate(nic_names))
    return text
