# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build gpuhost-self-audit, the zip application the self_audit role copies to each host.

usage: make_bundle.py COLLECTION_ROOT OUTPUT

Runs on the controller (the role calls it with ansible-playbook's Python; standard library only).
The zip holds ``__main__.py`` (bundle_main.py beside this file) and, under
``ansible_collections/gpuhost/baseline/``, what a host needs to audit itself: the facts readers
(plugins/module_utils/facts), the controller code (plugins/plugin_utils), rules, profiles,
schemas, and MANIFEST.json or galaxy.yml for the version. The same collection gives the same
bytes: members sorted, fixed timestamps and modes, stored uncompressed, so the role's copy task
is unchanged on a second run and changes exactly when the collection does.
"""
import io
import os
import stat
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = "ansible_collections/gpuhost/baseline/"
#: (directory under the collection root, file name suffixes taken from it); not recursive
TREES = (
    ("plugins/module_utils", (".py",)),
    ("plugins/module_utils/facts", (".py",)),
    ("plugins/plugin_utils", (".py",)),
    ("rules", (".yml", ".yaml")),
    ("profiles", (".yml", ".yaml")),
    ("schemas", (".json",)),
)
VERSION_FILES = ("MANIFEST.json", "galaxy.yml")
SHEBANG = b"#!/usr/bin/python3\n"
STAMP = (1980, 1, 1, 0, 0, 0)


class BundleError(Exception):
    pass


def members(root):
    """``[(name in the zip, path on disk)]``, sorted."""
    out = [("__main__.py", os.path.join(HERE, "bundle_main.py"))]
    for rel, suffixes in TREES:
        directory = os.path.join(root, rel)
        if not os.path.isdir(directory):
            if rel == "plugins/module_utils":
                continue
            raise BundleError("%s is not a directory: is %s the gpuhost.baseline collection?" % (directory, root))
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            if name.endswith(suffixes) and not name.startswith(".") and stat.S_ISREG(os.stat(path).st_mode):
                out.append((PREFIX + rel + "/" + name, path))
    for name in VERSION_FILES:
        path = os.path.join(root, name)
        if os.path.isfile(path):
            out.append((PREFIX + name, path))
            break
    return sorted(out)


def build(root, output):
    """Write the zip application for the collection at ``root`` to ``output``; return its member count."""
    buffer = io.BytesIO()
    entries = members(root)
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for name, path in entries:
            with open(path, "rb") as handle:
                data = handle.read()
            info = zipfile.ZipInfo(name, date_time=STAMP)
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            info.create_system = 3  # unix, whatever the controller
            archive.writestr(info, data)
    tmp = output + ".tmp"
    with open(tmp, "wb") as handle:
        handle.write(SHEBANG)
        handle.write(buffer.getvalue())
    os.chmod(tmp, 0o755)
    os.replace(tmp, output)
    return len(entries)


def main(argv):
    if len(argv) != 2:
        sys.stderr.write("usage: make_bundle.py COLLECTION_ROOT OUTPUT\n")
        return 2
    try:
        count = build(os.path.abspath(argv[0]), argv[1])
    except (BundleError, IOError, OSError) as exc:
        sys.stderr.write("make_bundle.py: %s\n" % exc)
        return 1
    print("%s: %d files" % (argv[1], count))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
