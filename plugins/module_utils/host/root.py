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

A snapshot is untrusted input. Every path under a snapshot root is resolved component by
component inside it (:func:`resolve_in_root`): symlinks are followed as the captured host would
follow them with the snapshot as its ``/`` (an absolute target starts again at the snapshot
root, like ``openat2(RESOLVE_IN_ROOT)``), and a path that would climb above the root through
``..`` is refused with :class:`OutsideRoot`. Reads accept regular files only (a FIFO, a device
or a directory is refused, never opened blocking) and are capped in size (:data:`MAX_FILE_BYTES`
unless a caller names a larger kind), so a hostile snapshot cannot hang or exhaust a run.
"""

from __future__ import absolute_import, division, print_function

import errno
import fnmatch
import json
import os
import posixpath
import stat

__metaclass__ = type

from ansible_collections.gpuhost.baseline.plugins.module_utils.host.runner import OUTPUT_CAP, TIMEOUT

#: Snapshot-relative names of captured command outputs (contract: docs/snapshot-format.md).
COMMAND_CAPTURES = {
    "nvidia-smi-q": "commands/nvidia-smi-q.xml",
    "nvidia-smi-topo": "commands/nvidia-smi-topo-m.txt",
    # health (facts/health.py): the kernel log is stored reduced to its NVRM Xid lines
    "kernel-log": "commands/journalctl-k-b.txt",
    "kernel-log-dmesg": "commands/dmesg.txt",
    # only with gpuhost_kernel_log_boots 2 (facts/health.py): the journal's boots, the previous boot's
    # kernel log (stored reduced as the current boot's)
    "kernel-boots": "commands/journalctl-list-boots.txt",
    "kernel-log-previous": "commands/journalctl-k-b-1.txt",
    "nvidia-smi-nvlink": "commands/nvidia-smi-nvlink-s.txt",
    # error counters (facts/counters.py), run only when nvlink -s lists links
    "nvidia-smi-nvlink-errors": "commands/nvidia-smi-nvlink-e.txt",
    "fabricmanager-state": "commands/systemctl-show-nvidia-fabricmanager.txt",
    # run only with NVSwitches on the bus, as fabricmanager-state
    "fabricmanager-version": "commands/nv-fabricmanager-version.txt",
}

#: argv per capture on a live host (binary resolved by the caller's ``which``).
COMMAND_ARGV = {
    "nvidia-smi-q": ["nvidia-smi", "-q", "-x"],
    "nvidia-smi-topo": ["nvidia-smi", "topo", "-m"],
    "kernel-log": ["journalctl", "-k", "-b", "-o", "short-monotonic", "--no-pager", "-q", "-n", "100000"],
    "kernel-log-dmesg": ["dmesg"],
    "kernel-boots": ["journalctl", "--list-boots", "--no-pager", "-q"],
    "kernel-log-previous": ["journalctl", "-k", "-b", "-1", "-o", "short-monotonic", "--no-pager", "-q", "-n", "100000"],
    "nvidia-smi-nvlink": ["nvidia-smi", "nvlink", "-s"],
    "nvidia-smi-nvlink-errors": ["nvidia-smi", "nvlink", "-e"],
    "fabricmanager-state": ["systemctl", "show", "nvidia-fabricmanager.service",
                            "--property=LoadState,ActiveState,SubState,UnitFileState", "--no-pager"],
    "fabricmanager-version": ["nv-fabricmanager", "--version"],
}


#: Largest file a read accepts by default: sysfs/procfs attributes and configuration files are
#: far smaller; a larger one is refused (an ``unknown`` with the reason), never read whole.
MAX_FILE_BYTES = 4 * 1024 * 1024
#: For the few files that legitimately grow with the machine (``/proc/cpuinfo`` of a
#: 768-thread host, ``numa_maps`` of a process mapping a large model) and command captures.
MAX_LARGE_BYTES = 64 * 1024 * 1024
#: Symlinks followed while resolving one path (the kernel's own limit is 40).
MAX_LINKS = 40
#: Largest file a snapshot gather keeps to answer a second read of it (sysfs attributes: a page).
MEMO_BYTES = 4096


def as_text(data):
    """File or command output as text: bytes decoded as UTF-8 (an invalid byte becomes U+FFFD), text as
    it is, anything else (``None``, a number) ``None``. The one decoding of the facts parsers."""
    if isinstance(data, bytes):
        return data.decode("utf-8", "replace")
    return data if isinstance(data, str) else None


class OutsideRoot(OSError):
    """A path under a snapshot root resolves outside it (or loops); never read or written."""

    def __init__(self, path, why):
        OSError.__init__(self, errno.EXDEV, "%s %s: refused" % (path, why))
        self.why = why


class Refused(OSError):
    """A path that exists but is not something this reader accepts (not a regular file, too big)."""

    def __init__(self, path, why):
        OSError.__init__(self, errno.EINVAL, "%s: %s" % (path, why))
        self.why = why


def resolve_in_root(root, path, follow_last=True):
    """The real path of host path ``path`` under the snapshot directory ``root``.

    Components are resolved one at a time inside ``root``: a symlink's target is read and
    followed as the captured host would (relative to the link's directory; an absolute target
    from ``root``), ``..`` moves up, and a path that would climb above ``root`` raises
    :class:`OutsideRoot`, as does a chain of more than :data:`MAX_LINKS` links. With
    ``follow_last`` false the last component is not followed (to read a link itself, or to
    refuse one before writing). Components that do not exist are taken as they are.
    """
    pending = [part for part in reversed(path.split("/")) if part not in ("", ".")]
    # the real path of each resolved prefix, so that a component costs one join, not a join of all
    # the components before it (``..`` pops one)
    base = root.rstrip("/")
    stack = [root]
    links = 0
    while pending:
        part = pending.pop()
        if part == "..":
            if len(stack) == 1:
                raise OutsideRoot(path, "leaves the snapshot root %s" % root)
            stack.pop()
            continue
        candidate = (stack[-1] if len(stack) > 1 else base) + "/" + part
        if (pending or follow_last) and os.path.islink(candidate):
            links += 1
            if links > MAX_LINKS:
                raise OutsideRoot(path, "has more than %d levels of symbolic links" % MAX_LINKS)
            target = os.readlink(candidate)
            if target.startswith("/"):
                del stack[1:]
            pending.extend(part for part in reversed(target.split("/")) if part not in ("", "."))
            continue
        stack.append(candidate)
    return stack[-1]


#: Flags of every read: never blocking on a FIFO, never taking a terminal (and, for snapshot
#: reads, never following a link at the last component).
_OPEN = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
_OPEN_NOFOLLOW = _OPEN | getattr(os, "O_NOFOLLOW", 0)


def _not_regular(mode, display):
    """:class:`Refused` for a file of ``mode`` that is not a regular file."""
    kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else \
        "a device" if (stat.S_ISCHR(mode) or stat.S_ISBLK(mode)) else "a socket" if stat.S_ISSOCK(mode) \
        else "not a regular file"
    return Refused(display, "is %s, not a regular file" % kind)


def open_regular(real, display, nofollow=False):
    """``(fd, fstat)`` of the regular file ``real``, opened read-only without blocking (a FIFO never
    hangs the reader) and, with ``nofollow``, never through a link as its last component;
    :class:`Refused` (the descriptor closed) when it is not a regular file."""
    fd = os.open(real, _OPEN_NOFOLLOW if nofollow else _OPEN)
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise _not_regular(status.st_mode, display)
    except BaseException:
        os.close(fd)
        raise
    return fd, status


def read_regular(real, display, cap=MAX_FILE_BYTES, limit=None, nofollow=False):
    """Bytes of the regular file ``real`` (at most ``limit`` when given).

    Opened without blocking (a FIFO never hangs the reader), refused with :class:`Refused`
    when it is not a regular file or holds more than ``cap`` bytes. ``display`` names the
    file in messages (the host path, not the snapshot path).
    """
    # open_regular's steps, inline: a gather reads thousands of files through here
    fd = os.open(real, _OPEN_NOFOLLOW if nofollow else _OPEN)
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise _not_regular(status.st_mode, display)
        want = cap + 1 if limit is None else min(limit, cap + 1)
        data = os.read(fd, min(65536, want))
        # one read holds a file of the size it says it has (a snapshot's files); else more reads until
        # the end or the cap (sysfs says 4096 for every attribute, procfs 0, and gives a page a read)
        if data and len(data) < want and len(data) != status.st_size:
            chunks = [data]
            got = len(data)
            while got < want:
                chunk = os.read(fd, min(65536, want - got))
                if not chunk:
                    break
                chunks.append(chunk)
                got += len(chunk)
            data = b"".join(chunks)
    finally:
        os.close(fd)
    if len(data) > cap:
        raise Refused(display, "is larger than %d bytes (the limit for this kind of file)" % cap)
    return data


def _reason(exc):
    if isinstance(exc, (OutsideRoot, Refused)):
        return exc.why
    if isinstance(exc, EnvironmentError):
        if exc.errno == errno.ENOENT:
            return "missing"
        if exc.errno in (errno.EACCES, errno.EPERM):
            return "permission denied (run with become: true)"
        return os.strerror(exc.errno) if exc.errno else str(exc)
    return str(exc)


def _normal(path):
    """Whether ``path`` is absolute and already normal (no empty, ``.`` or ``..`` component, no
    trailing slash): what the gatherers build, and what needs no ``normpath``. Conservative: a
    name starting with a dot is taken for not normal."""
    return path[:1] == "/" and "//" not in path and "/." not in path and (path == "/" or path[-1:] != "/")


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
        #: tool basename -> (bound, reason) of a command a bound ended: the tool is not run again
        self.command_bounds = {}
        #: capture -> the bound (``timeout``/``output_cap``) that ended it, live or as recorded
        self.capture_bounds = {}
        self._snapshot_meta = None
        # host directory -> its real path under a snapshot root: a gather reads thousands of files
        # in a few hundred directories, and resolving each full path again costs an lstat per
        # component (3x the reads themselves at 768 CPUs). None disables it (fixes, which write).
        self.dir_cache = {}
        # (host path, limit, cap) -> bytes of a small file this gather already read under a snapshot
        # root: gatherers read some attributes twice (a PCI function's vendor and class, its AER
        # counters: pci.py and health.py), and a snapshot does not change while it is read. Used
        # only with :attr:`dir_cache` (not by fixes, which write); failures are not kept, so a
        # second read of a missing file still records its error.
        self._read_memo = {}

    # -- paths -----------------------------------------------------------------
    def host_path(self, path, follow_last=True):
        """Map an absolute host path (``/sys/...``) to the real path under this root.

        Live: the path itself. Snapshot: resolved inside the root (:func:`resolve_in_root`);
        raises :class:`OutsideRoot` (an ``OSError``) for a path that leaves it.
        """
        if self.live:
            return path
        if self.dir_cache is None:
            return resolve_in_root(self.root, path, follow_last=follow_last)
        if _normal(path) and path != "/":
            parent, unused_sep, name = path.rpartition("/")  # already normal: the common case
            parent = parent or "/"
        elif ".." in path.split("/"):
            return resolve_in_root(self.root, path, follow_last=follow_last)  # never collapsed lexically
        else:
            parent, name = posixpath.split(posixpath.normpath("/" + path.lstrip("/")))
            if name in ("", "."):
                return resolve_in_root(self.root, path, follow_last=follow_last)
        real_parent = self.dir_cache.get(parent)
        candidate = (real_parent if real_parent is not None else self._real_dir(parent)) + "/" + name
        if follow_last and os.path.islink(candidate):
            return resolve_in_root(self.root, path)  # rare for a file: the full walk from the root
        return candidate

    def _real_dir(self, directory):
        """Real path of the normal absolute host directory ``directory`` under a snapshot root, from
        :attr:`dir_cache`: a directory not seen yet is its parent's real path (cached in turn) plus
        one component, one ``lstat`` to see whether that component is a link; a link is resolved
        by :func:`resolve_in_root` from the root, as every path once was. Containment is the
        same: each component is checked once per gather instead of once per path under it."""
        real = self.dir_cache.get(directory)
        if real is not None:
            return real
        if directory == "/":
            real = self.root
        else:
            parent, unused_sep, name = directory.rpartition("/")
            real_parent = self._real_dir(parent or "/")
            candidate = real_parent.rstrip("/") + "/" + name
            real = resolve_in_root(self.root, directory) if os.path.islink(candidate) else candidate
        self.dir_cache[directory] = real
        return real

    def _inside(self, path, follow_last=True):
        """:meth:`host_path`, or ``None`` (with an error recorded) when it leaves the root."""
        try:
            return self.host_path(path, follow_last)
        except OutsideRoot as exc:
            self.error("root", path, exc.why)
            return None

    def error(self, subsystem, path, reason):
        self.errors.append({"subsystem": subsystem, "path": path, "reason": reason})

    # -- reads -----------------------------------------------------------------
    def read_bytes(self, path, subsystem, optional=False, limit=None, cap=MAX_FILE_BYTES):
        """Return the bytes of ``path`` (at most ``limit``) or ``None``.

        ``optional`` files that are missing are not errors (an absent feature, such as
        ``/sys/devices/system/cpu/amd_pstate`` on Intel); other failures always are, among
        them a path leaving a snapshot root, something that is not a regular file, and a file
        larger than ``cap``.
        """
        try:
            data = self._read_file(path, cap, limit)
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

    def _read_file(self, path, cap, limit):
        if self.live:
            return read_regular(path, path, cap=cap, limit=limit)
        cache = self.dir_cache
        real = None
        if cache is not None:
            data = self._read_memo.get((path, limit, cap))
            if data is not None:
                return data
            # host_path(path, follow_last=False) of a normal path whose directory is resolved already
            parent, unused_sep, name = path.rpartition("/")
            real_parent = cache.get(parent)
            if real_parent is not None and _normal(path):
                real = real_parent + "/" + name
        try:
            # most files are not links: open the last component without following it, and only
            # when it is one (ELOOP) resolve the whole path inside the root
            if real is None:
                real = self.host_path(path, follow_last=False)
            data = read_regular(real, path, cap=cap, limit=limit, nofollow=True)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            data = read_regular(self.host_path(path), path, cap=cap, limit=limit, nofollow=True)
        if cache is not None and len(data) <= MEMO_BYTES:
            self._read_memo[(path, limit, cap)] = data
        return data

    def read_text(self, path, subsystem, optional=False, cap=MAX_FILE_BYTES):
        data = self.read_bytes(path, subsystem, optional=optional, cap=cap)
        if data is None:
            return None
        return data.decode("utf-8", "replace")

    def read_value(self, path, subsystem, optional=False):
        """A one-line sysfs/procfs attribute, stripped; ``None`` when unreadable or empty."""
        data = self.read_bytes(path, subsystem, optional=optional)  # read_text's steps, inline
        if data is None:
            return None
        text = data.decode("utf-8", "replace").strip()
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

    def mode(self, path):
        """Permission bits of a file (``st_mode & 0o7777``, links followed inside the root), or
        ``None`` when it cannot be looked at; a snapshot keeps them (``write_snapshot``)."""
        try:
            value = os.stat(self.host_path(path)).st_mode & 0o7777
        except EnvironmentError:
            return None
        if self.recorder is not None:
            self.recorder.mode(path, value)
        return value

    def exists(self, path):
        real = self._inside(path, follow_last=False)
        found = real is not None and os.path.lexists(real)
        if found and self.recorder is not None:
            self.recorder.entry(path, real)
        return found

    def isdir(self, path):
        real = self._inside(path)
        found = real is not None and os.path.isdir(real)
        if found and self.recorder is not None:
            self.recorder.directory(path)
        return found

    def listdir(self, path, subsystem=None, pattern=None):
        """Sorted entries of a directory (``[]`` when missing; an error when ``subsystem``)."""
        try:
            names = self._listdir(path)
        except EnvironmentError as exc:
            if subsystem is not None or isinstance(exc, OutsideRoot):
                self.error(subsystem or "root", path, _reason(exc))
            return []
        if pattern is not None:
            names = fnmatch.filter(names, pattern)
        if self.recorder is not None:
            self.recorder.directory(path)
            for name in names:
                self.recorder.entry(posixpath.join(path, name), os.path.join(self.host_path(path), name))
        return sorted(names)

    def _listdir(self, path):
        """Names in a directory; under a snapshot root its subdirectories that are not links go
        into :attr:`dir_cache` as they are listed (the entry's type comes with the listing), so
        that reading under them costs no ``lstat`` per directory."""
        real = self.host_path(path)
        if self.live or self.dir_cache is None or not _normal(path):
            return os.listdir(real)
        names = []
        prefix = path.rstrip("/") + "/"
        with os.scandir(real) as entries:
            for entry in entries:
                names.append(entry.name)
                if entry.is_dir(follow_symlinks=False):
                    self.dir_cache.setdefault(prefix + entry.name, real + "/" + entry.name)
        return names

    def readlink(self, path, subsystem=None):
        """Target of a symlink as stored (host-relative), or ``None``.

        Snapshots keep sysfs links as links (docs/snapshot-format.md); a link stored as a
        plain directory yields ``None`` and, with ``subsystem``, an error.
        """
        try:
            target = os.readlink(self.host_path(path, follow_last=False))
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
                if recorded.get("bound") in (TIMEOUT, OUTPUT_CAP):
                    self.capture_bounds[capture] = recorded["bound"]
                self.error(subsystem, recorded.get("where", rel), recorded["error"])
                return None, recorded["error"]
            try:
                data = read_regular(self.host_path("/" + rel), rel, cap=MAX_LARGE_BYTES, nofollow=True)
                return data.decode("utf-8", "replace"), None
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
        earlier = self.command_bounds.get(os.path.basename(binary))
        if earlier is not None:
            # one hung tool costs one time bound per gather, not one per command of that tool
            reason = "%s not run: %s" % (" ".join(argv), earlier[1])
            return self._command_failed(capture, subsystem, " ".join(argv), reason, earlier[0])
        bound = None
        try:
            result = self._run([binary] + argv[1:])
            rc, out, err = result
            bound = getattr(result, "bound", None)
        except Exception as exc:  # a broken binary must not take the facts down
            rc, out, err = 127, "", str(exc)
        if bound is not None:
            reason = result.reason
            self.command_bounds[os.path.basename(binary)] = (bound, reason)
            return self._command_failed(capture, subsystem, " ".join(argv), reason, bound)
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

    def _command_failed(self, capture, subsystem, where, reason, bound):
        """Record a command a bound ended (or one not run after its tool hit a bound)."""
        self.capture_bounds[capture] = bound
        self.error(subsystem, where, reason)
        if self.recorder is not None:
            self.recorder.command_failed(capture, where, reason, bound=bound)
        return None, reason

    @property
    def _captured(self):
        """``snapshot.json`` of a snapshot root (``{}`` live or when absent/unreadable).

        One that is there but cannot be read or parsed (not JSON, not an object, nested too
        deeply for the parser: a line of 100,000 ``[`` raises ``RecursionError``) is an error of
        ``/snapshot.json``, recorded once; the failures it would replay are not replayed."""
        if self._snapshot_meta is None:
            self._snapshot_meta = {}
            if not self.live:
                reason = None
                try:
                    data = read_regular(self.host_path("/snapshot.json"), "snapshot.json", nofollow=True)
                    meta = json.loads(data.decode("utf-8", "replace"))
                except EnvironmentError as exc:
                    if exc.errno != errno.ENOENT:
                        reason = "cannot be read: %s" % _reason(exc)
                except RecursionError:
                    reason = "cannot be parsed: nested too deeply"
                except ValueError as exc:
                    reason = "cannot be parsed: not JSON (%s)" % str(exc)[:200]
                else:
                    if isinstance(meta, dict):
                        self._snapshot_meta = meta
                    else:
                        reason = "cannot be parsed: not a JSON object"
                if reason is not None:
                    self.error("root", "/snapshot.json", reason + "; the failures recorded at capture are not replayed")
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
        self.modes = {}

    def file(self, path, data):
        self.files[path] = data

    def mode(self, path, value):
        self.modes[path] = value

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

    def command_failed(self, capture, where, reason, bound=None):
        self.commands[capture] = {"error": reason, "where": where}
        if bound is not None:
            self.commands[capture]["bound"] = bound

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

        def add_file(path, data, mode=None):
            if path in written:
                return
            add_dirs(path)
            written.add(path)
            member = info(path, tarfile.REGTYPE, len(data))
            if mode is not None and mode & 0o111:
                member.mode = 0o755  # executable on the host (a boot script): kept, nothing else
            tar.addfile(member, io.BytesIO(data))

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
            add_file(_canonical(path, links), recorder.files[path], recorder.modes.get(path))
        for path in sorted(recorder.markers):
            add_file(_canonical(path, links), b"")
        for entry in recorder.commands.values():
            if "stdout" in entry:
                add_file("/" + entry["file"], entry["stdout"].encode("utf-8"))
        document = dict(meta)
        document.update(recorder.metadata())
        add_file("/snapshot.json", (json.dumps(document, indent=2, sort_keys=True) + "\n").encode("utf-8"))
