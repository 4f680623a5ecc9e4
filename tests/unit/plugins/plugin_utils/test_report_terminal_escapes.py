"""Issue 18, item 14: host-controlled strings carry no terminal escape into report.md or report.html.

A hostile host name, GPU name, subject or message with ``ESC [31m``, a carriage return, a bell or a
bidi override is shown escaped (``\\x1b``) in every view, so ``cat report.md`` or a pager never obeys
it; the console's own escaping (console.py) is the one per-character rule.
"""
import os
import re

import pytest

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import report_dir, views
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import build_report

HOSTILE = "GPU \x1b[31mred\x1b[0m\rfake line\x07 \u202eevil\x9b2J"
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def hostile_report(hosts=1):
    finding = {"id": "NVIDIA-004", "title": "Persistence " + HOSTILE, "area": "gpu", "severity": "high",
               "status": "fail", "subject": "0000:41:00.0 " + HOSTILE, "expected": "Enabled",
               "observed": HOSTILE, "message": "GPU name " + HOSTILE, "fix": "nvidia-smi -pm 1",
               "reboot_required": False}
    names = ["gpu-%02d%s" % (i, HOSTILE) for i in range(hosts)]
    return build_report(dict((name, {"findings": [dict(finding)]}) for name in names), profile="auto",
                        generated="2025-06-01T12:00:00+00:00", collection_version="0.1.0")


@pytest.mark.parametrize("hosts", [1, views.INLINE_HOSTS + 1])  # one page, and per-host pages too
def test_no_control_character_reaches_a_report_view(tmp_path, hosts):
    report_dir.write_reports(hostile_report(hosts), str(tmp_path), formats=["json", "md", "html"])
    texts = {}
    for root, unused_dirs, names in os.walk(str(tmp_path)):
        for name in names:
            if name.endswith((".md", ".html")):
                with open(os.path.join(root, name), encoding="utf-8") as handle:
                    texts[os.path.relpath(os.path.join(root, name), str(tmp_path))] = handle.read()
    assert "report.md" in texts and "report.html" in texts
    for name, text in texts.items():
        assert not CONTROL.findall(text), name
    # the characters are shown, escaped, not silently dropped
    assert "\\x1b\\[31mred" in texts["report.md"]  # "[" escaped by md_text, ESC by escape_controls
    assert "\\x1b[31mred" in texts["report.html"]
    assert "\\u202eevil" in texts["report.html"]
