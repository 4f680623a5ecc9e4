"""Golden inventories (params.inventory, learn mode) of helpers.baseline_facts' all-passing host.

``golden(change, ...)`` learns the inventory from that document with an ``nvidia-smi topo -m``
matrix added (``with_topology``), then applies each ``change`` to the inventory: the golden host
differs, the audited host stays the healthy one, so only the inventory rule under test fails.
"""
import copy

from helpers.baseline_facts import GPU0, GPU1, NIC, healthy_facts

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.inputs.learn import learn_inventory

#: GPU0 and GPU1 behind one switch (different downstream ports: PXB), the ConnectX NIC next to them
TOPOLOGY = {
    "devices": ["GPU0", "GPU1", "NIC0"],
    "matrix": {"GPU0": {"GPU0": "X", "GPU1": "PXB", "NIC0": "PXB"},
               "GPU1": {"GPU0": "PXB", "GPU1": "X", "NIC0": "PXB"},
               "NIC0": {"GPU0": "PXB", "GPU1": "PXB", "NIC0": "X"}},
    "affinity": {"GPU0": {"cpu": "0-31", "numa": "0", "gpu_numa": None},
                 "GPU1": {"cpu": "0-31", "numa": "0", "gpu_numa": None}},
    "nic_names": {"NIC0": "mlx5_0"},
}


def with_topology(facts):
    facts["nvidia"]["topology"] = copy.deepcopy(TOPOLOGY)


def host_facts():
    facts = healthy_facts()
    with_topology(facts)
    return facts


def golden(*changes):
    inventory = learn_inventory(host_facts())
    for change in changes:
        change(inventory)
    return inventory


def device_of(inventory, address):
    for kind in ("gpus", "nics"):
        for item in inventory[kind]:
            if item["address"] == address:
                return item
    raise KeyError(address)


def set_device(address, key, value):
    def change(inventory):
        device_of(inventory, address)[key] = value
    return change


def set_path(path, value):
    def change(inventory):
        cur = inventory
        for key in path[:-1]:
            cur = cur[key]
        cur[path[-1]] = value
    return change


def add_gpu(address):
    def change(inventory):
        inventory["gpus"].append(dict(device_of(inventory, GPU1), address=address))
    return change


def set_link(a, b, link):
    def change(inventory):
        for item in inventory["topology"]["links"]:
            if {item["a"], item["b"]} == {a, b}:
                item["link"] = link
                return
        raise KeyError((a, b))
    return change


__all__ = ["GPU0", "GPU1", "NIC", "TOPOLOGY", "add_gpu", "device_of", "golden", "host_facts", "set_device",
           "set_link", "set_path", "with_topology"]
