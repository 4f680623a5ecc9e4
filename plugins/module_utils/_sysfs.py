# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Root-relative reads of /sys, /proc, /etc and captured command output.

Every gatherer reads through a :class:`Root`. With ``root='/'`` it reads the live
host and may run commands; with any other root it reads a snapshot directory laid
out like the host and *never executes anything*: command output comes from
``<root>/commands/<capture>``. A :class:`Root` can also record every byte it read
so that a snapshot holds exactly what the facts were computed from.

Nothing in here raises for unreadable input: a failed read returns ``None`` and
appends ``{"subsystem", "path", "reason"}`` to :attr:`Root.errors`.
"""

from __future__ import absolute_import, division, print_function

import errno
import fnmatch
import os
import posixpath

__metaclass__ = type

#: Snapshot-relative names of captured command outputs (contract: docs/snapshot-format.md).
COMMAND_CAPTURES = {
    "nvidia-smi-q": "commands/nvidia-smi-q.xml",
    "nvidia-smi-topo": "commands/nvidia-smi-topo-m.txt",
}

#: argv per capture on a live host (binary resolved by the caller's ``which``).
COMMAND_ARGV = {
    "nvidia-smi-q": ["nvidia-smi", "-q", "-x"],
    "nvidia-smi-topo": ["nvidia-smi", "topo", "-m"],
}


def _reason(exc):
    if isinstance(exc, EnvironmentError):
        if exc.errno == errno.ENOENT:
            return "missing"
        if exc.errno in (errno.EACCES, errno.EPERM):
            return "permission denied (run with become: true)"
        return os.strerror(exc.errno) if exc.errno else str(exc)
    return str(exc)


class Root:
    """Reader for a host (``/``) or a snapshot directory.

    :param root: ``/`` for the live host, else a snapshot directory.
    :param run_command: ``callable(argv) -> (rc, stdout, stderr)``; only used when live.
    :param which: ``callable(name) -> path or None``; only used when live.
    :param recorder: optional object with ``file(path, data)``, ``link(path, target)``,
        ``command(capture, rc, stdout, stderr)``; sees every successful read.
    """

    def __init__(self, root="/", run_command=None, which=None, recorder=None):
        self.root = os.path.abspath(root or "/")
        self.live = self.root == "/"
        self._run = run_command
        self._which = which
        self.recorder = recorder
        self.errors = []

    # -- paths -----------------------------------------------------------------
    def host_path(self, path):
        """Map an absolute host path (``/sys/...``) to the path under this root."""
        if self.live:
            return path
        return os.path.join(self.root, path.lstrip("/"))

    def error(self, subsystem, path, reason):
        self.errors.append({"subsystem": subsystem, "path": path, "reason": reason})

    # -- reads -----------------------------------------------------------------
    def read_bytes(self, path, subsystem, optional=False, limit=None):
        """Return the bytes of ``path`` or ``None``.

        ``optional`` files that are missing are not errors (an absent feature, such as
        ``/sys/devices/system/cpu/amd_pstate`` on Intel); other failures always are.
        """
        try:
            with open(self.host_path(path), "rb") as handle:
                data = handle.read() if limit is None else handle.read(limit)
        except EnvironmentError as exc:
            if not (optional and exc.errno == errno.ENOENT):
                self.error(subsystem, path, _reason(exc))
            return None
        if self.recorder is not None:
            self.recorder.file(path, data)
        return data

    def read_text(self, path, subsystem, optional=False):
        data = self.read_bytes(path, subsystem, optional=optional)
        if data is None:
            return None
        return data.decode("utf-8", "replace")

    def read_value(self, path, subsystem, optional=False):
        """A one-line sysfs/procfs attribute, stripped; ``None`` when unreadable or empty."""
        text = self.read_text(path, subsystem, optional=optional)
        if text is None:
            return None
        text = text.strip()
        if not text:
            self.error(subsystem, path, "empty file")
            return None
        return text

    def read_int(self, path, subsystem, optional=False, base=10):
        text = self.read_value(path, subsystem, optional=optional)
        if text is None:
            return None
        try:
            return int(text, base)
        except ValueError:
            self.error(subsystem, path, "not an integer: %r" % text[:40])
            return None

    def exists(self, path):
        return os.path.lexists(self.host_path(path))

    def isdir(self, path):
        return os.path.isdir(self.host_path(path))

    def listdir(self, path, subsystem=None, pattern=None):
        """Sorted entries of a directory (``[]`` when missing; an error when ``subsystem``)."""
        try:
            names = os.listdir(self.host_path(path))
        except EnvironmentError as exc:
            if subsystem is not None:
                self.error(subsystem, path, _reason(exc))
            return []
        if pattern is not None:
            names = fnmatch.filter(names, pattern)
        return sorted(names)

    def readlink(self, path, subsystem=None):
        """Target of a symlink as stored (host-relative), or ``None``.

        Snapshots keep sysfs links as links (docs/snapshot-format.md); a link stored as a
        plain directory yields ``None`` and, with ``subsystem``, an error.
        """
        try:
            target = os.readlink(self.host_path(path))
        except EnvironmentError as exc:
            if subsystem is not None:
                reason = "not a symlink in this capture" if exc.errno == errno.EINVAL else _reason(exc)
                self.error(subsystem, path, reason)
            return None
        if self.recorder is not None:
            self.recorder.link(path, target)
        return target

    def resolve_link(self, path, subsystem=None):
        """Absolute host path a symlink points to (resolved lexically, like sysfs links)."""
        target = self.readlink(path, subsystem)
        if target is None:
            return None
        return posixpath.normpath(posixpath.join(posixpath.dirname(path), target))

    # -- commands --------------------------------------------------------------
    def command(self, capture, subsystem):
        """Output of a known command capture: ``(stdout_text or None, reason or None)``.

        Live: runs ``COMMAND_ARGV[capture]`` when the binary exists. Snapshot: reads
        ``COMMAND_CAPTURES[capture]`` under the root and runs nothing.
        """
        argv = COMMAND_ARGV[capture]
        if not self.live:
            rel = COMMAND_CAPTURES[capture]
            path = os.path.join(self.root, rel)
            try:
                with open(path, "rb") as handle:
                    return handle.read().decode("utf-8", "replace"), None
            except EnvironmentError as exc:
                reason = "%s not captured in snapshot (%s)" % (rel, _reason(exc))
                self.error(subsystem, rel, reason)
                return None, reason
        binary = self._which(argv[0]) if self._which else None
        if not binary:
            reason = "%s not found in PATH" % argv[0]
            self.error(subsystem, argv[0], reason)
            return None, reason
        try:
            rc, out, err = self._run([binary] + argv[1:])
        except Exception as exc:  # a broken binary must not take the facts down
            rc, out, err = 127, "", str(exc)
        if self.recorder is not None:
            self.recorder.command(capture, rc, out, err)
        if rc != 0:
            first = (err or out or "").strip().splitlines()
            reason = "%s exited %s: %s" % (" ".join(argv), rc, first[0][:200] if first else "no output")
            self.error(subsystem, " ".join(argv), reason)
            return None, reason
        return out, None
