# -*- coding: utf-8 -*-
"""The collection as users get it: built, installed read-only, run from an unrelated directory.

The tarball is built from this checkout once per module and installed into a temporary collections
path, whose tree is then made read-only (``chmod -R a-w``; as root, where that stops nothing, also a
read-only bind mount when the kernel lets us). ``ansible-playbook gpuhost.baseline.audit --check``
then runs from a fresh working directory with only that collections path and an empty
``ansible.cfg``: it must succeed, write its reports under ``<cwd>/gpuhost-reports/``, leave the
installed tree exactly as installed (``ansible-galaxy collection verify --offline`` finds no
modified or added file), and publish the ``gpuhost_baseline`` totals that ansible-runner hands to
its caller (docs/callers.md, through the example docs/examples/audit_totals.py).
"""
import importlib.util
import json
import os
import re
import stat
import subprocess
import sys
import tarfile

import pytest
import yaml

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.stats import caller_stats
from helpers.report_file import load_report
from helpers.site_catalogue import make_site

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
EXAMPLE = os.path.join(REPO, "docs", "examples", "audit_totals.py")
SNAPSHOT_HOSTS = {"gpu-healthy": "healthy", "gpu-incident": "incident"}
REPORT_FILES = ("report.json", "report.md", "report.html", "junit.xml", "metrics.prom", "findings.csv")


def galaxy_meta():
    with open(os.path.join(REPO, "galaxy.yml")) as handle:
        return yaml.safe_load(handle)


def run(cmd, cwd, env, timeout=600):
    return subprocess.run(cmd, cwd=str(cwd), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=timeout, check=False)


def tree_state(root):
    """Every entry under ``root``: relative path -> (kind, size, mtime_ns), to compare before and after."""
    state = {}
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(top, name)
            info = os.lstat(path)
            state[os.path.relpath(path, root)] = (stat.S_IFMT(info.st_mode), info.st_size, info.st_mtime_ns)
    return state


def set_writable(root, writable):
    """``chmod -R a-w`` (``writable`` false) or ``u+w`` back, without following links."""
    for top, dirs, files in os.walk(root):
        for name in [""] + dirs + files:
            path = os.path.join(top, name) if name else top
            if os.path.islink(path):
                continue
            mode = os.lstat(path).st_mode
            mode = (mode | stat.S_IWUSR) if writable else (mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
            os.chmod(path, stat.S_IMODE(mode))


def readonly_bind_mount(path):
    """As root, ``chmod a-w`` stops nothing: a read-only bind mount does. True when it is in place."""
    if os.geteuid() != 0:
        return False
    if subprocess.run(["mount", "--bind", path, path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                      check=False).returncode:
        return False
    if subprocess.run(["mount", "-o", "remount,bind,ro", path], stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL, check=False).returncode:
        subprocess.run(["umount", path], check=False)
        return False
    return True


class Installed(object):
    """Where the built tarball is, where it is installed, and how to run Ansible against it alone."""

    def __init__(self, base):
        self.base = base
        self.tarball = None
        self.collections = str(base / "collections")
        self.path = os.path.join(self.collections, "ansible_collections", "gpuhost", "baseline")
        self.config = str(base / "ansible.cfg")  # empty: no setting of the checkout's ansible.cfg
        self.mounted = False
        self.before = None

    def env(self):
        env = dict((k, v) for k, v in os.environ.items() if not k.startswith("ANSIBLE_") and k != "PYTHONPATH")
        env.update(ANSIBLE_CONFIG=self.config, ANSIBLE_COLLECTIONS_PATH=self.collections,
                   ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false", ANSIBLE_NOCOLOR="1",
                   ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false",
                   PATH=BIN + os.pathsep + os.environ.get("PATH", ""))
        return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    base = tmp_path_factory.mktemp("installed-collection")
    inst = Installed(base)
    with open(inst.config, "w"):
        pass
    meta = galaxy_meta()
    build = run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", "--output-path", str(base / "dist"), REPO],
                base, inst.env())
    assert build.returncode == 0, build.stdout
    inst.tarball = str(base / "dist" / ("%s-%s-%s.tar.gz" % (meta["namespace"], meta["name"], meta["version"])))
    assert os.path.isfile(inst.tarball), build.stdout
    install = run([os.path.join(BIN, "ansible-galaxy"), "collection", "install", "--offline", "-p", inst.collections,
                   inst.tarball], base, inst.env())
    assert install.returncode == 0, install.stdout
    assert os.path.isfile(os.path.join(inst.path, "MANIFEST.json")), install.stdout
    inst.before = tree_state(inst.path)
    set_writable(inst.path, False)
    inst.mounted = readonly_bind_mount(inst.path)
    try:
        yield inst
    finally:
        if inst.mounted:
            subprocess.run(["umount", inst.path], check=False)
        set_writable(inst.path, True)  # so that pytest can remove its temporary directory


@pytest.fixture(scope="module")
def snapshot_roots(request):
    """``{inventory name: snapshot dir}``: build/snapshots (make fixtures) when there, else the session's."""
    roots = dict((host, os.path.join(REPO, "build", "snapshots", name)) for host, name in SNAPSHOT_HOSTS.items())
    if not all(os.path.isfile(os.path.join(root, "snapshot.json")) for root in roots.values()):
        trees = request.getfixturevalue("snapshot_trees")
        roots = dict((host, trees[name]) for host, name in SNAPSHOT_HOSTS.items())
    return roots


def write_inventory(path, roots):
    """Snapshot hosts as inventory/demo declares them: local connection, gpuhost_root at the snapshot."""
    inventory = {"all": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"},
        "hosts": dict((host, {"gpuhost_root": root}) for host, root in sorted(roots.items())),
    }}
    with open(str(path), "w") as handle:
        yaml.safe_dump(inventory, handle)
    return str(path)


def load_example():
    spec = importlib.util.spec_from_file_location("gpuhost_audit_totals_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def assert_installed_tree_untouched(inst):
    assert tree_state(inst.path) == inst.before, "the run wrote into the installed collection"
    verify = run([os.path.join(BIN, "ansible-galaxy"), "collection", "verify", "--offline", "-p", inst.collections,
                  "gpuhost.baseline"], inst.base, inst.env())
    # ansible-core 2.19 verifies an installed collection by name (a tarball path is refused: "'file' type is
    # not supported"); --offline checks every file against the installed MANIFEST.json/FILES.json and flags
    # added files and directories too. The installed MANIFEST.json is the tarball's, byte for byte.
    assert verify.returncode == 0, verify.stdout
    assert "Successfully verified" in verify.stdout and "modified content" not in verify.stdout, verify.stdout
    with tarfile.open(inst.tarball) as tar:
        shipped = tar.extractfile("MANIFEST.json").read()
    with open(os.path.join(inst.path, "MANIFEST.json"), "rb") as handle:
        assert handle.read() == shipped


def test_audit_of_the_installed_copy_writes_under_the_working_directory(installed, snapshot_roots, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    inventory = write_inventory(tmp_path / "inventory.yml", snapshot_roots)
    in_checkout = os.path.exists(os.path.join(REPO, "gpuhost-reports"))
    result = run([os.path.join(BIN, "ansible-playbook"), "-i", inventory, "gpuhost.baseline.audit", "--check"],
                 work, installed.env())
    assert result.returncode == 0, result.stdout[-6000:]
    reports = work / "gpuhost-reports"
    assert sorted(os.listdir(str(reports))) == sorted(REPORT_FILES + (".gpuhost-report.json",))  # and the set's manifest
    assert sorted(os.listdir(str(work))) == ["gpuhost-reports"]  # nothing else lands in the working directory
    report = load_report(reports / "report.json")
    assert sorted(report["hosts"]) == sorted(SNAPSHOT_HOSTS)
    assert all(host["state"] == "audited" for host in report["hosts"].values())
    assert report["collection_version"] == str(galaxy_meta()["version"])
    assert "\nreports: %s\n" % reports in result.stdout  # the summary's last line: the absolute path
    assert_installed_tree_untouched(installed)
    assert os.path.exists(os.path.join(REPO, "gpuhost-reports")) == in_checkout


def test_site_catalogue_over_the_installed_copy(installed, snapshot_roots, tmp_path):
    """A site directory next to the site's inventory (relative gpuhost_catalogue_dirs, resolved from the
    working directory) adds a rule, a profile extending a bundled one and a waiver file; a malformed
    site file stops the run before any host is contacted, naming the file."""
    work = tmp_path / "work"
    make_site(work / "site", waived_host="gpu-incident")
    inventory = write_inventory(tmp_path / "inventory.yml", snapshot_roots)
    playbook = [os.path.join(BIN, "ansible-playbook"), "-i", inventory, "gpuhost.baseline.audit", "--check",
                "-e", json.dumps({"gpuhost_catalogue_dirs": ["site"], "gpuhost_profile": "site-inference"})]
    result = run(playbook, work, installed.env())
    assert result.returncode == 0, result.stdout[-6000:]
    hosts = load_report(work / "gpuhost-reports" / "report.json")["hosts"]
    incident = hosts["gpu-incident"]
    assert incident["profile"] == "site-inference"
    by_id = {}
    for finding in incident["findings"]:
        by_id.setdefault(finding["id"], []).append(finding)
    assert [f["status"] for f in by_id["KERNEL-901"]] == ["fail"]           # the site rule
    assert {f["severity"] for f in by_id["NUMA-001"]} == {"low"}            # a severity the profile changed
    assert "PCI-001" not in by_id                                           # a rule the profile turned off
    assert [f["status"] for f in by_id["KERNEL-001"]] == ["waived"]         # the site waiver file
    assert_installed_tree_untouched(installed)

    broken = work / "site" / "rules" / "kernel.yml"
    broken.write_text("- id: KERNEL-902\n  title: [unclosed\n")
    result = run(playbook, work, installed.env())
    assert result.returncode != 0
    assert "%s: not valid YAML" % broken in result.stdout, result.stdout[-4000:]
    assert "Traceback" not in result.stdout
    assert "TASK [gpuhost.baseline.audit" not in result.stdout  # stopped before the role's first task


def test_runner_caller_reads_the_totals_of_the_installed_copy(installed, snapshot_roots, tmp_path):
    example = load_example()
    inventory = write_inventory(tmp_path / "inventory.yml", snapshot_roots)
    env = installed.env()
    envvars = dict((k, env[k]) for k in env if k.startswith("ANSIBLE_") or k == "PATH")
    runner, totals = example.run_audit(inventory, str(tmp_path / "runner"), envvars=envvars)
    assert runner.rc == 0, runner.stdout.read()[-6000:]
    assert totals is not None, "no gpuhost_baseline in the playbook_on_stats event's artifact_data"
    # ansible-playbook ran in the private data dir (it has no project/): the reports are there
    report_dir = str(tmp_path / "runner" / "gpuhost-reports")
    assert totals["reports"]["dir"] == report_dir
    assert totals["reports"]["json"] == os.path.join(report_dir, "report.json")
    report = load_report(totals["reports"]["json"])
    # the totals are those of report.json: the fleet carries its totals, each host its summary
    assert dict((k, v) for k, v in totals["fleet"].items() if k not in ("facts_errors", "names")) == report["totals"]
    assert sorted(totals["hosts"]) == sorted(report["hosts"])
    for name, host in report["hosts"].items():
        for status, count in host["summary"].items():
            assert totals["hosts"][name][status] == count, (name, status)
        assert totals["hosts"][name]["state"] == host["state"]
    assert totals == caller_stats(report, paths=dict((k, v) for k, v in totals["reports"].items() if k != "dir"),
                                  report_dir=report_dir)
    assert totals["fleet"]["fail"] > 0 and totals["fleet"]["names"]["failing"] == ["gpu-incident"]
    # the same totals stay readable from the run's artifacts
    assert example.totals_from_artifacts(runner.config.artifact_dir) == totals
    assert "\n".join(example.summary_lines(totals)).startswith("fleet: 2 host(s), 2 audited")
    assert_installed_tree_untouched(installed)


def test_demo_playbook_of_the_installed_copy_in_an_empty_directory(installed, tmp_path):
    """README's demo command: in an empty directory, ``ansible-playbook gpuhost.baseline.demo`` writes the
    demo snapshots into ./gpuhost-demo/snapshots/ with the generator the collection ships, audits them and
    writes the reports into ./gpuhost-demo/reports/; a second run leaves the snapshots as they are.
    (About 25 s for both runs here; the first alone about 15 s: docs/development.md.)"""
    work = tmp_path / "empty"
    work.mkdir()
    command = [os.path.join(BIN, "ansible-playbook"), "gpuhost.baseline.demo"]
    result = run(command, work, installed.env())
    assert result.returncode == 0, result.stdout[-6000:]
    assert sorted(os.listdir(str(work))) == ["gpuhost-demo"]
    demo = work / "gpuhost-demo"
    assert sorted(os.listdir(str(demo))) == ["inventory.yml", "reports", "snapshots"]
    assert sorted(os.listdir(str(demo / "snapshots"))) == ["healthy", "hostile", "incident", "intel"]
    assert sorted(os.listdir(str(demo / "reports"))) == sorted(REPORT_FILES + (".gpuhost-report.json",))
    report = load_report(demo / "reports" / "report.json")
    assert sorted(report["hosts"]) == ["cpu-intel", "gpu-healthy", "gpu-incident", "hostile"]
    assert all(host["state"] == "audited" for host in report["hosts"].values())
    assert report["hosts"]["gpu-incident"]["summary"]["fail"] > 0
    assert "\nreports: %s\n" % (demo / "reports") in result.stdout  # the summary's last line
    # the summary reads as plain lines with the stock default callback and no project ansible.cfg (issue 37
    # item 3): its first line, one line per host, the exit line; no JSON list of escaped strings
    lines = result.stdout.splitlines()
    assert any(line.startswith("gpuhost baseline audit, profile mixed: 4 host(s), 4 audited") for line in lines), \
        result.stdout[-6000:]
    assert [line.split()[0] for line in lines if re.match(r"^  \S+ +audited +fail \d+", line)] == [
        "cpu-intel", "gpu-healthy", "gpu-incident", "hostile"]
    assert "gpuhost baseline audit" not in "".join(line for line in lines if '"msg"' in line), result.stdout[-6000:]
    assert "\\\\u" not in result.stdout  # console.py's escapes (\ufffd) as they are, not escaped again
    again = run(command, work, installed.env())
    assert again.returncode == 0, again.stdout[-6000:]
    assert re.search(r"^localhost\s+: ok=2\s+changed=0 ", again.stdout, re.M), again.stdout[-3000:]
    # the inventory the demo wrote audits its hosts again (issue 37 item 7)
    audit = run([os.path.join(BIN, "ansible-playbook"), "gpuhost.baseline.audit", "-i", "gpuhost-demo/inventory.yml",
                 "--check", "--limit", "gpu-healthy", "-e", "gpuhost_report_dir=gpuhost-demo/healthy-again"],
                work, installed.env())
    assert audit.returncode == 0, audit.stdout[-6000:]
    again_report = load_report(demo / "healthy-again" / "report.json")
    assert list(again_report["hosts"]) == ["gpu-healthy"] and again_report["hosts"]["gpu-healthy"]["state"] == "audited"
    assert_installed_tree_untouched(installed)


def test_shipped_demo_inventory_points_at_the_demo_playbook(installed, tmp_path):
    """inventory/demo of an installed collection names snapshots a checkout generates: the run stops before
    any host is read, with one message for all its snapshot hosts that says to run the demo playbook, not to
    capture a snapshot (issue 37: it was printed four or five times for each host)."""
    work = tmp_path / "work"
    work.mkdir()
    inventory = os.path.join(installed.path, "inventory", "demo")
    result = run([os.path.join(BIN, "ansible-playbook"), "-i", inventory, "gpuhost.baseline.audit", "--check"],
                 work, installed.env())
    assert result.returncode == 2, result.stdout[-6000:]
    assert "ansible-playbook gpuhost.baseline.demo" in result.stdout, result.stdout[-6000:]
    assert "snapshot.yml" not in result.stdout and "Traceback" not in result.stdout
    said = re.findall(r"the snapshot root of host\(s\) ([^\n]*?) is not a directory", " ".join(result.stdout.split()))
    assert said and set(said) == {"cpu-intel, gpu-healthy, gpu-incident, hostile"}, result.stdout[-6000:]
    # the failure once (ansible-core 2.19 and later print a failed task's message twice: an [ERROR]
    # line and the result), never per host
    assert " ".join(result.stdout.split()).count("the demo snapshots are not shipped") <= 2, result.stdout[-6000:]
    assert "Gather facts on the host" not in result.stdout
