# -*- coding: utf-8 -*-
"""Error counters judged over the history window (issue 21, item 6), end to end on the demo incident
host: playbooks/audit.yml run twice over a copy of its snapshot with gpuhost_history_dir set, the
InfiniBand port's link_downed counter raised between the runs; the second audit has exactly that
counter finding, shown as '+N in <span>' in report.json, report.md, report.html and the console. Without a
history the same counters are unknown with the reason (the self-audit runner, no playbook)."""
import glob
import json
import os
import re
import shutil

import pytest

from helpers.runner import run_playbook, stdout_of

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import expand_document
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge.self_audit import audit_host

HOST = "gpu-incident"
PORT = "mlx5_0/1"
COUNTER_RULES = ("HEALTH-020", "HEALTH-021", "HEALTH-022", "HEALTH-023")


@pytest.fixture
def incident(snapshot_trees, tmp_path):
    root = str(tmp_path / "incident")
    shutil.copytree(snapshot_trees["incident"], root, symlinks=True)
    return root


def set_link_downed(root, value):
    (path,) = glob.glob(os.path.join(root, "sys/devices/*/*/*/infiniband/mlx5_0/ports/1/counters/link_downed"))
    with open(path, "w") as handle:
        handle.write("%d\n" % value)


def audit(tmp_path, root, run, history_dir):
    inventory = {"all": {"hosts": {HOST: {"gpuhost_root": root, "ansible_connection": "local",
                                          "ansible_python_interpreter": shutil.which("python3")}}}}
    out = tmp_path / ("reports-%d" % run)
    runner = run_playbook(tmp_path, "audit.yml", inventory, cmdline="--check",
                          extravars={"gpuhost_report_dir": str(out), "gpuhost_history_dir": history_dir})
    assert runner.rc == 0, stdout_of(runner)
    return (expand_document(json.loads((out / "report.json").read_text())), (out / "report.md").read_text(),
            (out / "report.html").read_text(), stdout_of(runner))


def counter_findings(report):
    return [f for f in report["hosts"][HOST]["findings"] if f["id"] in COUNTER_RULES]


def test_two_audits_with_a_link_downed_increase_give_exactly_that_finding(incident, tmp_path):
    history_dir = str(tmp_path / "history")
    first = audit(tmp_path, incident, 1, history_dir)[0]
    ib = [f for f in counter_findings(first) if f["id"] == "HEALTH-020"]
    assert ib and set(f["status"] for f in ib) == {"unknown"}
    assert "first audit" in ib[0]["message"]
    # the history keeps the counter values, nothing else of them
    (line,) = (tmp_path / "history" / ("%s.jsonl" % HOST)).read_text().splitlines()
    assert json.loads(line)["counters"]["ib|%s|link_downed" % PORT] == 0

    set_link_downed(incident, 3)
    report, md, html, console = audit(tmp_path, incident, 2, history_dir)
    failing = [(f["id"], f["subject"]) for f in counter_findings(report) if f["status"] not in ("pass", "not_applicable")]
    assert failing == [("HEALTH-020", PORT)]
    (finding,) = [f for f in counter_findings(report) if f["status"] == "fail"]
    # "+N in <span>": the span between the two audits, seconds here
    shown = re.compile(r"link_downed \+3 in \d+[sm] \(0 at the audit of %s, 3 now; at most \+0 per 24h\)"
                       % re.escape(first["generated"]))
    assert shown.match(finding["observed"][0]), finding["observed"]
    for text in (finding["message"], md, html, console):
        assert shown.search(text), [line for line in text.splitlines() if "link_downed" in line][:3]
    changes = report["hosts"][HOST]["changes"]
    assert [(i["rule"], i["subject"]) for i in changes["new_fails"]] == [("HEALTH-020", PORT)]


def test_the_same_counters_without_history_are_unknown_with_the_reason(incident):
    set_link_downed(incident, 3)
    name, part = audit_host({"host": HOST, "profile": "amd-epyc-nvidia"}, root=incident, history_dir=None)
    # one unknown for the host's two ports (derive_counters._fold), naming the port whose counter is not 0
    ib = [f for f in part["findings"] if f["id"] == "HEALTH-020"]
    assert [(f["subject"], f["status"]) for f in ib] == [("all", "unknown")]
    assert ("no audit history to compare with (gpuhost_history_dir is not set): error counters are judged by their "
            "increase over 24h (counter_window_hours), not by their value since boot (now: link_downed 3 on %s, "
            "0 on the other 1;" % PORT) in ib[0]["message"]
    assert part["counters"]["ib|%s|link_downed" % PORT] == 3
    others = [f for f in part["findings"] if f["id"] in COUNTER_RULES]
    assert set(f["status"] for f in others) <= {"unknown", "not_applicable"} and name == HOST
