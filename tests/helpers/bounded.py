"""Run one hostile input through the tool in a child process, bounded and measured.

The bomb/fuzz corpus (``tests/fuzz/``) feeds each case to the code that parses it in a fresh
Python process with an address-space limit and a wall-clock timeout, and measures the child's
wall time and peak RSS. A case passes only when the child finished by itself within
:data:`SECONDS` and :data:`MEMORY_BYTES` (the issue's 10 s and 512 MB) and printed the result the
test expects; a hang, a crash or a ``MemoryError`` is a failure with the child's output.

``run_case(kind, code, *args)``: ``kind`` names the input (``tarball``, ``catalogue YAML``...)
for the summary; ``code`` is Python source of a function body run with ``args`` bound as
``ARGS`` (strings); it ends with ``report({...})`` (see :func:`case`), whose dict is returned as
``Outcome.result`` together with ``seconds`` and ``rss_mib``.
"""
import json
import os
import resource
import subprocess
import sys
import textwrap
import time

SECONDS = 10
MEMORY_BYTES = 512 * 1024 * 1024
#: The address space the child may map: the Python interpreter with ansible imported maps well
#: over its RSS; the RSS measured (ru_maxrss) is what is checked against MEMORY_BYTES.
ADDRESS_SPACE = 2 * MEMORY_BYTES

_PRELUDE = """
import json, os, resource, sys
sys.path.insert(0, %(collections)r)
sys.path.insert(0, %(tests)r)
ARGS = sys.argv[1:]
"""


class Outcome:
    def __init__(self, result, seconds, rss_mib, stdout, stderr):
        self.result = result
        self.seconds = seconds
        self.rss_mib = rss_mib
        self.stdout = stdout
        self.stderr = stderr

    def __repr__(self):
        return "Outcome(%.2fs, %.0f MiB, %r)" % (self.seconds, self.rss_mib, self.result)


def _limit():
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


#: (input kind, seconds, MiB) of every case run in this session, for the summary line per kind
SUMMARY = []


def run_case(kind, code, *args, seconds=SECONDS, cwd=None):
    """Run ``code`` in a bounded child and return its :class:`Outcome`; ``AssertionError`` when it
    ran out of time or memory or did not print a JSON result."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    repo = os.path.dirname(here)
    source = _PRELUDE % {"collections": os.path.join(repo, "build", "collections"), "tests": here}
    source += textwrap.dedent(code)
    started = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-c", source] + [str(a) for a in args], cwd=cwd,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=seconds,
                              preexec_fn=_limit, check=False)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError("case did not end within %d s: %s" % (seconds, (exc.stderr or b"")[-2000:]))
    elapsed = time.monotonic() - started
    stdout = proc.stdout.decode("utf-8", "replace")
    stderr = proc.stderr.decode("utf-8", "replace")
    lines = [line for line in stdout.splitlines() if line.strip()]
    if proc.returncode != 0 or not lines:
        raise AssertionError("case exited %s\nstdout: %s\nstderr: %s" % (proc.returncode, stdout[-2000:], stderr[-4000:]))
    try:
        result = json.loads(lines[-1])
    except ValueError:
        raise AssertionError("case printed no JSON result: %s\nstderr: %s" % (stdout[-2000:], stderr[-2000:]))
    if not isinstance(result, dict) or "_rss_kib" not in result:
        raise AssertionError("case did not end with report(...): %s" % stdout[-2000:])
    rss_mib = result.pop("_rss_kib") / 1024.0
    SUMMARY.append((kind, elapsed, rss_mib))
    assert elapsed <= seconds, "case took %.1f s (limit %d s)" % (elapsed, seconds)
    assert rss_mib * 1024 * 1024 <= MEMORY_BYTES, "case peaked at %.0f MiB (limit %d MiB)" % (rss_mib, MEMORY_BYTES >> 20)
    return Outcome(result, elapsed, rss_mib, stdout, stderr)


#: Appended by a case as its last statement: ``report(value)`` prints ``value`` (a dict) with the
#: child's own peak RSS, so each case's memory is its own and not the largest child's so far.
REPORT = """
def report(value):
    value = dict(value)
    value["_rss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps(value, default=str))
"""


def case(body):
    """Source of a case: :data:`REPORT` then ``body`` (dedented)."""
    return REPORT + textwrap.dedent(body)
