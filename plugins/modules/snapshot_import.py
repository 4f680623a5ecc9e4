#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: snapshot_import
short_description: Check a snapshot tarball and unpack it on the controller
version_added: 0.1.0
description:
  - Checks a snapshot tarball written by M(gpuhost.baseline.host_snapshot) and fetched from a managed host,
    then unpacks it as a snapshot directory that O(gpuhost.baseline.host_facts#module:root) reads
    (C(docs/snapshot-format.md) of the collection, "Importing a snapshot").
  - This is an action plugin. It runs on the controller only; nothing is executed on any managed host.
  - The tarball comes from the host and is untrusted. Before anything is written every member is checked
    - only regular files, directories and relative symbolic links, under relative names without C(..), each
    given once and none inside a link member; no absolute link target and no link leading out of the
    snapshot (Python's C(tarfile.data_filter)), no device node, FIFO, hard link or sparse file; at most 500000
    members and 1 GiB of file data; a C(snapshot.json) at the top. One refused member fails the task, naming
    every refused member, and nothing is unpacked.
  - Before Python's C(tarfile) reads it, the tarball is scanned once as a stream, holding no member's data, so
    that a small tarball cannot make the controller read a huge header into memory - each GNU long-name,
    long-link or pax header at most 64 KiB and 64 MiB all together, at most 8 of them before one member, at
    most 2 GiB once decompressed; member count and file data are checked there too, before the data is
    decompressed. A damaged tarball (truncated, bad header checksum, a size field that is not a number) fails
    the task. Messages quote names and link targets cut to 300 characters, escapes shown escaped.
  - The tarball is extracted with the same checks into a new private directory next to O(dest), every
    directory gets mode 0755 and every file 0644 (0755 when its owner could execute it), the tree is checked
    again as a directory, and the directory is renamed to O(dest) with mode 0700. A previous snapshot at
    O(dest) is replaced as a whole, so no file of an older capture survives.
author:
  - gpuhost.baseline maintainers (@gpuhost-baseline)
options:
  src:
    description:
      - Path of the snapshot tarball on the controller (gzip, bzip2, xz or uncompressed).
      - A relative path is taken from the working directory of the C(ansible-playbook) process.
    type: path
    required: true
  dest:
    description:
      - Snapshot directory to create on the controller; its parent is created when missing.
      - A relative path is taken from the working directory of the C(ansible-playbook) process, never from
        the playbook's or the collection's directory.
      - When it exists it must be a directory that is empty or holds a C(snapshot.json) (a previous
        snapshot); anything else fails the task and is left alone.
    type: path
    required: true
extends_documentation_fragment:
  - gpuhost.baseline.controller
attributes:
  check_mode:
    description: In check mode the tarball is checked and nothing is written.
    support: full
notes:
  - C(playbooks/snapshot.yml) captures, fetches and imports in one run; C(--tags import) imports tarballs
    already fetched to C(gpuhost_snapshot_dir) (default V(gpuhost-snapshots) under the working directory of
    C(ansible-playbook)).
seealso:
  - module: gpuhost.baseline.host_snapshot
  - module: gpuhost.baseline.host_facts
"""

EXAMPLES = r"""
- name: Check and unpack a fetched snapshot
  gpuhost.baseline.snapshot_import:
    src: "{{ gpuhost_snapshot_dir }}/{{ inventory_hostname }}.tar.gz"
    dest: "{{ gpuhost_snapshot_dir }}/{{ inventory_hostname }}"

- name: Audit the unpacked snapshot later
  gpuhost.baseline.host_facts:
    root: "{{ gpuhost_snapshot_dir }}/{{ inventory_hostname }}"
  delegate_to: localhost
"""

RETURN = r"""
dest:
  description: The snapshot directory written (checked only, in check mode).
  returned: success
  type: str
  sample: /srv/snapshots/gpu01
members:
  description: Number of members in the tarball.
  returned: success
  type: int
  sample: 2480
files:
  description: Number of regular files in the tarball.
  returned: success
  type: int
  sample: 2031
links:
  description: Number of symbolic links in the tarball.
  returned: success
  type: int
  sample: 118
directories:
  description: Number of directory members in the tarball.
  returned: success
  type: int
  sample: 331
replaced:
  description: Whether a previous snapshot at O(dest) was replaced (or would be, in check mode).
  returned: success
  type: bool
  sample: false
refused:
  description:
    - Every refused member or path with the reason, as C(name), colon, reason; names cut to 300 characters.
    - At most the first 100, then one line saying how many more.
  returned: when the snapshot is refused
  type: list
  elements: str
  sample: ["proc/cmdline: symbolic link to the absolute path '/tmp/x' (a snapshot stores links relative to their directory)"]
"""

from ansible.module_utils.basic import AnsibleModule


# The action plugin's options (plugins/plugin_utils/snapshot/snapshot.py ARGUMENT_SPEC), repeated here
# because a module cannot import controller code; tests/unit/plugins/plugin_utils/test_snapshot.py
# keeps the two equal.
ARGUMENT_SPEC = dict(
    src=dict(type="path", required=True),
    dest=dict(type="path", required=True),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    module.fail_json(msg="gpuhost.baseline.snapshot_import runs on the controller as an action plugin; it was "
                         "executed as a module on a host, which means the action plugin was not found: run it "
                         "from a playbook with the collection installed (ANSIBLE_COLLECTIONS_PATH)")


if __name__ == "__main__":
    main()
