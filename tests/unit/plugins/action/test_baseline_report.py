# -*- coding: utf-8 -*-
"""Where baseline_report finds the collection version stamped on the reports."""

import json

import pytest

from helpers.baseline_facts import healthy_facts

from ansible_collections.gpuhost.baseline.plugins.action.baseline_report import collection_version, hosts_from_play, with_rule_text
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue import catalogue_load
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.schema import COLLECTION_ROOT
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge import evaluation
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import report as report_doc


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
    # put back when a host is read, never kept: the fleet's expanded findings are never held together
    assert sorted(hosts) == ["gone", "gpu01"] and len(hosts) == 2
    assert hosts["gpu01"] is not hosts["gpu01"] and hosts["gpu01"] == hosts["gpu01"]
    built = report_doc.build_report(hosts, generated="2026-06-01T00:00:00+00:00")
    assert built["hosts"]["gpu01"]["findings"] == result["findings"] and built["hosts"]["gone"]["state"] == "unreachable"
    assert with_rule_text(["not", "a", "mapping"], None) == ["not", "a", "mapping"]


def test_documentation_module_declares_the_action_plugins_options():
    # plugins/modules/baseline_report.py cannot import controller code: its copy must not drift
    import importlib

    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import ARGUMENT_SPEC
    doc_module = importlib.import_module("ansible_collections.gpuhost.baseline.plugins.modules.baseline_report")
    assert doc_module.ARGUMENT_SPEC == ARGUMENT_SPEC


# --- play_hosts: the hosts' results read from the play, host by host --------------------------

def _play(variables):
    """``raw_vars`` and ``note_of`` over ``variables`` (host name -> its variables), as the action
    gets them from HostVars; the names asked for are recorded."""
    asked = []

    def raw_vars(name):
        asked.append(name)
        return variables.get(name)  # None: no such host

    return raw_vars, lambda name: "note of %s: %s" % (name, variables[name]["gpuhost_note"]), asked


def test_play_hosts_reads_each_evaluation_and_leaves_out_hosts_without_one():
    audited = {"state": "audited", "findings": [{"id": "CPU-001", "status": "fail"}]}
    variables = {
        "gpu01": {"gpuhost_eval": {"host_report": audited, "changed": False}, "other": "x" * 100},
        "later": {"inventory_hostname": "later"},                      # a later gpuhost_serial batch's host
        "skipped": {"gpuhost_eval": {"skipped": True, "changed": False}},  # its evaluation task was skipped
        "noted": {"gpuhost_eval": {"host_report": {"state": "unreachable", "message": "no route"}},
                  "gpuhost_note": "{{ 'hostile' }}"},
    }
    raw_vars, note_of, asked = _play(variables)
    hosts, notes, unknown, verdict_hosts = hosts_from_play(["gpu01", "later", "skipped", "noted"],
                                                           ["gpu01", "later", "skipped"], raw_vars, note_of)
    assert hosts == {"gpu01": audited, "noted": {"state": "unreachable", "message": "no route"}}
    assert hosts["gpu01"] is audited  # the registered value itself: nothing copied, nothing else kept
    assert notes == {"noted": "note of noted: {{ 'hostile' }}"}  # through note_of (templated in the host's context)
    assert unknown == [] and asked == ["gpu01", "later", "skipped", "noted"]  # each host read once
    assert verdict_hosts == {"gpu01": None}  # a host with a report still in the play, no fix error


def test_play_hosts_takes_the_guards_report_only_for_a_host_that_failed_in_the_play():
    refused = {"state": "failed", "message": "refusing to remediate typo-host: ...", "findings": []}
    evaluated = {"state": "audited", "findings": []}
    variables = {
        # refused by the remediate role's guard (failed, so not active): its guard report replaces an evaluation
        "typo-host": {"gpuhost_controller_guard": {"failed": True, "host_report": refused},
                      "gpuhost_eval": {"host_report": evaluated}},
        "typo-new": {"gpuhost_controller_guard": {"failed": True, "host_report": refused}},
        # still active: its evaluation, whatever else it holds
        "active": {"gpuhost_controller_guard": {"host_report": refused}, "gpuhost_eval": {"host_report": evaluated}},
        # failed later (its fixes), let through by the guard: its evaluation
        "failed-fix": {"gpuhost_controller_guard": {"changed": False}, "gpuhost_eval": {"host_report": evaluated}},
    }
    raw_vars, note_of, dummy = _play(variables)
    hosts, notes, unknown, verdict_hosts = hosts_from_play(list(variables), ["active"], raw_vars, note_of)
    assert hosts == {"typo-host": refused, "typo-new": refused, "active": evaluated, "failed-fix": evaluated}
    assert notes == {} and unknown == [] and verdict_hosts == {"active": None}


def test_play_hosts_names_an_unknown_host():
    raw_vars, note_of, dummy = _play({"gpu01": {}})
    assert hosts_from_play(["gpu01", "gpu99"], [], raw_vars, note_of) == ({}, {}, ["gpu99"], {})


def _action(task_vars, report_dir="/nonexistent-gpuhost-never-written", **args):
    from unittest import mock

    from ansible.playbook.play_context import PlayContext
    from ansible.playbook.task import Task
    from ansible.parsing.dataloader import DataLoader
    from ansible_collections.gpuhost.baseline.plugins.action import baseline_report

    task = Task()
    task.args = dict(args, report_dir=report_dir)
    action = baseline_report.ActionModule(task, mock.MagicMock(), PlayContext(), DataLoader(), None, None)
    return action.run(task_vars=task_vars)


def test_hosts_and_play_hosts_one_of_them_exactly():
    neither = _action({})
    assert neither["failed"] and neither["msg"].startswith("baseline_report: give hosts (each host's results) or play_hosts")
    both = _action({}, hosts={}, play_hosts=[])
    assert both["failed"] and both["msg"] == "baseline_report: give hosts or play_hosts, not both"


def test_play_hosts_unknown_name_fails_the_task_naming_it():
    class HostVars(dict):
        def raw_get(self, name):
            return self[name]  # as HostVars.raw_get, no mapping for an unknown name (the action asks `in` first)

    result = _action({"hostvars": HostVars(gpu01={}), "ansible_play_hosts": ["gpu01"]}, play_hosts=["gpu01", "gpu-typo"])
    assert result["failed"] and result["msg"] == "baseline_report: play_hosts names 'gpu-typo', not in the inventory"


def test_cluster_of_each_host_is_text_or_none():
    from ansible_collections.gpuhost.baseline.plugins.action.baseline_report import _cluster_of

    hostvars = {"east": {"gpuhost_cluster": "east"}, "none": {}, "empty": {"gpuhost_cluster": ""},
                "number": {"gpuhost_cluster": 7}}
    assert _cluster_of(hostvars, "east") == "east"
    assert _cluster_of(hostvars, "none") == _cluster_of(hostvars, "empty") == ""
    with pytest.raises(ValueError, match="the gpuhost_cluster of host number must be text, not int"):
        _cluster_of(hostvars, "number")


class _HostVars(dict):
    def raw_get(self, name):
        return self[name]  # as HostVars.raw_get, no mapping for an unknown name (the action asks `in` first)


def test_passing_hosts_are_those_the_verdict_would_pass(tmp_path):
    """passing_hosts: the play's hosts whose verdict has nothing to do (verdict.yml ends the role for them in a
    meta task): audited with no failing finding at or above fail_on, no fix that did not complete, still in the
    play, not to be contacted once more."""
    facts = healthy_facts()
    drifted = evaluation.evaluate(dict(facts, kernel=dict(facts["kernel"], sysctl=dict(facts["kernel"]["sysctl"], numa_balancing=1))),
                                  today="2026-06-01")
    assert drifted["failing_ids"]
    clean = {"state": "audited", "findings": []}
    variables = {
        "ok": {"gpuhost_eval": {"host_report": clean}},
        "drifted": {"gpuhost_eval": {"host_report": evaluation.host_report(facts, drifted)}},
        "down": {"gpuhost_eval": {"host_report": {"state": "unreachable", "message": "no route"}}},
        "unaudited": {"gpuhost_eval": {"host_report": {"state": "failed", "message": "host_facts failed"}}},
        "fix-failed": {"gpuhost_eval": {"host_report": clean}, "gpuhost_fix_error": "fix task 'x' failed: boom"},
        "gone": {"gpuhost_eval": {"host_report": clean}},  # failed in the play: no verdict task runs for it
        "later": {},  # a later gpuhost_serial batch's host: no report yet, no verdict here
    }
    task_vars = {"hostvars": _HostVars(variables), "ansible_play_hosts": [h for h in variables if h != "gone"]}
    strict = _action(task_vars, report_dir=str(tmp_path / "strict"), play_hosts=list(variables), fail_on="low",
                     print_console=False)
    assert strict["failed"] and strict["failing_hosts"].keys() == {"drifted"}  # written, findings reached fail_on
    assert strict["passing_hosts"] == ["ok"]
    lenient = _action(task_vars, report_dir=str(tmp_path / "lenient"), play_hosts=list(variables), print_console=False)
    assert not lenient.get("failed") and lenient["passing_hosts"] == ["drifted", "ok"]  # fail_on none
    given = _action({}, report_dir=str(tmp_path / "given"), hosts={"ok": clean}, print_console=False)
    assert "passing_hosts" not in given  # hosts given, not read from the play: every host gets its verdict
