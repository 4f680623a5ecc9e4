# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Load and validate the rule catalogue, a profile, parameters and waivers on the controller;
check the hosts' gpuhost_* variable names and refuse to remediate the controller by mistake.

Documentation: plugins/modules/baseline_validate.py. Nothing runs on the managed host.
"""

from __future__ import absolute_import, division, print_function

import json

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from ansible.plugins.action import ActionBase

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_load import load_catalogue, validate
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_model import CatalogueError
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.controller_libs import MissingLibraries, check as check_libraries
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.inputs.role_values import (
    SERIAL_ROLES, max_fail_problem, option_problems, serial_problem)
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base import schema
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.schema import COLLECTION_ROOT
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.snapshot.gathering import missing_demo_roots
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.inputs.inventory_vars import (
    InventoryVarsError,
    connection_name,
    controller_refusal,
    describe_unknown,
    known_names,
    role_argument_spec,
    unknown_names,
)
from ansible_collections.gpuhost.baseline.plugins.modules.baseline_validate import ARGUMENT_SPEC

__metaclass__ = type

#: how many hosts a problem shared by many names before "and N more"
HOSTS_NAMED = 5


def _warm():
    """Load what this action's workers need when this module is imported, in the controller's main process
    before it forks a worker per host (as baseline_evaluate's ``_warm_catalogue``): the controller's
    libraries (jsonschema, jmespath), the schema validators, the known gpuhost_* names (the controller
    guard, per host, reads them: 54 YAML files) and the bundled catalogue. Every worker inherits them instead
    of redoing it. Nothing is reported here: each task's own check says what is wrong."""
    try:
        check_libraries()
    except Exception:  # pylint: disable=broad-except  # MissingLibraries: said by the task
        return
    schema.warm()
    for warm in (lambda: known_names(COLLECTION_ROOT), lambda: load_catalogue(site_dirs=[])):
        try:
            warm()
        except Exception:  # pylint: disable=broad-except  # a bad file is said where it is read
            pass


_warm()


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        # the first action of audit.yml, remediate.yml and validate.yml: every missing library named at once,
        # before a catalogue or a variable is read (whose errors would otherwise be blamed for it)
        try:
            check_libraries()
        except MissingLibraries as exc:
            raise AnsibleActionFail(str(exc))
        unused_validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        if args["controller_guard"] and args["hosts"] is not None:
            raise AnsibleActionFail("controller_guard checks the host the task runs for, through its connection: "
                                    "run it per host, without hosts")
        if args["role_spec"] and args["hosts"] is None:
            raise AnsibleActionFail("role_spec checks the role variables of the hosts listed in hosts: give hosts")
        problems = self._inventory_checks(args, task_vars, result)
        if args["role_spec"]:
            problems.extend(self._role_variables(args["role_spec"], args["hosts"], task_vars))
        if args["role_spec"] in SERIAL_ROLES:
            problems.extend(self._play_keywords(task_vars))
        if args["hosts"] is not None:
            problems.extend(self._demo_roots(args["hosts"], task_vars))
        if problems:
            result.update(failed=True, changed=False, msg="; ".join(problems))
            if args["hosts"] is None:
                # the host fails before it is audited: the reports show it failed, with the reason
                result["host_report"] = dict(state="failed", message=result["msg"], findings=[])
            return result
        if not args["catalogue"]:
            result["changed"] = False
            result["msg"] = "inventory variables of %s checked" % (
                "%d host(s)" % len(args["hosts"]) if args["hosts"] is not None else task_vars.get("inventory_hostname"))
            return result
        if args["hosts"] is None:
            inputs = [(None, args["profile"], args["params"], args["waivers"], args["waiver_files"],
                       args["catalogue_dirs"])]
        else:
            inputs = self._per_host_inputs(args["hosts"], task_vars or {})
        outcome, seen, sysctls = None, {}, set()
        for host, profile, params, waivers, waiver_files, catalogue_dirs in inputs:
            # hosts sharing their inputs (the usual case: group vars) are validated once; every
            # combination of site catalogue directories that some host uses is loaded and checked
            key = json.dumps([profile, params, waivers, waiver_files, catalogue_dirs], sort_keys=True, default=str)
            if key in seen:
                continue
            try:
                seen[key] = outcome = validate(profile=profile, params=params, waivers=waivers,
                                               waiver_files=waiver_files, site_dirs=catalogue_dirs)
                sysctls.update(outcome["sysctls"])
            except CatalogueError as exc:
                where = " (host %s)" % host if host else ""
                raise AnsibleActionFail("invalid baseline configuration%s: %s" % (where, exc))
        result.update(outcome or {})
        # what a capture must read beyond the managed sysctls, over every host's catalogue (snapshot.yml)
        result["sysctls"] = sorted(sysctls)
        result["changed"] = False
        result["msg"] = "catalogue of %d rules valid for profile(s) %s" % (outcome["rules"], ", ".join(outcome["profiles"]))
        if args["hosts"] is not None:
            result["msg"] += " on %d host(s)" % len(inputs)
        return result

    def _inventory_checks(self, args, task_vars, result):
        """Unknown gpuhost_* names (warnings or problems) and the controller guard; return the problems."""
        problems, unknown_by_host = [], {}
        if args["inventory_vars"] != "ignore" or args["controller_guard"]:
            try:
                known = known_names(COLLECTION_ROOT)
            except (InventoryVarsError, IOError, OSError) as exc:
                raise AnsibleActionFail("baseline_validate: %s" % exc)
            if args["hosts"] is None:
                # the task's own host: every variable it sees (inventory, extra vars, play and role vars, facts)
                names_by_host = {task_vars.get("inventory_hostname"): list(task_vars)}
            else:
                hostvars = task_vars.get("hostvars") or {}
                names_by_host = dict((host, list(hostvars.get(host) or {})) for host in args["hosts"])
            for host, names in names_by_host.items():
                unknown = unknown_names(names, known)
                if unknown:
                    unknown_by_host[host] = unknown
            result["unknown_vars"] = dict((host, [dict(name=name, closest=close) for name, close in unknown])
                                          for host, unknown in unknown_by_host.items())
        if args["controller_guard"]:
            host = task_vars.get("inventory_hostname")
            refusal = controller_refusal(host, connection_name(self), args["root"], args["allow_controller"],
                                         unknown_by_host.get(host, ()), args["guard_action"])
            if refusal:
                problems.append(refusal)
                # the refusal names the misspelled gpuhost_root already
                unknown_by_host[host] = [(n, c) for n, c in unknown_by_host.get(host, ()) if c != "gpuhost_root"]
        for host, unknown in sorted(unknown_by_host.items(), key=lambda item: str(item[0])):
            if not unknown:
                continue
            text = ("host %s: unknown variable(s) %s: Ansible ignores a name the collection does not know, so the "
                    "default of the one meant applies" % (host, describe_unknown(unknown)))
            if args["inventory_vars"] == "fail":
                problems.append(text + "; correct the name in the inventory (nothing was changed)")
            elif args["inventory_vars"] == "warn":
                result.setdefault("warnings", []).append(text)
        return problems

    @staticmethod
    def _role_variables(role, hosts, task_vars):
        """Each host's values of the role's options checked against its argument spec, once for the fleet:
        what Ansible's own check at the start of the role does per host (a round of forks over the fleet),
        which the collection's playbooks turn off (``rolespec_validate: false``). Hosts sharing their values
        (group vars) are checked once. Returns the problems, by host."""
        try:
            options = role_argument_spec(COLLECTION_ROOT, role)
        except (InventoryVarsError, IOError, OSError) as exc:
            raise AnsibleActionFail("baseline_validate: %s" % exc)
        validator = ArgumentSpecValidator(options)
        hostvars = task_vars.get("hostvars") or {}
        hosts_by_error, seen = {}, {}
        for host in hosts:
            host_vars = hostvars.get(host) or {}
            try:
                values = dict((name, host_vars[name]) for name in options if name in host_vars)
            except AnsibleError as exc:
                hosts_by_error.setdefault("a variable cannot be templated: %s" % exc, []).append(host)
                continue
            key = json.dumps(values, sort_keys=True, default=str)
            if key not in seen:
                # the spec's types and choices, then what it cannot say (bounds, lists as lists, paths: role_values)
                checked = validator.validate(values)
                seen[key] = "; ".join(list(checked.error_messages) +
                                      option_problems(options, values, checked.validated_parameters))
            if seen[key]:
                hosts_by_error.setdefault(seen[key], []).append(host)
        # the same wrong group variable on a thousand hosts is one problem, not a thousand
        return ["invalid variable(s) for role gpuhost.baseline.%s on host(s) %s%s: %s"
                % (role, ", ".join(names[:HOSTS_NAMED]),
                   " and %d more" % (len(names) - HOSTS_NAMED) if len(names) > HOSTS_NAMED else "", error)
                for error, names in hosts_by_error.items()]

    @staticmethod
    def _demo_roots(hosts, task_vars):
        """The hosts whose gpuhost_root is a demo snapshot the collection does not ship (inventory/demo of an
        installed collection, or of a checkout before ``make fixtures``): one problem for the run, said once,
        rather than the same message from each host's gathering, its report line and its verdict."""
        hostvars = task_vars.get("hostvars") or {}
        roots = {}
        for host in hosts:
            try:
                roots[host] = (hostvars.get(host) or {}).get("gpuhost_root")
            except AnsibleError:
                continue  # a root that cannot be templated: the role's own check says so
        problem = missing_demo_roots(roots)
        return [problem] if problem else []

    def _play_keywords(self, task_vars):
        """gpuhost_serial and gpuhost_max_fail_percentage as the next play's serial and max_fail_percentage will
        see them (extra vars, as Ansible templates play keywords without a host): checked here, so that a bad
        value stops the run in this play, before the next one is templated (a word there was a traceback, 0 or -1
        every host at once)."""
        problems = []
        for name, check in (("gpuhost_serial", serial_problem), ("gpuhost_max_fail_percentage", max_fail_problem)):
            if name not in task_vars:
                continue
            try:
                value = self._templar.template(task_vars[name])
            except AnsibleError as exc:
                problems.append("%s cannot be templated: %s" % (name, exc))
                continue
            problem = check(value)
            if problem:
                problems.append(problem)
        return problems

    @staticmethod
    def _per_host_inputs(hosts, task_vars):
        hostvars = task_vars.get("hostvars") or {}
        inputs = []
        for host in hosts:
            hv = hostvars.get(host) or {}
            inputs.append((host, hv.get("gpuhost_profile", "auto"), hv.get("gpuhost_params", {}),
                           hv.get("gpuhost_waivers", []), hv.get("gpuhost_waiver_files", []),
                           hv.get("gpuhost_catalogue_dirs", [])))
        return inputs
