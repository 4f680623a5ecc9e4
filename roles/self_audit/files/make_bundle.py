# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build gpuhost-self-audit, the zip application the self_audit role copies to each host.

usage: make_bundle.py COLLECTION_ROOT OUTPUT [--catalogue-dir[=]DIR]...

Runs on the controller (the role calls it with ansible-playbook's Python, which has the
controller's libraries: PyYAML, jmespath, jsonschema). The zip holds ``__main__.py``
(bundle_main.py beside this file) and, under ``ansible_collections/gpuhost/baseline/``, what a
host needs to audit itself with Python 3.8+ and its standard library alone:

- the host reader and command runner (plugins/module_utils/host), the facts readers
  (plugins/module_utils/facts) and the judge and report code (plugins/plugin_utils);
- ``catalogue.json``: the rule catalogue compiled here (``catalogue_load.compile_catalogue``): the bundled
  rules and profiles with the site's catalogue directories (``--catalogue-dir``, the role passes
  ``gpuhost_catalogue_dirs``) layered over them and their waiver files read, all checked against
  the schemas now, so the host needs neither PyYAML nor jsonschema; a malformed site file fails
  the build with the catalogue's message;
- ``MANIFEST.json`` with the collection version;
- ``schemas/profile.schema.json``: read as data for the parameters' bounds (the host checks the
  config's ``params`` with them; it runs no schema validator);
- ``jmespath/``: the controller's jmespath package (pure Python, MIT licence, its licence file
  included), which the rules' queries run on.

The same collection gives the same bytes: members sorted, fixed timestamps and modes, stored
uncompressed, so the role's copy task is unchanged on a second run and changes exactly when the
collection, the site catalogue or the jmespath version does.
"""
import io
import json
import os
import stat
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = "ansible_collections/gpuhost/baseline/"
#: (directory under the collection root, file name suffixes taken from it); not recursive
TREES = (
    ("plugins/module_utils", (".py",)),
    ("plugins/module_utils/host", (".py",)),
    ("plugins/module_utils/facts", (".py",)),
    ("plugins/plugin_utils", (".py",)),
    # the packages the judge needs on a host; not snapshot/ or inputs/ (controller only), nor actionbase/
    ("plugins/plugin_utils/base", (".py",)),
    ("plugins/plugin_utils/derive", (".py",)),
    ("plugins/plugin_utils/catalogue", (".py",)),
    ("plugins/plugin_utils/report", (".py",)),
    ("plugins/plugin_utils/judge", (".py",)),
    # plain JSON read without a schema library: the parameter bounds (catalogue_params.param_constraints)
    ("schemas", ("profile.schema.json",)),
)
SHEBANG = b"#!/usr/bin/python3\n"
STAMP = (1980, 1, 1, 0, 0, 0)
NAMESPACE = ("ansible_collections", "gpuhost", "baseline")


class BundleError(Exception):
    pass


def members(root):
    """``[(name in the zip, path on disk)]`` of the files taken as they are, sorted."""
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
    if not os.path.isdir(os.path.join(root, "rules")):
        raise BundleError("%s has no rules/: is it the gpuhost.baseline collection?" % root)
    return sorted(out)


def collection_modules(root, scratch):
    """The collection's ``catalogue_load`` and ``catalogue_model`` modules, imported from ``root`` itself
    (through a link in ``scratch`` named ansible_collections/gpuhost/baseline when ``root`` is not laid out so)."""
    parts = os.path.abspath(root).split(os.sep)
    if tuple(parts[-3:]) == NAMESPACE:
        top = os.sep.join(parts[:-3]) or os.sep
    else:
        top = scratch
        os.makedirs(os.path.join(scratch, *NAMESPACE[:-1]))
        os.symlink(os.path.abspath(root), os.path.join(scratch, *NAMESPACE))
    sys.path.insert(0, top)
    try:
        from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue import (  # pylint: disable=import-outside-toplevel
            catalogue_load, catalogue_model)
    finally:
        sys.path.remove(top)
    loaded = os.path.realpath(os.path.dirname(catalogue_load.__file__))
    if loaded != os.path.realpath(os.path.join(root, "plugins", "plugin_utils", "catalogue")):
        raise BundleError("imported the catalogue code from %s, not from %s" % (loaded, root))
    return catalogue_load, catalogue_model


def jmespath_files():
    """``[(name in the zip, bytes)]`` of the controller's jmespath package and its licence."""
    try:
        import jmespath  # pylint: disable=import-outside-toplevel
    except ImportError:
        raise BundleError("the Python library jmespath is not installed for %s (a controller requirement)" % sys.executable)
    directory = os.path.dirname(os.path.abspath(jmespath.__file__))
    out = []
    for name in sorted(os.listdir(directory)):
        if name.endswith(".py"):
            with open(os.path.join(directory, name), "rb") as handle:
                out.append(("jmespath/" + name, handle.read()))
    licence = None
    try:
        from importlib import metadata  # pylint: disable=import-outside-toplevel

        for item in metadata.distribution("jmespath").files or []:
            if os.path.basename(str(item)).upper().startswith(("LICENSE", "LICENCE", "COPYING")):
                licence = item.read_text()
                break
    except Exception:  # pylint: disable=broad-except  # no metadata: the build says so below
        licence = None
    if not licence:
        raise BundleError("cannot find the licence file of the installed jmespath (%s)" % directory)
    out.append(("jmespath/LICENSE.txt", licence.encode("utf-8")))
    return out


def generated(root, site_dirs):
    """``[(name in the zip, bytes)]`` made here: the compiled catalogue and MANIFEST.json."""
    scratch = tempfile.mkdtemp(prefix="gpuhost-bundle.")
    try:
        loader, model = collection_modules(root, scratch)
        try:
            compiled = loader.compile_catalogue(site_dirs=site_dirs, base_dir=root)
        except model.CatalogueError as exc:
            raise BundleError("the rule catalogue does not load: %s" % exc)
        version = loader.collection_version(root)
    finally:
        for dirpath, dirnames, filenames in os.walk(scratch, topdown=False):
            for name in filenames + dirnames:
                path = os.path.join(dirpath, name)
                if os.path.islink(path) or not os.path.isdir(path):
                    os.unlink(path)
                else:
                    os.rmdir(path)
        os.rmdir(scratch)
    manifest = json.dumps({"collection_info": {"namespace": "gpuhost", "name": "baseline", "version": version}},
                          sort_keys=True)
    return [(PREFIX + loader.COMPILED_NAME, compiled.encode("utf-8")),
            (PREFIX + "MANIFEST.json", manifest.encode("utf-8"))]


def build(root, output, site_dirs=()):
    """Write the zip application for the collection at ``root`` (with the site catalogue
    directories ``site_dirs``) to ``output``; return its member count."""
    contents = []
    for name, path in members(root):
        with open(path, "rb") as handle:
            contents.append((name, handle.read()))
    contents += generated(root, list(site_dirs)) + jmespath_files()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for name, data in sorted(contents):
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
    return len(contents)


def main(argv):
    site_dirs, positional = [], []
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg == "--catalogue-dir" and args:
            site_dirs.append(args.pop(0))
        elif arg.startswith("--catalogue-dir="):
            site_dirs.append(arg.split("=", 1)[1])
        elif arg.startswith("-"):
            positional = None
            break
        else:
            positional.append(arg)
    if positional is None or len(positional) != 2:
        sys.stderr.write("usage: make_bundle.py COLLECTION_ROOT OUTPUT [--catalogue-dir DIR]...\n")
        return 2
    try:
        count = build(os.path.abspath(positional[0]), positional[1], site_dirs)
    except (BundleError, IOError, OSError) as exc:
        sys.stderr.write("make_bundle.py: %s\n" % exc)
        return 1
    print("%s: %d files" % (positional[1], count))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
