# -*- coding: utf-8 -*-
"""report.html laid out by headless Chromium in a 1400x900 window (issue 14: readable at a glance).

Chromium's command line is the only tool: the test renders a page, adds to a *copy* of it a
small inline script that measures the layout after load (the report itself has no script) and
writes the figures as JSON into the DOM, then reads them back with ``--dump-dom``. A screenshot
of the same page at 1400x900 is kept under the test's tmp directory.

Two pages: the demo fleet's report (the golden report.json of the four demo snapshots, rendered
again by the current views; a view is a pure function of report.json) and the report fixture
(unreachable and failed hosts, hostile values).
"""

import html
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile

import pytest

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import report as report_doc
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import views

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN_JSON = os.path.join(REPO, "tests", "fixtures", "golden", "report.json")
FIXTURE = os.path.join(REPO, "tests", "fixtures", "report", "hosts.json")
CHROMIUM = "/usr/bin/chromium"
WIDTH, HEIGHT = 1400, 900

pytestmark = pytest.mark.slow

#: Measures the page once laid out; the result goes into <pre id="layout-result"> as JSON.
PROBE = r"""<script>
(function () {
  function box(el) {
    if (!el) { return null; }
    var r = el.getBoundingClientRect();
    return {left: r.left, right: r.right, top: r.top, bottom: r.bottom, width: r.width, height: r.height};
  }
  var all = function (sel, root) { return Array.prototype.slice.call((root || document).querySelectorAll(sel)); };
  var se = document.scrollingElement, wrap = document.querySelector(".matrix-wrap");
  var out = {
    innerWidth: window.innerWidth, innerHeight: window.innerHeight,
    scrollWidth: se.scrollWidth, clientWidth: se.clientWidth,
    wrap: box(wrap), wrapScrollWidth: wrap.scrollWidth, wrapClientWidth: wrap.clientWidth,
    matrix: box(document.getElementById("matrix")),
    totalsHead: box(document.getElementById("matrix-totals")),
    totals: all("#matrix td.sum").map(box),
    hostCells: all("#matrix tbody th.host").map(box),
    rows: all("#matrix tbody th.host").map(function (th) { return th.textContent; }),
    sections: all("section.host h3.hostname").map(function (h) { return h.textContent; }),
    widest: null
  };
  all("body *").forEach(function (el) {
    var r = el.getBoundingClientRect();
    if (r.right > window.innerWidth + 0.5 && !el.closest(".matrix-wrap") && (!out.widest || r.right > out.widest.right)) {
      out.widest = {tag: el.tagName, cls: el.className && String(el.className), right: r.right};
    }
  });
  wrap.scrollLeft = wrap.scrollWidth;  // the rule columns scrolled to their end
  out.totalsScrolled = box(document.getElementById("matrix-totals"));
  out.hostScrolled = box(document.querySelector("#matrix tbody th.host"));
  wrap.scrollLeft = 0;
  var first = document.querySelector("section.host");
  out.firstVisibleText = first.innerText;
  var na = first.querySelector("details.na");
  out.firstNotApplicable = na ? na.textContent : "";
  out.firstNotApplicableOpen = na ? na.open : null;
  var pre = document.createElement("pre");
  pre.id = "layout-result";
  pre.style.display = "none";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


def chromium(*args):
    assert os.access(CHROMIUM, os.X_OK), (
        "Debian's chromium is needed at %s to check report.html: run `make test-deps`" % CHROMIUM)
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    try:
        cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--window-size=%d,%d" % (WIDTH, HEIGHT), "--user-data-dir=" + profile] + list(args)
        proc = subprocess.run(cmd, check=False, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=180)
        assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")[-2000:]
        return proc.stdout.decode("utf-8")
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def _demo_report():
    with open(GOLDEN_JSON, encoding="utf-8") as handle:
        return report_doc.expand_document(json.load(handle))  # stored (schema 3): as build_report made it


def _fixture_report():
    with open(FIXTURE, encoding="utf-8") as handle:
        hosts = json.load(handle)["hosts"]
    return report_doc.build_report(hosts, profile="auto", generated="2025-06-01T12:00:00+00:00",
                                   collection_version="0.1.0")


PAGES = {"demo": (_demo_report, "demo-incident"), "fixture": (_fixture_report, "gpu-incident-01")}


@pytest.fixture(scope="module", params=sorted(PAGES))
def page(request, tmp_path_factory):
    """(name, report, incident host, layout figures, screenshot path) of one page."""
    build, incident = PAGES[request.param]
    report = build()
    tmp = tmp_path_factory.mktemp("layout-%s" % request.param)
    page_html = views.render_html(report)
    assert "<script" not in page_html
    plain = tmp / "report.html"
    plain.write_text(page_html, encoding="utf-8")
    probed = tmp / "report.probe.html"
    probed.write_text(page_html.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = chromium("--dump-dom", "file://" + str(probed))
    (tmp / "report.probe.dom.html").write_text(dom, encoding="utf-8")
    match = re.search(r'<pre id="layout-result"[^>]*>(.*?)</pre>', dom, re.S)
    assert match, "the layout probe did not run"
    figures = json.loads(html.unescape(match.group(1)))
    (tmp / "layout.json").write_text(json.dumps(figures, indent=1), encoding="utf-8")
    shot = tmp / "report-1400x900.png"
    chromium("--screenshot=" + str(shot), "file://" + str(plain))
    return request.param, report, incident, figures, shot


def test_screenshot_at_1400x900(page):
    dummy, dummy2, dummy3, dummy4, shot = page
    with open(str(shot), "rb") as handle:
        head = handle.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", head[16:24]) == (WIDTH, HEIGHT)
    assert os.path.getsize(str(shot)) > 20000, "screenshot is suspiciously small: the page did not render"


def test_page_does_not_scroll_sideways(page):
    dummy, dummy2, dummy3, fig, dummy4 = page
    assert fig["innerWidth"] == WIDTH
    assert fig["scrollWidth"] <= fig["innerWidth"], fig["widest"]
    assert fig["scrollWidth"] <= fig["clientWidth"], fig["widest"]
    assert fig["widest"] is None, fig["widest"]


def test_matrix_and_totals_column_in_the_viewport(page):
    dummy, dummy2, dummy3, fig, dummy4 = page
    assert fig["wrap"]["left"] >= 0 and fig["wrap"]["right"] <= fig["innerWidth"]
    assert fig["totals"], "no totals cells"
    for box in [fig["totalsHead"]] + fig["totals"]:
        assert 0 <= box["left"] and box["right"] <= fig["innerWidth"], box
        assert box["right"] <= fig["wrap"]["right"] + 0.5, box
    # the rule columns scroll inside their container; host and totals columns stay put
    if fig["wrapScrollWidth"] > fig["wrapClientWidth"]:
        assert fig["totalsScrolled"]["right"] == pytest.approx(fig["totalsHead"]["right"], abs=1)
        assert fig["hostScrolled"]["left"] == pytest.approx(fig["hostCells"][0]["left"], abs=1)
    assert fig["hostCells"][0]["left"] >= fig["wrap"]["left"] - 0.5


def test_incident_host_first(page):
    dummy, report, incident, fig, dummy2 = page
    assert fig["sections"][0] == incident
    assert fig["rows"][0] == incident
    assert fig["sections"] == fig["rows"] == [name for dummy, name, dummy2 in views.hosts_worst_first(report)]
    assert fig["firstVisibleText"].lstrip().startswith(incident)


#: What must not be seen in the incident host's section: JSON spellings and jmespath.
RAW = [
    (r"\[\s*\]", "empty JSON list"),
    (r"\{\s*\}", "empty JSON object"),
    (r"\bnull\b", "null"),
    (r"\{\s*\"", "JSON object"),
    (r"\[\s*\"", "JSON list of strings"),
    (r"\"\s*:\s", "JSON key"),
    (r"`", "jmespath literal"),
    (r"&&|\|\|", "jmespath operator"),
    (r"\b(?:derived|params|nvidia|cpu|numa|lxc)\.[a-z_]+(?:\.[a-z_]+)*\s*(?:is|!=|==|&&)", "jmespath path"),
    (r"\blength\(", "jmespath function"),
]


def test_incident_section_reads_as_words(page):
    dummy, dummy2, dummy3, fig, dummy4 = page
    visible = fig["firstVisibleText"]
    for pattern, what in RAW:
        found = re.search(pattern, visible)
        assert not found, "%s in the incident section: ...%s..." % (
            what, visible[max(0, found.start() - 80):found.end() + 80])


def test_not_applicable_folded_with_reasons_in_words(page):
    dummy, report, incident, fig, dummy2 = page
    host = report["hosts"][incident]
    if not host["summary"]["not_applicable"]:
        pytest.skip("no not-applicable finding on %s" % incident)
    assert fig["firstNotApplicableOpen"] is False
    assert "%d not applicable" % host["summary"]["not_applicable"] in fig["firstNotApplicable"]
    for pattern, what in RAW:
        assert not re.search(pattern, fig["firstNotApplicable"]), what
