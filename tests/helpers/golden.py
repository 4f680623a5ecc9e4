"""Report files made comparable from run to run: the generation time, the run's duration and what
each facts reader took (``gather_s`` in report.json, ``gpuhost_baseline_gather_duration_seconds`` in
metrics.prom) replaced by constants. Standard library only: tests/matrix/check_version.py runs it under every
ansible-core of the matrix (Python 3.11 and Debian 13's 3.13), the golden-report tests under the
main suite's.
"""
import re

#: The report files of a run, each compared byte for byte with its golden copy.
FILES = ("report.json", "report.md", "report.html", "junit.xml", "metrics.prom", "findings.csv")
STAMP = "2000-01-01T00:00:00+00:00"


#: the golden run's gpuhost_cluster: set on the snapshot hosts' group, emptied on one host by its host
#: variable, so that the golden files hold both forms (tests/integration/test_golden_reports.py and the
#: ansible-core matrix, tests/matrix/check_version.py, build the same inventory with it)
GOLDEN_CLUSTER = "lab-a"
GOLDEN_CLUSTER_EMPTY_HOST = "demo-intel"


def with_golden_cluster(inventory):
    """``inventory`` (a dict with the snapshot hosts under ``all.children.snapshots``) with the golden
    run's cluster variables set, returned for convenience."""
    snapshots = inventory["all"]["children"]["snapshots"]
    snapshots.setdefault("vars", {})["gpuhost_cluster"] = GOLDEN_CLUSTER
    if GOLDEN_CLUSTER_EMPTY_HOST in snapshots["hosts"]:
        snapshots["hosts"][GOLDEN_CLUSTER_EMPTY_HOST]["gpuhost_cluster"] = ""
    return inventory


def normalise(name, text):
    """The generation time (ISO in the documents, epoch seconds in metrics.prom) replaced by a constant."""
    # each facts reader's seconds (report.json's hosts.<name>.gather_s: one line per subsystem when indented)
    text = re.sub(r'("gather_s":\s*\{[^{}]*\})', lambda m: re.sub(r'(":\s*)[0-9.eE+-]+', r"\g<1>0.001", m.group(1)), text)
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:\d\d|Z)", STAMP, text)
    if name == "metrics.prom":
        # the report's and each host's last-run time (the generation time as epoch seconds)
        text = re.sub(r"^(gpuhost_baseline_(?:report|last_run)_timestamp_seconds(?:\{[^}]*\})?) \S+$", r"\1 946684800.0",
                      text, flags=re.M)
        # the run's duration (generated minus started) differs from run to run
        text = re.sub(r"^(gpuhost_baseline_run_duration_seconds(?:\{[^}]*\})?) \S+$", r"\1 1.0", text, flags=re.M)
        text = re.sub(r"^(gpuhost_baseline_gather_duration_seconds\{[^}]*\}) \S+$", r"\1 0.001", text, flags=re.M)
    return text


def read_normalised(path, name=None):
    with open(path, encoding="utf-8") as handle:
        return normalise(name or path.rsplit("/", 1)[-1], handle.read())


def first_difference(got, want):
    """``None`` when equal, else a line saying where two texts first differ."""
    if got == want:
        return None
    got_lines, want_lines = got.split("\n"), want.split("\n")
    for number, (a, b) in enumerate(zip(got_lines, want_lines), 1):
        if a != b:
            return "line %d: %r != %r" % (number, a[:200], b[:200])
    return "%d lines != %d lines" % (len(got_lines), len(want_lines))
