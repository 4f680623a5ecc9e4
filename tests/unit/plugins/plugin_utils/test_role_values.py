# -*- coding: utf-8 -*-
"""Role variables checked beyond the argument spec language before any host is contacted (issue 40, item 4a):
integer bounds, lists as lists, paths without control characters, and gpuhost_serial /
gpuhost_max_fail_percentage as the play keywords they become (plugins/plugin_utils/inputs/role_values.py)."""
import os

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.inputs import role_values
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.inputs.inventory_vars import role_argument_spec
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.schema import COLLECTION_ROOT

ROLES = ("audit", "remediate", "validate", "self_audit", "on_fail")


def problems(role, values):
    options = role_argument_spec(COLLECTION_ROOT, role)
    checked = ArgumentSpecValidator(options).validate(values)
    return list(checked.error_messages) + role_values.option_problems(options, values, checked.validated_parameters)


@pytest.mark.parametrize("value, why", [
    ("abc", "not a whole number of hosts"), (0, "fewer than 1 host"), (-1, "fewer than 1 host"),
    ("0", "fewer than 1 host"), ("-1", "fewer than 1 host"), ("12.5%", "not a whole number"),
    ("0%", "outside 1% to 100%"), ("150%", "outside 1% to 100%"), ([], "an empty list"), (True, "not a number"),
    (2.5, "not a number"), ([1, "abc"], "'abc' is not a whole number"), ({"a": 1}, "not a number"),
    ("\x1b[31m", "not a whole number"),
])
def test_a_serial_ansible_cannot_use_or_would_run_every_host_at_once_is_refused(value, why):
    message = role_values.serial_problem(value)
    assert message and why in message, message
    assert message.startswith("gpuhost_serial ") and "-e gpuhost_serial=2" in message and message.isprintable()


@pytest.mark.parametrize("value", [1, 2, "2", " 3 ", "25%", "100%", "1%", [1, "10%", "50%"], ("2",)])
def test_a_serial_of_hosts_or_percentages_is_accepted(value):
    assert role_values.serial_problem(value) is None


@pytest.mark.parametrize("value, ok", [(0, True), (100, True), ("25", True), ("25%", True), (12.5, True),
                                       (-1, False), (101, False), ("abc", False), (True, False), (None, False),
                                       ("nan", False)])
def test_max_fail_percentage(value, ok):
    assert (role_values.max_fail_problem(value) is None) is ok


@pytest.mark.parametrize("name, value, expected", [
    ("gpuhost_validate_task_timeout_s", 0, "gpuhost_validate_task_timeout_s must be 1 to 86400, not 0"),
    ("gpuhost_validate_task_timeout_s", "0", "gpuhost_validate_task_timeout_s must be 1 to 86400, not '0'"),
    ("gpuhost_validate_task_timeout_s", 999999, "must be 1 to 86400"),
    ("gpuhost_validate_dcgm_diag_timeout_s", 0, "gpuhost_validate_dcgm_diag_timeout_s must be 1 to 14400"),
    ("gpuhost_validate_dcgm_diag_timeout_s", 20000, "must be 1 to 14400"),
    ("gpuhost_validate_duration_s", 61, "must be 1 to 60"),
    ("gpuhost_validate_timeout_s", 3, "gpuhost_validate_timeout_s (3) must exceed gpuhost_validate_duration_s (3)"),
    ("gpuhost_validate_measurements", "cpu_freq", "gpuhost_validate_measurements must be a list"),
    ("gpuhost_validate_measurements", "cpu_freq,mem_bw", "not 'cpu_freq,mem_bw'"),
    ("gpuhost_validate_mem_tools", "mbw", "gpuhost_validate_mem_tools must be a list"),
    ("gpuhost_report_dir", "reports\nrm -rf", "gpuhost_report_dir 'reports\\nrm -rf' holds a control"),
    ("gpuhost_report_dir", "r\x1b[2J", "holds a control or other non-printable character"),
    ("gpuhost_report_dir", "r\u202eevil", "'r\\u202eevil'"),
    ("gpuhost_history_dir", "h\tx", "gpuhost_history_dir"),
    ("gpuhost_catalogue_dirs", ["/srv/site", "/srv/x\ny"], "gpuhost_catalogue_dirs '/srv/x\\ny'"),
    ("gpuhost_root", "/srv/snap\x00", "gpuhost_root"),
])
def test_validate_role_values_out_of_bounds_are_refused(name, value, expected):
    found = problems("validate", {name: value})
    assert any(expected in problem for problem in found), found
    assert all(problem.isprintable() for problem in found)


@pytest.mark.parametrize("values", [
    {}, {"gpuhost_validate_task_timeout_s": 3600, "gpuhost_validate_dcgm_diag_timeout_s": 3600,
         "gpuhost_validate_dcgm_level": 3},
    {"gpuhost_validate_measurements": ["cpu_freq"], "gpuhost_report_dir": "/srv/gpu reports/été"},
    {"gpuhost_validate_task_timeout_s": "1800", "gpuhost_history_dir": ""},
])
def test_good_values_pass(values):
    assert problems("validate", values) == []


def test_remediate_and_self_audit_bounds():
    assert any("gpuhost_reboot_timeout must be 1 to 86400" in p for p in problems("remediate", {"gpuhost_reboot_timeout": 0}))
    assert any("gpuhost_history_keep must be 1 to 100000" in p for p in problems("audit", {"gpuhost_history_keep": 0}))
    assert any("gpuhost_self_audit_nice must be -20 to 19" in p
               for p in problems("self_audit", {"gpuhost_self_audit_nice": 40}))
    assert any("gpuhost_self_audit_watch_interval must be 1 to 3600" in p
               for p in problems("self_audit", {"gpuhost_self_audit_watch_interval": 0}))
    assert problems("self_audit", {"gpuhost_self_audit_watch_interval": 3600}) == []


def test_every_bound_is_an_integer_option_of_a_role_and_every_timeout_has_one():
    ints = {}
    for role in ROLES:
        for name, spec in role_argument_spec(COLLECTION_ROOT, role).items():
            if spec.get("type") == "int" and not spec.get("choices"):
                ints[name] = spec
    assert set(role_values.INT_BOUNDS) <= set(ints), set(role_values.INT_BOUNDS) - set(ints)
    assert set(ints) <= set(role_values.INT_BOUNDS), set(ints) - set(role_values.INT_BOUNDS)
    for name, (least, most) in role_values.INT_BOUNDS.items():
        assert least <= ints[name].get("default", least) <= most, name


def test_prove_repeats_are_bounded_as_host_measure_bounds_them():
    from ansible_collections.gpuhost.baseline.plugins.module_utils.measure import measure_host

    assert role_values.INT_BOUNDS["gpuhost_prove_repeats"] == measure_host.REPEATS_BOUNDS
    assert any("gpuhost_prove_repeats must be 1 to 10" in p for p in problems("remediate", {"gpuhost_prove_repeats": 0}))


def test_the_validate_role_passes_every_gpu_timeout_to_host_measure():
    with open(os.path.join(COLLECTION_ROOT, "roles", "validate", "tasks", "measure.yml")) as handle:
        tasks = yaml.safe_load(handle)
    (measure,) = [t for t in tasks if "gpuhost.baseline.host_measure" in t]
    args = measure["gpuhost.baseline.host_measure"]
    for tool in ("gpu_bw", "dcgm_diag", "dcgm_health", "nccl"):
        assert args["%s_timeout_s" % tool] == "{{ gpuhost_validate_%s_timeout_s }}" % tool
