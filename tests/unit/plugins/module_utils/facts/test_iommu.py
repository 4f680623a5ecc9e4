# -*- coding: utf-8 -*-
"""IOMMU facts: unit type, default domains per group, cmdline switches, passthrough; trees and live host."""

from __future__ import absolute_import, division, print_function

import json

import pytest

from helpers.tree import write_tree

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import iommu as _iommu
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import kernel as _kernel
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.iommu import cmdline_switches, iommu_type, passthrough
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.kernel import parse_cmdline
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root


@pytest.mark.parametrize("names, expected", [
    (["ivhd0", "ivhd1", "ivhd2", "ivhd3"], "AMD-Vi"),
    (["dmar0", "dmar1"], "DMAR"),
    (["virtio-iommu"], None),
    ([], None),
    (None, None),
])
def test_iommu_type(names, expected):
    assert iommu_type(names) == expected


def test_cmdline_switches():
    params = parse_cmdline("quiet amd_iommu=on iommu=pt iommu.passthrough=1 intel-iommu=off")
    assert cmdline_switches(params) == {"iommu": "pt", "amd_iommu": "on", "intel_iommu": "off",
                                        "iommu.passthrough": "1"}
    assert cmdline_switches({}) == {"iommu": None, "amd_iommu": None, "intel_iommu": None, "iommu.passthrough": None}
    assert cmdline_switches(None)["iommu"] is None


@pytest.mark.parametrize("types, expected", [
    (["identity"] * 4, True),
    (["identity", "DMA-FQ"], False),
    (["identity", None], None),
    (["DMA", None], False),
    ([], None),
    (None, None),
])
def test_passthrough(types, expected):
    assert passthrough(types) is expected


def amd_tree(base, group_types, cmdline="BOOT_IMAGE=/vmlinuz root=/dev/sda1 amd_iommu=on iommu=pt\n"):
    files = {"/proc/cmdline": cmdline}
    for unit in ("ivhd0", "ivhd1", "ivhd2", "ivhd3"):
        files["/sys/class/iommu/%s/amd-iommu/cap" % unit] = "0x00000000\n"
    for group, kind in group_types.items():
        files["/sys/kernel/iommu_groups/%d/devices" % group] = None
        if kind is not None:
            files["/sys/kernel/iommu_groups/%d/type" % group] = kind + "\n"
    return write_tree(base, files)


def test_gather_amd_passthrough(tmp_path):
    root = Root(amd_tree(tmp_path, dict((group, "identity") for group in range(12))))
    facts = _iommu.gather(root)
    json.dumps(facts)
    assert facts == {
        "enabled": True, "type": "AMD-Vi", "groups": 12, "default_domain": {"identity": 12},
        "cmdline": {"iommu": "pt", "amd_iommu": "on", "intel_iommu": None, "iommu.passthrough": None},
        "passthrough": True,
    }
    assert root.errors == []


def test_gather_mixed_domains_and_old_kernel_without_type(tmp_path):
    types = {0: "DMA-FQ", 1: "DMA-FQ", 2: "identity", 3: "DMA", 10: None}
    facts = _iommu.gather(Root(amd_tree(tmp_path, types, cmdline="quiet\n")))
    assert facts["groups"] == 5
    assert facts["default_domain"] == {"DMA": 1, "DMA-FQ": 2, "identity": 1}
    assert facts["passthrough"] is False
    assert facts["cmdline"]["iommu"] is None


def test_gather_intel_dmar(tmp_path):
    files = {"/proc/cmdline": "intel_iommu=on\n", "/sys/class/iommu/dmar0/intel-iommu/version": "1:0\n",
             "/sys/class/iommu/dmar1/intel-iommu/version": "1:0\n",
             "/sys/kernel/iommu_groups/0/type": "DMA\n"}
    facts = _iommu.gather(Root(write_tree(tmp_path, files)))
    assert (facts["type"], facts["enabled"], facts["passthrough"]) == ("DMAR", True, False)
    assert facts["cmdline"]["intel_iommu"] == "on"


def test_gather_iommu_off(tmp_path):
    root = Root(write_tree(tmp_path, {"/proc/cmdline": "amd_iommu=off\n", "/sys/kernel/iommu_groups": None}))
    facts = _iommu.gather(root)
    assert facts == {"enabled": False, "type": None, "groups": 0, "default_domain": {},
                     "cmdline": {"iommu": None, "amd_iommu": "off", "intel_iommu": None, "iommu.passthrough": None},
                     "passthrough": None}
    assert root.errors == []


def test_gather_hostile_and_empty(tmp_path):
    base = write_tree(tmp_path, {"/proc/cmdline": b"\xff\xfe\x00",
                                 "/sys/kernel/iommu_groups/0/type": "",
                                 "/sys/kernel/iommu_groups/notagroup/type": "identity\n"})
    root = Root(base)
    facts = _iommu.gather(root)
    json.dumps(facts)
    assert facts["groups"] == 1 and facts["default_domain"] == {} and facts["passthrough"] is None
    assert [err["reason"] for err in root.errors] == ["empty file"]

    empty = Root(str(tmp_path / "nothing"))
    facts = _iommu.gather(empty)
    assert facts["enabled"] is False and facts["cmdline"]["iommu"] is None
    assert [(err["subsystem"], err["path"]) for err in empty.errors] == [("iommu", "/proc/cmdline")]


def test_cmdline_shared_with_kernel_gatherer(tmp_path):
    root = Root(amd_tree(tmp_path, {0: "identity"}))
    kernel = _kernel.gather(root)
    facts = _iommu.gather(root)
    assert facts["cmdline"]["iommu"] == kernel["cmdline"]["params"]["iommu"] == "pt"


def test_gather_live_host():
    root = Root("/")
    facts = _iommu.gather(root)
    json.dumps(facts)
    assert facts["enabled"] == bool(facts["groups"])
    assert sum(facts["default_domain"].values()) <= facts["groups"]
    assert not [err for err in root.errors if err["subsystem"] == "iommu"]
