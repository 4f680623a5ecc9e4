"""A variable several roles take is declared alike in each (issue 19, knowledge once): the audit
role's argument spec states the shared variables (gpuhost_profile, gpuhost_params, gpuhost_waivers,
gpuhost_catalogue_dirs, ...); remediate and self_audit declare them with the same type, default,
choices, elements and sub-options (only the description may say what the variable means for that
role), and their defaults/main.yml give the same default value. Ansible validates each role with
its own spec, so the declaration exists per role; this test is what keeps the copies one."""
import copy
import os

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SOURCE = "audit"
OTHERS = ("remediate", "self_audit", "validate")


def spec(role):
    with open(os.path.join(REPO, "roles", role, "meta", "argument_specs.yml")) as handle:
        return yaml.safe_load(handle)["argument_specs"]["main"]["options"]


def defaults(role):
    with open(os.path.join(REPO, "roles", role, "defaults", "main.yml")) as handle:
        return yaml.safe_load(handle) or {}


def facets(entry):
    """What Ansible checks of a variable: its spec without the descriptions."""
    if isinstance(entry, dict):
        return dict((k, facets(v)) for k, v in entry.items() if k != "description")
    return entry


def drift(source_spec, source_defaults, role_spec, role_defaults):
    """``[(variable, what differs)]`` between a role's declaration of the shared variables and the source's."""
    out = []
    for name in sorted(set(source_spec) & set(role_spec)):
        if facets(source_spec[name]) != facets(role_spec[name]):
            out.append((name, "argument spec %r != %r" % (facets(role_spec[name]), facets(source_spec[name]))))
        if source_defaults.get(name) != role_defaults.get(name):
            out.append((name, "default %r != %r" % (role_defaults.get(name), source_defaults.get(name))))
    return out


#: a role that reads another's variables declares them as that role does: remediate's gpuhost_prove measures
#: with the validate role's settings (gpuhost_validate_*)
BORROWED = (("validate", "remediate"),)


@pytest.mark.parametrize("source,role", BORROWED)
def test_borrowed_variables_are_declared_as_their_role_declares_them(source, role):
    borrowed = [name for name in spec(source) if name.startswith("gpuhost_%s_" % source)]
    assert borrowed and set(borrowed) <= set(spec(role))
    assert drift(spec(source), defaults(source), spec(role), defaults(role)) == []


@pytest.mark.parametrize("role", OTHERS)
def test_shared_variables_are_declared_as_the_audit_role_declares_them(role):
    shared = set(spec(SOURCE)) & set(spec(role))
    assert len(shared) >= 6, "the roles no longer share their baseline variables?"
    assert drift(spec(SOURCE), defaults(SOURCE), spec(role), defaults(role)) == []


def test_the_check_catches_a_changed_type_and_a_changed_default():
    planted = copy.deepcopy(spec("remediate"))
    planted["gpuhost_fail_on"]["choices"] = ["none", "high"]
    changed_defaults = dict(defaults("remediate"), gpuhost_profile="amd-epyc-nvidia")
    found = dict(drift(spec(SOURCE), defaults(SOURCE), planted, changed_defaults))
    assert set(found) == {"gpuhost_fail_on", "gpuhost_profile"}
    # a description of its own is allowed
    worded = copy.deepcopy(spec("remediate"))
    worded["gpuhost_params"]["description"] = "what the fixes read"
    assert drift(spec(SOURCE), defaults(SOURCE), worded, defaults("remediate")) == []


def test_every_role_states_the_ansible_version_the_collection_requires():
    """meta/runtime.yml's requires_ansible, each role's min_ansible_version and the minimum the playbooks'
    first play enforces (gpuhost_min_ansible of playbooks/vars/preflight.yml) say the same release
    (the roles said 2.16 while the collection required 2.19)."""
    import re  # pylint: disable=import-outside-toplevel

    with open(os.path.join(REPO, "meta", "runtime.yml")) as handle:
        required = yaml.safe_load(handle)["requires_ansible"]
    match = re.match(r"^>=\s*(\d+\.\d+)", required)
    assert match, required
    for role in (SOURCE,) + OTHERS:
        with open(os.path.join(REPO, "roles", role, "meta", "main.yml")) as handle:
            meta = yaml.safe_load(handle)["galaxy_info"]
        assert str(meta["min_ansible_version"]) == match.group(1), role
    with open(os.path.join(REPO, "playbooks", "vars", "preflight.yml")) as handle:
        assert yaml.safe_load(handle)["gpuhost_min_ansible"] == match.group(1)
