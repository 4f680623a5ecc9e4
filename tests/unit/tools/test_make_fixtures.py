"""tools/make_fixtures.py and the generator it runs (plugins/plugin_utils/snapshot/snapgen): deterministic, complete,
decodable trees."""
import json
import os
import re
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TOOLS = os.path.join(REPO, "tools")

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.snapshot.snapgen import pciconfig, scenarios
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.snapshot.snapgen.host import build_host, cpulist, node_memory
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.snapshot.snapgen.tree import Tree, replace_tree

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.gather import gather_facts
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root

DEVICES = "sys/bus/pci/devices"


def tree_listing(top):
    """Every entry under ``top``: relative path -> ("file", bytes) / ("link", target) / ("dir",)."""
    listing = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, top)
            if os.path.islink(path):
                listing[rel] = ("link", os.readlink(path))
            elif os.path.isdir(path):
                listing[rel] = ("dir",)
            else:
                with open(path, "rb") as handle:
                    listing[rel] = ("file", handle.read(), os.stat(path).st_mtime)
    return listing


def read(tree, rel):
    with open(os.path.join(tree, rel), "rb") as handle:
        return handle.read()


def pci_devices(tree):
    base = os.path.join(tree, DEVICES)
    return sorted(os.listdir(base))


def gpu_configs(tree):
    found = {}
    for address in pci_devices(tree):
        device = os.path.join(tree, DEVICES, address)
        if read(tree, os.path.join(DEVICES, address, "class")).startswith(b"0x0302"):
            found[address] = read(tree, os.path.join(DEVICES, address, "config"))
        assert os.path.islink(device)
    return found


# -- the command ------------------------------------------------------------------
def test_generation_is_deterministic(snapshot_trees, tmp_path):
    subprocess.run([sys.executable, os.path.join(TOOLS, "make_fixtures.py"), str(tmp_path)], check=True,
                   stdout=subprocess.DEVNULL)
    for name, first in sorted(snapshot_trees.items()):
        again = tree_listing(str(tmp_path / name))
        assert again == tree_listing(first), name
        assert len(again) > 50, name


def test_rerun_replaces_a_snapshot_in_place(tmp_path):
    target = tmp_path / "intel"
    scenarios.write("intel", str(target))
    stray = target / "sys" / "stray-file"
    stray.write_text("left over from an older generator")
    scenarios.write("intel", str(target))
    assert not stray.exists()
    assert json.loads((target / "snapshot.json").read_text())["hostname"] == "cpu-intel"


def test_refuses_to_replace_a_directory_that_is_not_a_snapshot(tmp_path):
    precious = tmp_path / "incident"
    precious.mkdir()
    (precious / "notes.txt").write_text("not a snapshot")
    result = subprocess.run([sys.executable, os.path.join(TOOLS, "make_fixtures.py"), str(tmp_path),
                             "--only", "incident"], capture_output=True, text=True, check=False)
    assert result.returncode == 2
    assert "holds no snapshot.json" in result.stderr
    assert (precious / "notes.txt").read_text() == "not a snapshot"


def test_only_and_lspci_dump_options(tmp_path):
    subprocess.run([sys.executable, os.path.join(TOOLS, "make_fixtures.py"), str(tmp_path), "--only", "hostile",
                    "--lspci-dump"], check=True, stdout=subprocess.DEVNULL)
    assert sorted(os.listdir(str(tmp_path))) == ["hostile", "hostile.lspci"]
    dump = (tmp_path / "hostile.lspci").read_text()
    # 64-byte configs: four dump lines per device; the empty config is left out.
    assert dump.count("\n30: ") == len(re.findall(r"^0000:", dump, re.M)) > 0


# -- every snapshot -------------------------------------------------------------------
def test_every_snapshot_has_snapshot_json(snapshot_trees):
    assert sorted(snapshot_trees) == ["healthy", "hostile", "incident", "intel"]
    for name, tree in snapshot_trees.items():
        doc = json.loads(read(tree, "snapshot.json").decode("utf-8"))
        assert doc["format"] == 1
        assert doc["generator"] == "tools/make_fixtures.py"
        assert doc["captured"] == "2025-01-15T03:12:00Z"
        assert doc["as_root"] is (name != "hostile")
        assert doc["hostname"] == read(tree, "proc/sys/kernel/hostname").decode("utf-8").strip()


def test_sysfs_links_are_relative_like_the_host(snapshot_trees):
    tree = snapshot_trees["incident"]
    link = os.path.join(tree, DEVICES, "0000:41:00.0")
    assert os.readlink(link) == "../../../devices/pci0000:40/0000:40:01.1/0000:41:00.0"
    gpu = os.path.join(tree, "sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0/0000:42:00.0/0000:43:00.0")
    assert os.readlink(os.path.join(gpu, "driver")) == "../../../../../../bus/pci/drivers/nvidia"
    assert os.path.isdir(os.path.join(gpu, "driver"))
    for address in pci_devices(tree):
        target = os.readlink(os.path.join(tree, DEVICES, address))
        assert not target.startswith("/")
        assert os.path.isfile(os.path.join(tree, DEVICES, address, "config")), address
    assert os.readlink(os.path.join(tree, "sys/class/iommu/ivhd0")).startswith("../../devices/pci0000:40/")


# -- incident -------------------------------------------------------------------------
def test_incident_has_eight_gpu_configs_of_4096_bytes(snapshot_trees):
    configs = gpu_configs(snapshot_trees["incident"])
    assert len(configs) == 8
    assert set(len(data) for data in configs.values()) == {4096}
    for data in configs.values():
        assert struct.unpack_from("<HH", data, 0) == (0x10DE, 0x2BB5)


def test_incident_files_hold_the_incident_state(snapshot_trees):
    tree = snapshot_trees["incident"]
    assert read(tree, "proc/sys/kernel/osrelease") == b"6.8.12-4-pve\n"
    assert b"PREEMPT_DYNAMIC" in read(tree, "proc/sys/kernel/version")
    assert os.path.isdir(os.path.join(tree, "lib/modules/6.14.8-2-pve"))
    assert read(tree, "proc/sys/kernel/numa_balancing") == b"1\n"
    assert not os.path.exists(os.path.join(tree, "etc/sysctl.d/90-gpuhost.conf"))
    assert read(tree, "sys/kernel/mm/transparent_hugepage/enabled") == b"[always] madvise never\n"
    assert read(tree, "etc/kernel/cmdline") == b"root=ZFS=rpool/ROOT/pve-1 boot=zfs quiet\n"
    assert read(tree, "proc/cmdline").endswith(b" root=ZFS=rpool/ROOT/pve-1 boot=zfs quiet\n")
    assert not os.path.exists(os.path.join(tree, "sys/devices/system/cpu/amd_pstate/status"))
    assert read(tree, "sys/devices/system/cpu/cpufreq/policy127/scaling_driver") == b"acpi-cpufreq\n"
    assert read(tree, "sys/devices/system/cpu/cpu127/cpuidle/state2/latency") == b"400\n"
    assert read(tree, "sys/devices/system/cpu/cpu127/cpuidle/state2/disable") == b"0\n"
    assert b"195 nvidia-frontend" in read(tree, "proc/devices")
    assert b"508 nvidia-uvm" in read(tree, "proc/devices")
    conf = read(tree, "etc/pve/lxc/101.conf").decode("utf-8")
    current = conf.split("[pre-upgrade]")[0]
    assert "memory: 471040" in current and "cores: 64" in current
    assert "c 195:* rwm" in current and "508" not in current and "nvidia-uvm" not in current
    assert "cpuset" not in current
    assert "Open Kernel Module for x86_64  570.133.07" in read(tree, "proc/driver/nvidia/version").decode()


def test_incident_pci_decodes_with_lspci(snapshot_trees, tmp_path):
    tree = snapshot_trees["incident"]
    dump = tmp_path / "incident.lspci"
    dump.write_text(pciconfig.snapshot_dump(tree))
    text = subprocess.run(["lspci", "-F", str(dump), "-vvv", "-nn"], check=True, capture_output=True,
                          text=True).stdout
    blocks = dict((block.split(" ", 1)[0], block) for block in text.strip().split("\n\n"))
    assert len(blocks) == 36
    gpus = [b for b in blocks.values() if "[10de:2bb5]" in b]
    nics = [b for b in blocks.values() if "[15b3:1021]" in b]
    assert len(gpus) == 8 and len(nics) == 2
    for block in gpus:
        assert "Express (v2) Endpoint" in block
        assert "DevCap:\tMaxPayload 256 bytes" in block
        assert "MaxPayload 256 bytes, MaxReadReq 512 bytes" in block
        assert "LnkCap:\tPort #0, Speed 32GT/s, Width x16" in block
        assert "LnkSta:\tSpeed 2.5GT/s (downgraded), Width x16" in block
        assert "[100 v2] Advanced Error Reporting" in block
    for block in nics:
        assert "MaxReadReq 512 bytes" in block
    downstream = [b for b in blocks.values() if "Downstream Port" in b]
    assert len(downstream) == 8
    for block in downstream:
        assert re.search(r"ACSCtl:\tSrcValid\+ TransBlk- ReqRedir\+ CmpltRedir\+", block)
    assert len([b for b in blocks.values() if "Upstream Port" in b]) == 4
    tree_text = subprocess.run(["lspci", "-F", str(dump), "-t"], check=True, capture_output=True,
                               text=True).stdout
    assert "+-01.1-[41-44]----00.0-[42-44]--+-00.0-[43]----00.0" in tree_text


# -- healthy --------------------------------------------------------------------------
def test_healthy_pci_decodes_with_lspci(snapshot_trees, tmp_path):
    dump = tmp_path / "healthy.lspci"
    dump.write_text(pciconfig.snapshot_dump(snapshot_trees["healthy"]))
    text = subprocess.run(["lspci", "-F", str(dump), "-vvv", "-nn"], check=True, capture_output=True,
                          text=True).stdout
    blocks = text.strip().split("\n\n")
    for block in blocks:
        if "[10de:2bb5]" in block or "[15b3:1021]" in block:
            assert "MaxReadReq 4096 bytes" in block
            assert "LnkSta:\tSpeed 32GT/s, Width x16" in block
        if "Access Control Services" in block:
            assert "ReqRedir- CmpltRedir-" in block.split("ACSCtl:")[1]


def test_healthy_is_the_fixed_twin(snapshot_trees):
    tree = snapshot_trees["healthy"]
    assert read(tree, "proc/sys/kernel/osrelease") == b"6.14.8-2-pve\n"
    assert read(tree, "proc/sys/kernel/numa_balancing") == b"0\n"
    assert b"kernel.numa_balancing = 0" in read(tree, "etc/sysctl.d/90-gpuhost.conf")
    assert read(tree, "etc/kernel/cmdline").strip().endswith(b"amd_pstate=active iommu=pt")
    assert read(tree, "proc/cmdline").strip().endswith(read(tree, "etc/kernel/cmdline").strip())
    assert read(tree, "sys/devices/system/cpu/amd_pstate/status") == b"active\n"
    assert read(tree, "sys/devices/system/cpu/cpu5/cpuidle/state2/disable") == b"1\n"
    conf = read(tree, "etc/pve/lxc/101.conf").decode("utf-8")
    assert "c 508:* rwm" in conf and "/dev/nvidia-uvm dev/nvidia-uvm" in conf
    assert "lxc.cgroup2.cpuset.cpus:" in conf and "lxc.cgroup2.cpuset.mems:" in conf
    gpus = ET.fromstring(read(tree, "commands/nvidia-smi-q.xml")).findall("gpu")
    assert len(gpus) == 8
    for gpu in gpus:
        assert gpu.findtext("persistence_mode") == "Enabled"
        assert gpu.findtext("gpu_power_readings/current_power_limit") == "600.00 W"
        assert [e.tag for e in gpu.find("clocks_event_reasons") if e.text == "Active"] == []


# -- intel ----------------------------------------------------------------------------
def test_intel_host_has_no_nvidia_and_boots_bls(snapshot_trees):
    tree = snapshot_trees["intel"]
    assert not os.path.exists(os.path.join(tree, "commands"))
    assert not os.path.exists(os.path.join(tree, "proc/driver/nvidia"))
    assert gpu_configs(tree) == {}
    assert b"GenuineIntel" in read(tree, "proc/cpuinfo")
    assert read(tree, "proc/sys/kernel/osrelease") == b"5.14.0-427.el9.x86_64\n"
    entries = os.listdir(os.path.join(tree, "boot/loader/entries"))
    assert len(entries) == 2 and all(e.endswith(".conf") for e in entries)
    assert read(tree, "sys/devices/system/cpu/intel_pstate/status") == b"active\n"
    assert os.readlink(os.path.join(tree, "sys/class/iommu/dmar0")) == "../../devices/virtual/iommu/dmar0"


# -- hostile --------------------------------------------------------------------------
def test_hostile_configs_are_64_bytes(snapshot_trees):
    tree = snapshot_trees["hostile"]
    sizes = {}
    for address in pci_devices(tree):
        path = os.path.join(tree, DEVICES, address, "config")
        if os.path.exists(path):
            sizes[address] = os.path.getsize(path)
    assert sizes and set(sizes.values()) == {0, 64}
    assert list(sizes.values()).count(64) >= 10


def test_hostile_carries_markup_garbage_and_truncation(snapshot_trees):
    tree = snapshot_trees["hostile"]
    hostname = read(tree, "proc/sys/kernel/hostname").decode("utf-8")
    assert "<script>alert(1)</script>" in hostname and "onerror=alert(1)>" in hostname and "&amp;" in hostname
    assert read(tree, "proc/sys/kernel/numa_balancing") == b"yes\x00\xff"
    assert read(tree, "sys/devices/system/node/node1/meminfo") == b""
    assert re.search(rb"model name\t: \n", read(tree, "proc/cpuinfo"))
    xml = read(tree, "commands/nvidia-smi-q.xml")
    with pytest.raises(ET.ParseError):
        ET.fromstring(xml)
    assert b"&lt;script&gt;" in xml and not xml.rstrip().endswith(b">")
    topo = read(tree, "commands/nvidia-smi-topo-m.txt")
    assert b"GPU" not in re.sub(rb"\x1b(\[[0-9;?]*[A-Za-z]|\][^\x07]*\x07)", b"", topo)
    assert b"\xff\xfe" in read(tree, "etc/pve/lxc/101.conf")
    assert not os.path.islink(os.path.join(tree, DEVICES, "0000:05:00.0"))
    assert not os.path.exists(os.path.join(tree, "proc/1/environ"))


# -- facts over the fixtures (the gatherers are the consumers) --------------------------
def test_facts_of_incident_and_healthy_differ_where_the_incident_did(snapshot_trees):
    incident = gather_facts(Root(snapshot_trees["incident"]))
    healthy = gather_facts(Root(snapshot_trees["healthy"]))
    assert incident["errors"] == [] and healthy["errors"] == []
    assert (incident["cpu"]["threads"], incident["cpu"]["sockets"]) == (128, 2)
    assert incident["cpu"]["cpufreq"]["driver"] == {"acpi-cpufreq": 128}
    assert healthy["cpu"]["cpufreq"]["driver"] == {"amd-pstate-epp": 128}
    assert [n["free_pct"] for n in incident["numa"]["nodes"]] == [0.9, 8.6]
    assert incident["iommu"]["default_domain"] == {"DMA-FQ": 36}
    assert healthy["iommu"]["passthrough"] is True
    gpus = [d for d in incident["pci"]["devices"] if d["kind"] == "gpu"]
    assert len(gpus) == 8
    assert gpus[0]["upstream"] == ["0000:40:01.1", "0000:41:00.0", "0000:42:00.0"]
    assert set(d["pcie"]["max_read_request"] for d in gpus) == {512}
    assert set(d["pcie"]["max_read_request"] for d in healthy["pci"]["devices"] if d["kind"] == "gpu") == {4096}
    assert incident["nvidia"]["driver_version"] == "570.133.07"
    assert [g["index"] for g in incident["nvidia"]["gpus"] if g["clocks_event_reasons"]["active"]] == [5]
    assert incident["nvidia"]["topology"]["affinity"]["GPU4"]["cpu"] == "32-63,96-127"
    assert incident["lxc"]["nvidia_uvm_major"] == 508


def test_facts_of_hostile_tree_are_errors_not_tracebacks(snapshot_trees):
    facts = gather_facts(Root(snapshot_trees["hostile"]))
    reasons = [e["reason"] for e in facts["errors"]]
    assert not [r for r in reasons if r.startswith("internal error")]
    assert any("64 bytes" in r and "root" in r for r in reasons)
    assert facts["kernel"]["sysctl"]["numa_balancing"] is None


# -- make_host and the large host -------------------------------------------------------
def test_large_host_shape():
    tree, spec, devices = build_host(**scenarios.large_options())
    assert spec.cpus == 768
    assert len(devices) == 64
    assert len([d for d in devices if d.kind == "gpu"]) == 8
    assert all(d.parent.kind == "bridge" and d.parent.parent.parent is not None
               for d in devices if d.kind == "gpu")  # downstream port -> upstream port -> root port
    assert len([p for p in tree.files if p.startswith("/sys/devices/system/cpu/cpufreq/policy")
                and p.endswith("/scaling_governor")]) == 768
    assert tree.files["/sys/devices/system/node/node7/cpulist"] == b"336-383,720-767\n"
    assert tree.files["/sys/devices/system/node/node0/distance"] == b"10 12 12 12 32 32 32 32\n"


def test_make_host_rejects_impossible_descriptions():
    with pytest.raises(ValueError):
        build_host(sockets=2, numa_nodes=3)
    with pytest.raises(ValueError):
        build_host(pci_devices=4)
    with pytest.raises(TypeError):
        build_host(not_an_option=1)


def test_pci_device_padding_hits_the_requested_count():
    for count in (36, 37, 40, 41):
        _tree, _spec, devices = build_host(pci_devices=count)
        assert len(devices) == count
        assert len(set(d.address for d in devices)) == count


def test_node_memory_free_percentages():
    _tree, spec, _devices = build_host(**scenarios.incident_options())
    (total0, free0, _f0, _a0), (total1, free1, _f1, _a1) = node_memory(spec)
    assert round(100.0 * free0 / total0, 1) == 0.9 and round(100.0 * free1 / total1, 1) == 8.6
    assert (total0 + total1) // (1024 * 1024) == 503  # 504 GiB installed, less what firmware keeps


# -- building blocks --------------------------------------------------------------------
def test_cpulist():
    assert cpulist([]) == ""
    assert cpulist([3]) == "3"
    assert cpulist(list(range(0, 32)) + list(range(64, 96))) == "0-31,64-95"
    assert cpulist([5, 1, 2, 3, 9]) == "1-3,5,9"


def test_encoder_offsets_follow_the_spec():
    fn = pciconfig.Function(0x10DE, 0x2BB5, 0x030200, pcie=pciconfig.Pcie(mps=256, mrrs=4096, link_gen=4),
                            acs_cap=("source_validation", "request_redirect"), acs_ctl=("request_redirect",))
    data = pciconfig.encode(fn)
    assert len(data) == 4096 and len(pciconfig.encode(fn, 64)) == 64
    assert data[0x06] & 0x10 and data[0x34] == 0x40
    at = data[0x34]
    chain = []
    while at:
        chain.append((at, data[at]))
        at = data[at + 1]
    assert chain == [(0x40, 0x01), (0x50, 0x05), (0x70, 0x10)]
    devctl = struct.unpack_from("<H", data, 0x70 + 8)[0]
    assert (devctl >> 5) & 7 == 1 and (devctl >> 12) & 7 == 5
    lnksta = struct.unpack_from("<H", data, 0x70 + 0x12)[0]
    assert (lnksta & 0xF, (lnksta >> 4) & 0x3F) == (4, 16)
    aer = struct.unpack_from("<I", data, 0x100)[0]
    assert (aer & 0xFFFF, (aer >> 16) & 0xF, aer >> 20) == (0x0001, 2, 0x148)
    acs = struct.unpack_from("<IHH", data, 0x148)
    assert (acs[0] & 0xFFFF, acs[0] >> 20, acs[1], acs[2]) == (0x000D, 0, 0x05, 0x04)
    with pytest.raises(ValueError):
        pciconfig.size_code(300)
    host_bridge = pciconfig.Function(0x1022, 0x14A4, 0x060000)
    assert len(pciconfig.encode(host_bridge)) == 256 and pciconfig.encode(host_bridge)[0x34] == 0


def test_tree_writes_links_verbatim_and_fixed_mtimes(tmp_path):
    tree = Tree()
    tree.text("/sys/devices/pci0000:00/0000:00:01.0/vendor", "0x1af4")
    tree.rel_link("/sys/bus/pci/devices/0000:00:01.0", "/sys/devices/pci0000:00/0000:00:01.0")
    tree.mkdir("/etc/pve/lxc")
    replace_tree(tree, str(tmp_path / "t"))
    top = tmp_path / "t"
    assert os.readlink(str(top / "sys/bus/pci/devices/0000:00:01.0")) == "../../../devices/pci0000:00/0000:00:01.0"
    assert (top / "sys/bus/pci/devices/0000:00:01.0/vendor").read_text() == "0x1af4\n"
    assert (top / "etc/pve/lxc").is_dir()
    assert os.lstat(str(top / "sys/bus/pci/devices/0000:00:01.0")).st_mtime == 1736910720
    with pytest.raises(ValueError):
        tree.file("relative/path", b"")
