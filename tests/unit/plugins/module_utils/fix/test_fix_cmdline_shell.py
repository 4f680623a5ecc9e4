"""kernel_cmdline on GRUB defaults whose effective command line depends on the shell (issue 18, item 15).

``/etc/default/grub`` and ``/etc/default/grub.d/*.cfg`` are shell fragments that grub-mkconfig
sources. An edit of "the assignment" of ``GRUB_CMDLINE_LINUX_DEFAULT`` only takes effect when that
assignment is the one the shell ends with; with ``+=``, an assignment inside ``if`` or after
``&&``, or a sourced file, the module must refuse (naming the file and the line), write nothing and
run nothing, in check mode as well. Files it accepts are checked against a real shell: the value
the module computes (before and after its edit) is the value ``bash`` and ``dash`` end with.
"""
import os
import shutil
import subprocess

import pytest

from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.base import FixError, Host
from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.cmdline import apply, edit_grub_files
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.kernel import parse_cmdline
from helpers.fixhost import FakeModule, read, tree_state
from helpers.tree import write_tree

SHELLS = [name for name in ("bash", "dash") if shutil.which(name)]

HEAD = """\
# If you change this file, run 'update-grub' afterwards to update
# /boot/grub/grub.cfg.

GRUB_DEFAULT=0
GRUB_TIMEOUT=5
GRUB_DISTRIBUTOR=`lsb_release -i -s 2> /dev/null || echo Debian`
"""
HEAD_LINES = HEAD.count("\n")


def effective(files, shell="bash"):
    """The command line a shell ends with after sourcing ``files`` ([path on disk]) in order,
    as grub-mkconfig does (fixture files only: they run ``true``/``false``/``[`` at most)."""
    script = ('for f in "$@"; do . "$f"; done; '
              'printf "%s\\n%s" "${GRUB_CMDLINE_LINUX-}" "${GRUB_CMDLINE_LINUX_DEFAULT-}"')
    out = subprocess.run([shell, "-c", script, "sh"] + list(files), check=True, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env={"PATH": os.environ["PATH"]}, timeout=10,
                         universal_newlines=True).stdout
    linux, _sep, default = out.partition("\n")
    return " ".join(part for part in (linux.strip(), default.strip()) if part)


def grub_tree(tmp_path, grub, extra=None):
    """A small Debian host tree that boots through GRUB, with these defaults files."""
    files = {
        "/etc/default/grub": grub,
        "/etc/os-release": 'ID=debian\nVERSION_ID="12"\n',
        "/etc/debian_version": "12.8\n",
        "/proc/cmdline": "BOOT_IMAGE=/boot/vmlinuz-6.1.0-28-amd64 root=/dev/sda1 ro quiet\n",
    }
    for name, text in (extra or {}).items():
        files["/etc/default/grub.d/" + name] = text
    return write_tree(tmp_path / "host", files)


def _host(root, check=False):
    return Host(FakeModule(check_mode=check), root, True)


def sources(root):
    files = [os.path.join(root, "etc/default/grub")]
    grub_d = os.path.join(root, "etc/default/grub.d")
    if os.path.isdir(grub_d):
        files += [os.path.join(grub_d, name) for name in sorted(os.listdir(grub_d))
                  if name.endswith(".cfg") and not name.startswith(".")]
    return files


# -- refused: the effective value depends on the shell -------------------------------------------------

REFUSED = [
    # the three forms of the issue
    ("plus-equals",
     'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX_DEFAULT+=" iommu=off"\n', None,
     "/etc/default/grub", 2, "appends to GRUB_CMDLINE_LINUX_DEFAULT with +="),
    ("inside-if",
     'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\nif [ -n "$GRUB_TIMEOUT" ]; then\n'
     '  GRUB_CMDLINE_LINUX_DEFAULT="quiet iommu=off"\nfi\n', None,
     "/etc/default/grub", 3, "assigns GRUB_CMDLINE_LINUX_DEFAULT inside an if block"),
    ("after-and",
     'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n[ -n "$GRUB_TIMEOUT" ] && GRUB_CMDLINE_LINUX_DEFAULT="quiet iommu=off"\n',
     None, "/etc/default/grub", 2, "assigns GRUB_CMDLINE_LINUX_DEFAULT after &&"),
    # a later assignment built from another variable
    ("later-from-other-variable",
     'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\nEXTRA="iommu=off"\nGRUB_CMDLINE_LINUX_DEFAULT="quiet $EXTRA"\n', None,
     "/etc/default/grub", 3, "assigns GRUB_CMDLINE_LINUX_DEFAULT from $EXTRA"),
    # a sourced file may assign anything
    ("dot-source",
     'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n. /dev/null\n', None,
     "/etc/default/grub", 2, "sources another file (.)"),
    ("source-builtin",
     'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n[ -e /etc/default/grub-gpu ] && source /etc/default/grub-gpu\n', None,
     "/etc/default/grub", 2, "sources another file (source)"),
    # a grub.d file is judged the same way and named
    ("grub-d-plus-equals",
     'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n',
     {"50-gpu.cfg": '# gpu settings\nGRUB_CMDLINE_LINUX_DEFAULT+=" iommu=off"\n'},
     "/etc/default/grub.d/50-gpu.cfg", 2, "appends to GRUB_CMDLINE_LINUX_DEFAULT with +="),
    # more of the same family
    ("after-or", 'false || GRUB_CMDLINE_LINUX="iommu=off"\n', None,
     "/etc/default/grub", 1, "assigns GRUB_CMDLINE_LINUX after ||"),
    ("after-semicolon", 'GRUB_TIMEOUT=1; GRUB_CMDLINE_LINUX="iommu=off"\n', None,
     "/etc/default/grub", 1, "assigns GRUB_CMDLINE_LINUX after ;"),
    ("and-continued", 'true &&\n  GRUB_CMDLINE_LINUX="iommu=off"\n', None,
     "/etc/default/grub", 2, "assigns GRUB_CMDLINE_LINUX after &&"),
    ("one-line-if", 'if true; then GRUB_CMDLINE_LINUX="iommu=off"; fi\n', None,
     "/etc/default/grub", 1, "assigns GRUB_CMDLINE_LINUX inside an if block"),
    ("case", 'case "$GRUB_TIMEOUT" in\n  5) GRUB_CMDLINE_LINUX="iommu=off" ;;\nesac\n', None,
     "/etc/default/grub", 2, "assigns GRUB_CMDLINE_LINUX inside a case block"),
    ("for-loop", 'for p in iommu=off; do\n  GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX $p"\ndone\n', None,
     "/etc/default/grub", 2, "assigns GRUB_CMDLINE_LINUX inside a for loop"),
    ("function", 'gpu() {\n  GRUB_CMDLINE_LINUX="iommu=off"\n}\ngpu\n', None,
     "/etc/default/grub", 2, "assigns GRUB_CMDLINE_LINUX inside a function"),
    ("subshell", '( GRUB_CMDLINE_LINUX="iommu=off" )\n', None,
     "/etc/default/grub", 1, "assigns GRUB_CMDLINE_LINUX inside a ( ) subshell"),
    ("pipeline", 'GRUB_CMDLINE_LINUX="iommu=off" | true\n', None,
     "/etc/default/grub", 1, "assigns GRUB_CMDLINE_LINUX followed by |"),
    ("command-prefix", 'GRUB_CMDLINE_LINUX="iommu=off" true\n', None,
     "/etc/default/grub", 1, "sets GRUB_CMDLINE_LINUX only for the command true"),
    ("eval", 'GRUB_CMDLINE_LINUX=""\neval "GRUB_CMDLINE_LINUX=iommu=off"\n', None,
     "/etc/default/grub", 2, "runs eval"),
    ("return", 'GRUB_CMDLINE_LINUX=""\nreturn 0\nGRUB_CMDLINE_LINUX="iommu=off"\n', None,
     "/etc/default/grub", 2, "runs return"),
    ("unset", 'GRUB_CMDLINE_LINUX="iommu=off"\nunset GRUB_CMDLINE_LINUX\n', None,
     "/etc/default/grub", 2, "uses GRUB_CMDLINE_LINUX outside a plain assignment (unset)"),
    ("default-expansion", ': "${GRUB_CMDLINE_LINUX:=iommu=off}"\n', None,
     "/etc/default/grub", 1, "uses GRUB_CMDLINE_LINUX outside a plain assignment (:)"),
    ("command-substitution", 'GRUB_CMDLINE_LINUX="$(echo iommu=off)"\n', None,
     "/etc/default/grub", 1, "assigns GRUB_CMDLINE_LINUX from a command substitution"),
    ("positional", 'GRUB_CMDLINE_LINUX="quiet $1"\n', None,
     "/etc/default/grub", 1, "assigns GRUB_CMDLINE_LINUX from $1"),
    ("here-document", 'cat >/dev/null <<EOF\nGRUB_CMDLINE_LINUX="iommu=off"\nEOF\n', None,
     "/etc/default/grub", 1, "starts a here-document"),
    ("unclosed-if", 'if true; then\nGRUB_TIMEOUT=1\n', None,
     "/etc/default/grub", 1, "opens an if block that is never closed"),
    ("unterminated-quote", 'GRUB_TIMEOUT="5\nGRUB_CMDLINE_LINUX="iommu=off"\n', None,
     "/etc/default/grub", 1, "unterminated"),
]


@pytest.mark.parametrize("name, grub, extra, path, line, reason", REFUSED, ids=[case[0] for case in REFUSED])
def test_refused_with_the_line_and_nothing_written(tmp_path, name, grub, extra, path, line, reason):
    root = grub_tree(tmp_path, HEAD + grub, extra)
    line += 0 if path.startswith("/etc/default/grub.d/") else HEAD_LINES
    before = tree_state(root)
    for check in (True, False):
        host = _host(root, check=check)
        with pytest.raises(FixError) as info:
            apply(host, {"iommu": "pt"}, ["rhgb"])
        msg = info.value.msg
        assert msg.startswith("cannot edit %s safely: line %d " % (path, line)), msg
        assert reason in msg, msg
        assert msg.endswith("edit it by hand"), msg
        assert "changed" not in info.value.result or info.value.result["changed"] is False
        assert host.commands == [] and host.backups == {} and host.module.ran == []
        assert tree_state(root) == before  # byte for byte, no backup, no temporary file


@pytest.mark.skipif(not SHELLS, reason="no POSIX shell to compare with")
@pytest.mark.parametrize("case", [case for case in REFUSED if case[0] in (
    "plus-equals", "inside-if", "after-and", "later-from-other-variable")], ids=lambda case: case[0])
def test_refused_forms_really_change_the_effective_value(tmp_path, case):
    # what the shell ends with is not the first (or last) plain assignment's value: editing that
    # assignment would not take effect, which is why the file is refused
    name, grub, extra, _path, _line, _reason = case
    root = grub_tree(tmp_path, HEAD + grub, extra)
    assert "iommu=off" in effective(sources(root), "bash")


def test_refusal_names_the_first_problem_and_counts_the_rest():
    text = 'GRUB_CMDLINE_LINUX_DEFAULT+=" a"\nif true; then GRUB_CMDLINE_LINUX="b"; fi\n'
    with pytest.raises(FixError) as info:
        edit_grub_files([("/etc/default/grub", text)], [("iommu", "pt")], [])
    assert info.value.msg.startswith("cannot edit /etc/default/grub safely: line 1 appends")
    assert "; also line 2)" in info.value.msg


# -- accepted: the edit is the one that takes effect ---------------------------------------------------

ACCEPTED = [
    ("debian", 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX=""\n', None),
    ("later-plain-assignment-wins",
     'GRUB_CMDLINE_LINUX_DEFAULT="quiet splash"\nGRUB_TIMEOUT=3\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\n', None),
    ("export-and-comments",
     '# GRUB_CMDLINE_LINUX_DEFAULT+=" commented out"\nexport GRUB_CMDLINE_LINUX_DEFAULT=\'quiet\'  # kept\n', None),
    ("unrelated-if-block-and-reads",
     'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\nif [ -n "$GRUB_CMDLINE_LINUX_DEFAULT" ]; then\n  GRUB_TIMEOUT=2\nfi\n'
     'OLD_CMDLINE=${GRUB_CMDLINE_LINUX}\n', None),
    ("grub-d-assigns-last",
     'GRUB_CMDLINE_LINUX_DEFAULT="quiet splash"\n',
     {"50-cloudimg-settings.cfg": 'GRUB_CMDLINE_LINUX_DEFAULT="console=tty1 console=ttyS0"\n'}),
    ("grub-d-self-reference-of-the-other-variable",
     'GRUB_CMDLINE_LINUX="root=/dev/sda1"\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\n',
     {"40-serial.cfg": 'GRUB_CMDLINE_LINUX_DEFAULT="console=ttyS0 $GRUB_CMDLINE_LINUX"\n',
      "90-late.cfg": 'GRUB_CMDLINE_LINUX_DEFAULT="quiet rhgb"\n'}),
    ("hidden-grub-d-file-is-not-sourced",
     'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n',
     {".99-disabled.cfg": 'GRUB_CMDLINE_LINUX_DEFAULT+=" iommu=off"\n'}),
]


@pytest.mark.skipif(not SHELLS, reason="no POSIX shell to compare with")
@pytest.mark.parametrize("name, grub, extra", ACCEPTED, ids=[case[0] for case in ACCEPTED])
def test_accepted_edit_takes_effect_in_the_shell_four_runs(tmp_path, name, grub, extra):
    root = grub_tree(tmp_path, HEAD + grub, extra)
    before = tree_state(root)
    for shell in SHELLS:
        start = effective(sources(root), shell)
        assert start == effective(sources(root), "bash")

    host = _host(root, check=True)
    result = apply(host, {"iommu": "pt"}, ["rhgb"])
    assert result["changed"] and tree_state(root) == before
    planned = result["configured_after"]
    assert result["configured_before"] == parse_cmdline(start)

    host = _host(root)
    result = apply(host, {"iommu": "pt"}, ["rhgb"])
    assert result["changed"] and result["configured_after"] == planned
    for shell in SHELLS:
        after = effective(sources(root), shell)
        assert parse_cmdline(after) == planned
        assert "iommu=pt" in after.split() and "rhgb" not in after.split()

    state = tree_state(root)
    for check in (True, False):
        host = _host(root, check=check)
        result = apply(host, {"iommu": "pt"}, ["rhgb"])
        assert not result["changed"] and host.commands == []
    assert tree_state(root) == state


def test_hidden_grub_d_file_is_left_alone(tmp_path):
    root = grub_tree(tmp_path, HEAD + 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n',
                     {".99-disabled.cfg": 'GRUB_CMDLINE_LINUX_DEFAULT+=" iommu=off"\n'})
    result = apply(_host(root), {"iommu": "pt"}, None)
    assert result["config_files"] == ["/etc/default/grub"]
    assert read(root, "/etc/default/grub.d/.99-disabled.cfg") == 'GRUB_CMDLINE_LINUX_DEFAULT+=" iommu=off"\n'


def test_self_reference_in_the_last_assignment_is_refused_with_its_line():
    files = [("/etc/default/grub", 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n'),
             ("/etc/default/grub.d/90-gpu.cfg",
              '\nGRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT iommu=off"\n')]
    with pytest.raises(FixError) as info:
        edit_grub_files(files, [("iommu", "pt")], [])
    assert info.value.msg.startswith("cannot edit /etc/default/grub.d/90-gpu.cfg safely: line 2")
    assert "shell expansion" in info.value.msg
