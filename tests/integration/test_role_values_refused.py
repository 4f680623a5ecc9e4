"""Inputs checked before any host is contacted (issue 40, item 4a): a bad gpuhost_serial, a task timeout of 0, a
string where a list is meant, a report directory with a control character each stop the run in the first plays
with rc 2 and one line naming the variable, never a traceback, and no host is contacted; the GPU tools' timeouts
can be raised (a level 3 dcgmi diag needs more than 600 s).

The fleet is one host that cannot be reached (nothing listens on the discard port): a run that contacted it would
say UNREACHABLE."""
import json
import os

import pytest

from test_preflight import GHOST, playbook

FAILED = 2


def _refused(result, expected):
    out = result.stdout
    assert result.returncode == FAILED, out
    assert "Traceback" not in out and "Unexpected Exception" not in out, out
    assert "UNREACHABLE" not in out, out
    # one message, on one line (ansible-core 2.19 shows a failed task's message twice: [ERROR] and fatal)
    lines = [line for line in out.splitlines() if expected in line]
    assert 1 <= len(lines) <= 2, out
    assert lines[0].isprintable(), lines[0]
    # the play that acts never started
    assert "PLAY [Remediate" not in out and "PLAY [Measure" not in out and "PLAY [Audit GPU" not in out, out
    assert "PLAY [Capture" not in out, out
    return lines[0]


@pytest.mark.parametrize("value, why", [
    ("abc", "gpuhost_serial 'abc' cannot be the play's serial (not a whole number of hosts"),
    (0, "gpuhost_serial 0 cannot be the play's serial (fewer than 1 host per batch"),
    (-1, "gpuhost_serial -1 cannot be the play's serial (fewer than 1 host per batch"),
])
def test_a_bad_serial_stops_remediate_before_any_host(tmp_path, value, why):
    result = playbook(tmp_path, "remediate.yml", {"all": {"hosts": {"gpu01": GHOST}}},
                      "-e", json.dumps({"gpuhost_serial": value, "gpuhost_report_dir": str(tmp_path / "r")}))
    _refused(result, why)


def test_a_bad_serial_stops_validate_too(tmp_path):
    result = playbook(tmp_path, "validate.yml", {"all": {"hosts": {"gpu01": GHOST}}},
                      "-e", "gpuhost_serial=12.5%", "-e", "gpuhost_report_dir=%s" % (tmp_path / "r"))
    _refused(result, "gpuhost_serial '12.5%' cannot be the play's serial")


@pytest.mark.parametrize("extra, expected", [
    ({"gpuhost_validate_task_timeout_s": 0}, "gpuhost_validate_task_timeout_s must be 1 to 86400, not 0"),
    ({"gpuhost_validate_measurements": "cpu_freq,mem_bw"}, "gpuhost_validate_measurements must be a list"),
    ({"gpuhost_validate_dcgm_diag_timeout_s": 0}, "gpuhost_validate_dcgm_diag_timeout_s must be 1 to 14400"),
    # a site workload without its program (its floor may be left to the profile's learned one), or with a parser
    # the module does not know (VAL-012)
    ({"gpuhost_validate_workloads": [{"name": "w", "parser": "regex", "floor": 1}]},
     "missing required arguments: argv found in gpuhost_validate_workloads"),
    ({"gpuhost_validate_workloads": [{"name": "w", "argv": ["bench"], "parser": "jmespath", "floor": 1}]},
     "parser must be one of: regex, json, got: jmespath"),
])
def test_validate_role_values_are_refused_before_any_host(tmp_path, extra, expected):
    extra = dict(extra, gpuhost_report_dir=str(tmp_path / "r"))
    result = playbook(tmp_path, "validate.yml", {"all": {"hosts": {"gpu01": GHOST}}}, "-e", json.dumps(extra))
    _refused(result, expected)


@pytest.mark.parametrize("book", ["remediate.yml", "validate.yml", "snapshot.yml"])
def test_a_bad_command_timeout_stops_every_playbook_that_runs_host_commands(tmp_path, book):
    """gpuhost_command_timeouts is declared by each role whose playbook gathers or captures (it was the audit's
    and the self-audit's only: remediate, validate and snapshot took it unchecked, and the gather dropped a
    bad entry in silence)."""
    extra = {"gpuhost_command_timeouts": {"nvidia-smi": "soon"}, "gpuhost_report_dir": str(tmp_path / "r"),
             "gpuhost_snapshot_dir": str(tmp_path / "s")}
    result = playbook(tmp_path, book, {"all": {"hosts": {"gpu01": GHOST}}}, "-e", json.dumps(extra))
    line = _refused(result, "nvidia-smi must be a number of seconds from 1 to 86400")
    assert "gpuhost_command_timeouts" in line
    assert sorted(os.listdir(str(tmp_path))) == ["inventory.yml"]


@pytest.mark.parametrize("name", ["newline", "escape"])
def test_a_report_dir_with_a_control_character_is_never_created(tmp_path, name):
    report_dir = str(tmp_path / ("r\nx" if name == "newline" else "r\x1b[2Jx"))
    hosts = {"all": {"hosts": {"gpu01": dict(GHOST, gpuhost_report_dir=report_dir)}}}
    result = playbook(tmp_path, "audit.yml", hosts, "--check")
    line = _refused(result, "holds a control or other non-printable character")
    assert "gpuhost_report_dir" in line and "\x1b" not in result.stdout
    assert sorted(os.listdir(str(tmp_path))) == ["inventory.yml"]


def test_the_dcgm_diag_timeout_can_be_raised(tmp_path):
    import sys  # pylint: disable=import-outside-toplevel

    hosts = {"all": {"hosts": {"localhost": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                                             "gpuhost_become": False}}}}
    extra = {"gpuhost_validate_measurements": ["dcgm_diag"], "gpuhost_validate_dcgm_level": 3,
             "gpuhost_validate_dcgm_diag_timeout_s": 3600, "gpuhost_validate_task_timeout_s": 4000,
             "gpuhost_report_dir": str(tmp_path / "r"), "gpuhost_history_dir": str(tmp_path / "h")}
    result = playbook(tmp_path, "validate.yml", hosts, "--check", "-e", json.dumps(extra))
    assert result.returncode == 0, result.stdout
    (line,) = [line for line in result.stdout.splitlines() if "localhost would run:" in line]
    plan = json.loads(line[line.index("{"):line.rindex("}") + 1].replace('\\"', '"'))
    assert plan["dcgm_diag"]["timeout_s"] == 3600, plan
