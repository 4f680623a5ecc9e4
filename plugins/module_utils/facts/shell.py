# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A static reader of shell assignment files: ``/etc/default/grub``, ``/etc/default/grub.d/*.cfg``.

grub-mkconfig sources these files with ``sh``; this module reads them without running anything.
Pure functions over text, which never raise on bad input:

* :func:`parse_shell_assignments` evaluates the top-level ``NAME=value`` assignments the way ``sh``
  would for quotes, backslashes and ``$NAME``/``${NAME}`` references, and names what it cannot
  evaluate (command substitution, other expansions);
* :func:`join_continuations` joins backslash-newline continuations where their meaning is certain;
* :func:`static_assignments` (and :func:`static_scan`, which also returns the joined text and where each
  assignment's value lies) says whether the value each named variable ends with can be known without
  running the file: only plain top-level assignments count, anything else makes the file unknown.

Split from ``facts/kernel.py`` (the kernel facts), which uses it for the configured command line; the
GRUB fix (``fix/cmdline.py``) edits the spans it finds.
"""

from __future__ import absolute_import, division, print_function

import bisect
import re

from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import as_text

__metaclass__ = type


# -- shell assignment files (/etc/default/grub, /etc/os-release) ------------------------

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORD_END = " \t\n;&|<>()"


def read_word(text, i, env):
    """Read one shell word starting at ``i``; return ``(value, next_index, problem)``.

    Implements the quoting that configuration files use: single quotes (literal), double
    quotes (``\\`` escapes ``$ ` " \\`` and newline; ``$NAME``/``${NAME}`` expand), backslash
    escapes and expansions outside quotes, and backslash-newline continuation.
    ``value`` is ``None`` when the word cannot be evaluated (``$(...)``, backquotes,
    unterminated quote), with ``problem`` saying why.
    """
    n = len(text)
    out = []
    problem = None
    while i < n:
        ch = text[i]
        if ch in _WORD_END:
            break
        if ch == "'":
            end = text.find("'", i + 1)
            if end < 0:
                return None, n, "unterminated single quote"
            out.append(text[i + 1:end])
            i = end + 1
        elif ch == '"':
            i += 1
            closed = False
            while i < n:
                ch = text[i]
                if ch == '"':
                    closed = True
                    i += 1
                    break
                if ch == "\\" and i + 1 < n and text[i + 1] in '$`"\\\n':
                    if text[i + 1] != "\n":
                        out.append(text[i + 1])
                    i += 2
                elif ch == "$":
                    value, i, problem = _expand(text, i, env, problem)
                    out.append(value)
                elif ch == "`":
                    i = _skip_backquotes(text, i)
                    if i is None:
                        return None, n, "unterminated backquote"
                    problem = problem or "command substitution cannot be evaluated"
                else:
                    out.append(ch)
                    i += 1
            if not closed:
                return None, n, "unterminated double quote"
        elif ch == "\\":
            if i + 1 < n:
                if text[i + 1] != "\n":
                    out.append(text[i + 1])
                i += 2
            else:
                i += 1
        elif ch == "$":
            value, i, problem = _expand(text, i, env, problem)
            out.append(value)
        elif ch == "`":
            i = _skip_backquotes(text, i)
            if i is None:
                return None, n, "unterminated backquote"
            problem = problem or "command substitution cannot be evaluated"
        else:
            out.append(ch)
            i += 1
    if problem:
        return None, i, problem
    return "".join(out), i, None


def _skip_backquotes(text, i):
    """Index after the backquoted command starting at ``text[i] == '`'`` (``None`` if unclosed)."""
    j = i + 1
    while j < len(text):
        if text[j] == "\\":
            j += 2
            continue
        if text[j] == "`":
            return j + 1
        j += 1
    return None


def _skip_parens(text, i):
    """Index of the ``)`` that closes the ``(`` at ``text[i]`` (``None`` if unclosed).

    Quotes inside are skipped as the shell reads them, so ``$(echo ")")`` ends where it should.
    """
    depth = 0
    j, n = i, len(text)
    while j < n:
        ch = text[j]
        if ch == "\\":
            j += 2
            continue
        if ch == "'":
            close = text.find("'", j + 1)
            if close < 0:
                return None
            j = close + 1
            continue
        if ch == '"':
            j += 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return j
        j += 1
    return None


def _expand(text, i, env, problem):
    """Expand ``$NAME`` or ``${NAME}`` at ``text[i] == '$'``: ``(value, next_index, problem)``."""
    n = len(text)
    if i + 1 < n and text[i + 1] == "{":
        end = text.find("}", i + 2)
        if end < 0:
            return "", n, "unterminated ${"
        name = text[i + 2:end]
        if not _NAME_RE.fullmatch(name):
            return "", end + 1, problem or "parameter expansion ${%s} cannot be evaluated" % name[:40]
        return env.get(name) or "", end + 1, problem
    if i + 1 < n and text[i + 1] == "(":
        close = _skip_parens(text, i + 1)
        if close is None:
            return "", n, "unterminated $("
        return "", close + 1, problem or "command substitution cannot be evaluated"
    match = _NAME_RE.match(text, i + 1)
    if match:
        return env.get(match.group(0)) or "", match.end(), problem
    return "$", i + 1, problem


def parse_shell_assignments(text, env=None):
    """Evaluate the plain ``NAME=value`` assignments of a shell fragment.

    Returns ``(values, problems)``: ``values`` maps each assigned name to its last value, or
    to ``None`` when that value could not be evaluated; ``problems`` lists why (line, reason).
    ``export NAME=value`` counts as an assignment; any other command is skipped, and so are
    assignments that prefix a command (``A=1 cmd``), which a shell would not keep.
    ``env`` seeds the variables that ``$NAME`` expands to (a sourced file sees the values of
    the files sourced before it).
    """
    text = as_text(text)
    values = {}
    problems = []
    if not text:
        return values, problems
    scope = dict(env or {})
    i, n = 0, len(text)
    while i < n:
        # start of a command: skip blanks and separators
        while i < n and text[i] in " \t\n;&|":
            i += 1
        if i >= n:
            break
        if text[i] == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        line = text.count("\n", 0, i) + 1
        pending = []
        is_command = False
        while i < n and text[i] not in "\n;&|":
            if text[i] in " \t":
                i += 1
                continue
            if text[i] == "#":
                end = text.find("\n", i)
                i = n if end < 0 else end
                break
            if text[i] in "<>()":
                is_command = True
                i += 1
                continue
            match = _NAME_RE.match(text, i)
            if not is_command and match and match.end() < n and text[match.end()] == "=":
                value, i, problem = read_word(text, match.end() + 1, scope)
                pending.append((match.group(0), value, problem))
                continue
            word, i, _problem = read_word(text, i, scope)
            if word == "export" and not pending:
                continue
            is_command = True
        if is_command:
            continue
        for name, value, problem in pending:
            if problem:
                problems.append("line %d: %s: %s" % (line, name, problem))
            values[name] = value
            scope[name] = value or ""
    return values, problems


# -- static check of a shell fragment (/etc/default/grub) ------------------------------
#
# grub-mkconfig sources /etc/default/grub (and, on Debian and its derivatives,
# /etc/default/grub.d/*.cfg) with sh. Which value a variable ends with can be known without
# running the file only when every write to it is a plain top-level assignment: a line
# ``NAME=value`` or ``export NAME=value`` on its own, outside any if/case/loop/function/group,
# not after ``&&``, ``||``, ``;``, ``|`` or ``!``, whose value uses only quotes, backslashes
# and ``$NAME``/``${NAME}`` of the judged variables. Reading them (``$NAME``, ``${NAME}``) is
# allowed anywhere; sourcing another file, ``eval``, ``exit``/``return``/``exec``, a
# here-document, an unterminated quote or an unclosed block make the whole file unknown.
# The check reads the file; it never runs it.

_OPERATORS = ("&&", "||", ";;&", ";;", ";&", "|&", ";", "&", "|")
_LIST_OPERATORS = ("&&", "||", "|", "|&")  # a line break after one of these continues the list
_OPENERS = {"if": "an if block", "case": "a case block", "for": "a for loop", "select": "a select loop",
            "while": "a while loop", "until": "an until loop", "{": "a { } group", "(": "a ( ) subshell"}
_CLOSERS = {"fi": ("if",), "esac": ("case",), "done": ("for", "select", "while", "until"), "}": ("{",)}
_CONTINUERS = {"then": ("if",), "elif": ("if",), "else": ("if",), "do": ("for", "select", "while", "until"), "!": ()}
_HEADERS = ("for", "select", "case")  # the rest of such a command is not a command
_ASSIGNMENT_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\+?=)")
_REFERENCE_RE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_OTHER_EXPANSION_RE = re.compile(r"\$(\{[^}]*\}?|[0-9@*#?$!-]?)")


#: where a line continuation cannot be proven to mean what the joiner makes of it (the stack's context)
_OPAQUE = {"$(": "inside $(...)", "`": "inside backquotes", "${": "inside ${...}"}
_WORD_BREAK = " \t\n;&|()<>"


def join_continuations(text):
    """``text`` with every line continuation (a backslash before a line break) removed where sh removes
    it, before the text is split into words: outside quotes and inside double quotes, never inside single
    quotes or a comment (sh reads ``GRUB_CMDLINE_LINUX_DEF``, a backslash, a line break and
    ``AULT="..."`` as one assignment).

    Returns ``(joined, where, problem)``: ``where[k]`` is the index in ``text`` of ``joined[k]``, and
    ``where[len(joined)] == len(text)``. ``problem`` is ``(line, reason)`` when a continuation appears where
    the joiner cannot prove how sh reads it (inside ``$(...)``, backquotes or ``${...}``, or in a file that
    uses ``$'...'`` quoting, which dash and bash read differently): the file is then unknown, as any other
    form the static check cannot evaluate. A text without a continuation is returned as it is."""
    if "\\\n" not in text:
        return text, None, None
    out, where = [], []
    stack = ["sh"]  # sh, ', ", #, $(, `, ${; a $( counts its parentheses in depth
    depth = []
    problem = None
    dollar_quote = None
    joined_any = None
    escaped = -1
    i, n = 0, len(text)

    def line(pos):
        return text.count("\n", 0, pos) + 1

    def emit(pos, count=1):
        for k in range(pos, pos + count):
            out.append(text[k])
            where.append(k)

    while i < n:
        ch = text[i]
        top = stack[-1]
        if top == "'":
            if ch == "'":
                stack.pop()
            emit(i)
            i += 1
            continue
        if top == "#":
            if ch == "\n":
                stack.pop()
                continue  # the line break ends the comment and is read in the context below it
            emit(i)
            i += 1
            continue
        if ch == "\\":
            if text.startswith("\\\n", i):
                opaque = [_OPAQUE[c] for c in stack if c in _OPAQUE]
                if opaque and problem is None:
                    problem = (line(i), "has a line continuation (\\ at the end of the line) %s, which cannot "
                                        "be evaluated without the shell" % opaque[-1])
                joined_any = joined_any or i
                i += 2
                continue
            emit(i, min(2, n - i))
            escaped = len(out)  # an escaped blank is part of a word: a # after it starts no comment
            i += 2
            continue
        if top in ("`", "${"):
            if (top == "`" and ch == "`") or (top == "${" and ch == "}"):
                stack.pop()
            emit(i)
            i += 1
            continue
        if top == '"':
            if ch == '"':
                stack.pop()
            elif text.startswith("$(", i) or text.startswith("${", i):
                stack.append(text[i:i + 2])
                depth.append(0)
                emit(i, 2)
                i += 2
                continue
            elif ch == "`":
                stack.append("`")
            emit(i)
            i += 1
            continue
        # sh or $(: a command context
        if ch == "'":
            stack.append("'")
        elif ch == '"':
            stack.append('"')
        elif ch == "#" and (not out or (out[-1] in _WORD_BREAK and len(out) != escaped)):
            stack.append("#")
        elif ch == "`":
            stack.append("`")
        elif text.startswith("$'", i):
            dollar_quote = dollar_quote or i
        elif text.startswith("$(", i) or text.startswith("${", i):
            stack.append(text[i:i + 2])
            depth.append(0)
            emit(i, 2)
            i += 2
            continue
        elif top == "$(" and ch == "(":
            depth[-1] += 1
        elif top == "$(" and ch == ")":
            if depth[-1]:
                depth[-1] -= 1
            else:
                stack.pop()
                depth.pop()
        emit(i)
        i += 1
    where.append(n)
    if problem is None and dollar_quote is not None and joined_any is not None:
        problem = (line(joined_any), "has a line continuation (\\ at the end of the line) in a file that uses "
                                     "$'...' quoting (line %d), which sh and bash read differently"
                   % line(dollar_quote))
    return "".join(out), where, problem


def _operator(text, i):
    for op in _OPERATORS:
        if text.startswith(op, i):
            return op
    return text[i]


def _shell_commands(text, line_of=None):
    """Split a shell fragment into commands the way sh reads them, without running anything.

    Returns ``(commands, stop)``. Each command is ``(line, before, tokens, after)``: ``line`` where
    it starts, ``before``/``after`` the operator on either side (``"\\n"`` for a line break or the
    start or end of the text; a line break after ``&&``, ``||`` or ``|`` keeps that operator),
    ``tokens`` a list of ``(kind, raw, start, end)`` with kind ``word``, ``(``, ``)`` or
    ``redirect``. ``stop`` is ``(line, reason)`` when the text cannot be read on (unterminated
    quote, here-document), else ``None``.
    """
    if line_of is None:
        newlines = [match.start() for match in re.finditer("\n", text)]

        def line_of(pos):
            return bisect.bisect_left(newlines, pos) + 1

    commands = []
    i, n = 0, len(text)
    before = "\n"
    while True:
        while i < n:
            ch = text[i]
            if ch in " \t":
                i += 1
            elif text.startswith("\\\n", i):
                i += 2
            elif ch == "\n":
                if before not in _LIST_OPERATORS:
                    before = "\n"
                i += 1
            elif ch == "#":
                end = text.find("\n", i)
                i = n if end < 0 else end
            elif ch in ";&|":
                before = _operator(text, i)
                i += len(before)
            else:
                break
        if i >= n:
            return commands, None
        line = line_of(i)
        tokens = []
        while i < n:
            ch = text[i]
            if ch in " \t":
                i += 1
            elif text.startswith("\\\n", i):
                i += 2
            elif ch == "#":  # at a word boundary: a comment
                end = text.find("\n", i)
                i = n if end < 0 else end
            elif ch in "\n;&|":
                break
            elif ch in "()":
                tokens.append((ch, ch, i, i + 1))
                i += 1
            elif ch in "<>":
                if text.startswith("<<", i) and not text.startswith("<<<", i):
                    return commands, (line_of(i), "starts a here-document (<<), so the lines after it cannot be "
                                                  "evaluated")
                j = i + 1
                while j < n and text[j] in "<>&|":
                    j += 1
                tokens.append(("redirect", text[i:j], i, j))
                i = j
            else:
                start = i
                _value, i, problem = read_word(text, i, {})
                if problem and problem.startswith("unterminated"):
                    return commands, (line_of(start), "has an %s, so the rest of the file cannot be evaluated"
                                      % problem)
                i = max(i, start + 1)
                tokens.append(("word", text[start:i], start, i))
        after = "\n" if i >= n or text[i] == "\n" else _operator(text, i)
        commands.append((line, before, tokens, after))
        before = "\n"


def _shown(word):
    """A word of the file for a message: at most 40 characters, control characters escaped."""
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in word[:40])


def _writes(raw, mention):
    """Names that ``raw`` mentions other than as a plain read (``$NAME``, ``${NAME}``)."""
    found = []
    for match in mention.finditer(raw):
        start, end = match.span()
        if raw[start - 1:start] == "$" or (raw[start - 2:start] == "${" and raw[end:end + 1] == "}"):
            continue
        found.append(match.group(0))
    return found


def _value_problem(raw, names):
    """Why the value word ``raw`` of an assignment cannot be evaluated without the shell, or ``None``.

    Quotes and backslashes are fine, and so are ``$NAME``/``${NAME}`` of ``names`` (judged the
    same way); any other expansion is not.
    """
    i, n = 0, len(raw)
    quote = None
    while i < n:
        ch = raw[i]
        if quote == "'":
            if ch == "'":
                quote = None
            i += 1
            continue
        if ch == "\\":
            i += 2
            continue
        if ch == '"':
            quote = None if quote == '"' else '"'
        elif ch == "'" and quote is None:
            quote = "'"
        elif ch == "`":
            return "from a command substitution (backquotes)"
        elif ch == "~" and quote is None and (i == 0 or raw[i - 1] == ":"):
            return "with a tilde expansion (~)"
        elif ch == "$":
            if raw.startswith("$(", i):
                return "from a command substitution ($(...))"
            match = _REFERENCE_RE.match(raw, i)
            if match and (match.group(1) or match.group(2)) in names:
                i = match.end()
                continue
            if match:
                return "from $%s (only %s are followed)" % (
                    match.group(1) or match.group(2), " and ".join("$" + name for name in names))
            other = _OTHER_EXPANSION_RE.match(raw, i).group(0)
            return "from %s" % _shown(other) if other != "$" else "with a bare $"
        i += 1
    return None


def static_assignments(text, names):
    """Judge whether the values ``names`` have after sh sources ``text`` can be known without running it.

    Returns ``(assignments, problems)``. ``assignments`` lists the plain top-level assignments to
    ``names`` in file order as ``(name, line, start, end)``, ``start``/``end`` the span of the
    value word in ``text`` (the last one of a name is the one in effect at the end of the file).
    ``problems`` lists ``(line, reason)`` in line order, one per command, for example
    ``(12, "assigns GRUB_CMDLINE_LINUX_DEFAULT inside an if block")``; when it is not empty the
    values are unknown. Line continuations are joined first (:func:`join_continuations`), so a name
    or a value split over two lines is seen as sh sees it. Never raises on bad input.
    """
    text = as_text(text) or ""
    unused_joined, where, assignments, problems = static_scan(text, names)
    if where is not None:
        assignments = [(name, line, where[start], where[end - 1] + 1 if end > start else where[start])
                       for name, line, start, end in assignments]
    return assignments, problems


def static_scan(text, names):
    """:func:`static_assignments` of ``text`` with its continuations joined: ``(joined, where, assignments,
    problems)``, the spans of ``assignments`` in ``joined`` (``where`` maps them back; ``None`` when
    nothing was joined)."""
    original = text
    text, where, joined_problem = join_continuations(original)
    names = tuple(names)
    mention = re.compile(r"(?<![A-Za-z0-9_])(?:%s)(?![A-Za-z0-9_])"
                         % "|".join(re.escape(name) for name in sorted(names, key=len, reverse=True)))
    original_lines = None
    if where is not None:
        newlines = [match.start() for match in re.finditer("\n", original)]

        def original_lines(pos):
            return bisect.bisect_left(newlines, where[min(pos, len(where) - 1)]) + 1
    commands, stop = _shell_commands(text, original_lines)
    assignments = []
    problems = []
    stack = []  # open blocks: (label, opening word, line)
    function_next = False
    for line, before, tokens, after in commands:
        negated = False
        header = False
        k = 0
        # reserved words, subshells and function headers in front of the simple command
        while k < len(tokens):
            kind, raw = tokens[k][0], tokens[k][1]
            if kind == ")":
                if stack and stack[-1][1] == "(":
                    stack.pop()
                elif not (stack and stack[-1][1] == "case"):
                    problems.append((line, "has ) without its ("))
            elif kind == "(" or (kind == "word" and raw in _OPENERS):
                label = "a function" if function_next else _OPENERS[raw]
                function_next = False
                stack.append((label, raw, line))
                if raw in _HEADERS:
                    header = True
                    k += 1
                    break
            elif kind == "word" and raw in _CLOSERS:
                if stack and stack[-1][1] in _CLOSERS[raw]:
                    stack.pop()
                else:
                    problems.append((line, "has %s without the start of its block" % raw))
            elif kind == "word" and raw in _CONTINUERS:
                negated = negated or raw == "!"
                if raw != "!" and not (stack and stack[-1][1] in _CONTINUERS[raw]):
                    problems.append((line, "has %s outside its block" % raw))
            elif kind == "word" and raw == "function":
                # function NAME [()] BODY
                function_next = True
                k += 1
                if k + 2 < len(tokens) and tokens[k + 1][0] == "(" and tokens[k + 2][0] == ")":
                    k += 2
            elif kind == "word" and k + 2 < len(tokens) and tokens[k + 1][0] == "(" and tokens[k + 2][0] == ")":
                # NAME() BODY
                function_next = True
                k += 2
            else:
                break
            k += 1
        if not header and stack and stack[-1][1] == "case":
            # a case item, PATTERN) COMMAND: the command (return, exit, an assignment...) follows the
            # pattern's ); reserved words after it are not tracked, so a block opened there shows up
            # as a problem later (its closer without a start), never as a plain assignment
            j = k
            while j < len(tokens) and tokens[j][0] == "word":
                j += 1
            if k < j < len(tokens) and tokens[j][0] == ")":
                k = j + 1
        simple = [] if header else tokens[k:]
        words = [token[1] for token in simple if token[0] == "word"]
        command = words[1] if words[:1] in (["command"], ["builtin"]) and len(words) > 1 else (words[:1] or [""])[0]
        written = [(token, name) for token in tokens if token[0] == "word" for name in _writes(token[1], mention)]
        reason = None
        if command in (".", "source"):
            reason = "sources another file (%s), which may assign anything" % command
        elif command == "eval":
            reason = "runs eval, which may assign anything"
        elif command == "exit" or (command == "return" and not any(block[0] == "a function" for block in stack)):
            reason = "runs %s, which stops reading the file there" % command
        elif command == "exec":
            reason = "runs exec, which may end the shell there"
        elif written:
            token, name = written[0]
            assign = _ASSIGNMENT_RE.match(token[1])
            if assign and assign.group(1) != name:
                assign = None
            verb = "uses" if not assign else "appends to" if assign.group(2) == "+=" else "assigns"
            body = simple[1:] if words[:1] == ["export"] and simple[0][0] == "word" else simple
            run = 0
            while run < len(body) and body[run][0] == "word" and _ASSIGNMENT_RE.match(body[run][1]):
                run += 1
            if stack:
                reason = "%s %s inside %s" % (verb, name, stack[-1][0])
            elif negated:
                reason = "%s %s after !" % (verb, name)
            elif before != "\n":
                reason = "%s %s after %s" % (verb, name, before)
            elif not assign or token not in body[:run]:
                reason = "uses %s outside a plain assignment (%s)" % (name, _shown((words[:1] or [tokens[0][1]])[0]))
            elif assign.group(2) == "+=":
                reason = "appends to %s with +=" % name
            elif run < len(body) and body is not simple:
                reason = "assigns %s in an export with other names" % name
            elif run < len(body) and body[run][0] == "word":
                reason = "sets %s only for the command %s" % (name, _shown(body[run][1]))
            elif run < len(body):
                reason = "assigns %s with %s after it" % (name, "an array" if body[run][0] == "(" else "a redirection")
            elif run > 1:
                reason = "assigns %s together with another assignment on the same line" % name
            elif after != "\n":
                reason = "assigns %s followed by %s" % (name, after)
            else:
                start = token[2] + assign.end()
                problem = _value_problem(text[start:token[3]], names)
                if problem:
                    reason = "assigns %s %s" % (name, problem)
                else:
                    assignments.append((name, line, start, token[3]))
        if reason:
            problems.append((line, reason))
        for token in simple:
            if token[0] == ")" and stack and stack[-1][1] == "(":
                stack.pop()
        if after in (";;", ";&", ";;&") and not (stack and stack[-1][1] == "case"):
            problems.append((line, "has %s outside a case block" % after))
    if stop:
        problems.append(stop)
    elif stack:
        label, _word, line = stack[0]
        problems.append((line, "opens %s that is never closed" % label))
    if joined_problem:
        problems.append(joined_problem)
    problems.sort(key=lambda problem: problem[0])
    return text, where, assignments, problems
