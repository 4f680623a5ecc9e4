# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every fix module shares: root-relative writes, backups, commands, rollback.

The fix modules decide first (pure functions in ``fix.sysctl``, ``fix.cmdline``,
``fix.cpu``) and then act through a :class:`Host`:

* configuration files are written to a temporary file next to the target and moved into
  place with ``module.atomic_move`` (never half-written), after ``module.backup_local``
  when backups are asked for;
* kernel attributes (``/proc/sys``, ``/sys``) are written in place, as the kernel wants;
  an ``EINVAL``/``EBUSY``/``EROFS``/``EACCES`` answer becomes a :class:`FixError` that
  names the file and says what to do;
* commands run only on the live host (``root == '/'``) outside check mode; elsewhere they
  are only listed, so a snapshot copy can be "fixed" and inspected safely;
* every write is journalled so that a failure later in the same task can put back what
  this task already changed (:meth:`Host.rollback`).

Only ``main()`` of a module turns a :class:`FixError` into ``fail_json``.
"""

from __future__ import absolute_import, division, print_function

import errno
import os
import shlex
import tempfile

from ansible_collections.gpuhost.baseline.plugins.module_utils.host import runner
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import (
    MAX_FILE_BYTES, OutsideRoot, Refused, Root, read_regular)

__metaclass__ = type


class FixError(Exception):
    """A fix that cannot be done, with the message for the user and a partial result."""

    def __init__(self, msg, **result):
        super(FixError, self).__init__(msg)
        self.msg = msg
        self.result = result


def to_text(data):
    """Bytes of a configuration file -> text that encodes back to the same bytes."""
    if data is None:
        return None
    return data.decode("utf-8", "surrogateescape")


def to_bytes(text):
    return text.encode("utf-8", "surrogateescape")


def printable(text, limit=60):
    """A short, safe rendering of a value read from a file, for messages."""
    if text is None:
        return "nothing"
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    shown = repr(text[:limit])
    return shown + ("..." if len(text) > limit else "")


#: argv that makes udev read its rule files again after a fix wrote one
UDEV_RELOAD = ("udevadm", "control", "--reload")


def run_host_command(module, argv):
    """``argv`` run by the one command runner (module_utils/host/runner.py), as text: a
    :class:`runner.Result` (unpacks as ``rc, stdout, stderr``). A stand-in module of the tests answers
    through its own ``run_bounded``; AnsibleModule has none, so on a host it is always the runner."""
    stand_in = getattr(module, "run_bounded", None)
    if stand_in is not None:
        return stand_in(argv)
    return runner.run(argv).decoded()


def command_line(argv):
    """argv -> the shell-quoted line reported in ``commands``."""
    return " ".join(shlex.quote(arg) for arg in argv)


def file_diff(path, before, after):
    """One entry of a module's ``diff`` list (text, ``""`` for a file that does not exist)."""
    return {
        "before_header": path if before is not None else "%s (absent)" % path,
        "after_header": path if after is not None else "%s (absent)" % path,
        "before": before or "",
        "after": after or "",
    }


_ERRNO_HINTS = {
    errno.EINVAL: "the kernel rejected the value (EINVAL): it is not one this attribute accepts on this host",
    errno.EBUSY: "the kernel refused the change right now (EBUSY)",
    errno.EROFS: "the file system is read-only (EROFS): /proc/sys and /sys are mounted read-only in "
                 "unprivileged containers; apply this on the host itself",
    errno.EACCES: "permission denied (EACCES): run with become: true; in an unprivileged container the "
                  "kernel settings belong to the host",
    errno.EPERM: "operation not permitted (EPERM): run with become: true; in an unprivileged container the "
                 "kernel settings belong to the host",
    errno.ENOENT: "the attribute does not exist (ENOENT): this kernel or driver does not provide it",
    errno.EIO: "the device or driver returned an I/O error (EIO)",
}


def errno_hint(exc):
    if isinstance(exc, (OutsideRoot, Refused)):
        return exc.why
    code = getattr(exc, "errno", None)
    if code in _ERRNO_HINTS:
        return _ERRNO_HINTS[code]
    if code:
        return "%s (%s)" % (os.strerror(code), errno.errorcode.get(code, code))
    return str(exc)


def _write_in_place(real, data):
    """One ``write()`` of ``data`` into an existing kernel attribute (no O_CREAT: a missing
    attribute is an error, not a new file; no O_NOFOLLOW exception: a link is refused)."""
    fd = os.open(real, os.O_WRONLY | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0))
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _replace_file(module, real, data):
    """``data`` into a temporary file beside ``real``, synced, then renamed over it by
    ``module.atomic_move``: a reader (or a crash) sees the old file or the new one."""
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(real), suffix=".tmp", dir=os.path.dirname(real))
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        module.atomic_move(tmp, real)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _replace_link(real, target):
    """Create or replace the symlink ``real`` -> ``target`` by renaming a new link over it."""
    tmp = os.path.join(os.path.dirname(real), ".%s.tmp%d" % (os.path.basename(real), os.getpid()))
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(target, tmp)
    os.rename(tmp, real)


def _make_parent(real):
    directory = os.path.dirname(real)
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)


class Host:
    """Reads and writes of one task on the live host (``root='/'``) or a snapshot copy.

    :param module: the ``AnsibleModule`` (for ``atomic_move``, ``backup_local``,
        ``run_command``, ``get_bin_path`` and ``check_mode``).
    :param root_dir: ``/`` or a writable snapshot directory.
    :param backup: keep a copy of each configuration file before replacing it.
    """

    def __init__(self, module, root_dir="/", backup=False):
        self.module = module
        self.reader = Root(root_dir)
        self.reader.dir_cache = None  # a fix creates directories and links: resolve afresh each time
        self.live = self.reader.live
        self.check_mode = bool(getattr(module, "check_mode", False))
        self.backup = backup
        self.backups = {}
        self.commands = []
        self.ran = []
        self._journal = []

    # -- paths and reads -------------------------------------------------------------------
    def path(self, host_path, follow_last=True):
        """The real path of ``host_path``: itself live, resolved inside a snapshot root
        (raises ``OutsideRoot``, an ``OSError``, for one that leaves it)."""
        return self.reader.host_path(host_path, follow_last=follow_last)

    def target(self, host_path):
        """The real path a write of ``host_path`` goes to: resolved inside the root up to its
        last component, which must not be a symlink (a write never follows one)."""
        try:
            real = self.path(host_path, follow_last=False)
        except OutsideRoot as exc:
            raise FixError("refusing to write %s: %s" % (host_path, exc.why), path=host_path)
        if os.path.islink(real):
            raise FixError("refusing to write %s: it is a symbolic link (to %s), and a fix never writes through one"
                           % (host_path, printable(os.readlink(real), 120)), path=host_path)
        return real

    def exists(self, host_path):
        try:
            return os.path.lexists(self.path(host_path, follow_last=False))
        except OutsideRoot as exc:
            raise FixError("cannot look at %s: %s" % (host_path, exc.why), path=host_path)

    def listdir(self, host_path, pattern=None):
        return self.reader.listdir(host_path, pattern=pattern)

    def read_file(self, host_path):
        """Bytes of a file, ``None`` when it does not exist; other failures raise :class:`FixError`."""
        try:
            return read_regular(self.path(host_path), host_path, cap=MAX_FILE_BYTES, nofollow=not self.live)
        except EnvironmentError as exc:
            if exc.errno == errno.ENOENT:
                return None
            raise FixError("cannot read %s: %s" % (host_path, errno_hint(exc)), path=host_path)

    def read_attr(self, host_path, optional=False):
        """A one-line kernel attribute, stripped; ``None`` when ``optional`` and absent."""
        data = self.read_file(host_path)
        if data is None:
            if optional:
                return None
            raise FixError("cannot read %s: %s" % (host_path, _ERRNO_HINTS[errno.ENOENT]), path=host_path)
        return data.decode("utf-8", "replace").strip()

    def readlink(self, host_path):
        try:
            return os.readlink(self.path(host_path, follow_last=False))
        except EnvironmentError:
            return None

    # -- writes ------------------------------------------------------------------------------
    def write_attr(self, host_path, value):
        """Write a kernel attribute in place (sysfs/procfs take one ``write()``)."""
        real = self.target(host_path)
        old = self.read_file(host_path)
        try:
            _write_in_place(real, (value + "\n").encode("ascii"))
        except EnvironmentError as exc:
            raise FixError("cannot write %r to %s: %s" % (value, host_path, errno_hint(exc)),
                           path=host_path, errno=errno.errorcode.get(exc.errno))
        self._journal.append(("attr", host_path, old))

    def write_file(self, host_path, data, mode=None):
        """Replace a configuration file atomically; returns the backup path or ``None``.

        The new content goes to a temporary file in the same directory, then
        ``module.atomic_move`` renames it over the target, so a reader (or a crash) sees
        the old file or the new one, never a mix. Missing parent directories are created.
        """
        real = self.target(host_path)
        old = self.read_file(host_path)
        backup_file = None
        try:
            _make_parent(real)
            if old is not None and self.backup:
                backup_file = self.module.backup_local(real)
                self.backups[host_path] = backup_file
            _replace_file(self.module, real, data)
            if mode is not None:
                os.chmod(real, mode)
        except Exception as exc:  # atomic_move raises plain Exception
            cause = exc if isinstance(exc, EnvironmentError) else getattr(exc, "__cause__", None) or exc
            raise FixError("cannot write %s: %s" % (host_path, errno_hint(cause) if isinstance(cause, EnvironmentError)
                                                    else str(exc)), path=host_path)
        self._journal.append(("file", host_path, old))
        return backup_file

    def symlink(self, host_path, target):
        """Create or replace the symlink ``host_path`` -> ``target`` (stored as given)."""
        try:
            real = self.path(host_path, follow_last=False)  # the link itself is replaced, never followed
        except OutsideRoot as exc:
            raise FixError("refusing to create the link %s: %s" % (host_path, exc.why), path=host_path)
        old = self.readlink(host_path)
        try:
            _make_parent(real)
            _replace_link(real, target)
        except EnvironmentError as exc:
            raise FixError("cannot create the link %s: %s" % (host_path, errno_hint(exc)), path=host_path)
        self._journal.append(("link", host_path, old))

    def remove(self, host_path):
        """Remove a file or link (never a directory); nothing when it does not exist. Journalled:
        a rollback puts the file's content or the link's target back."""
        try:
            real = self.path(host_path, follow_last=False)
        except OutsideRoot as exc:
            raise FixError("refusing to remove %s: %s" % (host_path, exc.why), path=host_path)
        if not os.path.lexists(real):
            return
        if os.path.islink(real):
            kind, old = "link", os.readlink(real)
        else:
            kind, old = "file", self.read_file(host_path)
        try:
            os.unlink(real)
        except EnvironmentError as exc:
            raise FixError("cannot remove %s: %s" % (host_path, errno_hint(exc)), path=host_path)
        self._journal.append((kind, host_path, old))

    # -- commands ----------------------------------------------------------------------------
    def run(self, argv, why):
        """Run ``argv`` on the live host (outside check mode); always list it in ``commands``.

        ``why`` completes the failure message ("... so /boot/grub/grub.cfg is not updated").
        """
        self.commands.append(command_line(argv))
        if not self.live or self.check_mode:
            return None
        binary = self.module.get_bin_path(argv[0])
        if not binary:
            raise FixError("%s not found in PATH: %s" % (argv[0], why), command=command_line(argv))
        result = run_host_command(self.module, [binary] + list(argv[1:]))
        rc, out, err = result
        self.ran.append(command_line(argv))
        if result.bound is not None:
            raise FixError("%s: %s" % (result.reason, why), command=command_line(argv), rc=rc, stdout=out, stderr=err)
        if rc != 0:
            lines = (err or out or "").strip().splitlines()
            last = lines[-1][:300] if lines else "no output"
            raise FixError("%s exited %d (%s): %s" % (command_line(argv), rc, last, why),
                           command=command_line(argv), rc=rc, stdout=out, stderr=err)
        return out

    # -- undo ---------------------------------------------------------------------------------
    def rollback(self):
        """Put back, newest first, what this task wrote; returns the paths that could not be."""
        failed = []
        while self._journal:
            kind, host_path, old = self._journal.pop()
            try:
                self._undo(kind, self.path(host_path, follow_last=False), old)
            except Exception:  # best effort: report what is left, never mask the first error
                failed.append(host_path)
        return failed

    def _undo(self, kind, real, old):
        """Put back one journal entry: an attribute's old value, a file's old content, a link's
        old target; a file or link that did not exist is removed."""
        if kind == "attr":
            if old is not None:
                _write_in_place(real, old)
        elif old is None:
            os.unlink(real)
        elif kind == "file":
            _replace_file(self.module, real, old)
        else:
            _replace_link(real, old)


def fail_with_rollback(host, error):
    """Roll back what ``host`` wrote and return the message and result for ``fail_json``."""
    wrote = len(host._journal)
    undone = host.rollback()
    msg = error.msg
    if undone:
        msg += "; could not undo the earlier writes to %s: check them by hand" % ", ".join(undone)
    elif wrote:
        msg += "; the %d earlier write(s) of this task were undone" % wrote
    result = dict(error.result)
    result["commands"] = host.commands
    if host.backups:
        result["backup_files"] = host.backups
    return msg, result


#: The options every file-writing fix module shares (documented in doc_fragments/fix.py).
FIX_OPTIONS = dict(
    root=dict(type="path", default="/"),
    backup=dict(type="bool", default=False),
)


def run_fix(module, apply):
    """The whole ``main()`` of a fix module after its argument spec: build the :class:`Host`, call
    ``apply(host)``, roll back and fail on :class:`FixError`, pass warnings on, exit with the result."""
    host = Host(module, module.params["root"], module.params["backup"])
    try:
        result = apply(host)
    except FixError as exc:
        msg, partial = fail_with_rollback(host, exc)
        module.fail_json(msg=msg, **partial)
    for warning in result.pop("warnings"):
        module.warn(warning)
    module.exit_json(backup_files=host.backups, commands=host.commands, **result)
