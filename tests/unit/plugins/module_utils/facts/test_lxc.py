# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tests of plugins/module_utils/facts/lxc.py: Proxmox configs, /proc/devices, container detection, gather."""

import errno
import json
import os

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.lxc import (
    cgroup_hints,
    gather,
    parse_environ,
    parse_mount_entry,
    parse_proc_devices,
    parse_pve_lxc_conf,
)
from ansible_collections.gpuhost.baseline.plugins.module_utils.host import root as _sysfs
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root

TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
FIXTURES = os.path.join(TESTS, "fixtures", "lxc")


def fixture(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


# -- Proxmox configs ------------------------------------------------------------------------
def test_gpu_container_current_config():
    conf = parse_pve_lxc_conf(fixture("101-gpu.conf"))
    assert conf["problems"] == []
    assert conf["hostname"] == "infer01"
    assert conf["description"] == "GPU inference container (vLLM, 8 GPUs)\nowner: ml-platform"
    assert conf["unprivileged"] is False
    assert conf["memory_mib"] == 471040
    assert conf["swap_mib"] == 0
    assert conf["cores"] == 64
    assert conf["cpulimit"] == 64
    assert conf["cpuset"] == "0-31,96-127"
    assert conf["cpuset_mems"] == "0"
    assert conf["devices_allow"] == ["c 195:* rwm", "c 508:* rwm", "c 511:* rwm"]
    assert conf["devices_deny"] == []
    assert conf["mounts"][0] == {"source": "/dev/nvidia0", "target": "dev/nvidia0", "type": "none",
                                 "options": "bind,optional,create=file"}
    assert [m["target"] for m in conf["mounts"]] == [
        "dev/nvidia0", "dev/nvidiactl", "dev/nvidia-uvm", "dev/nvidia-uvm-tools", "dev/nvidia-caps"]
    assert conf["mounts"][-1]["options"] == "bind,optional,create=dir"
    assert conf["dev_entries"] == ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl"]
    assert conf["devs"][2] == {"key": "dev2", "path": "/dev/nvidiactl", "options": {"mode": "0666"}}
    assert conf["devs"][0]["options"] == {"gid": "44"}
    assert conf["mount_points"] == [{"key": "mp0", "volume": "/tank/models", "mp": "/models",
                                     "options": {"ro": "1"}}]
    assert conf["raw"]["parent"] == "before-upgrade"
    assert conf["raw"]["memory"] == "471040"
    assert "snaptime" not in conf["raw"]
    assert len(conf["lxc"]["lxc.mount.entry"]) == 5
    assert conf["pending"] is None


def test_gpu_container_snapshot_is_kept_apart():
    conf = parse_pve_lxc_conf(fixture("101-gpu.conf"))
    assert list(conf["snapshots"]) == ["before-upgrade"]
    snap = conf["snapshots"]["before-upgrade"]
    assert snap["memory_mib"] == 262144
    assert snap["cores"] == 32
    assert snap["swap_mib"] == 8192
    assert snap["description"] == "state before the driver 570 upgrade"
    assert snap["devices_allow"] == ["c 195:* rwm", "c 509:* rwm"]
    assert snap["raw"]["snaptime"] == "1733130000"
    assert snap["cpuset"] is None
    assert snap["dev_entries"] == []
    assert len(snap["mounts"]) == 1
    # nothing of the snapshot leaks into the current config
    assert "c 509:* rwm" not in conf["devices_allow"]
    assert conf["memory_mib"] == 471040


def test_plain_container():
    conf = parse_pve_lxc_conf(fixture("102-plain.conf"))
    assert conf["problems"] == []
    assert (conf["memory_mib"], conf["swap_mib"], conf["cores"]) == (1024, 512, 2)
    assert conf["unprivileged"] is True
    assert conf["cpulimit"] is None
    assert conf["cpuset"] is None and conf["cpuset_mems"] is None
    assert conf["devices_allow"] == [] and conf["mounts"] == [] and conf["dev_entries"] == []
    assert conf["snapshots"] == {}
    assert conf["description"] is None


def test_pending_section_cgroup_v1_keys_equals_form_and_encoded_description():
    text = "\n".join([
        "#50%25 of node 1%0Afor batch jobs",
        "cores: 4",
        "cpulimit: 1.5",
        "memory: 8192",
        "lxc.cgroup.devices.allow = c 195:* rwm",
        "lxc.cgroup2.devices.deny: c 195:255 rwm",
        "lxc.cgroup.cpuset.cpus: 8-15",
        "lxc.cgroup2.cpuset.cpus: 16-23",
        "lxc.mount.entry: /dev/nvidia-uvm dev/nvidia-uvm",
        "dev10: /dev/nvidia10",
        "dev2: /dev/nvidia2",
        "",
        "[pve:pending]",
        "memory: 16384",
        "delete: swap",
    ])
    conf = parse_pve_lxc_conf(text)
    assert conf["problems"] == []
    assert conf["description"] == "50% of node 1\nfor batch jobs"
    assert conf["cpulimit"] == 1.5
    assert conf["devices_allow"] == ["c 195:* rwm"]
    assert conf["devices_deny"] == ["c 195:255 rwm"]
    # the cgroup v2 key wins over the v1 one
    assert conf["cpuset"] == "16-23"
    assert conf["mounts"] == [{"source": "/dev/nvidia-uvm", "target": "dev/nvidia-uvm", "type": None,
                               "options": None}]
    assert conf["dev_entries"] == ["/dev/nvidia2", "/dev/nvidia10"]
    assert conf["pending"]["memory_mib"] == 16384
    assert conf["pending"]["raw"]["delete"] == "swap"
    assert conf["snapshots"] == {}
    assert conf["memory_mib"] == 8192


def test_repeated_scalar_key_last_wins_and_bad_lines_are_problems():
    conf = parse_pve_lxc_conf("memory: 1024\nmemory: 2048\nthis is not a key\ncores: many\n[broken\n")
    assert conf["memory_mib"] == 2048
    assert conf["cores"] is None
    assert conf["raw"]["cores"] == "many"
    assert len(conf["problems"]) == 2
    assert conf["problems"][0].startswith("line 3:")
    assert conf["problems"][1].startswith("line 5:")


@pytest.mark.parametrize("text", ["", "\n\n", "   "])
def test_empty_config_gives_nulls(text):
    conf = parse_pve_lxc_conf(text)
    assert conf["memory_mib"] is None and conf["cores"] is None and conf["devices_allow"] == []
    assert conf["problems"] == []


@pytest.mark.parametrize("text", [None, b"memory: 1024"])
def test_non_text_config_is_none(text):
    assert parse_pve_lxc_conf(text) is None


def test_garbage_config_is_all_problems():
    conf = parse_pve_lxc_conf(bytes(range(1, 256)).decode("latin-1"))
    assert conf["memory_mib"] is None
    assert conf["problems"]


def test_mount_entry_fields():
    assert parse_mount_entry("/dev/nvidia0 dev/nvidia0 none bind,optional,create=file 0 0") == {
        "source": "/dev/nvidia0", "target": "dev/nvidia0", "type": "none", "options": "bind,optional,create=file"}
    assert parse_mount_entry("") == {"source": None, "target": None, "type": None, "options": None}


# -- /proc/devices ---------------------------------------------------------------------------
def test_proc_devices_character_majors_only():
    majors = parse_proc_devices(fixture("proc-devices.txt"))
    assert majors["nvidia"] == 195
    assert majors["nvidia-uvm"] == 508
    assert majors["nvidia-caps"] == 511
    assert majors["tty"] == 4
    # "sd" and "loop" are block devices
    assert "sd" not in majors and "loop" not in majors


@pytest.mark.parametrize("text,expected", [
    ("", None), (None, None), ("garbage\n", None), ("Block devices:\n  8 sd\n", None),
    ("Character devices:\n", {}),
    ("Character devices:\nxx nvidia\n 508 nvidia-uvm\n", {"nvidia-uvm": 508}),
])
def test_proc_devices_edge_cases(text, expected):
    assert parse_proc_devices(text) == expected


# -- detection helpers ---------------------------------------------------------------------
def test_environ_nul_separated():
    env = parse_environ(b"container=lxc\0PATH=/usr/bin:/bin\0TERM=linux\0junk\0")
    assert env == {"container": "lxc", "PATH": "/usr/bin:/bin", "TERM": "linux"}
    assert parse_environ(None) is None
    assert parse_environ(b"\xff\xfe") == {}


@pytest.mark.parametrize("text,managers", [
    ("0::/init.scope\n", []),
    ("0::/\n", []),
    ("12:memory:/lxc/101\n11:cpuset:/lxc/101\n", ["lxc", "lxc"]),
    ("0::/lxc.payload.101/init.scope\n", ["lxc"]),
    ("0::/system.slice/docker-3f2a.scope\n", ["docker"]),
    ("0::/kubepods.slice/kubepods-besteffort.slice/cri-containerd-1.scope\n", ["kubernetes"]),
    ("0::/machine.slice/libpod-ab12.scope\n", ["podman"]),
    ("0::/user.slice/lxcfs-not-a-container\n", []),
    ("garbage", []),
])
def test_cgroup_hints(text, managers):
    assert [m for m, _line in cgroup_hints(text)] == managers


# -- gather ----------------------------------------------------------------------------------
def write(base, path, data):
    target = base / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        target.write_bytes(data)
    else:
        target.write_text(data)
    return target


def test_gather_proxmox_host(tmp_path):
    write(tmp_path, "/proc/1/environ", b"HOME=/\0TERM=linux\0")
    write(tmp_path, "/proc/1/cgroup", "0::/init.scope\n")
    write(tmp_path, "/sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n")
    write(tmp_path, "/proc/devices", fixture("proc-devices.txt"))
    write(tmp_path, "/etc/pve/lxc/101.conf", fixture("101-gpu.conf"))
    write(tmp_path, "/etc/pve/lxc/102.conf", fixture("102-plain.conf"))
    write(tmp_path, "/etc/pve/lxc/1000.conf", "memory: 512\n")
    write(tmp_path, "/etc/pve/lxc/101.conf.tmp.1234", "partial write")
    root = Root(str(tmp_path))
    facts = gather(root)
    assert root.errors == []
    assert facts["inside_container"] is False
    assert facts["evidence"] == []
    assert facts["manager"] is None
    # the host's root cgroup has no memory.max: no limit, not an error
    assert facts["cgroup"] == {"version": 2, "memory_max": None, "cpuset_cpus": None, "cpuset_mems": None}
    assert facts["proxmox"] is True
    assert [c["id"] for c in facts["containers"]] == [101, 102, 1000]
    gpu = facts["containers"][0]
    assert gpu["memory_mib"] == 471040
    assert gpu["snapshots"]["before-upgrade"]["memory_mib"] == 262144
    assert "problems" not in gpu
    assert facts["nvidia_uvm_major"] == 508
    assert facts["nvidia_majors"] == {"nvidia": 195, "nvidiactl": 195, "nvidia-uvm": 508,
                                      "nvidia-caps-imex-channels": 509, "nvidia-nvswitch": 510,
                                      "nvidia-caps": 511}
    json.dumps(facts)


def test_gather_inside_lxc_container(tmp_path):
    write(tmp_path, "/proc/1/environ", b"container=lxc\0PATH=/sbin:/bin\0")
    write(tmp_path, "/proc/1/cgroup", "0::/\n")
    write(tmp_path, "/run/host/container-manager", "lxc\n")
    write(tmp_path, "/dev/.lxc-boot-id", "8c1c5b3e-0d0e-4b8f-9f0a-1c2d3e4f5a6b\n")
    write(tmp_path, "/sys/fs/cgroup/cgroup.controllers", "cpuset cpu memory pids\n")
    write(tmp_path, "/sys/fs/cgroup/memory.max", "493921239040\n")
    write(tmp_path, "/sys/fs/cgroup/cpuset.cpus.effective", "0-31,96-127\n")
    write(tmp_path, "/sys/fs/cgroup/cpuset.mems.effective", "0\n")
    write(tmp_path, "/proc/devices", "Character devices:\n195 nvidia\n")
    root = Root(str(tmp_path))
    facts = gather(root)
    assert root.errors == []
    assert facts["inside_container"] is True
    assert facts["manager"] == "lxc"
    assert facts["evidence"] == [
        "/proc/1/environ: container=lxc",
        "/run/host/container-manager: lxc",
        "/dev/.lxc-boot-id exists",
    ]
    assert facts["cgroup"] == {"version": 2, "memory_max": 493921239040, "cpuset_cpus": "0-31,96-127",
                               "cpuset_mems": "0"}
    assert facts["proxmox"] is False
    assert facts["containers"] == []
    assert facts["nvidia_uvm_major"] is None
    assert facts["nvidia_majors"] == {"nvidia": 195}


def test_gather_memory_max_unlimited_and_cgroup_v1(tmp_path):
    write(tmp_path, "/sys/fs/cgroup/cgroup.controllers", "memory\n")
    write(tmp_path, "/sys/fs/cgroup/memory.max", "max\n")
    write(tmp_path, "/proc/devices", "Character devices:\n")
    assert gather(Root(str(tmp_path)))["cgroup"]["memory_max"] == "max"

    v1 = tmp_path / "v1"
    write(v1, "/sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n")
    write(v1, "/sys/fs/cgroup/cpuset/cpuset.effective_cpus", "0-7\n")
    write(v1, "/sys/fs/cgroup/cpuset/cpuset.effective_mems", "0\n")
    write(v1, "/proc/1/cgroup", "12:memory:/lxc/101\n")
    write(v1, "/proc/devices", "Character devices:\n")
    facts = gather(Root(str(v1)))
    assert facts["cgroup"] == {"version": 1, "memory_max": "max", "cpuset_cpus": "0-7", "cpuset_mems": "0"}
    # no /proc/1/environ captured, but the cgroup path names LXC
    assert facts["inside_container"] is True
    assert facts["evidence"] == ["/proc/1/cgroup: 12:memory:/lxc/101"]


def test_gather_unreadable_environ_is_an_error_not_a_crash(tmp_path, monkeypatch):
    environ = write(tmp_path, "/proc/1/environ", b"container=lxc\0")
    write(tmp_path, "/proc/devices", "Character devices:\n")
    real_open = os.open

    def open_as_non_root(path, *args, **kwargs):
        # what the kernel answers a non-root reader of another user's /proc/1/environ
        if path == str(environ):
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(_sysfs.os, "open", open_as_non_root)
    root = Root(str(tmp_path))
    facts = gather(root)
    assert facts["inside_container"] is None
    assert facts["evidence"] == []
    assert root.errors == [{"subsystem": "lxc", "path": "/proc/1/environ",
                            "reason": "permission denied (run with become: true)"}]


def test_gather_bare_root_records_missing_proc_devices(tmp_path):
    root = Root(str(tmp_path))
    facts = gather(root)
    assert facts["inside_container"] is None
    assert facts["cgroup"]["version"] is None
    assert facts["proxmox"] is False
    assert facts["nvidia_uvm_major"] is None
    assert root.errors == [{"subsystem": "lxc", "path": "/proc/devices", "reason": "missing"}]


def test_gather_broken_files(tmp_path):
    write(tmp_path, "/proc/1/environ", b"")
    write(tmp_path, "/proc/devices", "\x00\x01 not proc devices")
    write(tmp_path, "/sys/fs/cgroup/cgroup.controllers", "")
    write(tmp_path, "/sys/fs/cgroup/memory.max", "lots\n")
    write(tmp_path, "/etc/pve/lxc/103.conf", "memory: 2048\nwhat is this\n")
    write(tmp_path, "/etc/pve/lxc/104.conf", "")
    root = Root(str(tmp_path))
    facts = gather(root)
    assert facts["inside_container"] is False
    assert facts["cgroup"]["memory_max"] is None
    assert facts["nvidia_uvm_major"] is None
    assert [c["id"] for c in facts["containers"]] == [103, 104]
    assert facts["containers"][0]["memory_mib"] == 2048
    reasons = {(e["path"], e["reason"].split(":")[0]) for e in root.errors}
    assert ("/proc/devices", "no 'Character devices") in reasons
    assert ("/etc/pve/lxc/103.conf", "line 2") in reasons


# -- fuzzing ---------------------------------------------------------------------------------
_FUZZ = settings(max_examples=200, deadline=None)
_CONF_ALPHABET = st.sampled_from(list("abcdemorywsxplv0123456789.:=,# []/\n\t%-_*")
                                 + ["lxc.", "dev0: ", "mp1: ", "[pve:pending]\n"])


@_FUZZ
@given(st.text())
def test_fuzz_conf_text(text):
    conf = parse_pve_lxc_conf(text)
    json.dumps(conf)


@_FUZZ
@given(st.lists(_CONF_ALPHABET, max_size=200).map("".join))
def test_fuzz_conf_tokens(text):
    conf = parse_pve_lxc_conf(text)
    assert isinstance(conf["devices_allow"], list)
    for snap in conf["snapshots"].values():
        assert isinstance(snap["raw"], dict)


@_FUZZ
@given(st.integers(min_value=0, max_value=3000), st.text(max_size=40))
def test_fuzz_conf_mutated(cut, junk):
    text = fixture("101-gpu.conf")
    json.dumps(parse_pve_lxc_conf(text[:cut] + junk + text[cut:]))


@_FUZZ
@given(st.text())
def test_fuzz_proc_devices(text):
    result = parse_proc_devices(text)
    assert result is None or all(isinstance(v, int) for v in result.values())


@_FUZZ
@given(st.integers(min_value=0, max_value=600), st.text(max_size=20))
def test_fuzz_proc_devices_mutated(cut, junk):
    text = fixture("proc-devices.txt")
    parse_proc_devices(text[:cut] + junk + text[cut:])


@_FUZZ
@given(st.binary(max_size=200), st.text(max_size=200))
def test_fuzz_detection_helpers(environ, cgroup):
    parse_environ(environ)
    cgroup_hints(cgroup)


def test_proc_devices_majors_are_ascii_digits():
    """A major that str.isdigit() takes but int() refuses (a superscript one, found by the fuzz
    test) is skipped like any other odd line, never a traceback; so is a container file named so."""
    text = "Character devices:\n  1 mem\n\u00b9 odd\n195 nvidia\n"
    assert parse_proc_devices(text) == {"mem": 1, "nvidia": 195}
    assert parse_proc_devices(fixture("proc-devices.txt")[:27] + "\u00b9" + fixture("proc-devices.txt")[27:]) is not None
