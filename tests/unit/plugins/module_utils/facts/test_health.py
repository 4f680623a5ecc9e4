# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tests of plugins/module_utils/facts/health.py: parsers over real-format fixtures
(tests/fixtures/health/README.md), hostile variants, gather over snapshot roots and a recorded
live capture."""

import json
import os

import pytest
from hypothesis import given, settings, strategies as st

from helpers.tree import replay_recording, write_tree

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import health
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.health import (
    gather, parse_ib_rate, parse_ib_state, parse_kernel_log, parse_nvlink_status, parse_systemctl_show,
    reduce_kernel_log,
)
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import (
    COMMAND_ARGV, COMMAND_CAPTURES, Recorder, Root,
)

TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
FIXTURES = os.path.join(TESTS, "fixtures", "health")


def fixture(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


# -- kernel log: Xid lines ---------------------------------------------------------------------
def test_journal_xids_counted_per_gpu_and_code():
    parsed = parse_kernel_log(fixture("journal-k-b-xid.txt"))
    assert parsed["lines"] == 14 and parsed["source"] is None
    # eight Xid lines and "NVRM: GPU 0000:2b:00.0: GPU has fallen off the bus." (no Xid number)
    assert parsed["events"] == 9 and parsed["unparsed"] == 0
    assert parsed["faults"] == {"0000:2b:00.0": {"fallen_off_bus": {
        "count": 1, "first_s": 81234.401211, "last_s": 81234.401211, "message": "GPU has fallen off the bus."}}}
    by_gpu = parsed["by_gpu"]
    assert sorted(by_gpu) == ["0000:01:00.0", "0000:10:1c.0", "0000:2b:00.0", "0000:3b:00.0"]
    assert by_gpu["0000:2b:00.0"] == {"79": {"count": 1, "first_s": 81234.401205, "last_s": 81234.401205,
                                             "message": "GPU has fallen off the bus."}}
    # pid= and name= are not part of the message; the bus 0x10, device 0x1c are kept as written
    assert by_gpu["0000:10:1c.0"]["63"]["message"].startswith("Row Remapper: New row marked")
    assert by_gpu["0000:10:1c.0"]["48"]["message"].startswith("An uncorrectable double bit error")
    thirteen = by_gpu["0000:3b:00.0"]["13"]
    assert (thirteen["count"], thirteen["first_s"], thirteen["last_s"]) == (2, 91100.250001, 91100.250007)
    assert by_gpu["0000:3b:00.0"]["43"]["count"] == 1
    # the old formats: no PCI: prefix, no pid=
    assert by_gpu["0000:01:00.0"]["3"]["message"] == "C 00000005 SC 00000007 M 00001ffc Data ffffffff"
    assert by_gpu["0000:01:00.0"]["32"]["message"] == "Channel ID 00000009 intr 00800000"


def test_nvlink5_xids_keep_the_fatal_or_nonfatal_word_the_driver_logged():
    """Real NVLink 5 Xid lines (tests/fixtures/health/README.md): the word after the unit is kept per code
    (any Fatal line makes the code fatal), an ordinary Xid line gets no such key."""
    parsed = parse_kernel_log(fixture("nvrm-xid-nvlink5.txt"))
    assert parsed["events"] == 6 and parsed["unparsed"] == 0
    by_gpu = parsed["by_gpu"]
    assert by_gpu["0019:01:00.0"]["149"]["stated"] == "fatal"
    assert by_gpu["0019:01:00.0"]["149"]["message"].startswith("NETIR Fatal XC0 i0 Link -1 (0x000fe406")
    assert (by_gpu["0000:00:00.0"]["149"]["count"], by_gpu["0000:00:00.0"]["149"]["stated"]) == (2, "fatal")
    assert by_gpu["0018:01:00.0"]["145"]["stated"] == "non-fatal"
    assert by_gpu["0000:01:00.0"]["144"]["stated"] == "non-fatal"
    assert "stated" not in by_gpu["0000:dc:00.0"]["45"]
    assert by_gpu["0000:dc:00.0"]["45"]["message"] == "Ch 00000001 caused by previous Xid 149"
    # a Nonfatal line after a Fatal one of the same code leaves it fatal; padding spaces are read
    later = parse_kernel_log("NVRM: Xid (PCI:0000:41:00): 149, NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 (0x0)\n"
                             "NVRM: Xid (PCI:0000:41:00): 149, NETIR_LINK_EVT Nonfatal XC0 i0 Link 01 (0x0)\n")
    assert later["by_gpu"]["0000:41:00.0"]["149"]["stated"] == "fatal"
    # the word without the XC field after it is no stated word (an ordinary message)
    plain = parse_kernel_log("NVRM: Xid (PCI:0000:41:00): 79, pid=1, name=x, Fatal error on the bus\n")
    assert "stated" not in plain["by_gpu"]["0000:41:00.0"]["79"]


def test_gsp_faults_and_reset_required_lines_are_faults_of_their_gpu_or_of_no_address():
    """Real GSP lines without an Xid number (tests/fixtures/health/README.md): by kind, under the PCI
    address the line names (``GPU at PCI:...``) or under no address (``GPU0``, the driver's index,
    names no PCI function); the RPC buffer dump and the Xid 119 banner are none of them."""
    parsed = parse_kernel_log(fixture("nvrm-gsp-reset.txt"))
    assert parsed["by_gpu"] == {} and parsed["unparsed"] == 0
    assert parsed["faults"] == {"0000:07:00.0": {"reset_required": {
        "count": 1, "first_s": 349525.895155, "last_s": 349525.895155,
        "message": "Rate limiting GSP RPC error prints for GPU at PCI:0000:07:00 (printing 1 of every 30).  "
                   "The GPU likely needs to be reset."}}}
    kinds = parsed["faults_no_address"]["no address"]
    assert sorted(kinds) == ["gsp_rpc_failed", "gsp_timeout", "reset_required"]
    assert kinds["gsp_timeout"]["count"] == 4  # rpcRecvPoll timedout, GSP RM, Heartbeat, LibOS heartbeat
    assert kinds["reset_required"]["count"] == 2  # "GPU marked for reset", "may need to be reset"
    assert kinds["reset_required"]["message"].startswith("nvAssertFailedNoLog: Assertion failed: Back to back")
    assert kinds["gsp_rpc_failed"]["message"].startswith("GPU0 rpcRmApiFree_GSP: GspRmFree failed")
    assert parsed["events"] == 8
    # the lines a snapshot keeps: the eight, not the dump or the banner
    kept = reduce_kernel_log(fixture("nvrm-gsp-reset.txt"), "journal")
    assert "GspRmFree failed" in kept and "rpcRecvPoll timedout" in kept
    assert "GSP RPC buffer contains" not in kept and "_kgspLogXid119" not in kept


def test_dmesg_format():
    parsed = parse_kernel_log(fixture("dmesg-xid-79.txt"))
    assert parsed["lines"] == 3
    assert parsed["by_gpu"] == {"0000:03:00.0": {"79": {"count": 1, "first_s": 5107.644336, "last_s": 5107.644336,
                                                        "message": "GPU has fallen off the bus."}}}


def test_reduced_capture_keeps_only_xid_lines_and_parses_the_same():
    text = fixture("journal-k-b-xid.txt")
    reduced = reduce_kernel_log(text, "journalctl -k -b")
    assert reduced.splitlines()[0] == "# gpuhost.baseline kernel log: 14 lines read from journalctl -k -b, 9 kept"
    assert "Linux version" not in reduced and "mlx5_core" not in reduced and "GPU at PCI" not in reduced
    full, stored = parse_kernel_log(text), parse_kernel_log(reduced)
    assert stored["lines"] == 14 and stored["source"] == "journalctl -k -b"
    assert stored["by_gpu"] == full["by_gpu"] and stored["events"] == full["events"]


# -- kernel log: faults without an Xid number, NVSwitch SXid (issue 21) --------------------------
FALLEN = {"count": 1, "first_s": 1843.308145, "last_s": 1843.308145,
          "message": "fallen off the bus and is not responding to commands."}


@pytest.mark.parametrize("name", ["dmesg-fallen-off-bus-no-xid.txt", "journal-k-b-fallen-off-bus-no-xid.txt"])
def test_fallen_off_the_bus_without_xid_is_a_fault_of_the_gpu_it_names(name):
    parsed = parse_kernel_log(fixture(name))
    assert parsed["by_gpu"] == {} and parsed["events"] == 1 and parsed["unparsed"] == 0
    assert parsed["faults"] == {"0000:b3:00.0": {"fallen_off_bus": FALLEN}}


def test_init_failures_are_one_fault_per_rminitadapter_and_rm_init_adapter_pair():
    parsed = parse_kernel_log(fixture("dmesg-rminitadapter-failed.txt"))
    assert parsed["faults"] == {
        "0000:01:00.0": {"init_failed": {"count": 2, "first_s": 21.091872, "last_s": 21.238218,
                                         "message": "RmInitAdapter failed! (0x22:0x56:894)"}},
        "0000:04:01.0": {"init_failed": {"count": 1, "first_s": 1097.650222, "last_s": 1097.650222,
                                         "message": "RmInitAdapter failed! (0x11:0x45:2525)"}}}
    assert parsed["events"] == 3 and parsed["faults_no_address"] == {}


def test_older_init_failure_naming_no_gpu_is_kept_apart():
    text = ("[ 5.1] NVRM: RmInitAdapter failed! (0x26:0xffff:1227)\n"
            "[ 5.2] NVRM: rm_init_adapter failed for device bearing minor number 0\n")
    parsed = parse_kernel_log(text)
    assert parsed["faults"] == {} and parsed["events"] == 1
    assert parsed["faults_no_address"] == {"no address": {"init_failed": {
        "count": 1, "first_s": 5.1, "last_s": 5.1, "message": "RmInitAdapter failed! (0x26:0xffff:1227)"}}}


def test_nvswitch_sxid_counted_per_switch_and_code_with_the_logged_category():
    parsed = parse_kernel_log(fixture("dmesg-nvswitch-sxid.txt"))
    assert parsed["events"] == 3 and parsed["unparsed"] == 0 and parsed["by_gpu"] == {}
    assert parsed["nvswitch"] == {
        "0000:04:00.0": {"name": "nvidia-nvswitch3", "codes": {"22013": {
            "count": 2, "lines": 6, "severity": "non-fatal", "first_s": 38.175561, "last_s": 38.18783,
            "message": "Link 44 Minion Link DLREQ interrupt"}}},
        "0000:84:00.0": {"name": "nvidia-nvswitch1", "codes": {"12028": {
            "count": 1, "lines": 3, "severity": "fatal", "first_s": 5521.402117, "last_s": 5521.402139,
            "message": "Link 32 egress non-posted PRIV error (First)"}}}}


@pytest.mark.parametrize("name", ["dmesg-fallen-off-bus-no-xid.txt", "journal-k-b-fallen-off-bus-no-xid.txt",
                                  "dmesg-rminitadapter-failed.txt", "dmesg-nvswitch-sxid.txt",
                                  "journal-k-b-xid.txt"])
def test_reduced_capture_keeps_the_new_lines_and_parses_the_same(name):
    text = fixture(name)
    reduced = reduce_kernel_log(text, "dmesg")
    assert "osInitNvMapping" not in reduced and "probe routine" not in reduced and "loading NVIDIA" not in reduced
    full, stored = parse_kernel_log(text), parse_kernel_log(reduced)
    for key in ("lines", "events", "by_gpu", "faults", "faults_no_address", "nvswitch", "unparsed"):
        assert stored[key] == full[key], key
    assert full["events"] > 0


@pytest.mark.parametrize("text", [
    # a continuation line with no first line before it: a fault of no GPU, not of the last one named
    "[ 1.0] NVRM: GPU 0000:41:00.0: RmInitAdapter failed! (0x1:0x2:3)\n"
    "               NVRM: fallen off the bus and is not responding to commands.\n",
    # another driver's words
    "[ 1.0] amdgpu 0000:03:00.0: GPU fallen off the bus\n",
    # the first line of the multi-line message alone (truncated log)
    "[ 1.0] NVRM: The NVIDIA GPU 0000:b3:00.0\n",
    "[ 1.0] nvidia-nvswitch0: SXid (PCI:zzzz:04:00.0): 22013, Non-fatal, x\n",
    "[ 1.0] nvidia-nvswitch0: SXid (PCI:0000:04:00.0): 22013, Data {0x0",
    "NVRM: GPU " + "0" * 5000 + ": RmInitAdapter failed!\n",
    "SXid (" * 2000 + "\n",
])
def test_hostile_fault_and_sxid_lines_never_raise_and_invent_no_gpu(text):
    parsed = parse_kernel_log(text)
    assert "0000:b3:00.0" not in parsed["faults"] and "zzzz" not in str(parsed["nvswitch"])
    assert parsed["faults"].get("0000:41:00.0", {}).get("fallen_off_bus") is None
    full, stored = parsed, parse_kernel_log(reduce_kernel_log(text, "dmesg"))
    assert (stored["faults"], stored["faults_no_address"], stored["nvswitch"], stored["events"]) == \
        (full["faults"], full["faults_no_address"], full["nvswitch"], full["events"])


def test_live_capture_of_the_new_messages_is_recorded_reduced_and_replays(tmp_path):
    names = ("journal-k-b-fallen-off-bus-no-xid.txt", "dmesg-rminitadapter-failed.txt", "dmesg-nvswitch-sxid.txt")
    text = "".join(fixture(name) for name in names)
    fake = FakeHost({"journalctl": text})
    root, recorder = _live(fake)
    live = health._kernel_log(root)
    assert sorted(live["faults"]) == ["0000:01:00.0", "0000:04:01.0", "0000:b3:00.0"]
    assert sorted(live["nvswitch"]) == ["0000:04:00.0", "0000:84:00.0"]
    stored = recorder.commands["kernel-log"]["stdout"]
    assert "fallen off the bus" in stored and "SXid" in stored and "RmInitAdapter failed" in stored
    assert "mlx5_core" not in stored and "osInitNvMapping" not in stored
    replayed = replay_recording(recorder, tmp_path)
    assert health._kernel_log(replayed) == live and replayed.errors == []


def test_quoted_pid_and_function_in_the_address():
    text = ("[ 1.000000] NVRM: Xid (PCI:0000:01:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error\n"
            "[ 2.000000] NVRM: Xid (PCI:0000:00:01.0): 79, pid='<unknown>', name='<unknown>', GPU has fallen off the bus.\n")
    parsed = parse_kernel_log(text)
    assert parsed["by_gpu"]["0000:01:00.0"]["48"]["message"] == "An uncorrectable double bit error"
    assert parsed["by_gpu"]["0000:00:01.0"]["79"]["message"] == "GPU has fallen off the bus."


@pytest.mark.parametrize("text, unparsed", [
    ("[ 1.0] NVRM: Xid (PCI:zzzz:41:00): 79, GPU has fallen off the bus.\n", 1),
    ("[ 1.0] NVRM: Xid (PCI:0000:4", 1),                       # truncated mid-line
    ("NVRM: Xid 79\n", 1),
    ("\x00\xff garbage \x1b[31m\n\n", 0),
    ("", 0),
])
def test_hostile_kernel_logs_never_raise(text, unparsed):
    parsed = parse_kernel_log(text)
    assert parsed["events"] == 0 and parsed["by_gpu"] == {}
    assert parsed["unparsed"] == unparsed
    assert (parsed["unparsed_example"] is None) == (unparsed == 0)


def test_lines_not_understood_keep_the_first_three_and_are_judged_unknown():
    # Xid lines of a shape the parser does not read beside one it does (issue 36 item 9)
    lines = ["[ %d.0] NVRM: Xid (PCI:0000:43:00): pid=%d, name=python3, Ch 00000008" % (n, n) for n in range(1, 6)]
    text = "\n".join(lines + ["[ 9.0] NVRM: Xid (PCI:0000:44:00): 79, pid=1, name=x, GPU has fallen off the bus."])
    parsed = parse_kernel_log(text)
    assert parsed["unparsed"] == 5 and parsed["events"] == 1
    assert parsed["unparsed_lines"] == [line.strip() for line in lines[:3]]
    from helpers.baseline_facts import healthy_facts  # pylint: disable=import-outside-toplevel
    from helpers.health_facts import add_health  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge import evaluation  # pylint: disable=import-outside-toplevel
    facts = healthy_facts()
    add_health(facts)
    facts["health"]["kernel_log"].update(unparsed=parsed["unparsed"], unparsed_example=parsed["unparsed_example"],
                                         unparsed_lines=parsed["unparsed_lines"])
    result = evaluation.evaluate(facts, profile="amd-epyc-nvidia", params={"smt": "on"}, host="gpu01",
                                 today="2026-12-01")
    (finding,) = [f for f in result["findings"] if f["id"] == "HEALTH-025"]
    assert finding["status"] == "unknown"
    assert finding["message"].count("Ch 00000008") == 3 and "5 NVRM Xid or SXid line(s)" in finding["message"]


def test_kernel_log_not_text_is_none():
    assert parse_kernel_log(None) is None and parse_kernel_log(b"NVRM: Xid") is None


def test_a_header_count_of_thousands_of_digits_is_no_header_not_a_crash():
    # int() of 5,000 digits raised ValueError out of the parser (tests/fuzz/test_fuzz_kernel_log.py)
    line = "[ 1.000000] NVRM: Xid (PCI:0000:41:00): 79, GPU has fallen off the bus.\n"
    parsed = parse_kernel_log("# gpuhost.baseline kernel log: %s lines read from x, 1 kept\n" % ("9" * 5000) + line)
    assert parsed["source"] is None and parsed["lines"] == 2 and parsed["events"] == 1


def test_blank_and_carriage_return_lines_are_not_counted_the_same_raw_and_stored():
    text = "\r\n[ 1.0] kernel: a\r\n\n\n[ 2.0] NVRM: Xid (PCI:0000:41:00): 79, x\r\n\r\n"
    raw = parse_kernel_log(text)
    stored = parse_kernel_log(reduce_kernel_log(text, "dmesg"))
    assert raw["lines"] == stored["lines"] == 2
    expected = {"0000:41:00.0": {"79": {"count": 1, "first_s": 2.0, "last_s": 2.0, "message": "x"}}}
    assert raw["by_gpu"] == stored["by_gpu"] == expected


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="\n\r ka", max_size=40), st.integers(min_value=1, max_value=8))
def test_line_count_is_the_non_empty_lines_whatever_the_pieces(text, piece):
    # the count of a piece without empty lines is taken without splitting it: same result
    expected = len([line for line in text.split("\n") if line not in ("", "\r")])
    saved = health._PIECE
    health._PIECE = piece
    try:
        assert parse_kernel_log(text)["lines"] == expected
        assert parse_kernel_log(reduce_kernel_log(text, "dmesg"))["lines"] == expected
    finally:
        health._PIECE = saved


def test_gpu_and_code_pairs_beyond_the_limit_are_counted_not_kept(monkeypatch):
    monkeypatch.setattr(health, "MAX_XID_ENTRIES", 3)
    text = "".join("[ %d.0] NVRM: Xid (PCI:0000:%02x:00): 79, x\n" % (i, i) for i in range(10))
    text += "[ 99.0] NVRM: Xid (PCI:0000:01:00): 79, again\n"
    parsed = parse_kernel_log(text)
    assert parsed["events"] == 11 and parsed["dropped"] == 7
    assert sorted(parsed["by_gpu"]) == ["0000:00:00.0", "0000:01:00.0", "0000:02:00.0"]
    assert parsed["by_gpu"]["0000:01:00.0"]["79"]["count"] == 2  # a pair already kept still counts


def test_xid_lines_beyond_a_journal_read_are_skipped_and_said(tmp_path, monkeypatch):
    monkeypatch.setattr(health, "MAX_XID_LINES", 5)
    monkeypatch.setattr(health, "_PIECE", 64)  # and the lines come in many pieces
    text = "".join("[ %d.0] NVRM: Xid (PCI:0000:41:00): 79, x\n[ %d.5] kernel: other\n" % (i, i) for i in range(8))
    parsed = parse_kernel_log(text)
    assert (parsed["events"], parsed["skipped"], parsed["lines"]) == (5, 3, 16)
    assert parsed["by_gpu"]["0000:41:00.0"]["79"]["last_s"] == 4.0
    write_tree(str(tmp_path), {"/proc/driver/nvidia/version": "NVRM version: x\n",
                               "/commands/journalctl-k-b.txt": text})
    root = Root(str(tmp_path))
    section = gather(root)["kernel_log"]
    assert "skipped" not in section and "dropped" not in section and section["events"] == 5
    assert any(e["reason"].startswith("3 NVRM Xid line(s) after the first 5 not read") for e in root.errors)


# -- nvidia-smi nvlink -s ----------------------------------------------------------------------
def test_nvlink_h100_pcie_pair_with_bridges():
    parsed = parse_nvlink_status(fixture("nvlink-s-h100-pcie-bridged.txt"))
    assert parsed["unrecognised"] == [] and parsed["note"] is None
    assert [g["index"] for g in parsed["gpus"]] == [0, 1]
    gpu = parsed["gpus"][1]
    assert (gpu["name"], gpu["uuid"]) == ("NVIDIA H100 PCIe", "GPU-9d24b6e1-7c03-4f5a-8e61-2b9c0d7e3f52")
    assert (gpu["supported"], gpu["links_total"], gpu["links_active"]) == (True, 18, 12)
    assert gpu["speeds_gbps"] == {"26.562": 12}
    assert gpu["inactive"] == [4, 5, 10, 11, 16, 17] and gpu["unknown"] == []


def test_nvlink_not_supported_and_all_inactive():
    none = parse_nvlink_status(fixture("nvlink-s-not-supported.txt"))["gpus"][0]
    assert (none["supported"], none["links_total"], none["links_active"]) == (False, 0, 0)
    assert none["note"] == "NVML: Unable to retrieve NVLink information: Not Supported"
    inactive = parse_nvlink_status(fixture("nvlink-s-all-inactive.txt"))["gpus"]
    assert [(g["supported"], g["links_active"]) for g in inactive] == [(True, 0), (True, 0)]
    assert "all links are inActive" in inactive[1]["note"]


def test_nvlink_message_without_gpu_line_concerns_every_gpu():
    parsed = parse_nvlink_status("NVML: Unable to retrieve Nvlink information as all links are inActive\n")
    assert parsed == {"gpus": [], "unrecognised": [],
                      "note": "NVML: Unable to retrieve Nvlink information as all links are inActive"}


def test_nvlink_zero_speed_is_inactive_and_odd_states_are_kept_apart():
    parsed = parse_nvlink_status("GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-abc)\n\t Link 0: 25 GB/s\n"
                                 "\t Link 1: 0 GB/s\n\t Link 2: some future status\n\t Link 3: 12.5 GB/s\n")
    gpu = parsed["gpus"][0]
    assert (gpu["links_total"], gpu["links_active"], gpu["inactive"]) == (4, 2, [1])
    assert gpu["speeds_gbps"] == {"25": 1, "12.5": 1}
    assert gpu["unknown"] == [{"link": 2, "text": "some future status"}]


@pytest.mark.parametrize("text", ["", "\x1b[31m\x1b[0m\n", "garbage\nLink 0: 26 GB/s\n", None, b"GPU 0: x"])
def test_nvlink_garbage_is_none(text):
    assert parse_nvlink_status(text) is None


def test_nvlink_truncated_keeps_what_was_read():
    text = fixture("nvlink-s-h100-pcie-bridged.txt")
    parsed = parse_nvlink_status(text[:text.index("Link 7:", text.index("GPU 1:")) + 4])
    assert [g["links_total"] for g in parsed["gpus"]] == [18, 7]
    assert parsed["unrecognised"] == ["Link"]


# -- systemctl show, infiniband sysfs values -----------------------------------------------------
def test_systemctl_show_fabricmanager():
    assert parse_systemctl_show(fixture("systemctl-show-fabricmanager-active.txt")) == {
        "LoadState": "loaded", "ActiveState": "active", "SubState": "running", "UnitFileState": "enabled"}
    assert parse_systemctl_show(fixture("systemctl-show-fabricmanager-not-found.txt"))["LoadState"] == "not-found"
    assert parse_systemctl_show("System has not been booted with systemd as init system (PID 1).\n") is None
    assert parse_systemctl_show(None) is None


@pytest.mark.parametrize("text, expected", [
    ("4: ACTIVE\n", (4, "ACTIVE")), ("1: DOWN", (1, "DOWN")), ("5: LinkUp\n", (5, "LinkUp")),
    ("2: Polling\n", (2, "Polling")), ("7: Phy Test\n", (7, "Phy Test")),
    ("ACTIVE\n", None), ("\xff\xfe\n", None), ("", None), (None, None), ("4:", None),
])
def test_ib_state(text, expected):
    assert parse_ib_state(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("400 Gb/sec (4X NDR)\n", (400.0, "4X NDR")), ("200 Gb/sec (4X HDR)", (200.0, "4X HDR")),
    ("2.5 Gb/sec (1X SDR)\n", (2.5, "1X SDR")), ("10 Gb/sec (4X)\n", (10.0, "4X")),
    ("fast\n", None), ("-22", None), ("", None), (None, None),
])
def test_ib_rate(text, expected):
    assert parse_ib_rate(text) == expected


# -- gather over snapshot roots --------------------------------------------------------------------
GPU_DEV = "/sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0"
NIC_DEV = "/sys/devices/pci0000:40/0000:40:03.1/0000:45:00.0"
SWITCH_DEV = "/sys/devices/pci0000:40/0000:40:05.1/0000:4a:00.0"


def _host(tmp_path, extra=None, links=True, nvswitch=False):
    files = {
        "/proc/driver/nvidia/version": "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.133.20\n",
        GPU_DEV + "/vendor": "0x10de\n", GPU_DEV + "/class": "0x030200\n",
        NIC_DEV + "/vendor": "0x15b3\n", NIC_DEV + "/class": "0x020700\n",
        NIC_DEV + "/infiniband/mlx5_0/ports/1/state": "4: ACTIVE\n",
        NIC_DEV + "/infiniband/mlx5_0/ports/1/phys_state": "5: LinkUp\n",
        NIC_DEV + "/infiniband/mlx5_0/ports/1/rate": "400 Gb/sec (4X NDR)\n",
        NIC_DEV + "/infiniband/mlx5_0/ports/1/link_layer": "InfiniBand\n",
        "/sys/devices/system/edac/mc/mc0/mc_name": "F1Ah\n",
        "/sys/devices/system/edac/mc/mc0/ce_count": "7\n",
        "/sys/devices/system/edac/mc/mc0/ue_count": "0\n",
        "/sys/devices/system/edac/mc/mc0/dimm0/dimm_label": "P0_CH_A_DIMM_0\n",
        "/sys/devices/system/edac/mc/mc0/dimm0/dimm_ce_count": "7\n",
        "/sys/devices/system/edac/mc/mc0/dimm0/dimm_ue_count": "0\n",
        "/sys/module/nvidia_peermem": None,
        "/commands/journalctl-k-b.txt": reduce_kernel_log(fixture("journal-k-b-xid.txt"), "journalctl -k -b"),
        "/commands/nvidia-smi-nvlink-s.txt": fixture("nvlink-s-not-supported.txt"),
    }
    if nvswitch:
        files[SWITCH_DEV + "/vendor"] = "0x10de\n"
        files[SWITCH_DEV + "/class"] = "0x068000\n"
        files["/commands/systemctl-show-nvidia-fabricmanager.txt"] = fixture("systemctl-show-fabricmanager-failed.txt")
        files["/commands/nv-fabricmanager-version.txt"] = fixture("nv-fabricmanager-version.txt")
    files.update(extra or {})
    base = write_tree(tmp_path, dict((k, v) for k, v in files.items() if v is not False))
    os.makedirs(os.path.join(base, "sys/bus/pci/devices"))
    os.makedirs(os.path.join(base, "sys/class/infiniband"))
    for dev in (GPU_DEV, NIC_DEV) + ((SWITCH_DEV,) if nvswitch else ()):
        parent, name = dev.split("/")[-2:]
        os.symlink("../../../devices/pci0000:40/%s/%s" % (parent, name), os.path.join(base, "sys/bus/pci/devices", name))
    if links:
        os.symlink("../../devices/pci0000:40/0000:40:03.1/0000:45:00.0/infiniband/mlx5_0",
                   os.path.join(base, "sys/class/infiniband/mlx5_0"))
        os.symlink("../../../0000:45:00.0", os.path.join(base, NIC_DEV.lstrip("/"), "infiniband/mlx5_0/device"))
    return Root(base)


def test_gather_snapshot_with_everything(tmp_path):
    root = _host(tmp_path)
    facts = gather(root)
    assert root.errors == []
    assert facts["nvidia_seen"] is True
    log = facts["kernel_log"]
    assert (log["source"], log["lines"], log["events"], log["truncated"], log["error"]) == \
        ("journalctl -k -b", 14, 9, False, None)
    assert log["by_gpu"]["0000:2b:00.0"]["79"]["count"] == 1
    assert facts["nvlink"]["gpus"][0]["supported"] is False
    assert facts["fabric_manager"] == {"nvswitches": [], "checked": False, "load_state": None, "active_state": None,
                                       "sub_state": None, "unit_file_state": None, "version": None,
                                       "version_error": None, "error": None}
    assert facts["peermem"] == {"nvidia_peermem": True, "nv_peer_mem": False}
    (dev,) = facts["rdma"]["devices"]
    assert (dev["name"], dev["pci_address"], dev["error"]) == ("mlx5_0", "0000:45:00.0", None)
    assert dev["ports"] == [{"port": 1, "state": "ACTIVE", "state_code": 4, "phys_state": "LinkUp",
                             "phys_state_code": 5, "rate": "400 Gb/sec (4X NDR)", "rate_gbps": 400.0,
                             "link_layer": "InfiniBand", "error": None}]
    (mc,) = facts["edac"]["controllers"]
    assert (mc["name"], mc["mc_name"], mc["ce_count"], mc["ue_count"]) == ("mc0", "F1Ah", 7, 0)
    assert mc["dimms"] == [{"name": "dimm0", "label": "P0_CH_A_DIMM_0", "ce_count": 7, "ue_count": 0}]
    assert facts["edac"]["present"] is True
    json.dumps(facts)


def test_gather_nvswitch_host_reads_fabric_manager(tmp_path):
    root = _host(tmp_path, nvswitch=True)
    fabric = gather(root)["fabric_manager"]
    assert root.errors == []
    assert fabric["nvswitches"] == ["0000:4a:00.0"] and fabric["checked"] is True
    assert (fabric["load_state"], fabric["active_state"], fabric["sub_state"]) == ("loaded", "failed", "failed")
    assert (fabric["version"], fabric["version_error"]) == ("535.161.08", None)


def test_gather_host_without_nvidia_runs_nothing_and_reports_nothing(tmp_path):
    base = write_tree(tmp_path, {"/sys/bus/pci/devices": None})
    root = Root(base)
    facts = gather(root)
    assert root.errors == []
    assert facts["nvidia_seen"] is False and facts["kernel_log"] is None and facts["nvlink"] is None
    assert facts["rdma"] == {"devices": []}
    assert facts["edac"] == {"present": False, "controllers": []}
    assert facts["peermem"] == {"nvidia_peermem": False, "nv_peer_mem": False}


def test_gather_old_snapshot_without_the_captures_names_them(tmp_path):
    root = _host(tmp_path, extra={"/commands/journalctl-k-b.txt": False, "/commands/nvidia-smi-nvlink-s.txt": False})
    facts = gather(root)
    assert facts["kernel_log"]["error"] == ("kernel log not read: commands/journalctl-k-b.txt not captured in "
                                            "snapshot (missing)")
    assert facts["kernel_log"]["by_gpu"] is None
    assert facts["nvlink"]["error"] == "commands/nvidia-smi-nvlink-s.txt not captured in snapshot (missing)"
    assert sorted(e["path"] for e in root.errors) == ["commands/journalctl-k-b.txt", "commands/nvidia-smi-nvlink-s.txt"]


def test_gather_hostile_values_give_errors_naming_the_file(tmp_path):
    port = NIC_DEV + "/infiniband/mlx5_0/ports/1"
    root = _host(tmp_path, extra={
        port + "/state": b"\xff\xfe\n", port + "/rate": "fast\n", port + "/phys_state": False,
        "/sys/devices/system/edac/mc/mc0/ce_count": "banana\n",
        "/commands/journalctl-k-b.txt": b"# gpuhost.baseline kernel log: 0 lines read from journalctl -k -b, 0 kept\n",
        "/commands/nvidia-smi-nvlink-s.txt": b"\x1b[31m\xff\n\t Link",
    })
    facts = gather(root)
    json.dumps(facts)
    reasons = dict((e["path"], e["reason"]) for e in root.errors)
    port = "/sys/class/infiniband/mlx5_0/ports/1"  # read through the class link
    assert reasons[port + "/rate"] == "not 'N Gb/sec (...)': 'fast'"
    assert reasons[port + "/phys_state"] == "missing"
    assert reasons["/sys/devices/system/edac/mc/mc0/ce_count"] == "not an integer: 'banana'"
    assert "printed no 'GPU n:' line" in reasons["nvidia-smi nvlink -s"]
    assert "kernel log of this boot is empty" in reasons["journalctl -k -b"]
    (dev,) = facts["rdma"]["devices"]
    assert dev["ports"][0]["state"] is None and dev["ports"][0]["rate_gbps"] is None
    assert port + "/rate is not 'N Gb/sec" in dev["ports"][0]["error"]
    assert facts["kernel_log"]["by_gpu"] is None and facts["edac"]["controllers"][0]["ce_count"] is None


def test_gather_rdma_link_flattened_or_dangling(tmp_path):
    root = _host(tmp_path, links=False)
    os.symlink("../../devices/pci0000:ff/0000:ff:00.0/infiniband/mlx5_9",
               os.path.join(root.root, "sys/class/infiniband/mlx5_9"))
    facts = gather(root)
    (dev,) = facts["rdma"]["devices"]
    assert dev["name"] == "mlx5_9" and dev["pci_address"] is None and dev["ports"] == []
    assert "PCI function of this RDMA device is unknown" in dev["error"]
    assert any(e["path"] == "/sys/class/infiniband/mlx5_9/ports" for e in root.errors)


# -- live: the capture is recorded reduced, and a snapshot of it gives the same facts ---------------
class FakeHost:
    def __init__(self, outputs, missing=()):
        self.outputs = outputs
        self.missing = missing
        self.ran = []

    def which(self, name):
        return None if name in self.missing else "/usr/bin/" + name

    def run(self, argv):
        self.ran.append(argv)
        return 0, self.outputs[os.path.basename(argv[0])], ""


def _live(fake):
    recorder = Recorder()
    return Root("/", run_command=fake.run, which=fake.which, recorder=recorder), recorder


def test_live_journal_is_recorded_reduced_and_replays(tmp_path):
    fake = FakeHost({"journalctl": fixture("journal-k-b-xid.txt")})
    root, recorder = _live(fake)
    live = health._kernel_log(root)
    assert fake.ran == [["/usr/bin/journalctl"] + COMMAND_ARGV["kernel-log"][1:]]
    assert "-n" in fake.ran[0] and live["events"] == 9 and root.errors == []
    stored = recorder.commands["kernel-log"]
    assert stored["file"] == COMMAND_CAPTURES["kernel-log"]
    assert "Linux version" not in stored["stdout"] and stored["stdout"].count("NVRM: Xid") == 8
    replayed = replay_recording(recorder, tmp_path)
    assert health._kernel_log(replayed) == live and replayed.errors == []


def test_live_without_journalctl_falls_back_to_dmesg(tmp_path):
    fake = FakeHost({"dmesg": fixture("dmesg-xid-79.txt")}, missing=("journalctl",))
    root, recorder = _live(fake)
    section = health._kernel_log(root)
    assert section["source"] == "dmesg" and section["by_gpu"]["0000:03:00.0"]["79"]["count"] == 1
    assert root.errors == []  # journalctl's absence is not an error when dmesg answers
    assert recorder.commands["kernel-log"]["error"] == "journalctl not found in PATH"
    # the snapshot.json written by write_snapshot replays the journal's failure, then reads dmesg
    replayed = replay_recording(recorder, tmp_path)
    assert health._kernel_log(replayed) == section and replayed.errors == []


def test_live_truncated_journal_is_flagged():
    lines = "".join("[ %d.000000] h kernel: line %d\n" % (i, i) for i in range(health.KERNEL_LOG_LINES))
    root, _recorder = _live(FakeHost({"journalctl": lines}))
    section = health._kernel_log(root)
    assert section["truncated"] is True and section["lines"] == health.KERNEL_LOG_LINES


def test_live_nothing_found_names_both_commands():
    root, _recorder = _live(FakeHost({}, missing=("journalctl", "dmesg")))
    section = health._kernel_log(root)
    assert section["error"] == "kernel log not read: journalctl not found in PATH; dmesg not found in PATH"


# -- the previous boot (gpuhost_kernel_log_boots 2) ------------------------------------------------
PREVIOUS_ID = "3c5e9a1f0b7d4c2e8a6f1d3b5c7e9a0f"
CURRENT_ID = "9f1c2b3a4d5e6f708192a3b4c5d6e7f8"


@pytest.mark.parametrize("name", ["journalctl-list-boots-v252.txt", "journalctl-list-boots-v255.txt"])
def test_list_boots_of_old_and_new_systemd_name_the_current_and_previous_boot(name):
    boots = health.parse_list_boots(fixture(name))
    assert boots["boots"] == 3 and boots["unrecognised"] == 0
    assert (boots["current"]["boot_id"], boots["previous"]["boot_id"]) == (CURRENT_ID, PREVIOUS_ID)
    assert boots["previous"]["offset"] == -1 and boots["previous"]["span"].startswith("Wed 2026-12-02 08:01:12 UTC")


def test_list_boots_of_a_journal_with_one_boot_has_no_previous():
    boots = health.parse_list_boots(fixture("journalctl-list-boots-one.txt"))
    assert boots["boots"] == 1 and boots["current"]["boot_id"] == CURRENT_ID and boots["previous"] is None


@pytest.mark.parametrize("text", ["", "\n\n", "No journal files were found.\n", "-1 notahexid Mon\n",
                                  "-1 " + "a" * 31 + "\n", "9" * 5000 + " " + "a" * 32 + "\n", "\x00\r\n-1\t" * 999,
                                  "-1 " + "A" * 32 + " x\n" + "garbage\n" * 3])
def test_list_boots_hostile_never_raises(text):
    boots = health.parse_list_boots(text)
    assert set(boots) == {"current", "previous", "boots", "unrecognised"}
    if text.startswith("-1 AAAA"):
        assert boots["previous"]["boot_id"] == "a" * 32 and boots["unrecognised"] == 3
    assert health.parse_list_boots(None) is None and health.parse_list_boots(b"-1") is None


def test_list_boots_reads_only_the_tail_of_a_huge_list():
    text = "".join("%d %032x x—y\n" % (-n, n) for n in range(60000, 0, -1)) + "0 %s x—y\n" % CURRENT_ID
    boots = health.parse_list_boots(text)
    assert boots["current"]["boot_id"] == CURRENT_ID and boots["previous"]["boot_id"] == "%032x" % 1
    assert boots["boots"] < 60001 and boots["unrecognised"] == 0


@pytest.mark.parametrize("value,expected", [(1, 1), (2, 2), (0, 1), (3, 1), (True, 1), ("2", 1), (None, 1), (2.0, 1)])
def test_kernel_log_boots_bounds(value, expected):
    boots, error = health.check_kernel_log_boots(value)
    assert boots == expected and (error is None) == (value in (1, 2) and value is not True and isinstance(value, int))


class JournalHost(FakeHost):
    """journalctl answering per argv: the boot list, the previous boot's log, the current boot's."""

    def run(self, argv):
        self.ran.append(argv)
        if "--list-boots" in argv:
            return 0, self.outputs["boots"], ""
        if "-1" in argv:
            return self.outputs.get("previous-rc", 0), self.outputs["previous"], self.outputs.get("previous-err", "")
        return 0, self.outputs["journalctl"], ""


def test_live_previous_boot_read_named_by_boot_id_recorded_reduced_and_replayed(tmp_path):
    fake = JournalHost({"journalctl": fixture("journal-k-b-xid.txt"), "boots": fixture("journalctl-list-boots-v252.txt"),
                        "previous": fixture("journal-k-b-1-previous.txt")})
    root, recorder = _live(fake)
    current = health._kernel_log(root)
    previous = health._previous_kernel_log(root, current)
    assert [a[1:] for a in fake.ran] == [COMMAND_ARGV[c][1:] for c in ("kernel-log", "kernel-boots", "kernel-log-previous")]
    assert root.errors == []
    assert (current["boot_id"], previous["boot_id"], previous["boot_offset"]) == (CURRENT_ID, PREVIOUS_ID, -1)
    assert previous["source"] == "journalctl -k -b -1" and previous["error"] is None and previous["lines"] == 9
    assert previous["by_gpu"]["0000:41:00.0"]["79"]["count"] == 1
    assert previous["faults"]["0000:41:00.0"]["fallen_off_bus"]["count"] == 1
    assert previous["nvswitch"]["0000:84:00.0"]["codes"]["12028"]["severity"] == "fatal"
    stored = recorder.commands["kernel-log-previous"]
    assert stored["file"] == COMMAND_CAPTURES["kernel-log-previous"] == "commands/journalctl-k-b-1.txt"
    assert "Linux version" not in stored["stdout"] and "systemd-shutdown" not in stored["stdout"]
    assert stored["stdout"].startswith("# gpuhost.baseline kernel log: 9 lines read from journalctl -k -b -1, 5 kept")
    replayed = replay_recording(recorder, tmp_path)
    again = health._kernel_log(replayed)
    assert health._previous_kernel_log(replayed, again) == previous and again == current and replayed.errors == []


def test_live_previous_boot_unknown_with_dmesg_runs_no_journal(tmp_path):
    fake = FakeHost({"dmesg": fixture("dmesg-xid-79.txt")}, missing=("journalctl",))
    root, recorder = _live(fake)
    previous = health._previous_kernel_log(root, health._kernel_log(root))
    assert "dmesg holds the current boot only" in previous["error"] and previous["by_gpu"] is None
    assert [os.path.basename(a[0]) for a in fake.ran] == ["dmesg"] and root.errors == []
    replayed = replay_recording(recorder, tmp_path)
    assert health._previous_kernel_log(replayed, health._kernel_log(replayed)) == previous


def test_live_journal_with_one_boot_leaves_the_previous_boot_unknown_and_unread():
    fake = JournalHost({"journalctl": fixture("journal-k-b-xid.txt"), "boots": fixture("journalctl-list-boots-one.txt"),
                        "previous": ""})
    root, _recorder = _live(fake)
    previous = health._previous_kernel_log(root, health._kernel_log(root))
    assert previous["error"].startswith("journalctl --list-boots lists no previous boot (1 boot(s) in the journal)")
    assert not [a for a in fake.ran if "-1" in a] and previous["boot_id"] is None


def test_live_failed_previous_read_is_unknown_with_the_reason():
    fake = JournalHost({"journalctl": fixture("journal-k-b-xid.txt"), "boots": fixture("journalctl-list-boots-v255.txt"),
                        "previous": "", "previous-rc": 1,
                        "previous-err": "Data from the specified boot (-1) is not available: No such boot ID in journal"})
    root, _recorder = _live(fake)
    previous = health._previous_kernel_log(root, health._kernel_log(root))
    assert previous["boot_id"] == PREVIOUS_ID and "not read" in previous["error"] and "No such boot ID" in previous["error"]


def test_gather_reads_the_previous_boot_only_when_asked(tmp_path):
    extra = {"/commands/journalctl-list-boots.txt": fixture("journalctl-list-boots-v252.txt"),
             "/commands/journalctl-k-b-1.txt": reduce_kernel_log(fixture("journal-k-b-1-previous.txt"),
                                                                 "journalctl -k -b -1")}
    one = _host(tmp_path / "one", extra)
    facts = gather(one)
    assert facts["kernel_log_boots"] == 1 and facts["kernel_log_previous"] is None and one.errors == []
    two = _host(tmp_path / "two", extra)
    facts = gather(two, kernel_log_boots=2)
    assert facts["kernel_log_boots"] == 2 and two.errors == []
    assert facts["kernel_log_previous"]["boot_id"] == PREVIOUS_ID and facts["kernel_log"]["boot_id"] == CURRENT_ID
    assert facts["kernel_log_previous"]["faults"]["0000:41:00.0"]["fallen_off_bus"]["count"] == 1
    json.dumps(facts)
    # a snapshot captured with one boot, read with two: unknown, naming the missing capture
    old = _host(tmp_path / "old")
    facts = gather(old, kernel_log_boots=2)
    assert facts["kernel_log_previous"]["error"] == ("the journal's boots were not listed: "
                                                     "commands/journalctl-list-boots.txt not captured in snapshot (missing)")
    # bad input is an error of the facts, never a traceback: one boot is read
    bad = _host(tmp_path / "bad", extra)
    facts = gather(bad, kernel_log_boots="3; rm -rf /")
    assert facts["kernel_log_boots"] == 1 and facts["kernel_log_previous"] is None
    assert [e["path"] for e in bad.errors] == ["kernel_log_boots"]


def test_gather_facts_passes_the_option_to_health_only(tmp_path):
    from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.gather import gather_facts  # pylint: disable=import-outside-toplevel

    extra = {"/commands/journalctl-list-boots.txt": fixture("journalctl-list-boots-one.txt")}
    facts = gather_facts(_host(tmp_path, extra), ["health", "kernel"], {"kernel_log_boots": 2})
    assert facts["health"]["kernel_log_boots"] == 2 and "no previous boot" in facts["health"]["kernel_log_previous"]["error"]
    assert facts["kernel"] is not None
