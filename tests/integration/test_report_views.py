# -*- coding: utf-8 -*-
"""The report views checked by the tools that consume them.

report.html in headless Chromium (rendered DOM + screenshot artefact), metrics.prom by
``promtool check metrics``, junit.xml by junitparser, and the baseline_report action
plugin through ansible-playbook on localhost. Chromium and promtool come from Debian
(``make test-deps``); these tests fail, not skip, when they are missing.
"""

import html.parser
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import pytest
from helpers.prom import parse_metrics
from junitparser import Error, Failure, JUnitXml, Skipped

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import report as report_doc
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import report_dir, views
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.views_machine import JUNIT_RULES_SUITE

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURE = os.path.join(REPO, "tests", "fixtures", "report", "hosts.json")
OUTPUT = os.path.join(REPO, "tests", "output", "report_views")
CHROMIUM = "/usr/bin/chromium"
PROMTOOL = "/usr/bin/promtool"
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
HOSTILE = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
GENERATED = "2025-06-01T12:00:00+00:00"

pytestmark = pytest.mark.slow


def load_hosts():
    with open(FIXTURE) as handle:
        return json.load(handle)["hosts"]


@pytest.fixture(scope="module")
def written():
    """Reports of the fixture fleet written to tests/output/report_views (kept as artefacts)."""
    if os.path.isdir(OUTPUT):
        shutil.rmtree(OUTPUT)
    report = report_doc.build_report(load_hosts(), profile="auto", generated=GENERATED, collection_version="0.1.0")
    paths = report_dir.write_reports(report, OUTPUT)
    return report, paths


# --- Chromium ---------------------------------------------------------------

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


class Node(object):
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent, self.children = tag, dict(attrs), parent, []

    @property
    def classes(self):
        return (self.attrs.get("class") or "").split()

    def iter(self):
        yield self
        for child in self.children:
            if isinstance(child, Node):
                yield from child.iter()

    def find_all(self, tag=None, cls=None, **attrs):
        return [n for n in self.iter() if (tag is None or n.tag == tag) and (cls is None or cls in n.classes)
                and all(n.attrs.get(k.replace("_", "-")) == v for k, v in attrs.items())]

    def text(self):
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)


class DomBuilder(html.parser.HTMLParser):
    def __init__(self):
        html.parser.HTMLParser.__init__(self, convert_charrefs=True)
        self.root = Node("#document", {}, None)
        self.current = self.root

    def handle_starttag(self, tag, attrs):
        node = Node(tag, attrs, self.current)
        self.current.children.append(node)
        if tag not in VOID:
            self.current = node

    def handle_startendtag(self, tag, attrs):
        self.current.children.append(Node(tag, attrs, self.current))

    def handle_endtag(self, tag):
        node = self.current
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.current = node.parent

    def handle_data(self, data):
        self.current.children.append(data)


def chromium(*args):
    assert os.access(CHROMIUM, os.X_OK), (
        "Debian's chromium is needed at %s to check report.html: run `make test-deps` "
        "(apt-get install chromium)" % CHROMIUM)
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    try:
        cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--user-data-dir=" + profile] + list(args)
        proc = subprocess.run(cmd, check=False, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=180)
        assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")[-2000:]
        return proc.stdout.decode("utf-8")
    finally:
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def dom(written):
    dummy, paths = written
    text = chromium("--dump-dom", "file://" + os.path.abspath(paths["html"]))
    with open(os.path.join(OUTPUT, "report.dom.html"), "w") as handle:
        handle.write(text)
    builder = DomBuilder()
    builder.feed(text)
    builder.close()
    return builder.root


def test_dom_matrix_rows_columns_and_cell_status(written, dom):
    report, dummy = written
    matrix = dom.find_all("table", id="matrix")
    assert len(matrix) == 1
    rules = [rid for dummy, rid, dummy2 in views._rule_columns(report)]
    assert [th.attrs["data-rule"] for th in matrix[0].find_all("th", cls="rule")] == rules
    rows = matrix[0].find_all("tr", cls="hostrow")
    # worst host first: most severe failure, then failure count; hosts not audited before clean ones
    order = ["gpu-incident-01", HOSTILE, "gpu-broken-05", "gpu-down-04", "gpu-healthy-02", "gpu-intel-03"]
    assert [r.find_all("th", cls="host")[0].text() for r in rows] == order
    assert [s.attrs["id"] for s in dom.find_all("section", cls="host")] == \
        ["host-%d" % list(report["hosts"]).index(name) for name in order]
    for row, name in zip(rows, order):
        host = report["hosts"][name]
        cells = row.find_all("td", cls="c")
        if host["state"] != "audited":
            assert cells == []
            unreachable = row.find_all("td", cls="unreach")
            assert unreachable and "st-" + host["state"] in unreachable[0].classes
            assert host["message"] in unreachable[0].text()
            continue
        assert [c.attrs["data-rule"] if "data-rule" in c.attrs else None for c in cells if "st-none" not in c.classes] \
            == [r for r in rules if any(f["id"] == r for f in host["findings"])]
        assert len(cells) == len(rules)
        by_rule = views._by_rule(host["findings"])
        for cell, rule in zip(cells, rules):
            expected = views._cell(by_rule[rule])[0] if rule in by_rule else "none"
            assert "st-" + expected in cell.classes, (name, rule, cell.classes)
    incident = rows[0]
    pci = incident.find_all("td", cls="c", data_rule="PCI-001")[0]
    assert "st-fail" in pci.classes and pci.text() == "8"


def test_dom_has_no_injected_markup(dom):
    assert dom.find_all("script") == [], "report.html must not contain any script element"
    for tag in ("img", "iframe", "object", "embed", "link"):
        assert dom.find_all(tag) == [], tag
    for node in dom.iter():
        assert not [a for a in node.attrs if a.lower().startswith("on")], (node.tag, node.attrs)
        href = node.attrs.get("href")
        assert href is None or href.startswith(("#", "http://", "https://")), href


def test_dom_hostile_strings_are_text(dom):
    names = [h.text() for h in dom.find_all("h3", cls="hostname")]
    assert HOSTILE in names
    body = dom.find_all("body")[0].text()
    assert IMG in body
    assert "message with <script>alert(1)</script> and &amp; and \"quotes\"\nsecond line" in body
    assert 'amd-epyc-nvidia" onload="x' in body
    assert "javascript:alert(1)" in body  # shown as text, not as a link


def test_dom_numa_bars_per_node(written, dom):
    report, dummy = written
    for index, (name, host) in enumerate(report["hosts"].items()):
        section = dom.find_all("section", id="host-%d" % index)[0]
        assert section.find_all("h3", cls="hostname")[0].text() == name
        nodes = section.find_all("g", cls="numa-node")
        assert len(nodes) == len(host["numa"]), name
        for g, node in zip(nodes, host["numa"]):
            assert g.find_all("rect", cls="used") and g.find_all("rect", cls="free")
            label = g.find_all("text", cls="pct")[0].text()
            assert label.startswith("%.1f%% free" % node["free_pct"]), label
    incident = dom.find_all("section", id="host-%d" % list(report["hosts"]).index("gpu-incident-01"))[0]
    widths = [float(r.attrs["width"]) for r in incident.find_all("rect", cls="free")]
    assert widths[1] < widths[0] / 10  # node1 at 3.2% free on half the memory of node0 at 61.3%


def test_dom_details_and_stamp(written, dom):
    report, dummy = written
    stamp = dom.find_all("div", cls="stamp")[0].text()
    assert "gpuhost.baseline 0.1.0" in stamp and "mixed" in stamp and GENERATED in stamp
    incident = dom.find_all("section", id="host-%d" % list(report["hosts"]).index("gpu-incident-01"))[0]
    problems = incident.find_all("table", cls="problems")[0].find_all("tr", cls="st-fail")
    assert len(problems) == report["hosts"]["gpu-incident-01"]["summary"]["fail"]
    first = problems[0].text()
    assert "CPU-001" in first and "acpi-cpufreq" in first and "reboot required" in first
    assert problems[0].find_all("a")[0].attrs["href"] == "https://docs.kernel.org/admin-guide/pm/amd-pstate.html"
    passes = incident.find_all("details", cls="passes")[0]
    assert "%d passing" % report["hosts"]["gpu-incident-01"]["summary"]["pass"] in passes.text()


def _png_size(path):
    with open(path, "rb") as handle:
        head = handle.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", head[16:24])


def test_screenshot_artefact(written):
    dummy, paths = written
    shot = os.path.join(OUTPUT, "report.png")
    chromium("--screenshot=" + shot, "--window-size=1400,2000", "--hide-scrollbars",
             "file://" + os.path.abspath(paths["html"]))
    assert os.path.getsize(shot) > 20000, "screenshot is suspiciously small: the page did not render"
    assert _png_size(shot) == (1400, 2000)


# --- promtool ---------------------------------------------------------------

def test_promtool_accepts_metrics(written):
    dummy, paths = written
    assert os.access(PROMTOOL, os.X_OK), (
        "Debian's prometheus package provides %s: run `make test-deps` (apt-get install prometheus)" % PROMTOOL)
    with open(paths["prom"], "rb") as handle:
        proc = subprocess.run([PROMTOOL, "check", "metrics"], stdin=handle, check=False, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=60)
    problems = (proc.stdout + proc.stderr).decode("utf-8", "replace")
    assert proc.returncode == 0 and problems.strip() == "", problems


def test_promtool_rejects_a_broken_file(tmp_path):
    # The check above means something only if promtool does flag a bad file.
    bad = tmp_path / "bad.prom"
    bad.write_text('gpuhost_baseline_host_up{host="a\nb"} 1\n')
    with open(str(bad), "rb") as handle:
        proc = subprocess.run([PROMTOOL, "check", "metrics"], stdin=handle, check=False, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, timeout=60)
    assert proc.returncode != 0


def test_metrics_label_values_round_trip(written):
    report, paths = written
    with open(paths["prom"]) as handle:
        samples = parse_metrics(handle.read())
    hosts = set(lb["host"] for dummy, lb, dummy2 in samples if "host" in lb)
    assert hosts == set(report["hosts"])
    assert IMG in set(lb.get("subject") for dummy, lb, dummy2 in samples)


# --- JUnit ------------------------------------------------------------------

def test_junit_counts_with_junitparser(written):
    report, paths = written
    xml = JUnitXml.fromfile(paths["junit"])
    suites = dict((suite.name, suite) for suite in xml)
    assert set(suites) == set(report["hosts"]) | {JUNIT_RULES_SUITE}
    assert list(suites[JUNIT_RULES_SUITE]) == [] and suites[JUNIT_RULES_SUITE].tests == 0
    for name, host in report["hosts"].items():
        counts = {Failure: 0, Error: 0, Skipped: 0}
        cases = list(suites[name])
        for case in cases:
            for result in case.result:
                counts[type(result)] += 1
        s = host["summary"]
        extra = 0 if host["state"] == "audited" else 1
        assert counts[Failure] == s["fail"] == suites[name].failures
        assert counts[Error] == s["unknown"] + extra == suites[name].errors
        assert counts[Skipped] == s["waived"] + s["not_applicable"] == suites[name].skipped
        assert len(cases) == len(host["findings"]) + extra == suites[name].tests
    incident = list(suites["gpu-incident-01"])
    pci = [c for c in incident if c.name == "PCI-001 0000:41:00.0"][0]
    assert pci.classname == "pcie"
    assert pci.result[0].message.startswith("GPU2 0000:41:00.0: MaxReadReq 512 bytes")
    assert suites[HOSTILE].name == HOSTILE


# --- Markdown ---------------------------------------------------------------

def test_markdown_rows_and_escaping(written):
    report, paths = written
    with open(paths["md"]) as handle:
        md = handle.read()
    fleet = md.split("## Fleet", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in fleet.splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + len(report["hosts"])
    assert rows[1].startswith("| gpu-incident-01 | audited | 20 | high |"), rows[1]
    headings = [line[3:] for line in md.splitlines() if line.startswith("## ")][1:]
    assert headings[:2] == ["gpu-incident-01", "&lt;script&gt;alert(1)&lt;/script&gt;"]
    incident = md.split("## gpu-incident-01", 1)[1].split("\n## ", 1)[0]
    # findings as lists, not wide tables; values in words
    assert "| status |" not in md and "### Failing (20)" in incident
    assert "- **CPU-001** (high)" in incident and "observed: acpi-cpufreq" in incident
    assert "### Not applicable (1)" in incident and "- LXC-003: profile does not ask for pinning" in incident
    assert "## &lt;script&gt;alert(1)&lt;/script&gt;" in md
    assert "<script" not in md and "<img" not in md


# --- the action plugin through ansible-playbook -------------------------------

PLAYBOOK = """
- name: Write baseline reports
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Reports
      gpuhost.baseline.baseline_report:
        report_dir: "{{ out_dir }}"
        hosts: "{{ report_hosts }}"
        profile: auto
        fail_on: "{{ fail_on | default('none') }}"
        template_dir: "{{ template_dir | default(omit) }}"
      run_once: true
"""


def run_playbook(tmp_path, hosts, out_dir, *extra):
    book = tmp_path / "report.yml"
    book.write_text(PLAYBOOK)
    variables = tmp_path / "vars.json"
    variables.write_text(json.dumps({"report_hosts": hosts, "out_dir": str(out_dir)}))
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_RETRY_FILES_ENABLED="0")
    assert "ANSIBLE_COLLECTIONS_PATH" in env  # set by tests/conftest.py
    proc = subprocess.run([ANSIBLE_PLAYBOOK, "-i", "localhost,", str(book), "-e", "@" + str(variables)] + list(extra),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=REPO, timeout=300,
                          check=False)
    return proc.returncode, proc.stdout.decode("utf-8", "replace")


def test_playbook_writes_all_five_reports_in_check_mode(tmp_path):
    out = tmp_path / "reports"
    rc, log = run_playbook(tmp_path, load_hosts(), out, "--check")
    assert rc == 0, log
    assert sorted(os.listdir(str(out))) == sorted([".gpuhost-report.json"] + [name for dummy, name in report_doc.FORMAT_FILES])
    with open(str(out / "report.json")) as handle:
        report = json.load(handle)
    assert set(report["hosts"]) == set(load_hosts())
    with open(os.path.join(REPO, "galaxy.yml")) as handle:
        version = [line.split(":", 1)[1].strip() for line in handle if line.startswith("version:")][0]
    assert report["collection_version"] == version
    assert report["hosts"]["gpu-incident-01"]["summary"]["fail"] == 20
    assert "changed=0" in log


def test_playbook_fail_on_high_fails_after_writing(tmp_path):
    out = tmp_path / "reports"
    rc, log = run_playbook(tmp_path, load_hosts(), out, "-e", "fail_on=high")
    assert rc == 2, log
    assert "16 failing finding(s) at or above severity high on 2 host(s)" in log
    assert str(out) in log
    assert sorted(os.listdir(str(out))) == sorted([".gpuhost-report.json"] + [name for dummy, name in report_doc.FORMAT_FILES])


def test_playbook_fail_on_critical_passes_without_critical_findings(tmp_path):
    rc, log = run_playbook(tmp_path, load_hosts(), tmp_path / "reports", "-e", "fail_on=critical")
    assert rc == 0, log


def test_playbook_rejects_broken_findings_before_writing(tmp_path):
    hosts = {"gpu01": {"findings": [{"id": "PCI-001", "status": "broken"}]}}
    out = tmp_path / "reports"
    rc, log = run_playbook(tmp_path, hosts, out)
    assert rc == 2, log
    assert "host gpu01, rule PCI-001: status 'broken'" in log
    assert not out.exists()


def test_playbook_uses_site_templates_by_name(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "report.html.j2").write_text(
        '{% extends "gpuhost/report.html.j2" %}{% block footer %}<footer class="site">Site NOC: '
        '{{ report.hosts | length }} hosts, first {{ report.hosts | first }}</footer>{% endblock %}')
    out = tmp_path / "reports"
    hosts = load_hosts()
    rc, log = run_playbook(tmp_path, hosts, out, "-e", "template_dir=%s" % site)
    assert rc == 0, log
    page = (out / "report.html").read_text()
    assert '<footer class="site">Site NOC: %d hosts' % len(hosts) in page
    assert "a view of report.json" not in page  # the bundled footer block was replaced
    assert "<h2>Fleet matrix</h2>" in page  # the rest comes from the bundled template
    assert HOSTILE not in page
    md = (out / "report.md").read_text()
    assert md.startswith("# GPU host baseline report")  # no site report.md.j2: bundled


def test_playbook_names_a_broken_site_template(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "report.md.j2").write_text("# ok\n{% for x in %}\n")
    rc, log = run_playbook(tmp_path, load_hosts(), tmp_path / "reports", "-e", "template_dir=%s" % site)
    assert rc == 2, log
    assert "report.md.j2" in log and "syntax error" in log and "line 2" in log
