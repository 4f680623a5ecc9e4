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
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if not match:
            raise ValueError("not a sample line: %r" % line)
        out.append((match.group(1), parse_labels(match.group(2)) if match.group(2) else {}, float(match.group(3))))
    return out
