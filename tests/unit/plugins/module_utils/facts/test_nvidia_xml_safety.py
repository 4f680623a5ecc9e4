# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Issue 18, item 13: one character that XML 1.0 does not allow in ``nvidia-smi -q -x`` output
must not cost the GPUs; entity declarations are refused.

Over a real 8-GPU capture (tests/fixtures/realdata/nvidia-smi/v100s-pcie-8gpu-v11.xml, provenance
in PROVENANCE.md there): a control character in one GPU's product name is replaced, all eight GPUs
stay, and the count is one facts error naming the command capture.
"""

import json
import os

import pytest

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import nvidia
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.nvidia import gather, parse_smi_xml
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root

TESTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
REAL = os.path.join(TESTS, "fixtures", "realdata", "nvidia-smi")
BUS_IDS = ["0000:00:0d.0", "0000:00:0e.0", "0000:00:0f.0", "0000:00:10.0",
           "0000:00:11.0", "0000:00:12.0", "0000:00:13.0", "0000:00:14.0"]
NAME = "Tesla V100S-PCIE-32GB"


def eight():
    with open(os.path.join(REAL, "v100s-pcie-8gpu-v11.xml"), encoding="utf-8") as handle:
        return handle.read()


def in_name(text, gpu, junk):
    """``text`` with ``junk`` inside the product name of GPU number ``gpu`` (after "Tesla")."""
    at = -1
    for unused in range(gpu + 1):
        at = text.index("<product_name>Tesla", at + 1)
    at += len("<product_name>Tesla")
    return text[:at] + junk + text[at:]


def snapshot(tmp_path, xml):
    (tmp_path / "commands").mkdir()
    (tmp_path / "commands" / "nvidia-smi-q.xml").write_bytes(xml.encode("utf-8", "surrogatepass"))
    return Root(str(tmp_path))


def test_the_real_8_gpu_capture_reads_whole():
    parsed = parse_smi_xml(eight())
    assert parsed["error"] is None and parsed["replaced"] == 0
    assert parsed["attached_gpus"] == 8 and parsed["driver_version"] == "460.73.01"
    assert [g["bus_id"] for g in parsed["gpus"]] == BUS_IDS
    assert {g["name"] for g in parsed["gpus"]} == {NAME}
    assert all(g["processes"][0]["name"] == "python" for g in parsed["gpus"])


@pytest.mark.parametrize("gpu", [0, 3, 7])
def test_a_control_character_in_one_product_name_keeps_all_8_gpus(gpu):
    parsed = parse_smi_xml(in_name(eight(), gpu, "\x01"))
    assert parsed["error"] is None
    assert parsed["replaced"] == 1
    assert [g["bus_id"] for g in parsed["gpus"]] == BUS_IDS
    assert [g["name"] for g in parsed["gpus"]] == [
        "Tesla\ufffd V100S-PCIE-32GB" if i == gpu else NAME for i in range(8)]
    # the fields after the bad character are read too
    assert parsed["gpus"][gpu]["power"]["limit_w"] == 250.0
    assert parsed["gpus"][gpu]["processes"][0]["pid"] is not None


def test_gather_keeps_8_gpus_and_records_one_error_naming_the_capture(tmp_path):
    root = snapshot(tmp_path, in_name(eight(), 0, "\x01"))
    facts = gather(root)
    assert facts["smi"] == {"available": True, "error": None, "bound": None}
    assert len(facts["gpus"]) == 8 and facts["attached_gpus"] == 8
    assert facts["gpus"][1]["name"] == NAME
    xml_errors = [e for e in root.errors if e["path"] == "nvidia-smi -q -x"]
    assert xml_errors == [{"subsystem": "nvidia", "path": "nvidia-smi -q -x",
                           "reason": "nvidia-smi -q -x output held 1 character not allowed in XML "
                                     "(replaced by U+FFFD before parsing)"}]
    json.dumps(facts)


@pytest.mark.parametrize("junk, count", [
    ("\x00", 1),                            # NUL
    ("\x1b[31m", 1),                        # ANSI escape: ESC is a C0 control, "[31m" is text
    ("\x08\x0b\x0c\x1f", 4),                # backspace, VT, FF, US
    ("\ufffe\uffff", 2),                    # the two non-characters XML excludes
    ("\ud800", 1),                          # a lone surrogate (only a str can hold one)
    ("\x7f\x85\u2028\t", 0),                # DEL, NEL, LINE SEPARATOR and TAB are allowed in XML 1.0
], ids=["nul", "ansi-escape", "c0-controls", "fffe-ffff", "lone-surrogate", "allowed"])
def test_each_kind_of_character_xml_forbids_is_counted(junk, count):
    parsed = parse_smi_xml(in_name(eight(), 5, junk))
    assert parsed["error"] is None
    assert parsed["replaced"] == count
    assert len(parsed["gpus"]) == 8
    assert parsed["gpus"][5]["name"].startswith("Tesla")
    json.dumps(parsed)


def test_many_bad_characters_in_several_places_are_all_counted(tmp_path):
    text = in_name(in_name(eight(), 2, "\x02\x03"), 6, "\x00")
    text = text.replace('<gpu id="00000000:00:14.0">', '<gpu id="00000000:00:14.0\x07">')  # in an attribute
    root = snapshot(tmp_path, text)
    facts = gather(root)
    assert [g["bus_id"] for g in facts["gpus"]] == BUS_IDS  # the attribute is not a bus id: pci_bus_id is
    reasons = [e["reason"] for e in root.errors if e["path"] == "nvidia-smi -q -x"]
    assert reasons == ["nvidia-smi -q -x output held 4 characters not allowed in XML "
                       "(replaced by U+FFFD before parsing)"]


def test_invalid_utf8_from_the_reader_is_replaced_by_the_reader_not_counted(tmp_path):
    # Root decodes captures with errors="replace": bytes that are not UTF-8 arrive as U+FFFD,
    # which XML allows; nothing is lost and nothing to count.
    data = in_name(eight(), 4, "@@").encode("utf-8").replace(b"@@", b"\xff\xc0\xed\xa0\x80")
    (tmp_path / "commands").mkdir()
    (tmp_path / "commands" / "nvidia-smi-q.xml").write_bytes(data)
    root = Root(str(tmp_path))
    facts = gather(root)
    assert len(facts["gpus"]) == 8 and facts["smi"]["error"] is None
    assert facts["gpus"][4]["name"].startswith("Tesla\ufffd")
    assert [e for e in root.errors if e["path"] == "nvidia-smi -q -x"] == []


# -- DOCTYPE and entities ----------------------------------------------------------------------
LAUGHS = ('<?xml version="1.0"?>\n<!DOCTYPE nvidia_smi_log [\n <!ENTITY lol "lol">\n'
          + "".join(' <!ENTITY lol%d "%s">\n' % (i, ("&lol%d;" % (i - 1) if i > 1 else "&lol;") * 10)
                    for i in range(1, 10))
          + ']>\n<nvidia_smi_log><driver_version>&lol9;</driver_version></nvidia_smi_log>\n')


def with_subset(text, subset):
    """The real capture with an internal DTD subset added to its DOCTYPE line."""
    return text.replace('<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v11.dtd">',
                        '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v11.dtd" [%s]>' % subset, 1)


@pytest.mark.parametrize("text", [
    LAUGHS,
    with_subset(eight(), '<!ENTITY big "%s">' % ("x" * 100000)).replace("<uuid>", "<uuid>&big;&big;&big;"),
    with_subset(eight(), '<!ENTITY % ext SYSTEM "file:///etc/passwd"> %ext;'),
    with_subset(eight(), '<!ENTITY name "Tesla">'),
    with_subset(eight(), ""),                                   # even an empty subset: nvidia-smi writes none
    '<!DOCTYPE nvidia_smi_log[<!ENTITY a "b">]><nvidia_smi_log/>',
    '<!-- x --><?pi y?>\n<!DOCTYPE nvidia_smi_log PUBLIC "-//A//B" \'u.dtd\' [<!ENTITY a "b">]><nvidia_smi_log/>',
], ids=["billion-laughs", "quadratic-blowup", "external-parameter-entity", "plain-entity", "empty-subset",
        "no-space-before-subset", "after-comment-and-pi-public-id"])
def test_an_internal_dtd_subset_is_refused(text):
    parsed = parse_smi_xml(text)
    assert parsed["refused"] is True
    assert parsed["gpus"] == [] and parsed["driver_version"] is None
    assert "internal DTD subset" in parsed["error"]


def test_gather_reports_a_refused_document(tmp_path):
    root = snapshot(tmp_path, LAUGHS)
    facts = gather(root)
    assert facts["smi"]["available"] is False
    assert "refused" in facts["smi"]["error"] and "<!ENTITY" in facts["smi"]["error"]
    assert facts["gpus"] == []
    assert len([e for e in root.errors if e["path"] == "nvidia-smi -q -x"]) == 1


@pytest.mark.parametrize("doctype", [
    '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v11.dtd">',
    '<!DOCTYPE nvidia_smi_log SYSTEM "odd[name].dtd">',         # a bracket inside the literal is no subset
    '<!DOCTYPE nvidia_smi_log PUBLIC "-//NVIDIA//x" "nvsmi.dtd" >',
    "<!DOCTYPE nvidia_smi_log>",
    "",
], ids=["real", "bracket-in-literal", "public-id", "no-external-id", "no-doctype"])
def test_the_doctype_lines_nvidia_smi_writes_are_accepted(doctype):
    text = eight().replace('<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v11.dtd">',
                           "<!-- [comment] -->\n<?pi [x]?>" + doctype, 1)
    parsed = parse_smi_xml(text)
    assert parsed["refused"] is False and parsed["error"] is None
    assert len(parsed["gpus"]) == 8


def test_a_prolog_longer_than_any_real_one_is_refused():
    text = eight().replace("<nvidia_smi_log>", "<!--%s-->\n<nvidia_smi_log>" % ("-" * (nvidia.PROLOG_CHARS + 10)), 1)
    parsed = parse_smi_xml(text)
    assert parsed["refused"] is True and parsed["gpus"] == []


# -- bounds of the tree ------------------------------------------------------------------------
def test_deep_nesting_costs_its_elements_and_nothing_more():
    # expat keeps its own stack; nothing in the parser recurses over the tree
    text = eight()
    at = text.index("<pci>", text.index('<gpu id="00000000:00:12.0">'))
    depth = 100000
    parsed = parse_smi_xml(text[:at] + "<a>" * depth + "</a>" * depth + text[at:])
    assert parsed["error"] is None
    assert [g["bus_id"] for g in parsed["gpus"]] == BUS_IDS
    assert parsed["gpus"][5]["pcie"]["width_current"] == 16


def test_more_elements_than_any_real_capture_stops_the_read_and_keeps_earlier_gpus(monkeypatch):
    # smaller limits than the real ones (the bomb corpus, tests/fuzz/test_fuzz_nvidia_xml.py, uses those)
    monkeypatch.setattr(nvidia, "MAX_ELEMENTS", 20000)
    monkeypatch.setattr(nvidia, "_CHUNK", 65536)
    text = eight()
    at = text.index("<processes>", text.index('<gpu id="00000000:00:13.0">'))
    parsed = parse_smi_xml(text[:at] + "<x/>" * (nvidia.MAX_ELEMENTS + 5) + text[at:])
    assert "more than" in parsed["error"] and "elements" in parsed["error"]
    # the GPUs before are kept (the count is taken after each piece of text, so the stop may
    # come a piece later)
    assert [g["bus_id"] for g in parsed["gpus"][:7]] == BUS_IDS[:7]
    assert parsed["gpus"][6]["name"] == NAME

    def flood(gpu):
        at = text.index("<processes>", text.index('<gpu id="%s">' % gpu))
        return text[:at] + "<x/>" * (nvidia.MAX_ELEMENTS + nvidia._CHUNK) + text[at:]

    parsed = parse_smi_xml(flood("00000000:00:10.0"))
    assert "more than" in parsed["error"]
    assert [g["bus_id"] for g in parsed["gpus"]] == BUS_IDS[:4]
    assert parsed["gpus"][3]["processes"] is None


def test_gpus_are_read_however_the_text_falls_into_pieces(monkeypatch):
    # a piece boundary inside a tag, a name, a character reference or a bad character changes nothing
    text = in_name(eight(), 2, "\x01&amp;")
    whole = parse_smi_xml(text)
    for size in (7, 4096, 30011):
        monkeypatch.setattr(nvidia, "_CHUNK", size)
        assert parse_smi_xml(text) == whole
    assert whole["replaced"] == 1 and whole["gpus"][2]["name"] == "Tesla\ufffd& V100S-PCIE-32GB"


def test_many_processes_are_still_read():
    text = eight()
    start = text.index("<process_info>")
    end = text.index("</process_info>", start) + len("</process_info>")
    parsed = parse_smi_xml(text[:start] + text[start:end] * 2000 + text[end:])
    assert parsed["error"] is None
    assert len(parsed["gpus"][0]["processes"]) == 2000 and len(parsed["gpus"]) == 8


@pytest.mark.parametrize("value", ["9" * 400, "-" + "9" * 400, "1" + "0" * 5000 + ".5 W"], ids=["400-digits", "minus-400-digits", "5000-digits-watts"])
def test_a_number_no_float_holds_is_null_not_a_crash(value):
    # float() of 400 digits is infinity, and int(infinity) raised OverflowError out of the parser
    text = eight().replace("<minor_number>0</minor_number>", "<minor_number>%s</minor_number>" % value)
    text = text.replace("<default_power_limit>250.00 W</default_power_limit>",
                        "<default_power_limit>%s</default_power_limit>" % value, 1)
    parsed = parse_smi_xml(text)
    assert parsed["error"] is None and len(parsed["gpus"]) == 8
    assert parsed["gpus"][0]["minor_number"] is None and parsed["gpus"][0]["power"]["default_w"] is None
    assert parsed["gpus"][1]["minor_number"] == 1
