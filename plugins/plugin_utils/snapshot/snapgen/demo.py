# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The demo hosts: their snapshots written where a user runs the demo (``demo_snapshots`` action).

The same generator as ``tools/make_fixtures.py`` (:mod:`scenarios`); :data:`DEMO_HOSTS` names the
inventory host of each snapshot, as ``inventory/demo`` of a checkout does (a test keeps the two equal).
"""

from __future__ import absolute_import, division, print_function

import os

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.snapshot.snapgen import scenarios
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.snapshot.snapgen.tree import replace_tree, same_tree

__metaclass__ = type

#: ``(inventory host, scenario, note shown with the host in the console summary)``
DEMO_HOSTS = (
    ("gpu-incident", "incident", ""),
    ("gpu-healthy", "healthy", ""),
    ("cpu-intel", "intel", ""),
    ("hostile", "hostile", "hostile test capture: garbage, markup and control characters on purpose"),
)


class DemoError(Exception):
    pass


def write_demo(dest, check_only=False):
    """Write each demo snapshot to ``dest/<scenario>`` (absolute), leaving one that is already exactly
    what the generator makes; with ``check_only``, write nothing. Returns ``{"changed", "hosts": [{"name",
    "root", "note", "changed"}]}``. A ``dest/<scenario>`` that is not an earlier snapshot (no
    ``snapshot.json``) is left alone: :class:`DemoError`."""
    hosts = []
    for name, scenario, note in DEMO_HOSTS:
        root = os.path.join(dest, scenario)
        tree = scenarios.build(scenario)[0]
        changed = not same_tree(tree, root)
        if changed and not check_only:
            try:
                replace_tree(tree, root)
            except FileExistsError as exc:
                raise DemoError(str(exc))
        hosts.append({"name": name, "root": root, "note": note, "changed": changed})
    return {"changed": any(h["changed"] for h in hosts), "hosts": hosts}
