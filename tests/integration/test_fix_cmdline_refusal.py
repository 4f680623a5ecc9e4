"""kernel_cmdline through ansible-playbook on GRUB defaults whose command line depends on the shell.

The module fails with the file and the line named, reports nothing changed, writes nothing and
runs nothing, in check mode as in a real run (issue 18, item 15; the forms themselves are in
tests/unit/plugins/module_utils/fix/test_fix_cmdline_shell.py).
"""
from helpers.fixhost import tree_state
from helpers.tree import write_tree
from test_fix_modules import run_play

FORMS = {
    "plus-equals": ('GRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX_DEFAULT+=" iommu=off"\n',
                    "line 2 appends to GRUB_CMDLINE_LINUX_DEFAULT with +="),
    "inside-if": ('GRUB_CMDLINE_LINUX_DEFAULT="quiet"\nif [ -e /etc/gpu ]; then\n'
                  '  GRUB_CMDLINE_LINUX_DEFAULT="quiet iommu=off"\nfi\n',
                  "line 3 assigns GRUB_CMDLINE_LINUX_DEFAULT inside an if block"),
    "after-and": ('GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n[ -e /etc/gpu ] && GRUB_CMDLINE_LINUX_DEFAULT="iommu=off"\n',
                  "line 2 assigns GRUB_CMDLINE_LINUX_DEFAULT after &&"),
}


def test_refused_in_check_mode_and_for_real(tmp_path):
    roots = {}
    for name, (grub, _reason) in FORMS.items():
        roots[name] = write_tree(tmp_path / name, {
            "/etc/default/grub": grub,
            "/etc/os-release": "ID=debian\n",
            "/etc/debian_version": "12.8\n",
            "/proc/cmdline": "root=/dev/sda1 ro quiet\n",
        })
    states = dict((name, tree_state(root)) for name, root in roots.items())
    tasks = [("gpuhost.baseline.kernel_cmdline", {"add": {"iommu": "pt"}, "root": roots[name], "backup": True})
             for name in FORMS]
    for check in (True, False):
        _stdout, results = run_play(tmp_path, "refused-%s" % check, tasks, check=check, diff=True)
        for name, result in zip(FORMS, results):
            assert result["failed"] is True and result["changed"] is False, (name, result)
            assert result["msg"] == ("cannot edit /etc/default/grub safely: %s (the effective value depends on "
                                     "the shell): edit it by hand" % FORMS[name][1]), result["msg"]
            assert result["commands"] == [] and not result.get("backup_files"), result
    for name, root in roots.items():
        assert tree_state(root) == states[name], name
