"""Faults over real SSH: a connection that drops in the middle of remediate.yml.

A guest is booted out of baseline (automatic NUMA balancing on, as every 2-node Debian kernel
starts). The inventory points ansible_python_interpreter at a small wrapper in the guest: when the
first kernel_sysctl fix module arrives (its payload names the module), the wrapper starts a loop that
kills every SSH session (`sshd: root@...`, never the listener) for a few seconds and holds the module
until the loop has killed the session it arrived on. The fix in flight loses its connection every
time, whatever the speed of the machine (an earlier version started the loop from the test on the
fix's start event, and on a slow machine the fix could finish first).
The run must still write the reports, name the host as failed with the lost connection, and fail;
a second run must complete and leave the host at the baseline.
"""
import base64

import pytest

from helpers.report_file import load_report
from helpers.runner import run_playbook, stdout_of

pytestmark = [pytest.mark.vm, pytest.mark.slow]

FIRST_FIX = "Apply the failing rules' fixes"  # the host_fix task (roles/remediate/tasks/fix.yml)
WRAPPER = "/usr/local/bin/gpuhost-python-drop"
MARK = "/run/gpuhost-drop"
# The fault test's interpreter (ansible_python_interpreter). It keeps the module it is given (on
# stdin when pipelining, else as the script argument) and runs it, except the first host_fix
# module, which applies the host's fixes (its AnsiballZ wrapper names the module in plain text): for that one it marks MARK, kills
# the sshd session process it runs under (its first ancestor named "sshd: <user>@..."; with
# ControlMaster that is the whole connection) and exits without running it, as a module dies with
# its session. Only that session goes: the re-audit that follows connects again.
WRAPPER_SCRIPT = r"""#!/bin/sh
set -u
payload=$(mktemp /tmp/gpuhost-module.XXXXXX) || exit 1
trap 'rm -f "$payload"' EXIT
if [ $# -gt 0 ]; then cat "$1" > "$payload"; shift; else cat > "$payload"; fi
if grep -Eq "plugins[.]modules[.]host_fix['\"]" "$payload" && mkdir MARK 2>/dev/null; then
    pid=$$
    while [ "$pid" -gt 1 ]; do
        case "$(tr '\000' ' ' < /proc/"$pid"/cmdline 2>/dev/null)" in
            sshd*:\ *@*) kill -KILL "$pid"; exit 255 ;;
        esac
        pid=$(awk '/^PPid:/ {print $2}' /proc/"$pid"/status 2>/dev/null || echo 1)
    done
    echo "gpuhost-python-drop: no sshd session process above $$" >&2
    exit 97
fi
/usr/bin/python3 "$payload" "$@"
""".replace("MARK", MARK)


def inventory(inst):
    return {"all": {"hosts": {"gpuhost-fault": {
        "ansible_host": inst["address"], "ansible_port": inst["port"], "ansible_user": inst["user"],
        "ansible_ssh_private_key_file": inst["identity_file"],
        "ansible_python_interpreter": WRAPPER,
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
    return load_report(directory)["hosts"]["gpuhost-fault"]


def statuses(host, rule):
    return set(f["status"] for f in host["findings"] if f["id"] == rule)


def install_wrapper(guest):
    encoded = base64.b64encode(WRAPPER_SCRIPT.encode()).decode()
    guest.run("echo %s | base64 -d > %s && chmod 0755 %s && rm -rf %s" % (encoded, WRAPPER, WRAPPER, MARK))


def test_ssh_drop_during_converge_is_reported_and_a_rerun_completes(guest, tmp_path):
    guest.run("sysctl -qw kernel.numa_balancing=1 && rm -f /etc/sysctl.d/90-gpuhost-baseline.conf")
    install_wrapper(guest)
    started = []

    def note_fix_start(event):
        data = event.get("event_data") or {}
        if event.get("event") == "runner_on_start" and str(data.get("task", "")).startswith(FIRST_FIX):
            started.append(data.get("task"))
        return True

    first = run_playbook(tmp_path, "remediate.yml", inventory(guest.inst), env=SSH_ENV,
                         extravars={"gpuhost_report_dir": str(tmp_path / "dropped")}, event_handler=note_fix_start)
    out = stdout_of(first)
    assert started, "the first fix never started:\n" + out[-3000:]
    assert guest.run("test -d %s && echo dropped" % MARK, check=False).strip() == "dropped", \
        "the wrapper never cut the fix's connection:\n" + out[-3000:]
    assert first.rc == 2, "rc %s\n%s" % (first.rc, out[-3000:])
    assert "remediation of gpuhost-fault did not complete: connection lost during the fixes" in out, out[-3000:]
    host = read_host(tmp_path / "dropped")
    assert host["state"] == "failed", host
    assert "connection lost during the fixes" in host["message"]
    assert host["before"]["findings"], "the findings before the fixes stay in the report"
    # the module died with its session: the host is still out of baseline
    assert guest.run("cat /proc/sys/kernel/numa_balancing").strip() == "1"

    second = run_playbook(tmp_path, "remediate.yml", inventory(guest.inst), env=SSH_ENV,
                          extravars={"gpuhost_report_dir": str(tmp_path / "rerun")})
    assert second.rc == 0, stdout_of(second)[-3000:]
    host = read_host(tmp_path / "rerun")
    assert host["state"] == "audited" and not host.get("message")
    assert statuses(host, "NUMA-001") == {"pass"} and statuses(host, "NUMA-006") == {"pass"}
    assert guest.run("cat /proc/sys/kernel/numa_balancing").strip() == "0"
