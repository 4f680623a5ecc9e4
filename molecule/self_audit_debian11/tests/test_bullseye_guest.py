"""The Debian 11 guest is what the self-audit must serve: Python 3.9 without PyYAML, jsonschema or
jmespath, kernel 5.10; audit.yml (the side effect's first play) audited it (host_facts ran on that Python).

The checks of the installed self-audit itself (one service run, report.json and the textfile with
the host audited, the journal line, node_exporter, state absent) are
molecule/self_audit/tests/test_self_audit.py, which this scenario runs on this guest too.
"""
import pytest

import vmverify as vm


def test_the_guest_is_debian_11_with_kernel_5_10(host):
    assert host.file("/etc/debian_version").content_string.startswith("11."), host.file("/etc/debian_version").content_string
    assert host.check_output("uname -r").startswith("5.10."), host.check_output("uname -r")


def test_system_python3_is_3_9(host):
    version = host.check_output("python3 -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])'")
    assert version.strip() == "3.9", version


@pytest.mark.parametrize("module", ["yaml", "jsonschema", "jmespath"])
def test_the_library_does_not_import_in_python3(host, module):
    """The self-audit ran (test_self_audit.py) without them: the bundle needs the standard library only."""
    done = host.run("python3 -c 'import %s'" % module)
    assert done.rc != 0 and "ModuleNotFoundError" in done.stderr, (done.rc, done.stdout, done.stderr)


def test_audit_audited_the_guest():
    runs = vm.report_dirs("audit")
    assert len(runs) == 1, runs
    name = vm.instance_name()
    view = vm.host_report(vm.load_report(runs[0]), name)
    assert view["state"] == "audited", view.get("message", view["state"])
    statuses = dict((f["id"], f["status"]) for f in view["findings"])
    # stock Debian drifts from the baseline (numa_balancing, swappiness); no GPU: NVIDIA not applicable
    assert statuses.get("NUMA-001") == "fail" and statuses.get("KERNEL-005") == "fail", statuses
    assert not [i for i, s in statuses.items() if i.startswith("NVIDIA") and s != "not_applicable"], statuses
