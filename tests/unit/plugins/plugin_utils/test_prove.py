"""What the fixes delivered (issue 39 item 1, remediate.yml with gpuhost_prove): host_measure's runs before and
after the fixes become figures (judge/prove.py), each with its change and whether the change exceeds the runs'
own spread; the host's report keeps them (report.json ``prove``), the Markdown and HTML host pages show a table,
metrics.prom exports each figure per phase and its noise, the history keeps them, the console says them in one
escaped line. The runs have host_measure's result shape (its RETURN samples; the VM test in molecule/remediate
reads a real guest's)."""
import copy
import json

from helpers.prom import parse_metrics

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge import prove
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import console, history, metrics, views
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import build_report

GENERATED = "2026-12-07T12:00:00+00:00"


def cpu_run(*mhz):
    return {"status": "ok", "reason": None, "source": "scaling_cur_freq", "sample": "all online CPUs", "online": len(mhz),
            "duration_s": 3.01, "samples": 15,
            "cpus": dict((str(n), {"observed_khz": int(value * 1000), "rated_khz": 3700000, "rated_source": "cpuinfo_max_freq",
                                   "fraction": round(value * 1000 / 3700000.0, 3), "reason": None})
                         for n, value in enumerate(mhz))}


def mem_run(node0, node1, cross=None):
    def node(mbs):
        return {"status": "ok", "reason": None, "bandwidth_mbs": mbs, "cpus": "0-1", "seconds": 6.3,
                "command": "/usr/bin/stress-ng --stream 2 -t 6s --metrics-brief", "detail": {"tool": "stress-ng"}}
    return {"status": "ok", "reason": None, "tool": "stress-ng", "bound": True, "unit": "MB/s",
            "nodes_without_cpus": [], "nodes": {"0": node(node0), "1": node(node1)},
            "cross": {"0->1": dict(node(cross), cpu_node="0", mem_node="1")} if cross else {}}


def run(cpu, mem=None, **extra):
    out = {"cpu_freq": cpu_run(*cpu)}
    if mem:
        out["mem_bw"] = mem_run(*mem)
    out.update(extra)
    return out


def registered(*runs):
    """A registered host_measure result: the last run's keys, ``runs`` when there are several."""
    result = dict(copy.deepcopy(runs[-1]), changed=False, plan={}, invocation={"module_args": {}})
    if len(runs) > 1:
        result["runs"] = list(runs)
    return result


CAPPED = registered(run([1500, 1510], [61000, 60000]), run([1505, 1500], [60500, 61000]))
FIXED = registered(run([3400, 3390], [118000, 60200]), run([3395, 3400], [117500, 60400]))


def by_key(summary):
    return dict((entry["key"], entry) for entry in summary["figures"])


def test_a_capped_clock_fixed_is_better_beyond_its_noise_and_an_unmoved_node_within_it():
    summary = prove.prove_summary({"before": CAPPED, "after": FIXED}, ["NUMA-001", "CPU-001", "CPU-001"])
    assert summary["fixes"] == ["CPU-001", "NUMA-001"] and summary["repeats"] == {"before": 2, "after": 2}
    assert summary["reason"] is None and summary["left_out"] == 0
    figures = by_key(summary)
    assert list(figures) == ["cpu_freq/lowest", "cpu_freq/median", "mem_bw/0", "mem_bw/1"]
    lowest = figures["cpu_freq/lowest"]
    assert (lowest["before"], lowest["after"], lowest["unit"], lowest["rule"]) == (1500.0, 3392.5, "MHz", "VAL-001")
    assert lowest["noise"] == 5.0 and lowest["verdict"] == "better" and lowest["change_pct"] == 126.167
    node0, node1 = figures["mem_bw/0"], figures["mem_bw/1"]
    assert (node0["before"], node0["after"], node0["verdict"], node0["rule"]) == (60.75, 117.75, "better", "VAL-003")
    # node 1 moved 0.2 GB/s, less than the 1 GB/s its runs spread before the fixes: said as within noise
    assert node1["verdict"] == "within noise" and node1["noise"] == 1.0 and node1["change"] == -0.2


def test_worse_unchanged_and_lower_is_better_workloads():
    def workload(value, lower=False):
        return {"workloads": [{"name": "ttft", "status": "ok", "value": value, "unit": "ms", "lower_is_better": lower},
                              {"name": "hung", "status": "unknown", "value": None, "reason": "killed after 5 s"}]}
    assert prove.compare_figure([3000.0], [1500.0], True)["verdict"] == "worse"
    assert prove.compare_figure([10.0, 10.0], [10.0, 10.0], True)["verdict"] == "within noise"
    assert prove.compare_figure([10.0], [10.0], True)["verdict"] == "unchanged"
    summary = prove.prove_summary({"before": registered(workload(80.0, True)), "after": registered(workload(40.0, True))})
    (ttft,) = summary["figures"]  # the unknown workload gives no figure
    assert (ttft["key"], ttft["rule"], ttft["higher_is_better"], ttft["verdict"]) == \
        ("workload/ttft", "VAL-013", False, "better")
    assert ttft["noise"] is None and summary["repeats"] == {"before": 1, "after": 1}


def test_gpu_nccl_and_cross_node_figures():
    gpu = {"status": "ok", "gpus": {"1": {"h2d_gbs": 50.1, "d2h_gbs": None}, "0": {"h2d_gbs": 55.6, "d2h_gbs": 55.2}},
           "pairs": [{"src": "0", "dst": "1", "gbs": 389.1}, {"src": "1", "dst": "0", "gbs": 120.5}]}
    nccl = {"status": "ok", "avg_busbw_gbs": 112.4}
    one = run([3000], [9000, 9000, 4000], gpu_bw=gpu, nccl=nccl, dcgm_diag={"status": "ok", "overall": "pass"})
    keys = [key for key, label, unit, rule, higher, value in prove.run_figures(one)]
    assert keys == ["cpu_freq/lowest", "cpu_freq/median", "mem_bw/0", "mem_bw/1", "mem_bw/0->1", "gpu_bw/0/h2d",
                    "gpu_bw/0/d2h", "gpu_bw/1/h2d", "gpu_bw/pairs/lowest", "nccl/avg_busbw"]
    labels = dict((key, (label, rule, value)) for key, label, unit, rule, higher, value in prove.run_figures(one))
    assert labels["mem_bw/0->1"] == ("node 0 CPUs to node 1 memory", "VAL-004", 4.0)
    assert labels["gpu_bw/pairs/lowest"] == ("lowest GPU to GPU copy", "VAL-006", 120.5)
    assert labels["nccl/avg_busbw"][1:] == ("VAL-009", 112.4)


def test_a_failed_or_missing_measurement_says_why_and_a_note_replaces_the_figures():
    failed = {"failed": True, "msg": "Timeout (1785s) waiting for privilege escalation prompt"}
    summary = prove.prove_summary({"before": CAPPED, "after": failed}, ["CPU-001"])
    assert summary["reason"] == "after the fixes: host_measure did not complete: Timeout (1785s) waiting for " \
                                "privilege escalation prompt"
    assert all(entry["verdict"] == "unknown" and entry["after"] is None for entry in summary["figures"])
    assert summary["repeats"] == {"before": 2, "after": 0}
    noted = prove.prove_summary({"note": "not measured: gpuhost_root /srv/snap is a snapshot"}, ["NUMA-001"])
    assert noted["figures"] == [] and noted["reason"].startswith("not measured: gpuhost_root")
    assert prove.prove_summary(None) is None
    # garbage in the measurement gives no figure, never an exception
    garbage = {"cpu_freq": {"status": "ok", "cpus": {"0": {"observed_khz": "fast"}, "1": None}}, "mem_bw": "x",
               "workloads": "y"}
    assert prove.prove_summary({"before": garbage, "after": {"skipped": True}})["figures"] == []


def test_more_figures_than_the_limit_are_counted_not_kept():
    many = {"workloads": [{"name": "w%d" % n, "status": "ok", "value": n} for n in range(prove.MAX_FIGURES + 5)]}
    summary = prove.prove_summary({"before": many, "after": many})
    assert len(summary["figures"]) == prove.MAX_FIGURES and summary["left_out"] == 5


def document(summary):
    part = {"findings": [{"id": "VAL-001", "status": "pass", "severity": "high", "subject": "cpu0"}],
            "before": {"findings": [{"id": "VAL-001", "status": "fail", "severity": "high", "subject": "cpu0"}]},
            "prove": summary, "facts_errors": 0}
    return build_report({"gpu01": part}, profile="p", generated=GENERATED, collection_version="1")


def test_the_report_pages_metrics_and_history_carry_the_figures(tmp_path):
    summary = prove.prove_summary({"before": CAPPED, "after": FIXED}, ["CPU-001"])
    doc = document(json.loads(json.dumps(summary)))
    kept = doc["hosts"]["gpu01"]["prove"]
    assert kept["fixes"] == ["CPU-001"] and kept["figures"][0]["before"] == 1500.0
    markdown = views.render_markdown(doc)
    assert "### What the fixes delivered" in markdown and "Fixes that ran: CPU-001." in markdown
    assert "| lowest CPU clock under load (MHz) | VAL-001 | 1,500 | 3,392 | +1,892 (+126.2 %) | better |" in markdown
    assert "| node 1 memory bandwidth (GB/s) | VAL-003 | 60.5 | 60.3 | -0.2 (-0.3 %) | within noise (1 GB/s) |" \
        in markdown
    page = views.render_html(doc)
    assert "what the fixes delivered" in page and "<td>within noise (1 GB/s)</td>" in page
    series = [(name, labels, value) for name, labels, value in parse_metrics(metrics.render_metrics(doc))
              if name.startswith("gpuhost_baseline_prove_")]
    assert ("gpuhost_baseline_prove_figure", {"host": "gpu01", "origin": "controller", "figure": "cpu_freq/lowest",
                                              "unit": "MHz", "phase": "after", "cluster": ""}, 3392.5) in series
    assert ("gpuhost_baseline_prove_noise", {"host": "gpu01", "origin": "controller", "figure": "mem_bw/1",
                                             "unit": "GB/s", "cluster": ""}, 1.0) in series
    warnings = history.record_report(doc, {}, str(tmp_path))
    assert warnings == []
    (record,) = history.read_history(history.history_path(str(tmp_path), "gpu01"))[0]
    assert record["prove"]["fixes"] == ["CPU-001"]
    assert record["prove"]["figures"][0] == ["cpu_freq/lowest", "MHz", 1500.0, 3392.5, 5.0, "better"]


def test_the_report_drops_garbage_and_the_views_say_a_reason_alone():
    doc = document({"fixes": ["CPU-001", 3], "repeats": {"before": -1, "after": "2"}, "left_out": True,
                    "figures": [{"key": "k", "before": float("nan"), "after": 2, "verdict": "great"}, "x", {"label": "no key"}],
                    "reason": "after the fixes: host_measure did not complete: unreachable"})
    kept = doc["hosts"]["gpu01"]["prove"]
    assert kept["fixes"] == ["CPU-001"] and kept["repeats"] == {"before": 0, "after": 0} and kept["left_out"] == 0
    (figure,) = kept["figures"]
    assert figure["before"] is None and figure["after"] == 2 and figure["verdict"] == "unknown" and figure["label"] == "k"
    assert "host_measure did not complete: unreachable" in views.render_markdown(doc)
    noted = document({"fixes": [], "figures": [], "reason": "not measured: --check runs no measurement"})
    assert "not measured: --check runs no measurement" in views.render_markdown(noted)
    assert "| figure |" not in views.render_markdown(noted)


def test_the_console_line_says_the_fixes_and_each_figure_escaped():
    summary = prove.prove_summary({"before": CAPPED, "after": FIXED}, ["CPU-001", "NUMA-001"])
    line = console.prove_line("gpu01", summary)
    assert line.startswith("gpu01: CPU-001, NUMA-001 applied: lowest CPU clock under load 1,500 -> 3,392 MHz "
                           "(+126.2 %, better); ")
    assert "node 1 memory bandwidth 60.5 -> 60.3 GB/s (-0.3 %, within noise (1 GB/s))" in line
    one = prove.prove_summary({"before": registered(run([1500])), "after": registered(run([3400]))}, [])
    assert console.prove_line("h", one).endswith("1,500 -> 3,400 MHz (+126.7 %, better, noise not measured (one run))")
    hostile = prove.prove_summary({"before": registered({"workloads": [{"name": "\x1b[2Jx", "status": "ok", "value": 1}]}),
                                   "after": None}, ["\u202eCPU"])
    text = console.prove_line("h\x1b", hostile)
    assert "\x1b" not in text and "\u202e" not in text and "not measured after" in text
    assert console.prove_line("h", {"figures": [{"before": "x"}]}) .startswith("h: no fix applied")
    assert console.prove_line("h", None) == "h: nothing measured"
    assert console.prove_line("h", prove.prove_summary({"note": "not measured: snapshot"})) == \
        "h: no fix applied; not measured: snapshot"
