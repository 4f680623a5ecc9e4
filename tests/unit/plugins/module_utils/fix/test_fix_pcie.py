"""pcie_tune logic: selection, Device Control/ACS planning, MaxPayload safety, boot files, apply on a copy."""
import errno
import os
import shutil
import struct

import pytest

from helpers.fixhost import FakeModule

from ansible_collections.gpuhost.baseline.plugins.module_utils.fix import pcie as _fix_pcie
from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.base import FixError, Host
from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.pcie import (
    ACSCTL_REG, DEVCTL_REG, apply, auto_acs_bridges, check_payload, covers, express_registers, merge_entries,
    normalize_address, normalize_vendor, parse_script, plan_acs, plan_devctl, render_script, render_udev,
    render_unit, select_devices)
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.pci import gather, parse_config
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root

GPU = "0000:43:00.0"
GPU_CONFIG = "sys/bus/pci/devices/%s/config" % GPU


class StubModule(FakeModule):
    """Only setpci exists (by default); every command succeeds and is recorded."""

    def __init__(self, check_mode=False, bins=("setpci",)):
        super(StubModule, self).__init__(check_mode=check_mode, binaries=bins)


@pytest.fixture
def tree(snapshot_trees, tmp_path):
    target = str(tmp_path / "incident")
    shutil.copytree(snapshot_trees["incident"], target, symlinks=True)
    return target


@pytest.fixture(scope="module")
def devices(snapshot_trees):
    return gather(Root(snapshot_trees["incident"]))["devices"]


def config(root, address):
    with open(os.path.join(root, "sys/bus/pci/devices/%s/config" % address), "rb") as handle:
        return handle.read()


def params(**kwargs):
    base = {"addresses": None, "vendor": None, "kinds": None, "max_read_request": None, "max_payload": None,
            "acs_redirect": "keep", "acs_bridges": ["auto"], "persist": True}
    base.update(kwargs)
    return base


# -- input ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,expected", [
    ("0000:41:00.0", "0000:41:00.0"), ("41:00.0", "0000:41:00.0"), ("0000:C1:1F.7", "0000:c1:1f.7"),
    ("10000:01:00.0", "10000:01:00.0"), ("41:20.0", None), ("41:00.8", None), ("gpu0", None), ("", None), (None, None),
])
def test_normalize_address(text, expected):
    assert normalize_address(text) == expected


def test_normalize_vendor():
    assert normalize_vendor("10DE") == "0x10de"
    assert normalize_vendor("0x15b3") == "0x15b3"
    assert normalize_vendor("nvidia") is None
    assert normalize_vendor("0x12345") is None


def test_select_by_kind_and_vendor_is_an_and(devices):
    gpus = select_devices(devices, kinds=["gpu"])
    assert [d["address"] for d in gpus] == ["0000:43:00.0", "0000:44:00.0", "0000:47:00.0", "0000:48:00.0",
                                            "0000:c3:00.0", "0000:c4:00.0", "0000:c7:00.0", "0000:c8:00.0"]
    nics = select_devices(devices, kinds=["nic"])
    assert [d["address"] for d in nics] == ["0000:49:00.0", "0000:c9:00.0"]
    assert select_devices(devices, vendors=["0x10de"], kinds=["nic"]) == []
    mellanox = select_devices(devices, vendors=["15b3"])
    assert [d["kind"] for d in mellanox] == ["nic", "nic"]


def test_select_missing_address_names_it(devices):
    with pytest.raises(FixError) as info:
        select_devices(devices, addresses=["0000:43:00.0", "0000:99:00.0"])
    assert "0000:99:00.0 does not exist" in info.value.msg
    assert info.value.result["missing"] == ["0000:99:00.0"]


def test_select_listed_address_filtered_out_is_an_error(devices):
    with pytest.raises(FixError) as info:
        select_devices(devices, addresses=["49:00.0"], kinds=["gpu"])
    assert "0000:49:00.0 is listed in addresses but it is a nic" in info.value.msg


def test_select_bad_selector_values(devices):
    with pytest.raises(FixError, match="not a PCI address"):
        select_devices(devices, addresses=["gpu0"])
    with pytest.raises(FixError, match="not a PCI vendor id"):
        select_devices(devices, vendors=["nvidia"])
    with pytest.raises(FixError, match="not one of"):
        select_devices(devices, kinds=["fpga"])


# -- registers -------------------------------------------------------------------------------------

def test_plan_devctl_touches_only_the_read_request_bits(snapshot_trees):
    data = config(snapshot_trees["incident"], GPU)
    parsed, cap = express_registers(GPU, data, True)
    write = plan_devctl(GPU, data, cap, max_read_request=4096)
    assert (write["before"], write["after"]) == (0x293E, 0x593E)
    assert (write["value"], write["mask"]) == (0x5000, 0x7000)
    assert write["offset"] == parsed["pcie_cap_offset"] + 8
    both = plan_devctl(GPU, data, cap, max_read_request=128, max_payload=128)
    assert both["after"] == 0x091E and both["mask"] == 0x70E0


def test_express_registers_truncated_config_says_become(snapshot_trees):
    data = config(snapshot_trees["incident"], GPU)[:64]
    with pytest.raises(FixError) as info:
        express_registers(GPU, data, False)
    assert "is 64 bytes" in info.value.msg and "become: true" in info.value.msg


def test_express_registers_non_express_function(snapshot_trees):
    data = config(snapshot_trees["incident"], "0000:40:00.0")
    parsed, cap = express_registers("0000:40:00.0", data, False)
    assert cap is None and parsed["vendor_id"] == 0x1022
    with pytest.raises(FixError, match="no PCI Express capability"):
        express_registers("0000:40:00.0", data, True)


def test_express_registers_dead_function():
    with pytest.raises(FixError, match="did not answer"):
        express_registers(GPU, b"\xff" * 4096, True)


def test_plan_acs_clears_only_the_two_redirect_bits(snapshot_trees):
    data = config(snapshot_trees["incident"], "0000:42:00.0")
    write = plan_acs("0000:42:00.0", data, parse_config(data), True)
    assert write["register"] == ACSCTL_REG and write["offset"] == 0x148 + 6
    assert (write["before"], write["after"], write["mask"], write["value"]) == (0x1D, 0x11, 0x0C, 0)


def test_plan_acs_without_capability_and_truncated(snapshot_trees):
    upstream = config(snapshot_trees["incident"], "0000:41:00.0")
    assert plan_acs("0000:41:00.0", upstream, parse_config(upstream), False) is None
    with pytest.raises(FixError, match="no ACS capability"):
        plan_acs("0000:41:00.0", upstream, parse_config(upstream), True)
    short = config(snapshot_trees["incident"], "0000:42:00.0")[:256]
    with pytest.raises(FixError, match="needs 4096"):
        plan_acs("0000:42:00.0", short, parse_config(short), False)


def test_auto_acs_bridges_are_the_switch_downstream_ports(devices):
    assert auto_acs_bridges(devices) == [
        "0000:42:00.0", "0000:42:01.0", "0000:46:00.0", "0000:46:01.0",
        "0000:c2:00.0", "0000:c2:01.0", "0000:c6:00.0", "0000:c6:01.0"]


# -- MaxPayload safety -------------------------------------------------------------------------------

def payload_setup(root, devices, addresses, max_payload):
    inventory = {}
    for dev in devices:
        data = config(root, dev["address"])
        inventory[dev["address"]] = {"parsed": parse_config(data), "upstream": dev["upstream"], "data": data}
    writes = {}
    for address in addresses:
        data = inventory[address]["data"]
        writes[address] = plan_devctl(address, data, inventory[address]["parsed"]["pcie_cap_offset"],
                                      max_payload=max_payload)
    return inventory, writes


def test_payload_above_device_devcap(snapshot_trees, devices):
    inventory, writes = payload_setup(snapshot_trees["incident"], devices, [GPU], 512)
    with pytest.raises(FixError) as info:
        check_payload(inventory, writes, 512)
    assert "more than 0000:43:00.0 supports (256 bytes" in info.value.msg


def test_payload_above_an_upstream_port_devcap(snapshot_trees, devices, tmp_path):
    root = str(tmp_path / "t")
    shutil.copytree(snapshot_trees["incident"], root, symlinks=True)
    # give the GPU a DevCap of 4096 while its switch ports stop at 2048 and the root port at 512
    path = os.path.join(root, GPU_CONFIG)
    data = bytearray(config(root, GPU))
    cap = parse_config(bytes(data))["pcie_cap_offset"]
    data[cap + 4] = (data[cap + 4] & ~7) | 5
    with open(path, "wb") as handle:
        handle.write(bytes(data))
    inventory, writes = payload_setup(root, devices, [GPU], 1024)
    with pytest.raises(FixError) as info:
        check_payload(inventory, writes, 1024)
    assert "the port 0000:40:01.1 above 0000:43:00.0 supports (512 bytes" in info.value.msg


def test_payload_change_must_match_both_ends_of_each_link(snapshot_trees, devices):
    root = snapshot_trees["incident"]
    inventory, writes = payload_setup(root, devices, ["0000:49:00.0"], 512)
    with pytest.raises(FixError) as info:
        check_payload(inventory, writes, 512)
    assert "differ from 256 on 0000:40:03.1" in info.value.msg and "malformed" in info.value.msg
    inventory, writes = payload_setup(root, devices, ["0000:40:03.1", "0000:49:00.0"], 512)
    check_payload(inventory, writes, 512)
    inventory, writes = payload_setup(root, devices, ["0000:40:03.1"], 512)
    with pytest.raises(FixError, match="differ from 256 on 0000:49:00.0"):
        check_payload(inventory, writes, 512)


def test_payload_equal_to_current_passes(snapshot_trees, devices):
    inventory, writes = payload_setup(snapshot_trees["incident"], devices, [GPU], 256)
    check_payload(inventory, writes, 256)


# -- boot files ---------------------------------------------------------------------------------------

def test_script_round_trip_and_merge():
    entries = {(GPU, DEVCTL_REG): (0x5000, 0x7000), ("0000:42:00.0", ACSCTL_REG): (0, 0x0C)}
    text = render_script(entries)
    assert text.startswith("#!/bin/sh\n")
    assert "apply 0000:43:00.0 CAP_EXP+8.w 5000:7000  # MaxReadReq 4096\n" in text
    assert "apply 0000:42:00.0 ECAP_ACS+6.w 0000:000c  # ReqRedir-, CmpltRedir-\n" in text
    assert 'setpci -s "$1" "$2=$3"' in text
    assert parse_script(text) == entries
    # a later task adds MaxPayload to the same register and another device: both kept
    merged = merge_entries(entries, {(GPU, DEVCTL_REG): (0x0020, 0x00E0), ("0000:49:00.0", DEVCTL_REG): (0x5000, 0x7000)})
    assert merged[(GPU, DEVCTL_REG)] == (0x5020, 0x70E0)
    assert merged[("0000:42:00.0", ACSCTL_REG)] == (0, 0x0C)
    assert covers(merged, entries) and not covers(entries, merged)
    # a new value for the same bits replaces the old one
    assert merge_entries(merged, {(GPU, DEVCTL_REG): (0x2000, 0x7000)})[(GPU, DEVCTL_REG)] == (0x2020, 0x70E0)


def test_parse_script_ignores_foreign_lines():
    text = "apply 0000:43:00.0 CAP_EXP+8.w 5000:7000\napply 0000:43:00.0 COMMAND.w 0004:0004\n" \
           "echo apply 0000:44:00.0 CAP_EXP+8.w 5000:7000\napply nonsense\n"
    assert parse_script(text) == {(GPU, DEVCTL_REG): (0x5000, 0x7000)}
    assert parse_script(None) == {}


def test_udev_and_unit_text():
    rules = render_udev({(GPU, DEVCTL_REG): (0x5000, 0x7000), (GPU, ACSCTL_REG): (0, 0x0C)})
    lines = [line for line in rules.splitlines() if not line.startswith("#")]
    assert lines == ['ACTION=="add|bind", SUBSYSTEM=="pci", KERNEL=="0000:43:00.0", '
                     'RUN+="/usr/local/sbin/gpuhost-pcie-apply %k"']
    unit = render_unit()
    assert "Type=oneshot" in unit and "ExecStart=/usr/local/sbin/gpuhost-pcie-apply" in unit
    assert "WantedBy=multi-user.target" in unit


# -- apply on a copy ---------------------------------------------------------------------------------

def test_apply_check_mode_writes_nothing(tree):
    before = config(tree, GPU)
    result = apply(Host(StubModule(check_mode=True), tree), params(kinds=["gpu"], max_read_request=4096), diff=True)
    assert result["changed"] and config(tree, GPU) == before
    assert not os.path.exists(os.path.join(tree, "usr/local/sbin/gpuhost-pcie-apply"))
    assert result["persisted"]["covers"] and not result["persisted_before"]["covers"]
    assert "MaxReadReq 4096" in result["diff"][0]["after"]


def test_apply_then_again_is_idempotent(tree):
    module = StubModule()
    result = apply(Host(module, tree), params(kinds=["gpu", "nic"], max_read_request=4096, acs_redirect="disable"))
    assert result["changed"]
    assert all(d["max_read_request_after"] == 4096 for d in result["runtime"]["devices"])
    assert len(result["runtime"]["bridges"]) == 8
    assert module.ran == []  # a snapshot root never runs a command
    again = apply(Host(StubModule(), tree), params(kinds=["gpu", "nic"], max_read_request=4096, acs_redirect="disable"))
    assert not again["changed"] and again["persisted"]["covers"]


def test_second_task_adds_to_the_script_and_backs_it_up(tree):
    apply(Host(StubModule(), tree), params(kinds=["gpu"], max_read_request=4096))
    host = Host(StubModule(), tree, backup=True)
    apply(host, params(kinds=["nic"], max_read_request=2048))
    with open(os.path.join(tree, "usr/local/sbin/gpuhost-pcie-apply")) as handle:
        entries = parse_script(handle.read())
    assert entries[(GPU, DEVCTL_REG)] == (0x5000, 0x7000)
    assert entries[("0000:49:00.0", DEVCTL_REG)] == (0x4000, 0x7000)
    backup = host.backups["/usr/local/sbin/gpuhost-pcie-apply"]
    with open(backup) as handle:
        assert ("0000:49:00.0", DEVCTL_REG) not in parse_script(handle.read())


def test_read_only_sysfs_fails_before_any_write(tree, monkeypatch):
    real_open = os.open
    snapshot = {a: config(tree, a) for a in ("0000:43:00.0", "0000:c8:00.0")}

    def fake_open(path, flags, *args):
        if path.endswith("/config") and flags & (os.O_WRONLY | os.O_RDWR):
            raise OSError(errno.EROFS, "Read-only file system", path)
        return real_open(path, flags, *args)

    monkeypatch.setattr(_fix_pcie.os, "open", fake_open)
    with pytest.raises(FixError) as info:
        apply(Host(StubModule(), tree), params(kinds=["gpu"], max_read_request=4096))
    assert "read-only (EROFS)" in info.value.msg and "nothing was changed" in info.value.msg
    monkeypatch.undo()
    assert all(config(tree, a) == data for a, data in snapshot.items())
    assert not os.path.exists(os.path.join(tree, "etc/systemd/system/gpuhost-pcie.service"))


def test_readback_mismatch_names_device_and_undoes_earlier_writes(tree, monkeypatch):
    real_pwrite = os.pwrite
    calls = []

    def sticky_pwrite(fd, data, offset):
        calls.append(data)
        # the third device ignores the write, like a register that is hard-wired
        if len(calls) == 3:
            return 2
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(_fix_pcie.os, "pwrite", sticky_pwrite)
    before = dict((a, config(tree, a)) for a in ("0000:43:00.0", "0000:44:00.0", "0000:47:00.0"))
    with pytest.raises(FixError) as info:
        apply(Host(StubModule(), tree), params(kinds=["gpu"], max_read_request=4096))
    assert "0000:47:00.0" in info.value.msg and "reads back 0x293e" in info.value.msg
    assert "put back" in info.value.msg
    monkeypatch.undo()
    for address, data in before.items():
        assert config(tree, address) == data, address
    assert not os.path.exists(os.path.join(tree, "usr/local/sbin/gpuhost-pcie-apply"))


def test_nothing_selected_or_nothing_asked(tree):
    with pytest.raises(FixError, match="nothing to do"):
        apply(Host(StubModule(), tree), params(kinds=["gpu"]))
    with pytest.raises(FixError, match="need devices"):
        apply(Host(StubModule(), tree), params(max_read_request=4096))
    with pytest.raises(FixError, match="no PCI device matches"):
        apply(Host(StubModule(), tree), params(vendor=["0x8086"], max_read_request=4096))


def test_live_root_needs_setpci_for_persistence(tree, monkeypatch):
    host = Host(StubModule(bins=()), tree)
    monkeypatch.setattr(host, "live", True)
    with pytest.raises(FixError, match="setpci not found"):
        apply(host, params(kinds=["gpu"], max_read_request=4096))
    assert config(tree, GPU)[0x79] == 0x29


def test_acs_bridge_list_errors(tree):
    with pytest.raises(FixError, match="not a PCI bridge"):
        apply(Host(StubModule(), tree), params(acs_redirect="disable", acs_bridges=[GPU]))
    with pytest.raises(FixError, match="does not exist"):
        apply(Host(StubModule(), tree), params(acs_redirect="disable", acs_bridges=["0000:99:00.0"]))
    with pytest.raises(FixError, match="no ACS capability"):
        apply(Host(StubModule(), tree), params(acs_redirect="disable", acs_bridges=["0000:41:00.0"]))


def test_written_bytes_are_little_endian_words(tree):
    apply(Host(StubModule(), tree), params(addresses=[GPU], max_read_request=1024, persist=False))
    data = config(tree, GPU)
    cap = parse_config(data)["pcie_cap_offset"]
    assert struct.unpack("<H", data[cap + 8:cap + 10])[0] == 0x393E
    assert not os.path.exists(os.path.join(tree, "usr/local/sbin/gpuhost-pcie-apply"))
