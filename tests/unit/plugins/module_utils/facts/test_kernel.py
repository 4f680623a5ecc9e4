# -*- coding: utf-8 -*-
"""Kernel facts: parsers over real-format text, broken input, fuzzing, gather() over trees and the live host."""

from __future__ import absolute_import, division, print_function

import json
import os

import pytest
from hypothesis import given, settings, strategies as st

from helpers.tree import replay_recording, write_tree

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import kernel as _kernel
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.kernel import (
    cmdline_value,
    compare_kernel_release,
    detect_bootloader,
    kernel_release_at_least,
    merge_sysctl,
    normalize_sysctl_key,
    parse_bracketed,
    parse_cmdline,
    parse_grub_default,
    parse_os_release,
    parse_shell_assignments,
    parse_sysctl_conf,
    preempt_build,
    preempt_model,
    sort_releases,
    split_cmdline,
    sysctl_file_order,
)
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root

FUZZ = settings(max_examples=200, deadline=None)


# -- real-format samples (written from the kernel's and the distributions' formats) ----------

PVE_CMDLINE = ("BOOT_IMAGE=/boot/vmlinuz-6.8.12-4-pve root=/dev/mapper/pve-root ro quiet "
               "amd_pstate=active iommu=pt preempt=full\n")
PVE_VERSION = "#1 SMP PREEMPT_DYNAMIC PMX 6.8.12-4 (2024-11-06T15:04Z)\n"
RHEL_VERSION = "#1 SMP PREEMPT_DYNAMIC Fri May 17 06:51:30 EDT 2024\n"
DEBIAN_VERSION = "#1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)\n"
RT_VERSION = "#1 SMP PREEMPT_RT Debian 6.1.76-1 (2024-02-01)\n"

GRUB_DEBIAN = """\
# If you change this file, run 'update-grub' afterwards to update
# /boot/grub/grub.cfg.
# For full documentation of the options in this file, see:
#   info -f grub -n 'Simple configuration'

GRUB_DEFAULT=0
GRUB_TIMEOUT=5
GRUB_DISTRIBUTOR=`lsb_release -i -s 2> /dev/null || echo Debian`
GRUB_CMDLINE_LINUX_DEFAULT="quiet amd_pstate=active iommu=pt"
GRUB_CMDLINE_LINUX=""

# Uncomment to enable BadRAM filtering, modify to suit your needs
#GRUB_BADRAM="0x01234567,0xfefefefe,0x89abcdef,0xefefefef"

# Uncomment to disable graphical terminal
#GRUB_TERMINAL=console
"""

GRUB_RHEL = """\
GRUB_TIMEOUT=5
GRUB_DISTRIBUTOR="$(sed 's, release .*$,,g' /etc/system-release)"
GRUB_DEFAULT=saved
GRUB_DISABLE_SUBMENU=true
GRUB_TERMINAL_OUTPUT="console"
GRUB_CMDLINE_LINUX="crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M resume=/dev/mapper/rhel-swap rd.lvm.lv=rhel/root rd.lvm.lv=rhel/swap"
GRUB_DISABLE_RECOVERY="true"
GRUB_ENABLE_BLSCFG=true
"""

GRUB_QUOTING = """\
GRUB_CMDLINE_LINUX_DEFAULT='quiet splash' # single quotes, then a comment
GRUB_CMDLINE_LINUX="console=ttyS0,115200n8 \\
  dyndbg=\\"module nvidia +p\\" nvidia.NVreg_RegistryDwords='a=1;b=2'"
GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX} amd_iommu=on"
export GRUB_TERMINAL=console
"""

OS_RELEASE_PVE8 = """\
PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
HOME_URL="https://www.debian.org/"
SUPPORT_URL="https://www.debian.org/support"
BUG_REPORT_URL="https://bugs.debian.org/"
"""

OS_RELEASE_RHEL9 = """\
NAME="Red Hat Enterprise Linux"
VERSION="9.4 (Plow)"
ID="rhel"
ID_LIKE="fedora"
VERSION_ID="9.4"
PLATFORM_ID="platform:el9"
PRETTY_NAME="Red Hat Enterprise Linux 9.4 (Plow)"
ANSI_COLOR="0;31"
LOGO="fedora-logo-icon"
CPE_NAME="cpe:/o:redhat:enterprise_linux:9::baseos"
HOME_URL="https://www.redhat.com/"
DOCUMENTATION_URL="https://access.redhat.com/documentation/en-us/red_hat_enterprise_linux/9"
BUG_REPORT_URL="https://issues.redhat.com/"

REDHAT_BUGZILLA_PRODUCT="Red Hat Enterprise Linux 9"
REDHAT_BUGZILLA_PRODUCT_VERSION=9.4
REDHAT_SUPPORT_PRODUCT="Red Hat Enterprise Linux"
REDHAT_SUPPORT_PRODUCT_VERSION="9.4"
"""

OS_RELEASE_UBUNTU = """\
PRETTY_NAME="Ubuntu 24.04.1 LTS"
NAME="Ubuntu"
VERSION_ID="24.04"
VERSION="24.04.1 LTS (Noble Numbat)"
VERSION_CODENAME=noble
ID=ubuntu
ID_LIKE=debian
UBUNTU_CODENAME=noble
"""

THP_ENABLED = "always [madvise] never\n"
THP_DEFRAG = "always defer defer+madvise [madvise] never\n"
SCHED_PREEMPT = "none voluntary (full) lazy \n"


# -- cmdline ------------------------------------------------------------------------------------

def test_cmdline_real_proxmox_line():
    params = parse_cmdline(PVE_CMDLINE)
    assert params == {
        "BOOT_IMAGE": "/boot/vmlinuz-6.8.12-4-pve", "root": "/dev/mapper/pve-root", "ro": True,
        "quiet": True, "amd_pstate": "active", "iommu": "pt", "preempt": "full",
    }


def test_cmdline_quotes_repeats_flags():
    text = 'foo="a b" "bar=c d" dyndbg="file x.c +p" x=1 x=2 nosmt acpi=off acpi "q=\\"in\\""'
    params = parse_cmdline(text)
    assert params["foo"] == "a b"
    assert params["bar"] == "c d"
    assert params["dyndbg"] == "file x.c +p"
    assert params["x"] == "2"
    assert params["nosmt"] is True
    # last occurrence wins even when it changes the kind of value
    assert params["acpi"] is True
    assert list(params)[-2:] == ["acpi", "q"]


def test_cmdline_value_with_equals_and_empty_value():
    params = parse_cmdline("root=ZFS=rpool/ROOT/pve-1 console= isolcpus=managed_irq,domain,2-31")
    assert params["root"] == "ZFS=rpool/ROOT/pve-1"
    assert params["console"] == ""
    assert params["isolcpus"] == "managed_irq,domain,2-31"


def test_cmdline_double_dash_goes_to_init():
    params, init = split_cmdline("quiet iommu=pt -- --firecracker-init single iommu=off")
    assert params == [("quiet", True), ("iommu", "pt")]
    assert init == ["--firecracker-init", "single", "iommu=off"]
    assert parse_cmdline("quiet iommu=pt -- iommu=off") == {"quiet": True, "iommu": "pt"}
    # "--" only ends kernel parameters as a bare word
    assert parse_cmdline("a=-- --=x b") == {"a": "--", "--": "x", "b": True}


def test_cmdline_whitespace_and_unterminated_quote():
    assert parse_cmdline("  a=1\t\tb=2 \n") == {"a": "1", "b": "2"}
    # an unterminated quote swallows the rest of the line, as in the kernel
    assert parse_cmdline('a="x y z') == {"a": "x y z"}


def test_cmdline_value_lookup_ignores_dash_underscore():
    params = parse_cmdline("intel-iommu=on amd_pstate=passive amd-pstate=active")
    assert cmdline_value(params, "intel_iommu") == "on"
    assert cmdline_value(params, "amd_pstate") == "active"
    assert cmdline_value(params, "iommu") is None
    assert cmdline_value(None, "iommu") is None


@pytest.mark.parametrize("data", [None, "", b"", "\n", b"\x00 \x00", 42, "=", '"', '""'])
def test_cmdline_broken_input(data):
    assert parse_cmdline(data) == {}


def test_cmdline_bytes_input():
    assert parse_cmdline(b"quiet iommu=pt\n") == {"quiet": True, "iommu": "pt"}


@FUZZ
@given(st.one_of(st.text(), st.binary()))
def test_cmdline_fuzz(data):
    params = parse_cmdline(data)
    assert isinstance(params, dict)
    for key, value in params.items():
        assert key and (value is True or isinstance(value, str))


@FUZZ
@given(st.dictionaries(st.from_regex(r"[a-z][a-z0-9_.]{0,10}", fullmatch=True),
                       st.one_of(st.just(True), st.from_regex(r"[a-zA-Z0-9,:/ ]{0,12}", fullmatch=True)),
                       max_size=8))
def test_cmdline_roundtrip(params):
    words = []
    for key, value in params.items():
        if value is True:
            words.append(key)
        elif " " in value:
            words.append('%s="%s"' % (key, value))
        else:
            words.append("%s=%s" % (key, value))
    assert parse_cmdline(" ".join(words)) == params


# -- GRUB defaults and shell assignments ------------------------------------------------------------

def test_grub_debian_default_file():
    parsed = parse_grub_default(GRUB_DEBIAN)
    assert parsed["GRUB_CMDLINE_LINUX_DEFAULT"] == "quiet amd_pstate=active iommu=pt"
    assert parsed["GRUB_CMDLINE_LINUX"] == ""
    assert parsed["raw"] == "quiet amd_pstate=active iommu=pt"
    assert parsed["params"] == {"quiet": True, "amd_pstate": "active", "iommu": "pt"}
    # the backquoted distributor cannot be evaluated, but it does not touch the cmdline
    assert parsed["values"]["GRUB_DISTRIBUTOR"] is None
    assert any("GRUB_DISTRIBUTOR" in problem for problem in parsed["problems"])
    assert "GRUB_BADRAM" not in parsed["values"]


def test_grub_rhel_file():
    parsed = parse_grub_default(GRUB_RHEL)
    assert parsed["GRUB_CMDLINE_LINUX_DEFAULT"] is None
    assert parsed["raw"].startswith("crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M resume=")
    assert parsed["params"]["rd.lvm.lv"] == "rhel/swap"
    assert parsed["values"]["GRUB_ENABLE_BLSCFG"] == "true"


def test_grub_quoting_continuation_and_expansion():
    parsed = parse_grub_default(GRUB_QUOTING)
    assert parsed["GRUB_CMDLINE_LINUX_DEFAULT"] == "quiet splash"
    assert parsed["GRUB_CMDLINE_LINUX"] == (
        # backslash-newline disappears, the indentation of the next line stays
        'console=ttyS0,115200n8   dyndbg="module nvidia +p" nvidia.NVreg_RegistryDwords=\'a=1;b=2\' amd_iommu=on')
    assert parsed["raw"].endswith("amd_iommu=on quiet splash")
    assert parsed["params"]["dyndbg"] == "module nvidia +p"
    assert parsed["params"]["amd_iommu"] == "on"
    assert parsed["values"]["GRUB_TERMINAL"] == "console"
    assert parsed["problems"] == []


def test_grub_unevaluable_cmdline_gives_none():
    parsed = parse_grub_default('GRUB_CMDLINE_LINUX="$(cat /etc/extra) quiet"\n')
    assert parsed["raw"] is None and parsed["params"] is None
    assert parsed["problems"] and "command substitution" in parsed["problems"][0]


def test_grub_unterminated_quote_is_a_problem_not_an_exception():
    parsed = parse_grub_default('GRUB_CMDLINE_LINUX_DEFAULT="quiet\n')
    assert parsed["raw"] is None
    assert "unterminated double quote" in parsed["problems"][0]


def test_shell_assignments_skip_commands_and_prefix_assignments():
    values, unused_problems = parse_shell_assignments("A=1 true\nB=2; C=3 # c\nif [ -f x ]; then D=4; fi\necho E=5\n")
    assert values == {"B": "2", "C": "3"}


def test_shell_assignments_env_seed_and_literal_single_quotes():
    values, unused_problems = parse_shell_assignments("X=\"$BASE more\"\nY='$BASE'\nZ=${BASE}\\ x\n", {"BASE": "b"})
    assert values == {"X": "b more", "Y": "$BASE", "Z": "b x"}


@FUZZ
@given(st.one_of(st.text(), st.binary(),
                 st.lists(st.sampled_from(["GRUB_CMDLINE_LINUX=", "GRUB_CMDLINE_LINUX_DEFAULT=", '"', "'", "\\",
                                           "$", "${", "}", "$(", ")", "`", "#", "\n", " ", ";", "quiet",
                                           "a=b", "export "]), max_size=30).map("".join)))
def test_grub_fuzz(data):
    parsed = parse_grub_default(data)
    assert parsed["raw"] is None or isinstance(parsed["raw"], str)
    assert isinstance(parsed["problems"], list)


# -- os-release, bracketed values -------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    (OS_RELEASE_PVE8, ("debian", "12", None, "Debian GNU/Linux 12 (bookworm)")),
    (OS_RELEASE_RHEL9, ("rhel", "9.4", "fedora", "Red Hat Enterprise Linux 9.4 (Plow)")),
    (OS_RELEASE_UBUNTU, ("ubuntu", "24.04", "debian", "Ubuntu 24.04.1 LTS")),
])
def test_os_release(text, expected):
    values = parse_os_release(text)
    assert (values.get("ID"), values.get("VERSION_ID"), values.get("ID_LIKE"), values.get("PRETTY_NAME")) == expected


@pytest.mark.parametrize("data", [None, "", b"\xff\xfe\x00", "garbage without equals", 'ID="unterminated'])
def test_os_release_broken(data):
    assert parse_os_release(data) == {}


@pytest.mark.parametrize("text, expected", [
    (THP_ENABLED, "madvise"),
    (THP_DEFRAG, "madvise"),
    ("[always] madvise never", "always"),
    (SCHED_PREEMPT, "full"),
    ("always madvise never", None),
    ("[always] [never]", None),
    ("", None),
    (None, None),
    (b"\x00\xff\xfe", None),
])
def test_bracketed(text, expected):
    assert parse_bracketed(text) == expected


# -- sysctl -----------------------------------------------------------------------------------------

def test_sysctl_conf_syntax():
    # the rp_filter line ends in three blanks (\x20), which must not become part of the value
    text = """\
# comment
; also a comment
kernel.numa_balancing = 0
vm/swappiness=10
-vm.zone_reclaim_mode = 1
not an assignment
net.ipv4.conf.all.rp_filter = 2\x20\x20\x20
kernel.numa_balancing=1
 = orphan
"""
    assert parse_sysctl_conf(text) == {
        "vm.swappiness": "10",
        "vm.zone_reclaim_mode": "1",
        "net.ipv4.conf.all.rp_filter": "2",
        "kernel.numa_balancing": "1",
    }


@pytest.mark.parametrize("key, expected", [
    ("kernel.numa_balancing", "kernel.numa_balancing"),
    ("kernel/numa_balancing", "kernel.numa_balancing"),
    ("net/ipv4/conf/eth0.10/rp_filter", "net.ipv4.conf.eth0/10.rp_filter"),
    ("net.ipv4.conf.eth0/10.rp_filter", "net.ipv4.conf.eth0/10.rp_filter"),
    ("swappiness", "swappiness"),
])
def test_sysctl_key_normalisation(key, expected):
    assert normalize_sysctl_key(key) == expected


def test_sysctl_file_order_shadowing_and_sysctl_conf_last():
    listing = {
        "/usr/lib/sysctl.d": ["10-numa.conf", "50-default.conf", "99-vendor.conf", "README"],
        "/run/sysctl.d": ["10-numa.conf", "60-run.conf"],
        "/etc/sysctl.d": ["10-numa.conf", "99-sysctl.conf"],
        "/lib/sysctl.d": ["50-default.conf", "01-legacy.conf"],
    }
    assert sysctl_file_order(listing) == [
        "/lib/sysctl.d/01-legacy.conf",
        "/etc/sysctl.d/10-numa.conf",
        "/usr/lib/sysctl.d/50-default.conf",
        "/run/sysctl.d/60-run.conf",
        "/etc/sysctl.d/99-sysctl.conf",
        "/usr/lib/sysctl.d/99-vendor.conf",
        "/etc/sysctl.conf",
    ]
    assert sysctl_file_order({}) == ["/etc/sysctl.conf"]


def test_sysctl_merge_later_file_wins():
    merged = merge_sysctl([
        ("/usr/lib/sysctl.d/50-default.conf", "vm.swappiness = 60\nkernel.numa_balancing = 1\n"),
        ("/etc/sysctl.d/90-gpuhost.conf", "kernel/numa_balancing = 0\n"),
        ("/etc/sysctl.conf", "vm.swappiness=10\n"),
    ])
    assert merged["kernel.numa_balancing"] == {"value": "0", "file": "/etc/sysctl.d/90-gpuhost.conf"}
    assert merged["vm.swappiness"] == {"value": "10", "file": "/etc/sysctl.conf"}


@FUZZ
@given(st.one_of(st.text(), st.binary(),
                 st.lists(st.sampled_from(["kernel.numa_balancing", "vm/swappiness", "=", " = ", "-", "#", ";",
                                           "\n", "0", "1", "/", ".", "\r\n", "\x00"]), max_size=30).map("".join)))
def test_sysctl_fuzz(data):
    parsed = parse_sysctl_conf(data)
    for key, value in parsed.items():
        assert key and isinstance(value, str) and "\n" not in value


# -- preemption -------------------------------------------------------------------------------------

@pytest.mark.parametrize("version, build", [
    (PVE_VERSION, "PREEMPT_DYNAMIC"),
    (RHEL_VERSION, "PREEMPT_DYNAMIC"),
    (RT_VERSION, "PREEMPT_RT"),
    ("#1 SMP PREEMPT RT Mon Jan 1 2018", "PREEMPT_RT"),
    ("#1 SMP PREEMPT Tue Feb 6 2024", "PREEMPT"),
    ("#1 SMP Debian 5.10.209-2 (2024-01-31)", "none"),
    ("", None),
    (None, None),
    ("garbage PREEMPT", None),
    (b"\xff\xfe", None),
])
def test_preempt_build(version, build):
    assert preempt_build(version) == build


@pytest.mark.parametrize("build, cmdline, debugfs, model", [
    ("PREEMPT_DYNAMIC", "full", "voluntary", "voluntary"),
    ("PREEMPT_DYNAMIC", "full", None, "full"),
    ("PREEMPT_DYNAMIC", "Voluntary", None, "voluntary"),
    ("PREEMPT_DYNAMIC", "bogus", None, None),
    ("PREEMPT_DYNAMIC", None, None, None),
    ("PREEMPT", "none", None, "full"),
    ("PREEMPT_RT", None, None, "full"),
    ("none", None, None, "none"),
    (None, None, None, None),
])
def test_preempt_model(build, cmdline, debugfs, model):
    assert preempt_model(build, cmdline, debugfs) == model


# -- kernel release comparison ------------------------------------------------------------------------

@pytest.mark.parametrize("left, right, expected", [
    ("6.8.12-4-pve", "6.14.8-2-pve", -1),
    ("6.14.8-2-pve", "6.17.2-1-pve", -1),
    ("6.8.12-4-pve", "6.17.2-1-pve", -1),
    ("6.17.2-1-pve", "6.8.12-4-pve", 1),
    ("6.8.12-4-pve", "6.8.12-4-pve", 0),
    ("6.8.12-2-pve", "6.8.12-10-pve", -1),
    ("5.14.0-427.el9.x86_64", "5.14.0-503.el9.x86_64", -1),
    ("5.14.0-503.11.1.el9_5.x86_64", "5.14.0-503.el9.x86_64", 1),
    ("5.14.0-427.13.1.el9_4.x86_64", "5.14.0-427.42.1.el9_4.x86_64", -1),
    ("5.14.0-570.el9.x86_64", "6.1.0-18-amd64", -1),
    ("6.1.0-18-amd64", "6.1.0-9-amd64", 1),
    ("6.1.0-18-amd64", "6.1.0-18-cloud-amd64", 0),
    ("6.1.0-18-amd64", "6.1.0", 1),
    ("6.8.0-45-generic", "6.8.0-101-generic", -1),
    ("6.12.38+deb13-amd64", "6.12.41+deb13-amd64", -1),
    ("6.8", "6.8.0", 0),
    ("6.10.10-arch1-1", "6.10.10-arch1-2", -1),
    ("garbage", "6.8.12-4-pve", None),
    ("6.8.12-4-pve", "", None),
    (None, "6.1", None),
    ("6", "6.1", None),
    (b"\xff\xfe", "6.1", None),
])
def test_compare_kernel_release(left, right, expected):
    assert compare_kernel_release(left, right) == expected
    if expected is not None:
        assert compare_kernel_release(right, left) == -expected


@pytest.mark.parametrize("release, minimum, expected", [
    ("6.8.12-4-pve", "6.8", True),
    ("6.8.12-4-pve", "6.14", False),
    ("6.14.8-2-pve", "6.14.8-2-pve", True),
    ("5.14.0-427.el9.x86_64", "5.14.0-503.el9.x86_64", False),
    ("not a kernel", "6.1", None),
])
def test_kernel_release_at_least(release, minimum, expected):
    assert kernel_release_at_least(release, minimum) is expected


def test_sort_releases_orders_by_version_and_puts_garbage_last():
    assert sort_releases(["6.14.8-2-pve", "weird", "6.8.12-4-pve", "6.17.2-1-pve", "6.8.12-4-pve"]) == [
        "6.8.12-4-pve", "6.14.8-2-pve", "6.17.2-1-pve", "weird"]


@FUZZ
@given(st.one_of(st.text(), st.from_regex(r"\d{1,2}\.\d{1,2}(\.\d{1,3})?([-.+~][a-z0-9_]{1,6}){0,4}", fullmatch=True)),
       st.one_of(st.text(), st.from_regex(r"\d{1,2}\.\d{1,2}(\.\d{1,3})?([-.+~][a-z0-9_]{1,6}){0,4}", fullmatch=True)))
def test_compare_kernel_release_fuzz(left, right):
    result = compare_kernel_release(left, right)
    assert result in (-1, 0, 1, None)
    if result is not None:
        assert compare_kernel_release(right, left) == -result
        assert compare_kernel_release(left, left) == 0


# -- boot loader -------------------------------------------------------------------------------------

@pytest.mark.parametrize("present, expected", [
    ({"/etc/kernel/cmdline", "/etc/kernel/proxmox-boot-uuids", "/etc/default/grub"}, "systemd-boot"),
    ({"/etc/kernel/cmdline", "/boot/efi/loader", "/etc/default/grub"}, "systemd-boot"),
    ({"/etc/kernel/cmdline", "/boot/loader/entries/*.conf"}, "systemd-boot"),
    ({"/etc/kernel/cmdline", "/boot/loader/entries/*.conf", "/etc/default/grub", "/etc/redhat-release"}, "bls"),
    ({"/boot/loader/entries/*.conf", "/etc/default/grub", "/etc/redhat-release"}, "bls"),
    ({"/boot/loader/entries/*.conf", "/etc/default/grub"}, "grub"),
    ({"/etc/default/grub", "/etc/redhat-release"}, "grub"),
    ({"/etc/kernel/cmdline", "/etc/default/grub"}, "grub"),
    ({"/etc/default/grub"}, "grub"),
    ({"/etc/kernel/cmdline"}, None),
    (set(), None),
])
def test_detect_bootloader(present, expected):
    assert detect_bootloader(lambda path: path in present) == expected


# -- gather over trees -------------------------------------------------------------------------------

def proxmox_tree(base):
    return write_tree(base, {
        "/proc/sys/kernel/osrelease": "6.8.12-4-pve\n",
        "/proc/sys/kernel/version": PVE_VERSION,
        "/proc/cmdline": PVE_CMDLINE,
        "/proc/sys/kernel/numa_balancing": "1\n",
        "/proc/sys/vm/zone_reclaim_mode": "0\n",
        "/proc/sys/vm/swappiness": "60\n",
        "/sys/kernel/mm/transparent_hugepage/enabled": THP_ENABLED,
        "/sys/kernel/mm/transparent_hugepage/defrag": THP_DEFRAG,
        "/etc/kernel/cmdline": "root=ZFS=rpool/ROOT/pve-1 boot=zfs amd_pstate=active iommu=pt\n",
        "/etc/kernel/proxmox-boot-uuids": "4A1B-2C3D\n",
        "/etc/default/grub": GRUB_DEBIAN,
        "/etc/os-release": OS_RELEASE_PVE8,
        "/usr/lib/sysctl.d/10-numa.conf": "kernel.numa_balancing = 1\n",
        "/etc/sysctl.d/10-numa.conf": "kernel.numa_balancing = 0\n",
        "/usr/lib/sysctl.d/50-default.conf": "vm.swappiness = 30\nvm.zone_reclaim_mode=0\n",
        "/etc/sysctl.d/50-default.conf": "",
        "/run/sysctl.d/60-tuning.conf": "vm.swappiness = 10\n",
        "/etc/sysctl.conf": "#vm.swappiness=1\nvm/zone_reclaim_mode = 1\n",
        "/lib/modules/6.8.12-4-pve": None,
        "/lib/modules/6.14.8-2-pve": None,
        "/boot/vmlinuz-6.8.12-4-pve": b"\x4d\x5a",
        "/boot/vmlinuz-6.17.2-1-pve": b"\x4d\x5a",
        "/boot/loader/entries": None,
    })


def test_gather_proxmox_tree(tmp_path):
    root = Root(proxmox_tree(tmp_path))
    facts = _kernel.gather(root)
    assert facts["release"] == "6.8.12-4-pve"
    assert facts["preempt"] == {"build": "PREEMPT_DYNAMIC", "cmdline": "full", "debugfs": None, "model": "full"}
    assert facts["cmdline"]["params"]["amd_pstate"] == "active"
    assert facts["cmdline"]["raw"] == PVE_CMDLINE.strip()
    configured = facts["configured_cmdline"]
    assert configured["source"] == "/etc/kernel/cmdline"
    assert configured["bootloader"] == "systemd-boot"
    assert configured["raw"] == "root=ZFS=rpool/ROOT/pve-1 boot=zfs amd_pstate=active iommu=pt"
    assert configured["params"]["root"] == "ZFS=rpool/ROOT/pve-1"
    assert facts["sysctl"] == {"numa_balancing": 1, "zone_reclaim_mode": 0, "swappiness": 60}
    assert facts["sysctl_persisted"] == {
        "kernel.numa_balancing": {"value": "0", "file": "/etc/sysctl.d/10-numa.conf"},
        "vm.swappiness": {"value": "10", "file": "/run/sysctl.d/60-tuning.conf"},
        "vm.zone_reclaim_mode": {"value": "1", "file": "/etc/sysctl.conf"},
    }
    assert facts["thp"] == {"enabled": "madvise", "defrag": "madvise"}
    assert facts["installed"] == ["6.8.12-4-pve", "6.14.8-2-pve", "6.17.2-1-pve"]
    assert facts["installed_not_running"] == ["6.14.8-2-pve", "6.17.2-1-pve"]
    assert facts["os_release"] == {"id": "debian", "version_id": "12", "id_like": None,
                                   "pretty_name": "Debian GNU/Linux 12 (bookworm)"}
    assert "tuned_profile" not in facts  # the active tuned profile is cpu.tuned.active_profile (facts/tuned.py)
    assert root.errors == []
    json.dumps(facts)


def test_gather_rhel_bls_tree(tmp_path):
    base = write_tree(tmp_path, {
        "/proc/sys/kernel/osrelease": "5.14.0-427.13.1.el9_4.x86_64\n",
        "/proc/sys/kernel/version": RHEL_VERSION,
        "/proc/cmdline": "BOOT_IMAGE=(hd0,gpt2)/vmlinuz-5.14.0-427.13.1.el9_4.x86_64 root=/dev/mapper/rhel-root ro "
                         "crashkernel=1G-4G:192M,4G-64G:256M,64G-:512M preempt=none\n",
        "/sys/kernel/debug/sched/preempt": SCHED_PREEMPT,
        "/proc/sys/kernel/numa_balancing": "0\n",
        "/proc/sys/vm/zone_reclaim_mode": "0\n",
        "/proc/sys/vm/swappiness": "30\n",
        "/sys/kernel/mm/transparent_hugepage/enabled": "[always] madvise never\n",
        "/sys/kernel/mm/transparent_hugepage/defrag": THP_DEFRAG,
        "/etc/default/grub": GRUB_RHEL,
        "/etc/default/grub.d/90-gpu.cfg": 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX iommu=pt"\n',
        "/etc/redhat-release": "Red Hat Enterprise Linux release 9.4 (Plow)\n",
        "/etc/os-release": OS_RELEASE_RHEL9,
        "/etc/tuned/active_profile": "throughput-performance\n",
        "/boot/loader/entries/abc-5.14.0-427.13.1.el9_4.x86_64.conf": "title Red Hat\n",
        "/boot/vmlinuz-5.14.0-427.13.1.el9_4.x86_64": b"MZ",
        "/boot/vmlinuz-5.14.0-503.11.1.el9_5.x86_64": b"MZ",
        "/boot/vmlinuz-0-rescue-0123456789abcdef": b"MZ",
        "/lib/modules/5.14.0-427.13.1.el9_4.x86_64": None,
    })
    root = Root(base)
    facts = _kernel.gather(root)
    # debugfs is authoritative over preempt= on the cmdline
    assert facts["preempt"] == {"build": "PREEMPT_DYNAMIC", "cmdline": "none", "debugfs": "full", "model": "full"}
    configured = facts["configured_cmdline"]
    assert configured["source"] == "/etc/default/grub"
    assert configured["bootloader"] == "bls"
    assert configured["raw"].endswith("rd.lvm.lv=rhel/swap iommu=pt")
    assert configured["params"]["iommu"] == "pt"
    assert facts["thp"]["enabled"] == "always"
    assert facts["installed"] == ["5.14.0-427.13.1.el9_4.x86_64", "5.14.0-503.11.1.el9_5.x86_64"]
    assert facts["installed_not_running"] == ["5.14.0-503.11.1.el9_5.x86_64"]
    assert facts["os_release"]["id_like"] == "fedora"
    assert "tuned_profile" not in facts  # read once, as cpu.tuned.active_profile (facts/tuned.py)
    # the backquoted GRUB_DISTRIBUTOR is not an error: it does not feed the command line
    assert root.errors == []


def test_gather_grub_cmdline_unevaluable_is_an_error(tmp_path):
    base = write_tree(tmp_path, {"/etc/default/grub": 'GRUB_CMDLINE_LINUX_DEFAULT="quiet $(cat /x)"\n'})
    root = Root(base)
    configured = _kernel.gather(root)["configured_cmdline"]
    assert configured == {"source": "/etc/default/grub", "raw": None, "params": None, "bootloader": "grub"}
    assert any(err["path"] == "/etc/default/grub" and "command substitution" in err["reason"] for err in root.errors)


def test_gather_empty_tree_gives_nulls_and_reasons(tmp_path):
    root = Root(str(tmp_path))
    facts = _kernel.gather(root)
    assert facts["release"] is None and facts["version"] is None
    assert facts["preempt"] == {"build": None, "cmdline": None, "debugfs": None, "model": None}
    assert facts["cmdline"] == {"raw": None, "params": None}
    assert facts["configured_cmdline"] == {"source": None, "raw": None, "params": None, "bootloader": None}
    assert facts["sysctl"] == {"numa_balancing": None, "zone_reclaim_mode": None, "swappiness": None}
    assert facts["sysctl_persisted"] == {}
    assert facts["thp"] == {"enabled": None, "defrag": None}
    assert facts["installed"] == [] and facts["installed_not_running"] == []
    assert facts["os_release"] == {"id": None, "version_id": None, "id_like": None, "pretty_name": None}
    paths = set(err["path"] for err in root.errors)
    assert {"/proc/sys/kernel/osrelease", "/proc/cmdline", "/proc/sys/vm/swappiness",
            "/sys/kernel/mm/transparent_hugepage/enabled", "/usr/lib/os-release"} <= paths
    assert all(err["subsystem"] == "kernel" and err["reason"] for err in root.errors)


def test_gather_hostile_tree(tmp_path):
    base = write_tree(tmp_path, {
        "/proc/sys/kernel/osrelease": "",
        "/proc/sys/kernel/version": b"\xff\xfe\x00garbage",
        "/proc/cmdline": b"\x00\x01\x02 \xff=\xfe",
        "/proc/sys/kernel/numa_balancing": "one\n",
        "/proc/sys/vm/zone_reclaim_mode": b"\x00",
        "/proc/sys/vm/swappiness": "6",
        "/sys/kernel/mm/transparent_hugepage/enabled": "always madvise never\n",
        "/sys/kernel/mm/transparent_hugepage/defrag": b"\xff",
        "/etc/kernel/cmdline": b"\xff\xfe",
        "/etc/os-release": b"\x89PNG\r\n\x1a\n",
        "/etc/sysctl.conf": b"\x00\xff=\x01\nkernel.numa_balancing\n",
        "/boot/vmlinuz-": b"",
        "/lib/modules/README": "not a dir",
    })
    root = Root(base)
    facts = _kernel.gather(root)
    json.dumps(facts)
    assert facts["release"] is None
    assert facts["sysctl"] == {"numa_balancing": None, "zone_reclaim_mode": None, "swappiness": 6}
    assert facts["thp"] == {"enabled": None, "defrag": None}
    assert facts["installed"] == []
    reasons = dict((err["path"], err["reason"]) for err in root.errors)
    assert reasons["/proc/sys/kernel/osrelease"] == "empty file"
    assert facts["preempt"]["build"] is None and facts["preempt"]["model"] is None
    assert "not a kernel version string" in reasons["/proc/sys/kernel/version"]
    assert "not an integer" in reasons["/proc/sys/kernel/numa_balancing"]
    assert "no bracketed selection" in reasons["/sys/kernel/mm/transparent_hugepage/enabled"]


def test_cmdline_is_read_once_per_root(tmp_path):
    from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import iommu as _iommu

    root = Root(str(tmp_path))
    _kernel.gather(root)
    _iommu.gather(root)
    assert [err["path"] for err in root.errors].count("/proc/cmdline") == 1


def test_gather_live_host_does_not_raise():
    root = Root("/")
    facts = _kernel.gather(root)
    json.dumps(facts)
    assert facts["release"] == os.uname().release
    assert isinstance(facts["cmdline"]["params"], dict)
    assert facts["preempt"]["build"] in ("PREEMPT_RT", "PREEMPT_DYNAMIC", "PREEMPT", "none")
    assert facts["os_release"]["id"]


def test_live_and_its_snapshot_agree_for_kernel_cpu_numa_iommu(tmp_path):
    """What the four gatherers read live, once recorded and replayed, gives the same facts and errors."""
    from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import cpu as _cpu
    from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import iommu as _iommu
    from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import numa as _numa
    from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Recorder

    modules = (_kernel, _cpu, _numa, _iommu)
    recorder = Recorder()
    live = Root("/", recorder=recorder)
    live_facts = dict((module.SUBSYSTEM, module.gather(live)) for module in modules)
    snapshot = replay_recording(recorder, tmp_path)
    snapshot_facts = dict((module.SUBSYSTEM, module.gather(snapshot)) for module in modules)
    # processes are live-only by contract (docs/facts.md): a snapshot does not capture them
    assert snapshot_facts["numa"].pop("processes") == []
    live_facts["numa"].pop("processes")
    assert snapshot_facts == live_facts
    assert snapshot.errors == live.errors


# -- boot id and the running kernel's configuration ---------------------------------------------
# The format of /boot/config-<release> as Debian's and Proxmox's kernel packages install it
# (scripts/kconfig writes "CONFIG_X=y", "CONFIG_X=\"text\"" and "# CONFIG_X is not set").
KERNEL_CONFIG = """#
# Automatically generated file; DO NOT EDIT.
# Linux/x86 6.8.12-4-pve Kernel Configuration
#
CONFIG_CC_VERSION_TEXT="gcc (Debian 12.2.0-14) 12.2.0"
CONFIG_NUMA_BALANCING=y
CONFIG_NUMA_BALANCING_DEFAULT_ENABLED=y
# CONFIG_CPU_FREQ_DEFAULT_GOV_PERFORMANCE is not set
CONFIG_CPU_FREQ_DEFAULT_GOV_SCHEDUTIL=y
CONFIG_X86_AMD_PSTATE=y
CONFIG_X86_AMD_PSTATE_DEFAULT_MODE=3
# CONFIG_PREEMPT_NONE is not set
CONFIG_PREEMPT_VOLUNTARY=y
CONFIG_IOMMU_DEFAULT_DMA_LAZY=y
CONFIG_LOCALVERSION=""
"""
BOOT_ID = "3f2a6c1e-9b7d-4e25-8c41-0d6f1a2b3c4d"


def test_parse_kernel_config_keeps_the_options_the_rules_read():
    options = _kernel.parse_kernel_config(KERNEL_CONFIG)
    assert options == {
        "CONFIG_NUMA_BALANCING": "y", "CONFIG_NUMA_BALANCING_DEFAULT_ENABLED": "y",
        "CONFIG_CPU_FREQ_DEFAULT_GOV_PERFORMANCE": "n", "CONFIG_CPU_FREQ_DEFAULT_GOV_SCHEDUTIL": "y",
        "CONFIG_X86_AMD_PSTATE": "y", "CONFIG_X86_AMD_PSTATE_DEFAULT_MODE": "3",
        "CONFIG_PREEMPT_NONE": "n", "CONFIG_PREEMPT_VOLUNTARY": "y", "CONFIG_IOMMU_DEFAULT_DMA_LAZY": "y",
    }
    assert _kernel.default_governor(options) == "schedutil"


@pytest.mark.parametrize("text", ["", "\n\n", "garbage\n", "CONFIG lines? no\n", None, b"CONFIG_X=y"])
def test_parse_kernel_config_without_option_lines_is_none(text):
    assert _kernel.parse_kernel_config(text) is None


def test_gather_boot_id_and_config_from_boot(tmp_path):
    base = write_tree(tmp_path, {
        "/proc/sys/kernel/osrelease": "6.8.12-4-pve\n",
        "/proc/sys/kernel/random/boot_id": BOOT_ID.upper() + "\n",
        "/boot/config-6.8.12-4-pve": KERNEL_CONFIG,
    })
    root = Root(base)
    facts = _kernel.gather(root)
    assert facts["boot_id"] == BOOT_ID
    config = facts["config"]
    assert config["source"] == "/boot/config-6.8.12-4-pve" and config["reason"] is None
    assert config["options"]["CONFIG_NUMA_BALANCING_DEFAULT_ENABLED"] == "y"
    assert config["default_governor"] == "schedutil"
    assert not [err for err in root.errors if "boot_id" in err["path"] or "config" in err["path"]]


def test_gather_config_from_proc_config_gz(tmp_path):
    import gzip

    base = write_tree(tmp_path, {"/proc/sys/kernel/osrelease": "6.1.0-27-amd64\n",
                                 "/proc/config.gz": gzip.compress(KERNEL_CONFIG.encode())})
    config = _kernel.gather(Root(base))["config"]
    assert config["source"] == "/proc/config.gz"
    assert config["options"]["CONFIG_NUMA_BALANCING"] == "y"


@pytest.mark.parametrize("files, reason", [
    ({}, "the running kernel's configuration was not found (/boot/config-6.1.0-27-amd64, /proc/config.gz)"),
    ({"/boot/config-6.1.0-27-amd64": ""}, "/boot/config-6.1.0-27-amd64 holds no CONFIG_ option lines"),
    ({"/proc/config.gz": b"\x1f\x8b\x08garbage"}, "/proc/config.gz is not a gzip-compressed kernel configuration"),
    ({"/proc/config.gz": b"CONFIG_X=y\n"}, "/proc/config.gz is not a gzip-compressed kernel configuration"),
])
def test_gather_config_missing_or_garbage_names_the_file(tmp_path, files, reason):
    tree = {"/proc/sys/kernel/osrelease": "6.1.0-27-amd64\n", "/proc/sys/kernel/random/boot_id": "not-a-uuid\n"}
    tree.update(files)
    root = Root(write_tree(tmp_path, tree))
    facts = _kernel.gather(root)
    assert facts["config"]["options"] is None
    assert facts["config"]["reason"].startswith(reason), facts["config"]
    assert facts["boot_id"] is None
    assert any(err["path"] == "/proc/sys/kernel/random/boot_id" and "not a boot id" in err["reason"]
               for err in root.errors)


def test_gather_config_path_never_leaves_boot(tmp_path):
    base = write_tree(tmp_path, {"/proc/sys/kernel/osrelease": "../../etc/passwd\n", "/etc/passwd": "CONFIG_X=y\n"})
    config = _kernel.gather(Root(base))["config"]
    assert config["source"] is None and config["options"] is None


def test_gather_too_many_grub_d_files_is_unknown(tmp_path):
    """More /etc/default/grub.d/*.cfg files than GRUB_D_MAX: the command line is unknown with one error
    naming the count; none of them is read (issue 40: a directory of thousands was read whole)."""
    files = {"/etc/default/grub": 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n'}
    for index in range(_kernel.GRUB_D_MAX + 1):
        files["/etc/default/grub.d/%04d.cfg" % index] = 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX x%d=1"\n' % index
    root = Root(write_tree(tmp_path, files))
    configured = _kernel.gather(root)["configured_cmdline"]
    assert configured["raw"] is None and configured["params"] is None
    (error,) = [err for err in root.errors if err["path"] == "/etc/default/grub.d"]
    assert "257 *.cfg files, more than the 256 read" in error["reason"]


def test_gather_grub_d_files_up_to_the_bound_are_read(tmp_path):
    files = {"/etc/default/grub": 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n'}
    for index in range(_kernel.GRUB_D_MAX):
        files["/etc/default/grub.d/%04d.cfg" % index] = 'GRUB_CMDLINE_LINUX="$GRUB_CMDLINE_LINUX x%d=1"\n' % index
    root = Root(write_tree(tmp_path, files))
    configured = _kernel.gather(root)["configured_cmdline"]
    assert configured["params"]["x255"] == "1" and "quiet" in configured["params"]
    assert not [err for err in root.errors if err["path"].startswith("/etc/default/grub")]
