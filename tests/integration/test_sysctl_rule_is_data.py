"""A sysctl check is a rule entry plus its examples (issue 35 item 4, docs/architecture.md "Add a sysctl check"):
a site catalogue adds a rule for ``vm.dirty_ratio``, which the collection does not manage, by its dotted name
(``kernel.sysctl."vm.dirty_ratio"``). Touching only the site's rule and example files, audit.yml --check on
two snapshots gives a fail and a pass with the values read from /proc/sys, remediate.yml --check lists it as a
manual fix, a snapshot without the file is unknown naming it, and the self-audit bundle judges it alike."""
import os
import shutil

import pytest

from helpers.report_file import load_report
from helpers.rule_examples import check_site_examples
from helpers.runner import REPO, run_playbook, stdout_of
from helpers.site_catalogue import SITE_EXAMPLES, make_site, write

DEMO = os.path.join(REPO, "build", "snapshots")

SYSCTL_RULE = """\
# yaml-language-server: $schema=../../schemas/rules.schema.json
- id: NUMA-950
  title: vm.dirty_ratio at most 20 (site policy)
  area: numa
  severity: low
  label: vm.dirty_ratio
  rationale: >-
    A large dirty ratio lets checkpoint writes pile up in the page cache of the node the model server's memory
    lives on, then flush in bursts that stall its allocations.
  source: https://docs.kernel.org/admin-guide/sysctl/vm.html#dirty-ratio
  query: kernel.sysctl."vm.dirty_ratio"
  expect:
    max: 20
  fix:
    kind: manual
    action: manual
    hint: set vm.dirty_ratio = 20 or less in /etc/sysctl.d/ and apply with sysctl --system
  reboot_required: false
"""

SYSCTL_EXAMPLES = """\
# yaml-language-server: $schema=../../../schemas/rule-examples.schema.json
NUMA-950:
  pass:
    - set:
        kernel.sysctl["vm.dirty_ratio"]: 10
  fail:
    - set:
        kernel.sysctl["vm.dirty_ratio"]: 40
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The sample site catalogue plus the sysctl rule and its examples: two files of rule data."""
    directory = make_site(tmp_path_factory.mktemp("sysctl-site") / "site")
    write(directory / "rules" / "numa.yml", SYSCTL_RULE)
    write(directory / "rules" / "examples" / "numa.yml", SYSCTL_EXAMPLES)
    # the examples of KERNEL-901, the sample's other rule, so the site's examples are complete
    write(directory / "rules" / "examples" / "kernel.yml", SITE_EXAMPLES)
    return directory


@pytest.fixture(scope="module")
def roots(tmp_path_factory, request):
    """Copies of the incident and healthy demo snapshots with /proc/sys/vm/dirty_ratio written (40 and 10),
    and one of the healthy snapshot without it."""
    if all(os.path.isdir(os.path.join(DEMO, name)) for name in ("incident", "healthy")):
        demo = {"incident": os.path.join(DEMO, "incident"), "healthy": os.path.join(DEMO, "healthy")}
    else:
        demo = request.getfixturevalue("snapshot_trees")
    tmp = tmp_path_factory.mktemp("sysctl-snapshots")
    out = {}
    for name, value in (("incident", "40\n"), ("healthy", "10\n"), ("bare", None)):
        copy = tmp / name
        shutil.copytree(demo["healthy" if name == "bare" else name], str(copy), symlinks=True)
        if value is not None:
            (copy / "proc" / "sys" / "vm" / "dirty_ratio").write_text(value)
        out["demo-" + name] = str(copy)
    return out


def inventory(roots):
    python = shutil.which("python3")
    return {"all": {"children": {"snapshots": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": python},
        "hosts": dict((name, {"gpuhost_root": root}) for name, root in roots.items())}}}}


def found(report, host, rule="NUMA-950"):
    return [f for f in report["hosts"][host]["findings"] if f["id"] == rule]


@pytest.fixture(scope="module")
def audited(site, roots, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sysctl-audit")
    runner = run_playbook(tmp, "audit.yml", inventory(roots), cmdline="--check", extravars={
        "gpuhost_report_dir": str(tmp / "reports"), "gpuhost_catalogue_dirs": [str(site)],
        "gpuhost_profile": "site-inference"})
    assert runner.rc == 0, stdout_of(runner)
    return load_report(tmp / "reports" / "report.json")


def test_the_site_examples_judge_as_they_say(site):
    assert check_site_examples(str(site), "site-inference") == []


def test_the_audit_reads_the_sysctl_the_rule_names(audited):
    (bad,) = found(audited, "demo-incident")
    assert bad["status"] == "fail" and bad["observed"] == 40
    (good,) = found(audited, "demo-healthy")
    assert good["status"] == "pass" and good["observed"] == 10


def test_a_snapshot_without_the_file_is_unknown_naming_it(audited):
    (unknown,) = found(audited, "demo-bare")
    assert unknown["status"] == "unknown"
    assert "/proc/sys/vm/dirty_ratio" in unknown["message"]


def test_remediate_check_lists_it_as_a_manual_fix(site, roots, tmp_path):
    hosts = dict((name, root) for name, root in roots.items() if name == "demo-incident")
    runner = run_playbook(tmp_path, "remediate.yml", inventory(hosts), cmdline="--check", extravars={
        "gpuhost_report_dir": str(tmp_path / "reports"), "gpuhost_catalogue_dirs": [str(site)],
        "gpuhost_profile": "site-inference"})
    assert runner.rc == 0, stdout_of(runner)
    report = load_report(tmp_path / "reports" / "report.json")
    (bad,) = found(report, "demo-incident")
    assert bad["status"] == "fail" and bad["fix_action"] == "manual"
    assert "vm.dirty_ratio" in bad["fix"]


def test_the_self_audit_judges_it_alike(site, roots, tmp_path):
    from helpers.one_judge import self_audit_hosts  # pylint: disable=import-outside-toplevel

    mine = self_audit_hosts(tmp_path, dict((n, r) for n, r in roots.items() if n != "demo-bare"),
                            {"profile": "site-inference"}, [site])
    assert [(f["status"], f["observed"]) for f in mine["demo-incident"]["findings"] if f["id"] == "NUMA-950"] == [
        ("fail", 40)]
    assert [f["status"] for f in mine["demo-healthy"]["findings"] if f["id"] == "NUMA-950"] == ["pass"]


def test_snapshot_captures_the_sysctls_the_catalogue_reads(site, tmp_path):
    """snapshot.yml asks the hosts' catalogues which sysctls their rules read by name and captures those files:
    an audit of the snapshot then answers the site rule as the live host did."""
    captured = tmp_path / "captured"
    hosts = {"all": {"hosts": {"localhost": {"ansible_connection": "local", "gpuhost_become": False,
                                             "ansible_python_interpreter": shutil.which("python3")}}}}
    runner = run_playbook(tmp_path, "snapshot.yml", hosts, extravars={
        "gpuhost_snapshot_dir": str(captured), "gpuhost_catalogue_dirs": [str(site)],
        "gpuhost_profile": "site-inference"})
    assert runner.rc == 0, stdout_of(runner)
    with open("/proc/sys/vm/dirty_ratio") as handle:
        live = handle.read()
    assert (captured / "localhost" / "proc" / "sys" / "vm" / "dirty_ratio").read_text() == live
