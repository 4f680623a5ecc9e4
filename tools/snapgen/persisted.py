"""Boot-time files of the fix modules, for the scenarios that were remediated (``healthy``).

The files are rendered by the very functions ``gpuhost.baseline.pcie_tune`` and
``gpuhost.baseline.cpu_power`` use (``fix.pcie.render_script`` ...), so a fixture cannot
drift from what the modules write: change the module's format and the fixture follows.
That needs the checkout importable as ``ansible_collections.gpuhost.baseline``; when the
build link (``make link``, ``tests/conftest.py``) is absent, a private link in a temporary
directory stands in for it.
"""

import atexit
import importlib
import os
import shutil
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_PACKAGE = "ansible_collections.gpuhost.baseline.plugins.module_utils"


def _collection_path():
    link = os.path.join(REPO, "build", "collections")
    if os.path.isdir(os.path.join(link, "ansible_collections", "gpuhost", "baseline", "plugins")):
        return link
    scratch = tempfile.mkdtemp(prefix="snapgen-collections-")
    atexit.register(shutil.rmtree, scratch, True)
    os.makedirs(os.path.join(scratch, "ansible_collections", "gpuhost"))
    os.symlink(REPO, os.path.join(scratch, "ansible_collections", "gpuhost", "baseline"))
    return scratch


def module_utils(name):
    """``plugins/module_utils/<name>.py`` of this checkout, imported as the collection's."""
    try:
        return importlib.import_module("%s.%s" % (_PACKAGE, name))
    except ImportError:
        path = _collection_path()
        if path not in sys.path:
            sys.path.insert(0, path)
        importlib.invalidate_caches()
        return importlib.import_module("%s.%s" % (_PACKAGE, name))


def pcie_files(tree, max_read_request):
    """What ``pcie_tune`` (``persist: true``) leaves after setting ``{address: MaxReadReq bytes}``:
    script, unit, the ``multi-user.target.wants`` link (absolute, as systemctl and the module
    write it) and the udev rule."""
    fix = module_utils("fix.pcie")
    wanted = dict(((address, fix.DEVCTL_REG), (fix.SIZES.index(size) << 12, fix.READRQ_MASK))
                  for address, size in max_read_request.items())
    entries = fix.merge_entries({}, wanted)
    tree.file(fix.SCRIPT_PATH, fix.render_script(entries), executable=True)
    tree.file(fix.UNIT_PATH, fix.render_unit())
    tree.link(fix.UNIT_LINK, fix.UNIT_PATH)
    tree.file(fix.UDEV_PATH, fix.render_udev(entries))


def cpu_power_files(tree, **settings):
    """What ``cpu_power`` (``persist: systemd``) leaves for ``settings``: script, unit, link, udev rule."""
    fix = module_utils("fix.cpu")
    tree.file(fix.SCRIPT_PATH, fix.render_script(fix.settings_of(**settings)), executable=True)
    tree.file(fix.UNIT_PATH, fix.render_unit())
    tree.link(fix.WANTS_LINK, fix.UNIT_PATH)
    tree.file(fix.UDEV_PATH, fix.render_udev())
