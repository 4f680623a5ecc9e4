# -*- coding: utf-8 -*-
"""The demo hosts of an installed collection (snapgen/demo.py, the demo_snapshots action) and the hint a
missing demo snapshot gives (gathering.missing_root_hint)."""
import os

import pytest
import yaml

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.snapshot import gathering
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.snapshot.snapgen import demo

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def test_demo_hosts_are_those_of_inventory_demo():
    """The demo playbook's hosts and a checkout's inventory/demo name the same hosts, snapshots and notes."""
    with open(os.path.join(REPO, "inventory", "demo", "hosts.yml")) as handle:
        hosts = yaml.safe_load(handle)["all"]["children"]["snapshots"]["hosts"]
    listed = [(name, os.path.basename(h["gpuhost_root"]), h.get("gpuhost_note", "")) for name, h in hosts.items()]
    assert listed == list(demo.DEMO_HOSTS)


@pytest.fixture
def hostile_only(monkeypatch):
    """The smallest demo host alone, so that writing stays fast."""
    monkeypatch.setattr(demo, "DEMO_HOSTS", tuple(h for h in demo.DEMO_HOSTS if h[1] == "hostile"))


def test_write_demo_then_unchanged_then_replaced(tmp_path, hostile_only):
    dest = str(tmp_path / "snapshots")
    assert demo.write_demo(dest, check_only=True) == {"changed": True, "hosts": [
        {"name": "hostile", "root": os.path.join(dest, "hostile"), "note": demo.DEMO_HOSTS[0][2], "changed": True}]}
    assert not os.path.exists(dest)  # check mode wrote nothing
    first = demo.write_demo(dest)
    assert first["changed"] and os.path.isfile(os.path.join(dest, "hostile", "snapshot.json"))
    assert demo.write_demo(dest)["changed"] is False  # exactly what the generator makes: left as it is
    extra = tmp_path / "snapshots" / "hostile" / "proc" / "added"
    extra.write_text("x")
    assert demo.write_demo(dest, check_only=True)["changed"] is True and extra.exists()
    assert demo.write_demo(dest)["changed"] is True and not extra.exists()  # an older snapshot: replaced


def test_write_demo_leaves_a_foreign_directory_alone(tmp_path, hostile_only):
    foreign = tmp_path / "hostile"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(demo.DemoError, match="holds no snapshot.json"):
        demo.write_demo(str(tmp_path))
    assert (foreign / "notes.txt").read_text() == "mine"


def test_the_demo_inventory_lists_each_host_with_its_snapshot_and_is_written_once(tmp_path):
    import subprocess  # pylint: disable=import-outside-toplevel
    import sys  # pylint: disable=import-outside-toplevel
    import json  # pylint: disable=import-outside-toplevel
    hosts = [{"name": name, "root": str(tmp_path / "snapshots" / scenario), "note": note, "changed": True}
             for name, scenario, note in demo.DEMO_HOSTS]
    path = str(tmp_path / "inventory.yml")
    assert demo.write_inventory(path, hosts, sys.executable, check_only=True) is True and not os.path.exists(path)
    assert demo.write_inventory(path, hosts, sys.executable) is True
    assert demo.write_inventory(path, hosts, sys.executable) is False  # the same text: left as it is
    # ansible's own reader of inventories sees the group, the hosts and their variables
    binary = os.path.join(os.path.dirname(sys.executable), "ansible-inventory")
    done = subprocess.run([binary, "-i", path, "--list"], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)
    assert sorted(listed["gpuhost_demo"]["hosts"]) == sorted(h[0] for h in demo.DEMO_HOSTS)
    variables = listed["_meta"]["hostvars"]["hostile"]
    assert variables["gpuhost_root"] == str(tmp_path / "snapshots" / "hostile")
    assert variables["ansible_connection"] == "local" and variables["gpuhost_note"] == demo.DEMO_HOSTS[3][2]
    assert "gpuhost_note" not in listed["_meta"]["hostvars"]["gpu-incident"]
    with open(path, encoding="utf-8") as handle:
        assert "ansible-playbook gpuhost.baseline.audit -i %s --check" % path in handle.read()


def test_the_demo_inventory_is_not_written_through_a_link(tmp_path):
    target = tmp_path / "elsewhere.yml"
    target.write_text("mine")
    link = tmp_path / "inventory.yml"
    link.symlink_to(target)
    with pytest.raises(demo.DemoError, match="link or not a regular file"):
        demo.write_inventory(str(link), [], "/usr/bin/python3")
    assert target.read_text() == "mine"


def test_missing_root_hint_only_inside_the_collection(tmp_path):
    inside = os.path.join(REPO, "build", "no-such-demo-snapshots", "incident")
    hint = gathering.missing_root_hint(inside)
    assert "ansible-playbook gpuhost.baseline.demo" in hint and "snapshot.yml" not in hint
    assert gathering.missing_root_hint(str(tmp_path / "gone")) is None  # a site's own snapshot: the module's message
    assert gathering.missing_root_hint("/") is None
    assert gathering.missing_root_hint(os.path.join(REPO, "plugins")) is None  # a directory: not missing


def test_missing_demo_roots_are_one_message_for_the_run(tmp_path):
    inside = os.path.join(REPO, "build", "no-such-demo-snapshot")
    roots = dict(("gpu-%02d" % n, inside) for n in range(7))
    roots.update(site=str(tmp_path / "gone"), live=None, other="/")
    message = gathering.missing_demo_roots(roots)
    assert message.startswith("the snapshot root of host(s) gpu-00, gpu-01, gpu-02, gpu-03, gpu-04 and 2 more "
                              "is not a directory: the demo snapshots are not shipped"), message
    assert "ansible-playbook gpuhost.baseline.demo" in message and "site" not in message
    assert gathering.missing_demo_roots({"site": str(tmp_path / "gone"), "live": None}) is None
