# -*- coding: utf-8 -*-
"""The self-audit's commands have the time bounds of the audit's (issue 40): runner.TIMEOUTS per tool,
changed by ``gpuhost_command_timeouts``, which the self_audit role writes into the runner's config as
``command_timeouts``; the deprecated ``gpuhost_self_audit_command_timeout`` (config ``command_timeout``)
still bounds every tool that ``command_timeouts`` does not name. A bad value is refused with one line:
on the controller before any host is changed (baseline_validate role_spec, role_values), and on the
host by the runner's config check (exit 2, nothing written)."""
import json
import os

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpuhost.baseline.plugins.module_utils.host import runner
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.inputs import role_values
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge import self_audit
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.inputs.inventory_vars import role_argument_spec
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.schema import COLLECTION_ROOT

ROLE = os.path.join(COLLECTION_ROOT, "roles", "self_audit")


def role_config(**inventory):
    """The config file the self_audit role writes (tasks/present.yml, the runner's config task) for a host
    with ``inventory`` over the role's defaults, templated by Ansible as the task does."""
    from ansible.parsing.dataloader import DataLoader  # pylint: disable=import-outside-toplevel
    from ansible.template import Templar  # pylint: disable=import-outside-toplevel
    try:
        from ansible.template import trust_as_template  # pylint: disable=import-outside-toplevel
    except ImportError:  # ansible-core before 2.19 templates any string
        def trust_as_template(value):
            return value
    with open(os.path.join(ROLE, "tasks", "present.yml")) as handle:
        tasks = yaml.safe_load(handle)
    (block,) = [t for t in tasks if "block" in t]
    (task,) = [t for t in block["block"] if t.get("name", "").startswith("Write the runner's config")]
    with open(os.path.join(ROLE, "defaults", "main.yml")) as handle:
        variables = yaml.safe_load(handle)
    variables.update(inventory, inventory_hostname="gpu01")

    def trusted(value):
        if isinstance(value, str):
            return trust_as_template(value)
        if isinstance(value, dict):
            return dict((k, trusted(v)) for k, v in value.items())
        if isinstance(value, list):
            return [trusted(v) for v in value]
        return value

    settings = task["vars"]["gpuhost_self_audit_settings"]
    assert "gpuhost_waiver_files" in settings["waivers"]
    settings["waivers"] = "{{ gpuhost_waivers }}"  # no file lookups here: the waiver files are not this test's
    variables.update((k, trusted(v)) for k, v in task["vars"].items())
    templar = Templar(loader=DataLoader(), variables=dict((k, trusted(v)) for k, v in variables.items()))
    return templar.template(trust_as_template(task["ansible.builtin.copy"]["content"]))


def limits(config):
    """``{tool: seconds}`` the self-audit's command runner gives each tool with ``config``."""
    seen = {}

    def fake_run(argv, timeout=None, timeouts=None, **unused):
        seen[os.path.basename(argv[0])] = timeout if timeout is not None else runner.timeout_for(argv[0], timeouts)
        return runner.Result(argv, 0, b"", b"")

    run = self_audit.command_runner(self_audit.command_timeouts(config), config.get("command_timeout"))
    original, runner.run = runner.run, fake_run
    try:
        for tool in ("nvidia-smi", "journalctl", "dmesg", "lspci"):
            run(["/usr/bin/" + tool, "--version"])
    finally:
        runner.run = original
    return seen


def test_the_role_writes_gpuhost_command_timeouts_and_the_runner_bounds_each_tool_by_it(tmp_path):
    text = role_config(gpuhost_command_timeouts={"nvidia-smi": 5, "journalctl": "90"})
    assert json.loads(text)["command_timeouts"] == {"nvidia-smi": 5, "journalctl": "90"}
    assert "command_timeout\"" not in text  # the deprecated key only when its variable is set
    path = tmp_path / "gpuhost-self-audit.json"
    path.write_text(text)
    config = self_audit.load_config(str(path))
    assert config["command_timeouts"] == {"nvidia-smi": 5, "journalctl": 90.0}
    # the tools not named keep the bounds of the audit's host_facts (runner.TIMEOUTS, then 60 s)
    assert limits(config) == {"nvidia-smi": 5, "journalctl": 90.0, "dmesg": 30, "lspci": runner.DEFAULT_TIMEOUT_S}


def test_by_default_the_self_audit_has_the_audits_bounds(tmp_path):
    path = tmp_path / "gpuhost-self-audit.json"
    path.write_text(role_config())
    config = self_audit.load_config(str(path))
    assert config["command_timeouts"] == {} and "command_timeout" not in config
    assert limits(config) == {"nvidia-smi": runner.TIMEOUTS["nvidia-smi"], "journalctl": runner.TIMEOUTS["journalctl"],
                              "dmesg": runner.TIMEOUTS["dmesg"], "lspci": runner.DEFAULT_TIMEOUT_S}


def test_the_deprecated_variable_still_bounds_the_tools_not_named(tmp_path):
    path = tmp_path / "gpuhost-self-audit.json"
    path.write_text(role_config(gpuhost_self_audit_command_timeout=300, gpuhost_command_timeouts={"nvidia-smi": 20}))
    config = self_audit.load_config(str(path))
    assert config["command_timeout"] == 300
    assert limits(config) == {"nvidia-smi": 20, "journalctl": 300, "dmesg": 300, "lspci": 300}
    # the role says so where the run shows it
    with open(os.path.join(ROLE, "tasks", "present.yml")) as handle:
        assert "[DEPRECATED] gpuhost_self_audit_command_timeout" in handle.read()


@pytest.mark.parametrize("content, message", [
    ({"command_timeouts": {"nvidia-smi": "abc"}}, "command_timeouts: nvidia-smi must be a number of seconds from 1 to "
                                                  "86400, not 'abc'"),
    ({"command_timeouts": {"nvidia-smi": 0}}, "nvidia-smi must be a number of seconds from 1 to 86400, not 0"),
    ({"command_timeouts": {"nvidia-smi": -5}}, "nvidia-smi must be a number of seconds from 1 to 86400, not -5"),
    ({"command_timeouts": {"nvidia-smi": True}}, "nvidia-smi must be a number of seconds from 1 to 86400, not True"),
    ({"command_timeouts": {"dmesg": 86401}}, "dmesg must be a number of seconds from 1 to 86400, not 86401"),
    ({"command_timeouts": {"dmesg": None}}, "dmesg must be a number of seconds from 1 to 86400, not None"),
    ({"command_timeouts": [5]}, "command_timeouts must be dict, not list"),
    ({"command_timeout": 0}, "command_timeout must be a number of seconds from 1 to 86400, not 0"),
    ({"command_timeout": "60"}, "command_timeout must be a number, not str"),
])
def test_a_bad_timeout_in_the_config_is_refused_with_one_line(tmp_path, capsys, content, message):
    path = tmp_path / "gpuhost-self-audit.json"
    path.write_text(json.dumps(content))
    out = tmp_path / "out"
    status = self_audit.main(["--config", str(path), "--root", str(tmp_path), "--report-dir", str(out / "r"),
                              "--textfile-dir", str(out / "t")])
    captured = capsys.readouterr()
    assert status == 2, captured
    lines = captured.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gpuhost-self-audit: config file %s: " % path), lines
    assert message in lines[0], lines[0]
    assert "Traceback" not in captured.err and not out.exists()


def test_audit_host_given_a_config_directly_refuses_a_bad_timeout_too(tmp_path):
    with pytest.raises(self_audit.SelfAuditError) as caught:
        self_audit.audit_host({"command_timeouts": {"nvidia-smi": "soon"}}, root=str(tmp_path))
    assert caught.value.status == 2 and "nvidia-smi must be a number of seconds" in str(caught.value)


def problems(role, values):
    options = role_argument_spec(COLLECTION_ROOT, role)
    checked = ArgumentSpecValidator(options).validate(values)
    return list(checked.error_messages) + role_values.option_problems(options, values, checked.validated_parameters)


@pytest.mark.parametrize("role", ["self_audit", "audit"])
@pytest.mark.parametrize("value, shown", [({"nvidia-smi": "abc"}, "'abc'"), ({"nvidia-smi": 0}, "0"),
                                          ({"lspci": 90, "nvidia-smi": 1e9}, "1000000000.0"),
                                          ({"nvidia-smi": [45]}, "[45]")])
def test_a_bad_gpuhost_command_timeouts_is_refused_on_the_controller_with_one_line(role, value, shown):
    found = problems(role, {"gpuhost_command_timeouts": value})
    assert found == ["gpuhost_command_timeouts: nvidia-smi must be a number of seconds from 1 to 86400 (a tool's "
                     "time bound), not %s" % shown], found


@pytest.mark.parametrize("role", ["self_audit", "audit"])
def test_good_gpuhost_command_timeouts_pass(role):
    assert problems(role, {"gpuhost_command_timeouts": {"nvidia-smi": 5, "journalctl": "90", "dmesg": 0.5}}) == []
    assert problems(role, {"gpuhost_command_timeouts": {}}) == []


def test_the_deprecated_variable_has_no_default_and_keeps_its_bounds():
    spec = role_argument_spec(COLLECTION_ROOT, "self_audit")["gpuhost_self_audit_command_timeout"]
    assert "default" not in spec and "Deprecated" in spec["description"][0]
    with open(os.path.join(ROLE, "defaults", "main.yml")) as handle:
        assert "gpuhost_self_audit_command_timeout" not in (yaml.safe_load(handle) or {})
    assert problems("self_audit", {"gpuhost_self_audit_command_timeout": 0}) == [
        "gpuhost_self_audit_command_timeout must be 1 to 3600, not 0"]
