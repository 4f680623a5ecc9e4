# -*- coding: utf-8 -*-
"""views._GroupCells: a group row's matrix cells gathered a host at a time (issue 20: the report
writer no longer keeps every host's cells to make its group's row), checked against the rule as
stated over all the hosts' cells at once."""

from hypothesis import given, settings, strategies as st

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import views
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.findings import STATUS_LABELS, STATUS_WORST_FIRST

COLUMNS = [("cpu", "CPU-001", "t1"), ("pcie", "PCI-001", "t2"), ("pcie", "PCI-004", "t3")]


def stated(member_cells):
    """The group row over all its hosts' cells at once: per rule the worst status; the first host's
    count, counts and mark when every host's cell is the same, else how many hosts have which status."""
    if len(member_cells) == 1:
        return member_cells[0]
    cells = []
    for position, (dummy, rid, dummy_title) in enumerate(COLUMNS):
        mine = [cells_of[position] for cells_of in member_cells]
        per_status = {}
        for cell in mine:
            per_status[cell["status"]] = per_status.get(cell["status"], 0) + 1
        worst = next((s for s in STATUS_WORST_FIRST if s in per_status), None)
        if worst is None:
            cells.append({"rule": rid, "status": None})
            continue
        key = [(c["status"], c.get("count"), c.get("counts")) for c in mine]
        same = all(k == key[0] for k in key)
        text = ", ".join("%s on %d host(s)" % (STATUS_LABELS.get(s, "not evaluated") if s else "not evaluated",
                                               per_status[s]) for s in list(STATUS_WORST_FIRST) + [None] if s in per_status)
        cells.append({"rule": rid, "status": worst, "count": mine[0].get("count") if same else "",
                      "counts": mine[0]["counts"] if same else text, "mark": mine[0].get("mark") if same else None})
    return cells


CELL = st.one_of(
    st.just(None),
    st.tuples(st.sampled_from(list(STATUS_WORST_FIRST)), st.integers(1, 3)))


def make_cells(spec):
    cells = []
    for (dummy, rid, dummy_title), item in zip(COLUMNS, spec):
        if item is None:
            cells.append({"rule": rid, "status": None})
        else:
            status, count = item
            cells.append({"rule": rid, "status": status, "count": count, "counts": "%d %s" % (count, status),
                          "mark": str(count) if count > 1 else None})
    return cells


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(CELL, min_size=3, max_size=3), min_size=1, max_size=6))
def test_gathered_a_host_at_a_time_as_stated_over_all_hosts(specs):
    members = [make_cells(spec) for spec in specs]
    gathered = views._GroupCells(members[0])
    for cells in members[1:]:
        gathered.add(cells)
    assert gathered.cells(COLUMNS) == stated(members)


def test_hosts_not_audited_have_no_cells():
    gathered = views._GroupCells(None)
    gathered.add(None)
    assert gathered.cells(COLUMNS) is None


def test_the_same_cell_on_every_host_keeps_its_count_else_hosts_per_status():
    first = make_cells([("pass", 8), ("fail", 2), None])
    other = make_cells([("pass", 8), ("pass", 2), ("pass", 1)])
    gathered = views._GroupCells(first)
    gathered.add(first)
    gathered.add(other)
    cells = gathered.cells(COLUMNS)
    assert cells[0] == {"rule": "CPU-001", "status": "pass", "count": 8, "counts": "8 pass", "mark": "8"}
    assert cells[1]["status"] == "fail" and cells[1]["count"] == "" and cells[1]["mark"] is None
    assert cells[1]["counts"] == "%s on 2 host(s), %s on 1 host(s)" % (STATUS_LABELS["fail"], STATUS_LABELS["pass"])
    assert cells[2]["counts"] == "%s on 1 host(s), not evaluated on 2 host(s)" % STATUS_LABELS["pass"]
