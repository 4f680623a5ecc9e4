# -*- coding: utf-8 -*-
"""The self-audit's kernel log watcher (issue 38 item 3): which records start the audit, the rate limit,
a run in progress, a failed start, reading records from a file descriptor as /dev/kmsg gives them."""
import os

import pytest

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.health import is_fault_line
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge import fault_watch, self_audit

XID79 = "NVRM: Xid (PCI:0000:47:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
GSP = "NVRM: _kgspRpcRecvPoll: GSP RPC timeout after 45 seconds"
SXID = "nvidia-nvswitch3: SXid (PCI:0000:86:00.0): 20034, Fatal, Link 46 LTSSM Fault Up"
NOISE = "EXT4-fs (sda1): mounted filesystem with ordered data mode"


class Clock(object):
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def watcher(states=("inactive",), problem=None, interval=30):
    clock, started, said = Clock(), [], []
    states = list(states)

    def start(unit):
        started.append((clock.now, unit))
        return problem

    w = fault_watch.Watcher("gpuhost-self-audit.service", interval, state=lambda unit: states.pop(0) if len(
        states) > 1 else states[0], start=start, clock=clock, say=said.append)
    return w, clock, started, said


@pytest.mark.parametrize("line", [XID79, GSP, SXID, "NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x25:0x65:1457)"])
def test_fault_lines_are_the_audit_reader_s(line):
    assert is_fault_line(line)


@pytest.mark.parametrize("line", [NOISE, "", None, b"NVRM: Xid (PCI:0000:47:00): 79", "nvidia: module loaded"])
def test_other_lines_are_not(line):
    assert not is_fault_line(line)


@pytest.mark.parametrize("record, message", [
    ("6,1234,5678901,-;" + XID79, XID79),
    (b"4,77,1000,c;" + GSP.encode(), GSP),
    ("3,9,1,-,caller=T1;text", "text"),         # newer kernels add fields after the flags
    ("no header here", None),
    ("x,y,z;text", None),
    (";text", None),
    (b"\xff\xfe;garbage", None),
])
def test_record_message(record, message):
    assert fault_watch.record_message(record) == message


def test_first_line_starts_at_once_later_ones_fold_into_one_start_after_the_interval():
    w, clock, started, said = watcher()
    assert w.timeout() is None                    # nothing pending: block until a record
    assert not w.line(NOISE) and w.timeout() is None
    assert w.line(XID79) and w.timeout() == 0.0
    assert w.tick() and started == [(100.0, "gpuhost-self-audit.service")]
    clock.now = 105.0
    w.line(GSP)
    w.line(SXID)
    assert w.timeout() == 25.0 and not w.tick()   # inside the interval: waits, does not start
    clock.now = 130.0
    assert w.tick() and [t for t, u in started] == [100.0, 130.0]
    assert said[-1].startswith("GPU fault line in the kernel log (%s) and 1 more fault line(s): started " % GSP)
    assert w.timeout() is None and not w.tick()   # nothing pending after the start


def test_a_run_in_progress_is_waited_for_not_restarted():
    w, clock, started, said = watcher(states=["activating", "activating", "inactive"])
    w.line(XID79)
    assert not w.tick() and w.timeout() == fault_watch.BUSY_RETRY
    clock.now += fault_watch.BUSY_RETRY
    assert not w.tick()
    clock.now += fault_watch.BUSY_RETRY
    assert w.tick() and len(started) == 1


def test_a_failed_start_is_said_and_the_line_not_kept():
    w, clock, started, said = watcher(problem="Unit gpuhost-self-audit.service not found.")
    w.line(XID79)
    assert not w.tick() and w.starts == 0
    assert said == ["GPU fault line in the kernel log (%s): could not start gpuhost-self-audit.service: "
                    "Unit gpuhost-self-audit.service not found." % XID79]
    assert w.timeout() is None


def test_follow_reads_records_as_dev_kmsg_gives_them():
    w, clock, started, said = watcher()
    read, write = os.pipe()
    try:
        os.set_blocking(read, False)
        data = ("6,1,10,-;%s\n SUBSYSTEM=pci\n DEVICE=+pci:0000:47:00.0\n6,2,11,-;%s\n4,3,12,-;%s\n"
                % (NOISE, XID79, SXID)).encode()
        os.write(write, data[:30])                # a record cut in two reads
        os.write(write, data[30:] + b"6,4,13,-;" + NOISE.encode() + b"\n")
        os.close(write)
        write = None
        assert fault_watch.follow(read, w) is w   # end of file (a pipe; /dev/kmsg has none)
    finally:
        os.close(read)
        if write is not None:
            os.close(write)
    assert len(started) == 1 and said == [
        "GPU fault line in the kernel log (%s) and 1 more fault line(s): started gpuhost-self-audit.service" % XID79]


def test_an_unreadable_kernel_log_is_one_line(tmp_path):
    with pytest.raises(fault_watch.WatchError, match="cannot open .*missing"):
        fault_watch.watch("x.service", path=str(tmp_path / "missing"))


def test_the_runner_refuses_an_interval_out_of_range(capsys):
    assert self_audit.main(["--watch", "--watch-interval", "0"]) == 2
    assert capsys.readouterr().err == "gpuhost-self-audit: --watch-interval must be 1 to 3600 seconds, not 0\n"
