"""Acting on the verdict through Slurm, against real daemons (docs/acting-on-the-verdict.md).

The test starts its own munged, slurmctld and slurmd (Debian's packages: munge, slurmctld, slurmd,
slurm-client, in the Makefile's DEB_TEST_PACKAGES) with a slurm.conf, key, sockets, state and logs in a
temporary directory and free TCP ports, so a system Slurm (if any) is neither used nor disturbed. One
node, this host (NodeAddr 127.0.0.1), in one partition. The teardown stops the daemons and removes the
directory, also when a test fails.

* the module ``slurm_node`` in one play: check mode changes nothing; drain names the rules (sinfo shows
  ``drain`` and the reason); the same drain again is unchanged; other rules rewrite the reason; a clean
  verdict undrains; an administrator's drain is neither undrained nor overwritten; a node Slurm does not
  know, a missing scontrol, a bad rule id, garbage output, a non-zero exit and a hang fail with the reason;
* the audit playbook with ``gpuhost_on_fail: [slurm_drain]``: the incident snapshot drains the node with
  its failing rule ids (exit 2, as ``gpuhost_fail_on`` says), the healthy one undrains it; ``--check``
  changes nothing.

Needs root (slurmd) and the packages; skipped, saying so, without them. The daemons are up in about a
second; the rest is the ansible-playbook runs (one play for the module, four audits): 4 min measured on
a 2-core machine under a load average of 20.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
DAEMONS = ("munged", "slurmctld", "slurmd", "sinfo", "scontrol")

pytestmark = pytest.mark.slow


def _which(name):
    return shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")


def _free_ports(count):
    sockets, ports = [], []
    try:
        for dummy in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
            ports.append(sock.getsockname()[1])
    finally:
        for sock in sockets:
            sock.close()
    return ports


SLURM_CONF = """\
ClusterName=gpuhosttest
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={dir}/run/munge.sock
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/run/slurmctld.pid
SlurmdPidFile={dir}/run/slurmd.pid
SlurmctldLogFile={dir}/log/slurmctld.log
SlurmdLogFile={dir}/log/slurmd.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SchedulerType=sched/builtin
SelectType=select/linear
ReturnToService=2
MpiDefault=none
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
NodeName={host} NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


class Cluster(object):
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="gpuhost-slurm-")
        self.node = socket.gethostname().split(".")[0]
        self.conf = os.path.join(self.dir, "slurm.conf")
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        self.procs = []

    def start(self):
        for sub in ("key", "run", "state", "spool", "log"):
            os.mkdir(os.path.join(self.dir, sub))
        os.chmod(os.path.join(self.dir, "key"), 0o700)
        key = os.path.join(self.dir, "key", "munge.key")
        with open(key, "wb") as handle:
            handle.write(os.urandom(128))
        os.chmod(key, 0o600)
        ctld_port, d_port = _free_ports(2)
        with open(self.conf, "w") as handle:
            handle.write(SLURM_CONF.format(host=self.node, dir=self.dir, ctld_port=ctld_port, d_port=d_port))
        run = os.path.join(self.dir, "run")
        # --force: the temporary directory's parents are not what munged checks a system install for
        self._spawn("munged", [_which("munged"), "--foreground", "--force", "--socket=%s/munge.sock" % run,
                               "--key-file=%s" % key, "--log-file=%s/log/munged.log" % self.dir,
                               "--pid-file=%s/munged.pid" % run, "--seed-file=%s/munged.seed" % run])
        self._wait(lambda: os.path.exists(os.path.join(run, "munge.sock")), "munged's socket")
        self._spawn("slurmctld", [_which("slurmctld"), "-D"])
        self._spawn("slurmd", [_which("slurmd"), "-D", "-N", self.node])
        self._wait(lambda: self.sinfo().split()[1:2] == ["idle"], "the node idle in sinfo")

    def _spawn(self, name, argv):
        log = open(os.path.join(self.dir, "log", name + ".out"), "wb")
        try:
            self.procs.append(subprocess.Popen(argv, env=self.env, stdin=subprocess.DEVNULL, stdout=log,
                                               stderr=subprocess.STDOUT, start_new_session=True))
        finally:
            log.close()

    def _wait(self, ready, what, seconds=30):
        deadline = time.time() + seconds
        while time.time() < deadline:
            for proc in self.procs:
                if proc.poll() is not None:
                    raise AssertionError("%s exited %s while waiting for %s:\n%s" % (
                        proc.args[0], proc.returncode, what, self.logs()))
            if ready():
                return
            time.sleep(0.2)
        raise AssertionError("no %s after %d s:\n%s" % (what, seconds, self.logs()))

    def logs(self):
        out = []
        for name in sorted(os.listdir(os.path.join(self.dir, "log"))):
            with open(os.path.join(self.dir, "log", name), "rb") as handle:
                out.append("== %s\n%s" % (name, handle.read()[-2000:].decode("utf-8", "replace")))
        return "\n".join(out)

    def sinfo(self):
        """``"<node> <state> <reason>"`` from ``sinfo -N -h -o "%N %t %300E"`` (``%E`` alone cuts the reason
        at 20 characters); ``""`` when it fails."""
        proc = subprocess.run([_which("sinfo"), "-N", "-h", "-o", "%N %t %300E"], env=self.env, timeout=10,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
        return proc.stdout.strip() if proc.returncode == 0 else ""

    def scontrol(self, *args):
        subprocess.run([_which("scontrol")] + list(args), env=self.env, timeout=10, check=True)

    def stop(self):
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster():
    missing = [name for name in DAEMONS if not _which(name)]
    if missing:
        pytest.skip("Slurm test needs %s (Debian: munge slurmctld slurmd slurm-client; make test-deps)"
                    % ", ".join(missing))
    if os.geteuid() != 0:
        pytest.skip("Slurm test needs root (slurmd)")
    cluster = Cluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
    assert not os.path.exists(cluster.dir)


@pytest.fixture
def clean_node(cluster):
    """The node idle and undrained before and after the test."""
    yield cluster
    if "drain" in cluster.sinfo():
        cluster.scontrol("update", "NodeName=" + cluster.node, "State=UNDRAIN")


def playbook(tmp_path, name, plays, env, check=False, extra=()):
    path = tmp_path / (name + ".yml")
    path.write_text(json.dumps(plays, indent=1))  # JSON is YAML
    argv = [PLAYBOOK, "-e", "ansible_python_interpreter=%s" % sys.executable, str(path)] + list(extra)
    if check:
        argv.append("--check")
    env = dict(env, ANSIBLE_NOCOLOR="1", ANSIBLE_RETRY_FILES_ENABLED="0")
    return subprocess.run(argv, cwd=str(tmp_path), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300, check=False)


def stand_in(tmp_path, name, body):
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


def test_module_drains_and_undrains_only_its_own_drain(clean_node, tmp_path):
    cluster = clean_node
    node = cluster.node
    sinfo = {"ansible.builtin.command": {"argv": ["sinfo", "-N", "-h", "-o", "%N %t %300E"]}, "changed_when": False}
    steps = [
        ("check_drain", {"state": "drained", "rules": ["PCI-001", "KERNEL-003"]}, True),
        ("drain", {"state": "drained", "rules": ["PCI-001", "KERNEL-003", "PCI-001"]}, False),
        ("drain_again", {"state": "drained", "rules": ["KERNEL-003", "PCI-001"]}, False),
        # KERNEL-003 unknown now: the rewritten reason keeps it (its drain is not forgotten)
        ("other_rules", {"state": "drained", "rules": ["GPU-004"],
                         "evidence": {"KERNEL-003": "unknown", "PCI-001": "pass", "GPU-004": "fail"}}, False),
        # released only on evidence: a rule of the reason unknown, or no statuses at all, keeps the drain
        ("resume_unknown", {"state": "resumed", "evidence": {"GPU-004": "pass", "KERNEL-003": "unknown"}}, False),
        ("resume_no_evidence", {"state": "resumed"}, False),
        ("check_resume", {"state": "resumed", "evidence": {"GPU-004": "pass", "KERNEL-003": "waived"}}, True),
        ("resume", {"state": "resumed", "evidence": {"GPU-004": "pass", "KERNEL-003": "pass"}}, False),
        ("resume_again", {"state": "resumed", "evidence": {}}, False),
        ("admin_drain", None, False),
        ("resume_admin", {"state": "resumed", "evidence": {}}, False),
        ("drain_admin", {"state": "drained", "rules": ["PCI-001"]}, False),
        ("unknown_node", {"state": "resumed", "name": "no-such-node"}, False),
        ("no_scontrol", {"state": "resumed", "scontrol": str(tmp_path / "missing" / "scontrol")}, False),
        ("bad_rule", {"state": "drained", "rules": ["PCI-001; reboot"]}, False),
        ("no_rules", {"state": "drained", "rules": []}, False),
        ("garbage", {"state": "resumed", "scontrol": stand_in(tmp_path, "garbage", "printf 'Welcome\\n\\377\\n'")},
         False),
        ("exit_1", {"state": "resumed", "scontrol": stand_in(
            tmp_path, "exit1", "echo 'slurm_load_node error: Unable to contact slurm controller' >&2; exit 1")}, False),
        ("hang", {"state": "resumed", "timeout": 1, "scontrol": stand_in(tmp_path, "hang", "exec sleep 30")}, False),
    ]
    tasks = []
    for name, args, check in steps:
        if args is None:  # an administrator drains the node by hand
            tasks.append({"name": name, "ansible.builtin.command": {"argv": [
                "scontrol", "update", "NodeName=" + node, "State=DRAIN", "Reason=replacing DIMM B3, ticket 4711"]}})
        else:
            tasks.append({"name": name, "gpuhost.baseline.slurm_node": dict({"name": node}, **args),
                          "check_mode": check, "diff": True, "register": name, "ignore_errors": True})
        tasks.append(dict(sinfo, name="sinfo after " + name, register="sinfo_" + name))
    names = [name for name, args, dummy in steps if args is not None]
    tasks.append({"name": "results", "ansible.builtin.copy": {
        "dest": str(tmp_path / "results.json"), "content": "{{ {%s} | to_json }}" % ", ".join(
            "'%s': %s, 'sinfo_%s': sinfo_%s.stdout" % (n, n, n, n) for n in names)},
        "check_mode": False, "diff": False})
    proc = playbook(tmp_path, "module", [{"hosts": "localhost", "connection": "local", "gather_facts": False,
                                          "tasks": tasks}], dict(cluster.env, PATH=os.environ["PATH"]),
                    extra=["-i", "localhost,"])
    assert proc.returncode == 0, proc.stdout[-5000:]
    r = json.loads((tmp_path / "results.json").read_text())

    def row(name):
        return r["sinfo_" + name].strip()

    assert r["check_drain"]["changed"] and r["check_drain"]["action"] == "drain"
    assert r["check_drain"]["commands"] == [
        "scontrol update NodeName=%s State=DRAIN 'Reason=gpuhost: KERNEL-003 PCI-001'" % node]
    assert row("check_drain") == "%s idle none" % node
    assert r["drain"]["changed"] and r["drain"]["reason"] == "gpuhost: KERNEL-003 PCI-001"
    assert row("drain") == "%s drain gpuhost: KERNEL-003 PCI-001" % node
    assert not r["drain_again"]["changed"] and r["drain_again"]["action"] == "none"
    assert r["drain_again"]["drained_by_us"] and r["drain_again"]["commands"] == []
    assert r["other_rules"]["changed"] and r["other_rules"]["action"] == "update_reason"
    assert row("other_rules") == "%s drain gpuhost: GPU-004 KERNEL-003" % node
    assert not r["resume_unknown"]["changed"] and r["resume_unknown"]["action"] == "none"
    assert r["resume_unknown"]["lacking_evidence"] == ["KERNEL-003 unknown"]
    assert "stays drained (gpuhost: GPU-004 KERNEL-003): no evidence that its rules pass now: KERNEL-003 unknown" \
        in r["resume_unknown"]["msg"]
    assert row("resume_unknown") == "%s drain gpuhost: GPU-004 KERNEL-003" % node
    assert not r["resume_no_evidence"]["changed"]
    assert r["resume_no_evidence"]["lacking_evidence"] == ["no rule statuses of this run were given"]
    assert row("resume_no_evidence") == "%s drain gpuhost: GPU-004 KERNEL-003" % node
    assert r["check_resume"]["changed"] and r["check_resume"]["action"] == "undrain"
    assert row("check_resume") == "%s drain gpuhost: GPU-004 KERNEL-003" % node
    assert r["resume"]["changed"] and row("resume").split()[1].rstrip("*") == "idle"
    assert not r["resume_again"]["changed"] and "not drained" in r["resume_again"]["msg"]
    admin = "%s drain replacing DIMM B3, ticket 4711" % node
    assert not r["resume_admin"]["changed"] and not r["resume_admin"]["drained_by_us"]
    assert "someone else (reason: replacing DIMM B3, ticket 4711); not resumed" in r["resume_admin"]["msg"]
    assert row("resume_admin") == admin
    assert not r["drain_admin"]["changed"] and "left as it is" in r["drain_admin"]["msg"]
    assert row("drain_admin") == admin
    failures = dict((name, r[name]) for name in names[names.index("unknown_node"):])
    assert all(result["failed"] and "Traceback" not in json.dumps(result) for result in failures.values()), failures
    assert "no-such-node" in r["unknown_node"]["msg"] and "not found" in r["unknown_node"]["msg"]
    assert "not found in PATH" in r["no_scontrol"]["msg"]
    assert "not a rule id" in r["bad_rule"]["msg"] and "no failing rule ids" in r["no_rules"]["msg"]
    assert "not the output of scontrol show node" in r["garbage"]["msg"]
    assert "exited 1: slurm_load_node error: Unable to contact slurm controller" in r["exit_1"]["msg"]
    assert "did not answer within 1 s (killed)" in r["hang"]["msg"]


def audit(tmp_path, cluster, snapshot, name, check=False, hosts=None, verbose=False, extra_vars=None):
    """audit.yml with slurm_drain on gpu07, the snapshot at ``snapshot`` mapped to the test's node; ``hosts``
    (an inventory's hosts) in its place."""
    inventory = {"all": {"hosts": hosts or {"gpu07": {
        "ansible_connection": "local", "gpuhost_root": snapshot, "gpuhost_slurm_node": cluster.node,
        "gpuhost_slurm_conf": cluster.conf, "gpuhost_slurm_become": False}}}}
    (tmp_path / "inventory.yml").write_text(json.dumps(inventory))
    extra = {"gpuhost_on_fail": ["slurm_drain"], "gpuhost_fail_on": "high",
             "gpuhost_report_dir": str(tmp_path / ("reports-" + name))}
    extra.update(extra_vars or {})
    return playbook(tmp_path, name, [{"import_playbook": os.path.join(REPO, "playbooks", "audit.yml")}],
                    dict(os.environ), check=check,
                    extra=["-i", str(tmp_path / "inventory.yml"), "-e", json.dumps(extra)] + (["-v"] if verbose else []))


def node_row(cluster):
    """sinfo's row of the node, its state without the not-responding ``*`` (slurmd's answers come and go)."""
    parts = cluster.sinfo().split(" ", 2)
    if len(parts) > 1:
        parts[1] = parts[1].rstrip("*")
    return " ".join(parts)


def drain_as_gpuhost(cluster, reason):
    """The node drained with ``reason`` as slurm_node writes it (audit.yml or validate.yml drained it)."""
    cluster.scontrol("update", "NodeName=" + cluster.node, "State=DRAIN", "Reason=" + reason)
    assert node_row(cluster) == "%s drain %s" % (cluster.node, reason)


def without_cpufreq_driver(snapshot, dest):
    """A copy of ``snapshot`` whose cpufreq scaling_driver files are gone: CPU-001 is unknown there."""
    shutil.copytree(snapshot, dest, symlinks=True)
    for top, dummy, files in os.walk(os.path.join(dest, "sys", "devices", "system", "cpu")):
        if "scaling_driver" in files:
            os.unlink(os.path.join(top, "scaling_driver"))
    return str(dest)


def test_audit_drains_a_failing_host_and_undrains_it_when_clean(clean_node, snapshot_trees, tmp_path):
    cluster = clean_node
    node = cluster.node
    proc = audit(tmp_path, cluster, snapshot_trees["incident"], "check", check=True)
    assert proc.returncode == 2, proc.stdout[-5000:]
    assert cluster.sinfo() == "%s idle none" % node, proc.stdout[-3000:]
    # by default a host is drained for its critical faults only (issue 38 item 4): the incident's Xid
    # (HEALTH-001), not its configuration drift, which a maintenance window fixes
    proc = audit(tmp_path, cluster, snapshot_trees["incident"], "incident")
    assert proc.returncode == 2, proc.stdout[-5000:]  # the verdict still fails the host after draining it
    assert cluster.sinfo() == "%s drain gpuhost: HEALTH-001" % node, proc.stdout[-3000:]
    # drift of high severity drains too when asked: the reason names every rule drained for, sorted
    proc = audit(tmp_path, cluster, snapshot_trees["incident"], "incident-drift", extra_vars={
        "gpuhost_drain_kinds": ["drift", "fault"], "gpuhost_drain_severities": ["critical", "high"]})
    assert proc.returncode == 2, proc.stdout[-5000:]
    state = cluster.sinfo()
    assert state.startswith("%s drain gpuhost: " % node), state
    reason = state.split(" ", 2)[2]
    assert len(reason) <= 200, reason
    ids = reason.split()[1:]
    # the rules the incident host fails at severity high or above, sorted; "+N more" past 200 characters
    assert ids[:2] == ["CPU-001", "CPU-003"] and ("PCI-001" in ids or ids[-1] == "more"), ids
    more = ids[-2:] if ids[-1] == "more" else []
    assert ids[:len(ids) - len(more)] == sorted(ids[:len(ids) - len(more)]), ids
    proc = audit(tmp_path, cluster, snapshot_trees["healthy"], "healthy")
    assert proc.returncode == 0, proc.stdout[-5000:]
    assert cluster.sinfo().split()[1].rstrip("*") == "idle", cluster.sinfo()


def test_drains_whatever_gpuhost_fail_on_says(clean_node, snapshot_trees, tmp_path):
    """What drains (gpuhost_drain_severities and gpuhost_drain_kinds) is not the exit code's threshold: with
    gpuhost_fail_on none the run exits 0 and the critical fault's host is drained all the same."""
    cluster = clean_node
    proc = audit(tmp_path, cluster, snapshot_trees["incident"], "none", extra_vars={"gpuhost_fail_on": "none"})
    assert proc.returncode == 0, proc.stdout[-5000:]
    assert cluster.sinfo() == "%s drain gpuhost: HEALTH-001" % cluster.node, proc.stdout[-3000:]


def test_on_fail_arguments_are_checked_and_the_role_ends_on_the_controller_without_it(snapshot_trees, tmp_path):
    """The audit role imports on_fail without Ansible's own argument check: the role checks its
    arguments itself once it has something to do (a gpuhost_slurm_* variable of the wrong type, which
    the audit role's own checks do not cover, is refused naming it), and without gpuhost_on_fail it
    ends at its first task, a meta task, so none of its tasks runs (none forks a worker)."""
    inventory = {"all": {"hosts": {"gpu07": {"ansible_connection": "local",
                                             "gpuhost_root": snapshot_trees["incident"]}}}}
    (tmp_path / "inventory.yml").write_text(json.dumps(inventory))
    extra = {"gpuhost_on_fail": ["slurm_drain"], "gpuhost_fail_on": "high", "gpuhost_slurm_become": "maybe",
             "gpuhost_report_dir": str(tmp_path / "reports")}
    proc = playbook(tmp_path, "bad", [{"import_playbook": os.path.join(REPO, "playbooks", "audit.yml")}],
                    dict(os.environ), extra=["-i", str(tmp_path / "inventory.yml"), "-e", json.dumps(extra)])
    assert proc.returncode == 2, proc.stdout[-5000:]
    assert "Check the role's variables against its argument spec" in proc.stdout
    assert "gpuhost_slurm_become" in proc.stdout and "maybe" in proc.stdout
    assert "Drain the Slurm node" not in proc.stdout.split("Check the role's variables")[1].split("PLAY RECAP")[0]
    extra = {"gpuhost_report_dir": str(tmp_path / "reports")}
    # the stock callback, which prints every task's banner when the task starts (the checkout's
    # gpuhost.baseline.fleet prints none for a task that shows nothing): which on_fail tasks started
    proc = playbook(tmp_path, "off", [{"import_playbook": os.path.join(REPO, "playbooks", "audit.yml")}],
                    dict(os.environ, ANSIBLE_STDOUT_CALLBACK="default"),
                    extra=["-i", str(tmp_path / "inventory.yml"), "-e", json.dumps(extra)])
    assert proc.returncode == 0, proc.stdout[-5000:]
    banners = re.findall(r"TASK \[gpuhost\.baseline\.on_fail : ([^\]]*)\]", proc.stdout)
    assert banners == ["Nothing to act on without gpuhost_on_fail"], banners
    assert "Check the role's variables" not in proc.stdout and "Refuse to act" not in proc.stdout


def test_audit_releases_its_drain_only_on_evidence(clean_node, snapshot_trees, tmp_path):
    """Issue 40, item 3: a drain of this tool is released only when every rule id of its reason is judged
    pass (or waived) in this run. CPU-001 unknown now (facts unreadable) keeps it; a drain that names a VAL
    rule (validate.yml's) is kept by a plain audit, where the VAL rules are not applicable; once every rule
    of the reason passes, the same audit releases it."""
    cluster = clean_node
    node = cluster.node
    unknown = without_cpufreq_driver(snapshot_trees["healthy"], tmp_path / "cpu001-unknown")
    drain_as_gpuhost(cluster, "gpuhost: CPU-001")
    proc = audit(tmp_path, cluster, unknown, "unknown", verbose=True)
    assert proc.returncode == 0, proc.stdout[-5000:]  # nothing fails at high: the verdict is clean
    assert node_row(cluster) == "%s drain gpuhost: CPU-001" % node, proc.stdout[-5000:]
    out = " ".join(proc.stdout.split())  # the callback folds long lines
    assert "stays drained (gpuhost: CPU-001): no evidence that its rules pass now: CPU-001 unknown" in out, out[-3000:]
    assert "lacking_evidence: - CPU-001 unknown" in out, out[-3000:]

    drain_as_gpuhost(cluster, "gpuhost: CPU-001 VAL-003")
    proc = audit(tmp_path, cluster, snapshot_trees["healthy"], "plain", verbose=True)
    assert proc.returncode == 0, proc.stdout[-5000:]
    assert node_row(cluster) == "%s drain gpuhost: CPU-001 VAL-003" % node, proc.stdout[-5000:]
    assert "no evidence that its rules pass now: VAL-003 not applicable" in " ".join(proc.stdout.split())

    drain_as_gpuhost(cluster, "gpuhost: CPU-001")
    proc = audit(tmp_path, cluster, snapshot_trees["healthy"], "clean", verbose=True)
    assert proc.returncode == 0, proc.stdout[-5000:]
    assert cluster.sinfo().split()[1].rstrip("*") == "idle", cluster.sinfo()
    assert "every rule it names passes now" in " ".join(proc.stdout.split())


def test_a_snapshot_acts_only_on_the_node_the_inventory_maps_it_to(clean_node, snapshot_trees, tmp_path):
    """Issue 40, item 4: a snapshot host named like the live node (the node's short name), without
    gpuhost_slurm_node, neither drains it (incident) nor releases this tool's drain of it (healthy)."""
    cluster = clean_node
    node = cluster.node
    snapshot_host = {"ansible_connection": "local", "gpuhost_slurm_conf": cluster.conf, "gpuhost_slurm_become": False}
    hosts = {node: dict(snapshot_host, gpuhost_root=snapshot_trees["incident"])}
    proc = audit(tmp_path, cluster, None, "snapshot-incident", hosts=hosts)
    assert proc.returncode == 2, proc.stdout[-5000:]
    assert node_row(cluster) == "%s idle none" % node, proc.stdout[-5000:]
    assert "is a snapshot (gpuhost_root %s): no Slurm node is drained or undrained for it" % snapshot_trees["incident"] \
        in " ".join(proc.stdout.split())
    drain_as_gpuhost(cluster, "gpuhost: CPU-001")
    hosts = {node: dict(snapshot_host, gpuhost_root=snapshot_trees["healthy"])}
    proc = audit(tmp_path, cluster, None, "snapshot-healthy", hosts=hosts)
    assert proc.returncode == 0, proc.stdout[-5000:]
    assert node_row(cluster) == "%s drain gpuhost: CPU-001" % node, proc.stdout[-5000:]


def test_the_controller_guard_keeps_on_fail_off_the_node_of_a_typo(clean_node, snapshot_trees, tmp_path):
    """Issue 40, item 4: a local-connection host named like the node with gpuhost_rot (a typo: its root
    stays the controller's /) is refused before it is read, and on_fail does not release this tool's drain."""
    cluster = clean_node
    node = cluster.node
    drain_as_gpuhost(cluster, "gpuhost: CPU-001")
    hosts = {node: {"ansible_connection": "local", "gpuhost_rot": snapshot_trees["healthy"],
                    "gpuhost_become": False, "gpuhost_slurm_conf": cluster.conf, "gpuhost_slurm_become": False}}
    proc = audit(tmp_path, cluster, None, "typo", hosts=hosts)
    assert proc.returncode == 2, proc.stdout[-5000:]
    assert "refusing to audit %s" % node in proc.stdout and "did you mean gpuhost_root?" in proc.stdout
    assert node_row(cluster) == "%s drain gpuhost: CPU-001" % node, proc.stdout[-5000:]
    assert "Drain the Slurm node" not in proc.stdout  # refused by the evaluation: not audited, on_fail skips it


def _fleet(cluster, snapshot, count):
    """``count`` failing hosts, the first mapped to the test's node, the others to nodes Slurm does not have
    (a drain of one of them would fail the run: only a budget that leaves them out passes)."""
    hosts = {}
    for i in range(count):
        hosts["gpu%02d" % (i + 1)] = {"ansible_connection": "local", "gpuhost_root": snapshot,
                                      "gpuhost_slurm_node": cluster.node if i == 0 else "nonode%02d" % i,
                                      "gpuhost_slurm_conf": cluster.conf, "gpuhost_slurm_become": False}
    return hosts


def test_a_fleet_wide_failure_drains_no_more_than_the_budget(clean_node, snapshot_trees, tmp_path):
    """Issue 38 item 4: ten hosts failing at once (a bad push looks like this) with the default budget, 10 %:
    the first host by name is drained, the nine others are not, and the run fails naming the budget and them."""
    cluster = clean_node
    proc = audit(tmp_path, cluster, snapshot_trees["incident"], "fleet",
                 hosts=_fleet(cluster, snapshot_trees["incident"], 10))
    assert proc.returncode == 2, proc.stdout[-5000:]
    assert cluster.sinfo().startswith("%s drain gpuhost: " % cluster.node), cluster.sinfo()
    assert ("drain budget reached: gpuhost_drain_max 10% allows 1 of the 10 host(s) of this run to be drained, and "
            "9 more failing host(s) were left undrained: gpu02, gpu03, gpu04, gpu05, gpu06, gpu07, gpu08, gpu09, gpu10"
            in " ".join(proc.stdout.split())), proc.stdout[-5000:]
    # the nine hosts past the budget were not drained: none of their (missing) nodes was asked for
    assert "nonode" not in proc.stdout.split("drain budget reached")[0], proc.stdout[-5000:]


def test_a_budget_of_zero_drains_nothing_and_a_bad_budget_is_refused(clean_node, snapshot_trees, tmp_path):
    cluster = clean_node
    proc = audit(tmp_path, cluster, snapshot_trees["incident"], "zero", extra_vars={"gpuhost_drain_max": "0"})
    assert proc.returncode == 2, proc.stdout[-5000:]
    assert cluster.sinfo() == "%s idle none" % cluster.node, proc.stdout[-3000:]
    assert "allows 0 of the 1 host(s) of this run to be drained" in " ".join(proc.stdout.split()), proc.stdout[-3000:]
    proc = audit(tmp_path, cluster, snapshot_trees["incident"], "bad", extra_vars={"gpuhost_drain_max": "ten"})
    assert proc.returncode == 2 and "is neither a number of hosts (3) nor a percent" in " ".join(proc.stdout.split())
    assert cluster.sinfo() == "%s idle none" % cluster.node
