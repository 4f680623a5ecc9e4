# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU faults within a minute: follow the kernel log and start the self-audit on a GPU fault line.

Run on a host by the self_audit role's watch service (``gpuhost-self-audit --watch``). The watcher
blocks on ``/dev/kmsg`` from its end (what was logged before it started is the periodic audit's): no
loop polls anything. A record whose message is one the audit's kernel log reader keeps
(:func:`plugins.module_utils.facts.health.is_fault_line`: Xid, SXid, a GPU fallen off the bus,
RmInitAdapter, GSP timeouts and reset-required lines) asks systemd to start the self-audit service,
which writes the same report, textfile and history as the timer's runs. Starts are rate-limited: the
first line starts a run at once, further lines within ``interval`` seconds of a start are folded into
one more start when the interval has passed; a run in progress (``activating``, which may have read the
kernel log before the line) is waited for in steps of :data:`BUSY_RETRY` seconds, not restarted.

Python 3.8+, standard library only (it is part of the self-audit runner).
"""
from __future__ import absolute_import, division, print_function

import errno
import os
import select
import subprocess
import time

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.health import WATCH_INTERVAL_BOUNDS, is_fault_line

#: seconds between two starts of the audit (the role's gpuhost_self_audit_watch_interval) and its bounds
DEFAULT_INTERVAL = 30
INTERVAL_BOUNDS = WATCH_INTERVAL_BOUNDS
#: seconds to wait before asking again when a run is in progress
BUSY_RETRY = 5
#: bounds of a systemctl call (seconds) and of one record read from /dev/kmsg (bytes; the kernel's is 8 KiB)
SYSTEMCTL_TIMEOUT = 30
RECORD_MAX = 16384
KMSG = "/dev/kmsg"


class WatchError(Exception):
    """The watcher cannot run (no /dev/kmsg, not allowed to read it): one line for the journal."""


def record_message(record):
    """The message of one ``/dev/kmsg`` record (``prio,seq,usec,flags[,...];message`` then continuation
    lines `` KEY=value``), ``None`` when it is not one."""
    text = record.decode("utf-8", "replace") if isinstance(record, bytes) else record
    head, sep, rest = text.partition(";")
    fields = head.split(",")
    # priority, sequence number and microseconds are numbers; flags and newer fields follow
    if not sep or len(fields) < 3 or not all(field.isdigit() for field in fields[:3]):
        return None
    return rest.split("\n", 1)[0]


def systemctl_state(unit):
    """ActiveState of ``unit`` (``activating`` while a oneshot runs), ``None`` when systemctl did not say."""
    try:
        done = subprocess.run(["systemctl", "show", "-p", "ActiveState", "--value", unit], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, timeout=SYSTEMCTL_TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.decode("utf-8", "replace").strip() or None


def systemctl_start(unit):
    """Queue a start of ``unit`` without waiting for it; ``None`` or the reason it failed."""
    try:
        done = subprocess.run(["systemctl", "start", "--no-block", unit], stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, timeout=SYSTEMCTL_TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    if done.returncode:
        return done.stderr.decode("utf-8", "replace").strip()[:300] or "systemctl exited %d" % done.returncode
    return None


class Watcher(object):
    """The rate limit and the start of the audit, apart from reading (so that tests drive it)."""

    def __init__(self, unit, interval=DEFAULT_INTERVAL, state=systemctl_state, start=systemctl_start,
                 clock=time.monotonic, say=None):
        self.unit, self.interval = unit, interval
        self.state, self.start, self.clock = state, start, clock
        self.say = say or (lambda text: None)
        self.pending = None       # the first fault line not yet handed to a run
        self.folded = 0           # lines folded into the pending start
        self.next_start = None    # monotonic time before which no start is made
        self.starts = 0

    def line(self, message):
        """A kernel log message: remembered when it is a GPU fault line."""
        if message is None or not is_fault_line(message):
            return False
        if self.pending is None:
            self.pending = message
        else:
            self.folded += 1
        return True

    def timeout(self):
        """Seconds until the next start is due, ``None`` when nothing is pending (block until a record)."""
        if self.pending is None:
            return None
        if self.next_start is None:
            return 0.0
        return max(0.0, self.next_start - self.clock())

    def tick(self):
        """Start the audit when a line is pending and the rate limit allows; returns whether it started."""
        now = self.clock()
        if self.pending is None or (self.next_start is not None and now < self.next_start):
            return False
        if self.state(self.unit) == "activating":
            # a run in progress may have read the kernel log before the line: wait for its end
            self.next_start = now + BUSY_RETRY
            return False
        problem = self.start(self.unit)
        more = " and %d more fault line(s)" % self.folded if self.folded else ""
        if problem:
            self.say("GPU fault line in the kernel log (%s)%s: could not start %s: %s"
                     % (self.pending[:300], more, self.unit, problem))
        else:
            self.starts += 1
            self.say("GPU fault line in the kernel log (%s)%s: started %s" % (self.pending[:300], more, self.unit))
        self.pending, self.folded = None, 0
        self.next_start = now + self.interval
        return not problem


def follow(fd, watcher, seek_end=True):
    """Read records from ``fd`` (``/dev/kmsg``, opened non-blocking) until end of file (a pipe in the
    tests; ``/dev/kmsg`` has none), handing each message to ``watcher`` and starting runs when due."""
    if seek_end:
        try:
            os.lseek(fd, 0, os.SEEK_END)  # what was logged before is the periodic audit's
        except OSError:
            pass  # a pipe (tests) has no end to seek to
    buffered = b""
    while True:
        ready, unused_w, unused_x = select.select([fd], [], [], watcher.timeout())
        if ready:
            try:
                chunk = os.read(fd, RECORD_MAX)
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # records overwritten before they were read: go on with the next
                    watcher.say("kernel log records were overwritten before they were read")
                    continue
                if exc.errno in (errno.EAGAIN, errno.EINTR):
                    continue
                raise WatchError("cannot read %s: %s" % (KMSG, exc))
            if not chunk:
                return watcher
            # /dev/kmsg gives one record per read; a pipe may give several or part of one
            buffered += chunk
            if len(buffered) > 4 * RECORD_MAX:
                buffered = buffered[-RECORD_MAX:]
            lines = buffered.split(b"\n")
            buffered = lines.pop()
            for line in lines:
                if line[:1] != b" ":  # continuation lines (" KEY=value") carry no message
                    watcher.line(record_message(line))
        watcher.tick()


def watch(unit, interval=DEFAULT_INTERVAL, path=KMSG, say=None):
    """The watch service's loop: never returns while ``path`` is readable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise WatchError("cannot open %s: %s (the watcher runs as root, where the kernel log is)" % (path, exc))
    try:
        watcher = Watcher(unit, interval, say=say)
        if say:
            say("watching %s for GPU fault lines: each starts %s, at most once per %g s" % (path, unit, interval))
        return follow(fd, watcher)
    finally:
        os.close(fd)
