# -*- coding: utf-8 -*-
"""NUMA facts: node meminfo, distances, numa_maps, balance summary, processes, broken input, fuzzing."""

from __future__ import absolute_import, division, print_function

import json
import os

import pytest
from hypothesis import given, settings, strategies as st

from helpers.tree import write_tree

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import numa as _numa
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.numa import (
    node_entry,
    parse_distance,
    parse_node_meminfo,
    parse_numa_maps,
    summarize,
    top_processes,
)
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root

FUZZ = settings(max_examples=200, deadline=None)
NODE = "/sys/devices/system/node"


# -- samples in the kernel's formats (drivers/base/node.c, fs/proc/task_mmu.c) ---------------------

MEMINFO_KEYS = (
    ("MemTotal", "kB"), ("MemFree", "kB"), ("MemUsed", "kB"), ("SwapCached", "kB"), ("Active", "kB"),
    ("Inactive", "kB"), ("Active(anon)", "kB"), ("Inactive(anon)", "kB"), ("Active(file)", "kB"),
    ("Inactive(file)", "kB"), ("Unevictable", "kB"), ("Mlocked", "kB"), ("Dirty", "kB"), ("Writeback", "kB"),
    ("FilePages", "kB"), ("Mapped", "kB"), ("AnonPages", "kB"), ("Shmem", "kB"), ("KernelStack", "kB"),
    ("PageTables", "kB"), ("SecPageTables", "kB"), ("NFS_Unstable", "kB"), ("Bounce", "kB"),
    ("WritebackTmp", "kB"), ("KReclaimable", "kB"), ("Slab", "kB"), ("SReclaimable", "kB"),
    ("SUnreclaim", "kB"), ("AnonHugePages", "kB"), ("ShmemHugePages", "kB"), ("ShmemPmdMapped", "kB"),
    ("FileHugePages", "kB"), ("FilePmdMapped", "kB"), ("Unaccepted", "kB"),
    ("HugePages_Total", ""), ("HugePages_Free", ""), ("HugePages_Surp", ""),
)


def node_meminfo(node, total, free, file_pages, anon_pages, huge_total=0, huge_free=0):
    values = {"MemTotal": total, "MemFree": free, "MemUsed": total - free, "FilePages": file_pages,
              "AnonPages": anon_pages, "Active(file)": file_pages // 3, "Inactive(file)": file_pages - file_pages // 3,
              "Active(anon)": anon_pages, "Slab": 1581736, "SReclaimable": 893212, "SUnreclaim": 688524,
              "KernelStack": 29968, "PageTables": 31232, "AnonHugePages": 1894400,
              "HugePages_Total": huge_total, "HugePages_Free": huge_free}
    lines = []
    for key, unit in MEMINFO_KEYS:
        label = "Node %d %s:" % (node, key)
        if unit:
            lines.append("%-24s %8d kB" % (label, values.get(key, 0)))
        else:
            lines.append("%-24s%5d" % (label, values.get(key, 0)))
    return "\n".join(lines) + "\n"


EPYC_NODE0 = node_meminfo(0, 263856900, 241823456, 14420096, 3101008, 16, 12)
EPYC_NODE1 = node_meminfo(1, 264183500, 105673400, 128934880, 20118444, 16, 16)

NUMA_MAPS = """\
55d4c8a00000 default file=/usr/bin/python3.11 mapped=143 mapmax=4 N0=143 kernelpagesize_kB=4
55d4c8c8f000 default file=/usr/bin/python3.11 anon=5 dirty=5 mapped=74 mapmax=2 N0=74 kernelpagesize_kB=4
55d4ca1e5000 default heap anon=2341 dirty=2341 active=1204 N0=1800 N1=541 kernelpagesize_kB=4
7f1c00000000 bind:1 file=/dev/hugepages/weights huge dirty=1 N1=1 kernelpagesize_kB=1048576
7f2a3c000000 interleave:0-1 anon=65536 dirty=65536 N0=32768 N1=32768 kernelpagesize_kB=4
7f2a3fe00000 default
7f2a40000000 default file=/dev/nvidia0 mapped=0
7ffd1c7e2000 default stack anon=33 dirty=33 N0=33 kernelpagesize_kB=4
7ffd1c7f6000 default
"""


# -- node meminfo -------------------------------------------------------------------------------------

def test_node_meminfo_epyc():
    values = parse_node_meminfo(EPYC_NODE0)
    assert values["MemTotal"] == 263856900
    assert values["MemFree"] == 241823456
    assert values["FilePages"] == 14420096
    assert values["AnonPages"] == 3101008
    assert values["Active(anon)"] == 3101008
    assert (values["HugePages_Total"], values["HugePages_Free"], values["HugePages_Surp"]) == (16, 12, 0)
    assert len(values) == len(MEMINFO_KEYS)


def test_node_meminfo_truncated_keeps_lines_before_the_cut():
    cut = EPYC_NODE1[:EPYC_NODE1.index("Node 1 Active:") + 10]
    values = parse_node_meminfo(cut)
    assert values == {"MemTotal": 264183500, "MemFree": 105673400, "MemUsed": 158510100, "SwapCached": 0}


@pytest.mark.parametrize("data", [None, "", b"", b"\x00\xff" * 40, "Node 0 MemTotal: lots kB\n",
                                  "Node 0 MemTotal 12 kB\n", "Node 0 MemTotal: 12 MB\n", "MemTotal: 12 kB\n", 7])
def test_node_meminfo_broken(data):
    assert "MemTotal" not in parse_node_meminfo(data)


@FUZZ
@given(st.one_of(st.text(), st.binary(),
                 st.lists(st.sampled_from(["Node", " 0", " 1", " MemTotal:", " MemFree:", " HugePages_Total:",
                                           " 123", " -5", " kB", "\n", ":", " x"]), max_size=40).map("".join)))
def test_node_meminfo_fuzz(data):
    values = parse_node_meminfo(data)
    assert all(isinstance(value, int) for value in values.values())


@pytest.mark.parametrize("text, expected", [
    ("10 32\n", [10, 32]),
    ("10 12 32 32 32 32 32 32\n", [10, 12, 32, 32, 32, 32, 32, 32]),
    ("", None),
    ("10 x", None),
    (None, None),
])
def test_distance(text, expected):
    assert parse_distance(text) == expected


# -- numa_maps ------------------------------------------------------------------------------------------

def test_numa_maps_sums_pages_per_node():
    parsed = parse_numa_maps(NUMA_MAPS)
    assert parsed["pages_per_node"] == {"0": 143 + 74 + 1800 + 32768 + 33, "1": 541 + 1 + 32768}
    assert parsed["pages"] == sum(parsed["pages_per_node"].values())
    # the 1 GiB huge page counts as one page but as 1048576 kB
    assert parsed["kb_per_node"]["1"] == (541 + 32768) * 4 + 1048576
    assert parsed["kb"] == sum(parsed["kb_per_node"].values())


def test_numa_maps_keys_are_strings_sorted_numerically():
    parsed = parse_numa_maps("1 default anon=3 N10=1 N2=1 N0=1 kernelpagesize_kB=4\n")
    assert list(parsed["pages_per_node"]) == ["0", "2", "10"]


def test_numa_maps_without_page_size_gives_unknown_kb():
    parsed = parse_numa_maps("1000 default anon=3 N0=3\n2000 default anon=1 N1=1 kernelpagesize_kB=4\n")
    assert parsed["pages_per_node"] == {"0": 3, "1": 1}
    assert parsed["kb"] is None and parsed["kb_per_node"] is None


@pytest.mark.parametrize("data", [None, "", b"", "7f00 default\n", "garbage N=3 Nx=4 N0= N0=-1 N0=1e3\n",
                                  b"\xff\xfe\x00N0=\xff", 3.5])
def test_numa_maps_broken(data):
    parsed = parse_numa_maps(data)
    assert parsed["pages"] == 0 and parsed["pages_per_node"] == {}


@FUZZ
@given(st.one_of(st.text(), st.binary(),
                 st.lists(st.sampled_from(["7f00 default", " N0=", " N1=", " N12=", "5", "0", " anon=2",
                                           " kernelpagesize_kB=", "4", "2048", "\n", " ", "=", "N", "x"]),
                          max_size=40).map("".join)))
def test_numa_maps_fuzz(data):  # found: ' kernelpagesize_kB=0 N0=5' gave 0 kB for 5 pages
    parsed = parse_numa_maps(data)
    assert parsed["pages"] == sum(parsed["pages_per_node"].values())
    assert all(key.isdigit() for key in parsed["pages_per_node"])
    if parsed["kb"] is not None:
        assert parsed["kb"] >= parsed["pages"]


def test_numa_maps_page_size_zero_is_unknown_not_zero_kilobytes():
    parsed = parse_numa_maps(" kernelpagesize_kB=0 N0=5")
    assert (parsed["pages"], parsed["kb"], parsed["kb_per_node"]) == (5, None, None)


# -- summary --------------------------------------------------------------------------------------------

def test_node_entry_and_summary_two_epyc_nodes():
    nodes = [
        node_entry(0, "0-31,64-95", parse_node_meminfo(EPYC_NODE0), [10, 32]),
        node_entry(1, "32-63,96-127", parse_node_meminfo(EPYC_NODE1), [32, 10]),
    ]
    assert nodes[0] == {
        "id": 0, "cpulist": "0-31,64-95", "cpus": 64, "mem_total_kb": 263856900, "mem_free_kb": 241823456,
        "file_pages_kb": 14420096, "anon_pages_kb": 3101008, "hugepages_total": 16, "hugepages_free": 12,
        "free_pct": 91.65, "distances": [10, 32],
    }
    assert nodes[1]["free_pct"] == 40.0
    assert summarize(nodes) == {
        "free_pct_min": 40.0, "free_pct_max": 91.65, "free_pct_spread": 51.65,
        "mem_total_spread_pct": round((264183500 - 263856900) * 100.0 / 264183500, 2),
    }


def test_summary_ignores_memoryless_nodes_and_handles_none():
    nodes = [
        node_entry(0, "0-7", {"MemTotal": 1000, "MemFree": 500}, [10, 20]),
        node_entry(1, "", {"MemTotal": 0, "MemFree": 0}, [20, 10]),
        node_entry(2, None, None, None),
    ]
    assert nodes[1]["free_pct"] is None and nodes[1]["cpus"] == 0
    assert nodes[2]["cpus"] is None and nodes[2]["mem_total_kb"] is None
    assert summarize(nodes) == {"free_pct_min": 50.0, "free_pct_max": 50.0, "free_pct_spread": 0.0,
                                "mem_total_spread_pct": 0.0}
    assert summarize([]) == {"free_pct_min": None, "free_pct_max": None, "free_pct_spread": None,
                             "mem_total_spread_pct": None}


def test_top_processes_orders_and_limits():
    procs = [{"pid": pid, "pages": pages} for pid, pages in ((1, 5), (2, 0), (3, 50), (4, 50), (5, 7))]
    assert [p["pid"] for p in top_processes(procs, limit=3)] == [3, 4, 5]
    assert [p["pid"] for p in top_processes(procs)] == [3, 4, 5, 1]


# -- gather ---------------------------------------------------------------------------------------------

def epyc_tree(base):
    return write_tree(base, {
        NODE + "/online": "0-1\n",
        NODE + "/possible": "0-1\n",
        NODE + "/has_memory": "0-1\n",
        NODE + "/node0/cpulist": "0-31,64-95\n",
        NODE + "/node0/meminfo": EPYC_NODE0,
        NODE + "/node0/distance": "10 32\n",
        NODE + "/node1/cpulist": "32-63,96-127\n",
        NODE + "/node1/meminfo": EPYC_NODE1,
        NODE + "/node1/distance": "32 10\n",
        # a snapshot never reports processes, even when the tree happens to hold some
        "/proc/1234/comm": "vllm\n",
        "/proc/1234/numa_maps": NUMA_MAPS,
    })


def test_gather_two_node_epyc_snapshot(tmp_path):
    root = Root(epyc_tree(tmp_path))
    facts = _numa.gather(root)
    json.dumps(facts)
    assert facts["node_count"] == 2
    assert [node["id"] for node in facts["nodes"]] == [0, 1]
    assert facts["nodes"][1]["cpus"] == 64 and facts["nodes"][1]["distances"] == [32, 10]
    assert facts["free_pct_spread"] == 51.65
    assert facts["processes"] == []
    assert root.errors == []


def test_gather_node_ids_sort_numerically(tmp_path):
    files = {}
    for node in (0, 1, 10, 2):
        files["%s/node%d/cpulist" % (NODE, node)] = "%d\n" % node
        files["%s/node%d/meminfo" % (NODE, node)] = node_meminfo(node, 1000, 100 * (node + 1), 1, 1)
        files["%s/node%d/distance" % (NODE, node)] = "10\n"
    files[NODE + "/nodefoo/meminfo"] = "ignored"
    facts = _numa.gather(Root(write_tree(tmp_path, files)))
    assert [node["id"] for node in facts["nodes"]] == [0, 1, 2, 10]


def test_gather_empty_tree(tmp_path):
    root = Root(str(tmp_path))
    facts = _numa.gather(root)
    assert facts == {"nodes": [], "node_count": 0, "free_pct_min": None, "free_pct_max": None,
                     "free_pct_spread": None, "mem_total_spread_pct": None, "processes": []}
    assert [(err["subsystem"], err["path"]) for err in root.errors] == [("numa", NODE)]


def test_gather_hostile_tree(tmp_path):
    root = Root(write_tree(tmp_path, {
        NODE + "/node0/cpulist": "zero-seven\n",
        NODE + "/node0/meminfo": b"\x00\xff garbage",
        NODE + "/node0/distance": "ten\n",
        NODE + "/node1/cpulist": "8-15\n",
        NODE + "/node1/meminfo": "",
    }))
    facts = _numa.gather(root)
    json.dumps(facts)
    assert facts["nodes"][0]["cpus"] is None and facts["nodes"][0]["mem_total_kb"] is None
    assert facts["nodes"][0]["distances"] is None
    assert facts["nodes"][1]["cpus"] == 8 and facts["nodes"][1]["free_pct"] is None
    assert facts["free_pct_min"] is None
    reasons = dict((err["path"], err["reason"]) for err in root.errors)
    assert "not a cpulist" in reasons[NODE + "/node0/cpulist"]
    assert "MemTotal" in reasons[NODE + "/node0/meminfo"]
    assert "not a list of integers" in reasons[NODE + "/node0/distance"]
    assert "MemTotal" in reasons[NODE + "/node1/meminfo"]
    assert reasons[NODE + "/node1/distance"] == "missing"


def test_processes_vanished_and_unreadable_are_silent(tmp_path, monkeypatch):
    base = write_tree(tmp_path, {
        "/proc/100/comm": "vllm\n",
        "/proc/100/numa_maps": NUMA_MAPS,
        "/proc/200/comm": "kthreadd\n",
        "/proc/200/numa_maps": "",
        "/proc/300/comm": "gone\n",              # vanished: numa_maps missing
        "/proc/400/numa_maps": None,              # unreadable (a directory: read fails with EISDIR)
        "/proc/self/comm": "not a pid\n",
    })
    monkeypatch.setattr(_numa, "Root", lambda _path: Root(base))
    live = Root("/")
    processes = _numa._processes(live)
    assert live.errors == []
    assert processes == [{"pid": 100, "comm": "vllm", "pages": 34818 + 33310,
                          "pages_per_node": {"0": 34818, "1": 33310},
                          "kb": 34818 * 4 + 33309 * 4 + 1048576,
                          "kb_per_node": {"0": 34818 * 4, "1": 33309 * 4 + 1048576}}]


def test_processes_all_unreadable_gives_one_error(tmp_path, monkeypatch):
    files = {}
    for pid in range(1, 6):
        files["/proc/%d/comm" % pid] = "p%d\n" % pid
        files["/proc/%d/numa_maps" % pid] = None
    base = write_tree(tmp_path, files)
    monkeypatch.setattr(_numa, "Root", lambda _path: Root(base))
    live = Root("/")
    assert _numa._processes(live) == []
    assert len(live.errors) == 1
    assert live.errors[0]["path"] == "/proc/*/numa_maps" and "all 5 processes" in live.errors[0]["reason"]


def test_gather_live_host():
    root = Root("/")
    facts = _numa.gather(root)
    json.dumps(facts)
    assert facts["node_count"] >= 1
    assert facts["nodes"][0]["mem_total_kb"] > 0
    assert 0 <= facts["free_pct_min"] <= facts["free_pct_max"] <= 100
    processes = facts["processes"]
    assert len(processes) <= 10
    assert [p["pages"] for p in processes] == sorted((p["pages"] for p in processes), reverse=True)
    for proc in processes:
        assert proc["pages"] == sum(proc["pages_per_node"].values()) > 0
    if os.geteuid() == 0:
        # as root every process's maps are readable: we see at least ourselves
        assert processes
        assert not [err for err in root.errors if err["subsystem"] == "numa"]
