"""Site catalogues are input the tool does not trust (issue 18, items 5, 6, 8, 11 and 12).

The tool runs as root; a site catalogue directory (gpuhost_catalogue_dirs) may be a shared one.
Each guarantee here: YAML without aliases or anchors, within a size, node and depth budget; no
file followed out of the site directory and no raw content of a broken file quoted; every error
naming file, entry and field (unquoted dates included); rule queries bounded when loaded (length,
nesting) and when run (steps, characters produced, size of values), an over-budget rule being an
``unknown`` finding that names the rule and the bound. The bombs themselves (minutes, gigabytes
before the change) run bounded in ``tests/fuzz/test_fuzz_catalogue_yaml.py``.
"""
import os
import re

import pytest

from helpers.baseline_facts import healthy_facts
from helpers.site_catalogue import SITE_RULE, private_catalogue_cache, write

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base import schema
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue import catalogue_files, catalogue_load, catalogue_model, waivers
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge import evaluation
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_model import CatalogueError

TODAY = "2026-06-01"
SECRET = "SECRET-2f9c1d"

SITE_PROFILE = """\
description: Our inference fleet.
extends: amd-epyc-nvidia
"""


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    yield from private_catalogue_cache(tmp_path, monkeypatch)


@pytest.fixture
def site(tmp_path):
    directory = tmp_path / "site"
    write(directory / "rules" / "kernel.yml", SITE_RULE)
    write(directory / "profiles" / "site-inference.yml", SITE_PROFILE)
    return directory


def load_error(site):
    with pytest.raises(CatalogueError) as err:
        catalogue_load.validate(site_dirs=[str(site)])
    message = str(err.value)
    assert "\n" not in message
    return message


def site_rule(query):
    return SITE_RULE.replace("  query: kernel.release\n", "  query: %s\n" % query)


# -- item 5: YAML aliases, size, nodes, depth --------------------------------------------------------

def test_anchors_and_aliases_are_refused_with_file_line_and_column(site):
    path = write(site / "profiles" / "site-inference.yml", """\
        description: &d Our inference fleet.
        extends: amd-epyc-nvidia
        params:
          site_note: *d
        """)
    message = load_error(site)
    assert message.startswith("%s: line 1, column 14: " % path), message
    assert "anchors and aliases are not allowed" in message


def test_an_alias_alone_is_refused_where_it_stands(site):
    path = write(site / "profiles" / "site-inference.yml", "description: x\nextends: *nothing\n")
    message = load_error(site)
    assert message.startswith("%s: line 2, column 10: " % path), message
    assert "alias" in message


def test_a_file_over_the_size_cap_is_refused(site):
    path = write(site / "rules" / "kernel.yml", SITE_RULE + "#" * (catalogue_files.MAX_CATALOGUE_BYTES + 1) + "\n")
    message = load_error(site)
    assert message.startswith(str(path)) and "larger than %d bytes" % catalogue_files.MAX_CATALOGUE_BYTES in message


def test_a_file_over_the_node_budget_is_refused(site):
    # 240 kB, under the size cap: 120,000 values
    path = write(site / "rules" / "kernel.yml", "- [" + "0," * 120000 + "0]\n")
    message = load_error(site)
    assert message.startswith("%s: line 1, column " % path), message
    assert "more than %d values" % catalogue_files.MAX_YAML_NODES in message


def test_a_file_nested_too_deeply_is_refused(site):
    depth = catalogue_files.MAX_YAML_DEPTH + 1
    path = write(site / "profiles" / "site-inference.yml", "description: x\nparams:\n  x: " + "[" * depth + "]" * depth + "\n")
    message = load_error(site)
    assert message.startswith("%s: line 3, column " % path), message
    assert "nested deeper than %d" % catalogue_files.MAX_YAML_DEPTH in message


def test_an_overlong_number_is_refused_before_it_is_converted(site):
    path = write(site / "profiles" / "site-inference.yml", "description: x\npriority: %s\n" % ("7" * 5000))
    message = load_error(site)
    assert message.startswith("%s: line 2, column 11: " % path), message
    assert "number" in message and "7777" not in message


def test_unknown_top_level_keys_are_refused_before_any_copy(monkeypatch):
    def copy(value):
        raise AssertionError("copied before the keys were checked")
    monkeypatch.setattr(schema, "json_compatible", copy)
    with pytest.raises(schema.SchemaError, match=r"^unknown key\(s\) descripton, x \(allowed: description, "):
        schema.check("profile", {"descripton": "typo", "x": [[[["deep"]]]]})


# -- items 6 and 8: links, special files, content of broken files ------------------------------------

def test_a_catalogue_file_linked_out_of_the_site_directory_is_refused_unread(site, tmp_path):
    outside = write(tmp_path / "elsewhere" / "secret.yml", "%s: {password: hunter2}\n" % SECRET)
    link = site / "profiles" / "x.yml"
    os.symlink(str(outside), str(link))
    message = load_error(site)
    assert message.startswith(str(link)) and "symbolic link" in message
    assert SECRET not in message


def test_a_subdirectory_linked_out_of_the_site_directory_is_refused(site, tmp_path):
    elsewhere = tmp_path / "elsewhere" / "profiles"
    write(elsewhere / "x.yml", SITE_PROFILE)
    for entry in (site / "profiles").iterdir():
        entry.unlink()
    (site / "profiles").rmdir()
    os.symlink(str(elsewhere), str(site / "profiles"))
    message = load_error(site)
    assert message.startswith(str(site / "profiles")) and "symbolic link" in message


@pytest.mark.parametrize("text", [
    "root:$6$%s:19000:0:99999:7:::\n" % SECRET,             # parses as one string
    "%s: a: b\n" % SECRET,                                  # does not parse
    "description: x\n%s\n" % SECRET,                        # parses as something else
    "- %s\n- a\n" % SECRET,                                 # a list, not a mapping
])
def test_content_of_a_file_that_is_not_a_catalogue_file_is_never_quoted(site, text):
    path = write(site / "profiles" / "site-inference.yml", text)
    message = load_error(site)
    assert message.startswith(str(path)) and SECRET not in message, message
    assert re.search(r"line \d+|must be a YAML mapping, got a list|\[1 not shown: not a name\]", message), message


def test_a_syntax_error_names_line_and_column_without_the_line(site):
    path = write(site / "profiles" / "site-inference.yml", "description: x\n%s: a: b\n" % SECRET)
    message = load_error(site)
    assert re.match(r"^%s: not valid YAML: line 2, column \d+: " % re.escape(str(path)), message), message
    assert SECRET not in message


def test_binary_garbage_is_named_not_quoted(site):
    path = write(site / "rules" / "kernel.yml", bytes(range(256)) * 4)
    message = load_error(site)
    assert message.startswith(str(path)) and message.isprintable()


def test_long_values_in_schema_messages_are_clipped(site):
    write(site / "rules" / "kernel.yml", SITE_RULE.replace("severity: medium", "severity: " + "x" * 20000))
    message = load_error(site)
    assert "unknown severity" in message and len(message) < 1200


# -- item 11: every error has a place ----------------------------------------------------------------

@pytest.mark.parametrize("date", ["2025-02-30", "2025-13-01", "2025-00-10", "0000-01-01"])
def test_an_unquoted_invalid_date_names_file_waiver_and_field(site, date):
    path = write(site / "waivers" / "rollout.yml", """\
        - rule: KERNEL-001
          reason: fine
          expires: 2099-01-01
        - rule: KERNEL-901
          reason: rollout
          expires: %s
        """ % date)
    message = load_error(site)
    assert message == "%s: waiver #2 (rule KERNEL-901): expires must be a date YYYY-MM-DD, got '%s'" % (path, date)


def test_an_unquoted_invalid_date_in_a_waiver_file_variable_is_named(tmp_path):
    path = write(tmp_path / "waivers.yml", "- rule: NUMA-001\n  reason: r\n  expires: 2025-02-30\n")
    cat = catalogue_load.load_catalogue()
    with pytest.raises(CatalogueError, match=r"^%s: waiver #1 \(rule NUMA-001\): expires must be a date" % path):
        waivers.validate_waivers([], cat, [str(path)])


def test_an_unquoted_valid_date_still_waives(site):
    write(site / "waivers" / "rollout.yml", "- rule: KERNEL-901\n  reason: r\n  expires: 2099-01-01\n")
    cat = catalogue_load.load_catalogue(site_dirs=[str(site)])
    (waiver,) = waivers.validate_waivers([], cat, cat.waiver_files)
    assert waiver["expires"].isoformat() == "2099-01-01"


# -- item 12: rule queries bounded --------------------------------------------------------------------

def nested_to_string(depth):
    query = "kernel.release"
    for unused in range(depth):
        query = "to_string([%s])" % query
    return query


@pytest.mark.parametrize("query, why", [
    (nested_to_string(26), "function calls nested 26 deep (at most {MAX_EXPR_FUNCTION_NESTING})"),
    ("'" + "x" * 5000 + "'", "5002 characters long (at most {MAX_EXPR_CHARS})"),
    ("[" + ",".join(["a"] * 400) + "]", "(at most {MAX_EXPR_NODES})"),
    ("kernel.release" + " | @" * 30, "deep (at most {MAX_EXPR_DEPTH})"),
])
def test_an_expensive_site_query_is_refused_when_loaded(site, query, why):
    path = write(site / "rules" / "kernel.yml", site_rule('"%s"' % query))
    message = load_error(site)
    assert message.startswith("%s: rule KERNEL-901: query: " % path), message
    assert why.format(**vars(catalogue_model)) in message
    assert len(message) < 1000


def test_a_jmespath_too_deep_to_parse_is_a_catalogue_error(site):
    path = write(site / "rules" / "kernel.yml", site_rule('"%s"' % ("!" * 1900 + "kernel.release")))
    message = load_error(site)
    assert message.startswith("%s: rule KERNEL-901: query: " % path), message


def test_bundled_queries_are_well_within_the_bounds():
    cat = catalogue_load.load_catalogue()
    costs = [catalogue_model.expression_cost(expr.compiled.parsed) for rule in cat.rules
             for expr in (rule.applies_when, rule.subjects, rule.subject, rule.detail, rule.query,
                          rule.unknown_reason, rule.pending_when, rule.operand.query) if expr is not None]
    assert costs
    assert max(c["depth"] for c in costs) * 2 <= catalogue_model.MAX_EXPR_DEPTH
    assert max(c["nodes"] for c in costs) * 4 <= catalogue_model.MAX_EXPR_NODES
    assert max(c["functions"] for c in costs) * 2 <= catalogue_model.MAX_EXPR_FUNCTION_NESTING


def evaluate_site(site, facts=None):
    cat = catalogue_load.load_catalogue(site_dirs=[str(site)])
    result = evaluation.evaluate(facts or healthy_facts(), profile="site-inference", host="gpu01", today=TODAY,
                                 catalogue=cat)
    return [f for f in result["findings"] if f["id"] == "KERNEL-901"], result


def test_a_query_producing_too_large_a_string_is_unknown_naming_the_rule_and_the_bound(site):
    stage = "to_string([@,@,@,@,@,@,@,@])"
    write(site / "rules" / "kernel.yml", site_rule('"length(%s | %s | %s)"' % (stage, stage, stage)))
    (finding,), result = evaluate_site(site)
    assert finding["status"] == "unknown", finding
    assert finding["message"].startswith("KERNEL-901 not judged: its query went over the cost bound of a rule ("), finding
    assert "characters" in finding["message"]
    # the other rules are judged as before
    write(site / "rules" / "kernel.yml", SITE_RULE)
    unused, before = evaluate_site(site)
    others = [(f["id"], f["subject"], f["status"]) for f in result["findings"] if f["id"] != "KERNEL-901"]
    assert others == [(f["id"], f["subject"], f["status"]) for f in before["findings"] if f["id"] != "KERNEL-901"]


def test_a_query_over_the_step_budget_is_unknown_naming_the_rule_and_the_bound(site, monkeypatch):
    monkeypatch.setattr(catalogue_model, "RULE_STEPS", 50, raising=False)
    write(site / "rules" / "cpu.yml", site_rule('"[@,@,@,@,@,@,@,@][*].[@,@,@,@,@,@,@,@][] | [0].kernel.release"')
          .replace("KERNEL-901", "CPU-901").replace("area: kernel", "area: cpu"))
    cat = catalogue_load.load_catalogue(site_dirs=[str(site)])
    result = evaluation.evaluate(healthy_facts(), profile="site-inference", host="gpu01", today=TODAY, catalogue=cat)
    (ok,) = [f for f in result["findings"] if f["id"] == "KERNEL-901"]
    assert ok["status"] == "pass", ok
    (finding,) = [f for f in result["findings"] if f["id"] == "CPU-901"]
    assert finding["status"] == "unknown"
    assert finding["message"] == "CPU-901 not judged: its query went over the cost bound of a rule (more than 50 " \
                                 "evaluation steps)", finding


def test_a_query_whose_value_unrolls_too_large_is_unknown(site):
    write(site / "rules" / "kernel.yml", site_rule('"%s"' % " | ".join(["kernel"] + ["[@,@]"] * 12)))
    (finding,), unused = evaluate_site(site)
    assert finding["status"] == "unknown"
    assert finding["message"].startswith("KERNEL-901 not judged: its query went over the cost bound of a rule ("), finding
    assert "values" in finding["message"]


def test_a_site_profile_match_over_budget_is_a_catalogue_error(site, monkeypatch):
    monkeypatch.setattr(catalogue_model, "RULE_STEPS", 5, raising=False)
    path = write(site / "profiles" / "site-inference.yml", SITE_PROFILE + "priority: 200\nmatch: \"[@,@,@,@,@,@,@,@][?@]\"\n")
    cat = catalogue_load.load_catalogue(site_dirs=[str(site)])
    with pytest.raises(CatalogueError, match=r"^%s: profile site-inference: match went over the cost bound of a "
                       r"query \(more than 5 evaluation steps\)" % path):
        catalogue_model.select_profile(cat, "auto", healthy_facts())
