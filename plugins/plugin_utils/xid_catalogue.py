# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What an NVIDIA Xid code means and what to do about it (judged on the controller).

The descriptions follow NVIDIA's Xid catalogue (:data:`SOURCE`, "Analyzing Xid Errors with the Xid
Catalog" for Ampere and newer GPUs, and the Xid error listing of the same guide); the class and
the action are this collection's summary of the catalogue's resolution buckets (restart the
application, reset the GPU, reboot the node, check the hardware), written for an operator:

* ``hardware``: the GPU, its memory, its links or its firmware failed; the GPU or the node needs
  a reset, a reboot or service. Judged by HEALTH-001.
* ``application``: an application (or the driver on its behalf) faulted; the GPU stays usable
  and the application must be restarted. Judged by HEALTH-002, with every code not listed here.

Severity is the weight of one event for a report reader: ``critical`` (the GPU is lost or the
data it computed cannot be trusted), ``high`` (reset the GPU soon), ``medium`` (plan a reset,
watch it), ``low`` (application level).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

#: NVIDIA's catalogue, the authority for every entry below
SOURCE = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"
#: the guide the catalogue belongs to (descriptions of each code, causes)
GUIDE = "https://docs.nvidia.com/deploy/xid-errors/index.html"

#: code -> (class, severity, meaning, action)
XID_CATALOGUE = {
    8: ("application", "low", "GPU stopped processing (channel idle timeout)",
        "restart the application; if it repeats with several applications, run the GPU diagnostics (dcgmi diag)"),
    13: ("application", "low", "graphics engine exception",
         "usually an illegal instruction or out-of-range access of the application: restart it; if several "
         "applications hit it, run the GPU diagnostics (dcgmi diag)"),
    31: ("application", "low", "GPU memory page fault",
         "an application accessed an invalid GPU address: restart it and debug it (compute-sanitizer)"),
    32: ("application", "medium", "invalid or corrupted push buffer stream",
         "restart the application; if it repeats, check the PCIe path (AER errors, PCI-007) and system memory"),
    43: ("application", "low", "GPU stopped processing (application fault, the GPU stays healthy)",
         "restart the application"),
    45: ("application", "low", "preemptive cleanup after earlier errors",
         "follow the Xid logged before it on the same GPU"),
    46: ("hardware", "high", "GPU stopped processing",
         "drain the GPU and reset it (nvidia-smi -r); service it if it repeats"),
    48: ("hardware", "critical", "uncorrectable double bit ECC error in GPU memory",
         "the affected application is terminated; drain and reset the GPU so the row is remapped (Xid 63); "
         "replace the GPU if row remapping fails (Xid 64, remapped_rows.failure)"),
    61: ("hardware", "high", "internal micro-controller breakpoint or warning",
         "reset the GPU or reboot the node; report it to NVIDIA support if it repeats"),
    62: ("hardware", "high", "internal micro-controller halt",
         "reset the GPU or reboot the node; report it to NVIDIA support if it repeats"),
    63: ("hardware", "medium", "ECC page retirement or row remapping recording event",
         "a memory row was marked for remapping (a page retired on older GPUs): reset the GPU to apply it"),
    64: ("hardware", "critical", "ECC page retirement or row remapper recording failure",
         "reset the GPU; if nvidia-smi -q -d ROW_REMAPPER still shows a remapping failure, replace the GPU"),
    68: ("application", "low", "video decoder (NVDEC) exception", "restart the application"),
    69: ("application", "low", "graphics engine class error", "restart the application"),
    74: ("hardware", "high", "NVLink error",
         "reset the GPU; check the link's error counters (nvidia-smi nvlink -e), the NVLink bridge or "
         "NVSwitch baseboard and its seating; report it if it repeats"),
    79: ("hardware", "critical", "GPU has fallen off the bus",
         "the GPU stopped answering on PCIe: drain and reboot the node; check the slot, riser, power, cooling "
         "and the AER errors of its PCIe path"),
    92: ("hardware", "medium", "high single-bit ECC error rate",
         "correctable memory errors at a high rate: watch the remapped rows and plan a GPU reset"),
    94: ("hardware", "medium", "contained ECC error",
         "an uncorrectable memory error was contained to the application using it: restart that application; "
         "reset the GPU when it is drained so the row is remapped"),
    95: ("hardware", "critical", "uncontained ECC error",
         "the memory error could not be contained: every application on the GPU is affected; drain and reset "
         "the GPU"),
    109: ("application", "low", "context switch timeout", "restart the application; if it repeats, reset the GPU"),
    119: ("hardware", "high", "GSP RPC timeout (the GPU System Processor stopped answering the driver)",
          "drain and reset the GPU or reboot the node; update the driver if it repeats"),
    120: ("hardware", "high", "GSP error (the GPU System Processor reported an error)",
          "drain and reset the GPU or reboot the node; update the driver if it repeats"),
    154: ("hardware", "high", "GPU recovery action changed",
          "do the recovery the message names (GPU reset, node reboot, drain peer-to-peer)"),
}

#: the version of NVIDIA's catalogue the table above follows (the date it was read and the newest
#: code it lists). To update: compare :data:`XID_CATALOGUE` with :data:`SOURCE` (its spreadsheet
#: download), add or change entries, move this date and code, and regenerate docs/rules.md.
CATALOGUE_VERSION = "NVIDIA Xid catalogue as read 2026-12-04 (codes up to 154)"

#: NVSwitch SXid events: NVIDIA's Fabric Manager user guide ("NVSwitch SXid errors") sorts them in
#: non-fatal (the switch corrected it or only one link's traffic was affected) and fatal (the
#: NVSwitch or its links must be reset: GPU traffic through it stalls, CUDA jobs abort with Xid 45);
#: the driver writes the category on the SXid line itself ("Fatal," / "Non-fatal,"), which is what
#: is judged. An SXid whose lines state no category is judged as fatal until it is looked up.
SXID_SOURCE = "https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html"
SXID_ACTIONS = {
    "fatal": ("critical", "the NVSwitch and the GPUs behind it need a reset: drain the node, restart Fabric Manager "
                          "or reboot; check the NVLink trays and cabling and report it if it repeats"),
    "non-fatal": ("medium", "no action while it stays rare; watch its count, and check the named link (nvidia-smi "
                            "nvlink -e on its GPUs) if it repeats"),
    None: ("critical", "the log states no category for this SXid: look it up in NVIDIA's Fabric Manager user guide "
                       "(%s) and treat it as fatal until then" % SXID_SOURCE),
}

#: what an unlisted code is treated as
UNLISTED = ("application", "low", "not in this collection's table",
            "look the code up in NVIDIA's Xid catalogue (%s)" % SOURCE)


def describe(code):
    """``{"code", "class", "severity", "meaning", "action", "listed"}`` for an Xid code (int or text)."""
    try:
        number = int(code)
    except (TypeError, ValueError):
        number = None
    entry = XID_CATALOGUE.get(number)
    klass, severity, meaning, action = entry or UNLISTED
    return {"code": number, "class": klass, "severity": severity, "meaning": meaning, "action": action,
            "listed": entry is not None}


def describe_sxid(code, category):
    """``{"code", "fatal", "severity", "meaning", "action"}`` of an SXid event whose log line states
    ``category`` (``"fatal"``, ``"non-fatal"`` or ``None``)."""
    try:
        number = int(code)
    except (TypeError, ValueError):
        number = None
    category = category if category in ("fatal", "non-fatal") else None
    severity, action = SXID_ACTIONS[category]
    return {"code": number, "fatal": category != "non-fatal", "severity": severity,
            "meaning": {"fatal": "fatal NVSwitch error", "non-fatal": "non-fatal NVSwitch error"}.get(
                category, "NVSwitch error of unstated category"), "action": action}
