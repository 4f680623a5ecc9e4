"""The VM test output does not cry wolf, and the long phases are never silent.

* tools/vm_test.sh's phase(): a progress line every GPUHOST_PROGRESS_SECONDS, the ticker gone when
  the phase ends (and when the script is killed), the phase table written once.
* tests/vm/step_times.py on molecule's real output: passed through unchanged, its table once, and
  the SCENARIO RECAP's "actions=7  successful=6" explained instead of left looking like a failure.
* run_scenario() against a stand-in molecule scenario (no VM: local connection): no
  "glob failed" CRITICAL, no molecule working directory under ~/.ansible/tmp.
* vmctl.py build names the final cache directory, not its temporary one.
* background()/wait_background(): the QEMU build beside the image builds, its own row and output once
  waited for; the guard kills it with all its children.

molecule_audit_pass.txt is molecule 26.10.0's output (NO_COLOR=1, not a terminal) of
`MOLECULE_GLOB=molecule/audit/molecule.yml molecule test -s audit` on a stand-in scenario with our
audit scenario's test sequence, debug-task playbooks and a one-test testinfra verifier on a local
connection; only the project path and the host name were replaced.
"""
import os
import re
import signal
import subprocess
import sys
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
VM_TEST = os.path.join(REPO, "tools", "vm_test.sh")
STEP_TIMES = os.path.join(REPO, "tests", "vm", "step_times.py")
SAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "molecule_audit_pass.txt")
NOWHERE = "/nonexistent/gpuhost-venv"
ALARMING = re.compile(r"\b(CRITICAL|FAILED|ERROR)\b")  # as molecule and Ansible shout them


def session_processes(sid):
    """PIDs (and commands) of the live processes of session SID (a test's own process tree)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as handle:
                stat = handle.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] != "Z" and int(fields[3]) == sid:  # state, ppid, pgrp, session
            found.append((int(entry), comm))
    return found


def run_sourced(script, env=None, timeout=60):
    """Run SCRIPT in bash after sourcing tools/vm_test.sh, in a session of its own.

    VENV points nowhere: should sourcing ever run the VM tests themselves, they stop at once
    ("no virtualenv") instead of building images and booting guests.
    """
    proc = subprocess.Popen(["bash", "-c", 'source "$0"\n' + script, VM_TEST], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, universal_newlines=True, start_new_session=True,
                            env=dict(os.environ, VENV=NOWHERE, **(env or {})))
    try:
        out, _unused = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc, out


def wait_for_no_processes(sid, seconds):
    deadline = time.time() + seconds
    while session_processes(sid) and time.time() < deadline:
        time.sleep(0.1)
    return session_processes(sid)


def test_sourcing_runs_nothing():
    proc, out = run_sourced('echo "sourced: $(type -t phase) $(type -t run_scenario) $(type -t main)"')
    assert proc.returncode == 0 and out == "sourced: function function function\n", out


def test_phase_prints_progress_while_it_runs_and_leaves_no_process(tmp_path):
    proc, out = run_sourced(
        'trap \'echo "exit trap ran in $BASHPID"\' EXIT\n'
        'timings=%s\n'
        # as vm_test.sh runs the build phases: their output (not the progress) thrown away
        'phase "image build" bash -c \'sleep 2.3; echo "boot to SSH 12 s" >>"$GPUHOST_VM_TIMINGS"\' >/dev/null\n'
        'echo "phase returned $?"\n'
        'sleep 1.2\n'
        'echo "== VM test phases"; cat "$timings"\n' % (tmp_path / "timings"),
        env={"GPUHOST_PROGRESS_SECONDS": "0.5"})
    assert proc.returncode == 0, out
    lines = out.splitlines()
    assert lines[0] == "== image build"
    progress = [line for line in lines if line.startswith("== image build: still running, ")]
    assert len(progress) >= 3, out
    assert all(re.fullmatch(r"== image build: still running, \d+ s", line) for line in progress)
    # the ticker stopped with the phase: nothing after it, during the 1.2 s that followed
    after = lines[lines.index("phase returned 0"):]
    assert not [line for line in after if "still running" in line], out
    # the script's EXIT trap (vm_test.sh's guard) runs once, in the script, never in the ticker
    assert len([line for line in lines if line.startswith("exit trap ran")]) == 1, out
    # the phase table: the phase's row, then the rows its command wrote, indented
    table = after[after.index("== VM test phases") + 1:]
    assert re.fullmatch(r"image build\s+\d+ s", table[0]), table
    assert table[1:] == ["  boot to SSH 12 s", table[2]] and table[2].startswith("exit trap ran"), table
    assert wait_for_no_processes(proc.pid, 2) == []


def test_a_failed_phase_is_marked_and_its_status_returned(tmp_path):
    proc, out = run_sourced('timings=%s\nrc=0; phase "harness tests" bash -c "exit 3" || rc=$?\n'
                            'echo "returned $rc"; cat "$timings"\n'
                            % (tmp_path / "timings"), env={"GPUHOST_PROGRESS_SECONDS": "5"})
    assert "returned 3" in out
    assert re.search(r"^harness tests\s+\d+ s  FAILED \(exit 3\)$", out, re.M), out
    assert wait_for_no_processes(proc.pid, 2) == []


def test_the_ticker_ends_when_the_script_is_killed(tmp_path):
    marker = tmp_path / "started"
    # the phase table in the test's own directory: a killed script never removes a mktemp file
    proc = subprocess.Popen(["bash", "-c", 'source "$0"\ntimings="%s"\nphase "QEMU build" bash -c "touch %s; exec sleep 30"'
                             % (tmp_path / "timings", marker), VM_TEST], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, env=dict(os.environ, VENV=NOWHERE, GPUHOST_PROGRESS_SECONDS="0.3"))
    try:
        deadline = time.time() + 10
        while not marker.exists() and time.time() < deadline:
            time.sleep(0.05)
        assert marker.exists()
        os.kill(proc.pid, signal.SIGKILL)  # no trap runs: the ticker must notice on its own
        proc.wait()
        deadline = time.time() + 3
        while time.time() < deadline and [p for p in session_processes(proc.pid) if p[1] == "bash"]:
            time.sleep(0.1)
        assert [p for p in session_processes(proc.pid) if p[1] == "bash"] == []
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the phase's own `sleep 30`, which we started
        except ProcessLookupError:
            pass
        proc.stdout.close()


def test_a_background_build_gets_its_own_row_and_its_output_once_waited_for(tmp_path):
    proc, out = run_sourced(
        'timings=%s\n'
        'background "QEMU build" bash -c \'echo "ninja: 1427 steps" >&2; sleep 1.5; exit 0\'\n'
        'phase "image build" sleep 0.2 >/dev/null\n'
        'echo "before the wait"\n'
        'phase "QEMU build: wait" wait_background; echo "wait returned $?"\n'
        'background "QEMU build" bash -c "exit 4"\n'
        'rc=0; phase "QEMU build: wait" wait_background || rc=$?; echo "wait returned $rc"\n'
        'echo "== VM test phases"; cat "$timings"; echo "left: $(ls "$timings".bg.* 2>/dev/null || true)"\n' % (tmp_path / "timings"),
        env={"GPUHOST_PROGRESS_SECONDS": "0.5"})
    assert proc.returncode == 0, out
    lines = out.splitlines()
    assert lines[0] == "== QEMU build: started in the background"
    # the build's output (stderr too) is held back and printed by the wait, not mixed into the image build's
    assert lines.index("ninja: 1427 steps") > lines.index("before the wait"), out
    assert "wait returned 0" in lines and "wait returned 4" in lines, out
    # the wait ticks like any phase
    assert [line for line in lines if line.startswith("== QEMU build: wait: still running, ")], out
    table = lines[lines.index("== VM test phases") + 1:]
    assert [row.split("  ")[0] for row in table[:-1]] == [
        "image build", "QEMU build (background)", "QEMU build: wait", "QEMU build (background)", "QEMU build: wait"]
    # the background row: the seconds the build itself ran (1.5 s, not the 0.2 s of the wait)
    assert re.fullmatch(r"QEMU build \(background\)\s+[12] s", table[1]), table
    assert re.fullmatch(r"QEMU build \(background\)\s+\d+ s  FAILED \(exit 4\)", table[3]), table
    assert re.fullmatch(r"QEMU build: wait\s+\d+ s  FAILED \(exit 4\)", table[4]), table
    assert table[-1] == "left: "  # its output files removed
    assert wait_for_no_processes(proc.pid, 2) == []


@pytest.mark.parametrize("ending", ["exit 1", "kill -INT $$"])
def test_the_guard_kills_a_background_build_with_its_children(tmp_path, ending):
    pidfile = tmp_path / "grandchild"
    # vmctl stands in as `true` (down --all); the build is a tree: bash, then a sleep it waits for
    proc, out = run_sourced(
        'vmctl=(true); timings=$(mktemp "%s/timings.XXXXXX")\n'
        'trap guard EXIT; trap "exit 130" INT\n'
        'background "QEMU build" bash -c \'sleep 300 & echo $! >%s; wait\'\n'
        'while [ ! -s %s ]; do sleep 0.05; done\n'
        'phase "image build" bash -c "exit 2" || %s\n' % (tmp_path, pidfile, pidfile, ending),
        env={"GPUHOST_PROGRESS_SECONDS": "5"})
    grandchild = int(pidfile.read_text())
    deadline = time.time() + 3
    while os.path.exists("/proc/%d" % grandchild) and time.time() < deadline:
        time.sleep(0.05)
    try:
        with open("/proc/%d/stat" % grandchild) as handle:
            stat = handle.read()
    except OSError:
        stat = ""
    if "(sleep)" in stat:
        os.killpg(int(stat.rsplit(")", 1)[1].split()[3]), signal.SIGKILL)  # ours: never left behind
    assert "(sleep)" not in stat, out
    assert proc.returncode in (1, 130), out
    assert "== QEMU build: stopped (it was still running in the background)" in out
    assert re.search(r"^image build\s+\d+ s  FAILED \(exit 2\)$", out, re.M), out
    assert os.listdir(str(tmp_path)) == ["grandchild"]  # the guard removed the table and the build's output


def read_sample():
    with open(SAMPLE, encoding="utf-8") as handle:
        return handle.read()


def test_step_times_on_a_passing_molecule_run_says_nothing_alarming(tmp_path):
    sample = read_sample()
    assert "actions=7  successful=6" in sample  # molecule's own recap for a run where every step passed
    timings = tmp_path / "timings"
    out = subprocess.run([sys.executable, STEP_TIMES, str(timings)], input=sample, stdout=subprocess.PIPE,
                         universal_newlines=True, check=True).stdout
    # molecule's lines pass through, unchanged and in order; the one line added is the note below
    assert [line for line in out.splitlines() if not line.startswith("  (step_times.py:")] == sample.splitlines()
    assert not ALARMING.search(out), [line for line in out.splitlines() if ALARMING.search(line)]
    note = [line for line in out.splitlines() if line.startswith("  (step_times.py:")]
    assert note == ["  (step_times.py: all 7 steps of audit ended 'Executed: Successful'; molecule's recap counts "
                    "no outcome for a testinfra verify that passes, hence successful=6 of actions=7)"]
    # the note sits right under the recap line it explains
    lines = out.splitlines()
    assert lines[lines.index(note[0]) - 1].startswith("audit                     : actions=7")
    # the step table goes to the phase table only (printed once, by vm_test.sh)
    assert "== molecule steps" not in out
    rows = timings.read_text().splitlines()
    assert [row.split()[:2] for row in rows] == [["audit", step] for step in
                                                 ("destroy", "create", "prepare", "check", "side_effect", "verify",
                                                  "destroy")]
    assert all(re.fullmatch(r"audit \w+\s+\d+ s", row) for row in rows), rows


def test_step_times_without_a_timings_file_prints_its_table_once():
    out = subprocess.run([sys.executable, STEP_TIMES], input=read_sample(), stdout=subprocess.PIPE,
                         universal_newlines=True, check=True).stdout
    assert out.count("== molecule steps") == 1
    assert out.count("audit verify ") == 1


def test_step_times_still_reports_a_real_failure():
    sample = read_sample().replace("INFO     [audit > verify] Verifier completed successfully.\n"
                                   "INFO     [audit > verify] Executed: Successful",
                                   "ERROR    [audit > verify] Executed: Failed (Verifier tests failed)")
    sample = sample.replace("actions=7  successful=6  disabled=0  skipped=0  missing=0  failed=0",
                            "actions=6  successful=5  disabled=0  skipped=0  missing=0  failed=1")
    out = subprocess.run([sys.executable, STEP_TIMES], input=sample, stdout=subprocess.PIPE,
                         universal_newlines=True, check=True).stdout
    assert re.search(r"^audit verify\s+\d+ s  FAILED$", out, re.M), out
    assert "(step_times.py:" not in out  # the recap adds up: nothing to explain


@pytest.mark.slow
def test_run_scenario_gives_molecule_no_reason_to_complain(tmp_path):
    """vm_test.sh's run_scenario on a stand-in scenario (local connection, no VM): real molecule."""
    molecule = os.path.join(REPO, ".venv", "bin", "molecule")
    if not os.path.exists(molecule):
        pytest.skip("no molecule in .venv")
    project = tmp_path / "project"
    scenario = project / "molecule" / "standin"
    (scenario / "tests").mkdir(parents=True)
    (project / "tests" / "vm").mkdir(parents=True)
    os.symlink(STEP_TIMES, str(project / "tests" / "vm" / "step_times.py"))
    (project / "galaxy.yml").write_text("namespace: gpuhost\nname: standin\nversion: 0.0.1\n"
                                        "readme: README.md\nauthors: [nobody]\n")
    (scenario / "molecule.yml").write_text(
        "---\nprerun: false\ndependency:\n  name: galaxy\n  enabled: false\n"
        "driver:\n  name: default\n  options:\n    managed: false\n"
        "platforms:\n  - name: standin\n"
        "provisioner:\n  name: ansible\n  inventory:\n    hosts:\n      all:\n        hosts:\n"
        "          standin:\n            ansible_connection: local\n"
        "verifier:\n  name: testinfra\n  options:\n    hosts: all\n"
        "scenario:\n  test_sequence:\n    - prepare\n    - verify\n")
    (scenario / "prepare.yml").write_text(
        "---\n- name: Prepare\n  hosts: all\n  gather_facts: false\n  tasks:\n"
        "    - name: Nothing to prepare\n      ansible.builtin.debug:\n        msg: ok\n")
    (scenario / "tests" / "test_standin.py").write_text("def test_true(host):\n    assert host.run('true').rc == 0\n")
    home = tmp_path / "ansible-home"
    env = {"ANSIBLE_HOME": str(home), "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
           "NO_COLOR": "1", "ANSIBLE_NOCOLOR": "1", "PY_COLORS": "0",
           "PATH": os.path.dirname(molecule) + os.pathsep + os.environ.get("PATH", "")}
    proc, out = run_sourced('unset ANSIBLE_CONFIG; cd "%s"; repo=$PWD; venv="%s"; timings="%s"\n'
                            'phase "molecule standin" run_scenario standin; rc=$?\n'
                            'echo "== VM test phases"; cat "$timings"; exit $rc\n'
                            % (project, os.path.join(REPO, ".venv"), tmp_path / "timings"), env=env, timeout=300)
    assert proc.returncode == 0, out
    assert "glob failed" not in out and "should migrate" not in out, out
    assert "Molecule executed 1 scenario (1 successful)" in out
    # molecule's counts are short by the passing testinfra verify, and step_times.py says so
    assert "actions=2  successful=1" in out
    assert "(step_times.py: all 2 steps of standin ended 'Executed: Successful'" in out
    assert not ALARMING.search(out), out
    table = out[out.index("== VM test phases"):].splitlines()[1:]
    assert [row.split()[:3] for row in table] == [["molecule", "standin", table[0].split()[2]],
                                                  ["standin", "prepare", table[1].split()[2]],
                                                  ["standin", "verify", table[2].split()[2]]]
    # molecule's working files stay in the project's build/, none under ANSIBLE_HOME/tmp
    assert (project / "build" / "molecule" / "standin" / "state.yml").exists()
    assert not list(home.glob("tmp/molecule.*"))
    assert wait_for_no_processes(proc.pid, 5) == []


def test_vmctl_build_names_the_final_directory(tmp_path, monkeypatch):
    sys.path.insert(0, os.path.dirname(STEP_TIMES))
    try:
        import vmctl
    finally:
        sys.path.remove(os.path.dirname(STEP_TIMES))
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "build_image.sh").write_text(
        'set -e\necho "== debootstrap"\nmkdir "$1"\necho x >"$1/base.raw"\necho "== image ready in $1 (1 MiB)"\n')
    monkeypatch.setattr(vmctl, "HERE", str(scripts))
    monkeypatch.setattr(vmctl, "COMPONENTS", {"image": ("build_image.sh",)})
    monkeypatch.setenv("GPUHOST_VM_CACHE", str(tmp_path / "cache"))

    class Log:
        text = ""

        def write(self, data):
            Log.text += data

        def flush(self):
            pass

    final = vmctl.build("image", log=Log())
    assert os.path.isdir(final) and ".tmp." not in final
    assert ".tmp." not in Log.text, Log.text
    assert re.fullmatch(r"== debootstrap\n== image ready in %s \(1 MiB\) \(built in \d+ s\)\n" % re.escape(final),
                        Log.text), Log.text
