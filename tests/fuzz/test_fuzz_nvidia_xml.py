# -*- coding: utf-8 -*-
"""Bomb/fuzz corpus for the input kind "nvidia-smi XML": ``nvidia-smi -q -x`` output a broken
driver, a hostile process name or a hostile snapshot could hand the facts (issue 18 item 13).

Each case writes the capture into a snapshot directory (``commands/nvidia-smi-q.xml``) and runs
``facts.nvidia.gather`` over a ``Root`` there in a bounded child (tests/helpers/bounded.py: 10 s,
512 MiB): the bytes go through the same reader as on a host (regular file, at most
``MAX_LARGE_BYTES``, decoded with ``errors="replace"``), so the parser sees what it would see.
Every case must end by itself with facts that serialise, the GPUs that are valid kept and an
error in ``errors`` for what is wrong; never a traceback, a ``MemoryError`` or a hang.
"""
import os
import random

import pytest

from helpers import bounded

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import nvidia
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import MAX_LARGE_BYTES

KIND = "nvidia-smi XML"
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REAL = os.path.join(HERE, "fixtures", "realdata", "nvidia-smi", "v100s-pcie-8gpu-v11.xml")
BUS_IDS = ["0000:00:0d.0", "0000:00:0e.0", "0000:00:0f.0", "0000:00:10.0",
           "0000:00:11.0", "0000:00:12.0", "0000:00:13.0", "0000:00:14.0"]
#: the largest capture the reader passes on: what a hostile snapshot can make the parser see
CAP = MAX_LARGE_BYTES

GATHER = bounded.case("""
    from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import nvidia
    from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root
    root = Root(ARGS[0])
    facts = nvidia.gather(root)
    size = len(json.dumps(facts))
    gpus = facts["gpus"]
    report({"available": facts["smi"]["available"], "smi_error": facts["smi"]["error"],
            "gpus": len(gpus), "bus_ids": [g["bus_id"] for g in gpus[:8]],
            "names": [(g["name"] or "")[:40] for g in gpus[:8]],
            "name_lengths": [len(g["name"] or "") for g in gpus[:8]],
            "minor_numbers": [g["minor_number"] for g in gpus[:8]],
            "driver_version": facts["driver_version"], "json_bytes": size,
            "errors": [e["reason"][:300] for e in root.errors if e["path"] in (
                "nvidia-smi -q -x", "commands/nvidia-smi-q.xml")]})
""")


def real():
    with open(REAL, "rb") as handle:
        return handle.read()


def gpu_block(data):
    start = data.index(b"<gpu ")
    return start, data[start:data.index(b"</gpu>") + len(b"</gpu>")]


def in_name(data, gpu, junk):
    at = -1
    for unused in range(gpu + 1):
        at = data.index(b"<product_name>Tesla", at + 1)
    at += len(b"<product_name>Tesla")
    return data[:at] + junk + data[at:]


def empty():
    return b""


def truncated():
    data = real()
    return data[:data.index(b'<gpu id="00000000:00:11.0">') + 3000]


def garbage():
    return random.Random(18013).randbytes(4 * 1024 * 1024) if hasattr(random.Random, "randbytes") else \
        bytes(random.Random(18013).getrandbits(8) for unused in range(1024 * 1024))


def huge_repeated_gpus():
    """Copies of one real GPU up to the reader's cap: ~2,000 GPUs, far more elements than any host."""
    data = real()
    start, block = gpu_block(data)
    end = data.rindex(b"</gpu>") + len(b"</gpu>")
    count = (CAP - len(data)) // len(block)
    return data[:start] + block * count + data[end:]


def over_the_cap():
    return huge_repeated_gpus() + b" " * (CAP + 1)


def deeply_nested():
    data = real()
    at = data.index(b"<pci>", data.index(b'<gpu id="00000000:00:12.0">'))
    return data[:at] + b"<a>" * 100000 + b"</a>" * 100000 + data[at:]


DOCTYPE = b'<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v11.dtd">'


def billion_laughs():
    entities = b"".join(b'<!ENTITY lol%d "%s">' % (i, (b"&lol%d;" % (i - 1)) * 10) for i in range(1, 10))
    subset = DOCTYPE[:-1] + b' [<!ENTITY lol0 "lol">' + entities + b"]>"
    return real().replace(DOCTYPE, subset, 1).replace(b"<driver_version>460.73.01", b"<driver_version>&lol9;")


def quadratic_blowup():
    subset = DOCTYPE[:-1] + b' [<!ENTITY a "' + b"a" * 200000 + b'">]>'
    return real().replace(DOCTYPE, subset, 1).replace(b"<uuid>", b"<uuid>" + b"&a;" * 50000)


def control_characters():
    """A control character, an ANSI colour and a NUL in every GPU's product name: 24 in all."""
    data = real()
    for gpu in range(8):
        data = in_name(data, gpu, b"\x01\x1b[31m\x00")
    return data


def very_long_line():
    """One product name of nearly the whole cap, on one line."""
    data = real()
    return in_name(data, 3, b"x" * (CAP - len(data) - 64))


def nul_bytes():
    return b"\x00" * CAP


def invalid_utf8():
    data = real()
    for gpu in range(8):
        data = in_name(data, gpu, b"\xff\xfe\xc0\xaf\xed\xa0\x80")
    return data


def element_flood():
    data = real()
    at = data.index(b"<processes>", data.index(b'<gpu id="00000000:00:10.0">'))
    return data[:at] + b"<x/>" * ((CAP - len(data)) // 4) + data[at:]


def huge_numbers():
    """Numbers no float holds: 400 digits overflow to infinity."""
    return real().replace(b"<minor_number>0</minor_number>", b"<minor_number>" + b"9" * 400 + b"</minor_number>")


def check_empty(out):
    assert not out["available"] and out["gpus"] == 0
    assert "no <nvidia_smi_log>" in out["smi_error"]


def check_truncated(out):
    assert out["available"] and out["bus_ids"][:4] == BUS_IDS[:4] and 4 <= out["gpus"] < 8
    assert "incomplete" in out["smi_error"] and any("incomplete" in e for e in out["errors"])


def check_garbage(out):
    assert not out["available"] and out["gpus"] == 0 and out["errors"]


def check_huge(out):
    # more elements than any real capture: the read stops, the GPUs read until then are kept
    assert out["available"] and out["bus_ids"] == ["0000:00:0d.0"] * 8
    assert 500 < out["gpus"] < 2000
    assert "more than %d elements" % nvidia.MAX_ELEMENTS in out["smi_error"]


def check_over_the_cap(out):
    assert not out["available"] and out["gpus"] == 0
    assert "larger than %d bytes" % CAP in out["smi_error"]


def check_nested(out):
    assert out["available"] and out["bus_ids"] == BUS_IDS and out["smi_error"] is None and out["errors"] == []


def check_refused(out):
    assert not out["available"] and out["gpus"] == 0 and out["driver_version"] is None
    assert "refused unread" in out["smi_error"] and "internal DTD subset" in out["smi_error"]
    assert out["json_bytes"] < 20000


def check_control(out):
    assert out["available"] and out["bus_ids"] == BUS_IDS and out["smi_error"] is None
    assert out["names"] == ["Tesla\ufffd\ufffd[31m\ufffd V100S-PCIE-32GB"] * 8
    assert out["errors"] == ["nvidia-smi -q -x output held 24 characters not allowed in XML "
                             "(replaced by U+FFFD before parsing)"]


def check_long(out):
    assert out["available"] and out["bus_ids"] == BUS_IDS and out["smi_error"] is None
    assert out["name_lengths"][3] > CAP - 300000


def check_nul(out):
    assert not out["available"] and out["gpus"] == 0 and out["errors"]


def check_utf8(out):
    # the reader replaced the bytes that are not UTF-8 by U+FFFD, which XML allows: nothing to count
    assert out["available"] and out["bus_ids"] == BUS_IDS and out["errors"] == []
    assert all(name.startswith("Tesla\ufffd") for name in out["names"])


def check_flood(out):
    assert out["available"] and out["bus_ids"] == BUS_IDS[:4]
    assert "more than %d elements" % nvidia.MAX_ELEMENTS in out["smi_error"]


def check_numbers(out):
    assert out["available"] and out["bus_ids"] == BUS_IDS and out["minor_numbers"][0] is None
    assert out["minor_numbers"][1:] == list(range(1, 8))


CASES = [
    (empty, check_empty),
    (truncated, check_truncated),
    (garbage, check_garbage),
    (huge_repeated_gpus, check_huge),
    (over_the_cap, check_over_the_cap),
    (deeply_nested, check_nested),
    (billion_laughs, check_refused),
    (quadratic_blowup, check_refused),
    (control_characters, check_control),
    (very_long_line, check_long),
    (nul_bytes, check_nul),
    (invalid_utf8, check_utf8),
    (element_flood, check_flood),
    (huge_numbers, check_numbers),
]


@pytest.mark.parametrize("build, check", CASES, ids=[build.__name__ for build, unused in CASES])
def test_nvidia_smi_xml(tmp_path, build, check):
    (tmp_path / "commands").mkdir()
    (tmp_path / "commands" / "nvidia-smi-q.xml").write_bytes(build())
    outcome = bounded.run_case(KIND, GATHER, str(tmp_path))
    check(outcome.result)
