# -*- coding: utf-8 -*-
"""Snapshot tarballs are checked before they are unpacked on the controller (issue 10 item 3).

Every hostile tarball is built here with ``tarfile``: the refusal names the member, nothing is
written at the destination (nor next to it, nor outside it), and a good snapshot is unpacked
with sane modes whatever modes its members carry.
"""
import importlib
import io
import json
import os
import stat
import tarfile

import pytest

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.snapshot import snapshot
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.snapshot.snapshot import (
    SnapshotError, SnapshotRefused, check_tree, import_snapshot)

META = json.dumps({"format": 1, "hostname": "gpu01"}).encode()


def member(name, kind="file", data=b"", mode=None, target=""):
    """``(TarInfo, data)`` of one member; ``kind`` is file, dir, sym, hard, chr, blk or fifo."""
    info = tarfile.TarInfo(name)
    info.type = {"file": tarfile.REGTYPE, "dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE,
                 "chr": tarfile.CHRTYPE, "blk": tarfile.BLKTYPE, "fifo": tarfile.FIFOTYPE}[kind]
    info.mode = mode if mode is not None else (0o755 if kind == "dir" else 0o777 if kind == "sym" else 0o644)
    info.linkname = target
    info.mtime = 1736910720
    if kind in ("chr", "blk"):
        info.devmajor, info.devminor = 1, 3
    info.size = len(data) if kind == "file" else 0
    return info, data


def tarball(path, members, with_meta=True):
    with tarfile.open(path, "w:gz") as tar:
        if with_meta:
            info, data = member("snapshot.json", data=META)
            tar.addfile(info, io.BytesIO(data))
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return str(path)


def good_members():
    pci = "sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0"
    return [
        member("sys", "dir", mode=0o777),
        member("sys/devices", "dir", mode=0o777),
        member(pci, "dir", mode=0o2777),
        member(pci + "/config", data=b"\x10\xde" + bytes(62), mode=0o666),
        member(pci + "/driver", "sym", target="../../../../bus/pci/drivers/nvidia"),
        member("sys/bus/pci/devices/0000:41:00.0", "sym", target="../../../devices/pci0000:40/0000:40:01.1/0000:41:00.0"),
        member("proc/cmdline", data=b"quiet iommu=pt\n", mode=0o4755),
        member("usr/local/sbin/gpuhost-pcie-apply", data=b"#!/bin/sh\n", mode=0o775),
        member("etc/systemd/system/gpuhost-pcie.service", data=b"[Service]\n", mode=0o600),
        member("etc/systemd/system/multi-user.target.wants/gpuhost-pcie.service", "sym",
               target="../gpuhost-pcie.service"),
        member("etc/systemd/system/gpuhost-cpu-power.service", "sym", target="../../../dev/null"),
    ]


def mode_of(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def leftovers(parent, dest):
    return sorted(name for name in os.listdir(parent) if name != os.path.basename(dest) and name.startswith("."))


# -- a good snapshot ---------------------------------------------------------------------------

def test_good_snapshot_is_unpacked_with_sane_modes(tmp_path):
    src = tarball(tmp_path / "gpu01.tar.gz", good_members())
    dest = tmp_path / "snaps" / "gpu01"
    result = import_snapshot(src, str(dest))
    assert result == {"dest": str(dest), "members": 12, "files": 5, "links": 4, "directories": 3,
                      "replaced": False}
    assert json.loads((dest / "snapshot.json").read_text())["hostname"] == "gpu01"
    pci = dest / "sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0"
    assert os.readlink(dest / "sys/bus/pci/devices/0000:41:00.0") == \
        "../../../devices/pci0000:40/0000:40:01.1/0000:41:00.0"
    assert (dest / "sys/bus/pci/devices/0000:41:00.0/config").read_bytes()[:2] == b"\x10\xde"
    assert os.readlink(pci / "driver") == "../../../../bus/pci/drivers/nvidia"
    # modes: the snapshot directory private, directories 0755 (listed 0777 or 2777, or not listed at
    # all), files 0644, 0755 when the owner could execute them; no set-user-ID
    assert mode_of(dest) == 0o700
    for path in ("sys", "sys/devices", "sys/devices/pci0000:40/0000:40:01.1/0000:41:00.0", "proc",
                 "sys/bus/pci/devices", "etc/systemd/system/multi-user.target.wants"):
        assert mode_of(dest / path) == 0o755, path
    assert mode_of(pci / "config") == 0o644
    assert mode_of(dest / "proc/cmdline") == 0o755
    assert mode_of(dest / "usr/local/sbin/gpuhost-pcie-apply") == 0o755
    assert mode_of(dest / "etc/systemd/system/gpuhost-pcie.service") == 0o644
    assert check_tree(str(dest)) == []
    assert leftovers(dest.parent, dest) == []


def test_previous_snapshot_is_replaced_as_a_whole(tmp_path):
    dest = tmp_path / "gpu01"
    dest.mkdir()
    (dest / "snapshot.json").write_bytes(META)
    (dest / "proc").mkdir()
    (dest / "proc" / "stale").write_text("from an older capture")
    result = import_snapshot(tarball(tmp_path / "t.tar.gz", good_members()), str(dest))
    assert result["replaced"] is True
    assert not (dest / "proc" / "stale").exists()
    assert (dest / "proc" / "cmdline").exists()
    assert leftovers(tmp_path, dest) == []


def test_destination_that_is_not_a_snapshot_is_left_alone(tmp_path):
    dest = tmp_path / "home"
    dest.mkdir()
    (dest / "notes.txt").write_text("mine")
    with pytest.raises(SnapshotError, match="holds no snapshot.json"):
        import_snapshot(tarball(tmp_path / "t.tar.gz", good_members()), str(dest))
    assert os.listdir(dest) == ["notes.txt"]
    (tmp_path / "link").symlink_to(dest)
    with pytest.raises(SnapshotError, match="not a directory"):
        import_snapshot(tarball(tmp_path / "t.tar.gz", good_members()), str(tmp_path / "link"))


def test_check_only_writes_nothing(tmp_path):
    dest = tmp_path / "snaps" / "gpu01"
    result = import_snapshot(tarball(tmp_path / "t.tar.gz", good_members()), str(dest), check_only=True)
    assert result["members"] == 12
    assert not (tmp_path / "snaps").exists()
    with pytest.raises(SnapshotRefused, match="proc/cmdline"):
        import_snapshot(tarball(tmp_path / "bad.tar.gz", [member("proc/cmdline", "sym", target="/tmp/x")]),
                        str(dest), check_only=True)


def test_tar_of_a_directory_with_dot_names_is_accepted(tmp_path):
    tree = tmp_path / "tree"
    (tree / "proc").mkdir(parents=True)
    (tree / "proc" / "cmdline").write_text("quiet\n")
    (tree / "snapshot.json").write_bytes(META)
    src = tmp_path / "t.tar.gz"
    with tarfile.open(src, "w:gz") as tar:
        tar.add(str(tree), arcname=".")
    dest = tmp_path / "out"
    import_snapshot(str(src), str(dest))
    assert (dest / "proc" / "cmdline").read_text() == "quiet\n"


# -- hostile tarballs --------------------------------------------------------------------------

HOSTILE = {
    "escaping relative link": (
        [member("etc", "dir"), member("etc/systemd", "sym", target="../../../../../../etc")],
        "etc/systemd", "leaves the snapshot"),
    "absolute link outside": (
        [member("proc/cmdline", "sym", target="/tmp/gpuhost-victim")], "proc/cmdline", "absolute path '/tmp/"),
    "absolute link to a host path": (
        [member("etc/systemd/system/multi-user.target.wants/gpuhost-pcie.service", "sym",
                target="/etc/systemd/system/gpuhost-pcie.service")],
        "etc/systemd/system/multi-user.target.wants/gpuhost-pcie.service", "absolute path"),
    "character device": ([member("dev/mem", "chr")], "dev/mem", "character device node"),
    "block device": ([member("dev/sda", "blk")], "dev/sda", "block device node"),
    "FIFO": ([member("proc/cpuinfo", "fifo")], "proc/cpuinfo", "a FIFO"),
    "hard link": ([member("proc/cmdline", data=b"x"), member("proc/version", "hard", target="proc/cmdline")],
                  "proc/version", "hard link"),
    "dot-dot name": ([member("../escaped", data=b"x")], "../escaped", "'..'"),
    "dot-dot inside a name": ([member("sys/../../escaped", data=b"x")], "sys/../../escaped", "'..'"),
    "dot-dot staying inside": ([member("sys/../proc/cmdline", data=b"x")], "sys/../proc/cmdline", "'..'"),
    "absolute name": ([member("/etc/cron.d/evil", data=b"x")], "/etc/cron.d/evil", "absolute member name"),
    "given twice": ([member("proc/cmdline", data=b"a"), member("proc/cmdline", data=b"b")],
                    "proc/cmdline", "given twice"),
    "written through a link member": (
        [member("etc", "dir"), member("etc/pve", "sym", target="../sys"), member("etc/pve/x", data=b"x")],
        "etc/pve/x", "inside the symbolic link member 'etc/pve'"),
    # "a -> b/.." is inside while b does not exist; once "b -> ." exists it resolves to the parent
    # of the snapshot. Only the check of the unpacked tree sees it.
    "link escaping once a later member exists": (
        [member("a", "sym", target="b/.."), member("b", "sym", target=".")], "a", "leaves the snapshot"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_tarball_is_refused_naming_the_member(tmp_path, case):
    members, name, reason = HOSTILE[case]
    victim = tmp_path / "victim"
    victim.write_text("untouched")
    parent = tmp_path / "snaps"
    parent.mkdir()
    dest = parent / "gpu01"
    src = tarball(tmp_path / "hostile.tar.gz", members)
    with pytest.raises(SnapshotRefused) as caught:
        import_snapshot(src, str(dest))
    assert any(path == name and reason in why for path, why in caught.value.problems), caught.value.problems
    assert name in str(caught.value) and reason in str(caught.value)
    assert not dest.exists()
    assert os.listdir(parent) == []  # no half-unpacked directory left behind
    assert victim.read_text() == "untouched"
    assert sorted(os.listdir(tmp_path)) == ["hostile.tar.gz", "snaps", "victim"]


def test_every_refused_member_is_listed(tmp_path):
    members = [member("proc/%d" % i, "sym", target="/tmp/x%d" % i) for i in range(8)]
    with pytest.raises(SnapshotRefused) as caught:
        import_snapshot(tarball(tmp_path / "t.tar.gz", members), str(tmp_path / "out"))
    assert [path for path, dummy in caught.value.problems] == ["proc/%d" % i for i in range(8)]
    assert "8 problems" in str(caught.value) and "and 3 more" in str(caught.value)


def test_hostile_names_are_shown_escaped(tmp_path):
    name = "proc/\x1b[2J\udcffcmdline"
    with pytest.raises(SnapshotRefused) as caught:
        import_snapshot(tarball(tmp_path / "t.tar.gz", [member(name, "fifo")]), str(tmp_path / "out"))
    assert caught.value.problems[0][0] == name
    assert caught.value.lines() == ["proc/\\x1b[2J\\udcffcmdline: is a FIFO, not a regular file, directory or "
                                    "symbolic link"]
    assert "\x1b" not in str(caught.value) and "proc/\\x1b[2J" in str(caught.value)


def test_not_a_snapshot_and_not_a_tarball(tmp_path):
    with pytest.raises(SnapshotRefused, match="snapshot.json: missing"):
        import_snapshot(tarball(tmp_path / "t.tar.gz", [member("proc/cmdline", data=b"x")], with_meta=False),
                        str(tmp_path / "a"))
    (tmp_path / "garbage.tar.gz").write_bytes(b"\x1f\x8b garbage")
    with pytest.raises(SnapshotError, match="cannot read snapshot tarball"):
        import_snapshot(str(tmp_path / "garbage.tar.gz"), str(tmp_path / "b"))
    with pytest.raises(SnapshotError, match="cannot read snapshot tarball"):
        import_snapshot(str(tmp_path / "missing.tar.gz"), str(tmp_path / "c"))
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_size_limits_stop_before_reading_on(tmp_path):
    src = tarball(tmp_path / "t.tar.gz", [member("proc/%d" % i, data=b"x" * 100) for i in range(10)])
    with pytest.raises(SnapshotRefused, match="more than 5 members"):
        import_snapshot(src, str(tmp_path / "a"), max_members=5)
    with pytest.raises(SnapshotRefused, match="proc/3: the files add up to more than %d bytes" % (350 + len(META))):
        import_snapshot(src, str(tmp_path / "b"), max_bytes=350 + len(META))


# -- directories ---------------------------------------------------------------------------------

def test_check_tree_of_a_directory(tmp_path):
    tree = tmp_path / "snap"
    (tree / "etc" / "systemd" / "system" / "multi-user.target.wants").mkdir(parents=True)
    (tree / "proc").mkdir()
    (tree / "proc" / "cmdline").write_text("quiet\n")
    os.chmod(tree, 0o755)
    assert check_tree(str(tree)) == []
    wants = tree / "etc/systemd/system/multi-user.target.wants/gpuhost-pcie.service"
    wants.symlink_to("/etc/systemd/system/gpuhost-pcie.service")
    os.mkfifo(str(tree / "proc" / "fifo"))
    (tree / "sys").symlink_to("../../outside")
    (tree / "proc" / "open").write_text("x")
    os.chmod(tree / "proc" / "open", 0o666)
    problems = dict(check_tree(str(tree)))
    assert problems == {
        "etc/systemd/system/multi-user.target.wants/gpuhost-pcie.service":
            "symbolic link to the absolute path '/etc/systemd/system/gpuhost-pcie.service'",
        "proc/fifo": "is a FIFO, not a regular file, directory or symbolic link",
        "proc/open": "mode 0666 is world-writable",
        "sys": "symbolic link to '../../outside' leaves the snapshot",
    }
    # the readers resolve an absolute target inside the snapshot (host/root.py): it can be allowed
    assert "etc/systemd/system/multi-user.target.wants/gpuhost-pcie.service" not in \
        dict(check_tree(str(tree), allow_absolute_links=True))
    assert check_tree(str(tmp_path / "missing"))[0][0] == "."


def test_check_tree_resolves_links_as_the_readers_do(tmp_path):
    # a relative link through an allowed absolute one is judged inside the snapshot (where the
    # readers look), never through this machine's own /etc
    tree = tmp_path / "snap"
    (tree / "etc").mkdir(parents=True)
    (tree / "etc" / "abs").symlink_to("/etc")
    (tree / "etc" / "rel").symlink_to("abs/ssl")
    assert check_tree(str(tree), allow_absolute_links=True) == []
    (tree / "etc" / "up").symlink_to("abs/../../../outside")
    assert dict(check_tree(str(tree), allow_absolute_links=True)) == {
        "etc/up": "symbolic link to 'abs/../../../outside' leaves the snapshot"}


def test_generated_demo_snapshots_pass_the_directory_check(snapshot_trees):
    for name, path in sorted(snapshot_trees.items()):
        problems = check_tree(path, allow_absolute_links=True)
        assert problems == [], (name, problems[:5])


# -- the action's options ------------------------------------------------------------------------

def test_documentation_module_repeats_the_action_options():
    doc_module = importlib.import_module("ansible_collections.gpuhost.baseline.plugins.modules.snapshot_import")
    assert doc_module.ARGUMENT_SPEC == snapshot.ARGUMENT_SPEC


# -- the raw stream (issue 18 item 4; the bombs themselves: tests/fuzz/test_fuzz_tarball.py) ---------

def test_long_names_links_and_pax_headers_tarfile_writes_are_accepted(tmp_path):
    # names and link targets over 100 characters, non-ASCII names, in the three formats tarfile
    # writes: the scan reads their GNU and pax headers as tarfile does
    deep = "sys/devices/" + "/".join("pci0000:%02x" % i for i in range(20))
    for fmt in (tarfile.GNU_FORMAT, tarfile.PAX_FORMAT, tarfile.USTAR_FORMAT):
        src = tmp_path / ("fmt%d.tar.gz" % fmt)
        with tarfile.open(src, "w:gz", format=fmt) as tar:
            members = [member("snapshot.json", data=META), member(deep, "dir"),
                       member(deep + "/config", data=b"\x10\xde" * 40),
                       member("etc/" + "l" * 90 + "/link", "sym", target="../" + "t" * 150),
                       member("etc/gpu-\u00e9t\u00e9", data=b"x\n")]
            for info, data in members:
                if fmt == tarfile.USTAR_FORMAT and (len(info.linkname) > 100 or not info.name.isascii()):
                    continue
                tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
        dest = tmp_path / ("out%d" % fmt)
        import_snapshot(str(src), str(dest))
        assert (dest / deep / "config").read_bytes() == b"\x10\xde" * 40
        if fmt != tarfile.USTAR_FORMAT:
            assert os.readlink(dest / "etc" / ("l" * 90) / "link") == "../" + "t" * 150
            assert (dest / "etc" / "gpu-\u00e9t\u00e9").read_bytes() == b"x\n"


def test_pax_size_decides_where_the_next_header_is(tmp_path):
    # a pax header's size replaces the header's: the scan skips the data tarfile skips
    src = tmp_path / "t.tar"
    data = b"y" * 1500
    with tarfile.open(src, "w", format=tarfile.PAX_FORMAT) as tar:
        info, dummy = member("snapshot.json", data=META)
        tar.addfile(info, io.BytesIO(META))
        info = tarfile.TarInfo("proc/big")
        info.size = len(data)
        info.pax_headers = {"size": str(len(data))}
        tar.addfile(info, io.BytesIO(data))
    dest = tmp_path / "out"
    assert import_snapshot(str(src), str(dest))["files"] == 2
    assert (dest / "proc" / "big").read_bytes() == data


def test_decompressed_size_is_capped(tmp_path):
    src = tarball(tmp_path / "t.tar.gz", [member("proc/%d" % i, data=b"\0" * 4096) for i in range(10)])
    with pytest.raises(SnapshotRefused, match="larger than 20000 bytes"):
        import_snapshot(src, str(tmp_path / "a"), max_expanded=20000)
    assert import_snapshot(src, str(tmp_path / "b"), max_expanded=60000)["files"] == 11


def test_header_bomb_is_refused_before_its_payload_is_read(tmp_path, monkeypatch):
    src = tmp_path / "t.tar"
    block = bytearray(512)
    block[0:13] = b"././@LongLink"
    block[100:108] = b"0000644\0"
    block[124:136] = b"%011o\0" % (200 * 1024 * 1024)
    block[148:156] = b" " * 8
    block[156:157] = b"L"
    block[257:265] = b"ustar\x0000"
    block[148:156] = b"%06o\0 " % sum(block)
    src.write_bytes(bytes(block) + b"a" * 4096)
    monkeypatch.setattr(tarfile, "open", lambda *a, **k: pytest.fail("tarfile opened a header bomb"))
    with pytest.raises(SnapshotRefused) as caught:
        import_snapshot(str(src), str(tmp_path / "out"))
    reason = "GNU long-name header ('L') of 209715200 bytes: a header may hold at most 65536"
    assert caught.value.problems == [("tar header at byte 0", reason)]


def test_messages_quote_a_few_hundred_characters(tmp_path):
    name = "proc/" + "\x1b" + "n" * 100000
    problems = [(name + str(i), "symbolic link to %s leaves the snapshot" % snapshot._quote("../" * 50000))
                for i in range(7)]
    exc = SnapshotRefused("/x/" + "s" * 5000 + ".tar.gz", problems)
    assert len(str(exc)) <= 1500 and "\x1b" not in str(exc)
    assert "(100007 characters)" in str(exc) and "and 6 more" in str(exc)
    lines = exc.lines()
    assert len(lines) == 7 and all(len(line) < 1000 for line in lines)
    assert exc.lines(2) == lines[:2]


def test_fifo_as_tarball_is_refused_without_blocking(tmp_path):
    os.mkfifo(str(tmp_path / "fifo.tar.gz"))
    with pytest.raises(SnapshotError, match="not a regular file"):
        import_snapshot(str(tmp_path / "fifo.tar.gz"), str(tmp_path / "out"))


def test_snapshot_json_nested_too_deeply_is_an_error_of_the_snapshot(tmp_path):
    from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root
    src = tmp_path / "t.tar.gz"
    with tarfile.open(src, "w:gz") as tar:
        info, data = member("snapshot.json", data=b"[" * 100000)
        tar.addfile(info, io.BytesIO(data))
    import_snapshot(str(src), str(tmp_path / "out"))
    root = Root(str(tmp_path / "out"))
    assert root.read_value("/proc/cmdline", "kernel", optional=True) is None
    assert root.command("nvidia-smi-q", "nvidia")[0] is None
    assert [e for e in root.errors if e["path"] == "/snapshot.json"] == [{
        "subsystem": "root", "path": "/snapshot.json",
        "reason": "cannot be parsed: nested too deeply; the failures recorded at capture are not replayed"}]
    (tmp_path / "out" / "snapshot.json").write_text('"a string"')
    root = Root(str(tmp_path / "out"))
    root.read_value("/proc/cmdline", "kernel", optional=True)
    assert "not a JSON object" in root.errors[0]["reason"]
