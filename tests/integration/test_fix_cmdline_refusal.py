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
    # issue 40: a line continuation where the static check cannot prove how sh reads it
    "continued-substitution": ('GRUB_DISTRIBUTOR=$(echo \\\nDebian)\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\n',
                               "line 1 has a line continuation (\\ at the end of the line) inside $(...), which "
                               "cannot be evaluated without the shell"),
}
#: issue 40: sh reads lines 2 and 3 as one assignment, the one in effect
HIDDEN = 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX_DEF\\\nAULT="quiet amd_pstate=passive"\n'


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


def test_the_assignment_hidden_by_a_line_continuation_is_the_one_edited(tmp_path):
    # before issue 40 the fix edited line 1 and reported success while sh still took amd_pstate=passive
    root = write_tree(tmp_path / "hidden", {
        "/etc/default/grub": HIDDEN,
        "/etc/os-release": "ID=debian\n",
        "/etc/debian_version": "12.8\n",
        "/proc/cmdline": "root=/dev/sda1 ro quiet amd_pstate=passive\n",
    })
    tasks = [("gpuhost.baseline.kernel_cmdline", {"add": {"amd_pstate": "active"}, "root": root,
                                                  "bootloader": "grub"})]
    _stdout, (result,) = run_play(tmp_path, "hidden", tasks)
    assert result["changed"] is True and not result.get("failed"), result
    with open(str(tmp_path / "hidden" / "etc" / "default" / "grub")) as handle:
        assert handle.read() == HIDDEN.replace("amd_pstate=passive", "amd_pstate=active")
