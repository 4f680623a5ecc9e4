# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helpers for the scenarios' testinfra verifiers (run on the controller by molecule verify).

They read what the earlier steps left in the scenario's ephemeral directory: what prepare
did to the guest (``prepared.txt``) and the reports of each converge run
(``reports/check-*``, ``reports/apply-*``: see molecule/shared/guard_before.yml), and talk
to the guest through testinfra's ``host``.
"""
import glob
import json
import os
import re
import sys

SHARED = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(SHARED))
# the checkout as the collection (tests/conftest.py makes the link) and tests/helpers (lspci)
for path in (os.path.join(REPO, "build", "collections"), os.path.join(REPO, "tests")):
    if path not in sys.path:
        sys.path.insert(0, path)

from helpers import report_file  # noqa: E402  (tests/ is on sys.path from here on)

READRQ_MASK = 0x7000
READRQ_4096 = 0x5000
E1000E = "8086:10d3"
# rules whose observed value is free memory, which moves between two reads of the same guest
MEMORY_RULES = ("NUMA-003", "NUMA-004", "NUMA-005")
VIRTIO_NET = "1af4:1041"


def ephemeral():
    path = os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY")
    assert path and os.path.isdir(path), "run through molecule verify (MOLECULE_EPHEMERAL_DIRECTORY is %r)" % path
    return path


def instance_name():
    """The scenario's one guest, from molecule's instance config (the list vmctl.py up writes)."""
    path = os.environ.get("MOLECULE_INSTANCE_CONFIG")
    assert path and os.path.isfile(path), "run through molecule verify (MOLECULE_INSTANCE_CONFIG is %r)" % path
    with open(path) as handle:
        names = [entry["instance"] for entry in json.load(handle)]
    assert len(names) == 1, "the instance config %s lists %s, not one guest" % (path, names)
    return names[0]


def prepared():
    """What molecule/shared/prepare.yml left: {"endpoints": {addr: (id, devctl)}, "numa_balancing", "cpus"}."""
    path = os.path.join(ephemeral(), "prepared.txt")
    state = {"endpoints": {}, "cpus": {}, "numa_balancing": None}
    with open(path) as handle:
        for line in handle:
            words = line.split()
            if len(words) == 4 and words[0] == "endpoint":
                state["endpoints"][words[1]] = (words[2], int(words[3], 16))
            elif words[:1] == ["numa_balancing"]:
                state["numa_balancing"] = int(words[1])
            elif len(words) == 3 and words[0].startswith("cpu"):
                state["cpus"][words[0]] = {"governor": words[1], "c2_disable": int(words[2])}
    assert len(state["endpoints"]) == 4, "prepared.txt lists %s" % state
    return state


def tuned_results():
    """What molecule/remediate/side_effect.yml recorded (``tuned.json``), ``None`` before it ran."""
    path = os.path.join(ephemeral(), "tuned.json")
    if not os.path.exists(path):
        return None
    with open(path) as handle:
        return json.load(handle)


def report_dirs(kind):
    """The report directories of the runs of one kind ("check", "apply", ...), oldest first."""
    return sorted(glob.glob(os.path.join(ephemeral(), "reports", "%s-*" % kind)))


def load_report(path):
    """The report of ``path`` (a report directory) as build_report made it (findings as mappings)."""
    return report_file.load_report(path)


def host_report(report, host_name):
    assert host_name in report["hosts"], "report has hosts %s" % sorted(report["hosts"])
    return report["hosts"][host_name]


def findings(view, rule_id):
    """Findings of one rule in a host report or its ``before`` view."""
    return [f for f in view["findings"] if f["id"] == rule_id]


def statuses(view, rule_id):
    """{subject: status} of one rule."""
    return dict((f["subject"], f["status"]) for f in findings(view, rule_id))


def devctl(host, address):
    """Device Control of ADDRESS as setpci reads it from the guest's config space."""
    out = host.check_output("setpci -s %s CAP_EXP+8.w" % address)
    return int(out.strip(), 16)


def lspci_max_read_request(host, address):
    out = host.check_output("lspci -s %s -vv" % address)
    found = re.search(r"MaxReadReq (\d+) bytes", out)
    assert found, "lspci -vv of %s shows no MaxReadReq:\n%s" % (address, out)
    return int(found.group(1))


def sysfs(host, path):
    return host.file(path).content_string.strip()
