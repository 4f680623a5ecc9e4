# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""HCA firmware and board of an RDMA device (``health.rdma.devices[].fw_ver``, ``board_id``, ``hca_type``;
issue 21). Real values and their sources: tests/fixtures/health/README.md."""

import os

import pytest

from helpers.tree import write_tree

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.health import gather, parse_ib_identity
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root

NIC_DEV = "/sys/devices/pci0000:40/0000:40:03.1/0000:45:00.0"
IB = NIC_DEV + "/infiniband/mlx5_0"


@pytest.mark.parametrize("name, text, expected", [
    ("fw_ver", "28.42.1000\n", "28.42.1000"), ("fw_ver", "16.35.4030\n", "16.35.4030"),
    ("fw_ver", "2.7.700\n", "2.7.700"), ("board_id", "MT_0000000838\n", "MT_0000000838"),
    ("board_id", "MSF0010110035\n", "MSF0010110035"), ("hca_type", "MT4129\n", "MT4129"),
    ("fw_ver", "", None), ("fw_ver", "latest\n", None), ("fw_ver", "28.42.1000; reboot\n", None),
    ("fw_ver", "9" * 400, None), ("board_id", "\x1b[31mMT\n", None), ("board_id", "A" * 33, None),
    ("hca_type", None, None), ("node_guid", "a088:c203:007e:1dba", None),
])
def test_parse_ib_identity(name, text, expected):
    assert parse_ib_identity(name, text) == expected


def _root(tmp_path, values):
    files = {NIC_DEV + "/vendor": "0x15b3\n", NIC_DEV + "/class": "0x020700\n",
             IB + "/ports/1/state": "4: ACTIVE\n", IB + "/ports/1/phys_state": "5: LinkUp\n",
             IB + "/ports/1/rate": "400 Gb/sec (4X NDR)\n", IB + "/ports/1/link_layer": "InfiniBand\n"}
    files.update(dict((IB + "/" + k, v) for k, v in values.items()))
    base = write_tree(tmp_path, files)
    os.makedirs(os.path.join(base, "sys/bus/pci/devices"))
    os.makedirs(os.path.join(base, "sys/class/infiniband"))
    os.symlink("../../devices/pci0000:40/0000:40:03.1/0000:45:00.0/infiniband/mlx5_0",
               os.path.join(base, "sys/class/infiniband/mlx5_0"))
    os.symlink("../../../0000:45:00.0", os.path.join(base, IB.lstrip("/"), "device"))
    return Root(base)


def test_gather_reads_firmware_and_board(tmp_path):
    root = _root(tmp_path, {"fw_ver": "28.42.1000\n", "board_id": "MT_0000000838\n", "hca_type": "MT4129\n"})
    (dev,) = gather(root)["rdma"]["devices"]
    assert root.errors == []
    assert (dev["fw_ver"], dev["board_id"], dev["hca_type"]) == ("28.42.1000", "MT_0000000838", "MT4129")


def test_gather_without_the_attributes_is_absent_not_an_error(tmp_path):
    # software providers (rxe, siw) have no firmware files
    root = _root(tmp_path, {})
    (dev,) = gather(root)["rdma"]["devices"]
    assert root.errors == []
    assert (dev["fw_ver"], dev["board_id"], dev["hca_type"]) == (None, None, None)


def test_gather_garbage_firmware_is_null_with_an_error_naming_the_file(tmp_path):
    root = _root(tmp_path, {"fw_ver": "\x00\x01garbage" * 10, "board_id": "MT_0000000838\n"})
    (dev,) = gather(root)["rdma"]["devices"]
    assert dev["fw_ver"] is None and dev["board_id"] == "MT_0000000838"
    (error,) = [e for e in root.errors if e["path"].endswith("/fw_ver")]
    assert error["path"] == "/sys/class/infiniband/mlx5_0/fw_ver" and "not a fw_ver value" in error["reason"]


# -- nv-fabricmanager --version (health.fabric_manager.version) ------------------------------------
FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))), "fixtures", "health")


def _fixture(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


@pytest.mark.parametrize("text, expected", [
    (_fixture("nv-fabricmanager-version.txt"), "535.161.08"),
    ("Fabric Manager version is : 450.102.04\n", "450.102.04"),
    ("Fabric Manager version is: 580.95.05", "580.95.05"),
    ("", None), ("Fabric Manager version is : unknown\n", None), ("nv-fabricmanager: command not found\n", None),
    ("Fabric Manager version is : 535.161.08; rm -rf /\n", None), ("\x00" * 10000, None), (None, None),
    ("x" * 5000 + "\nFabric Manager version is : 535.161.08\n", None),   # only the start of the output is read
])
def test_parse_fabricmanager_version(text, expected):
    from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.health import parse_fabricmanager_version
    assert parse_fabricmanager_version(text) == expected
