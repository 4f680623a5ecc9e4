# -*- coding: utf-8 -*-
"""Small host trees for the gatherer tests: a few sysfs/procfs/etc files under a temporary root."""

from __future__ import absolute_import, division, print_function

import io
import os
import tarfile

from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root, write_snapshot


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


def replay_recording(recorder, dest, meta=None):
    """A :class:`Root` over what ``recorder`` recorded: written as a snapshot tarball
    (``write_snapshot``, ``meta`` default ``{"format": 1}``), unpacked into ``dest`` with tarfile's
    ``data`` filter."""
    buffer = io.BytesIO()
    write_snapshot(recorder, buffer, meta or {"format": 1})
    buffer.seek(0)
    with tarfile.open(fileobj=buffer) as tar:
        tar.extractall(str(dest), filter="data")
    return Root(str(dest))
