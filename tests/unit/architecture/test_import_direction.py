"""Imports under plugins/ flow one way (docs/architecture.md).

Host side: ``module_utils/facts`` (readers and parsers) imports only itself;
``module_utils/fix`` may use the facts readers; modules (which run on managed hosts) may use
both but never controller code. Controller side: ``plugin_utils`` may use both host-side
packages; action plugins may use everything. Host-side code imports nothing outside the
standard library and ``ansible.module_utils``.

Inside ``plugin_utils`` there are sub-layers (:data:`FORBIDDEN`): the catalogue (loader, model,
parameters, waivers) imports neither the judge nor the report writers; the report writers and views
do not import the judge; the drift history does not import the views; and ``findings.py``, the
finding contract, imports only the small helpers of :data:`FINDINGS_TOP` (and, inside a function,
the catalogue loader for its default catalogue).
"""
import ast
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PACKAGE = "ansible_collections.gpuhost.baseline.plugins."
PU = PACKAGE + "plugin_utils"  # the samples of the plugin_utils sub-layers

#: layer of a file (by its path under plugins/) -> layers it may import
ALLOWED = {
    "facts": {"facts"},
    "fix": {"facts", "fix"},
    "module": {"facts", "fix"},
    "controller": {"facts", "fix", "controller"},
    # an action plugin may import the argument spec of its documentation module (plugins/modules/),
    # where validate-modules holds it to DOCUMENTATION: the options are written once
    "action": {"facts", "fix", "controller", "module"},
    "doc_fragment": set(),
    "other": {"facts", "fix", "controller"},
}
HOST_LAYERS = ("facts", "fix", "module")

# -- plugin_utils sub-layers (module stems of files in plugin_utils/) ----------------------------
#: the judge: facts and a catalogue in, findings out
JUDGE = {"evaluation", "judge"}
#: what writes report.json and its views
REPORT_WRITERS = {"report", "report_dir", "views", "views_machine", "metrics"}
#: the views of report.json and the writer of the report directory
VIEWS = {"views", "views_machine", "report_dir"}
#: the catalogue: loading, the model and its bounded interpreter, parameters, waivers
CATALOGUE = {"catalogue_load", "catalogue_model", "catalogue_files", "catalogue_params", "waivers"}
#: module stem -> stems it may not import (anywhere in the file)
FORBIDDEN = dict([(stem, JUDGE | REPORT_WRITERS) for stem in CATALOGUE]
                 + [(stem, set(JUDGE)) for stem in REPORT_WRITERS]
                 + [("history", set(VIEWS))])
#: findings.py (the finding contract) imports at module level only these helpers of plugin_utils ...
FINDINGS_TOP = {"files", "console", "docpath"}
#: ... and inside a function also the catalogue loader (the default catalogue of expand_findings)
FINDINGS_NESTED = FINDINGS_TOP | {"catalogue_load"}


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


def top_level_names(source, filename="<file>"):
    """The absolute module names ``source`` imports at module level (a top-level ``try``/``if`` included)."""
    tree = ast.parse(source, filename)
    nodes = []
    pending = list(tree.body)
    while pending:
        node = pending.pop(0)
        if isinstance(node, (ast.Try, ast.If)):
            pending.extend(node.body + node.orelse + getattr(node, "finalbody", [])
                           + [n for h in getattr(node, "handlers", []) for n in h.body])
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            nodes.append(node)
    return imported_names(ast.unparse(ast.Module(body=nodes, type_ignores=[])), filename)


def plugin_utils_stem(name):
    """``views`` for ``...plugins.plugin_utils.views`` (or a name imported from it); ``None`` otherwise."""
    parts = name[len(PACKAGE):].split(".") if name.startswith(PACKAGE) else []
    return parts[1] if len(parts) > 1 and parts[0] == "plugin_utils" else None


def sub_layer_violations(rel, source):
    """``[message]`` for each import of a ``plugin_utils`` file against the sub-layers."""
    parts = rel.replace(os.sep, "/").split("/")
    if parts[0] != "plugin_utils" or len(parts) != 2:
        return []
    stem = parts[1][:-3]
    out = []
    if stem == "findings":
        top = set(top_level_names(source, rel))
        for name in imported_names(source, rel):
            target = plugin_utils_stem(name)
            allowed = FINDINGS_TOP if name in top else FINDINGS_NESTED
            if target is not None and target not in allowed:
                out.append("plugins/%s (the finding contract) imports %s (%s); it may use %s only%s" % (
                    rel, name, target, ", ".join(sorted(allowed)), "" if name in top else " inside a function"))
        return out
    for name in imported_names(source, rel):
        target = plugin_utils_stem(name)
        if target in FORBIDDEN.get(stem, ()):
            out.append("plugins/%s imports %s: %s may not import %s" % (rel, name, stem, target))
    return out


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
    return out + sub_layer_violations(rel, source)


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
    # plugin_utils sub-layers
    ("plugin_utils/catalogue_load.py", "from " + PU + ".evaluation import evaluate"),
    ("plugin_utils/catalogue_model.py", "def f():\n    from " + PU + " import judge"),
    ("plugin_utils/catalogue_params.py", "from " + PU + ".report import build_report"),
    ("plugin_utils/waivers.py", "from " + PU + ".report_dir import write_reports"),
    ("plugin_utils/history.py", "from " + PU + " import views"),
    ("plugin_utils/history.py", "from " + PU + ".report_dir import MANIFEST"),
    ("plugin_utils/views.py", "from " + PU + ".evaluation import evaluate"),
    ("plugin_utils/report_dir.py", "from " + PU + ".judge import judge_host"),
    ("plugin_utils/metrics.py", "import " + PU + ".judge"),
    ("plugin_utils/findings.py", "from " + PU + ".catalogue_load import load_catalogue"),
    ("plugin_utils/findings.py", "def f():\n    from " + PU + " import evaluation"),
    ("plugin_utils/findings.py", "from " + PU + ".report import expand_document"),
])
def test_an_import_against_the_direction_is_caught(rel, source):
    assert violations(rel, source)


@pytest.mark.parametrize("rel, source", [
    ("module_utils/fix/pcie.py", "from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.pci import gather"),
    ("plugin_utils/derive.py", "from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.kernel import x"),
    ("action/baseline_report.py", "import yaml\nfrom ansible_collections.gpuhost.baseline.plugins.plugin_utils import report"),
    ("modules/kernel_sysctl.py", "from ansible.module_utils.basic import AnsibleModule\nimport os, re, json"),
    ("plugin_utils/findings.py", "import json\ndef f():\n    from " + PU + ".catalogue_load import load_catalogue"),
    ("plugin_utils/findings.py", "from " + PU + ".files import clip\nfrom " + PU + ".console import escape"),
    ("plugin_utils/catalogue_load.py", "from " + PU + ".derive import REQUIRED_PARAMS"),
    ("plugin_utils/views_machine.py", "from " + PU + " import metrics\nfrom " + PU + ".views import _text"),
    ("plugin_utils/history.py", "from " + PU + ".report import ReportError"),
])
def test_imports_along_the_direction_pass(rel, source):
    assert violations(rel, source) == []


def test_the_sub_layers_name_modules_that_exist():
    # a renamed module would silently drop out of its rule
    base = os.path.join(REPO, "plugins", "plugin_utils")
    named = set(FORBIDDEN) | JUDGE | REPORT_WRITERS | VIEWS | CATALOGUE | FINDINGS_NESTED | {"history", "findings"}
    missing = sorted(stem for stem in named if not os.path.isfile(os.path.join(base, stem + ".py")))
    assert not missing, missing
