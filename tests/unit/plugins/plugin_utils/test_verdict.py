"""The verdict after the reports (plugins/plugin_utils/report/verdict.py): which host is contacted again and
each message exactly; the documented options equal to the action's."""

from ansible_collections.gpuhost.baseline.plugins.modules import baseline_verdict as doc_module
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.verdict import ARGUMENT_SPEC, must_contact, passes, verdict


def test_only_a_host_reported_unreachable_is_contacted_again():
    assert must_contact("unreachable")
    assert not must_contact("unreachable", fix_error="fix task 'x' failed: boom")
    assert not must_contact("audited") and not must_contact("failed") and not must_contact("")


def test_a_clean_host_passes_also_with_findings_below_the_threshold():
    assert verdict("gpu01", "audited", failing=[]) is None
    assert verdict("gpu01", "audited") is None


def test_passes_is_a_verdict_with_nothing_to_do():
    # what baseline_report lists as passing_hosts, for verdict.yml to end the role without a task
    assert passes("audited") and passes("audited", failing=[]) and passes("")
    assert not passes("audited", failing=["CPU-001 (high)"])
    assert not passes("failed") and not passes("unreachable")  # failed, or contacted once more
    assert not passes("audited", fix_error="fix task 'x' failed: boom")
    for state in ("audited", "failed", "unreachable", ""):
        for fix_error in (None, "", "boom"):
            for failing in ((), ["CPU-001 (high)"]):
                assert passes(state, fix_error, failing) == (
                    not must_contact(state, fix_error) and verdict("h", state, fix_error=fix_error, failing=failing) is None)


def test_failed_unreachable_and_fix_messages():
    assert verdict("gpu02", "failed", "host_facts: no /sys") == (
        "gpu02 could not be audited: host_facts: no /sys; it is reported failed")
    assert verdict("gpu03", "unreachable", "ssh: timed out") == (
        "gpu03 was unreachable when it was audited and answers now (ssh: timed out); it is reported "
        "unreachable, run the audit again")
    # a failed fix wins over the state and the findings
    assert verdict("gpu04", "audited", fix_error="connection lost during the fixes: gone", failing=["CPU-001 (high)"]) == (
        "remediation of gpu04 did not complete: connection lost during the fixes: gone; the report shows where "
        "it stands, run remediate.yml again")


def test_findings_message_names_five_and_counts_the_rest():
    failing = ["R-%d (high)" % i for i in range(7)]
    assert verdict("gpu05", "audited", failing=failing, fail_on="high", report_dir="/r") == (
        "gpu05: 7 failing finding(s) at or above severity high: R-0 (high), R-1 (high), R-2 (high), R-3 (high), "
        "R-4 (high) and 2 more. Reports were written to /r; fix the drift or waive it, or raise gpuhost_fail_on")
    assert verdict("gpu05", "audited", failing=failing[:5], fail_on="low", report_dir="/r").startswith(
        "gpu05: 5 failing finding(s) at or above severity low: R-0 (high), R-1 (high), R-2 (high), R-3 (high), "
        "R-4 (high). Reports")


def test_documented_options_equal_the_actions():
    assert doc_module.ARGUMENT_SPEC == ARGUMENT_SPEC
