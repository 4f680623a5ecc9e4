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
  - Only the files the gatherers read are captured; no secrets and no other files are copied. Of the
    environment of PID 1 (C(/proc/1/environ)), which container detection reads, only the C(container=)
    entry is stored.
  - Of the kernel log of the current boot (C(journalctl -k -b), or C(dmesg) without journalctl), read
    for the NVIDIA Xid events of the C(health) subsystem, only the lines holding C(NVRM) and C(Xid) are stored, after
    a line giving the number of kernel messages read; the same for the previous boot's (C(journalctl -k -b -1))
    with O(kernel_log_boots=2).
  - Symbolic links with an absolute target (C(systemctl enable) writes them under
    C(/etc/systemd/system/*.wants/)) are stored relative to the link's directory, pointing at the same
    path inside the snapshot; the facts read from the snapshot are the same, and
    M(gpuhost.baseline.snapshot_import) accepts no absolute link.
author:
  - gpuhost.baseline maintainers (@gpuhost-baseline)
options:
  dest:
    description:
      - Path of the tarball to write on the managed host.
      - It is written to a private temporary file (mode 0600) created in the same directory and renamed
        into place, so a file or symbolic link planted at a predictable name is replaced, never written
        through. The tarball has mode 0600.
      - Default is C(snapshot.tar.gz) in a new private directory (mode 0700, random name) in the temporary
        directory of the user the module runs as; the task returns both paths (RV(dest), RV(private_dir)).
    type: path
  gather:
    description:
      - Subsystems to capture. Default is all of them.
    type: list
    elements: str
    choices: [kernel, cpu, numa, pci, iommu, nvidia, lxc, persistence, health]
  kernel_log_boots:
    description:
      - As O(gpuhost.baseline.host_facts#module:kernel_log_boots). V(2) also stores the journal's boot list
        (C(commands/journalctl-list-boots.txt)) and the previous boot's kernel log, reduced as the current
        boot's (C(commands/journalctl-k-b-1.txt)), so that the snapshot read with V(2) answers as the host did.
      - A snapshot captured with V(1) read with V(2) has the previous boot unknown (not captured).
    type: int
    choices: [1, 2]
    default: 1
  sysctls:
    description:
      - As O(gpuhost.baseline.host_facts#module:sysctls). The sysctl files of these names are captured too.
        C(snapshot.yml) sets it to the sysctls the catalogue's rules read by name.
    type: list
    elements: str
    default: []
  command_timeouts:
    description:
      - As O(gpuhost.baseline.host_facts#module:command_timeouts). A command killed at its time bound is stored in
        C(snapshot.json) with C(bound) V(timeout), so the audit of the snapshot gives the same findings
        (HEALTH-024 for a hung C(nvidia-smi)).
    type: dict
    default: {}
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
  - C(playbooks/snapshot.yml) fetches the tarball, removes it from the host and unpacks it on the
    controller with M(gpuhost.baseline.snapshot_import).
seealso:
  - module: gpuhost.baseline.snapshot_import
  - module: gpuhost.baseline.host_facts
"""

EXAMPLES = r"""
- name: Capture a snapshot on the host, into a new private directory
  gpuhost.baseline.host_snapshot:
  become: true
  register: gpuhost_snapshot

- name: Capture a snapshot to a path of your choice (mode 0600)
  gpuhost.baseline.host_snapshot:
    dest: /root/gpuhost-snapshot.tar.gz
  become: true
"""

RETURN = r"""
dest:
  description:
    - Path of the tarball written (not written in check mode).
    - In check mode without O(dest), V(null).
  returned: always
  type: str
  sample: /tmp/gpuhost-snapshot-k3j9x2a1/snapshot.tar.gz
private_dir:
  description:
    - The private directory created for the tarball when O(dest) is not given; remove it after fetching the tarball.
    - V(null) when O(dest) is given, and in check mode.
  returned: always
  type: str
  sample: /tmp/gpuhost-snapshot-k3j9x2a1
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
import posixpath
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import lxc
from ansible_collections.gpuhost.baseline.plugins.module_utils.host import runner
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.gather import SUBSYSTEMS, gather_facts, module_options
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import (Recorder, Root, _canonical,
                                                                                 write_snapshot)

SNAPSHOT_FORMAT = 1
#: Mode of the tarball: it holds container configurations and GPU serial numbers.
TARBALL_MODE = 0o600

#: Host path -> function that reduces its bytes to what the gatherers need before it is stored.
REDUCED_FILES = {
    lxc.ENVIRON_PATH: lxc.environ_for_snapshot,
}


def _climbs_above_root(directory, target):
    """Whether relative ``target`` read from ``directory`` goes above ``/`` (the host stops there)."""
    depth = len([part for part in directory.split("/") if part])
    for part in target.split("/"):
        if part == "..":
            depth -= 1
            if depth < 0:
                return True
        elif part not in ("", "."):
            depth += 1
    return False


def stored_link_target(link_directory, target):
    """The target a snapshot stores for a link in host directory ``link_directory``.

    A target the snapshot can keep as it is (relative, staying below ``/``) is kept, so sysfs
    links keep the text the host shows. An absolute target, or one that climbs above ``/``, is
    rewritten relative to ``link_directory`` so that, with the snapshot as ``/``, it points at the
    same host path: ``/etc/systemd/system/multi-user.target.wants`` ->
    ``/etc/systemd/system/gpuhost-pcie.service`` becomes ``../gpuhost-pcie.service`` and a unit
    masked with ``/dev/null`` gets ``../../../dev/null``. ``facts.persist.link_target`` and
    ``Root.resolve_link`` resolve both forms to the same absolute path.
    """
    if not target.startswith("/") and not _climbs_above_root(link_directory, target):
        return target
    absolute = posixpath.normpath(posixpath.join(link_directory, target))
    if absolute.startswith("//"):
        absolute = "/" + absolute.lstrip("/")
    return posixpath.relpath(absolute, link_directory)


def prepare_capture(recorder):
    """Make what ``recorder`` saw fit to leave the host (in place, before :func:`write_tarball`).

    Files named in :data:`REDUCED_FILES` keep only what the gatherers need (PID 1's environment
    only its ``container=`` entry), and link targets are stored as :func:`stored_link_target`
    says, relative to the directory the link is stored in.
    """
    for path, reduce_bytes in REDUCED_FILES.items():
        if path in recorder.files:
            recorder.files[path] = reduce_bytes(recorder.files[path])
    original = dict(recorder.links)
    for path, target in original.items():
        # the directory the link is written under (write_snapshot stores it at its canonical path)
        directory = posixpath.dirname(_canonical(path, original))
        recorder.links[path] = stored_link_target(directory or "/", target)
    return recorder


def write_tarball(recorder, dest, meta):
    """Write the snapshot tarball to ``dest`` (mode 0600) through a private temporary file.

    The temporary file comes from ``tempfile.mkstemp`` in ``dest``'s directory (a new name,
    created exclusively, mode 0600, never a file or link someone planted) and is renamed onto
    ``dest``, which replaces whatever is there (a planted symbolic link included) without
    following it. Raises ``EnvironmentError``; the temporary file is removed on failure.
    """
    directory = os.path.dirname(os.path.abspath(dest))
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(dest), suffix=".tmp", dir=directory)
    try:
        try:
            os.fchmod(fd, TARBALL_MODE)
            handle = os.fdopen(fd, "wb")
        except Exception:
            os.close(fd)
            raise
        with handle:
            write_snapshot(recorder, handle, meta)
            handle.flush()
            os.fsync(handle.fileno())
        os.rename(tmp, dest)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return dest


def main():
    module = AnsibleModule(
        argument_spec=dict(
            dest=dict(type="path"),
            gather=dict(type="list", elements="str", choices=list(SUBSYSTEMS)),
            kernel_log_boots=dict(type="int", default=1, choices=[1, 2]),
            command_timeouts=dict(type="dict", default={}),
            sysctls=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    options = module_options(module)
    recorder = Recorder()

    timeouts = runner.module_timeouts(module)

    def run(argv):
        return runner.run(argv, timeouts=timeouts).decoded()

    root = Root("/", run_command=run, which=module.get_bin_path, recorder=recorder)
    facts = gather_facts(root, module.params["gather"], options)
    as_root = os.geteuid() == 0
    dest = module.params["dest"]
    private_dir = None
    if not module.check_mode:
        meta = {
            "format": SNAPSHOT_FORMAT,
            "hostname": facts.get("hostname"),
            "captured": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "as_root": as_root,
            "generator": "gpuhost.baseline.host_snapshot",
            "gathered": facts["gathered"],
        }
        prepare_capture(recorder)
        if dest is None:
            try:
                private_dir = tempfile.mkdtemp(prefix="gpuhost-snapshot-")
            except EnvironmentError as exc:
                module.fail_json(msg="cannot create a private directory for the snapshot tarball in %s: %s; "
                                     "give dest" % (tempfile.gettempdir(), exc))
            dest = os.path.join(private_dir, "snapshot.tar.gz")
        try:
            write_tarball(recorder, dest, meta)
        except EnvironmentError as exc:
            if private_dir is not None:
                os.rmdir(private_dir)
            module.fail_json(msg="cannot write snapshot tarball %s: %s" % (dest, exc))
    module.exit_json(
        changed=not module.check_mode,
        dest=dest,
        private_dir=private_dir,
        files=len(recorder.files),
        as_root=as_root,
        facts=facts,
    )


if __name__ == "__main__":
    main()
