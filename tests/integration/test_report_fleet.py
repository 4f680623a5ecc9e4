# -*- coding: utf-8 -*-
"""report.html, report.md and report.json at fleet scale (issue 12, item 5), from synthetic report
documents (no playbook): hosts with the same problems are one group, each host's detail is a page
of its own under hosts/ with a safe and unique name, the fleet page grows with the groups and not
with the hosts, the CSS-only area/rule filter hides what it should in headless Chromium, and
report.json is stored compact (schema 3) and read back exactly."""

import html
import json
import os
import re
import shutil
import subprocess
import tempfile

import pytest

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import report as report_doc
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import report_dir, views

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN_JSON = os.path.join(REPO, "tests", "fixtures", "golden", "report.json")
FIXTURE = os.path.join(REPO, "tests", "fixtures", "report", "hosts.json")
CHROMIUM = "/usr/bin/chromium"
HOSTILE_NAMES = ["<script>alert(1)</script>", "../../etc/passwd", ".hidden", "GPU-A", "gpu-a", "a b\nc",
                 "x" * 200]


def golden():
    with open(GOLDEN_JSON, encoding="utf-8") as handle:
        return report_doc.expand_document(json.load(handle))


def fleet(count, sources=("demo-incident", "demo-healthy", "demo-intel"), extra=None):
    """``count`` hosts cycling through the golden report's ``sources`` hosts (identical copies)."""
    base = golden()
    hosts = dict(("gpu-%04d" % i, base["hosts"][sources[i % len(sources)]]) for i in range(count))
    hosts.update(extra or {})
    return dict(base, hosts=hosts)


def test_groups_one_per_problem_set_worst_first():
    report = fleet(30)
    view = views.report_view(report)
    assert view["mode"] == "groups"
    assert [g["count"] for g in view["groups"]] == [10, 10, 10]
    assert [g["first"]["name"] for g in view["groups"]] == ["gpu-0000", "gpu-0002", "gpu-0001"]
    # worst first: the incident copies (critical, most failures), then intel, then the clean ones
    assert [g["fail"] for g in view["groups"]] == sorted((g["fail"] for g in view["groups"]), reverse=True)
    # the clean copies fail nothing; their only problems are the error counter rules, unknown without a
    # history to compare with (HEALTH-020..023)
    clean = view["groups"][-1]
    assert clean["fail"] == 0 and clean["problems"]
    assert set((p["f"]["status"], p["f"]["id"]) for p in clean["problems"]) <= set(
        ("unknown", "HEALTH-%03d" % n) for n in range(20, 24))
    for group in view["groups"]:
        keys = set(views.problem_key(report["hosts"][m["name"]]) for m in group["members"])
        assert len(keys) == 1
        # only the group's first host keeps its findings in the view; the others what the fleet
        # page shows of them (their pages are made from the report one at a time)
        assert "findings" in group["first"]["host"]
        assert all("findings" not in m["host"] for m in group["members"][1:])
    page = views.render_html(report)
    assert page.count('<tr class="grouprow"') == 3 and '<tr class="hostrow"' not in page
    assert page.count('<section class="group"') == 3 and '<section class="host"' not in page
    assert 'data-hosts="10"' in page and ">10 hosts</a>" in page
    # the names on demand, each a link to the host's page
    for number in range(30):
        assert '<a href="hosts/gpu-%04d.html">gpu-%04d</a>' % (number, number) in page


def test_a_small_fleet_stays_one_page_with_a_row_and_a_section_per_host():
    report = fleet(6)
    view = views.report_view(report)
    assert view["mode"] == "hosts" and view["groups"] == []
    page = views.render_html(report)
    assert page.count('<tr class="hostrow"') == 6 and page.count('<section class="host"') == 6
    assert views.render_host_pages(report, "html") == {}
    assert views.report_view(report, inline_hosts=5)["mode"] == "groups"


def test_fleet_page_grows_with_groups_not_hosts():
    small = views.render_html(fleet(30))
    large = views.render_html(fleet(300))
    assert len(large) < 2 * len(small), (len(small), len(large))
    # the part that does grow, the host list, is a link per host
    assert len(large) - len(small) < 270 * 200
    md_small, md_large = views.render_markdown(fleet(30)), views.render_markdown(fleet(300))
    assert len(md_large) < 2 * len(md_small)
    assert "## gpu-0000" not in md_large and "## Group 1: 100 host(s)" in md_large


def test_per_host_pages_have_the_detail_and_a_link_back(tmp_path):
    report = fleet(30)
    paths = report_dir.write_reports(report, str(tmp_path))
    pages = sorted(os.listdir(str(tmp_path / "hosts")))
    assert pages == sorted(["gpu-%04d.%s" % (i, ext) for i in range(30) for ext in ("html", "md")])
    page = (tmp_path / "hosts" / "gpu-0000.html").read_text(encoding="utf-8")
    incident = report["hosts"]["gpu-0000"]
    assert '<h1>GPU host baseline: gpu-0000</h1>' in page
    assert '<a href="../report.html#group-0">' in page
    assert page.count('<section class="host"') == 1
    assert page.count('<g class="numa-node"') == len(incident["numa"])
    assert len(re.findall(r'<tr class="st-fail"', page)) == incident["summary"]["fail"]
    assert "<script" not in page
    md = (tmp_path / "hosts" / "gpu-0000.md").read_text(encoding="utf-8")
    assert md.startswith("# GPU host baseline: gpu-0000") and "### Failing (%d)" % incident["summary"]["fail"] in md
    fleet_page = open(paths["html"], encoding="utf-8").read()
    for href in re.findall(r'href="([^"#]+)"', fleet_page):
        if not href.startswith("http"):
            assert os.path.isfile(str(tmp_path / href)), href
    # a fleet back on one page: the pages of the earlier run are removed with their directory
    report_dir.write_reports(fleet(4), str(tmp_path))
    assert not (tmp_path / "hosts").exists()


def test_host_pages_link_the_rule_text_stated_once_on_the_fleet_page(tmp_path):
    """A host page does not repeat a rule's rationale, fix and source in each finding's row: the rule
    id links to the rule's row of the fleet page's rules table, which states each rule shown once."""
    report = fleet(30)
    report_dir.write_reports(report, str(tmp_path))
    fleet_page = (tmp_path / "report.html").read_text(encoding="utf-8")
    incident = report["hosts"]["gpu-0000"]
    shown = dict((f["id"], f) for f in incident["findings"])  # not-applicable rules included
    assert any(f["status"] == "not_applicable" for f in shown.values())
    page = (tmp_path / "hosts" / "gpu-0000.html").read_text(encoding="utf-8")
    problem_rules = set(f["id"] for f in incident["findings"] if f["status"] in ("fail", "unknown", "waived"))
    for rule_id, finding in shown.items():
        ref = re.search(r'<tr id="(rule-\d+)"[^>]*><td><span class="mono">%s</span>' % re.escape(rule_id), fleet_page)
        assert ref, rule_id
        assert re.search(r'<a class="mono"(?: id="f-%s")? href="\.\./report\.html#%s">%s</a>' % (
            re.escape(rule_id), ref.group(1), re.escape(rule_id)), page), rule_id
        if finding.get("rationale"):
            assert fleet_page.count(html.escape(finding["rationale"])) == 1, rule_id
            assert html.escape(finding["rationale"]) not in page, rule_id
        if finding.get("fix"):
            assert html.escape(finding["fix"]) not in page, rule_id
        # the title: on the fleet page; on the host page once, at a problem rule's first row
        title = html.escape(finding.get("title") or "")
        if title and not any(title in html.escape(g.get("message") or "") for g in incident["findings"]):
            assert page.count(title) == (1 if rule_id in problem_rules else 0), rule_id
    # the Markdown page: a rule's fix at its first problem, "fix: as above" at the next ones
    md = (tmp_path / "hosts" / "gpu-0000.md").read_text(encoding="utf-8")
    problems = [f for f in incident["findings"] if f["status"] in ("fail", "unknown", "waived")]
    repeated = set(f["id"] for f in problems if f.get("fix") and sum(1 for g in problems if g["id"] == f["id"]) > 1)
    assert repeated
    for rule_id in repeated:
        fix = next(f["fix"] for f in problems if f["id"] == rule_id)
        assert md.count("  - fix: %s" % views.md_text(fix)) == 1, rule_id
    assert md.count("  - fix: as above") == sum(1 for f in problems if f["id"] in repeated) - len(repeated)


#: The incident copy's pages before passing and not-applicable findings were folded one row per rule
#: (issue 20, measured with benchmarks/report_size.py): 297 rows, 161 of them passing, 33 not applicable.
BEFORE_INCIDENT_HTML, BEFORE_INCIDENT_MD = 175271, 49871


def test_host_pages_fold_passing_and_not_applicable_findings_one_row_per_rule(tmp_path):
    """A host page shows its problems in full and its passing and not-applicable findings one row
    per rule (issue 20): the anchors stay, values that differ between subjects are listed, the counts
    are those of the findings, and the incident page is smaller by a checked factor."""
    report = fleet(30)
    report_dir.write_reports(report, str(tmp_path))
    incident = report["hosts"]["gpu-0000"]
    findings = incident["findings"]
    passing = [f for f in findings if f["status"] == "pass"]
    not_applicable = [f for f in findings if f["status"] == "not_applicable"]
    pass_rules = sorted(set(f["id"] for f in passing))
    na_rules = sorted(set(f["id"] for f in not_applicable))
    assert len(pass_rules) < len(passing) and incident["summary"]["pass"] == len(passing)
    page = (tmp_path / "hosts" / "gpu-0000.html").read_text(encoding="utf-8")
    # passing findings: one row per rule, in rule order, the rule id linking to its text on the fleet page
    pass_ids = re.findall(r'<tr class="st-pass"><td><a class="mono"(?: id="[^"]+")? href="\.\./report\.html#rule-\d+">'
                          r'([^<]+)</a>', page)
    assert pass_ids == pass_rules
    # not-applicable findings: one row per reason, naming its rules (each once), the reason once
    na_section = page.split('<details class="na">')[1].split("</details>")[0]
    na_rows = re.findall(r'<tr class="st-not_applicable"><td>(.*?)</td><td>(.*?)</td></tr>', na_section)
    na_ids = [rid for dummy, links in na_rows for rid in re.findall(r'>([A-Z]+-\d+)</a>', links)]
    assert sorted(na_ids) == na_rules
    reasons = [views.na_reason(f) for f in not_applicable]
    assert len(na_rows) == len(set(reasons)) < len(na_rules)  # rules sharing a reason share a row
    for reason in set(reasons):
        assert [r for r, dummy in na_rows].count(html.escape(reason)) == 1, reason
    # the problems stay a full row each
    for status in ("fail", "unknown", "waived"):
        assert len(re.findall(r'<tr class="st-%s"' % status, page)) == incident["summary"][status], status
    # every rule of the host keeps its anchor f-<rule>, once, on its first row or link
    for rule_id in set(f["id"] for f in findings):
        assert page.count('id="f-%s"' % rule_id) == 1, rule_id
    assert 'id=""' not in page
    # the summary lines count findings, and say how many rules
    assert "<summary>%d passing finding(s) of %d rule(s), one row per rule</summary>" % (
        len(passing), len(pass_rules)) in page
    assert "<summary>%d not applicable finding(s) of %d rule(s), one row per reason" % (
        len(not_applicable), len(na_rules)) in page
    # a value the same on every subject once; differing ones per subject (HEALTH-012: 0 on mc0, 3 on mc1)
    health12 = re.search(r'<tr class="st-pass"><td><a [^>]*id="f-HEALTH-012".*?</tr>', page).group(0)
    assert '<ul class="val"><li>mc0: 0</li><li>mc1: 3</li></ul>' in health12 and ">2: mc0, mc1<" in health12
    health13 = re.search(r'<tr class="st-pass"><td><a [^>]*id="f-HEALTH-013".*?</tr>', page).group(0)
    assert ">8: " in health13 and health13.count("nothing") == 1
    # no filter on a host's own page, so neither its CSS nor the matrix's, nor data-f on a row
    assert "flt-area" not in page and "flt-rule" not in page and "table.matrix" not in page and "data-f=" not in page
    # no per-subject message of a passing finding
    for finding in passing:
        assert html.escape(finding["message"]) not in page, finding["id"]
    # the Markdown page: the not-applicable rules one list item per reason, the passing findings
    # counted (as on the one-page report.md), the counts the findings'
    md = (tmp_path / "hosts" / "gpu-0000.md").read_text(encoding="utf-8")
    assert "### Passing" not in md and "\n%d passing finding(s) not listed.\n" % len(passing) in md
    assert "### Not applicable (%d)\n\n%d finding(s) of %d rule(s), one line per reason" % (
        len(not_applicable), len(not_applicable), len(na_rules)) in md
    items = re.findall(r"^- (.*)$", md.split("### Not applicable")[1].split("passing finding(s) not listed")[0], re.M)
    assert len(items) == len(set(reasons))
    assert sorted(rid for item in items for rid in re.findall(r"\b([A-Z]+-\d+)\b", item.rsplit(": ", 1)[1])) == na_rules
    # the single page of a small fleet keeps a full row per finding (report.html up to 20 hosts)
    single = views.render_html(fleet(3))
    assert single.count('<tr class="st-pass"') == sum(
        1 for h in fleet(3)["hosts"].values() for f in h["findings"] if f["status"] == "pass")
    # smaller by a checked factor (175 kB + 50 kB before)
    assert len(page.encode("utf-8")) <= 0.65 * BEFORE_INCIDENT_HTML, len(page)
    assert len(page.encode("utf-8")) + len(md.encode("utf-8")) <= 0.75 * (BEFORE_INCIDENT_HTML + BEFORE_INCIDENT_MD)


def test_hostile_host_names_give_safe_unique_page_names(tmp_path):
    base = golden()["hosts"]["demo-intel"]
    report = fleet(24, extra=dict((name, base) for name in HOSTILE_NAMES))
    stems = views.host_page_names(report)
    assert len(set(s.lower() for s in stems.values())) == len(stems)
    for name, stem in stems.items():
        assert re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*$", stem) and len(stem) <= 120, (name, stem)
    assert stems["gpu-0001"] == "gpu-0001"
    assert stems["GPU-A"] != "GPU-A" and stems["gpu-a"] != "gpu-a"  # case twins: both hashed
    report_dir.write_reports(report, str(tmp_path))
    assert sorted(os.listdir(str(tmp_path / "hosts"))) == sorted(
        "%s.%s" % (stem, ext) for stem in stems.values() for ext in ("html", "md"))
    page = (tmp_path / "hosts" / ("%s.html" % stems["<script>alert(1)</script>"])).read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>" not in page
    assert not (tmp_path.parent / "etc").exists()


def test_stored_report_json_is_compact_and_read_back_exactly(tmp_path):
    report = fleet(30)
    paths = report_dir.write_reports(report, str(tmp_path))
    with open(paths["json"], encoding="utf-8") as handle:
        text = handle.read()
    stored = json.loads(text)
    rule_ids = set(f["id"] for h in report["hosts"].values() for f in h["findings"])
    assert stored["schema"] == 3 and set(stored["rules"]) == rule_ids
    assert all(isinstance(f, dict) and "title" not in f for h in stored["hosts"].values() for f in h["findings"])
    assert report_doc.expand_document(stored) == report
    # the rule text is stored once, not once per finding
    rationale = report["hosts"]["gpu-0000"]["findings"][0]["rationale"]
    assert text.count(json.dumps(rationale, ensure_ascii=False)) == 1
    # a line per finding
    findings = sum(len(h["findings"]) for h in report["hosts"].values())
    assert len(text.splitlines()) >= findings
    full = len(json.dumps(report, indent=2, ensure_ascii=False))
    assert len(text) < full / 4, (len(text), full)


def test_the_writer_reads_a_host_at_a_time_and_writes_the_same(tmp_path):
    """The writer's document expands a host each time one is read (report.HostsRead): every view,
    the metrics, the console and the caller stats give exactly what they give of the document
    expanded whole, and report.json's text is the same whether its hosts are compacted whole or
    one at a time."""
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import console, metrics, stats, views_machine

    report = fleet(30, extra={"gpu-down": {"state": "unreachable", "message": "ssh: timed out", "findings": [],
                                           "summary": dict((s, 0) for s in ("fail", "unknown", "waived", "pass",
                                                                            "not_applicable")),
                                           "profile": None, "numa": [], "facts_errors": 0, "pending": []}})
    report = report_doc.build_report(report["hosts"], generated=report["generated"],
                                     collection_version=report["collection_version"])
    text = report_dir.stored_text(report)
    assert text == report_doc.dumps_document(report_doc.compact_document(report))
    stored = json.loads(text)
    eager = report_doc.expand_document(stored)
    lazy = report_doc.expand_document(stored, lazy=True)
    assert isinstance(lazy["hosts"], report_doc.HostsRead) and report_doc.expand_document(lazy) is lazy
    assert list(lazy["hosts"]) == list(eager["hosts"]) and len(lazy["hosts"]) == 31
    first, again = lazy["hosts"]["gpu-0000"], lazy["hosts"]["gpu-0000"]
    assert first == again == eager["hosts"]["gpu-0000"] and first is not again  # nothing cached
    assert views.render_html(lazy) == views.render_html(eager)
    assert views.render_markdown(lazy) == views.render_markdown(eager)
    pages = dict(views.iter_host_pages(lazy, ["html", "md"]))
    assert pages == dict(views.render_host_pages(eager, "html"), **views.render_host_pages(eager, "md"))
    assert len(pages) == 62
    # a host a --limit run skipped stays in the fleet metrics file
    other = report_doc.build_report({"gpu-9999": report["hosts"]["gpu-0001"]}, generated=report["generated"])
    existing = metrics.render_metrics(other)
    assert "".join(views_machine.iter_prometheus(lazy, existing)) == metrics.merge_metrics(eager, existing)
    assert 'host="gpu-9999"' in metrics.merge_metrics(eager, existing)
    assert metrics.render_metrics(lazy) == metrics.render_metrics(eager)
    # a file that keeps no host (none, or only hosts of this run): the series per finding are made
    # host by host as they are written, the text the same
    for replaced in ("", metrics.render_metrics(eager)):
        chunks = list(views_machine.iter_prometheus(lazy, replaced))
        assert "".join(chunks) == metrics.merge_metrics(eager, replaced) == metrics.render_metrics(eager)
        assert sum(1 for chunk in chunks if 'gpuhost_baseline_finding_failing{host="gpu-' in chunk) == 30
    assert console.console_lines(lazy, fail_on="high") == console.console_lines(eager, fail_on="high")
    assert stats.caller_stats(lazy) == stats.caller_stats(eager)
    assert report_doc.failing_at_or_above(lazy, "high") == report_doc.failing_at_or_above(eager, "high")
    # and the set written from the text renders from that document: its hosts read one at a time
    paths, written = report_dir.write_stored(text, str(tmp_path / "reports"))
    assert isinstance(written["hosts"], report_doc.HostsRead)
    assert (tmp_path / "reports" / "report.html").read_text(encoding="utf-8") == views.render_html(eager)
    # the same set from the document read whole (json.loads) as from its text read a host at a time
    with_objects = report_doc.expand_document(json.loads(text), lazy=True)
    assert views.render_html(with_objects) == views.render_html(written)
    assert dict(views.iter_host_pages(with_objects, ["html", "md"])) == dict(views.iter_host_pages(written, ["html", "md"]))
    assert views_machine.render_junit(json.loads(text)) == (tmp_path / "reports" / "junit.xml").read_text(encoding="utf-8")


def test_a_severity_a_profile_changed_on_one_host_survives_the_round_trip():
    hosts = json.load(open(FIXTURE, encoding="utf-8"))["hosts"]
    report = report_doc.build_report(hosts, profile="auto", generated="2025-06-01T12:00:00+00:00")
    name = "gpu-incident-01"
    report["hosts"][name]["findings"][0]["severity"] = "low"
    report["hosts"][name]["findings"][1]["expected"] = {"odd": [1, 2]}
    stored = json.loads(report_doc.dumps_document(report_doc.compact_document(report)))
    assert report_doc.expand_document(stored) == report


def chromium_dom(path):
    assert os.access(CHROMIUM, os.X_OK), "Debian's chromium is needed at %s: run `make test-deps`" % CHROMIUM
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    try:
        proc = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                               "--disable-background-networking", "--disable-component-update", "--disable-sync",
                               "--user-data-dir=" + profile, "--dump-dom", "file://" + path],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False, timeout=180)
        assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")[-2000:]
        return proc.stdout.decode("utf-8")
    finally:
        shutil.rmtree(profile, ignore_errors=True)


#: Which groups, group finding rows and matrix rows are displayed, as JSON in the DOM.
PROBE = r"""<script>
(function () {
  var shown = function (sel, name) {
    return Array.prototype.slice.call(document.querySelectorAll(sel)).filter(function (el) {
      return getComputedStyle(el).display !== "none"; }).map(name || function (el) { return el.id; });
  };
  var pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify({groups: shown("section.group"), rows: shown("tr.grouprow"),
                                    findings: shown("section.group table.folded tbody tr", function (el) {
                                      return el.querySelector("td:nth-child(2) a").textContent; })});
  document.body.appendChild(pre);
})();
</script>"""


def _probe(page, tmp_path, name):
    path = tmp_path / name
    path.write_text(page.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = chromium_dom(str(path))
    match = re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S)
    assert match, "the probe did not run"
    return json.loads(html.unescape(match.group(1)))


@pytest.mark.slow
def test_css_filter_by_rule_and_area_in_chromium(tmp_path):
    report = fleet(30)
    view = views.report_view(report)
    page = views.render_html(report)
    assert "<script" not in page
    everything = _probe(page, tmp_path, "all.html")
    assert everything["groups"] == ["group-0", "group-1", "group-2"]
    # LXC-001 fails on the incident copies only
    value = [v for v, rid, dummy in view["filter_rules"] if rid == "LXC-001"][0]
    chosen = page.replace('<option value="%s">' % value, '<option value="%s" selected>' % value, 1)
    by_rule = _probe(chosen, tmp_path, "rule.html")
    assert by_rule["groups"] == ["group-0"] and len(by_rule["rows"]) == 1
    assert by_rule["findings"] == ["LXC-001"]
    area = [v for v, name in view["filter_areas"] if name == "lxc"][0]
    chosen = page.replace('<option value="%s">' % area, '<option value="%s" selected>' % area, 1)
    by_area = _probe(chosen, tmp_path, "area.html")
    assert by_area["groups"] == [g["id"] for g in view["groups"] if any(r["f"]["area"] == "lxc" for r in g["problems"])]
    assert by_area["groups"] != everything["groups"]
    assert by_area["findings"] and all(rid.startswith("LXC-") for rid in by_area["findings"])
