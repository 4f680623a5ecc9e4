"""The console summary of audit.yml and remediate.yml (issue 14, item 1; docs/report.md, "Console output"):
one line per host, the failing findings worst first with per-device repeats folded, hostile values
escaped, the demo inventory's note on the hostile capture, before -> after after a remediation.

The demo snapshot hosts only (not localhost), under the demo inventory's names, so the text is the
same on every machine."""
import os
import re
import shutil

import pytest
import yaml

from helpers.incident import incident_inventory
from helpers.runner import REPO, run_playbook, stdout_of

PYTHON = shutil.which("python3")
#: demo inventory name -> snapshot (inventory/demo/hosts.yml)
DEMO = {"gpu-incident": "incident", "gpu-healthy": "healthy", "cpu-intel": "intel", "hostile": "hostile"}
SEVERITIES = ("critical", "high", "medium", "low", "info")


def demo_hostvars():
    with open(os.path.join(REPO, "inventory", "demo", "hosts.yml")) as handle:
        return yaml.safe_load(handle)["all"]["children"]["snapshots"]["hosts"]


def inventory(roots):
    """The demo snapshot hosts with their demo inventory variables, pointed at ``roots``."""
    hosts = {}
    for name, root in roots.items():
        hostvars = dict(demo_hostvars()[name])
        hostvars.update(gpuhost_root=str(root), ansible_connection="local", ansible_python_interpreter=PYTHON)
        hosts[name] = hostvars
    return {"all": {"hosts": hosts}}


def console_of(runner):
    """The ``console`` lines baseline_report returned (the task result, whatever the output format)."""
    results = [e["event_data"]["res"] for e in runner.events if e.get("event") in ("runner_on_ok", "runner_on_failed")
               and e["event_data"].get("task_action") == "gpuhost.baseline.baseline_report"]
    assert len(results) == 1, stdout_of(runner)
    return results[0]["console"]


def section(lines, host):
    """The failing-finding lines of ``host``."""
    start = [i for i, line in enumerate(lines) if line.startswith("%s: " % host) and "failing finding(s)" in line]
    assert len(start) == 1, lines
    out = []
    for line in lines[start[0] + 1:]:
        if not line.startswith("  "):
            break
        out.append(line)
    return out


@pytest.fixture(scope="module")
def audited(snapshot_trees, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("console")
    roots = dict((name, snapshot_trees[snap]) for name, snap in DEMO.items())
    runner = run_playbook(tmp, "audit.yml", inventory(roots), cmdline="--check",
                          extravars={"gpuhost_report_dir": str(tmp / "reports"), "gpuhost_fail_on": "high"})
    return runner, console_of(runner)


def test_one_summary_line_per_demo_host(audited):
    runner, lines = audited
    assert runner.rc == 2, stdout_of(runner)  # findings at or above high
    assert lines[0] == ("gpuhost baseline audit, profile mixed: 4 host(s), 4 audited, 0 unreachable, 0 failed; "
                        "3 with failing findings")
    # the CPU node is judged by the cpu-node profile: its one failing rule (swappiness) is low
    summary = lines[1:5]
    assert [line.split()[0] for line in summary] == sorted(DEMO)
    for line in summary:
        assert re.match(r"^  \S+ +audited +fail \d+( \([a-z0-9, ]+\))?, unknown \d+, waived \d+, pass \d+, n/a \d+", line), line
    healthy = [line for line in summary if line.split()[0] == "gpu-healthy"][0]
    assert " fail 0, unknown " in healthy  # the clean host is listed too
    incident = [line for line in summary if line.split()[0] == "gpu-incident"][0]
    assert "fail 59 (critical 2, high 28, medium 26, low 3)" in incident
    assert lines[-2] == "exit code 2: failing findings at or above high: gpu-incident, hostile"
    assert lines[-1].startswith("reports: ") and lines[-1].endswith("reports")
    assert not any(line.startswith("gpu-healthy: ") for line in lines)


def test_the_incident_findings_worst_first_with_devices_folded(audited):
    unused_runner, lines = audited
    incident = section(lines, "gpu-incident")
    ranks = [SEVERITIES.index(line.split()[0]) for line in incident]
    assert ranks == sorted(ranks), incident
    assert incident[0] == "  critical LXC-001 device majors not allowed: 508 (nvidia-uvm, live major) on CT 101"
    expected = [
        "  high     PCI-001 MaxReadReq 512 B < 4096 B on 8 GPUs: 43:00.0 44:00.0 47:00.0 48:00.0 c3:00.0 c4:00.0 "
        "c7:00.0 c8:00.0",
        "  high     PCI-002 MaxReadReq 512 B < 4096 B on 2 NICs: 49:00.0 c9:00.0",
        "  high     PCI-006 ACS redirect enabled: request_redirect, completion_redirect on 8 bridges: 42:00.0 42:01.0 "
        "46:00.0 46:01.0 c2:00.0 c2:01.0 c6:00.0 c6:01.0",
        "  medium   NVIDIA-004 persistence mode is false on 8 GPUs: 43:00.0 44:00.0 47:00.0 48:00.0 c3:00.0 c4:00.0 "
        "c7:00.0 c8:00.0",
        "  medium   HEALTH-003 pending GPU memory repairs: row remapping pending (0 correctable, 1 uncorrectable rows "
        "remapped): reset the GPU to apply it on 0000:47:00.0 (GPU2 NVIDIA RTX PRO 6000 Blackwell Server Edition)",
        # seven GPUs busy (P0) at 2.5 GT/s, medium since a busy link below its capability halves host
        # transfers (issue 21); the eighth, c8:00.0, idle (P8): not judged
        "  medium   PCI-005 link speed is 2.5GT/s, expected 32GT/s on 7 devices: 43:00.0 44:00.0 47:00.0 48:00.0 "
        "c3:00.0 c4:00.0 c7:00.0",
    ]
    for line in expected:
        assert line in incident, "\n".join(incident)
    # one line per rule: 59 failing findings in far fewer lines
    assert len(incident) == len(set(line.split()[1] for line in incident)) < 30
    assert "  high     KERNEL-001 running kernel 6.8.12-4-pve is older than 6.14; pending: 6.14.8-2-pve is " \
           "installed, reboot into it [pending]" in incident


def test_hostile_values_are_escaped_and_the_capture_is_marked(audited):
    runner, lines = audited
    note = demo_hostvars()["hostile"]["gpuhost_note"]
    assert "hostile test capture" in note
    (summary,) = [line for line in lines if line.startswith("  hostile ")]
    assert summary.endswith("[%s]" % note)
    assert "hostile: %d failing finding(s), worst first [%s]" % (int(re.search(r"fail (\d+)", summary).group(1)), note) \
        in lines
    hostile = section(lines, "hostile")
    (cmdline,) = [line for line in hostile if " KERNEL-002 " in line]
    assert "foo=unterminated x==y =\\n only in the running cmdline" in cmdline  # a newline in a value, escaped
    assert "\\ufffd\\ufffd= only in the running cmdline" in cmdline  # undecodable bytes
    assert "amd_pstate mode is <script>alert(1)</script>, expected active" in "\n".join(hostile)  # text on a terminal
    assert all(line.isprintable() for line in lines)
    assert all(len(line) < 400 for line in lines)
    out = stdout_of(runner)
    # printed by the report task as plain lines (print_console), escaped once, not by a debug task
    assert "Summary of the run" not in out and "Show failing findings" not in out
    assert cmdline in out.splitlines() and "foo=unterminated x==y =\\n only" in out


def test_remediate_shows_before_and_after_counts(remediated_incident):
    # the real run of tests/integration/conftest.py's remediation: the demo inventory's gpu-incident on
    # an incident copy, as inventory() makes it here, since the demo inventory gives it no other variable
    assert set(demo_hostvars()["gpu-incident"]) == {"gpuhost_root"}
    root = remediated_incident["root"]
    assert inventory({"gpu-incident": root}) == incident_inventory(root)
    runner = remediated_incident["apply"]
    assert runner.rc == 0, stdout_of(runner)
    lines = console_of(runner)
    assert lines[0].startswith("gpuhost baseline remediation (counts before -> after), profile amd-epyc-nvidia: "
                               "1 host(s), 1 audited")
    match = re.match(r"^  gpu-incident  audited     fail 59 -> (\d+) \([a-z0-9, ]+\), unknown \d+ -> \d+, "
                     r"waived 0 -> 0, pass (\d+) -> (\d+), n/a \d+ -> \d+$", lines[1])
    assert match, lines[1]
    assert int(match.group(1)) < 59 and int(match.group(3)) > int(match.group(2))
    # what is left after fixing, worst first; the MaxReadReq findings are gone
    remaining = section(lines, "gpu-incident")
    assert remaining and not any(" PCI-001 " in line for line in remaining)
    assert "fail 59 -> " in stdout_of(runner)
