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

#: the action of the NVLink 5 Xids 144-150 (B100, B200, GB200 and later)
_NVLINK5 = ("the NVLink 5 unit named in the line reported an error; NVIDIA's action depends on its registers "
            "(the catalogue's 'XID 144-150 Decode' sheet, WORKFLOW_NVLINK5_ERR): drain the GPU and reset it, check "
            "the link's error counters (nvidia-smi nvlink -e) and its peer (NVSwitch tray, cable), and report it if "
            "it repeats")

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
    140: ("hardware", "critical", "unrecovered ECC error (an uncorrectable memory error escaped containment)",
          "drain and reset the GPU; the data of the applications on it cannot be trusted"),
    141: ("application", "low", "CUDA fast path error", "no action (NVIDIA: ignore); restart the application if it failed"),
    142: ("application", "low", "video encoder (NVENC3) error",
          "restart the application; report it to NVIDIA support if it repeats"),
    143: ("hardware", "high", "GPU initialization error",
          "reset the GPU or reboot the node; check the driver and firmware versions, service the GPU if it repeats"),
    144: ("hardware", "high", "NVLink SAW (NVLink 5 switch-adapter) error", _NVLINK5),
    145: ("hardware", "high", "NVLink RLW (NVLink 5 receive/link wrapper) error", _NVLINK5),
    146: ("hardware", "high", "NVLink TLW (NVLink 5 transmit/link wrapper) error", _NVLINK5),
    147: ("hardware", "high", "NVLink TREX error", _NVLINK5),
    148: ("hardware", "high", "NVLink NVLPW_CTRL error", _NVLINK5),
    149: ("hardware", "high", "NVLink NETIR error (link or peer device)", _NVLINK5),
    150: ("hardware", "high", "NVLink MSE (NVLink firmware) error", _NVLINK5),
    151: ("application", "low", "key rotation error (confidential computing)", "restart the virtual machine"),
    154: ("hardware", "high", "GPU recovery action changed",
          "do the recovery the message names (GPU reset, node reboot, drain peer-to-peer)"),
    155: ("application", "medium", "NVLink taken down on purpose (a software-defined link down, sleep included)",
          "reset the GPU to bring its links back when the link was not meant to stay down"),
    156: ("hardware", "medium", "resource retirement event (a failing GPU resource was retired)",
          "reset the GPU when it is drained to apply the retirement"),
    157: ("hardware", "high", "resource retirement failure (no spare left to retire a failing resource)",
          "no action at once (NVIDIA: ignore); watch the GPU's memory errors and remapped rows and plan its service"),
    158: ("hardware", "high", "GPU fatal timeout", "drain and reset the GPU; reboot the node if the reset fails"),
    159: ("hardware", "medium", "CHI non-data error on the chip-to-chip (C2C) link",
          "usually a consequence of another fault: follow the Xid logged with it; check the UVM driver's messages"),
    160: ("application", "low", "channel retirement event", "no action (NVIDIA: ignore)"),
    161: ("application", "low", "channel retirement failure", "no action (NVIDIA: ignore)"),
}

#: the NVLink 5 Xids, whose line states the driver's fatal/non-fatal word (:func:`describe`): the
#: entries above with the NVLink 5 action
NVLINK5_CODES = frozenset(code for code, entry in XID_CATALOGUE.items() if entry[3] is _NVLINK5)
#: severity of an NVLink 5 Xid by the word its line states
NVLINK5_STATED = {"fatal": "critical", "non-fatal": "medium"}

#: the version of NVIDIA's catalogue the table above follows (the date it was read and the newest
#: code it lists). To update: compare :data:`XID_CATALOGUE` with :data:`SOURCE` (its spreadsheet
#: download), add or change entries, move this date and code, and regenerate docs/rules.md.
CATALOGUE_VERSION = ("NVIDIA Xid catalogue (Analyzing Xid Errors with the Xid Catalog, undated edition with R575 "
                     "entries) as read 2026-12-06 (codes up to 161)")

#: NVSwitch SXid events. NVIDIA's Fabric Manager user guide (:data:`SXID_SOURCE`, appendix "NVSwitch
#: SXid errors": non-fatal, fatal, always fatal and other notable SXids) sorts each code in a
#: category; the driver also writes the category of each event on its SXid line ("Fatal," /
#: "Non-fatal,"), which is the driver's judgement of that event and wins over the table (a code the
#: guide lists as non-fatal can be logged as fatal, as 12028 is on HGX H100). Severity of an event:
#:
#: * ``critical``: fatal (the line says Fatal, or it states nothing and the guide lists the code as
#:   fatal or always fatal): the NVLink traffic through the switch stalls until the switch and the
#:   GPUs behind it are reset. HEALTH-014.
#: * ``high`` / ``medium``: non-fatal with an impact the guide names (traffic of one link stalled or
#:   retransmitted, a broken connection, an event usually followed by a fatal one). HEALTH-015.
#: * ``low``: non-fatal events the guide says have no impact (single-bit ECC errors the switch
#:   corrected, 22013 "can be safely ignored"). HEALTH-017.
#: * a code the guide lists as fatal that its line says is non-fatal: high (HEALTH-015).
#: * a code this table does not list: the category its line states (Fatal: critical, Non-fatal:
#:   medium); with none stated, critical until it is looked up (an unknown switch error is not
#:   assumed harmless).
SXID_SOURCE = "https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html"
#: the version of the guide the table follows. To update: read the appendix "NVSwitch SXid errors" of
#: the newest Fabric Manager user guide (:data:`SXID_SOURCE`, also as PDF), add or change the entries of
#: :data:`SXID_CATALOGUE` (code, category, severity by the rules above, the guide's name of the error),
#: move this version, and regenerate docs/rules.md (HEALTH-014 states it).
SXID_CATALOGUE_VERSION = "NVIDIA Fabric Manager user guide DU-09883-001 v1.3 (October 2023), appendix NVSwitch SXid errors"

_SBE = "single-bit ECC error corrected by the NVSwitch (no impact)"
_FATAL = "fatal"
_ALWAYS = "always fatal"
_NONFATAL = "non-fatal"
#: code -> (category in the guide, severity, meaning). Written for this collection from the guide's
#: lists; the meaning is the guide's name of the error.
SXID_CATALOGUE = dict(
    [(code, (_NONFATAL, "low", _SBE)) for code in (11012, 11021, 11022, 11023, 12021, 12023, 15008, 15011, 19049,
                                                   19055, 19057, 19059, 19062, 19065, 19068, 19071, 24001, 24002,
                                                   24003)] +
    [(11004, (_NONFATAL, "medium", "ingress invalid ACL (a fabric partition misconfiguration): the link's traffic "
                                   "stalls")),
     (12028, (_NONFATAL, "medium", "egress non-posted PRIV error: the link's traffic stalls")),
     (19084, (_NONFATAL, "high", "AN1 heartbeat timeout, usually with a fatal SXid: reset all GPUs and NVSwitches")),
     (20001, (_NONFATAL, "low", "TX replay error: NVLink packets retransmitted (less throughput on the port)")),
     (20012, (_NONFATAL, "medium", "broken or inconsistent NVLink connection (or an uncoordinated shutdown)")),
     (22013, (_NONFATAL, "low", "Minion link DLREQ interrupt (the guide: can be safely ignored)")),
     (10001, (_NONFATAL, "medium", "host PRIV error (may be followed by fatal events)")),
     (10002, (_NONFATAL, "medium", "host PRIV timeout (may be followed by fatal events)")),
     (10003, (_ALWAYS, "critical", "host unhandled interrupt (never expected; fatal to the fabric)")),
     (10004, (_NONFATAL, "medium", "thermal event start: links may drop to single-lane mode; check the cooling")),
     (10005, (_NONFATAL, "low", "thermal event end; check the cooling"))] +
    [(code, (_FATAL, "critical", name)) for code, name in (
        (11001, "ingress invalid command"), (11009, "ingress invalid VCSet"), (11013, "ingress header DBE"),
        (11018, "ingress RID DBE"), (11019, "ingress RLAN DBE"), (11020, "ingress control parity"),
        (12001, "egress crossbar overflow"), (12002, "egress packet route"), (12022, "egress input ECC DBE"),
        (12024, "egress output ECC DBE"), (12025, "egress credit overflow"),
        (12026, "egress destination request ID error"), (12027, "egress destination response ID error"),
        (12030, "egress control parity"), (12031, "egress credit parity"), (12032, "egress flit type mismatch"),
        (14017, "TS ATO timeout"), (15001, "route buffer over/underflow"), (15006, "route transdone over/underflow"),
        (15009, "route GLT DBE"), (15010, "route parity"), (15012, "route incoming DBE"),
        (15013, "route credit parity"), (19047, "NCISOC header ECC DBE"), (19048, "NCISOC data ECC DBE"),
        (19054, "header RAM ECC DBE"), (19056, "DAT0 RAM ECC DBE"), (19058, "DAT1 RAM ECC DBE"),
        (19060, "CREQ RAM header ECC DBE"), (19061, "CREQ RAM data ECC DBE"),
        (19063, "response RAM header ECC DBE"), (19064, "response RAM data ECC DBE"),
        (19066, "COM RAM header ECC DBE"), (19067, "COM RAM data ECC DBE"), (19069, "RSP1 RAM header ECC DBE"),
        (19070, "RSP1 RAM data ECC DBE"), (20034, "LTSSM fault up (the link went down from active)"),
        (22012, "Minion link NA interrupt"), (24004, "sourcetrack TCEN0 crumbstore DBE"),
        (24005, "sourcetrack TCEN0 TD crumbstore DBE"), (24006, "sourcetrack TCEN1 crumbstore DBE"),
        (24007, "sourcetrack timeout"))] +
    [(code, (_ALWAYS, "critical", name + " (always fatal: the whole fabric needs a reset)")) for code, name in (
        (12020, "egress sequence ID error"), (22003, "Minion halt"), (22011, "Minion exterror"),
        (23001, "ingress SRC-VC buffer overflow"), (23002, "ingress SRC-VC buffer underflow"),
        (23003, "egress DST-VC credit overflow"), (23004, "egress DST-VC credit underflow"),
        (23005, "ingress packet burst error"), (23006, "ingress packet sticky error"),
        (23007, "possible bubbles at ingress"), (23008, "ingress packet invalid destination"),
        (23009, "ingress packet parity error"), (23010, "ingress SRC-VC buffer overflow"),
        (23011, "ingress SRC-VC buffer underflow"), (23012, "egress DST-VC credit overflow"),
        (23013, "egress DST-VC credit underflow"), (23014, "ingress packet burst error"),
        (23015, "ingress packet sticky error"), (23016, "possible bubbles at ingress"),
        (23017, "ingress credit parity error"))]
)

#: severity -> what to do about an SXid event of it
SXID_ACTIONS = {
    "critical": "the NVSwitch and the GPUs behind it need a reset: drain the node, restart Fabric Manager or reboot; "
                "check the NVLink trays and cabling and report it if it repeats",
    "high": "plan a reset of all GPUs and NVSwitches (drain, reboot); look for a fatal SXid with it",
    "medium": "watch its count; if it repeats, check the named link (nvidia-smi nvlink -e on its GPUs), its tray or "
              "cable and the fabric partition in the next maintenance window",
    "low": "no action while it stays rare (the switch corrected it or the guide names no impact); watch its count",
}
#: the action of an SXid whose code is not in the table and whose lines state no category
SXID_UNSTATED = ("the log states no category and this collection's table does not list the code: look it up in "
                 "NVIDIA's Fabric Manager user guide (%s) and treat it as fatal until then" % SXID_SOURCE)

#: what an unlisted code is treated as
UNLISTED = ("application", "low", "not in this collection's table",
            "look the code up in NVIDIA's Xid catalogue (%s)" % SOURCE)


def describe(code, stated=None):
    """``{"code", "class", "severity", "meaning", "action", "listed"}`` for an Xid code (int or text).
    ``stated``: the driver's word on the code's lines (``"fatal"``, ``"non-fatal"`` or ``None``,
    ``facts.health``): an NVLink 5 Xid (144-150) is graded by it, critical when a line said Fatal and
    medium when all said Nonfatal (NVIDIA's own action comes from the line's registers, which this
    collection does not decode: the meaning says so); other codes ignore it."""
    try:
        number = int(code)
    except (TypeError, ValueError):
        number = None
    entry = XID_CATALOGUE.get(number)
    klass, severity, meaning, action = entry or UNLISTED
    if number in NVLINK5_CODES and stated in NVLINK5_STATED:
        severity = NVLINK5_STATED[stated]
        meaning = "%s, logged %s" % (meaning, stated)
    return {"code": number, "class": klass, "severity": severity, "meaning": meaning, "action": action,
            "listed": entry is not None}


def describe_sxid(code, category):
    """``{"code", "fatal", "severity", "meaning", "action", "listed", "category"}`` of an SXid event
    whose log line states ``category`` (``"fatal"``, ``"non-fatal"`` or ``None``): the stated
    category wins, the table (:data:`SXID_CATALOGUE`) gives the severity of a non-fatal event and
    the category of an event whose lines state none (module docstring above the table)."""
    try:
        number = int(code)
    except (TypeError, ValueError, OverflowError):
        number = None
    category = category if category in ("fatal", "non-fatal") else None
    entry = SXID_CATALOGUE.get(number)
    listed_fatal = entry is not None and entry[0] != _NONFATAL
    if category is None:
        fatal = entry is None or listed_fatal
    else:
        fatal = category == "fatal"
    if fatal:
        severity = "critical"
    elif entry is not None:
        # logged non-fatal: the table's severity; a code the guide lists as fatal, high (it can stop the fabric)
        severity = "high" if listed_fatal else entry[1]
    else:
        severity = "medium"  # logged non-fatal, not in the table
    meaning = entry[2] if entry is not None else ("fatal NVSwitch error" if category == "fatal" else
                                                  "non-fatal NVSwitch error" if category else
                                                  "NVSwitch error of unstated category")
    action = SXID_UNSTATED if entry is None and category is None else SXID_ACTIONS[severity]
    return {"code": number, "fatal": fatal, "severity": severity, "meaning": meaning, "action": action,
            "listed": entry is not None, "category": entry[0] if entry is not None else None}
