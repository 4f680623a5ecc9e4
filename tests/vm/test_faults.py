"""Faults over real SSH: a connection that drops in the middle of remediate.yml.

A guest is booted out of baseline (automatic NUMA balancing on, as every 2-node Debian kernel
starts). When remediate.yml starts its first fix, a loop inside the guest kills every SSH session
(`sshd: root@...`, never the listener) for a few seconds: the fix in flight loses its connection.
The run must still write the reports, name the host as failed with the lost connection, and fail;
a second run must complete and leave the host at the baseline.
"""
import json
import os
import threading
import time

import pytest

from helpers.runner import run_playbook, stdout_of

pytestmark = [pytest.mark.vm, pytest.mark.slow]

FIRST_FIX = "NUMA-001 NUMA-006"
DROP_SECONDS = 12
# Kill every SSH session (not sshd's listener) for DROP_SECONDS, detached from the session that starts it.
DROP_LOOP = ("nohup sh -c 'end=$(($(date +%%s) + %d)); while [ $(date +%%s) -lt $end ]; do "
             "pkill -KILL -f \"^sshd: [a-z]+@\"; sleep 0.2; done' >/dev/null 2>&1 &" % DROP_SECONDS)


def inventory(inst):
    return {"all": {"hosts": {"gpuhost-fault": {
        "ansible_host": inst["address"], "ansible_port": inst["port"], "ansible_user": inst["user"],
        "ansible_ssh_private_key_file": inst["identity_file"],
        "ansible_python_interpreter": "/usr/bin/python3",
        "gpuhost_profile": "generic-nvidia-inference",
        "gpuhost_params": {"nic_min_link_width": 1},
    }}}}


SSH_ENV = {
    "ANSIBLE_HOST_KEY_CHECKING": "False",
    "ANSIBLE_PIPELINING": "True",
    # as the molecule scenarios: a connection that goes away fails the task instead of hanging it
    "ANSIBLE_SSH_ARGS": "-o ControlMaster=auto -o ControlPersist=60s -o ServerAliveInterval=5 "
                        "-o ServerAliveCountMax=6 -o UserKnownHostsFile=/dev/null",
}


def read_host(directory):
    with open(os.path.join(str(directory), "report.json")) as handle:
        return json.load(handle)["hosts"]["gpuhost-fault"]


def statuses(host, rule):
    return set(f["status"] for f in host["findings"] if f["id"] == rule)


def test_ssh_drop_during_converge_is_reported_and_a_rerun_completes(guest, tmp_path):
    guest.run("sysctl -qw kernel.numa_balancing=1 && rm -f /etc/sysctl.d/90-gpuhost-baseline.conf")
    dropped = threading.Event()

    def drop_on_first_fix(event):
        data = event.get("event_data") or {}
        if event.get("event") == "runner_on_start" and str(data.get("task", "")).startswith(FIRST_FIX) \
                and not dropped.is_set():
            dropped.set()
            # the loop kills this very session too: ssh's exit status means nothing here
            threading.Thread(target=guest.run, args=(DROP_LOOP,), kwargs={"check": False}).start()
        return True

    first = run_playbook(tmp_path, "remediate.yml", inventory(guest.inst), env=SSH_ENV,
                         extravars={"gpuhost_report_dir": str(tmp_path / "dropped")}, event_handler=drop_on_first_fix)
    out = stdout_of(first)
    assert dropped.is_set(), "the first fix never started:\n" + out[-3000:]
    assert first.rc != 0, out[-3000:]
    assert "remediation of gpuhost-fault did not complete: connection lost during the fixes" in out
    host = read_host(tmp_path / "dropped")
    assert host["state"] in ("failed", "unreachable"), host
    assert "connection lost during the fixes" in host["message"]
    assert host["before"]["findings"], "the findings before the fixes stay in the report"

    time.sleep(DROP_SECONDS)  # the kill loop is over
    second = run_playbook(tmp_path, "remediate.yml", inventory(guest.inst), env=SSH_ENV,
                          extravars={"gpuhost_report_dir": str(tmp_path / "rerun")})
    assert second.rc == 0, stdout_of(second)[-3000:]
    host = read_host(tmp_path / "rerun")
    assert host["state"] == "audited" and not host.get("message")
    assert statuses(host, "NUMA-001") == {"pass"} and statuses(host, "NUMA-006") == {"pass"}
    assert guest.run("cat /proc/sys/kernel/numa_balancing").strip() == "0"
