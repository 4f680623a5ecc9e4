"""Site catalogues (gpuhost_catalogue_dirs, issue 11): site rules, profiles and waivers layered over
the bundled catalogue, replace vs collision, per-profile severity, rules turned off, malformed files
named, and the disk cache following the site files."""
import os

import pytest

from helpers.baseline_facts import healthy_facts

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base import schema
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue import catalogue_load, catalogue_model
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge import evaluation
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_model import CatalogueError
from helpers.site_catalogue import SITE_RULE, private_catalogue_cache, write  # a new rule of the site: the running kernel at least 6.10

TODAY = "2026-06-01"

#: A profile extending a bundled one: a parameter, a severity changed and a rule turned off.
SITE_PROFILE = """\
description: Our inference fleet - amd-epyc-nvidia with site policy.
extends: amd-epyc-nvidia
rules:
  exclude: [PCI-001]
  severity:
    NUMA-001: low
params:
  swappiness_max: 20
"""

SITE_WAIVERS = """\
- rule: KERNEL-901
  hosts: [gpu01]
  reason: kernel rollout in progress
  expires: 2099-01-01
"""


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    yield from private_catalogue_cache(tmp_path, monkeypatch)


@pytest.fixture
def site(tmp_path):
    """A site directory with one new rule, one profile and one waiver file."""
    directory = tmp_path / "site"
    write(directory / "rules" / "kernel.yml", SITE_RULE)
    write(directory / "profiles" / "site-inference.yml", SITE_PROFILE)
    write(directory / "waivers" / "rollout.yml", SITE_WAIVERS)
    return directory


def evaluate(facts, site_dirs, profile="site-inference", **kwargs):
    cat = catalogue_load.load_catalogue(site_dirs=[str(d) for d in site_dirs])
    view = cat.for_profile(catalogue_model.select_profile(cat, profile, facts))
    kwargs.setdefault("waiver_files", cat.waiver_files)
    return evaluation.evaluate(facts, profile=profile, host=kwargs.pop("host", "gpu02"), today=TODAY,
                               catalogue=view, **kwargs)


def of(result, rule_id):
    return [f for f in result["findings"] if f["id"] == rule_id]


# -- layering ------------------------------------------------------------------------------------

def test_site_rule_profile_and_waivers_are_added(site):
    bundled = catalogue_load.load_catalogue()
    cat = catalogue_load.load_catalogue(site_dirs=[str(site)])
    assert "KERNEL-901" in cat.by_id and "KERNEL-901" not in bundled.by_id
    assert len(cat.rules) == len(bundled.rules) + 1
    assert cat.by_id["KERNEL-901"].file == str(site / "rules" / "kernel.yml")
    assert set(cat.profiles) == set(bundled.profiles) | {"site-inference"}
    assert cat.waiver_files == [str(site / "waivers" / "rollout.yml")]
    assert cat.site_dirs == [str(site)]
    # a new rule of an area joins every profile selecting the area, bundled ones included
    assert "KERNEL-901" in cat.profile("generic-nvidia-inference").rule_ids
    profile = cat.profile("site-inference")
    assert profile.params["swappiness_max"] == 20 and profile.params["kernel_min_cpu"]["zen5"] == "6.14"
    # the bundled catalogue itself is untouched
    assert catalogue_load.load_catalogue() is bundled and "site-inference" not in bundled.profiles


def test_site_rule_has_a_failing_and_a_passing_case(site):
    facts = healthy_facts()
    assert [f["status"] for f in of(evaluate(facts, [site]), "KERNEL-901")] == ["pass"]
    facts["kernel"]["release"] = "6.8.12-4-pve"
    (finding,) = of(evaluate(facts, [site]), "KERNEL-901")
    assert finding["status"] == "fail" and finding["severity"] == "medium"
    assert "6.8.12-4-pve" in finding["message"] and "6.10" in finding["message"]


def test_profile_changes_severity_and_turns_a_rule_off(site):
    facts = healthy_facts()
    facts["kernel"]["sysctl"]["numa_balancing"] = 1
    result = evaluate(facts, [site])
    (numa,) = of(result, "NUMA-001")
    assert numa["status"] == "fail" and numa["severity"] == "low"
    assert "NUMA-001 [low]" in result["failing"][0]
    assert of(result, "PCI-001") == []
    # the parent keeps the rule's own severity and the rule
    parent = evaluate(facts, [site], profile="amd-epyc-nvidia")
    assert of(parent, "NUMA-001")[0]["severity"] == "high"
    assert of(parent, "PCI-001")
    # the catalogue's rule objects are not changed by the view
    assert catalogue_load.load_catalogue(site_dirs=[str(site)]).by_id["NUMA-001"].severity == "high"


def test_severity_is_inherited_and_a_child_may_change_it_again(site):
    write(site / "profiles" / "site-strict.yml", """\
        description: stricter child
        extends: site-inference
        rules:
          severity: {KERNEL-901: critical}
        """)
    cat = catalogue_load.load_catalogue(site_dirs=[str(site)])
    assert cat.profile("site-strict").severity == {"NUMA-001": "low", "KERNEL-901": "critical"}
    view = cat.for_profile("site-strict")
    assert view.by_id["KERNEL-901"].severity == "critical" and view.by_id["NUMA-001"].severity == "low"
    assert cat.for_profile("amd-epyc-nvidia") is cat


def test_site_waiver_files_join_and_waive(site):
    facts = healthy_facts()
    facts["kernel"]["release"] = "6.8.12-4-pve"
    (finding,) = of(evaluate(facts, [site], host="gpu01"), "KERNEL-901")
    assert finding["status"] == "waived" and "kernel rollout in progress" in finding["message"]
    out = catalogue_load.validate(profile="site-inference", site_dirs=[str(site)])
    assert out["profiles"] == ["site-inference"] and out["params"]["site-inference"]["swappiness_max"] == 20


def test_later_directories_layer_over_earlier_ones(site, tmp_path):
    second = tmp_path / "second"
    write(second / "profiles" / "site-inference.yml", "description: replaced\nreplaces: true\n"
          "extends: generic-nvidia-inference\n")
    write(second / "rules" / "site.yml", SITE_RULE.replace("KERNEL-901", "KERNEL-902").replace(
        "severity: medium", "severity: high"))
    cat = catalogue_load.load_catalogue(site_dirs=[str(site), str(second)])
    assert cat.profile("site-inference").description == "replaced"
    assert cat.profile("site-inference").severity == {}
    assert cat.by_id["KERNEL-902"].file == str(second / "rules" / "site.yml")


# -- replace vs collision ----------------------------------------------------------------------

def _bundled_numa_001():
    path = os.path.join(schema.COLLECTION_ROOT, "rules", "numa.yml")
    with open(path) as handle:
        text = handle.read()
    start = text.index("- id: NUMA-001")
    end = text.index("\n- id:", start)
    return text[start:end] + "\n"


def test_site_rule_replaces_a_bundled_rule_only_when_it_says_so(site):
    rule = _bundled_numa_001().replace("severity: high", "severity: info")
    write(site / "rules" / "numa.yml", "# site copy\n" + rule.replace("- id: NUMA-001", "- id: NUMA-001\n  replaces: true"))
    cat = catalogue_load.load_catalogue(site_dirs=[str(site)])
    assert cat.by_id["NUMA-001"].severity == "info"
    assert cat.by_id["NUMA-001"].file == str(site / "rules" / "numa.yml")
    assert len([r for r in cat.rules if r.id == "NUMA-001"]) == 1


def test_rule_id_collision_without_replaces_names_both_files(site):
    path = write(site / "rules" / "numa.yml", _bundled_numa_001())
    with pytest.raises(CatalogueError) as err:
        catalogue_load.load_catalogue(site_dirs=[str(site)])
    message = str(err.value)
    assert message.startswith("%s: rule NUMA-001: id NUMA-001 is already defined in rules/numa.yml" % path)
    assert "replaces: true" in message


def test_rule_collision_between_two_site_directories_names_both(site, tmp_path):
    second = write(tmp_path / "second" / "rules" / "more.yml", SITE_RULE)
    with pytest.raises(CatalogueError, match="%s: rule KERNEL-901: id KERNEL-901 is already defined in %s" % (
            second, site / "rules" / "kernel.yml")):
        catalogue_load.load_catalogue(site_dirs=[str(site), str(tmp_path / "second")])


def test_replaces_without_anything_to_replace_is_an_error(site):
    write(site / "rules" / "kernel.yml", SITE_RULE.replace("- id: KERNEL-901", "- id: KERNEL-901\n  replaces: true"))
    with pytest.raises(CatalogueError, match=r"rules/kernel.yml: rule KERNEL-901: replaces: true, but no earlier"):
        catalogue_load.load_catalogue(site_dirs=[str(site)])


def test_profile_name_collision_needs_replaces(site):
    path = write(site / "profiles" / "generic-nvidia-inference.yml", "description: ours\nextends: amd-epyc-nvidia\n")
    with pytest.raises(CatalogueError) as err:
        catalogue_load.load_catalogue(site_dirs=[str(site)])
    assert str(err.value).startswith(
        "%s: profile generic-nvidia-inference: the name generic-nvidia-inference is already used by "
        "profiles/generic-nvidia-inference.yml" % path)
    assert "replaces: true" in str(err.value)


def test_profile_replaces_a_bundled_profile(site):
    text = open(os.path.join(schema.COLLECTION_ROOT, "profiles", "generic-nvidia-inference.yml")).read()
    text = text.replace("swappiness_max: 10", "swappiness_max: 30").replace("priority: 0", "priority: 0\nreplaces: true")
    write(site / "profiles" / "generic-nvidia-inference.yml", text)
    cat = catalogue_load.load_catalogue(site_dirs=[str(site)])
    assert cat.profile("generic-nvidia-inference").params["swappiness_max"] == 30
    # the bundled child inherits from the replacement
    assert cat.profile("amd-epyc-nvidia").params["swappiness_max"] == 30


# -- what is wrong, and where --------------------------------------------------------------------

@pytest.mark.parametrize("rules, message", [
    ({"exclude": ["NOPE-001"]}, r"rules: unknown rule id 'NOPE-001'"),
    ({"severity": {"NOPE-001": "low"}}, r"rules.severity: unknown rule id 'NOPE-001'"),
    ({"severity": {"NUMA-001": "urgent"}}, r"rules.severity.NUMA-001: unknown severity 'urgent' \(known: critical, high"),
    ({"severity": {"numa-1": "low"}}, r"rules.severity: 'numa-1' is not a rule id"),
    ({"severity": ["NUMA-001"]}, r"rules.severity must be a mapping of rule id to severity"),
    ({"exclude": ["NUMA-001"], "severity": {"NUMA-001": "low"}}, r"rules.severity: NUMA-001 is not selected"),
])
def test_bad_profile_keys_are_named_with_the_file(site, rules, message):
    import yaml
    path = write(site / "profiles" / "broken.yml", yaml.safe_dump(
        {"description": "broken", "extends": "generic-nvidia-inference", "rules": rules}))
    with pytest.raises(CatalogueError, match=r"^%s: profile broken: %s" % (path, message)):
        catalogue_load.load_catalogue(site_dirs=[str(site)])


def test_schema_error_in_a_site_rule_names_file_and_rule(site):
    path = write(site / "rules" / "kernel.yml", SITE_RULE.replace("severity: medium", "severity: urgent"))
    with pytest.raises(CatalogueError, match=r"^%s: rule KERNEL-901: unknown severity 'urgent'" % path):
        catalogue_load.load_catalogue(site_dirs=[str(site)])
    write(site / "rules" / "kernel.yml",
          SITE_RULE.replace("  reboot_required: true", "  reboot_required: true\n  replaces: maybe"))
    with pytest.raises(CatalogueError, match=r"^%s: rule KERNEL-901: replaces must be true or false" % path):
        catalogue_load.load_catalogue(site_dirs=[str(site)])


def test_site_rule_in_a_file_named_after_another_area_is_rejected(site):
    path = write(site / "rules" / "numa.yml", SITE_RULE)
    with pytest.raises(CatalogueError, match=r"^%s: rule KERNEL-901: area 'kernel' does not match its file" % path):
        catalogue_load.load_catalogue(site_dirs=[str(site)])


@pytest.mark.parametrize("relpath", ["rules/kernel.yml", "profiles/site-inference.yml", "waivers/rollout.yml"])
def test_malformed_yaml_names_the_file(site, relpath):
    path = write(site / relpath, "- id: [unclosed\n  title: x\n")
    with pytest.raises(CatalogueError) as err:
        catalogue_load.validate(site_dirs=[str(site)])
    assert str(err.value).startswith("%s: not valid YAML: " % path)
    assert "\n" not in str(err.value)


def test_bad_site_waiver_names_file_and_waiver(site):
    path = write(site / "waivers" / "rollout.yml", "- rule: KERNEL-901\n  reason: r\n  expires: soon\n")
    with pytest.raises(CatalogueError, match=r"^%s: waiver #1 \(rule KERNEL-901\): expires must be a date" % path):
        catalogue_load.validate(site_dirs=[str(site)])


def test_site_rule_param_must_exist_in_every_profile_selecting_it(site):
    write(site / "rules" / "kernel.yml", SITE_RULE.replace('min_kernel: "6.10"', "min_kernel: {param: site_kernel}"))
    with pytest.raises(CatalogueError, match=r"profile generic-nvidia-inference: rule KERNEL-901 \(%s\) references unknown "
                       r"parameter 'site_kernel'" % (site / "rules" / "kernel.yml")):
        catalogue_load.load_catalogue(site_dirs=[str(site)])


@pytest.mark.parametrize("dirs, message", [
    (["/no/such/dir"], r"^gpuhost_catalogue_dirs: /no/such/dir: no such directory"),
    ("site", r"^gpuhost_catalogue_dirs must be a list of directories"),
    ([""], r"^gpuhost_catalogue_dirs must be a list of directories, got the entry ''"),
])
def test_bad_directory_lists_are_rejected(dirs, message):
    with pytest.raises(CatalogueError, match=message):
        catalogue_load.load_catalogue(site_dirs=dirs)


def test_empty_directory_and_duplicates_are_rejected(site, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(CatalogueError, match=r"empty holds none of rules/, profiles/, waivers/"):
        catalogue_load.load_catalogue(site_dirs=[str(tmp_path / "empty")])
    with pytest.raises(CatalogueError, match=r"is listed twice"):
        catalogue_load.load_catalogue(site_dirs=[str(site), str(site) + "/"])


def test_relative_directories_are_resolved_against_the_current_directory(site, tmp_path, monkeypatch):
    monkeypatch.chdir(str(tmp_path))
    cat = catalogue_load.load_catalogue(site_dirs=["site"])
    assert cat.site_dirs == [str(site)] and "KERNEL-901" in cat.by_id
    with pytest.raises(CatalogueError, match=r"^gpuhost_catalogue_dirs: elsewhere \(%s\): no such directory"
                       % (tmp_path / "elsewhere")):
        catalogue_load.load_catalogue(site_dirs=["elsewhere"])


# -- the caches ----------------------------------------------------------------------------------

def test_disk_cache_is_keyed_on_the_site_files(site, tmp_path):
    cache = tmp_path / "cache" / "gpuhost-baseline"
    first = catalogue_load.load_catalogue(site_dirs=[str(site)])
    assert first.by_id["KERNEL-901"].severity == "medium"
    entries = set(os.listdir(str(cache)))
    assert entries
    catalogue_load._CACHE.clear()
    assert catalogue_load.load_catalogue(site_dirs=[str(site)]).by_id["KERNEL-901"].severity == "medium"
    assert set(os.listdir(str(cache))) == entries  # served from the disk cache
    # same size, mtime put back: only the content differs, and the change is still seen
    path = site / "rules" / "kernel.yml"
    st = os.stat(str(path))
    path.write_text(SITE_RULE.replace("severity: medium", "severity: low   "))
    assert path.stat().st_size == st.st_size
    os.utime(str(path), ns=(st.st_atime_ns, st.st_mtime_ns))
    catalogue_load._CACHE.clear()
    assert catalogue_load.load_catalogue(site_dirs=[str(site)]).by_id["KERNEL-901"].severity == "low"
    # and without clearing the in-process cache
    path.write_text(SITE_RULE.replace("severity: medium", "severity: high"))
    assert catalogue_load.load_catalogue(site_dirs=[str(site)]).by_id["KERNEL-901"].severity == "high"


def test_a_new_or_removed_site_file_is_seen(site):
    assert "site-other" not in catalogue_load.load_catalogue(site_dirs=[str(site)]).profiles
    write(site / "profiles" / "site-other.yml", "description: other\nextends: generic-nvidia-inference\n")
    write(site / "waivers" / "more.yml", "[]\n")
    cat = catalogue_load.load_catalogue(site_dirs=[str(site)])
    assert "site-other" in cat.profiles and len(cat.waiver_files) == 2
    os.unlink(str(site / "profiles" / "site-other.yml"))
    assert "site-other" not in catalogue_load.load_catalogue(site_dirs=[str(site)]).profiles


def test_a_broken_site_file_is_not_hidden_by_the_cache(site):
    catalogue_load.load_catalogue(site_dirs=[str(site)])
    path = write(site / "profiles" / "site-inference.yml", "description: [\n")
    catalogue_load._CACHE.clear()
    with pytest.raises(CatalogueError, match="^%s: not valid YAML" % path):
        catalogue_load.load_catalogue(site_dirs=[str(site)])


def test_without_site_dirs_the_cache_documents_are_unchanged(tmp_path):
    import json
    catalogue_load.load_catalogue()
    cache = tmp_path / "cache" / "gpuhost-baseline"
    for name in os.listdir(str(cache)):
        assert sorted(json.loads((cache / name).read_text())) == ["profiles", "rules"]
