"""Each fact of knowledge is defined once (issue 19): a status set, a severity order, the collection
root, the idle P-state threshold, the sysctl directories, the cpulist grammar. Every module under
plugins/ is parsed and a top-level assignment or function of one of these names in more than one
module fails, so a copy that could drift is caught when it is written."""
import ast
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLUGINS = os.path.join(REPO, "plugins")

#: name -> the one module (relative to plugins/) that defines it
ONCE = {
    "STATUSES": "plugin_utils/report/findings.py",
    "SEVERITIES": "plugin_utils/report/findings.py",
    "SEVERITY_RANK": "plugin_utils/report/findings.py",
    "STATUS_WORST_FIRST": "plugin_utils/report/findings.py",
    "STATUS_LABELS": "plugin_utils/report/findings.py",
    "HOST_STATES": "plugin_utils/report/findings.py",
    "FINDING_KEYS": "plugin_utils/report/findings.py",
    "RULE_TEXT_FIELDS": "plugin_utils/report/findings.py",
    "compact_findings": "plugin_utils/report/findings.py",
    "expand_findings": "plugin_utils/report/findings.py",
    "STORED_SCHEMA": "plugin_utils/report/findings.py",
    "store_finding": "plugin_utils/report/findings.py",
    "read_finding": "plugin_utils/report/findings.py",
    "expand_document": "plugin_utils/report/report.py",
    "compact_document": "plugin_utils/report/report.py",
    "ROW_KEYS": None,  # schema 2's row layout: report.py reads it (_ROW_KEYS), nothing writes it
    "summarize": None,  # findings.py for findings; facts/numa.py and fix/cpu.py summarise other things
    "COLLECTION_ROOT": "plugin_utils/base/schema.py",
    "IDLE_PSTATE_MIN": "module_utils/facts/nvidia.py",
    "IDLE_PSTATE": None,
    "pstate_number": "module_utils/facts/nvidia.py",
    "SYSCTL_DIRS": "module_utils/facts/kernel.py",
    "VENDOR_NAMES": "module_utils/facts/pci.py",
    "VENDORS": None,
    "FIX_ACTIONS": "plugin_utils/catalogue/catalogue_model.py",
    "format_cpulist": "module_utils/facts/cpu.py",
    "_cpulist_text": None,
    # the split modules of issue 19, part 6: one home each
    "REQUIRED_PARAMS": "plugin_utils/derive/derive.py",
    "derive": "plugin_utils/derive/derive.py",
    "gpu_generation": "plugin_utils/derive/derive_nvidia.py",
    "gpu_link_states": "plugin_utils/derive/derive_pcie.py",
    "write_reports": "plugin_utils/report/report_dir.py",
    "ReportDirError": "plugin_utils/report/report_dir.py",
    "render_junit": "plugin_utils/report/views_machine.py",
    "render_prometheus": "plugin_utils/report/views_machine.py",
    "render_html": "plugin_utils/report/views.py",
    # ISO 8601 times read as Unix time: history, derive_counters and metrics share one reading
    "epoch": "plugin_utils/base/isotime.py",
    "epoch_seconds": "plugin_utils/base/isotime.py",
    "_epoch": None,
    # a controller path (~, relative to ansible-playbook's working directory): the actions and the history
    "controller_path": "plugin_utils/base/files.py",
}


def definitions():
    found = {}
    for top, unused_dirs, names in os.walk(PLUGINS):
        for name in names:
            if not name.endswith(".py"):
                continue
            path = os.path.join(top, name)
            rel = os.path.relpath(path, PLUGINS)
            with open(path, encoding="utf-8") as handle:
                tree = ast.parse(handle.read(), path)
            for node in tree.body:
                if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                    found.setdefault(node.name, set()).add(rel)
                elif isinstance(node, ast.Assign):
                    for target in node.targets:
                        if isinstance(target, ast.Name):
                            found.setdefault(target.id, set()).add(rel)
    return found


@pytest.mark.parametrize("name", sorted(ONCE))
def test_defined_once(name):
    where = definitions().get(name, set())
    home = ONCE[name]
    if name == "summarize":
        # of findings: findings.py only (numa.py summarises NUMA nodes, fix/cpu.py CPU power states)
        assert where == {"plugin_utils/report/findings.py", "module_utils/facts/numa.py", "module_utils/fix/cpu.py"}, where
    elif home is None:
        assert not where, "%s is gone; found again in %s" % (name, sorted(where))
    else:
        assert where == {home}, "%s defined in %s, its one home is %s" % (name, sorted(where), home)


def test_parse_cpulist_has_one_grammar():
    # derive_common.parse_cpulist is a thin adapter over the facts parser, not a second grammar
    with open(os.path.join(PLUGINS, "plugin_utils", "derive", "derive_common.py"), encoding="utf-8") as handle:
        source = handle.read()
    assert "facts_cpu.parse_cpulist(text)" in source
