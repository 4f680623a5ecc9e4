# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The demo hosts: their snapshots written where a user runs the demo (``demo_snapshots`` action).

The same generator as ``tools/make_fixtures.py`` (:mod:`scenarios`); :data:`DEMO_HOSTS` names the
inventory host of each snapshot, as ``inventory/demo`` of a checkout does (a test keeps the two equal).
"""

from __future__ import absolute_import, division, print_function

import os

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.files import FileRefused, atomic_write, read_text
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


#: the first lines of the demo's inventory file (:func:`inventory_text`)
INVENTORY_HEAD = (
    "# The demo hosts, each read from its snapshot (gpuhost_root): written by gpuhost.baseline's demo playbook.\n"
    "# Audit or preview a remediation of them again with, for example:\n"
    "#   ansible-playbook gpuhost.baseline.audit -i %(path)s --check\n"
    "#   ansible-playbook gpuhost.baseline.remediate -i %(path)s --check\n")


def inventory_text(hosts, path, python):
    """The YAML inventory of the demo ``hosts`` (:func:`write_demo`'s entries): group ``gpuhost_demo``,
    each host on the local connection with its snapshot as ``gpuhost_root`` and ``python`` (the
    controller's) as its interpreter; ``path`` is named in the comment."""
    import yaml  # pylint: disable=import-outside-toplevel  # the controller's (ansible-core's dependency)

    entries = {}
    for host in hosts:
        entry = {"ansible_connection": "local", "ansible_python_interpreter": python, "gpuhost_root": host["root"]}
        if host.get("note"):
            entry["gpuhost_note"] = host["note"]
        entries[host["name"]] = entry
    document = {"all": {"children": {"gpuhost_demo": {"hosts": entries}}}}
    return INVENTORY_HEAD % {"path": path} + yaml.safe_dump(document, default_flow_style=False, sort_keys=False)


def write_inventory(path, hosts, python, check_only=False):
    """Write :func:`inventory_text` to ``path`` (absolute) unless it holds exactly that; ``True`` when
    written (or, with ``check_only``, when it would be). Read and written through the controller's file
    helpers (base/files.py: bounded, no link followed, atomic); a link, a directory or another non-file in
    its place is refused."""
    text = inventory_text(hosts, path, python)
    try:
        if read_text(path) == text:
            return False
    except FileNotFoundError:
        pass
    except FileRefused as exc:
        raise DemoError("%s is a link or not a regular file (it %s): the demo inventory is not written there"
                        % (path, exc.why))
    except OSError:
        pass  # not readable: written over, as a file that differs
    if not check_only:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        atomic_write(path, text)
    return True


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
