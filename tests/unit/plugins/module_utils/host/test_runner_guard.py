"""The runner's backstops when its caller is itself bounded (issue 40): the deadline every command is
clamped to (runner.set_deadline, host_measure's deadline_s) and the guard that ends the running
command's process group and the holders of its pipes when the caller's process is killed.

The killed caller is a module-like child Python that runs, through the runner, a tool leaving a child
in a session of its own that holds stdout (what a process-group kill alone misses); the test kills the
caller with SIGKILL and expects the tool and its child gone within a few seconds. Without the guard
(the same caller with the guard switched off) the tool's child survives: the case shows what the guard
adds.
"""
import os
import signal
import subprocess
import sys
import time

import pytest

from helpers.fake_tool import alive

from ansible_collections.gpuhost.baseline.plugins.module_utils.host import runner

COLLECTIONS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))))), "build", "collections")

TOOL = """
echo $$ >> "$1"
setsid sh -c 'echo $$ >> "$1"; exec sleep 300' sh "$1" &
exec sleep 300
"""

CALLER = """
import json, sys
sys.path.insert(0, sys.argv[1])
from ansible_collections.gpuhost.baseline.plugins.module_utils.host import runner
if sys.argv[3] == "off":
    runner._GUARD["failed"] = True
pids = sys.argv[2]
if sys.argv[3] == "exit":
    runner.run(["/bin/true"])
    open(pids, "a").write("guard %d\\n" % runner._GUARD["proc"].pid)
    sys.exit(0)
runner.run(["/bin/sh", "-c", sys.argv[4], "tool", pids], timeout=300)
"""


def wait_for(predicate, within):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def start_caller(tmp_path, mode):
    pids = tmp_path / "pids"
    pids.write_text("")
    caller = subprocess.Popen([sys.executable, "-c", CALLER, COLLECTIONS, str(pids), mode, TOOL])
    return caller, pids


def tool_pids(pids):
    return [int(word) for word in pids.read_text().split()]


def kill_caller_mid_command(tmp_path, mode):
    caller, pids = start_caller(tmp_path, mode)
    try:
        assert wait_for(lambda: len(tool_pids(pids)) == 2, 10), pids.read_text()
        started = tool_pids(pids)
        assert all(alive(pid) for pid in started)
        caller.send_signal(signal.SIGKILL)
        caller.wait(timeout=5)
        return started
    finally:
        if caller.poll() is None:
            caller.kill()
            caller.wait()


def test_a_killed_caller_leaves_no_tool_behind(tmp_path):
    started = kill_caller_mid_command(tmp_path, "on")
    # the guard's grace between SIGTERM and SIGKILL is KILL_GRACE_S; sleep ends at SIGTERM
    assert wait_for(lambda: not any(alive(pid) for pid in started), 2 + 2 * runner.KILL_GRACE_S), \
        [pid for pid in started if alive(pid)]


def test_without_the_guard_the_tool_outlives_its_killed_caller(tmp_path):
    started = kill_caller_mid_command(tmp_path, "off")
    try:
        time.sleep(1 + 2 * runner.KILL_GRACE_S)
        assert all(alive(pid) for pid in started)
    finally:
        for pid in started:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def test_the_guard_exits_with_a_caller_that_exits(tmp_path):
    caller, pids = start_caller(tmp_path, "exit")
    assert caller.wait(timeout=10) == 0
    (line,) = pids.read_text().split("\n")[:1]
    guard = int(line.split()[1])
    assert wait_for(lambda: not alive(guard), 3)


@pytest.fixture
def deadline():
    yield runner.set_deadline
    runner.set_deadline(None)


def test_a_command_ends_at_the_deadline_and_none_starts_after_it(deadline):
    deadline(1.5, "the test's deadline")
    began = time.monotonic()
    result = runner.run(["/bin/sleep", "60"], timeout=30)
    assert time.monotonic() - began < 1.5 + 2 * runner.KILL_GRACE_S + 1
    assert result.bound == runner.TIMEOUT and result.deadline == "the test's deadline"
    assert result.reason.startswith("sleep 60 was still running at the test's deadline, 1.5 s after it started")
    assert result.reason.endswith("killed with its process group")
    after = runner.run(["/bin/echo", "never"])
    assert after.bound == runner.TIMEOUT and after.rc is None and after.stdout == b"" and after.elapsed == 0
    assert after.reason == "echo never not run: the test's deadline has passed"
    assert runner.run(["/bin/echo", "never"]).decoded().reason == after.reason


def test_a_command_shorter_than_what_is_left_keeps_its_own_bound(deadline):
    deadline(60)
    result = runner.run(["/bin/sleep", "10"], timeout=1)
    assert result.bound == runner.TIMEOUT and result.deadline is None
    assert "did not answer within 1 s" in result.reason
    assert runner.run(["/bin/echo", "ok"]).stdout == b"ok\n"


def test_no_deadline_without_one(deadline):
    deadline(0)
    assert runner.deadline_left() is None
    assert runner.run(["/bin/echo", "ok"]).bound is None


def test_the_guard_holds_none_of_a_command_s_pipes():
    # a guard holding the pipes would keep the read loop waiting for its end of file (LINGER_S)
    began = time.monotonic()
    result = runner.run(["/bin/echo", "quick"])
    assert result.stdout == b"quick\n" and time.monotonic() - began < runner.LINGER_S
    guard = runner._GUARD["proc"]  # pylint: disable=protected-access
    assert guard is not None and guard.poll() is None
    assert result.reason is None
