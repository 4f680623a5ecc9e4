#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: host_snapshot
short_description: Capture exactly what host_facts reads into a snapshot tarball
version_added: 0.1.0
description:
  - Runs the same gatherers as M(gpuhost.baseline.host_facts) with a recording reader and writes
    every file, directory listing, symlink and command output they read into a gzip tarball laid
    out like the host (see C(docs/snapshot-format.md)).
  - Unpacked, the tarball is a snapshot directory that O(gpuhost.baseline.host_facts#module:root)
    reads to produce the same facts, so a host can be audited offline or used as a test fixture.
  - Only the files the gatherers read are captured; no secrets and no other files are copied.
author:
  - gpuhost.baseline maintainers (@gpuhost-baseline)
options:
  dest:
    description:
      - Path of the tarball to write on the managed host.
    type: path
    required: true
  gather:
    description:
      - Subsystems to capture. Default is all of them.
    type: list
    elements: str
    choices: [kernel, cpu, numa, pci, iommu, nvidia, lxc, persistence]
attributes:
  check_mode:
    description: In check mode the host is read but no tarball is written.
    support: full
  diff_mode:
    description: Not applicable.
    support: none
notes:
  - Run with C(become=true) to capture full PCI config space; a non-root capture records 64-byte
    config files and says so in C(snapshot.json).
"""

EXAMPLES = r"""
- name: Capture a snapshot on the host
  gpuhost.baseline.host_snapshot:
    dest: /var/tmp/gpuhost-snapshot.tar.gz
  become: true
"""

RETURN = r"""
dest:
  description: Path of the tarball written (not written in check mode).
  returned: always
  type: str
  sample: /var/tmp/gpuhost-snapshot.tar.gz
files:
  description: Number of files captured.
  returned: always
  type: int
  sample: 2412
as_root:
  description: Whether the capture ran as root.
  returned: always
  type: bool
  sample: true
facts:
  description: The facts computed while capturing; host_facts on the unpacked snapshot returns the same document.
  returned: always
  type: dict
  sample: {"schema": 1, "live": true}
"""

import datetime
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.gather import SUBSYSTEMS, gather_facts
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.root import Recorder, Root, write_snapshot

SNAPSHOT_FORMAT = 1


def main():
    module = AnsibleModule(
        argument_spec=dict(
            dest=dict(type="path", required=True),
            gather=dict(type="list", elements="str", choices=list(SUBSYSTEMS)),
        ),
        supports_check_mode=True,
    )
    recorder = Recorder()

    def run(argv):
        return module.run_command(argv, environ_update={"LC_ALL": "C"})

    root = Root("/", run_command=run, which=module.get_bin_path, recorder=recorder)
    facts = gather_facts(root, module.params["gather"])
    as_root = os.geteuid() == 0
    dest = module.params["dest"]
    if not module.check_mode:
        meta = {
            "format": SNAPSHOT_FORMAT,
            "hostname": facts.get("hostname"),
            "captured": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "as_root": as_root,
            "generator": "gpuhost.baseline.host_snapshot",
            "gathered": facts["gathered"],
        }
        tmp = dest + ".tmp"
        try:
            with open(tmp, "wb") as handle:
                write_snapshot(recorder, handle, meta)
            module.atomic_move(tmp, dest)
        except EnvironmentError as exc:
            module.fail_json(msg="cannot write snapshot tarball %s: %s" % (dest, exc))
    module.exit_json(
        changed=not module.check_mode,
        dest=dest,
        files=len(recorder.files),
        as_root=as_root,
        facts=facts,
    )


if __name__ == "__main__":
    main()
