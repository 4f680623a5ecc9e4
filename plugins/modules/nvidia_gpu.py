#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: nvidia_gpu
short_description: Turn NVIDIA GPU persistence mode on and set power limits, refusing while compute work runs
version_added: 0.1.0
description:
  - Reads the GPUs' state from C(nvidia-smi -q -x) and sets, on the GPUs of O(gpus) (all by default),
    persistence mode and the power limit. Only what differs is changed.
  - B(Persistence) - when the unit C(nvidia-persistenced.service) is installed (the driver's persistence
    daemon, the method NVIDIA recommends), it is enabled and started with C(systemctl enable --now), which
    also keeps persistence across reboots. Without the unit, C(nvidia-smi -i N -pm 1) is run per GPU
    (this lasts until the driver unloads). O(persistence_method) forces one way.
  - B(Power limit) - C(nvidia-smi -i N -pl W) per GPU, with W the board's maximum (V(max)), its default
    (V(default)) or a number of watts, checked against the board's min/max before anything runs. The limit
    lasts until the driver unloads or the host reboots, so run this task at every boot or from the
    C(remediate) role.
  - B(Maintenance guard) - when anything is to change and any GPU of the host lists a compute process (or its
    process list is missing), the task fails with the PIDs and process names, unless O(force=true).
  - After running the commands the module reads C(nvidia-smi -q -x) again; a GPU that does not report the new
    setting fails the task, named.
  - B(On a snapshot root) (O(root) not V(/)) the state comes from C(commands/nvidia-smi-q.xml) under it and
    nothing runs. The result lists in RV(commands) what would run and is C(changed) when something differs.
    Outside check mode the snapshot's C(commands/nvidia-smi-q.xml) is then rewritten to the persistence mode
    and power limit the commands would leave (only those elements change), just as sysctl fixes write the
    snapshot's C(/proc/sys) files, so a second run is unchanged. On a live host this module writes no file.
author:
  - gpuhost.baseline maintainers (@gpuhost-baseline)
options:
  persistence:
    description:
      - V(true) turns persistence mode on, V(false) off (and, with the daemon, disables and stops it). Unset leaves it.
    type: bool
  persistence_method:
    description:
      - V(auto) uses the daemon when its unit file is installed (in C(/etc/systemd/system), C(/run/systemd/system),
        C(/usr/local/lib/systemd/system), C(/usr/lib/systemd/system) or C(/lib/systemd/system), not masked),
        else C(nvidia-smi -pm).
      - V(daemon) requires the unit; V(smi) always uses C(nvidia-smi -i N -pm) and never calls C(systemctl).
    type: str
    choices: [auto, daemon, smi]
    default: auto
  power_limit:
    description:
      - V(max) - the board's maximum power limit; V(default) - its default; or a number of watts (V(350)).
      - A number outside the board's min..max, or a board that reports no limits, fails the task before anything runs.
    type: str
  gpus:
    description:
      - GPUs to change, each an index in C(nvidia-smi) order (V(0)), a PCI bus id (V(0000:43:00.0)) or a UUID.
        Empty means every GPU.
      - With the persistence daemon, persistence is a property of the whole host, not of one GPU.
    type: list
    elements: str
    default: []
  force:
    description:
      - Change the settings even when compute processes run on a GPU. Lowering a power limit under load slows
        the work down; toggling persistence does not stop it, but do this in a maintenance window anyway.
    type: bool
    default: false
  nvidia_smi:
    description:
      - The C(nvidia-smi) to run, a name looked up in PATH or a path. Tests point it at a stand-in.
    type: str
    default: nvidia-smi
  root:
    description:
      - Directory that stands for the host's C(/). V(/) changes the live host; any other value is a snapshot
        directory whose C(commands/nvidia-smi-q.xml) gives the state, and no command is ever run (the commands
        that would have run are listed in RV(commands)).
    type: path
    default: /
attributes:
  check_mode:
    description:
      - Decides and reports what would change and runs no changing command; it still reads the state
        (C(nvidia-smi -q -x), C(systemctl is-enabled) and C(is-active)).
    support: full
  diff_mode:
    description: Returns each selected GPU's persistence mode and power limit before and after.
    support: full
notes:
  - Needs root on a live host (C(become=true)) to change GPU settings.
seealso:
  - name: NVIDIA driver persistence
    description: Persistence mode versus the persistence daemon.
    link: https://docs.nvidia.com/deploy/driver-persistence/index.html
  - name: nvidia-smi
    description: The C(-pm) and C(-pl) options.
    link: https://docs.nvidia.com/deploy/nvidia-smi/index.html
"""

EXAMPLES = r"""
- name: Persistence on and every GPU at its maximum power limit
  gpuhost.baseline.nvidia_gpu:
    persistence: true
    power_limit: max
  become: true

- name: Two GPUs at their default power limit, even though a job is running
  gpuhost.baseline.nvidia_gpu:
    gpus: ["0", "0000:44:00.0"]
    power_limit: default
    force: true
  become: true

- name: What would change on a snapshot of the host (no command runs)
  gpuhost.baseline.nvidia_gpu:
    persistence: true
    power_limit: max
    root: /srv/snapshots/gpu01
  delegate_to: localhost
  check_mode: true
"""

RETURN = r"""
gpus:
  description:
    - Each selected GPU with its settings before and after (in check mode and on a snapshot root, as they would be).
  returned: success
  type: list
  elements: dict
  sample:
    - index: 0
      bus_id: "0000:43:00.0"
      name: NVIDIA H100 80GB HBM3
      persistence_before: false
      persistence_after: true
      power_limit_before_w: 450.0
      power_limit_after_w: 700.0
      changed: true
persistence_method:
  description: How persistence was (or would be) set, V(daemon) or V(smi); V(null) when O(persistence) is unset.
  returned: success
  type: str
  sample: smi
driver_version:
  description: Driver version nvidia-smi reports.
  returned: success
  type: str
  sample: "550.127.05"
processes:
  description: The compute processes that made the maintenance guard refuse (GPU index, bus id, pid, name, type).
  returned: failed
  type: list
  elements: dict
  sample: [{"gpu": 0, "bus_id": "0000:43:00.0", "pid": 4242, "name": "python3", "type": "C"}]
commands:
  description: Commands run or, in check mode or on a snapshot root, that would run.
  returned: always
  type: list
  elements: str
  sample: ["nvidia-smi -i 0 -pm 1", "nvidia-smi -i 0 -pl 700"]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.base import FixError, Host
from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.nvidia import ARGUMENT_SPEC, apply_params


def main():
    module = AnsibleModule(argument_spec=dict(ARGUMENT_SPEC, root=dict(type="path", default="/")),
                           supports_check_mode=True)
    host = Host(module, module.params["root"])
    try:
        result = apply_params(host, module.params, module._diff)
    except FixError as exc:
        module.fail_json(msg=exc.msg, commands=host.commands, **exc.result)
    for warning in result.pop("warnings"):
        module.warn(warning)
    module.exit_json(commands=host.commands, **result)


if __name__ == "__main__":
    main()
