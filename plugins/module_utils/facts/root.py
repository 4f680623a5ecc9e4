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
import json
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
    :param recorder: optional :class:`Recorder` that sees every read, listing, link,
        command output and failure (used by ``host_snapshot``).
    """

    def __init__(self, root="/", run_command=None, which=None, recorder=None):
        self.root = os.path.abspath(root or "/")
        self.live = self.root == "/"
        self._run = run_command
        self._which = which
        self.recorder = recorder
        self.errors = []
        self._snapshot_meta = None

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
            reason = _reason(exc)
            missing = exc.errno == errno.ENOENT
            if missing and not self.live:
                # a file the live host could not read is stored as unreadable, with its reason
                recorded = self._captured.get("unreadable", {}).get(path)
                if recorded:
                    reason, missing = recorded, False
            if not (optional and missing):
                self.error(subsystem, path, reason)
                if self.recorder is not None:
                    self.recorder.unreadable(path, reason)
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
        found = os.path.lexists(self.host_path(path))
        if found and self.recorder is not None:
            self.recorder.entry(path, self.host_path(path))
        return found

    def isdir(self, path):
        found = os.path.isdir(self.host_path(path))
        if found and self.recorder is not None:
            self.recorder.directory(path)
        return found

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
        if self.recorder is not None:
            self.recorder.directory(path)
            for name in names:
                self.recorder.entry(posixpath.join(path, name), os.path.join(self.host_path(path), name))
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
            recorded = self._captured.get("commands", {}).get(capture) or {}
            if recorded.get("error"):
                # the command failed or was absent on the captured host: same reason as live
                self.error(subsystem, recorded.get("where", rel), recorded["error"])
                return None, recorded["error"]
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
            if self.recorder is not None:
                self.recorder.command_failed(capture, argv[0], reason)
            return None, reason
        try:
            rc, out, err = self._run([binary] + argv[1:])
        except Exception as exc:  # a broken binary must not take the facts down
            rc, out, err = 127, "", str(exc)
        if rc != 0:
            first = (err or out or "").strip().splitlines()
            reason = "%s exited %s: %s" % (" ".join(argv), rc, first[0][:200] if first else "no output")
            self.error(subsystem, " ".join(argv), reason)
            if self.recorder is not None:
                self.recorder.command_failed(capture, " ".join(argv), reason)
            return None, reason
        if self.recorder is not None:
            self.recorder.command(capture, out)
        return out, None

    @property
    def _captured(self):
        """``snapshot.json`` of a snapshot root (``{}`` live or when absent/unreadable)."""
        if self._snapshot_meta is None:
            self._snapshot_meta = {}
            if not self.live:
                try:
                    with open(os.path.join(self.root, "snapshot.json"), "rb") as handle:
                        meta = json.loads(handle.read().decode("utf-8", "replace"))
                    if isinstance(meta, dict):
                        self._snapshot_meta = meta
                except (EnvironmentError, ValueError):
                    pass
        return self._snapshot_meta


class Recorder:
    """Collects everything a :class:`Root` read, to write a snapshot of exactly that.

    Files keep the bytes as read (sysfs attributes cannot be copied with ``cp``), links keep
    their stored target, directories that were listed are kept even when empty, and failed
    reads and commands keep their reason so the snapshot reproduces the same ``errors``.
    """

    def __init__(self):
        self.files = {}
        self.links = {}
        self.dirs = set()
        self.markers = set()
        self.commands = {}
        self.unreadable_paths = {}

    def file(self, path, data):
        self.files[path] = data

    def link(self, path, target):
        self.links[path] = target

    def directory(self, path):
        self.dirs.add(path)

    def entry(self, path, real_path):
        """Keep a path that was seen (listed or tested) but maybe never read, with its type."""
        if os.path.islink(real_path):
            try:
                self.links.setdefault(path, os.readlink(real_path))
            except EnvironmentError:
                pass
        elif os.path.isdir(real_path):
            self.dirs.add(path)
        else:
            self.markers.add(path)

    def unreadable(self, path, reason):
        self.unreadable_paths[path] = reason

    def command(self, capture, stdout):
        self.commands[capture] = {"file": COMMAND_CAPTURES[capture], "stdout": stdout}

    def command_failed(self, capture, where, reason):
        self.commands[capture] = {"error": reason, "where": where}

    def metadata(self):
        """The parts of ``snapshot.json`` that replay failures."""
        return {
            "unreadable": dict(sorted(self.unreadable_paths.items())),
            "commands": dict(
                (name, dict((k, v) for k, v in entry.items() if k != "stdout"))
                for name, entry in sorted(self.commands.items())
            ),
        }


def _canonical(path, links):
    """Rewrite ``path`` so that no prefix of it is a recorded symlink.

    Files are read through link paths (``/sys/bus/pci/devices/X/config``); a snapshot stores
    them once, under the link's target, so that the stored link resolves to them.
    """
    parts = path.strip("/").split("/")
    current = ""
    for index, part in enumerate(parts):
        candidate = current + "/" + part
        last = index == len(parts) - 1
        if not last and candidate in links:
            target = links[candidate]
            candidate = posixpath.normpath(posixpath.join(posixpath.dirname(candidate), target))
            if not candidate.startswith("/"):
                candidate = "/" + candidate
        current = candidate
    return current or "/"


def write_snapshot(recorder, fileobj, meta):
    """Write what ``recorder`` saw as a gzip tarball laid out like the host.

    :param meta: dict merged into ``snapshot.json`` (format, hostname, captured, as_root...).
    """
    import io
    import tarfile
    import time

    now = int(time.time())
    links = dict(recorder.links)

    def info(name, kind, size=0, linkname=""):
        member = tarfile.TarInfo(name.lstrip("/"))
        member.type = kind
        member.size = size
        member.mtime = now
        member.mode = 0o755 if kind == tarfile.DIRTYPE else (0o777 if kind == tarfile.SYMTYPE else 0o644)
        member.linkname = linkname
        return member

    written = set()
    with tarfile.open(fileobj=fileobj, mode="w:gz") as tar:
        def add_dirs(path):
            parent = posixpath.dirname(path)
            chain = []
            while parent not in ("/", "") and parent not in written:
                chain.append(parent)
                parent = posixpath.dirname(parent)
            for directory in reversed(chain):
                written.add(directory)
                tar.addfile(info(directory, tarfile.DIRTYPE))

        def add_file(path, data):
            if path in written:
                return
            add_dirs(path)
            written.add(path)
            tar.addfile(info(path, tarfile.REGTYPE, len(data)), io.BytesIO(data))

        for path in sorted(recorder.dirs):
            canonical = _canonical(path, links)
            if canonical not in written:
                add_dirs(canonical + "/x")
        for path in sorted(links):
            canonical = _canonical(path, links)
            if canonical in written:
                continue
            add_dirs(canonical)
            written.add(canonical)
            tar.addfile(info(canonical, tarfile.SYMTYPE, linkname=links[path]))
        for path in sorted(recorder.files):
            add_file(_canonical(path, links), recorder.files[path])
        for path in sorted(recorder.markers):
            add_file(_canonical(path, links), b"")
        for entry in recorder.commands.values():
            if "stdout" in entry:
                add_file("/" + entry["file"], entry["stdout"].encode("utf-8"))
        document = dict(meta)
        document.update(recorder.metadata())
        add_file("/snapshot.json", (json.dumps(document, indent=2, sort_keys=True) + "\n").encode("utf-8"))
