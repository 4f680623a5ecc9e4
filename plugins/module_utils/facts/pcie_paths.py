# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Peer-to-peer paths through the PCIe tree, from the ``pci.devices`` facts.

Pure functions over the facts' device mappings (``address``, ``upstream``, ``pcie.port_type``,
``error``). Rule PCI-006 (through ``plugin_utils/derive/derive.py`` on the controller) and the
``pcie_tune`` fix (on the host, ``acs: auto``) must agree on which bridges sit between two
peers, so the one definition lives here, on the host side, where both can import it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def port_type(device):
    """``pcie.port_type`` of a device mapping, or ``None``."""
    pcie = device.get("pcie") if isinstance(device, dict) else None
    return pcie.get("port_type") if isinstance(pcie, dict) else None


def peer_bridges(gpus, nics, by_addr):
    """``(bridges, unresolved)`` for GPU-GPU and GPU-NIC peer traffic.

    ``bridges`` maps the address of every bridge that such traffic crosses below the point
    where the two devices' upstream paths split to the set of peer addresses behind it. Only
    switch downstream ports redirect peer traffic that would otherwise turn around inside
    the switch (root ports send it through the root complex anyway), so bridges known to be
    another port type are left out; a bridge whose type is unknown is kept when it carries a
    read error (so the error is reported), and a path entry missing from ``by_addr`` is kept
    (the caller names it). ``unresolved`` lists peers whose upstream path is unknown.
    """
    bridges = {}
    unresolved = []
    for i, a in enumerate(gpus):
        for b in list(gpus[i + 1:]) + list(nics):
            ua, ub = a.get("upstream"), b.get("upstream")
            if not isinstance(ua, list) or not isinstance(ub, list):
                for dev in (a, b):
                    if not isinstance(dev.get("upstream"), list) and dev["address"] not in unresolved:
                        unresolved.append(dev["address"])
                continue
            common = 0
            while common < min(len(ua), len(ub)) and ua[common] == ub[common]:
                common += 1
            for side, path in ((a, ua[common:]), (b, ub[common:])):
                for addr in path:
                    bridge = by_addr.get(addr)
                    port = port_type(bridge) if bridge else None
                    if bridge is not None and port not in (None, "downstream_port"):
                        continue
                    if bridge is not None and port is None and not bridge.get("error"):
                        continue
                    # name the devices behind the bridge, not every device it talks to
                    bridges.setdefault(addr, set()).add(side["address"])
    return bridges, unresolved
