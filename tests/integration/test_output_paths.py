# -*- coding: utf-8 -*-
"""Default output paths are neutral (issue 11, item 1): remediate.yml writes its reports to
``gpuhost-reports`` and snapshot.yml its captures to ``gpuhost-snapshots`` under the working
directory of ansible-playbook, not next to the playbooks; remediate publishes the totals too."""
import json
import os
import shutil
import subprocess
import sys

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")


def play(cwd, playbook, hosts, *args):
    """ansible-playbook playbooks/<playbook> (this checkout, through tests/conftest.py's collection link) in ``cwd``."""
    inventory = os.path.join(str(cwd), os.pardir, "inventory-%s.yml" % os.path.basename(str(cwd)))
    with open(inventory, "w") as handle:
        yaml.safe_dump({"all": {"hosts": hosts}}, handle)
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_SHOW_CUSTOM_STATS="true")
    return subprocess.run([ANSIBLE_PLAYBOOK, "-i", inventory, os.path.join(REPO, "playbooks", playbook)] + list(args),
                          cwd=str(cwd), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=600, check=False)


def local_host(**hostvars):
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    host.update(hostvars)
    return host


def test_remediate_check_reports_under_the_working_directory_and_publishes_totals(snapshot_trees, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    old = [p for p in ("build/reports", "gpuhost-reports") if os.path.exists(os.path.join(REPO, p))]
    result = play(work, "remediate.yml", {"gpu-healthy": local_host(gpuhost_root=snapshot_trees["healthy"])},
                  "--check", "--diff")
    assert result.returncode == 0, result.stdout[-6000:]
    with open(str(work / "gpuhost-reports" / "report.json")) as handle:
        report = json.load(handle)
    assert report["hosts"]["gpu-healthy"]["state"] == "audited"
    assert sorted(os.listdir(str(work))) == ["gpuhost-reports"]
    # ANSIBLE_SHOW_CUSTOM_STATS prints the set_stats data after the recap
    custom = result.stdout.split("CUSTOM STATS:", 1)
    assert len(custom) == 2 and "gpuhost_baseline" in custom[1], result.stdout[-3000:]
    assert str(work / "gpuhost-reports" / "report.json") in custom[1]
    assert [p for p in ("build/reports", "gpuhost-reports") if os.path.exists(os.path.join(REPO, p))] == old


def stamp(path):
    return os.stat(path).st_mtime_ns if os.path.exists(path) else None


OLD_CAPTURE = os.path.join(REPO, "build", "snapshots-captured", "localhost.tar.gz")


def test_snapshot_playbook_captures_under_the_working_directory(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    before = stamp(OLD_CAPTURE)
    result = play(work, "snapshot.yml", {"localhost": local_host(gpuhost_become=False,
                                                                 ansible_python_interpreter=shutil.which("python3"))})
    assert result.returncode == 0, result.stdout[-6000:]
    captured = work / "gpuhost-snapshots"
    assert sorted(os.listdir(str(captured))) == ["localhost", "localhost.tar.gz"]
    assert os.path.isfile(str(captured / "localhost" / "snapshot.json"))
    assert stamp(OLD_CAPTURE) == before  # the old default next to the playbooks is left alone
    # a relative gpuhost_snapshot_dir is taken from the working directory too, import included
    again = play(work, "snapshot.yml", {"localhost": local_host(gpuhost_become=False,
                                                                ansible_python_interpreter=shutil.which("python3"))},
                 "--tags", "import", "-e", "gpuhost_snapshot_dir=gpuhost-snapshots/../gpuhost-snapshots")
    assert again.returncode == 0, again.stdout[-6000:]
    assert sorted(os.listdir(str(work))) == ["gpuhost-snapshots"]
