# -*- coding: utf-8 -*-
"""host_snapshot writes its tarball privately and leaves secrets on the host (issue 10 items 4, 5).

The capture runs the gatherers over a snapshot root standing in for the host (a Root records the
same paths either way), then the module's own preparation and writer produce the tarball.
"""
import copy
import gzip
import json
import os
import stat
import tarfile
import tempfile

import pytest

from ansible_collections.gpuhost.baseline.plugins.modules import host_snapshot
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import lxc
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.gather import gather_facts
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Recorder, Root
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.snapshot.snapshot import check_tree, import_snapshot

SECRET = b"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
META = {"format": 1, "hostname": "gpu01", "as_root": True, "generator": "gpuhost.baseline.host_snapshot"}


def write(base, path, data):
    target = base / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data if isinstance(data, bytes) else data.encode())
    return target


def capture(root_dir, dest, gather=None):
    """What host_snapshot does after gathering: returns ``(facts, recorder)``."""
    recorder = Recorder()
    facts = gather_facts(Root(str(root_dir), recorder=recorder), gather)
    host_snapshot.prepare_capture(recorder)
    host_snapshot.write_tarball(recorder, str(dest), dict(META))
    return facts, recorder


def members(tarball):
    with tarfile.open(tarball) as tar:
        return dict((m.name, (m, tar.extractfile(m).read() if m.isreg() else None)) for m in tar.getmembers())


# -- the tarball file (item 4) --------------------------------------------------------------------

def test_tarball_goes_through_a_private_mkstemp_file(tmp_path, monkeypatch):
    calls = []
    real_mkstemp = tempfile.mkstemp

    def spy(*args, **kwargs):
        fd, path = real_mkstemp(*args, **kwargs)
        calls.append((kwargs.get("dir"), path, stat.S_IMODE(os.fstat(fd).st_mode)))
        return fd, path

    monkeypatch.setattr(host_snapshot.tempfile, "mkstemp", spy)
    dest = tmp_path / "out" / "snap.tar.gz"
    dest.parent.mkdir()
    host_snapshot.write_tarball(Recorder(), str(dest), dict(META))
    assert len(calls) == 1
    directory, temp_path, temp_mode = calls[0]
    assert directory == str(dest.parent)  # same file system: the rename is atomic
    assert temp_mode == 0o600
    assert temp_path != str(dest) + ".tmp" and not os.path.exists(temp_path)
    assert stat.S_IMODE(os.lstat(dest).st_mode) == 0o600
    assert os.listdir(dest.parent) == ["snap.tar.gz"]
    assert json.loads(members(dest)["snapshot.json"][1])["hostname"] == "gpu01"


def test_planted_links_are_replaced_never_followed(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    os.chmod(victim, 0o644)
    shared = tmp_path / "tmp"
    shared.mkdir()
    dest = shared / "gpuhost-snapshot-gpu01.tar.gz"
    # the old writer opened dest + ".tmp" with open("wb"): through this link it overwrote the victim
    os.symlink(str(victim), str(dest) + ".tmp")
    os.symlink(str(victim), str(dest))
    host_snapshot.write_tarball(Recorder(), str(dest), dict(META))
    assert victim.read_text() == "precious\n"
    assert stat.S_IMODE(os.stat(victim).st_mode) == 0o644
    assert not os.path.islink(dest) and stat.S_IMODE(os.lstat(dest).st_mode) == 0o600
    assert os.readlink(str(dest) + ".tmp") == str(victim)  # left as planted
    assert "snapshot.json" in members(dest)


def test_failed_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    def broken(recorder, handle, meta):
        handle.write(b"partial")
        raise IOError(28, "No space left on device")

    monkeypatch.setattr(host_snapshot, "write_snapshot", broken)
    dest = tmp_path / "snap.tar.gz"
    with pytest.raises(EnvironmentError):
        host_snapshot.write_tarball(Recorder(), str(dest), dict(META))
    assert os.listdir(tmp_path) == []
    (tmp_path / "dir.tar.gz").mkdir()
    monkeypatch.undo()
    with pytest.raises(EnvironmentError):
        host_snapshot.write_tarball(Recorder(), str(tmp_path / "dir.tar.gz"), dict(META))
    assert os.listdir(tmp_path) == ["dir.tar.gz"]


# -- PID 1's environment (item 5) -----------------------------------------------------------------

@pytest.mark.parametrize("environ,stored,inside", [
    (b"container=lxc\0AWS_SECRET_ACCESS_KEY=" + SECRET + b"\0PATH=/sbin:/bin\0", b"container=lxc\0", True),
    (b"HOME=/\0AWS_SECRET_ACCESS_KEY=" + SECRET + b"\0TERM=linux\0BOOT_IMAGE=/boot/vmlinuz\0", b"", False),
    (b"AWS_SECRET_ACCESS_KEY=" + SECRET + b"\0container=\xff\xfepodman\0", u"container=\ufffd\ufffdpodman\0".encode(),
     True),
])
def test_environ_keeps_only_the_container_marker(tmp_path, environ, stored, inside):
    host = tmp_path / "host"
    write(host, "/proc/1/environ", environ)
    write(host, "/proc/1/cgroup", "0::/init.scope\n")
    write(host, "/proc/devices", "Character devices:\n195 nvidia\n")
    dest = tmp_path / "snap.tar.gz"
    facts, dummy = capture(host, dest, ["lxc"])
    assert facts["lxc"]["inside_container"] is inside
    with open(dest, "rb") as handle:
        raw = gzip.decompress(handle.read())
    assert SECRET not in raw and b"AWS_SECRET_ACCESS_KEY" not in raw and b"PATH=" not in raw
    assert members(dest)["proc/1/environ"][1] == stored
    # the snapshot gives the same container facts as the host it was taken from
    snap = tmp_path / "snap"
    import_snapshot(str(dest), str(snap))
    assert gather_facts(Root(str(snap)), ["lxc"])["lxc"] == facts["lxc"]


def test_environ_for_snapshot_matches_detection():
    assert lxc.environ_for_snapshot(b"a=1\0container=docker\0container=lxc\0") == b"container=lxc\0"
    assert lxc.environ_for_snapshot(b"") == b""
    assert lxc.environ_for_snapshot(b"\xff\xfe") == b""
    assert lxc.environ_for_snapshot(b"container=\0") == b"container=\0"
    assert host_snapshot.REDUCED_FILES == {"/proc/1/environ": lxc.environ_for_snapshot}


# -- links ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("directory,target,stored", [
    ("/sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0", "../../../../bus/pci/drivers/nvidia",
     "../../../../bus/pci/drivers/nvidia"),
    ("/sys/bus/pci/devices", "../../../devices/pci0000:40/0000:40:01.1/0000:41:00.0",
     "../../../devices/pci0000:40/0000:40:01.1/0000:41:00.0"),
    ("/etc/systemd/system/multi-user.target.wants", "/etc/systemd/system/gpuhost-pcie.service",
     "../gpuhost-pcie.service"),
    ("/etc/systemd/system", "/dev/null", "../../../dev/null"),
    ("/etc", "/etc", "."),
    ("/etc", "//usr/lib/os-release", "../usr/lib/os-release"),
    # relative, but climbing above / (the host stops at /): stored so that it stays inside
    ("/etc/sysctl.d", "../../../../etc/sysctl.conf", "../sysctl.conf"),
    ("/", "usr/lib", "usr/lib"),
])
def test_stored_link_target(directory, target, stored):
    assert host_snapshot.stored_link_target(directory, target) == stored


def test_snapshot_of_the_healthy_host_imports_and_gives_the_same_facts(tmp_path, snapshot_trees):
    """The demo host keeps the systemd wants links absolute, as systemctl writes them."""
    healthy = snapshot_trees["healthy"]
    wants = os.path.join(healthy, "etc/systemd/system/multi-user.target.wants/gpuhost-pcie.service")
    assert os.readlink(wants) == "/etc/systemd/system/gpuhost-pcie.service"
    dest = tmp_path / "healthy.tar.gz"
    facts, recorder = capture(healthy, dest)
    stored = members(dest)
    absolute = [name for name, (m, dummy) in stored.items() if m.issym() and m.linkname.startswith("/")]
    assert absolute == []
    assert stored["etc/systemd/system/multi-user.target.wants/gpuhost-pcie.service"][0].linkname == \
        "../gpuhost-pcie.service"
    snap = tmp_path / "snap"
    import_snapshot(str(dest), str(snap))
    assert check_tree(str(snap)) == []
    replay = gather_facts(Root(str(snap)))

    def comparable(document):
        document = copy.deepcopy(document)
        for key in ("root", "live", "errors", "durations_s"):
            document.pop(key, None)
        # a Root over a snapshot reads command captures without recording them: no nvidia-smi here
        document.pop("nvidia", None)
        return document

    assert replay["persistence"] == facts["persistence"]
    assert replay["persistence"]["pcie"]["enabled"] is True
    assert comparable(replay) == comparable(facts)


def test_masked_unit_stays_masked(tmp_path):
    host = tmp_path / "host"
    (host / "etc/systemd/system").mkdir(parents=True)
    os.symlink("/dev/null", str(host / "etc/systemd/system/gpuhost-cpu-power.service"))
    dest = tmp_path / "snap.tar.gz"
    facts, dummy = capture(host, dest, ["persistence"])
    assert facts["persistence"]["cpu_power"]["unit"]["masked"] is True
    assert members(dest)["etc/systemd/system/gpuhost-cpu-power.service"][0].linkname == "../../../dev/null"
    snap = tmp_path / "snap"
    import_snapshot(str(dest), str(snap))
    assert gather_facts(Root(str(snap)), ["persistence"])["persistence"] == facts["persistence"]


def test_module_documents_what_it_does():
    doc = host_snapshot.DOCUMENTATION
    assert "required: true" not in doc.split("gather:", maxsplit=1)[0]
    assert "0600" in doc and "container=" in doc
