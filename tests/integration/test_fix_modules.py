"""The sysctl, kernel_cmdline and cpu_power modules run by ansible-playbook on writable snapshot copies.

Each step is one playbook run (tasks of the three modules together, on the incident and the intel
copy at once), so the four-run pattern costs four ansible-playbook runs for both snapshots: check
-> changed (trees untouched), apply -> changed, check -> unchanged, apply -> unchanged (no command
listed). A test reads its own tasks' results and its own tasks' part of the output (task_output).
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

from helpers.fixhost import changed_paths, copy_tree, make_readonly, read, tree_state

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")


def run_play(tmp_path, name, tasks, check=False, diff=False):
    """Run ``[(module, args)]`` as one play on localhost; returns ``(stdout, [result per task])``."""
    out = tmp_path / ("%s-results.json" % name)
    play_tasks = []
    for index, (module, args) in enumerate(tasks):
        play_tasks.append({"name": "task %d %s" % (index, module), module: args, "register": "r%d" % index,
                           "ignore_errors": True})
    collected = ", ".join("'r%d': r%d" % (index, index) for index in range(len(tasks)))
    play_tasks.append({"name": "collect results", "ansible.builtin.copy": {
        "content": "{{ {%s} | to_json }}" % collected, "dest": str(out)}, "check_mode": False, "diff": False})
    playbook = tmp_path / ("%s.yml" % name)
    # JSON is YAML
    playbook.write_text(json.dumps([{"name": name, "hosts": "localhost", "gather_facts": False,
                                     "tasks": play_tasks}], indent=1))
    if out.exists():
        out.unlink()
    argv = [PLAYBOOK, "-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=%s" % sys.executable,
            str(playbook)]
    if check:
        argv.append("--check")
    if diff:
        argv.append("--diff")
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", ANSIBLE_RETRY_FILES_ENABLED="0")
    proc = subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:]
    results = json.loads(out.read_text())
    return proc.stdout, [results["r%d" % index] for index in range(len(tasks))]


def task_output(stdout, indices):
    """The output of the tasks ``indices`` of a :func:`run_play` run: each ``TASK [task N ...]``
    section (its header, its diff, its warnings) up to the next task's header."""
    wanted = set("task %d " % index for index in indices)
    kept, keep = [], False
    for line in stdout.splitlines(True):
        if line.startswith("TASK ["):
            keep = any(line.startswith("TASK [" + name) for name in wanted)
        elif line.startswith(("PLAY RECAP", "PLAY [")):
            keep = False
        if keep:
            kept.append(line)
    return "".join(kept)


def _four_runs(tmp_path, name, roots, tasks):
    """Run the four steps on the trees ``roots`` ({name: root}); returns ``({name: tree before},
    {name: tree after apply}, [(stdout, [result per task]) per step])``."""
    before = dict((key, tree_state(root)) for key, root in roots.items())
    steps = []
    stdout, results = run_play(tmp_path, name + "-check", tasks, check=True, diff=True)
    for key, root in roots.items():
        assert tree_state(root) == before[key], "check mode changed the %s tree" % key
    steps.append((stdout, results))
    stdout, results = run_play(tmp_path, name + "-apply", tasks)
    applied = dict((key, tree_state(root)) for key, root in roots.items())
    steps.append((stdout, results))
    for step in ("check-again", "apply-again"):
        stdout, results = run_play(tmp_path, name + "-" + step, tasks, check=step.startswith("check"), diff=True)
        steps.append((stdout, results))
        for key, root in roots.items():
            assert tree_state(root) == applied[key], "%s changed the %s tree" % (step, key)
    for index, (_stdout, results) in enumerate(steps):
        for task, result in zip(tasks, results):
            assert not result.get("failed"), (task, result.get("msg"))
            assert result["changed"] is (index < 2), (index, task[0], result)
            if index >= 2:
                assert result["commands"] == [], (task[0], result["commands"])
    return before, applied, steps


def _backups(root):
    found = []
    for directory, _dirs, files in os.walk(root):
        found.extend(os.path.relpath(os.path.join(directory, name), root) for name in files if name.endswith("~"))
    return sorted(found)


def _incident_tasks(root):
    return [
        ("gpuhost.baseline.kernel_sysctl", {"key": "kernel.numa_balancing", "value": "0", "root": root, "backup": True}),
        ("gpuhost.baseline.kernel_sysctl", {"key": "vm.swappiness", "value": "10", "root": root, "backup": True}),
        ("gpuhost.baseline.kernel_cmdline", {"add": {"amd_pstate": "active", "iommu": "pt"}, "root": root,
                                             "backup": True}),
        ("gpuhost.baseline.cpu_power", {"governor": "performance", "epp": "performance", "boost": True,
                                        "idle_latency_max_us": 10, "root": root, "backup": True}),
    ]


def _intel_tasks(root):
    return [
        ("gpuhost.baseline.kernel_sysctl", {"key": "vm.swappiness", "value": "10", "root": root}),
        ("gpuhost.baseline.kernel_cmdline", {"add": ["processor.max_cstate=1"], "remove": ["rd.lvm.lv"],
                                             "bootloader": "grub", "root": root}),
        ("gpuhost.baseline.cpu_power", {"governor": "performance", "epp": "performance", "idle_latency_max_us": 10,
                                        "root": root}),
    ]


@pytest.fixture(scope="module")
def four_runs(snapshot_trees, tmp_path_factory):
    """The four steps once, with the incident tasks and the intel (grub forced) tasks in each run;
    ``{name: {"root", "original", "before", "applied", "steps": [(its output, its results)]}}``."""
    tmp = tmp_path_factory.mktemp("fix-modules")
    roots = {"incident": copy_tree(snapshot_trees["incident"], tmp / "incident"),
             "intel": copy_tree(snapshot_trees["intel"], tmp / "intel")}
    original = {"incident": read(roots["incident"], "/etc/kernel/cmdline"),
                "intel": read(roots["intel"], "/etc/default/grub")}
    groups = (("incident", _incident_tasks(roots["incident"])), ("intel", _intel_tasks(roots["intel"])))
    tasks, spans = [], {}
    for name, group in groups:
        spans[name] = range(len(tasks), len(tasks) + len(group))
        tasks.extend(group)
    before, applied, steps = _four_runs(tmp, "both", roots, tasks)
    runs = {}
    for name, span in spans.items():
        runs[name] = {"root": roots[name], "original": original[name], "before": before[name],
                      "applied": applied[name],
                      "steps": [(task_output(stdout, span), results[span.start:span.stop])
                                for stdout, results in steps]}
    yield runs
    shutil.rmtree(str(tmp), ignore_errors=True)


def test_incident_four_runs(four_runs):
    run = four_runs["incident"]
    root, original_cmdline, before, applied, steps = (run["root"], run["original"], run["before"], run["applied"],
                                                      run["steps"])

    check_out, check_results = steps[0]
    # --check --diff shows each change
    for expected in ("+kernel.numa_balancing = 0", "+vm.swappiness = 10",
                     "+root=ZFS=rpool/ROOT/pve-1 boot=zfs quiet amd_pstate=active iommu=pt",
                     '+governor: {"performance": 128}', "+ExecStart=/usr/local/sbin/gpuhost-cpu-power"):
        assert expected in check_out, expected
    assert check_results[2]["commands"] == ["proxmox-boot-tool refresh"]
    assert check_results[3]["commands"] == ["systemctl daemon-reload", "udevadm control --reload"]

    _out, results = steps[1]
    sysctl, swappiness, cmdline, cpu = results
    assert (sysctl["runtime_before"], sysctl["runtime_after"]) == ("1", "0")
    assert (sysctl["persisted_before"], sysctl["persisted_after"]) == (None, "0")
    assert cmdline["bootloader"] == "systemd-boot" and cmdline["reboot_required"] is True
    assert cmdline["commands"] == ["proxmox-boot-tool refresh"]
    assert cmdline["configured_after"] == {"root": "ZFS=rpool/ROOT/pve-1", "boot": "zfs", "quiet": True,
                                           "amd_pstate": "active", "iommu": "pt"}
    assert cpu["runtime_after"]["governor"] == {"performance": 128}
    assert cpu["runtime_after"]["idle_states"][2]["disabled_cpus"] == 128
    assert cpu["unsupported"]["epp"].endswith("(driver acpi-cpufreq)")
    assert cpu["persisted_after"]["enabled"] is True

    # only the intended bytes changed
    assert read(root, "/proc/sys/kernel/numa_balancing") == "0\n"
    assert read(root, "/proc/sys/vm/swappiness") == "10\n"
    assert read(root, "/etc/sysctl.d/90-gpuhost-baseline.conf").endswith("kernel.numa_balancing = 0\nvm.swappiness = 10\n")
    assert read(root, "/etc/kernel/cmdline") == "root=ZFS=rpool/ROOT/pve-1 boot=zfs quiet amd_pstate=active iommu=pt\n"
    backups = _backups(root)
    assert len(backups) == 2  # /etc/kernel/cmdline and our sysctl file before its second key
    cmdline_backup = [path for path in backups if path.startswith("etc/kernel/cmdline.")][0]
    assert read(root, cmdline_backup) == original_cmdline
    sysctl_backup = [path for path in backups if path.startswith("etc/sysctl.d/")][0]
    assert read(root, sysctl_backup).endswith("kernel.numa_balancing = 0\n")
    changed = set(changed_paths(before, applied))
    expected = {"proc/sys/kernel/numa_balancing", "proc/sys/vm/swappiness", "etc/sysctl.d/90-gpuhost-baseline.conf",
                "etc/kernel/cmdline", "usr/local", "usr/local/sbin", "usr/local/sbin/gpuhost-cpu-power", "etc/systemd",
                "etc/systemd/system", "etc/systemd/system/gpuhost-cpu-power.service",
                "etc/systemd/system/multi-user.target.wants",
                "etc/systemd/system/multi-user.target.wants/gpuhost-cpu-power.service",
                "etc/udev", "etc/udev/rules.d", "etc/udev/rules.d/90-gpuhost-cpu-power.rules"} | set(backups)
    expected |= set("sys/devices/system/cpu/cpufreq/policy%d/scaling_governor" % n for n in range(128))
    expected |= set("sys/devices/system/cpu/cpu%d/cpuidle/state2/disable" % n for n in range(128))
    assert changed == expected - (set(before) & {"usr/local", "usr/local/sbin", "etc/systemd", "etc/systemd/system",
                                                 "etc/udev", "etc/udev/rules.d"})


def test_intel_four_runs_with_grub_forced(four_runs):
    run = four_runs["intel"]
    root, grub_before, before, applied, steps = run["root"], run["original"], run["before"], run["applied"], run["steps"]
    check_out = steps[0][0]
    assert "may not boot from" in check_out  # the forced boot loader warns
    _out, (sysctl, cmdline, cpu) = steps[1]
    assert cmdline["commands"] == ["grub2-mkconfig -o /boot/grub2/grub.cfg"]
    assert cmdline["reboot_required"] is True
    assert cpu["runtime_before"]["epp"] == {"balance_performance": 64}
    assert cpu["runtime_after"]["epp"] == {"performance": 64} and cpu["runtime_after"]["governor"] == {"performance": 64}
    assert [item["disabled_cpus"] for item in cpu["runtime_after"]["idle_states"]] == [0, 0, 0, 64]
    grub_after = read(root, "/etc/default/grub")
    diff = [(a, b) for a, b in zip(grub_before.splitlines(), grub_after.splitlines()) if a != b]
    assert len(diff) == 1 and diff[0][0].startswith("GRUB_CMDLINE_LINUX=") and "rd.lvm.lv" not in diff[0][1]
    assert grub_after.endswith('GRUB_ENABLE_BLSCFG=true\nGRUB_CMDLINE_LINUX_DEFAULT="processor.max_cstate=1"\n')
    assert "etc/default/grub" in changed_paths(before, applied)
    assert _backups(root) == []  # backup was not asked for


def test_bls_lists_grubby_and_writes_nothing(snapshot_trees, tmp_path):
    pending = copy_tree(snapshot_trees["intel"], tmp_path / "pending")
    converged = copy_tree(snapshot_trees["intel"], tmp_path / "converged")
    entries = os.path.join(converged, "boot/loader/entries")
    for name in os.listdir(entries):
        path = os.path.join(entries, name)
        with open(path) as handle:
            text = handle.read()
        with open(path, "w") as handle:
            handle.write(text.replace(" intel_iommu=on", " intel_iommu=on iommu=pt"))
    states = tree_state(pending), tree_state(converged)
    tasks = [("gpuhost.baseline.kernel_cmdline", {"add": {"iommu": "pt"}, "root": pending}),
             ("gpuhost.baseline.kernel_cmdline", {"add": {"iommu": "pt"}, "root": converged})]
    stdout, (first, second) = run_play(tmp_path, "bls", tasks, diff=True)
    assert first["bootloader"] == "bls" and first["changed"]
    assert first["commands"] == ["grubby --update-kernel=ALL --args=iommu=pt"]
    assert first["reboot_required"] is True and len(first["entries_to_update"]) == 2
    assert "+root=/dev/mapper/rhel-root ro" in stdout and "iommu=pt" in stdout
    assert not second["changed"] and second["commands"] == [] and second["reboot_required"] is True
    assert (tree_state(pending), tree_state(converged)) == states


def test_bad_input_fails_cleanly(snapshot_trees, tmp_path):
    roots = {}
    for name, source in (("no-loader", "incident"), ("ro-proc", "incident"), ("hostile", "hostile"),
                         ("ro-sys", "incident"), ("healthy", "healthy")):
        roots[name] = copy_tree(snapshot_trees[source], tmp_path / name)
    for rel in ("etc/kernel/cmdline", "etc/default/grub"):
        os.unlink(os.path.join(roots["no-loader"], rel))
    make_readonly(roots["ro-proc"], "/proc/sys/kernel/numa_balancing")
    ours = os.path.join(roots["ro-proc"], "etc/sysctl.d/90-gpuhost-baseline.conf")
    with open(ours, "w") as handle:
        handle.write("vm.swappiness = 10\n")
    with open(ours + ".1.2025-01-01@00:00:00~", "w") as handle:
        handle.write("vm.swappiness = 60\n")
    make_readonly(roots["ro-sys"], "/sys/devices/system/cpu/cpufreq/policy5/scaling_governor")
    states = dict((name, tree_state(root)) for name, root in roots.items())

    tasks = [
        ("gpuhost.baseline.kernel_cmdline", {"add": {"iommu": "pt"}, "root": roots["no-loader"], "backup": True}),
        ("gpuhost.baseline.kernel_sysctl", {"key": "kernel.numa_balancing", "value": "0", "root": roots["ro-proc"],
                                            "backup": True}),
        ("gpuhost.baseline.kernel_sysctl", {"key": "kernel.numa_balancing", "value": "0", "root": roots["hostile"]}),
        ("gpuhost.baseline.kernel_sysctl", {"key": "net.ipv4.ip_forward", "value": "1", "root": roots["healthy"]}),
        ("gpuhost.baseline.kernel_cmdline", {"add": {"iommu": "pt"}, "root": roots["hostile"]}),
        ("gpuhost.baseline.kernel_cmdline", {"add": {"iommu": "pt"}, "bootloader": "grub", "root": roots["hostile"]}),
        ("gpuhost.baseline.cpu_power", {"idle_latency_max_us": 10, "root": roots["hostile"]}),
        ("gpuhost.baseline.cpu_power", {"governor": "performance", "idle_latency_max_us": 10, "root": roots["ro-sys"],
                                        "backup": True}),
        ("gpuhost.baseline.cpu_power", {"governor": "performance", "epp": "power", "root": roots["healthy"]}),
    ]
    _stdout, results = run_play(tmp_path, "bad-input", tasks)
    expected = [
        "cannot tell which boot loader this host uses",
        "cannot write '0' to /proc/sys/kernel/numa_balancing: permission denied (EACCES)",
        "current value of /proc/sys/kernel/numa_balancing is 'yes\\x00",
        "sysctl key 'net.ipv4.ip_forward' is not managed by gpuhost.baseline.kernel_sysctl",
        "/etc/kernel/cmdline is empty",
        "cannot edit /etc/default/grub safely: line 1 has an unterminated double quote",
        "/cpuidle/state2/latency holds 'forever'",
        "cannot write 'performance' to /sys/devices/system/cpu/cpufreq/policy5/scaling_governor",
        "EPP power cannot be set on policy0",
    ]
    for (module, args), result, words in zip(tasks, results, expected):
        assert result.get("failed") is True, (module, args, result)
        assert words in result["msg"], (words, result["msg"])
    assert "5 earlier write(s) of this task were undone" in results[7]["msg"]
    # nothing half-written, backups intact
    for name, root in roots.items():
        assert tree_state(root) == states[name], name
    assert read(roots["ro-proc"], "/etc/sysctl.d/90-gpuhost-baseline.conf.1.2025-01-01@00:00:00~") == \
        "vm.swappiness = 60\n"
