# -*- coding: utf-8 -*-
"""Bomb/fuzz corpus for the input kind "kernel log": ``journalctl -k -b`` (or ``dmesg``) output,
raw or as a snapshot stores it (a header line, then the ``NVRM: Xid`` lines), that a flood of
driver messages, a hostile user writing to ``/dev/kmsg`` or a hostile snapshot could hand the
facts (issue 18 item 13).

Each case writes the capture into a snapshot directory (``commands/journalctl-k-b.txt``, next to a
``/proc/driver/nvidia/version`` so that the log is read at all) and runs ``facts.health.gather``
over a ``Root`` there in a bounded child (tests/helpers/bounded.py: 10 s, 512 MiB): the bytes go
through the same reader as on a host (regular file, at most ``MAX_LARGE_BYTES``, decoded with
``errors="replace"``). Every case must end by itself with facts that serialise, Xid events counted
where the lines are valid, and an error in ``errors`` for what is wrong; never a traceback, a
``MemoryError`` or a hang.
"""
import random

import pytest

from helpers import bounded

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import health
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import MAX_LARGE_BYTES

KIND = "kernel log"
CAP = MAX_LARGE_BYTES
XID = b"[81234.401205] gpu07 kernel: NVRM: Xid (PCI:0000:2b:00): 79, pid=1234, name=python3, GPU has fallen off the bus.\n"
OTHER = b"[ 9.331020] gpu07 kernel: mlx5_core 0000:1a:00.0: firmware version: 28.43.1014\n"
HEADER = b"# gpuhost.baseline kernel log: %d lines read from journalctl -k -b, %d kept\n"

GATHER = bounded.case("""
    from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import health
    from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root
    root = Root(ARGS[0])
    facts = health.gather(root)
    size = len(json.dumps(facts))
    log = facts["kernel_log"]
    by_gpu = log["by_gpu"] or {}
    report({"lines": log["lines"], "events": log["events"], "unparsed": log["unparsed"],
            "truncated": log["truncated"], "error": log["error"], "json_bytes": size,
            "gpus": len(by_gpu), "pairs": sum(len(codes) for codes in by_gpu.values()),
            "first": sorted(by_gpu.items())[:2],
            "errors": [e["reason"][:300] for e in root.errors if e["path"] in (
                "journalctl -k -b", "commands/journalctl-k-b.txt")]})
""")


def fill(line, room=CAP):
    return line * (room // len(line))


def empty():
    return b""


def truncated():
    return OTHER * 3 + XID + XID[:40]


def garbage():
    rng = random.Random(18013)
    return bytes(rng.getrandbits(8) for unused in range(1024 * 1024))


def huge_journal():
    """A whole capture of other drivers' messages, no Xid: what the 100,000-line journal never
    exceeds on a host, filled to the reader's cap."""
    return fill(OTHER)


def huge_xid_flood():
    """The reader's cap of Xid 79 lines for one GPU (a GPU that falls off the bus in a loop)."""
    return fill(XID)


def huge_distinct_xids():
    """Xid lines that each name another PCI address and code: a flood from /dev/kmsg."""
    rng = random.Random(18013)
    lines = []
    size = 0
    while size < CAP - 200:
        line = b"[ 1.000000] NVRM: Xid (PCI:%08x:%02x:%02x): %d, x\n" % (
            rng.getrandbits(32), rng.getrandbits(8), rng.getrandbits(8) & 0x1f, rng.randrange(100000))
        lines.append(line)
        size += len(line)
    return b"".join(lines)


def huge_blank_lines():
    return b"\n" * CAP


def huge_short_lines():
    return fill(b"k\n")


def very_long_line():
    """One line of nearly the whole cap that ends in an Xid."""
    return b"[ 1.000000] " + b"x" * (CAP - 200) + XID[14:]


def header_with_huge_count():
    """A stored capture whose header claims a count of 5,000 digits."""
    return b"# gpuhost.baseline kernel log: " + b"9" * 5000 + b" lines read from journalctl -k -b, 1 kept\n" + XID


def stored_xid_flood():
    """The stored (reduced) form: a header, then the cap of Xid lines."""
    return HEADER % (100000, 1) + fill(XID, CAP - 200)


def nul_bytes():
    return b"\x00" * CAP


def control_characters():
    return OTHER + XID.replace(b"GPU has fallen", b"GPU \x1b[31mhas\x00\x07 fallen") + b"\x01\x02\x1b[2J\n"


def invalid_utf8():
    return OTHER + XID.replace(b"GPU has fallen", b"GPU \xff\xfe\xc0\xaf has fallen") + b"\xed\xa0\x80\n"


def check_empty(out):
    assert out["events"] is None and "empty" in out["error"] and out["errors"]


def check_truncated(out):
    assert out["events"] == 1 and out["unparsed"] == 1 and out["lines"] == 5
    assert any("not in the known format" in e for e in out["errors"])


def check_garbage(out):
    assert out["events"] == 0 and out["lines"] > 0


def check_journal(out):
    assert out["events"] == 0 and out["lines"] == CAP // len(OTHER) and out["truncated"] is True


def check_xid_flood(out):
    # the first Xid lines, as many as a live journal read returns, are read; the rest are counted
    assert out["events"] == health.MAX_XID_LINES and out["gpus"] == 1
    assert out["first"][0][1]["79"]["count"] == health.MAX_XID_LINES
    skipped = CAP // len(XID) - health.MAX_XID_LINES
    assert any(e.startswith("%d NVRM Xid line(s) after the first %d not read" % (skipped, health.MAX_XID_LINES))
               for e in out["errors"])


def check_distinct(out):
    # what is kept per GPU and code is bounded, and the rest is said
    assert out["events"] == health.MAX_XID_LINES and out["unparsed"] == 0
    assert out["pairs"] == health.MAX_XID_ENTRIES
    assert any("more than %d GPU and code pairs" % health.MAX_XID_ENTRIES in e for e in out["errors"])
    assert any("not read" in e for e in out["errors"])
    assert out["json_bytes"] < 1024 * 1024


def check_blank(out):
    assert out["events"] is None and "empty" in out["error"]


def check_short(out):
    assert out["events"] == 0 and out["lines"] == CAP // 2


def check_long(out):
    assert out["events"] == 1 and out["lines"] == 1 and out["first"][0][0] == "0000:2b:00.0"


def check_huge_count(out):
    # a count of 5,000 digits (int() raised ValueError on it) is no header: the log is read as a
    # raw one, its lines counted
    assert out["events"] == 1 and out["lines"] == 2 and out["error"] is None


def check_stored(out):
    assert out["lines"] == 100000 and out["events"] == health.MAX_XID_LINES and out["truncated"] is True
    assert any("not read" in e for e in out["errors"])


def check_nul(out):
    assert out["events"] == 0 and out["lines"] == 1


def check_control(out):
    assert out["events"] == 1
    assert out["first"][0][1]["79"]["message"] == "GPU \x1b[31mhas\x00\x07 fallen off the bus."


def check_utf8(out):
    assert out["events"] == 1 and "\ufffd" in out["first"][0][1]["79"]["message"]


CASES = [
    (empty, check_empty),
    (truncated, check_truncated),
    (garbage, check_garbage),
    (huge_journal, check_journal),
    (huge_xid_flood, check_xid_flood),
    (huge_distinct_xids, check_distinct),
    (huge_blank_lines, check_blank),
    (huge_short_lines, check_short),
    (very_long_line, check_long),
    (header_with_huge_count, check_huge_count),
    (stored_xid_flood, check_stored),
    (nul_bytes, check_nul),
    (control_characters, check_control),
    (invalid_utf8, check_utf8),
]


@pytest.mark.parametrize("build, check", CASES, ids=[build.__name__ for build, unused in CASES])
def test_kernel_log(tmp_path, build, check):
    (tmp_path / "proc" / "driver" / "nvidia").mkdir(parents=True)
    (tmp_path / "proc" / "driver" / "nvidia" / "version").write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.133.20  Release Build\n")
    (tmp_path / "commands").mkdir()
    (tmp_path / "commands" / "journalctl-k-b.txt").write_bytes(build())
    outcome = bounded.run_case(KIND, GATHER, str(tmp_path))
    check(outcome.result)
