"""kernel_cmdline fix logic: requests, command-line edits, GRUB quoting, BLS, boot loader handling on snapshot copies."""
import os

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.cmdline import (
    apply, bls_needs_change, cmdline_tokens, edit_cmdline, edit_grub_files, grub_update_argv, parse_bls_entry,
    parse_grubenv, parse_request, reboot_required, render_param)
from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.base import FixError, Host, fail_with_rollback
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.kernel import (
    cmdline_value, parse_cmdline, parse_grub_default)
from helpers.fixhost import FakeModule, changed_paths, copy_tree, read, tree_state


# -- requests -------------------------------------------------------------------------------------

def test_request_forms():
    assert parse_request({"amd_pstate": "active", "quiet": True, "nosmt": None, "max_cstate": 1}, None) == (
        [("amd_pstate", "active"), ("quiet", True), ("nosmt", True), ("max_cstate", "1")], [])
    assert parse_request(["amd_pstate=active", "iommu=pt", "quiet", 'dyndbg="file x +p"'], ["splash"]) == (
        [("amd_pstate", "active"), ("iommu", "pt"), ("quiet", True), ("dyndbg", "file x +p")], ["splash"])
    assert parse_request("iommu=pt", []) == ([("iommu", "pt")], [])


@pytest.mark.parametrize("add, remove, words", [
    ({"quiet": False}, None, "remove"),
    (["a=1 b=2"], None, "one key=value"),
    (["--"], None, "one key=value"),
    ({"a": "1", "a ": "2"}, None, "twice"),
    (["amd-pstate=active", "amd_pstate=passive"], None, "twice"),
    ({"iommu": "pt"}, ["iommu"], "both"),
    ({"bad key": "1"}, None, "invalid"),
    ({"k": 'with"quote'}, None, "double quote"),
    (None, ["iommu=pt"], "names only"),
    (42, None, "dict or a list"),
    ([42], None, "not a key=value"),
])
def test_bad_requests(add, remove, words):
    with pytest.raises(FixError) as info:
        parse_request(add, remove)
    assert words in info.value.msg


def test_render_param_quotes_spaces_only():
    assert render_param("quiet", True) == "quiet"
    assert render_param("iommu", "pt") == "iommu=pt"
    assert render_param("dyndbg", "file x +p") == 'dyndbg="file x +p"'


# -- command-line text ----------------------------------------------------------------------------

def test_tokens_follow_kernel_quoting_and_init_args():
    text = 'a=1  b="x y" "c=d e" -- init=1 z'
    tokens = cmdline_tokens(text)
    assert [(key, value, init) for _s, _e, key, value, init in tokens] == [
        ("a", "1", False), ("b", "x y", False), ("c", "d e", False), (None, None, True), (None, None, True),
        (None, None, True)]
    assert [text[s:e] for s, e, _k, _v, _i in tokens][1] == 'b="x y"'


@pytest.mark.parametrize("text, adds, removes, expected", [
    ("root=ZFS=rpool/ROOT/pve-1 boot=zfs quiet\n", [("amd_pstate", "active"), ("iommu", "pt")], [],
     "root=ZFS=rpool/ROOT/pve-1 boot=zfs quiet amd_pstate=active iommu=pt\n"),
    ("quiet amd-pstate=passive  foo amd_pstate=x", [("amd_pstate", "active")], ["foo"], "quiet amd_pstate=active"),
    ("quiet amd-pstate=active", [("amd_pstate", "active")], [], "quiet amd-pstate=active"),
    ("  foo quiet", [], ["foo"], "  quiet"),
    ("foo", [], ["foo"], ""),
    ("", [("a", "b c")], [], 'a="b c"'),
    ("ro quiet -- single", [("iommu", "pt")], [], "ro quiet iommu=pt -- single"),
    ("ro -- iommu=soft", [], ["iommu"], "ro -- iommu=soft"),
    ("console=tty0 console=ttyS0,115200", [("console", "ttyS0,115200")], [], "console=ttyS0,115200"),
    ("quiet splash", [("quiet", True)], ["splash"], "quiet"),
    ("iommu=pt", [("iommu", True)], [], "iommu"),
])
def test_edit_cmdline(text, adds, removes, expected):
    assert edit_cmdline(text, adds, removes) == expected
    assert edit_cmdline(expected, adds, removes) == expected


_WORD = st.sampled_from(["quiet", "ro", "root=/dev/sda1", "amd_pstate=passive", "amd-pstate=guided", "iommu=pt",
                         "iommu=soft", 'dyndbg="a b"', "splash", "nosmt", "console=tty0", "a=b=c", "=x", "--",
                         "init=/bin/sh"])
_SEP = st.sampled_from([" ", "  ", "\t", " \n"])


@settings(max_examples=200, deadline=None)
@given(words=st.lists(st.tuples(_SEP, _WORD), max_size=10), tail=st.sampled_from(["", "\n", "  \n"]),
       adds=st.lists(st.sampled_from([("amd_pstate", "active"), ("iommu", "pt"), ("quiet", True),
                                      ("dyndbg", "x y")]), unique_by=lambda kv: kv[0], max_size=3),
       removes=st.lists(st.sampled_from(["splash", "nosmt", "console"]), unique=True, max_size=2))
def test_edits_set_what_was_asked_keep_the_rest_and_are_idempotent(words, tail, adds, removes):
    text = "".join(sep + word for sep, word in words).lstrip() + tail
    new = edit_cmdline(text, adds, removes)
    assert edit_cmdline(new, adds, removes) == new
    before, after = parse_cmdline(text), parse_cmdline(new)
    for key, value in adds:
        assert cmdline_value(after, key) == value
    for key in removes:
        assert cmdline_value(after, key) is None
    managed = set(k.replace("-", "_") for k, _v in adds) | set(removes)
    assert dict((k, v) for k, v in before.items() if k.replace("-", "_") not in managed) == \
        dict((k, v) for k, v in after.items() if k.replace("-", "_") not in managed)
    assert new.endswith(tail)
    if not adds and not any(cmdline_value(before, key) is not None for key in removes) and \
            all(len([w for w in text.split() if w.split("=")[0].replace("-", "_") == k]) <= 1 for k in managed):
        assert new == text


def test_reboot_required_compares_only_managed_keys():
    running = parse_cmdline("initrd=x root=/dev/sda quiet")
    assert reboot_required(running, parse_cmdline("root=/dev/sda quiet amd_pstate=active"), ["amd_pstate"])
    assert not reboot_required(running, parse_cmdline("root=/dev/sdb quiet"), ["quiet"])
    assert reboot_required(running, parse_cmdline("root=/dev/sda"), ["quiet"])
    assert reboot_required(None, {}, ["quiet"]) is None


# -- GRUB ---------------------------------------------------------------------------------------------

def _grub_new(text, adds, removes=()):
    plan = edit_grub_files([("/etc/default/grub", text)], adds, list(removes))
    return plan["files"].get("/etc/default/grub", text), plan


def test_grub_debian_default_line_only(snapshot_trees):
    text = read(snapshot_trees["incident"], "/etc/default/grub")
    new, plan = _grub_new(text, [("amd_pstate", "active"), ("iommu", "pt")])
    assert new == text.replace('GRUB_CMDLINE_LINUX_DEFAULT="quiet"',
                               'GRUB_CMDLINE_LINUX_DEFAULT="quiet amd_pstate=active iommu=pt"')
    assert plan["before"] == "quiet" and plan["after"] == "quiet amd_pstate=active iommu=pt"
    assert parse_grub_default(new)["params"] == {"quiet": True, "amd_pstate": "active", "iommu": "pt"}


def test_grub_key_in_cmdline_linux_is_changed_there(snapshot_trees):
    text = read(snapshot_trees["intel"], "/etc/default/grub")
    new, _plan = _grub_new(text, [("intel_iommu", "off"), ("processor.max_cstate", "1")], ["rd.lvm.lv"])
    changed = [(a, b) for a, b in zip(text.splitlines(), new.splitlines()) if a != b]
    assert changed == [(
        'GRUB_CMDLINE_LINUX="crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M resume=/dev/mapper/rhel-swap '
        'rd.lvm.lv=rhel/root rd.lvm.lv=rhel/swap intel_iommu=on"',
        'GRUB_CMDLINE_LINUX="crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M resume=/dev/mapper/rhel-swap '
        'intel_iommu=off"')]
    # the distributor line with $(sed ...) is left alone, the new key goes to a new DEFAULT line
    assert new.endswith('GRUB_ENABLE_BLSCFG=true\nGRUB_CMDLINE_LINUX_DEFAULT="processor.max_cstate=1"\n')


@pytest.mark.parametrize("line, expected", [
    ("GRUB_CMDLINE_LINUX_DEFAULT='quiet splash'", "GRUB_CMDLINE_LINUX_DEFAULT='quiet splash iommu=pt'"),
    ("GRUB_CMDLINE_LINUX_DEFAULT=quiet", "GRUB_CMDLINE_LINUX_DEFAULT=quiet,iommu"),
    ('export GRUB_CMDLINE_LINUX_DEFAULT="a \\"b\\""  # keep', 'export GRUB_CMDLINE_LINUX_DEFAULT="a \\"b\\" iommu=pt"  # keep'),
    ('GRUB_CMDLINE_LINUX_DEFAULT=""', 'GRUB_CMDLINE_LINUX_DEFAULT="iommu=pt"'),
])
def test_grub_quoting_is_kept(line, expected):
    if expected.endswith(",iommu"):
        # a bare word that needs quoting after the edit gets double quotes
        expected = 'GRUB_CMDLINE_LINUX_DEFAULT="quiet iommu=pt"'
    new, _plan = _grub_new("# head\n%s\nGRUB_TIMEOUT=5\n" % line, [("iommu", "pt")])
    assert new == "# head\n%s\nGRUB_TIMEOUT=5\n" % expected


def test_grub_last_assignment_wins_and_is_the_one_edited():
    text = 'GRUB_CMDLINE_LINUX_DEFAULT="old"\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\n'
    new, _plan = _grub_new(text, [("iommu", "pt")])
    assert new == 'GRUB_CMDLINE_LINUX_DEFAULT="old"\nGRUB_CMDLINE_LINUX_DEFAULT="quiet iommu=pt"\n'


def test_grub_d_file_that_assigns_last_is_edited():
    files = [("/etc/default/grub", 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n'),
             ("/etc/default/grub.d/50-cloudimg-settings.cfg", 'GRUB_CMDLINE_LINUX_DEFAULT="console=tty1"\n')]
    plan = edit_grub_files(files, [("iommu", "pt")], [])
    assert plan["files"] == {"/etc/default/grub.d/50-cloudimg-settings.cfg":
                             'GRUB_CMDLINE_LINUX_DEFAULT="console=tty1 iommu=pt"\n'}
    assert plan["before"] == "console=tty1"


@pytest.mark.parametrize("text, words", [
    ('GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT quiet"\n', "shell expansion"),
    ('GRUB_CMDLINE_LINUX_DEFAULT="quiet $(reboot) `halt`\n', "cannot be evaluated"),
    ("GRUB_CMDLINE_LINUX='unbalanced\n", "cannot be evaluated"),
    ('GRUB_CMDLINE_LINUX_DEFAULT="a"b"c"\n', "several quoted parts"),
    ("GRUB_CMDLINE_LINUX_DEFAULT=a\\ b\n", "single quoted string"),
])
def test_grub_values_that_cannot_be_rewritten_safely(text, words):
    with pytest.raises(FixError) as info:
        edit_grub_files([("/etc/default/grub", text)], [("iommu", "pt")], [])
    assert words in info.value.msg and "/etc/default/grub" in info.value.msg


def test_grub_hostile_file_is_refused(snapshot_trees):
    text = read(snapshot_trees["hostile"], "/etc/default/grub")
    with pytest.raises(FixError):
        edit_grub_files([("/etc/default/grub", text)], [("iommu", "pt")], [])


@pytest.mark.parametrize("os_release, files, argv", [
    ({"ID": "debian"}, [], ["update-grub"]),
    ({"ID": "ubuntu", "ID_LIKE": "debian"}, [], ["update-grub"]),
    ({"ID": "rhel", "ID_LIKE": "fedora"}, [], ["grub2-mkconfig", "-o", "/boot/grub2/grub.cfg"]),
    ({}, ["/etc/redhat-release"], ["grub2-mkconfig", "-o", "/boot/grub2/grub.cfg"]),
    ({"ID": "debian"}, ["/etc/kernel/proxmox-boot-uuids"], ["proxmox-boot-tool", "refresh"]),
    ({"ID": "arch"}, ["/boot/grub/grub.cfg"], ["grub-mkconfig", "-o", "/boot/grub/grub.cfg"]),
])
def test_grub_update_command_from_files(os_release, files, argv):
    assert grub_update_argv(os_release, lambda path: path in files) == argv


def test_grub_update_command_unknown():
    with pytest.raises(FixError):
        grub_update_argv({"ID": "gentoo"}, lambda path: False)


# -- BLS ------------------------------------------------------------------------------------------------

def test_bls_entry_with_kernelopts_from_grubenv():
    env = parse_grubenv("# GRUB Environment Block\nkernelopts=root=/dev/sda1 ro quiet\nsaved_entry=x\n######\n")
    entry = parse_bls_entry("title RHEL\nversion 4.18.0-513.el8.x86_64\noptions $kernelopts iommu=pt\n", env)
    assert entry["version"] == "4.18.0-513.el8.x86_64"
    assert entry["options"] == "root=/dev/sda1 ro quiet iommu=pt"
    assert parse_bls_entry("options $kernelopts\n", None)["options"] is None
    # EL9: tuned's variable is empty unless tuned sets it, as in GRUB
    assert parse_bls_entry("options root=/dev/x ro $tuned_params\n", {})["options"] == "root=/dev/x ro"


def test_bls_needs_change_by_key():
    params = parse_cmdline("root=/dev/x iommu=pt quiet")
    assert not bls_needs_change(params, [("iommu", "pt")], ["splash"])
    assert bls_needs_change(params, [("iommu", "off")], [])
    assert bls_needs_change(params, [], ["quiet"])


# -- apply on snapshot copies ------------------------------------------------------------------------------

def _host(root, check=False, **kwargs):
    return Host(FakeModule(check_mode=check, **kwargs), root, True)


def test_proxmox_systemd_boot_four_runs(snapshot_trees, tmp_path):
    root = copy_tree(snapshot_trees["incident"], tmp_path / "incident")
    before = tree_state(root)
    add = {"amd_pstate": "active", "iommu": "pt"}

    host = _host(root, check=True)
    result = apply(host, add, None, diff=True)
    assert result["changed"] and result["bootloader"] == "systemd-boot"
    assert host.commands == ["proxmox-boot-tool refresh"]
    assert result["diff"][0]["after"] == "root=ZFS=rpool/ROOT/pve-1 boot=zfs quiet amd_pstate=active iommu=pt\n"
    assert result["reboot_required"] is True and result["running"] == {"amd_pstate": None, "iommu": None}
    assert tree_state(root) == before

    host = _host(root)
    result = apply(host, add, None)
    assert result["changed"] and host.commands == ["proxmox-boot-tool refresh"] and host.module.ran == []
    assert result["configured_before"] == {"root": "ZFS=rpool/ROOT/pve-1", "boot": "zfs", "quiet": True}
    assert result["configured_after"]["amd_pstate"] == "active"
    assert changed_paths(before, tree_state(root)) == sorted(["etc/kernel/cmdline", os.path.relpath(
        host.backups["/etc/kernel/cmdline"], root)])
    assert read(root, "/etc/kernel/cmdline") == "root=ZFS=rpool/ROOT/pve-1 boot=zfs quiet amd_pstate=active iommu=pt\n"
    assert read(root, os.path.relpath(host.backups["/etc/kernel/cmdline"], root)) == \
        "root=ZFS=rpool/ROOT/pve-1 boot=zfs quiet\n"

    after = tree_state(root)
    for check in (True, False):
        host = _host(root, check=check)
        result = apply(host, add, None)
        assert not result["changed"] and host.commands == [] and result["reboot_required"] is True
    assert tree_state(root) == after


def test_healthy_needs_no_change_and_no_reboot(snapshot_trees, tmp_path):
    root = copy_tree(snapshot_trees["healthy"], tmp_path / "healthy")
    host = _host(root)
    result = apply(host, ["amd_pstate=active", "iommu=pt"], None)
    assert not result["changed"] and result["reboot_required"] is False and host.commands == []


def test_forced_grub_on_el_edits_default_grub(snapshot_trees, tmp_path):
    root = copy_tree(snapshot_trees["intel"], tmp_path / "intel")
    host = _host(root)
    result = apply(host, {"processor.max_cstate": "1"}, ["rd.lvm.lv"], bootloader="grub")
    assert result["detected_bootloader"] == "bls" and "may not boot from" in result["warnings"][0]
    assert host.commands == ["grub2-mkconfig -o /boot/grub2/grub.cfg"]
    assert result["config_files"] == ["/etc/default/grub"]
    assert "rd.lvm.lv" not in read(root, "/etc/default/grub")


def test_bls_runs_grubby_and_writes_nothing(snapshot_trees, tmp_path):
    root = copy_tree(snapshot_trees["intel"], tmp_path / "intel")
    before = tree_state(root)
    host = _host(root)
    result = apply(host, {"processor.max_cstate": "1", "intel_idle.max_cstate": "0"}, ["rhgb"])
    assert result["bootloader"] == "bls" and result["changed"]
    assert host.commands == ["grubby --update-kernel=ALL "
                             "'--args=processor.max_cstate=1 intel_idle.max_cstate=0' --remove-args=rhgb"]
    assert len(result["entries_to_update"]) == 2
    assert result["configured_after"]["processor.max_cstate"] == "1"
    assert tree_state(root) == before


def test_bls_already_converged_is_unchanged(snapshot_trees, tmp_path):
    root = copy_tree(snapshot_trees["intel"], tmp_path / "intel")
    entries = os.path.join(root, "boot/loader/entries")
    for name in os.listdir(entries):
        path = os.path.join(entries, name)
        with open(path) as handle:
            text = handle.read()
        with open(path, "w") as handle:
            handle.write(text.replace("\noptions ", "\noptions processor.max_cstate=1 "))
    host = _host(root)
    result = apply(host, {"processor.max_cstate": "1"}, ["rhgb"])
    assert not result["changed"] and host.commands == [] and result["entries_to_update"] == []


def test_unknown_boot_loader_fails_and_writes_nothing(snapshot_trees, tmp_path):
    root = copy_tree(snapshot_trees["incident"], tmp_path / "incident")
    for rel in ("etc/kernel/cmdline", "etc/default/grub"):
        os.unlink(os.path.join(root, rel))
    before = tree_state(root)
    with pytest.raises(FixError) as info:
        apply(_host(root), {"iommu": "pt"}, None)
    assert "cannot tell which boot loader" in info.value.msg and "nothing was changed" in info.value.msg
    assert tree_state(root) == before


def test_empty_kernel_cmdline_is_refused(snapshot_trees, tmp_path):
    root = copy_tree(snapshot_trees["hostile"], tmp_path / "hostile")
    before = tree_state(root)
    with pytest.raises(FixError) as info:
        apply(_host(root), {"iommu": "pt"}, None)
    assert "/etc/kernel/cmdline is empty" in info.value.msg
    assert tree_state(root) == before


def test_failed_regeneration_on_a_live_host_puts_the_file_back(snapshot_trees, tmp_path):
    root = copy_tree(snapshot_trees["incident"], tmp_path / "incident")
    host = _host(root, answers={"proxmox-boot-tool": (2, "", "E: no ESP configured\n")})
    # act as the live host would (commands run) while writing into the copy
    host.live = True
    with pytest.raises(FixError) as info:
        apply(host, {"iommu": "pt"}, None)
    assert "proxmox-boot-tool refresh exited 2 (E: no ESP configured)" in info.value.msg
    assert host.module.ran == [["/usr/bin/proxmox-boot-tool", "refresh"]]
    backup = host.backups["/etc/kernel/cmdline"]
    msg, result = fail_with_rollback(host, info.value)
    assert "undone" in msg and result["backup_files"] == {"/etc/kernel/cmdline": backup}
    assert read(root, "/etc/kernel/cmdline") == "root=ZFS=rpool/ROOT/pve-1 boot=zfs quiet\n"
    assert read(root, os.path.relpath(backup, root)) == "root=ZFS=rpool/ROOT/pve-1 boot=zfs quiet\n"


def test_missing_tool_on_a_live_host(snapshot_trees, tmp_path):
    root = copy_tree(snapshot_trees["incident"], tmp_path / "incident")
    host = _host(root, binaries=False)
    host.live = True
    with pytest.raises(FixError) as info:
        apply(host, {"iommu": "pt"}, None)
    assert "proxmox-boot-tool not found in PATH" in info.value.msg
