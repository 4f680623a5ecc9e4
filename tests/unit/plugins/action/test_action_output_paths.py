# -*- coding: utf-8 -*-
"""Relative output paths of baseline_report and snapshot_import are taken from the working directory
of ansible-playbook, never from the playbook's or the collection's directory (issue 11, item 1)."""

import os

import pytest
import yaml

from ansible_collections.gpuhost.baseline.plugins.action import baseline_report, demo_snapshots, snapshot_import
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import history
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.files import controller_path

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def test_the_actions_and_the_history_resolve_with_the_one_helper():
    for action in (baseline_report, demo_snapshots, snapshot_import):
        assert action.controller_path is controller_path
    assert history.controller_path is controller_path


def test_relative_paths_resolve_against_the_working_directory(tmp_path, monkeypatch):
    resolve = controller_path
    monkeypatch.chdir(tmp_path)
    here = os.getcwd()
    assert resolve("gpuhost-reports") == os.path.join(here, "gpuhost-reports")
    assert resolve("a/../b/./c") == os.path.join(here, "b", "c")
    assert resolve("/srv/reports/") == "/srv/reports"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert resolve("~/reports") == str(tmp_path / "home" / "reports")


def test_a_vanished_working_directory_is_an_oserror(tmp_path, monkeypatch):
    resolve = controller_path
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    with pytest.raises(OSError):
        resolve("gpuhost-reports")
    assert resolve("/abs") == "/abs"


def test_role_defaults_are_neutral_relative_names():
    for role in ("audit", "remediate"):
        with open(os.path.join(REPO, "roles", role, "defaults", "main.yml")) as handle:
            defaults = yaml.safe_load(handle)
        assert defaults["gpuhost_report_dir"] == "gpuhost-reports", role
        with open(os.path.join(REPO, "roles", role, "meta", "argument_specs.yml")) as handle:
            spec = yaml.safe_load(handle)["argument_specs"]["main"]["options"]["gpuhost_report_dir"]
        assert spec["default"] == "gpuhost-reports", role
    with open(os.path.join(REPO, "playbooks", "snapshot.yml")) as handle:
        # the capture play (the first play checks ansible-core and the hosts: playbooks/tasks/preflight.yml)
        play = [p for p in yaml.safe_load(handle) if p["name"] == "Capture gpuhost snapshots"][0]
    assert play["vars"]["gpuhost_snapshot_dir"] == "gpuhost-snapshots"
    assert "playbook_dir" not in repr(play["vars"])
