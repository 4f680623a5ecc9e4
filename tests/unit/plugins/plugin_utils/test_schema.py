"""The catalogue's JSON Schemas (schemas/*.schema.json) and the errors they give.

The structure of a rule file, a profile and a waiver list is checked with jsonschema against
the schemas shipped in the collection; each error names the file, the item and the field.
"""
import glob
import json
import os
import sys

import jsonschema
import pytest
import yaml

from helpers.baseline_facts import healthy_facts
from helpers.catalogue_tree import copy_catalogue, edit
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base import schema
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue import catalogue_load, catalogue_model
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import findings
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_model import CatalogueError
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge.evaluation import evaluate

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
TODAY = "2026-06-01"


def load_schema(name):
    with open(os.path.join(REPO, "schemas", "%s.schema.json" % name)) as handle:
        return json.load(handle)


@pytest.mark.parametrize("name", ["rules", "profile", "waivers"])
def test_schemas_are_valid_draft_2020_12(name):
    doc = load_schema(name)
    assert doc["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(doc)


@pytest.mark.parametrize("pattern, name, modeline", [
    ("rules/*.yml", "rules", "# yaml-language-server: $schema=../schemas/rules.schema.json"),
    ("profiles/*.yml", "profile", "# yaml-language-server: $schema=../schemas/profile.schema.json"),
])
def test_bundled_catalogue_files_carry_the_modeline_and_validate(pattern, name, modeline):
    files = sorted(glob.glob(os.path.join(REPO, pattern)))
    assert files
    validator = jsonschema.Draft202012Validator(load_schema(name))
    for path in files:
        with open(path) as handle:
            text = handle.read()
        assert text.splitlines()[0] == modeline, path
        # what an editor with yaml-language-server checks: the file as JSON sees it
        errors = list(validator.iter_errors(schema.json_compatible(yaml.safe_load(text))))
        assert not errors, (path, [e.message for e in errors])


def test_schema_enums_are_the_code_constants():
    rule = load_schema("rules")["$defs"]["rule"]["properties"]
    assert rule["area"]["enum"] == list(catalogue_model.AREA_NAMES)
    assert rule["severity"]["enum"] == list(findings.SEVERITIES)
    assert rule["fix"]["properties"]["action"]["enum"] == list(catalogue_model.FIX_ACTIONS)
    assert rule["expect"]["propertyNames"]["enum"] == list(catalogue_model.OPERATORS)
    assert sorted(rule["expect"]["properties"]) == sorted(catalogue_model.OPERATORS)
    profile = load_schema("profile")["properties"]
    assert profile["rules"]["properties"]["areas"]["items"]["enum"] == list(catalogue_model.AREA_NAMES)


# -- malformed files: file, item and field named --------------------------------------------

@pytest.fixture
def tree(tmp_path):
    return copy_catalogue(tmp_path)


@pytest.mark.parametrize("file, old, new, message", [
    ("rules/pcie.yml", "  title: GPU MaxReadReq at least max_read_request_bytes_gpu\n", "  title: 42\n",
     "rules/pcie.yml: rule PCI-001: title must be a non-empty string, got 42"),
    ("rules/pcie.yml", "    action: pcie_tune\n    hint: raise MaxReadReq in the Device Control",
     "    action: pcie_tune\n    hint: ' '\n    extra: raise MaxReadReq in the Device Control",
     "rules/pcie.yml: rule PCI-001: fix: unknown key(s) extra (allowed: kind, action, variable, hint, subjects_by_kind)"),
    ("rules/pcie.yml", "  severity: high\n  label: MaxReadReq", "  severity: high\n  label: [MaxReadReq]",
     "rules/pcie.yml: rule PCI-001: label must be a string, got ['MaxReadReq']"),
    ("rules/pcie.yml", "    min: {param: max_read_request_bytes_gpu}", "    min: {parameter: max_read_request_bytes_gpu}",
     "rules/pcie.yml: rule PCI-001: expect: operator min needs a number, got {'parameter': "),
    ("profiles/amd-epyc-nvidia.yml", "include: [CPU-001, CPU-002]", "include: CPU-001",
     "profiles/amd-epyc-nvidia.yml: profile amd-epyc-nvidia: rules.include must be a list of rule ids, got 'CPU-001'"),
    ("profiles/amd-epyc-nvidia.yml", "include: [CPU-001, CPU-002]", "areas: [cpu, gpu]",
     "profile amd-epyc-nvidia: rules.areas.1: unknown area 'gpu' (known: cpu, kernel, numa, pcie, iommu, nvidia, lxc, inventory, health, validation)"),
])
def test_malformed_file_names_file_item_and_field(tree, file, old, new, message):
    edit(tree / file, old, new)
    with pytest.raises(CatalogueError) as info:
        catalogue_load.load_catalogue(str(tree))
    assert message in str(info.value)


def test_rule_without_its_subject_label(tree):
    edit(tree / "rules" / "pcie.yml", "  subject: address\n", "")
    with pytest.raises(CatalogueError, match=r"rules/pcie.yml: rule PCI-00\d: subjects and subject go together"):
        catalogue_load.load_catalogue(str(tree))


def test_rule_item_without_an_id_is_named_by_position(tree):
    path = tree / "rules" / "iommu.yml"
    path.write_text(path.read_text() + "\n- title: no id\n")
    with pytest.raises(CatalogueError, match=r"rules/iommu.yml: rule #\d+: missing required key\(s\) id, area"):
        catalogue_load.load_catalogue(str(tree))


# -- waiver files ---------------------------------------------------------------------------

def test_waiver_file_waives_like_the_inventory_list(tmp_path):
    path = tmp_path / "waivers.yml"
    path.write_text("- rule: NUMA-001\n  reason: benchmark host\n  expires: 2026-12-31\n")
    facts = healthy_facts()
    facts["kernel"]["sysctl"]["numa_balancing"] = 1
    plain = evaluate(facts, today=TODAY)
    waived = evaluate(facts, today=TODAY, waiver_files=[str(path)])
    assert [f["status"] for f in plain["findings"] if f["id"] == "NUMA-001"] == ["fail"]
    assert [f["status"] for f in waived["findings"] if f["id"] == "NUMA-001"] == ["waived"]


@pytest.mark.parametrize("text, message", [
    ("- rule: NUMA-001\n  reason: r\n  expires: 2026-12-31\n- rule: PCI-001\n  reason: r\n  expires: 31.12.2026\n",
     "{path}: waiver #2 (rule PCI-001): expires must be a date YYYY-MM-DD, got '31.12.2026'"),
    ("- rule: NUMA-001\n  reason: r\n  expires: 2026-12-31\n  host: gpu01\n",
     "{path}: waiver #1 (rule NUMA-001): unknown key(s) host (allowed: rule, hosts, subjects, reason, expires)"),
    ("- rule: NUMA-001\n  expires: 2026-12-31\n", "{path}: waiver #1 (rule NUMA-001): reason is required"),
    ("rule: NUMA-001\n", "{path}: must be a list of {rule, hosts, subjects, reason, expires}"),
    ("- rule: NUMA-999\n  reason: r\n  expires: 2026-12-31\n", "{path}: waiver #1 (rule NUMA-999): unknown rule id 'NUMA-999'"),
    ("- rule: [NUMA-001\n", "{path}: not valid YAML"),
])
def test_malformed_waiver_file_is_named(tmp_path, text, message):
    path = tmp_path / "waivers.yml"
    path.write_text(text)
    with pytest.raises(CatalogueError) as info:
        catalogue_load.validate(waiver_files=[str(path)])
    assert message.replace("{path}", str(path)) in str(info.value)


def test_missing_waiver_file_is_named(tmp_path):
    with pytest.raises(CatalogueError, match=r"nope.yml: cannot read"):
        catalogue_load.validate(waiver_files=[str(tmp_path / "nope.yml")])


def test_empty_waiver_file_waives_nothing(tmp_path):
    path = tmp_path / "waivers.yml"
    path.write_text("# nothing waived at the moment\n")
    assert catalogue_load.validate(waiver_files=[str(path)])["rules"] > 0


# -- helpers --------------------------------------------------------------------------------

def test_json_compatible_keys_and_dates():
    import datetime
    doc = {True: 1, False: [datetime.date(2026, 1, 2)], 3: "x"}
    assert schema.json_compatible(doc) == {"true": 1, "false": ["2026-01-02"], "3": "x"}


def test_missing_jsonschema_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(schema, "_VALIDATORS", {})
    monkeypatch.setitem(sys.modules, "jsonschema", None)
    with pytest.raises(schema.SchemaError, match="needs the Python library jsonschema on the controller"):
        schema.check("waivers", [])
