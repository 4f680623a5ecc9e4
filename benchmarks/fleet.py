"""Benchmark: audit.yml over N snapshot hosts vs `ansible -m setup` vs a naive shell-task playbook.

All three run over the local connection against the same N inventory hosts (default 100), each
host pointing at a copy-free reference to the bundled `incident` snapshot (gpuhost_root):
  * audit:  ansible-playbook playbooks/audit.yml --check (one host_facts call per host,
            controller-side evaluation, reports written once);
  * setup:  ansible all -m ansible.builtin.setup (what a plain fact gathering costs);
  * naive:  a playbook with one command task per check (cat of each sysfs/proc file the audit
            judges, as people write it when they skip a facts module).
Targets (issue 3): audit <= 1.2x setup, naive/audit >= 10.

Usage: python benchmarks/fleet.py [--hosts 100] [--forks 20]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(REPO, ".venv", "bin")

NAIVE_CHECKS = [
    "/sys/devices/system/cpu/cpufreq/policy0/scaling_driver",
    "/sys/devices/system/cpu/cpufreq/policy0/scaling_governor",
    "/sys/devices/system/cpu/cpufreq/boost",
    "/sys/devices/system/cpu/cpu0/cpuidle/state2/disable",
    "/sys/devices/system/cpu/cpu0/cpuidle/state2/latency",
    "/sys/devices/system/cpu/smt/control",
    "/proc/sys/kernel/osrelease",
    "/proc/cmdline",
    "/proc/sys/kernel/numa_balancing",
    "/proc/sys/vm/zone_reclaim_mode",
    "/proc/sys/vm/swappiness",
    "/sys/kernel/mm/transparent_hugepage/enabled",
    "/sys/devices/system/node/node0/meminfo",
    "/sys/devices/system/node/node1/meminfo",
    "/proc/driver/nvidia/version",
    "/proc/devices",
    "/etc/pve/lxc/101.conf",
    "/etc/default/grub",
    "/etc/kernel/cmdline",
    "/etc/os-release",
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
        for index, check in enumerate(NAIVE_CHECKS):
            handle.write("    - name: Check %d\n      ansible.builtin.command: cat {{ gpuhost_root }}%s\n"
                         "      changed_when: false\n      failed_when: false\n" % (index, check))


def timed(argv, env):
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:])
        raise SystemExit("%s failed with rc %d" % (argv[1], proc.returncode))
    return elapsed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--forks", type=int, default=20)
    args = parser.parse_args()
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
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.minimal",
        "PATH": BIN + os.pathsep + env.get("PATH", ""),
    })
    results = [
        ("audit.yml --check", timed([os.path.join(BIN, "ansible-playbook"), "-i", inventory, "playbooks/audit.yml",
                                     "--check", "-e", "gpuhost_report_dir=%s" % os.path.join(work, "reports")], env)),
        ("ansible -m setup", timed([os.path.join(BIN, "ansible"), "all", "-i", inventory, "-m",
                                    "ansible.builtin.setup"], env)),
        ("naive shell-task playbook (%d tasks)" % len(NAIVE_CHECKS),
         timed([os.path.join(BIN, "ansible-playbook"), "-i", inventory, naive], env)),
    ]
    print("\n%d hosts, forks=%d, local connection" % (args.hosts, args.forks))
    for name, seconds in results:
        print("%-40s %8.1f s" % (name, seconds))
    audit, setup, naive_t = (seconds for unused_label, seconds in results)
    print("audit / setup = %.2f (target <= 1.2)" % (audit / setup))
    print("naive / audit = %.1f (target >= 10)" % (naive_t / audit))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
