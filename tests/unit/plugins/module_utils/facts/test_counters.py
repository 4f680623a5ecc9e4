# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tests of plugins/module_utils/facts/counters.py (error counters: InfiniBand ports, PCIe AER,
NVLink) and the ECC corrected count of facts/nvidia.py: parsers over real-format fixtures
(tests/fixtures/counters/README.md), broken variants, gather over snapshot roots."""

import json
import os
import xml.etree.ElementTree as ET

from helpers.tree import write_tree

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.counters import (
    gather, parse_aer_correctable, parse_count, parse_nvlink_errors,
)
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.nvidia import _ecc_corrected, parse_smi_xml
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root

TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
FIXTURES = os.path.join(TESTS, "fixtures", "counters")
REALDATA = os.path.join(TESTS, "fixtures", "realdata", "nvidia-smi")


def fixture(name, directory=FIXTURES):
    with open(os.path.join(directory, name), encoding="utf-8") as handle:
        return handle.read()


# -- parsers ----------------------------------------------------------------------------------
def test_count():
    assert parse_count("12\n") == 12 and parse_count("0") == 0
    for bad in ("", "-1", "1.5", "banana", "1 2", "9" * 21, None, b"3"):
        assert parse_count(bad) is None


def test_aer_kernel_doc_sample_and_current_names():
    assert parse_aer_correctable(fixture("aer_dev_correctable-kernel-doc.txt")) == {
        "total": 2, "counts": {"Receiver Error": 2, "Bad TLP": 0, "Bad DLLP": 0, "RELAY_NUM Rollover": 0,
                               "Replay Timer Timeout": 0, "Advisory Non-Fatal": 0, "Corrected Internal Error": 0,
                               "Header Log Overflow": 0}}
    parsed = parse_aer_correctable(fixture("aer_dev_correctable-linux6.txt"))
    assert parsed["total"] == 21 and parsed["counts"]["RxErr"] == 17 and len(parsed["counts"]) == 8


def test_aer_broken():
    assert parse_aer_correctable("") is None and parse_aer_correctable("banana\n\xff") is None
    assert parse_aer_correctable(None) is None
    # cut short before the total: counts, no total
    assert parse_aer_correctable("RxErr 3\nBadTLP 0\n") == {"total": None, "counts": {"RxErr": 3, "BadTLP": 0}}


def test_nvlink_errors_h100_eighteen_links():
    parsed = parse_nvlink_errors(fixture("nvlink-e-h100.txt"))
    (gpu,) = parsed["gpus"]
    assert (gpu["index"], gpu["name"], gpu["links"]) == (0, "NVIDIA H100 80GB HBM3", 18)
    assert gpu["uuid"] == "GPU-abcdefab-cdef-abdc-abcd-abababababab"
    assert gpu["totals"] == {"replay": 0, "recovery": 0, "crc": 0}
    assert parsed["unrecognised"] == [] and parsed["note"] is None


def test_nvlink_errors_summed_over_links_per_gpu():
    text = fixture("nvlink-e-a6000-bridge.txt")
    text = text.replace("Link 1: Replay Errors: 0", "Link 1: Replay Errors: 148", 1) \
        .replace("Link 3: CRC Errors: 0", "Link 3: CRC Errors: 65535", 1)
    parsed = parse_nvlink_errors(text)
    assert [(g["index"], g["links"], g["totals"]) for g in parsed["gpus"]] == [
        (0, 4, {"replay": 148, "recovery": 0, "crc": 65535}), (1, 4, {"replay": 0, "recovery": 0, "crc": 0})]


def test_nvlink_errors_not_supported_and_garbage():
    parsed = parse_nvlink_errors("GPU 0: NVIDIA RTX PRO 6000 Blackwell Server Edition (UUID: GPU-1)\n"
                                 "\t NVML: Unable to retrieve NVLink information: Not Supported\n")
    assert parsed["gpus"][0]["links"] == 0 and parsed["gpus"][0]["note"].startswith("NVML:")
    assert parse_nvlink_errors("") is None and parse_nvlink_errors("\x1b[31mbanana") is None
    odd = parse_nvlink_errors("GPU 0: x (UUID: GPU-a)\n\t Link 0: Replay Errors: lots\n\t Link")
    assert odd["gpus"][0]["links"] == 0 and len(odd["unrecognised"]) == 2


def test_ecc_corrected_from_real_nvidia_smi_xml():
    # Ampere and newer: sram_correctable + dram_correctable under volatile
    (gpu,) = parse_smi_xml(fixture("a100-sxm4-v12.xml", REALDATA))["gpus"]
    assert gpu["ecc"]["volatile_corrected"] == 0
    # Volta: single_bit/total
    gpus = parse_smi_xml(fixture("v100s-pcie-8gpu-v11.xml", REALDATA))["gpus"]
    assert [g["ecc"]["volatile_corrected"] for g in gpus] == [0] * 8
    # ECC counters N/A (a GeForce card): unknown, not zero
    (gpu,) = parse_smi_xml(fixture("rtx-3080-v13.xml", REALDATA))["gpus"]
    assert gpu["ecc"]["volatile_corrected"] is None
    counted = ET.fromstring("<gpu><ecc_errors><volatile><sram_correctable>3</sram_correctable>"
                            "<dram_correctable>40</dram_correctable></volatile></ecc_errors></gpu>")
    assert _ecc_corrected(counted) == 43


# -- gather -----------------------------------------------------------------------------------
IB = "/sys/class/infiniband/mlx5_0/ports/1/counters/"


def _root(tmp_path, files):
    return Root(write_tree(tmp_path, files))


def test_gather_ib_and_aer(tmp_path):
    files = dict((IB + name, "%d\n" % value) for name, value in
                 (("link_downed", 3), ("symbol_error", 0), ("port_rcv_errors", 12), ("link_error_recovery", 1)))
    files["/sys/bus/pci/devices/0000:45:00.0/aer_dev_correctable"] = fixture("aer_dev_correctable-linux6.txt")
    files["/sys/bus/pci/devices/0000:43:00.0/vendor"] = "0x10de\n"  # no AER file: not listed
    root = _root(tmp_path, files)
    facts = gather(root, False)
    assert root.errors == []
    assert facts["ib"] == [{"device": "mlx5_0", "port": 1, "error": None, "counters": {
        "link_downed": 3, "symbol_error": 0, "port_rcv_errors": 12, "link_error_recovery": 1}}]
    assert facts["aer"] == [{"address": "0000:45:00.0", "correctable": 21, "error": None}]
    assert facts["nvlink"] is None  # no NVLink in use: nvidia-smi nvlink -e is not run
    json.dumps(facts)


def test_gather_broken_counters_say_which(tmp_path):
    files = {IB + "link_downed": "banana\n", IB + "symbol_error": "0\n", IB + "port_rcv_errors": "0\n",
             "/sys/bus/pci/devices/0000:45:00.0/aer_dev_correctable": "\xff\xfe garbage\n"}
    root = _root(tmp_path, files)
    facts = gather(root, False)
    (port,) = facts["ib"]
    assert port["counters"]["link_downed"] is None and port["counters"]["link_error_recovery"] is None
    assert "link_downed,link_error_recovery" in port["error"]
    assert facts["aer"][0]["correctable"] is None and "TOTAL_ERR_COR" in facts["aer"][0]["error"]
    assert any("not a counter" in e["reason"] for e in root.errors)


def test_gather_nvlink_from_snapshot_capture(tmp_path):
    root = _root(tmp_path, {"/commands/nvidia-smi-nvlink-e.txt": fixture("nvlink-e-h100.txt")})
    section = gather(root, True)["nvlink"]
    assert section["error"] is None and section["gpus"][0]["links"] == 18
    missing = gather(_root(tmp_path / "old", {"/sys": None}), True)["nvlink"]
    assert missing["gpus"] is None and "nvidia-smi-nvlink-e.txt not captured" in missing["error"]
