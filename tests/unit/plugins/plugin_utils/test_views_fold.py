# -*- coding: utf-8 -*-
"""views.fold_findings: a host page's passing and not-applicable findings one row per rule (issue 20):
the rule, its subjects, the observed value (or the reason) once when every subject shows the same,
else a few ``subject: value`` lines; the anchor the matrix links to kept on the row."""

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import views
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.views import FOLD_LINES, fold_findings


def _pass(rid, subject=None, observed=None, **extra):
    finding = {"id": rid, "status": "pass", "title": "title of %s" % rid, "subject": subject, "observed": observed,
               "message": "long message of %s on %s" % (rid, subject), "rationale": "why %s" % rid,
               "fix": "fix %s" % rid, "source": "https://example.org/%s" % rid}
    finding.update(extra)
    return finding


def _na(rid, subject=None, message="applies only to hosts with the NVIDIA driver and GPUs present"):
    return {"id": rid, "status": "not_applicable", "title": "title of %s" % rid, "subject": subject, "message": message}


GPUS = ["0000:%02x:00.0" % n for n in range(8)]
INVENTORY = "applies only to hosts whose profile has a golden inventory (playbooks/learn.yml writes it)"


def test_one_row_per_rule_with_count_subjects_and_the_first_anchor():
    pairs = [(_pass("HEALTH-013", gpu, []), "f-HEALTH-013" if i == 0 else "") for i, gpu in enumerate(GPUS)]
    pairs += [(_pass("CPU-005", None, True), "f-CPU-005")]
    rows = fold_findings(pairs, {"HEALTH-013": {"ref": "rule-7", "f": pairs[0][0]}})
    assert [row["id"] for row in rows] == ["CPU-005", "HEALTH-013"]  # by rule id
    cpu, health = rows
    assert health["count"] == 8 and health["subjects"] == GPUS
    assert health["subject_text"] == "8: " + views._short_names(GPUS, 8)
    assert health["anchor"] == "f-HEALTH-013" and health["ref"] == "rule-7"
    assert health["same"] and health["value"] == views.observed_view(pairs[0][0]) and health["lines"] == []
    assert health["value"]["text"] == "nothing"
    assert cpu["count"] == 1 and cpu["subjects"] == [] and cpu["subject_text"] == ""
    assert cpu["ref"] is None and cpu["value"]["text"] == "yes"
    # nothing of the findings' own text: no message, rationale, fix or source
    for row in rows:
        assert not set(row) & {"message", "rationale", "fix", "source", "findings"}
        assert "long message" not in repr(row) and "https://" not in repr(row)


def test_the_anchor_is_the_first_one_given_whatever_finding_carries_it():
    # the rule's first finding on the host may be a problem row (it has the anchor): none here then
    rows = fold_findings([(_pass("PCI-004", "a", 16), ""), (_pass("PCI-004", "b", 16), "")])
    assert rows[0]["anchor"] == ""
    rows = fold_findings([(_pass("PCI-004", "a", 16), ""), (_pass("PCI-004", "b", 16), "f-PCI-004")])
    assert rows[0]["anchor"] == "f-PCI-004"


def test_differing_observed_values_are_listed_per_subject_then_counted():
    pairs = [(_pass("HEALTH-012", "mc0", 0), "f-HEALTH-012"), (_pass("HEALTH-012", "mc1", 3), "")]
    row = fold_findings(pairs)[0]
    assert not row["same"] and row["value"] is None
    assert row["lines"] == ["mc0: 0", "mc1: 3"]
    many = [(_pass("NVIDIA-011", gpu, 50 + n), "") for n, gpu in enumerate(GPUS)]
    row = fold_findings(many)[0]
    assert row["lines"] == ["%s: %d" % (gpu, 50 + n) for n, gpu in enumerate(GPUS[:FOLD_LINES])] + [
        "and %d more (report.json)" % (len(GPUS) - FOLD_LINES)]
    # values that differ only beyond what a person reads are the same view: shown once
    same = [(_pass("X-1", "a", "v"), ""), (_pass("X-1", "b", "v"), "")]
    assert fold_findings(same)[0]["same"]
    # a finding without a subject among others says so
    row = fold_findings([(_pass("X-2", None, 1), ""), (_pass("X-2", "b", 2), "")])[0]
    assert row["lines"] == ["(no subject): 1", "b: 2"] and row["subjects"] == ["b"] and row["subject_text"] == "b"


def test_not_applicable_rows_give_the_reason_once_or_per_subject():
    same = [(_na("NVIDIA-009", gpu), "f-NVIDIA-009" if i == 0 else "") for i, gpu in enumerate(GPUS[:3])]
    row = fold_findings(same)[0]
    assert row["status"] == "not_applicable" and row["count"] == 3 and row["same"]
    assert row["value"] == views.na_reason(same[0][0]) and row["anchor"] == "f-NVIDIA-009"
    differ = [(_na("PCI-005", "0000:c8:00.0", "not judged: GPU idle (P8)"), ""),
              (_na("PCI-005", "0000:c9:00.0", "not judged: GPU idle (P0)"), "")]
    row = fold_findings(differ)[0]
    assert not row["same"] and row["lines"] == ["0000:c8:00.0: not judged: GPU idle (P8)",
                                                "0000:c9:00.0: not judged: GPU idle (P0)"]
    alone = fold_findings([(_na("CPU-004"), "f-CPU-004")])[0]
    assert alone["subject_text"] == "" and alone["value"] == views.na_reason(_na("CPU-004"))


def test_nothing_to_fold():
    assert fold_findings([]) == []


def test_not_applicable_rows_grouped_by_reason():
    """views.group_na_rows: rules with one reason for all their findings share a group with the other
    rules of that reason, in the order of the first rule; a rule whose subjects give different
    reasons is a group of its own (reason None, its lines per subject)."""
    pairs = [(_na("INV-001", message=INVENTORY), "f-INV-001"),
             (_na("INV-002", message=INVENTORY), "f-INV-002"),
             (_na("CPU-007", message="applies only to hosts whose profile requires SMT on or off (this profile accepts either)"), "f-CPU-007"),
             (_na("PCI-005", "0000:c8:00.0", "not judged: GPU idle (P8)"), "f-PCI-005"),
             (_na("PCI-005", "0000:c9:00.0", "not judged: GPU idle (P0)"), ""),
             (_na("NVIDIA-009", GPUS[0], INVENTORY), "f-NVIDIA-009"),
             (_na("NVIDIA-009", GPUS[1], INVENTORY), "")]
    groups = views.group_na_rows(fold_findings(pairs))
    assert [(g["reason"], [r["id"] for r in g["rows"]]) for g in groups] == [
        ("applies only to hosts whose profile requires SMT on or off (this profile accepts either)", ["CPU-007"]),
        ("applies only to hosts whose profile has a golden inventory (playbooks/learn.yml writes it)",
         ["INV-001", "INV-002", "NVIDIA-009"]),
        (None, ["PCI-005"]),
    ]
    assert groups[1]["rows"][2]["count"] == 2 and groups[2]["rows"][0]["lines"] == [
        "0000:c8:00.0: not judged: GPU idle (P8)", "0000:c9:00.0: not judged: GPU idle (P0)"]
    assert views.group_na_rows([]) == []
