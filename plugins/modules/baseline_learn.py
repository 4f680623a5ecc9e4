#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: baseline_learn
version_added: 0.1.0
short_description: Learn a golden host's hardware inventory and write it as a site profile (controller side)
description:
  - Gathers the host's facts with one M(gpuhost.baseline.host_facts) run (the live host, or a snapshot directory with
    O(root)), and writes what it holds as the expected inventory of a new site profile
    C(<dest>/profiles/<name>.yml) - CPU model, sockets, cores and SMT; MemTotal per NUMA node with a tolerance; every
    GPU and NIC by PCI address with its model, NUMA node, link width and speed, MaxReadReq and MaxPayload; the GPU
    power limits and VBIOS versions; the firmware and board id of every NIC with an RDMA device; the link type of
    every device pair of C(nvidia-smi topo -m); the kernel, NVIDIA driver and CUDA versions, and the Fabric Manager
    version of an NVSwitch host.
  - The profile C(extends) a bundled or site profile and holds the inventory as its parameter C(inventory); the
    inventory rules (C(rules/inventory.yml), INV-001 to INV-012) judge every host audited with it against the
    golden host, by subject. O(dest) is a site catalogue directory - give it to C(gpuhost_catalogue_dirs).
  - The profile is loaded and checked like any site profile (C(schemas/profile.schema.json) and the catalogue's code
    checks) before it is written, and the golden host is judged against it; an INV finding failing on the golden host
    itself is returned in RV(self_check) and as a warning.
  - Values the golden host does not give (a file missing, C(nvidia-smi) absent) are written as V(null), listed in
    RV(unknown) and C(params.inventory.unknown) with the file or command, and not judged.
  - Writes the file only when its content changes. In check mode nothing is written and the profile is returned.
  - First of all, checks that the controller's Python has every third-party library the collection needs
    (jmespath, jsonschema) and fails naming every missing one, with the command that installs them.
  - This is an action plugin - the file is written on the controller. Workflow - C(docs/profiles.md),
    "Learn a golden host".
author:
  - gpuhost.baseline maintainers (@gpuhost-baseline)
options:
  root:
    description:
      - Passed to M(gpuhost.baseline.host_facts); V(/) is the live host, anything else a snapshot directory.
    type: path
    default: /
  dest:
    description:
      - The site catalogue directory on the controller; the profile is written to C(<dest>/profiles/<name>.yml)
        (directories created as needed).
      - A relative path is resolved against the current directory of C(ansible-playbook).
    type: path
    required: true
  name:
    description:
      - The profile name (lower case letters, digits and dashes). Default - C(golden-<inventory_hostname>) in that form.
    type: str
  extends:
    description:
      - The profile the learned one extends (its rules and parameters are inherited); V(auto) takes the profile
        C(gpuhost_profile=auto) would choose for the golden host.
    type: str
    default: auto
  memory_tolerance_pct:
    description:
      - How much less MemTotal per NUMA node than the golden host's a host may have, in percent, before INV-002
        fails (kernel reservations move MemTotal by well under 1%; one DIMM of 16 is about 6%).
    type: float
    default: 2
  catalogue_dirs:
    description:
      - Site catalogue directories the profile is checked with (C(gpuhost_catalogue_dirs)); O(extends) may name a
        profile of theirs. O(dest) itself, when listed, is left out of the check so that learning again replaces
        the profile.
    type: list
    elements: path
    default: []
  workloads:
    description:
      - The registered result of M(gpuhost.baseline.host_measure) run on the golden host with its
        C(workloads) (C(runs) when repeated; C(learn.yml) with C(gpuhost_learn_workloads) runs it). Each workload
        that gave a figure gets a learned floor in the profile's parameter C(workload_floors) - the median of its
        runs less O(workload_margin_pct) percent (plus, for a C(lower_is_better) one) - which VAL-012 and VAL-013
        judge every host's run of that workload against when the workload sets no C(floor) of its own.
      - A workload without a figure in any run gets no floor and a warning with the reason.
    type: dict
  workload_margin_pct:
    description:
      - How far below the golden host's median figure a learned floor lies, in percent (0 to less than 100;
        above it for a lower-is-better workload). Runs on identical hosts differ by a few percent.
    type: float
    default: 10
notes:
  - Runs on the controller; only the facts are gathered on the host (as root with C(become) for the PCI extended
    configuration space).
seealso:
  - module: gpuhost.baseline.baseline_evaluate
  - module: gpuhost.baseline.host_facts
"""

EXAMPLES = r"""
- name: Learn gpu07 (a known-good host) into /srv/site-baseline/profiles/golden-gpu07.yml
  gpuhost.baseline.baseline_learn:
    dest: /srv/site-baseline
  become: true
  register: learned

- name: Learn from a snapshot, extending a named profile
  gpuhost.baseline.baseline_learn:
    root: /srv/snapshots/gpu07
    dest: /srv/site-baseline
    name: fleet-b200
    extends: amd-epyc-nvidia
    memory_tolerance_pct: 1

- name: Run the site's workloads three times on the golden host
  gpuhost.baseline.host_measure:
    measurements: []
    workloads: "{{ gpuhost_validate_workloads }}"
    repeats: 3
  become: true
  register: golden_runs

- name: Learn gpu07 with floors 10 % below its workload figures
  gpuhost.baseline.baseline_learn:
    dest: /srv/site-baseline
    workloads: "{{ golden_runs }}"
  become: true
"""

RETURN = r"""
path:
  description: The profile file (absolute), written unless in check mode or unchanged.
  returned: success
  type: str
  sample: /srv/site-baseline/profiles/golden-gpu07.yml
catalogue_dir:
  description: The site catalogue directory to list in C(gpuhost_catalogue_dirs).
  returned: success
  type: str
  sample: /srv/site-baseline
name:
  description: The profile name (for C(gpuhost_profile)).
  returned: success
  type: str
  sample: golden-gpu07
extends:
  description: The profile it extends (resolved when O(extends) is V(auto)).
  returned: success
  type: str
  sample: amd-epyc-nvidia
profile:
  description: The profile document written (C(description), C(extends), C(rules), C(params.inventory)).
  returned: success
  type: dict
unknown:
  description: What could not be read on the golden host, one line each naming the file or command; not judged.
  returned: success
  type: list
  elements: str
  sample: ["GPU/NIC topology: no topology: nvidia-smi -q -x: nvidia-smi not found in PATH"]
self_check:
  description: INV findings failing on the golden host itself against the learned profile (normally none).
  returned: success
  type: list
  elements: str
  sample: []
workload_floors:
  description: The learned floors written to the profile's C(workload_floors), by workload name (empty without O(workloads)).
  returned: success
  type: dict
  sample: {"llama-bench tg128": 107.0}
workloads_learned:
  description: Per workload with a learned floor, C(median), C(runs), C(spread) (highest - lowest), C(unit), C(lower_is_better) and C(margin_pct).
  returned: success
  type: dict
  sample: {"llama-bench tg128": {"median": 118.889, "runs": 3, "spread": 0.6, "unit": "tok/s", "lower_is_better": false,
           "margin_pct": 10.0}}
msg:
  description: What was done, and the inventory variables to audit with the profile.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule


# The options, once: the action plugin (plugins/action/baseline_learn.py) validates its arguments with
# this spec, and ansible-test's validate-modules holds it to DOCUMENTATION.
ARGUMENT_SPEC = dict(
    root=dict(type="path", default="/"),
    dest=dict(type="path", required=True),
    name=dict(type="str"),
    extends=dict(type="str", default="auto"),
    memory_tolerance_pct=dict(type="float", default=2),
    catalogue_dirs=dict(type="list", elements="path", default=[]),
    workloads=dict(type="dict"),
    workload_margin_pct=dict(type="float", default=10),
)


def main():
    module = AnsibleModule(
        argument_spec=ARGUMENT_SPEC,
        supports_check_mode=True,
    )
    module.fail_json(msg="gpuhost.baseline.baseline_learn is an action plugin that runs on the controller; "
                         "it was executed as a module on the host, which means the collection's action plugin "
                         "was not found: call it by its full name gpuhost.baseline.baseline_learn")


if __name__ == "__main__":
    main()
