"""Set-ups that several integration test files assert on: each runs its playbooks once per session."""
import shutil

import pytest

from helpers.fixhost import copy_tree, tree_state
from helpers.incident import incident_inventory
from helpers.runner import run_playbook


@pytest.fixture(scope="session")
def remediated_incident(snapshot_trees, tmp_path_factory):
    """playbooks/remediate.yml three times on one writable copy of the incident snapshot: --check
    --diff, then for real, then again; the runners, their report directories (check, apply, again
    under ``tmp``) and the copy's tree state before and after each run. test_remediate_playbook.py
    asserts on all three runs, test_console_output.py on the console summary of the real one."""
    tmp = tmp_path_factory.mktemp("remediate")
    root = copy_tree(snapshot_trees["incident"], tmp / "incident")
    pristine = tree_state(root)
    check = run_playbook(tmp, "remediate.yml", incident_inventory(root), cmdline="--check --diff",
                         extravars={"gpuhost_report_dir": str(tmp / "check")})
    after_check = tree_state(root)
    apply = run_playbook(tmp, "remediate.yml", incident_inventory(root),
                         extravars={"gpuhost_report_dir": str(tmp / "apply")})
    after_apply = tree_state(root)
    again = run_playbook(tmp, "remediate.yml", incident_inventory(root),
                         extravars={"gpuhost_report_dir": str(tmp / "again")})
    yield {"root": root, "tmp": tmp, "pristine": pristine, "check": check, "after_check": after_check,
           "apply": apply, "after_apply": after_apply, "again": again, "after_again": tree_state(root)}
    shutil.rmtree(str(tmp), ignore_errors=True)
