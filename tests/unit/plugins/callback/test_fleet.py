# -*- coding: utf-8 -*-
"""gpuhost.baseline.fleet, the stdout callback (issue 37 item 2): the recap and the verdict's failures
folded, unreachable results as one line; the whole console at 150 hosts is measured in
tests/integration/test_console_fleet.py."""
import json
import os
import subprocess
import sys

from ansible_collections.gpuhost.baseline.plugins.callback import fleet


def stats(ok=3, changed=0, unreachable=0, failures=0, skipped=0, rescued=0, ignored=0):
    return dict(ok=ok, changed=changed, unreachable=unreachable, failures=failures, skipped=skipped,
                rescued=rescued, ignored=ignored)


def test_recap_groups_hosts_with_the_same_counts_worst_first():
    summaries = dict(("gpu%02d" % i, stats()) for i in range(30))
    summaries.update(("bad%d" % i, stats(ok=2, failures=1)) for i in range(3))
    summaries["gone"] = stats(ok=0, unreachable=1)
    summaries["fixed"] = stats(changed=2)
    groups = fleet.recap_groups(summaries)
    assert [(counts[:4], len(hosts)) for counts, hosts in groups] == [
        ((2, 0, 0, 1), 3), ((0, 0, 1, 0), 1), ((3, 2, 0, 0), 1), ((3, 0, 0, 0), 30)]
    assert groups[0][1] == ["bad0", "bad1", "bad2"] and groups[-1][1][:2] == ["gpu00", "gpu01"]


def test_verdict_groups_fold_the_same_reason_of_several_hosts():
    failures = [("gpu01", "gpu01: 3 failing finding(s) at or above severity high: CPU-001 (high)"),
                ("gpu02", "gpu02: 3 failing finding(s) at or above severity high: CPU-001 (high)"),
                ("gpu03", "gpu03: not audited: facts could not be read"),
                ("gpu04", None),
                ("gpu05", "another\nline   shape")]
    assert fleet.verdict_groups(failures) == [
        ("3 failing finding(s) at or above severity high: CPU-001 (high)", ["gpu01", "gpu02"]),
        ("not audited: facts could not be read", ["gpu03"]),
        ("failed without a message", ["gpu04"]),
        ("another line shape", ["gpu05"])]


def test_unreachable_reason_without_ansible_s_lead():
    assert fleet._unreachable_reason("Task failed: Data could not be sent") == "Data could not be sent"
    assert fleet._unreachable_reason(None) == "unreachable without a message"


def test_the_callback_is_the_default_one_with_quieter_defaults():
    """As ansible-doc reads it from the collection: the default callback's options, two defaults changed."""
    done = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-doc"), "-t", "callback", "--json",
                           "gpuhost.baseline.fleet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)["gpuhost.baseline.fleet"]["doc"]
    assert doc["type"] == "stdout"
    options = doc["options"]
    assert options["display_ok_hosts"]["default"] is False and options["display_skipped_hosts"]["default"] is False
    assert options["display_failed_stderr"]["default"] is False and "show_custom_stats" in options  # the rest as in default
    assert options["display_ok_hosts"]["env"] == [{"name": "ANSIBLE_DISPLAY_OK_HOSTS"}]
