#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: baseline_validate
short_description: Validate the baseline rule catalogue, a profile, parameters, waivers and the hosts' gpuhost_ variables (controller side)
version_added: 0.1.0
description:
  - Loads every rule file (C(rules/<area>.yml)) and profile (C(profiles/<name>.yml)) of the collection,
    compiles every jmespath expression, and checks the profile name, parameter overrides and waivers.
  - Fails with the file, the rule id and what is wrong (unknown operator, bad jmespath, duplicate id,
    unknown parameter, bad date, unknown rule id in a waiver, unknown profile). Run it before any host is
    contacted.
  - With O(inventory_vars), reports every C(gpuhost_*) variable of a host that the collection does not know, with
    the closest known name (C(gpuhost_rot) - did you mean C(gpuhost_root)?). Ansible ignores such a variable, so the
    default of the one meant applies. The known names are read at run time from the collection itself - the options
    in each role's C(meta/argument_specs.yml), the names its roles, playbooks and molecule scenarios register or set, and a short list of
    inventory variables that are no role option (C(gpuhost_allow_empty), C(gpuhost_serial),
    C(gpuhost_max_fail_percentage), C(gpuhost_note), the C(gpuhost_learn_*) and C(gpuhost_snapshot_*) variables of
    C(learn.yml) and C(snapshot.yml); C(INVENTORY_ONLY) in C(plugins/plugin_utils/inputs/inventory_vars.py)).
  - With O(controller_guard), fails when the host the task runs for would have the controller itself fixed - its
    connection plugin is C(local) and O(root) resolves to C(/) on the controller, it is not named C(localhost),
    C(127.0.0.1) or C(::1) (the names Ansible treats as the controller), and O(allow_controller) is not set. The
    message names a misspelled C(gpuhost_root). The failed result carries C(host_report) so the reports show the
    host failed with the reason. The remediate role runs this before anything else, in check mode too
    (docs/remediation.md, "The controller guard").
  - First of all, checks that the controller's Python has every third-party library the collection needs
    (jmespath, jsonschema) and fails naming every missing one, with the command that installs them.
  - This is an action plugin. It runs entirely on the controller; nothing is executed on the managed host.
author:
  - gpuhost.baseline maintainers (@gpuhost-baseline)
options:
  profile:
    description:
      - Profile name, or V(auto). With V(auto) the parameters are checked against every profile.
    type: str
    default: auto
  params:
    description:
      - Parameter overrides (inventory variable C(gpuhost_params)).
    type: dict
    default: {}
  waivers:
    description:
      - Waivers (inventory variable C(gpuhost_waivers)); see M(gpuhost.baseline.baseline_evaluate).
    type: list
    elements: raw
    default: []
  waiver_files:
    description:
      - Waiver files (inventory variable C(gpuhost_waiver_files)); see M(gpuhost.baseline.baseline_evaluate).
    type: list
    elements: path
    default: []
  catalogue_dirs:
    description:
      - Site catalogue directories (inventory variable C(gpuhost_catalogue_dirs)) layered over the bundled
        catalogue in list order; see M(gpuhost.baseline.baseline_evaluate). Every file in them is checked
        with the same schemas as the bundled ones; an error names the file and the entry.
      - A relative path is resolved against the current directory of the C(ansible-playbook) process.
    type: list
    elements: path
    default: []
  hosts:
    description:
      - Validate the inputs of each of these inventory hosts instead of O(profile), O(params), O(waivers),
        O(waiver_files) and O(catalogue_dirs) - their C(gpuhost_profile), C(gpuhost_params), C(gpuhost_waivers),
        C(gpuhost_waiver_files) and C(gpuhost_catalogue_dirs) variables, with the same defaults. Run it once
        (C(run_once)) with V(ansible_play_hosts_all) so the whole fleet is checked before any host is contacted;
        hosts sharing the same inputs are validated once. The error names the first host whose inputs are wrong.
    type: list
    elements: str
  catalogue:
    description:
      - Load and validate the catalogue and the inputs above. V(false) runs only the checks of O(inventory_vars) and
        O(controller_guard) (the remediate role does so, the playbook's first play having validated the catalogue for the fleet).
    type: bool
    default: true
  inventory_vars:
    description:
      - What to do with a C(gpuhost_*) variable that the collection does not know, on each host of O(hosts) (its
        inventory variables, group and host vars, extra vars and facts, from C(hostvars)) or, without O(hosts), on the
        host the task runs for (every variable the task sees, play and role variables included).
      - V(warn) adds a warning per host naming each unknown variable and the closest known name; V(fail) fails the task
        with the same text (with O(hosts) and C(run_once), every host of the play); V(ignore) does not look.
      - The audit playbook warns (the audit changes nothing); the remediate role fails the host (a fix must not run
        with a default the inventory meant to override).
    type: str
    choices: [ignore, warn, fail]
    default: ignore
  controller_guard:
    description:
      - Refuse the host the task runs for when remediating, auditing or validating it would act on the controller
        (O(guard_action)) - a C(local) connection,
        O(root) resolving to C(/) (V(""), V(//) and a link to C(/) included), an inventory name other than C(localhost),
        C(127.0.0.1) or C(::1), and O(allow_controller) not set. Runs in check mode too.
      - The connection is the one Ansible uses for that host (C(ansible_connection), the play's C(connection) keyword or
        the configured default), not a guess from its name. An SSH connection to a loopback address is not refused
        (a port-forwarded VM answers there).
      - Not with O(hosts); do not delegate the task.
    type: bool
    default: false
  root:
    description:
      - The host's C(gpuhost_root), for O(controller_guard).
    type: str
    default: /
  allow_controller:
    description:
      - The host's C(gpuhost_allow_controller), for O(controller_guard). V(true) lets a host that is not named
        C(localhost) be the controller through a local connection (fixed, audited or measured there).
    type: bool
    default: false
  guard_action:
    description:
      - What O(controller_guard) protects, for its message - V(remediate) (the fixes), V(audit) (an audit that would
        report the controller under the host's name and act on that verdict through C(gpuhost_on_fail)), V(validate)
        (the measurements), V(learn) (a golden profile written from the controller) or V(snapshot) (a capture of the
        controller under the host's name). Every playbook runs the same guard from the audit role's
        C(tasks/controller_guard.yml).
    type: str
    choices: [audit, learn, remediate, snapshot, validate]
    default: remediate
  role_spec:
    description:
      - With O(hosts), also check each host's values of this collection role's variables (V(audit), V(remediate),
        V(validate)...) against the role's argument spec (C(roles/<role>/meta/argument_specs.yml)), the check Ansible
        makes at the start of the role for each host. Hosts sharing their values are checked once.
      - The collection's playbooks check the fleet here, in one task on the controller, and run the role with
        C(rolespec_validate=false), since Ansible's own check is a task per host, one more round of forks over the fleet.
      - A wrong value fails the task, and with C(run_once) the run, before any host is contacted; the message names
        the role, the hosts (five, then how many more) and Ansible's words for each wrong value.
    type: str
extends_documentation_fragment:
  - gpuhost.baseline.controller
  - gpuhost.baseline.controller.judging
seealso:
  - module: gpuhost.baseline.baseline_evaluate
"""

EXAMPLES = r"""
- name: Reject a bad configuration before touching any host
  gpuhost.baseline.baseline_validate:
    profile: "{{ gpuhost_profile | default('auto') }}"
    params: "{{ gpuhost_params | default({}) }}"
    waivers: "{{ gpuhost_waivers | default([]) }}"
  run_once: true

- name: Refuse to remediate the controller by mistake, and misspelled gpuhost_ variables (per host)
  gpuhost.baseline.baseline_validate:
    catalogue: false
    inventory_vars: fail
    controller_guard: true
    root: "{{ gpuhost_root | default('/') }}"
    allow_controller: "{{ gpuhost_allow_controller | default(false) }}"
"""

RETURN = r"""
profiles:
  description: Profiles checked.
  returned: success
  type: list
  elements: str
  sample: [amd-epyc-nvidia, generic-nvidia-inference]
rules:
  description: Number of rules in the catalogue.
  returned: success
  type: int
  sample: 40
params:
  description: Effective parameters per profile checked.
  returned: success
  type: dict
sysctls:
  description:
    - The sysctls the rules read by their dotted name (C(kernel.sysctl."vm.dirty_ratio")) beyond the ones the
      collection manages, over the catalogues of every host checked; C(snapshot.yml) captures them.
  returned: when the catalogue is loaded
  type: list
  elements: str
  sample: [vm.dirty_ratio]
unknown_vars:
  description: Per host, the C(gpuhost_*) variables the collection does not know and the closest known name (or null).
  returned: when O(inventory_vars) is not V(ignore) or O(controller_guard) is set
  type: dict
  sample: {"typo-host": [{"name": "gpuhost_rot", "closest": "gpuhost_root"}]}
host_report:
  description:
    - When the host is refused without O(hosts), its part of the report (the input of M(gpuhost.baseline.baseline_report)),
      state V(failed) with the reason as message and no findings.
  returned: failed
  type: dict
  sample: {"state": "failed", "message": "refusing to remediate typo-host: ...", "findings": []}
"""

from ansible.module_utils.basic import AnsibleModule


# The options, once: the action plugin (plugins/action/baseline_validate.py) validates its arguments with
# this spec, and ansible-test's validate-modules holds it to DOCUMENTATION.
ARGUMENT_SPEC = dict(
    profile=dict(type="str", default="auto"),
    params=dict(type="dict", default={}),
    waivers=dict(type="list", elements="raw", default=[]),
    waiver_files=dict(type="list", elements="path", default=[]),
    catalogue_dirs=dict(type="list", elements="path", default=[]),
    hosts=dict(type="list", elements="str"),
    catalogue=dict(type="bool", default=True),
    inventory_vars=dict(type="str", choices=["ignore", "warn", "fail"], default="ignore"),
    controller_guard=dict(type="bool", default=False),
    root=dict(type="str", default="/"),
    allow_controller=dict(type="bool", default=False),
    guard_action=dict(type="str", choices=["audit", "learn", "remediate", "snapshot", "validate"], default="remediate"),
    role_spec=dict(type="str"),
)


def main():
    module = AnsibleModule(
        argument_spec=ARGUMENT_SPEC,
        supports_check_mode=True,
    )
    module.fail_json(msg="gpuhost.baseline.baseline_validate is an action plugin that runs on the controller; "
                         "it was executed as a module on the host, which means the collection's action plugin "
                         "was not found: call it by its full name gpuhost.baseline.baseline_validate")


if __name__ == "__main__":
    main()
