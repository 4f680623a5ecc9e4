# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU now-state facts of plugins/module_utils/facts/nvidia.py (issue 21): temperatures with the GPU's
own thresholds, the VBIOS version, and the clock-throttle reasons under both of their XML names, read
from the real nvidia-smi -q -x captures of tests/fixtures/realdata/nvidia-smi (PROVENANCE.md there)
and from hostile variants of them."""

import os

import pytest

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.nvidia import parse_smi_xml, vbios_version

TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
REAL = os.path.join(TESTS, "fixtures", "realdata", "nvidia-smi")


def real(name):
    with open(os.path.join(REAL, name), encoding="utf-8") as handle:
        return handle.read()


def first_gpu(text):
    parsed = parse_smi_xml(text)
    assert parsed is not None and parsed["error"] is None
    return parsed["gpus"][0]


def temps(**given):
    """``nvidia.gpus[].temperature`` with ``given`` and every other key null."""
    keys = ("gpu_c", "slowdown_c", "shutdown_c", "max_operating_c", "target_c", "memory_c", "memory_max_c",
            "tlimit_margin_c", "slowdown_tlimit_c", "shutdown_tlimit_c", "max_operating_tlimit_c", "memory_max_tlimit_c")
    assert set(given) <= set(keys)
    return dict((key, given.get(key)) for key in keys)


# the expected values were read off each file's <temperature> lines, not from the parser
@pytest.mark.parametrize("name, vbios, temperature", [
    ("a100-sxm4-v12.xml", "92.00.36.00.02",
     temps(gpu_c=27, slowdown_c=89, shutdown_c=92, max_operating_c=85, memory_c=44, memory_max_c=95)),
    ("tesla-t4.xml", "90.04.84.00.06", temps(gpu_c=40, slowdown_c=93, shutdown_c=96, max_operating_c=85)),
    ("rtx-3080-v13.xml", "94.02.71.40.72",
     temps(gpu_c=27, slowdown_c=95, shutdown_c=98, max_operating_c=93, target_c=83)),
    ("v100s-pcie-8gpu-v11.xml", "88.00.98.00.01",
     temps(gpu_c=66, slowdown_c=87, shutdown_c=90, max_operating_c=83, memory_c=63, memory_max_c=85)),
    # issue 36 item 8: drivers 418 to 595; T.Limit values only on Ada and later (595.84, 590.44.01)
    ("rtx-4000-sff-ada-v13.xml", "95.04.53.00.01",
     temps(gpu_c=38, target_c=88, tlimit_margin_c=49, slowdown_tlimit_c=-2, shutdown_tlimit_c=-7,
           max_operating_tlimit_c=0)),
    ("rtx-pro-6000-maxq-blackwell-v13-cut.xml", None,
     temps(gpu_c=24, tlimit_margin_c=68, slowdown_tlimit_c=-2, shutdown_tlimit_c=-5, max_operating_tlimit_c=0)),
    ("a10g.xml", "94.02.75.00.01", temps(gpu_c=17, slowdown_c=95, shutdown_c=98, max_operating_c=88)),
    ("gtx-1660-ti.xml", "90.16.25.00.4C", temps(gpu_c=40, slowdown_c=93, shutdown_c=96, max_operating_c=91)),
    ("quadro-p2000-v12.xml", "86.06.3F.00.30", temps(gpu_c=34, slowdown_c=101, shutdown_c=104, target_c=83)),
    ("quadro-p400.xml", "86.07.3B.00.4A", temps(gpu_c=33, slowdown_c=100, shutdown_c=103)),
    ("rtx-3060-v12.xml", "94.04.71.00.69", temps(gpu_c=42, slowdown_c=95, shutdown_c=98, max_operating_c=93, target_c=83)),
    ("rtx-3080-v12.xml", "94.02.71.40.72", temps(gpu_c=31, slowdown_c=95, shutdown_c=98, max_operating_c=93, target_c=91)),
    ("rtx-3090-v12.xml", "94.02.71.40.72", temps(gpu_c=37, slowdown_c=95, shutdown_c=98, max_operating_c=93, target_c=83)),
])
def test_real_captures_give_temperatures_and_vbios(name, vbios, temperature):
    gpu = first_gpu(real(name))
    assert gpu["vbios_version"] == vbios
    assert gpu["temperature"] == temperature


def test_trimmed_capture_without_thresholds_gives_nulls():
    # the GTX 1070 Ti log holds <gpu_temp> only, and no <vbios_version>
    gpu = first_gpu(real("gtx-1070-ti.xml"))
    assert gpu["temperature"]["gpu_c"] == 39
    assert gpu["temperature"]["slowdown_c"] is None
    assert gpu["vbios_version"] is None


def test_every_gpu_of_the_8_gpu_capture_has_its_own_temperature():
    parsed = parse_smi_xml(real("v100s-pcie-8gpu-v11.xml"))
    assert [g["temperature"]["gpu_c"] for g in parsed["gpus"]] == [66, 58, 57, 61, 59, 64, 61, 57]
    assert set(g["vbios_version"] for g in parsed["gpus"]) == {"88.00.98.00.01"}


@pytest.mark.parametrize("reading, expected", [
    ("N/A", None), ("", None), ("hot", None), ("999 C", None), ("-80 C", None), ("1" + "0" * 400 + " C", None),
    ("85.0 C", 85), ("Unknown Error", None),
])
def test_hostile_temperature_readings_are_null_not_errors(reading, expected):
    text = real("a100-sxm4-v12.xml").replace("<gpu_temp>27 C</gpu_temp>", "<gpu_temp>%s</gpu_temp>" % reading)
    assert first_gpu(text)["temperature"]["gpu_c"] == expected


def test_no_temperature_section_is_null():
    text = real("a100-sxm4-v12.xml")
    start, end = text.index("<temperature>"), text.index("</temperature>") + len("</temperature>")
    assert first_gpu(text[:start] + text[end:])["temperature"] is None


@pytest.mark.parametrize("value, expected", [
    ("96.00.74.00.0D", "96.00.74.00.0D"), ("N/A", None), ("x" * 65, None), ("92.00 ; rm -rf /", None),
    ("\u202e92.00", None), (None, None), (42, None),
])
def test_vbios_version_accepts_versions_only(value, expected):
    assert vbios_version(value) == expected


def test_hostile_vbios_in_xml_is_null():
    text = real("a100-sxm4-v12.xml").replace("92.00.36.00.02", "<![CDATA[" + "A" * 5000 + "]]>")
    assert first_gpu(text)["vbios_version"] is None


@pytest.mark.parametrize("reason", ["hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown",
                                    "sw_thermal_slowdown"])
@pytest.mark.parametrize("name, prefix", [("a100-sxm4-v12.xml", "clocks_event_reason_"),
                                          ("tesla-t4.xml", "clocks_throttle_reason_")])
def test_throttle_reasons_under_both_names_are_read_active(reason, name, prefix):
    """Drivers before 535 write <clocks_throttle_reasons>, newer ones <clocks_event_reasons>."""
    tag = prefix + reason
    text = real(name).replace("<%s>Not Active</%s>" % (tag, tag), "<%s>Active</%s>" % (tag, tag))
    assert first_gpu(text)["clocks_event_reasons"]["active"] == [reason]


# -- NVIDIA-011 on the real T.Limit captures (issue 36 item 8) -----------------------------------------

def _nvidia011(temperature, **params):
    """NVIDIA-011's finding for GPU0 of the healthy facts given ``temperature`` (the others as they are)."""
    from helpers.baseline_facts import healthy_facts  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge import evaluation  # pylint: disable=import-outside-toplevel

    facts = healthy_facts()
    facts["nvidia"]["gpus"][0]["temperature"] = temperature
    bus = facts["nvidia"]["gpus"][0]["bus_id"]
    result = evaluation.evaluate(facts, profile="amd-epyc-nvidia", params=dict(params, smt="on"), host="gpu01",
                                 today="2026-12-01")
    (finding,) = [f for f in result["findings"] if f["id"] == "NVIDIA-011" and f.get("subject") == bus]
    return finding


@pytest.mark.parametrize("name, headroom, words", [
    ("rtx-4000-sff-ada-v13.xml", 51, "T.Limit margin 49 C, slowdown at -2 C of T.Limit"),
    ("rtx-pro-6000-maxq-blackwell-v13-cut.xml", 70, "T.Limit margin 68 C, slowdown at -2 C of T.Limit"),
    ("rtx-3080-v13.xml", 68, "27 C, slowdown at 95 C"),  # 595 on Ampere: absolute thresholds as before
])
def test_the_headroom_is_judged_from_the_t_limit_margin_where_only_it_is_given(name, headroom, words):
    finding = _nvidia011(first_gpu(real(name))["temperature"])
    assert finding["status"] == "pass" and finding["observed"] == headroom and words in finding["message"]
    # the same GPU 2 C from its slowdown (the one reading changed here)
    hot = first_gpu(real(name))["temperature"]
    if hot["slowdown_c"] is None:
        hot["tlimit_margin_c"] = 0
    else:
        hot["gpu_c"] = hot["slowdown_c"] - 2
    tight = _nvidia011(hot)
    assert tight["status"] == "fail" and tight["observed"] == 2


def test_a_t_limit_margin_without_its_slowdown_threshold_is_unknown_saying_so():
    temperature = first_gpu(real("rtx-4000-sff-ada-v13.xml"))["temperature"]
    temperature["slowdown_tlimit_c"] = None
    finding = _nvidia011(temperature)
    assert finding["status"] == "unknown" and "<gpu_temp_slow_tlimit_threshold>" in finding["message"]
