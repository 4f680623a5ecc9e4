# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One ``host_facts`` run on a managed host from an action plugin (controller side).

``baseline_evaluate`` and ``baseline_learn`` gather the same way: this module holds that call
and the outcome as a dict, because action plugins may not import each other.
"""

from __future__ import absolute_import, division, print_function

import json
import os

from ansible.errors import AnsibleConnectionFailure

from ansible_collections.gpuhost.baseline.plugins.module_utils.host import runner
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.gather import gather_facts
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root

__metaclass__ = type

FACTS_MODULE = "gpuhost.baseline.host_facts"
#: the collection's own directory (plugins/plugin_utils/ is two levels below it)
_COLLECTION = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


#: what to do when the demo snapshots are missing (:func:`missing_root_hint`, :func:`missing_demo_roots`)
DEMO_HINT = ("the demo snapshots are not shipped with the collection. Run `ansible-playbook gpuhost.baseline.demo`: "
             "it writes them into ./gpuhost-demo/ and audits them (in a checkout, `make fixtures` writes them where "
             "inventory/demo looks)")


def _missing_demo_root(root):
    """Whether ``root`` lies inside the collection's own directory and is not a directory: only the demo
    inventory (``inventory/demo``) points there, at snapshots a checkout generates (``make fixtures``) and
    an installed collection does not ship."""
    if not root or not isinstance(root, str) or root == "/":
        return False
    real, top = os.path.realpath(root), os.path.realpath(_COLLECTION)
    return real.startswith(top + os.sep) and not os.path.isdir(real)


def missing_root_hint(root):
    """What to do about a snapshot root that is a missing demo snapshot (:func:`_missing_demo_root`);
    ``None`` for any other root."""
    if not _missing_demo_root(root):
        return None
    return "snapshot root %s is not a directory: %s" % (root, DEMO_HINT)


def missing_demo_roots(roots, named=5):
    """One message for every host of ``roots`` (host -> its ``gpuhost_root``) whose root is a missing demo
    snapshot, said once for the run before any host is read (``baseline_validate``); ``None`` when none is."""
    hosts = sorted((str(host) for host, root in roots.items() if _missing_demo_root(root)))
    if not hosts:
        return None
    more = " and %d more" % (len(hosts) - named) if len(hosts) > named else ""
    return "the snapshot root of host(s) %s%s is not a directory: %s" % (", ".join(hosts[:named]), more, DEMO_HINT)


def _snapshot_here(action, root):
    """Whether the task of ``action`` reads a snapshot on this machine: a ``root`` other than ``/``
    over the local connection without become. Its facts are then gathered in this process
    (:func:`gather_snapshot`), by the code the ``host_facts`` module runs."""
    if not root or root == "/":
        return False
    connection = getattr(action, "_connection", None)
    context = getattr(action, "_play_context", None)
    return getattr(connection, "transport", None) == "local" and not getattr(context, "become", False)


def gather_snapshot(root, gather=None, kernel_log_boots=None, sysctls=None):
    """``host_facts`` of the snapshot at ``root``, gathered in this process: what the module returns
    for it (``{"facts": dict}``, the facts as its JSON return gives them back) without starting a
    Python process and loading the module's code for each host, or ``{"failed": True, "msg"}`` with
    the module's message. A snapshot is only read (nothing is run: ``host.root.Root``), so this is
    the module's path less its process: the same readers, parsers and containment."""
    if not os.path.isdir(root):
        msg = "snapshot root %s is not a directory: capture one with the gpuhost.baseline.snapshot playbook" % root
        return {"failed": True, "msg": "%s failed: %s" % (FACTS_MODULE, missing_root_hint(root) or msg)}
    try:
        facts = gather_facts(Root(root), gather, {"kernel_log_boots": kernel_log_boots or 1, "sysctls": sysctls})
        # as the module's JSON return gives them back: lists for tuples, text keys
        return {"facts": json.loads(json.dumps(facts))}
    except Exception as exc:  # pylint: disable=broad-except
        # the module would fail with its traceback's last line; the host is reported failed, not the run
        return {"failed": True, "msg": "%s failed: %s: %s" % (FACTS_MODULE, type(exc).__name__, exc)}


def command_timeouts(task_vars):
    """``gpuhost_command_timeouts`` of the host (tool name -> seconds, numbers or numeric strings from 1
    to a day; module_utils/host/runner.py TIMEOUTS has the defaults) checked by
    ``runner.checked_timeouts``, or ``{}`` when unset. Raises :class:`ValueError` with one line naming the
    first bad entry: a bound the user set is never dropped in silence."""
    value = (task_vars or {}).get("gpuhost_command_timeouts")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError("gpuhost_command_timeouts must be a mapping (tool name -> seconds), not %s"
                         % type(value).__name__)
    try:
        return dict((str(k), v) for k, v in runner.checked_timeouts(value).items())
    except ValueError as exc:
        raise ValueError("gpuhost_%s" % exc)


def gather_host(action, task_vars, root, gather=None, kernel_log_boots=None, sysctls=None):
    """Run ``host_facts`` for the task of ``action`` (an ``ActionBase``) on its host; a snapshot on
    this machine (local connection, a ``root`` other than ``/``, no become) is read in this process
    instead (:func:`gather_snapshot`: the module's code, without its process).

    Returns ``{"facts": dict}``, or ``{"unreachable": True, "msg"}`` when the connection fails,
    or ``{"failed": True, "msg"}`` when the module fails or returns no facts; never raises for a
    host that does not answer. ``kernel_log_boots`` (1 or 2) goes to the module when given, and
    ``sysctls`` (the catalogue's ``Catalogue.sysctls``: sysctls its rules read by name) when not empty."""
    if _snapshot_here(action, root):
        return gather_snapshot(root, gather, kernel_log_boots, sysctls)
    module_args = {"root": root}
    if gather:
        module_args["gather"] = gather
    if kernel_log_boots is not None:
        module_args["kernel_log_boots"] = kernel_log_boots
    if sysctls:
        module_args["sysctls"] = list(sysctls)
    try:
        timeouts = command_timeouts(task_vars)
    except ValueError as exc:
        return {"failed": True, "msg": str(exc)}
    if timeouts:
        module_args["command_timeouts"] = timeouts
    try:
        # the action's own module call: the connection, become and interpreter of its task
        result = action._execute_module(  # pylint: disable=protected-access
            module_name=FACTS_MODULE, module_args=module_args, task_vars=task_vars)
    except AnsibleConnectionFailure as exc:
        return {"unreachable": True, "msg": "host unreachable: %s" % exc}
    if result.get("unreachable"):
        return {"unreachable": True, "msg": result.get("msg") or "host unreachable"}
    facts = (result.get("ansible_facts") or {}).get("gpuhost")
    if result.get("failed") or not isinstance(facts, dict):
        msg = result.get("msg") or "no facts returned"
        if str(msg).startswith("snapshot root "):
            msg = missing_root_hint(root) or msg
        return {"failed": True, "msg": "%s failed: %s" % (FACTS_MODULE, msg)}
    return {"facts": facts}
