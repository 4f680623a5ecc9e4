# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuhost.baseline contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every file the controller and the self-audit read or write, through one place.

The tool runs as root on the controller and on every host, over inputs it does not trust
(histories, report directories, site catalogues in shared directories, tarballs). The rules:

* :func:`read_bytes` / :func:`read_text`: regular files only, opened without following a last
  link and without blocking (a FIFO never hangs a run, a link to ``/dev/zero`` is refused), at
  most ``cap`` bytes (refused above it, never read past it). The facts layer's
  :func:`~ansible_collections.gpuhost.baseline.plugins.module_utils.host.root.read_regular` does
  the reading, so host and controller have one bounded reader.
* :func:`atomic_write`: a temporary file created exclusively in the same directory, renamed over
  the target. A link at the target is replaced, never followed.
* :func:`loads_json`: ``json.loads`` whose ``RecursionError`` (a line of 100,000 ``[``) is a
  ``ValueError`` like any other parse error.
* :func:`controller_path`: a path an action plugin or the history is given, made absolute the
  one way (``~`` expanded, a relative path from the working directory of ansible-playbook).
* :func:`clip`: any text quoted in a message, one line of printable characters and at most a
  few hundred of them (a 42 MB member name never reaches a console).

This file runs in the self-audit bundle on hosts too: Python 3.8+, standard library only.
"""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import json
import os
import re
import stat
import tempfile

from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Refused, open_regular, read_regular

#: What a message quotes of a name or a value at most (characters).
MESSAGE_CHARS = 300
#: Default cap of a controller-side read (a history, a site catalogue file, metrics.prom).
DEFAULT_CAP = 16 * 1024 * 1024


class FileRefused(OSError):
    """A file was not read or written: ``str()`` says which and why, in one line."""

    def __init__(self, path, why):
        OSError.__init__(self, "%s %s" % (clip(path), why))
        self.path = path
        self.why = why


def clip(text, limit=MESSAGE_CHARS):
    """``text`` as a message may quote it: non-printable characters escaped (``\\x1b``), cut to
    ``limit`` characters with the cut said (``... (12345678 characters)``)."""
    if not isinstance(text, str):
        text = str(text)
    total = len(text)
    head = text[:limit]
    if not head.isprintable():
        head = head.encode("unicode_escape", "backslashreplace").decode("ascii")[:limit]
    return head if total <= limit else "%s... (%d characters)" % (head, total)


def controller_path(path):
    """``path`` made absolute on the controller: ``~`` expanded, a relative path taken from the working
    directory of the ansible-playbook process (never from the playbook's or the collection's directory).
    Raises OSError when that working directory no longer exists."""
    path = os.path.expanduser(path)
    if os.path.isabs(path):
        return os.path.normpath(path)
    return os.path.normpath(os.path.join(os.getcwd(), path))


@contextlib.contextmanager
def _as_refused(path):
    """A reader's :class:`Refused` (not a regular file, too big) and a link met by ``O_NOFOLLOW``
    (``ELOOP``) raised as :class:`FileRefused` naming ``path``; other errors as they are."""
    try:
        yield
    except Refused as exc:
        raise FileRefused(path, exc.why)
    except OSError as exc:
        if getattr(exc, "errno", None) == 40:  # ELOOP: O_NOFOLLOW met a link
            raise FileRefused(path, "is a symbolic link (not followed)")
        raise


def read_bytes(path, cap=DEFAULT_CAP):
    """Bytes of the regular file ``path``: a last component that is a link, a FIFO, a device or a
    directory is refused (:class:`FileRefused`), as is a file over ``cap`` bytes. A missing file
    raises ``FileNotFoundError`` as ``open()`` would."""
    with _as_refused(path):
        return read_regular(path, clip(path), cap=cap, nofollow=True)


def iter_bytes(path, cap=DEFAULT_CAP, size=1024 * 1024):
    """The bytes of :func:`read_bytes`, in pieces of at most ``size`` bytes, for a reader that does
    not need the whole file at once; refused as :func:`read_bytes` refuses (a file over ``cap`` bytes
    when the piece that passes the cap is read)."""
    with _as_refused(path):
        fd, unused_status = open_regular(path, clip(path), nofollow=True)
    try:
        total = 0
        while True:
            chunk = os.read(fd, size)
            if not chunk:
                return
            total += len(chunk)
            if total > cap:
                raise FileRefused(path, "is larger than %d bytes (the limit for this kind of file)" % cap)
            yield chunk
    finally:
        os.close(fd)


def read_text(path, cap=DEFAULT_CAP):
    """:func:`read_bytes` decoded as UTF-8 (undecodable bytes replaced)."""
    return read_bytes(path, cap).decode("utf-8", "replace")


def loads_json(text):
    """``json.loads(text)``; nesting too deep for the parser raises ``ValueError`` too."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply to parse")


def atomic_write(path, text, sync=True):
    """Write ``text`` (UTF-8) to ``path`` through a temporary file in the same directory, then
    ``chmod 0644`` and a rename: a reader sees the old file or the new one, never half of one.

    The temporary name is ``.<name>.<random>``: it starts with a dot and does not end in the
    file's extension, so node_exporter's textfile collector (``*.prom``) never reads it. ``sync``
    flushes the data to disk before the rename (off for views regenerated at will). A link at
    ``path`` is replaced by the file, never followed; a directory there is refused."""
    tmp = write_temporary(path, text, sync)
    try:
        publish(tmp, path)
    except BaseException:
        discard(tmp)
        raise


def write_temporary(path, text, sync=True, mode=0o644):
    """Write ``text`` (a string, or an iterable of strings written one by one) to a new temporary
    file beside ``path``, with ``mode``, and return its name (the first half of :func:`atomic_write`,
    for a writer that renames a whole set only when every file exists)."""
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            if isinstance(text, str):
                handle.write(text)
            else:
                for chunk in text:
                    handle.write(chunk)
            handle.flush()
            if sync:
                os.fsync(handle.fileno())
        os.chmod(tmp, mode)
    except BaseException:
        discard(tmp)
        raise
    return tmp


def publish(tmp, path):
    """Rename the temporary file ``tmp`` over ``path`` (a link there is replaced, not followed;
    a directory there is refused)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise FileRefused(path, "is a directory, not a file this tool writes")
    os.replace(tmp, path)


def discard(path):
    """Remove ``path`` if it is there (a temporary file of ours)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


#: The lock file :class:`DirectoryLock` takes in a report or history directory (removed when let go; one a
#: killed run left behind is taken over, never trusted: see :class:`DirectoryLock`).
LOCK_NAME = ".gpuhost.lock"
#: How long :class:`DirectoryLock` waits for another run of the tool that holds the lock (seconds).
LOCK_WAIT_S = 300
#: How long it sleeps between two tries.
_LOCK_POLL_S = 0.05


class DirectoryLock:
    """An exclusive lock on a report or history directory: two runs writing into one report directory take
    turns, so the files always come from one run; history.py takes it on the history directory the same way.

    The lock is a ``flock`` on a file of the tool's own in the directory, :data:`LOCK_NAME`, never on the
    directory itself (any local user who can open a 0755 directory could hold a lock on it and make every
    root run wait). The file is opened without following a link (``O_NOFOLLOW``), created 0600, and used
    only when it is a regular file this user owns with one link: a link, a FIFO, another user's file or a
    hard link is refused (:class:`FileRefused`), never written. The lock is tried without blocking until
    ``wait_s`` seconds have passed, then refused with a message naming the holder's pid (the holder writes
    it into the file). The holder removes the file before it lets go; a run that got the lock on a file
    since removed or replaced tries again, so two runs never both hold it. The directory is the operator's
    (a link to it is followed: callers resolve it first); a file in its place is refused."""

    def __init__(self, directory, wait_s=LOCK_WAIT_S):
        self.directory = directory
        self.wait_s = wait_s
        self.fd = None
        self.dir_fd = None

    def __enter__(self):
        # the controller is Linux or macOS (ansible-core runs on nothing else)
        import fcntl  # pylint: disable=import-outside-toplevel
        import time  # pylint: disable=import-outside-toplevel

        deadline = time.monotonic() + max(0.0, float(self.wait_s))
        try:
            dir_fd = os.open(self.directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except NotADirectoryError:
            raise FileRefused(self.directory, "is not a directory: refused")
        try:
            while True:
                fd = self._open(dir_fd)
                if fd is None:
                    continue  # removed by the run that let go between our open and its check: open it again
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    holder = _lock_holder(fd)
                    os.close(fd)
                    if time.monotonic() >= deadline:
                        raise FileRefused(self.directory, "is locked by another run of gpuhost.baseline (%s, which "
                                          "holds %s) and was not let go within %g s: let that run finish, or end it "
                                          "if it is stuck, then run again"
                                          % ("pid %d" % holder if holder else "pid not known", LOCK_NAME, self.wait_s))
                    time.sleep(_LOCK_POLL_S)
                    continue
                if not _still_named(fd, dir_fd):
                    os.close(fd)  # its holder removed it as it let go: take the name's file instead
                    continue
                try:
                    os.ftruncate(fd, 0)
                    os.write(fd, ("%d\n" % os.getpid()).encode("ascii"))
                except OSError:
                    pass  # a full disk (ENOSPC, EFBIG): the lock holds all the same, its holder's pid unknown
                self.fd, self.dir_fd = fd, dir_fd
                return self
        except BaseException:
            os.close(dir_fd)
            raise

    def _open(self, dir_fd):
        path = os.path.join(self.directory, LOCK_NAME)
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(LOCK_NAME, flags, 0o600, dir_fd=dir_fd)
        except OSError as exc:
            if getattr(exc, "errno", None) == 40:  # ELOOP: O_NOFOLLOW met a link
                raise FileRefused(path, "is a symbolic link (not followed): refused as the lock file; remove it")
            raise
        try:
            st = os.fstat(fd)
            why = None
            if stat.S_ISREG(st.st_mode) and st.st_nlink == 0:
                os.close(fd)
                return None
            if not stat.S_ISREG(st.st_mode):
                why = "is not a regular file"
            elif st.st_uid != os.geteuid():
                why = "belongs to uid %d, not to this user (uid %d)" % (st.st_uid, os.geteuid())
            elif st.st_nlink != 1:
                why = "has %d hard links" % st.st_nlink
            if why:
                raise FileRefused(path, "%s: refused as the lock file; remove it" % why)
            if stat.S_IMODE(st.st_mode) != 0o600:
                os.fchmod(fd, 0o600)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def __exit__(self, *exc):
        try:
            if _still_named(self.fd, self.dir_fd):
                os.unlink(LOCK_NAME, dir_fd=self.dir_fd)
        except OSError:
            pass  # left behind: the next run takes it over
        os.close(self.fd)  # releases the lock
        os.close(self.dir_fd)
        self.fd = self.dir_fd = None
        return False


def _still_named(fd, dir_fd):
    """Whether :data:`LOCK_NAME` in ``dir_fd`` is still the file open as ``fd``."""
    try:
        named = os.stat(LOCK_NAME, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


def _lock_holder(fd):
    """The pid written in the lock file open as ``fd`` (0 when there is none yet)."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return 0
    return int(text) if re.match(r"\A[0-9]{1,11}\Z", text) else 0
