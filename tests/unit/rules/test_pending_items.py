"""pending_items after a remediation (issue 19): "still failing after the <action> fix" only for a
fix that ran (its rule id in ``applied``); the reasons for manual and opt-in fixes come from the
rules' ``fix`` data, not from a table of actions or literal ids."""

import pytest
import yaml

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge import evaluation
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_load import load_catalogue
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_model import CatalogueError
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge.evaluation import pending_items

EVALUATION = evaluation.__file__


def failing(rid, pending=False, status="fail", subject=None):
    rule = load_catalogue().by_id[rid]
    return {"id": rid, "status": status, "subject": subject, "fix_action": rule.fix_action, "pending": pending,
            "message": "%s message" % rid, "fix": rule.fix_hint, "title": rule.title}


def only(items):
    assert len(items) == 1, items
    return items[0]


def test_a_fix_that_ran_and_still_fails_is_not_fixed():
    item = only(pending_items([failing("NUMA-001")], applied=["NUMA-001", "NUMA-006"]))
    assert item["kind"] == "not-fixed"
    assert item["message"].startswith("still failing after the sysctl fix: NUMA-001 message (")


def test_an_automatic_fix_that_did_not_run_says_so():
    # left out by --skip-tags NUMA-001 (or a --check preview: applied is empty)
    for applied in (["KERNEL-005"], []):
        item = only(pending_items([failing("NUMA-001")], applied=applied))
        assert item["kind"] == "not-applied"
        assert item["message"].startswith("the automatic sysctl fix did not run in this remediation")
        assert "still failing after" not in item["message"]


def test_without_applied_no_fix_is_said_to_have_run():
    item = only(pending_items([failing("NUMA-001")]))
    assert item["kind"] == "not-fixed" and "after the" not in item["message"]
    assert item["message"].startswith("still failing (its fix is the automatic sysctl fix)")


@pytest.mark.parametrize("rid", ["NUMA-003", "LXC-001", "KERNEL-004", "NVIDIA-001", "CPU-007", "PCI-003",
                                 "NVIDIA-006", "KERNEL-002", "KERNEL-003"])
def test_manual_fixes_are_manual_with_the_rule_hint(rid):
    item = only(pending_items([failing(rid)], applied=[]))
    assert item["kind"] == "manual"
    assert item["message"] == "manual: %s message (%s)" % (rid, load_catalogue().by_id[rid].fix_hint)


def test_opt_in_fixes_name_their_variable():
    item = only(pending_items([failing("PCI-006", subject="0000:40:01.1")], applied=["NUMA-001"]))
    assert item["kind"] == "opt-in" and item["subject"] == "0000:40:01.1"
    assert item["message"].startswith("opt-in: the pcie_tune fix runs only with gpuhost_fix_acs set, and did not run")
    assert "never on hosts that pass devices to VMs" in item["message"]  # the reason: the rule's hint
    item = only(pending_items([failing("KERNEL-001")], applied=[]))
    assert item["kind"] == "opt-in" and "gpuhost_kernel_package" in item["message"]
    # opted in and run: then it is a fix that ran
    assert only(pending_items([failing("PCI-006")], applied=["PCI-006"]))["kind"] == "not-fixed"


def test_a_pending_reboot_wins():
    for applied in (None, [], ["CPU-001"]):
        item = only(pending_items([failing("CPU-001", pending=True)], applied=applied))
        assert item["kind"] == "reboot" and item["message"].startswith("pending a reboot: ")


def test_passing_and_waived_findings_are_not_pending():
    assert pending_items([failing("NUMA-001", status="pass"), failing("NUMA-002", status="waived")], applied=[]) == []


def test_no_table_of_actions_or_literal_ids_in_the_evaluation():
    with open(EVALUATION) as handle:
        text = handle.read()
    assert "_NOT_AUTOMATIC" not in text and "PCI-006" not in text


def site_rule(rid, fix):
    """A site rule (old format when ``fix`` has no kind), as a fresh mapping: catalogue files refuse YAML aliases."""
    return {"id": rid, "title": "a site rule", "area": "cpu", "severity": "low", "rationale": "why",
            "source": "https://example.org/", "query": "cpu.vendor", "expect": {"equals": "AuthenticAMD"},
            "fix": dict(fix), "reboot_required": False}


def test_site_rule_of_the_old_format_loads_with_a_derived_kind(tmp_path):
    site = tmp_path / "site"
    (site / "rules").mkdir(parents=True)
    rules = [site_rule("CPU-901", {"action": "cpu_power", "hint": "do it"}),
             site_rule("CPU-902", {"action": "lxc_config", "hint": "edit the container"}),
             site_rule("CPU-903", {"action": "kernel_package", "hint": "install one"})]
    (site / "rules" / "cpu.yml").write_text(yaml.safe_dump(rules))
    cat = load_catalogue(site_dirs=[str(site)])
    kinds = dict((rid, (cat.by_id[rid].fix_kind, cat.by_id[rid].fix_variable)) for rid in ("CPU-901", "CPU-902", "CPU-903"))
    assert kinds == {"CPU-901": ("automatic", None), "CPU-902": ("manual", None), "CPU-903": ("manual", None)}
    # no task of the remediate role names a site rule: its automatic fix is said not to have run
    finding = {"id": "CPU-901", "status": "fail", "subject": None, "fix_action": "cpu_power", "message": "m", "fix": "do it"}
    assert only(pending_items([finding], cat, applied=["NUMA-001"]))["kind"] == "not-applied"


@pytest.mark.parametrize("fix, wanted", [
    ({"kind": "opt_in", "action": "pcie_tune", "hint": "h"}, "fix: kind opt_in needs variable"),
    ({"kind": "automatic", "action": "sysctl", "variable": "gpuhost_fix_acs", "hint": "h"},
     "fix: variable is only for kind opt_in"),
    ({"kind": "sometimes", "action": "sysctl", "hint": "h"}, "unknown fix kind 'sometimes' (known: automatic, opt_in, manual)"),
    ({"kind": "automatic", "action": "thp", "hint": "h"}, "fix: kind automatic needs an action the remediate role applies"),
    ({"kind": "opt_in", "action": "sysctl", "variable": "fix_acs", "hint": "h"}, "fix.variable must name a gpuhost_ role variable"),
    ({"action": "sometimes", "hint": "h"}, "unknown fix action 'sometimes'"),
])
def test_bad_fix_data_is_refused_with_a_clear_message(tmp_path, fix, wanted):
    site = tmp_path / "site"
    (site / "rules").mkdir(parents=True)
    (site / "rules" / "cpu.yml").write_text(yaml.safe_dump([site_rule("CPU-901", fix)]))
    with pytest.raises(CatalogueError) as info:
        load_catalogue(site_dirs=[str(site)])
    assert "rule CPU-901" in str(info.value) and wanted in str(info.value), str(info.value)


def test_amd_pstate_active_configured_but_not_booted_is_pending_a_reboot():
    """CPU-002 after remediate wrote amd_pstate=active into the boot configuration: pending a reboot
    (its fix needs one), not "still failing after the kernel_cmdline fix"; before the fix, a plain fail."""
    from helpers.baseline_facts import healthy_facts  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge.evaluation import evaluate  # pylint: disable=import-outside-toplevel

    facts = healthy_facts()
    facts["cpu"]["amd_pstate"]["status"] = "passive"
    facts["kernel"]["cmdline"]["params"]["amd_pstate"] = "passive"
    facts["kernel"]["configured_cmdline"]["params"]["amd_pstate"] = "passive"
    outcome = evaluate(facts, applied=[])
    (before,) = [f for f in outcome["findings"] if f["id"] == "CPU-002"]
    assert before["status"] == "fail" and not before["pending"] and before["reboot_required"]
    facts["kernel"]["configured_cmdline"]["params"]["amd_pstate"] = "active"
    outcome = evaluate(facts, applied=["CPU-001", "CPU-002"])
    (after,) = [f for f in outcome["findings"] if f["id"] == "CPU-002"]
    assert after["status"] == "fail" and after["pending"]
    (item,) = [i for i in outcome["pending_items"] if i["id"] == "CPU-002"]
    assert item["kind"] == "reboot" and "amd_pstate=active configured, reboot to apply" in after["message"]
