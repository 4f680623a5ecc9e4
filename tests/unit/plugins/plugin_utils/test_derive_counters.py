# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Error counters judged over the audit history (plugins/plugin_utils/derive/derive_counters.py, the
``counters`` of history.py records): the window, a reboot, a counter that went down, no history."""
import json

import pytest

from helpers.baseline_facts import GPU1, healthy_facts
from helpers.health_facts import add_health

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge import evaluation
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive_counters import (
    counter_values, derive_counters, span_text,
)
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.history import (
    earlier_in_boot, encode, make_record, parse_lines, with_history,
)

PARAMS = {"counter_window_hours": 3, "ib_link_downed_max": 0, "ib_link_error_recovery_max": 0,
          "ib_symbol_error_max": 10, "ib_port_rcv_errors_max": 10, "aer_correctable_max": 10, "nvlink_replay_max": 10,
          "nvlink_recovery_max": 0, "nvlink_crc_max": 100, "ecc_corrected_max": 100}
BOOT, OLD_BOOT = "b0b0b0b0-0000-4000-8000-000000000001", "a0a0a0a0-0000-4000-8000-000000000002"
LINK = "ib|mlx5_0/1|link_downed"


def _facts(link_downed):
    facts = add_health(healthy_facts())
    facts["kernel"]["boot_id"] = BOOT
    facts["health"]["counters"]["ib"][0]["counters"]["link_downed"] = link_downed
    del facts["history"]
    return facts


def _history(facts, records, now):
    """``facts["history"]`` as with_history builds it from ``records`` ([(time, boot, link_downed)])."""
    values = counter_values(facts)
    made = []
    for time, boot, count in records:
        made.append(make_record("gpu01", [], time, boot_id=boot, counters=dict(values, **{LINK: count})))
    history = earlier_in_boot(made, BOOT)
    history["now"] = now
    return dict(facts, history=history)


def _port(facts, params=None):
    return derive_counters(facts, dict(PARAMS, **(params or {})))["ib_ports"][0]


def test_span_text():
    assert [span_text(s) for s in (0, 59, 60, 3 * 3600, 2 * 3600 + 30 * 60, 26 * 3600, 3 * 86400)] == \
        ["0s", "59s", "1m", "3h", "2h30m", "1d2h", "3d"]


def test_link_downed_three_times_in_three_hours():
    facts = _history(_facts(3), [("2025-08-01T09:00:00+00:00", BOOT, 0), ("2025-08-01T10:00:00+00:00", BOOT, 1)],
                     "2025-08-01T12:00:00+00:00")
    port = _port(facts)
    assert port["reason"] is None
    assert port["increases"] == ["link_downed +3 in 3h (0 at the audit of 2025-08-01T09:00:00+00:00, 3 now; at most "
                                 "+0 per 3h)"]


def test_only_audits_inside_the_window_are_the_baseline():
    records = [("2025-08-01T00:00:00+00:00", BOOT, 0), ("2025-08-01T10:00:00+00:00", BOOT, 3)]
    # the 00:00 audit is out of a 3 h window: judged from 10:00, no increase since
    assert _port(_history(_facts(3), records, "2025-08-01T12:00:00+00:00"))["increases"] == []
    # a 24 h window reaches it: +3 in 12h
    (text,) = _port(_history(_facts(3), records, "2025-08-01T12:00:00+00:00"), {"counter_window_hours": 24})["increases"]
    assert text.startswith("link_downed +3 in 12h")
    # no audit inside the window: the newest before it, and the span says how long it really is
    (text,) = _port(_history(_facts(5), records[:1], "2025-08-01T12:00:00+00:00"))["increases"]
    assert text.startswith("link_downed +5 in 12h")


def test_reboot_restarts_the_baseline():
    records = [("2025-08-01T09:00:00+00:00", OLD_BOOT, 40), ("2025-08-01T10:00:00+00:00", BOOT, 0)]
    port = _port(_history(_facts(2), records, "2025-08-01T11:00:00+00:00"))
    assert port["increases"][0].startswith("link_downed +2 in 1h (0 at the audit of 2025-08-01T10:00:00+00:00")
    assert "judged from this boot only (the audit of 2025-08-01T09:00:00+00:00 saw an earlier boot)" in \
        port["increases"][-1]
    # right after the reboot: the earlier boot's counts never count
    port = _port(_history(_facts(2), records[:1], "2025-08-01T11:00:00+00:00"))
    assert port["increases"] is None
    assert port["reason"].startswith("no earlier audit of this boot in the audit history: the counters restarted at "
                                     "the reboot after the audit of 2025-08-01T09:00:00+00:00")


def test_counter_that_went_down_is_judged_from_the_drop():
    records = [("2025-08-01T09:00:00+00:00", BOOT, 9), ("2025-08-01T10:00:00+00:00", BOOT, 0)]
    (text,) = _port(_history(_facts(1), records, "2025-08-01T11:00:00+00:00"))["increases"]
    assert text.startswith("link_downed +1 in 1h (0 at the audit of 2025-08-01T10:00:00+00:00")
    assert "reset since 2025-08-01T10:00:00+00:00, judged from then" in text
    # it went down at this audit: nothing to judge yet
    port = _port(_history(_facts(0), records[:1], "2025-08-01T11:00:00+00:00"))
    assert port["increases"] is None and "link_downed went down from 9 to 0" in port["reason"]


def test_no_history_first_audit_and_unusable_history_are_unknown():
    port = _port(_facts(3))
    assert port["increases"] is None
    assert port["reason"].startswith("no audit history to compare with (gpuhost_history_dir is not set): error counters "
                                     "are judged by their increase over 3h (counter_window_hours)")
    assert "(now: link_downed 3," in port["reason"]
    first = _port(_history(_facts(3), [], "2025-08-01T11:00:00+00:00"))
    assert "first audit" in first["reason"]
    unknown_boot = dict(_facts(3), history=earlier_in_boot([], None))
    assert _port(unknown_boot)["reason"].startswith("audit history not usable: this boot's id is unknown")


def test_a_reason_of_the_whole_host_is_one_item_per_family_not_one_per_subject():
    """No history: the AER functions (3 readable, 1 unreadable) give one item of subject ``all``
    naming them and their non-zero values now, the unreadable one keeps its own reason; a family
    with one subject (the port) keeps it."""
    facts = _facts(3)
    facts["health"]["counters"]["aer"].append({"address": "0000:99:00.0", "correctable": None,
                                               "error": "aer_dev_correctable: Permission denied"})
    counters = derive_counters(facts, PARAMS)
    aer = counters["aer_devices"]
    assert [item["subject"] for item in aer] == ["all", "0000:99:00.0"]
    folded = aer[0]
    assert folded["increases"] is None and folded["now"] is None
    assert folded["label"].startswith("3 PCI functions: ")
    assert folded["reason"].startswith("no audit history to compare with (gpuhost_history_dir is not set)")
    assert folded["reason"].endswith("(now: correctable 2 on %s, 0 on the other 2)" % GPU1)
    assert aer[1]["reason"] == "aer_dev_correctable: Permission denied"
    (port,) = counters["ib_ports"]
    assert port["subject"] == "mlx5_0/1" and "(now: link_downed 3, " in port["reason"]
    # the rule: one unknown finding for the folded functions, one for the unreadable one
    result = evaluation.evaluate(facts, profile="amd-epyc-nvidia", params={"smt": "on"}, host="gpu01",
                                 today="2025-08-01")
    aer_findings = [f for f in result["findings"] if f["id"] == "HEALTH-021"]
    assert [(f["subject"], f["status"]) for f in aer_findings] == [("all", "unknown"), ("0000:99:00.0", "unknown")]
    assert aer_findings[0]["message"].endswith("on all (%s)" % folded["label"])
    # with the history the same facts are judged per function again
    judged = _history(facts, [("2025-08-01T10:00:00+00:00", BOOT, 1)], "2025-08-01T11:00:00+00:00")
    assert "all" not in [item["subject"] for item in derive_counters(judged, PARAMS)["aer_devices"]]


def test_many_subjects_are_named_up_to_four():
    facts = _facts(3)
    facts["health"]["counters"]["aer"] = [{"address": "0000:%02x:00.0" % i, "correctable": i % 3, "error": None}
                                          for i in range(1, 8)]
    (folded,) = derive_counters(facts, PARAMS)["aer_devices"]
    assert folded["label"] == "7 PCI functions: 0000:01:00.0, 0000:02:00.0, 0000:03:00.0, 0000:04:00.0 and 3 more"
    assert folded["reason"].endswith("(now: correctable 1 on 0000:01:00.0, 2 on 0000:02:00.0, 1 on 0000:04:00.0, "
                                     "2 on 0000:05:00.0, more on 1 other(s), 0 on the other 2)")


@pytest.mark.parametrize("garbage", [None, "x", [], {"now": "banana", "audits": 1},
                                     {"now": "2025-08-01T11:00:00+00:00", "audits": 1, "counters": {LINK: "x"}},
                                     {"now": "2025-08-01T11:00:00+00:00", "audits": 1,
                                      "counters": {LINK: [["banana", 1], [None], "x"]}}])
def test_garbage_history_never_raises(garbage):
    facts = dict(_facts(3), history=garbage)
    port = _port(facts)
    assert port["increases"] is not None or port["reason"]


def test_rule_findings_and_message_on_the_healthy_document():
    facts = _history(_facts(4), [("2025-08-01T10:00:00+00:00", BOOT, 1)], "2025-08-01T11:00:00+00:00")
    facts["health"]["counters"]["aer"][1]["correctable"] = 40
    result = evaluation.evaluate(facts, profile="amd-epyc-nvidia", params={"smt": "on"}, host="gpu01",
                                 today="2025-08-01")
    failing = [(f["id"], f["subject"]) for f in result["findings"] if f["status"] != "pass"
               and f["id"].startswith("HEALTH-02")]
    assert failing == [("HEALTH-020", "mlx5_0/1"), ("HEALTH-021", GPU1)]
    (ib,) = [f for f in result["findings"] if f["id"] == "HEALTH-020"]
    assert ib["message"].startswith("InfiniBand error counter increase: link_downed +3 in 1h")
    assert ib["observed"][0].startswith("link_downed +3 in 1h")


def test_history_keeps_the_counters_and_reads_them_back(tmp_path):
    facts = _facts(3)
    record = make_record("gpu01", [], "2025-08-01T10:00:00+00:00", boot_id=BOOT, counters=counter_values(facts))
    assert record["counters"][LINK] == 3 and record["counters"]["ecc|0000:43:00.0|corrected"] == 0
    assert "counters" not in make_record("gpu01", [], "2025-08-01T10:00:00+00:00", counters={})
    # the counters of the healthy test host: 17 values, well under a kilobyte per record
    assert len(json.dumps(record["counters"])) < 1000
    (tmp_path / "gpu01.jsonl").write_text(encode(record))
    judged, warnings = with_history(facts, str(tmp_path), "gpu01", now="2025-08-01T11:00:00+00:00")
    assert warnings == [] and judged["history"]["counters"][LINK] == [["2025-08-01T10:00:00+00:00", 3]]
    assert judged["history"]["now"] == "2025-08-01T11:00:00+00:00"
    # a record whose counters are not counts is not used
    bad = dict(record, counters={LINK: -1})
    records, problems = parse_lines([encode(bad)], host="gpu01")
    assert records == [] and "counters is not a mapping" in problems[0]
