"""Pass molecule's output through and time each scenario step.

Usage: molecule test -s NAME 2>&1 | python step_times.py [TIMINGS_FILE]

Molecule logs ``<scenario> ➜ <step>: Executing`` (``[<scenario> > <step>] Executing`` when its
output is not a terminal) when a step starts and ``Executed: Successful`` (or ``Failed``,
``Missing playbook``, ...) when it ends. One row per step, ``<scenario> <step>  <seconds> s`` plus
the outcome when it is not ``Successful`` (``NOT FINISHED`` for a step molecule never closed), is
appended to TIMINGS_FILE, which tools/vm_test.sh prints once, in its phase table, at the end.
Without TIMINGS_FILE the rows are printed here instead. Either way the table appears once.

Molecule's closing ``SCENARIO RECAP`` line counts the outcomes its steps recorded, and a testinfra
verifier that passes records none (molecule 26: ``verifier/testinfra.py`` adds a completion state
only on failure), so a scenario whose every step passed reads ``actions=7  successful=6``. After
such a line this script prints what the steps themselves said, so the recap is not mistaken for a
failure. It changes no line of molecule's output and exits 0: the pipeline's status is molecule's.
"""
import re
import sys
import time

ANSI = re.compile(r"\x1b\[[0-9;]*m")
# "remediate ➜ create: Executing" on a terminal, "[remediate > create] Executing" in a log
STEP = re.compile(r"(?:(?P<scenario>[\w.-]+) \u279c (?P<step>[\w-]+):|\[(?P<scenario2>[\w.-]+) > (?P<step2>[\w-]+)\]) "
                  r"(?P<what>Executing$|Executed: .*)")
# "audit                     : actions=7  successful=6  disabled=0  skipped=0  missing=0  failed=0"
RECAP = re.compile(r"^(?P<scenario>[\w.-]+)\s*: actions=(?P<actions>\d+)\s+(?P<counts>(?:\w+=\d+\s*)+)$")


def outcome(what):
    """'Executed: Successful' -> '' ; 'Executed: Missing playbook (Remove ...)' -> 'MISSING PLAYBOOK'."""
    text = what.split(": ", 1)[-1].split(" (", 1)[0].strip()
    return "" if text == "Successful" else text.upper()


def recap_note(match, ended):
    """The line printed after a SCENARIO RECAP line whose counts fall short of its actions."""
    counts = {key: int(value) for key, value in re.findall(r"(\w+)=(\d+)", match.group("counts"))}
    actions = int(match.group("actions"))
    scenario = match.group("scenario")
    if sum(counts.values()) >= actions:
        return None
    steps = ended.get(scenario, [])
    passed = sum(1 for result in steps if result == "")
    if steps and passed == len(steps) == actions:
        return ("  (step_times.py: all %d steps of %s ended 'Executed: Successful'; molecule's recap counts "
                "no outcome for a testinfra verify that passes, hence successful=%d of actions=%d)"
                % (actions, scenario, counts.get("successful", 0), actions))
    return ("  (step_times.py: %d of the %d steps of %s ended 'Executed: Successful'; the table at the end "
            "names the others)" % (passed, actions, scenario))


def main(argv):
    timings = argv[1] if len(argv) > 1 else None
    sys.stdout.reconfigure(errors="replace")  # a non-UTF-8 locale must not stop the pipeline
    rows = []
    started = {}
    ended = {}  # scenario -> outcomes of its finished steps, in order
    stream = open(sys.stdin.fileno(), encoding="utf-8", errors="replace", closefd=False)
    for line in stream:
        sys.stdout.write(line)
        plain = ANSI.sub("", line).rstrip("\n")
        recap = RECAP.match(plain)
        if recap:
            note = recap_note(recap, ended)
            if note:
                sys.stdout.write(note + "\n")
        sys.stdout.flush()
        match = STEP.search(plain)
        if not match:
            continue
        key = (match.group("scenario") or match.group("scenario2"), match.group("step") or match.group("step2"))
        what = match.group("what")
        if what == "Executing":
            started[key] = time.monotonic()
        elif key in started:
            result = outcome(what)
            ended.setdefault(key[0], []).append(result)
            rows.append("%-26s %5.0f s%s" % ("%s %s" % key, time.monotonic() - started.pop(key),
                                             "  " + result if result else ""))
    for key, since in started.items():  # a step that never said it ended: molecule was cut off
        rows.append("%-26s %5.0f s  NOT FINISHED" % ("%s %s" % key, time.monotonic() - since))
    if timings:
        with open(timings, "a") as handle:
            handle.write("".join(row + "\n" for row in rows))
    elif rows:
        print("\n== molecule steps\n" + "\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
