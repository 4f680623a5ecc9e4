"""Boot-time files of the fix modules, for the scenarios that were remediated (``healthy``).

The files are rendered by the very functions ``gpuhost.baseline.pcie_tune`` and
``gpuhost.baseline.cpu_power`` use (``fix.pcie.render_script`` ...), so a fixture cannot
drift from what the modules write: change the module's format and the fixture follows.
"""

from ansible_collections.gpuhost.baseline.plugins.module_utils.fix import cpu as fix_cpu
from ansible_collections.gpuhost.baseline.plugins.module_utils.fix import pcie as fix_pcie


def pcie_files(tree, max_read_request):
    """What ``pcie_tune`` (``persist: true``) leaves after setting ``{address: MaxReadReq bytes}``:
    script, unit, the ``multi-user.target.wants`` link (absolute, as systemctl and the module
    write it) and the udev rule."""
    fix = fix_pcie
    wanted = dict(((address, fix.DEVCTL_REG), (fix.SIZES.index(size) << 12, fix.READRQ_MASK))
                  for address, size in max_read_request.items())
    entries = fix.merge_entries({}, wanted)
    tree.file(fix.SCRIPT_PATH, fix.render_script(entries), executable=True)
    tree.file(fix.UNIT_PATH, fix.render_unit())
    tree.link(fix.UNIT_LINK, fix.UNIT_PATH)
    tree.file(fix.UDEV_PATH, fix.render_udev(entries))


def cpu_power_files(tree, **settings):
    """What ``cpu_power`` (``persist: systemd``) leaves for ``settings``: script, unit, link, udev rule."""
    fix = fix_cpu
    tree.file(fix.SCRIPT_PATH, fix.render_script(fix.settings_of(**settings)), executable=True)
    tree.file(fix.UNIT_PATH, fix.render_unit())
    tree.link(fix.WANTS_LINK, fix.UNIT_PATH)
    tree.file(fix.UDEV_PATH, fix.render_udev())
