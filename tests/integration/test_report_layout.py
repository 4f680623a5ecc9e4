# -*- coding: utf-8 -*-
"""report.html laid out by headless Chromium in a 1400x900 window (issue 14: readable at a glance;
issue 37: a fleet matrix that fits, and prints whole).

Chromium's command line is the only tool: the test renders a page, adds to a *copy* of it a
small inline script that measures the layout after load (the report itself has no script) and
writes the figures as JSON into the DOM, then reads them back with ``--dump-dom``. A screenshot
of the same page at 1400x900 is kept under the test's tmp directory, and so is the page printed
to PDF by Chromium (``--print-to-pdf``), its pages as PNG (poppler's pdftoppm) and the PDF's words
with their boxes (pdftotext -bbox), which say what the printed page shows.

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

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue import catalogue_model
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import report as report_doc
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import views

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN_JSON = os.path.join(REPO, "tests", "fixtures", "golden", "report.json")
FIXTURE = os.path.join(REPO, "tests", "fixtures", "report", "hosts.json")
CHROMIUM = "/usr/bin/chromium"
PDFTOTEXT = "/usr/bin/pdftotext"
PDFTOPPM = "/usr/bin/pdftoppm"
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
    ruleHeads: all("#matrix th.rule").map(function (th) { var b = box(th); b.rule = th.getAttribute("data-rule"); return b; }),
    hostCells: all("#matrix tbody th.host").map(box),
    rows: all("#matrix tbody th.host").map(function (th) { return th.textContent; }),
    sections: all("section.host h3.hostname").map(function (h) { return h.textContent; }),
    folded: all("#matrix-folded .mono").map(function (el) { return el.textContent; }),
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


# --- a matrix that fits (issue 37) -------------------------------------------------------------

#: The areas an operator of the seed incident must see at 1400 px without scrolling anything.
MUST_SEE = ("numa", "pcie", "nvidia", "kernel")


def _column_boxes(report, fig):
    """``{area: [header box, ...]}`` of the matrix's rule columns, the boxes as laid out at 1400 px."""
    columns = views._rule_columns(report)
    assert [b["rule"] for b in fig["ruleHeads"]] == [rid for dummy, rid, dummy2 in columns]
    out = {}
    for (area, dummy, dummy2), head in zip(columns, fig["ruleHeads"]):
        out.setdefault(area, []).append(head)
    return out


def test_matrix_areas_health_first_then_the_incident_subsystems(page):
    dummy, report, dummy2, fig, dummy3 = page
    shown = list(_column_boxes(report, fig))
    assert shown == [area for area in catalogue_model.AREA_VIEW_ORDER if area in shown]


def test_matrix_areas_visible_without_scrolling_at_1400(page):
    """Every column of the areas that matter lies inside the viewport and the matrix's own box, left
    of the totals column, with nothing scrolled; the demo fleet's matrix fits whole."""
    name, report, dummy, fig, dummy2 = page
    right = min(fig["innerWidth"], fig["wrap"]["left"] + fig["wrapClientWidth"], fig["totalsHead"]["left"] + 0.5)
    boxes = _column_boxes(report, fig)
    visible = [area for area, heads in boxes.items()
               if all(fig["wrap"]["left"] - 0.5 <= h["left"] and h["right"] <= right for h in heads)]
    for area in MUST_SEE:
        if area in boxes:
            assert area in visible, (area, visible, fig["matrix"])
    if name == "demo":
        assert visible == list(boxes), visible
        assert fig["wrapScrollWidth"] <= fig["wrapClientWidth"], "the demo fleet's matrix scrolls sideways"


def test_matrix_has_no_column_that_applies_on_no_host(page):
    name, report, dummy, fig, dummy2 = page
    for dummy3, rid, dummy4 in views._rule_columns(report):
        assert any(f["id"] == rid and f["status"] != "not_applicable"
                   for host in report["hosts"].values() for f in host["findings"]), rid
    folded = [rid for dummy3, rid, dummy4 in views._folded_columns(report)]
    assert set(b["rule"] for b in fig["ruleHeads"]).isdisjoint(folded)
    assert folded == fig["folded"]  # named under the matrix
    if name == "demo":
        # the golden inventory and the measured validation apply to no demo host
        assert {"inventory", "validation"} <= set(area for area, dummy3, dummy4 in views._folded_columns(report))


WORD = re.compile(r'<word xMin="([-0-9.]+)" yMin="([-0-9.]+)" xMax="([-0-9.]+)" yMax="([-0-9.]+)">(.*?)</word>')
PAGE = re.compile(r'<page width="([0-9.]+)" height="([0-9.]+)">')


def pdf_words(pdf):
    """``[(page number, page width, page height, word, (x0, y0, x1, y1))]`` of a PDF (pdftotext -bbox)."""
    assert os.access(PDFTOTEXT, os.X_OK) and os.access(PDFTOPPM, os.X_OK), (
        "poppler-utils is needed at %s to check the printed report.html: run `make test-deps`" % PDFTOTEXT)
    proc = subprocess.run([PDFTOTEXT, "-bbox", str(pdf), "-"], check=True, stdout=subprocess.PIPE, timeout=120)
    out = []
    for number, chunk in enumerate(proc.stdout.decode("utf-8").split("<page ")[1:], 1):
        width, height = (float(v) for v in PAGE.match("<page " + chunk).groups())
        for x0, y0, x1, y1, word in WORD.findall(chunk):
            out.append((number, width, height, html.unescape(word), (float(x0), float(y0), float(x1), float(y1))))
    return out


@pytest.fixture(scope="module")
def printed(page):
    """(the words of report.html printed to PDF by Chromium, the PDF, its pages as PNG), all kept
    beside the screenshot."""
    tmp = page[4].parent
    pdf = tmp / "report.pdf"
    chromium("--no-pdf-header-footer", "--print-to-pdf=" + str(pdf), "file://" + str(tmp / "report.html"))
    words = pdf_words(pdf)
    subprocess.run([PDFTOPPM, "-r", "50", "-png", str(pdf), str(tmp / "report-print")], check=True, timeout=300)
    return words, pdf, sorted(tmp.glob("report-print-*.png"))


def test_printed_pages_are_landscape_and_rasterise(printed):
    words, dummy, pngs = printed
    pages = set((n, w, h) for n, w, h, dummy2, dummy3 in words)
    assert pages and all(w > h for dummy2, w, h in pages)
    assert len(pngs) == max(n for n, dummy2, dummy3 in pages)
    for png in pngs:
        with open(str(png), "rb") as handle:
            head = handle.read(24)
        assert head[:8] == b"\x89PNG\r\n\x1a\n"
        width, height = struct.unpack(">II", head[16:24])
        assert width > height


def test_printed_matrix_is_whole(page, printed):
    """Every column head (a rule id, printed upright: taller than wide) and area of the matrix, every
    host of it and the totals column's head are on the paper, inside the page; the rules folded out
    of the matrix are named; the filter is not printed."""
    dummy, report, dummy2, dummy3, dummy4 = page
    words = printed[0]

    def inside(box, width, height):
        x0, y0, x1, y1 = box
        return 0 <= x0 and x1 <= width and 0 <= y0 and y1 <= height

    heads = dict((word, inside(box, w, h)) for dummy5, w, h, word, box in words if box[3] - box[1] > box[2] - box[0])
    for dummy5, rid, dummy6 in views._rule_columns(report):
        assert heads.get(rid) is True, "column %s of the matrix not printed whole: %s" % (rid, heads.get(rid))
    text = [(word, inside(box, w, h)) for dummy5, w, h, word, box in words]
    seen = set(word.rstrip(",.;:") for word, ok in text if ok)
    for area, dummy5 in views.report_view(report)["areas"]:
        assert area.upper() in seen, "area %s of the matrix not printed" % area
    for name in report["hosts"]:
        # a long host name is cut with an ellipsis in the matrix; its section names it whole
        assert any(name.startswith(word.rstrip("\u2026")) for word in seen if len(word) > 3), name
    assert "unknown" in seen and "pass" in seen  # the totals column's head, rightmost
    for dummy5, rid, dummy6 in views._folded_columns(report):
        assert rid in seen, rid
    joined = " ".join(word for word, ok in text)
    for words_of_filter in ("Show only", "any area", "any rule", "no script"):
        assert words_of_filter not in joined, "the filter is printed"
