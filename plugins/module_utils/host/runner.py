# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuhost.baseline contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one runner of every command this collection runs on a host (docs/security.md, "Bounds").

Facts, snapshot capture, measurements, fixes, the self-audit and slurm_node run their commands
through :func:`run`: an argv (never a shell), no stdin, ``LC_ALL=C``, the process in a session
(and process group) of its own, a time bound per command (:data:`TIMEOUTS` per tool, else
:data:`DEFAULT_TIMEOUT_S`) and an output bound *while reading*: stdout and stderr are read from
non-blocking pipes as they come, each kept up to ``cap`` bytes; past the cap, or at the deadline,
the process group is ended (``SIGTERM``, then ``SIGKILL`` after :data:`KILL_GRACE_S`) together with
every process that still holds one of the pipes (a child that started a session of its own). The
read loop ends at the deadline whoever holds the pipes. :class:`Result` says which bound ended the
command (:data:`TIMEOUT`, :data:`OUTPUT_CAP` or ``None``).

Host side: Python 3.8+, standard library only, no ``ansible.module_utils`` needed (the self-audit
bundle runs it outside a module).
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import atexit
import errno
import os
import selectors
import signal
import subprocess
import sys
import time

#: which bound ended a command
TIMEOUT = "timeout"
OUTPUT_CAP = "output_cap"

#: seconds a command may run when its tool has no entry in :data:`TIMEOUTS`
DEFAULT_TIMEOUT_S = 60
#: seconds per tool (the basename of argv[0]); ``gpuhost_command_timeouts`` (a dict of the same
#: shape, passed to the modules as ``command_timeouts``) changes them
TIMEOUTS = {
    "nvidia-smi": 45,
    "journalctl": 60,
    "dmesg": 30,
    "systemctl": 30,
    "scontrol": 30,
    "update-grub": 120,
    "grub2-mkconfig": 120,
    "grub-mkconfig": 120,
    "dracut": 300,
    "update-initramfs": 300,
    "sysctl": 30,
}
#: bytes kept of stdout and of stderr each (docs/security.md's 64 MiB bound of a command's output)
OUTPUT_CAP_BYTES = 64 * 1024 * 1024
#: seconds between SIGTERM and SIGKILL, and the most spent reaping a killed process
KILL_GRACE_S = 1.0
#: seconds the pipes are still read after the command itself exited (a child it left holding them)
LINGER_S = 2.0
#: seconds a command is given at least: with less left before the deadline (:func:`set_deadline`) it is not run
MIN_START_S = 1.0
_CHUNK = 65536

#: the deadline of this process's commands: ``[time.monotonic() value or None, what it is]``
_DEADLINE = [None, None]
#: the guard (see the module's docstring): its Popen, the write end of its pipe; ``failed``: none could start
_GUARD = {"proc": None, "fd": None, "failed": False}

#: the guard's code, run as ``python -I -S -c``: standard library only, nothing of this collection (a
#: module's code is in AnsiballZ's payload, not on disk). Lines on stdin: ``+ PGID INODE...`` when a
#: command starts (its process group, the inodes of its pipes), ``- PGID`` when it is done; at end of file
#: (the runner's process is gone) it ends every group still listed and every process holding one of
#: their pipes: SIGTERM, then SIGKILL after the grace.
GUARD_CODE = r"""
import os, signal, sys, time
signal.signal(signal.SIGHUP, signal.SIG_IGN)
signal.signal(signal.SIGINT, signal.SIG_IGN)
grace = float(sys.argv[1])
groups = {}
pending = b""
while True:
    try:
        chunk = os.read(0, 65536)
    except InterruptedError:
        continue
    except OSError:
        chunk = b""
    if not chunk:
        break
    lines = (pending + chunk).split(b"\n")
    pending = lines.pop()
    for line in lines:
        words = line.split()
        try:
            numbers = [int(word) for word in words[1:]]
        except ValueError:
            continue
        if words[:1] == [b"+"] and numbers:
            groups[numbers[0]] = numbers[1:]
        elif words[:1] == [b"-"] and numbers:
            groups.pop(numbers[0], None)


def holders(wanted):
    found = set()
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return found
    for pid in pids:
        base = "/proc/%d/fd" % pid
        try:
            fds = os.listdir(base)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(base + "/" + fd) in wanted:
                    found.add(pid)
                    break
            except OSError:
                continue
    return found


if groups:
    wanted = set("pipe:[%d]" % inode for inodes in groups.values() for inode in inodes)
    me = os.getpid()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pgid in groups:
            try:
                os.killpg(pgid, sig)
            except OSError:
                pass
        for pid in holders(wanted) - set([me]):
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        if sig == signal.SIGTERM:
            time.sleep(grace)
"""


def checked_timeouts(value):
    """``command_timeouts`` (tool name -> seconds, numbers or numeric strings) as ``{name: float}``;
    :class:`ValueError` names the first entry that is not a number of seconds from 1 to 86400."""
    out = {}
    for name, given in (value or {}).items():
        seconds = given
        if isinstance(seconds, str):
            try:
                seconds = float(seconds)
            except ValueError:
                seconds = None
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not 0 < seconds <= 86400:
            raise ValueError("command_timeouts: %s must be a number of seconds from 1 to 86400, not %r" % (name, given))
        out[name] = seconds
    return out


def module_timeouts(module):
    """A module's ``command_timeouts`` option checked by :func:`checked_timeouts`; a bad one fails the
    module with that one line (``module.fail_json``), before any command runs."""
    try:
        return checked_timeouts(module.params.get("command_timeouts"))
    except ValueError as exc:
        module.fail_json(msg=str(exc))


def set_deadline(seconds, what="the deadline of this run"):
    """Every command :func:`run` starts from now on ends within ``seconds`` (``None`` or ``0``: no deadline);
    ``what`` names the deadline in the reasons (``host_measure``: its ``deadline_s``)."""
    if seconds:
        _DEADLINE[:] = [time.monotonic() + seconds, what]
    else:
        _DEADLINE[:] = [None, None]


def deadline_left():
    """Seconds left before the deadline of :func:`set_deadline` (never below 0), or ``None`` without one."""
    if _DEADLINE[0] is None:
        return None
    return max(0.0, _DEADLINE[0] - time.monotonic())


def timeout_for(argv0, overrides=None):
    """Seconds for a command of ``argv0``: ``overrides`` (tool -> seconds), then :data:`TIMEOUTS`, then
    :data:`DEFAULT_TIMEOUT_S`. Only positive numbers count; anything else is ignored."""
    name = os.path.basename(str(argv0))
    for table in (overrides or {}, TIMEOUTS):
        value = table.get(name) if isinstance(table, dict) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
            return value
    return DEFAULT_TIMEOUT_S


class Result:
    """What :func:`run` returns. Unpacks as ``rc, stdout, stderr`` like ``run_command``.

    ``rc``: the exit status (negative: the signal that ended it; ``None``: a process killed at a bound
    that could not be reaped, e.g. one stuck in the kernel); ``stdout``/``stderr``: bytes (or text
    after :meth:`decoded`), at most the cap each; ``bound``: :data:`TIMEOUT`, :data:`OUTPUT_CAP` or
    ``None``; ``elapsed``: seconds; ``reason``: one sentence when a bound ended it, else ``None``;
    ``deadline``: the name of the deadline (:func:`set_deadline`) when it, not the command's own time
    bound, ended the command or kept it from starting (``rc`` ``None``, nothing run), else ``None``."""

    __slots__ = ("argv", "rc", "stdout", "stderr", "bound", "elapsed", "limit", "stream", "deadline")

    def __init__(self, argv, rc, stdout, stderr, bound=None, elapsed=0.0, limit=None, stream=None, deadline=None):
        self.argv = list(argv)
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr
        self.bound = bound
        self.elapsed = elapsed
        self.limit = limit
        self.stream = stream
        self.deadline = deadline

    def __iter__(self):
        return iter((self.rc, self.stdout, self.stderr))

    def __repr__(self):
        return "Result(rc=%r, bound=%r, elapsed=%.2f, stdout=%d bytes, stderr=%d bytes)" % (
            self.rc, self.bound, self.elapsed, len(self.stdout), len(self.stderr))

    @property
    def reason(self):
        command = " ".join(self.argv[:1] and [os.path.basename(self.argv[0])] + self.argv[1:])
        return self.describe(command)

    def describe(self, command):
        """:attr:`reason` with ``command`` naming the command (a caller's shorter name for it)."""
        command = "".join(c if c.isprintable() else "?" for c in command[:200])
        if self.bound == TIMEOUT and self.deadline and self.rc is None and self.limit == 0:
            return "%s not run: %s has passed" % (command, self.deadline)
        if self.bound == TIMEOUT and self.deadline:
            return "%s was still running at %s, %s s after it started: killed with its process group" % (
                command, self.deadline, _seconds(round(self.limit, 1)))
        if self.bound == TIMEOUT:
            return "%s did not answer within %s s: killed with its process group" % (command, _seconds(self.limit))
        if self.bound == OUTPUT_CAP:
            return "%s wrote more than %d bytes to %s: killed with its process group" % (
                command, self.limit, self.stream or "its output")
        return None

    def decoded(self, errors="surrogateescape"):
        """The same result with stdout and stderr as text (UTF-8 with ``errors``)."""
        return Result(self.argv, self.rc, self.stdout.decode("utf-8", errors), self.stderr.decode("utf-8", errors),
                      self.bound, self.elapsed, self.limit, self.stream, self.deadline)


def _seconds(value):
    return ("%g" % value) if isinstance(value, (int, float)) else str(value)


def run(argv, timeout=None, cap=OUTPUT_CAP_BYTES, env=None, merge_stderr=False, timeouts=None):
    """Run ``argv`` bounded; return a :class:`Result` (never raises for a command that cannot start:
    ``rc`` 127 and the reason in ``stderr``).

    ``timeout``: seconds (default :func:`timeout_for` of ``argv[0]`` with ``timeouts``); ``cap``: bytes
    kept per stream; ``env``: variables set on top of this process's environment and ``LC_ALL=C``;
    ``merge_stderr``: stderr into stdout (one stream, one cap)."""
    if isinstance(argv, (str, bytes)) or not argv:
        raise TypeError("run() takes a non-empty argv list, never a shell string")
    argv = [str(part) for part in argv]
    limit = timeout if timeout is not None else timeout_for(argv[0], timeouts)
    clamped = None
    left = deadline_left()
    if left is not None and left < limit:
        if left < MIN_START_S:
            return Result(argv, None, b"", b"", TIMEOUT, 0.0, 0, deadline=_DEADLINE[1])
        limit, clamped = left, _DEADLINE[1]
    environ = dict(os.environ, LC_ALL="C")
    environ.update(env or {})  # a caller's explicit choice wins (a tool that needs a UTF-8 locale)
    if _GUARD["fd"] is None and not _GUARD["failed"]:
        _start_guard()  # before the command: the guard must hold none of its pipes
    start = time.monotonic()
    try:
        # run_command has no output cap and no process-group kill: the one runner needs Popen
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,  # pylint: disable=ansible-bad-function
                                stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
                                env=environ, close_fds=True, start_new_session=True)
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        return Result(argv, 127, b"", ("cannot run %s: %s" % (argv[0], reason)).encode("utf-8", "replace"),
                      elapsed=time.monotonic() - start)
    deadline = start + limit
    pipes = [(proc.stdout, "stdout")] + ([] if merge_stderr else [(proc.stderr, "stderr")])
    buffers = dict((name, bytearray()) for dummy, name in pipes)
    inodes = set()
    selector = selectors.DefaultSelector()
    for pipe, name in pipes:
        os.set_blocking(pipe.fileno(), False)
        inodes.add(os.fstat(pipe.fileno()).st_ino)
        selector.register(pipe, selectors.EVENT_READ, name)
    _tell_guard("+ %d %s\n" % (proc.pid, " ".join(str(inode) for inode in sorted(inodes))))
    bound = stream = None
    exited_at = None
    try:
        while selector.get_map() and bound is None:
            now = time.monotonic()
            if now >= deadline:
                bound = TIMEOUT
                break
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at >= LINGER_S:
                break  # the command is done; a process it left holds the pipes (ended below)
            for key, dummy in selector.select(min(deadline - now, 0.25)):
                try:
                    chunk = os.read(key.fileobj.fileno(), _CHUNK)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                buf = buffers[key.data]
                room = cap - len(buf)
                if len(chunk) > room:
                    buf += chunk[:max(room, 0)]
                    bound, stream = OUTPUT_CAP, key.data
                    break
                buf += chunk
        held = bool(selector.get_map())
        if bound is None:
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0))
            except subprocess.TimeoutExpired:
                bound = TIMEOUT
        if bound is not None or held:
            _end(proc, inodes if held or bound else ())
        elif proc.returncode is not None:
            _killpg(proc.pid, signal.SIGKILL)  # what the command left in its group goes too
    finally:
        selector.close()
        for pipe, dummy in pipes:
            pipe.close()
        _tell_guard("- %d\n" % proc.pid)
    return Result(argv, proc.returncode, bytes(buffers["stdout"]), bytes(buffers.get("stderr", b"")),
                  bound, time.monotonic() - start, cap if bound == OUTPUT_CAP else limit, stream,
                  clamped if bound == TIMEOUT else None)


def _tell_guard(line):
    """Send ``line`` to the guard; a guard that could not start or is gone is no error (the commands still
    run, bounded as before, without the backstop)."""
    if _GUARD["fd"] is None:
        return
    try:
        os.write(_GUARD["fd"], line.encode("ascii"))
    except OSError:  # gone (EPIPE) or its pipe full (EAGAIN): no backstop from here on
        _stop_guard()
        _GUARD["failed"] = True


def _start_guard():
    _GUARD["failed"] = True
    if not sys.executable or not os.path.isdir("/proc"):
        return
    try:
        read_end, write_end = os.pipe()  # not inherited by the commands (close_fds, O_CLOEXEC)
    except OSError:
        return
    try:
        # the guard outlives a killed caller by design: it is no command run to its end
        proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", GUARD_CODE, str(KILL_GRACE_S)],  # pylint: disable=ansible-bad-function
                                stdin=read_end, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                close_fds=True, start_new_session=True)
    except (OSError, ValueError):
        os.close(write_end)
        return
    finally:
        os.close(read_end)
    os.set_blocking(write_end, False)
    _GUARD.update(proc=proc, fd=write_end, failed=False)
    atexit.register(_stop_guard)


def _stop_guard():
    """Close the guard's pipe (it exits at end of file) and reap it."""
    fd, proc = _GUARD["fd"], _GUARD["proc"]
    _GUARD.update(fd=None, proc=None)
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass
    if proc is not None:
        try:
            proc.wait(timeout=KILL_GRACE_S)
        except subprocess.TimeoutExpired:
            pass


def _end(proc, inodes):
    """SIGTERM the group of ``proc`` and every process holding a pipe of ``inodes``, SIGKILL them after
    :data:`KILL_GRACE_S`; reap ``proc`` for at most :data:`KILL_GRACE_S` more."""
    holders = _holders(inodes)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        _killpg(proc.pid, sig)
        for pid in holders:
            _kill(pid, sig)
        try:
            proc.wait(timeout=KILL_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
        if sig == signal.SIGTERM:
            holders = _holders(inodes) | set(holders)
    if proc.returncode is None:
        try:
            proc.wait(timeout=KILL_GRACE_S)
        except subprocess.TimeoutExpired:
            pass  # stuck in the kernel (a hung driver): rc stays None


def _holders(inodes):
    """Pids (other than this one) with a file descriptor on one of the pipes ``inodes`` (Linux /proc)."""
    found = set()
    if not inodes:
        return found
    wanted = set("pipe:[%d]" % ino for ino in inodes)
    me = os.getpid()
    try:
        pids = [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return found
    for pid in pids:
        if pid == me:
            continue
        base = "/proc/%d/fd" % pid
        try:
            fds = os.listdir(base)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(base + "/" + fd) in wanted:
                    found.add(pid)
                    break
            except OSError:
                continue
    return found


def _send(send, target, sig):
    """``send(target, sig)`` (os.kill or os.killpg); a target already gone or not ours is no error."""
    try:
        send(target, sig)
    except OSError as exc:
        if exc.errno not in (errno.ESRCH, errno.EPERM):
            raise


def _killpg(pgid, sig):
    _send(os.killpg, pgid, sig)


def _kill(pid, sig):
    _send(os.kill, pid, sig)
