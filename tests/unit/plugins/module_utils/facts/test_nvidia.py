# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tests of plugins/module_utils/facts/nvidia.py over real nvidia-smi XML and hand-written topo samples."""

import json
import os
import re

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import nvidia as _nvidia
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.nvidia import (
    gather,
    normalise_bus_id,
    parse_module_version,
    parse_smi_xml,
    TopoError,
    parse_topo,
)
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root

TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
REAL = os.path.join(TESTS, "fixtures", "realdata", "nvidia-smi")
OWN = os.path.join(TESTS, "fixtures", "nvidia")
DEPRECATED = "Requested functionality has been deprecated"


def real(name):
    with open(os.path.join(REAL, name), encoding="utf-8") as handle:
        return handle.read()


def own(name):
    with open(os.path.join(OWN, name), encoding="utf-8") as handle:
        return handle.read()


# -- /proc/driver/nvidia/version ----------------------------------------------------------
def test_module_version_open_blackwell():
    parsed = parse_module_version(own("version-open-575-blackwell.txt"))
    assert parsed["version"] == "575.57.08"
    assert parsed["open"] is True
    assert parsed["raw"].startswith("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  575.57.08")
    assert "GCC" not in parsed["raw"]


def test_module_version_proprietary():
    parsed = parse_module_version(own("version-proprietary-550.txt"))
    assert parsed == {
        "version": "550.54.14",
        "open": False,
        "raw": "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14  Thu Feb 22 01:44:30 UTC 2024",
    }


def test_module_version_open_570_and_aarch64():
    line = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.133.07  Release Build  (dvs-builder@U16)"
    assert parse_module_version(line)["version"] == "570.133.07"
    arm = "NVRM version: NVIDIA UNIX aarch64 Kernel Module  535.161.08  Tue Mar  5 22:40:11 UTC 2024"
    assert parse_module_version(arm) == {"version": "535.161.08", "open": False, "raw": arm}


@pytest.mark.parametrize("text", ["", None, "GCC version: gcc 12\n", "\x00\xff garbage"])
def test_module_version_without_nvrm_line(text):
    assert parse_module_version(text) is None


def test_module_version_nvrm_line_without_number_keeps_raw():
    parsed = parse_module_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  (unknown)\n")
    assert parsed["version"] is None
    assert parsed["open"] is False
    assert parsed["raw"] == "NVRM version: NVIDIA UNIX x86_64 Kernel Module  (unknown)"


# -- bus ids ---------------------------------------------------------------------------------
@pytest.mark.parametrize("raw,expected", [
    ("00000000:41:00.0", "0000:41:00.0"),
    ("00000000:00:1E.0", "0000:00:1e.0"),
    ("0000:C1:00.1", "0000:c1:00.1"),
    ("00000001:0A:1f.7", "0001:0a:1f.7"),
    ("41:00.0", "0000:41:00.0"),
    ("", None),
    (None, None),
    ("GPU-513536b6", None),
    ("0000:41:00.8", None),
])
def test_normalise_bus_id(raw, expected):
    assert normalise_bus_id(raw) == expected


# -- nvidia-smi -q -x: real captures ------------------------------------------------------------
def test_a100_v12_event_reasons_power_and_mig():
    parsed = parse_smi_xml(real("a100-sxm4-v12.xml"))
    assert parsed["error"] is None
    assert parsed["driver_version"] == "535.54.03"
    assert parsed["cuda_version"] == "12.2"
    # the capture says 4 attached GPUs but holds one <gpu>: both facts are kept as read
    assert parsed["attached_gpus"] == 4
    assert len(parsed["gpus"]) == 1
    gpu = parsed["gpus"][0]
    assert gpu["index"] == 0
    assert gpu["minor_number"] == 1
    assert gpu["name"] == "NVIDIA A100-SXM4-80GB"
    assert gpu["uuid"] == "GPU-513536b6-7d19-9063-b049-1e69664bb298"
    assert gpu["bus_id"] == "0000:01:00.0"
    assert gpu["persistence"] is False
    assert gpu["ecc"] == {"current": "Enabled", "pending": "Enabled", "volatile_corrected": 0}
    assert gpu["power"] == {"limit_w": 500.0, "default_w": 500.0, "max_w": 500.0, "min_w": 100.0,
                            "draw_w": 67.03, "state": "P0"}
    reasons = gpu["clocks_event_reasons"]
    assert reasons["source"] == "clocks_event_reasons"
    assert reasons["active"] == []
    assert sorted(reasons["raw"]) == sorted([
        "gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "hw_thermal_slowdown",
        "hw_power_brake_slowdown", "sync_boost", "sw_thermal_slowdown", "display_clocks_setting"])
    assert set(reasons["raw"].values()) == {"Not Active"}
    assert gpu["pcie"] == {"gen_current": 4, "gen_max": 4, "gen_host_max": 4, "gen_device_current": 4,
                           "gen_device_max": 4, "width_current": 16, "width_max": 16}
    assert gpu["mig"]["current"] == "Enabled"
    assert gpu["mig"]["pending"] == "Enabled"
    assert [d["gpu_instance_id"] for d in gpu["mig"]["devices"]] == [3, 4, 5, 6]
    assert [d["index"] for d in gpu["mig"]["devices"]] == [0, 1, 2, 3]
    assert {d["memory_total_mib"] for d in gpu["mig"]["devices"]} == {19968}
    # retired_pages is there but every value is N/A on this A100; remapped_rows is plain N/A
    assert gpu["retired_pages"] == {"single_bit": None, "double_bit": None,
                                    "pending_blacklist": None, "pending_retirement": None}
    assert gpu["remapped_rows"] is None
    assert gpu["processes"] == []


def test_t4_v11_throttle_reasons_power_readings_and_processes():
    parsed = parse_smi_xml(real("tesla-t4.xml"))
    assert parsed["error"] is None
    assert (parsed["driver_version"], parsed["cuda_version"]) == ("515.105.01", "11.7")
    gpu = parsed["gpus"][0]
    assert gpu["name"] == "Tesla T4"
    assert gpu["bus_id"] == "0000:00:1e.0"
    assert gpu["minor_number"] == 0
    assert gpu["clocks_event_reasons"]["source"] == "clocks_throttle_reasons"
    assert "sw_power_cap" in gpu["clocks_event_reasons"]["raw"]
    assert not any(k.startswith("clocks_") for k in gpu["clocks_event_reasons"]["raw"])
    assert gpu["power"]["limit_w"] == 70.0
    assert gpu["power"]["default_w"] == 70.0
    assert gpu["power"]["max_w"] == 70.0
    assert gpu["power"]["min_w"] == 60.0
    assert gpu["pcie"]["gen_current"] == 3
    assert gpu["pcie"]["gen_max"] == 3
    assert gpu["pcie"]["gen_host_max"] is None
    assert gpu["pcie"]["width_current"] == 8
    assert gpu["pcie"]["width_max"] == 16
    assert gpu["retired_pages"] == {"single_bit": 0, "double_bit": 0,
                                    "pending_blacklist": False, "pending_retirement": False}
    assert gpu["processes"] == [
        {"pid": 675, "name": "/usr/lib/xorg/Xorg", "type": "G", "used_memory_mib": 22},
        {"pid": 5762, "name": "python", "type": "C", "used_memory_mib": 1005},
    ]


def test_gtx_1070_ti_trimmed_log_gives_nulls():
    parsed = parse_smi_xml(real("gtx-1070-ti.xml"))
    assert parsed["error"] is None
    assert parsed["driver_version"] is None
    assert parsed["cuda_version"] is None
    assert parsed["attached_gpus"] is None
    gpu = parsed["gpus"][0]
    assert gpu["name"] == "GeForce GTX 1070 Ti"
    assert gpu["bus_id"] == "0000:01:00.0"
    assert gpu["persistence"] is None
    assert gpu["ecc"] == {"current": None, "pending": None, "volatile_corrected": None}
    assert gpu["power"] == {"limit_w": None, "default_w": None, "max_w": None, "min_w": None,
                            "draw_w": None, "state": None}
    assert gpu["clocks_event_reasons"] is None
    assert gpu["pcie"]["gen_current"] == 1
    assert gpu["pcie"]["width_current"] == 16
    assert gpu["pcie"]["gen_max"] is None
    assert gpu["mig"] is None
    assert gpu["retired_pages"] is None
    # no <processes> element: unknown, not "no processes"
    assert gpu["processes"] is None


def test_rtx_3080_v13_deprecated_and_na_are_null():
    parsed = parse_smi_xml(real("rtx-3080-v13.xml"))
    assert parsed["error"] is None
    assert (parsed["driver_version"], parsed["cuda_version"]) == ("595.58.03", "13.2")
    gpu = parsed["gpus"][0]
    assert gpu["bus_id"] == "0000:0c:00.0"
    # power_state reads "Requested functionality has been deprecated" in this capture
    assert gpu["power"]["state"] is None
    assert gpu["power"]["limit_w"] == 320.0
    assert gpu["power"]["max_w"] == 336.0
    assert gpu["power"]["min_w"] == 100.0
    # v13 has no power_draw, only instant/average
    assert gpu["power"]["draw_w"] == 142.33
    assert gpu["ecc"] == {"current": None, "pending": None, "volatile_corrected": None}
    assert gpu["mig"] == {"current": None, "pending": None, "devices": []}
    assert gpu["processes"] == []
    assert gpu["retired_pages"]["single_bit"] is None


def test_deprecated_text_in_a_limit_is_null_not_a_number():
    text = real("rtx-3080-v13.xml").replace(
        "<current_power_limit>320.00 W</current_power_limit>",
        "<current_power_limit>%s</current_power_limit>" % DEPRECATED)
    power = parse_smi_xml(text)["gpus"][0]["power"]
    assert power["limit_w"] is None
    assert power["max_w"] == 336.0


def test_active_reasons_are_listed_by_normalised_name():
    text = real("tesla-t4.xml")
    for name in ("sw_power_cap", "hw_slowdown"):
        text = text.replace(
            "<clocks_throttle_reason_%s>Not Active</clocks_throttle_reason_%s>" % (name, name),
            "<clocks_throttle_reason_%s>Active</clocks_throttle_reason_%s>" % (name, name))
    reasons = parse_smi_xml(text)["gpus"][0]["clocks_event_reasons"]
    assert reasons["active"] == ["hw_slowdown", "sw_power_cap"]
    assert reasons["raw"]["sw_power_cap"] == "Active"
    assert reasons["raw"]["gpu_idle"] == "Not Active"


def test_bus_id_falls_back_to_pci_bus_id_and_persistence_enabled():
    text = real("tesla-t4.xml").replace('<gpu id="00000000:00:1E.0">', "<gpu>").replace(
        "<persistence_mode>Disabled</persistence_mode>", "<persistence_mode>Enabled</persistence_mode>")
    gpu = parse_smi_xml(text)["gpus"][0]
    assert gpu["bus_id"] == "0000:00:1e.0"
    assert gpu["persistence"] is True


def test_remapped_rows_when_present():
    text = real("rtx-3080-v13.xml").replace(
        "<remapped_rows>N/A</remapped_rows>",
        "<remapped_rows><remapped_row_corr>2</remapped_row_corr><remapped_row_unc>1</remapped_row_unc>"
        "<remapped_row_pending>Yes</remapped_row_pending><remapped_row_failure>No</remapped_row_failure>"
        "</remapped_rows>")
    assert parse_smi_xml(text)["gpus"][0]["remapped_rows"] == {
        "correctable": 2, "uncorrectable": 1, "pending": True, "failure": False}


def test_gpu_index_is_document_order_not_minor_number():
    t4 = real("tesla-t4.xml")
    start, end = t4.index("<gpu "), t4.index("</gpu>") + len("</gpu>")
    second = t4[start:end].replace("00000000:00:1E.0", "00000000:00:1F.0").replace(
        "<minor_number>0</minor_number>", "<minor_number>7</minor_number>")
    parsed = parse_smi_xml(t4[:end] + second + t4[end:])
    assert [g["index"] for g in parsed["gpus"]] == [0, 1]
    assert [g["bus_id"] for g in parsed["gpus"]] == ["0000:00:1e.0", "0000:00:1f.0"]
    assert [g["minor_number"] for g in parsed["gpus"]] == [0, 7]


# -- nvidia-smi -q -x: broken input -------------------------------------------------------------
@pytest.mark.parametrize("name", ["a100-sxm4-v12.xml", "tesla-t4.xml", "gtx-1070-ti.xml", "rtx-3080-v13.xml"])
@pytest.mark.parametrize("fraction", [0.05, 0.2, 0.5, 0.9, 0.999])
def test_truncated_xml_keeps_what_was_read(name, fraction):
    text = real(name)
    parsed = parse_smi_xml(text[:int(len(text) * fraction)])
    if parsed is None:
        # cut before <nvidia_smi_log> was complete: nothing to keep
        assert "<nvidia_smi_log>" not in text[:int(len(text) * fraction)]
        return
    assert parsed["error"] and "not well-formed" in parsed["error"]
    json.dumps(parsed)
    full = parse_smi_xml(text)
    for gpu in parsed["gpus"]:
        # what was read before the cut agrees with the complete capture
        assert gpu["index"] == 0
        if gpu["uuid"] is not None:
            assert gpu["uuid"] == full["gpus"][0]["uuid"]


def test_truncated_t4_before_processes_keeps_header_fields():
    text = real("tesla-t4.xml")
    parsed = parse_smi_xml(text[:text.index("<processes>")])
    gpu = parsed["gpus"][0]
    assert parsed["driver_version"] == "515.105.01"
    assert gpu["name"] == "Tesla T4"
    assert gpu["power"]["limit_w"] == 70.0
    assert gpu["processes"] is None
    assert parsed["error"]


@pytest.mark.parametrize("text", [
    "", None, "   \n", "garbage", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
    "<html><body>502</body></html>", "<?xml version='1.0'?>", "<nvidia_smi_log", "\x00\x01\x02\xff\xfe",
    b"\x89PNG\r\n\x1a\n\x00\x00".decode("latin-1"), "<<<>>>", "<a><b></a>",
])
def test_empty_and_garbage_xml_is_none(text):
    assert parse_smi_xml(text) is None


def test_binary_junk_after_a_valid_start_is_an_error_not_a_crash():
    text = real("gtx-1070-ti.xml")[:300] + bytes(range(256)).decode("latin-1")
    parsed = parse_smi_xml(text)
    assert parsed is not None and parsed["error"]


def test_external_dtd_is_never_fetched(tmp_path):
    dtd = tmp_path / "evil.dtd"
    dtd.write_text('<!ENTITY drv "999.99">')
    text = ('<?xml version="1.0"?>\n<!DOCTYPE nvidia_smi_log SYSTEM "%s">\n'
            "<nvidia_smi_log><cuda_version>12.4</cuda_version><driver_version>&drv;</driver_version>"
            "</nvidia_smi_log>" % dtd.as_uri())
    parsed = parse_smi_xml(text)
    assert parsed["cuda_version"] == "12.4"
    assert parsed["driver_version"] != "999.99"
    assert parsed["error"]


# -- nvidia-smi topo -m -------------------------------------------------------------------------
def test_topo_8_gpus_2_nics_two_sockets():
    topo = parse_topo(own("topo-8gpu-2nic-2socket.txt"))
    assert topo["devices"] == ["GPU%d" % i for i in range(8)] + ["NIC0", "NIC1"]
    matrix = topo["matrix"]
    assert sorted(matrix) == sorted(topo["devices"])
    assert matrix["GPU0"]["GPU0"] == "X"
    assert matrix["GPU0"]["GPU1"] == "PIX"
    assert matrix["GPU0"]["GPU2"] == "NODE"
    assert matrix["GPU0"]["GPU4"] == "SYS"
    assert matrix["GPU0"]["NIC0"] == "PXB"
    assert matrix["GPU6"]["NIC1"] == "NODE"
    assert matrix["NIC1"]["GPU5"] == "PXB"
    assert matrix["NIC0"]["NIC1"] == "SYS"
    for a in topo["devices"]:
        for b in topo["devices"]:
            assert matrix[a][b] == matrix[b][a]
    assert topo["affinity"]["GPU0"] == {"cpu": "0-47,96-143", "numa": "0", "gpu_numa": None}
    assert topo["affinity"]["GPU7"] == {"cpu": "48-95,144-191", "numa": "1", "gpu_numa": None}
    assert sorted(topo["affinity"]) == ["GPU%d" % i for i in range(8)]
    assert topo["nic_names"] == {"NIC0": "mlx5_0", "NIC1": "mlx5_1"}
    dumped = json.dumps(topo)
    assert "\\u001b" not in dumped and "[4m" not in dumped and "Legend" not in dumped


def test_topo_single_gpu():
    assert parse_topo(own("topo-1gpu.txt")) == {
        "devices": ["GPU0"], "matrix": {"GPU0": {"GPU0": "X"}},
        "affinity": {"GPU0": {"cpu": "0-63", "numa": "0", "gpu_numa": None}}, "nic_names": {}}


def test_topo_with_tabs_expanded_to_spaces_gives_same_links_and_affinity():
    text = own("topo-8gpu-2nic-2socket.txt")
    tabbed = parse_topo(text)
    spaced = parse_topo(text.expandtabs(8))
    assert spaced["devices"] == tabbed["devices"]
    assert spaced["matrix"] == tabbed["matrix"]
    assert spaced["affinity"] == tabbed["affinity"]


def test_topo_crlf_and_older_columns_and_gpu_numa_id():
    text = ("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\r\n"
            "GPU0\t X \tNV4\t0-23\tN/A\r\nGPU1\tNV4\t X \t0-23\tN/A\r\n\r\nLegend:\r\n")
    topo = parse_topo(text)
    assert topo["matrix"]["GPU0"]["GPU1"] == "NV4"
    assert topo["affinity"]["GPU1"] == {"cpu": "0-23", "numa": None, "gpu_numa": None}
    grace = "\tGPU0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \t0-71\t0\t\t4\n"
    assert parse_topo(grace)["affinity"]["GPU0"] == {"cpu": "0-71", "numa": "0", "gpu_numa": "4"}


@pytest.mark.parametrize("text", [
    "", None, "\x1b[4m\x1b[0m\x1b[1;31m\x1b[0m\n", "garbage\nmore garbage",
    "\x1b[4m\tGPU0\tCPU Affinity\tNUMA Affinity\x1b[0m\n",
    own("topo-1gpu.txt").split("\n\n", 1)[1],
    "Failed to initialize NVML: Driver/library version mismatch\n",
    bytes(range(256)).decode("latin-1"),
])
def test_topo_garbage_is_none(text):
    assert parse_topo(text) is None


# nvidia-smi pads columns with tabs; a capture whose tabs were lost (copied through a terminal or a
# tool that strips them) runs columns together: NIC8NIC9 in the header, NODENODE in the cells.
GLUED_HEADER = ("\tGPU0\tGPU1\tNIC8NIC9\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
                "GPU0\t X \tNV18\tNODENODE\t0-31\t0\t\tN/A\n")
GLUED_CELLS = ("\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
               "GPU0\t X \tNV18\tNODE\t0-31\t0\t\tN/A\n"
               "GPU1\tNV18\t X \tNODENODE\t0-31\t0\t\tN/A\n")


@pytest.mark.parametrize("text, line, words", [
    (GLUED_HEADER, 1, "'NIC8NIC9' is not a device name"),
    (GLUED_CELLS, 3, "'NODENODE' (row GPU1, column NIC0) is not a link type"),
    ("\tGPU0\tGPU1\n GPU0\t X \tNV4\nGPU1\tNV4\n", 3, "row GPU1 has no link type for GPU1"),
    ("\tGPU0\tGPU1\nGPU0\t X \tNV4\nGPU1GPU0\tNV4\t X \n", 3, "row 'GPU1GPU0' is not a device"),
    ("\tGPU0\tGPU1\nGPU0\t X \tQPI\nGPU1\tQPI\t X \n", 2, "'QPI' (row GPU0, column GPU1)"),
])
def test_topo_outside_the_documented_format_is_an_error_naming_the_line(text, line, words):
    with pytest.raises(TopoError) as caught:
        parse_topo(text)
    message = str(caught.value)
    assert message.startswith("line %d: " % line), message
    assert words in message


def test_topo_legacy_link_and_nic_names_pass():
    text = ("\tGPU0\tGPU1\tmlx5_0\tCPU Affinity\n"
            "GPU0\t X \tSOC\tPHB\t0-11\nGPU1\tSOC\t X \tSOC\t12-23\nmlx5_0\tPHB\tSOC\t X \t\n")
    topo = parse_topo(text)
    assert topo["devices"] == ["GPU0", "GPU1", "mlx5_0"]
    assert topo["matrix"]["GPU0"] == {"GPU0": "X", "GPU1": "SOC", "mlx5_0": "PHB"}


def _matrix(count):
    header = "".join("\tGPU%d" % i for i in range(count)) + "\tCPU Affinity\n"
    return header + "".join("GPU%d" % i + "".join("\t X " if i == j else "\tSYS" for j in range(count)) + "\t0-7\n"
                            for i in range(count))


def test_topo_of_the_most_devices_a_host_may_have_is_read():
    topo = parse_topo(_matrix(_nvidia.MAX_TOPO_DEVICES))
    assert len(topo["devices"]) == _nvidia.MAX_TOPO_DEVICES and topo["matrix"]["GPU7"]["GPU9"] == "SYS"


def test_topo_with_more_devices_than_any_host_is_an_error_before_any_cell_is_read():
    with pytest.raises(TopoError, match=r"^line 1: %d device columns, more than the %d of any host"
                       % (_nvidia.MAX_TOPO_DEVICES + 1, _nvidia.MAX_TOPO_DEVICES)):
        parse_topo(_matrix(_nvidia.MAX_TOPO_DEVICES + 1))


def test_topo_output_longer_than_any_matrix_is_refused_unsplit():
    # 64 MiB of blank lines took the parser over 10 s, and of short lines past 512 MiB (tests/fuzz/test_fuzz_topo.py)
    text = own("topo-8gpu-2nic-2socket.txt") + "\n" * _nvidia.MAX_TOPO_CHARS
    with pytest.raises(TopoError, match="more than any topology matrix"):
        parse_topo(text)


def test_gather_glued_topology_is_an_error_and_no_matrix(tmp_path):
    root = make_root(tmp_path, xml=real("tesla-t4.xml"), topo=GLUED_CELLS)
    facts = gather(root)
    assert facts["topology"] is None
    assert facts["gpus"][0]["topology"] == {"label": None, "cpu_affinity": None, "numa_affinity": None,
                                            "gpu_numa_id": None}
    messages = [str(error) for error in root.errors]
    assert any("nvidia-smi topo -m" in m and "line 3:" in m and "NODENODE" in m for m in messages), messages


# -- gather over roots ---------------------------------------------------------------------------
def make_root(tmp_path, xml=None, topo=None, version=None):
    if xml is not None or topo is not None:
        (tmp_path / "commands").mkdir()
    if xml is not None:
        (tmp_path / "commands" / "nvidia-smi-q.xml").write_text(xml)
    if topo is not None:
        (tmp_path / "commands" / "nvidia-smi-topo-m.txt").write_text(topo)
    if version is not None:
        (tmp_path / "proc" / "driver" / "nvidia").mkdir(parents=True)
        (tmp_path / "proc" / "driver" / "nvidia" / "version").write_text(version)
    return Root(str(tmp_path))


def test_gather_snapshot_with_everything(tmp_path):
    root = make_root(tmp_path, xml=real("tesla-t4.xml"), topo=own("topo-1gpu.txt"),
                     version=own("version-proprietary-550.txt"))
    facts = gather(root)
    assert root.errors == []
    assert facts["present"] is True
    assert facts["smi"] == {"available": True, "error": None, "bound": None}
    assert facts["module"]["version"] == "550.54.14"
    assert facts["module"]["open"] is False
    assert facts["driver_version"] == "515.105.01"
    assert facts["cuda_version"] == "11.7"
    assert facts["gpus"][0]["topology"] == {"label": "GPU0", "cpu_affinity": "0-63", "numa_affinity": "0",
                                            "gpu_numa_id": None}
    assert facts["topology"]["devices"] == ["GPU0"]
    json.dumps(facts)


def _eight_t4(keep=range(8)):
    t4 = real("tesla-t4.xml").replace("<attached_gpus>1</attached_gpus>", "<attached_gpus>8</attached_gpus>")
    start, end = t4.index("<gpu "), t4.index("</gpu>") + len("</gpu>")
    gpus = "".join(t4[start:end].replace("00000000:00:1E.0", "00000000:%02X:00.0" % (0x41 + i))
                   for i in keep)
    return t4[:start] + gpus + t4[end:]


def test_gather_does_not_join_topology_by_index_with_a_gpu_lost_in_the_middle(tmp_path):
    # 8 attached, the third lost: -q -x lists 7, so its positions after the lost GPU are not the
    # GPUn numbers of topo -m (issue 21): no row is joined, and an error says why
    root = make_root(tmp_path, xml=_eight_t4(keep=[0, 1, 3, 4, 5, 6, 7]), topo=own("topo-8gpu-2nic-2socket.txt"))
    facts = gather(root)
    assert len(facts["gpus"]) == 7 and facts["topology"] is not None
    assert [g["topology"]["label"] for g in facts["gpus"]] == [None] * 7
    assert all(g["topology"]["numa_affinity"] is None for g in facts["gpus"])
    assert any("7 of 8 attached GPUs" in e["reason"] for e in root.errors)


@pytest.mark.parametrize("attached, listed, rows, joins", [
    (2, 2, 2, True), (None, 2, 2, True), (3, 2, 2, False), (2, 2, 3, False), (None, 0, 0, False)])
def test_topology_joins(attached, listed, rows, joins):
    topology = {"matrix": dict(("GPU%d" % i, {}) for i in range(rows))}
    assert _nvidia.topology_joins(attached, [{}] * listed, topology) is joins


def test_gather_merges_topology_by_gpu_index(tmp_path):
    root = make_root(tmp_path, xml=_eight_t4(), topo=own("topo-8gpu-2nic-2socket.txt"))
    facts = gather(root)
    assert facts["attached_gpus"] == 8 and root.errors == []
    assert [g["bus_id"] for g in facts["gpus"]][:2] == ["0000:41:00.0", "0000:42:00.0"]
    assert facts["gpus"][3]["topology"]["cpu_affinity"] == "0-47,96-143"
    assert facts["gpus"][4]["topology"] == {"label": "GPU4", "cpu_affinity": "48-95,144-191", "numa_affinity": "1",
                                            "gpu_numa_id": None}
    # no version file in this snapshot: the module is unknown, the GPUs still make it present
    assert facts["module"] == {"version": None, "open": None, "raw": None}
    assert facts["present"] is True
    assert root.errors == []


def test_gather_without_nvidia_smi_captures(tmp_path):
    root = make_root(tmp_path)
    facts = gather(root)
    assert facts["present"] is False
    assert facts["smi"]["available"] is False
    assert "commands/nvidia-smi-q.xml not captured" in facts["smi"]["error"]
    assert facts["gpus"] == []
    assert facts["topology"] is None
    assert facts["driver_version"] is None and facts["cuda_version"] is None
    # one error, not a second one for topo -m that could only say the same
    assert [(e["subsystem"], e["path"]) for e in root.errors] == [("nvidia", "commands/nvidia-smi-q.xml")]


def test_gather_module_loaded_but_smi_broken(tmp_path):
    root = make_root(tmp_path, xml="NVIDIA-SMI has failed because it couldn't communicate with the driver\n",
                     topo="garbage\n", version=own("version-open-575-blackwell.txt"))
    facts = gather(root)
    assert facts["present"] is True
    assert facts["module"]["open"] is True
    assert facts["smi"]["available"] is False
    assert "no <nvidia_smi_log>" in facts["smi"]["error"]
    assert facts["topology"] is None
    reasons = " | ".join(e["reason"] for e in root.errors)
    assert "no <nvidia_smi_log>" in reasons
    assert "no topology matrix" in reasons


def test_gather_truncated_xml_is_available_with_error(tmp_path):
    text = real("a100-sxm4-v12.xml")
    root = make_root(tmp_path, xml=text[:text.index("<gpu_power_readings>")])
    facts = gather(root)
    assert facts["smi"]["available"] is True
    assert "incomplete" in facts["smi"]["error"]
    assert facts["gpus"][0]["ecc"]["current"] == "Enabled"
    assert facts["gpus"][0]["power"]["limit_w"] is None
    assert facts["gpus"][0]["topology"]["cpu_affinity"] is None
    assert any("incomplete" in e["reason"] for e in root.errors)


def test_gather_version_file_garbage(tmp_path):
    root = make_root(tmp_path, xml=real("gtx-1070-ti.xml"), version="\x00\x01junk")
    facts = gather(root)
    assert facts["module"]["version"] is None
    assert any(e["path"] == _nvidia.VERSION_PATH for e in root.errors)


def _live_root(tmp_path, which, run_command=None):
    # A live Root whose file reads land in tmp_path, so the test never depends on this machine.
    root = Root("/", run_command=run_command, which=which)
    root.host_path = lambda path: os.path.join(str(tmp_path), path.lstrip("/"))
    return root


def test_gather_live_without_nvidia_smi_binary(tmp_path):
    root = _live_root(tmp_path, which=lambda name: None)
    facts = gather(root)
    assert facts["present"] is False
    assert facts["smi"] == {"available": False, "error": "nvidia-smi not found in PATH", "bound": None}
    assert facts["gpus"] == []
    assert facts["topology"] is None
    assert root.errors == [{"subsystem": "nvidia", "path": "nvidia-smi", "reason": "nvidia-smi not found in PATH"}]


def test_gather_live_runs_nvidia_smi_through_root(tmp_path):
    calls = []

    def run(argv):
        calls.append(argv)
        if argv[1:] == ["-q", "-x"]:
            return 0, real("tesla-t4.xml"), ""
        return 9, "", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."

    root = _live_root(tmp_path, which=lambda name: "/usr/bin/" + name, run_command=run)
    facts = gather(root)
    assert calls == [["/usr/bin/nvidia-smi", "-q", "-x"], ["/usr/bin/nvidia-smi", "topo", "-m"]]
    assert facts["smi"]["available"] is True
    assert facts["gpus"][0]["name"] == "Tesla T4"
    assert facts["topology"] is None
    assert any("exited 9" in e["reason"] for e in root.errors)


# -- fuzzing -----------------------------------------------------------------------------------
_FUZZ = settings(max_examples=200, deadline=None)
_SAMPLES = [real(n) for n in ("a100-sxm4-v12.xml", "tesla-t4.xml", "gtx-1070-ti.xml", "rtx-3080-v13.xml")]


@_FUZZ
@given(st.text())
def test_fuzz_smi_xml_text(text):
    result = parse_smi_xml(text)
    assert result is None or isinstance(result["gpus"], list)


@_FUZZ
@given(st.sampled_from(_SAMPLES), st.integers(min_value=0, max_value=50000),
       st.integers(min_value=0, max_value=50000), st.text(max_size=40))
def test_fuzz_smi_xml_mutated(sample, cut, insert_at, junk):
    text = sample[:insert_at] + junk + sample[insert_at:]
    result = parse_smi_xml(text[:cut])
    if result is not None:
        json.dumps(result)


@_FUZZ
@given(st.text(alphabet=st.sampled_from(list("\t \n\x1b[0;4mGPUNIC0123X-,/ASYODEPHBXIVCufinty")), max_size=400))
def test_fuzz_topo_tokens(text):
    try:
        result = parse_topo(text)
    except TopoError as exc:
        assert str(exc).startswith("line ")
        return
    if result is not None:
        assert set(result["matrix"]) <= set(result["devices"])


@_FUZZ
@given(st.sampled_from([own("topo-8gpu-2nic-2socket.txt"), own("topo-1gpu.txt")]),
       st.integers(min_value=0, max_value=3000), st.text(max_size=30))
def test_fuzz_topo_mutated(sample, cut, junk):
    try:
        result = parse_topo(sample[:cut] + junk + sample[cut:])
    except TopoError as exc:
        assert str(exc).startswith("line ")
        return
    if result is not None:
        json.dumps(result)


@_FUZZ
@given(st.text())
def test_fuzz_module_version(text):
    result = parse_module_version(text)
    assert result is None or re.match(r"^NVRM version:", result["raw"])
