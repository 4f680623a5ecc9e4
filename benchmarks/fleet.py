"""Benchmark: audit.yml over N snapshot hosts vs `ansible -m setup` (vs a naive shell-task playbook).

All run over the local connection against the same N inventory hosts (default 300), the hosts
cycling through the demo `incident`, `healthy` and `intel` snapshots of build/snapshots (a
copy-free reference through gpuhost_root; built with tools/make_fixtures.py when missing):
  * audit:  ansible-playbook playbooks/audit.yml --check (each snapshot read by the host_facts
            readers in the evaluate action's process, no module process: gathering.gather_snapshot;
            controller-side evaluation, reports written once);
  * setup:  ansible all -m ansible.builtin.setup (what a plain fact gathering costs);
  * naive:  a playbook with one shell task per rule of the catalogue (45 tasks: cat/grep/od of
            what the rule judges, as people write an audit when they skip a facts module).
Output as a user gets it: the playbooks use the project's ansible.cfg callback (default), the
ad-hoc command ansible's own (minimal). Audit and setup run interleaved (audit, setup, audit, setup:
--pairs, at least 3), each under its own measuring process, the load average recorded before each
run: wall and CPU seconds (user + system of the whole process tree) and the peak RSS of the largest
process of the tree (the controller). CPU time and the per-pair ratios are the figures to trust on a
machine busy with something else. With --slope-hosts (default 30) the pairs run at that count too,
and the per-host slopes of CPU and peak RSS between the two counts are printed. Default 300 hosts
(the CI-sized form, not in .ci/run); --large: 1,000 hosts. The naive playbook runs only with
--naive (45 tasks a host are slow at 1,000 hosts).
Then the reports of the audit: the size of each file (and of the per-host pages under hosts/
above views.INLINE_HOSTS hosts), the console summary's lines, and how long headless Chromium
takes to load and lay out report.html (--dump-dom, wall time, its start-up on an empty page
printed beside it).
Targets: audit CPU <= 1.0x setup, wall <= 1.2x, peak RSS <= 2x and flat per host, all report files
<= 60 kB per host at 1,000 hosts (issue 20); naive/audit >= 10 (issue 3); at 1,000 hosts
report.html < 5 MB, report.json < 25 MB, Chromium < 3 s for report.html (issue 12).

With --playbook remediate, remediate.yml --check runs in the audit's place (the remediation preview:
an evaluation, every fix task in check mode, the re-audit, the reports before -> after).

Usage: python benchmarks/fleet.py [--hosts 300 | --large] [--pairs 3] [--slope-hosts 30] [--forks 20]
                                  [--playbook audit|remediate] [--naive] [--no-chromium] [--keep]
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

from common import BIN, SNAPSHOTS, ansible_env, demo_snapshots, median, timed, tree_size

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

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


CHROMIUM = "/usr/bin/chromium"


def write_inventory(path, hosts, snapshots):
    """``hosts`` inventory hosts, host i on ``SNAPSHOTS[i % 3]`` (a group per snapshot)."""
    with open(path, "w") as handle:
        handle.write("all:\n  vars:\n    ansible_connection: local\n")
        handle.write("    ansible_python_interpreter: %s\n  children:\n" % os.path.join(BIN, "python"))
        for position, snap in enumerate(SNAPSHOTS):
            handle.write("    %s:\n      vars:\n        gpuhost_root: %s\n      hosts:\n"
                         % (snap, os.path.join(snapshots, snap)))
            members = [index for index in range(hosts) if index % len(SNAPSHOTS) == position]
            for index in members:
                handle.write("        bench-%04d: {}\n" % index)
            if not members:
                handle.write("        {}\n")


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


def chromium_seconds(url, repeat=3):
    """Best wall time of ``repeat`` headless Chromium loads of ``url`` (--dump-dom: parsed, styled,
    laid out and serialised), or None without Chromium."""
    if not os.access(CHROMIUM, os.X_OK):
        return None
    best = None
    for unused in range(repeat):
        profile = tempfile.mkdtemp(prefix="chromium-profile-")
        start = time.perf_counter()
        subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        "--user-data-dir=" + profile, "--dump-dom", url],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, timeout=600)
        took = time.perf_counter() - start
        shutil.rmtree(profile, ignore_errors=True)
        best = took if best is None else min(best, took)
    return best


def mib(size):
    return "%.2f MB" % (size / 1e6)


def summary_lines(output):
    """Lines of the console summary baseline_report prints (print_console): from its ``gpuhost baseline``
    first line to its ``reports:`` line."""
    lines = output.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("gpuhost baseline ")]
    if not starts:
        return 0
    count = 0
    for line in lines[starts[-1]:]:
        count += 1
        if line.startswith("reports: "):
            break
    return count


def run_pairs(args, inventory, reports, env, hosts):
    """``args.pairs`` interleaved pairs (audit, setup, audit, setup, ...) over ``hosts`` hosts, the
    load average recorded before each run: [(name, [(wall, cpu, rss, load), ...])], the last audit's
    output."""
    audit_argv = [os.path.join(BIN, "ansible-playbook"), "-i", inventory, "playbooks/%s.yml" % args.playbook,
                  "--check", "-e", "gpuhost_report_dir=%s" % reports]
    setup_argv = [os.path.join(BIN, "ansible"), "all", "-i", inventory, "-m", "ansible.builtin.setup"]
    runs = {"audit": [], "setup": []}
    audit_out = ""
    for pair in range(args.pairs):
        for name, argv in (("audit", audit_argv), ("setup", setup_argv)):
            load = os.getloadavg()[0]
            wall, cpu, rss, out = timed(argv, env)
            runs[name].append((wall, cpu, rss, load))
            if name == "audit":
                audit_out = out
            sys.stderr.write("  %d hosts, pair %d, %s: wall %.1fs, CPU %.1fs, peak RSS %.0f MiB, load %.2f\n"
                             % (hosts, pair + 1, name, wall, cpu, rss, load))
    return runs, audit_out


def print_pairs(hosts, args, runs):
    print("\n%d hosts (%s cycled), forks=%d, local connection, %d CPUs, %d interleaved pairs (audit, setup)"
          % (hosts, "/".join(SNAPSHOTS), args.forks, os.cpu_count() or 0, args.pairs))
    print("%-6s %-20s %9s %9s %12s %8s" % ("pair", "", "wall", "CPU", "peak RSS", "load"))
    for index in range(args.pairs):
        for name, label in (("audit", "%s.yml --check" % args.playbook), ("setup", "ansible -m setup")):
            wall, cpu, rss, load = runs[name][index]
            print("%-6d %-20s %8.1fs %8.1fs %8.0f MiB %8.2f" % (index + 1, label, wall, cpu, rss, load))
    ratios = [[runs["audit"][i][k] / runs["setup"][i][k] for i in range(args.pairs)] for k in range(3)]
    print(args.playbook + " / setup per pair: CPU %s; wall %s; peak RSS %s"
          % tuple(", ".join("%.2f" % value for value in ratio) for ratio in (ratios[1], ratios[0], ratios[2])))
    print("%s / setup, median of the pairs: CPU %.2fx (target <= 1.0), wall %.2fx (target <= 1.2), "
          "peak RSS %.2fx (target <= 2)" % (args.playbook, median(ratios[1]), median(ratios[0]), median(ratios[2])))


def slopes(small, small_hosts, large, large_hosts):
    """Per-host slope (median of the runs) of CPU seconds and peak RSS MiB between two host counts."""
    rows = []
    for name in ("audit", "setup"):
        cpu = (median([run[1] for run in large[name]]) - median([run[1] for run in small[name]])) / (large_hosts - small_hosts)
        rss = (median([run[2] for run in large[name]]) - median([run[2] for run in small[name]])) / (large_hosts - small_hosts)
        rows.append((name, cpu, rss))
    print("\nper-host slopes between %d and %d hosts (median of the runs):" % (small_hosts, large_hosts))
    for name, cpu, rss in rows:
        print("  %-6s CPU %.3f s/host, peak RSS %.3f MiB/host" % (name, cpu, rss))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=300)
    parser.add_argument("--large", action="store_true", help="1,000 hosts (overrides --hosts)")
    parser.add_argument("--pairs", type=int, default=3, help="interleaved audit/setup pairs (at least 3 for a figure)")
    parser.add_argument("--slope-hosts", type=int, default=30,
                        help="also run the pairs at this many hosts, for the per-host slopes (0: skip)")
    parser.add_argument("--forks", type=int, default=20)
    parser.add_argument("--playbook", choices=("audit", "remediate"), default="audit",
                        help="what runs against setup: audit.yml --check, or remediate.yml --check (its fix tasks "
                             "in check mode between two evaluations, the re-audit)")
    parser.add_argument("--naive", action="store_true", help="also run the naive shell-task playbook")
    parser.add_argument("--no-chromium", action="store_true", help="skip the Chromium render times")
    parser.add_argument("--keep", action="store_true", help="keep the working directory (reports) and print it")
    args = parser.parse_args()
    if args.large:
        args.hosts = 1000
    missing = catalogue_ids() - {rule_id for rule_id, unused_command in NAIVE_CHECKS}
    if args.naive and missing:
        raise SystemExit("benchmarks/fleet.py: no naive task for %s: add one to NAIVE_CHECKS" % ", ".join(sorted(missing)))
    work = tempfile.mkdtemp(prefix="gpuhost-fleet-")
    snaps = demo_snapshots(work)
    inventory = os.path.join(work, "hosts.yml")
    write_inventory(inventory, args.hosts, snaps)
    reports = os.path.join(work, "reports")
    env = ansible_env(args.forks)
    small = None
    if args.slope_hosts and args.slope_hosts < args.hosts:
        small_inventory = os.path.join(work, "hosts-small.yml")
        write_inventory(small_inventory, args.slope_hosts, snaps)
        small, unused_out = run_pairs(args, small_inventory, os.path.join(work, "reports-small"), env, args.slope_hosts)
    runs, audit_out = run_pairs(args, inventory, reports, env, args.hosts)
    if small is not None:
        print_pairs(args.slope_hosts, args, small)
    print_pairs(args.hosts, args, runs)
    if small is not None:
        slopes(small, args.slope_hosts, runs, args.hosts)
    if args.naive:
        naive = os.path.join(work, "naive.yml")
        write_naive_playbook(naive)
        naive_t, naive_cpu = timed([os.path.join(BIN, "ansible-playbook"), "-i", inventory, naive], env)[:2]
        audit_t, audit_cpu = median([run[0] for run in runs["audit"]]), median([run[1] for run in runs["audit"]])
        print("naive shell-task playbook (%d tasks): wall %.1fs, CPU %.1fs" % (len(NAIVE_CHECKS), naive_t, naive_cpu))
        print("naive / audit = %.1f wall, %.1f CPU (target >= 10)" % (naive_t / audit_t, naive_cpu / audit_cpu))
    print("\nreports (%s):" % reports)
    sizes = {}
    for name in sorted(os.listdir(reports)):
        path = os.path.join(reports, name)
        size, count = tree_size(path) if os.path.isdir(path) else (os.path.getsize(path), 1)
        sizes[name] = size
        print("  %-14s %12s%s" % (name + ("/" if os.path.isdir(path) else ""), mib(size),
                                  " in %d files (%s each)" % (count, mib(size / max(count, 1))) if count > 1 else ""))
    per_host = dict((name, size / float(max(args.hosts, 1))) for name, size in sizes.items())
    print("  per host: %s; all files %.1f kB per host (target <= 60 kB at 1,000 hosts)"
          % (", ".join("%s %.1f kB" % (name, size / 1e3) for name, size in sorted(per_host.items())),
             sum(per_host.values()) / 1e3))
    print("  targets at 1,000 hosts: report.html %s of 5 MB (%.2f), report.json %s of 25 MB (%.2f)"
          % (mib(sizes.get("report.html", 0)), sizes.get("report.html", 0) / 5e6,
             mib(sizes.get("report.json", 0)), sizes.get("report.json", 0) / 25e6))
    print("  console summary: %d lines" % summary_lines(audit_out))
    page = None
    if not args.no_chromium:
        empty = os.path.join(work, "empty.html")
        with open(empty, "w") as handle:
            handle.write("<!DOCTYPE html><title>empty</title><p>empty</p>\n")
        base = chromium_seconds("file://" + empty)
        page = chromium_seconds("file://" + os.path.join(reports, "report.html"))
    if page is None:
        print("  chromium: not run (%s)" % ("--no-chromium" if args.no_chromium else CHROMIUM + " not found"))
    else:
        host_pages = sorted(glob.glob(os.path.join(reports, "hosts", "*.html")))
        host = chromium_seconds("file://" + host_pages[0]) if host_pages else None
        print("  chromium --dump-dom report.html: %.2fs (empty page %.2fs, so %.2fs for the report; target < 3 s, %.2f)"
              % (page, base, page - base, page / 3.0))
        if host is not None:
            print("  chromium --dump-dom %s: %.2fs" % (os.path.relpath(host_pages[0], reports), host))
    if args.keep:
        print("\nkept: %s" % work)
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
