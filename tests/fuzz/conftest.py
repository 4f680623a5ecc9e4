"""The bomb/fuzz corpus: one test file per input kind, each case run bounded by helpers.bounded.

At the end of the session a line per input kind gives the cases run, the slowest and the largest.
"""
from helpers import bounded


def pytest_terminal_summary(terminalreporter):
    if not bounded.SUMMARY:
        return
    kinds = {}
    for kind, seconds, mib in bounded.SUMMARY:
        entry = kinds.setdefault(kind, [0, 0.0, 0.0])
        entry[0] += 1
        entry[1] = max(entry[1], seconds)
        entry[2] = max(entry[2], mib)
    terminalreporter.write_sep("-", "bomb/fuzz corpus (limits %d s, %d MiB per case)" % (
        bounded.SECONDS, bounded.MEMORY_BYTES >> 20))
    for kind in sorted(kinds):
        count, seconds, mib = kinds[kind]
        terminalreporter.write_line("%-22s %3d cases, slowest %.2f s, largest %.0f MiB" % (kind, count, seconds, mib))
