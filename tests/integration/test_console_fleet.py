"""The console of a 150-host audit with the checkout's stdout callback, gpuhost.baseline.fleet (issue 37 item 2).

ansible-playbook as an operator runs it (not ansible-runner, whose own callback replaces the stdout one):
150 hosts cycling through the demo snapshots (incident, healthy, intel, hostile) and two unreachable
hosts, ``gpuhost_fail_on: high``. Whatever the host count, the console is at most 60 lines plus 3 per
distinct failing group: no task banner for work that did not happen (the on_fail role's meta task, the
skipped and ok results), the summary folded, the verdict's failures one line per reason, the PLAY RECAP
one line per distinct set of counts. About a minute on a 2-core machine.
"""
import json
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
HOSTS = 150
MIX = ("incident", "healthy", "healthy", "intel", "hostile")


@pytest.fixture(scope="module")
def console(snapshot_trees, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("console-fleet")
    hosts = dict(("gpu%03d-%s" % (i, MIX[i % len(MIX)]), {"gpuhost_root": snapshot_trees[MIX[i % len(MIX)]]})
                 for i in range(HOSTS - 2))
    inventory = {"all": {"children": {
        "snapshots": {"vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
                      "hosts": hosts},
        "gone": {"vars": {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 9,
                          "ansible_ssh_common_args": "-o ConnectTimeout=3 -o BatchMode=yes",
                          "ansible_python_interpreter": "/usr/bin/python3"},
                 "hosts": {"ghost-1": {}, "ghost-2": {}}}}}}
    (tmp / "inventory.yml").write_text(json.dumps(inventory))
    extra = {"gpuhost_report_dir": str(tmp / "reports"), "gpuhost_fail_on": "high"}
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    env.pop("ANSIBLE_STDOUT_CALLBACK", None)
    proc = subprocess.run([PLAYBOOK, "-i", str(tmp / "inventory.yml"), "-e", json.dumps(extra), "--check",
                           os.path.join(REPO, "playbooks", "audit.yml")], cwd=str(tmp), env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=900,
                          check=False)
    with open(str(tmp / "reports" / "report.json"), encoding="utf-8") as handle:
        report = json.load(handle)
    with open(str(tmp / "console.txt"), "w", encoding="utf-8") as handle:
        handle.write(proc.stdout)  # kept under the test's tmp directory to look at
    return proc, proc.stdout.splitlines(), report


def failing_groups(report):
    sets = set()
    for host in report["hosts"].values():
        failing = frozenset((f["id"], f.get("subject")) for f in host.get("findings") or [] if f["status"] == "fail")
        if failing:
            sets.add(failing)
    return sets


def test_the_console_does_not_grow_with_the_fleet(console):
    proc, lines, report = console
    assert proc.returncode == 4, "\n".join(lines[-40:])  # the unreachable hosts
    groups = failing_groups(report)
    assert len(report["hosts"]) == HOSTS and len(groups) == 3
    print("console of a %d-host audit: %d lines, %d failing groups (limit %d)"
          % (HOSTS, len(lines), len(groups), 60 + 3 * len(groups)))
    assert len(lines) <= 60 + 3 * len(groups), "\n".join(lines)


def test_no_banner_for_work_that_did_not_happen(console):
    dummy, lines, dummy2 = console
    text = "\n".join(lines)
    assert "Nothing to act on without gpuhost_on_fail" not in text
    assert not re.search(r"^(ok|skipping): \[gpu", text, re.M)  # no per-host ok or skipped line
    banners = [line for line in lines if line.startswith("TASK [")]
    assert len(banners) == len(set(banners)) and len(banners) <= 6, banners


def test_the_verdict_and_the_recap_are_folded(console):
    dummy, lines, dummy2 = console
    failed = [line for line in lines if line.startswith("failed: ")]
    assert len(failed) == 2, failed  # the incident and the hostile hosts' reasons
    assert any(re.match(r"failed: 30 hosts \(gpu000-incident, gpu005-incident, .*\): \d+ failing finding\(s\) at or "
                        r"above severity high: ", line) for line in failed), failed
    recap = lines[lines.index(next(line for line in lines if line.startswith("PLAY RECAP"))) + 1:]
    recap = [line for line in recap if line.strip()]
    assert 3 <= len(recap) <= 6, recap
    assert any(re.match(r"\d+ hosts : ok=\d+ +changed=0 +unreachable=0 +failed=1 ", line) for line in recap), recap
    counted = sum(int(line.split(" hosts :")[0]) if " hosts :" in line else 1 for line in recap)
    assert counted == HOSTS, recap
