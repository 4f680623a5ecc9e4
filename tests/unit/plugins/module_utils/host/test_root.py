"""Root-relative reader: reads, errors, links, commands, and the recording used by snapshots."""
import json
import os

from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Recorder, Root, _canonical
from helpers.tree import replay_recording


def make_tree(tmp_path):
    (tmp_path / "sys/devices/pci0000:00/0000:00:01.0").mkdir(parents=True)
    (tmp_path / "sys/devices/pci0000:00/0000:00:01.0/vendor").write_text("0x10de\n")
    (tmp_path / "sys/bus/pci/devices").mkdir(parents=True)
    os.symlink("../../../devices/pci0000:00/0000:00:01.0", tmp_path / "sys/bus/pci/devices/0000:00:01.0")
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/numa_balancing").write_text("1\n")
    (tmp_path / "proc/sys/kernel/garbage").write_bytes(b"yes\x00\xff\n")
    (tmp_path / "proc/sys/kernel/empty").write_text("")
    return tmp_path


def test_reads_through_root_and_records_errors(tmp_path):
    root = Root(str(make_tree(tmp_path)))
    assert not root.live
    assert root.read_int("/proc/sys/kernel/numa_balancing", "kernel") == 1
    assert root.read_int("/proc/sys/kernel/garbage", "kernel") is None
    assert root.read_value("/proc/sys/kernel/empty", "kernel") is None
    assert root.read_value("/proc/sys/kernel/absent", "kernel", optional=True) is None
    assert root.read_value("/proc/sys/kernel/absent2", "kernel") is None
    reasons = dict((e["path"], e["reason"]) for e in root.errors)
    assert reasons["/proc/sys/kernel/garbage"].startswith("not an integer")
    assert reasons["/proc/sys/kernel/empty"] == "empty file"
    assert reasons["/proc/sys/kernel/absent2"] == "missing"
    assert "/proc/sys/kernel/absent" not in reasons


def test_links_resolve_inside_the_snapshot(tmp_path):
    root = Root(str(make_tree(tmp_path)))
    link = "/sys/bus/pci/devices/0000:00:01.0"
    assert root.resolve_link(link) == "/sys/devices/pci0000:00/0000:00:01.0"
    assert root.read_value(link + "/vendor", "pci") == "0x10de"
    assert root.readlink("/proc/sys/kernel/numa_balancing", "pci") is None
    assert root.errors[-1]["reason"] == "not a symlink in this capture"


def test_snapshot_root_never_runs_commands(tmp_path):
    calls = []
    root = Root(str(make_tree(tmp_path)), run_command=calls.append, which=lambda n: "/bin/" + n)
    out, reason = root.command("nvidia-smi-q", "nvidia")
    assert out is None and "not captured in snapshot" in reason
    assert calls == []
    (tmp_path / "commands").mkdir()
    (tmp_path / "commands/nvidia-smi-q.xml").write_text("<nvidia_smi_log/>")
    assert root.command("nvidia-smi-q", "nvidia") == ("<nvidia_smi_log/>", None)


def test_live_command_failures_are_reasons_not_exceptions():
    def boom(argv):
        raise OSError("exec format error")

    root = Root("/", run_command=boom, which=lambda n: "/usr/bin/" + n)
    out, reason = root.command("nvidia-smi-q", "nvidia")
    assert out is None and "exited 127" in reason
    root = Root("/", run_command=lambda argv: (9, "", "NVIDIA-SMI has failed\n"), which=lambda n: "/x/" + n)
    assert "NVIDIA-SMI has failed" in root.command("nvidia-smi-topo", "nvidia")[1]
    root = Root("/", which=lambda n: None)
    assert root.command("nvidia-smi-q", "nvidia")[1] == "nvidia-smi not found in PATH"


def test_canonical_path_goes_through_recorded_links():
    links = {"/sys/bus/pci/devices/a": "../../../devices/pci0000:00/a"}
    assert _canonical("/sys/bus/pci/devices/a/config", links) == "/sys/devices/pci0000:00/a/config"
    assert _canonical("/sys/bus/pci/devices/a", links) == "/sys/bus/pci/devices/a"


def test_recorded_snapshot_replays_the_same_reads_and_failures(tmp_path):
    src = make_tree(tmp_path / "src")
    recorder = Recorder()
    live_like = Root(str(src), recorder=recorder, run_command=lambda argv: (3, "", "no devices found"),
                     which=lambda n: "/usr/bin/" + n)
    link = "/sys/bus/pci/devices/0000:00:01.0"
    first = [live_like.listdir("/sys/bus/pci/devices"), live_like.resolve_link(link),
             live_like.read_value(link + "/vendor", "pci"), live_like.read_int("/proc/sys/kernel/numa_balancing", "k"),
             live_like.read_value("/proc/sys/kernel/absent", "k"), live_like.command("nvidia-smi-q", "nvidia")]
    dest = tmp_path / "snap"
    replay = replay_recording(recorder, dest, {"format": 1, "hostname": "h"})
    second = [replay.listdir("/sys/bus/pci/devices"), replay.resolve_link(link),
              replay.read_value(link + "/vendor", "pci"), replay.read_int("/proc/sys/kernel/numa_balancing", "k"),
              replay.read_value("/proc/sys/kernel/absent", "k"), replay.command("nvidia-smi-q", "nvidia")]
    assert first == second
    assert live_like.errors == replay.errors
    meta = json.loads((dest / "snapshot.json").read_text())
    assert meta["unreadable"] == {"/proc/sys/kernel/absent": "missing"}
    assert "garbage" not in os.listdir(dest / "proc/sys/kernel")


def test_snapshot_keeps_the_execute_bit_and_nothing_else(tmp_path):
    import io
    import tarfile

    from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Recorder, Root, write_snapshot
    (tmp_path / "usr" / "local" / "sbin").mkdir(parents=True)
    script = tmp_path / "usr" / "local" / "sbin" / "gpuhost-pcie-apply"
    script.write_text("#!/bin/sh\n")
    os.chmod(str(script), 0o4775)  # setuid and group-writable are not kept
    plain = tmp_path / "usr" / "local" / "sbin" / "notes"
    plain.write_text("x\n")
    recorder = Recorder()
    reader = Root(str(tmp_path), recorder=recorder)
    for path in ("/usr/local/sbin/gpuhost-pcie-apply", "/usr/local/sbin/notes"):
        reader.read_text(path, "persistence")
        reader.mode(path)
    buffer = io.BytesIO()
    write_snapshot(recorder, buffer, {"format": 1})
    buffer.seek(0)
    with tarfile.open(fileobj=buffer) as tar:
        modes = dict((m.name, m.mode) for m in tar.getmembers() if m.isfile())
    assert modes["usr/local/sbin/gpuhost-pcie-apply"] == 0o755
    assert modes["usr/local/sbin/notes"] == 0o644
