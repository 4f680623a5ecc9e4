"""Read a report.json as the tests (and molecule's verifiers) look at it: the document
build_report made, every finding a mapping with its rule's fields (docs/report.md, "Stored
layout": the file keeps rule text once per rule and each finding as a row)."""
import json
import os

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import expand_document


def load_report(path):
    """``path``: a report.json or the directory holding it."""
    if os.path.isdir(str(path)):
        path = os.path.join(str(path), "report.json")
    with open(str(path)) as handle:
        return expand_document(json.load(handle))
