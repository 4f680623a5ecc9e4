# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Assemble ``ansible_facts.gpuhost`` from the per-subsystem gatherers (docs/facts.md)."""

from __future__ import absolute_import, division, print_function

import time

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import (
    cpu, health, iommu, kernel, lxc, numa, nvidia, pci, persist,
)
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.sysctls import name_problem

__metaclass__ = type

SCHEMA = 1

#: subsystem name -> gather(root) function; order is the order of the document.
GATHERERS = (
    ("kernel", kernel.gather),
    ("cpu", cpu.gather),
    ("numa", numa.gather),
    ("pci", pci.gather),
    ("iommu", iommu.gather),
    ("nvidia", nvidia.gather),
    ("lxc", lxc.gather),
    ("persistence", persist.gather),
    ("health", health.gather),
)

SUBSYSTEMS = tuple(name for name, unused_gather in GATHERERS)


#: options of ``host_facts`` a gatherer takes, as keyword arguments: subsystem -> option names
GATHER_OPTIONS = {"health": ("kernel_log_boots",), "kernel": ("sysctls",)}


def module_options(module):
    """The options of :data:`GATHER_OPTIONS` from the parameters of a module that gathers (host_facts,
    host_snapshot), as :func:`gather_facts` takes them; a ``sysctls`` that names no sysctl fails the module
    with one line (``module.fail_json``) before anything is read."""
    problem = name_problem(module.params["sysctls"])
    if problem:
        module.fail_json(msg=problem)
    return dict((name, module.params[name]) for names in GATHER_OPTIONS.values() for name in names)


def gather_facts(root, subsystems=None, options=None):
    """Return the facts document for ``root`` (a :class:`root.Root`).

    ``options`` (``{"kernel_log_boots": 2}``) go to the gatherers that take them
    (:data:`GATHER_OPTIONS`); an option a gatherer does not take is ignored, a ``None`` value is
    the gatherer's default.

    A gatherer that raises despite its own guards is recorded as an error of its
    subsystem and its section is ``None``: one broken reader never hides the others.

    ``durations_s`` records what each reader cost (seconds of wall time, 3 decimals, by subsystem, in
    the order read), beside its ``errors``, as node_exporter records each collector's duration: a slow
    host says which subsystem was slow (a hung tool: the one bounded by the command runner).
    """
    wanted = set(subsystems or SUBSYSTEMS)
    facts = {
        "schema": SCHEMA,
        "root": root.root,
        "live": root.live,
        "hostname": root.read_value("/proc/sys/kernel/hostname", "host", optional=True),
        "gathered": [name for name in SUBSYSTEMS if name in wanted],
    }
    durations = {}
    for name, gather in GATHERERS:
        if name not in wanted:
            continue
        began = time.monotonic()
        try:
            kwargs = dict((key, (options or {})[key]) for key in GATHER_OPTIONS.get(name, ())
                          if (options or {}).get(key) is not None)
            facts[name] = gather(root, **kwargs)
        except Exception as exc:  # pylint: disable=broad-except
            root.error(name, root.root, "internal error while gathering %s: %s: %s" % (name, type(exc).__name__, exc))
            facts[name] = None
        durations[name] = round(time.monotonic() - began, 3)
    facts["durations_s"] = durations
    facts["errors"] = root.errors
    return facts
