# -*- coding: utf-8 -*-
"""The console summary of a run (plugins/plugin_utils/report/console.py; docs/report.md, "Console output")."""

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue import catalogue_load
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import console
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import build_report

GPUS = ["0000:%02x:00.0" % bus for bus in (0x03, 0x04, 0x23, 0x24, 0x83, 0x84, 0x85, 0x86)]


def finding(rule, status="fail", severity="high", subject=None, message=None, **extra):
    item = {"id": rule, "title": rule, "area": rule.split("-")[0].lower(), "severity": severity, "status": status,
            "subject": subject, "expected": None, "observed": None, "message": message or "%s message" % rule,
            "fix": "", "reboot_required": False, "pending": False}
    item.update(extra)
    return item


def mrrs(address, kind="GPU"):
    return finding("PCI-001", subject=address, message="MaxReadReq 512 B < 4096 B on %s (NVIDIA %s)" % (address, kind))


def report_of(hosts):
    return build_report(hosts, profile="amd-epyc-nvidia", generated="2025-06-01T12:00:00+00:00",
                        collection_version="0.1.0")


NOUNS = {"PCI-001": "GPUs", "PCI-008": "devices"}


# -- escaping -----------------------------------------------------------------------------


def test_escape_shows_control_and_invisible_characters_as_escapes():
    assert console.escape("ok value") == "ok value"
    assert console.escape("a\nb\tc\rd") == "a\\nb\\tc\\rd"
    assert console.escape("\x1b[31mred\x1b[0m") == "\\x1b[31mred\\x1b[0m"
    assert console.escape("\x07\x7f\x85") == "\\x07\\x7f\\x85"
    assert console.escape("abc\u202edef") == "abc\\u202edef"  # right-to-left override
    assert console.escape("x\ufffd\udcff") == "x\\ufffd\\udcff"  # replacement char, lone surrogate
    assert console.escape("\U000e0001") == "\\U000e0001"
    assert console.escape("C:\\path") == "C:\\\\path"  # a literal backslash cannot fake an escape
    assert console.escape("<script>alert(1)</script>") == "<script>alert(1)</script>"  # printable: as is
    assert console.escape("Grüße ✓") == "Grüße ✓"
    assert console.escape(None) == "null" and console.escape(True) == "true" and console.escape(42) == "42"
    assert console.escape(b"\xff\n") == "\\\\xff\\n"


def test_escape_cuts_long_values_but_never_inside_an_escape():
    assert console.escape("x" * 500, 20) == "x" * 17 + "..."
    assert len(console.escape("y" * 1000)) == console.MAX_VALUE
    cut = console.escape("ab" + "\x1b" * 10, 10)
    assert cut == "ab\\x1b..." and len(cut) <= 10
    assert console.escape("short", 20) == "short"


# -- per host lines ------------------------------------------------------------------------


def test_one_line_per_host_clean_unreachable_and_failed_hosts_included():
    report = report_of({
        "gpu01": {"findings": [mrrs(a) for a in GPUS] + [
            finding("LXC-001", severity="critical"), finding("NUMA-004", severity="medium"),
            finding("PCI-005", status="pass", severity="info")]},
        "clean": {"findings": [finding("CPU-001", status="pass"), finding("NVIDIA-001", status="not_applicable")]},
        "ghost": {"state": "unreachable", "message": "Failed to connect to the host via ssh: refused"},
        "gone": {"state": "failed", "message": "root /nope is not a directory"},
    })
    lines = console.console_lines(report, nouns=NOUNS)
    assert lines[0] == ("gpuhost baseline audit, profile amd-epyc-nvidia: 4 host(s), 2 audited, 1 unreachable, "
                        "1 failed; 1 with failing findings")
    assert lines[1:5] == [
        "  clean  audited     fail 0, unknown 0, waived 0, pass 1, n/a 1",
        "  ghost  unreachable - Failed to connect to the host via ssh: refused",
        "  gone   failed      - root /nope is not a directory",
        "  gpu01  audited     fail 10 (critical 1, high 8, medium 1), unknown 0, waived 0, pass 1, n/a 0",
    ]
    assert lines[5] == "gpu01: 10 failing finding(s), worst first"
    # hosts, not findings, per kind of work, each host at its worst severity of the kind
    assert lines[-2:] == ["hosts with work: drift (configuration) critical 1", "exit code 4: unreachable: ghost"]


def test_failing_findings_worst_first_and_folded_per_rule():
    findings = [finding("CPU-003", severity="low"), finding("KERNEL-005", severity="medium")]
    findings += [mrrs(a) for a in GPUS]
    findings += [finding("LXC-001", severity="critical", subject="101", message="majors missing on CT 101")]
    findings += [finding("PCI-008", subject=a, message="persisted: no boot-time MaxReadReq on %s (x)" % a)
                 for a in GPUS[:3]]
    lines = console.finding_lines(findings, NOUNS)
    assert lines == [
        "  critical LXC-001 majors missing on CT 101",
        "  high     PCI-001 MaxReadReq 512 B < 4096 B on 8 GPUs: 03:00.0 04:00.0 23:00.0 24:00.0 83:00.0 84:00.0 "
        "85:00.0 86:00.0",
        "  high     PCI-008 persisted: no boot-time MaxReadReq on 3 devices: 03:00.0 04:00.0 23:00.0",
        "  medium   KERNEL-005 KERNEL-005 message",
        "  low      CPU-003 CPU-003 message",
    ]


def test_long_subject_lists_are_shortened_and_other_domains_kept():
    addresses = ["0001:%02x:00.0" % bus for bus in range(12)]
    lines = console.finding_lines([mrrs(a) for a in addresses], NOUNS)
    assert lines == ["  high     PCI-001 MaxReadReq 512 B < 4096 B on 12 GPUs: 0001:00:00.0 0001:01:00.0 0001:02:00.0 "
                     "0001:03:00.0 0001:04:00.0 ... 0001:0a:00.0 0001:0b:00.0"]


def test_different_messages_pending_and_single_subjects_are_not_folded():
    findings = [
        finding("NVIDIA-007", severity="medium", subject="0000:03:00.0", message="power limit 450 W < 600 W on 0000:03:00.0"),
        finding("NVIDIA-007", severity="medium", subject="0000:04:00.0", message="power limit 300 W < 600 W on 0000:04:00.0"),
        finding("KERNEL-001", message="kernel too old; pending: reboot", pending=True, reboot_required=True),
        finding("IOMMU-002", message="IOMMU passthrough is false", reboot_required=True),
        finding("CPU-001", status="waived"), finding("CPU-002", status="unknown"),
    ]
    assert console.finding_lines(findings) == [
        "  high     KERNEL-001 kernel too old; pending: reboot [pending]",
        "  high     IOMMU-002 IOMMU passthrough is false [fix needs reboot]",
        "  medium   NVIDIA-007 power limit 450 W < 600 W on 0000:03:00.0",
        "  medium   NVIDIA-007 power limit 300 W < 600 W on 0000:04:00.0",
    ]


def test_a_folded_line_keeps_what_follows_the_subject_and_a_default_noun():
    findings = [finding("KERNEL-009", subject=s, message="x is 1 on %s (detail (nested)); pending: reboot" % s)
                for s in ("a", "b")]
    assert console.finding_lines(findings) == ["  high     KERNEL-009 x is 1 on 2 subjects: a b; pending: reboot"]


def test_hostile_values_are_escaped_everywhere_and_the_note_is_shown():
    evil = "\x1b[2J\x1b[1;1Hrm -rf /\nok: [fake]"
    report = report_of({
        "hostile\x1b]0;title\x07": {"findings": [finding("CPU-002", message="mode is " + evil, subject=evil)]},
    })
    lines = console.console_lines(report, notes={"hostile\x1b]0;title\x07": "hostile test capture\n"})
    text = "\n".join(lines)
    assert "\x1b" not in text and "\x07" not in text
    assert all(line.isprintable() for line in lines)
    assert "  hostile\\x1b]0;title\\x07  audited     fail 1 (high 1)" in text
    assert "[hostile test capture\\n]" in lines[1]
    assert "hostile\\x1b]0;title\\x07: 1 failing finding(s), worst first [hostile test capture\\n]" in lines
    assert "  high     CPU-002 mode is \\x1b[2J\\x1b[1;1Hrm -rf /\\nok: [fake]" in lines[3]


def test_remediation_shows_before_and_after_counts():
    before = [mrrs(a) for a in GPUS] + [finding("CPU-001", reboot_required=True)]
    after = [finding("PCI-001", status="pass", subject=a) for a in GPUS] + [finding("CPU-001", reboot_required=True)]
    report = report_of({"gpu01": {"findings": after, "before": {"findings": before}}})
    lines = console.console_lines(report, fail_on="high", report_dir="/srv/reports")
    assert lines[0].startswith("gpuhost baseline remediation (counts before -> after), profile amd-epyc-nvidia")
    assert lines[1] == "  gpu01  audited     fail 9 -> 1 (high 1), unknown 0 -> 0, waived 0 -> 0, pass 0 -> 8, n/a 0 -> 0"
    assert lines[2:4] == ["gpu01: 1 failing finding(s), worst first", "  high     CPU-001 CPU-001 message [fix needs reboot]"]
    assert lines[-2:] == ["exit code 2: failing findings at or above high: gpu01", "reports: /srv/reports"]


def test_verdict_follows_fail_on():
    report = report_of({"a": {"findings": [finding("NUMA-004", severity="medium")]}, "b": {"findings": []}})
    assert console.console_lines(report, fail_on="high")[-1] == \
        "exit code 0: no failing finding at or above high (gpuhost_fail_on)"
    assert console.console_lines(report, fail_on="medium")[-1] == "exit code 2: failing findings at or above medium: a"
    assert console.console_lines(report)[-1].startswith("exit code 0: findings do not set it (gpuhost_fail_on=none")
    failed = report_of({"a": {"state": "failed", "message": "m"}})
    assert console.console_lines(failed, fail_on="low")[-1] == "exit code 2: not audited: a"


def test_findings_per_host_are_capped():
    report = report_of({"big": {"findings": [finding("CPU-%03d" % n) for n in range(1, 60)]}})
    lines = console.console_lines(report, max_finding_lines=5)
    assert lines[3:8] == ["  high     CPU-%03d CPU-%03d message" % (n, n) for n in range(1, 6)]
    assert lines[8] == "  ... 54 more line(s) in report.md / report.html"


def test_odd_input_never_raises():
    assert console.console_lines(None)[0].startswith("gpuhost baseline audit, profile null: 0 host(s)")
    odd = {"hosts": {"x": "not a mapping", "y": {"findings": "nope", "summary": {"fail": "many"}, "state": 3}},
           "profile": ["?"]}
    lines = console.console_lines(odd, notes=["not", "a", "dict"], fail_on="bogus")
    assert "  x  failed      - no message" in lines and "  y  failed      - no message" in lines
    assert console.finding_lines([{"status": "fail", "id": None, "message": None, "subject": 5}]) == \
        ["  ?        None "]


def test_subject_nouns_come_from_the_rules_subjects():
    nouns = console.subject_nouns(catalogue_load.load_catalogue())
    assert nouns["PCI-001"] == "GPUs" and nouns["PCI-002"] == "NICs" and nouns["PCI-006"] == "bridges"
    assert nouns["PCI-005"] == "devices" and nouns["NVIDIA-004"] == "GPUs" and nouns["LXC-001"] == "containers"
    assert "CPU-001" not in nouns  # host-wide rule
    assert console.subject_nouns(None) == {}


def test_hosts_with_the_same_failing_findings_are_one_group():
    same = [mrrs(a) for a in GPUS] + [finding("NUMA-001", severity="medium", message="kernel.numa_balancing is 1")]
    hosts = dict(("gpu-%03d" % i, {"findings": same}) for i in range(1, 34))
    hosts["odd-one"] = {"findings": same[:8]}
    hosts["clean"] = {"findings": [finding("CPU-001", status="pass")]}
    lines = console.console_lines(report_of(hosts), nouns=NOUNS)
    # 35 hosts, above FOLD_HOSTS: no line per host; the clean one in the line of the hosts without failing findings
    assert len([line for line in lines if line.startswith("  ") and " audited " in line]) == 1
    assert "  1 host(s) audited without failing findings: clean" in lines
    header = ("33 hosts (gpu-001, gpu-002, gpu-003, gpu-004, gpu-005, ..., gpu-032, gpu-033): "
              "same 9 failing finding(s), worst first")
    assert lines.count(header) == 1
    start = lines.index(header)
    assert lines[start + 1:start + 3] == [
        "  high     PCI-001 MaxReadReq 512 B < 4096 B on 8 GPUs: 03:00.0 04:00.0 23:00.0 24:00.0 83:00.0 84:00.0 "
        "85:00.0 86:00.0",
        "  medium   NUMA-001 kernel.numa_balancing is 1",
    ]
    assert "odd-one: 8 failing finding(s), worst first" in lines  # other findings: a group of its own
    assert sum(1 for line in lines if " PCI-001 " in line) == 2  # shown once per group, not per host
    assert not any(line.startswith("clean: ") for line in lines)


def test_a_stored_report_json_reads_the_same():
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import report as report_doc
    import json

    report = report_of({"gpu01": {"findings": [mrrs(a) for a in GPUS]}, "gpu02": {"findings": [mrrs(GPUS[0])]}})
    stored = json.loads(report_doc.dumps_document(report_doc.compact_document(report)))
    assert console.console_lines(stored, nouns=NOUNS) == console.console_lines(report, nouns=NOUNS)


# -- validate's line of what was measured (issue 40, item 8) ---------------------------------------

def test_measure_line_escapes_a_tools_bidi_and_escape_characters():
    measure = {"cpu_freq": {"status": "ok"},
               "gpu_bw": {"status": "unknown", "reason": "nvbandwidth said \u202eoverride\x1b[31m red\x00"},
               "changed": False, "plan": {"gpu_bw": ["nvbandwidth"]}}
    line = console.measure_line("gpu\u202e01", measure)
    assert line == ("gpu\\u202e01: cpu_freq ok; gpu_bw unknown "
                    "(nvbandwidth said \\u202eoverride\\x1b[31m red\\x00)")
    assert line.isprintable()


def test_measure_line_follows_the_names_asked_for_and_never_raises():
    assert console.measure_line("h", {"mem_bw": {"status": "ok"}}, ["cpu_freq", "mem_bw"]) == \
        "h: cpu_freq no result; mem_bw ok"
    assert console.measure_line("h", None) == "h: nothing measured"
    assert console.measure_line("h", {"x": {"status": "ok", "reason": "r" * 5000}}).endswith("...)")
    assert console.measure_line(None, {"x": "not a mapping", "y": {"status": 3, "reason": ["a\x1b"]}}) == \
        "null: y 3 (['a\\\\x1b'])"


def test_measure_line_has_a_part_per_site_workload():
    measure = {"cpu_freq": {"status": "ok"},
               "workloads": [{"name": "llama-bench tg128", "status": "ok", "value": 118.88, "unit": "tok/s"},
                             {"name": "vllm\x1b[31m", "status": "unknown", "reason": "killed after 600 s"},
                             "garbage", {"value": None}]}
    assert console.measure_line("gpu01", measure) == (
        "gpu01: cpu_freq ok; workload llama-bench tg128 ok (118.88 tok/s); workload vllm\\x1b[31m unknown "
        "(killed after 600 s); workload null no result; workload null no result")
    assert console.measure_line("h", {"workloads": "x"}) == "h: nothing measured"


def test_validate_prints_the_escaped_line_of_the_action():
    import os

    import yaml

    root = os.path.dirname(console.__file__)
    tasks = os.path.join(root, "..", "..", "..", "roles", "validate", "tasks", "main.yml")
    with open(tasks) as handle:
        (task,) = [t for t in yaml.safe_load(handle) if t["name"] == "Say what was measured"]
    assert task["ansible.builtin.debug"]["msg"].startswith("{{ gpuhost_eval.measure_line")
    assert "reason" not in task["ansible.builtin.debug"]["msg"]


def test_a_150_host_fleet_keeps_a_short_console():
    """Issue 37 item 2: whatever the host count, at most 60 lines plus 3 per distinct failing group."""
    hosts = {}
    groups = {
        "a": [mrrs(a) for a in GPUS] + [finding("NUMA-001", severity="medium", message="kernel.numa_balancing is 1")],
        "b": [finding("CPU-003", message="governor powersave"), finding("CPU-006", message="C2 enabled")],
        "c": [finding("KERNEL-%03d" % n, severity="low", message="knob %d" % n) for n in range(50)],
        "d": [finding("HEALTH-001", severity="critical", subject=GPUS[0], message="Xid 79 on %s" % GPUS[0])],
    }
    sizes = {"a": 60, "b": 30, "c": 5, "d": 1}
    for key, size in sizes.items():
        for i in range(size):
            hosts["%s-%03d" % (key, i)] = {"findings": groups[key]}
    for i in range(52):
        hosts["clean-%03d" % i] = {"findings": [finding("CPU-001", status="pass")]}
    for i in range(2):
        hosts["gone-%d" % i] = {"state": "unreachable", "message": "no route to host", "findings": []}
    assert len(hosts) == 150
    lines = console.console_lines(report_of(hosts), nouns=NOUNS, fail_on="high", report_dir="/srv/reports")
    assert len(lines) <= 60 + 3 * len(groups), "\n".join(lines)
    assert "  52 host(s) audited without failing findings: clean-000, clean-001, clean-002, clean-003, clean-004, " \
           "..., clean-050, clean-051" in lines
    assert "  2 host(s) unreachable - no route to host: gone-0, gone-1" in lines
    # every group is named with its worst line; the one past the shared budget points to the reports
    assert lines.count("1 hosts (d-000): same 1 failing finding(s), worst first") == 0
    assert "d-000: 1 failing finding(s), worst first" in lines
    assert "5 hosts (c-000, c-001, c-002, c-003, c-004): same 50 failing finding(s), worst first" in lines
    assert any(line.startswith("  ... ") and "more line(s) in report.md / report.html" in line for line in lines)
    assert lines[-2].startswith("exit code 4: unreachable: gone-0, gone-1") and lines[-1] == "reports: /srv/reports"
    # the same fleet at 300 hosts: the same number of lines
    for i in range(150):
        hosts["clean-x%03d" % i] = {"findings": [finding("CPU-001", status="pass")]}
    assert len(console.console_lines(report_of(hosts), nouns=NOUNS, fail_on="high", report_dir="/srv/reports")) == \
        len(lines)
