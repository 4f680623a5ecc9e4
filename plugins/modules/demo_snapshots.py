#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: demo_snapshots
short_description: Write the demo hosts' snapshots on the controller
version_added: 0.1.0
description:
  - Writes the snapshot directories of the four demo hosts (C(gpu-incident), C(gpu-healthy), C(cpu-intel),
    C(hostile)) under O(dest) on the controller, one directory each, laid out as
    M(gpuhost.baseline.host_snapshot) captures a host (C(docs/snapshot-format.md) of the collection), so that
    O(gpuhost.baseline.host_facts#module:root) and the audit read them like live hosts.
  - The snapshots are generated, byte for byte the same on every run, by the generator the collection
    ships (C(plugins/plugin_utils/snapshot/snapgen)); a checkout's C(tools/make_fixtures.py) runs the same one.
  - The C(gpuhost.baseline.demo) playbook calls it, adds the demo hosts to the inventory and audits them.
    First of all, it checks that the controller's Python has every third-party library the audit needs
    (jmespath, jsonschema) and fails, writing nothing, naming every missing one with the command that installs them.
  - This is an action plugin. It runs on the controller only; nothing is executed on any managed host.
  - A snapshot directory that already holds exactly what the generator makes is left as it is (not changed);
    an older one (a directory holding a C(snapshot.json)) is replaced as a whole; any other non-empty
    directory in its place fails the task and is left alone.
author:
  - gpuhost.baseline maintainers (@gpuhost-baseline)
options:
  dest:
    description:
      - Directory on the controller that receives one sub-directory per demo snapshot (C(incident),
        C(healthy), C(intel), C(hostile)); created when missing.
      - A relative path is taken from the working directory of the C(ansible-playbook) process, never from
        the playbook's or the collection's directory.
    type: path
    default: gpuhost-demo/snapshots
  inventory:
    description:
      - A YAML inventory file on the controller to write for the demo hosts (group C(gpuhost_demo), each host on
        the local connection with its snapshot as C(gpuhost_root)), so that they can be audited or a remediation
        previewed again with C(-i) (the C(demo) playbook writes C(<demo_dir>/inventory.yml)). Not written when
        it already holds exactly that; a link or a directory in its place fails the task.
      - A relative path is taken from the working directory of the C(ansible-playbook) process.
    type: path
extends_documentation_fragment:
  - gpuhost.baseline.controller
attributes:
  check_mode:
    description: In check mode nothing is written; C(changed) says whether a snapshot would be.
    support: full
seealso:
  - module: gpuhost.baseline.host_facts
  - module: gpuhost.baseline.host_snapshot
"""

EXAMPLES = r"""
- name: Write the demo snapshots under ./gpuhost-demo/snapshots
  gpuhost.baseline.demo_snapshots:
  register: demo

- name: Audit one of them as a host
  gpuhost.baseline.host_facts:
    root: "{{ demo.hosts[0].root }}"
"""

RETURN = r"""
dest:
  description: The absolute directory the snapshots are under.
  type: str
  returned: success
  sample: /home/ops/gpuhost-demo/snapshots
inventory:
  description: The absolute path of the inventory file written for the demo hosts (O(inventory)).
  type: str
  returned: when O(inventory) is given
  sample: /home/ops/gpuhost-demo/inventory.yml
hosts:
  description: One entry per demo host, in the order the demo inventory lists them.
  type: list
  elements: dict
  returned: success
  contains:
    name:
      description: The inventory name of the demo host.
      type: str
      sample: gpu-incident
    root:
      description: The absolute path of its snapshot directory, for C(gpuhost_root).
      type: str
      sample: /home/ops/gpuhost-demo/snapshots/incident
    note:
      description: A word shown with the host in the console summary (C(gpuhost_note)); empty for most.
      type: str
      sample: "hostile test capture: garbage, markup and control characters on purpose"
    changed:
      description: Whether its snapshot was written (or, in check mode, would be).
      type: bool
      sample: true
"""

from ansible.module_utils.basic import AnsibleModule

ARGUMENT_SPEC = dict(dest=dict(type="path", default="gpuhost-demo/snapshots"), inventory=dict(type="path"))


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.fail_json(msg="gpuhost.baseline.demo_snapshots runs on the controller as an action plugin; it was "
                         "executed as a module on a host, which means the action plugin was not found: run it "
                         "from a playbook with the collection installed (ANSIBLE_COLLECTIONS_PATH)")


if __name__ == "__main__":
    main()
