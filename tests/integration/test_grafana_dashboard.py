# -*- coding: utf-8 -*-
"""The Grafana dashboard (grafana/gpuhost-baseline.json) and the alerting rules, against a real Prometheus.

Static checks of the dashboard model (uid, schema version, the datasource variable on every panel
and target, every ``$variable`` defined, the stale threshold equal to the alert's) and of the
provisioning examples, then one live stack (issue 22): node_exporter (Debian's
prometheus-node-exporter) serves a textfile directory holding the fleet ``metrics.prom`` of the demo
audit (tests/fixtures/golden/metrics.prom, the audit playbook's output kept by the golden test) and
the self-audit runner's own textfile of the demo incident host, the same host as in the fleet file;
Prometheus (Debian's prometheus) scrapes it every second and loads the shipped alerting rules. The
self-audit runs twice with its history, first on the healthy snapshot, then on the incident snapshot
(the host drifted), so "changes over time" has real changes to show.

Then every panel target's ``expr`` is sent to the HTTP API with the template variables substituted
(All, and one host, area and rule of a failing finding), ``$__range`` as a concrete duration: each
returns data with the labels the panel shows (``{{label}}`` in ``legendFormat``, the columns of a
table). The rules load with health ok and the expected alerts are pending (drift, ``for: 10m``) or
firing (stale). node_exporter serves both files of the one directory without an error (the
``origin`` label, docs/report.md), and a control shows that the same two files without it are the
"collected before with the same name and label values" error node_exporter logs.

The live part skips, saying which, when a binary is missing (``make test-deps`` installs both;
.ci/run has them).
"""

import fnmatch
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest
import yaml

from helpers.one_judge import build_bundle
from helpers.prom import parse_metrics

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DASHBOARD = os.path.join(REPO, "grafana", "gpuhost-baseline.json")
PROVISIONING = os.path.join(REPO, "grafana", "provisioning")
RULES = os.path.join(REPO, "prometheus", "gpuhost_baseline_alerts.yml")
FLEET = os.path.join(REPO, "tests", "fixtures", "golden", "metrics.prom")
PROMETHEUS = "/usr/bin/prometheus"
NODE_EXPORTER = "/usr/bin/prometheus-node-exporter"
#: the self-audit's host: one the fleet file has too, so both files hold its series
HOST = "demo-incident"
#: the demo fleet's gpuhost_cluster (test_golden_reports.py sets it on the group), the host's own too
CLUSTER = "lab-a"
#: the file name the fleet metrics.prom gets in a textfile directory (docs/grafana.md)
FLEET_FILE = "gpuhost_baseline_fleet.prom"
DS = {"type": "prometheus", "uid": "${datasource}"}
#: Grafana's built-in variables the queries may use, and the durations the test gives them
BUILTINS = {"__range": "10m", "__interval": "1s", "__rate_interval": "4s"}
WAIT = 30  # seconds any one wait may take


def load_dashboard():
    with open(DASHBOARD, encoding="utf-8") as handle:
        return json.load(handle)


def targets(dashboard):
    """``[(panel, target)]`` of every query of the dashboard."""
    return [(p, t) for p in dashboard["panels"] for t in p.get("targets", [])]


def variables(dashboard):
    return dict((v["name"], v) for v in dashboard["templating"]["list"])


def used_variables(text):
    return set(m.group(1) or m.group(2) for m in re.finditer(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)", text))


def shown_labels(panel, target):
    """The labels a panel shows of its target's series: ``{{label}}`` of the legend, the columns of a table."""
    labels = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat") or ""))
    for step in panel.get("transformations", []):
        if step["id"] == "organize":
            labels |= set(step["options"].get("renameByName", {})) - {"Time", "Value"}
    return labels


# --- the model, statically ---------------------------------------------------------------------------

def test_dashboard_model():
    dash = load_dashboard()
    assert dash["uid"] == "gpuhost-baseline" and dash["title"]
    assert isinstance(dash["schemaVersion"], int) and dash["schemaVersion"] >= 36
    defined = variables(dash)
    assert defined["datasource"]["type"] == "datasource" and defined["datasource"]["query"] == "prometheus"
    for name in ("host", "area", "rule"):
        var = defined[name]
        assert var["type"] == "query" and var["datasource"] == DS and var["includeAll"] and var["multi"]
        assert var["allValue"] == ".*", "All is a regex, not the list of every value"
        assert var["definition"].startswith("label_values(") and var["definition"].endswith(", %s)" % name)
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    assert len([p for p in dash["panels"] if p.get("targets")]) >= 15
    for panel in dash["panels"]:
        grid = panel["gridPos"]
        assert 0 <= grid["x"] and grid["x"] + grid["w"] <= 24 and grid["h"] > 0, panel["title"]
        if panel["type"] == "row":
            assert "targets" not in panel
            continue
        assert panel["datasource"] == DS, panel["title"]
        assert panel["title"] and panel["description"], panel["id"]
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs)), panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DS, panel["title"]
            assert "gpuhost_baseline_" in target["expr"] or "ALERTS{" in target["expr"], panel["title"]
            assert used_variables(target["expr"]) <= set(defined) | set(BUILTINS), (panel["title"], target["expr"])
    # nothing names a datasource of the author's Grafana
    assert not re.search(r'"uid": "(?!\$\{datasource\}|-- Grafana --|gpuhost-baseline")', json.dumps(dash, indent=1))


def test_panels_cover_the_issue():
    titles = [p["title"] for p in load_dashboard()["panels"]]
    for wanted in ("Hosts out of baseline", "Drift per area", "Hosts by audit state", "Failing findings by area and severity",
                   "Top failing rules", "Last audit age per host", "Stale audits", "Failing findings over time",
                   "Finding changes in the time range", "Since the last change", "Active baseline alerts"):
        assert wanted in titles


def stale_seconds_of_the_alert():
    with open(RULES, encoding="utf-8") as handle:
        rules = dict((r["alert"], r) for r in yaml.safe_load(handle)["groups"][0]["rules"])
    match = re.search(r"> (\d+) \* (\d+)\s*$", rules["GpuhostBaselineAuditStale"]["expr"])
    return int(match.group(1)) * int(match.group(2))


def test_stale_threshold_is_the_alerts():
    # the alert rule holds the threshold; the dashboard's default and the age panel's red step follow it
    dash = load_dashboard()
    seconds = stale_seconds_of_the_alert()
    var = variables(dash)["stale_seconds"]
    assert var["type"] == "textbox" and var["query"] == var["current"]["value"] == str(seconds)
    age = [p for p in dash["panels"] if p["title"] == "Last audit age per host"][0]
    steps = age["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert steps[-1] == {"color": "red", "value": seconds}
    assert "$stale_seconds" in [p for p in dash["panels"] if p["title"] == "Stale audits"][0]["targets"][0]["expr"]


def test_provisioning_examples():
    with open(os.path.join(PROVISIONING, "dashboards", "gpuhost-baseline.yml"), encoding="utf-8") as handle:
        dashboards = yaml.safe_load(handle)
    with open(os.path.join(PROVISIONING, "datasources", "prometheus.yml"), encoding="utf-8") as handle:
        sources = yaml.safe_load(handle)
    assert dashboards["apiVersion"] == 1 and sources["apiVersion"] == 1
    provider, = dashboards["providers"]
    assert provider["type"] == "file" and provider["options"]["path"].startswith("/")
    source, = sources["datasources"]
    assert source["type"] == "prometheus" and source["url"].startswith("http")


def test_grafana_ships_in_the_collection_artifact():
    with open(os.path.join(REPO, "galaxy.yml"), encoding="utf-8") as handle:
        ignore = yaml.safe_load(handle).get("build_ignore") or []
    for root, dummy, names in os.walk(os.path.join(REPO, "grafana")):
        for name in names:
            rel = os.path.relpath(os.path.join(root, name), REPO)
            parts = rel.split("/")
            prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
            assert not [p for p in ignore for prefix in prefixes if fnmatch.fnmatch(prefix, p)], rel


# --- the live stack ---------------------------------------------------------------------------------

def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def http_json(url, params=None):
    if params:
        url += "?" + urllib.parse.urlencode(params, doseq=True)
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read().decode("utf-8"))


def http_text(url):
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode("utf-8")


def wait_for(what, check, seconds=WAIT):
    """``check()``'s first true value, polled every 0.2 s for at most ``seconds``."""
    deadline = time.monotonic() + seconds
    last = None
    while time.monotonic() < deadline:
        try:
            value = check()
        except (OSError, ValueError) as exc:  # not up yet
            value, last = None, exc
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError("waited %d s for %s (last error: %s)" % (seconds, what, last))


class Stack:
    """node_exporter and Prometheus started by the test; :meth:`close` kills them."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.procs = []

    def start(self, name, args):
        log = open(os.path.join(self.tmp, name + ".log"), "wb")
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        log.close()
        self.procs.append(proc)
        return proc

    def log(self, name):
        with open(os.path.join(self.tmp, name + ".log"), encoding="utf-8", errors="replace") as handle:
            return handle.read()

    def query(self, expr, **params):
        body = http_json(self.prom + "/api/v1/query", dict(params, query=expr))
        assert body["status"] == "success", body
        return body["data"]["result"]

    def close(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def require(binary, package):
    if not os.access(binary, os.X_OK):
        pytest.skip("%s is missing: Debian's %s package provides it (`make test-deps`, DEB_TEST_PACKAGES)"
                    % (binary, package))


def node_exporter_args(port, textfile_dir):
    return [NODE_EXPORTER, "--web.listen-address=127.0.0.1:%d" % port, "--collector.disable-defaults",
            "--collector.textfile", "--collector.textfile.directory=%s" % textfile_dir]


def self_audit(bundle, work, root):
    """One run of the self-audit runner on ``root`` as :data:`HOST`, its textfile in ``work/textfile``."""
    env = {"PATH": os.environ.get("PATH", os.defpath), "LC_ALL": "C",
           "GPUHOST_SELF_AUDIT_CACHE": os.path.join(work, "cache")}
    done = subprocess.run([sys.executable, "-I", "-S", bundle, "--config", os.path.join(work, "config.json"),
                           "--root", root, "--report-dir", os.path.join(work, "report"),
                           "--textfile-dir", os.path.join(work, "textfile"), "--history-dir", os.path.join(work, "history")],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, check=False,
                          universal_newlines=True, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, (done.stdout, done.stderr)
    return done.stdout


@pytest.fixture(scope="module")
def stack(snapshot_trees, tmp_path_factory):
    require(PROMETHEUS, "prometheus")
    require(NODE_EXPORTER, "prometheus-node-exporter")
    tmp = str(tmp_path_factory.mktemp("grafana"))
    work = os.path.join(tmp, "self-audit")
    textfile = os.path.join(work, "textfile")
    os.makedirs(textfile)
    with open(os.path.join(work, "config.json"), "w") as handle:
        json.dump({"host": HOST, "cluster": CLUSTER}, handle)  # as the self_audit role writes it
    bundle = build_bundle(os.path.join(tmp, "gpuhost-self-audit"))
    s = Stack(tmp)
    try:
        # before: the host as the healthy snapshot, beside the fleet file of the demo audit
        self_audit(bundle, work, snapshot_trees["healthy"])
        shutil.copy(FLEET, os.path.join(textfile, FLEET_FILE + ".tmp"))
        os.rename(os.path.join(textfile, FLEET_FILE + ".tmp"), os.path.join(textfile, FLEET_FILE))
        ne_port, prom_port = free_port(), free_port()
        s.node_exporter = "http://127.0.0.1:%d" % ne_port
        s.prom = "http://127.0.0.1:%d" % prom_port
        s.textfile = textfile
        config = os.path.join(tmp, "prometheus.yml")
        with open(config, "w") as handle:
            yaml.safe_dump({"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                            "rule_files": [RULES],
                            "scrape_configs": [{"job_name": "node",
                                                "static_configs": [{"targets": ["127.0.0.1:%d" % ne_port]}]}]}, handle)
        s.start("node_exporter", node_exporter_args(ne_port, textfile))
        s.start("prometheus", [PROMETHEUS, "--config.file=" + config, "--storage.tsdb.path=" + os.path.join(tmp, "tsdb"),
                               "--web.listen-address=127.0.0.1:%d" % prom_port, "--log.level=warn"])
        s.started = time.time()
        wait_for("Prometheus ready", lambda: http_text(s.prom + "/-/ready"))
        # the healthy state scraped, then the host drifts: the incident snapshot, the same history
        wait_for("a scrape of the first self-audit", lambda: s.query('gpuhost_baseline_host_up{origin="self_audit"}'))
        s.before = parse_metrics(open(os.path.join(textfile, "gpuhost_baseline.prom"), encoding="utf-8").read())
        s.second_run = self_audit(bundle, work, snapshot_trees["incident"])
        wait_for("the second self-audit scraped",
                 lambda: s.query('sum(gpuhost_baseline_finding_failing{origin="self_audit"}) > 0'))
        with open(os.path.join(textfile, "gpuhost_baseline.prom"), encoding="utf-8") as handle:
            s.own = parse_metrics(handle.read())
        with open(FLEET, encoding="utf-8") as handle:
            s.fleet = parse_metrics(handle.read())
        s.empty_labels = set(k for dummy, lb, dummy2 in s.own + s.fleet for k, v in lb.items() if v == "")
        yield s
    finally:
        s.close()
        shutil.rmtree(tmp, ignore_errors=True)


def failing(series):
    return set((lb["host"], lb["rule"], lb["subject"], lb["area"], lb["severity"]) for name, lb, value in series
               if name == "gpuhost_baseline_finding_failing" and value == 1)


def regex_escape(value):
    """A single selected value as Grafana writes it into a regex matcher."""
    return re.sub(r"([\\^$.|?*+()\[\]{}])", r"\\\1", value)


def selections(stack):
    """``{name: {variable: value}}``: All, and the host with one of its critical or high failing findings."""
    chosen = sorted(f for f in failing(stack.own) if f[4] in ("critical", "high"))[0]
    return {"all": {"cluster": ".*", "host": ".*", "area": ".*", "rule": ".*"},
            "one": {"cluster": ".*", "host": regex_escape(HOST), "area": regex_escape(chosen[3]), "rule": regex_escape(chosen[1])}}


def substitute(expr, values):
    def one(match):
        name = match.group(1) or match.group(2)
        return values[name] if name in values else BUILTINS[name]
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", one, expr)


def test_one_textfile_directory_serves_both_files(stack):
    """The papercut: the fleet file and the host's own textfile in one directory, no scrape error."""
    text = http_text(stack.node_exporter + "/metrics")
    served = parse_metrics("\n".join(line for line in text.split("\n") if not line.startswith("#")))
    files = dict((lb["file"], v) for n, lb, v in served if n == "node_textfile_mtime_seconds")
    assert sorted(os.path.basename(f) for f in files) == sorted(["gpuhost_baseline.prom", FLEET_FILE])
    assert [v for n, lb, v in served if n == "node_textfile_scrape_error"] == [0]
    # an empty label is no label (a node_exporter may serve subject="" without it)
    mine = set((n, tuple(sorted((k, x) for k, x in lb.items() if x))) for n, lb, v in served
               if n.startswith("gpuhost_baseline_"))
    wanted = set((n, tuple(sorted((k, x) for k, x in lb.items() if x))) for n, lb, v in stack.own + stack.fleet)
    assert mine == wanted, "node_exporter serves every series of both files"
    log = stack.log("node_exporter")
    assert "collected before" not in log and "error gathering metrics" not in log, log
    assert [r["value"][1] for r in stack.query('up{job="node"}')] == ["1"]
    assert [r["value"][1] for r in stack.query("node_textfile_scrape_error")] == ["0"]


def test_without_the_origin_label_the_files_collide(stack, tmp_path):
    """The control: the same two files as they were before the origin label, in one directory,
    are the duplicate-series error the papercut reported (node_exporter logs it and drops one)."""
    folder = tmp_path / "textfile"
    folder.mkdir()
    for name in ("gpuhost_baseline.prom", FLEET_FILE):
        with open(os.path.join(stack.textfile, name), encoding="utf-8") as handle:
            text = handle.read()
        (folder / name).write_text(re.sub(r',origin="[a-z_]+"', "", text), encoding="utf-8")
    s = Stack(str(tmp_path))
    try:
        port = free_port()
        s.start("node_exporter", node_exporter_args(port, str(folder)))
        wait_for("node_exporter serving", lambda: http_text("http://127.0.0.1:%d/metrics" % port))
        log = wait_for("the duplicate-series error in the log",
                       lambda: "collected before with the same name and label values" in s.log("node_exporter")
                       and s.log("node_exporter"))
        assert 'gpuhost_baseline_' in log and HOST in log
    finally:
        s.close()


@pytest.mark.parametrize("selection", ["all", "one"])
def test_every_panel_query_returns_data(stack, selection):
    values = dict(selections(stack)[selection], stale_seconds=str(stale_seconds_of_the_alert()))
    now = time.time()
    for panel, target in targets(load_dashboard()):
        expr = substitute(target["expr"], values)
        if target.get("range"):
            body = http_json(stack.prom + "/api/v1/query_range",
                             {"query": expr, "start": stack.started, "end": now, "step": "1s"})
            assert body["status"] == "success", (panel["title"], expr, body)
            result = body["data"]["result"]
        else:
            result = stack.query(expr, time=now)
        assert result, "%s: no data for %s" % (panel["title"], expr)
        for series in result:
            # Prometheus stores an empty label as no label (subject="" of a host-wide rule)
            missing = shown_labels(panel, target) - set(series["metric"]) - stack.empty_labels
            assert not missing, "%s: the series of %s lack %s: %s" % (panel["title"], expr, missing, series)


def test_panel_values_count_each_finding_once(stack):
    """A (host, rule, subject) both files report is one finding; the drift is the union of both."""
    dash = load_dashboard()
    expected = set((h, r, s) for h, r, s, a, sev in failing(stack.own) | failing(stack.fleet))
    by_title = dict((p["title"], p["targets"][0]["expr"]) for p, t in targets(dash))
    values = dict(selections(stack)["all"], stale_seconds="7200")
    total, = stack.query(substitute(by_title["Failing findings"], values))
    assert float(total["value"][1]) == len(expected)
    per_host = dict((r["metric"]["host"], float(r["value"][1]))
                    for r in stack.query(substitute(by_title["Failing findings per host"], values)))
    assert per_host[HOST] == len([k for k in expected if k[0] == HOST]) > 0
    # changes over time: the host drifted between the two self-audits, and the history says when
    # The panel's subquery steps are aligned to whole multiples of its step (1 s here), so an instant query
    # within the second of the last scrape ends its subquery before that sample: evaluate it 1.5 s ahead,
    # as a dashboard refreshed a moment later does (CI saw 0 changes when the query fell in that second).
    changes = dict((r["metric"]["host"], float(r["value"][1]))
                   for r in stack.query(substitute(by_title["Finding changes in the time range"], values),
                                        time="%.3f" % (time.time() + 1.5)))
    # a finding failing in both runs is no change, whatever its severity (graded by its events, it may differ)
    flipped = set((h, r, s) for h, r, s, a, sev in failing(stack.own)) - \
        set((h, r, s) for h, r, s, a, sev in failing(stack.before))
    assert flipped and changes[HOST] >= len(flipped)
    assert "new fails" in stack.second_run
    since, = stack.query(substitute(by_title["Since the last change"], values))
    assert since["metric"]["host"] == HOST and 0 <= float(since["value"][1]) < 600


def test_variable_queries(stack):
    values = selections(stack)["one"]
    for name in ("host", "area", "rule"):
        var = variables(load_dashboard())[name]
        match = re.match(r"^label_values\((.*), (\w+)\)$", var["definition"])
        selector, label = substitute(match.group(1), values), match.group(2)
        body = http_json(stack.prom + "/api/v1/label/%s/values" % label, {"match[]": selector})
        assert body["status"] == "success" and body["data"], (name, selector)
        assert re.sub(r"\\(.)", r"\1", values[name]) in body["data"], (name, body["data"])
    # the cluster variable: the fleet file's hosts carry their inventory group's gpuhost_cluster
    var = variables(load_dashboard())["cluster"]
    match = re.match(r"^label_values\((.*), (\w+)\)$", var["definition"])
    body = http_json(stack.prom + "/api/v1/label/%s/values" % match.group(2), {"match[]": match.group(1)})
    assert body["status"] == "success" and body["data"] == [CLUSTER], body
    one = substitute('gpuhost_baseline_host_up{cluster=~"$cluster"}', {"cluster": regex_escape(CLUSTER)})
    chosen = set((r["metric"]["host"], r["metric"]["origin"]) for r in stack.query(one))
    # the fleet file's hosts of the group and the self-audit's own series, not demo-intel (its host var
    # empties its cluster)
    assert chosen == set((h, "controller") for h in ("demo-healthy", "demo-hostile", "demo-incident")) | {
        (HOST, "self_audit")}, chosen


def test_alert_rules_load_and_fire(stack):
    """One alert per failing rule, labelled with the finding's rule, area, kind and severity: a critical
    fault fires at once (HEALTH-001 on a GPU of the incident host), a high or medium fault and drift
    are pending (``for: 10m``); the stale alert fires for the fleet file's old audits. A finding both
    files report is one alert."""
    groups = http_json(stack.prom + "/api/v1/rules")["data"]["groups"]
    rules = [r for g in groups for r in g["rules"]]
    assert [g["file"] for g in groups] == [RULES]
    names = ["GpuhostBaselineAuditFailing", "GpuhostBaselineAuditStale", "GpuhostBaselineDrift",
             "GpuhostBaselineFault", "GpuhostBaselineFault"]
    assert sorted(r["name"] for r in rules) == names
    assert all(r["health"] == "ok" and not r.get("lastError") for r in rules), rules
    both = stack.own + stack.fleet
    alerting = set((lb["host"], lb["rule"], lb["subject"], lb["severity"], lb["kind"]) for name, lb, value in both
                   if name == "gpuhost_baseline_finding_failing" and value == 1
                   and lb["severity"] in ("critical", "high", "medium"))
    faults = set(("GpuhostBaselineFault", h, r, s, sev, "firing" if sev == "critical" else "pending")
                 for h, r, s, sev, kind in alerting if kind == "fault")
    drift = set(("GpuhostBaselineDrift", h, r, "", sev, "pending") for h, r, s, sev, kind in alerting if kind == "drift")
    assert ("GpuhostBaselineFault", HOST, "HEALTH-001", "0000:47:00.0", "critical", "firing") in faults
    assert ("GpuhostBaselineDrift", HOST, "LXC-001", "", "critical", "pending") in drift
    newest = {}
    for name, lb, value in both:
        if name == "gpuhost_baseline_last_run_timestamp_seconds":
            newest[lb["host"]] = max(value, newest.get(lb["host"], value))
    stale = set(h for h, stamp in newest.items() if time.time() - stamp > stale_seconds_of_the_alert())
    assert HOST not in stale and stale  # the host's own audit is fresh, the fleet file's old
    expected = sorted(faults | drift | set(("GpuhostBaselineAuditStale", h, "", "", "warning", "firing") for h in stale))

    def alerts():
        got = sorted((a["labels"]["alertname"], a["labels"]["host"], a["labels"].get("rule", ""),
                      a["labels"].get("subject", ""), a["labels"]["severity"], a["state"])
                     for a in http_json(stack.prom + "/api/v1/alerts")["data"]["alerts"])
        return got if got == expected else None

    wait_for("the alerts %s" % expected, alerts, seconds=10)
