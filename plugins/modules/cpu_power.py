#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: cpu_power
short_description: Set the cpufreq governor, EPP, boost and idle-state limits on every CPU, now and at boot
version_added: 0.1.0
description:
  - Writes the CPU power settings of the GPU host baseline to sysfs on every cpufreq policy and every CPU
    (C(/sys/devices/system/cpu/cpufreq/policyN/...), C(/sys/devices/system/cpu/cpuN/cpuidle/stateK/disable)),
    and installs a boot-time systemd oneshot unit that applies them again after a reboot.
  - Everything is checked before anything is written. A governor or EPP that a policy does not offer, an
    unreadable latency or flag, or an EPP the kernel would refuse fails the task and names the file. A write
    the kernel refuses (EINVAL, EBUSY, EROFS, EACCES) fails the task, names the file, and puts back what the
    task had already written.
  - B(EPP and the governor.) With C(amd-pstate-epp) (C(amd_pstate=active)) and C(intel_pstate) in active mode
    the C(performance) governor holds EPP at C(performance) and the kernel refuses other EPP values while it is
    selected (amd-pstate refuses every EPP write under it, EBUSY). So the module writes EPP before the governor
    and only on policies whose governor is not yet C(performance), and O(governor=performance) together with an
    O(epp) other than V(performance) fails before writing. Any EPP can be set under the C(powersave) governor.
  - Policies without C(energy_performance_preference) (C(acpi-cpufreq), C(amd-pstate) in passive or guided
    mode) are skipped for O(epp) with a warning; RV(unsupported) says so.
  - Runtime state and persisted state are reported apart. RV(runtime_before)/RV(runtime_after) count policies
    per governor and EPP and CPUs per idle state, RV(persisted_before)/RV(persisted_after) describe the unit.
author:
  - gpuhost.baseline maintainers (@gpuhost-baseline)
options:
  governor:
    description:
      - cpufreq governor for every policy (the baseline wants V(performance)). It must be in each policy's
        C(scaling_available_governors).
    type: str
  epp:
    description:
      - Energy performance preference for every policy that has C(energy_performance_preference)
        (V(performance), V(balance_performance), V(balance_power), V(power), V(default)).
    type: str
  boost:
    description:
      - Frequency boost on or off, through C(cpufreq/boost), else C(intel_pstate/no_turbo), else each policy's
        C(boost) file. Where none exists the task warns and sets nothing (boost is then a BIOS setting).
    type: bool
  idle_latency_max_us:
    description:
      - Disable every cpuidle state whose exit latency (C(stateK/latency), microseconds) is above this bound, on
        every CPU. States within the bound are left as they are (never re-enabled).
    type: int
  persist:
    description:
      - V(systemd) writes C(/usr/local/sbin/gpuhost-cpu-power), a shell script applying exactly the options of
        this task, and C(/etc/systemd/system/gpuhost-cpu-power.service), a oneshot unit that runs it at boot,
        enables the unit with the C(multi-user.target.wants) link, and runs C(systemctl daemon-reload) when the
        unit changed (only when O(root=/)).
      - It also writes C(/etc/udev/rules.d/90-gpuhost-cpu-power.rules), which runs the script again when a cpufreq
        driver module loads (C(udevadm control --reload) when it changed). acpi-cpufreq is a module in most
        distribution kernels and udev may load it after the unit ran; its policies would then start with the
        kernel's default governor.
      - V(tuned) (RHEL family, where tuned owns the CPU power settings) writes a tuned child profile,
        C(/etc/tuned/profiles/gpuhost-baseline/tuned.conf) (tuned 2.23 and later, which ship their profiles in
        C(/usr/lib/tuned/profiles)) or C(/etc/tuned/gpuhost-baseline/tuned.conf) (earlier releases), and selects it
        with C(tuned-adm profile gpuhost-baseline) when it changed or another profile is active. Its C([main]
        include=) is the active profile when that is a performance profile (C(accelerator-performance),
        C(latency-performance), C(network-latency), C(throughput-performance), C(hpc-compute)), else the first of
        C(accelerator-performance), C(latency-performance), C(throughput-performance) the host ships (a
        C(balanced) or C(powersave) profile is replaced, with a warning). The settings become C([cpu] governor=),
        C([cpu] energy_performance_preference=) (left out for EPP V(performance) under governor V(performance),
        which holds it there) and C([sysfs]) lines for boost and for the disable flag of each idle state above
        O(idle_latency_max_us) on this host. After tuned applied the profile, the module writes what tuned left
        (an option an older tuned lacks) and reads the state back.
      - With V(tuned), a C(gpuhost-cpu-power.service) unit installed earlier would compete with tuned at boot, so its
        C(multi-user.target.wants) link and its udev rule are removed (C(systemctl daemon-reload),
        C(udevadm control --reload)); its script and unit file stay, inert. Fails, changing nothing, where tuned
        does not run.
      - V(auto) is V(tuned) where the tuned daemon runs (C(/run/tuned/tuned.pid) names a live C(tuned) process),
        else V(systemd).
      - V(none) changes runtime state only and leaves any unit or profile as it is.
    type: str
    choices: [auto, systemd, tuned, none]
    default: auto
extends_documentation_fragment:
  - gpuhost.baseline.fix
notes:
  - Settings apply to the CPUs present when the task runs; the unit applies them again at every boot. Tools that
    manage the governor themselves (power-profiles-daemon, cpupower.service, tuned with O(persist=systemd)) run
    before the unit, whose values then win; disable them to avoid flapping. Where tuned runs, O(persist=auto)
    works with it instead (a child profile).
  - The script is written to a file and run by systemd; nothing is run through a shell by Ansible.
seealso:
  - name: amd-pstate CPU performance scaling driver
    description: EPP, active/passive/guided modes and governors.
    link: https://docs.kernel.org/admin-guide/pm/amd-pstate.html
  - name: CPU idle time management
    description: The cpuidle sysfs interface (latency, disable).
    link: https://docs.kernel.org/admin-guide/pm/cpuidle.html
"""

EXAMPLES = r"""
- name: Performance governor and EPP, boost on, no idle state slower than 10 us to leave, now and at boot
  gpuhost.baseline.cpu_power:
    governor: performance
    epp: performance
    boost: true
    idle_latency_max_us: 10
    backup: true
  become: true

- name: On a RHEL-family host running tuned, the same settings as a tuned child profile (what auto picks there)
  gpuhost.baseline.cpu_power:
    governor: performance
    epp: performance
    boost: true
    idle_latency_max_us: 10
    persist: tuned
  become: true

- name: Runtime only, on a writable snapshot copy (the daemon-reload is only listed)
  gpuhost.baseline.cpu_power:
    idle_latency_max_us: 10
    persist: none
    root: /tmp/gpu01-copy
  delegate_to: localhost
"""

RETURN = r"""
runtime_before:
  description: Runtime state before the task.
  returned: success
  type: dict

  contains:
    policies:
      description: Number of cpufreq policies.
      type: int
      sample: 128
    driver:
      description: Policies per scaling driver.
      type: dict
      sample: {"amd-pstate-epp": 128}
    governor:
      description: Policies per governor.
      type: dict
      sample: {"performance": 128}
    epp:
      description: Policies per EPP (policies without EPP are not counted).
      type: dict
      sample: {"performance": 128}
    boost:
      description: Whether boost is on; V(null) when the host has no boost control.
      type: bool
      sample: true
    idle_states:
      description: Per idle state index, its name, exit latency and how many CPUs have it enabled or disabled.
      type: list
      elements: dict
      sample: [{"index": 2, "name": "C2", "latency_us": 400, "enabled_cpus": 0, "disabled_cpus": 128}]

runtime_after:
  description: Runtime state after the task, read back from sysfs (in check mode, what it would be).
  returned: success
  type: dict

  contains:
    policies:
      description: Number of cpufreq policies.
      type: int
      sample: 128
    driver:
      description: Policies per scaling driver.
      type: dict
      sample: {"amd-pstate-epp": 128}
    governor:
      description: Policies per governor.
      type: dict
      sample: {"performance": 128}
    epp:
      description: Policies per EPP (policies without EPP are not counted).
      type: dict
      sample: {"performance": 128}
    boost:
      description: Whether boost is on; V(null) when the host has no boost control.
      type: bool
      sample: true
    idle_states:
      description: Per idle state index, its name, exit latency and how many CPUs have it enabled or disabled.
      type: list
      elements: dict
      sample: [{"index": 2, "name": "C2", "latency_us": 400, "enabled_cpus": 0, "disabled_cpus": 128}]

runtime_changes:
  description: The sysfs writes made (or that would be), grouped by attribute and value, with the CPUs or policies.
  returned: success
  type: list
  elements: str
  sample: ["/sys/devices/system/cpu/cpufreq/N/scaling_governor: ondemand -> performance on 0-127 (128 files)"]
persist:
  description: The persistence mode used (V(auto) resolved to V(tuned) or V(systemd)).
  returned: success
  type: str
  sample: systemd
tuned:
  description: The tuned child profile (only when it was used).
  returned: when tuned is used
  type: dict

  contains:
    profile:
      description: Name of the child profile.
      type: str
      sample: gpuhost-baseline
    path:
      description: Its tuned.conf.
      type: str
      sample: /etc/tuned/gpuhost-baseline/tuned.conf
    include:
      description: The parent profiles it includes.
      type: list
      elements: str
      sample: [accelerator-performance]
    active_before:
      description: The active tuned profile before the task.
      type: str
      sample: balanced
    active_after:
      description: The active tuned profile after the task.
      type: str
      sample: gpuhost-baseline
    disabled:
      description: The boot link and udev rule of an earlier gpuhost-cpu-power.service removed (or that would be).
      type: list
      elements: str
      sample: [/etc/systemd/system/multi-user.target.wants/gpuhost-cpu-power.service]
persisted_before:
  description: The boot-time unit before the task.
  returned: success
  type: dict

  contains:
    unit:
      description: Whether the unit file exists.
      type: bool
      sample: true
    enabled:
      description: Whether the C(multi-user.target.wants) link to the unit exists.
      type: bool
      sample: true
    script:
      description: Whether the script exists.
      type: bool
      sample: true
    settings:
      description: The settings the script re-applies at boot; V(null) when there is none written by this module.
      type: dict
      sample: {"governor": "performance", "idle_latency_max_us": 10}
    unit_current:
      description: Whether the unit file is the one this module writes.
      type: bool
      sample: true
    udev:
      description: Whether the udev rule that runs the script when a cpufreq driver module loads is the one this module writes.
      type: bool
      sample: true

persisted_after:
  description: The boot-time unit after the task.
  returned: success
  type: dict

  contains:
    unit:
      description: Whether the unit file exists.
      type: bool
      sample: true
    enabled:
      description: Whether the C(multi-user.target.wants) link to the unit exists.
      type: bool
      sample: true
    script:
      description: Whether the script exists.
      type: bool
      sample: true
    settings:
      description: The settings the script re-applies at boot; V(null) when there is none written by this module.
      type: dict
      sample: {"governor": "performance", "idle_latency_max_us": 10}
    unit_current:
      description: Whether the unit file is the one this module writes.
      type: bool
      sample: true
    udev:
      description: Whether the udev rule that runs the script when a cpufreq driver module loads is the one this module writes.
      type: bool
      sample: true

unsupported:
  description: Settings that could not be applied on this host, with the reason (for example no EPP with acpi-cpufreq).
  returned: success
  type: dict
  sample: {"epp": "128 of 128 policies have no energy_performance_preference (driver acpi-cpufreq)"}
unit:
  description: Path of the systemd unit.
  returned: success
  type: str
  sample: /etc/systemd/system/gpuhost-cpu-power.service
udev_rule:
  description: Path of the udev rule.
  returned: success
  type: str
  sample: /etc/udev/rules.d/90-gpuhost-cpu-power.rules
script:
  description: Path of the boot-time script.
  returned: success
  type: str
  sample: /usr/local/sbin/gpuhost-cpu-power
commands:
  description: Commands run or, in check mode or on a snapshot root, that would run.
  returned: always
  type: list
  elements: str
  sample: [systemctl daemon-reload]
backup_files:
  description: Backup copy of each file replaced, by file (only with O(backup=true)).
  returned: changed
  type: dict
  sample: {"/usr/local/sbin/gpuhost-cpu-power": "/usr/local/sbin/gpuhost-cpu-power.4211.2025-01-15@10:02:11~"}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.base import FIX_OPTIONS, run_fix
from ansible_collections.gpuhost.baseline.plugins.module_utils.fix.cpu import ARGUMENT_SPEC, REQUIRED_ONE_OF, apply_params


def main():
    module = AnsibleModule(argument_spec=dict(ARGUMENT_SPEC, **FIX_OPTIONS), required_one_of=REQUIRED_ONE_OF,
                           supports_check_mode=True)
    run_fix(module, lambda host: apply_params(host, module.params, module._diff))


if __name__ == "__main__":
    main()
