# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fingerprint of the guest state a fix could touch, for the check-mode guard.

Runs on the test guest (python3, standard library). ``save FILE`` stores one
SHA-256 per item; ``compare FILE`` prints, as JSON, the items whose hash changed,
appeared or disappeared since then. The items:

* every readable file under /proc/sys (the sysctl module writes there), except
  the counters listed in VOLATILE_SYSCTL that move on their own;
* the configuration space of every PCI function (/sys/bus/pci/devices/*/config,
  4096 bytes as root), with the status registers that hardware updates by itself
  masked (PCI_STATUS, EXPRESS_STATUS);
* cpufreq policy and cpuidle ``disable`` files of every CPU (cpu_power);
* every file and symbolic link under /etc, /usr/local/sbin and /boot/grub
  (sysctl.d, systemd units and wants links, udev rules, /etc/default/grub,
  grub.cfg, the boot scripts).

The baseline file lives under /run (tmpfs, outside every fingerprinted tree).
"""
from __future__ import absolute_import, division, print_function

import glob
import hashlib
import json
import os
import stat
import sys

# /proc/sys entries that change without anyone writing them: counters of
# dentries, inodes, open files and ptys, the last PID, the random UUID and the
# entropy estimate. Found by reading every /proc/sys file of an idle guest
# before and after an SSH login; nothing else moved.
VOLATILE_SYSCTL = (
    "/proc/sys/fs/dentry-state",
    "/proc/sys/fs/file-nr",
    "/proc/sys/fs/inode-nr",
    "/proc/sys/fs/inode-state",
    "/proc/sys/kernel/ns_last_pid",
    "/proc/sys/kernel/pty/nr",
    "/proc/sys/kernel/random/",
)
# The same by name under a directory: kernels before 5.13 (bullseye's 5.10) list each CPU's
# scheduler domains in /proc/sys/kernel/sched_domain, where the scheduler itself updates
# max_newidle_lb_cost at every idle balance (seen moving between two fingerprints of an idle guest).
VOLATILE_SYSCTL_NAMES = (
    ("/proc/sys/kernel/sched_domain/", "max_newidle_lb_cost"),
)
# sysctl files whose read has side effects or blocks: never read them.
UNREADABLE_SYSCTL = (
    "/proc/sys/vm/compact_memory",
    "/proc/sys/vm/drop_caches",
    "/proc/sys/vm/stat_refresh",
    "/proc/sys/kernel/sysrq-trigger",
    "/proc/sys/net/ipv4/route/flush",
    "/proc/sys/net/ipv6/route/flush",
)
# (offset, mask of bits that may change by themselves) in type-0/1 headers and the
# Express capability: Status (interrupt status, error bits), the Express Device
# Status (transactions pending, error detected) and Link Status / Slot Status.
PCI_STATUS = (0x06, 0x07)
EXPRESS_STATUS = (0x0A, 0x0B, 0x12, 0x13, 0x1A, 0x1B, 0x32, 0x33)

SYSFS_CPU_FILES = (
    "/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor",
    "/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_min_freq",
    "/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_max_freq",
    "/sys/devices/system/cpu/cpu[0-9]*/cpufreq/energy_performance_preference",
    "/sys/devices/system/cpu/cpufreq/boost",
    "/sys/devices/system/cpu/cpu[0-9]*/cpuidle/state[0-9]*/disable",
)
TREES = ("/etc", "/usr/local/sbin", "/boot/grub")


def digest(data):
    return hashlib.sha256(data).hexdigest()


def read(path):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def express_offset(config):
    """Offset of the PCI Express capability in CONFIG, or None."""
    if len(config) < 0x40 or not config[0x06] & 0x10:
        return None
    pos = config[0x34] & 0xFC
    seen = set()
    while pos and pos not in seen and pos + 2 <= min(len(config), 256):
        seen.add(pos)
        if config[pos] == 0x10:
            return pos
        pos = config[pos + 1] & 0xFC
    return None


def masked_config(config):
    buf = bytearray(config)
    for offset in PCI_STATUS:
        if offset < len(buf):
            buf[offset] = 0
    cap = express_offset(config)
    if cap is not None:
        for offset in EXPRESS_STATUS:
            if cap + offset < len(buf):
                buf[cap + offset] = 0
    return bytes(buf)


def sysctl_items(items):
    for dirpath, dirnames, filenames in os.walk("/proc/sys"):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            if path in UNREADABLE_SYSCTL or any(path.startswith(v) for v in VOLATILE_SYSCTL if v.endswith("/")) \
                    or path in VOLATILE_SYSCTL \
                    or any(path.startswith(top) and name == base for top, base in VOLATILE_SYSCTL_NAMES):
                continue
            data = read(path)
            if data is not None:
                items[path] = digest(data)


def pci_items(items):
    for path in sorted(glob.glob("/sys/bus/pci/devices/*/config")):
        data = read(path)
        if data is not None:
            items[path] = digest(masked_config(data))


def cpu_items(items):
    for pattern in SYSFS_CPU_FILES:
        for path in sorted(glob.glob(pattern)):
            data = read(path)
            if data is not None:
                items[path] = digest(data)


def tree_items(items):
    for top in TREES:
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames.sort()
            # a link or file under a directory: the directory itself is not hashed, its entries are
            for name in sorted(filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]):
                path = os.path.join(dirpath, name)
                try:
                    info = os.lstat(path)
                except OSError:
                    continue
                if stat.S_ISLNK(info.st_mode):
                    items[path] = "link:" + os.readlink(path)
                elif stat.S_ISREG(info.st_mode):
                    data = read(path)
                    mode = "%o:%d:%d:" % (stat.S_IMODE(info.st_mode), info.st_uid, info.st_gid)
                    items[path] = mode + (digest(data) if data is not None else "unreadable")


def fingerprint():
    items = {}
    sysctl_items(items)
    pci_items(items)
    cpu_items(items)
    tree_items(items)
    return items


def main(argv):
    if len(argv) != 3 or argv[1] not in ("save", "compare"):
        print("usage: fingerprint.py save|compare FILE", file=sys.stderr)
        return 2
    now = fingerprint()
    if argv[1] == "save":
        os.makedirs(os.path.dirname(argv[2]) or ".", exist_ok=True)
        with open(argv[2], "w") as handle:
            json.dump(now, handle, sort_keys=True)
        print(json.dumps({"saved": argv[2], "items": len(now)}))
        return 0
    with open(argv[2]) as handle:
        then = json.load(handle)
    print(json.dumps({
        "compared": len(set(then) & set(now)),
        "changed": sorted(path for path in set(then) & set(now) if then[path] != now[path]),
        "added": sorted(set(now) - set(then)),
        "removed": sorted(set(then) - set(now)),
        "counts": {
            "sysctl": sum(1 for path in now if path.startswith("/proc/sys/")),
            "pci": sum(1 for path in now if path.startswith("/sys/bus/pci/")),
            "cpu": sum(1 for path in now if path.startswith("/sys/devices/system/cpu/")),
            "files": sum(1 for path in now if not path.startswith(("/proc/", "/sys/"))),
        },
    }, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
