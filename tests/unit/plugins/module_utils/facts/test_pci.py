"""Tests of plugins/module_utils/facts/pci.py: config-space decoding, AER counters, gather().

lspci is the reference decoder: every real dump under tests/fixtures/realdata/pci/, the
live machine's devices and every generated fixture tree are decoded by both and compared.
"""
import glob
import os

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import pci as _pci
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.pci import (
    devctl_with, gather, kind, parse_aer_counters, parse_config, upstream_from_path,
)
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root
from helpers.lspci import compare, lspci_crosscheck, parse_dump, parse_verbose, run_lspci

REALDATA = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "realdata", "pci")
DUMPS = ("cap-aer-root", "cap-pcie-1", "cap-pcie-2", "cap-rebar", "tree-fujitsu-p8010")
#: devices with a PCI Express capability per dump, as the dumps' own -vvv text shows them.
EXPRESS_PER_DUMP = {"cap-aer-root": 2, "cap-pcie-1": 1, "cap-pcie-2": 1, "cap-rebar": 1, "tree-fujitsu-p8010": 5}
ROOT_MESSAGE = "config space is 64 bytes: capabilities need root; run with become: true"


def dump(name):
    with open(os.path.join(REALDATA, name)) as handle:
        return parse_dump(handle.read())


def only(name):
    devices = dump(name)
    assert len(devices) == 1
    return list(devices.values())[0]


# -- lspci agreement on real dumps ---------------------------------------------------
@pytest.mark.parametrize("name", DUMPS)
def test_real_dump_agrees_with_lspci_on_the_file_itself(name):
    path = os.path.join(REALDATA, name)
    devices = dump(name)
    reference = parse_verbose(run_lspci(path))
    assert sorted(reference) == sorted(devices)
    express = 0
    fields = 0
    for address, data in devices.items():
        fields += compare(address, data, reference[address])
        express += reference[address]["express"] is not None
    assert express == EXPRESS_PER_DUMP[name]
    assert fields >= 8 * express


@pytest.mark.parametrize("name", DUMPS)
@pytest.mark.parametrize("length", [64, 256, 4096])
def test_real_dump_cut_to_sysfs_sizes_agrees_with_lspci(name, length):
    # 64 bytes is a non-root read of sysfs config, 256 a device without extended config access.
    devices = dict((address, data[:length]) for address, data in dump(name).items())
    summary = lspci_crosscheck(devices)
    assert summary["devices"] == len(devices)
    if length == 64:
        assert summary["express"] == 0
        for data in devices.values():
            result = parse_config(data)
            if result["capabilities"] == [] and data[6] & 0x10:
                assert result["reason"] == ROOT_MESSAGE
    else:
        assert summary["express"] == EXPRESS_PER_DUMP[name]


def test_root_port_values_match_the_dump_text():
    # cap-pcie-1's own -vvv text: Root Port v2 at [90], DevCap 256, DevCtl 256/128,
    # LnkCap 5GT/s x4, LnkSta 2.5GT/s x4, AER at [100], ACS at [150] with SV..UF capable, all off.
    result = parse_config(only("cap-pcie-1"))
    assert result["reason"] is None
    assert result["header_type"] == 1
    assert result["pcie_cap_offset"] == 0x90
    assert result["pcie"] == {
        "version": 2, "port_type": "root_port", "max_payload_supported": 256, "max_payload": 256,
        "max_read_request": 128, "relaxed_ordering": False, "extended_tag": False, "no_snoop": False,
        "devctl_raw": 0x0020, "link_cap_speed": "5GT/s", "link_cap_width": 4, "link_speed": "2.5GT/s",
        "link_width": 4,
    }
    assert result["aer"] is True
    assert [cap["offset"] for cap in result["extended_capabilities"]] == [0x100, 0x150, 0x160]
    assert result["acs"]["cap"] == {
        "source_validation": True, "translation_blocking": True, "request_redirect": True,
        "completion_redirect": True, "upstream_forwarding": True, "egress_control": False,
        "direct_translated": False,
    }
    assert not any(result["acs"]["ctl"].values())


def test_acs_enabled_root_port_and_endpoint_without_acs():
    devices = dump("cap-aer-root")
    port = parse_config(devices["0000:00:02.0"])
    assert port["acs"]["ctl"]["request_redirect"] is True
    assert port["acs"]["ctl"]["egress_control"] is False
    assert port["pcie"]["link_speed"] == "8GT/s" and port["pcie"]["link_width"] == 8
    nic = parse_config(devices["0000:03:00.0"])
    assert nic["pcie"]["port_type"] == "endpoint"
    assert nic["acs"] is None and nic["aer"] is True
    assert nic["pcie"]["max_read_request"] == 512


def test_rc_integrated_endpoint_has_no_link():
    audio = parse_config(dump("tree-fujitsu-p8010")["0000:00:1b.0"])
    assert audio["pcie"]["port_type"] == "rc_integrated_endpoint"
    assert audio["pcie"]["link_speed"] is None and audio["pcie"]["link_cap_width"] is None
    assert audio["pcie"]["max_payload"] == 128


def test_legacy_pci_devices_have_no_express_and_no_reason():
    devices = dump("tree-fujitsu-p8010")
    uhci = parse_config(devices["0000:00:1a.0"])
    assert uhci["pcie"] is None and uhci["pcie_cap_offset"] is None
    assert uhci["reason"] is None


# -- truncated, garbage, loops --------------------------------------------------------
@pytest.mark.parametrize("length", [0, 1, 63])
def test_shorter_than_header(length):
    result = parse_config(only("cap-pcie-2")[:length])
    assert result["pcie"] is None and result["vendor_id"] is None
    assert result["reason"].startswith("config space is %d bytes, shorter than the 64-byte PCI header" % length)


def test_64_bytes_needs_root():
    result = parse_config(only("cap-pcie-2")[:64])
    assert result["vendor_id"] == 0x8086 and result["device_id"] == 0x10C9
    assert result["pcie"] is None and result["acs"] is None and result["aer"] is None
    assert result["extended_capabilities"] is None
    assert result["reason"] == ROOT_MESSAGE


def test_64_bytes_of_a_device_without_capabilities_is_complete():
    data = bytearray(only("cap-pcie-2")[:64])
    data[6] &= ~0x10
    result = parse_config(bytes(data))
    assert result["pcie"] is None and result["reason"] is None


def test_255_bytes_decodes_express_but_not_extended():
    result = parse_config(only("cap-pcie-2")[:255])
    assert result["pcie"]["max_read_request"] == 512
    assert result["aer"] is None and result["extended_capabilities"] is None
    assert "255 bytes: extended capabilities (ACS/AER) unavailable" in result["reason"]


def test_256_bytes_says_extended_capabilities_unavailable():
    result = parse_config(only("cap-pcie-1")[:256])
    assert result["pcie"]["link_cap_speed"] == "5GT/s"
    assert result["acs"] is None and result["aer"] is None
    assert result["reason"].startswith("config space is 256 bytes: extended capabilities (ACS/AER) unavailable")


def test_extended_list_cut_short():
    # cap-pcie-1 has ACS at 0x150: 0x150 bytes hold AER but not ACS.
    result = parse_config(only("cap-pcie-1")[:0x150])
    assert result["aer"] is True and result["acs"] is None
    assert "extended capability list runs past it" in result["reason"]


def test_not_bytes_is_empty():
    assert parse_config(None)["length"] == 0
    assert parse_config(bytearray(only("cap-rebar")))["pcie"]["link_width"] == 16


def test_vendor_all_ones():
    result = parse_config(b"\xff" * 4096)
    assert result["pcie"] is None and result["capabilities"] == []
    assert "vendor 0xffff" in result["reason"]


def _device_with_caps(caps, length=256, ext=()):
    """Config space of vendor 1234 with standard capabilities ``[(offset, id, next)]``."""
    data = bytearray(length)
    data[0:4] = b"\x34\x12\x78\x56"
    data[6] = 0x10
    data[0x34] = caps[0][0] if caps else 0
    for offset, cap_id, nxt in caps:
        data[offset] = cap_id
        data[offset + 1] = nxt
    for offset, header in ext:
        data[offset:offset + 4] = header.to_bytes(4, "little")
    return data


def test_capability_loop_is_detected():
    data = _device_with_caps([(0x40, 0x01, 0x50), (0x50, 0x05, 0x40)])
    result = parse_config(bytes(data))
    assert [cap["offset"] for cap in result["capabilities"]] == [0x40, 0x50]
    assert "capability list loops back to 0x40" in result["reason"]


def test_self_loop_on_express_still_decodes_it():
    data = _device_with_caps([(0x40, 0x10, 0x40)])
    data[0x42] = 0x02  # v2 endpoint
    result = parse_config(bytes(data))
    assert result["pcie"]["port_type"] == "endpoint"
    assert "loops back to 0x40" in result["reason"]


def test_pointer_into_header_and_id_ff():
    result = parse_config(bytes(_device_with_caps([(0x40, 0x01, 0x10)])))
    assert "points into the 64-byte header" in result["reason"]
    result = parse_config(bytes(_device_with_caps([(0x40, 0xFF, 0x00)])))
    assert "ID 0xff" in result["reason"] and result["capabilities"] == []


def test_unknown_header_type():
    data = _device_with_caps([(0x40, 0x10, 0x00)])
    data[0x0E] = 0x85
    result = parse_config(bytes(data))
    assert result["header_type"] == 5 and result["multifunction"] is True
    assert result["pcie"] is None and "header type 5" in result["reason"]


def test_cardbus_bridge_uses_its_own_capability_pointer():
    data = _device_with_caps([])
    data[0x0E] = 0x02
    data[0x14] = 0x80
    data[0x80] = 0x10
    data[0x82] = 0x12  # v2 legacy endpoint
    result = parse_config(bytes(data))
    assert result["pcie_cap_offset"] == 0x80


def test_extended_capability_loop_and_bad_pointer():
    # AER at 0x100 pointing to ACS at 0x140 pointing back to 0x100.
    looped = _device_with_caps([], 4096, ext=[(0x100, 0x14010001), (0x140, 0x1001000D)])
    result = parse_config(bytes(looped))
    assert result["aer"] is True and result["acs"] is not None
    assert "extended capability list loops back to 0x100" in result["reason"]
    below = _device_with_caps([], 4096, ext=[(0x100, 0x08010001)])
    result = parse_config(bytes(below))
    assert "points below 0x100" in result["reason"]
    assert result["aer"] is True


def test_empty_extended_space_means_no_aer():
    result = parse_config(bytes(_device_with_caps([], 4096)))
    assert result["extended_capabilities"] == [] and result["aer"] is False and result["acs"] is None


def test_reserved_encodings_are_none():
    data = _device_with_caps([(0x40, 0x10, 0x00)])
    data[0x42] = 0xB2  # device/port type 11: reserved
    data[0x44] = 0x07  # max payload supported: reserved
    data[0x48:0x4A] = (0x70E0).to_bytes(2, "little")  # MPS and MRRS: reserved 7
    data[0x4C] = 0x17  # LnkCap speed 7
    result = parse_config(bytes(data))["pcie"]
    assert result["port_type"] is None and result["max_payload_supported"] is None
    assert result["max_payload"] is None and result["max_read_request"] is None
    assert result["link_cap_speed"] is None and result["link_cap_width"] == 1


@pytest.mark.parametrize("code,speed", sorted(_pci.SPEEDS.items()))
def test_every_speed_against_lspci(code, speed):
    data = _device_with_caps([(0x40, 0x10, 0x00)])
    data[0x42] = 0x02
    data[0x4C:0x50] = (code | (16 << 4)).to_bytes(4, "little")
    data[0x52:0x54] = (code | (8 << 4)).to_bytes(2, "little")
    assert parse_config(bytes(data))["pcie"]["link_speed"] == speed
    assert lspci_crosscheck({"0000:01:00.0": bytes(data)})["fields"] == 12


def test_every_port_type_against_lspci():
    configs = {}
    for port in range(16):
        data = _device_with_caps([(0x40, 0x10, 0x00)])
        data[0x42] = 0x02 | (port << 4)
        data[0x4C] = 0x21
        data[0x52] = 0x21
        configs["0000:%02x:00.0" % (port + 1)] = bytes(data)
    summary = lspci_crosscheck(configs)
    assert summary["express"] == 16
    names = set(parse_config(data)["pcie"]["port_type"] for data in configs.values())
    assert names == set(_pci.PORT_TYPES.values()) | {None}


# -- Device Control read-modify-write ---------------------------------------------------
def test_devctl_with_changes_only_the_asked_fields():
    data = bytearray(only("cap-pcie-2"))
    before = parse_config(bytes(data))
    cap = before["pcie_cap_offset"]
    raw = before["pcie"]["devctl_raw"]
    new = devctl_with(raw, max_read_request=4096)
    assert new & ~0x7000 == raw & ~0x7000
    data[cap + _pci.EXP_DEVCTL:cap + _pci.EXP_DEVCTL + 2] = new.to_bytes(2, "little")
    after = parse_config(bytes(data))["pcie"]
    assert after["max_read_request"] == 4096
    for key in ("max_payload", "relaxed_ordering", "no_snoop", "extended_tag"):
        assert after[key] == before["pcie"][key]
    assert lspci_crosscheck({"0000:09:00.0": bytes(data)})["express"] == 1


@pytest.mark.parametrize("size", _pci.SIZES)
def test_devctl_with_every_size(size):
    value = devctl_with(0xFFFF, max_read_request=size, max_payload=size)
    code = _pci.SIZES.index(size)
    assert (value >> 12) & 7 == code and (value >> 5) & 7 == code
    assert value | 0x70E0 == 0xFFFF
    assert devctl_with(0x2810) == 0x2810


@pytest.mark.parametrize("kwargs", [
    {"max_read_request": 100}, {"max_read_request": 8192}, {"max_payload": 64}, {"max_payload": True},
    {"max_read_request": "512"}, {"max_payload": 512.0},
])
def test_devctl_with_rejects_bad_sizes(kwargs):
    with pytest.raises(ValueError, match="must be one of 128, 256, 512, 1024, 2048, 4096 bytes"):
        devctl_with(0, **kwargs)


@pytest.mark.parametrize("raw", [-1, 0x10000, None, "0x20", True])
def test_devctl_with_rejects_bad_register(raw):
    with pytest.raises(ValueError, match="16-bit register"):
        devctl_with(raw, max_read_request=512)


# -- AER counters ---------------------------------------------------------------------
CORRECTABLE = (
    "RxErr 0\nBadTLP 3\nBadDLLP 0\nRollover 0\nTimeout 0\nNonFatalErr 0\nCorrIntErr 0\nHeaderOF 0\n"
    "TOTAL_ERR_COR 3\n"
)


def test_aer_counters_real_format():
    counters = parse_aer_counters(CORRECTABLE)
    assert counters["BadTLP"] == 3 and counters["TOTAL_ERR_COR"] == 3 and len(counters) == 9
    assert parse_aer_counters(CORRECTABLE.encode()) == counters


def test_aer_counters_broken():
    assert parse_aer_counters("") == {}
    assert parse_aer_counters("garbage\nDLP x\nTOTAL_ERR_FATAL 18446744073709551615\n") == {
        "TOTAL_ERR_FATAL": 18446744073709551615}
    assert parse_aer_counters(None) == {}
    assert parse_aer_counters(b"\xff\xfe\x00") == {}


# -- classification and upstream ------------------------------------------------------
@pytest.mark.parametrize("vendor,klass,expected", [
    ("0x10de", "0x030200", "gpu"), ("0x10de", "0x030000", "gpu"), ("0x1002", "0x030000", "gpu"),
    ("0x1a03", "0x030000", "other"), ("0x8086", "0x030200", "gpu"), ("0x15b3", "0x020700", "nic"),
    ("0x8086", "0x020000", "nic"), ("0x1000", "0x060400", "bridge"), ("0x144d", "0x010802", "nvme"),
    ("0x8086", "0x060000", "other"), (None, None, "other"), ("0x10de", "zz", "other"), (0x10DE, 0x030200, "gpu"),
])
def test_kind(vendor, klass, expected):
    assert kind(vendor, klass) == expected


@pytest.mark.parametrize("path,expected", [
    ("/sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0", ["0000:40:01.1"]),
    ("/sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0/0000:42:08.0/0000:45:00.0",
     ["0000:40:01.1", "0000:41:00.0", "0000:42:08.0"]),
    ("/sys/devices/pci0000:00/0000:00:03.0", []),
    ("/sys/devices/pci0000:00/0000:00:0e.0/pci10000:e0/10000:e0:06.0/10000:e1:00.0",
     ["0000:00:0e.0", "10000:e0:06.0"]),
    ("/sys/devices/platform/foo/0000:00:03.0", None),
    ("/sys/devices/pci0000:00/0000:00:03.0/net", None),
    (None, None),
])
def test_upstream_from_path(path, expected):
    assert upstream_from_path(path) == expected


# -- gather() on built trees ----------------------------------------------------------
def _write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb" if isinstance(data, bytes) else "w") as handle:
        handle.write(data)


def _device_dir(root, rel, vendor, device, klass, config, numa="0", extra=None):
    base = os.path.join(root, rel)
    for name, value in (("vendor", vendor), ("device", device), ("class", klass), ("numa_node", numa),
                        ("local_cpulist", "0-31,64-95")):
        _write(os.path.join(base, name), value + "\n")
    _write(os.path.join(base, "config"), config)
    for name, value in (extra or {}).items():
        _write(os.path.join(base, name), value)
    return base


def _link_device(root, address, rel):
    links = os.path.join(root, "sys/bus/pci/devices")
    os.makedirs(links, exist_ok=True)
    os.symlink(os.path.join("../../..", rel[len("sys/"):]), os.path.join(links, address))


@pytest.fixture
def tree(tmp_path):
    root = str(tmp_path)
    port = "sys/devices/pci0000:40/0000:40:01.1"
    gpu = port + "/0000:41:00.0"
    _device_dir(root, port, "0x8086", "0x3408", "0x060400", only("cap-pcie-1"))
    _link_device(root, "0000:40:01.1", port)
    _device_dir(root, gpu, "0x1002", "0x7300", "0x030000", only("cap-rebar"), numa="1",
                extra={"aer_dev_correctable": CORRECTABLE, "aer_dev_fatal": "Undefined 0\nTOTAL_ERR_FATAL 0\n"})
    _link_device(root, "0000:41:00.0", gpu)
    os.makedirs(os.path.join(root, "sys/bus/pci/drivers/amdgpu"))
    os.symlink("../../../../bus/pci/drivers/amdgpu", os.path.join(root, gpu, "driver"))
    # A non-root capture of an NVIDIA GPU, stored as a plain directory instead of a link.
    flat = "sys/bus/pci/devices/0000:c1:00.0"
    _device_dir(root, flat, "0x10de", "0x2330", "0x030200", only("cap-pcie-2")[:64], numa="-1",
                extra={"aer_dev_nonfatal": "Undefined 0\nTOTAL_ERR_NONFATAL 2\n"})
    return root


def test_gather_on_a_built_tree(tree):
    root = Root(tree)
    facts = gather(root)
    assert facts["count"] == 3
    assert [dev["address"] for dev in facts["devices"]] == ["0000:40:01.1", "0000:41:00.0", "0000:c1:00.0"]
    port, gpu, flat = facts["devices"]

    assert port["kind"] == "bridge" and port["driver"] is None and port["upstream"] == []
    assert port["acs"]["cap"]["request_redirect"] is True
    assert port["aer"] == {"present": True, "counters": {"correctable": {}, "fatal": {}, "nonfatal": {}}}
    assert port["config_bytes"] == 4096 and port["error"] is None

    assert gpu["kind"] == "gpu" and gpu["driver"] == "amdgpu" and gpu["numa_node"] == 1
    assert gpu["upstream"] == ["0000:40:01.1"]
    assert gpu["local_cpulist"] == "0-31,64-95"
    assert gpu["pcie"]["max_read_request"] == 512 and gpu["pcie"]["link_width"] == 16
    assert gpu["aer"]["counters"]["correctable"]["TOTAL_ERR_COR"] == 3
    assert gpu["aer"]["counters"]["fatal"] == {"Undefined": 0, "TOTAL_ERR_FATAL": 0}
    assert gpu["aer"]["counters"]["nonfatal"] == {}

    assert flat["kind"] == "gpu" and flat["numa_node"] == -1 and flat["upstream"] is None
    assert flat["config_bytes"] == 64 and flat["pcie"] is None and flat["acs"] is None
    assert flat["error"] == ROOT_MESSAGE
    # The counter files exist only for AER-capable functions, so AER is known without root.
    assert flat["aer"]["present"] is True
    assert flat["aer"]["counters"]["nonfatal"]["TOTAL_ERR_NONFATAL"] == 2

    by_path = dict((err["path"], err["reason"]) for err in root.errors)
    assert by_path["/sys/bus/pci/devices/0000:c1:00.0/config"] == ROOT_MESSAGE
    assert by_path["/sys/bus/pci/devices/0000:c1:00.0"] == "not a symlink in this capture"
    assert all(err["subsystem"] == "pci" for err in root.errors)
    assert len(root.errors) == 2


def test_gather_records_unreadable_and_broken_files(tree):
    gpu = os.path.join(tree, "sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0")
    os.unlink(os.path.join(gpu, "config"))
    _write(os.path.join(gpu, "numa_node"), "node1\n")
    _write(os.path.join(gpu, "aer_dev_fatal"), "Undefined 0\n<garbage>\n")
    os.unlink(os.path.join(gpu, "driver"))
    os.makedirs(os.path.join(gpu, "driver"))  # flattened link: driver unknown, not "none"
    root = Root(tree)
    device = gather(root)["devices"][1]
    assert device["config_bytes"] is None and device["pcie"] is None and device["numa_node"] is None
    assert device["driver"] is None
    assert "cannot read /sys/bus/pci/devices/0000:41:00.0/config" in device["error"]
    assert "aer_dev_fatal: 1 line(s) are not 'NAME count'" in device["error"]
    assert device["aer"]["counters"]["fatal"] == {"Undefined": 0}
    prefix = "/sys/bus/pci/devices/0000:41:00.0/"
    reasons = dict((err["path"][len(prefix):], err["reason"]) for err in root.errors if err["path"].startswith(prefix))
    assert reasons["config"] == "missing"
    assert reasons["numa_node"].startswith("not an integer")
    assert reasons["driver"] == "not a symlink in this capture"


def test_gather_without_pci_bus(tmp_path):
    root = Root(str(tmp_path))
    assert gather(root) == {"devices": [], "count": 0}
    assert root.errors == [{"subsystem": "pci", "path": "/sys/bus/pci/devices", "reason": "missing"}]


def test_gather_garbage_config_never_raises(tree):
    _write(os.path.join(tree, "sys/bus/pci/devices/0000:c1:00.0/config"), os.urandom(300))
    device = gather(Root(tree))["devices"][2]
    assert device["config_bytes"] == 300


# -- the live machine -----------------------------------------------------------------
def _live_configs():
    configs = {}
    for path in sorted(glob.glob("/sys/bus/pci/devices/*/config")):
        with open(path, "rb") as handle:
            configs[path.split("/")[-2]] = handle.read()
    return configs


def test_live_devices_agree_with_lspci():
    configs = _live_configs()
    assert configs, "no /sys/bus/pci/devices/*/config on this machine"
    usable = dict((address, data) for address, data in configs.items() if len(data) >= 64)
    summary = lspci_crosscheck(usable)
    assert summary["devices"] == len(usable)


def test_live_gather_matches_sysfs():
    root = Root("/")
    facts = gather(root)
    addresses = sorted(os.listdir("/sys/bus/pci/devices"))
    assert facts["count"] == len(addresses)
    assert sorted(dev["address"] for dev in facts["devices"]) == addresses
    for device in facts["devices"]:
        path = "/sys/bus/pci/devices/" + device["address"]
        with open(path + "/class") as handle:
            assert device["class_id"] == handle.read().strip()
        assert device["upstream"] == upstream_from_path(os.path.realpath(path))
        driver = os.path.join(path, "driver")
        assert device["driver"] == (os.path.basename(os.readlink(driver)) if os.path.islink(driver) else None)
        with open(path + "/config", "rb") as handle:
            data = handle.read()
        assert device["config_bytes"] == len(data)
        assert device["pcie"] == parse_config(data)["pcie"]
    assert [err for err in root.errors if "internal" in err["reason"]] == []


# -- generated fixture trees ----------------------------------------------------------
def test_fixture_trees_agree_with_lspci(snapshot_trees):
    assert snapshot_trees, "tools/make_fixtures.py produced no snapshot"
    checked = express = 0
    for name, tree in sorted(snapshot_trees.items()):
        configs = {}
        for path in sorted(glob.glob(os.path.join(tree, "sys/bus/pci/devices/*/config"))):
            with open(path, "rb") as handle:
                configs[path.split(os.sep)[-2]] = handle.read()
        devices_dir = os.path.join(tree, "sys/bus/pci/devices")
        listed = os.listdir(devices_dir) if os.path.isdir(devices_dir) else []
        facts = gather(Root(tree))
        assert facts["count"] == len(listed), name
        for address, data in configs.items():
            if len(data) < 64:
                assert parse_config(data)["pcie"] is None and parse_config(data)["reason"], (name, address)
        usable = dict((address, data) for address, data in configs.items() if len(data) >= 64)
        if usable:
            summary = lspci_crosscheck(usable)
            checked += summary["devices"]
            express += summary["express"]
    assert checked > 0, "no fixture tree holds a PCI config file"
    assert express > 0, "no fixture tree holds a PCI Express function"


# -- fuzzing --------------------------------------------------------------------------
@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=0, max_size=4096))
def test_parse_config_never_raises(data):
    result = parse_config(data)
    assert result["length"] == len(data)
    if result["pcie"] is not None:
        assert result["pcie_cap_offset"] is not None


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0x40, max_value=0xFF), st.binary(min_size=256, max_size=4096))
def test_parse_config_with_capability_list_never_raises(pointer, tail):
    # Random bytes rarely set the capability bit and a pointer; force them so the walk runs.
    data = bytearray(b"\x86\x80\x00\x00\x00\x00\x10\x00" + tail[8:])
    data[0x0E] &= 0x01
    data[0x34] = pointer
    result = parse_config(bytes(data))
    assert len(result["capabilities"]) <= 48


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.binary(max_size=4096), st.text(max_size=4096)))
def test_aer_parser_never_raises(data):
    counters = parse_aer_counters(data)
    assert all(isinstance(value, int) and value >= 0 for value in counters.values())


def test_garbage_full_config_space_is_unreadable_not_a_root_problem():
    # 4096 bytes were read (as root): a PCI Express capability placed where it cannot fit in the
    # 256-byte standard space is garbage, and saying "run with become" would send the user the wrong way
    data = bytearray(b"\x5a" * 4096)
    data[0:4] = b"\xde\x10\xb5\x2b"          # vendor 0x10de, device 0x2bb5
    data[0x06] = 0x10                        # status: capabilities list
    data[0x0e] = 0x00                        # header type 0
    data[0x34] = 0xf4                        # capability pointer
    data[0xf4:0xf6] = b"\x10\x00"            # PCI Express capability, last in the list, cut at 0x100
    parsed = parse_config(bytes(data))
    assert "config space is unreadable" in parsed["reason"]
    assert "become" not in parsed["reason"]
    # the same layout read without root (64 bytes) is still the root hint
    assert "become" in parse_config(bytes(data[:64]))["reason"]
