"""Benchmark: the live path, audit.yml and remediate.yml --check over SSH against `ansible -m setup`.

An sshd of its own (a child of this process: /usr/sbin/sshd -D on a free 127.0.0.1 port, its own
config, host key and authorized client key in a temporary directory, no PAM) and N inventory hosts
(default 60), all ansible_host=127.0.0.1 over the ssh connection (pipelining on, as ansible.cfg
has it; each host its own ControlPath, as N real hosts have N masters), their gpuhost_root cycling
through the demo incident, healthy and intel snapshots (build/snapshots, made when missing). Over
ssh, baseline_evaluate runs the host_facts module through the connection for every host
(gathering._snapshot_here reads a snapshot in the controller's process only over the local
connection), so each host costs what a real one costs: the module's process started over SSH and
its facts sent back, the judging on the controller. The "host" is this machine, with
/usr/bin/python3 as its interpreter.

Runs, interleaved (playbook, setup, playbook, setup, ...; --pairs, at least 3 for a figure):
  * audit:      ansible-playbook playbooks/audit.yml --check;
  * remediate:  ansible-playbook playbooks/remediate.yml --check (with --remediate; its fix tasks in
                check mode between two evaluations);
  * setup:      ansible all -m ansible.builtin.setup.
Each run is measured by common.timed (its own measuring process, subreaper of the tree: ssh's
ControlPersist masters are ended and counted when the command exits), and around it:
  * controller CPU: user + system of the ansible process tree, ssh clients included;
  * machine CPU: everything the run costs the machine, over the run and the end of its SSH sessions:
    the CPU of a cgroup (v1 cpuacct) of the benchmark's own, which holds it and all it starts (sshd,
    each session, the modules' Python, ansible, ssh) and nothing else; where no such group can be
    made, the /proc/stat figure;
  * /proc/stat: the whole machine's busy time (all CPUs, everything but idle and iowait) over the
    same span, whatever else runs on the machine (on a quiet machine, the machine CPU plus the
    kernel's own work);
  * host side: the sshd's CPU, its own and its reaped children's (each session, the module's Python);
  * wall and peak RSS (the tree's largest process: the controller).
The ratio of each pair is playbook / its setup; the table gives the medians of the pairs.

--check-imports: one more audit over 3 hosts first, each forked worker recording the modules it
imported itself and the schema validators it built (WORKER_DRIVER): none of the collection's modules,
jsonschema, jmespath, yaml or jinja2, and no validator, may be (issue 41: everything a worker needs is loaded
once, before Ansible forks). Exit code 1 when one is.

Goals (issue 41, 60 hosts, one run): audit controller CPU <= 1.0x setup, machine CPU <= 0.9x,
wall <= 1.0x, peak RSS <= 1.5x; remediate --check machine CPU <= 2x setup.

Usage: python benchmarks/live.py [--hosts 60] [--pairs 3] [--forks 20] [--remediate] [--no-audit]
                                 [--check-imports] [--keep]
Not run in CI (.ci/run): it starts an sshd and needs root for it.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

from common import BIN, SNAPSHOTS, ansible_env, demo_snapshots, median, timed

SSHD = "/usr/sbin/sshd"
HOST_PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else os.path.join(BIN, "python")
TICK = float(os.sysconf("SC_CLK_TCK"))
GOALS = {"audit": {"controller CPU": 1.0, "machine CPU": 0.9, "wall": 1.0, "peak RSS": 1.5},
         "remediate": {"machine CPU": 2.0}}
#: the collection's modules and the libraries it loads, none of which a forked worker may import
WORKER_IMPORT_PREFIXES = ("ansible_collections.gpuhost", "jsonschema", "referencing", "rpds", "jmespath", "yaml", "jinja2")


def machine_busy():
    """Busy CPU seconds of the whole machine since boot (/proc/stat, all CPUs: user, nice, system,
    irq, softirq, steal; not idle nor iowait)."""
    with open("/proc/stat") as stat:
        fields = [int(value) for value in stat.readline().split()[1:]]
    user, nice, system, unused_idle, unused_iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / TICK


class CpuGroup(object):
    """A cgroup v1 ``cpuacct`` group of this benchmark's own, with this process in it, so that everything it
    starts (sshd, its sessions, the modules, ansible, ssh) is counted in ``cpuacct.usage`` and nothing else
    on the machine is; ``None`` from :meth:`make` where no cpuacct hierarchy can be written."""

    ROOT = "/sys/fs/cgroup/cpuacct"

    def __init__(self, path):
        self.path = path

    @classmethod
    def make(cls):
        path = os.path.join(cls.ROOT, "gpuhost-live-%d" % os.getpid())
        try:
            os.mkdir(path)
            with open(os.path.join(path, "cgroup.procs"), "w") as handle:
                handle.write(str(os.getpid()))
        except OSError:
            if os.path.isdir(path):
                os.rmdir(path)
            return None
        return cls(path)

    def seconds(self):
        with open(os.path.join(self.path, "cpuacct.usage")) as handle:
            return int(handle.read()) / 1e9

    def others(self):
        with open(os.path.join(self.path, "cgroup.procs")) as handle:
            return [int(pid) for pid in handle.read().split() if int(pid) != os.getpid()]

    def remove(self):
        """Whatever this benchmark started and is still running ended (after an error or ^C: ssh's
        ControlPersist masters, which leave every process group, the sessions they hold), this process back
        into the root group, and the group removed."""
        try:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                left = self.others()
                for pid in left:
                    try:
                        os.kill(pid, sig)
                    except OSError:
                        pass
                deadline = time.time() + 5
                while left and time.time() < deadline:
                    time.sleep(0.1)
                    left = self.others()
                if not left:
                    break
            with open(os.path.join(self.ROOT, "cgroup.procs"), "w") as handle:
                handle.write(str(os.getpid()))
            deadline = time.time() + 10
            while True:
                try:
                    os.rmdir(self.path)
                    return
                except OSError:
                    if time.time() > deadline:
                        raise
                    time.sleep(0.1)
        except OSError as exc:
            sys.stderr.write("benchmarks/live.py: cannot remove %s: %s\n" % (self.path, exc))


def stat_fields(pid):
    with open("/proc/%d/stat" % pid) as stat:
        return stat.read().rsplit(")", 1)[1].split()


def process_cpu(pid):
    """CPU seconds of process ``pid`` and of its children it reaped (utime, stime, cutime, cstime)."""
    fields = stat_fields(pid)
    return sum(int(value) for value in fields[11:15]) / TICK


def children_of(ppid):
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if int(stat_fields(int(name))[1]) == ppid:
                    found.append(int(name))
            except (OSError, IndexError, ValueError):
                pass
    return found


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Sshd(object):
    """An sshd of this benchmark's own on 127.0.0.1, a child of this process, and a client key it accepts."""

    def __init__(self, work):
        self.dir = os.path.join(work, "sshd")
        os.makedirs(self.dir)
        self.host_key = os.path.join(self.dir, "host_ed25519")
        self.client_key = os.path.join(self.dir, "client_ed25519")
        for key in (self.host_key, self.client_key):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "gpuhost-live-bench", "-f", key],
                           check=True, stdout=subprocess.DEVNULL)
        self.authorized = os.path.join(self.dir, "authorized_keys")
        shutil.copy(self.client_key + ".pub", self.authorized)
        self.port = free_port()
        self.config = os.path.join(self.dir, "sshd_config")
        with open(self.config, "w") as handle:
            handle.write("\n".join([
                "Port %d" % self.port, "ListenAddress 127.0.0.1", "HostKey %s" % self.host_key,
                "AuthorizedKeysFile %s" % self.authorized, "PermitRootLogin prohibit-password",
                "PubkeyAuthentication yes", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
                "UsePAM no", "StrictModes no", "UseDNS no", "PidFile none", "LogLevel ERROR",
                # every fork of a run may connect at once
                "MaxStartups 200", "MaxSessions 200", "X11Forwarding no", "PrintMotd no", "Subsystem sftp internal-sftp",
                ""]))
        os.makedirs("/run/sshd", exist_ok=True)  # its privilege separation directory
        self.log = open(os.path.join(self.dir, "sshd.log"), "w")
        self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", self.config], stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 10
        while True:
            if self.proc.poll() is not None:
                raise SystemExit("sshd exited with rc %d: %s" % (self.proc.returncode, self.log_text()))
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                if time.time() > deadline:
                    raise SystemExit("sshd did not listen on 127.0.0.1:%d: %s" % (self.port, self.log_text()))
                time.sleep(0.05)

    def log_text(self):
        self.log.flush()
        with open(self.log.name) as handle:
            return handle.read()[-2000:]

    def cpu(self):
        return process_cpu(self.proc.pid)

    def settle(self, timeout=20):
        """Wait until no session of sshd is left (each ends when its client's master is gone)."""
        deadline = time.time() + timeout
        while children_of(self.proc.pid) and time.time() < deadline:
            time.sleep(0.05)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def write_inventory(path, hosts, snapshots, sshd, control_dir):
    """``hosts`` inventory hosts over SSH to ``sshd``, host i on ``SNAPSHOTS[i % 3]``, each with its own
    ControlPath (as many masters as hosts, as for N real hosts: the default path is a hash of the
    address, port and user, which are the same for all of these)."""
    with open(path, "w") as handle:
        handle.write("all:\n  vars:\n    ansible_connection: ssh\n    ansible_host: 127.0.0.1\n")
        handle.write("    ansible_port: %d\n    ansible_user: root\n" % sshd.port)
        handle.write("    ansible_ssh_private_key_file: %s\n" % sshd.client_key)
        handle.write("    ansible_ssh_common_args: -o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no"
                     " -o LogLevel=ERROR\n")
        handle.write("    ansible_ssh_pipelining: true\n")
        handle.write("    ansible_python_interpreter: %s\n  children:\n" % HOST_PYTHON)
        for position, snap in enumerate(SNAPSHOTS):
            handle.write("    %s:\n      vars:\n        gpuhost_root: %s\n      hosts:\n"
                         % (snap, os.path.join(snapshots, snap)))
            members = [index for index in range(hosts) if index % len(SNAPSHOTS) == position]
            for index in members:
                handle.write("        live-%04d: {ansible_control_path: %s}\n"
                             % (index, os.path.join(control_dir, "%04d" % index)))
            if not members:
                handle.write("        {}\n")


def measured(argv, env, sshd, group, ok=(0,)):
    """One run: wall, controller CPU, peak RSS, machine CPU (the benchmark's cgroup, else /proc/stat), the
    whole machine's (/proc/stat), host side (sshd) CPU, the load before, the output."""
    load = os.getloadavg()[0]
    machine, ours, host = machine_busy(), group.seconds() if group else None, sshd.cpu()
    wall, cpu, rss, out = timed(argv, env, ok=ok)
    sshd.settle()
    whole = machine_busy() - machine
    return {"wall": wall, "controller CPU": cpu, "peak RSS": rss,
            "machine CPU": group.seconds() - ours if group else whole, "/proc/stat": whole,
            "host side": sshd.cpu() - host, "load": load}, out


COLUMNS = ("wall", "controller CPU", "machine CPU", "/proc/stat", "host side", "peak RSS")


def run_pairs(name, argv, setup_argv, pairs, env, sshd, group, hosts):
    runs = {name: [], "setup": []}
    for pair in range(pairs):
        for side, command in ((name, argv), ("setup", setup_argv)):
            # the playbooks exit 2 for drifted hosts (the incident snapshot is drifted)
            figures, unused_out = measured(command, env, sshd, group, ok=(0, 2))
            runs[side].append(figures)
            sys.stderr.write("  %d hosts, pair %d, %-9s %s\n" % (hosts, pair + 1, side, ", ".join(
                "%s %.1f%s" % (key, figures[key], " MiB" if key == "peak RSS" else "s") for key in COLUMNS)))
    return runs


def print_table(name, runs, hosts, pairs, group):
    label = {"audit": "audit.yml --check", "remediate": "remediate.yml --check", "setup": "ansible -m setup"}
    print("\n%s against setup: %d hosts over SSH, %d interleaved pairs, %d CPUs; machine CPU: %s"
          % (name, hosts, pairs, os.cpu_count(), "the benchmark's cgroup (cpuacct)" if group else "/proc/stat"))
    print("%-6s %-22s %8s %15s %12s %11s %10s %10s %6s" % ("pair", "", "wall", "controller CPU", "machine CPU",
                                                           "/proc/stat", "host side", "peak RSS", "load"))
    for index in range(pairs):
        for side in (name, "setup"):
            run = runs[side][index]
            print("%-6d %-22s %7.1fs %14.1fs %11.1fs %10.1fs %9.1fs %6.0f MiB %6.2f" % (
                index + 1, label[side], run["wall"], run["controller CPU"], run["machine CPU"], run["/proc/stat"],
                run["host side"], run["peak RSS"], run["load"]))
    print("%s / setup, median of the pairs' ratios (the pairs' ratios):" % name)
    met = True
    for key in COLUMNS:
        ratios = [runs[name][i][key] / runs["setup"][i][key] for i in range(pairs) if runs["setup"][i][key]]
        goal = GOALS[name].get(key)
        verdict = ""
        if goal is not None and ratios:
            ok = median(ratios) <= goal
            met = met and ok
            verdict = "  goal <= %.1f: %s" % (goal, "met" if ok else "NOT MET")
        print("  %-15s %5.2fx (%s)%s" % (key, median(ratios) if ratios else float("nan"),
                                         ", ".join("%.2f" % ratio for ratio in ratios), verdict))
    per_host = dict((key, median([run[key] for run in runs[name]]) / hosts)
                    for key in ("controller CPU", "machine CPU", "host side"))
    print("  per host (%s): %s" % (name, ", ".join("%s %.3f s" % item for item in per_host.items())))
    return met


#: ansible-playbook with each forked worker recording what it loaded itself (after the fork): the modules new
#: in its sys.modules and the schema validators new in plugin_utils/base/schema.py's cache, one JSON file a
#: worker in the directory named first. Ansible points a worker's stderr at /dev/null, so
#: PYTHONPROFILEIMPORTTIME cannot show this.
WORKER_DRIVER = r"""
import json, os, sys
OUT = sys.argv.pop(1)
from ansible.executor.process import worker

SCHEMA = "ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.schema"
_run = worker.WorkerProcess._run


def validators():
    module = sys.modules.get(SCHEMA)
    return set(getattr(module, "_VALIDATORS", {}))


def run(self):
    modules, built = set(sys.modules), validators()
    try:
        return _run(self)
    finally:
        with open(os.path.join(OUT, "%d.json" % os.getpid()), "w") as handle:
            json.dump({"task": self._task.get_name(), "modules": sorted(set(sys.modules) - modules),
                       "validators": sorted(validators() - built)}, handle)


worker.WorkerProcess._run = run
from ansible.cli.playbook import main
sys.argv[0] = "ansible-playbook"
sys.exit(main())
"""


def worker_loads(inventory, env, work):
    """What the forked workers of an audit over ``inventory`` loaded themselves: ``{module or "validator
    <kind>": [task names]}``."""
    out = os.path.join(work, "workers")
    os.makedirs(out)
    argv = [sys.executable, "-c", WORKER_DRIVER, out, "-i", inventory, "playbooks/audit.yml", "--check",
            "-e", "gpuhost_report_dir=%s" % os.path.join(work, "reports-imports")]
    timed(argv, env, ok=(0, 2))  # measured like the others: its ssh masters ended with it
    loaded = {}
    for name in sorted(os.listdir(out)):
        with open(os.path.join(out, name)) as handle:
            record = json.load(handle)
        for item in record["modules"] + ["validator %s" % kind for kind in record["validators"]]:
            loaded.setdefault(item, set()).add(record["task"])
    return dict((item, sorted(tasks)) for item, tasks in loaded.items())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=60)
    parser.add_argument("--pairs", type=int, default=3, help="interleaved pairs per playbook (at least 3 for a figure)")
    parser.add_argument("--forks", type=int, default=20)
    parser.add_argument("--remediate", action="store_true", help="also remediate.yml --check against setup")
    parser.add_argument("--no-audit", action="store_true", help="skip the audit pairs")
    parser.add_argument("--check-imports", action="store_true",
                        help="first check that no forked worker imports the collection's code or its libraries")
    parser.add_argument("--keep", action="store_true", help="keep the working directory (reports, sshd log)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("benchmarks/live.py starts an sshd that logs in as root: run it as root")
    # SIGTERM ends it as ^C does: through the finally below (sshd stopped, files removed), which a second
    # one does not interrupt

    def terminated(signum, unused_frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        sys.exit(128 + signum)
    signal.signal(signal.SIGTERM, terminated)
    work = tempfile.mkdtemp(prefix="gpuhost-live-")
    # the ControlPath sockets in a short path of their own (a Unix socket's path is at most 107 bytes)
    control = tempfile.mkdtemp(prefix="gpuhost-live-cp-", dir="/tmp")
    sshd = None
    failed = False
    group = CpuGroup.make()
    try:
        snaps = demo_snapshots(work)
        sshd = Sshd(work)
        env = ansible_env(args.forks, ANSIBLE_LOCAL_TEMP=os.path.join(work, "ansible-tmp"))
        if args.check_imports:
            small = os.path.join(work, "hosts-3.yml")
            write_inventory(small, 3, snaps, sshd, os.path.join(control, "imports"))
            os.makedirs(os.path.join(control, "imports"))
            loaded = worker_loads(small, env, work)
            sshd.settle()
            ours = sorted(item for item in loaded if item.startswith(WORKER_IMPORT_PREFIXES + ("validator ",)))
            print("loaded by forked workers (after the fork), audit of 3 hosts: %d module(s)%s" % (
                len(loaded), ": " + ", ".join(sorted(loaded)) if loaded else ""))
            if ours:
                print("NOT LOADED BEFORE THE FORK: %s" % "; ".join(
                    "%s (%s)" % (item, ", ".join(loaded[item])) for item in ours))
                failed = True
            else:
                print("none of the collection's modules, its libraries (%s) or its schema validators loaded "
                      "after the fork" % ", ".join(WORKER_IMPORT_PREFIXES))
        inventory = os.path.join(work, "hosts.yml")
        write_inventory(inventory, args.hosts, snaps, sshd, control)
        setup_argv = [os.path.join(BIN, "ansible"), "all", "-i", inventory, "-m", "ansible.builtin.setup"]
        # connect each host once before measuring (host keys into nothing, the page cache warm)
        measured(setup_argv, env, sshd, group)
        playbooks = ([] if args.no_audit else ["audit"]) + (["remediate"] if args.remediate else [])
        results = []
        for name in playbooks:
            argv = [os.path.join(BIN, "ansible-playbook"), "-i", inventory, "playbooks/%s.yml" % name, "--check",
                    "-e", "gpuhost_report_dir=%s" % os.path.join(work, "reports-" + name)]
            results.append((name, run_pairs(name, argv, setup_argv, args.pairs, env, sshd, group, args.hosts)))
        for name, runs in results:
            if not print_table(name, runs, args.hosts, args.pairs, group):
                print("(%s: a goal not met)" % name)
    finally:
        if sshd is not None:
            sshd.stop()
        shutil.rmtree(control, ignore_errors=True)
        if group is not None:
            group.remove()
        if args.keep:
            print("\nkept: %s" % work)
        else:
            shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
