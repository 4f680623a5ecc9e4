#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: baseline_validate
short_description: Validate the baseline rule catalogue, a profile, parameters and waivers (controller side)
version_added: 0.1.0
description:
  - Loads every rule file (C(rules/<area>.yml)) and profile (C(profiles/<name>.yml)) of the collection,
    compiles every jmespath expression, and checks the profile name, parameter overrides and waivers.
  - Fails with the file, the rule id and what is wrong (unknown operator, bad jmespath, duplicate id,
    unknown parameter, bad date, unknown rule id in a waiver, unknown profile). Run it before any host is
    contacted.
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
extends_documentation_fragment:
  - gpuhost.baseline.controller
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
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(
        argument_spec=dict(
            profile=dict(type="str", default="auto"),
            params=dict(type="dict", default={}),
            waivers=dict(type="list", elements="raw", default=[]),
            waiver_files=dict(type="list", elements="path", default=[]),
            catalogue_dirs=dict(type="list", elements="path", default=[]),
            hosts=dict(type="list", elements="str"),
        ),
        supports_check_mode=True,
    )
    module.fail_json(msg="gpuhost.baseline.baseline_validate is an action plugin that runs on the controller; "
                         "it was executed as a module on the host, which means the collection's action plugin "
                         "was not found: call it by its full name gpuhost.baseline.baseline_validate")


if __name__ == "__main__":
    main()
