"""benchmarks/live.py, the live path's benchmark (issue 41), runs end to end on two hosts: its own sshd
on 127.0.0.1, the audit and ``ansible -m setup`` over SSH, one pair, the check that no forked worker
imports the collection's code, and everything it started ended. Not a timing: the figures are the
benchmark's own business (docs/report.md); this only keeps it from rotting. It starts an sshd that logs
in as root, so it runs as root with OpenSSH installed, and is skipped elsewhere."""
import os
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0 or not os.access("/usr/sbin/sshd", os.X_OK) or not shutil.which("ssh-keygen"),
                    reason="needs root, /usr/sbin/sshd and ssh-keygen")
def test_live_benchmark_runs_over_ssh_and_cleans_up(tmp_path):
    env = dict(os.environ, TMPDIR=str(tmp_path))
    proc = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "live.py"), "--hosts", "2", "--pairs", "1",
                           "--check-imports"], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "none of the collection's modules, its libraries" in proc.stdout
    assert "audit against setup: 2 hosts over SSH" in proc.stdout
    for key in ("controller CPU", "machine CPU", "host side", "peak RSS"):
        assert "  %s " % key in proc.stdout
    # its working directory (keys, sshd config, control sockets, reports) is gone, and so is its sshd
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith("gpuhost-live-")] == []
    ps = subprocess.run(["ps", "-eo", "args"], stdout=subprocess.PIPE, text=True, check=True).stdout
    assert str(tmp_path) not in ps
