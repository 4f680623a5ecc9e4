"""In-memory snapshot tree, written out deterministically.

A snapshot is assembled as a mapping of host paths to bytes (files), link targets
(symlinks) and empty directories, so that scenario code can still override or remove
entries (the hostile capture) before anything touches the disk. ``write`` then creates
the tree in sorted order with fixed modes and timestamps: running the generator twice
gives identical trees.
"""

import os
import posixpath
import shutil

#: mtime given to every written entry (2025-01-15T03:12:00Z), so archives are reproducible.
FIXED_MTIME = 1736910720


def _norm(path):
    if not path.startswith("/"):
        raise ValueError("tree paths are absolute host paths: %r" % (path,))
    return posixpath.normpath(path)


class Tree:
    """Files, symlinks and directories of one snapshot, keyed by absolute host path."""

    def __init__(self):
        self.files = {}
        self.links = {}
        self.dirs = set()
        self.executables = set()

    # -- building ------------------------------------------------------------
    def file(self, path, data, executable=False):
        """Add or replace a regular file (mode 0644, 0755 when ``executable``); ``str`` is
        encoded as UTF-8."""
        path = _norm(path)
        if isinstance(data, str):
            data = data.encode("utf-8")
        self.links.pop(path, None)
        self.files[path] = bytes(data)
        if executable:
            self.executables.add(path)
        else:
            self.executables.discard(path)

    def text(self, path, value):
        """A one-value sysfs/procfs attribute: ``value`` followed by a newline."""
        self.file(path, "%s\n" % (value,))

    def link(self, path, target):
        """Add a symlink whose stored target is exactly ``target`` (relative, like sysfs)."""
        path = _norm(path)
        self.files.pop(path, None)
        self.links[path] = target

    def rel_link(self, path, target_path):
        """Symlink at ``path`` to the absolute host path ``target_path``, stored relative."""
        path = _norm(path)
        rel = posixpath.relpath(_norm(target_path), posixpath.dirname(path))
        self.link(path, rel)

    def mkdir(self, path):
        self.dirs.add(_norm(path))

    def remove(self, path):
        """Drop a file, link or directory and everything below it."""
        path = _norm(path)
        prefix = path.rstrip("/") + "/"
        for table in (self.files, self.links):
            for key in [k for k in table if k == path or k.startswith(prefix)]:
                del table[key]
        self.dirs = set(d for d in self.dirs if d != path and not d.startswith(prefix))

    def __contains__(self, path):
        path = _norm(path)
        return path in self.files or path in self.links or path in self.dirs

    # -- writing ---------------------------------------------------------------
    def write(self, outdir):
        """Create the tree under ``outdir`` (which must not exist or be empty)."""
        if os.path.lexists(outdir) and os.listdir(outdir):
            raise FileExistsError("%s exists and is not empty" % outdir)
        os.makedirs(outdir, exist_ok=True)

        def local(path):
            return os.path.join(outdir, path.lstrip("/"))

        for path in sorted(self.dirs):
            os.makedirs(local(path), exist_ok=True)
        for path in sorted(self.files):
            dest = local(path)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "wb") as handle:
                handle.write(self.files[path])
            os.chmod(dest, 0o755 if path in self.executables else 0o644)
        for path in sorted(self.links):
            dest = local(path)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            os.symlink(self.links[path], dest)
        # Timestamps last, deepest first, so creating children does not bump a parent again.
        entries = []
        for dirpath, dirnames, filenames in os.walk(outdir):
            for name in dirnames + filenames:
                entries.append(os.path.join(dirpath, name))
        for entry in sorted(entries, key=lambda p: (-p.count(os.sep), p)):
            os.utime(entry, (FIXED_MTIME, FIXED_MTIME), follow_symlinks=False)
        os.utime(outdir, (FIXED_MTIME, FIXED_MTIME))


def same_tree(tree, outdir):
    """True when ``outdir`` holds exactly ``tree``: the same files (bytes and mode), links (targets) and
    directories, nothing more (an earlier run of the generator left it; rewriting it changes nothing)."""
    if os.path.islink(outdir) or not os.path.isdir(outdir):
        return False
    want_dirs = set()
    for path in list(tree.files) + list(tree.links) + list(tree.dirs):
        parent = posixpath.dirname(path)
        while parent not in ("/", ""):
            want_dirs.add(parent)
            parent = posixpath.dirname(parent)
    want_dirs.update(tree.dirs)
    seen = 0
    for dirpath, dirnames, filenames in os.walk(outdir):
        for name in dirnames + filenames:
            local = os.path.join(dirpath, name)
            path = "/" + os.path.relpath(local, outdir).replace(os.sep, "/")
            seen += 1
            if os.path.islink(local):
                if tree.links.get(path) != os.readlink(local):
                    return False
                if name in dirnames:
                    dirnames.remove(name)  # os.walk does not follow it anyway
            elif os.path.isdir(local):
                if path not in want_dirs:
                    return False
            elif path in tree.files:
                mode = 0o755 if path in tree.executables else 0o644
                if os.stat(local).st_mode & 0o777 != mode:
                    return False
                with open(local, "rb") as handle:
                    if handle.read() != tree.files[path]:
                        return False
            else:
                return False
    return seen == len(tree.files) + len(tree.links) + len(want_dirs)


def replace_tree(tree, outdir):
    """Write ``tree`` to ``outdir``, replacing an earlier generated snapshot there.

    Only a directory that holds a ``snapshot.json`` (a snapshot we or the capture
    playbook wrote) is removed; anything else is left alone and reported.
    """
    if os.path.lexists(outdir):
        if os.path.islink(outdir) or not os.path.isdir(outdir):
            raise FileExistsError("%s exists and is not a directory: remove it first" % outdir)
        if os.listdir(outdir):
            if not os.path.isfile(os.path.join(outdir, "snapshot.json")):
                raise FileExistsError(
                    "%s is not empty and holds no snapshot.json: refusing to replace it; "
                    "choose another output directory" % outdir)
            shutil.rmtree(outdir)
    tree.write(outdir)
