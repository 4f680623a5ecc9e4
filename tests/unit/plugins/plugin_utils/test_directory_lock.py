# -*- coding: utf-8 -*-
"""Issue 40, item 6: the lock of a report or history directory is a file of the tool's own, never the directory.

Before, ``files.DirectoryLock`` took a blocking ``flock`` on the directory itself: any local user who could
open it (0755) held every root run forever. Now it locks ``.gpuhost.lock`` in it (0600, ``O_NOFOLLOW``, ours
alone), tries without blocking until a deadline, and names the holder's pid when it gives up. Real processes
hold the locks here (a child Python, one as another user where the tests run as root)."""
import os
import subprocess
import sys
import time

import pytest

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base import files
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import history
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.files import LOCK_NAME, DirectoryLock, FileRefused

NOBODY = 65534
HOLD_DIRECTORY = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(60)
"""
HOLD_LOCK = """
import sys, time
sys.path.insert(0, sys.argv[2])
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.files import DirectoryLock
with DirectoryLock(sys.argv[1]):
    print("held", flush=True)
    time.sleep(float(sys.argv[3]))
"""


def _collections():
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(here, "..", "..", "..", "..", "build", "collections")


def _start(script, *args, **kwargs):
    python = kwargs.pop("python", sys.executable)
    child = subprocess.Popen([python, "-c", script] + [str(a) for a in args], stdout=subprocess.PIPE,
                             universal_newlines=True, **kwargs)
    assert child.stdout.readline().strip() == "held"
    return child


@pytest.fixture
def directory(tmp_path):
    # under a 0755 directory of its own in /tmp: another user must be able to reach it (tmp_path's parents are 0700)
    import shutil
    import tempfile

    top = tempfile.mkdtemp(prefix="gpuhost-lock-")
    os.chmod(top, 0o755)
    path = os.path.join(top, "reports")
    os.mkdir(path, 0o755)
    yield path
    shutil.rmtree(top)


def test_a_user_holding_the_directory_itself_does_not_stop_a_run(directory):
    # another local user opens the 0755 directory and flocks it (all it took before to hang every root run)
    # (the system's Python: the venv's may live under root's 0700 home)
    kwargs = {"preexec_fn": lambda: (os.setgid(NOBODY), os.setuid(NOBODY)),
              "python": "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable} \
        if os.geteuid() == 0 else {}
    child = _start(HOLD_DIRECTORY, directory, **kwargs)
    try:
        started = time.monotonic()
        with DirectoryLock(directory, wait_s=5):
            assert oct(os.stat(os.path.join(directory, LOCK_NAME)).st_mode & 0o777) == "0o600"
        assert time.monotonic() - started < 2
    finally:
        child.kill()
        child.wait()
    assert os.listdir(directory) == []  # the lock file is removed as it is let go


def test_a_run_holding_the_lock_is_waited_for_within_a_bound_and_named(directory):
    child = _start(HOLD_LOCK, directory, _collections(), 60)
    try:
        with open(os.path.join(directory, LOCK_NAME)) as handle:
            assert handle.read().strip() == str(child.pid)  # the holder's pid, in the file
        started = time.monotonic()
        with pytest.raises(FileRefused) as caught:
            with DirectoryLock(directory, wait_s=1):
                pass
        waited = time.monotonic() - started
        assert 1 <= waited < 3
        assert "pid %d" % child.pid in str(caught.value) and "within 1 s" in str(caught.value)
        assert directory in str(caught.value)
    finally:
        child.kill()
        child.wait()


def test_the_lock_is_taken_once_the_holder_lets_go(directory):
    child = _start(HOLD_LOCK, directory, _collections(), 0.5)
    started = time.monotonic()
    with DirectoryLock(directory, wait_s=20):
        assert child.poll() == 0 or child.wait(5) == 0
    assert time.monotonic() - started < 5
    assert os.listdir(directory) == []


def test_runs_take_turns_while_the_file_is_removed_and_created_again(directory):
    # each child adds one to a counter under the lock, read and written in two steps: a lost update means
    # two runs held the lock at once (a waiter that got the lock of a removed file must try again)
    counter = os.path.join(directory, "counter")
    with open(counter, "w") as handle:
        handle.write("0")
    script = """
import sys, time
sys.path.insert(0, sys.argv[2])
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.files import DirectoryLock
for unused in range(40):
    with DirectoryLock(sys.argv[1], wait_s=60):
        with open(sys.argv[1] + "/counter") as h:
            n = int(h.read())
        time.sleep(0.001)
        with open(sys.argv[1] + "/counter", "w") as h:
            h.write(str(n + 1))
"""
    children = [subprocess.Popen([sys.executable, "-c", script, directory, _collections()]) for unused in range(4)]
    assert [child.wait(120) for child in children] == [0] * 4
    with open(counter) as handle:
        assert handle.read() == "160"
    assert sorted(os.listdir(directory)) == ["counter"]


def test_a_link_in_place_of_the_lock_file_is_refused_never_followed(directory, tmp_path):
    target = tmp_path / "target"
    target.write_text("precious\n")
    os.symlink(str(target), os.path.join(directory, LOCK_NAME))
    with pytest.raises(FileRefused) as caught:
        with DirectoryLock(directory, wait_s=0):
            pass
    assert "symbolic link" in str(caught.value)
    assert target.read_text() == "precious\n"
    dangling = os.path.join(directory, LOCK_NAME)
    os.unlink(dangling)
    os.symlink(str(tmp_path / "made-by-root"), dangling)
    with pytest.raises(FileRefused):
        with DirectoryLock(directory, wait_s=0):
            pass
    assert not (tmp_path / "made-by-root").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the file to another user")
def test_another_users_lock_file_is_refused(directory):
    path = os.path.join(directory, LOCK_NAME)
    with open(path, "w") as handle:
        handle.write("1\n")
    os.chown(path, NOBODY, NOBODY)
    with pytest.raises(FileRefused) as caught:
        with DirectoryLock(directory, wait_s=0):
            pass
    assert "belongs to uid %d" % NOBODY in str(caught.value)
    with open(path) as handle:
        assert handle.read() == "1\n"


def test_a_hard_link_or_a_fifo_in_place_of_the_lock_file_is_refused(directory, tmp_path):
    other = tmp_path / "other-file"
    other.write_text("keep\n")
    path = os.path.join(directory, LOCK_NAME)
    os.link(str(other), path)
    with pytest.raises(FileRefused) as caught:
        with DirectoryLock(directory, wait_s=0):
            pass
    assert "2 hard links" in str(caught.value)
    assert other.read_text() == "keep\n"
    os.unlink(path)
    os.mkfifo(path)
    started = time.monotonic()
    with pytest.raises(FileRefused) as caught:
        with DirectoryLock(directory, wait_s=0):
            pass
    assert "not a regular file" in str(caught.value) and time.monotonic() - started < 2


def test_a_lock_file_left_by_a_killed_run_is_taken_over(directory):
    path = os.path.join(directory, LOCK_NAME)
    with open(path, "w") as handle:
        handle.write("999999\n")
    os.chmod(path, 0o644)
    with DirectoryLock(directory, wait_s=0):
        with open(path) as handle:
            assert handle.read() == "%d\n" % os.getpid()
        assert oct(os.stat(path).st_mode & 0o777) == "0o600"


def test_a_history_write_waits_no_longer_than_the_bound(tmp_path):
    directory = tmp_path / "history"
    directory.mkdir()
    child = _start(HOLD_LOCK, str(directory), _collections(), 60)
    original = files.DirectoryLock.__init__.__defaults__
    try:
        files.DirectoryLock.__init__.__defaults__ = (1,)
        with pytest.raises(OSError) as caught:
            history.record_audit(str(directory), "gpu01", history.make_record("gpu01", [], "2025-08-01T10:00:00+00:00"))
        assert "pid %d" % child.pid in str(caught.value)
    finally:
        files.DirectoryLock.__init__.__defaults__ = original
        child.kill()
        child.wait()
