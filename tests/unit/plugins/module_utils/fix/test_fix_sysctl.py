"""sysctl fix logic: allow-list, values, sysctl.d rendering, systemd-sysctl precedence, apply on snapshot copies."""
import errno
import os
import stat

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.gpuhost.baseline.plugins.module_utils.fix import base as _fix_common
from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.base import FixError, Host, fail_with_rollback
from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.sysctl import (
    DEFAULT_FILE, HEADER, apply, check_key, check_sysctl_file, check_value, effective_value, render_conf,
    runtime_value)
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.kernel import parse_sysctl_conf
from helpers.fixhost import FakeModule, changed_paths, copy_tree, make_readonly, read, tree_state


# -- pure functions -----------------------------------------------------------------------------

@pytest.mark.parametrize("key, expected", [
    ("kernel.numa_balancing", "kernel.numa_balancing"),
    ("vm/zone_reclaim_mode", "vm.zone_reclaim_mode"),
    (" vm.swappiness ", "vm.swappiness"),
])
def test_allowed_keys_are_normalised(key, expected):
    assert check_key(key) == expected


@pytest.mark.parametrize("key", ["net.ipv4.ip_forward", "kernel.numa_balancing_scan_delay_ms", "", None, "vm"])
def test_other_keys_are_refused_with_the_allowed_list(key):
    with pytest.raises(FixError) as info:
        check_key(key)
    assert "kernel.numa_balancing, vm.swappiness, vm.zone_reclaim_mode" in info.value.msg
    assert "ansible.posix.sysctl" in info.value.msg


@pytest.mark.parametrize("key, value, expected", [
    ("kernel.numa_balancing", "0", "0"), ("kernel.numa_balancing", 3, "3"), ("vm.swappiness", " 010 ", "10"),
    ("vm.swappiness", "200", "200"), ("vm.zone_reclaim_mode", "7", "7"),
])
def test_values_in_range(key, value, expected):
    assert check_value(key, value) == expected


@pytest.mark.parametrize("key, value", [
    ("kernel.numa_balancing", "4"), ("kernel.numa_balancing", "-1"), ("vm.swappiness", "201"),
    ("vm.zone_reclaim_mode", "off"), ("vm.swappiness", ""), ("vm.swappiness", True), ("vm.swappiness", "1.5"),
])
def test_values_out_of_range_or_garbage(key, value):
    with pytest.raises(FixError) as info:
        check_value(key, value)
    assert key in info.value.msg and "expected an integer" in info.value.msg


def test_runtime_value_parses_proc_text_and_rejects_garbage():
    assert runtime_value("1\n") == "1"
    assert runtime_value(" 60 ") == "60"
    assert runtime_value("yes\x00\ufffd") is None
    assert runtime_value("") is None
    assert runtime_value(None) is None


def test_new_file_gets_the_managed_header():
    assert render_conf(None, "kernel.numa_balancing", "0") == HEADER + "kernel.numa_balancing = 0\n"
    assert render_conf("", "vm.swappiness", "10") == HEADER + "vm.swappiness = 10\n"


def test_existing_line_keeps_its_layout_and_other_lines_stay():
    text = ("# mine\n"
            "vm.swappiness=60   # tuned by hand\n"
            "kernel.pid_max = 4194304\n"
            "-kernel/numa_balancing\t=  1  \n"
            "kernel.numa_balancing = 2\n")
    new = render_conf(text, "kernel.numa_balancing", "0")
    assert new == ("# mine\n"
                   "vm.swappiness=60   # tuned by hand\n"
                   "kernel.pid_max = 4194304\n"
                   "-kernel/numa_balancing\t=  0  \n")
    assert parse_sysctl_conf(new)["kernel.numa_balancing"] == "0"


def test_key_is_appended_after_a_last_line_without_newline():
    assert render_conf("vm.swappiness = 10", "vm.zone_reclaim_mode", "0") == \
        "vm.swappiness = 10\nvm.zone_reclaim_mode = 0\n"


def test_commented_key_is_not_taken_for_a_setting():
    text = "# kernel.numa_balancing = 1\n; vm.swappiness = 1\n"
    assert render_conf(text, "kernel.numa_balancing", "0") == text + "kernel.numa_balancing = 0\n"


def test_undecodable_bytes_survive_an_edit():
    raw = b"# \xff\xfe owner\nvm.swappiness = 60\n"
    text = raw.decode("utf-8", "surrogateescape")
    new = render_conf(text, "vm.swappiness", "10").encode("utf-8", "surrogateescape")
    assert new == b"# \xff\xfe owner\nvm.swappiness = 10\n"


_LINE = st.one_of(
    st.sampled_from(["kernel.numa_balancing = 1", "vm.swappiness=60", "# comment", "", "kernel.pid_max = 4",
                     "-vm/zone_reclaim_mode = 1", "garbage without equals", "kernel.numa_balancing=3  "]),
    st.text(alphabet=st.characters(blacklist_characters="\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"), max_size=30),
)


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(_LINE, max_size=8), key=st.sampled_from(sorted(["kernel.numa_balancing", "vm.swappiness",
                                                                     "vm.zone_reclaim_mode"])),
       value=st.integers(0, 3))
def test_rendering_sets_the_key_keeps_the_others_and_is_idempotent(lines, key, value):
    text = "\n".join(lines)
    new = render_conf(text, key, str(value))
    before, after = parse_sysctl_conf(text), parse_sysctl_conf(new)
    assert after[key] == str(value)
    assert dict((k, v) for k, v in after.items() if k != key) == dict((k, v) for k, v in before.items() if k != key)
    assert render_conf(new, key, str(value)) == new


def test_effective_value_follows_systemd_sysctl_order():
    files = [("/usr/lib/sysctl.d/50-default.conf", "vm.swappiness = 60\n"),
             ("/etc/sysctl.d/90-gpuhost-baseline.conf", "vm.swappiness = 10\n"),
             ("/etc/sysctl.d/99-sysctl.conf", "# nothing\n")]
    assert effective_value(files, "vm.swappiness") == ("10", "/etc/sysctl.d/90-gpuhost-baseline.conf")
    assert effective_value(files, "kernel.numa_balancing") == (None, None)


@pytest.mark.parametrize("path", ["/etc/sysctl.d/90-gpuhost-baseline.conf", "/run/sysctl.d/x.conf", "/etc/sysctl.conf"])
def test_sysctl_file_must_be_read_at_boot(path):
    assert check_sysctl_file(path) == path


@pytest.mark.parametrize("path", ["/etc/sysctl.d/90-gpuhost", "/tmp/x.conf", "/etc/sysctl.d/.hidden.conf", ""])
def test_sysctl_file_outside_sysctl_d_is_refused(path):
    with pytest.raises(FixError):
        check_sysctl_file(path)


# -- apply on snapshot copies --------------------------------------------------------------------

def _host(root, check=False, backup=True):
    return Host(FakeModule(check_mode=check), root, backup)


def test_incident_four_runs(snapshot_trees, tmp_path):
    root = copy_tree(snapshot_trees["incident"], tmp_path / "incident")
    before = tree_state(root)

    result = apply(_host(root, check=True), "kernel.numa_balancing", "0", diff=True)
    assert result["changed"] and result["runtime_before"] == "1" and result["runtime_after"] == "0"
    assert result["persisted_before"] is None and result["persisted_after"] == "0"
    assert [entry["after_header"] for entry in result["diff"]] == [
        "/proc/sys/kernel/numa_balancing (runtime)", DEFAULT_FILE]
    assert tree_state(root) == before

    result = apply(_host(root), "kernel.numa_balancing", "0")
    assert result["changed"] and result["runtime_after"] == "0" and result["persisted_file"] == DEFAULT_FILE
    assert changed_paths(before, tree_state(root)) == [
        "etc/sysctl.d/90-gpuhost-baseline.conf", "proc/sys/kernel/numa_balancing"]
    assert read(root, "/proc/sys/kernel/numa_balancing") == "0\n"
    assert read(root, DEFAULT_FILE) == HEADER + "kernel.numa_balancing = 0\n"

    after = tree_state(root)
    for check in (True, False):
        result = apply(_host(root, check=check), "kernel.numa_balancing", "0")
        assert not result["changed"]
        assert result["runtime_before"] == result["runtime_after"] == "0"
        assert result["persisted_before"] == result["persisted_after"] == "0"
    assert tree_state(root) == after


def test_second_key_joins_the_same_file_with_a_backup(snapshot_trees, tmp_path):
    root = copy_tree(snapshot_trees["incident"], tmp_path / "incident")
    apply(_host(root), "kernel.numa_balancing", "0")
    host = _host(root)
    result = apply(host, "vm.swappiness", "10")
    assert result["changed"]
    assert read(root, DEFAULT_FILE) == HEADER + "kernel.numa_balancing = 0\nvm.swappiness = 10\n"
    backup = host.backups[DEFAULT_FILE]
    assert read(root, backup[len(root):]) == HEADER + "kernel.numa_balancing = 0\n"


def test_value_persisted_by_another_file_needs_no_file_of_ours(snapshot_trees, tmp_path):
    # healthy: /etc/sysctl.d/90-gpuhost.conf already sets kernel.numa_balancing = 0
    root = copy_tree(snapshot_trees["healthy"], tmp_path / "healthy")
    before = tree_state(root)
    result = apply(_host(root), "kernel.numa_balancing", "0")
    assert not result["changed"]
    assert result["persisted_before"] == "0" and result["persisted_file"] == "/etc/sysctl.d/90-gpuhost.conf"
    assert tree_state(root) == before


def test_later_file_overrides_ours_and_is_reported(snapshot_trees, tmp_path):
    root = copy_tree(snapshot_trees["incident"], tmp_path / "incident")
    with open(os.path.join(root, "etc/sysctl.d/95-local.conf"), "w") as handle:
        handle.write("kernel.numa_balancing = 1\n")
    result = apply(_host(root), "kernel.numa_balancing", "0")
    assert result["changed"]
    assert result["persisted_before"] == "1" and result["persisted_after"] == "1"
    assert result["overridden_by"] == "/etc/sysctl.d/95-local.conf"
    assert "ineffective" in result["warnings"][0] and "/etc/sysctl.d/95-local.conf" in result["warnings"][0]
    # our file is still written (and the runtime value set): the warning tells what else to fix
    assert read(root, DEFAULT_FILE).endswith("kernel.numa_balancing = 0\n")
    # a second run changes nothing more but keeps warning
    again = apply(_host(root), "kernel.numa_balancing", "0")
    assert not again["changed"] and again["overridden_by"] == "/etc/sysctl.d/95-local.conf"


def test_sysctl_conf_applied_last_overrides_ours(snapshot_trees, tmp_path):
    # incident: /etc/sysctl.d/99-sysctl.conf is Debian's link to ../sysctl.conf
    root = copy_tree(snapshot_trees["incident"], tmp_path / "incident")
    with open(os.path.join(root, "etc/sysctl.conf"), "a") as handle:
        handle.write("vm.swappiness = 60\n")
    result = apply(_host(root), "vm.swappiness", "10")
    assert result["overridden_by"] == "/etc/sysctl.conf" and result["persisted_after"] == "60"


def test_stale_value_in_our_file_is_corrected_even_when_another_file_wins(snapshot_trees, tmp_path):
    root = copy_tree(snapshot_trees["healthy"], tmp_path / "healthy")
    with open(os.path.join(root, DEFAULT_FILE.lstrip("/")), "w") as handle:
        handle.write("kernel.numa_balancing = 1\n")
    result = apply(_host(root), "kernel.numa_balancing", "0")
    assert result["changed"] and result["persisted_before"] == "0"
    assert read(root, DEFAULT_FILE) == "kernel.numa_balancing = 0\n"


def test_runtime_only_and_persist_only(snapshot_trees, tmp_path):
    root = copy_tree(snapshot_trees["incident"], tmp_path / "incident")
    before = tree_state(root)
    apply(_host(root), "vm.swappiness", "10", runtime=True, persist=False)
    assert changed_paths(before, tree_state(root)) == ["proc/sys/vm/swappiness"]
    middle = tree_state(root)
    result = apply(_host(root), "vm.zone_reclaim_mode", "1", runtime=False, persist=True)
    assert result["runtime_after"] == result["runtime_before"] == "0"
    assert changed_paths(middle, tree_state(root)) == ["etc/sysctl.d/90-gpuhost-baseline.conf"]


def test_garbage_runtime_value_fails_and_writes_nothing(snapshot_trees, tmp_path):
    # hostile: /proc/sys/kernel/numa_balancing holds "yes\0\xff"
    root = copy_tree(snapshot_trees["hostile"], tmp_path / "hostile")
    before = tree_state(root)
    with pytest.raises(FixError) as info:
        apply(_host(root), "kernel.numa_balancing", "0")
    assert "/proc/sys/kernel/numa_balancing" in info.value.msg and "not an integer" in info.value.msg
    assert tree_state(root) == before


def test_missing_proc_file_fails_unless_runtime_is_off(snapshot_trees, tmp_path):
    root = copy_tree(snapshot_trees["incident"], tmp_path / "incident")
    os.unlink(os.path.join(root, "proc/sys/kernel/numa_balancing"))
    with pytest.raises(FixError) as info:
        apply(_host(root), "kernel.numa_balancing", "0")
    assert "CONFIG_NUMA_BALANCING" in info.value.msg
    result = apply(_host(root), "kernel.numa_balancing", "0", runtime=False)
    assert result["changed"] and result["runtime_before"] is None


def test_read_only_proc_sys_fails_before_the_file_is_written(snapshot_trees, tmp_path):
    root = copy_tree(snapshot_trees["incident"], tmp_path / "incident")
    make_readonly(root, "/proc/sys/kernel/numa_balancing")
    before = tree_state(root)
    host = _host(root)
    with pytest.raises(FixError) as info:
        apply(host, "kernel.numa_balancing", "0")
    assert "/proc/sys/kernel/numa_balancing" in info.value.msg
    assert "EACCES" in info.value.msg and "container" in info.value.msg
    assert tree_state(root) == before
    assert not os.path.exists(os.path.join(root, DEFAULT_FILE.lstrip("/")))


def test_erofs_message(snapshot_trees, tmp_path, monkeypatch):
    root = copy_tree(snapshot_trees["incident"], tmp_path / "incident")
    real_open = os.open

    def read_only_proc(path, flags, *args):
        if "/proc/sys/" in path and flags & os.O_WRONLY:
            raise OSError(errno.EROFS, "Read-only file system", path)
        return real_open(path, flags, *args)

    monkeypatch.setattr(_fix_common.os, "open", read_only_proc)
    with pytest.raises(FixError) as info:
        apply(_host(root), "kernel.numa_balancing", "0")
    assert "read-only (EROFS)" in info.value.msg and "unprivileged containers" in info.value.msg


class _FailingMove(FakeModule):
    def atomic_move(self, src, dest, unsafe_writes=False, keep_dest_attrs=True):
        raise Exception("Could not replace %r with %r." % (dest, src))


def test_failed_file_write_undoes_the_runtime_write(snapshot_trees, tmp_path):
    root = copy_tree(snapshot_trees["incident"], tmp_path / "incident")
    before = tree_state(root)
    host = Host(_FailingMove(), root, True)
    with pytest.raises(FixError) as info:
        apply(host, "kernel.numa_balancing", "0")
    assert DEFAULT_FILE in info.value.msg
    msg, result = fail_with_rollback(host, info.value)
    assert "1 earlier write(s) of this task were undone" in msg
    assert result["commands"] == []
    assert tree_state(root) == before
    assert read(root, "/proc/sys/kernel/numa_balancing") == "1\n"


def test_sysctl_d_file_mode_is_0644_whatever_the_umask(snapshot_trees, tmp_path):
    # systemd-sysctl reads it as root anyway, but a 0600 file under a 077 umask hides the
    # setting from the unprivileged tools (and people) that check it; the units get explicit modes too
    root = copy_tree(snapshot_trees["incident"], tmp_path / "incident")
    old = os.umask(0o077)
    try:
        apply(_host(root), "kernel.numa_balancing", "0")
    finally:
        os.umask(old)
    path = os.path.join(root, DEFAULT_FILE.lstrip("/"))
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
