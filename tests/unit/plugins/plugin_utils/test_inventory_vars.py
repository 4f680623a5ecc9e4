"""Known gpuhost_* variables and the controller guard of remediation (issue 18, item 2).

A misspelled ``gpuhost_root`` on a host with a local connection left the root at its default
``/``: remediation then planned fixes for the controller's own /proc/sys and /etc/sysctl.d.
``plugins/plugin_utils/inputs/inventory_vars.py`` names the known variables (derived from the roles'
argument specs, the collection's own tasks, and a short list of inventory-only names) and
decides, per host, whether a local connection may fix "/"."""
import os
import re
import shutil

import pytest
import yaml

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.schema import COLLECTION_ROOT
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.inputs.inventory_vars import (
    INVENTORY_ONLY,
    InventoryVarsError,
    controller_refusal,
    known_names,
    role_argument_spec,
    unknown_names,
)

KNOWN = known_names(COLLECTION_ROOT)


def spec_options(role):
    with open(os.path.join(COLLECTION_ROOT, "roles", role, "meta", "argument_specs.yml")) as handle:
        specs = yaml.safe_load(handle)["argument_specs"]
    return set(name for entry in specs.values() for name in (entry.get("options") or {}))


# -- known names ---------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["audit", "remediate", "self_audit"])
def test_every_role_option_is_known(role):
    options = spec_options(role)
    assert options and options <= KNOWN


def test_the_opt_in_is_a_documented_option_of_the_remediate_role():
    assert "gpuhost_allow_controller" in spec_options("remediate")


def test_inventory_only_names_are_known_and_are_no_role_option():
    assert "gpuhost_serial" in INVENTORY_ONLY
    assert set(INVENTORY_ONLY) <= KNOWN
    options = set().union(*(spec_options(role) for role in ("audit", "remediate", "self_audit")))
    # a role option documented twice would be a second list to keep in step
    assert not set(INVENTORY_ONLY) & options
    assert all(isinstance(doc, str) and doc for doc in INVENTORY_ONLY.values())


def test_names_the_collection_sets_while_it_runs_are_known():
    # registered results, set_fact and task vars: a remediate role after an audit in the same play sees them
    for name in ("gpuhost_eval", "gpuhost_before_eval", "gpuhost_skip_reason", "gpuhost_fix_error",
                 "gpuhost_fix_result_plan", "gpuhost_report", "gpuhost_run_started",
                 "gpuhost_learned", "gpuhost_snapshot_tarball", "gpuhost_self_audit_runner",
                 "gpuhost_controller_guard"):
        assert name in KNOWN, name


def test_the_facts_the_molecule_scenarios_set_before_remediate_yml_are_known():
    # molecule/remediate/converge.yml imports remediate.yml after a play that sets gpuhost_test_run
    assert "gpuhost_test_run" in KNOWN


def test_every_variable_the_playbooks_roles_inventory_and_molecule_use_is_known():
    used = set()
    for top in ("playbooks", "roles", "inventory", "molecule"):
        for base, dummy, files in os.walk(os.path.join(COLLECTION_ROOT, top)):
            for name in files:
                if name.endswith((".yml", ".yaml", ".j2")):
                    with open(os.path.join(base, name), encoding="utf-8") as handle:
                        text = re.sub(r"(?m)(^|\s)#.*$", "", handle.read())  # comments may show a typo
                    # (not YAML anchors and aliases: &gpuhost_vars in molecule.yml)
                    used.update(re.findall(r"(?<![&*])\bgpuhost_[a-z0-9_]*[a-z0-9]\b", text))
    # metric and unit names are no variables; gpuhost_fix_result_ is the prefix of the registered names
    used = set(n for n in used if not n.startswith("gpuhost_baseline"))
    assert used - KNOWN == set()


def test_a_new_role_option_is_known_without_touching_a_list(tmp_path):
    # known names are derived from the argument specs at run time, not kept in a second list
    root = tmp_path / "collection"
    shutil.copytree(os.path.join(COLLECTION_ROOT, "roles"), str(root / "roles"))
    spec = root / "roles" / "audit" / "meta" / "argument_specs.yml"
    data = yaml.safe_load(spec.read_text())
    data["argument_specs"]["main"]["options"]["gpuhost_brand_new"] = {"type": "str", "description": "x"}
    spec.write_text(yaml.safe_dump(data))
    assert "gpuhost_brand_new" not in KNOWN
    assert "gpuhost_brand_new" in known_names(str(root))


def test_role_argument_spec_is_the_main_entry_points_options_and_refuses_what_is_no_role(tmp_path):
    options = role_argument_spec(COLLECTION_ROOT, "audit")
    assert options["gpuhost_fail_on"]["choices"] == ["none", "low", "medium", "high", "critical"]
    assert set(options) == spec_options("audit")
    for bad in ("no_such_role", "../roles/audit", ".", ""):
        with pytest.raises(InventoryVarsError, match="no role"):
            role_argument_spec(COLLECTION_ROOT, bad)
    (tmp_path / "roles" / "odd" / "meta").mkdir(parents=True)
    (tmp_path / "roles" / "odd" / "meta" / "argument_specs.yml").write_text("argument_specs:\n  other: {}\n")
    with pytest.raises(InventoryVarsError, match="no argument_specs.main.options"):
        role_argument_spec(str(tmp_path), "odd")


def test_a_root_without_role_specs_is_an_error_not_every_name_unknown(tmp_path):
    with pytest.raises(InventoryVarsError, match="argument_specs"):
        known_names(str(tmp_path))


# -- unknown names -------------------------------------------------------------------------


def test_a_typo_is_reported_with_the_closest_known_name():
    names = ["gpuhost_rot", "gpuhost_root", "ansible_connection", "gpuhost_fix_acss", "gpuhost_profil"]
    assert unknown_names(names, KNOWN) == [
        ("gpuhost_fix_acss", "gpuhost_fix_acs"),
        ("gpuhost_profil", "gpuhost_profile"),
        ("gpuhost_rot", "gpuhost_root"),
    ]


def test_an_unknown_name_with_nothing_close_has_no_suggestion():
    assert unknown_names(["gpuhost_zzzzzzzzzzzzzzzzzzzz"], KNOWN) == [("gpuhost_zzzzzzzzzzzzzzzzzzzz", None)]


def test_only_gpuhost_names_are_checked():
    assert unknown_names(["ansible_host", "inventory_hostname", "gpuhost", "my_gpuhost_root"], KNOWN) == []


# -- the controller guard ------------------------------------------------------------------


def refusal(host="typo-host", connection="local", root="/", allow=False, unknown=()):
    return controller_refusal(host, connection, root, allow, unknown)


def test_a_local_connection_on_root_slash_is_refused_for_a_host_not_named_localhost():
    message = refusal()
    assert message and "typo-host" in message
    assert "gpuhost_allow_controller" in message and "gpuhost_root" in message


def test_the_refusal_names_the_likely_typo():
    message = refusal(unknown=[("gpuhost_rot", "gpuhost_root")])
    assert "gpuhost_rot" in message and "did you mean gpuhost_root" in message


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "::1"])
def test_localhost_may_be_fixed_through_the_local_connection(host):
    assert refusal(host=host) is None


def test_an_explicit_opt_in_lets_the_controller_be_fixed():
    assert refusal(allow=True) is None


def test_a_snapshot_root_is_no_controller(tmp_path):
    assert refusal(root=str(tmp_path)) is None


@pytest.mark.parametrize("connection", ["ssh", "paramiko", "community.docker.docker"])
def test_a_remote_connection_is_no_controller(connection):
    assert refusal(connection=connection) is None


def test_spellings_of_root_slash_are_root_slash(tmp_path):
    link = tmp_path / "to-root"
    link.symlink_to("/")
    for root in ("//", "/./", "/tmp/..", "", str(link)):
        assert refusal(root=root), root


def test_the_qualified_local_connection_name_is_local():
    assert refusal(connection="ansible.builtin.local")
    assert refusal(connection="ansible.legacy.local")


@pytest.mark.parametrize("action, words", [
    ("remediate", ("refusing to remediate typo-host", "the fixes would change the controller", "Nothing was changed")),
    ("audit", ("refusing to audit typo-host", "read the controller itself and report it under this host's name",
               "gpuhost_on_fail would drain or undrain", "Nothing was read and no Slurm node was touched")),
    ("validate", ("refusing to validate typo-host", "load and measure the controller itself",
                  "Nothing was measured and no Slurm node was touched")),
])
def test_one_guard_for_every_action_words_its_refusal(action, words):
    """Issue 40, item 4: audit (with its on_fail), validate and remediate run the same guard."""
    message = controller_refusal("typo-host", "local", "/", False, [("gpuhost_rot", "gpuhost_root")], action)
    assert all(word in message for word in words), message
    assert "did you mean gpuhost_root" in message
    assert controller_refusal("localhost", "local", "/", False, (), action) is None
    assert controller_refusal("typo-host", "local", "/", True, (), action) is None


@pytest.mark.parametrize("action, words", [
    ("learn", ("refusing to learn from typo-host", "golden profile", "Nothing was read or written")),
    ("snapshot", ("refusing to capture typo-host", "store it under this host's name", "Nothing was captured")),
])
def test_learn_and_snapshot_share_the_guard(action, words):
    message = controller_refusal("typo-host", "local", "/", False, (), action)
    assert all(word in message for word in words), message
