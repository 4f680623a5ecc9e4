"""The fix binding as data (issue 19): each rule's ``fix`` (kind automatic / opt_in / manual, the
action, for opt_in the variable) in rules/*.yml against the fixes of the remediate role: the steps of
roles/remediate/vars/main.yml (gpuhost_fix_steps, applied by one host_fix task) and the tasks of
roles/remediate/tasks/fix.yml that name a rule (the kernel package). A step is checked as the task it
stands for (:func:`step_as_task`: its module, its rules as its when and tags, its enabled condition).

:func:`binding_problems` is the checker; the suite fails on any problem it finds in the shipped
files, and the fake rules and tasks below show that it finds each kind of mismatch.
"""
import os
import re

import pytest
import yaml

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_load import load_catalogue
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_model import FIX_ACTIONS

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FIX_YML = os.path.join(REPO, "roles", "remediate", "tasks", "fix.yml")
STEPS_YML = os.path.join(REPO, "roles", "remediate", "vars", "main.yml")
RULE_ID = re.compile(r"^[A-Z]+-[0-9]{3}$")
RULE_ID_IN_TEXT = re.compile(r"\b[A-Z]+-[0-9]{3}\b")
#: task keys that are no module
TASK_KEYWORDS = {"name", "when", "register", "tags", "vars", "become", "notify", "loop", "loop_control",
                 "changed_when", "failed_when", "ignore_errors", "check_mode", "delegate_to", "environment", "no_log"}


def _module(task):
    modules = [key for key in task if key not in TASK_KEYWORDS]
    return modules[0] if len(modules) == 1 else None


def _when_text(task):
    when = task.get("when", [])
    return " ".join(when) if isinstance(when, list) else str(when)


def binding_problems(rules, tasks, actions=None):
    """What is wrong between ``rules`` (``{id: {"kind", "action", "variable"}}``) and ``tasks``
    (fix.yml, loaded): one sentence per problem, ``[]`` when the binding holds. ``actions`` is
    :data:`FIX_ACTIONS` (action -> (module, default kind))."""
    actions = FIX_ACTIONS if actions is None else actions
    problems = []
    applied_by = {}
    for task in tasks:
        name = task.get("name", "")
        tags = task.get("tags") or []
        ids = [tag for tag in tags if RULE_ID.match(tag)]
        if not ids:
            continue  # the reboot: no rule of its own
        named = RULE_ID_IN_TEXT.findall(name.split(" - ", 1)[0])
        in_when = set(RULE_ID_IN_TEXT.findall(_when_text(task)))
        module = _module(task)
        if sorted(named) != sorted(ids):
            problems.append("task %r: its name names %s, its tags %s" % (name, ", ".join(named), ", ".join(ids)))
        if in_when != set(ids):
            problems.append("task %r: its when names %s, its tags %s" % (name, ", ".join(sorted(in_when)), ", ".join(ids)))
        for rid in ids:
            rule = rules.get(rid)
            if rule is None:
                problems.append("task %r: %s is no rule" % (name, rid))
                continue
            if rule["kind"] not in ("automatic", "opt_in"):
                problems.append("task %r applies %s, whose fix kind is %s" % (name, rid, rule["kind"]))
                continue
            wanted = (actions.get(rule["action"]) or (None, None))[0]
            if wanted is None or wanted != module:
                problems.append("task %r applies %s with %s, but its fix action %s is applied with %s" % (
                    name, rid, module, rule["action"], wanted))
            if rule["kind"] == "opt_in" and (not rule.get("variable") or rule["variable"] not in _when_text(task)):
                problems.append("task %r applies the opt-in fix of %s, but its when does not test %s" % (
                    name, rid, rule.get("variable")))
            if rule["kind"] == "automatic" and "never" in tags:
                problems.append("task %r applies the automatic fix of %s only with --tags (tag never)" % (name, rid))
            applied_by.setdefault(rid, []).append(name)
    for rid, rule in sorted(rules.items()):
        if rule["kind"] == "automatic" and rid not in applied_by:
            problems.append("%s claims an automatic %s fix, but no fix step or task applies it" % (rid, rule["action"]))
    return problems


def shipped_rules():
    return dict((r.id, {"kind": r.fix_kind, "action": r.fix_action, "variable": r.fix_variable})
                for r in load_catalogue().rules)


def step_as_task(step):
    """A step of gpuhost_fix_steps as the task it stands for: host_fix runs it only for its failing rules
    (the when) and when ``enabled`` holds; --tags select it by its rules and tags."""
    rules = list(step.get("rules") or [])
    when = ["gpuhost_before_eval.failing_ids | intersect(%r) | length > 0" % rules]
    if "enabled" in step:
        when.append(str(step["enabled"]))
    return {"name": step["name"], "gpuhost.baseline." + step["module"]: step.get("args") or {}, "when": when,
            "tags": list(step.get("tags") or []) + rules}


def shipped_steps():
    with open(STEPS_YML) as handle:
        return yaml.safe_load(handle)["gpuhost_fix_steps"]


def shipped_tasks():
    with open(FIX_YML) as handle:
        tasks = yaml.safe_load(handle)
    return [step_as_task(step) for step in shipped_steps()] + tasks


def test_steps_are_what_host_fix_takes():
    """Each step names a module host_fix applies, with options that module knows, a unique name, and no
    always or never tag (fix_steps.tags_select handles neither: a step is selected by its rules and tags)."""
    from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.plan import MODULES
    names = set()
    for step in shipped_steps():
        assert step["name"] not in names, step["name"]
        names.add(step["name"])
        assert step["module"] in MODULES, step
        assert set(step.get("args") or {}) <= set(MODULES[step["module"]].ARGUMENT_SPEC), step
        assert not {"always", "never"} & set(step.get("tags") or []), step
        assert step["rules"] and all(RULE_ID.match(rid) for rid in step["rules"]), step


def test_fix_yml_applies_exactly_the_automatic_and_opt_in_fixes():
    assert binding_problems(shipped_rules(), shipped_tasks()) == []


def test_every_shipped_rule_states_its_fix_kind():
    for name in sorted(os.listdir(os.path.join(REPO, "rules"))):
        if not name.endswith(".yml"):
            continue
        with open(os.path.join(REPO, "rules", name)) as handle:
            for raw in yaml.safe_load(handle):
                assert raw["fix"].get("kind"), "%s: %s states no fix.kind" % (name, raw["id"])


def test_the_seven_rules_of_issue_19_are_bound():
    """CPU-002 is applied (amd_pstate=active with CPU-001's task); the others are manual, with why."""
    rules = load_catalogue().by_id
    assert rules["CPU-002"].fix_kind == "automatic" and rules["CPU-002"].fix_action == "kernel_cmdline"
    for rid in ("CPU-007", "KERNEL-002", "KERNEL-003", "NVIDIA-005", "NVIDIA-006", "PCI-003"):
        assert rules[rid].fix_kind == "manual", rid
        assert rules[rid].fix_hint.startswith("not automatic: "), rid
    assert (rules["PCI-006"].fix_kind, rules["PCI-006"].fix_variable) == ("opt_in", "gpuhost_fix_acs")
    assert (rules["KERNEL-001"].fix_kind, rules["KERNEL-001"].fix_variable) == ("opt_in", "gpuhost_kernel_package")


def test_opt_in_variables_are_role_options():
    with open(os.path.join(REPO, "roles", "remediate", "meta", "argument_specs.yml")) as handle:
        options = yaml.safe_load(handle)["argument_specs"]["main"]["options"]
    for rule in load_catalogue().rules:
        if rule.fix_kind == "opt_in":
            assert rule.fix_variable in options, rule.id


# -- the checker finds each kind of mismatch ---------------------------------------------------

def _rules(**changes):
    rules = {"TEST-001": {"kind": "automatic", "action": "sysctl", "variable": None},
             "TEST-002": {"kind": "opt_in", "action": "pcie_tune", "variable": "gpuhost_fix_test"},
             "TEST-003": {"kind": "manual", "action": "manual", "variable": None}}
    for rid, change in changes.items():
        rules[rid.replace("_", "-")].update(change)
    return rules


def _tasks():
    return [
        {"name": "TEST-001 - a sysctl", "gpuhost.baseline.kernel_sysctl": {"key": "k", "value": "0"},
         "when": "gpuhost_before_eval.failing_ids | intersect(['TEST-001']) | length > 0",
         "register": "gpuhost_fix_result_test1", "tags": ["test", "TEST-001"]},
        {"name": "TEST-002 - ACS (opt-in)", "gpuhost.baseline.pcie_tune": {"acs_redirect": "disable"},
         "when": ["gpuhost_fix_test | bool", "'TEST-002' in gpuhost_before_eval.failing_ids"],
         "register": "gpuhost_fix_result_test2", "tags": ["test", "TEST-002"]},
        {"name": "Reboot", "ansible.builtin.reboot": {}, "tags": ["reboot"]},
    ]


def test_checker_accepts_a_consistent_fake_binding():
    assert binding_problems(_rules(), _tasks()) == []


@pytest.mark.parametrize("rules, edit, wanted", [
    # an automatic rule that no task applies (the seven rules of issue 19)
    (_rules(TEST_003={"kind": "automatic", "action": "nvidia_gpu"}), None,
     "TEST-003 claims an automatic nvidia_gpu fix, but no fix step or task applies it"),
    # a task naming a rule whose fix is manual
    (_rules(TEST_001={"kind": "manual"}), None, "applies TEST-001, whose fix kind is manual"),
    # a task whose module is not the one of the rule's action
    (_rules(TEST_001={"action": "cpu_power"}), None,
     "applies TEST-001 with gpuhost.baseline.kernel_sysctl, but its fix action cpu_power is applied with gpuhost.baseline.cpu_power"),
    # an opt-in task not gated by the rule's variable
    (_rules(TEST_002={"variable": "gpuhost_fix_other"}), None, "its when does not test gpuhost_fix_other"),
    # a tag naming a rule that does not exist
    (_rules(), lambda tasks: tasks[0]["tags"].append("TEST-009"), "TEST-009 is no rule"),
    # the when and the tags disagree
    (_rules(), lambda tasks: tasks[0].update(when="'TEST-002' in gpuhost_before_eval.failing_ids"),
     "its when names TEST-002, its tags TEST-001"),
    # the name and the tags disagree
    (_rules(), lambda tasks: tasks[0].update(name="TEST-004 - a sysctl"), "its name names TEST-004, its tags TEST-001"),
    # an automatic fix reachable only with --tags
    (_rules(), lambda tasks: tasks[0]["tags"].append("never"), "only with --tags (tag never)"),
])
def test_checker_fails_on_a_planted_mismatch(rules, edit, wanted):
    tasks = _tasks()
    if edit is not None:
        edit(tasks)
    problems = binding_problems(rules, tasks)
    assert any(wanted in problem for problem in problems), problems


def test_checker_fails_on_the_shipped_files_with_a_rule_claiming_an_automatic_fix():
    rules = shipped_rules()
    rules["PCI-003"] = dict(rules["PCI-003"], kind="automatic", action="pcie_tune")
    assert binding_problems(rules, shipped_tasks()) == [
        "PCI-003 claims an automatic pcie_tune fix, but no fix step or task applies it"]
    tasks = shipped_tasks()
    tasks[0]["tags"].remove("NUMA-006")
    assert any("NUMA-006" in problem for problem in binding_problems(shipped_rules(), tasks))
