"""Test helpers for the fix modules: a stand-in AnsibleModule, snapshot copies, tree hashes."""
import errno
import hashlib
import os
import shutil
import subprocess


class FakeModule:
    """The parts of AnsibleModule that ``fix.base.Host`` uses, without Ansible.

    ``atomic_move`` is a rename (what AnsibleModule does on one file system), ``backup_local``
    copies like AnsibleModule (same naming scheme, own counter instead of the time), commands
    are recorded and answered from ``answers`` ({argv0: (rc, out, err)}).
    """

    def __init__(self, check_mode=False, answers=None, binaries=True):
        # binaries: True (every binary exists), False (none), or the names that exist
        self.check_mode = check_mode
        self.answers = answers or {}
        self.binaries = binaries
        self.ran = []
        self._count = 0

    def atomic_move(self, src, dest, unsafe_writes=False, keep_dest_attrs=True):
        if os.path.exists(dest):
            shutil.copymode(dest, src)
        os.rename(src, dest)

    def backup_local(self, path):
        self._count += 1
        backup = "%s.%d.2025-01-15@10:00:%02d~" % (path, os.getpid(), self._count)
        shutil.copy2(path, backup)
        return backup

    def get_bin_path(self, name, **_kwargs):
        if self.binaries is True or name in (self.binaries or ()):
            return "/usr/bin/" + name
        return None

    def run_command(self, argv, **_kwargs):
        self.ran.append(list(argv))
        return self.answers.get(os.path.basename(argv[0]), (0, "", ""))

    def run_bounded(self, argv):
        """What fix.base.run_host_command asks a stand-in module instead of the command runner."""
        from ansible_collections.gpuhost.baseline.plugins.module_utils.host.runner import Result
        answer = self.run_command(argv)
        if isinstance(answer, Result):
            return answer
        rc, out, err = answer
        return Result(argv, rc, out, err)


def copy_tree(source, dest):
    """A writable copy of a snapshot, links kept as links."""
    shutil.copytree(source, str(dest), symlinks=True)
    return str(dest)


def tree_state(root):
    """``{relative path: ("file", sha256) | ("link", target) | ("dir",)}`` of a whole tree."""
    state = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(directory, name)
            rel = os.path.relpath(path, root)
            if os.path.islink(path):
                state[rel] = ("link", os.readlink(path))
            elif os.path.isdir(path):
                state[rel] = ("dir",)
            else:
                with open(path, "rb") as handle:
                    state[rel] = ("file", hashlib.sha256(handle.read()).hexdigest())
    return state


def changed_paths(before, after):
    """Relative paths added, removed or modified between two :func:`tree_state` results."""
    return sorted(path for path in set(before) | set(after) if before.get(path) != after.get(path))


def read(root, rel):
    with open(os.path.join(root, rel.lstrip("/")), "rb") as handle:
        return handle.read().decode("utf-8", "surrogateescape")


def readonly_attr():
    """A live kernel attribute that refuses writes even for root (as /proc/sys in a container).

    sysfs answers EACCES at open() for an attribute without a store method whatever the
    caller's privileges; ``kernel_max`` holds an integer on every Linux host. Probing opens it
    write-only without truncating and writes nothing.
    """
    for path in ("/sys/devices/system/cpu/kernel_max", "/sys/devices/system/cpu/possible"):
        try:
            fd = os.open(path, os.O_WRONLY)
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
                return path
            continue
        os.close(fd)
    raise AssertionError("no read-only kernel attribute found to stand for a read-only /proc/sys")


#: bind mounts made by :func:`make_readonly`; tests/conftest.py unmounts them after each test
MOUNTS = []


def make_readonly(root, rel):
    """Make ``rel`` in a snapshot copy a read-only kernel attribute: a live one is bind-mounted
    over the file, so writes get the kernel's own EACCES (as /proc/sys in a container).

    A symlink to the live attribute would not do: a fix resolves every path inside its root and
    refuses to write through a link. The mount is removed after the test (tests/conftest.py).
    """
    path = os.path.join(root, rel.lstrip("/"))
    subprocess.run(["mount", "--bind", readonly_attr(), path], check=True)
    MOUNTS.append(path)
    return path


def unmount_all():
    """Remove the bind mounts of :func:`make_readonly`, newest first."""
    while MOUNTS:
        subprocess.run(["umount", MOUNTS.pop()], check=False)
