# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ISO 8601 times and Unix time: the one reading of a report's, a history record's or an audit's
time (``Z`` or an offset; a naive time is UTC). Standard library only: the drift history, the
counter derivations and the metrics import it, on the controller and in the self-audit bundle."""

from __future__ import absolute_import, division, print_function

import datetime
import math

__metaclass__ = type

_UNIX_START = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


def epoch_seconds(value):
    """Unix time (float) of an ISO 8601 text or of a finite number; ``None`` when neither."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    text = str(value).strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        stamp = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=datetime.timezone.utc)
    return (stamp - _UNIX_START).total_seconds()


def epoch(text):
    """Unix time in whole seconds (int) of an ISO 8601 text; ``None`` when ``text`` is not one (a number neither)."""
    seconds = epoch_seconds(text) if isinstance(text, str) else None
    return None if seconds is None else int(seconds)


def iso(seconds):
    """The ISO 8601 text (UTC, whole seconds) of a Unix time: ``2025-06-01T12:00:00+00:00``."""
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).replace(microsecond=0).isoformat()
