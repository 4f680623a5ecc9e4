"""The managed sysctls are one table (facts/sysctls.py, issue 35): the facts, the boot derivation,
the fix module, the sources and the demo generator follow it, and the fix module's documentation
names exactly its keys and ranges."""
import ast
import os
import re

import pytest
import yaml

from helpers.tree import write_tree

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import kernel, sysctls
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root
from ansible_collections.gpuhost.baseline.plugins.module_utils.fix import sysctl as fix_sysctl
from ansible_collections.gpuhost.baseline.plugins.modules import kernel_sysctl
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue import sources
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive import derive_kernel

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))))


def test_every_entry_is_complete_and_its_fact_key_unique():
    facts = [entry["fact"] for entry in sysctls.SYSCTLS.values()]
    assert len(set(facts)) == len(facts)
    for name, entry in sysctls.SYSCTLS.items():
        assert set(entry) == {"fact", "range", "boot_default", "boot_param", "boot_want", "absent_when"}, name
        low, high = entry["range"]
        assert low <= high
        want = entry["boot_want"]
        assert list(want) in (["equals"], ["at_most_param"]), name
        if "equals" in want:
            assert low <= want["equals"] <= high
        assert entry["boot_default"] is None or low <= entry["boot_default"] <= high


def test_the_kernel_facts_read_each_table_entry(tmp_path):
    files = dict((sysctls.proc_path(name), "%d\n" % (index + 1)) for index, name in enumerate(sysctls.SYSCTLS))
    files["/etc/sysctl.d/50-test.conf"] = "".join("%s = %d\n" % (name, index + 1)
                                                  for index, name in enumerate(sysctls.SYSCTLS))
    write_tree(tmp_path, files)
    facts = kernel.gather(Root(str(tmp_path)))
    assert facts["sysctl"] == dict((entry["fact"], index + 1) for index, entry in enumerate(sysctls.SYSCTLS.values()))
    assert sorted(facts["sysctl_persisted"]) == sorted(sysctls.SYSCTLS)


def test_the_boot_derivation_covers_each_entry():
    derived = derive_kernel._sysctl_boot({"kernel": {"sysctl": {}, "sysctl_persisted": {}}}, {"swappiness_max": 10})
    assert sorted(derived) == sorted(entry["fact"] for entry in sysctls.SYSCTLS.values())


def test_the_fix_module_sets_exactly_the_table_keys_within_their_ranges():
    assert fix_sysctl.ALLOWED == dict((name, entry["range"]) for name, entry in sysctls.SYSCTLS.items())
    with pytest.raises(fix_sysctl.FixError):
        fix_sysctl.check_key("vm.overcommit_memory")


def test_each_running_value_has_its_proc_file_as_source():
    for name, entry in sysctls.SYSCTLS.items():
        assert sources.SOURCES["kernel.sysctl." + entry["fact"]] == (sysctls.proc_path(name),)


def test_the_module_documentation_names_the_table_keys_and_ranges():
    """The DOCUMENTATION of kernel_sysctl is static text (ansible-doc reads it without importing
    the module): this test is what keeps it the table's copy."""
    doc = yaml.safe_load(kernel_sysctl.DOCUMENTATION)
    text = " ".join(doc["options"]["key"]["description"] + doc["options"]["value"]["description"]
                    + doc["description"])
    named = set(re.findall(r"V\(([a-z]+\.[a-z_.]+)\)", text))
    assert named == set(sysctls.SYSCTLS)
    for name, (low, high) in ((n, e["range"]) for n, e in sysctls.SYSCTLS.items()):
        assert re.search(r"V\(%s\) (?:takes )?%d to %d" % (re.escape(name), low, high), text), name


def _code_strings(tree):
    """The string constants of a module's code: its docstrings (prose, examples) left out."""
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    return [node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_no_other_module_under_plugins_names_a_managed_sysctl():
    """Done-when of issue 35: a managed sysctl's name is in the code of one module under plugins/ (the
    table), besides documentation (docstrings, and kernel_sysctl's DOCUMENTATION and EXAMPLES, checked
    above) and the demo generator's host specifications (snapgen: values of test hosts, not knowledge)."""
    allowed = {os.path.join("module_utils", "facts", "sysctls.py"), os.path.join("modules", "kernel_sysctl.py")}
    found = []
    plugins = os.path.join(REPO, "plugins")
    for top, dirs, names in os.walk(plugins):
        dirs[:] = [d for d in dirs if d not in ("__pycache__", "snapgen")]
        for file_name in names:
            path = os.path.join(top, file_name)
            rel = os.path.relpath(path, plugins)
            if not file_name.endswith(".py") or rel in allowed:
                continue
            with open(path, encoding="utf-8") as handle:
                strings = _code_strings(ast.parse(handle.read(), path))
            found += ["%s: %s" % (rel, name) for name in sysctls.SYSCTLS
                      for text in strings if re.search(r"\b%s\b" % re.escape(name), text)]
    assert not found
