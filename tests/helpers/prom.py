# -*- coding: utf-8 -*-
"""A strict reader of the Prometheus text exposition format, for asserting on metrics.prom."""

import re

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$')
_UNESCAPE = {"\\": "\\", '"': '"', "n": "\n"}


def parse_labels(text):
    """Parse ``{k="v",...}`` honouring the exposition escapes (an unknown escape raises KeyError)."""
    labels = {}
    i = 1
    while i < len(text) - 1:
        eq = text.index("=", i)
        key = text[i:eq]
        if text[eq + 1] != '"':
            raise ValueError("label %s: value not quoted in %r" % (key, text))
        j = eq + 2
        value = []
        while text[j] != '"':
            if text[j] == "\\":
                value.append(_UNESCAPE[text[j + 1]])
                j += 2
            else:
                value.append(text[j])
                j += 1
        labels[key] = "".join(value)
        i = j + 1
        if text[i] == ",":
            i += 1
    return labels


def parse_metrics(text):
    """``[(name, labels, value)]`` of every sample line; comment lines skipped."""
    out = []
    # only "\n" ends a line in the exposition format (a label value may hold "\r" or U+2028)
    for line in text.split("\n"):
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if not match:
            raise ValueError("not a sample line: %r" % line)
        out.append((match.group(1), parse_labels(match.group(2)) if match.group(2) else {}, float(match.group(3))))
    return out


_COMMENT = re.compile(r'^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$')


def parse_families(text):
    """``{family: {"help", "type", "samples": [(labels, value)]}}`` of an exposition text, checking
    what the textfile collector and ``promtool`` insist on: HELP and TYPE once per family and before
    its samples, a family's samples contiguous, no series twice, the file ending in a newline."""
    assert text == "" or text.endswith("\n"), "the file must end with a newline"
    families = {}
    current = None
    seen = set()
    for line in text[:-1].split("\n") if text else []:
        comment = _COMMENT.match(line)
        if comment:
            kind, name, rest = comment.groups()
            family = families.setdefault(name, {"help": None, "type": None, "samples": []})
            assert family[kind.lower()] is None, "%s %s given twice" % (kind, name)
            assert not family["samples"], "%s %s after its samples" % (kind, name)
            family[kind.lower()] = rest
            current = name
            continue
        assert line and not line.startswith("#"), "unexpected line %r" % line
        (name, labels, value), = parse_metrics(line)
        assert name == current, "sample of %s outside its family block (after %s)" % (name, current)
        key = (name, tuple(sorted(labels.items())))
        assert key not in seen, "series twice: %r" % (key,)
        seen.add(key)
        families[name]["samples"].append((labels, value))
    for name, family in families.items():
        assert family["help"] and family["type"], "%s lacks HELP or TYPE" % name
    return families
