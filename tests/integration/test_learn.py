"""playbooks/learn.yml (issue 13, item 1): learn the demo healthy snapshot into a site profile, then audit
the demo snapshots with it (audit.yml with gpuhost_catalogue_dirs): the incident host's inventory differences
by subject, a copy with one GPU link trained at x8, and a copy with one GPU gone from the PCI bus. Learning
the hostile snapshot gives a profile with unknowns, never a traceback; check mode writes nothing."""
import json
import os
import re
import shutil
import struct

import pytest
import yaml

from helpers.fixhost import copy_tree
from helpers.runner import REPO, run_playbook, stdout_of

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import report
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_load import load_catalogue
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_params import resolve_profile

DEMO = os.path.join(REPO, "build", "snapshots")
NAME = "golden-demo-healthy"
X8_GPU = "0000:47:00.0"
GONE_GPU = "0000:c8:00.0"  # GPU7 of nvidia-smi: the last row and column of topo -m
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo(request):
    """The demo snapshots of build/snapshots, or generated ones when the build has none."""
    names = ("incident", "healthy", "hostile")
    if all(os.path.isdir(os.path.join(DEMO, name)) for name in names):
        return dict((name, os.path.join(DEMO, name)) for name in names)
    return request.getfixturevalue("snapshot_trees")


def inventory(hosts):
    python = shutil.which("python3")
    return {"all": {"children": {"snapshots": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": python},
        "hosts": dict((name, {"gpuhost_root": root}) for name, root in hosts.items())}}}}


def _config_path(root, address):
    return os.path.join(os.path.realpath(os.path.join(root, "sys", "bus", "pci", "devices", address)), "config")


def train_at_x8(root, address):
    """Set the negotiated link width of the device's Link Status register (PCIe capability + 0x12,
    bits 9:4) to 8, as a GPU in a slot that trained at x8 reports it."""
    path = _config_path(root, address)
    with open(path, "rb") as handle:
        config = bytearray(handle.read())
    offset = config[0x34]
    while offset:
        if config[offset] == 0x10:  # PCI Express capability
            break
        offset = config[offset + 1]
    assert offset, "no PCI Express capability in %s" % path
    status, = struct.unpack_from("<H", config, offset + 0x12)
    struct.pack_into("<H", config, offset + 0x12, (status & ~0x3F0) | (8 << 4))
    with open(path, "wb") as handle:
        handle.write(bytes(config))


def remove_gpu(root, address):
    """The GPU gone from the host: its PCI device directory and link, its nvidia-smi -q entry and its
    row and column of topo -m (it is the last GPU, so the others keep their GPUn labels)."""
    link = os.path.join(root, "sys", "bus", "pci", "devices", address)
    shutil.rmtree(os.path.realpath(link))
    os.unlink(link)
    xml_path = os.path.join(root, "commands", "nvidia-smi-q.xml")
    with open(xml_path) as handle:
        xml = handle.read()
    bus = "00000000:%s" % address[5:].upper()
    start = xml.index('<gpu id="%s">' % bus)
    end = xml.index("</gpu>", start) + len("</gpu>")
    xml = xml[:start] + xml[end:]
    count = int(re.search(r"<attached_gpus>(\d+)</attached_gpus>", xml).group(1))
    xml = xml.replace("<attached_gpus>%d</attached_gpus>" % count, "<attached_gpus>%d</attached_gpus>" % (count - 1))
    with open(xml_path, "w") as handle:
        handle.write(xml)
    topo_path = os.path.join(root, "commands", "nvidia-smi-topo-m.txt")
    with open(topo_path) as handle:
        lines = handle.read().split("\n")
    header = lines[0].split("\t")
    column = [i for i, cell in enumerate(header) if cell.endswith("GPU7")][0]
    out = []
    for line in lines:
        cells = line.split("\t")
        if "GPU7" in cells[0]:
            continue  # the GPU's own row
        if len(cells) > column and (line is lines[0] or re.match(r"^\x1b\[1m(GPU|NIC)\d+", cells[0])):
            del cells[column]
        out.append("\t".join(cells))
    with open(topo_path, "w") as handle:
        handle.write("\n".join(out))


@pytest.fixture(scope="module")
def learned(demo, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("learn")
    site = tmp / "site"
    runner = run_playbook(tmp, "learn.yml", inventory({"demo-healthy": demo["healthy"]}),
                          extravars={"gpuhost_learn_dir": str(site)})
    out = stdout_of(runner)
    assert runner.rc == 0, out
    again = run_playbook(tmp, "learn.yml", inventory({"demo-healthy": demo["healthy"]}),
                         extravars={"gpuhost_learn_dir": str(site)})
    return {"tmp": tmp, "site": site, "out": out, "again": again}


def test_learn_writes_a_valid_site_profile(learned):
    path = learned["site"] / "profiles" / ("%s.yml" % NAME)
    assert "wrote %s" % path in learned["out"]
    text = path.read_text()
    assert text.startswith("# yaml-language-server: $schema=")
    profile = yaml.safe_load(text)
    assert profile["extends"] == "amd-epyc-nvidia"
    golden = profile["params"]["inventory"]
    assert golden["learned_from"] == "gpu-healthy" and golden["unknown"] == []
    assert len(golden["gpus"]) == 8 and len(golden["nics"]) == 2
    # no NVSwitch on the golden host: Fabric Manager learned as null, not judged (INV-010)
    assert golden["versions"] == {"kernel": "6.14.8-2-pve", "driver": "575.57.08", "cuda": "12.9",
                                  "fabric_manager": None}
    # loadable from the directory like any site profile
    catalogue = load_catalogue(site_dirs=[str(learned["site"])])
    resolved, params = resolve_profile(catalogue, NAME)
    assert {"INV-001", "INV-011"} <= set(resolved.rule_ids) and params["inventory"] == golden
    # learning the same host again changes nothing
    assert learned["again"].rc == 0 and "changed=0" in stdout_of(learned["again"])
    assert "unchanged %s" % path in stdout_of(learned["again"])


@pytest.fixture(scope="module")
def audited(demo, learned):
    tmp = learned["tmp"]
    x8 = copy_tree(demo["healthy"], tmp / "x8")
    train_at_x8(x8, X8_GPU)
    gone = copy_tree(demo["healthy"], tmp / "gone")
    remove_gpu(gone, GONE_GPU)
    hosts = {"demo-incident": demo["incident"], "demo-healthy": demo["healthy"], "demo-x8": x8, "demo-gone": gone}
    runner = run_playbook(tmp, "audit.yml", inventory(hosts), cmdline="--check", extravars={
        "gpuhost_report_dir": str(tmp / "reports"), "gpuhost_catalogue_dirs": [str(learned["site"])],
        "gpuhost_profile": NAME})
    assert runner.rc == 0, stdout_of(runner)
    document = json.loads((tmp / "reports" / "report.json").read_text())
    document = report.expand_document(document)  # the stored layout (schema 3): rule fields once under rules
    return document["hosts"]


def inv_fails(host):
    return dict(((f["id"], f["subject"]), f) for f in host["findings"]
                if f["id"].startswith("INV-") and f["status"] == "fail")


def test_golden_host_passes_its_own_inventory(audited):
    healthy = audited["demo-healthy"]
    assert healthy["profile"] == NAME
    assert inv_fails(healthy) == {}
    statuses = set(f["status"] for f in healthy["findings"] if f["id"].startswith("INV-"))
    assert "pass" in statuses and "fail" not in statuses and "unknown" not in statuses


def test_incident_host_shows_each_difference_by_subject(audited):
    fails = inv_fails(audited["demo-incident"])
    assert fails[("INV-010", "kernel")]["message"] == \
        "version is 6.8.12-4-pve, expected 6.14.8-2-pve on kernel (kernel release)"
    assert fails[("INV-010", "driver")]["observed"] == "570.133.07"
    assert fails[("INV-010", "cuda")]["expected"] == "12.9"
    mrrs = [s for (rid, s) in fails if rid == "INV-007"]
    assert len(mrrs) == 10 and fails[("INV-007", "0000:49:00.0")]["observed"] == ["MaxReadReq 512 B, golden host 4096 B"]
    power = [s for (rid, s) in fails if rid == "INV-011"]
    assert len(power) == 8 and fails[("INV-011", "0000:43:00.0")]["message"].startswith("power limit 450 W < 600 W")
    # seven of its GPUs are busy (P0) at 2.5 GT/s: slower than the golden link; the eighth, c8:00.0, is
    # idle (P8) at 2.5 GT/s: not judged, not failed
    speeds = dict((f["subject"], f) for f in audited["demo-incident"]["findings"] if f["id"] == "INV-006")
    assert speeds["0000:43:00.0"]["status"] == "fail", speeds["0000:43:00.0"]
    assert speeds["0000:c8:00.0"]["status"] == "not_applicable"
    assert "not judged: GPU idle (P8)" in speeds["0000:c8:00.0"]["message"]


def test_gpu_link_at_x8_fails_the_width_rule_for_that_gpu(audited):
    fails = inv_fails(audited["demo-x8"])
    assert list(fails) == [("INV-005", X8_GPU)]
    assert fails[("INV-005", X8_GPU)]["message"].startswith("link width (lanes) 8 < 16 on %s" % X8_GPU)


def test_gpu_gone_from_the_bus_is_reported_missing(audited):
    fails = inv_fails(audited["demo-gone"])
    assert list(fails) == [("INV-003", GONE_GPU)]
    assert fails[("INV-003", GONE_GPU)]["observed"] == [
        "missing: the golden host has GPU NVIDIA RTX PRO 6000 Blackwell Server Edition here; it is not on this "
        "host's PCI bus"]
    # the other GPUs' topology and links are still judged, and pass
    topo = [f for f in audited["demo-gone"]["findings"] if f["id"] == "INV-008"]
    assert topo and all(f["status"] == "pass" for f in topo) and not any(GONE_GPU in f["subject"] for f in topo)


def test_hostile_snapshot_learns_a_profile_with_unknowns(demo, tmp_path):
    runner = run_playbook(tmp_path, "learn.yml", inventory({"demo-hostile": demo["hostile"]}),
                          extravars={"gpuhost_learn_dir": str(tmp_path / "site"), "gpuhost_learn_profile": "hostile"})
    out = stdout_of(runner)
    assert "Traceback" not in out
    assert runner.rc == 0, out
    profile = yaml.safe_load((tmp_path / "site" / "profiles" / "hostile.yml").read_text())
    unknown = profile["params"]["inventory"]["unknown"]
    assert any(line.startswith("cpu.model_name: /proc/cpuinfo") for line in unknown), unknown
    assert any("nvidia-smi -q -x" in line for line in unknown), unknown
    assert "could not be read and are not judged" in out
    load_catalogue(site_dirs=[str(tmp_path / "site")]).profile("hostile")


def test_check_mode_writes_nothing_and_a_bad_name_is_refused(demo, tmp_path):
    runner = run_playbook(tmp_path, "learn.yml", inventory({"demo-healthy": demo["healthy"]}), cmdline="--check",
                          extravars={"gpuhost_learn_dir": str(tmp_path / "site")})
    assert runner.rc == 0, stdout_of(runner)
    assert "would write" in stdout_of(runner) and not (tmp_path / "site").exists()
    runner = run_playbook(tmp_path, "learn.yml", inventory({"demo-healthy": demo["healthy"]}),
                          extravars={"gpuhost_learn_dir": str(tmp_path / "site"), "gpuhost_learn_profile": "Bad Name"})
    out = stdout_of(runner)
    assert runner.rc != 0 and "Traceback" not in out
    assert "name: a profile name is lower case letters, digits and dashes, got 'Bad Name'" in out
    assert not (tmp_path / "site").exists()
