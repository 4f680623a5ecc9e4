"""validate.yml on localhost with a fake tool first in PATH, its peak RSS measured (issue 40).

``install(bin_dir, name, script)`` writes an executable stand-in; ``run_validate(where, extravars, env)``
runs playbooks/validate.yml on localhost only from a child Python (ansible-runner, as
tests/helpers/runner.py does) that waits for the run and reports ``getrusage(RUSAGE_CHILDREN)``:
``ru_maxrss`` of the children is the largest peak resident set of any process of the run that was
reaped, ansible-playbook, its workers and the module's Python included (Linux folds each reaped
child's largest descendant into its parent's figure). ``alive(pid)`` for the pid files the fake
tools write.
"""
import json
import os
import shutil
import stat
import subprocess
import sys
import time

from helpers.report_file import load_report

#: run in a child Python: ansible-runner (as tests/helpers/runner.py) and the peak RSS of the run
WRAPPER = """
import json, resource, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from helpers.runner import run_playbook, stdout_of
spec = json.load(open(sys.argv[2]))
runner = run_playbook(Path(spec["tmp"]), spec["playbook"], spec["inventory"], extravars=spec["extravars"],
                      env=spec["env"])
json.dump({"rc": runner.rc, "status": runner.status, "stdout": stdout_of(runner),
           "maxrss_kib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
           "self_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}, open(sys.argv[3], "w"))
"""


def alive(pid):
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def survivors(pids, wait_s=5.0):
    """The pids of ``pids`` still alive after at most ``wait_s`` seconds."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline and any(alive(pid) for pid in pids):
        time.sleep(0.1)
    return [pid for pid in pids if alive(pid)]


def install(bin_dir, name, script):
    path = bin_dir / name
    path.write_text(script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def run_validate(where, bin_dir, extravars, env, timeout_s):
    """playbooks/validate.yml on localhost (local connection, no become) with ``bin_dir`` first in PATH;
    returns ``{"rc", "status", "stdout", "maxrss_kib", "self_kib", "elapsed", "report"}``."""
    python = shutil.which("python3")
    spec = {
        "tmp": str(where),
        "playbook": "validate.yml",
        "inventory": {"all": {"hosts": {"localhost": {"ansible_connection": "local",
                                                      "ansible_python_interpreter": python,
                                                      "gpuhost_become": False}}}},
        "extravars": dict(extravars, gpuhost_report_dir=str(where / "reports")),
        "env": dict(env, PATH=os.pathsep.join([str(bin_dir), os.path.dirname(python), os.path.dirname(sys.executable),
                                               os.environ.get("PATH", "")])),
    }
    (where / "spec.json").write_text(json.dumps(spec))
    tests = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    began = time.monotonic()
    subprocess.run([sys.executable, "-c", WRAPPER, tests, str(where / "spec.json"), str(where / "out.json")],
                   check=True, timeout=timeout_s)
    out = json.loads((where / "out.json").read_text())
    out["elapsed"] = time.monotonic() - began
    out["report"] = load_report(where / "reports" / "report.json")
    return out
