# -*- coding: utf-8 -*-
"""Bomb/fuzz corpus for the input kind "tarball": snapshot tarballs a compromised host could send
(issue 18 item 4), and a snapshot.json nested too deeply to parse (item 7).

Every tarball is built here byte by byte (headers written by :func:`header`, not by tarfile) and
compressed on the fly: a long run of one byte is compressed once as a gzip member and repeated,
so a 200 MB header costs a few hundred KB on disk and no time. Each case runs
``import_snapshot`` in a bounded child (tests/helpers/bounded.py: 10 s, 512 MiB) and must end
by itself with a refusal or an error that names what is wrong in a short message, never a
traceback, a ``MemoryError`` or a hang.
"""
import bz2
import gzip
import json
import lzma

import pytest

from helpers import bounded

KIND = "tarball"
MIB = 1024 * 1024
BLOCK = 512
END = bytes(2 * BLOCK)
META = json.dumps({"format": 1, "hostname": "gpu01"}).encode()

#: What a message may be at most for a refusal that quotes no name.
SHORT = 400

IMPORT = bounded.case("""
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.snapshot.snapshot import (
        SnapshotError, SnapshotRefused, import_snapshot)
    try:
        result = import_snapshot(ARGS[0], ARGS[1])
    except SnapshotRefused as exc:
        report({"outcome": "refused", "message": str(exc),
                "problems": [[path[:200], reason[:400]] for path, reason in exc.problems[:5]]})
    except SnapshotError as exc:
        report({"outcome": "error", "message": str(exc)})
    else:
        report({"outcome": "imported", "result": result})
""")


def octal(value, width):
    return (b"%0*o" % (width - 1, value)) + b"\0"


def base256(value):
    return b"\x80" + value.to_bytes(11, "big")


def header(name, size=0, kind=b"0", size_field=None, linkname=b"", mode=0o644, checksum=None):
    """One 512-byte ustar header; ``size_field`` (12 bytes) replaces the octal size."""
    if isinstance(name, str):
        name = name.encode("utf-8", "surrogateescape")
    block = bytearray(BLOCK)
    block[0:len(name[:100])] = name[:100]
    block[100:108] = octal(mode, 8)
    block[108:116] = octal(0, 8)
    block[116:124] = octal(0, 8)
    block[124:136] = size_field if size_field is not None else octal(size, 12)
    block[136:148] = octal(1736910720, 12)
    block[148:156] = b" " * 8
    block[156:157] = kind
    block[157:157 + len(linkname)] = linkname
    block[257:265] = b"ustar\x0000"
    block[265:269] = b"root"
    block[297:301] = b"root"
    total = sum(block)
    block[148:156] = checksum if checksum is not None else b"%06o\0 " % total
    return bytes(block)


def padded(data):
    return data + bytes(-len(data) % BLOCK)


def member(name, data=b"", kind=b"0"):
    return header(name, len(data), kind) + padded(data)


def pax(records, kind=b"x"):
    """A pax header block and its payload (``records``: ``[(keyword, value)]`` as bytes)."""
    payload = b""
    for key, value in records:
        body = b" " + key + b"=" + value + b"\n"
        length = len(body) + 1
        while len(b"%d" % length) + len(body) != length:
            length += 1
        payload += b"%d" % length + body
    return header("././@PaxHeader", len(payload), kind) + padded(payload)


def repeated(compress, byte, count, chunk=MIB):
    """``count`` chunks of ``byte`` as compressed members: one compressed, repeated."""
    return compress(byte * chunk) * count


def write(path, parts, compress=gzip.compress):
    """``parts``: bytes (compressed here) or ``Compressed`` runs already compressed."""
    with open(path, "wb") as handle:
        for part in parts:
            handle.write(part.data if isinstance(part, Compressed) else compress(part))
    return str(path)


class Compressed:
    def __init__(self, data):
        self.data = data


def run_import(tmp_path, src):
    return bounded.run_case(KIND, IMPORT, src, str(tmp_path / "out"))


def check_refused(outcome, *words, limit=SHORT):
    result = outcome.result
    assert result["outcome"] == "refused", result
    message = result["message"]
    assert len(message) < limit, (len(message), message[:2000])
    for word in words:
        assert word in message, (word, message)
    return message


# -- header bombs --------------------------------------------------------------------------------

def test_gnu_long_name_header_of_200_mb(tmp_path):
    size = 200 * MIB
    src = write(tmp_path / "longname.tar.gz", [
        header("././@LongLink", size, b"L"), Compressed(repeated(gzip.compress, b"a", 200)),
        member("snapshot.json", META) + END])
    outcome = run_import(tmp_path, src)
    check_refused(outcome, "GNU long-name header", str(size))
    assert not (tmp_path / "out").exists()


def test_gnu_long_link_header_of_200_mb_xz(tmp_path):
    size = 200 * MIB
    src = write(tmp_path / "longlink.tar.xz", [
        header("././@LongLink", size, b"K"), Compressed(repeated(lzma.compress, b"a", 200)),
        header("proc/cmdline", 0, b"2", linkname=b"x") + END], compress=lzma.compress)
    outcome = run_import(tmp_path, src)
    check_refused(outcome, "GNU long-link header", str(size))


def test_pax_header_of_200_mb(tmp_path):
    value = 200 * MIB
    prefix = b"%d comment=" % (value + 19)
    assert len(prefix) == 18
    size = len(prefix) + value + 1
    src = write(tmp_path / "pax.tar.gz", [
        header("././@PaxHeader", size, b"x") + prefix, Compressed(repeated(gzip.compress, b"a", 200)),
        b"\n" + bytes(-size % BLOCK) + member("snapshot.json", META) + END])
    outcome = run_import(tmp_path, src)
    check_refused(outcome, "pax extended header", str(size))


def test_pax_global_header_of_200_mb_bz2(tmp_path):
    size = 200 * MIB
    src = write(tmp_path / "global.tar.bz2", [
        header("pax_global_header", size, b"g"), Compressed(repeated(bz2.compress, b"a", 200)),
        member("snapshot.json", META) + END], compress=bz2.compress)
    outcome = run_import(tmp_path, src)
    check_refused(outcome, "pax global header", str(size))


def test_name_of_42_mb_never_reaches_a_message(tmp_path):
    name = b"proc/\x1b[2J" + b"n" * (42 * 1000 * 1000)
    src = write(tmp_path / "name.tar.gz", [
        member("snapshot.json", META),
        header("././@LongLink", len(name) + 1, b"L") + padded(name + b"\0") + header("x", 0, b"6") + END])
    outcome = run_import(tmp_path, src)
    check_refused(outcome, "GNU long-name header", str(len(name) + 1))


def test_long_hostile_name_is_clipped_in_the_message(tmp_path):
    # a name under the header cap, refused for its type: quoted clipped, escapes escaped
    name = b"proc/\x1b[2J" + b"n" * 60000
    src = write(tmp_path / "name.tar.gz", [
        member("snapshot.json", META),
        header("././@LongLink", len(name) + 1, b"L") + padded(name + b"\0") + header("x", 0, b"6") + END])
    outcome = run_import(tmp_path, src)
    message = check_refused(outcome, "a FIFO", "(%d characters)" % len(name), limit=1000)
    assert "\x1b" not in message and "proc/\\x1b[2J" in message


def test_chain_of_extension_headers(tmp_path):
    # tarfile reads a chain of extension headers recursively
    src = write(tmp_path / "chain.tar.gz", [
        member("snapshot.json", META) + pax([(b"comment", b"x")], b"g") * 2000 + member("proc/cmdline", b"q") + END])
    outcome = run_import(tmp_path, src)
    check_refused(outcome, "extension headers in a row")


def test_extension_headers_add_up(tmp_path):
    # each name under the header cap, all of them together far over the total
    name = b"n" * 60000
    long = header("././@LongLink", len(name) + 1, b"L") + padded(name + b"\0")
    block = (long + header("proc/a", 0, b"5")) * 64
    src = write(tmp_path / "names.tar.gz", [member("snapshot.json", META),
                                            Compressed(gzip.compress(block) * 20), END])
    outcome = run_import(tmp_path, src)
    check_refused(outcome, "extension headers add up to more than")


# -- counts and sizes ------------------------------------------------------------------------------

def test_too_many_members(tmp_path):
    block = header("proc/x", 0, b"5") * 1024
    src = write(tmp_path / "many.tar.gz", [member("snapshot.json", META),
                                           Compressed(gzip.compress(block) * 490), END])
    outcome = run_import(tmp_path, src)
    check_refused(outcome, "more than 500000 members")


def test_declared_file_size_over_the_cap(tmp_path):
    size = 16 * 1024 * MIB
    src = write(tmp_path / "big.tar.gz", [member("snapshot.json", META), header("proc/big", size_field=base256(size)),
                                          Compressed(repeated(gzip.compress, b"\0", 256, 64 * MIB)), END])
    outcome = run_import(tmp_path, src)
    check_refused(outcome, "proc/big", "add up to more than")


def test_gzip_bomb_in_a_member_of_unknown_type(tmp_path):
    # tarfile skips (decompresses) the data of a member of a type it does not know
    size = 16 * 1024 * MIB
    src = write(tmp_path / "bomb.tar.gz", [member("snapshot.json", META), header("proc/bomb", 0, b"Z", size_field=base256(size)),
                                           Compressed(repeated(gzip.compress, b"\0", 256, 64 * MIB)), END])
    outcome = run_import(tmp_path, src)
    check_refused(outcome, "proc/bomb", "add up to more than")


def test_data_after_the_end_of_the_archive_is_never_read(tmp_path):
    src = write(tmp_path / "trailer.tar.gz", [member("snapshot.json", META) + member("proc/cmdline", b"q\n") + END,
                                              Compressed(repeated(gzip.compress, b"\0", 256, 64 * MIB))])
    outcome = run_import(tmp_path, src)
    assert outcome.result["outcome"] == "imported", outcome.result
    assert outcome.seconds < 5, outcome


# -- malformed tarballs ----------------------------------------------------------------------------

def good_tar():
    return member("snapshot.json", META) + member("proc/cmdline", b"quiet\n") + END


MALFORMED = {
    "truncated in the compressed stream": lambda: gzip.compress(good_tar())[:-40],
    "truncated inside a member": lambda: gzip.compress(good_tar()[:BLOCK + 100]),
    "truncated at a header": lambda: gzip.compress(good_tar()[:2 * BLOCK]),
    "empty gzip": lambda: gzip.compress(b""),
    "empty file": lambda: b"",
    "garbage": lambda: bytes((i * 7919 + 13) % 251 for i in range(4096)),
    "garbage after a gzip magic": lambda: b"\x1f\x8b\x08\x00" + bytes(range(256)) * 8,
    "garbage in a gzip": lambda: gzip.compress(bytes((i * 31) % 256 for i in range(8192))),
    "wrong checksum first": lambda: gzip.compress(
        header("snapshot.json", len(META), checksum=b"0000001\0") + padded(META) + END),
    "wrong checksum second": lambda: gzip.compress(
        member("snapshot.json", META) + header("proc/cmdline", 1, checksum=b"0000001\0") + padded(b"q") + END),
    "checksum not a number": lambda: gzip.compress(
        header("snapshot.json", len(META), checksum=b"zz\0     ") + padded(META) + END),
    "negative base-256 size": lambda: gzip.compress(
        member("snapshot.json", META) + header("proc/neg", size_field=b"\xff" * 12) + END),
    "huge base-256 size": lambda: gzip.compress(
        member("snapshot.json", META) + header("proc/huge", size_field=b"\x80" + b"\xff" * 11) + END),
    "size not octal": lambda: gzip.compress(
        member("snapshot.json", META) + header("proc/x", size_field=b"12x4\0       ") + END),
    "pax size negative": lambda: gzip.compress(
        member("snapshot.json", META) + pax([(b"size", b"-1")]) + member("proc/x", b"q") + END),
    "pax size huge": lambda: gzip.compress(
        member("snapshot.json", META) + pax([(b"size", b"9" * 40)]) + member("proc/x", b"q") + END),
    "pax record malformed": lambda: gzip.compress(
        member("snapshot.json", META) + header("././@PaxHeader", 9, b"x") + padded(b"99 size=1") + member("x")
        + END),
    "pax record of length zero": lambda: gzip.compress(
        member("snapshot.json", META) + header("././@PaxHeader", 8, b"x") + padded(b"0 a=b\n\n\n") + member("x")
        + END),
    "pax sparse file": lambda: gzip.compress(
        member("snapshot.json", META) + pax([(b"GNU.sparse.map", b"0,1,2,3")]) + member("proc/x", b"q") + END),
    "global pax size": lambda: gzip.compress(
        member("snapshot.json", META) + pax([(b"size", b"1")], b"g") + member("proc/x", b"q") + END),
    "two pax headers for one member": lambda: gzip.compress(
        member("snapshot.json", META) + pax([(b"size", b"1")]) + pax([(b"size", b"512")]) + member("proc/x", b"q")
        + END),
    "extension header at the end": lambda: gzip.compress(member("snapshot.json", META) + pax([(b"path", b"a")])
                                                         + END),
    "GNU sparse member": lambda: gzip.compress(member("snapshot.json", META) + member("proc/s", b"q", b"S") + END),
    "directory with data": lambda: gzip.compress(
        member("snapshot.json", META) + header("proc", 512, b"5") + padded(member("x", b"y")) + END),
    "old-style directory with data": lambda: gzip.compress(
        member("snapshot.json", META) + header("proc/", 512, b"\0") + padded(member("x", b"y")) + END),
    "no end of archive": lambda: gzip.compress(good_tar()[:-2 * BLOCK]),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_tarball_is_an_error_or_a_refusal(tmp_path, case):
    path = tmp_path / "bad.tar.gz"
    path.write_bytes(MALFORMED[case]())
    outcome = run_import(tmp_path, str(path))
    result = outcome.result
    assert result["outcome"] in ("refused", "error"), result
    assert "snapshot" in result["message"] and len(result["message"]) < SHORT, result
    assert "Traceback" not in outcome.stderr
    assert not (tmp_path / "out").exists()


def test_good_tarball_in_every_compression(tmp_path):
    for name, compress in (("plain.tar", lambda data: data), ("t.tar.gz", gzip.compress),
                           ("t.tar.bz2", bz2.compress), ("t.tar.xz", lzma.compress)):
        src = write(tmp_path / name, [good_tar()], compress=compress)
        outcome = bounded.run_case(KIND, IMPORT, src, str(tmp_path / name.replace(".", "_")))
        assert outcome.result["outcome"] == "imported", (name, outcome.result)
        assert outcome.result["result"]["members"] == 2


# -- snapshot.json ---------------------------------------------------------------------------------

def test_snapshot_json_nested_too_deeply(tmp_path):
    src = write(tmp_path / "nested.tar.gz", [member("snapshot.json", b"[" * 100000) + END])
    outcome = bounded.run_case(KIND, bounded.case("""
        from ansible_collections.gpuhost.baseline.plugins.plugin_utils.snapshot.snapshot import import_snapshot
        from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.gather import gather_facts
        from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root
        import_snapshot(ARGS[0], ARGS[1])
        facts = gather_facts(Root(ARGS[1]))
        report({"errors": [e for e in facts["errors"] if e["path"] == "/snapshot.json"]})
    """), src, str(tmp_path / "out"))
    errors = outcome.result["errors"]
    assert len(errors) == 1, errors
    assert "cannot be parsed" in errors[0]["reason"] and "nested too deeply" in errors[0]["reason"], errors
    assert "Traceback" not in outcome.stderr
