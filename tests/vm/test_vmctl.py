"""vmctl.py without booting anything: cache keys, the QEMU command line, molecule's
instance config, PID checks. Runs in the ordinary unit test run (no `vm` marker)."""
import json
import os
import socket
import subprocess
import sys
import time

import pytest

import vmctl


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUHOST_VM_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_component_key_follows_the_files_that_build_it(tmp_path, monkeypatch):
    for rel in ("build_image.sh", "lib.sh", "suite-bullseye.sh", "build_qemu.sh", "qemu-pcie-devctl-writable.patch", "ssdt.dsl"):
        (tmp_path / rel).write_text(rel)
    monkeypatch.setattr(vmctl, "HERE", str(tmp_path))
    before = {name: vmctl.component_key(name) for name in vmctl.COMPONENTS}
    (tmp_path / "qemu-pcie-devctl-writable.patch").write_text("changed")
    after = {name: vmctl.component_key(name) for name in vmctl.COMPONENTS}
    assert after["qemu"] != before["qemu"]
    assert after["image"] == before["image"] and after["ssdt"] == before["ssdt"]
    (tmp_path / "lib.sh").write_text("changed too")
    assert vmctl.component_key("image") != before["image"]
    assert vmctl.component_key("ssdt") == before["ssdt"]


def test_component_key_frames_file_boundaries(tmp_path, monkeypatch):
    # Moving bytes from one file to the next must not keep the key.
    monkeypatch.setattr(vmctl, "HERE", str(tmp_path))
    (tmp_path / "build_image.sh").write_text("ab")
    (tmp_path / "lib.sh").write_text("c")
    first = vmctl.component_key("image")
    (tmp_path / "build_image.sh").write_text("a")
    (tmp_path / "lib.sh").write_text("bc")
    assert vmctl.component_key("image") != first


def test_suite_hook_lines_stay_out_of_the_bookworm_key_only(tmp_path, monkeypatch):
    """Adding a suite to build_image.sh (tagged lines) keeps a cached bookworm image valid; any other
    edit rebuilds it; the bullseye image's key covers every line and its own suite file."""
    monkeypatch.setattr(vmctl, "HERE", str(tmp_path))
    (tmp_path / "lib.sh").write_text("lib\n")
    (tmp_path / "suite-bullseye.sh").write_text("suite=bullseye\n")
    (tmp_path / "build_image.sh").write_text("a\nb\n")
    before = {name: vmctl.component_key(name) for name in ("image", "image-bullseye")}
    (tmp_path / "build_image.sh").write_text("a\nif [ -n \"${2:-}\" ]; then :; fi  #:suite-hook\nb\n")
    assert vmctl.component_key("image") == before["image"]
    assert vmctl.component_key("image-bullseye") != before["image-bullseye"]
    hooked = vmctl.component_key("image-bullseye")
    (tmp_path / "suite-bullseye.sh").write_text("suite=bullseye\npackages=more\n")
    assert vmctl.component_key("image-bullseye") != hooked
    assert vmctl.component_key("image") == before["image"]
    (tmp_path / "build_image.sh").write_text("a\nif [ -n \"${2:-}\" ]; then :; fi  #:suite-hook\nb changed\n")
    assert vmctl.component_key("image") != before["image"]


def test_the_suite_hook_of_build_image_sh_acts_only_on_a_suite_argument():
    """What the bookworm key leaves out of the real script: comments and the one line that sources
    suite-SUITE.sh when a second argument is given."""
    with open(os.path.join(vmctl.HERE, "build_image.sh")) as handle:
        tagged = [line.strip() for line in handle if "#:suite-hook" in line]
    code = [line for line in tagged if not line.startswith("#")]
    assert code == ['if [ -n "${2:-}" ]; then . "$(dirname "$0")/suite-$2.sh"; fi  #:suite-hook'], tagged
    for suite, component in vmctl.IMAGES.items():
        if component != "image":
            assert component == "image-%s" % suite and "suite-%s.sh" % suite in vmctl.COMPONENTS[component]


def test_images_by_suite(cache):
    assert vmctl.artifact_paths()["base_image"] == vmctl.artifact_paths("bookworm")["base_image"]
    bullseye = vmctl.artifact_paths("bullseye")
    assert os.path.basename(os.path.dirname(bullseye["base_image"])) == "image-bullseye-%s" % vmctl.component_key("image-bullseye")
    assert bullseye["identity_file"].startswith(os.path.dirname(bullseye["base_image"]))
    assert bullseye["qemu"] == vmctl.artifact_paths()["qemu"] and bullseye["ssdt"] == vmctl.artifact_paths()["ssdt"]
    with pytest.raises(vmctl.VmError, match="no guest image 'buster'"):
        vmctl.artifact_paths("buster")


def test_build_passes_the_suite_and_keeps_the_other_image(tmp_path, monkeypatch, cache):
    """image-bullseye runs build_image.sh OUTDIR bullseye; building one image never deletes the other
    (image-bullseye-<key> starts with "image-" but is not an older bookworm image)."""
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "build_image.sh").write_text('set -e\nmkdir "$1"\necho "suite=${2:-bookworm}" >"$1/args"\n')
    (scripts / "suite-bullseye.sh").write_text("")
    monkeypatch.setattr(vmctl, "HERE", str(scripts))
    monkeypatch.setattr(vmctl, "COMPONENTS", {"image": ("build_image.sh",), "image-bullseye": ("build_image.sh", "suite-bullseye.sh")})
    stale = cache / "image-0123456789abcdef"
    stale.mkdir(parents=True)
    log = open(os.devnull, "w")
    bullseye = vmctl.build("image-bullseye", log=log)
    bookworm = vmctl.build("image", log=log)
    with open(os.path.join(bullseye, "args")) as handle:
        assert handle.read() == "suite=bullseye\n"
    with open(os.path.join(bookworm, "args")) as handle:
        assert handle.read() == "suite=bookworm\n"
    assert os.path.isdir(bullseye) and not stale.exists()
    (scripts / "build_image.sh").write_text('set -e\nmkdir "$1"\n# changed\n')
    newer = vmctl.build("image", log=log)
    assert newer != bookworm and not os.path.exists(bookworm) and os.path.isdir(bullseye)
    log.close()


def test_artifacts_live_under_the_cache(cache):
    paths = vmctl.artifact_paths()
    for path in paths.values():
        assert path.startswith(str(cache) + os.sep)
    assert os.path.basename(os.path.dirname(paths["qemu"])).startswith("qemu-")


def test_qemu_command_line_has_the_incident_shape():
    paths = {"ssdt": "/c/ssdt.aml", "kernel": "/c/vmlinuz", "initrd": "/c/initrd.img"}
    files = {"overlay": "/w/g.qcow2", "nvme": "/w/n.raw", "console_log": "/w/c.log", "pidfile": "/w/g.pid"}
    argv = vmctl.qemu_argv("/q/qemu", paths, "g1", 2222, files, append="init=/bin/false")
    joined = " ".join(argv)
    pairs = list(zip(argv, argv[1:]))
    assert ("-M", "q35") in pairs and ("-accel", "tcg,thread=multi") in pairs
    assert ("-cpu", "max,family=16") in pairs
    assert ("-smp", "2,sockets=2,cores=1,threads=1") in pairs and ("-m", "2G") in pairs
    assert joined.count("memory-backend-ram") == 2
    assert ("-numa", "node,nodeid=1,cpus=1,memdev=mem1") in pairs
    assert ("-acpitable", "file=/c/ssdt.aml") in pairs
    assert ("-append", "root=/dev/vda rw console=ttyS0 init=/bin/false") in pairs
    assert "hostfwd=tcp:127.0.0.1:2222-:22" in joined and "restrict=on" in joined
    assert "pxb-pcie,id=pxb1,bus_nr=128,numa_node=1" in joined
    assert "e1000e,netdev=net1,bus=rp4" in joined and "pcie-root-port,id=rp4,bus=pxb1" in joined
    for device in ("virtio-blk-pci", "virtio-net-pci"):
        spec = [a for a in argv if a.startswith(device)][0]
        assert "disable-legacy=on" in spec
    assert ("-serial", "file:/w/c.log") in pairs and ("-pidfile", "/w/g.pid") in pairs


def test_instance_config_merges_and_removes_entries(tmp_path):
    config = str(tmp_path / "molecule" / "instance_config.yml")
    inst = {"instance": "a", "address": "127.0.0.1", "user": "root", "port": 2201,
            "identity_file": "/k", "pid": 5, "console_log": "/c"}
    vmctl.update_instance_config(config, "a", inst)
    vmctl.update_instance_config(config, "b", dict(inst, instance="b", port=2202))
    vmctl.update_instance_config(config, "a", dict(inst, port=2203))
    with open(config) as handle:
        entries = json.load(handle)
    assert [(e["instance"], e["port"]) for e in entries] == [("b", 2202), ("a", 2203)]
    assert set(entries[0]) == set(vmctl.INSTANCE_CONFIG_KEYS)
    vmctl.update_instance_config(config, "b")
    with open(config) as handle:
        assert [e["instance"] for e in json.load(handle)] == ["a"]


@pytest.mark.parametrize("seed", ["", "\n", "[]", "{}", "---\n"])
def test_instance_config_accepts_empty_seeds(tmp_path, seed):
    config = tmp_path / "instance_config.yml"
    config.write_text(seed)
    assert vmctl._read_instance_config(str(config)) == []


def test_instance_config_in_another_format_is_refused(tmp_path):
    config = tmp_path / "instance_config.yml"
    config.write_text("- instance: a\n  port: 1\n")
    with pytest.raises(vmctl.VmError, match="not the JSON list"):
        vmctl._read_instance_config(str(config))


def test_pid_check_needs_the_guest_pidfile_in_the_command_line(tmp_path):
    # A live process that is not our QEMU (PID reuse) is never signalled.
    code = "import time; print('ready', flush=True); time.sleep(30)"
    proc = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "g.pid")], stdout=subprocess.PIPE)
    try:
        proc.stdout.readline()  # exec'd: /proc/PID/cmdline is the final one
        assert vmctl.pid_is_guest(proc.pid, str(tmp_path / "g.pid"))
        assert not vmctl.pid_is_guest(proc.pid, str(tmp_path / "other.pid"))
        assert vmctl.stop_pid(proc.pid, str(tmp_path / "g.pid"), grace=5)
        assert not os.path.exists("/proc/%d" % proc.pid)  # stop_pid reaped its child
    finally:
        proc.kill()
        proc.wait()
    assert not vmctl.pid_is_guest(proc.pid, str(tmp_path / "g.pid"))
    assert not vmctl.pid_is_guest(None, "x")


def test_stop_pid_escalates_to_kill(tmp_path):
    marker = str(tmp_path / "stubborn.pid")
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code, marker], stdout=subprocess.PIPE)
    try:
        proc.stdout.readline()
        started = time.time()
        assert vmctl.stop_pid(proc.pid, marker, grace=0.5)
        elapsed = time.time() - started
        # TERM was ignored, so it took the grace period and then KILL.
        assert 0.5 <= elapsed < 5
        assert not os.path.exists("/proc/%d" % proc.pid)
    finally:
        proc.kill()
        proc.wait()


def test_up_refuses_a_busy_port_before_building(cache):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    port = sock.getsockname()[1]
    try:
        with pytest.raises(vmctl.VmError, match="in use by another program"):
            vmctl.up("busy", port)
    finally:
        sock.close()
    assert not os.path.exists(os.path.join(str(cache), "image-%s" % vmctl.component_key("image")))


@pytest.mark.parametrize("name", ["", "../x", ".hidden", "a/b"])
def test_up_refuses_bad_names(cache, name):
    with pytest.raises(vmctl.VmError, match="bad instance name"):
        vmctl.up(name, 1)


def test_down_of_an_unknown_guest_is_a_no_op(cache):
    assert vmctl.down("nobody") is False
    assert vmctl.down_all() == []
    assert vmctl.status() == []


def test_down_cleans_up_a_guest_that_already_died(cache, tmp_path):
    overlay = tmp_path / "dead.qcow2"
    overlay.write_text("x")
    os.makedirs(vmctl.registry_dir())
    inst = {"instance": "dead", "pid": 999999999, "pidfile": str(tmp_path / "dead.pid"),
            "overlay": str(overlay), "nvme_image": str(tmp_path / "n.raw"), "workdir": str(tmp_path), "port": 1}
    vmctl._write_json(vmctl.registry_path("dead"), inst)
    assert [row["running"] for row in vmctl.status()] == [False]
    assert vmctl.down("dead") is False
    assert not overlay.exists()
    assert vmctl.load_instance("dead") is None


def test_cli_down_needs_a_name_or_all(cache, capsys):
    with pytest.raises(SystemExit):
        vmctl.main(["down"])
    assert vmctl.main(["down", "--all"]) == 0
    assert "nothing was running" in capsys.readouterr().out
