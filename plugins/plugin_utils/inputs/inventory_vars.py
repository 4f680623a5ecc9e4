# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which ``gpuhost_*`` variables a host may set, and whether a remediation would fix the controller.

A misspelled variable is silently ignored by Ansible: ``gpuhost_rot: /snapshots/a`` leaves
``gpuhost_root`` at its default ``/``, and on a host with a local connection the fixes then act on
the controller itself. ``known_names`` lists what the collection understands, derived at run time:

* every option of every role's ``meta/argument_specs.yml`` (the role inputs, documented there);
* every name the collection's own roles, playbooks and molecule scenarios set while they run
  (``register``, ``set_fact`` keys, ``vars`` keys, the roles' ``vars/`` and ``defaults/`` files): a
  remediate role that runs after an audit in the same play sees ``gpuhost_eval``, and remediate.yml
  under molecule sees ``gpuhost_test_run``, and neither is a typo;
* ``INVENTORY_ONLY`` below: the few inventory variables that are no role option (the playbooks'
  keywords and variables of learn.yml and snapshot.yml, the console note, ``gpuhost_allow_empty``).

``unknown_names`` reports the rest with the closest known name (``difflib``), and
``controller_refusal`` says why a host must not be remediated. Pure functions; the action plugin
``baseline_validate`` feeds them the host's variables and its connection.
"""

from __future__ import absolute_import, division, print_function

import difflib
import os

__metaclass__ = type

PREFIX = "gpuhost_"

#: Inventory variables that are no role option (the roles' argument specs document the others).
INVENTORY_ONLY = {
    "gpuhost_allow_empty": "every playbook: a run whose hosts match nothing exits 0 instead of 2 (-e)",
    "gpuhost_serial": "remediate.yml: hosts per batch (the play's serial)",
    "gpuhost_max_fail_percentage": "remediate.yml: the play's max_fail_percentage",
    "gpuhost_note": "a word shown with the host in the console summary",
    "gpuhost_learn_dir": "learn.yml: where the site profile is written",
    "gpuhost_learn_profile": "learn.yml: the site profile's name",
    "gpuhost_learn_extends": "learn.yml: the bundled profile it extends",
    "gpuhost_learn_memory_tolerance_pct": "learn.yml: memory size tolerance",
    "gpuhost_learn_workloads": "learn.yml: run the site's workloads on the golden host and learn their floors",
    "gpuhost_learn_workload_repeats": "learn.yml: runs of each workload on the golden host",
    "gpuhost_learn_workload_margin_pct": "learn.yml: how far below the golden host's figure a learned floor lies",
    "gpuhost_snapshot_dir": "snapshot.yml: where the snapshots are unpacked on the controller",
    "gpuhost_snapshot_remote": "snapshot.yml: the tarball's path on the host",
}

#: Inventory names Ansible itself treats as the controller (ansible.constants.LOCALHOST).
LOCALHOST_NAMES = ("127.0.0.1", "localhost", "::1")

#: Connection plugins that run the modules on the controller.
LOCAL_CONNECTIONS = ("local", "ansible.builtin.local", "ansible.legacy.local")


class InventoryVarsError(Exception):
    """The known names cannot be read (no role argument specs under the collection root)."""


_SET_FACT = ("set_fact", "ansible.builtin.set_fact", "ansible.legacy.set_fact")
_KNOWN_CACHE = {}


def _yaml_files(collection_root):
    roles = os.path.join(collection_root, "roles")
    for role in sorted(os.listdir(roles)) if os.path.isdir(roles) else []:
        for part in ("tasks", "handlers", "vars", "defaults"):
            folder = os.path.join(roles, role, part)
            for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
                if name.endswith((".yml", ".yaml")):
                    yield part, os.path.join(folder, name)
    playbooks = os.path.join(collection_root, "playbooks")
    # the playbooks, and what their plays read: vars/preflight.yml (vars_files), tasks/preflight.yml
    for sub, part in (("", "playbook"), ("vars", "vars"), ("tasks", "playbook")):
        folder = os.path.join(playbooks, sub)
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            if name.endswith((".yml", ".yaml")):
                yield part, os.path.join(folder, name)
    # the molecule scenarios import the playbooks after plays that set their own gpuhost_test_* facts
    molecule = os.path.join(collection_root, "molecule")
    for base, dirs, files in os.walk(molecule):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))  # .molecule: molecule's own state
        for name in sorted(files):
            if name.endswith((".yml", ".yaml")):
                yield "playbook", os.path.join(base, name)


def _set_while_running(node, out):
    """Add to ``out`` the names ``node`` (a task list, play or block) registers or sets."""
    if isinstance(node, list):
        for item in node:
            _set_while_running(item, out)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key == "register" and isinstance(value, str):
                out.add(value)
            elif key in _SET_FACT and isinstance(value, dict):
                out.update(k for k in value if k != "cacheable")
            elif key == "vars" and isinstance(value, dict):
                out.update(value)
            _set_while_running(value, out)


def _load(path):
    import yaml  # controller dependency, imported where it is needed (as in catalogue_files.py)

    with open(path, encoding="utf-8") as handle:
        return yaml.load(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _role_options(path):
    specs = (_load(path) or {}).get("argument_specs") or {}
    return set(name for entry in specs.values() if isinstance(entry, dict)
               for name in (entry.get("options") or {}))


def role_argument_spec(collection_root, role):
    """The options of ``role``'s ``main`` entry point (its ``meta/argument_specs.yml``), as Ansible's
    ``validate_argument_spec`` takes them. Raises :class:`InventoryVarsError` when the role or its
    argument spec is missing or malformed."""
    path = os.path.join(collection_root, "roles", role, "meta", "argument_specs.yml")
    if os.sep in role or role.startswith(".") or not os.path.isfile(path):
        raise InventoryVarsError("no role %r with an argument spec under %s" % (role, collection_root))
    main = ((_load(path) or {}).get("argument_specs") or {}).get("main")
    options = main.get("options") if isinstance(main, dict) else None
    if not isinstance(options, dict):
        raise InventoryVarsError("%s has no argument_specs.main.options" % path)
    return options


def known_names(collection_root):
    """Every ``gpuhost_*`` name the collection at ``collection_root`` knows (a frozenset).

    Read from the roles' argument specs, tasks, vars and defaults, the playbooks and molecule scenarios, plus
    ``INVENTORY_ONLY``; cached per root and the files' modification times. Raises
    :class:`InventoryVarsError` when the root holds no role argument specs.
    """
    roles = os.path.join(collection_root, "roles")
    specs = [os.path.join(roles, role, "meta", "argument_specs.yml")
             for role in (sorted(os.listdir(roles)) if os.path.isdir(roles) else [])]
    specs = [path for path in specs if os.path.isfile(path)]
    if not specs:
        # every variable would look unknown, and every remediated host fail: say what is wrong instead
        raise InventoryVarsError("no roles/*/meta/argument_specs.yml under %s: cannot tell which gpuhost_ "
                                 "variables are known" % collection_root)
    files = list(_yaml_files(collection_root))
    stamp = tuple((path, os.stat(path).st_mtime_ns) for path in specs + [path for dummy, path in files])
    cached = _KNOWN_CACHE.get(collection_root)
    if cached and cached[0] == stamp:
        return cached[1]
    names = set(INVENTORY_ONLY)
    for path in specs:
        names.update(_role_options(path))
    for part, path in files:
        document = _load(path)
        if part in ("vars", "defaults") and isinstance(document, dict):
            names.update(document)
        else:
            _set_while_running(document, names)
    known = frozenset(name for name in names if isinstance(name, str) and name.startswith(PREFIX))
    _KNOWN_CACHE[collection_root] = (stamp, known)
    return known


def unknown_names(names, known):
    """``[(name, closest known name or None)]`` for each ``gpuhost_*`` name of ``names`` not in ``known``, sorted."""
    # compared without the common prefix, which would make every name look close to every other
    tails = dict((name[len(PREFIX):], name) for name in known)
    out = []
    for name in sorted(set(n for n in names if isinstance(n, str) and n.startswith(PREFIX))):
        if name not in known:
            close = difflib.get_close_matches(name[len(PREFIX):], sorted(tails), n=1)
            out.append((name, tails[close[0]] if close else None))
    return out


def describe_unknown(unknown):
    """``"gpuhost_rot (did you mean gpuhost_root?), gpuhost_x (no known name is close)"``."""
    return ", ".join("%s (%s)" % (name, "did you mean %s?" % close if close else "no known name is close")
                     for name, close in unknown)


def is_controller_root(root):
    """True when ``root`` (a path on the controller) is the controller's ``/``: empty, ``//``, ``/tmp/..``, a link to ``/``."""
    return os.path.realpath(root or "/") == "/"


#: What the controller guard protects, per action (its ``guard_action``): the refusal's verb, what the
#: action would do to the controller, and what nothing was done of.
GUARD_ACTIONS = {
    "remediate": ("remediate", "the fixes would change the controller itself (its /proc/sys, /etc/sysctl.d, "
                  "boot configuration, units)", "is fixed that way", "Nothing was changed"),
    "audit": ("audit", "the audit would read the controller itself and report it under this host's name (and "
              "gpuhost_on_fail would drain or undrain the Slurm node of that name)", "is audited that way",
              "Nothing was read and no Slurm node was touched"),
    "validate": ("validate", "validate.yml would load and measure the controller itself under this host's name (and "
                 "gpuhost_on_fail would drain or undrain the Slurm node of that name)", "is measured that way",
                 "Nothing was measured and no Slurm node was touched"),
    "learn": ("learn from", "learn.yml would read the controller itself and write its inventory as this host's golden "
              "profile", "is learned from that way", "Nothing was read or written"),
    "snapshot": ("capture", "snapshot.yml would capture the controller itself and store it under this host's name",
                 "is captured that way", "Nothing was captured"),
}


def connection_name(action):
    """The connection plugin (``local``, ``ssh``...) of the host an action plugin ``action`` runs for: the one
    Ansible uses for it (``ansible_connection``, the play's keyword or the default), never a guess from its name."""
    return getattr(action._connection, "transport", None) or getattr(action._play_context, "connection", None)


def controller_refusal(host, connection, root, allow, unknown=(), action="remediate"):
    """Why ``host`` must not be remediated (audited, validated: ``action``, a key of ``GUARD_ACTIONS``),
    or ``None`` when it may be.

    A host is the controller when its connection plugin is ``local`` and its ``gpuhost_root``
    resolves to ``/``: the fixes would write this machine's ``/proc/sys``, ``/etc/sysctl.d``, boot
    configuration and units; an audit or validate.yml would report (measure) the controller under the
    host's name and act on that verdict for the host's Slurm node. That is accepted for the names
    Ansible itself treats as the controller (``localhost``, ``127.0.0.1``, ``::1``) and for a host with
    ``allow`` (``gpuhost_allow_controller: true``); any other host is refused, and the message names the
    likely typo from ``unknown`` (``[(name, closest)]`` of :func:`unknown_names`).
    """
    if connection not in LOCAL_CONNECTIONS or not is_controller_root(root):
        return None
    if allow or host in LOCALHOST_NAMES:
        return None
    verb, harm, done_that_way, nothing = GUARD_ACTIONS.get(action, GUARD_ACTIONS["remediate"])
    where = "gpuhost_root is '/'" if root == "/" else "gpuhost_root %r is '/'" % (root,)
    typo = [name for name, close in unknown if close == "gpuhost_root"]
    hint = " It sets %s: did you mean gpuhost_root?" % ", ".join(typo) if typo else ""
    return ("refusing to %s %s: its connection is local and %s, so %s; only localhost, or a host that sets "
            "gpuhost_allow_controller: true, %s.%s %s: set gpuhost_root to the "
            "snapshot copy meant (or use a remote connection)" % (verb, host, where, harm, done_that_way, hint, nothing))
