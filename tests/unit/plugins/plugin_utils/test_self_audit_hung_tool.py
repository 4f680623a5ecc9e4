"""The self-audit on a host whose nvidia-smi hangs (issue 40): the run completes within nvidia-smi's
time bound from the config (``command_timeouts``, the role's ``gpuhost_command_timeouts``), HEALTH-024
fails naming it, the rest of the host is judged, and nothing of the tool survives.

The second test is molecule/self_audit's side effect rehearsed here: the bundle the role installs,
run as the service runs it (``python3 -I -S``, the role's config file) with the scenario's own fake
tool (molecule/self_audit/hung-nvidia-smi.sh) first in PATH, checked as its verifier checks the guest."""
import importlib.util
import json
import os
import subprocess
import sys
import time

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge import self_audit
from helpers.prom import parse_metrics
from helpers.fake_tool import survivors

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
#: the fake tool the VM scenario installs as /usr/local/sbin/nvidia-smi
HUNG_SMI = os.path.join(REPO, "molecule", "self_audit", "hung-nvidia-smi.sh")
#: nvidia-smi's bound in the VM scenario's config (molecule.yml: gpuhost_command_timeouts)
SMI_BOUND_S = 5
REASON = "nvidia-smi -q -x did not answer within %s s: killed with its process group"


def fake_tool(tmp_path):
    """A PATH directory holding the hanging nvidia-smi, and the directory it records into."""
    bin_dir, record = tmp_path / "bin", tmp_path / "hung"
    bin_dir.mkdir()
    record.mkdir()
    smi = bin_dir / "nvidia-smi"
    with open(HUNG_SMI) as handle:
        smi.write_text(handle.read())
    smi.chmod(0o755)
    return str(bin_dir), record


def test_the_self_audit_completes_with_a_hung_nvidia_smi(tmp_path, monkeypatch):
    bin_dir, record = fake_tool(tmp_path)
    monkeypatch.setenv("PATH", bin_dir + os.pathsep + os.environ.get("PATH", ""))
    monkeypatch.setenv("GPUHOST_TEST_HUNG", str(record))
    began = time.monotonic()
    name, part = self_audit.audit_host({"command_timeouts": {"nvidia-smi": 2}, "gather": ["nvidia", "kernel"],
                                        "host": "vm-guest"})
    assert time.monotonic() - began < 30
    assert name == "vm-guest" and part["state"] == "audited", part
    by_id = dict((f["id"], f) for f in part["findings"])
    assert by_id["HEALTH-024"]["status"] == "fail"
    assert REASON % 2 in by_id["HEALTH-024"]["message"]
    assert any(f["status"] in ("pass", "fail") for f in part["findings"] if f["id"].startswith("KERNEL-"))
    assert_nothing_survives(record)


def test_the_deprecated_command_timeout_still_bounds_a_tool_command_timeouts_does_not_name(tmp_path, monkeypatch):
    bin_dir, record = fake_tool(tmp_path)
    monkeypatch.setenv("PATH", bin_dir + os.pathsep + os.environ.get("PATH", ""))
    monkeypatch.setenv("GPUHOST_TEST_HUNG", str(record))
    name, part = self_audit.audit_host({"command_timeout": 2, "command_timeouts": {"journalctl": 30},
                                        "gather": ["nvidia"], "host": "vm-guest"})
    by_id = dict((f["id"], f) for f in part["findings"])
    assert REASON % 2 in by_id["HEALTH-024"]["message"]
    assert_nothing_survives(record)


def test_the_bundle_run_as_the_service_completes_and_its_textfile_says_why(tmp_path):
    """What molecule/self_audit's side effect does in the guest, on this machine: the installed bundle
    with the role's config (nvidia-smi bound 5 s) and the hanging nvidia-smi first in PATH."""
    spec = importlib.util.spec_from_file_location("make_bundle", os.path.join(REPO, "roles", "self_audit", "files",
                                                                              "make_bundle.py"))
    make_bundle = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_bundle)
    bundle = str(tmp_path / "gpuhost-self-audit")
    make_bundle.build(REPO, bundle)
    bin_dir, record = fake_tool(tmp_path)
    report_dir, textfile_dir = tmp_path / "gpuhost-reports", tmp_path / "textfile"
    config = tmp_path / "gpuhost-self-audit.json"
    # as the role writes it (present.yml), with the scenario's gpuhost_command_timeouts
    config.write_text(json.dumps({
        "host": "vm-guest", "profile": "generic-nvidia-inference", "params": {"nic_min_link_width": 1},
        "waivers": [], "gather": [], "kernel_log_boots": 1,
        "report_dir": str(report_dir), "textfile_dir": str(textfile_dir), "history_dir": "", "history_keep": 168,
        "command_timeouts": {"nvidia-smi": SMI_BOUND_S}}, indent=4, sort_keys=True))
    env = {"PATH": bin_dir + os.pathsep + os.environ.get("PATH", os.defpath), "LC_ALL": "C",
           "GPUHOST_SELF_AUDIT_CACHE": str(tmp_path / "cache"), "GPUHOST_TEST_HUNG": str(record)}
    began, began_at = time.monotonic(), time.time()
    done = subprocess.run([sys.executable, "-I", "-S", bundle, "--config", str(config)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=env, check=False, universal_newlines=True, timeout=120)
    wall = time.monotonic() - began
    print("self-audit bundle with a hung nvidia-smi (bound %d s): %.1f s wall" % (SMI_BOUND_S, wall))
    assert done.returncode == 0 and "Traceback" not in done.stderr, (done.stdout, done.stderr)
    assert "vm-guest audited with profile generic-nvidia-inference" in done.stdout
    # the bound, one kill grace, and the rest of the run (a few seconds; 60 s of room for a loaded machine)
    assert SMI_BOUND_S <= wall < SMI_BOUND_S + 60, wall
    prom = textfile_dir / "gpuhost_baseline.prom"
    failing = [(labels, value) for name, labels, value in parse_metrics(prom.read_text())
               if name == "gpuhost_baseline_finding_failing" and labels.get("rule") == "HEALTH-024"]
    assert [(labels["severity"], value) for labels, value in failing] == [("critical", 1.0)], failing
    report = json.loads((report_dir / "report.json").read_text())
    (health024,) = [f for f in report["hosts"]["vm-guest"]["findings"] if f["id"] == "HEALTH-024"]
    assert health024["status"] == "fail" and REASON % SMI_BOUND_S in health024["message"], health024
    # here nothing but the runner ends the tool (no systemd around the run): its processes are gone
    assert_nothing_survives(record)
    # and the fake tool's watcher saw the child go (in the guest the verifier checks that this was before the
    # run wrote its textfile, i.e. not systemd ending what the unit left; here the rest of the run can take
    # less than the watcher's look, 0.05 s)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not (record / "ended").exists():
        time.sleep(0.1)
    (ended,) = [float(line) for line in (record / "ended").read_text().split()]
    assert began_at <= ended, (began_at, ended)


def assert_nothing_survives(record):
    """nvidia-smi ran once (its pid and its setsid child's recorded); both are gone."""
    started = [int(line) for line in (record / "pids").read_text().split()]
    assert len(started) == 2, started
    assert not survivors(started)
