# -*- coding: utf-8 -*-
"""Edits of a copied snapshot tree that tests make between two audits: MaxReadReq in a device's
config space, the boot id, the collection's PCIe boot mechanism (used by the controller's history
test and the self-audit runner's)."""
import os
import struct

#: the files of the collection's PCIe boot mechanism (fix pcie persist: script, unit, its link, udev rule)
PCIE_BOOT_FILES = ("usr/local/sbin/gpuhost-pcie-apply", "etc/systemd/system/gpuhost-pcie.service",
                   "etc/systemd/system/multi-user.target.wants/gpuhost-pcie.service",
                   "etc/udev/rules.d/90-gpuhost-pcie.rules")
CAP_EXP = 0x10


def set_max_read_request(root, address, size):
    """Write MaxReadReq ``size`` into Device Control of ``address``'s PCI Express capability, in the
    copy's config space file (the capability list from the pointer at 0x34; PCIe Base Spec 7.5.3.4)."""
    path = os.path.join(root, "sys", "bus", "pci", "devices", address, "config")
    with open(path, "rb") as handle:
        config = bytearray(handle.read())
    pointer, seen = config[0x34] & 0xFC, set()
    while pointer and pointer not in seen:
        seen.add(pointer)
        if config[pointer] == CAP_EXP:
            (devctl,) = struct.unpack_from("<H", config, pointer + 8)
            devctl = (devctl & ~0x7000) | ((size // 128).bit_length() - 1) << 12
            struct.pack_into("<H", config, pointer + 8, devctl)
            with open(path, "wb") as handle:
                handle.write(bytes(config))
            return
        pointer = config[pointer + 1] & 0xFC
    raise AssertionError("%s has no PCI Express capability in %s" % (address, path))


def set_boot_id(root, boot_id):
    with open(os.path.join(root, "proc", "sys", "kernel", "random", "boot_id"), "w") as handle:
        handle.write(boot_id + "\n")


def boot_id_of(root):
    with open(os.path.join(root, "proc", "sys", "kernel", "random", "boot_id")) as handle:
        return handle.read().strip()


def remove_pcie_boot_mechanism(root):
    for relative in PCIE_BOOT_FILES:
        os.unlink(os.path.join(root, relative))
