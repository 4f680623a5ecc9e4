"""step_times.py: molecule's output passes through unchanged and each step gets its duration."""
import subprocess
import sys

from conftest import HERE

LOG = (
    "\x1b[36mINFO    \x1b[0m \x1b[32mremediate\x1b[0m \u279c \x1b[33mcreate\x1b[0m: \x1b[36mExecuting\x1b[0m\n"
    "  TASK [Boot the guest]\n"
    "\x1b[36mINFO    \x1b[0m \x1b[32mremediate\x1b[0m \u279c \x1b[33mcreate\x1b[0m: \x1b[32mExecuted: Successful\x1b[0m\n"
    "INFO     remediate \u279c converge: Executing\n"
    "INFO     remediate \u279c converge: Executed: Failed\n"
    "INFO     remediate \u279c destroy: Executing\n"
    "INFO     [audit > verify] Executing\n"
    "INFO     [audit > verify] Executed: Successful\n"
)


def test_steps_are_timed_and_the_output_kept(tmp_path):
    timings = tmp_path / "timings"
    proc = subprocess.run([sys.executable, HERE + "/step_times.py", str(timings)], input=LOG.encode("utf-8"),
                          stdout=subprocess.PIPE, check=True)
    out = proc.stdout.decode("utf-8")
    assert out.startswith(LOG)
    rows = timings.read_text().splitlines()
    assert [row.split()[:2] for row in rows] == [["remediate", "create"], ["remediate", "converge"],
                                                 ["audit", "verify"], ["remediate", "destroy"]]
    assert rows[0].endswith(" s") and rows[1].endswith("FAILED") and rows[2].endswith(" s")
    assert rows[3].endswith("NOT FINISHED")
    # the rows go to the phase table, which tools/vm_test.sh prints once at the end: not here too
    assert "== molecule steps" not in out


def test_without_a_timings_file_the_table_is_printed_once():
    proc = subprocess.run([sys.executable, HERE + "/step_times.py"], input=LOG.encode("utf-8"),
                          stdout=subprocess.PIPE, check=True)
    out = proc.stdout.decode("utf-8")
    assert out.startswith(LOG)
    assert out.count("== molecule steps") == 1
    assert [line.split()[:2] for line in out[len(LOG):].splitlines()[2:]] == [
        ["remediate", "create"], ["remediate", "converge"], ["audit", "verify"], ["remediate", "destroy"]]
