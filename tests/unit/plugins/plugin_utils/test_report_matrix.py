# -*- coding: utf-8 -*-
"""report.html's fleet matrix fits (issue 37, "a matrix that fits"): areas in the order an operator
reads them (catalogue_model.AREA_TABLE, the one list of areas), the rules that apply on no host named
under the matrix instead of a column of "–" each, and a print stylesheet."""

import html.parser
import re

import pytest

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue import catalogue_model
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import views
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import build_report

GENERATED = "2025-06-01T12:00:00+00:00"
AREA_OF_PREFIX = dict((prefix, area) for area, prefix in catalogue_model.AREA_PREFIX.items())


def finding(rule, status="pass", subject=None, area=None):
    return {"id": rule, "title": "title of %s" % rule, "area": area or AREA_OF_PREFIX[rule.split("-")[0]],
            "severity": "medium", "status": status, "subject": subject, "expected": 1, "observed": 1,
            "message": "why %s" % rule if status == "not_applicable" else "m", "fix": "f", "reboot_required": False}


def fleet(hosts, **more):
    hosts = dict((name, {"findings": found}) for name, found in hosts.items())
    for name, state in more.items():
        hosts[name] = {"findings": [], "state": state, "message": "no route to host"}
    return build_report(hosts, profile="auto", generated=GENERATED, collection_version="0.1.0")


class Tree(html.parser.HTMLParser):
    def __init__(self):
        html.parser.HTMLParser.__init__(self, convert_charrefs=True)
        self.elements = []
        self.ids = set()

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.elements.append((tag, attrs))
        if "id" in attrs:
            self.ids.add(attrs["id"])


def parse(page):
    tree = Tree()
    tree.feed(page)
    tree.close()
    return tree


def folded_line(page):
    match = re.search(r'<p class="folded" id="matrix-folded">(.*?)</p>', page, re.S)
    assert match, "no line of folded rules under the matrix"
    return match.group(1)


def test_the_view_order_of_the_areas_is_the_catalogue_areas_list():
    assert sorted(catalogue_model.AREA_VIEW_ORDER) == sorted(catalogue_model.AREA_NAMES)
    assert catalogue_model.AREA_VIEW_ORDER[:6] == ("health", "pcie", "numa", "cpu", "kernel", "nvidia")
    assert catalogue_model.AREA_VIEW_ORDER[-2:] == ("inventory", "validation")
    # an area this catalogue does not know (a report of another version) after them, alphabetically
    keys = sorted(["zeta", "validation", "alpha", "health", ""], key=catalogue_model.area_view_key)
    assert keys == ["health", "validation", "", "alpha", "zeta"]


def test_columns_by_area_in_view_order_then_rule_id():
    found = [finding(rid) for rid in ("VAL-001", "CPU-002", "INV-001", "KERNEL-001", "CPU-001", "NVIDIA-001",
                                      "NUMA-001", "PCI-002", "PCI-001", "HEALTH-003", "HEALTH-001",
                                      "LXC-001", "IOMMU-001")]
    found.append(finding("SITE-001", area="site"))
    report = fleet({"a": found})
    columns = views._rule_columns(report)
    assert [rid for dummy, rid, dummy2 in columns] == [
        "HEALTH-001", "HEALTH-003", "PCI-001", "PCI-002", "NUMA-001", "CPU-001", "CPU-002", "KERNEL-001",
        "NVIDIA-001", "IOMMU-001", "LXC-001", "INV-001", "VAL-001", "SITE-001"]
    view = views.report_view(report)
    assert [area for area, dummy in view["areas"]] == [
        "health", "pcie", "numa", "cpu", "kernel", "nvidia", "iommu", "lxc", "inventory", "validation", "site"]
    assert [area for dummy, area in view["filter_areas"]] == [area for area, dummy in view["areas"]]


def test_a_rule_that_applies_on_no_host_is_folded_out_of_the_matrix():
    report = fleet({
        "a": [finding("PCI-001", "fail"), finding("INV-001", "not_applicable"), finding("VAL-001", "not_applicable"),
              finding("NUMA-001", "not_applicable"), finding("CPU-001", "not_applicable", "cpu0"),
              finding("CPU-001", "pass", "cpu1")],
        "b": [finding("PCI-001", "pass"), finding("INV-001", "not_applicable"), finding("NUMA-001", "unknown")],
    }, c="unreachable")
    columns = [rid for dummy, rid, dummy2 in views._rule_columns(report)]
    folded = [rid for dummy, rid, dummy2 in views._folded_columns(report)]
    # NUMA-001 not applicable on a, unknown on b; CPU-001 not applicable on one subject: columns.
    # INV-001 not applicable on both; VAL-001 on a, not evaluated on b: folded
    assert columns == ["PCI-001", "NUMA-001", "CPU-001"]
    assert folded == ["INV-001", "VAL-001"]
    view = views.report_view(report)
    assert [len(entry["cells"]) for entry in view["hosts"] if entry["cells"] is not None] == [3, 3]
    # the filter offers the matrix's rules (a folded one has no problem to show)...
    assert [rid for dummy, rid, dummy2 in view["filter_rules"]] == columns
    # ...and every finding still carries its area and rule classes
    assert set(view["fclass"]) == set(columns + folded)
    assert [(r["id"], r["area"], r["title"]) for r in view["folded"]] == [
        ("INV-001", "inventory", "title of INV-001"), ("VAL-001", "validation", "title of VAL-001")]
    assert [(area, [r["id"] for r in rules]) for area, rules in view["folded_areas"]] == [
        ("inventory", ["INV-001"]), ("validation", ["VAL-001"])]


def test_folded_rules_named_under_the_matrix_with_a_link_to_why():
    report = fleet({"a": [finding("PCI-001", "fail"), finding("INV-001", "not_applicable")],
                    "b": [finding("PCI-001", "pass"), finding("INV-001", "not_applicable"),
                          finding("VAL-001", "not_applicable")]})
    page = views.render_html(report)
    tree = parse(page)
    assert [a["data-rule"] for t, a in tree.elements if t == "th" and "rule" in a.get("class", "").split()] == ["PCI-001"]
    line = folded_line(page)
    assert "2 rule(s)" in line
    links = dict((a["title"], a["href"]) for t, a in parse(line).elements if t == "a")
    # the first host in the page's order with the finding: a fails, so a first
    a_index = list(report["hosts"]).index("a")
    b_index = list(report["hosts"]).index("b")
    assert links == {"title of INV-001": "#host-%d-INV-001" % a_index, "title of VAL-001": "#host-%d-VAL-001" % b_index}
    for href in links.values():
        assert href[1:] in tree.ids  # the host section's not-applicable row, with its reason


def test_folded_rules_of_a_fleet_in_groups_link_to_the_rules_table():
    hosts = dict(("h%02d" % n, [finding("PCI-001", "fail" if n % 2 else "pass"), finding("INV-001", "not_applicable")])
                 for n in range(6))
    report = fleet(hosts)
    page = views.render_html(report, inline_hosts=2)
    tree = parse(page)
    links = [a["href"] for t, a in parse(folded_line(page)).elements if t == "a"]
    assert len(links) == 1 and links[0].startswith("#rule-") and links[0][1:] in tree.ids
    # the host pages link to the same row for the folded rule's text
    pages = views.render_host_pages(report, "html", inline_hosts=2)
    assert all(links[0] in text for text in pages.values())


def test_nothing_folded_no_line():
    report = fleet({"a": [finding("PCI-001", "fail")]})
    assert 'id="matrix-folded"' not in views.render_html(report)


def print_css(page):
    styles = "".join(re.findall(r"<style>(.*?)</style>", page, re.S))
    blocks = re.findall(r"@media print\{(.*?)\n\}", styles, re.S)
    assert blocks, "no print stylesheet"
    return "\n".join(blocks)


@pytest.mark.parametrize("rules, zoomed", [(10, False), (94, True)])
def test_print_stylesheet_hides_the_filter_and_keeps_the_matrix_whole(rules, zoomed):
    report = fleet({"a": [finding("HEALTH-%03d" % n, "fail") for n in range(1, rules + 1)]})
    css = print_css(views.render_html(report))
    assert ".filter{display:none}" in css
    assert "@page{size:A4 landscape" in css
    assert ".matrix-wrap{overflow:visible" in css
    zoom = re.search(r"\.matrix-wrap\{[^}]*zoom:([0-9.]+)", css)
    assert bool(zoom) == zoomed
    if zoom:
        assert 0.3 < float(zoom.group(1)) < 1


def test_the_top_counts_hosts_per_kind_of_work():
    # issue 37 item 5: hosts, not findings, per kind (fault: health; drift: the rest), each host at
    # its worst severity of the kind; an old document without the counts gets them from its hosts
    def sev(item, severity):
        return dict(item, severity=severity)

    doc = fleet({
        "a": [sev(finding("HEALTH-001", "fail", "gpu0"), "critical"), sev(finding("HEALTH-002", "fail", "gpu1"), "high"),
              sev(finding("CPU-001", "fail"), "high")],
        "b": [sev(finding("CPU-001", "fail"), "high"), sev(finding("NUMA-001", "fail"), "low")],
        "c": [finding("CPU-001")],
    })
    assert doc["totals"]["hosts_by_kind"]["fault"]["critical"] == 1
    assert doc["totals"]["hosts_by_kind"]["drift"] == {"critical": 0, "high": 2, "medium": 0, "low": 0, "info": 0}
    want = [("drift", "drift (configuration)", [("high", 2)]),
            ("fault", "faults (hardware, GPU health)", [("critical", 1)])]
    assert views.kind_rows(doc) == want
    old = dict(doc, totals=dict((k, v) for k, v in doc["totals"].items() if k != "hosts_by_kind"))
    assert views.kind_rows(old) == want
    page = re.sub(r"<[^>]+>", "", views.render_html(doc))
    assert "faults (hardware, GPU health) critical1" in page and "drift (configuration) high2" in page
