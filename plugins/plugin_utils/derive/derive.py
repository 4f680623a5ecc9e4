# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Relations between facts that a jmespath query cannot express on its own.

:func:`derive` returns a copy of the facts document with a ``derived`` key (every key is
documented in ``docs/rules.md``): PCIe paths between peer GPUs and NICs (ACS, MaxPayload,
AER), the NUMA placement of GPUs versus LXC container cpusets, kernel releases installed
but not booted, running versus configured command line, and per-GPU values the NVIDIA
rules compare. Pure functions of (facts, params): no I/O, never raises on odd facts;
anything that cannot be worked out is ``None`` and, where useful, a ``reason`` says why.

This module is the assembler and the parameter contract (:data:`REQUIRED_PARAMS`); each area
is a module of its own: ``derive_cpu.py``, ``derive_kernel.py``, ``derive_pcie.py``,
``derive_nvidia.py``, ``derive_lxc.py`` (with ``derive_numa.py``), ``derive_inventory.py``,
``derive_health.py``, ``derive_counters.py`` and ``derive_validation.py``; ``derive_common.py`` holds the helpers they share.
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_counters import PARAMS as COUNTER_PARAMS
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_counters import derive_counters
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_cpu import _cpu
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_health import derive_health
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_inventory import derive_inventory
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_kernel import _kernel
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_lxc import _lxc
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_nvidia import _nvidia
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_pcie import _devices, _pcie
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_validation import PARAMS as VALIDATION_PARAMS
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_validation import derive_validation

__metaclass__ = type

#: parameters :func:`derive` reads; every profile must define them
REQUIRED_PARAMS = ("idle_latency_max_us", "nic_min_link_width", "power_limit_policy", "nvidia_driver_min",
                   "lxc_host_reserve_gib_per_node", "swappiness_max", "max_read_request_bytes_gpu",
                   "max_read_request_bytes_nic") + COUNTER_PARAMS + VALIDATION_PARAMS


def derive(facts, params):
    """A shallow copy of ``facts`` with the ``derived`` key added."""
    facts = facts if isinstance(facts, dict) else {}
    params = params if isinstance(params, dict) else {}
    doc = dict(facts)
    devices = _devices(facts)
    by_addr = dict((d["address"], d) for d in devices or [])
    nvidia = _nvidia(facts, params, by_addr, devices is not None)
    gpus_by_index = dict((g["index"], g) for g in nvidia["gpus"] or [] if isinstance(g.get("index"), int))
    doc["derived"] = {
        "cpu": _cpu(facts, params),
        "kernel": _kernel(facts, params),
        "pcie": _pcie(facts, params),
        "nvidia": nvidia,
        "lxc": _lxc(facts, params, gpus_by_index),
        "inventory": derive_inventory(facts, params),  # golden inventory of learn mode (INV-*)
    }
    doc["derived"]["health"] = derive_health(facts, params, doc["derived"])  # plugin_utils/derive/derive_health.py
    # error counters over the window of the audit history (plugins/plugin_utils/derive/derive_counters.py)
    doc["derived"]["counters"] = derive_counters(facts, params, doc["derived"])
    # what validate.yml measured (facts["measure"]) against what it is compared to (derive_validation.py)
    doc["derived"]["validation"] = derive_validation(facts, params)
    return doc
