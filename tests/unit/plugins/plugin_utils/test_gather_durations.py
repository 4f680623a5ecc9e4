"""What each facts reader cost (issue 35 item 7, STYLE 17): gather_facts records every subsystem's seconds
beside its errors, the host's report keeps them (report.json hosts.<name>.gather_s) and metrics.prom
exports them per subsystem, as node_exporter exports each collector's duration; garbage is left out."""
import math

import pytest

from helpers.prom import parse_metrics

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import gather
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import metrics
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import build_report

GENERATED = "2026-12-06T12:00:00+00:00"


def test_every_gathered_subsystem_has_its_seconds(tmp_path, monkeypatch):
    clock = iter(range(0, 1000, 1))
    monkeypatch.setattr(gather.time, "monotonic", lambda: float(next(clock)))
    facts = gather.gather_facts(Root(str(tmp_path)), ["numa", "kernel"])
    # in the document's order, one monotonic second each here
    assert list(facts["durations_s"]) == ["kernel", "numa"]
    assert facts["durations_s"] == {"kernel": 1.0, "numa": 1.0}


def test_a_slow_reader_is_the_one_named(tmp_path, monkeypatch):
    def slow_numa(root):
        gather.time.sleep(0.05)
        return {}
    monkeypatch.setattr(gather, "GATHERERS", tuple((name, slow_numa if name == "numa" else fn)
                                                   for name, fn in gather.GATHERERS))
    facts = gather.gather_facts(Root(str(tmp_path)), ["numa", "iommu"])
    assert facts["durations_s"]["numa"] >= 0.05 > facts["durations_s"]["iommu"]


def test_a_reader_that_raises_still_has_its_seconds(tmp_path, monkeypatch):
    def broken(root):
        raise RuntimeError("boom")
    monkeypatch.setattr(gather, "GATHERERS", (("numa", broken),))
    facts = gather.gather_facts(Root(str(tmp_path)), ["numa"])
    assert facts["numa"] is None and "numa" in facts["durations_s"]
    assert any("internal error" in e["reason"] for e in facts["errors"])


def host(gather_s):
    part = {"findings": [], "facts_errors": 0}
    if gather_s is not None:
        part["gather_s"] = gather_s
    return part


def test_the_report_keeps_the_seconds_and_drops_garbage():
    doc = build_report({"a": host({"kernel": 0.0123, "numa": 2, "pci": float("nan"), "cpu": -1, "lxc": True,
                                   "nvidia": "3", "health": float("inf")}),
                        "b": host(None), "c": host({"kernel": "slow"})},
                       profile="p", generated=GENERATED, collection_version="1")
    assert doc["hosts"]["a"]["gather_s"] == {"kernel": 0.012, "numa": 2.0}
    assert "gather_s" not in doc["hosts"]["b"] and "gather_s" not in doc["hosts"]["c"]


def test_metrics_export_one_series_per_subsystem():
    doc = build_report({"a": host({"kernel": 0.25, "numa": 1.5}), "b": host(None)},
                       profile="p", generated=GENERATED, collection_version="1")
    got = dict((labels["subsystem"], value) for name, labels, value in parse_metrics(metrics.render_metrics(doc))
               if name == "gpuhost_baseline_gather_duration_seconds" and labels["host"] == "a")
    assert got == {"kernel": pytest.approx(0.25), "numa": pytest.approx(1.5)}
    assert not [1 for name, labels, value in parse_metrics(metrics.render_metrics(doc))
                if name == "gpuhost_baseline_gather_duration_seconds" and labels["host"] == "b"]
    assert all(math.isfinite(v) for n, lb, v in parse_metrics(metrics.render_metrics(doc)))
