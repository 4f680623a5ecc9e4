# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Checks and imports snapshot tarballs on the controller (docs/snapshot-format.md, "Importing").

A snapshot tarball comes from a managed host, and a compromised host can send anything. Before
anything is written, every member is checked: it must be a regular file, a directory or a
symbolic link, under a relative name without ``..``, given once, not inside a link member, and
accepted by the standard library's ``tarfile.data_filter`` (no absolute or escaping link, no
device node or FIFO). Symbolic links must also be relative: a capture rewrites absolute targets
(``host_snapshot``), so an absolute one is refused even though the readers would resolve it
inside the snapshot. The tarball is then extracted with the same filter into a new private
directory next to the destination, file and directory modes are reset (0644/0755, 0755 when the
owner could execute), the unpacked tree is checked again as a directory (:func:`check_tree`, which
catches a link that only escapes once a later member exists), and the directory is renamed into
place.

:func:`check_tree` also checks a snapshot directory that is already unpacked (``gpuhost_root``).

Every refusal names the offending member or path.
"""

from __future__ import absolute_import, division, print_function

import os
import posixpath
import shutil
import stat
import tarfile
import tempfile

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.root import OutsideRoot, resolve_in_root

__metaclass__ = type

#: Members a tarball may hold: a real capture of a 768-thread host holds some 60 000.
MAX_MEMBERS = 500000
#: Total bytes of the files a tarball may hold (a large capture is a few tens of MiB).
MAX_BYTES = 1024 * 1024 * 1024
#: Refusals shown in a message (all of them are returned).
SHOWN = 5

#: Modes an imported snapshot gets (owner-executable files keep their execute bits).
DIR_MODE = 0o755
FILE_MODE = 0o644
EXEC_MODE = 0o755
#: Mode of the imported snapshot directory itself: a snapshot holds container configurations
#: and GPU serial numbers, so it is private to the controller user, like the capture tarball.
TOP_MODE = 0o700


class SnapshotError(Exception):
    """The tarball cannot be read or the destination cannot be written."""


def printable(text):
    """``text`` as shown in messages: a member name from a hostile tarball may carry terminal
    escapes or undecodable bytes; those are shown escaped (``\\x1b``), anything else as it is."""
    return text if text.isprintable() else text.encode("unicode_escape").decode("ascii")


class SnapshotRefused(SnapshotError):
    """The snapshot holds something a snapshot must not: ``problems`` is ``[(path, reason)]``."""

    def __init__(self, source, problems):
        self.source = source
        self.problems = list(problems)
        shown = "; ".join(self.lines()[:SHOWN])
        more = len(self.problems) - SHOWN
        SnapshotError.__init__(self, "snapshot %s refused (%d problem%s): %s%s" % (
            source, len(self.problems), "" if len(self.problems) == 1 else "s", shown,
            "; and %d more" % more if more > 0 else ""))

    def lines(self):
        """``["name: reason"]`` of every problem, names and reasons shown with :func:`printable`."""
        return ["%s: %s" % (printable(path), printable(reason)) for path, reason in self.problems]


# -- members -----------------------------------------------------------------------------------

def _kind(member):
    if member.ischr():
        return "a character device node"
    if member.isblk():
        return "a block device node"
    if member.isfifo():
        return "a FIFO"
    if member.islnk():
        return "a hard link (to %r)" % member.linkname
    return "of tar type %r" % member.type


def _filter_reason(exc, member):
    """A short reason for a ``tarfile.FilterError`` (the member is named by the caller)."""
    if isinstance(exc, tarfile.AbsoluteLinkError):
        return "symbolic link to the absolute path %r" % member.linkname
    if isinstance(exc, tarfile.LinkOutsideDestinationError):
        return "symbolic link to %r leaves the snapshot" % member.linkname
    if isinstance(exc, tarfile.SpecialFileError):
        return "is %s, not a regular file, directory or symbolic link" % _kind(member)
    if isinstance(exc, tarfile.AbsolutePathError):
        return "absolute member name"
    if isinstance(exc, tarfile.OutsideDestinationError):
        return "would be written outside the snapshot"
    return str(exc)


def member_name(name):
    """``name`` without a leading ``./`` (``tar -C dir .`` writes them); ``""`` for the top."""
    while name.startswith("./"):
        name = name[2:]
    name = name.rstrip("/")
    return "" if name == "." else name


def name_problem(name):
    """Why a member name is refused, or ``None``."""
    if not name:
        return None
    if name.startswith("/"):
        return "absolute member name"
    if "\0" in name:
        return "member name holds a NUL byte"
    parts = name.split("/")
    if ".." in parts:
        return "member name climbs with '..'"
    if "" in parts:
        return "member name holds an empty component"
    return None


def check_member(member, dest_path):
    """Why ``member`` may not be extracted into ``dest_path``, or ``None``.

    Checks the type and link target of one member on its own; :func:`check_members` adds the
    checks that need the other members (duplicates, names inside a link member, sizes).
    """
    name = member_name(member.name)
    problem = name_problem(name)
    if problem:
        return problem
    if not (member.isreg() or member.isdir() or member.issym()):
        return "is %s, not a regular file, directory or symbolic link" % _kind(member)
    if member.issym():
        if not member.linkname:
            return "symbolic link with an empty target"
        if posixpath.isabs(member.linkname):
            return ("symbolic link to the absolute path %r (a snapshot stores links relative to their "
                    "directory)" % member.linkname)
    if not name:
        return None if member.isdir() else "the snapshot's top directory is not a directory"
    try:
        tarfile.data_filter(member, dest_path)
    except tarfile.FilterError as exc:
        return _filter_reason(exc, member)
    return None


def check_members(tar, dest_path, max_members=MAX_MEMBERS, max_bytes=MAX_BYTES):
    """``(members, problems)`` of an open tarball, read once from start to end.

    ``problems`` is ``[(member name, reason)]`` in tarball order; stops early (with the member
    that crossed the limit named) when the tarball holds more than ``max_members`` members or
    ``max_bytes`` bytes of files, before their data is read.
    """
    members = []
    problems = []
    seen = set()
    links = set()
    total = 0
    for member in tar:
        name = member_name(member.name)
        members.append(member)
        if len(members) > max_members:
            problems.append((member.name, "more than %d members" % max_members))
            break
        total += max(member.size, 0) if member.isreg() else 0
        if total > max_bytes:
            problems.append((member.name, "the files add up to more than %d bytes" % max_bytes))
            break
        problem = check_member(member, dest_path)
        if problem is None and name in seen:
            problem = "given twice"
        if problem is None and name:
            parents = name.split("/")[:-1]
            for index in range(len(parents)):
                prefix = "/".join(parents[:index + 1])
                if prefix in links:
                    problem = "stored inside the symbolic link member %r" % prefix
                    break
        if problem is not None:
            problems.append((member.name, problem))
        seen.add(name)
        if member.issym():
            links.add(name)
    return members, problems


# -- directories -------------------------------------------------------------------------------

def check_tree(path, allow_absolute_links=False):
    """``[(relative path, reason)]`` of what a snapshot directory holds that it must not.

    Walks ``path`` without following links and refuses device nodes, FIFOs and sockets,
    set-user-ID, set-group-ID and sticky bits, world-writable files and directories, and symbolic
    links whose target is absolute or resolves outside ``path`` (resolved inside it, through the
    links that exist, by ``facts.root.resolve_in_root``, as the readers do). With ``allow_absolute_links`` an absolute target is read as the
    snapshot readers read it, from ``path`` (``facts.root.resolve_in_root``), and accepted.
    Nothing is changed.
    """
    problems = []
    top = os.path.realpath(path)
    try:
        top_mode = os.lstat(path).st_mode
    except OSError as exc:
        return [(".", "cannot be read: %s" % (exc.strerror or exc))]
    if not stat.S_ISDIR(top_mode):
        return [(".", "is not a directory")]

    def look(real, rel):
        try:
            mode = os.lstat(real).st_mode
        except OSError as exc:
            problems.append((rel, "cannot be read: %s" % (exc.strerror or exc)))
            return
        if stat.S_ISLNK(mode):
            target = os.readlink(real)
            if posixpath.isabs(target):
                if not allow_absolute_links:
                    problems.append((rel, "symbolic link to the absolute path %r" % target))
                return
            try:
                # resolved as every reader resolves it: inside the snapshot, never on this machine
                resolve_in_root(top, "/" + rel)
            except OutsideRoot:
                problems.append((rel, "symbolic link to %r leaves the snapshot" % target))
            return
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            kind = ("a character device node" if stat.S_ISCHR(mode) else "a block device node" if stat.S_ISBLK(mode)
                    else "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "not a file")
            problems.append((rel, "is %s, not a regular file, directory or symbolic link" % kind))
            return
        if stat.S_IMODE(mode) & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX):
            problems.append((rel, "mode %04o has set-user-ID, set-group-ID or sticky bits" % stat.S_IMODE(mode)))
        elif stat.S_IMODE(mode) & stat.S_IWOTH:
            problems.append((rel, "mode %04o is world-writable" % stat.S_IMODE(mode)))

    look(path, ".")
    for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
        for name in sorted(dirnames) + sorted(filenames):
            real = os.path.join(dirpath, name)
            look(real, os.path.relpath(real, path))
    return problems


def reset_modes(path):
    """Give every directory under ``path`` mode 0755 and every file 0644 (0755 when its owner
    could execute it); links are left alone. Directories the tarball did not list were created
    with the controller's umask."""
    for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
        for name in dirnames + filenames:
            real = os.path.join(dirpath, name)
            mode = os.lstat(real).st_mode
            if stat.S_ISDIR(mode):
                os.chmod(real, DIR_MODE)
            elif stat.S_ISREG(mode):
                os.chmod(real, EXEC_MODE if mode & stat.S_IXUSR else FILE_MODE)


# -- import ------------------------------------------------------------------------------------

class MemberRefused(tarfile.FilterError):
    """:func:`snapshot_filter` refused ``tarinfo`` for ``reason``."""

    def __init__(self, tarinfo, reason):
        tarfile.FilterError.__init__(self, "%r: %s" % (tarinfo.name, reason))
        self.tarinfo = tarinfo
        self.reason = reason


def snapshot_filter(member, dest_path):
    """``tarfile`` extraction filter: :func:`check_member` (which runs ``data_filter``, so the
    links on disk are checked again as they are extracted), then ``data_filter``'s sanitised
    member with a fixed directory mode. Raises :class:`MemberRefused` naming the member."""
    problem = check_member(member, dest_path)
    if problem is not None:
        raise MemberRefused(member, problem)
    member = tarfile.data_filter(member, dest_path)
    if member.isdir():
        member = member.replace(mode=DIR_MODE, deep=False)
    return member


def _replaceable(dest):
    """Why ``dest`` may not be replaced by a new snapshot, or ``None``."""
    if not os.path.lexists(dest):
        return None
    if os.path.islink(dest) or not os.path.isdir(dest):
        return "%s exists and is not a directory" % dest
    if os.listdir(dest) and not os.path.lexists(os.path.join(dest, "snapshot.json")):
        return "%s is not empty and holds no snapshot.json: not replaced" % dest
    return None


def import_snapshot(src, dest, check_only=False, max_members=MAX_MEMBERS, max_bytes=MAX_BYTES):
    """Check the snapshot tarball ``src`` and unpack it as the directory ``dest``.

    Returns ``{"dest", "members", "files", "links", "directories", "replaced"}``. Raises
    :class:`SnapshotRefused` (nothing written) when a member is refused, and
    :class:`SnapshotError` when ``src`` cannot be read or ``dest`` cannot be written. A previous
    snapshot at ``dest`` (a directory holding ``snapshot.json``, or an empty one) is replaced
    as a whole, so no file of an older capture survives; anything else there is left alone and
    refused. With ``check_only`` the tarball is checked and nothing is written.
    """
    dest = os.path.abspath(dest)
    parent = os.path.dirname(dest)
    why = _replaceable(dest)
    if why:
        raise SnapshotError(why)
    try:
        tar = tarfile.open(src, "r:*")
    except (OSError, tarfile.TarError) as exc:
        raise SnapshotError("cannot read snapshot tarball %s: %s" % (src, exc))
    with tar:
        if check_only:
            # a name that does not exist: the links are resolved lexically
            work = os.path.join(parent, ".%s.check" % os.path.basename(dest))
            while os.path.lexists(work):
                work += "_"
        else:
            try:
                os.makedirs(parent, exist_ok=True)
                work = tempfile.mkdtemp(prefix=".%s.import-" % os.path.basename(dest), dir=parent)
            except OSError as exc:
                raise SnapshotError("cannot create a directory next to %s: %s" % (dest, exc))
        try:
            try:
                members, problems = check_members(tar, work, max_members=max_members, max_bytes=max_bytes)
            except (OSError, EOFError, tarfile.TarError) as exc:
                raise SnapshotError("cannot read snapshot tarball %s: %s" % (src, exc))
            if problems:
                raise SnapshotRefused(src, problems)
            if not any(member_name(m.name) == "snapshot.json" and m.isreg() for m in members):
                raise SnapshotRefused(src, [("snapshot.json", "missing: not a snapshot tarball")])
            result = {
                "dest": dest,
                "members": len(members),
                "files": sum(1 for m in members if m.isreg()),
                "links": sum(1 for m in members if m.issym()),
                "directories": sum(1 for m in members if m.isdir()),
                "replaced": os.path.lexists(dest),
            }
            if check_only:
                return result
            try:
                tar.extractall(work, members=members, filter=snapshot_filter)
            except MemberRefused as exc:
                raise SnapshotRefused(src, [(exc.tarinfo.name, exc.reason)])
            except tarfile.FilterError as exc:
                raise SnapshotRefused(src, [(exc.tarinfo.name if hasattr(exc, "tarinfo") else "?", str(exc))])
            except (OSError, EOFError, tarfile.TarError) as exc:
                raise SnapshotError("cannot unpack snapshot tarball %s into %s: %s" % (src, work, exc))
            reset_modes(work)
            problems = check_tree(work)
            if problems:
                raise SnapshotRefused(src, problems)
            os.chmod(work, TOP_MODE)
            _move_into_place(work, dest)
            work = None
            return result
        finally:
            if work is not None and not check_only and os.path.lexists(work):
                shutil.rmtree(work, ignore_errors=True)


def _move_into_place(work, dest):
    old = None
    try:
        if os.path.lexists(dest):
            old = tempfile.mkdtemp(prefix=".%s.old-" % os.path.basename(dest), dir=os.path.dirname(dest))
            old_snapshot = os.path.join(old, "snapshot")
            os.rename(dest, old_snapshot)
        os.rename(work, dest)
    except OSError as exc:
        if old is not None and os.path.lexists(os.path.join(old, "snapshot")) and not os.path.lexists(dest):
            os.rename(os.path.join(old, "snapshot"), dest)
        raise SnapshotError("cannot move the unpacked snapshot to %s: %s" % (dest, exc))
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)


#: Options of the ``snapshot_import`` action (repeated in plugins/modules/snapshot_import.py).
ARGUMENT_SPEC = dict(
    src=dict(type="path", required=True),
    dest=dict(type="path", required=True),
)
