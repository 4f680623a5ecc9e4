"""The self-audit on a host whose nvidia-smi hangs (issue 40): the run completes within the
configured command timeout, HEALTH-024 fails naming it, and the rest of the host is judged."""
import os
import time

from ansible_collections.gpuhost.baseline.plugins.plugin_utils import self_audit

HUNG_SMI = """#!/bin/sh
echo $$ >> "$FAKE_HUNG_PIDS"
setsid sh -c 'echo $$ >> "$FAKE_HUNG_PIDS"; exec sleep 3600' &
exec sleep 3600
"""


def test_the_self_audit_completes_with_a_hung_nvidia_smi(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(HUNG_SMI)
    smi.chmod(0o755)
    pids = tmp_path / "pids"
    pids.write_text("")
    monkeypatch.setenv("PATH", str(bin_dir) + os.pathsep + os.environ.get("PATH", ""))
    monkeypatch.setenv("FAKE_HUNG_PIDS", str(pids))
    began = time.monotonic()
    name, part = self_audit.audit_host({"command_timeout": 2, "gather": ["nvidia", "kernel"], "host": "vm-guest"})
    assert time.monotonic() - began < 30
    assert name == "vm-guest" and part["state"] == "audited", part
    by_id = dict((f["id"], f) for f in part["findings"])
    assert by_id["HEALTH-024"]["status"] == "fail"
    assert "nvidia-smi -q -x did not answer within 2 s: killed with its process group" in by_id["HEALTH-024"]["message"]
    assert any(f["status"] in ("pass", "fail") for f in part["findings"] if f["id"].startswith("KERNEL-"))
    # nvidia-smi ran once; it and its setsid child are gone
    started = [int(line) for line in pids.read_text().split()]
    assert len(started) == 2
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(alive(pid) for pid in started):
        time.sleep(0.1)
    assert not [pid for pid in started if alive(pid)]


def alive(pid):
    """Whether ``pid`` runs (a zombie or a vanished process does not)."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
