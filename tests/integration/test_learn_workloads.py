"""Learned workload floors (issue 39 item 2): ``learn.yml`` with ``gpuhost_learn_workloads`` runs the site's workloads
on the golden host (here this machine, local connection, the stand-in benchmark of tests/fixtures/workload/) and
writes their floors into the learned profile (``workload_floors``: the median less 10 %, plus 10 % for a
lower-is-better one); ``validate.yml`` with that profile judges workloads that set no floor of their own against
the learned one: a slower run fails saying the floor was learned, a faster one passes, a workload the profile
learned nothing for is unknown saying so. Two playbook runs, about 30 s."""
import os
import sys

import pytest
import yaml

from helpers.report_file import load_report
from helpers.runner import run_playbook, stdout_of

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "workload", "fake_bench.py")
PATTERN = r"^throughput: (?P<value>\S+) tok/s"


def workload(name, *args, **extra):
    spec = {"name": name, "argv": [sys.executable, BENCH] + list(args), "timeout": 30, "parser": "regex",
            "pattern": PATTERN, "unit": "tok/s"}
    spec.update(extra)
    return spec


GOLDEN = [workload("bench"), workload("bench-latency", "--figure", "71", unit="ms", lower_is_better=True),
          workload("bench-garbage", "--garbage")]
LOCAL = {"all": {"hosts": {"localhost": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                                         "gpuhost_become": False}}}}


@pytest.fixture(scope="module")
def learned(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("learn-workloads")
    site = tmp / "site"
    runner = run_playbook(tmp, "learn.yml", LOCAL, extravars={
        "gpuhost_learn_dir": str(site), "gpuhost_learn_workloads": True, "gpuhost_learn_workload_repeats": 2,
        "gpuhost_validate_workloads": GOLDEN})
    assert runner.rc == 0, stdout_of(runner)
    with open(str(site / "profiles" / "golden-localhost.yml")) as handle:
        profile = yaml.safe_load(handle)
    # the host's next runs: the same benchmark slower (below the learned floor), the latency lower (within it),
    # one workload the golden host never ran
    validated = run_playbook(tmp, "validate.yml", LOCAL, extravars={
        "gpuhost_catalogue_dirs": [str(site)], "gpuhost_profile": "golden-localhost",
        "gpuhost_validate_measurements": [], "gpuhost_report_dir": str(tmp / "r"),
        "gpuhost_validate_workloads": [workload("bench", "--figure", "100"),
                                       workload("bench-latency", "--figure", "70", unit="ms", lower_is_better=True),
                                       workload("bench-new")]})
    return {"learn": runner, "profile": profile, "validate": validated, "tmp": tmp}


def test_learn_writes_the_floors_of_the_golden_host_runs(learned):
    floors = learned["profile"]["params"]["workload_floors"]
    # 123.4 tok/s less 10 %; 71.0 ms plus 10 % (lower is better); the garbage workload gave no figure
    assert floors == {"bench": 111.06, "bench-latency": 78.1}
    out = stdout_of(learned["learn"])
    assert "workload bench-garbage: no floor learned, no run gave a figure (no line matched" in " ".join(out.split())


def test_validate_judges_against_the_learned_floors(learned):
    assert learned["validate"].rc == 0, stdout_of(learned["validate"])
    host = load_report(str(learned["tmp"] / "r"))["hosts"]["localhost"]
    throughput = dict((f["subject"], f) for f in host["findings"] if f["id"] == "VAL-012")
    assert throughput["bench"]["status"] == "fail" and throughput["bench"]["expected"] == 111.06
    assert "floor 111.06 tok/s (learned)" in throughput["bench"]["message"], throughput["bench"]
    assert throughput["bench-new"]["status"] == "unknown"
    assert "the workload sets none and the profile learned none" in throughput["bench-new"]["message"]
    (latency,) = [f for f in host["findings"] if f["id"] == "VAL-013"]
    assert latency["status"] == "pass" and latency["expected"] == 78.1 and latency["observed"] == 70.0
