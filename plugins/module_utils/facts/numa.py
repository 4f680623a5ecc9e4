# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""NUMA facts: per-node memory, CPUs and distances, their balance, and where big processes live.

Pure parsers (:func:`parse_node_meminfo`, :func:`parse_distance`, :func:`parse_numa_maps`,
:func:`node_entry`, :func:`summarize`, :func:`top_processes`) never raise; :func:`gather` reads
through a :class:`host.root.Root` (docs/facts.md, section ``numa``).

Process placement comes from ``/proc/PID/numa_maps`` of the live host only: a snapshot does
not capture processes (they come and go between capture and audit, and their maps are large),
so on a snapshot ``processes`` is ``[]``.
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.cpu import parse_cpulist
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root, as_text

__metaclass__ = type

SUBSYSTEM = "numa"
NODE_DIR = "/sys/devices/system/node"
TOP_PROCESSES = 10


def parse_node_meminfo(text):
    """``Node 0 MemTotal:  263856900 kB`` lines -> ``{"MemTotal": 263856900, ...}``.

    Values are the integers as written (kB for sizes, counts for ``HugePages_*``). Lines that
    do not have this shape are skipped, so a truncated file gives the keys before the cut.
    """
    text = as_text(text)
    values = {}
    if not text:
        return values
    for line in text.split("\n"):
        words = line.split()
        if len(words) < 4 or words[0] != "Node" or not words[2].endswith(":"):
            continue
        if len(words) > 5 or (len(words) == 5 and words[4] != "kB"):
            continue
        try:
            values[words[2][:-1]] = int(words[3])
        except ValueError:
            continue
    return values


def parse_distance(text):
    """``10 32`` -> ``[10, 32]``; ``None`` for anything that is not a list of integers."""
    text = as_text(text)
    if text is None:
        return None
    try:
        distances = [int(word) for word in text.split()]
    except ValueError:
        return None
    return distances or None


def parse_numa_maps(text):
    """``/proc/PID/numa_maps`` -> pages per node.

    Returns ``{"pages", "pages_per_node": {"0": n, ...}, "kb", "kb_per_node"}``. Each mapping's
    ``N<node>=<pages>`` counts are summed per node; lines without them are ignored. Pages are
    counted as written, in the mapping's own page size (a 1 GiB huge page counts 1), so ``kb``
    and ``kb_per_node`` also weigh them by ``kernelpagesize_kB``; those two are ``None`` when a
    counted line lacks the page size.
    """
    text = as_text(text)
    pages = {}
    kbytes = {}
    sizes_known = True
    if text:
        for line in text.split("\n"):
            counts = []
            page_kb = None
            for word in line.split():
                if word.startswith("N"):
                    node, sep, value = word[1:].partition("=")
                    if sep and node.isdigit() and value.isdigit():
                        counts.append((str(int(node)), int(value)))
                elif word.startswith("kernelpagesize_kB="):
                    size = word[len("kernelpagesize_kB="):]
                    # a page size of 0 kB is no page size: the line's kilobytes are unknown
                    page_kb = int(size) if size.isdigit() and int(size) > 0 else None
            if not counts:
                continue
            if page_kb is None:
                sizes_known = False
            for node, value in counts:
                pages[node] = pages.get(node, 0) + value
                if page_kb is not None:
                    kbytes[node] = kbytes.get(node, 0) + value * page_kb
    ordered = sorted(pages, key=int)
    result = {
        "pages": sum(pages.values()),
        "pages_per_node": dict((node, pages[node]) for node in ordered),
        "kb": None,
        "kb_per_node": None,
    }
    if sizes_known:
        result["kb"] = sum(kbytes.values())
        result["kb_per_node"] = dict((node, kbytes.get(node, 0)) for node in ordered)
    return result


def _free_pct(total, free):
    if not total or free is None or total <= 0:
        return None
    return round(free * 100.0 / total, 2)


def node_entry(node_id, cpulist, meminfo, distances):
    """One ``nodes`` entry from a node's cpulist text, parsed meminfo and distances."""
    cpus = parse_cpulist(cpulist) if cpulist is not None else None
    meminfo = meminfo or {}
    total = meminfo.get("MemTotal")
    free = meminfo.get("MemFree")
    return {
        "id": node_id,
        "cpulist": cpulist,
        "cpus": len(cpus) if cpus is not None else None,
        "mem_total_kb": total,
        "mem_free_kb": free,
        "file_pages_kb": meminfo.get("FilePages"),
        "anon_pages_kb": meminfo.get("AnonPages"),
        "hugepages_total": meminfo.get("HugePages_Total"),
        "hugepages_free": meminfo.get("HugePages_Free"),
        "free_pct": _free_pct(total, free),
        "distances": distances,
    }


def summarize(nodes):
    """Balance over nodes with memory: ``free_pct_min/max/spread`` and ``mem_total_spread_pct``.

    Nodes without memory (CPU-only or GPU-memory nodes report ``MemTotal: 0``) are left out;
    every value is ``None`` when no node has memory.
    """
    with_memory = [node for node in nodes if node.get("mem_total_kb")]
    pcts = [node["free_pct"] for node in with_memory if node.get("free_pct") is not None]
    summary = {"free_pct_min": None, "free_pct_max": None, "free_pct_spread": None, "mem_total_spread_pct": None}
    if pcts:
        summary["free_pct_min"] = min(pcts)
        summary["free_pct_max"] = max(pcts)
        summary["free_pct_spread"] = round(max(pcts) - min(pcts), 2)
    totals = [node["mem_total_kb"] for node in with_memory]
    if totals:
        summary["mem_total_spread_pct"] = round((max(totals) - min(totals)) * 100.0 / max(totals), 2)
    return summary


def top_processes(processes, limit=TOP_PROCESSES):
    """The ``limit`` entries with most pages (ties: lower pid first); zero-page ones dropped."""
    kept = [proc for proc in processes if proc.get("pages")]
    kept.sort(key=lambda proc: (-proc["pages"], proc["pid"]))
    return kept[:limit]


def _processes(root):
    """Largest processes of the live host by numa_maps pages (see module docstring).

    Processes come and go while we walk ``/proc`` and other users' maps are not readable
    without root: both are expected and silent. Only when no process at all had readable
    maps is one error recorded, since then the list says nothing.
    """
    # a private reader: per-process failures must not reach root.errors, and a recorder
    # capturing a snapshot must not store every process's maps
    quiet = Root("/")
    entries = []
    attempted = readable = 0
    for name in quiet.listdir("/proc"):
        if not name.isdigit():
            continue
        attempted += 1
        maps = quiet.read_text("/proc/%s/numa_maps" % name, SUBSYSTEM, optional=True)
        if maps is None:
            continue
        readable += 1
        parsed = parse_numa_maps(maps)
        if not parsed["pages"]:
            continue
        comm = quiet.read_text("/proc/%s/comm" % name, SUBSYSTEM, optional=True)
        entries.append({
            "pid": int(name),
            "comm": comm.strip() if comm is not None else None,
            "pages": parsed["pages"],
            "pages_per_node": parsed["pages_per_node"],
            "kb": parsed["kb"],
            "kb_per_node": parsed["kb_per_node"],
        })
    if attempted and not readable:
        root.error(SUBSYSTEM, "/proc/*/numa_maps",
                   "numa_maps unreadable for all %d processes (not root, or a kernel without NUMA support): "
                   "process placement is unknown; run with become: true" % attempted)
    return top_processes(entries)


def gather(root):
    """The ``numa`` section of docs/facts.md for ``root`` (a :class:`host.root.Root`)."""
    node_ids = []
    for name in root.listdir(NODE_DIR, SUBSYSTEM, pattern="node*"):
        if name[4:].isdigit():
            node_ids.append(int(name[4:]))
    nodes = []
    for node_id in sorted(node_ids):
        base = "%s/node%d/" % (NODE_DIR, node_id)
        cpulist = root.read_text(base + "cpulist", SUBSYSTEM)
        if cpulist is not None:
            cpulist = cpulist.strip()
        meminfo_text = root.read_text(base + "meminfo", SUBSYSTEM)
        meminfo = parse_node_meminfo(meminfo_text) if meminfo_text is not None else None
        if meminfo_text is not None and "MemTotal" not in meminfo:
            root.error(SUBSYSTEM, base + "meminfo", "no 'Node %d MemTotal:' line: file empty, truncated or "
                       "garbled" % node_id)
        distance_text = root.read_text(base + "distance", SUBSYSTEM)
        distances = parse_distance(distance_text) if distance_text is not None else None
        if distance_text is not None and distances is None:
            root.error(SUBSYSTEM, base + "distance", "not a list of integers: %r" % distance_text.strip()[:80])
        entry = node_entry(node_id, cpulist, meminfo, distances)
        if cpulist is not None and entry["cpus"] is None:
            root.error(SUBSYSTEM, base + "cpulist", "not a cpulist: %r" % cpulist[:80])
        nodes.append(entry)

    result = {"nodes": nodes, "node_count": len(nodes)}
    result.update(summarize(nodes))
    result["processes"] = _processes(root) if root.live else []
    return result
