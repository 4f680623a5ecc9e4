"""Learned workload floors (issue 39 item 2): the golden host's runs of the site's workloads (a registered
host_measure result, its RETURN shape) become the profile parameter ``workload_floors``; the judge takes them for a
workload without a floor of its own, saying so; the parameter's values are bounded like every parameter."""
import pytest

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue import catalogue_load, catalogue_model, catalogue_params
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive import derive_validation
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.inputs import learn


def entry(name, value, unit="tok/s", lower=False, status="ok", reason=None):
    return {"name": name, "status": status, "reason": reason, "value": value, "unit": unit, "floor": None,
            "lower_is_better": lower, "parser": "regex", "how": "regex", "timeout_s": 600, "seconds": 4.1,
            "command": "/usr/local/bin/llama-bench", "exit_status": 0}


def runs(*values):
    """A registered result of ``repeats`` runs: per run, the figure of ``tg`` (tok/s) and of ``ttft`` (ms, lower is
    better), and ``hung`` killed at its timeout."""
    each = [{"workloads": [entry("tg", tg), entry("ttft", ttft, "ms", True),
                           entry("hung", None, status="unknown", reason="killed after 600 s (its timeout)")]}
            for tg, ttft in values]
    return dict(each[-1], changed=False, plan={}, runs=each)


def test_the_median_less_the_margin_and_plus_it_for_a_time():
    floors, learned, notes = learn.learn_workload_floors(runs((118.0, 40.0), (120.0, 42.0), (119.0, 41.0)))
    assert floors == {"tg": 107.1, "ttft": 45.1}
    assert learned["tg"] == {"median": 119.0, "runs": 3, "spread": 2.0, "unit": "tok/s", "lower_is_better": False,
                             "margin_pct": 10.0}
    assert notes == ["workload hung: no floor learned, no run gave a figure (killed after 600 s (its timeout))"]
    floors, dummy, dummy_notes = learn.learn_workload_floors(runs((100.0, 50.0), (110.0, 60.0)), margin_pct=0)
    assert floors == {"tg": 105.0, "ttft": 55.0}


def test_nothing_learned_from_a_failed_or_odd_result():
    assert learn.learn_workload_floors({"failed": True, "msg": "timeout"}) == (
        {}, {}, ["no workload floor learned: host_measure did not complete: timeout"])
    assert learn.learn_workload_floors(None)[0] == {}
    assert learn.learn_workload_floors({"workloads": [None, {"name": 3}, entry("x", "fast")]})[0] == {}
    # a margin out of range falls back to the default
    assert learn.learn_workload_floors(runs((100.0, 10.0)), margin_pct=150)[0] == {"tg": 90.0, "ttft": 11.0}


def test_a_profile_holds_the_floors_only_when_there_are_some():
    assert "workload_floors" not in learn.build_profile({}, "cpu-node", [])["params"]
    assert learn.build_profile({}, "cpu-node", [], workload_floors={"tg": 107.1})["params"]["workload_floors"] == \
        {"tg": 107.1}


def test_the_judge_takes_the_learned_floor_for_a_workload_without_its_own():
    measure = {"workloads": [entry("tg", 100.0), dict(entry("own", 100.0), floor=90.0), entry("new", 100.0)]}
    got = dict((w["name"], w) for w in derive_validation.derive_validation({"measure": measure},
                                                                           {"workload_floors": {"tg": 107.1, "own": 200}})
               ["workloads"])
    assert got["tg"]["floor"] == 107.1 and "floor 107.1 tok/s (learned)" in got["tg"]["detail"]
    assert got["own"]["floor"] == 90.0 and "(learned)" not in got["own"]["detail"]  # its own floor wins
    assert got["new"]["floor"] is None and "the profile learned none" in got["new"]["reason"]


def test_the_parameter_is_bounded_like_the_others():
    loaded = catalogue_load.load_catalogue()
    unused, params = catalogue_params.resolve_profile(loaded, "generic-nvidia-inference", None,
                                                      {"workload_floors": {"tg": 107.1}})
    assert params["workload_floors"] == {"tg": 107.1}
    with pytest.raises(catalogue_model.CatalogueError, match=r"parameter workload_floors.tg must be at least 0, got -1"):
        catalogue_params.resolve_profile(loaded, "generic-nvidia-inference", None, {"workload_floors": {"tg": -1}})
    with pytest.raises(catalogue_model.CatalogueError, match=r"workload_floors.tg must be a number, got 'fast'"):
        catalogue_params.resolve_profile(loaded, "generic-nvidia-inference", None, {"workload_floors": {"tg": "fast"}})
