# -*- coding: utf-8 -*-
"""GRUB defaults with line continuations (issue 40, item 7).

sh removes a backslash before a line break before it splits the text into words, outside quotes and inside
double quotes (never inside single quotes or a comment): ``GRUB_CMDLINE_LINUX_DEF\\`` + newline +
``AULT="... amd_pstate=passive"`` assigns GRUB_CMDLINE_LINUX_DEFAULT. Before, the static check did not see
that assignment: the audit reported the earlier value and ``kernel_cmdline`` edited the earlier line while sh
took the hidden one. ``facts.shell.join_continuations`` joins them first; a continuation where that cannot be
proven (inside ``$(...)``, backquotes, ``${...}``, or with ``$'...'`` quoting in the file) makes the file
unknown. The judgement is checked against bash and dash on generated files with continuations, and so is the
fix's edit of them.
"""

from __future__ import absolute_import, division, print_function

import os
import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from helpers.tree import write_tree

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import kernel
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.kernel import GRUB_CMDLINE_VARS, grub_config, parse_grub_default
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.shell import join_continuations, static_assignments
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root
from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.base import FixError
from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.cmdline import edit_grub_files

SHELLS = [name for name in ("bash", "dash") if shutil.which(name)]
HIDDEN = 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX_DEF\\\nAULT="quiet amd_pstate=passive"\n'


def shell_values(paths, shell):
    """``(GRUB_CMDLINE_LINUX, GRUB_CMDLINE_LINUX_DEFAULT)`` after ``shell`` sources ``paths`` (``None`` for an
    unset one), or ``None`` when a file is not valid shell syntax. Fixture files only: they run nothing."""
    for path in paths:
        if subprocess.run([shell, "-n", path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          timeout=10, check=False).returncode:
            return None
    script = ('for f in "$@"; do . "$f"; done; '
              'printf "%s\\0%s\\0%s\\0%s" "${GRUB_CMDLINE_LINUX+set}" "${GRUB_CMDLINE_LINUX-}" '
              '"${GRUB_CMDLINE_LINUX_DEFAULT+set}" "${GRUB_CMDLINE_LINUX_DEFAULT-}"')
    done = subprocess.run([shell, "-c", script, "sh"] + list(paths), stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, env={"PATH": os.environ["PATH"]}, timeout=10, check=False)
    if done.returncode:
        return None
    linux_set, linux, default_set, default = done.stdout.decode("utf-8", "surrogateescape").split("\0")
    return (linux if linux_set else None, default if default_set else None)


def _write(tmp_path, text, name="grub"):
    path = str(tmp_path / name)
    with open(path, "w") as handle:
        handle.write(text)
    return path


# -- the joiner -------------------------------------------------------------------------------------

def test_the_hidden_assignment_is_seen_as_sh_sees_it(tmp_path):
    parsed = parse_grub_default(HIDDEN)
    assert parsed["GRUB_CMDLINE_LINUX_DEFAULT"] == "quiet amd_pstate=passive"
    assert parsed["params"]["amd_pstate"] == "passive" and not parsed["problems"]
    found, problems = static_assignments(HIDDEN, GRUB_CMDLINE_VARS)
    assert not problems
    # the span of the value in effect is the file's own, on its third line
    name, line, start, end = found[-1]
    assert (name, line, HIDDEN[start:end]) == ("GRUB_CMDLINE_LINUX_DEFAULT", 2, '"quiet amd_pstate=passive"')
    for shell in SHELLS:
        assert shell_values([_write(tmp_path, HIDDEN)], shell) == (None, "quiet amd_pstate=passive")


def test_gather_reports_the_command_line_the_boot_loader_uses(tmp_path):
    write_tree(str(tmp_path), {"/etc/default/grub": HIDDEN, "/proc/cmdline": "BOOT_IMAGE=/vmlinuz ro\n"})
    root = Root(str(tmp_path))
    facts = kernel.gather(root)
    configured = facts["configured_cmdline"]
    assert configured["raw"] == "quiet amd_pstate=passive", facts


def test_the_fix_edits_the_assignment_in_effect():
    edited = edit_grub_files([("/etc/default/grub", HIDDEN)], [("amd_pstate", "active")], [])
    text = edited["files"]["/etc/default/grub"]
    assert text == HIDDEN.replace("amd_pstate=passive", "amd_pstate=active")
    assert (edited["before"], edited["after"]) == ("quiet amd_pstate=passive", "quiet amd_pstate=active")


@pytest.mark.parametrize("text, joined", [
    ("A=1\\\n2\n", "A=12\n"),
    ("A='1\\\n2'\n", "A='1\\\n2'\n"),  # single quotes keep it
    ('A="1\\\n2"\n', 'A="12"\n'),
    ("# note \\\nA=1\n", "# note \\\nA=1\n"),  # a comment ends at its line break
    ("A=a\\\n#b\n", "A=a#b\n"),  # joined, then # is inside a word: no comment
    ("A=a \\\n#b\n", "A=a #b\n"),
    ("A=a\\ #b\\\nc\n", "A=a\\ #bc\n"),  # an escaped blank: # is in the word, the line joined
    ("A=x\\\\\nB=1\n", "A=x\\\\\nB=1\n"),  # an escaped backslash before the line break
    ("A=1", "A=1"),
])
def test_join_continuations(text, joined, tmp_path):
    got, where, problem = join_continuations(text)
    assert (got, problem) == (joined, None)
    if where is not None:
        assert len(where) == len(got) + 1 and all(text[where[k]] == got[k] for k in range(len(got)))


@pytest.mark.parametrize("text, line, reason", [
    ("X=$(echo a\\\nb)\nGRUB_CMDLINE_LINUX=a\n", 1, "inside $(...)"),
    ("X=`echo a\\\nb`\nGRUB_CMDLINE_LINUX=a\n", 1, "inside backquotes"),
    ('X="${Y:-a\\\nb}"\nGRUB_CMDLINE_LINUX=a\n', 1, "inside ${...}"),
    ("X=$'a'\nGRUB_CMDLINE_LINUX_DEF\\\nAULT=a\n", 2, "$'...' quoting (line 1)"),
])
def test_a_continuation_that_cannot_be_proven_makes_the_file_unknown(text, line, reason):
    config = grub_config([("/etc/default/grub", text)])
    assert config["raw"] is None
    ((path, got_line, got_reason),) = [p for p in config["problems"] if "continuation" in p[2]]
    assert (path, got_line) == ("/etc/default/grub", line) and reason in got_reason
    with pytest.raises(FixError) as caught:
        edit_grub_files([("/etc/default/grub", text)], [("amd_pstate", "active")], [])
    assert "line %d has a line continuation" % line in caught.value.msg and caught.value.result.get("changed") is False


def test_line_numbers_stay_those_of_the_file():
    text = 'A=1\\\n2\nGRUB_CMDLINE_LINUX_DEFAULT="quiet"\nif true; then\n  GRUB_CMDLINE_LINUX_DEF\\\nAULT="x"\nfi\n'
    assert static_assignments(text, GRUB_CMDLINE_VARS)[1] == [
        (5, "assigns GRUB_CMDLINE_LINUX_DEFAULT inside an if block")]


# -- against real shells ----------------------------------------------------------------------------

NAMES = ["GRUB_CMDLINE_LINUX", "GRUB_CMDLINE_LINUX_DEFAULT"]
VALUE_CHARS = st.lists(st.sampled_from(list("ab=_-.,# \\'\"$") + ["x=1", "amd_pstate=passive"]),
                       max_size=8).map("".join)


def _quoted(value, style):
    if style == "single":
        return "'%s'" % value.replace("'", "")
    if style == "double":
        return '"%s"' % "".join("\\" + c if c in '"\\$`' else c for c in value)
    return "".join("\\" + c if c in " \\'\"$#;&|<>()`" else c for c in value) or '""'


ASSIGNMENT = st.builds(lambda name, value, style, export: ("export " if export else "") + "%s=%s" % (
    name, _quoted(value, style)), st.sampled_from(NAMES), VALUE_CHARS, st.sampled_from(["single", "double", "bare"]),
    st.booleans())
OTHER = st.sampled_from(["GRUB_TIMEOUT=5", "# a note \\", "# GRUB_CMDLINE_LINUX=commented", "true",
                         'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT iommu=pt"',
                         "GRUB_DISTRIBUTOR=`echo Debian`", "X='single \\ kept'", ""])
LINES = st.lists(st.one_of(ASSIGNMENT, ASSIGNMENT, OTHER), min_size=1, max_size=6)


@st.composite
def continued_files(draw):
    """A file of assignments and other lines with backslash-newlines put anywhere (in names, values, quotes,
    comments, between words)."""
    text = "\n".join(draw(LINES)) + "\n"
    cuts = draw(st.lists(st.integers(min_value=0, max_value=len(text)), min_size=1, max_size=4, unique=True))
    for cut in sorted(cuts, reverse=True):
        text = text[:cut] + "\\\n" + text[cut:]
    return text


@pytest.mark.skipif(not SHELLS, reason="no POSIX shell to compare with")
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(continued_files())
def test_accepted_files_with_continuations_evaluate_as_the_shell_does(tmp_path, text):
    path = _write(tmp_path, text)
    config = grub_config([(path, text)])
    assume(not config["problems"])
    for shell in SHELLS:
        values = shell_values([path], shell)
        if values is None:  # a syntax error stops grub-mkconfig itself; nothing to compare
            continue
        assert (config["values"].get(NAMES[0]), config["values"].get(NAMES[1])) == values, (shell, text)


@pytest.mark.skipif(not SHELLS, reason="no POSIX shell to compare with")
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(continued_files())
def test_the_fix_on_files_with_continuations_gives_what_the_shell_then_reads(tmp_path, text):
    path = _write(tmp_path, text)
    assume(not grub_config([(path, text)])["problems"])
    assume(all(shell_values([path], shell) is not None for shell in SHELLS))
    try:
        edited = edit_grub_files([(path, text)], [("amd_pstate", "active")], [])
    except FixError as exc:  # a value the fix will not rewrite (several quoted parts, an expansion): refused
        assert exc.result.get("changed") is False
        return
    new = edited["files"].get(path, text)
    with open(path, "w") as handle:
        handle.write(new)
    for shell in SHELLS:
        values = shell_values([path], shell)
        assert values is not None, new
        assert " ".join(v.strip() for v in values if v and v.strip()) == edited["after"], (shell, text, new)
