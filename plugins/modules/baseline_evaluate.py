#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: baseline_evaluate
short_description: Judge a host's gpuhost facts against the baseline rules (controller side)
version_added: 0.1.0
description:
  - Evaluates the rule catalogue of the collection (C(rules/<area>.yml)) for the selected profile
    (C(profiles/<name>.yml)) against one host's C(ansible_facts.gpuhost) document and returns one
    finding per rule and subject (GPU, NIC, bridge, NUMA node, container).
  - Every finding has a status V(pass), V(fail), V(unknown) (the facts needed are missing; the reason is
    in the message), V(waived) or V(not_applicable).
  - This is an action plugin. Judging runs entirely on the controller. When O(facts) is not given it first
    gathers them with one M(gpuhost.baseline.host_facts) call (options O(root) and O(gather)), so an audit
    costs one task and one module run per host.
  - Rule format, operators and derived facts are described in C(docs/rules.md); profiles, parameters and
    waivers in C(docs/profiles.md).
author:
  - gpuhost.baseline maintainers (@gpuhost-baseline)
options:
  facts:
    description:
      - The host's facts document, as returned by M(gpuhost.baseline.host_facts) under C(ansible_facts.gpuhost).
      - When omitted, the facts are gathered on the host first (see O(root), O(gather)).
    type: dict
  root:
    description:
      - Passed to M(gpuhost.baseline.host_facts) when gathering; V(/) is the live host, anything else a snapshot directory.
    type: path
    default: /
  gather:
    description:
      - Subsystems to gather when gathering (default all).
    type: list
    elements: str
    choices: [kernel, cpu, numa, pci, iommu, nvidia, lxc, persistence, health]
  kernel_log_boots:
    description:
      - Passed to M(gpuhost.baseline.host_facts) when gathering (O(gpuhost.baseline.host_facts#module:kernel_log_boots)).
      - V(1) reads the kernel log of the current boot; V(2) also the previous boot's, named by its boot id, whose
        GPU and NVSwitch faults rule HEALTH-016 judges.
    type: int
    choices: [1, 2]
    default: 1
  controller_guard:
    description:
      - Before anything is read, refuse a host whose audit would read the controller itself - a C(local) connection,
        O(root) resolving to C(/), an inventory name other than C(localhost), C(127.0.0.1) or C(::1), and
        O(allow_controller) not set - the check of M(gpuhost.baseline.baseline_validate)'s
        O(gpuhost.baseline.baseline_validate#module:controller_guard), with the same message. The task fails with
        RV(host_report) state V(failed) and the refusal as its message; nothing is gathered.
      - The audit role sets it (one task per host for the guard and the audit); the remediate and validate roles
        run their guard as a task of its own first.
    type: bool
    default: false
  allow_controller:
    description:
      - The host's C(gpuhost_allow_controller), for O(controller_guard).
    type: bool
    default: false
  guard_action:
    description:
      - What O(controller_guard) protects, for its message (as M(gpuhost.baseline.baseline_validate)'s
        O(gpuhost.baseline.baseline_validate#module:guard_action)).
    type: str
    choices: [audit, learn, remediate, snapshot, validate]
    default: audit
  keep_facts:
    description:
      - Keep the gathered facts for a second judgement later in the same run, in a file of the controller's local
        temporary directory (Ansible's C(ansible-local-*) directory of this run, mode 0700, removed when the run
        ends), returned as RV(facts_file); none of the facts stays in the play's memory. The remediate role's
        C(--check) judges them again after its fix plan, instead of gathering a second time.
    type: bool
    default: false
  facts_from:
    description:
      - Judge the facts of a RV(facts_file) written earlier in this run by O(keep_facts) instead of gathering.
        A file that cannot be read makes the host V(failed) with the reason.
    type: path
  return_facts:
    description:
      - Also return the gathered facts as C(ansible_facts.gpuhost). Off by default, because the audit needs only
        the findings and the document of a 768-CPU host is large.
    type: bool
    default: false
  return_findings:
    description:
      - Return RV(findings), RV(failing) and RV(pending_items), the findings with every field. V(false) returns
        only RV(host_report) (the findings without the rule text each copies, as one JSON text,
        C(host_report.findings_json)), the counts and what the remediate role acts on - what the roles pass,
        because Ansible keeps every host's registered result in the controller's memory until the play ends
        (at 1,000 hosts the full findings are about 200 MB of JSON, and the same findings as lists and
        mappings take about three times the memory of their JSON text).
    type: bool
    default: true
  before:
    description:
      - Findings of an earlier evaluation of the same host (the remediate role's before view), copied into RV(host_report).
    type: list
    elements: dict
  applied:
    description:
      - Rule ids whose fix task ran in this remediation (the remediate role passes them with O(before); none in
        check mode). The pending items then say V(not-fixed) (still failing after the fix) only for these; an
        automatic fix that did not run is V(not-applied).
      - Without it the pending items never say that a fix ran.
    type: list
    elements: str
  prove:
    description:
      - What the fixes delivered, for C(remediate.yml) with C(gpuhost_prove) (C(docs/remediation.md), "Prove what the
        fixes delivered"). C(before) and C(after) are the registered M(gpuhost.baseline.host_measure) results (with
        C(runs) when repeated); or C(note), why the host was not measured. The host's report gets C(prove), the
        fixes of O(applied) and each figure before and after, its change and whether it exceeds the runs' spread;
        the result gets C(prove_line), the console line of it.
    type: dict
  note:
    description:
      - A message for this host in the report (for example why remediation skipped it).
    type: str
  failure:
    description:
      - Why work on this host did not complete (the remediate role passes the fix task that failed or lost its
        connection). The host is reported with state V(failed) and this message; its findings are still those
        of this evaluation, so the report shows where the host stands.
    type: str
  profile:
    description:
      - Profile name, or V(auto) to pick the highest-priority profile whose C(match) expression holds on
        the facts (falling back to C(generic-nvidia-inference)).
    type: str
    default: auto
  params:
    description:
      - Parameter overrides merged over the profile's parameters (inventory variable C(gpuhost_params)).
        Unknown names and values of the wrong type are rejected. Mapping parameters merge one level deep.
    type: dict
    default: {}
  waivers:
    description:
      - Waivers (inventory variable C(gpuhost_waivers)), each a mapping with C(rule) (rule id),
        C(hosts) (list of host name patterns, default all), C(subjects) (optional list of subject labels or
        patterns), C(reason) and C(expires) (YYYY-MM-DD, last valid day).
      - A waived failing finding gets status V(waived); after expiry it is a V(fail) whose message starts
        with C(waiver expired <date>).
    type: list
    elements: raw
    default: []
  waiver_files:
    description:
      - YAML files on the controller, each holding a list of waivers in the format of O(waivers) (inventory
        variable C(gpuhost_waiver_files)); their waivers are added to O(waivers).
      - Each file is checked against C(schemas/waivers.schema.json) of the collection; an error names the file,
        the waiver and the field.
    type: list
    elements: path
    default: []
  catalogue_dirs:
    description:
      - Site catalogue directories on the controller (inventory variable C(gpuhost_catalogue_dirs)), layered over
        the bundled catalogue in list order. Each may hold C(rules/*.yml) (new rules), C(profiles/*.yml) (new
        profiles, which may C(extends) a bundled one and change parameters, C(rules.severity) and C(rules.exclude))
        and C(waivers/*.yml) (waiver files added to O(waiver_files)). Format in C(docs/profiles.md).
      - A site rule or profile that reuses an id or a name of an earlier layer replaces it only with C(replaces)
        set to V(true); otherwise the collision is an error naming both files.
      - A relative path is resolved against the current directory of the C(ansible-playbook) process.
    type: list
    elements: path
    default: []
  host:
    description:
      - Host name waivers are matched against. Defaults to C(inventory_hostname).
    type: str
  today:
    description:
      - Date (YYYY-MM-DD) to judge waiver expiry against instead of the controller's date (for tests and reports
        of a past run).
    type: raw
  history_dir:
    description:
      - Directory of the drift history on the controller (role variable C(gpuhost_history_dir)), the one
        M(gpuhost.baseline.baseline_report) appends to. When set, the host's history file (named after its
        C(inventory_hostname)) is read and what the audits earlier in the same boot (same C(kernel.boot_id))
        saw is given to the rules as C(history), so PCI-008 fails a MaxReadReq that was different earlier in this
        boot while nothing sets it at boot (C(docs/rules.md)).
      - A missing file is no history; a damaged line is skipped with a warning; the host is never touched.
      - A relative path is resolved against the current directory of the C(ansible-playbook) process.
      - Unset (the default), PCI-008 has no history to go by and fails only on a boot mechanism that sets another value.
    type: path
extends_documentation_fragment:
  - gpuhost.baseline.controller
  - gpuhost.baseline.controller.judging
notes:
  - A malformed rule, profile, parameter or waiver fails the task with the file, the rule id and what is wrong.
seealso:
  - module: gpuhost.baseline.baseline_validate
  - module: gpuhost.baseline.host_facts
"""

EXAMPLES = r"""
- name: Gather facts
  gpuhost.baseline.host_facts:
  become: true
  register: gathered

- name: Evaluate with the profile chosen from the facts
  gpuhost.baseline.baseline_evaluate:
    facts: "{{ gathered.ansible_facts.gpuhost }}"
    profile: auto
    params:
      kernel_min: "6.14"
      max_read_request_bytes_nic: 1024
    waivers:
      - rule: NUMA-003
        hosts: [gpu0*]
        subjects: [node1]
        reason: node 1 carries the page cache of the model store until the NVMe move
        expires: 2026-03-31
  register: baseline

- name: Show what fails
  ansible.builtin.debug:
    msg: "{{ baseline.failing }}"
"""

RETURN = r"""
facts_source:
  description:
    - Where the judged facts came from - V(gathered) on the host, V(given) (O(facts)) or V(kept) (O(facts_from)).
  returned: always
  type: str
  sample: gathered
applied:
  description: The rule ids of O(applied), as given (the remediate role passes them on to a later judgement).
  returned: success and O(applied) given
  type: list
  elements: str
facts_file:
  description: The file that keeps the gathered facts for a second judgement (O(facts_from)), with O(keep_facts).
  returned: success and O(keep_facts) true
  type: str
  sample: /root/.ansible/tmp/ansible-local-4242abcd/gpuhost-facts-x1y2z3.json
findings:
  description: One entry per rule and subject, in catalogue order.
  returned: success and O(return_findings) true
  type: list
  elements: dict
  contains:
    id:
      description: Rule id.
      type: str
      sample: PCI-001
    title:
      description: Rule title.
      type: str
      sample: GPU MaxReadReq at least max_read_request_bytes_gpu
    area:
      description: Rule area (C(cpu), C(kernel), C(numa), C(pcie), C(iommu), C(nvidia), C(lxc)).
      type: str
      sample: pcie
    severity:
      description: V(critical), V(high), V(medium), V(low) or V(info).
      type: str
      sample: high
    status:
      description: V(pass), V(fail), V(unknown), V(waived) or V(not_applicable).
      type: str
      sample: fail
    subject:
      description: What the finding is about (PCI address, node, container); V(null) for host-wide rules.
      type: str
      sample: "0000:41:00.0"
    expected:
      description: The value the rule expects (a parameter value resolved, a list for V(in) and V(empty)).
      type: raw
      sample: 4096
    observed:
      description: The value read from the facts (V(null) when unknown).
      type: raw
      sample: 512
    message:
      description: Short, specific description of the outcome.
      type: str
      sample: "MaxReadReq 512 B < 4096 B on 0000:41:00.0 (NVIDIA RTX PRO 6000 Blackwell Server Edition)"
    fix:
      description: One-line human fix.
      type: str
    fix_action:
      description: Key the remediate role maps to a fixing module (C(sysctl), C(kernel_cmdline), C(pcie_tune), ...).
      type: str
      sample: pcie_tune
    reboot_required:
      description: Whether the fix takes effect only after a reboot.
      type: bool
    rationale:
      description: Why the rule exists.
      type: str
    source:
      description: URL of the authority behind the rule.
      type: str
    pending:
      description: The fix is already configured and waits for a reboot or GPU reset (for example a newer kernel installed).
      type: bool
    waiver:
      description: The matching waiver (C(reason), C(expires), C(hosts), C(subjects), C(expired)), or V(null).
      type: dict
summary:
  description: Number of findings per status.
  returned: success
  type: dict
  sample: {"pass": 31, "fail": 12, "unknown": 2, "waived": 1, "not_applicable": 9}
profile:
  description: Name of the profile used (resolved when V(auto)).
  returned: success
  type: str
  sample: amd-epyc-nvidia
params:
  description: Effective parameters (profile values with the overrides merged).
  returned: success
  type: dict
failing:
  description: One short line per failing finding, for printing.
  returned: success and O(return_findings) true
  type: list
  elements: str
  sample: ["PCI-001 [high] MaxReadReq 512 B < 4096 B on 0000:41:00.0 (NVIDIA RTX PRO 6000 Blackwell Server Edition)"]
failing_ids:
  description: Sorted ids of the rules with at least one failing finding (waived findings excluded).
  returned: success
  type: list
  elements: str
  sample: ["NUMA-001", "PCI-001"]
fix_plan:
  description:
    - Failing rules grouped by their fix action (C(sysctl), C(pcie_tune), C(cpu_power), C(kernel_cmdline),
      C(nvidia_gpu), C(manual)...), each rule id mapped to its failing subjects; what the remediate role acts on.
  returned: success
  type: dict
  sample: {"pcie_tune": {"PCI-001": ["0000:43:00.0", "0000:44:00.0"]}, "sysctl": {"NUMA-001": []}}
pending_items:
  description:
    - One entry per failing finding with why it is still open - C(kind) is V(reboot) (configured, waits for a
      reboot), V(manual) (the rule's C(fix.kind); its hint says what to do), V(opt-in) (the fix runs only with the
      rule's C(fix.variable) set and did not run), V(not-applied) (an automatic fix that did not run - left out by
      C(--tags)/C(--skip-tags), a C(--check) preview, an earlier fix failed) or V(not-fixed) (the fix ran, its rule
      id in O(applied), and the check still fails) - for the remediation report.
  returned: success and O(return_findings) true
  type: list
  elements: dict
  sample: [{"id": "CPU-001", "subject": null, "kind": "reboot", "message": "pending a reboot: ..."}]
host_report:
  description:
    - This host's part of the report, the input of M(gpuhost.baseline.baseline_report) - C(state) (V(audited),
      V(failed) when facts could not be gathered or O(failure) is set, V(unreachable)), C(message), C(hostname),
      C(findings), C(profile),
      C(numa) (nodes for the chart), C(facts_errors), C(boot_id) (fact C(kernel.boot_id), for the drift
      history of M(gpuhost.baseline.baseline_report)), C(counters) (the error counter values read, by names such as
      C(ib|mlx5_0/1|link_downed); the history keeps them for the counter rules HEALTH-020 to HEALTH-023 of
      the next audits), and with O(before) also C(before) and C(pending).
    - Its findings (and C(before.findings)) leave out what each finding copies from its rule (C(title), C(area),
      C(severity), C(fix), C(reboot_required), C(rationale), C(source), C(fix_action)), the same on every host, so
      M(gpuhost.baseline.baseline_report) puts it back from the catalogue. RV(findings) keeps every field.
    - With O(return_findings=false) (the roles) the findings are one JSON text, C(findings_json) in place of
      C(findings) (and in C(before)); M(gpuhost.baseline.baseline_report) reads either. Read them in a task
      with C(gpuhost_eval.host_report.findings_json | from_json).
  returned: always
  type: dict
  sample: {"state": "audited", "hostname": "gpu01", "profile": "amd-epyc-nvidia", "findings": [], "numa": [],
           "facts_errors": 0}
busy_gpus:
  description:
    - GPUs running compute processes (the maintenance guards of the remediate and validate roles).
    - Fails closed - a GPU whose process list nvidia-smi did not give, and NVIDIA GPUs on the PCI bus that nvidia-smi
      does not list (it failed, hung or is missing), are in it too, with C(unknown) set and the reason in C(processes).
  returned: success
  type: list
  elements: dict
  sample: [{"index": 0, "bus_id": "0000:43:00.0", "processes": ["python3 (pid 4242)"]}]
busy_reason:
  description:
    - Why the maintenance guards of the remediate and validate roles leave this host alone, in one sentence naming
      the compute processes of RV(busy_gpus), or saying that they are not known (which counts as busy); an empty
      string when no GPU runs compute work. C(gpuhost_force) overrides the guards.
  returned: success
  type: str
  sample: "GPUs are running compute work (python3 (pid 4242)); drain the host or set gpuhost_force=true"
measure_line:
  description:
    - With O(facts) holding measurements (the validate role's second pass), validate.yml's line of what was
      measured on this host - each measurement's status and its tool's message, every value escaped as on every
      console line (control and bidi characters as C(\x1b), C(\u202e)).
  returned: when O(facts) has C(measure)
  type: str
  sample: "gpu01: cpu_freq ok; mem_bw ok; gpu_bw unknown (no NVIDIA GPU on this host)"
prove_line:
  description:
    - With O(prove), remediate.yml's line of what the fixes delivered on this host - the fixes that ran, then each
      figure before -> after with its change and verdict, every value escaped as on every console line.
  returned: when O(prove) is given
  type: str
  sample: "gpu01: CPU-003 applied: lowest CPU clock under load 1,000 -> 2,000 MHz (+100.0 %, better)"
rule_status:
  description:
    - Each judged rule's status on this host, a mapping of rule id to status - the worst of its findings (V(fail), V(unknown),
      V(waived), V(pass), V(not_applicable) in that order); a rule this run did not judge is absent.
    - The role C(gpuhost.baseline.on_fail) passes it to M(gpuhost.baseline.slurm_node) as the evidence a drain is
      released on - every rule its reason names V(pass) or V(waived).
  returned: success
  type: dict
  sample: {"CPU-001": "pass", "PCI-001": "fail", "VAL-003": "not_applicable"}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.gather import SUBSYSTEMS


# The options, once: the action plugin (plugins/action/baseline_evaluate.py) validates its arguments with
# this spec, and ansible-test's validate-modules holds it to DOCUMENTATION.
ARGUMENT_SPEC = dict(
    facts=dict(type="dict"),
    root=dict(type="path", default="/"),
    gather=dict(type="list", elements="str", choices=list(SUBSYSTEMS)),
    kernel_log_boots=dict(type="int", default=1, choices=[1, 2]),
    controller_guard=dict(type="bool", default=False),
    allow_controller=dict(type="bool", default=False),
    guard_action=dict(type="str", default="audit", choices=["audit", "learn", "remediate", "snapshot", "validate"]),
    keep_facts=dict(type="bool", default=False),
    facts_from=dict(type="path"),
    return_facts=dict(type="bool", default=False),
    return_findings=dict(type="bool", default=True),
    before=dict(type="list", elements="dict"),
    note=dict(type="str"),
    failure=dict(type="str"),
    profile=dict(type="str", default="auto"),
    params=dict(type="dict", default={}),
    waivers=dict(type="list", elements="raw", default=[]),
    waiver_files=dict(type="list", elements="path", default=[]),
    catalogue_dirs=dict(type="list", elements="path", default=[]),
    history_dir=dict(type="path"),
    applied=dict(type="list", elements="str"),
    prove=dict(type="dict"),
    host=dict(type="str"),
    today=dict(type="raw"),
)


def main():
    module = AnsibleModule(
        argument_spec=ARGUMENT_SPEC,
        supports_check_mode=True,
    )
    module.fail_json(msg="gpuhost.baseline.baseline_evaluate is an action plugin that runs on the controller; "
                         "it was executed as a module on the host, which means the collection's action plugin "
                         "was not found: call it by its full name gpuhost.baseline.baseline_evaluate")


if __name__ == "__main__":
    main()
