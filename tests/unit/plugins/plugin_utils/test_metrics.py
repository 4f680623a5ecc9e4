# -*- coding: utf-8 -*-
"""metrics.prom: names, stable label sets, escaping, per-host output and the fleet-file merge."""

import copy
import json
import os
import re

import pytest
from hypothesis import given, settings, strategies as st
from helpers.prom import parse_families, parse_labels, parse_metrics

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import metrics
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import report as report_doc
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import report_dir, views_machine
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.findings import STATUSES
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import build_report
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base import files
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.files import FileRefused

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "..", "..", "..", "fixtures", "report", "hosts.json")
IMG = '"><img src=x onerror=alert(1)>'
GENERATED = "2025-06-01T12:00:00+00:00"
NOW = 1748779200.0  # GENERATED as Unix time
DAY = 86400


def finding(rule="PCI-001", status="fail", subject=None, severity="high", **extra):
    out = {"id": rule, "title": rule, "area": rule.split("-")[0].lower(), "severity": severity,
           "status": status, "subject": subject, "expected": 4096, "observed": 512, "message": "m",
           "fix": "f", "reboot_required": False}
    out.update(extra)
    return out


def fleet(generated=GENERATED, **hosts):
    return build_report(hosts, profile="p", generated=generated, collection_version="1.2.3")


@pytest.fixture(scope="module")
def report():
    with open(FIXTURE) as handle:
        hosts = json.load(handle)["hosts"]
    return build_report(hosts, profile="auto", generated=GENERATED, collection_version="0.1.0")


def series(text, family):
    return [(labels, value) for name, labels, value in parse_metrics(text) if name == family]


def keys(text, *families):
    return sorted((name, tuple(sorted(labels.items()))) for name, labels, dummy in parse_metrics(text)
                  if not families or name in families)


# --- names, HELP/TYPE, values -------------------------------------------------------------

def test_families_names_and_help(report):
    text = metrics.render_metrics(report)
    families = parse_families(text)
    assert set(families) == {
        "gpuhost_baseline_info", "gpuhost_baseline_report_timestamp_seconds", "gpuhost_baseline_host_info",
        "gpuhost_baseline_host_up", "gpuhost_baseline_host_state", "gpuhost_baseline_last_run_timestamp_seconds",
        "gpuhost_baseline_findings", "gpuhost_baseline_failures", "gpuhost_baseline_facts_errors",
        "gpuhost_baseline_finding_failing", "gpuhost_baseline_numa_free_memory_ratio",
        "gpuhost_baseline_hosts_with_work", "gpuhost_baseline_finding_observed", "gpuhost_baseline_finding_expected"}
    # the renamed families are gone: status as a label, a percent instead of a ratio
    assert "gpuhost_baseline_rule_status" not in families and "gpuhost_baseline_numa_free_percent" not in families
    # a status or a state is a value, never a label (but for the per-status counts and the state set)
    assert [n for n, lb, dummy in parse_metrics(text) if "status" in lb] == ["gpuhost_baseline_findings"] * (
        len(STATUSES) * len(report["hosts"]))
    declared = dict((name, labels) for name, labels, dummy in metrics.FAMILIES)
    for name, family in families.items():
        assert re.match(r"^gpuhost_baseline_[a-z]+(_[a-z]+)*$", name)
        assert family["type"] == "gauge"
        assert len(family["help"]) > 20
        for labels, dummy in family["samples"]:
            assert tuple(sorted(labels)) == tuple(sorted(declared[name])), name
    stamp = families["gpuhost_baseline_report_timestamp_seconds"]["samples"]
    assert stamp == [({}, NOW)]
    runs = dict((lb["host"], v) for lb, v in families["gpuhost_baseline_last_run_timestamp_seconds"]["samples"])
    assert runs == dict((host, NOW) for host in report["hosts"])
    up = dict((lb["host"], v) for lb, v in families["gpuhost_baseline_host_up"]["samples"])
    assert up["gpu-down-04"] == 0 and up["gpu-incident-01"] == 1
    states = dict(((lb["host"], lb["state"]), v) for lb, v in families["gpuhost_baseline_host_state"]["samples"])
    assert states[("gpu-down-04", "unreachable")] == 1 and states[("gpu-down-04", "audited")] == 0
    for host in report["hosts"]:
        assert sum(states[(host, s)] for s in ("audited", "unreachable", "failed")) == 1


def test_finding_failing_is_one_series_per_rule_and_subject(report):
    text = metrics.render_metrics(report)
    failing = series(text, "gpuhost_baseline_finding_failing")
    assert len(failing) == sum(len(h["findings"]) for h in report["hosts"].values())
    pci = [v for lb, v in failing if lb["host"] == "gpu-incident-01" and lb["rule"] == "PCI-001"]
    assert pci == [1.0] * 8
    for host, data in report["hosts"].items():
        fails = sum(v for lb, v in failing if lb["host"] == host)
        assert fails == data["summary"]["fail"]
        counts = dict((lb["status"], v) for lb, v in series(text, "gpuhost_baseline_findings") if lb["host"] == host)
        assert counts == dict((s, data["summary"][s]) for s in STATUSES)


def test_numa_free_memory_is_a_ratio(report):
    ratios = series(metrics.render_metrics(report), "gpuhost_baseline_numa_free_memory_ratio")
    assert ratios and all(0 <= v <= 1 for lb, v in ratios)
    node = report["hosts"]["gpu-incident-01"]["numa"][0]
    got = [v for lb, v in ratios if lb["host"] == "gpu-incident-01" and lb["node"] == str(node["id"])]
    assert got == [pytest.approx(node["mem_free_kb"] / node["mem_total_kb"], abs=1e-6)]


def test_numa_ratio_sources_and_garbage():
    rep = fleet(a={"findings": [], "numa": [
        {"id": 0, "mem_total_kb": 1000, "mem_free_kb": 250},
        {"id": 1, "free_pct": 40.0},
        {"id": 2, "mem_total_kb": 100, "mem_free_kb": 500},  # free above total: not a ratio
        {"id": 3},
        {"mem_total_kb": 10, "mem_free_kb": 10},  # no id: its place
    ]})
    got = dict((lb["node"], v) for lb, v in series(metrics.render_metrics(rep), "gpuhost_baseline_numa_free_memory_ratio"))
    assert got == {"0": 0.25, "1": 0.4, "4": 1.0}


# --- stable label sets -------------------------------------------------------------------

@pytest.mark.parametrize("status", [s for s in STATUSES if s != "fail"])
def test_label_sets_do_not_change_with_the_status(status):
    failing = fleet(a={"findings": [finding(subject="0000:41:00.0"), finding("CPU-001", severity="medium")]})
    changed = fleet(a={"findings": [finding(subject="0000:41:00.0", status=status), finding("CPU-001", severity="medium")]})
    before, after = metrics.render_metrics(failing), metrics.render_metrics(changed)
    assert keys(before) == keys(after)
    value = dict((lb["rule"], v) for lb, v in series(after, "gpuhost_baseline_finding_failing"))
    assert value == {"PCI-001": 0, "CPU-001": 1}
    assert dict((lb["rule"], v) for lb, v in series(before, "gpuhost_baseline_finding_failing")) == {"PCI-001": 1, "CPU-001": 1}


def test_host_state_series_do_not_change_with_the_state():
    audited = metrics.render_metrics(fleet(a={"findings": [finding()]}))
    for state in ("unreachable", "failed"):
        down = metrics.render_metrics(fleet(a={"state": state, "message": "ssh: no route"}))
        for family in ("gpuhost_baseline_host_up", "gpuhost_baseline_host_state", "gpuhost_baseline_host_info",
                       "gpuhost_baseline_findings", "gpuhost_baseline_failures", "gpuhost_baseline_facts_errors",
                       "gpuhost_baseline_last_run_timestamp_seconds"):
            assert keys(audited, family) == keys(down, family), family
        assert dict((lb["state"], v) for lb, v in series(down, "gpuhost_baseline_host_state")) == {
            "audited": 0, "unreachable": 0, "failed": 0, state: 1}
        assert series(down, "gpuhost_baseline_host_up") == [({"host": "a", "origin": "controller", "cluster": ""}, 0)]
        assert series(down, "gpuhost_baseline_finding_failing") == []


def test_duplicate_subjects_are_numbered():
    rep = fleet(a={"findings": [finding(subject="x"), finding(subject="x"), finding(subject="x", status="pass")]})
    subjects = [lb["subject"] for lb, dummy in series(metrics.render_metrics(rep), "gpuhost_baseline_finding_failing")]
    assert subjects == ["x", "x#2", "x#3"]


# --- timestamps ----------------------------------------------------------------------------

def test_unparsable_generation_time_gives_no_timestamps():
    text = metrics.render_metrics(fleet(generated="yesterday", a={"findings": [finding()]}))
    names = set(n for n, dummy, dummy2 in parse_metrics(text))
    assert "gpuhost_baseline_report_timestamp_seconds" not in names
    assert "gpuhost_baseline_last_run_timestamp_seconds" not in names
    zulu = metrics.render_metrics(fleet(generated="2025-06-01T12:00:00Z"))
    assert "gpuhost_baseline_report_timestamp_seconds 1748779200.0\n" in zulu


def test_run_duration_only_when_the_report_knows_it():
    rep = fleet(a={"findings": []}, b={"findings": []})
    assert "run_duration" not in metrics.render_metrics(rep)
    rep["started"] = "2025-06-01T11:58:30+00:00"
    rep["hosts"]["b"]["duration_seconds"] = 12.5
    got = dict((lb["host"], v) for lb, v in series(metrics.render_metrics(rep), "gpuhost_baseline_run_duration_seconds"))
    assert got == {"a": 90.0, "b": 12.5}
    rep["started"] = "2025-06-01T13:00:00+00:00"  # after generation: not a duration
    rep["hosts"]["b"]["duration_seconds"] = True  # not a number
    assert "run_duration" not in metrics.render_metrics(rep)


@pytest.mark.parametrize("value, expected", [
    ("2025-06-01T10:00:00+00:00", NOW - 7200),
    ("2025-06-01T10:00:00Z", NOW - 7200),
    (1748772000, NOW - 7200),
    ("last tuesday", None),
    (None, None),
])
def test_last_change_from_the_history(value, expected):
    rep = fleet(a={"findings": []}, b={"findings": []})
    assert "last_change" not in metrics.render_metrics(rep)  # no history in the report: nothing
    rep["hosts"]["a"]["changes"] = {"last_change": value, "new_fails": []}
    rep["hosts"]["b"]["changes"] = "garbage"
    got = series(metrics.render_metrics(rep), "gpuhost_baseline_last_change_timestamp_seconds")
    assert got == ([] if expected is None else [({"host": "a", "origin": "controller", "cluster": ""}, expected)])


# --- escaping --------------------------------------------------------------------------------

HOSTILE_NAMES = [
    'back\\slash', 'quo"te', 'new\nline', '"} 1\ngpuhost_baseline_host_up{host="evil"} 1', 'cr\rtab\t',
    u'nul\x00bell\x07', u'sep\u2028para', u'\u00e9\u4e2d', 'trailing\\', '', u'lone\ud800surrogate',
]


def hostile_report():
    hosts = {}
    for index, name in enumerate(HOSTILE_NAMES):
        hosts[name] = {"profile": name + "-profile", "findings": [
            finding(subject=name, severity="critical"), finding("NUMA-002", subject=IMG, status="pass", area=name)],
            "numa": [{"id": name, "mem_total_kb": 100, "mem_free_kb": index}]}
    return build_report(hosts, profile="p", generated=GENERATED, collection_version='1.0"\n')


def test_hostile_values_round_trip():
    rep = hostile_report()
    text = metrics.render_metrics(rep)
    families = parse_families(text)  # one sample per line: no value broke out of its quotes
    clean = dict((name.replace(u"\ud800", u"\ufffd"), name) for name in HOSTILE_NAMES)
    hosts = set(lb["host"] for lb, dummy in families["gpuhost_baseline_host_up"]["samples"])
    assert hosts == set(clean)
    assert "evil" not in hosts
    subjects = set(lb["subject"] for lb, dummy in families["gpuhost_baseline_finding_failing"]["samples"])
    assert subjects == set(clean) | {IMG}
    versions = set(lb["version"] for lb, dummy in families["gpuhost_baseline_host_info"]["samples"])
    assert versions == {'1.0"\n'}
    text.encode("utf-8")  # no lone surrogate left
    assert len(text.split("\n")) - 1 == sum(len(f["samples"]) + 2 for f in families.values())


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_prom_escape_round_trip(text):
    escaped = metrics.prom_escape(text)
    assert "\n" not in escaped
    assert parse_labels('{a="%s"}' % escaped) == {"a": text}


def test_label_text_of_non_strings():
    assert [metrics.label_text(v) for v in (None, True, 3, 0.5, "x", [1])] == ["", "true", "3", "0.5", "x", "[1]"]
    assert metrics.prom_escape(u"a\ud800") == u"a\ufffd"


# --- one host ----------------------------------------------------------------------------------

def test_render_host_metrics_is_the_hosts_part(report):
    fleet_keys = keys(metrics.render_metrics(report))
    for host in report["hosts"]:
        text = metrics.render_host_metrics(report, host, origin=metrics.ORIGIN_CONTROLLER)
        families = parse_families(text)
        assert "gpuhost_baseline_info" not in families and "gpuhost_baseline_report_timestamp_seconds" not in families
        assert set(lb["host"] for f in families.values() for lb, dummy in f["samples"]) == {host}
        assert keys(text) == [k for k in fleet_keys if ("host", host) in k[1]]


def test_every_host_series_names_its_origin(report):
    # the fleet file and a host's own textfile may lie in one textfile directory (issue 22): every
    # family of a host has origin second, the fleet's series are the controller's, a host's its own
    for name, labels, dummy in metrics.FAMILIES:
        assert labels[:2] == ("host", "origin") or "host" not in labels, name
    assert metrics.ORIGINS == ("controller", "self_audit")
    fleet_text = metrics.render_metrics(report)
    assert set(lb.get("origin") for n, lb, v in parse_metrics(fleet_text) if "host" in lb) == {"controller"}
    for host in report["hosts"]:
        own = metrics.render_host_metrics(report, host)
        assert set(lb["origin"] for n, lb, v in parse_metrics(own)) == {"self_audit"}
        # the same host in both files, yet no series twice (node_exporter would log and drop one)
        assert set(keys(own)) & set(keys(fleet_text)) == set()
        assert len(set(keys(own))) == len(keys(own))
    with pytest.raises(metrics.MetricsError) as err:
        metrics.render_host_metrics(report, "gpu-incident-01", origin="elsewhere")
    assert "elsewhere" in str(err.value) and "self_audit" in str(err.value)


def test_render_host_metrics_unknown_host(report):
    with pytest.raises(metrics.MetricsError) as err:
        metrics.render_host_metrics(report, "nope")
    assert "nope" in str(err.value) and "gpu-incident-01" in str(err.value)


# --- the fleet file: merge on --limit ---------------------------------------------------------------

def three_hosts(generated=GENERATED):
    return fleet(generated=generated,
                 a={"findings": [finding(subject="0000:41:00.0"), finding("CPU-001", status="pass")]},
                 b={"findings": [finding("NUMA-001", severity="critical")], "numa": [{"id": 0, "free_pct": 50}]},
                 c={"state": "unreachable"})


def test_merge_keeps_the_hosts_a_limit_run_skipped():
    old = metrics.render_metrics(three_hosts(generated="2025-05-31T12:00:00+00:00"))
    limited = fleet(a={"findings": [finding(subject="0000:41:00.0", status="pass")]})
    merged = metrics.merge_metrics(limited, old)
    families = parse_families(merged)
    assert set(lb["host"] for lb, dummy in families["gpuhost_baseline_host_up"]["samples"]) == {"a", "b", "c"}
    # the limited host is this run's only: its CPU-001 finding is gone, PCI-001 passes now
    assert [(lb["rule"], v) for lb, v in families["gpuhost_baseline_finding_failing"]["samples"] if lb["host"] == "a"] == [
        ("PCI-001", 0)]
    # the others as they were, with their own last run
    runs = dict((lb["host"], v) for lb, v in families["gpuhost_baseline_last_run_timestamp_seconds"]["samples"])
    assert runs == {"a": NOW, "b": NOW - DAY, "c": NOW - DAY}
    for host in ("b", "c"):
        mine = [k for k in keys(old) if ("host", host) in k[1]]
        assert mine and [k for k in keys(merged) if ("host", host) in k[1]] == mine
    # hosts in name order within each family
    hosts = [lb["host"] for lb, dummy in families["gpuhost_baseline_host_state"]["samples"]]
    assert hosts == sorted(hosts)
    # the run's own series are this run's
    assert series(merged, "gpuhost_baseline_report_timestamp_seconds") == [({}, NOW)]
    assert series(merged, "gpuhost_baseline_info") == [({"version": "1.2.3", "profile": "p"}, 1)]
    # writing the same run again changes nothing
    assert metrics.merge_metrics(limited, merged) == merged


def test_merge_drops_hosts_past_the_staleness_bound():
    old = metrics.render_metrics(three_hosts(generated="2025-05-25T12:00:00+00:00"))  # exactly 7 days
    limited = fleet(a={"findings": []})
    assert metrics.KEEP_SECONDS == 7 * DAY
    assert set(metrics.kept_hosts(limited, old)) == {"b", "c"}
    assert set(lb["host"] for lb, dummy in series(metrics.merge_metrics(limited, old), "gpuhost_baseline_host_up")) == {
        "a", "b", "c"}
    older = metrics.render_metrics(three_hosts(generated="2025-05-25T11:59:59+00:00"))
    merged = metrics.merge_metrics(limited, older)
    assert set(lb["host"] for lb, dummy in series(merged, "gpuhost_baseline_host_up")) == {"a"}
    assert metrics.kept_hosts(limited, old, keep_seconds=DAY) == {}
    assert set(metrics.kept_hosts(limited, older, now=NOW - DAY)) == {"b", "c"}


def test_merge_drops_what_it_cannot_date_or_place():
    limited = fleet(a={"findings": []})
    stamp = repr(NOW - 60)
    existing = "\n".join([
        "# HELP whatever",
        'gpuhost_baseline_last_run_timestamp_seconds{host="b"} ' + stamp,
        'gpuhost_baseline_host_up{host="b"} 1',
        'gpuhost_baseline_host_up{host="b"} 1',  # the same series twice: once
        'gpuhost_baseline_rule_status{host="b",rule="X",subject="",severity="high",area="x",status="fail"} 0',  # renamed
        'gpuhost_baseline_host_info{host="b",state="audited",profile="p"} 1',  # reshaped
        'gpuhost_baseline_host_up{host="b\\q"} 1',  # unknown escape
        'gpuhost_baseline_facts_errors{host="b"} 3 1748779200000',  # a timestamp: not ours
        'gpuhost_baseline_facts_errors{host="b"} 1_0',  # not a Prometheus value
        'gpuhost_baseline_numa_free_memory_ratio{host="b",node="0"} 0.5',
        'gpuhost_baseline_facts_errors{host="b",origin="controller"} 2',  # this version's: as written
        'gpuhost_baseline_facts_errors{host="b",origin="controller",x="y"} 2',  # other labels
        'gpuhost_baseline_host_up{host="nodate"} 1',  # no last run: cannot be dated
        'gpuhost_baseline_info{version="0.0.1",profile="old"} 1',  # the run's series: replaced
        'garbage line',
        '\x00\xff binary',
        "",
    ])
    merged = metrics.merge_metrics(limited, existing)
    parse_families(merged)
    kept = [(n, lb, v) for n, lb, v in parse_metrics(merged) if lb.get("host") == "b"]
    # a line of a file written before the origin label is the controller's, one written before the cluster
    # label has none (""): written again with both
    old = {"host": "b", "origin": "controller", "cluster": ""}
    assert kept == [("gpuhost_baseline_host_up", old, 1.0),
                    ("gpuhost_baseline_last_run_timestamp_seconds", old, NOW - 60),
                    ("gpuhost_baseline_facts_errors", old, 2.0),
                    ("gpuhost_baseline_numa_free_memory_ratio", dict(old, node="0"), 0.5)]
    assert "nodate" not in merged and "0.0.1" not in merged
    assert metrics.merge_metrics(limited, None) == metrics.render_metrics(limited)
    assert metrics.merge_metrics(limited, "") == metrics.render_metrics(limited)


def test_merge_keeps_hostile_hosts_intact():
    old = metrics.render_metrics(hostile_report())
    limited = fleet(generated="2025-06-02T12:00:00+00:00", a={"findings": []})
    merged = metrics.merge_metrics(limited, old)
    families = parse_families(merged)
    hosts = set(lb["host"] for lb, dummy in families["gpuhost_baseline_host_up"]["samples"])
    assert hosts == set(name.replace(u"\ud800", u"\ufffd") for name in HOSTILE_NAMES) | {"a"}
    assert [k for k in keys(merged) if ("host", "a") not in k[1] and k[0] not in metrics.RUN_FAMILIES] == [
        k for k in keys(old) if k[0] not in metrics.RUN_FAMILIES]


# --- written by write_reports -------------------------------------------------------------------

def test_write_reports_merges_the_fleet_file(tmp_path):
    report_dir.write_reports(three_hosts(generated="2025-05-31T12:00:00+00:00"), str(tmp_path), ["prom"])
    limited = fleet(a={"findings": []})
    paths = report_dir.write_reports(limited, str(tmp_path), ["prom"])
    with open(paths["prom"], encoding="utf-8") as handle:
        text = handle.read()
    assert set(lb["host"] for lb, dummy in series(text, "gpuhost_baseline_host_up")) == {"a", "b", "c"}
    with open(paths["json"]) as handle:
        assert set(json.load(handle)["hosts"]) == {"a"}  # report.json is this run's
    # the view rendered from report.json alone is this run's too
    assert views_machine.render_prometheus(limited) == metrics.render_metrics(limited)


def test_write_reports_over_a_damaged_file(tmp_path):
    (tmp_path / "metrics.prom").write_bytes(b"\xff\xfe\x00garbage {{{\n" * 10)
    rep = three_hosts()
    paths = report_dir.write_reports(rep, str(tmp_path), ["prom"])
    with open(paths["prom"], encoding="utf-8") as handle:
        assert handle.read() == metrics.render_metrics(rep)


def test_read_existing_missing_and_directory(tmp_path):
    assert metrics.read_existing(str(tmp_path / "none.prom")) == ""
    assert metrics.read_existing(str(tmp_path)) == ""


def test_fleet_metrics_reads_the_file(tmp_path):
    path = tmp_path / "metrics.prom"
    path.write_text(metrics.render_metrics(three_hosts(generated="2025-05-31T12:00:00+00:00")), encoding="utf-8")
    limited = fleet(a={"findings": []})
    assert metrics.fleet_metrics(limited, str(path)) == metrics.merge_metrics(limited, path.read_text(encoding="utf-8"))
    assert copy.deepcopy(limited) == limited


def test_the_old_file_is_held_only_when_a_host_of_it_is_kept(tmp_path):
    """existing_to_merge (the report writer's read): the old file's text when a --limit run keeps a
    host of it, "" when the run covers every host of it (or every kept host is too old), refused
    as read_existing refuses; the merged file is what merge_metrics makes of the whole text."""
    path = tmp_path / "metrics.prom"
    old = metrics.render_metrics(three_hosts(generated="2025-05-31T12:00:00+00:00"))
    path.write_bytes(old.encode("utf-8") + b"\xff\xfe garbage\n")
    limited = fleet(a={"findings": []})
    text = metrics.existing_to_merge(limited, str(path))
    assert text == path.read_bytes().decode("utf-8", "replace") and text != old
    assert metrics.merge_metrics(limited, text) == metrics.merge_metrics(limited, path.read_text(errors="replace"))
    everyone = three_hosts()
    assert metrics.existing_to_merge(everyone, str(path)) == ""
    assert metrics.merge_metrics(everyone, "") == metrics.merge_metrics(everyone, text)
    assert metrics.existing_to_merge(limited, str(path), keep_seconds=60) == ""  # a day old: nothing kept
    assert metrics.existing_to_merge(limited, str(tmp_path / "none.prom")) == ""
    assert metrics.existing_to_merge(limited, str(tmp_path)) == ""
    (tmp_path / "link.prom").symlink_to(path)
    with pytest.raises(FileRefused, match="symbolic link"):
        metrics.existing_to_merge(limited, str(tmp_path / "link.prom"))
    with pytest.raises(FileRefused, match="larger than"):
        metrics.existing_to_merge(limited, str(path), cap=100)


def test_the_last_run_lines_are_read_a_piece_at_a_time(tmp_path):
    """Whatever the piece size, the last-run lines read a piece at a time are those of the whole
    text (a line cut between two pieces is read whole), and the kept hosts are the same."""
    path = tmp_path / "metrics.prom"
    old = metrics.render_metrics(three_hosts(generated="2025-05-31T12:00:00+00:00"))
    path.write_bytes(b"\xff\n" + old.encode("utf-8") + b"gpuhost_baseline_last_run_timestamp_seconds{host=\"z\"} 1")
    whole = re.findall(r"^gpuhost_baseline_last_run_timestamp_seconds\{.*$", path.read_text(errors="replace"), re.M)
    assert len(whole) == 4
    limited = fleet(a={"findings": []})
    for size in (1, 7, 64, 1 << 20):
        read = metrics._last_run_lines(str(path), metrics.EXISTING_CAP, size)  # pylint: disable=protected-access
        assert read.split("\n") == whole
        assert metrics.kept_hosts(limited, read) == metrics.kept_hosts(limited, path.read_text(errors="replace"))
    assert list(files.iter_bytes(str(path), size=5))[0] == path.read_bytes()[:5]
    assert b"".join(files.iter_bytes(str(path), size=5)) == path.read_bytes()
    with pytest.raises(FileRefused, match="larger than 10 bytes"):
        list(files.iter_bytes(str(path), cap=10, size=4))
    os.mkfifo(str(tmp_path / "fifo.prom"))
    with pytest.raises(FileRefused, match="FIFO"):
        list(files.iter_bytes(str(tmp_path / "fifo.prom")))


def test_merged_families_stay_contiguous_in_host_order():
    old = metrics.render_metrics(three_hosts(generated="2025-05-31T12:00:00+00:00"))
    merged = metrics.merge_metrics(fleet(b={"findings": [finding("NUMA-001", status="pass")]}), old)
    families = parse_families(merged)  # one block per family, HELP and TYPE once
    assert [lb["host"] for lb, dummy in families["gpuhost_baseline_host_up"]["samples"]] == ["a", "b", "c"]
    assert [lb["host"] for lb, dummy in families["gpuhost_baseline_finding_failing"]["samples"]] == ["a", "a", "b"]
    assert list(families) == [n for n, dummy, dummy2 in metrics.FAMILIES if n in families]


def test_a_stored_report_json_renders_the_same(report):
    stored = json.loads(json.dumps(report_doc.compact_document(report)))
    first = stored["hosts"]["gpu-incident-01"]["findings"][0]
    assert "title" not in first and "title" in stored["rules"][first["id"]]  # the stored layout (schema 3)
    assert metrics.render_metrics(stored) == metrics.render_metrics(report)
    assert metrics.render_host_metrics(stored, "gpu-incident-01") == metrics.render_host_metrics(report, "gpu-incident-01")
    assert metrics.merge_metrics(stored, "") == metrics.render_metrics(report)


def test_hosts_with_work_counts_hosts_per_kind_at_their_worst_severity():
    # issue 37 item 5: hosts, not findings; a host with two faults and a drift counts once per kind
    doc = report_doc.build_report({
        "a": {"findings": [
            {"id": "HEALTH-001", "area": "health", "severity": "critical", "status": "fail", "subject": "gpu0"},
            {"id": "HEALTH-002", "area": "health", "severity": "high", "status": "fail", "subject": "gpu1"},
            {"id": "CPU-001", "area": "cpu", "severity": "high", "status": "fail", "subject": None}]},
        "b": {"findings": [
            {"id": "CPU-001", "area": "cpu", "severity": "high", "status": "fail", "subject": None},
            {"id": "HEALTH-001", "area": "health", "severity": "critical", "status": "pass", "subject": "gpu0"}]},
        "c": {"findings": [{"id": "KERNEL-001", "area": "kernel", "severity": "medium", "status": "unknown"}]},
    })
    got = dict(((lb["kind"], lb["severity"]), value) for name, lb, value in parse_metrics(metrics.render_metrics(doc))
               if name == "gpuhost_baseline_hosts_with_work")
    assert got[("fault", "critical")] == 1 and got[("fault", "high")] == 0
    assert got[("drift", "high")] == 2 and got[("drift", "medium")] == 0
    assert sum(v for (kind, dummy), v in got.items() if kind == "fault") == 1
    failing = [lb for name, lb, value in parse_metrics(metrics.render_metrics(doc))
               if name == "gpuhost_baseline_finding_failing"]
    assert set((lb["rule"], lb["kind"]) for lb in failing) == {
        ("HEALTH-001", "fault"), ("HEALTH-002", "fault"), ("CPU-001", "drift"), ("KERNEL-001", "drift")}


def test_dcgm_bus_id_is_nvmls_form():
    assert metrics.dcgm_bus_id("0000:c3:00.0") == "00000000:C3:00.0"
    assert metrics.dcgm_bus_id("0001:0a:1f.7") == "00000001:0A:1F.7"
    assert metrics.dcgm_bus_id("c3:00.0") == "C3:00.0"  # not a full address: left as it is


def test_gpu_info_and_numeric_values_only():
    doc = report_doc.build_report({"g": {"hostname": "node-7", "gpus": [
        {"index": 3, "uuid": "GPU-1", "bus_id": "0000:c3:00.0", "name": "H100"}, {"index": 4, "uuid": "GPU-2"}],
        "findings": [
            {"id": "PCI-001", "area": "pcie", "severity": "high", "status": "fail", "subject": "0000:c3:00.0",
             "observed": 512, "expected": 4096},
            {"id": "CPU-001", "area": "cpu", "severity": "high", "status": "fail", "observed": {"acpi-cpufreq": 8},
             "expected": ["amd-pstate"]},
            {"id": "NUMA-001", "area": "numa", "severity": "high", "status": "pass", "observed": True, "expected": False}]}})
    samples = parse_metrics(metrics.render_metrics(doc))
    (info,) = [lb for name, lb, value in samples if name == "gpuhost_baseline_gpu_info"]  # the GPU without a bus id left out
    assert info == {"host": "g", "origin": "controller", "subject": "0000:c3:00.0", "gpu": "3", "UUID": "GPU-1",
                    "pci_bus_id": "00000000:C3:00.0", "Hostname": "node-7", "hostname": "node-7", "cluster": ""}
    values = dict(((name, lb["rule"]), value) for name, lb, value in samples if name.startswith("gpuhost_baseline_finding_")
                  and name != "gpuhost_baseline_finding_failing")
    assert values == {("gpuhost_baseline_finding_observed", "PCI-001"): 512,
                      ("gpuhost_baseline_finding_expected", "PCI-001"): 4096}  # no mapping, list or bool
