# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Learn a golden host: gather its facts and write its expected inventory as a site profile.

Documentation: plugins/modules/baseline_learn.py. The facts are gathered as ``baseline_evaluate``
gathers them (one ``host_facts`` run on the host, or a snapshot with ``root``); the inventory is computed by
``plugin_utils/inputs/learn.py`` (with ``inventory_observe.py``) and the profile is written on the controller as
``<dest>/profiles/<name>.yml``, after it was loaded and checked like any site profile. Check mode
writes nothing and returns the profile.
"""

from __future__ import absolute_import, division, print_function

import os
import re
import shutil
import tempfile

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_load import load_catalogue
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_model import (
    CatalogueError, plain, select_profile,
)
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_params import resolve_profile
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.controller_libs import MissingLibraries, check as check_libraries
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.schema import COLLECTION_ROOT
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge.evaluation import evaluate
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.snapshot.gathering import gather_host
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.inputs.learn import (
    build_profile, learn_inventory, learn_workload_floors, profile_name, render_profile,
)
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.files import atomic_write, read_text
from ansible_collections.gpuhost.baseline.plugins.modules.baseline_learn import ARGUMENT_SPEC

__metaclass__ = type

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
INVENTORY_AREA = "inventory"


#: A learned profile is a few kB; anything far larger at the destination is not one of ours.
MAX_PROFILE_BYTES = 4 * 1024 * 1024


class LearnError(Exception):
    """Why no profile could be written; the message names the file or the option."""


def _yaml():
    try:
        import yaml  # pylint: disable=import-outside-toplevel
    except ImportError:
        raise LearnError("the Python library PyYAML is required on the controller to write the profile: pip install pyyaml")
    return yaml


def _read(path):
    """The profile already at ``path`` (to tell whether it changes), or ``None``: read through the
    one bounded, no-follow reader, so a link or a FIFO there is never followed or waited on."""
    try:
        return read_text(path, cap=MAX_PROFILE_BYTES)
    except EnvironmentError:
        return None


def _write_atomic(path, text):
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        atomic_write(path, text)
    except EnvironmentError as exc:
        raise LearnError("%s: cannot write the profile: %s" % (path, exc.strerror or exc))


def check_profile(text, name, site_dirs):
    """Load ``text`` as the site profile ``name`` over the bundled catalogue and ``site_dirs`` (the
    schemas and code checks of every profile); return ``(catalogue, effective params)``."""
    tmp = tempfile.mkdtemp(prefix="gpuhost-learn-")
    try:
        os.makedirs(os.path.join(tmp, "profiles"))
        with open(os.path.join(tmp, "profiles", name + ".yml"), "w") as handle:
            handle.write(text)
        catalogue = load_catalogue(site_dirs=list(site_dirs) + [tmp])
        unused_profile, params = resolve_profile(catalogue, name)
        return catalogue, params
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def learn(facts, name, extends, dest, tolerance_pct, site_dirs, source, workload_floors=None):
    """``(path, profile, text, self_check)`` for the golden host's ``facts`` (and ``workload_floors``, learned from
    its runs of the site's workloads); raises :class:`LearnError` or :class:`CatalogueError` naming what is wrong."""
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise LearnError("name: a profile name is lower case letters, digits and dashes, got %r" % (name,))
    dest_abs = os.path.abspath(os.path.expanduser(dest))
    # the destination may already be a catalogue directory (an earlier learn): check against the others
    others = [d for d in site_dirs or [] if os.path.abspath(os.path.expanduser(d)) != dest_abs]
    catalogue = load_catalogue(site_dirs=others)
    parent = select_profile(catalogue, extends, facts)
    if parent.name == name:
        raise LearnError("name: the learned profile cannot have the name of the profile it extends (%s)" % name)
    rule_ids = [r.id for r in catalogue.rules if r.area == INVENTORY_AREA and r.id not in parent.rule_ids]
    inventory = learn_inventory(facts, tolerance_pct, source=source)
    profile = build_profile(inventory, parent.name, rule_ids, workload_floors=workload_floors)
    text = render_profile(profile, os.path.join(COLLECTION_ROOT, "schemas", "profile.schema.json"), _yaml())
    checked, unused_params = check_profile(text, name, others)
    # the golden host judged against its own inventory: anything failing here would fail on every host
    outcome = evaluate(facts, profile=name, catalogue=checked)
    self_check = ["%s %s" % (f["id"], f["message"]) for f in outcome["findings"]
                  if f["area"] == INVENTORY_AREA and f["status"] == "fail"]
    path = os.path.join(dest_abs, "profiles", name + ".yml")
    return path, profile, text, self_check


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        # the first action of learn.yml: every missing library named at once, before the host is read
        try:
            check_libraries()
        except MissingLibraries as exc:
            raise AnsibleActionFail(str(exc))
        unused_validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        args = plain(args)  # Ansible's tagged strings would not serialise as YAML
        host = (task_vars or {}).get("inventory_hostname") or "host"
        name = args["name"] if args["name"] is not None else profile_name("golden-%s" % host)
        tolerance = args["memory_tolerance_pct"]
        if not 0 <= tolerance <= 100:
            result.update(failed=True, msg="memory_tolerance_pct must be from 0 to 100, got %s" % tolerance)
            return result
        gathered = gather_host(self, task_vars, args["root"])
        if "facts" not in gathered:
            gathered["msg"] = "learning %s: %s" % (host, gathered.get("msg"))
            result.update(gathered)
            return result
        facts = plain(gathered["facts"])
        floors, learned, workload_notes = {}, {}, []
        if args["workloads"] is not None:
            margin = args["workload_margin_pct"]
            if not 0 <= margin < 100:
                result.update(failed=True, msg="workload_margin_pct must be from 0 to less than 100, got %s" % margin)
                return result
            floors, learned, workload_notes = learn_workload_floors(plain(args["workloads"]), margin)
        try:
            path, profile, text, self_check = learn(facts, name, args["extends"], args["dest"], tolerance,
                                                    args["catalogue_dirs"], args["root"], floors)
        except (LearnError, CatalogueError) as exc:
            result.update(failed=True, msg="learning %s: %s" % (host, exc))
            return result
        inventory = profile["params"]["inventory"]
        changed = _read(path) != text
        if changed and not self._task.check_mode:
            try:
                _write_atomic(path, text)
            except LearnError as exc:
                result.update(failed=True, msg="learning %s: %s" % (host, exc))
                return result
        warnings = []
        if inventory["unknown"]:
            warnings.append("%d value(s) of %s could not be read and are not judged: %s" % (
                len(inventory["unknown"]), host, "; ".join(inventory["unknown"])))
        if self_check:
            warnings.append("the golden host fails its own inventory: %s" % "; ".join(self_check))
        warnings.extend(workload_notes)
        result.update(
            changed=changed, path=path, name=name, extends=profile["extends"], profile=profile,
            unknown=inventory["unknown"], self_check=self_check, catalogue_dir=os.path.dirname(os.path.dirname(path)),
            workload_floors=floors, workloads_learned=learned,
            msg="%s %s: profile %s (extends %s) from %s; audit with gpuhost_catalogue_dirs: [%s] and gpuhost_profile: %s" % (
                "would write" if self._task.check_mode else ("wrote" if changed else "unchanged"), path, name,
                profile["extends"], host, os.path.dirname(os.path.dirname(path)), name))
        if warnings:
            result["warnings"] = warnings
        return result
