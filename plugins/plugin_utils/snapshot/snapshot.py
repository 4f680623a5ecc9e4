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

Before ``tarfile`` sees the tarball, :func:`scan_tarball` walks its headers once, decompressing
as a stream and never holding a member's data: ``tarfile`` reads a GNU long-name or pax header
whole into memory (and a chain of them recursively) before any filter sees the member, so the
sizes it would read are capped first (:data:`MAX_HEADER_BYTES` per extension header,
:data:`MAX_HEADERS_TOTAL` for all of them, :data:`MAX_CHAIN` in a row), together with the member
count, the data of all members and the decompressed size of the whole stream. ``tarfile`` then
opens the same file with the compression the scan found.

Every refusal names the offending member or path; names and reasons are quoted through
``files.clip`` (escaped, a few hundred characters at most).
"""

from __future__ import absolute_import, division, print_function

import io
import os
import posixpath
import shutil
import stat
import tarfile
import tempfile
from zlib import adler32

from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import OutsideRoot, resolve_in_root
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.files import MESSAGE_CHARS, clip

__metaclass__ = type

#: Members a tarball may hold: a real capture of a 768-thread host holds some 60 000.
MAX_MEMBERS = 500000
#: Total bytes of the files a tarball may hold (a large capture is a few tens of MiB).
MAX_BYTES = 1024 * 1024 * 1024
#: Bytes a GNU long-name/long-link or pax header may declare (a real one holds one path).
MAX_HEADER_BYTES = 64 * 1024
#: Bytes all the extension headers of a tarball may declare together (the names they carry are
#: kept in memory for every member).
MAX_HEADERS_TOTAL = 64 * 1024 * 1024
#: Extension headers in a row before one member (tarfile reads a chain of them recursively).
MAX_CHAIN = 8
#: Bytes of the tar stream once decompressed: headers, data and padding.
MAX_EXPANDED = 2 * 1024 * 1024 * 1024
#: Refusals shown in a message (all of them are returned) and the message's length that stops
#: adding more (the first is always shown).
SHOWN = 5
MESSAGE_BUDGET = 1000
#: Refusals listed in ``lines(limit)`` callers pass on (the action's ``refused``).
LISTED = 100

#: Modes an imported snapshot gets (owner-executable files keep their execute bits).
DIR_MODE = 0o755
FILE_MODE = 0o644
EXEC_MODE = 0o755
#: Mode of the imported snapshot directory itself: a snapshot holds container configurations
#: and GPU serial numbers, so it is private to the controller user, like the capture tarball.
TOP_MODE = 0o700


class SnapshotError(Exception):
    """The tarball cannot be read or the destination cannot be written."""


class SnapshotRefused(SnapshotError):
    """The snapshot holds something a snapshot must not: ``problems`` is ``[(path, reason)]``."""

    def __init__(self, source, problems):
        self.source = source
        self.problems = list(problems)
        count = len(self.problems)
        head = "snapshot %s refused (%d problem%s): " % (clip(source), count, "" if count == 1 else "s")
        shown = []
        for line in self.lines(SHOWN):
            if shown and len(head) + sum(len(item) + 2 for item in shown) + len(line) > MESSAGE_BUDGET:
                break
            shown.append(line)
        more = count - len(shown)
        SnapshotError.__init__(self, head + "; ".join(shown) + ("; and %d more" % more if more > 0 else ""))

    def lines(self, limit=None):
        """``["name: reason"]`` of the first ``limit`` problems (all by default), names and
        reasons quoted with ``files.clip``."""
        problems = self.problems if limit is None else self.problems[:limit]
        return ["%s: %s" % (clip(path), clip(reason, 2 * MESSAGE_CHARS)) for path, reason in problems]


def _quote(text):
    """``repr(text)`` cut to ``files.MESSAGE_CHARS`` characters (a link target in a reason)."""
    if len(text) <= MESSAGE_CHARS:
        return repr(text)
    return "%r... (%d characters)" % (text[:MESSAGE_CHARS], len(text))


# -- members -----------------------------------------------------------------------------------

def _kind(member):
    if member.ischr():
        return "a character device node"
    if member.isblk():
        return "a block device node"
    if member.isfifo():
        return "a FIFO"
    if member.islnk():
        return "a hard link (to %s)" % _quote(member.linkname)
    return "of tar type %r" % member.type


def _filter_reason(exc, member):
    """A short reason for a ``tarfile.FilterError`` (the member is named by the caller)."""
    if isinstance(exc, tarfile.AbsoluteLinkError):
        return "symbolic link to the absolute path %s" % _quote(member.linkname)
    if isinstance(exc, tarfile.LinkOutsideDestinationError):
        return "symbolic link to %s leaves the snapshot" % _quote(member.linkname)
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
            return ("symbolic link to the absolute path %s (a snapshot stores links relative to their "
                    "directory)" % _quote(member.linkname))
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
                    problem = "stored inside the symbolic link member %s" % _quote(prefix)
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
    links that exist, by ``host.root.resolve_in_root``, as the readers do). With ``allow_absolute_links`` an absolute target is read as the
    snapshot readers read it, from ``path`` (``host.root.resolve_in_root``), and accepted.
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
                    problems.append((rel, "symbolic link to the absolute path %s" % _quote(target)))
                return
            try:
                # resolved as every reader resolves it: inside the snapshot, never on this machine
                resolve_in_root(top, "/" + rel)
            except OutsideRoot:
                problems.append((rel, "symbolic link to %s leaves the snapshot" % _quote(target)))
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


# -- the raw stream ---------------------------------------------------------------------------

BLOCK = 512
#: Extension headers: their payload is read whole by tarfile, before the member they describe.
EXTENSIONS = {b"L": "GNU long-name header ('L')", b"K": "GNU long-link header ('K')",
              b"x": "pax extended header ('x')", b"X": "Solaris extended header ('X')",
              b"g": "pax global header ('g')"}
#: Types whose data tarfile skips after the header (any type it does not know is skipped too).
_DATA_TYPES = (b"0", b"\0", b"7")
#: Types tarfile reads no data for: the next header follows at once.
_NO_DATA_TYPES = (b"1", b"2", b"3", b"4", b"5", b"6")
_ZERO_BLOCK = bytes(512)
_HIGH_BYTES = bytes(range(128, 256))
_CHUNK = 1024 * 1024


def _decompressors():
    """``[(magic, tarfile mode, open(fileobj))]`` of the compressions this Python can read."""
    found = []
    try:
        import gzip  # pylint: disable=import-outside-toplevel
        found.append((b"\x1f\x8b", "gz", lambda handle: gzip.GzipFile(fileobj=handle, mode="rb")))
    except ImportError:
        pass
    try:
        import bz2  # pylint: disable=import-outside-toplevel
        found.append((b"BZh", "bz2", lambda handle: bz2.BZ2File(handle, mode="rb")))
    except ImportError:
        pass
    try:
        import lzma  # pylint: disable=import-outside-toplevel
        found.append((b"\xfd7zXZ\x00", "xz", lambda handle: lzma.LZMAFile(handle, mode="rb")))
    except ImportError:
        pass
    return found


def _stream_errors():
    """Exceptions a damaged compressed stream raises (``zlib.error``, ``lzma.LZMAError``...)."""
    errors = [OSError, EOFError, ValueError]
    for module, name in (("zlib", "error"), ("lzma", "LZMAError")):
        try:
            errors.append(getattr(__import__(module), name))
        except ImportError:
            pass
    return tuple(errors)


class _Unreadable(Exception):
    """The tar stream is damaged (reported as :class:`SnapshotError`)."""


class _Stream:
    """The decompressed tar stream, read in pieces of :data:`_CHUNK` bytes and counted: never more
    than ``cap`` bytes (and one) are decompressed, and handing out more than ``cap`` is refused."""

    def __init__(self, stream, cap):
        self.stream = stream
        self.cap = cap
        self.buffer = b""
        self.pos = 0
        self.count = 0  # bytes handed out: the offset in the tar stream
        self.pulled = 0  # bytes decompressed

    def read(self, size):
        """At most ``size`` bytes (``size`` at most :data:`_CHUNK`), fewer only at the end."""
        pos = self.pos
        end = pos + size
        if end > len(self.buffer):
            rest = self.buffer[pos:]
            want = min(_CHUNK, self.cap + 1 - self.pulled)
            data = self.stream.read(want) if want > 0 else b""
            self.pulled += len(data)
            self.buffer, pos = rest + data, 0
            end = min(size, len(self.buffer))
        self.pos = end
        self.count += end - pos
        if self.count > self.cap:
            raise _Refusal("tar stream", "decompressed, the tarball is larger than %d bytes" % self.cap)
        return self.buffer[pos:end]

    def exactly(self, size, what):
        data = self.read(size)
        if len(data) != size:
            raise _Unreadable("truncated at byte %d, inside %s" % (self.count, what))
        return data

    def skip(self, size, what):
        while size > 0:
            step = min(size, _CHUNK)
            self.exactly(step, what)
            size -= step


class _Refusal(Exception):
    """A limit or a construct a snapshot never holds (reported as :class:`SnapshotRefused`)."""

    def __init__(self, path, reason):
        Exception.__init__(self, reason)
        self.path = path
        self.reason = reason


def _number(field):
    """The value of a tar number field, read as tarfile reads it: octal digits (up to a NUL, blanks
    around them) or base-256 (a first byte 0x80, or 0xff for a negative number); ``None`` when it
    is neither."""
    first = field[0]
    if first in (0x80, 0xff):
        value = int.from_bytes(field[1:], "big")
        return value - 256 ** (len(field) - 1) if first == 0xff else value
    try:
        return int(field.split(b"\0", 1)[0].strip() or b"0", 8)
    except ValueError:
        return None


def _byte_sum(block):
    """The sum of the 512 bytes of ``block``: ``zlib.adler32`` of each half is one plus its sum
    (at most 256 * 255, below its modulus), computed in C."""
    return (adler32(block[:256]) & 0xFFFF) + (adler32(block[256:]) & 0xFFFF) - 2


def _checksum_ok(block):
    """Whether the header checksum matches, as tarfile checks it: the sum of the header's bytes
    with the checksum field counted as eight spaces, over unsigned or signed bytes."""
    field = block[148:156]
    stored = _number(field)
    unsigned = 256 + _byte_sum(block) - sum(field)
    if stored == unsigned:
        return True
    # some old tars summed signed bytes: every byte of 128 and above counts 256 less
    high = (BLOCK - len(block.translate(None, _HIGH_BYTES))) - (8 - len(field.translate(None, _HIGH_BYTES)))
    return stored == unsigned - 256 * high


def _pax_records(payload):
    """``[(keyword, value)]`` of a pax header's payload, ``None`` when a record is malformed.
    A record is ``"<length> <keyword>=<value>\\n"``, its length counting the whole record."""
    records = []
    pos = 0
    while pos < len(payload):
        if not payload[pos:].strip(b"\0"):
            break  # NUL padding inside the declared size
        space = payload.find(b" ", pos, pos + 21)
        digits = payload[pos:space] if space > pos else b""
        if not digits.isdigit():
            return None
        end = pos + int(digits)
        record = payload[space + 1:end - 1]
        if end > len(payload) or end <= space + 1 or payload[end - 1:end] != b"\n" or b"=" not in record:
            return None
        keyword, dummy, value = record.partition(b"=")
        if not keyword:
            return None
        records.append((keyword, value))
        pos = end
    return records


def _name(block, long_name, pax_path):
    """The member's name as tarfile gives it (for messages): a pax ``path``, else a GNU long name,
    else the ustar prefix and name."""
    if pax_path is not None:
        raw = pax_path
    elif long_name is not None:
        raw = long_name.split(b"\0", 1)[0]
    else:
        raw = block[:100].split(b"\0", 1)[0]
        prefix = block[345:500].split(b"\0", 1)[0]
        if prefix and block[156:157] != b"S":
            raw = prefix + b"/" + raw
    return raw.decode("utf-8", "surrogateescape")


def _blocks(size):
    return -(-size // BLOCK) * BLOCK


def scan_tarball(handle, max_members=MAX_MEMBERS, max_bytes=MAX_BYTES, max_expanded=MAX_EXPANDED):
    """Walk the headers of the tarball open as ``handle`` (at its start) without keeping any data,
    and return the tarfile mode that reads it (``"r:gz"``, ``"r:bz2"``, ``"r:xz"`` or ``"r:"``).

    Raises :class:`_Refusal` for a limit or a construct no snapshot holds, :class:`_Unreadable` (or
    a decompressor's error) for a damaged tarball. What ``tarfile`` reads of an accepted tarball
    is what was scanned: the same stream, headers at the same offsets (it stops at the first zero
    block, as the scan does), every extension header under :data:`MAX_HEADER_BYTES`.
    """
    magic = handle.read(6)
    handle.seek(0)
    mode, stream = "r:", handle
    for prefix, name, opener in _decompressors():
        if magic.startswith(prefix):
            mode, stream = "r:" + name, opener(handle)
            break
    try:
        _walk(_Stream(stream, max_expanded), max_members, max_bytes)
    finally:
        if stream is not handle:
            stream.close()
    return mode


def _walk(reader, max_members, max_bytes):
    """The header walk of :func:`scan_tarball` over the decompressed stream ``reader``."""
    members = data_total = headers_total = 0
    chain = []  # (type, offset) of the extension headers read since the last member
    long_name = pax_path = pax_size = None
    while True:
        offset = reader.count
        block = reader.read(BLOCK)
        if len(block) != BLOCK:
            if block:
                raise _Unreadable("truncated at byte %d, inside a header" % reader.count)
            raise _Unreadable("empty, not a tarball" if offset == 0 else
                              "ends at byte %d without the end-of-archive block: truncated" % offset)
        if block == _ZERO_BLOCK:
            # the end of the archive: tarfile reads nothing after the first zero block either
            if chain:
                raise _Unreadable("the %s at byte %d is followed by no member" % (
                    EXTENSIONS[chain[-1][0]], chain[-1][1]))
            return
        if not _checksum_ok(block):
            raise _Unreadable("no tar header at byte %d (bad checksum)%s" % (
                offset, ": not a tarball" if offset == 0 else ""))
        kind = block[156:157]
        size = _number(block[124:136])
        if size is None:
            raise _Unreadable("the size field of the header at byte %d is not a number" % offset)
        if size < 0:
            raise _Refusal("tar header at byte %d" % offset, "negative size %d" % size)
        if kind in EXTENSIONS:
            headers_total = _extension(reader, kind, size, offset, chain, headers_total)
            if kind == b"L":
                long_name = chain[-1][2]
            elif kind in (b"x", b"X"):
                pax_size, pax_path = chain[-1][2]
            continue
        members += 1
        if members > max_members:
            raise _Refusal(_name(block, long_name, pax_path), "more than %d members" % max_members)
        if kind == b"S":
            raise _Refusal(_name(block, long_name, pax_path), "is a GNU sparse file (a snapshot holds none)")
        if pax_size is not None:
            size = pax_size
        if kind in _NO_DATA_TYPES or (kind == b"\0" and block[:100].split(b"\0", 1)[0].endswith(b"/")):
            # tarfile skips no data after these: a size would make it read data as headers
            if size:
                raise _Refusal(_name(block, long_name, pax_path),
                               "of tar type %r declares %d bytes of data" % (kind, size))
        elif size:
            # regular files, and members of a type tarfile does not know, whose data it skips
            # (decompresses) too
            data_total += size
            if data_total > max_bytes:
                raise _Refusal(_name(block, long_name, pax_path),
                               "the files add up to more than %d bytes" % max_bytes)
            reader.skip(_blocks(size), "the data of %s" % _quote(_name(block, long_name, pax_path)))
        if chain:
            chain = []
            long_name = pax_path = pax_size = None


def _extension(reader, kind, size, offset, chain, headers_total):
    """Read the extension header of type ``kind`` at ``offset`` within its caps and append
    ``(kind, offset, value)`` to ``chain``: the name of a GNU long name, ``(size, path)`` of a pax
    header (``None`` when it sets none). Returns the new total of extension header bytes."""
    what = EXTENSIONS[kind]
    where = "tar header at byte %d" % offset
    if len(chain) >= MAX_CHAIN:
        raise _Refusal(where, "more than %d extension headers in a row" % MAX_CHAIN)
    if size > MAX_HEADER_BYTES:
        raise _Refusal(where, "%s of %d bytes: a header may hold at most %d" % (what, size, MAX_HEADER_BYTES))
    headers_total += size
    if headers_total > MAX_HEADERS_TOTAL:
        raise _Refusal(where, "the extension headers add up to more than %d bytes" % MAX_HEADERS_TOTAL)
    payload = reader.exactly(_blocks(size), "the " + what)[:size]
    value = payload if kind == b"L" else None
    if kind in (b"x", b"X", b"g"):
        records = _pax_records(payload)
        if records is None:
            raise _Refusal(where, "malformed %s" % what)
        keywords = dict(records)
        if any(key.startswith(b"GNU.sparse.") for key in keywords):
            raise _Refusal(where, "%s of a sparse file (a snapshot holds none)" % what)
        size_value = keywords.get(b"size")
        if size_value is not None and not size_value.isdigit():
            raise _Refusal(where, "%s gives the size %s" % (what, _quote(size_value.decode("utf-8", "replace"))))
        if kind == b"g":
            if size_value is not None:
                raise _Refusal(where, "%s sets the size of every member" % what)
        else:
            if any(item[0] in (b"x", b"X") for item in chain):
                # tarfile would apply the first one's size last
                raise _Refusal(where, "a second %s for one member" % what)
            value = (int(size_value) if size_value is not None else None, keywords.get(b"path"))
    chain.append((kind, offset, value))
    return headers_total


# -- import ------------------------------------------------------------------------------------

class MemberRefused(tarfile.FilterError):
    """:func:`snapshot_filter` refused ``tarinfo`` for ``reason``."""

    def __init__(self, tarinfo, reason):
        tarfile.FilterError.__init__(self, "%s: %s" % (_quote(tarinfo.name), reason))
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


def import_snapshot(src, dest, check_only=False, max_members=MAX_MEMBERS, max_bytes=MAX_BYTES,
                    max_expanded=MAX_EXPANDED):
    """Check the snapshot tarball ``src`` and unpack it as the directory ``dest``.

    Returns ``{"dest", "members", "files", "links", "directories", "replaced"}``. Raises
    :class:`SnapshotRefused` (nothing written) when a member is refused, and
    :class:`SnapshotError` when ``src`` cannot be read or ``dest`` cannot be written. A previous
    snapshot at ``dest`` (a directory holding ``snapshot.json``, or an empty one) is replaced
    as a whole, so no file of an older capture survives; anything else there is left alone and
    refused. With ``check_only`` the tarball is checked and nothing is written.

    The tarball is scanned first (:func:`scan_tarball`: header, name and pax sizes, member count,
    data and decompressed size capped before they are read), then opened by ``tarfile`` with the
    compression the scan found.
    """
    dest = os.path.abspath(dest)
    parent = os.path.dirname(dest)
    why = _replaceable(dest)
    if why:
        raise SnapshotError(why)
    handle = _open_regular(src)
    try:
        try:
            mode = scan_tarball(handle, max_members=max_members, max_bytes=max_bytes, max_expanded=max_expanded)
        except _Refusal as exc:
            raise SnapshotRefused(src, [(exc.path, exc.reason)])
        except _Unreadable as exc:
            raise SnapshotError("cannot read snapshot tarball %s: %s" % (clip(src), exc))
        except _stream_errors() as exc:
            raise SnapshotError("cannot read snapshot tarball %s: %s" % (clip(src), clip(str(exc))))
        handle.seek(0)
        try:
            tar = tarfile.open(fileobj=handle, mode=mode)
        except (OSError, EOFError, tarfile.TarError) as exc:
            raise SnapshotError("cannot read snapshot tarball %s: %s" % (clip(src), clip(str(exc))))
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
                    raise SnapshotError("cannot read snapshot tarball %s: %s" % (clip(src), clip(str(exc))))
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
                    raise SnapshotError("cannot unpack snapshot tarball %s into %s: %s"
                                        % (clip(src), work, clip(str(exc))))
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
    finally:
        handle.close()


def _open_regular(src):
    """``src`` open for reading (buffered), or :class:`SnapshotError`: a FIFO or a device is
    refused without blocking on it."""
    try:
        fd = os.open(src, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise SnapshotError("cannot read snapshot tarball %s: %s" % (clip(src), exc.strerror or exc))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SnapshotError("cannot read snapshot tarball %s: not a regular file" % clip(src))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return io.open(fd, "rb")


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
