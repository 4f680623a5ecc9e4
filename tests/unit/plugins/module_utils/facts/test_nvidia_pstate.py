"""``nvidia.gpus[].performance_state`` from ``nvidia-smi -q -x`` (issue 13, item 3).

Read from the real captures under tests/fixtures/realdata/nvidia-smi (provenance in their README):
an idle GeForce (P8), a busy A100 and T4 (P0), an RTX 3080 under a compute load (P2).
"""
import os

import pytest

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.nvidia import parse_smi_xml, performance_state

TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
REAL = os.path.join(TESTS, "fixtures", "realdata", "nvidia-smi")


def _states(name):
    with open(os.path.join(REAL, name), encoding="utf-8") as handle:
        return [gpu["performance_state"] for gpu in parse_smi_xml(handle.read())["gpus"]]


@pytest.mark.parametrize("name, state", [
    ("gtx-1070-ti.xml", "P8"),
    ("a100-sxm4-v12.xml", "P0"),
    ("tesla-t4.xml", "P0"),
    ("rtx-3080-v13.xml", "P2"),
])
def test_real_captures(name, state):
    states = _states(name)
    assert states and set(states) == {state}


@pytest.mark.parametrize("text, expected", [
    ("P0", "P0"), ("P8", "P8"), (" P12\n", "P12"), ("p2", "P2"), ("P15", "P15"), ("P08", "P8"),
    ("N/A", None), ("Unknown", None), ("", None), (None, None), ("P16", None), ("P32", None),
    ("P", None), ("8", None), ("P8 (idle)", None), ("Pé", None), ("P\u00b2", None), ("P\u0663", None), (8, None),
])
def test_performance_state_values(text, expected):
    assert performance_state(text) == expected


def _doc(state_element):
    return ('<?xml version="1.0" ?>\n<nvidia_smi_log><driver_version>575.57.08</driver_version>'
            '<attached_gpus>1</attached_gpus><gpu id="00000000:43:00.0"><product_name>X</product_name>'
            '%s</gpu></nvidia_smi_log>\n' % state_element)


def test_missing_na_and_garbage_elements_are_null():
    assert parse_smi_xml(_doc(""))["gpus"][0]["performance_state"] is None
    assert parse_smi_xml(_doc("<performance_state>N/A</performance_state>"))["gpus"][0]["performance_state"] is None
    assert parse_smi_xml(_doc("<performance_state>fast</performance_state>"))["gpus"][0]["performance_state"] is None
    assert parse_smi_xml(_doc("<performance_state>P8</performance_state>"))["gpus"][0]["performance_state"] == "P8"


def test_truncated_before_the_state_is_null():
    text = _doc("<performance_state>P8</performance_state>")
    cut = text[:text.index("<performance_state>") + 5]
    parsed = parse_smi_xml(cut)
    assert parsed["error"] and parsed["gpus"][0]["performance_state"] is None
