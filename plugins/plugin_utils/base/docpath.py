# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading a value out of a facts document without tripping on its shape (controller side)."""
from __future__ import annotations


def get(doc, *path):
    """``doc[path[0]][path[1]]...``: a key of a mapping or an index of a list at each step;
    ``None`` as soon as a step does not fit (missing key, wrong type, index out of range)."""
    cur = doc
    for key in path:
        if isinstance(cur, dict):
            cur = cur.get(key)
        elif isinstance(cur, list) and isinstance(key, int) and -len(cur) <= key < len(cur):
            cur = cur[key]
        else:
            return None
    return cur
