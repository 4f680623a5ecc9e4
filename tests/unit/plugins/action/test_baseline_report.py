# -*- coding: utf-8 -*-
"""Where baseline_report finds the collection version stamped on the reports."""

import json

from helpers.baseline_facts import healthy_facts

from ansible_collections.gpuhost.baseline.plugins.action.baseline_report import collection_version, with_rule_text
from ansible_collections.gpuhost.baseline.plugins.plugin_utils import catalogue_load
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.schema import COLLECTION_ROOT
from ansible_collections.gpuhost.baseline.plugins.plugin_utils import evaluation


def test_checkout_galaxy_yml(tmp_path):
    (tmp_path / "galaxy.yml").write_text("namespace: gpuhost\nname: baseline\nversion: 1.2.3\n")
    assert collection_version(str(tmp_path)) == "1.2.3"


def test_installed_manifest_wins(tmp_path):
    (tmp_path / "galaxy.yml").write_text("version: 1.2.3\n")
    (tmp_path / "MANIFEST.json").write_text(json.dumps({"collection_info": {"version": "2.0.0"}}))
    assert collection_version(str(tmp_path)) == "2.0.0"


def test_broken_files_fall_back_to_unknown(tmp_path):
    (tmp_path / "MANIFEST.json").write_text("{not json")
    (tmp_path / "galaxy.yml").write_text("version: [unclosed\n")
    assert collection_version(str(tmp_path)) == "unknown"
    assert collection_version(str(tmp_path / "missing")) == "unknown"


def test_this_checkout_reports_galaxy_version():
    with open(COLLECTION_ROOT + "/galaxy.yml") as handle:
        expected = [line.split(":", 1)[1].strip() for line in handle if line.startswith("version:")][0]
    assert collection_version() == expected


def test_rule_text_is_put_back_into_findings_and_before():
    facts = healthy_facts()
    result = evaluation.evaluate(facts, params={"smt": "on"}, today="2026-06-01")
    part = evaluation.host_report(facts, result, before=result["findings"])
    hosts = with_rule_text({"gpu01": part, "gone": {"state": "unreachable", "message": "no route"}},
                           catalogue_load.load_catalogue())
    assert hosts["gpu01"]["findings"] == result["findings"]
    assert hosts["gpu01"]["before"]["findings"] == result["findings"]
    assert hosts["gone"] == {"state": "unreachable", "message": "no route"}
    assert "title" not in part["findings"][0]  # the input is not modified
    assert with_rule_text(["not", "a", "mapping"], None) == ["not", "a", "mapping"]


def test_documentation_module_declares_the_action_plugins_options():
    # plugins/modules/baseline_report.py cannot import controller code: its copy must not drift
    import importlib

    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import ARGUMENT_SPEC
    doc_module = importlib.import_module("ansible_collections.gpuhost.baseline.plugins.modules.baseline_report")
    assert doc_module.ARGUMENT_SPEC == ARGUMENT_SPEC
