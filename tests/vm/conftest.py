"""Fixtures for the VM tests: boot a guest through vmctl.py, stop it whatever happens.

The VM tests run only when asked for with ``-m vm`` (tools/vm_test.sh does): they
build a guest image and a patched QEMU (minutes, once) and boot guests under TCG.
A plain ``pytest tests`` deselects them instead of booting VMs on every unit run.
"""
import atexit
import json
import os
import socket
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
VMCTL = os.path.join(HERE, "vmctl.py")
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import vmctl  # noqa: E402  (tests/vm is not a package)


def pytest_collection_modifyitems(config, items):
    if "vm" in (config.getoption("markexpr") or ""):
        return
    selected, deselected = [], []
    for item in items:
        (deselected if item.get_closest_marker("vm") else selected).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = selected


def run_vmctl(*args, timeout=900):
    """Run the vmctl CLI the way molecule's playbooks will: a separate process."""
    return subprocess.run([sys.executable, VMCTL] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, universal_newlines=True, timeout=timeout, check=False)


def free_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def stop_all_guests():
    # The guard: whatever a test did, no guest outlives the test session.
    run_vmctl("down", "--all", timeout=120)


class Guest:
    def __init__(self, inst):
        self.inst = inst

    def run(self, command, check=True):
        # ssh hands its arguments to the remote login shell as one string.
        result = subprocess.run(vmctl.ssh_argv(self.inst, [command]), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                                timeout=120, check=False)
        if check and result.returncode != 0:
            raise AssertionError("guest command %r failed (%d): %s" % (command, result.returncode, result.stderr))
        return result.stdout


@pytest.fixture(scope="session")
def vm_artifacts():
    result = run_vmctl("build", timeout=3600)
    assert result.returncode == 0, "vmctl.py build failed:\n%s\n%s" % (result.stdout, result.stderr)
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def guest(vm_artifacts, tmp_path_factory):
    atexit.register(stop_all_guests)
    name = "harness-%d" % os.getpid()
    workdir = str(tmp_path_factory.mktemp("vm"))
    result = run_vmctl("up", name, "--port", str(free_port()), "--workdir", workdir)
    assert result.returncode == 0, "vmctl.py up failed:\n%s" % result.stderr
    inst = json.loads(result.stdout)
    timings = os.environ.get("GPUHOST_VM_TIMINGS")
    if timings:
        with open(timings, "a") as handle:
            handle.write("%-28s %5.0f s\n" % ("boot to SSH", inst["boot_seconds"]))
    try:
        yield Guest(inst)
    finally:
        run_vmctl("down", name, timeout=120)
