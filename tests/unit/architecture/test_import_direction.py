"""Imports under plugins/ flow one way (docs/architecture.md).

Host side: ``module_utils/host`` (the root-relative reader and the one command runner) imports only
itself; ``module_utils/facts`` (the parsers and gatherers) may use it; ``module_utils/fix`` and
``module_utils/measure`` (the measurements of host_measure) may use both; modules (which run on managed
hosts) may use all four but never controller code. Controller side: ``plugin_utils`` may use the host
reader, the facts and the fixes; action plugins may use everything. Host-side code imports nothing outside
the standard library and ``ansible.module_utils``. No folder of ``module_utils`` holds more than
:data:`MAX_FLAT` modules either.

``plugin_utils`` is a set of packages by layer (:data:`PACKAGES`, each package's docstring says the
same in its "May import:" sentence, checked here): ``base`` < ``derive`` < ``catalogue`` < ``report`` <
``judge``, with ``snapshot`` and ``inputs`` beside them on the controller only. Inside ``report`` the drift
history does not import the views, and ``findings.py``, the finding contract, imports only the small
helpers of :data:`FINDINGS_TOP` (and, inside a function, the catalogue loader for its default catalogue).
No module sits flat in ``plugin_utils`` and no package holds more than :data:`MAX_FLAT` modules.
"""
import ast
import re
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PACKAGE = "ansible_collections.gpuhost.baseline.plugins."
PU = PACKAGE + "plugin_utils"  # the samples of the plugin_utils sub-layers

#: layer of a file (by its path under plugins/) -> layers it may import
ALLOWED = {
    # how a host is read: files under a root, commands through the one runner
    "host": {"host"},
    "facts": {"host", "facts"},
    "fix": {"host", "facts", "fix"},
    # the measurements (host_measure): they load the host, so they are no facts reader's business
    "measure": {"host", "facts", "measure"},
    "module": {"host", "facts", "fix", "measure"},
    "controller": {"host", "facts", "fix", "controller"},
    # an action plugin may import the argument spec of its documentation module (plugins/modules/),
    # where validate-modules holds it to DOCUMENTATION: the options are written once
    "action": {"host", "facts", "fix", "controller", "module"},
    "doc_fragment": set(),
    "other": {"host", "facts", "fix", "controller"},
}
HOST_LAYERS = ("host", "facts", "fix", "measure", "module")
#: the folders of module_utils, one layer each
MODULE_UTILS = ("host", "facts", "fix", "measure")

# -- plugin_utils packages ------------------------------------------------------------------------
#: package of plugin_utils -> packages its modules may import (itself included)
PACKAGES = {
    "base": {"base"},
    "derive": {"base", "derive"},
    "catalogue": {"base", "derive", "catalogue"},
    "report": {"base", "catalogue", "report"},
    "judge": {"base", "derive", "catalogue", "report", "judge"},
    "snapshot": {"base", "snapshot"},
    "inputs": {"base", "derive", "inputs"},
    "remedy": {"remedy"},
    # ansible-core's ActionBase for the controller-only action plugins
    "actionbase": {"base", "actionbase"},
}
#: the packages the self-audit bundle takes to the hosts: the judge and what it may import
BUNDLED = PACKAGES["judge"]
#: modules in one package, at most
MAX_FLAT = 15
#: within ``report``: module stem -> stems it may not import (anywhere in the file)
FORBIDDEN = {"history": {"views", "views_machine", "report_dir"}}
#: findings.py (the finding contract) imports at module level only these helpers of plugin_utils ...
FINDINGS_TOP = {"files", "console", "docpath"}
#: ... and inside a function also the catalogue loader (the default catalogue of expand_findings)
FINDINGS_NESTED = FINDINGS_TOP | {"catalogue_load"}


def layer_of_path(rel):
    """Layer of a file given its path relative to plugins/."""
    parts = rel.replace(os.sep, "/").split("/")
    if parts[0] == "module_utils":
        return parts[1] if parts[1] in MODULE_UTILS else "unplaced"
    return {"plugin_utils": "controller", "modules": "module", "action": "action",
            "doc_fragments": "doc_fragment"}.get(parts[0], "other")


def layer_of_module(name):
    """Layer of an imported collection name (dotted, below ``...plugins.``): a module, a
    package or a name imported from one; ``None`` for ``module_utils`` itself (what is
    imported from it is checked by name)."""
    parts = name[len(PACKAGE):].split(".")
    if parts[0] == "module_utils":
        return None if len(parts) == 1 else (parts[1] if parts[1] in MODULE_UTILS else "unplaced")
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


def plugin_utils_target(name):
    """``("report", "views")`` for ``...plugins.plugin_utils.report.views`` (or a name imported from it),
    ``("report", None)`` for the package itself; ``None`` outside ``plugin_utils``."""
    parts = name[len(PACKAGE):].split(".") if name.startswith(PACKAGE) else []
    if len(parts) < 2 or parts[0] != "plugin_utils":
        return None
    return parts[1], (parts[2] if len(parts) > 2 else None)


def sub_layer_violations(rel, source):
    """``[message]`` for each import of a ``plugin_utils`` file against the packages' layers."""
    parts = rel.replace(os.sep, "/").split("/")
    if parts[0] != "plugin_utils":
        return []
    if len(parts) == 2:
        return [] if parts[1] == "__init__.py" else [
            "plugins/%s: a module flat in plugin_utils (put it in the package of its layer)" % rel]
    package, stem = parts[1], parts[2][:-3]
    if package not in PACKAGES:
        return ["plugins/%s: package %s is not one of the layers (%s)" % (rel, package, ", ".join(sorted(PACKAGES)))]
    out = []
    top = set(top_level_names(source, rel))
    for name in imported_names(source, rel):
        target = plugin_utils_target(name)
        if target is None:
            continue
        if target[0] not in PACKAGES[package]:
            out.append("plugins/%s imports %s: %s may import %s only" % (
                rel, name, package, ", ".join(sorted(PACKAGES[package]))))
        elif stem == "findings" and package == "report" and target[1] is not None:
            allowed = FINDINGS_TOP if name in top else FINDINGS_NESTED
            if target[1] not in allowed:
                out.append("plugins/%s (the finding contract) imports %s (%s); it may use %s only%s" % (
                    rel, name, target[1], ", ".join(sorted(allowed)), "" if name in top else " inside a function"))
        elif target[1] in FORBIDDEN.get(stem, ()):
            out.append("plugins/%s imports %s: %s may not import %s" % (rel, name, stem, target[1]))
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
        return ["plugins/%s: module_utils code belongs in one of module_utils/%s" % (rel, ", ".join(MODULE_UTILS))]
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
    ("module_utils/facts/pci.py", "def f():\n    import ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive"),
    ("module_utils/fix/pcie.py", "from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive import derive"),
    ("modules/host_facts.py", "from ansible_collections.gpuhost.baseline.plugins.plugin_utils import report"),
    ("module_utils/facts/nvidia.py", "import yaml"),
    ("module_utils/fix/cpu.py", "from jinja2 import Template"),
    ("module_utils/fix/cpu.py", "from .base import Host"),
    ("module_utils/_helpers.py", "import os"),
    ("module_utils/facts/cpu.py", "from ansible_collections.gpuhost.baseline.plugins.module_utils.measure import measure"),
    ("module_utils/measure/measure_gpu.py", "from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.base import Host"),
    ("plugin_utils/derive/derive_validation.py", "from ansible_collections.gpuhost.baseline.plugins.module_utils.measure import measure"),
    ("module_utils/host/root.py", "from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.sysctls import SYSCTLS"),
    ("module_utils/host/runner.py", "from ansible_collections.gpuhost.baseline.plugins.module_utils.fix import base"),
    # plugin_utils packages
    ("plugin_utils/catalogue/catalogue_load.py", "from " + PU + ".judge.evaluation import evaluate"),
    ("plugin_utils/catalogue/catalogue_model.py", "def f():\n    from " + PU + ".judge import judge"),
    ("plugin_utils/catalogue/catalogue_params.py", "from " + PU + ".report.report import build_report"),
    ("plugin_utils/catalogue/waivers.py", "from " + PU + ".report.report_dir import write_reports"),
    ("plugin_utils/report/history.py", "from " + PU + ".report import views"),
    ("plugin_utils/report/history.py", "from " + PU + ".report.report_dir import MANIFEST"),
    ("plugin_utils/report/views.py", "from " + PU + ".judge.evaluation import evaluate"),
    ("plugin_utils/report/report_dir.py", "from " + PU + ".judge.judge import judge_host"),
    ("plugin_utils/report/metrics.py", "import " + PU + ".judge"),
    ("plugin_utils/report/findings.py", "from " + PU + ".catalogue.catalogue_load import load_catalogue"),
    ("plugin_utils/report/findings.py", "def f():\n    from " + PU + ".judge import evaluation"),
    ("plugin_utils/report/findings.py", "from " + PU + ".report.report import expand_document"),
    ("plugin_utils/derive/derive_cpu.py", "from " + PU + ".catalogue.catalogue_model import Catalogue"),
    ("plugin_utils/base/files.py", "from " + PU + ".derive import derive_common"),
    ("plugin_utils/snapshot/snapshot.py", "from " + PU + ".report.report import ReportError"),
    ("plugin_utils/inputs/learn.py", "from " + PU + ".judge.evaluation import evaluate"),
    ("plugin_utils/helpers.py", "import os"),
    ("plugin_utils/misc/helpers.py", "import os"),
])
def test_an_import_against_the_direction_is_caught(rel, source):
    assert violations(rel, source)


@pytest.mark.parametrize("rel, source", [
    ("module_utils/fix/pcie.py", "from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.pci import gather"),
    ("plugin_utils/derive/derive.py", "from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.kernel import x"),
    ("action/baseline_report.py", "import yaml\nfrom ansible_collections.gpuhost.baseline.plugins.plugin_utils import report"),
    ("modules/kernel_sysctl.py", "from ansible.module_utils.basic import AnsibleModule\nimport os, re, json"),
    ("module_utils/facts/cpu.py", "from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import as_text"),
    ("module_utils/fix/base.py", "from ansible_collections.gpuhost.baseline.plugins.module_utils.host import runner"),
    ("plugin_utils/report/findings.py",
     "import json\ndef f():\n    from " + PU + ".catalogue.catalogue_load import load_catalogue"),
    ("plugin_utils/report/findings.py",
     "from " + PU + ".base.files import clip\nfrom " + PU + ".report.console import escape"),
    ("plugin_utils/catalogue/catalogue_load.py", "from " + PU + ".derive.derive import REQUIRED_PARAMS"),
    ("plugin_utils/report/views_machine.py",
     "from " + PU + ".report import metrics\nfrom " + PU + ".report.views import _text"),
    ("plugin_utils/report/history.py", "from " + PU + ".report.report import ReportError"),
    ("plugin_utils/judge/self_audit.py", "from " + PU + ".report.report_dir import write_reports"),
    ("plugin_utils/inputs/learn.py", "from " + PU + ".derive.inventory_observe import observe"),
])
def test_imports_along_the_direction_pass(rel, source):
    assert violations(rel, source) == []


def test_the_layers_name_modules_and_packages_that_exist():
    # a renamed module or package would silently drop out of its rule
    base = os.path.join(REPO, "plugins", "plugin_utils")
    packages = sorted(d for d in os.listdir(base) if os.path.isfile(os.path.join(base, d, "__init__.py")))
    assert packages == sorted(PACKAGES)
    stems = {name[:-3] for package in packages for name in os.listdir(os.path.join(base, package))
             if name.endswith(".py")}
    named = set(FORBIDDEN) | FINDINGS_NESTED | {stem for stems in FORBIDDEN.values() for stem in stems}
    assert not sorted(named - stems)


def may_import(docstring):
    """The packages named in a package docstring's "May import:" sentence."""
    sentence = docstring.split("May import:", 1)[1].split(". ", 1)[0]
    return {name for name in re.findall(r"``([\w/]+)``", sentence) if name in PACKAGES}


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_each_package_says_what_lives_there_and_what_it_may_import(package):
    path = os.path.join(REPO, "plugins", "plugin_utils", package, "__init__.py")
    with open(path, encoding="utf-8") as handle:
        docstring = ast.get_docstring(ast.parse(handle.read())) or ""
    assert "May import:" in docstring, "%s: the docstring says what lives there and what it may import" % path
    assert may_import(docstring) | {package} == PACKAGES[package]
    modules = [n for n in os.listdir(os.path.dirname(path)) if n.endswith(".py") and n != "__init__.py"]
    assert len(modules) <= MAX_FLAT, "%s holds %d modules flat" % (package, len(modules))


def test_the_self_audit_bundle_takes_the_judge_and_what_it_may_import():
    sys.path.insert(0, os.path.join(REPO, "roles", "self_audit", "files"))
    try:
        import make_bundle  # pylint: disable=import-outside-toplevel
    finally:
        sys.path.pop(0)
    taken = {rel.split("/")[2] for rel, _suffixes in make_bundle.TREES
             if rel.startswith("plugins/plugin_utils/")}
    assert taken == BUNDLED


@pytest.mark.parametrize("folder", MODULE_UTILS)
def test_no_module_utils_folder_holds_more_than_max_flat_modules(folder):
    path = os.path.join(REPO, "plugins", "module_utils", folder)
    modules = [n for n in os.listdir(path) if n.endswith(".py") and n != "__init__.py"]
    assert modules and len(modules) <= MAX_FLAT, "%s holds %d modules flat" % (path, len(modules))


def test_module_utils_folders_are_the_layers():
    base = os.path.join(REPO, "plugins", "module_utils")
    assert sorted(d for d in os.listdir(base) if os.path.isdir(os.path.join(base, d)) and d != "__pycache__") == \
        sorted(MODULE_UTILS)
