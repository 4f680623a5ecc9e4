# -*- coding: utf-8 -*-
"""Bomb/fuzz corpus for the input kind "GRUB default file": ``/etc/default/grub`` (and the
``grub.d/*.cfg`` files) that a hostile or broken host, or a hostile snapshot, could hand the facts
(issue 40): the line-continuation joiner (``shell.join_continuations``, a backslash before a line
break removed as sh removes it) and the static reading of the command-line variables
(``kernel.grub_config``, what ``kernel.gather`` gives as ``configured_cmdline``).

Each case writes the bytes as ``etc/default/grub`` of a snapshot directory and runs ``kernel.gather``
over a ``Root`` there in a bounded child (tests/helpers/bounded.py: 10 s, 512 MiB): the bytes go
through the same reader as on a host (regular file, at most ``root.MAX_FILE_BYTES``, 4 MiB, decoded
with ``errors="replace"``). The cases fill the reader's cap; one is a 5 MB file past it. Every case
must end by itself with either the command line read (``raw`` not ``None``) or a refusal (``raw``
``None`` and a reason in the errors of ``/etc/default/grub``); never a traceback, a ``MemoryError``,
a ``RecursionError`` or a hang.
"""
import pytest

from helpers import bounded

from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import MAX_FILE_BYTES

KIND = "GRUB default file"
#: the reader's cap: the largest file the parser is ever given
SIZE = MAX_FILE_BYTES

GATHER = bounded.case("""
    from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import kernel
    from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root
    root = Root(ARGS[0])
    facts = kernel.gather(root)
    json.dumps(facts)
    configured = facts["configured_cmdline"]
    raw = configured["raw"]
    problems = [e["reason"][:300] for e in root.errors if e["path"] == "/etc/default/grub"]
    report({"raw": raw[:200] if raw is not None else None, "raw_len": len(raw) if raw is not None else None,
            "source": configured["source"], "problems": problems[:5], "problem_count": len(problems)})
""")


def fill(unit, size=SIZE):
    return unit * (size // len(unit))


def backslash_newlines():
    """The reader's cap of nothing but line continuations."""
    return fill(b"\\\n")


def past_the_cap():
    """5 MB of line continuations: more than the reader takes."""
    return fill(b"\\\n", 5 * 1000 * 1000)


def one_huge_continued_line():
    """One assignment continued over the cap's lines: sh reads one value."""
    return b'GRUB_CMDLINE_LINUX="' + fill(b"quiet \\\n", SIZE - 30) + b'"\n'


def continued_name():
    """Name and value split by continuations, a million times over (the classic
    ``GRUB_CMDLINE_LINUX_DEF\\`` then ``AULT=...``)."""
    return fill(b'GRUB_CMDLINE_LINUX_DEF\\\nAULT="iommu=pt"\n')


def alternating_quotes_and_backslashes():
    return fill(b"\"\\'\\\n")


def alternating_quotes_in_a_value():
    return b"GRUB_CMDLINE_LINUX=" + fill(b"\"a\\\"\\\n'b'\\\n", SIZE - 30) + b"\n"


def unterminated_double_quote():
    return b'GRUB_CMDLINE_LINUX="quiet \\\n' + fill(b"x \\\n", SIZE - 40)


def unterminated_single_quote():
    return b"GRUB_CMDLINE_LINUX='quiet \\\n" + fill(b"x \\\n", SIZE - 40)


def nul_and_invalid_utf8():
    return fill(b'GRUB_CMDLINE_LINUX="a\x00b \xff\xfe\xc0\xaf"\\\n\x00\\\n')


def deep_command_substitution():
    """``$(`` nested 400,000 deep around a continuation."""
    half = SIZE // 5
    return b"GRUB_CMDLINE_LINUX=" + b"$(" * half + b"\\\n" + b")" * half + b"\n"


def deep_unclosed_command_substitution():
    return b"GRUB_CMDLINE_LINUX=" + fill(b"$(", SIZE - 40) + b"\\\nx\n"


def deep_backquotes():
    """Backquotes nested by escaping, then a continuation."""
    return b"GRUB_CMDLINE_LINUX=`" + fill(b"\\`", SIZE // 2 - 20) + b"\\\n" + fill(b"\\`", SIZE // 2 - 20) + b"`\n"


def deep_parameter_expansion():
    return b"GRUB_CMDLINE_LINUX=" + fill(b"${", SIZE - 40) + b"\\\n}\n"


def dollar_single_quote():
    """``$'...'`` quoting (dash and bash read it differently) with continuations."""
    return fill(b"GRUB_CMDLINE_LINUX=$'a\\\\'\\\n")


def comments_with_continuations():
    return fill(b"# comment \\\n", SIZE - 40) + b'GRUB_CMDLINE_LINUX="quiet"\n'


def huge_single_quoted_value():
    """Continuations inside single quotes are kept as they are (sh does not join there)."""
    return b"GRUB_CMDLINE_LINUX='" + fill(b"\\\n", SIZE - 30) + b"'\n"


def many_variables():
    """A million continued assignments of other variables, then the one that counts."""
    return fill(b"V\\\nX=1\\\n2\n", SIZE - 40) + b'GRUB_CMDLINE_LINUX="iommu=pt"\n'


def parsed(out):
    assert out["raw"] is not None and out["problem_count"] == 0, out


def refused(out):
    assert out["raw"] is None and out["problem_count"] > 0 and all(out["problems"]), out


def refused_or_parsed(out):
    assert (out["raw"] is None) == (out["problem_count"] > 0) and (out["raw"] is not None or out["problems"]), out


def check_backslash_newlines(out):
    assert out["raw"] == "" and out["problem_count"] == 0, out


def check_past_the_cap(out):
    # refused by the reader, never parsed: the configured command line is unknown, saying why
    assert out["raw"] is None and out["source"] == "/etc/default/grub", out
    assert out["problem_count"] == 1 and "larger than" in out["problems"][0], out


def check_one_huge_line(out):
    parsed(out)
    assert out["raw"].startswith("quiet quiet ") and out["raw_len"] > 1000000


def check_continued_name(out):
    parsed(out)
    assert out["raw"] == "iommu=pt"


def check_nul(out):
    refused_or_parsed(out)


def check_huge_single_quoted(out):
    parsed(out)
    assert out["raw_len"] > 1000000 and set(out["raw"][:200]) <= set("\\\n")


def check_comments(out):
    # a backslash at the end of a comment continues nothing: the last line is read
    parsed(out)
    assert out["raw"] == "quiet"


def check_many_variables(out):
    parsed(out)
    assert out["raw"] == "iommu=pt"


CASES = [
    (backslash_newlines, check_backslash_newlines),
    (past_the_cap, check_past_the_cap),
    (one_huge_continued_line, check_one_huge_line),
    (continued_name, check_continued_name),
    (alternating_quotes_and_backslashes, refused_or_parsed),
    (alternating_quotes_in_a_value, refused_or_parsed),
    (unterminated_double_quote, refused),
    (unterminated_single_quote, refused),
    (nul_and_invalid_utf8, check_nul),
    (deep_command_substitution, refused),
    (deep_unclosed_command_substitution, refused),
    (deep_backquotes, refused),
    (deep_parameter_expansion, refused),
    (dollar_single_quote, refused),
    (comments_with_continuations, check_comments),
    (huge_single_quoted_value, check_huge_single_quoted),
    (many_variables, check_many_variables),
]


@pytest.mark.parametrize("make, check", CASES, ids=[make.__name__ for make, unused in CASES])
def test_grub_default_bomb(make, check, tmp_path):
    grub = tmp_path / "etc" / "default" / "grub"
    grub.parent.mkdir(parents=True)
    grub.write_bytes(make())
    out = bounded.run_case(KIND, GATHER, str(tmp_path)).result
    check(out)
