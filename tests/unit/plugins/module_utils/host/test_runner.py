"""The one command runner (plugins/module_utils/host/runner.py) with real child processes.

Each hostile tool must end within its bound and say which bound ended it: one that hangs, one that
floods stdout, one that floods stderr, one that leaves a child in a session of its own holding the
pipe, one printing NUL and invalid UTF-8. The floods run in a bounded child process
(tests/helpers/bounded.py) whose peak RSS shows the runner holds at most the cap while reading.
"""
import os
import sys
import time

import pytest

from ansible_collections.gpuhost.baseline.plugins.module_utils.host import runner
from helpers.bounded import case, run_case

FLOOD_OUT = "import os\nwhile True: os.write(1, b'y' * 65536)"
FLOOD_ERR = "import os\nwhile True: os.write(2, b'n' * 65536)"


def gone(pid, within=5.0):
    """Whether process ``pid`` is gone (or a zombie) within ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with open("/proc/%d/stat" % pid) as handle:
                if handle.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


def test_a_hang_ends_at_its_bound_with_its_process_group(tmp_path):
    marker = tmp_path / "child.pid"
    began = time.monotonic()
    result = runner.run(["/bin/sh", "-c", "sleep 60 & echo $! > %s; wait" % marker], timeout=1)
    assert time.monotonic() - began < 1 + 2 * runner.KILL_GRACE_S + 1
    assert result.bound == runner.TIMEOUT and result.rc is not None and result.rc < 0
    assert result.reason == "sh -c sleep 60 & echo $! > %s; wait did not answer within 1 s: killed with its process group" % marker
    assert gone(int(marker.read_text()))


def test_a_child_in_a_session_of_its_own_holding_the_pipe_is_ended_at_the_deadline(tmp_path):
    # the classic second communicate(): the tool's child calls setsid() and keeps stdout open
    marker = tmp_path / "child.pid"
    code = ("import os, time\nif os.fork() == 0:\n    os.setsid()\n    open(%r, 'w').write(str(os.getpid()))\n"
            "    time.sleep(60)\nelse:\n    time.sleep(60)\n" % str(marker))
    began = time.monotonic()
    result = runner.run([sys.executable, "-c", code], timeout=1.5)
    assert time.monotonic() - began < 1.5 + 2 * runner.KILL_GRACE_S + 1
    assert result.bound == runner.TIMEOUT
    assert gone(int(marker.read_text()))


def test_a_tool_that_exits_and_leaves_a_child_holding_the_pipe(tmp_path):
    marker = tmp_path / "child.pid"
    code = ("import os, sys, time\nprint('done', flush=True)\nif os.fork() == 0:\n    os.setsid()\n"
            "    open(%r, 'w').write(str(os.getpid()))\n    time.sleep(60)\n" % str(marker))
    began = time.monotonic()
    result = runner.run([sys.executable, "-c", code], timeout=30)
    assert time.monotonic() - began < runner.LINGER_S + 2 * runner.KILL_GRACE_S + 2
    assert result.bound is None and result.rc == 0 and result.stdout == b"done\n"
    assert gone(int(marker.read_text()))


@pytest.mark.parametrize("code, stream", [(FLOOD_OUT, "stdout"), (FLOOD_ERR, "stderr")])
def test_a_flood_ends_at_the_cap(code, stream):
    cap = 1 << 20
    began = time.monotonic()
    result = runner.run([sys.executable, "-c", code], timeout=30, cap=cap)
    assert time.monotonic() - began < 5
    assert result.bound == runner.OUTPUT_CAP and result.stream == stream
    assert len(getattr(result, stream)) == cap
    assert result.reason.endswith("wrote more than %d bytes to %s: killed with its process group" % (cap, stream))


def test_merged_streams_share_one_cap():
    result = runner.run([sys.executable, "-c", FLOOD_ERR], timeout=30, cap=4096, merge_stderr=True)
    assert result.bound == runner.OUTPUT_CAP and result.stream == "stdout" and len(result.stdout) == 4096
    assert result.stderr == b""


@pytest.mark.parametrize("code", [FLOOD_OUT, FLOOD_ERR])
def test_a_flood_of_the_default_cap_stays_within_memory_bounds(code):
    """The 64 MiB default cap of a stream, flooded: the runner's process peaks at the cap plus the
    interpreter, never at what the tool wrote (communicate() held it all: 3 s of yes were 3.1 GiB)."""
    outcome = run_case("command flood", case("""
        import sys, time
        from ansible_collections.gpuhost.baseline.plugins.module_utils.host import runner
        began = time.monotonic()
        result = runner.run([sys.executable, "-c", ARGS[0]], timeout=8)
        report({"bound": result.bound, "out": len(result.stdout), "err": len(result.stderr),
                "seconds": time.monotonic() - began})
    """), code)
    assert outcome.result["bound"] == "output_cap"
    assert max(outcome.result["out"], outcome.result["err"]) == runner.OUTPUT_CAP_BYTES
    # the cap once (bytearray), its bytes() copy for the result, and the interpreter with ansible
    assert outcome.rss_mib < 3 * (runner.OUTPUT_CAP_BYTES >> 20) + 64, outcome


def test_nul_and_invalid_utf8_come_back_as_bytes():
    result = runner.run(["printf", "a\\000b\\377c\\n"], timeout=10)
    assert result.bound is None and result.rc == 0 and result.stdout == b"a\x00b\xffc\n"
    text = result.decoded()
    assert text.stdout == "a\x00b\udcffc\n"
    assert result.decoded("replace").stdout == "a\x00b\ufffdc\n"
    rc, out, err = text
    assert (rc, err) == (0, "")


def test_c_locale_no_stdin_and_no_shell(tmp_path):
    result = runner.run([sys.executable, "-c", "import os, sys; print(os.environ['LC_ALL'], repr(sys.stdin.read()))"],
                        timeout=30)
    assert result.stdout == b"C ''\n"
    with pytest.raises(TypeError):
        runner.run("echo hello; rm -rf /")
    result = runner.run(["echo hello; true"], timeout=5)
    assert result.rc == 127 and b"cannot run" in result.stderr


def test_the_process_runs_in_a_session_of_its_own():
    result = runner.run([sys.executable, "-c", "import os; print(os.getsid(0) == os.getpid())"], timeout=30)
    assert result.stdout == b"True\n"


def test_a_missing_binary_is_rc_127():
    result = runner.run(["/nonexistent/gpuhost-tool"], timeout=5)
    assert result.rc == 127 and result.bound is None and b"No such file" in result.stderr


def test_timeouts_per_tool_and_their_overrides():
    assert runner.timeout_for("/usr/bin/nvidia-smi") == runner.TIMEOUTS["nvidia-smi"]
    assert runner.timeout_for("/usr/bin/unlisted-tool") == runner.DEFAULT_TIMEOUT_S
    assert runner.timeout_for("/usr/bin/nvidia-smi", {"nvidia-smi": 5}) == 5
    # nonsense in the overrides is ignored, never a traceback
    for bad in (0, -1, True, "5", None):
        assert runner.timeout_for("nvidia-smi", {"nvidia-smi": bad}) == runner.TIMEOUTS["nvidia-smi"]
    assert runner.timeout_for("nvidia-smi", ["not", "a", "dict"]) == runner.TIMEOUTS["nvidia-smi"]
    began = time.monotonic()
    result = runner.run(["sleep", "30"], timeouts={"sleep": 0.5})
    assert result.bound == runner.TIMEOUT and time.monotonic() - began < 4


def test_the_environment_is_added_to_and_may_choose_the_locale():
    result = runner.run(["/bin/sh", "-c", "echo $GPUHOST_X $LC_ALL"], timeout=10, env={"GPUHOST_X": "1"})
    assert result.stdout == b"1 C\n"
    assert runner.run(["/bin/sh", "-c", "echo $LC_ALL"], timeout=10, env={"LC_ALL": "C.UTF-8"}).stdout == b"C.UTF-8\n"


def test_no_process_is_left_behind():
    before = set(os.listdir("/proc"))
    runner.run(["/bin/sh", "-c", "sleep 30 & sleep 30 & wait"], timeout=0.5)
    time.sleep(0.2)
    # no sleep of ours survives: every new pid is gone or a zombie reaped by init
    for pid in set(os.listdir("/proc")) - before:
        if pid.isdigit():
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as handle:
                    assert handle.read() != b"sleep\x0030\x00"
            except OSError:
                pass


# -- the facts reader: a command a bound ended --------------------------------------------------
def _hung_smi_root(tmp_path, recorder=None):
    from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root
    calls = []

    def run(argv):
        calls.append(list(argv))
        if os.path.basename(argv[0]) == "nvidia-smi":
            return runner.Result(argv, -15, b"", b"", runner.TIMEOUT, 5.0, 5).decoded()
        return runner.Result(argv, 0, b"", b"").decoded()
    root = Root("/", run_command=run, which=lambda name: "/usr/bin/" + name, recorder=recorder)
    root.host_path = lambda path: os.path.join(str(tmp_path), path.lstrip("/"))
    return root, calls


def test_a_timed_out_nvidia_smi_is_unknown_with_the_reason_and_run_once(tmp_path):
    from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import nvidia
    from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Recorder
    recorder = Recorder()
    root, calls = _hung_smi_root(tmp_path, recorder)
    facts = nvidia.gather(root)
    reason = "nvidia-smi -q -x did not answer within 5 s: killed with its process group"
    assert facts["smi"] == {"available": False, "error": reason, "bound": "timeout"}
    assert root.errors == [{"subsystem": "nvidia", "path": "nvidia-smi -q -x", "reason": reason}]
    # a second command of the hung tool is not run: it would cost its bound again
    text, second = root.command("nvidia-smi-nvlink", "health")
    assert text is None and second == "nvidia-smi nvlink -s not run: " + reason
    assert len(calls) == 1
    assert recorder.metadata()["commands"]["nvidia-smi-q"] == {"error": reason, "where": "nvidia-smi -q -x",
                                                               "bound": "timeout"}
    assert recorder.metadata()["commands"]["nvidia-smi-nvlink"]["bound"] == "timeout"


def test_a_snapshot_replays_the_bound(tmp_path):
    import json
    from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import nvidia
    from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root
    reason = "nvidia-smi -q -x did not answer within 45 s: killed with its process group"
    (tmp_path / "snapshot.json").write_text(json.dumps({"commands": {"nvidia-smi-q": {
        "error": reason, "where": "nvidia-smi -q -x", "bound": "timeout"}}}))
    facts = nvidia.gather(Root(str(tmp_path)))
    assert facts["smi"] == {"available": False, "error": reason, "bound": "timeout"}
    # an unknown bound in a hostile snapshot.json is not replayed as one
    (tmp_path / "snapshot.json").write_text(json.dumps({"commands": {"nvidia-smi-q": {
        "error": reason, "where": "nvidia-smi -q -x", "bound": ["\x1b[2J"]}}}))
    assert nvidia.gather(Root(str(tmp_path)))["smi"]["bound"] is None


# -- the measurements' runner (measure_host.run_bounded) on the same bounds ------------------------
def test_a_flooding_measurement_tool_is_cut_while_reading():
    """A flooding mbw grew the module to 23 GiB: communicate() read everything and cut afterwards."""
    from ansible_collections.gpuhost.baseline.plugins.module_utils.measure import measure, measure_host
    began = time.monotonic()
    rc, out, reason = measure_host.run_bounded([sys.executable, "-c", FLOOD_OUT], 30)
    assert time.monotonic() - began < 5
    assert rc is None and len(out) == measure.MAX_TEXT
    assert reason.endswith("wrote more than %d bytes of output: killed with its process group" % measure.MAX_TEXT)


def test_a_measurement_tool_whose_child_holds_the_pipe_ends_at_its_timeout(tmp_path):
    """The second communicate() without a timeout: a 3 s timeout became 25 s."""
    from ansible_collections.gpuhost.baseline.plugins.module_utils.measure import measure_host
    marker = tmp_path / "child.pid"
    script = "setsid sh -c 'echo $$ > %s; exec sleep 30' & sleep 30" % marker
    began = time.monotonic()
    rc, dummy, reason = measure_host.run_bounded(["/bin/sh", "-c", script], 1)
    assert time.monotonic() - began < 1 + 2 * runner.KILL_GRACE_S + 1
    assert rc is None and "did not finish within 1 s" in reason
    assert gone(int(marker.read_text()))


def test_checked_timeouts_takes_numbers_and_names_a_bad_entry():
    assert runner.checked_timeouts({"nvidia-smi": "5", "mbw": 30}) == {"nvidia-smi": 5.0, "mbw": 30}
    assert runner.checked_timeouts(None) == {}
    for bad in ({"nvidia-smi": 0}, {"nvidia-smi": "soon"}, {"nvidia-smi": True}, {"x": 86401}):
        with pytest.raises(ValueError, match="command_timeouts: .* must be a number of seconds from 1 to 86400"):
            runner.checked_timeouts(bad)
