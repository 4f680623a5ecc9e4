# -*- coding: utf-8 -*-
"""Bomb/fuzz corpus for the input kind "topo text": ``nvidia-smi topo -m`` output a broken driver
or a hostile snapshot could hand the facts (issue 18 item 13).

Each case writes the capture into a snapshot directory (``commands/nvidia-smi-topo-m.txt``, next
to a real ``nvidia-smi -q -x`` capture so that ``topo -m`` is read at all) and runs
``facts.nvidia.gather`` over a ``Root`` there in a bounded child (tests/helpers/bounded.py: 10 s,
512 MiB): the bytes go through the same reader as on a host (regular file, at most
``MAX_LARGE_BYTES``, decoded with ``errors="replace"``). Every case must end by itself with facts
that serialise and either a matrix that matches the devices or no matrix and an error in
``errors``; never a traceback, a ``MemoryError`` or a hang.
"""
import os
import random

import pytest

from helpers import bounded

from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import MAX_LARGE_BYTES

KIND = "topo text"
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
XML = os.path.join(HERE, "fixtures", "realdata", "nvidia-smi", "v100s-pcie-8gpu-v11.xml")
TOPO = os.path.join(HERE, "fixtures", "nvidia", "topo-8gpu-2nic-2socket.txt")
CAP = MAX_LARGE_BYTES
DEVICES = ["GPU%d" % i for i in range(8)] + ["NIC0", "NIC1"]

GATHER = bounded.case("""
    from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import nvidia
    from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root
    root = Root(ARGS[0])
    facts = nvidia.gather(root)
    size = len(json.dumps(facts))
    topology = facts["topology"]
    report({"gpus": len(facts["gpus"]), "json_bytes": size,
            "devices": topology["devices"][:20] if topology else None,
            "device_count": len(topology["devices"]) if topology else None,
            "rows": sorted(topology["matrix"])[:20] if topology else None,
            "gpu0": topology["matrix"].get("GPU0") if topology else None,
            "affinity3": facts["gpus"][3]["topology"] if len(facts["gpus"]) > 3 else None,
            "errors": [e["reason"][:300] for e in root.errors if e["path"] in (
                "nvidia-smi topo -m", "commands/nvidia-smi-topo-m.txt")]})
""")


def real():
    with open(TOPO, "rb") as handle:
        return handle.read()


def empty():
    return b""


def truncated():
    data = real()
    return data[:data.index(b"GPU5\t")] + b"GPU5\tSYS\tSY"


def garbage():
    rng = random.Random(18013)
    return bytes(rng.getrandbits(8) for unused in range(512 * 1024))


def huge_repeated():
    """The real capture repeated up to the reader's cap (~50,000 matrices, one after another)."""
    data = real()
    return data * (CAP // len(data))


def huge_blank_lines():
    return b"\n" * CAP


def huge_short_lines():
    return real() + b"GPU\n" * ((CAP - len(real())) // 4)


def very_long_line():
    """A header of millions of GPU columns on one line, then one row."""
    columns = b"".join(b"\tGPU%d" % i for i in range(CAP // 12))
    return columns + b"\nGPU0\t X \n"


def many_devices():
    """A well-formed matrix of 1,000 GPUs: more devices than any host, a million cells."""
    count = 1000
    header = b"".join(b"\tGPU%d" % i for i in range(count)) + b"\tCPU Affinity\tNUMA Affinity\n"
    rows = b"".join(b"GPU%d" % i + b"".join(b"\t X " if i == j else b"\tSYS" for j in range(count))
                    + b"\t0-7\t0\n" for i in range(count))
    return header + rows + b"\n"


def ansi_and_control_characters():
    """ANSI colours in the cells (nvidia-smi writes them in the header), control characters and a
    NUL in the legend and an affinity."""
    return (real().replace(b"\tPIX", b"\t\x1b[1mPIX\x1b[0m").replace(b"NIC0:", b"\x01NIC0:\x00")
            .replace(b"0-47,96-143", b"0-47,\x0796-143"))


def control_character_in_a_cell():
    return real().replace(b"\tPIX", b"\tP\x00IX", 1)


def nul_bytes():
    return b"\x00" * CAP


def invalid_utf8():
    return real().replace(b"\tSYS\t", b"\tSYS\xff\xfe\t").replace(b"Legend", b"Leg\xc0\xafend")


def check_empty(out):
    assert out["devices"] is None and out["gpus"] == 8
    assert any("no topology matrix" in e for e in out["errors"])


def check_truncated(out):
    assert out["devices"] is None and any("topology matrix not read" in e for e in out["errors"])


def check_garbage(out):
    assert out["devices"] is None and out["errors"]


def check_repeated(out):
    # the first matrix is read; the copies after its blank line are not part of it
    assert out["devices"] == DEVICES and out["rows"] == sorted(DEVICES) and out["errors"] == []
    assert out["affinity3"] == {"cpu_affinity": "0-47,96-143", "numa_affinity": "0", "gpu_numa_id": None}


def check_refused(out):
    assert out["devices"] is None and out["gpus"] == 8
    assert any("topology matrix not read" in e and "more than" in e for e in out["errors"])
    assert out["json_bytes"] < 200000


def check_ansi(out):
    # ANSI codes are stripped; what else is in a cell outside the matrix is kept as text
    assert out["devices"] == DEVICES and out["errors"] == []
    assert out["gpu0"]["GPU1"] == "PIX"
    assert out["affinity3"]["cpu_affinity"] == "0-47,\x0796-143"


def check_control(out):
    # a link cell that is not a link type is an error naming the line, never an invented link
    assert out["devices"] is None
    assert any("line 2:" in e and "not a link type" in e for e in out["errors"])


def check_nul(out):
    assert out["devices"] is None and out["errors"]


def check_utf8(out):
    assert out["devices"] is None
    assert any("not a link type" in e and "\ufffd" in e for e in out["errors"])


CASES = [
    (empty, check_empty),
    (truncated, check_truncated),
    (garbage, check_garbage),
    (huge_repeated, check_refused),
    (huge_blank_lines, check_refused),
    (huge_short_lines, check_refused),
    (very_long_line, check_refused),
    (many_devices, check_refused),
    (ansi_and_control_characters, check_ansi),
    (control_character_in_a_cell, check_control),
    (nul_bytes, check_nul),
    (invalid_utf8, check_utf8),
]


@pytest.mark.parametrize("build, check", CASES, ids=[build.__name__ for build, unused in CASES])
def test_topo(tmp_path, build, check):
    (tmp_path / "commands").mkdir()
    with open(XML, "rb") as handle:
        (tmp_path / "commands" / "nvidia-smi-q.xml").write_bytes(handle.read())
    (tmp_path / "commands" / "nvidia-smi-topo-m.txt").write_bytes(build())
    outcome = bounded.run_case(KIND, GATHER, str(tmp_path))
    check(outcome.result)
