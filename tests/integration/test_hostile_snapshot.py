"""A hostile snapshot is audited and remediated for real and stays harmless (issue 10, items 1, 2, 6).

A writable copy of the incident snapshot gets links out of the tree at every level a fix or a
reader touches (directories the fixes write into, kernel attributes they write, a PCI config
space, the command captures, files the readers parse), a FIFO and a device node where files are
expected, and a 1 GB file. A decoy directory outside the tree holds what those links point at.
After ``audit.yml`` and a real ``remediate.yml`` run:

- nothing in the decoy directory changed (listed and hashed before and after);
- neither the facts nor any report holds the decoy's content;
- every refused path is reported (facts errors or the failed fix names it);
- the runs end in bounded time and memory (printed; the figures go into the issue note).
"""
import json
import os
import resource
import shutil
import stat
import sys
import time

import pytest

from helpers.fixhost import copy_tree, tree_state
from helpers.runner import run_playbook, stdout_of

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.gather import gather_facts
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root
from helpers.report_file import load_report

SECRET = "DECOY-SECRET-CONTENT-7f3a"
GPU = "0000:43:00.0"
pytestmark = pytest.mark.slow


def _escape(link_path, target):
    """A relative link from ``link_path`` to ``target`` (which lies outside the snapshot)."""
    os.makedirs(os.path.dirname(link_path), exist_ok=True)
    if os.path.lexists(link_path):
        if os.path.isdir(link_path) and not os.path.islink(link_path):
            shutil.rmtree(link_path)
        else:
            os.unlink(link_path)
    os.symlink(os.path.relpath(target, os.path.dirname(link_path)), link_path)


def build(snapshot, tmp):
    """``(root, decoy)``: the hostile copy and the decoy directory its links point into."""
    decoy = tmp / "decoy"
    for sub in ("sysctl.d", "systemd", "local/sbin", "udev/rules.d", "commands", "pcidev"):
        (decoy / sub).mkdir(parents=True)
    for name in ("secret", "nb", "gov", "commands/nvidia-smi-q.xml", "commands/nvidia-smi-topo-m.txt", "pcidev/config"):
        (decoy / name).write_text("%s\n" % SECRET)
    (decoy / "config").write_bytes(SECRET.encode() * 100)
    root = copy_tree(snapshot, tmp / "hostile")

    def j(rel):
        return os.path.join(root, rel)
    # directories the fixes write into
    for rel, target in (("etc/sysctl.d", "sysctl.d"), ("etc/systemd", "systemd"), ("usr/local", "local"),
                        ("etc/udev", "udev"), ("commands", "commands")):
        _escape(j(rel), str(decoy / target))
    # kernel attributes the fixes write, a PCI config space, files the readers parse
    _escape(j("proc/sys/kernel/numa_balancing"), str(decoy / "nb"))
    _escape(j("sys/devices/system/cpu/cpufreq/policy0/scaling_governor"), str(decoy / "gov"))
    config = os.path.realpath(j("sys/bus/pci/devices/%s" % GPU))
    _escape(os.path.join(config, "config"), str(decoy / "config"))
    _escape(j("proc/cmdline"), str(decoy / "secret"))
    _escape(j("etc/default/grub"), str(decoy / "secret"))  # read only on GRUB hosts; kernel_cmdline may look
    # a PCI device link leaving the tree
    _escape(j("sys/bus/pci/devices/0000:ee:00.0"), str(decoy / "pcidev"))
    # not regular files where files are expected, and a 1 GB file
    os.unlink(j("proc/cpuinfo"))
    os.mkfifo(j("proc/cpuinfo"))
    meminfo = j("sys/devices/system/node/node0/meminfo")
    os.unlink(meminfo)
    os.mknod(meminfo, 0o644 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero's numbers
    with open(j("etc/os-release"), "wb") as handle:
        handle.truncate(1 << 30)
    _escape(j("proc/sys/vm/swappiness"), "/dev/zero")
    return root, decoy


@pytest.fixture(scope="module")
def hostile(snapshot_trees, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    root, decoy = build(snapshot_trees["incident"], tmp)
    return root, decoy, tmp


def test_facts_hold_no_outside_content_and_name_every_refused_path(hostile):
    root, decoy, unused_tmp = hostile
    before = tree_state(str(decoy))
    started = time.monotonic()
    facts = gather_facts(Root(root))
    took = time.monotonic() - started
    text = json.dumps(facts)
    assert SECRET not in text
    errors = {}
    for error in facts["errors"]:
        errors[error["path"]] = errors.get(error["path"], "") + " | " + error["reason"]
    for path, words in (("/proc/cmdline", "leaves the snapshot root"),
                        ("/proc/cpuinfo", "a FIFO, not a regular file"),
                        ("/sys/devices/system/node/node0/meminfo", "a device, not a regular file"),
                        ("/etc/os-release", "larger than"),
                        ("/proc/sys/vm/swappiness", "leaves the snapshot root"),
                        ("/proc/sys/kernel/numa_balancing", "leaves the snapshot root")):
        assert words in errors.get(path, ""), (path, errors.get(path))
    assert any("leaves the snapshot root" in reason for path, reason in errors.items()
               if "nvidia-smi" in path or path.startswith("commands/")), errors
    assert "0000:ee:00.0" not in [d.get("address") for d in facts["pci"]["devices"] if not d.get("error")]
    assert facts["kernel"]["cmdline"] is None or SECRET not in json.dumps(facts["kernel"]["cmdline"])
    assert took < 30, took
    print("\nhostile snapshot: facts in %.2f s, %d errors" % (took, len(errors)))
    assert tree_state(str(decoy)) == before


def _inventory(root):
    return {"all": {"hosts": {"gpu-hostile": {"ansible_connection": "local", "gpuhost_root": root,
                                              "ansible_python_interpreter": sys.executable}}}}


def test_audit_and_real_remediation_change_nothing_outside(hostile):
    root, decoy, tmp = hostile
    before = tree_state(str(decoy))
    listing = sorted(os.listdir(str(decoy)))
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    audit = run_playbook(tmp, "audit.yml", _inventory(root), cmdline="--check",
                         extravars={"gpuhost_report_dir": str(tmp / "audit")})
    # gpuhost_force: the hostile capture's GPU has no process list, which the maintenance guard counts as busy
    # (issue 40: fail closed); the fixes must run here to show they stay inside the root
    remediate = run_playbook(tmp, "remediate.yml", _inventory(root),
                             extravars={"gpuhost_report_dir": str(tmp / "remediate"), "gpuhost_fix_acs": True,
                                        "gpuhost_force": True})
    took = time.monotonic() - started
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    assert tree_state(str(decoy)) == before, "a run wrote outside the snapshot root"
    assert sorted(os.listdir(str(decoy))) == listing
    assert audit.rc == 0, stdout_of(audit)
    for name in ("audit", "remediate"):
        for report in os.listdir(str(tmp / name)):
            with open(str(tmp / name / report), encoding="utf-8", errors="replace") as handle:
                assert SECRET not in handle.read(), (name, report)
    host = load_report(tmp / "remediate" / "report.json")["hosts"]["gpu-hostile"]
    out = stdout_of(remediate)
    # the first fix that meets an escaping path stops with the path named, nothing half-written
    assert host["state"] == "failed", host.get("message")
    assert "leaves the snapshot root" in host["message"] or "leaves the snapshot root" in out, host["message"]
    assert took < 300, took
    assert peak_kib < 1024 * 1024, peak_kib  # no run read the 1 GB file
    print("\nhostile snapshot: audit + remediate %.1f s, largest child RSS %d MiB (%s)"
          % (took, peak_kib // 1024, usage.ru_maxrss // 1024))
