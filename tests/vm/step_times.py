"""Pass molecule's output through and time each scenario step.

Usage: molecule test --all 2>&1 | python step_times.py [TIMINGS_FILE]

Molecule logs ``<scenario> ➜ <step>: Executing`` (``[<scenario> > <step>] Executing`` when its
output is not a terminal) when a step starts and ``Executed: Successful`` (or ``Failed``) when it
ends. Each step's duration is appended to TIMINGS_FILE (the phase table of tools/vm_test.sh) and
printed at the end. Exits 0: the pipeline's status is molecule's.
"""
import re
import sys
import time

ANSI = re.compile(r"\x1b\[[0-9;]*m")
# "remediate ➜ create: Executing" on a terminal, "[remediate > create] Executing" in a log
STEP = re.compile(r"(?:(?P<scenario>[\w.-]+) \u279c (?P<step>[\w-]+):|\[(?P<scenario2>[\w.-]+) > (?P<step2>[\w-]+)\]) "
                  r"(?P<what>Executing|Executed: \w+)")


def main(argv):
    timings = argv[1] if len(argv) > 1 else None
    sys.stdout.reconfigure(errors="replace")  # a non-UTF-8 locale must not stop the pipeline
    rows = []
    started = {}
    stream = open(sys.stdin.fileno(), encoding="utf-8", errors="replace", closefd=False)
    for line in stream:
        sys.stdout.write(line)
        sys.stdout.flush()
        match = STEP.search(ANSI.sub("", line))
        if not match:
            continue
        key = (match.group("scenario") or match.group("scenario2"), match.group("step") or match.group("step2"))
        what = match.group("what")
        if what == "Executing":
            started[key] = time.monotonic()
        elif key in started:
            status = "" if what.endswith("Successful") else "  " + what.split(": ", 1)[-1].upper()
            rows.append("%-28s %5.0f s%s" % ("  %s %s" % key, time.monotonic() - started.pop(key), status))
    for key, since in started.items():  # a step that never said it ended: molecule was cut off
        rows.append("%-28s %5.0f s  NOT FINISHED" % ("  %s %s" % key, time.monotonic() - since))
    if timings and rows:
        with open(timings, "a") as handle:
            handle.write("".join(row + "\n" for row in rows))
    print("\n== molecule steps\n" + "\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
