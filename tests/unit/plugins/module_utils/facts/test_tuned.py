"""tuned facts (facts/tuned.py): the parsers on tuned's file formats, then gather on snapshot copies."""
import os

import pytest

from helpers.tuned_tree import copy_with_tuned, fixture

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import tuned
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root


def test_active_profile():
    assert tuned.parse_active_profile(fixture("active_profile.balanced")) == ["balanced"]
    assert tuned.parse_active_profile(fixture("active_profile.merged")) == ["virtual-guest", "accelerator-performance"]
    assert tuned.parse_active_profile("") == []  # tuned-adm off
    assert tuned.parse_active_profile(None) is None
    for bad in ("../../etc/shadow\n", "a/b", "\x00\xff", "x" * 200):
        assert tuned.parse_active_profile(bad) is None


def test_profile_mode_and_pid():
    assert tuned.parse_profile_mode(fixture("profile_mode")) == "manual"
    assert tuned.parse_profile_mode("auto\n") == "auto"
    assert tuned.parse_profile_mode("garbage") is None and tuned.parse_profile_mode(None) is None
    assert tuned.parse_pid("1234\n") == 1234
    for bad in ("", "0", "-5", "12ab", "9" * 30, None, b"\xff"):
        assert tuned.parse_pid(bad) is None


def test_tuned_conf():
    parsed = tuned.parse_tuned_conf(fixture("latency-performance.tuned.conf"))
    assert parsed["include"] == [] and parsed["settings"] is None
    assert parsed["sections"]["cpu"]["governor"] == "performance"
    assert parsed["sections"]["cpu"]["force_latency"] == "cstate.id_no_zero:1|3"
    text = "[main]\ninclude = accelerator-performance, latency-performance\n[cpu]\ngovernor=performance\n"
    assert tuned.parse_tuned_conf(text)["include"] == ["accelerator-performance", "latency-performance"]
    # truncated, garbage: no exception
    assert tuned.parse_tuned_conf("[main\ninclude")["include"] == []
    assert tuned.parse_tuned_conf("\x00\xff=[") == {"include": [], "summary": None, "sections": {}, "settings": None}
    assert tuned.parse_tuned_conf(None) is None


def test_gather_running_tuned(snapshot_trees, tmp_path):
    root = copy_with_tuned(snapshot_trees["healthy"], tmp_path / "h", active="latency-performance")
    reader = Root(root)
    facts = tuned.gather(reader)
    assert facts == {"installed": True, "running": True, "enabled": True, "active_profile": "latency-performance",
                     "profiles": ["latency-performance"], "profile_mode": "manual", "profile": None}
    assert reader.errors == []


def test_gather_stale_pid_and_not_installed(snapshot_trees, tmp_path):
    root = copy_with_tuned(snapshot_trees["healthy"], tmp_path / "h", comm="bash", enabled=False)
    facts = tuned.gather(Root(root))
    assert facts["running"] is False and facts["enabled"] is False and facts["active_profile"] == "balanced"
    # the demo hosts have no tuned: everything false or null, no error
    reader = Root(snapshot_trees["incident"])
    assert tuned.gather(reader) == {"installed": False, "running": False, "enabled": False, "active_profile": None,
                                    "profiles": None, "profile_mode": None, "profile": None}
    assert reader.errors == []


def test_gather_garbage_active_profile(snapshot_trees, tmp_path):
    root = copy_with_tuned(snapshot_trees["healthy"], tmp_path / "h", active="../x y/z")
    reader = Root(root)
    facts = tuned.gather(reader)
    assert facts["active_profile"] is None and facts["running"] is True
    assert [e["path"] for e in reader.errors] == [tuned.ACTIVE_PROFILE_PATH]


@pytest.mark.parametrize("layout,directory", [("2.19", "/etc/tuned/"), ("2.24", "/etc/tuned/profiles/")])
def test_gather_reads_the_user_profile(snapshot_trees, tmp_path, layout, directory):
    root = copy_with_tuned(snapshot_trees["healthy"], tmp_path / "h", active="gpuhost-baseline", layout=layout)
    path = directory + "gpuhost-baseline/tuned.conf"
    with _open(root, path) as handle:
        handle.write("# gpuhost-cpu-power-settings: {\"governor\": \"performance\", \"idle_latency_max_us\": 10}\n"
                     "[main]\ninclude=accelerator-performance\n")
    facts = tuned.gather(Root(root))
    assert facts["profile"] == {"name": "gpuhost-baseline", "path": path, "include": ["accelerator-performance"],
                                "managed": True, "settings": {"governor": "performance", "idle_latency_max_us": 10}}


def _open(root, path):
    real = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(real), exist_ok=True)
    return open(real, "w")
