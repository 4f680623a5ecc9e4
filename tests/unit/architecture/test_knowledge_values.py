"""Each fact of knowledge is defined once, found by its *values* (issue 35 item 3).

test_knowledge_once.py catches a copy that keeps its name; this test catches one under another
name: every module under plugins/ is parsed, and each literal tuple, list or set of three or more
strings, and the keys of each top-level dict literal with three or more string keys, is taken as a
set. The same set in two modules is a copy that can drift (the four lists of managed sysctls that
issue 35 found were such copies). A pair that must stay is listed in :data:`ALLOWED` with why.
"""
import ast
import collections
import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLUGINS = os.path.join(REPO, "plugins")

#: frozenset of values -> (the modules allowed to hold it, why)
ALLOWED = {
    frozenset(("critical", "high", "medium", "low", "none")): (
        {"modules/baseline_report.py", "modules/baseline_verdict.py"},
        "the fail_on choices of two documentation modules, which cannot import controller code; "
        "test_baseline_report.py and test_verdict.py hold each equal to plugin_utils' argument spec "
        "(findings.FAIL_ON_LEVELS)"),
    frozenset(("critical", "high", "medium", "low", "info")): (
        {"modules/baseline_report.py", "plugin_utils/report/findings.py"},
        "drain_severities' choices in the documentation module, which cannot import controller code "
        "(findings.SEVERITY_RANK's keys); test_baseline_report.py holds the module's spec equal to "
        "plugin_utils' argument spec, which takes its choices from findings.SEVERITIES"),
    frozenset(("governor", "epp", "boost", "idle_latency_max_us")): (
        {"module_utils/fix/cpu.py", "module_utils/facts/persist.py"},
        "cpu_power's required_one_of (fix/cpu.py's REQUIRED_ONE_OF) names its own options; persist.py types the settings the fix "
        "persists, which are those options"),
    frozenset(("audit", "learn", "remediate", "snapshot", "validate")): (
        {"modules/baseline_validate.py", "modules/baseline_evaluate.py", "plugin_utils/inputs/inventory_vars.py"},
        "guard_action's choices (the documentation modules' specs of baseline_validate and baseline_evaluate, which "
        "their actions import, and which cannot import controller code) and the guard's words per playbook "
        "(inventory_vars.GUARD_ACTIONS); a test below holds them to the same playbooks"),
    frozenset(("pass", "fail", "unknown", "waived", "not_applicable")): (
        {"plugin_utils/report/findings.py", "plugin_utils/report/views.py"},
        "views.CELL_MARKS is a table over findings.STATUSES (a mark per status); a test below holds "
        "its keys to the statuses"),
}

#: The demo generator (snapgen) writes each format from its own knowledge of it, so that a
#: parser's mistake is not mirrored by the data it is tested with: a set shared by snapgen and one
#: parser module is the point, not a copy.
GENERATOR = "plugin_utils/snapshot/snapgen/"


def _string_sets(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            values = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if len(values) == len(node.elts) and len(set(values)) >= 3:
                yield frozenset(values)
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            keys = [k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            if len(set(keys)) >= 3:
                yield frozenset(keys)


def holders():
    found = collections.defaultdict(set)
    for top, dirs, names in os.walk(PLUGINS):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(top, name)
                with open(path, encoding="utf-8") as handle:
                    tree = ast.parse(handle.read(), path)
                for values in _string_sets(tree):
                    found[values].add(os.path.relpath(path, PLUGINS))
    return found


def copies(found):
    out = {}
    for values, modules in found.items():
        generated = set(m for m in modules if m.startswith(GENERATOR))
        if len(modules) < 2 or (len(generated) == 1 and len(modules) == 2):
            continue
        if values in ALLOWED and modules <= ALLOWED[values][0]:
            continue
        out[values] = modules
    return out


def test_no_set_of_values_is_written_in_two_modules():
    found = copies(holders())
    assert not found, "\n".join("%s in %s" % (sorted(values), sorted(modules)) for values, modules in found.items())


def test_every_allowed_copy_still_exists():
    """An entry of ALLOWED whose copy is gone is removed, so the list stays the list of real ones."""
    found = holders()
    stale = [sorted(values) for values, (modules, unused_why) in ALLOWED.items()
             if not modules <= found.get(values, set())]
    assert not stale


def test_a_copy_under_another_name_is_found():
    """The check itself: the four sysctl lists of issue 35, as they were, are copies."""
    before = {
        "module_utils/facts/kernel.py": 'PERSISTED_KEYS = ("kernel.numa_balancing", "vm.zone_reclaim_mode", "vm.swappiness")',
        "module_utils/fix/sysctl.py": 'ALLOWED = {"kernel.numa_balancing": (0, 3), "vm.zone_reclaim_mode": (0, 7), '
                                      '"vm.swappiness": (0, 200)}',
    }
    found = collections.defaultdict(set)
    for module, text in before.items():
        for values in _string_sets(ast.parse(text)):
            found[values].add(module)
    assert list(copies(found).values()) == [set(before)]


def test_the_allowed_tables_cover_what_they_are_tables_of():
    from ansible_collections.gpuhost.baseline.plugins.modules import baseline_evaluate, baseline_validate
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.inputs import inventory_vars
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import findings, views

    assert set(baseline_validate.ARGUMENT_SPEC["guard_action"]["choices"]) == set(inventory_vars.GUARD_ACTIONS)
    assert set(baseline_evaluate.ARGUMENT_SPEC["guard_action"]["choices"]) == set(inventory_vars.GUARD_ACTIONS)
    assert set(views.CELL_MARKS) == set(findings.STATUSES)
