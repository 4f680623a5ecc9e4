#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: baseline_report
short_description: Write the baseline reports (JSON, Markdown, HTML, JUnit, Prometheus) on the controller
version_added: 0.1.0
description:
  - Builds C(report.json) from the findings of every host and writes its views next to it
    C(report.md), C(report.html), C(junit.xml) and C(metrics.prom). The layout of each file is
    described in C(docs/report.md) of the collection.
  - This is an action plugin. It runs on the controller only, once for the whole play (use C(run_once=true)).
    Nothing is executed on any managed host.
  - C(report.json) is always written; every other file is rendered from it as stored. The whole set is
    written to temporary names first and renamed into place only when every file exists, under a lock on
    the directory; a failure before that (a full disk, a template error) removes the temporary files and
    leaves the previous reports exactly as they were. The manifest C(.gpuhost-report.json) names the files
    of the last set with their size and SHA-256 (C(docs/report.md), "The report directory").
  - Summaries are recomputed from the findings. A finding with a status other than C(pass), C(fail),
    C(unknown), C(waived) or C(not_applicable), or without a rule id, fails the task with the host and rule.
author:
  - gpuhost.baseline maintainers (@gpuhost-baseline)
options:
  report_dir:
    description:
      - Directory the reports are written to; created when missing.
      - A relative path is taken from the working directory of the C(ansible-playbook) process, never from
        the playbook's or the collection's directory (the roles' default is V(gpuhost-reports)).
      - It must be a directory of the reports' own - new, empty, or written by this module before (it holds
        the manifest C(.gpuhost-report.json)); a directory of an earlier version holding only report files,
        C(hosts/) pages and C(*.jsonl) history directories is accepted too. A directory holding other files,
        a system directory (V(/), V(/etc), V(/usr), V(/var), V(/home), V(/root), ... as the real path, links
        resolved) or the controller user's home directory fails the task before anything is written there.
      - Only files the previous manifest names are ever removed (the host pages of hosts no longer in the
        report). A link or a file in place of C(hosts/), a directory in place of a report file, and a link,
        FIFO, device or file over 32 MiB in place of C(metrics.prom) (read to keep the series of the hosts a
        C(--limit) run skipped) fail the task with the path and the reason; nothing is followed.
    type: path
    required: true
  hosts:
    description:
      - Maps each C(inventory_hostname) to its results.
      - Keys of each value are C(findings) (list of findings as produced by the evaluation), C(state)
        (V(audited), V(unreachable) or V(failed); default V(audited)), C(message) (why a host is unreachable
        or failed), C(profile) (the profile resolved for the host), C(numa) (list of nodes with C(id),
        C(mem_total_kb), C(mem_free_kb), C(free_pct), as in the facts), C(facts_errors) (count or list of
        facts errors), C(pending) (list of changes waiting for a reboot or action) and C(before)
        (findings before remediation, shown as a before/after view).
      - The findings may also be one JSON text, C(findings_json) in place of C(findings) (and in C(before)), as
        M(gpuhost.baseline.baseline_evaluate) returns them in its C(host_report) with C(return_findings=false).
      - A C(summary) given here is ignored; it is recomputed from C(findings).
      - Give either this or O(play_hosts) (the roles use O(play_hosts)); one of the two is required. A mapping
        given here is templated by Ansible as a whole before the action runs - for a fleet, O(play_hosts) is cheaper.
    type: dict
  play_hosts:
    description:
      - Names of the hosts whose results the action reads from the play itself, one host at a time, in place of
        O(hosts) - the audit, remediate and validate roles pass C(ansible_play_hosts_all). Nothing of the fleet is
        templated into the task's arguments; of each host's variables only the values below are kept.
      - A host's results are its C(gpuhost_eval.host_report) (registered by the audit role's evaluation task). A host
        without one is left out of the report - with C(gpuhost_serial) a later batch's hosts, not evaluated yet.
      - A host that has failed in the play (not in C(ansible_play_hosts)) and whose C(gpuhost_controller_guard.host_report)
        is set was refused by the controller guard (the audit role's C(tasks/controller_guard.yml), which every playbook
        runs); that part (state V(failed), the reason as message)
        replaces its evaluation.
      - A host's C(gpuhost_note) variable, templated in the host's context, becomes its entry of O(host_notes); an
        entry given in O(host_notes) wins.
      - A name that is no inventory host fails the task naming it. Give either this or O(hosts).
    type: list
    elements: str
    version_added: 0.2.0
  profile:
    description:
      - Profile requested for the run (for example V(auto)). Used for hosts without their own C(profile).
      - The report's top-level profile is the profile shared by all hosts, or V(mixed).
    type: str
  formats:
    description:
      - Views to write besides C(report.json), which is always written.
    type: list
    elements: str
    choices: [json, md, html, junit, prom, csv]
    default: [json, md, html, junit, prom, csv]
  template_dir:
    description:
      - Directory of site templates, searched before the bundled C(templates/) of the collection;
        C(report.html.j2) and C(report.md.j2) there replace the bundled views by name.
      - A site template may extend C(gpuhost/report.html.j2) and replace the blocks C(style),
        C(summary), C(matrix), C(hosts) and C(footer). HTML templates are autoescaped.
      - A missing directory, or a template that does not parse or render, fails the task naming the template.
    type: path
  collection_version:
    description:
      - Version stamped on every report. Default is read from the collection's C(MANIFEST.json)
        (installed) or C(galaxy.yml) (checkout), else V(unknown).
    type: str
  generated:
    description:
      - Generation time stamped on the reports (ISO 8601). Default is now, in UTC.
    type: str
  started:
    description:
      - When the run began (ISO 8601); stored in C(report.json) as C(started), and the run's duration
        (C(generated) minus C(started)) becomes C(gpuhost_baseline_run_duration_seconds) in C(metrics.prom).
        The roles pass the time of their first task. Not a time stamp, or not given - no duration.
    type: str
  print_console:
    description:
      - Print the console summary (RV(console)) on the controller as plain lines, through Ansible's display, so
        that it reads the same with the stock C(default) callback and any result format (no JSON list of
        escaped strings). The audit, remediate and validate roles set it; the lines are returned in RV(console)
        either way.
    type: bool
    default: false
  preview:
    description:
      - The run is C(--check) (the roles pass C(ansible_check_mode)). For a remediation (hosts with a C(before)
        part) C(report.json) then holds C(preview) V(true), and the console summary, C(report.md) and
        C(report.html) say that no fix was applied (counts C(before -> after) that do not move). An audit's
        report is the same with or without it.
    type: bool
    default: false
  fail_on:
    description:
      - Fail the task when a finding with status C(fail) has this severity or a higher one.
      - The reports are written before the task fails. RV(failing) and RV(failing_hosts) list the findings.
      - V(none) never fails because of findings.
    type: str
    choices: [critical, high, medium, low, none]
    default: none
  drain_severities:
    description:
      - The severities of the failing findings that put a host in RV(drain_hosts), what the on_fail role drains on
        (C(gpuhost_drain_severities)). A finding of a severity the catalogue does not know counts as V(critical).
    type: list
    elements: str
    choices: [critical, high, medium, low, info]
    default: [critical]
  drain_kinds:
    description:
      - The kinds of the failing findings that put a host in RV(drain_hosts) (C(gpuhost_drain_kinds)) - V(fault)
        (the health area - hardware and GPU health, drained, reset or returned) or V(drift) (configuration,
        fixed in a maintenance window).
    type: list
    elements: str
    choices: [drift, fault]
    default: [fault]
  host_notes:
    description:
      - A word per host shown with it in RV(console), for example that a host is a test capture
        with hostile values on purpose. Keys are C(inventory_hostname); empty values are left out.
      - With O(play_hosts) each host's C(gpuhost_note) variable is read for it (the roles rely on that); the entries
        given here are added, and win.
    type: dict
    default: {}
  history_dir:
    description:
      - Directory of the drift history on the controller (role variable C(gpuhost_history_dir)); unset, no
        history is kept and the reports have no C(changes).
      - Each host with findings gets one compact record appended to its own JSON Lines file there (time,
        C(boot_id) from its C(host_report), collection version, status and observed value per rule and subject).
        The file is named after the C(inventory_hostname); a name with characters outside letters, digits, C(.),
        C(_) and C(-) is rewritten and suffixed with a hash of it, so no name leaves the directory.
      - The report gains per host C(changes) (new fails, resolved, other status changes, values changed since the
        host's previous record; same boot or across a reboot; C(last_change)) and fleet totals in C(changes).
      - Damaged lines of a history file are skipped with a warning (and dropped when the file is next rewritten).
        A history that cannot be written is a warning and the host's C(changes.error), not a failure.
      - A relative path is resolved against the current directory of the C(ansible-playbook) process.
    type: path
  history_keep:
    description:
      - How many records each host's history file keeps (the oldest are pruned); at least 1.
    type: int
    default: 50
extends_documentation_fragment:
  - gpuhost.baseline.controller
attributes:
  check_mode:
    description: The reports are written in check mode too, since an audit run with C(--check) must report.
    support: full
notes:
  - The task never reports C(changed) - the reports live on the controller, no host is changed.
seealso:
  - module: gpuhost.baseline.host_facts
"""

EXAMPLES = r"""
- name: Write every report once, on the controller, from each host's registered gpuhost_eval
  gpuhost.baseline.baseline_report:
    report_dir: "{{ gpuhost_report_dir }}"
    profile: auto
    play_hosts: "{{ ansible_play_hosts_all }}"
    fail_on: "{{ gpuhost_fail_on | default('none') }}"
  run_once: true
  delegate_to: localhost

- name: Only the JSON and metrics for node_exporter's textfile collector
  gpuhost.baseline.baseline_report:
    report_dir: /var/lib/node_exporter/textfile_collector/gpuhost
    hosts:
      gpu01:
        findings:
          - id: PCI-001
            title: MaxReadReq at least max_read_request_bytes (GPU)
            area: pcie
            severity: high
            status: fail
            subject: "0000:41:00.0"
            expected: 4096
            observed: 512
            message: MaxReadReq 512 bytes, expected >= 4096
            fix: gpuhost.baseline.pcie_tune
            reboot_required: false
    formats: [json, prom]
  run_once: true
"""

RETURN = r"""
paths:
  description: Path of each file written, by format.
  returned: success
  type: dict
  sample:
    json: /srv/reports/report.json
    md: /srv/reports/report.md
    html: /srv/reports/report.html
    junit: /srv/reports/junit.xml
    prom: /srv/reports/metrics.prom
report_dir:
  description: The directory written to, absolute.
  returned: success
  type: str
  sample: /srv/reports
totals:
  description: Fleet totals of the report (C(totals) of C(report.json)).
  returned: success
  type: dict
  sample:
    hosts: 2
    audited: 1
    unreachable: 1
    failed: 0
    pass: 40
    fail: 9
    unknown: 1
    waived: 0
    not_applicable: 2
    hosts_failing: 1
    reboot_required: 1
    fail_by_severity: {critical: 0, high: 8, medium: 1, low: 0, info: 0}
stats:
  description:
    - Fleet and per-host totals for callers, computed from the report document (C(plugins/plugin_utils/report/stats.py)).
      The audit and remediate roles publish it with C(ansible.builtin.set_stats) as the custom stat
      C(gpuhost_baseline); C(docs/report.md) of the collection, "Totals for callers", describes every key.
    - C(fleet) holds every key of RV(totals) with the same value, plus C(facts_errors) and C(names)
      (host names that are C(unreachable), C(failed), or C(failing) - at least one finding with status fail).
    - C(hosts) has, per host, C(state), C(message), C(profile), the five status counts, C(fail_by_severity),
      C(reboot_required) (a failing finding whose fix needs a reboot), C(facts_errors) and C(pending) (count).
    - C(reports) has C(dir) and the path of each file written, by format.
  returned: success
  type: dict
  sample:
    schema: 1
    generated: "2025-06-01T12:00:00+00:00"
    profile: amd-epyc-nvidia
    collection_version: 0.1.0
    fleet:
      hosts: 2
      audited: 1
      unreachable: 1
      failed: 0
      pass: 40
      fail: 9
      unknown: 1
      waived: 0
      not_applicable: 2
      hosts_failing: 1
      reboot_required: 1
      fail_by_severity: {critical: 0, high: 8, medium: 1, low: 0, info: 0}
      facts_errors: 3
      names: {unreachable: [gpu02], failed: [], failing: [gpu01]}
    hosts:
      gpu01:
        state: audited
        message: null
        profile: amd-epyc-nvidia
        pass: 40
        fail: 9
        unknown: 1
        waived: 0
        not_applicable: 2
        fail_by_severity: {critical: 0, high: 8, medium: 1, low: 0, info: 0}
        reboot_required: true
        facts_errors: 3
        pending: 1
      gpu02:
        state: unreachable
        message: "Failed to connect to the host via ssh"
        profile: auto
        pass: 0
        fail: 0
        unknown: 0
        waived: 0
        not_applicable: 0
        fail_by_severity: {critical: 0, high: 0, medium: 0, low: 0, info: 0}
        reboot_required: false
        facts_errors: 0
        pending: 0
    reports:
      dir: /srv/reports
      json: /srv/reports/report.json
      md: /srv/reports/report.md
console:
  description:
    - The run summary as lines of text, printed by the audit and remediate roles after the reports are written
      (C(docs/report.md), "Console output"). Built from the report document by C(plugins/plugin_utils/report/console.py).
    - A header with the fleet totals; one line per host (sorted, clean hosts too) with its state and counts by
      status, failing findings also by severity, V(before -> after) after a remediation, the host's message
      (why it is unreachable or failed) and its O(host_notes) entry.
    - Then, per host with failing findings, one line per rule, worst severity first; findings of a rule that fail
      the same way on several subjects are folded into one line with the subject list (PCI domain 0000 left out,
      long lists shortened).
    - Then the exit code the roles' verdict will give for O(fail_on) and the report directory.
    - Host values are escaped - control and other non-printable characters (and U+FFFD) as V(\\xNN),
      V(\\uNNNN), V(\\n); a backslash as two - and cut after 240 characters, so no captured value can move the
      cursor, colour the terminal or fake a line.
  returned: success
  type: list
  elements: str
  sample:
    - "gpuhost baseline audit, profile amd-epyc-nvidia: 2 host(s), 1 audited, 1 unreachable, 0 failed; 1 with failing findings"
    - "  gpu01  audited     fail 9 (high 8, medium 1), unknown 1, waived 0, pass 40, n/a 2"
    - "  gpu02  unreachable - Failed to connect to the host via ssh"
    - "gpu01: 9 failing finding(s), worst first"
    - "  high     PCI-001 MaxReadReq 512 B < 4096 B on 8 GPUs: 03:00.0 04:00.0 23:00.0 24:00.0 83:00.0 ... 85:00.0 86:00.0"
    - "  medium   NUMA-004 spread of free memory between nodes 7.7 pp > 5 pp"
    - "exit code 4: unreachable: gpu02"
    - "reports: /srv/reports"
profile:
  description: Top-level profile of the report (shared by all hosts, or V(mixed)).
  returned: success
  type: str
  sample: amd-epyc-nvidia
collection_version:
  description: Version stamped on the reports.
  returned: success
  type: str
  sample: 0.1.0
failing:
  description: Failing findings at or above O(fail_on), as C(host), colon, rule id, subject and severity.
  returned: when O(fail_on) is not V(none)
  type: list
  elements: str
  sample: ["gpu01: PCI-001 0000:41:00.0 (high)"]
drain_hosts:
  description:
    - The audited hosts with a failing finding of a severity in O(drain_severities) and a kind in O(drain_kinds), and
      those findings as rule id, subject and severity - the hosts the on_fail role drains (up to its budget).
      Unknown, waived and passing findings never count, nor a host that was not audited. Independent of
      O(fail_on).
  returned: success
  type: dict
  sample: {"gpu07": ["HEALTH-001 0000:47:00.0 (critical)"]}
failing_hosts:
  description:
    - The same findings by host - each host with at least one failing finding at or above O(fail_on), and
      its findings as rule id, subject and severity.
    - The audit and remediate roles register this task with C(failed_when) so that findings do not fail it,
      then fail each of these hosts with its own findings (C(roles/audit/tasks/verdict.yml)).
  returned: when O(fail_on) is not V(none)
  type: dict
  sample: {"gpu01": ["PCI-001 0000:41:00.0 (high)", "CPU-001 (high)"]}
passing_hosts:
  description:
    - The hosts of O(play_hosts) still in the play whose verdict is a pass with nothing to do - reported
      C(audited), no failing finding at or above O(fail_on), no C(gpuhost_fix_error) - sorted.
    - The roles' C(verdict.yml) ends the role for them in a C(meta) task on ansible-core 2.18 and later, so that
      no worker is forked for their C(baseline_verdict) task.
  returned: when O(play_hosts) is given and the reports are written
  type: list
  elements: str
  sample: ["gpu01", "gpu02"]
"""

from ansible.module_utils.basic import AnsibleModule


# The action plugin's options (plugins/plugin_utils/report/report.py ARGUMENT_SPEC), repeated here
# because a module cannot import controller code; tests/unit/plugins/action/test_baseline_report.py
# keeps the two equal.
FORMATS = ["json", "md", "html", "junit", "prom", "csv"]
ARGUMENT_SPEC = dict(
    report_dir=dict(type="path", required=True),
    hosts=dict(type="dict"),
    play_hosts=dict(type="list", elements="str"),
    profile=dict(type="str"),
    formats=dict(type="list", elements="str", default=FORMATS, choices=FORMATS),
    template_dir=dict(type="path"),
    collection_version=dict(type="str"),
    generated=dict(type="str"),
    started=dict(type="str"),
    preview=dict(type="bool", default=False),
    fail_on=dict(type="str", default="none", choices=["critical", "high", "medium", "low", "none"]),
    host_notes=dict(type="dict", default={}),
    history_dir=dict(type="path"),
    history_keep=dict(type="int", default=50),
    print_console=dict(type="bool", default=False),
    drain_severities=dict(type="list", elements="str", default=["critical"], choices=["critical", "high", "medium", "low", "info"]),
    drain_kinds=dict(type="list", elements="str", default=["fault"], choices=["drift", "fault"]),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.fail_json(msg="gpuhost.baseline.baseline_report runs on the controller as an action plugin; it was "
                         "executed as a module on a host, which means the action plugin was not found: run it "
                         "from a playbook with the collection installed (ANSIBLE_COLLECTIONS_PATH)")


if __name__ == "__main__":
    main()
