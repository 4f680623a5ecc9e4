# -*- coding: utf-8 -*-
"""Small host trees for the gatherer tests: a few sysfs/procfs/etc files under a temporary root."""

from __future__ import absolute_import, division, print_function

import os


def write_tree(base, files):
    """Create ``files`` ({host path: text/bytes/None for a directory}) under ``base``; return ``base``."""
    for path, content in files.items():
        target = os.path.join(str(base), path.lstrip("/"))
        if content is None:
            os.makedirs(target, exist_ok=True)
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as handle:
            handle.write(content if isinstance(content, bytes) else content.encode("utf-8"))
    return str(base)
