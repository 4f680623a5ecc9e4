# -*- coding: utf-8 -*-
"""The configured GRUB command line only when the files say it without running them (issue 18, item 15).

``facts.shell.static_assignments`` judges a GRUB defaults file (a shell fragment) and
``grub_config`` evaluates the accepted ones; ``configured_cmdline`` is null with an error naming the
file and the line otherwise. The judgement is checked against real shells: for every
syntactically valid file it accepts, the value it computes is the one ``bash`` and ``dash`` end with.
"""

from __future__ import absolute_import, division, print_function

import os
import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from helpers.tree import write_tree

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import kernel as _kernel
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.kernel import GRUB_CMDLINE_VARS, grub_config, parse_grub_default
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.shell import parse_shell_assignments, static_assignments
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root

SHELLS = [name for name in ("bash", "dash") if shutil.which(name)]


def shell_value(paths, shell):
    """The GRUB command line ``shell`` ends with after sourcing ``paths`` in order, or ``None`` when
    one of them is not valid shell syntax (fixture files only; they run nothing with an effect)."""
    for path in paths:
        if subprocess.run([shell, "-n", path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          timeout=10, check=False).returncode:
            return None
    script = ('for f in "$@"; do . "$f"; done; '
              'printf "%s\\n%s" "${GRUB_CMDLINE_LINUX-}" "${GRUB_CMDLINE_LINUX_DEFAULT-}"')
    out = subprocess.run([shell, "-c", script, "sh"] + list(paths), stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env={"PATH": os.environ["PATH"]}, timeout=10,
                         universal_newlines=True, check=False).stdout
    linux, _sep, default = out.partition("\n")
    return " ".join(part for part in (linux.strip(), default.strip()) if part)


# -- the facts side of the refusal -------------------------------------------------------------------

@pytest.mark.parametrize("grub, extra, path, reason", [
    ('GRUB_CMDLINE_LINUX_DEFAULT="quiet"\nGRUB_CMDLINE_LINUX_DEFAULT+=" iommu=off"\n', {},
     "/etc/default/grub", "line 2 appends to GRUB_CMDLINE_LINUX_DEFAULT with +="),
    ('GRUB_CMDLINE_LINUX_DEFAULT="quiet"\nif [ -e /etc/gpu ]; then\n  GRUB_CMDLINE_LINUX_DEFAULT="iommu=off"\nfi\n', {},
     "/etc/default/grub", "line 3 assigns GRUB_CMDLINE_LINUX_DEFAULT inside an if block"),
    ('GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n[ -e /etc/gpu ] && GRUB_CMDLINE_LINUX_DEFAULT="iommu=off"\n', {},
     "/etc/default/grub", "line 2 assigns GRUB_CMDLINE_LINUX_DEFAULT after &&"),
    ('GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n. /etc/default/grub-gpu\n', {},
     "/etc/default/grub", "line 2 sources another file (.)"),
    ('GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n', {"50-gpu.cfg": '\n\nGRUB_CMDLINE_LINUX+=" iommu=off"\n'},
     "/etc/default/grub.d/50-gpu.cfg", "line 3 appends to GRUB_CMDLINE_LINUX with +="),
], ids=["plus-equals", "inside-if", "after-and", "dot-source", "grub-d-plus-equals"])
def test_gather_refuses_what_depends_on_the_shell(tmp_path, grub, extra, path, reason):
    files = {"/etc/default/grub": grub}
    files.update(("/etc/default/grub.d/" + name, text) for name, text in extra.items())
    root = Root(write_tree(tmp_path, files))
    configured = _kernel.gather(root)["configured_cmdline"]
    assert configured == {"source": "/etc/default/grub", "raw": None, "params": None, "bootloader": "grub"}
    errors = [err["reason"] for err in root.errors if err["path"] == path]
    assert len(errors) == 1 and errors[0].startswith(reason), errors
    assert errors[0].endswith("(the effective value depends on the shell); the configured command line is unknown")


def test_gather_unreadable_grub_d_file_makes_the_value_unknown(tmp_path):
    base = write_tree(tmp_path, {"/etc/default/grub": 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n',
                                 "/etc/default/grub.d/50-gpu.cfg": None})  # a directory: unreadable
    root = Root(base)
    configured = _kernel.gather(root)["configured_cmdline"]
    assert configured["raw"] is None and configured["params"] is None
    assert any(err["path"] == "/etc/default/grub.d/50-gpu.cfg" for err in root.errors)


def test_gather_ignores_hidden_grub_d_files_as_the_glob_does(tmp_path):
    base = write_tree(tmp_path, {"/etc/default/grub": 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n',
                                 "/etc/default/grub.d/.50-off.cfg": 'GRUB_CMDLINE_LINUX_DEFAULT="off"\n',
                                 "/etc/default/grub.d/60-on.cfg": 'GRUB_CMDLINE_LINUX="root=/dev/sda1"\n'})
    root = Root(base)
    assert _kernel.gather(root)["configured_cmdline"]["raw"] == "root=/dev/sda1 quiet"


def test_parse_grub_default_gives_none_and_the_line():
    parsed = parse_grub_default('GRUB_CMDLINE_LINUX=""\ntrue && GRUB_CMDLINE_LINUX="iommu=off"\n')
    assert parsed["raw"] is None and parsed["params"] is None and parsed["GRUB_CMDLINE_LINUX"] is None
    assert "line 2 assigns GRUB_CMDLINE_LINUX after &&" in parsed["problems"]


def test_reads_are_allowed_anywhere_writes_only_plainly():
    text = ('GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n'
            'if [ -n "$GRUB_CMDLINE_LINUX_DEFAULT" ] && [ -z "${GRUB_CMDLINE_LINUX}" ]; then\n'
            '  GRUB_TIMEOUT=1\nfi\n'
            'SAVED=$GRUB_CMDLINE_LINUX_DEFAULT\n')
    found, problems = static_assignments(text, GRUB_CMDLINE_VARS)
    assert problems == [] and [(name, line) for name, line, _s, _e in found] == [("GRUB_CMDLINE_LINUX_DEFAULT", 1)]
    for write in ('read GRUB_CMDLINE_LINUX < /dev/null', 'export GRUB_CMDLINE_LINUX', 'unset GRUB_CMDLINE_LINUX',
                  'printf -v GRUB_CMDLINE_LINUX %s x', ': ${GRUB_CMDLINE_LINUX:=x}', 'readonly GRUB_CMDLINE_LINUX=x',
                  'for GRUB_CMDLINE_LINUX in a; do :; done', 'GRUB_CMDLINE_LINUX=x GRUB_TIMEOUT=1',
                  'GRUB_CMDLINE_LINUX=(a b)', 'GRUB_CMDLINE_LINUX=x >/dev/null', 'GRUB_CMDLINE_LINUX=x;',
                  '! GRUB_CMDLINE_LINUX=x', 'GRUB_CMDLINE_LINUX=~/x', 'GRUB_CMDLINE_LINUX="a ${X:-b}"',
                  'GRUB_CMDLINE_LINUX=`echo x`', 'exec 3>/dev/null', 'exit 0', 'eval :', 'command . /dev/null'):
        found, problems = static_assignments("GRUB_CMDLINE_LINUX=\n" + write + "\n", GRUB_CMDLINE_VARS)
        assert problems and problems[0][0] == 2, (write, problems)


@pytest.mark.parametrize("text, line, reason", [
    ("A=`echo\nGRUB_CMDLINE_LINUX=x\n", 1, "has an unterminated backquote"),
    ("A=$(echo\nGRUB_CMDLINE_LINUX=x\n", 1, "has an unterminated $("),
    ('A="$(echo ")")"\nGRUB_CMDLINE_LINUX="x" && true\n', 2, "assigns GRUB_CMDLINE_LINUX followed by &&"),
    ("fi\nGRUB_CMDLINE_LINUX=x\n", 1, "has fi without the start of its block"),
    ("else\nGRUB_CMDLINE_LINUX=x\n", 1, "has else outside its block"),
    ("GRUB_TIMEOUT=1 ;;\n", 1, "has ;; outside a case block"),
    (")\n", 1, "has ) without its ("),
    ("while true; do\n  break\n", 1, "opens a while loop that is never closed"),
    ("gpu() {\n  :\n", 1, "opens a function that is never closed"),
    # a case item's command follows its pattern: return there stops sourcing the file (found by
    # hypothesis: the assignment after the case block never runs in bash)
    ("case x in\n  x) return 0 ;;\nesac\nGRUB_CMDLINE_LINUX=\"root=/dev/sda1 ro\"\n", 2, "runs return"),
    ("case $1 in\n  a|b) exit ;;\nesac\n", 2, "runs exit"),
    ("case x in\n  x) GRUB_CMDLINE_LINUX=y ;;\nesac\n", 2, "assigns GRUB_CMDLINE_LINUX inside a case block"),
])
def test_what_stops_the_shell_is_a_problem(text, line, reason):
    _found, problems = static_assignments(text, GRUB_CMDLINE_VARS)
    assert problems and problems[0][0] == line and problems[0][1].startswith(reason), problems


def test_quoted_parentheses_in_command_substitution():
    # $(...) ends at its own ")" even with a quoted ")" inside, as in the shell
    values, problems = parse_shell_assignments('A="$(echo ")")"\nB=2\n')
    assert values == {"A": None, "B": "2"} and "command substitution" in problems[0]


@pytest.mark.parametrize("text", ["", "\x00\x01", "((((", "))))", "{ { {", "} } }", "`", "$(", "'", '"', "<<", "\\",
                                  "if then else fi", "case", "do done", "f() f() f()", ";;;;&&||", "#", "\n\n"])
def test_static_check_never_raises(text):
    found, problems = static_assignments(text, GRUB_CMDLINE_VARS)
    assert isinstance(found, list) and isinstance(problems, list)
    assert grub_config([("/etc/default/grub", text)])["raw"] in (None, "")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("GRUB_CMDLINE_LINUX=+\"'$`(){}\\;&|<>#!\n x")), max_size=60))
def test_static_check_fuzz(text):
    found, problems = static_assignments("GRUB_CMDLINE_LINUX" + text, GRUB_CMDLINE_VARS)
    for name, line, start, end in found:
        assert name in GRUB_CMDLINE_VARS and line >= 1 and 0 <= start <= end
    assert all(isinstance(line, int) and isinstance(reason, str) for line, reason in problems)


# -- the judgement against real shells ---------------------------------------------------------------

STATEMENTS = [
    'GRUB_CMDLINE_LINUX="root=/dev/sda1 ro"', "GRUB_CMDLINE_LINUX_DEFAULT='quiet splash'",
    "GRUB_CMDLINE_LINUX_DEFAULT=bare", 'GRUB_CMDLINE_LINUX_DEFAULT="$GRUB_CMDLINE_LINUX_DEFAULT iommu=pt"',
    'GRUB_CMDLINE_LINUX="${GRUB_CMDLINE_LINUX_DEFAULT} console=ttyS0"', 'export GRUB_CMDLINE_LINUX="exported=1"',
    'GRUB_CMDLINE_LINUX="continued \\\n  line=2"', 'GRUB_CMDLINE_LINUX_DEFAULT="a \\"quoted\\" b"',
    'GRUB_CMDLINE_LINUX_DEFAULT+=" appended=1"', 'GRUB_CMDLINE_LINUX_DEFAULT="$EXTRA"',
    'GRUB_CMDLINE_LINUX="prefix=1" true', 'unset GRUB_CMDLINE_LINUX', ': "${GRUB_CMDLINE_LINUX:=defaulted=1}"',
    '. /dev/null', 'eval "GRUB_CMDLINE_LINUX=evaluated=1"', 'return 0', 'EXTRA="extra=1"', "GRUB_TIMEOUT=5",
    "GRUB_DISTRIBUTOR=`echo Debian`", '# GRUB_CMDLINE_LINUX="commented=1"', "true", "false",
    'GRUB_CMDLINE_LINUX="x=1" GRUB_CMDLINE_LINUX_DEFAULT="y=2"', 'GRUB_CMDLINE_LINUX="semi=1";',
]
WRAPPERS = [
    "{}", "{}", "{}", "if true; then\n  {}\nfi", "if false; then\n  {}\nfi", "if false; then :; else\n  {}\nfi",
    "true && {}", "false && {}", "false || {}", "GRUB_TIMEOUT=1; {}", "{} | true", "( {} )", "{{ {}; }}",
    "gpu() {{\n  {}\n}}\ngpu", "for p in 1; do\n  {}\ndone", "case x in\n  x) {} ;;\nesac", "{}  # comment",
]
# lines the check accepts, so that enough generated files are accepted as a whole
PLAIN = STATEMENTS[:8] + STATEMENTS[16:22] + ['if [ -n "$GRUB_CMDLINE_LINUX" ]; then GRUB_TIMEOUT=1; fi']
WRAPPED = st.tuples(st.sampled_from(WRAPPERS), st.sampled_from(STATEMENTS)).map(lambda pair: pair[0].format(pair[1]))
LINE = st.one_of(st.sampled_from(PLAIN), st.sampled_from(PLAIN), WRAPPED)
FILES = st.lists(LINE, min_size=1, max_size=6).map(lambda lines: "\n".join(lines) + "\n")


@pytest.mark.skipif(not SHELLS, reason="no POSIX shell to compare with")
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(FILES, min_size=1, max_size=2))
def test_accepted_files_evaluate_as_the_shell_does(tmp_path, texts):
    paths = []
    for index, text in enumerate(texts):
        path = str(tmp_path / ("%d.cfg" % index))
        with open(path, "w") as handle:
            handle.write(text)
        paths.append(path)
    config = grub_config(list(zip(paths, texts)))
    assume(not config["problems"])
    for shell in SHELLS:
        value = shell_value(paths, shell)
        if value is not None:  # a syntax error stops grub-mkconfig itself; nothing to compare
            assert config["raw"] == value, (shell, texts)
