"""A flooding mbw never grows the module (issue 40): validate.yml on localhost, whose ``mbw`` (first
in PATH) prints without end, once on stdout and once on stderr.

The issue: "With an mbw first in PATH that prints without end, validate.yml on localhost grew the
module's Python to 23 GiB and the kernel's OOM killer killed it." The one command runner reads a
tool's output as it comes and ends the tool's process group past the cap (measure.MAX_TEXT, 4 MiB,
for a measurement's stdout and stderr together; docs/security.md, "Commands on a host").

Each run (a module-scoped set-up shared by the tests) measures memory bandwidth only, with mbw only,
on localhost only, from a child Python that reports the largest peak RSS of any process of the run
(tests/helpers/fake_tool.py). Asserted: the playbook finishes within :data:`RUN_BOUND_S`, the VAL
memory rule is ``unknown`` saying that the output cap ended mbw, the peak stays under
:data:`PEAK_RSS_BOUND_MIB`, and no process of the fake tool survives.
"""
import pytest

from helpers.fake_tool import install, run_validate, survivors

#: the whole validate.yml run on localhost (the audit's gather, the measurement, the reports), on a
#: loaded 2-core CI machine; measured about 10 s each (docs/security.md, "A flooding tool")
RUN_BOUND_S = 120
#: the largest process of the run: far under what a flood reaches in seconds (GiB), and under the
#: runner's cap of 64 MiB per stream (two streams) plus an interpreter; ansible-playbook's own
#: process is the largest here (about 100 MiB)
PEAK_RSS_BOUND_MIB = 400

FLOODING_MBW = """#!/bin/sh
# stand-in for a tool gone mad: prints without end (on the stream the test names)
echo $$ >> "$FAKE_FLOOD_PIDS"
if [ "$FAKE_FLOOD_STREAM" = stderr ]; then
    exec yes 'mbw: flooding stderr ...................................................' >&2
fi
exec yes 'AVG Method: MEMCPY Elapsed: 0.01 MiB: 256.00 Copy: 25600.000 MiB/s ..........'
"""

MEASURE = {"gpuhost_validate_measurements": ["mem_bw"], "gpuhost_validate_mem_tools": ["mbw"],
           "gpuhost_validate_mem_cross": False, "gpuhost_validate_mem_duration_s": 1}
STREAMS = ("stdout", "stderr")


def _flood(tmp, stream):
    where = tmp / stream
    bin_dir = where / "bin"
    bin_dir.mkdir(parents=True)
    install(bin_dir, "mbw", FLOODING_MBW)
    pids = where / "pids"
    pids.write_text("")
    run = run_validate(where, bin_dir, MEASURE, {"FAKE_FLOOD_PIDS": str(pids), "FAKE_FLOOD_STREAM": stream},
                       timeout_s=RUN_BOUND_S * 3)
    run["pids"] = [int(line) for line in pids.read_text().split()]
    print("validate.yml with mbw flooding %s: %.1f s, peak RSS %.0f MiB (the wrapper itself %.0f MiB)" % (
        stream, run["elapsed"], run["maxrss_kib"] / 1024.0, run["self_kib"] / 1024.0))
    return run


@pytest.fixture(scope="module")
def floods(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("flood")
    return dict((stream, _flood(tmp, stream)) for stream in STREAMS)


@pytest.mark.parametrize("stream", STREAMS)
def test_validate_finishes_within_the_bound(floods, stream):
    run = floods[stream]
    assert run["status"] == "successful" and run["rc"] == 0, run["stdout"][-4000:]
    assert run["elapsed"] < RUN_BOUND_S, run["elapsed"]


@pytest.mark.parametrize("stream", STREAMS)
def test_the_memory_rule_is_unknown_saying_the_output_cap_ended_mbw(floods, stream):
    part = floods[stream]["report"]["hosts"]["localhost"]
    assert part["state"] == "audited"
    memory = [f for f in part["findings"] if f["id"] == "VAL-003"]
    assert memory, [f["id"] for f in part["findings"]]
    for finding in memory:
        assert finding["status"] == "unknown", finding
        assert "mbw wrote more than 4194304 bytes of output: killed with its process group" in finding["message"], finding


@pytest.mark.parametrize("stream", STREAMS)
def test_no_process_of_the_run_grows_past_the_bound(floods, stream):
    run = floods[stream]
    assert run["maxrss_kib"] > 0
    assert run["maxrss_kib"] / 1024.0 < PEAK_RSS_BOUND_MIB, run["maxrss_kib"]


@pytest.mark.parametrize("stream", STREAMS)
def test_the_tool_is_run_once_and_nothing_of_it_survives(floods, stream):
    started = floods[stream]["pids"]
    assert len(started) == 1, started
    assert not survivors(started)
