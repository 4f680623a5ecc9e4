"""The reports of the bundled demo snapshots stay what they were (architecture issue).

``tests/fixtures/golden/`` holds report.json, report.md, report.html, junit.xml, findings.csv and
metrics.prom of ``playbooks/audit.yml`` over the four demo snapshots, written before the
code moved into its layered layout and the views into templates. Every file must stay byte
for byte (after normalising the generation time); ``report.html`` is also compared element by
element (tags, attributes, text, character references), which names the first difference.

After an intended change of the reports, regenerate them with
``GPUHOST_UPDATE_GOLDEN=1 pytest tests/integration/test_golden_reports.py`` and review the diff.
"""
import html.parser
import json
import os
import re
import shutil
import subprocess

import pytest

from helpers.golden import FILES, normalise, with_golden_cluster
from helpers.runner import run_playbook, stdout_of
from test_audit_playbook import fleet
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import expand_document

GOLDEN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "golden")
UPDATE = os.environ.get("GPUHOST_UPDATE_GOLDEN") == "1"

pytestmark = pytest.mark.slow


class Events(html.parser.HTMLParser):
    """A page as (kind, tag, sorted attributes / text) events; whitespace-only text between tags
    dropped, white space in text collapsed (as a browser shows it), character references kept
    as written (so escaping is compared too)."""

    def __init__(self):
        super().__init__(convert_charrefs=False)
        self.events = []

    def handle_starttag(self, tag, attrs):
        self.events.append(("start", tag, tuple(sorted(attrs))))

    def handle_endtag(self, tag):
        self.events.append(("end", tag, None))

    def handle_data(self, data):
        if data.strip():
            self.events.append(("text", None, re.sub(r"\s+", " ", data).strip()))

    def handle_entityref(self, name):
        self.events.append(("text", None, "&%s;" % name))

    def handle_charref(self, name):
        self.events.append(("text", None, "&#%s;" % name))

    def handle_decl(self, decl):
        self.events.append(("decl", None, decl))


def html_events(text):
    parser = Events()
    parser.feed(text)
    parser.close()
    # adjacent text pieces (data, references) joined: a template may split them differently
    out = []
    for event in parser.events:
        if out and event[0] == "text" and out[-1][0] == "text":
            out[-1] = ("text", None, out[-1][2] + event[2])
        else:
            out.append(event)
    return out


@pytest.fixture(scope="module")
def reports(snapshot_trees, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("golden")
    trees = dict((name, snapshot_trees[name]) for name in ("incident", "healthy", "intel", "hostile"))
    # gpuhost_cluster from the inventory group, one host without: both forms are in the golden files
    inventory = with_golden_cluster(fleet(trees, live=False))
    runner = run_playbook(tmp, "audit.yml", inventory,
                          extravars={"gpuhost_report_dir": str(tmp / "reports")}, cmdline="--check")
    assert runner.rc == 0, stdout_of(runner)
    out = {}
    for name in FILES:
        with open(str(tmp / "reports" / name), encoding="utf-8") as handle:
            out[name] = normalise(name, handle.read())
    if UPDATE:
        os.makedirs(GOLDEN, exist_ok=True)
        for name, text in out.items():
            with open(os.path.join(GOLDEN, name), "w", encoding="utf-8") as handle:
                handle.write(text)
    return out


def golden(name):
    with open(os.path.join(GOLDEN, name), encoding="utf-8") as handle:
        return handle.read()


@pytest.mark.parametrize("name", FILES)
def test_byte_for_byte(reports, name):
    assert reports[name] == golden(name), "%s differs from tests/fixtures/golden/%s" % (name, name)


def jq(program, path):
    binary = shutil.which("jq")
    assert binary, "jq is not installed: make test-deps installs it (DEB_TEST_PACKAGES)"
    done = subprocess.run([binary, "-r", program, str(path)], capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.split("\n")[:-1]


def test_plain_jq_reads_the_findings(reports, tmp_path):
    # report.json schema 3 (issue 19): findings are mappings with named keys, no expander needed
    path = tmp_path / "report.json"
    path.write_text(reports["report.json"], encoding="utf-8")
    document = json.loads(reports["report.json"])
    assert document["schema"] == 3
    full = expand_document(document)
    failing = [f["id"] for host in full["hosts"].values() for f in host["findings"] if f["status"] == "fail"]
    assert failing and jq('.hosts[].findings[] | select(.status=="fail") | .id', path) == failing
    # per host, the count of failing findings is the host's summary; the rule text is under rules
    counts = jq('.hosts | to_entries[] | "\\(.key) \\([.value.findings[] | select(.status=="fail")] | length)"', path)
    assert counts == ["%s %d" % (name, host["summary"]["fail"]) for name, host in full["hosts"].items()]
    first = full["hosts"]["demo-incident"]["findings"][0]
    assert jq('.rules[.hosts["demo-incident"].findings[0].id].title', path) == [first["title"]]


def test_html_same_elements_text_and_escaping(reports):
    got, want = html_events(reports["report.html"]), html_events(golden("report.html"))
    for index, (a, b) in enumerate(zip(got, want)):
        assert a == b, "report.html differs at event %d: %r != golden %r" % (index, a, b)
    assert len(got) == len(want)


def test_hostile_values_escaped_as_in_golden(reports):
    # the hostile snapshot's markup never reaches the page as markup
    page = reports["report.html"]
    assert "<script>alert(1)</script>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>" not in reports["report.md"]


def test_html_events_see_a_changed_escape():
    # the comparison itself notices an escaping difference and a moved attribute value
    assert html_events("<p>a &amp; b</p>") != html_events("<p>a &#38; b</p>")
    assert html_events('<p class="x">t</p>') != html_events('<p class="y">t</p>')
    assert html_events("<div>\n  <p>t  u</p>\n</div>") == html_events("<div><p>t u</p></div>")
