"""Imports under plugins/ flow one way (docs/architecture.md).

Host side: ``module_utils/facts`` (readers and parsers) imports only itself;
``module_utils/fix`` may use the facts readers; modules (which run on managed hosts) may use
both but never controller code. Controller side: ``plugin_utils`` may use both host-side
packages; action plugins may use everything. Host-side code imports nothing outside the
standard library and ``ansible.module_utils``.
"""
import ast
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PACKAGE = "ansible_collections.gpuhost.baseline.plugins."

#: layer of a file (by its path under plugins/) -> layers it may import
ALLOWED = {
    "facts": {"facts"},
    "fix": {"facts", "fix"},
    "module": {"facts", "fix"},
    "controller": {"facts", "fix", "controller"},
    "action": {"facts", "fix", "controller"},
    "doc_fragment": set(),
    "other": {"facts", "fix", "controller"},
}
HOST_LAYERS = ("facts", "fix", "module")


def layer_of_path(rel):
    """Layer of a file given its path relative to plugins/."""
    parts = rel.replace(os.sep, "/").split("/")
    if parts[0] == "module_utils":
        return {"facts": "facts", "fix": "fix"}.get(parts[1], "unplaced")
    return {"plugin_utils": "controller", "modules": "module", "action": "action",
            "doc_fragments": "doc_fragment"}.get(parts[0], "other")


def layer_of_module(name):
    """Layer of an imported collection name (dotted, below ``...plugins.``): a module, a
    package or a name imported from one; ``None`` for ``module_utils`` itself (what is
    imported from it is checked by name)."""
    parts = name[len(PACKAGE):].split(".")
    if parts[0] == "module_utils":
        return None if len(parts) == 1 else {"facts": "facts", "fix": "fix"}.get(parts[1], "unplaced")
    return layer_of_path("/".join(parts[:1] + ["x.py"]))


def imported_names(source, filename="<file>"):
    """Every absolute module name imported anywhere in ``source`` (functions included)."""
    names = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                names.append("<relative import>")
            elif node.module:
                names.append(node.module)
                # ``from ...plugins.module_utils.facts import cpu`` imports the submodule
                names.extend("%s.%s" % (node.module, alias.name) for alias in node.names
                             if node.module.startswith(PACKAGE))
    return names


def third_party(name):
    top = name.split(".")[0]
    if top == "ansible":
        return not name.startswith("ansible.module_utils")
    if top in ("ansible_collections", "__future__"):
        return False
    return top not in sys.stdlib_module_names


def violations(rel, source):
    """``[message]`` for each import of ``source`` (file ``plugins/<rel>``) against the direction."""
    layer = layer_of_path(rel)
    out = []
    if layer == "unplaced":
        return ["plugins/%s: module_utils code belongs in module_utils/facts or module_utils/fix" % rel]
    for name in imported_names(source, rel):
        if name == "<relative import>":
            out.append("plugins/%s: relative import (use the collection namespace)" % rel)
            continue
        if name.startswith(PACKAGE):
            target = layer_of_module(name)
            if target is not None and target not in ALLOWED[layer]:
                out.append("plugins/%s (%s) imports %s (%s)" % (rel, layer, name, target))
        elif layer in HOST_LAYERS and third_party(name):
            out.append("plugins/%s (%s, runs on managed hosts) imports %s (not standard library)" % (rel, layer, name))
    return out


def plugin_files():
    base = os.path.join(REPO, "plugins")
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for filename in sorted(filenames):
            if filename.endswith(".py"):
                path = os.path.join(dirpath, filename)
                yield os.path.relpath(path, base), path


def test_every_plugin_file_imports_along_the_direction():
    found = []
    files = 0
    for rel, path in plugin_files():
        files += 1
        with open(path, encoding="utf-8") as handle:
            found += violations(rel, handle.read())
    assert files >= 30  # the walk found the tree
    assert not found, "\n".join(found)


@pytest.mark.parametrize("rel, source", [
    ("module_utils/facts/cpu.py", "from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.base import Host"),
    ("module_utils/facts/cpu.py", "from ansible_collections.gpuhost.baseline.plugins.module_utils import fix"),
    ("module_utils/facts/pci.py", "def f():\n    import ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive"),
    ("module_utils/fix/pcie.py", "from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive import derive"),
    ("modules/host_facts.py", "from ansible_collections.gpuhost.baseline.plugins.plugin_utils import report"),
    ("module_utils/facts/nvidia.py", "import yaml"),
    ("module_utils/fix/cpu.py", "from jinja2 import Template"),
    ("module_utils/fix/cpu.py", "from .base import Host"),
    ("module_utils/_helpers.py", "import os"),
])
def test_an_import_against_the_direction_is_caught(rel, source):
    assert violations(rel, source)


@pytest.mark.parametrize("rel, source", [
    ("module_utils/fix/pcie.py", "from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.pci import gather"),
    ("plugin_utils/derive.py", "from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.kernel import x"),
    ("action/baseline_report.py", "import yaml\nfrom ansible_collections.gpuhost.baseline.plugins.plugin_utils import report"),
    ("modules/kernel_sysctl.py", "from ansible.module_utils.basic import AnsibleModule\nimport os, re, json"),
])
def test_imports_along_the_direction_pass(rel, source):
    assert violations(rel, source) == []
