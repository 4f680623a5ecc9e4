"""The rule examples (``rules/examples/<file>.yml``, format in docs/rules.md "Examples beside the rule"):
load them, check them against schemas/rule-examples.schema.json, build each case's facts document
and judge it.

A case changes the healthy document of ``helpers.baseline_facts`` with the ``health`` section of
``helpers.health_facts`` (every shipped rule passes on it) by data only: ``set``, ``merge``,
``append`` and ``delete`` at paths such as ``pci.devices[address=$GPU0].pcie.max_read_request``.
``$NAME`` is one of :data:`NAMES`, the addresses the base document is built with.

``check_example`` judges one case and returns what is wrong with it; ``coverage_problems`` says
which rules have no examples and which examples have no rule; ``check_site_examples`` does both
for a site catalogue directory.
"""
import collections
import copy
import json
import os
import re

import jsonschema
import yaml

from helpers import baseline_facts

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base import schema
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge import evaluation
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_load import load_catalogue
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.inputs.learn import learn_inventory

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES_DIR = os.path.join(REPO, "rules", "examples")
SCHEMA_PATH = os.path.join(REPO, "schemas", "rule-examples.schema.json")
#: the profile the shipped examples are judged under (it selects every shipped rule)
PROFILE = "amd-epyc-nvidia"
TODAY = "2026-06-01"
HOST = "gpu01"

#: ``$NAME`` in paths and values: the PCI addresses of the base document
NAMES = dict((name, getattr(baseline_facts, name)) for name in (
    "GPU0", "GPU1", "NIC", "ROOT", "UP", "DOWN0", "DOWN1", "DOWN2", "MGMT_ROOT", "MGMT_NIC"))
CHANGES = ("set", "merge", "append", "delete")

_NAME_RE = re.compile(r"^\$[A-Z][A-Z0-9_]*$")
_KEY = r"[A-Za-z0-9_-]+"
_STEP_RE = re.compile(r"\.(%s)|\[(-?[0-9]+|\*|\$[A-Z][A-Z0-9_]*|\"[^\"]+\"|%s=[^\],=]+(?:,%s=[^\],=]+)*)\]" % (
    _KEY, _KEY, _KEY))

#: one case of one rule: ``kind`` pass or fail, ``number`` from 1 in its list, ``case`` the mapping
Example = collections.namedtuple("Example", "rule_id kind number case file")


class ExampleError(Exception):
    pass


class _Loader(yaml.SafeLoader):  # pylint: disable=too-many-ancestors
    """SafeLoader that refuses a key given twice in one mapping (a rule's examples would vanish)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, unused in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise ExampleError("line %d: %r given twice" % (key_node.start_mark.line + 1, key))
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _schema_validator():
    with open(SCHEMA_PATH) as handle:
        return jsonschema.Draft202012Validator(json.load(handle))


def read_file(path):
    """The examples of one file, schema-checked: ``{rule id: {"pass": [...], "fail": [...]}}``."""
    with open(path) as handle:
        try:
            data = yaml.load(handle, Loader=_Loader)  # nosec: the safe loader
        except ExampleError as exc:
            raise ExampleError("%s: %s" % (path, exc))
    data = schema.json_compatible(data)
    errors = sorted(_schema_validator().iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        raise ExampleError("%s: %s" % (path, "; ".join(
            "%s: %s" % ("/".join(str(p) for p in e.absolute_path) or "(top)", e.message) for e in errors)))
    return data


def read_examples(directory=EXAMPLES_DIR):
    """``{file stem: {rule id: examples}}`` of every ``*.yml`` of ``directory`` (none when missing)."""
    if not os.path.isdir(directory):
        return {}
    return dict((name.rsplit(".", 1)[0], read_file(os.path.join(directory, name)))
                for name in sorted(os.listdir(directory)) if name.endswith((".yml", ".yaml")))


def examples_of(files, directory=EXAMPLES_DIR):
    """Every case of ``files`` (``read_examples``) as :class:`Example`, in file and rule order."""
    out = []
    for stem, rules in sorted(files.items()):
        for rule_id, cases in rules.items():
            for kind in ("pass", "fail", "unknown"):
                for number, case in enumerate(cases.get(kind, ()), 1):
                    out.append(Example(rule_id, kind, number, case, os.path.join(directory, stem + ".yml")))
    return out


def coverage_problems(rule_files, files, examples_dir="rules/examples", rules_dir="rules", known=None):
    """What is missing or extra: ``rule_files`` ``{file stem: [rule ids]}`` of the rule files, ``files``
    the examples (``read_examples``). A rule's examples live in the examples file of its rule file's
    name; every ``may_also_fail`` names a rule (of ``known``, default those of ``rule_files``)."""
    problems = []
    known = set(known) if known is not None else set(rid for ids in rule_files.values() for rid in ids)
    for stem, ids in sorted(rule_files.items()):
        have = files.get(stem, {})
        for rid in ids:
            if rid not in have:
                problems.append("%s (%s/%s.yml) has no examples: add a pass and a fail case to %s/%s.yml" % (
                    rid, rules_dir, stem, examples_dir, stem))
    for stem, rules in sorted(files.items()):
        for rid, cases in rules.items():
            if rid not in rule_files.get(stem, ()):
                problems.append("%s/%s.yml: %s is no rule of %s/%s.yml" % (examples_dir, stem, rid, rules_dir, stem))
            for number, case in enumerate(cases.get("fail", ()), 1):
                for other in case.get("may_also_fail", ()):
                    if other not in known:
                        problems.append("%s/%s.yml: %s fail %d: may_also_fail names %s, which is no rule" % (
                            examples_dir, stem, rid, number, other))
    return problems


# -- paths and changes --------------------------------------------------------------------------------

def _named(text, where):
    if text.startswith("$$"):
        return text[1:]
    if _NAME_RE.match(text):
        if text[1:] not in NAMES:
            raise ExampleError("%s: unknown name %s (known: %s)" % (where, text, ", ".join("$" + n for n in NAMES)))
        return NAMES[text[1:]]
    return text


def substitute(value, where="value"):
    """``value`` with every string (and mapping key) ``$NAME`` replaced by its address; ``$$x`` is ``$x``."""
    if isinstance(value, dict):
        return dict((substitute(k, where), substitute(v, where)) for k, v in value.items())
    if isinstance(value, list):
        return [substitute(v, where) for v in value]
    if isinstance(value, str):
        return _named(value, where)
    return value


def parse_path(path):
    """``[(kind, arg)]`` of a path: ``("key", k)``, ``("index", n)``, ``("all", None)``, ``("match", [(f, v)])``."""
    head = re.match(_KEY, path)
    if not head:
        raise ExampleError("%s: a path starts with a key" % path)
    steps = [("key", head.group(0))]
    pos = head.end()
    while pos < len(path):
        m = _STEP_RE.match(path, pos)
        if not m:
            raise ExampleError("%s: cannot read the path from %r on" % (path, path[pos:]))
        pos = m.end()
        if m.group(1) is not None:
            steps.append(("key", m.group(1)))
            continue
        sel = m.group(2)
        if re.match(r"^-?[0-9]+$", sel):
            steps.append(("index", int(sel)))
        elif sel == "*":
            steps.append(("all", None))
        elif sel.startswith('"'):
            steps.append(("key", sel[1:-1]))
        elif sel.startswith("$"):
            steps.append(("key", _named(sel, path)))
        else:
            pairs = []
            for item in sel.split(","):
                field, text = item.split("=", 1)
                pairs.append((field, _named(text, path)))
            steps.append(("match", pairs))
    return steps


def _as_text(value):
    """How ``[field=value]`` sees a field: the text YAML would write for a scalar (``1``, ``true``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


def _slots(container, step, path):
    """``[(container, key or index)]`` that ``step`` names in ``container``."""
    kind, arg = step
    if kind == "key":
        if not isinstance(container, dict):
            raise ExampleError("%s: %r is taken from a %s, not a mapping" % (path, arg, type(container).__name__))
        return [(container, arg)]
    if not isinstance(container, list):
        raise ExampleError("%s: [%s] needs a list, got %s" % (path, arg, type(container).__name__))
    if kind == "index":
        if not -len(container) <= arg < len(container):
            raise ExampleError("%s: index %d outside the list of %d" % (path, arg, len(container)))
        return [(container, arg % len(container))]
    if kind == "all":
        return [(container, i) for i in range(len(container))]
    found = [(container, i) for i, item in enumerate(container)
             if isinstance(item, dict) and all(_as_text(item.get(f)) == v for f, v in arg)]
    if not found:
        raise ExampleError("%s: no element with %s" % (path, ", ".join("%s=%r" % p for p in arg)))
    return found


def _targets(document, path):
    steps = parse_path(path)
    containers = [document]
    for step in steps[:-1]:
        nxt = []
        for container in containers:
            for parent, key in _slots(container, step, path):
                if isinstance(parent, dict) and key not in parent:
                    raise ExampleError("%s: no key %r (there: %s)" % (path, key, ", ".join(sorted(map(str, parent)))))
                nxt.append(parent[key])
        containers = nxt
    return [slot for container in containers for slot in _slots(container, steps[-1], path)]


def _at(parent, key):
    return parent.get(key) if isinstance(parent, dict) else parent[key]


def apply_changes(document, changes, where="case"):
    """Apply ``set``, ``merge``, ``append`` and ``delete`` of ``changes`` to ``document`` in place."""
    for path, value in changes.get("set", {}).items():
        for parent, key in _targets(document, path):
            parent[key] = copy.deepcopy(substitute(value, "%s: set %s" % (where, path)))
    for path, value in changes.get("merge", {}).items():
        for parent, key in _targets(document, path):
            if not isinstance(_at(parent, key), dict):
                raise ExampleError("%s: merge %s: not a mapping there" % (where, path))
            parent[key].update(copy.deepcopy(substitute(value, "%s: merge %s" % (where, path))))
    for path, value in changes.get("append", {}).items():
        for parent, key in _targets(document, path):
            if not isinstance(_at(parent, key), list):
                raise ExampleError("%s: append %s: not a list there" % (where, path))
            parent[key].append(copy.deepcopy(substitute(value, "%s: append %s" % (where, path))))
    for path in changes.get("delete", []):
        for parent, key in reversed(_targets(document, path)):
            if isinstance(parent, dict) and key not in parent:
                raise ExampleError("%s: delete %s: nothing there" % (where, path))
            del parent[key]
    return document


# -- documents and findings ------------------------------------------------------------------------

def base_document():
    """The healthy document every case starts from: every shipped rule passes on it."""
    from helpers.health_facts import add_health  # pylint: disable=import-outside-toplevel  # it imports this module
    return add_health(baseline_facts.healthy_facts())


def facts_and_params(case, where="case"):
    """The facts document and the parameters of one case (``golden``: params.inventory learned from it)."""
    facts = apply_changes(base_document(), case, where)
    params = substitute(copy.deepcopy(case.get("params", {})), where)
    if "golden" in case:
        params["inventory"] = apply_changes(learn_inventory(facts), case["golden"], where + ": golden")
    return facts, params


def describe(example):
    return "%s %s %d (%s)" % (example.rule_id, example.kind, example.number, os.path.relpath(example.file, REPO))


def check_example(example, profile=PROFILE, catalogue=None):
    """``(problems, findings of the rule)`` of one case judged under ``profile``; no problems when it
    shows what it says: every finding pass, or at least one fail with a message, fix, source and
    observation, the ``message`` fragment in one of them, and no other rule failing beyond
    ``may_also_fail``."""
    where = describe(example)
    facts, params = facts_and_params(example.case, where)
    result = evaluation.evaluate(facts, profile=profile, params=params, host=HOST, today=TODAY, catalogue=catalogue)
    findings = [f for f in result["findings"] if f["id"] == example.rule_id]
    shown = [(f["status"], f["subject"], f["message"]) for f in findings]
    if not findings:
        return ["%s: no finding of %s under profile %s" % (where, example.rule_id, profile)], findings
    if example.kind == "pass":
        bad = [s for s in shown if s[0] != "pass"]
        return (["%s: not every finding passes: %s" % (where, bad)] if bad else []), findings
    if example.kind == "unknown":
        return _unknown_problems(example, where, result, findings), findings
    failing = [f for f in findings if f["status"] == "fail"]
    if not failing:
        return ["%s: no failing finding: %s" % (where, shown)], findings
    problems = []
    for f in failing:
        if not (f["message"] and f["fix"] and f["source"].startswith("https://") and f["observed"] is not None):
            problems.append("%s: a failing finding lacks a message, fix, https source or observation: %s" % (where, f))
    fragment = example.case.get("message")
    if fragment is not None and not any(fragment in f["message"] for f in failing):
        problems.append("%s: no failing message holds %r: %s" % (where, fragment, [f["message"] for f in failing]))
    others = set(f["id"] for f in result["findings"] if f["status"] == "fail") - {example.rule_id}
    extra = others - set(example.case.get("may_also_fail", ()))
    if extra:
        problems.append("%s: other rules fail too: %s (list them under may_also_fail if the change breaks them)" % (
            where, sorted(extra)))
    return problems, findings


def _unknown_problems(example, where, result, findings):
    """What is wrong with an ``unknown`` case: no finding of the rule unknown (or one failing), the
    ``message`` fragment in none of the unknown ones, another rule failing."""
    unknown = [f for f in findings if f["status"] == "unknown"]
    problems = []
    if not unknown or any(f["status"] == "fail" for f in findings):
        problems.append("%s: not an unknown finding without a failing one: %s" % (
            where, [(f["status"], f["subject"], f["message"]) for f in findings]))
    fragment = example.case.get("message")
    if unknown and fragment is not None and not any(fragment in f["message"] for f in unknown):
        problems.append("%s: no unknown message holds %r: %s" % (where, fragment, [f["message"] for f in unknown]))
    others = sorted(set(f["id"] for f in result["findings"] if f["status"] == "fail"))
    if others:
        problems.append("%s: other rules fail: %s" % (where, others))
    return problems


def case_pairs(stem, directory=EXAMPLES_DIR):
    """``{rule id: ((params, mutate) passing, (params, mutate) failing)}`` of the first pass and fail
    case of each rule of ``<directory>/<stem>.yml`` that has a failing case, ``mutate(facts)`` applying the case to the base
    document in place (cases with ``golden`` need the document first: not offered here)."""
    def pair(rule_id, case):
        if "golden" in case:
            raise ExampleError("%s: a golden case has no (params, mutate) form" % rule_id)
        return (substitute(copy.deepcopy(case.get("params", {}))),
                lambda facts: apply_changes(facts, case, rule_id))

    rules = read_file(os.path.join(directory, stem + ".yml"))
    # a rule that never fails (only unknown cases) has no failing pair
    return dict((rid, (pair(rid, cases["pass"][0]), pair(rid, cases["fail"][0]))) for rid, cases in rules.items()
                if cases.get("fail"))


def check_site_examples(site_dir, profile, site_dirs=None):
    """Problems of a site catalogue directory's examples (``<site_dir>/rules/examples/<file>.yml`` for
    the rules of ``<site_dir>/rules/<file>.yml``), judged on the base document under the site
    ``profile`` with ``site_dirs`` (default: this one) layered over the collection; ``[]`` when each
    of the site's rules has examples and every example shows what it says."""
    site_dir = os.path.abspath(site_dir)
    catalogue = load_catalogue(site_dirs=site_dirs or [site_dir])
    rules_dir = os.path.join(site_dir, "rules")
    rule_files = {}
    for rule in catalogue.rules:
        if os.path.dirname(rule.file) == rules_dir:
            rule_files.setdefault(os.path.basename(rule.file).rsplit(".", 1)[0], []).append(rule.id)
    examples_dir = os.path.join(rules_dir, "examples")
    files = read_examples(examples_dir)
    problems = coverage_problems(rule_files, files, examples_dir, rules_dir, known=catalogue.by_id)
    for example in examples_of(files, examples_dir):
        problems.extend(check_example(example, profile, catalogue)[0])
    return problems
