# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One ``host_facts`` run on a managed host from an action plugin (controller side).

``baseline_evaluate`` and ``baseline_learn`` gather the same way: this module holds that call
and the outcome as a dict, because action plugins may not import each other.
"""

from __future__ import absolute_import, division, print_function

from ansible.errors import AnsibleConnectionFailure

__metaclass__ = type

FACTS_MODULE = "gpuhost.baseline.host_facts"


def gather_host(action, task_vars, root, gather=None):
    """Run ``host_facts`` for the task of ``action`` (an ``ActionBase``) on its host.

    Returns ``{"facts": dict}``, or ``{"unreachable": True, "msg"}`` when the connection fails,
    or ``{"failed": True, "msg"}`` when the module fails or returns no facts; never raises for a
    host that does not answer."""
    module_args = {"root": root}
    if gather:
        module_args["gather"] = gather
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
        return {"failed": True, "msg": "%s failed: %s" % (FACTS_MODULE, result.get("msg") or "no facts returned")}
    return {"facts": facts}
