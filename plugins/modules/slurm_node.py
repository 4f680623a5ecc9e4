#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: slurm_node
short_description: Drain a Slurm node naming the failing rules, and undrain it only on evidence when this tool drained it
version_added: 0.1.0
description:
  - Acts on an audit's verdict through Slurm. Reads the node with C(scontrol show node -o NAME), then
    drains it (O(state=drained)) or releases the drain (O(state=resumed)) with C(scontrol update).
  - >-
    B(Drain) - C(scontrol update NodeName=NAME State=DRAIN Reason="gpuhost: ID ID ..."). The reason
    starts with the marker C(gpuhost:) and names the failing rule ids (sorted, at most 200 characters,
    C(+N more) after that). A node already drained by this tool with the same reason is unchanged; with
    other rule ids the reason is rewritten; the rewritten reason keeps every rule id of the old one that
    O(evidence) does not show judged V(pass) or V(waived). A node drained by someone else (a reason without
    the marker) is left as it is, reason included, and the result says so.
  - B(Resume) - C(scontrol update NodeName=NAME State=UNDRAIN) only when the node is drained, its
    reason starts with the marker (this tool drained it) B(and) every rule id the reason names was judged
    V(pass) or V(waived) in this run (O(evidence)). A rule that is V(unknown), V(not_applicable) or missing
    from O(evidence) (not judged by this run, such as a VAL rule in a plain audit), a reason cut short with
    C(+N more), or no O(evidence) at all keeps the drain; the result names the rule ids in
    RV(lacking_evidence). C(UNDRAIN) clears the drain flag and nothing else, so a node Slurm marked C(DOWN)
    stays down. A node an administrator drained, or one that is not drained, is unchanged.
  - After an update the node is read again; a node that does not show the new state fails the task.
  - Missing C(scontrol), a node Slurm does not know, a non-zero exit, output that is not C(scontrol)'s
    or a command that hangs past O(timeout) fails the task with the reason; nothing is guessed.
author:
  - gpuhost.baseline maintainers (@gpuhost-baseline)
options:
  name:
    description:
      - The node's name in Slurm (C(NodeName)), often the host's short name.
    type: str
    required: true
  state:
    description:
      - V(drained) - the node should be drained with a reason naming O(rules).
      - V(resumed) - the node should not be drained by this tool; a drain of this tool is released,
        anybody else's is kept.
    type: str
    required: true
    choices: [drained, resumed]
  rules:
    description:
      - The failing rule ids the drain reason names. Required, and not empty, with O(state=drained).
      - Each id is letters, digits, C(.), C(_) and C(-) (at most 64 characters); anything else fails the task.
    type: list
    elements: str
    default: []
  evidence:
    description:
      - This run's status of each rule judged on the host, a mapping of rule id to status, with the statuses of the
        findings (V(pass), V(fail), V(unknown), V(waived), V(not_applicable)); the audit's C(baseline_evaluate)
        returns it as C(rule_status), and the role C(gpuhost.baseline.on_fail) passes it.
      - With O(state=resumed) a drain of this tool is released only when every rule id its reason names is
        V(pass) or V(waived) here; unset, nothing is released. With O(state=drained) a rewritten reason
        keeps the rule ids of the old one that are not.
    type: dict
  scontrol:
    description:
      - The C(scontrol) to run, a name looked up in PATH or a path.
    type: str
    default: scontrol
  slurm_conf:
    description:
      - The C(slurm.conf) that C(scontrol) reads (set as E(SLURM_CONF)). Unset, Slurm's default applies.
    type: path
  timeout:
    description:
      - Seconds one C(scontrol) call may take; a call that takes longer is killed and fails the task.
    type: int
    default: 30
attributes:
  check_mode:
    description:
      - Reads the node with C(scontrol show node) and reports what it would do in RV(action) and RV(commands);
        C(scontrol update) never runs.
    support: full
  diff_mode:
    description: Returns the node's state and reason before and after (as they would be, in check mode).
    support: full
notes:
  - C(scontrol update) needs a Slurm administrator (root or SlurmUser) where it runs. Run the task on a host
    with Slurm's client and configuration, the node itself or a login or controller host (C(delegate_to)).
  - The role C(gpuhost.baseline.on_fail) calls this module after an audit when C(gpuhost_on_fail) contains
    V(slurm_drain) (docs/acting-on-the-verdict.md).
seealso:
  - name: scontrol
    description: C(update NodeName= State=DRAIN|UNDRAIN Reason=).
    link: https://slurm.schedmd.com/scontrol.html
"""

EXAMPLES = r"""
- name: Drain this node, naming the rules that failed
  gpuhost.baseline.slurm_node:
    name: "{{ inventory_hostname_short }}"
    state: drained
    rules: [PCI-001, KERNEL-003]
  become: true

- name: A clean run releases the drain this tool set when its rules pass now (an administrator's drain stays)
  gpuhost.baseline.slurm_node:
    name: "{{ inventory_hostname_short }}"
    state: resumed
    evidence: "{{ gpuhost_eval.rule_status }}"
  become: true

- name: What would happen, asked on the Slurm controller (nothing changes)
  gpuhost.baseline.slurm_node:
    name: gpu07
    state: drained
    rules: [GPU-004]
  delegate_to: slurm-ctl01
  check_mode: true
"""

RETURN = r"""
action:
  description:
    - What was done (in check mode, what would be done) - V(drain), V(update_reason), V(undrain) or V(none).
  returned: success
  type: str
  sample: drain
msg:
  description: One sentence on the decision, naming an administrator's reason when the node was left alone.
  returned: always
  type: str
  sample: "gpu07 drained: gpuhost: KERNEL-003 PCI-001"
node:
  description: The node as read before any change (name, base state, flags, drain, reason, reason_user).
  returned: success
  type: dict
  sample: {"name": "gpu07", "state": "idle", "flags": [], "drain": false, "reason": null, "reason_user": null}
reason:
  description: The drain reason this tool writes (or would write); V(null) with O(state=resumed).
  returned: success
  type: str
  sample: "gpuhost: KERNEL-003 PCI-001"
drained_by_us:
  description: Whether the node was drained by this tool (its reason has the C(gpuhost:) marker) before the task.
  returned: success
  type: bool
  sample: false
lacking_evidence:
  description:
    - Why a drain of this tool was kept with O(state=resumed) - each rule id of its reason not judged V(pass)
      or V(waived) in O(evidence), with its status (C(CPU-001 unknown), C(VAL-003 not judged by this run));
      empty otherwise.
  returned: success
  type: list
  elements: str
  sample: ["CPU-001 unknown", "VAL-003 not judged by this run"]
commands:
  description: The C(scontrol update) commands run or, in check mode, that would run.
  returned: always
  type: list
  elements: str
  sample: ["scontrol update NodeName=gpu07 State=DRAIN 'Reason=gpuhost: KERNEL-003 PCI-001'"]
"""

from shlex import quote

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuhost.baseline.plugins.module_utils.host import runner
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.slurm import (
    drain_reason, drained_by_us, kept_rule_ids, missing_evidence, parse_show_node)


class SlurmError(Exception):
    pass


def _line(argv):
    return " ".join(quote(part) for part in argv)


def _runner(module, binary, timeout):
    env = {}
    if module.params["slurm_conf"]:
        env["SLURM_CONF"] = module.params["slurm_conf"]

    def run(args):
        argv = [binary] + list(args)
        # the one command runner: C locale, no stdin, output bounded, the process group killed at the bound
        result = runner.run(argv, timeout=timeout, env=env)
        if result.bound == runner.TIMEOUT:
            raise SlurmError("%s did not answer within %d s (killed); is slurmctld reachable?" % (_line(argv), timeout))
        if result.bound is not None:
            raise SlurmError("%s: %s" % (_line(argv), result.reason))
        out = result.stdout.decode("utf-8", "replace")
        err = result.stderr.decode("utf-8", "replace")
        if result.rc == 127 and not out and err.startswith("cannot run "):
            raise SlurmError(err)
        if result.rc != 0:
            lines = (err or out).strip().splitlines()
            raise SlurmError("%s exited %d: %s" % (_line(argv), result.rc,
                                                   lines[-1][:300] if lines else "no output"))
        return out
    return run


def _read(run, name):
    node, error = parse_show_node(run(["show", "node", "-o", name]), name)
    if error:
        raise SlurmError("scontrol show node -o %s: %s" % (name, error))
    return node


def merged_reason(node, reason, rules, evidence):
    """The drain reason to write over this tool's drain of ``node``: ``reason`` (the failing ``rules``)
    with the rule ids of the node's reason that ``evidence`` does not show passing kept in it, so that a
    rule gone unknown is not dropped from the reason and then released by a later run. ``reason`` as
    it is for a node not drained by this tool, without ``evidence``, or when nothing is to be kept."""
    if evidence is None or not drained_by_us(node):
        return reason
    kept = [rule_id for rule_id in kept_rule_ids(node["reason"], evidence) if rule_id not in rules]
    if not kept:
        return reason
    merged, error = drain_reason(list(rules) + kept)
    return reason if error else merged


def decide(node, state, reason, evidence=None):
    """``(action, args, message)``: what to do with ``node`` (from :func:`parse_show_node`). With
    ``state`` resumed this tool's drain is released only when :func:`missing_evidence` finds nothing
    missing in ``evidence`` (``{rule id: status}`` of this run; ``None``: no evidence, nothing released)."""
    name = node["name"]
    ours = drained_by_us(node)
    if state == "drained":
        if ours and node["reason"] == reason:
            return "none", None, "%s already drained by gpuhost with this reason" % name
        if node["drain"] and not ours:
            return "none", None, "%s is drained by someone else (reason: %s); left as it is" % (
                name, node["reason"] or "none given")
        action = "update_reason" if ours else "drain"
        return action, ["update", "NodeName=" + name, "State=DRAIN", "Reason=" + reason], \
            "%s drained: %s" % (name, reason)
    if ours:
        lacking = missing_evidence(node["reason"], evidence)
        if lacking:
            return "none", None, "%s stays drained (%s): no evidence that its rules pass now: %s" % (
                name, node["reason"], "; ".join(lacking))
        return "undrain", ["update", "NodeName=" + name, "State=UNDRAIN"], \
            "%s undrained: its drain (%s) was this tool's and every rule it names passes now" % (name, node["reason"])
    if node["drain"]:
        return "none", None, "%s is drained by someone else (reason: %s); not resumed" % (
            name, node["reason"] or "none given")
    return "none", None, "%s is not drained" % name


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            state=dict(type="str", required=True, choices=["drained", "resumed"]),
            rules=dict(type="list", elements="str", default=[]),
            scontrol=dict(type="str", default="scontrol"),
            slurm_conf=dict(type="path"),
            timeout=dict(type="int", default=30),
            evidence=dict(type="dict"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    name, state = params["name"], params["state"]
    evidence = params["evidence"]
    commands = []
    reason = None
    if state == "drained":
        reason, error = drain_reason(params["rules"])
        if error:
            module.fail_json(msg="cannot drain %s: %s" % (name, error), commands=commands)
    binary = module.get_bin_path(params["scontrol"])
    if not binary:
        module.fail_json(msg="%s not found in PATH: Slurm's client (scontrol) is needed to act on the verdict"
                         % params["scontrol"], commands=commands)
    run = _runner(module, binary, max(1, params["timeout"]))
    try:
        node = _read(run, name)
        if state == "drained":
            reason = merged_reason(node, reason, params["rules"], evidence)
        action, args, msg = decide(node, state, reason, evidence)
        after = dict(node)
        if args:
            commands.append(_line([params["scontrol"]] + args))
            if not module.check_mode:
                run(args)
                after = _read(run, name)
                if state == "drained" and not (after["drain"] and after["reason"] == reason):
                    raise SlurmError("%s was drained but reads back State=%s Reason=%s" % (
                        name, "+".join([after["state"]] + after["flags"]), after["reason"]))
                if state == "resumed" and after["drain"]:
                    raise SlurmError("%s was undrained but is still drained (reason: %s)" % (name, after["reason"]))
            else:
                after = dict(node, drain=state == "drained", reason=reason if state == "drained" else None)
    except SlurmError as exc:
        module.fail_json(msg=str(exc), commands=commands)
    lacking = missing_evidence(node["reason"], evidence) if state == "resumed" and action == "none" and \
        drained_by_us(node) else []
    result = dict(changed=bool(args), action=action, msg=msg, node=node, reason=reason,
                  drained_by_us=drained_by_us(node), lacking_evidence=lacking, commands=commands)
    if module._diff:
        result["diff"] = dict(
            before="drain: %s\nreason: %s\n" % (node["drain"], node["reason"]),
            after="drain: %s\nreason: %s\n" % (after["drain"], after["reason"]))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
