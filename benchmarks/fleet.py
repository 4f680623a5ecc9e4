"""Benchmark: audit.yml over N snapshot hosts vs `ansible -m setup` vs a naive shell-task playbook.

All three run over the local connection against the same N inventory hosts (default 100), each
host pointing at a copy-free reference to the bundled `incident` snapshot (gpuhost_root):
  * audit:  ansible-playbook playbooks/audit.yml --check (one host_facts call per host,
            controller-side evaluation, reports written once);
  * setup:  ansible all -m ansible.builtin.setup (what a plain fact gathering costs);
  * naive:  a playbook with one shell task per rule of the catalogue (45 tasks: cat/grep/od of
            what the rule judges, as people write an audit when they skip a facts module).
Output as a user gets it: the playbooks use the project's ansible.cfg callback (default), the
ad-hoc command ansible's own (minimal). Wall and CPU seconds (user + system of the whole process
tree) are printed: CPU time is the figure to trust on a machine busy with something else.
Targets (issue 3): audit <= 1.2x setup, naive/audit >= 10.

Usage: python benchmarks/fleet.py [--hosts 100] [--forks 20]
"""
import argparse
import glob
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(REPO, ".venv", "bin")

# One task per rule of the catalogue, as people write an audit without a facts module: read
# what the rule judges with cat/grep/od over the host's files (here the snapshot's), one
# command or shell task each. main() checks that every rule of rules/*.yml has its task.
SYS = "{{ gpuhost_root }}/sys"
PROC = "{{ gpuhost_root }}/proc"
ETC = "{{ gpuhost_root }}/etc"
CPUS = SYS + "/devices/system/cpu"
PCI_CONFIGS = SYS + "/bus/pci/devices/*/config"
SMI = "{{ gpuhost_root }}/commands/nvidia-smi-q.xml"
NAIVE_CHECKS = [
    ("CPU-001", "cat %s/cpufreq/policy*/scaling_driver | sort | uniq -c" % CPUS),
    ("CPU-002", "cat %s/amd_pstate/status" % CPUS),
    ("CPU-003", "cat %s/cpufreq/policy*/scaling_governor | sort | uniq -c" % CPUS),
    ("CPU-004", "cat %s/cpufreq/policy*/energy_performance_preference | sort | uniq -c" % CPUS),
    ("CPU-005", "cat %s/cpufreq/boost" % CPUS),
    ("CPU-006", "grep -H . %s/cpu*/cpuidle/state*/latency %s/cpu*/cpuidle/state*/disable | wc -l" % (CPUS, CPUS)),
    ("CPU-007", "cat %s/smt/control" % CPUS),
    ("CPU-008", "ls %s/systemd/system/*.service" % ETC),
    ("IOMMU-001", "ls %s/class/iommu" % SYS),
    ("IOMMU-002", "cat %s/kernel/iommu_groups/*/type | sort | uniq -c" % SYS),
    ("KERNEL-001", "cat %s/sys/kernel/osrelease" % PROC),
    ("KERNEL-002", "cat %s/cmdline %s/default/grub" % (PROC, ETC)),
    ("KERNEL-003", "cat %s/kernel/debug/sched/preempt" % SYS),
    ("KERNEL-004", "cat %s/kernel/mm/transparent_hugepage/enabled" % SYS),
    ("KERNEL-005", "cat %s/sys/vm/swappiness" % PROC),
    ("KERNEL-006", "ls {{ gpuhost_root }}/boot {{ gpuhost_root }}/lib/modules"),
    ("KERNEL-007", "grep -rh swappiness %s/sysctl.conf %s/sysctl.d" % (ETC, ETC)),
    ("LXC-001", "grep -h devices.allow %s/pve/lxc/*.conf" % ETC),
    ("LXC-002", "grep -h mount.entry %s/pve/lxc/*.conf" % ETC),
    ("LXC-003", "grep -h '^memory' %s/pve/lxc/*.conf" % ETC),
    ("LXC-004", "grep -h cpuset %s/pve/lxc/*.conf" % ETC),
    ("NUMA-001", "cat %s/sys/kernel/numa_balancing" % PROC),
    ("NUMA-002", "cat %s/sys/vm/zone_reclaim_mode" % PROC),
    ("NUMA-003", "grep -h MemFree %s/devices/system/node/node*/meminfo" % SYS),
    ("NUMA-004", "grep -h -e MemFree -e MemTotal %s/devices/system/node/node*/meminfo" % SYS),
    ("NUMA-005", "grep -h MemTotal %s/devices/system/node/node*/meminfo" % SYS),
    ("NUMA-006", "grep -rh numa_balancing %s/sysctl.conf %s/sysctl.d" % (ETC, ETC)),
    ("NUMA-007", "grep -rh zone_reclaim_mode %s/sysctl.conf %s/sysctl.d" % (ETC, ETC)),
    ("NVIDIA-001", "grep -h driver_version %s" % SMI),
    ("NVIDIA-002", "cat %s/driver/nvidia/version" % PROC),
    ("NVIDIA-003", "grep -h cuda_version %s" % SMI),
    ("NVIDIA-004", "grep -h persistence_mode %s" % SMI),
    ("NVIDIA-005", "grep -h -A3 ecc_mode %s" % SMI),
    ("NVIDIA-006", "grep -h current_ecc %s | sort | uniq -c" % SMI),
    ("NVIDIA-007", "grep -h -e current_power_limit -e max_power_limit %s" % SMI),
    ("NVIDIA-008", "grep -h -A12 clocks_event_reasons %s" % SMI),
    ("NVIDIA-009", "grep -h -A8 link_widths %s" % SMI),
    ("PCI-001", "for f in %s; do od -An -tx1 -N256 $f; done | wc -l" % PCI_CONFIGS),
    ("PCI-002", "for f in %s; do od -An -tx1 -N256 $f; done | wc -l" % PCI_CONFIGS),
    ("PCI-003", "for f in %s; do od -An -tx1 -N256 $f; done | wc -l" % PCI_CONFIGS),
    ("PCI-004", "for f in %s; do od -An -tx1 -N256 $f; done | wc -l" % PCI_CONFIGS),
    ("PCI-005", "for f in %s; do od -An -tx1 -N256 $f; done | wc -l" % PCI_CONFIGS),
    ("PCI-006", "for f in %s; do od -An -tx1 -j256 $f; done | wc -l" % PCI_CONFIGS),
    ("PCI-007", "grep -h . %s/bus/pci/devices/*/aer_dev_fatal %s/bus/pci/devices/*/aer_dev_nonfatal | wc -l"
     % (SYS, SYS)),
    ("PCI-008", "ls %s/systemd/system %s/udev/rules.d" % (ETC, ETC)),
]


def write_inventory(path, hosts, snapshot):
    with open(path, "w") as handle:
        handle.write("all:\n  vars:\n    ansible_connection: local\n")
        handle.write("    ansible_python_interpreter: %s\n" % os.path.join(BIN, "python"))
        handle.write("    gpuhost_root: %s\n  hosts:\n" % snapshot)
        for index in range(hosts):
            handle.write("    bench-%03d: {}\n" % index)


def write_naive_playbook(path):
    with open(path, "w") as handle:
        handle.write("---\n- name: Naive checks, one task per check\n  hosts: all\n  gather_facts: false\n  tasks:\n")
        for rule_id, command in NAIVE_CHECKS:
            handle.write("    - name: %s\n      ansible.builtin.shell: %s\n"
                         "      changed_when: false\n      failed_when: false\n" % (rule_id, json.dumps(command)))


def catalogue_ids():
    ids = set()
    for path in glob.glob(os.path.join(REPO, "rules", "*.yml")):
        with open(path) as handle:
            ids.update(re.findall(r"^- id: (\S+)", handle.read(), re.M))
    return ids


def timed(argv, env):
    """Wall seconds and CPU seconds (user + system of the whole process tree) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          check=False)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:])
        raise SystemExit("%s failed with rc %d" % (argv[1], proc.returncode))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--forks", type=int, default=20)
    args = parser.parse_args()
    missing = catalogue_ids() - {rule_id for rule_id, unused_command in NAIVE_CHECKS}
    if missing:
        raise SystemExit("benchmarks/fleet.py: no naive task for %s: add one to NAIVE_CHECKS" % ", ".join(sorted(missing)))
    work = tempfile.mkdtemp(prefix="gpuhost-fleet-")
    snaps = os.path.join(work, "snapshots")
    subprocess.run([sys.executable, os.path.join(REPO, "tools", "make_fixtures.py"), snaps, "--only", "incident"],
                   check=True)
    inventory = os.path.join(work, "hosts.yml")
    write_inventory(inventory, args.hosts, os.path.join(snaps, "incident"))
    naive = os.path.join(work, "naive.yml")
    write_naive_playbook(naive)
    env = dict(os.environ)
    env.update({
        "ANSIBLE_COLLECTIONS_PATH": os.path.join(REPO, "build", "collections"),
        "ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg"),
        "ANSIBLE_FORKS": str(args.forks),
        "PATH": BIN + os.pathsep + env.get("PATH", ""),
    })
    load = os.getloadavg()[0]
    results = [
        ("audit.yml --check", timed([os.path.join(BIN, "ansible-playbook"), "-i", inventory, "playbooks/audit.yml",
                                     "--check", "-e", "gpuhost_report_dir=%s" % os.path.join(work, "reports")], env)),
        ("ansible -m setup", timed([os.path.join(BIN, "ansible"), "all", "-i", inventory, "-m",
                                    "ansible.builtin.setup"], env)),
        ("naive shell-task playbook (%d tasks)" % len(NAIVE_CHECKS),
         timed([os.path.join(BIN, "ansible-playbook"), "-i", inventory, naive], env)),
    ]
    print("\n%d hosts, forks=%d, local connection, load average before: %.2f" % (args.hosts, args.forks, load))
    print("%-40s %9s %9s" % ("", "wall", "CPU"))
    for name, (wall, cpu) in results:
        print("%-40s %8.1fs %8.1fs" % (name, wall, cpu))
    (audit, audit_cpu), (setup, setup_cpu), (naive_t, naive_cpu) = (figures for unused_label, figures in results)
    print("audit / setup = %.2f wall, %.2f CPU (target <= 1.2)" % (audit / setup, audit_cpu / setup_cpu))
    print("naive / audit = %.1f wall, %.1f CPU (target >= 10)" % (naive_t / audit, naive_cpu / audit_cpu))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
