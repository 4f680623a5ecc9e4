# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The site's own workloads (issue 39 item 2; ``host_measure``'s ``workloads``, docs/validation.md "Site
workloads", rule VAL-012): a workload's definition checked (:func:`check_workload`) and its output read
(:func:`parse_workload`). Pure functions over text and plain data that never raise; running the command is
``measure/measure_workload.py``'s, judging the figure against its floor the VAL rule's.

Two documented ways of reading a figure (:data:`PARSERS`):

* ``regex``: a Python regular expression with a named group ``value``, searched line by line (a line longer
  than :data:`measure.MAX_LINE` is not searched); the *last* line that matches gives the figure (a benchmark
  prints its progress first and its summary last), and the finding says how many lines matched.
* ``json``: the command prints one JSON document (an object or an array; lines before it, such as a log
  line, are skipped); ``path`` is a dotted path into it, ``results.0.throughput`` or ``[0].avg_ts``
  (``[N]`` and a segment of digits index a list, ``-1`` its last element; a key with a dot in it cannot be
  named).

Every figure is a finite number of at least 0 (``measure._number``: ``nan``, ``inf``, ``-3`` or ``true`` are
no figure). A reason names what was expected and quotes a bounded excerpt of what came instead. The text is
bounded (:data:`measure.MAX_TEXT`) before it is read. Standard library only, Python 3.8+.
"""

from __future__ import absolute_import, division, print_function

import json
import math
import re

from ansible_collections.gpuhost.baseline.plugins.module_utils.measure import measure

__metaclass__ = type

#: how a workload's figure is read from its output (docs/validation.md, "Site workloads")
PARSERS = ("regex", "json")
#: the most seconds one workload may run (as each GPU tool: 4 hours)
TIMEOUT_MAX = 4 * 3600
#: characters of output quoted in a reason
EXCERPT_CHARS = 200
#: characters of a pattern or a path kept (a definition is the site's, still bounded)
SPEC_CHARS = 1000
#: the most lines a JSON document is looked for at (each a ``raw_decode`` from that line's start)
JSON_STARTS_MAX = 50
_INDEX_RE = re.compile(r"^-?[0-9]{1,6}$")
_BRACKET_RE = re.compile(r"\[(-?[0-9]{1,6})\]")


def excerpt(text, limit=EXCERPT_CHARS):
    """A one-line excerpt of ``text`` for a reason: its non-empty lines joined with `` | ``, white space
    made single spaces, at most ``limit`` characters (``...`` when cut); ``"no output"`` for none."""
    if isinstance(text, bytes):
        text = text[:measure.MAX_TEXT].decode("utf-8", "replace")
    if not isinstance(text, str):
        return "no output"
    parts = []
    size = 0
    for line in text[:limit * 8].splitlines():
        line = " ".join(line.split())
        if line:
            parts.append(line)
            size += len(line) + 3
            if size > limit:
                break
    out = " | ".join(parts)
    out = "".join(c if c.isprintable() else "?" for c in out)
    if not out:
        return "no output"
    return out if len(out) <= limit else out[:limit - 3] + "..."


def last_line(*texts, **kwargs):
    """The last non-empty line of the first of ``texts`` that has one (stderr, then stdout: what a failing
    program printed last says why), at most ``limit`` characters; ``"no output"`` when none has one."""
    limit = kwargs.get("limit", EXCERPT_CHARS)
    for text in texts:
        if isinstance(text, bytes):
            text = text[-measure.MAX_TEXT:].decode("utf-8", "replace")
        if not isinstance(text, str):
            continue
        for line in reversed(text[-measure.MAX_TEXT:].splitlines()):
            line = " ".join(line.split())
            if line:
                line = "".join(c if c.isprintable() else "?" for c in line)
                return line if len(line) <= limit else line[:limit - 3] + "..."
    return "no output"


def _text(data):
    """The bounded text of an output, ``(text, None)`` or ``(None, reason)``."""
    if isinstance(data, bytes):
        data = data[:measure.MAX_TEXT].decode("utf-8", "replace")
    if not isinstance(data, str):
        return None, "no output"
    data = data[:measure.MAX_TEXT]
    if not data.strip():
        return None, "empty output"
    return data, None


def compile_pattern(pattern):
    """``(compiled, None)`` or ``(None, reason)``: a regular expression with a named group ``value``."""
    if not isinstance(pattern, str) or not pattern:
        return None, "parser regex needs a pattern (a regular expression with a named group value)"
    if len(pattern) > SPEC_CHARS:
        return None, "the pattern is longer than %d characters" % SPEC_CHARS
    try:
        compiled = re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        return None, "the pattern %r is not a regular expression: %s" % (pattern[:80], str(exc)[:120])
    if "value" not in compiled.groupindex:
        return None, "the pattern %r has no named group value: write (?P<value>...) around the figure" % pattern[:80]
    return compiled, None


def split_path(path):
    """``(segments, None)`` or ``(None, reason)``: ``results.0.throughput``, ``[0].avg_ts`` as
    ``["results", 0, "throughput"]``, ``[0, "avg_ts"]`` (a segment of digits is a list index)."""
    if not isinstance(path, str) or not path.strip():
        return None, "parser json needs a path (a dotted path into the command's JSON output, results.0.throughput)"
    if len(path) > SPEC_CHARS:
        return None, "the path is longer than %d characters" % SPEC_CHARS
    text = _BRACKET_RE.sub(r".\1", path.strip()).lstrip(".")
    segments = []
    for part in text.split("."):
        if part == "":
            return None, "the path %r has an empty segment" % path[:80]
        segments.append(int(part) if _INDEX_RE.match(part) else part)
    return segments, None


def check_workload(spec):
    """The message of what is wrong with one workload's definition (``name``, ``argv``, ``timeout``,
    ``parser`` with ``pattern`` or ``path``, ``unit``, optional ``floor``, ``lower_is_better`` and ``env``), or
    ``None``."""
    if not isinstance(spec, dict):
        return "a workload is a mapping (name, argv, timeout, parser, unit, floor), not %s" % type(spec).__name__
    name = spec.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        return "a workload needs a name (1 to 200 characters)"
    argv = spec.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(part, str) for part in argv) or not argv[0]:
        return "workload %s: argv must be a non-empty list of strings (the program and its arguments; no shell)" % name
    timeout = spec.get("timeout")
    if isinstance(timeout, bool) or not isinstance(timeout, int) or not 1 <= timeout <= TIMEOUT_MAX:
        return "workload %s: timeout must be 1 to %d seconds, not %r" % (name, TIMEOUT_MAX, timeout)
    parser = spec.get("parser")
    if parser not in PARSERS:
        return "workload %s: parser must be one of %s, not %r" % (name, ", ".join(PARSERS), parser)
    if parser == "regex":
        dummy, error = compile_pattern(spec.get("pattern"))
    else:
        dummy, error = split_path(spec.get("path"))
    if error:
        return "workload %s: %s" % (name, error)
    floor = spec.get("floor")  # none: the profile's learned floor (workload_floors), judged on the controller
    if floor is not None and (isinstance(floor, bool) or not isinstance(floor, (int, float)) or not math.isfinite(floor)
                              or floor < 0):
        return "workload %s: floor must be a number of at least 0 (or none: the learned one), not %r" % (name, floor)
    if not isinstance(spec.get("lower_is_better", False), bool):
        return "workload %s: lower_is_better must be true or false" % name
    unit = spec.get("unit")
    if unit is not None and (not isinstance(unit, str) or len(unit) > 40):
        return "workload %s: unit must be a string of at most 40 characters" % name
    env = spec.get("env") or {}
    if not isinstance(env, dict) or not all(isinstance(k, str) and k and "=" not in k and isinstance(v, str)
                                            for k, v in env.items()):
        return "workload %s: env must map variable names to strings" % name
    return None


def _parse_regex(text, pattern):
    compiled, error = compile_pattern(pattern)
    if error:
        return None, error
    found = []
    for line in text.splitlines():
        if len(line) > measure.MAX_LINE:
            continue
        match = compiled.search(line)
        if match:
            found.append(match.group("value"))
    if not found:
        return None, "no line matched the pattern %r; the output began: %s" % (pattern[:80], excerpt(text))
    value = measure._number(found[-1])  # pylint: disable=protected-access
    if value is None:
        return None, "the pattern %r matched %r, which is not a finite number of at least 0" % (
            pattern[:80], str(found[-1])[:60])
    how = "regex %r, %s" % (pattern[:80], "the one matching line" if len(found) == 1 else
                            "the last of %d matching lines" % len(found))
    return {"value": value, "how": how, "matches": len(found)}, None


def _json_document(text):
    """The JSON document the command printed: the whole text, else the first line from which one parses."""
    try:
        return json.loads(text), None
    except ValueError:
        pass
    except RecursionError:
        return None, "its JSON is nested too deeply to read"
    starts = [m.start() for m, dummy in zip(re.finditer(r"(?m)^[ \t]*[\[{]", text), range(JSON_STARTS_MAX))]
    error = None
    for start in starts:
        try:
            obj, dummy = json.JSONDecoder().raw_decode(text[start:].lstrip(" \t"))
            return obj, None
        except ValueError as exc:
            error = error or str(exc)[:80]
        except RecursionError:
            return None, "its JSON is nested too deeply to read"
    if error:
        return None, "no JSON document that parses (%s: truncated or not JSON); the output began: %s" % (
            error, excerpt(text))
    return None, "no JSON document (no line starts with { or [); the output began: %s" % excerpt(text)


def _parse_json(text, path):
    segments, error = split_path(path)
    if error:
        return None, error
    doc, error = _json_document(text)
    if error:
        return None, "expected JSON with %s: %s" % (path[:80], error)
    node = doc
    walked = []
    for segment in segments:
        if isinstance(segment, int) and isinstance(node, list):
            if not -len(node) <= segment < len(node):
                return None, "path %s: %s has %d element(s), no [%d]" % (
                    path[:80], ".".join(walked) or "the document", len(node), segment)
            node = node[segment]
        elif isinstance(node, dict) and str(segment) in node:
            node = node[str(segment)]
        else:
            keys = ", ".join(sorted(str(k) for k in node)[:10]) if isinstance(node, dict) else None
            return None, "path %s: no %s in %s (%s)" % (
                path[:80], segment, ".".join(walked) or "the document",
                "its keys: %s" % keys if keys is not None else "a %s" % type(node).__name__)
        walked.append(str(segment))
    value = measure._number(node)  # pylint: disable=protected-access
    if value is None:
        return None, "path %s is %s, not a finite number of at least 0" % (path[:80], json.dumps(node)[:60])
    return {"value": value, "how": "json path %s" % path[:80], "matches": 1}, None


def parse_workload(data, parser, pattern=None, path=None):
    """The figure a workload printed: ``({"value", "how", "matches"}, None)`` or ``(None, reason)``.

    ``parser`` ``regex`` (with ``pattern``) or ``json`` (with ``path``), see the module's docstring. The
    reason of output that does not give a figure says what was expected and quotes a bounded excerpt."""
    text, error = _text(data)
    if error:
        wanted = "a line matching %r" % str(pattern)[:80] if parser == "regex" else "JSON with %s" % str(path)[:80]
        return None, "%s: expected %s" % (error, wanted)
    if parser == "regex":
        return _parse_regex(text, pattern)
    if parser == "json":
        return _parse_json(text, path)
    return None, "parser must be one of %s, not %r" % (", ".join(PARSERS), parser)
