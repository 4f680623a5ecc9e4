"""Paths under a snapshot root resolve inside it; reads take regular files of bounded size;
writes never follow a link (issue 10, items 1, 2, 6). host/root.py and fix/base.py."""
import os
import stat
import time

import pytest

from helpers.fixhost import FakeModule

from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import (
    OutsideRoot, Refused, Root, read_regular, resolve_in_root)
from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.base import FixError, Host
from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.sysctl import apply as sysctl_apply


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    (root / "sys" / "devices" / "pci0000:40" / "0000:41:00.0").mkdir(parents=True)
    (root / "sys" / "bus" / "pci" / "devices").mkdir(parents=True)
    (root / "etc").mkdir()
    outside.mkdir()
    (outside / "secret").write_text("outside\n")
    os.symlink("../../../devices/pci0000:40/0000:41:00.0", str(root / "sys/bus/pci/devices/0000:41:00.0"))
    (root / "sys/devices/pci0000:40/0000:41:00.0/vendor").write_text("0x10de\n")
    return root, outside


def test_sysfs_style_relative_links_resolve_inside(tree):
    root, unused = tree
    real = resolve_in_root(str(root), "/sys/bus/pci/devices/0000:41:00.0/vendor")
    assert real == str(root / "sys/devices/pci0000:40/0000:41:00.0/vendor")
    assert Root(str(root)).read_value("/sys/bus/pci/devices/0000:41:00.0/vendor", "pci") == "0x10de"


def test_absolute_link_starts_again_at_the_root(tree):
    root, outside = tree
    os.symlink(str(outside / "secret"), str(root / "etc" / "abs"))  # absolute, as the host would store it
    real = resolve_in_root(str(root), "/etc/abs")
    assert real == os.path.join(str(root), str(outside / "secret").lstrip("/"))
    reader = Root(str(root))
    assert reader.read_text("/etc/abs", "kernel") is None  # not there inside the snapshot
    assert reader.errors[0]["reason"] == "missing"


@pytest.mark.parametrize("target", ["../../outside/secret", "../sys/../../outside", "../" * 12 + "etc/passwd"])
def test_relative_escape_is_refused(tree, target):
    root, unused = tree
    os.symlink(target, str(root / "etc" / "esc"))
    with pytest.raises(OutsideRoot, match="leaves the snapshot root"):
        resolve_in_root(str(root), "/etc/esc")
    reader = Root(str(root))
    assert reader.read_text("/etc/esc", "kernel") is None
    assert reader.errors == [{"subsystem": "kernel", "path": "/etc/esc",
                              "reason": "leaves the snapshot root %s" % root}]


def test_escape_through_an_intermediate_directory_link_and_dotdot(tree):
    root, outside = tree
    os.symlink("../../outside", str(root / "etc" / "dir"))
    with pytest.raises(OutsideRoot):
        resolve_in_root(str(root), "/etc/dir/secret")
    with pytest.raises(OutsideRoot):
        resolve_in_root(str(root), "/etc/../../outside/secret")
    reader = Root(str(root))
    assert reader.listdir("/etc/dir") == [] and reader.errors[0]["path"] == "/etc/dir"
    assert reader.exists("/etc/dir/secret") is False
    assert not reader.isdir("/etc/dir")


def test_link_loop_is_refused(tree):
    root, unused = tree
    os.symlink("b", str(root / "etc" / "a"))
    os.symlink("a", str(root / "etc" / "b"))
    with pytest.raises(OutsideRoot, match="levels of symbolic links"):
        resolve_in_root(str(root), "/etc/a")


def test_readlink_reads_the_link_itself(tree):
    root, unused = tree
    assert Root(str(root)).readlink("/sys/bus/pci/devices/0000:41:00.0") == "../../../devices/pci0000:40/0000:41:00.0"


def test_fifo_is_refused_without_blocking(tree):
    root, unused = tree
    os.mkfifo(str(root / "etc" / "fifo"))
    started = time.monotonic()
    reader = Root(str(root))
    assert reader.read_text("/etc/fifo", "kernel") is None
    assert time.monotonic() - started < 5
    assert reader.errors[0]["reason"] == "is a FIFO, not a regular file"


def test_device_and_directory_are_refused(tree):
    root, unused = tree
    os.mknod(str(root / "etc" / "zero"), 0o644 | stat.S_IFCHR, os.makedev(1, 5))
    with pytest.raises(Refused, match="a device, not a regular file"):
        read_regular(str(root / "etc" / "zero"), "/etc/zero")
    with pytest.raises(Refused, match="a directory"):
        read_regular(str(root / "etc"), "/etc")


def test_size_cap_and_limit(tree):
    root, unused = tree
    big = root / "etc" / "big"
    with open(str(big), "wb") as handle:
        handle.truncate(1 << 30)  # sparse: 1 GB that costs nothing to make
    with pytest.raises(Refused, match="larger than 4194304 bytes"):
        read_regular(str(big), "/etc/big")
    assert read_regular(str(big), "/etc/big", limit=256) == b"\0" * 256  # a bounded prefix is fine
    (root / "etc" / "small").write_bytes(b"x" * 100)
    with pytest.raises(Refused):
        read_regular(str(root / "etc" / "small"), "/etc/small", cap=99)
    assert read_regular(str(root / "etc" / "small"), "/etc/small", cap=100) == b"x" * 100


# -- writes ------------------------------------------------------------------------------------

def _sysctl_tree(root):
    (root / "proc" / "sys" / "kernel").mkdir(parents=True)
    (root / "proc" / "sys" / "kernel" / "numa_balancing").write_text("1\n")
    (root / "etc" / "sysctl.d").mkdir(parents=True, exist_ok=True)


def listing(path):
    out = {}
    for dirpath, dirnames, filenames in os.walk(str(path)):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            out[os.path.relpath(full, str(path))] = open(full, "rb").read() if os.path.isfile(full) else None
    return out


def test_the_issues_minimal_form_writes_nothing_outside(tmp_path):
    # ln -s /tmp/out/nb t/proc/sys/kernel/numa_balancing; ln -s /tmp/out/sysctl.d t/etc/sysctl.d
    root, out = tmp_path / "t", tmp_path / "out"
    _sysctl_tree(root)
    out.mkdir()
    (out / "nb").write_text("1\n")
    (out / "sysctl.d").mkdir()
    os.unlink(str(root / "proc/sys/kernel/numa_balancing"))
    os.symlink("../../../../out/nb", str(root / "proc/sys/kernel/numa_balancing"))
    os.rmdir(str(root / "etc/sysctl.d"))
    os.symlink("../../out/sysctl.d", str(root / "etc/sysctl.d"))
    before = listing(out)
    with pytest.raises(FixError) as info:
        sysctl_apply(Host(FakeModule(), str(root), True), "kernel.numa_balancing", "0")
    assert "leaves the snapshot root" in info.value.msg
    assert listing(out) == before


def test_a_link_at_the_last_component_is_never_written_through(tmp_path):
    root = tmp_path / "t"
    _sysctl_tree(root)
    (root / "elsewhere").write_text("1\n")
    os.unlink(str(root / "proc/sys/kernel/numa_balancing"))
    os.symlink("../../../elsewhere", str(root / "proc/sys/kernel/numa_balancing"))  # inside the root
    host = Host(FakeModule(), str(root), False)
    with pytest.raises(FixError, match="is a symbolic link"):
        host.write_attr("/proc/sys/kernel/numa_balancing", "0")
    os.symlink("../../elsewhere", str(root / "etc/sysctl.d/90-gpuhost-baseline.conf"))
    with pytest.raises(FixError, match="is a symbolic link"):
        host.write_file("/etc/sysctl.d/90-gpuhost-baseline.conf", b"kernel.numa_balancing = 0\n")
    assert (root / "elsewhere").read_text() == "1\n"


def test_a_link_the_fix_itself_manages_is_replaced_not_followed(tmp_path):
    root = tmp_path / "t"
    (root / "etc/systemd/system/multi-user.target.wants").mkdir(parents=True)
    (root / "victim").write_text("keep\n")
    os.symlink("../../../../victim", str(root / "etc/systemd/system/multi-user.target.wants/x.service"))
    host = Host(FakeModule(), str(root), False)
    host.symlink("/etc/systemd/system/multi-user.target.wants/x.service", "/etc/systemd/system/x.service")
    assert os.readlink(str(root / "etc/systemd/system/multi-user.target.wants/x.service")) == \
        "/etc/systemd/system/x.service"
    assert (root / "victim").read_text() == "keep\n"


def test_directory_cache_never_collapses_dotdot_lexically(tree):
    # /etc/dir is a link into sys/...: /etc/dir/../x is sys/devices/pci0000:40/x on the host, not /etc/x;
    # and a '..' climbing above the root is refused even when the directories were seen before
    root, unused = tree
    os.symlink("../sys/devices/pci0000:40/0000:41:00.0", str(root / "etc" / "dir"))
    (root / "sys" / "devices" / "pci0000:40" / "x").write_text("through the link\n")
    (root / "etc" / "x").write_text("lexical\n")
    reader = Root(str(root))
    assert reader.read_value("/etc/dir/vendor", "pci") == "0x10de"  # fills the cache for /etc/dir
    assert reader.read_value("/etc/dir/../x", "pci") == "through the link"
    assert reader.read_value("/etc/../../../x", "pci") is None
    assert "leaves the snapshot root" in reader.errors[-1]["reason"]


def test_a_file_that_is_a_link_is_followed_inside_the_root(tree):
    root, unused = tree
    (root / "etc" / "real").write_text("value\n")
    os.symlink("real", str(root / "etc" / "alias"))
    reader = Root(str(root))
    assert reader.read_value("/etc/alias", "kernel") == "value"
