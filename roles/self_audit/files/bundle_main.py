# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""__main__ of /usr/local/sbin/gpuhost-self-audit, the zip application the self_audit role installs.

The zip holds the parts of the gpuhost.baseline collection a host needs to audit itself (facts
readers, evaluator, rules, profiles, schemas). The catalogue is read from files, so the zip is
unpacked once per content into ``<cache>/bundle-<sha256 prefix>`` (``GPUHOST_SELF_AUDIT_CACHE``,
default /var/cache/gpuhost-baseline: the unit's CacheDirectory), into a temporary directory that
is renamed into place, so a run never sees half a tree; unpacked copies of other contents are
removed. Then plugins/plugin_utils/judge/self_audit.py runs. Standard library only, Python 3.8+ (older
interpreters get one line saying so).
"""
import hashlib
import os
import shutil
import sys
import tempfile
import zipfile

PROG = "gpuhost-self-audit"
DEFAULT_CACHE = "/var/cache/gpuhost-baseline"
#: the oldest Python the bundle's code runs on (the role's preflight checks the same)
MIN_PYTHON = (3, 8)


def fail(message, status=1):
    sys.stderr.write("%s: %s\n" % (PROG, message))
    sys.exit(status)


def digest(path):
    sha = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()[:16]


def unpack(bundle, cache):
    """The directory holding the unpacked ``bundle`` (made when missing)."""
    target = os.path.join(cache, "bundle-%s" % digest(bundle))
    if os.path.isdir(target):
        return target
    os.makedirs(cache, mode=0o755, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".bundle-", dir=cache)
    try:
        with zipfile.ZipFile(bundle) as archive:
            for info in archive.infolist():
                name = info.filename
                parts = name.split("/")
                if name.startswith("/") or ".." in parts or "\\" in name:
                    raise ValueError("unsafe member name %r" % name)
                if name == "__main__.py" or name.endswith("/"):
                    continue
                archive.extract(info, tmp)
        os.chmod(tmp, 0o755)
        try:
            os.rename(tmp, target)
        except OSError:
            if not os.path.isdir(target):  # not a concurrent run that won the race
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for name in os.listdir(cache):  # earlier contents, and leftovers of interrupted unpacks
        path = os.path.join(cache, name)
        if path != target and (name.startswith("bundle-") or name.startswith(".bundle-")):
            shutil.rmtree(path, ignore_errors=True)
    return target


def main():
    if sys.version_info < MIN_PYTHON:
        fail("Python %d.%d+ is needed, %s is %d.%d (gpuhost_self_audit_python names another interpreter)"
             % (MIN_PYTHON + (sys.executable,) + tuple(sys.version_info[:2])), status=2)
    bundle = os.path.dirname(os.path.abspath(__file__))
    cache = os.environ.get("GPUHOST_SELF_AUDIT_CACHE") or DEFAULT_CACHE
    try:
        tree = unpack(bundle, cache)
    except (IOError, OSError, ValueError, zipfile.BadZipfile) as exc:
        fail("cannot unpack %s into %s: %s" % (bundle, cache, exc))
    # the unpacked tree, never the zip itself, provides the collection's packages
    sys.path[:] = [tree] + [p for p in sys.path if os.path.abspath(p or ".") != bundle]
    try:
        from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge import self_audit
    except ImportError as exc:
        fail("cannot load the self-audit code from %s: %s (build the bundle again with the self_audit role)"
             % (tree, exc))
    sys.exit(self_audit.main())


if __name__ == "__main__":
    main()
