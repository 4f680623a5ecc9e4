# -*- coding: utf-8 -*-
"""gpuhost.baseline's series join dcgm-exporter's in a real Prometheus (issue 38 item 2).

node_exporter (Debian's prometheus-node-exporter) serves a textfile directory holding a recorded
dcgm-exporter exposition (tests/fixtures/dcgm_exporter, real format, provenance in its README) and the
metrics.prom of a report for the same machine (its GPU's UUID and PCI address, the host name
dcgm-exporter saw); Prometheus (Debian's prometheus) scrapes it. The documented queries (docs/report.md,
"Joining dcgm-exporter's series") are run as written: a failing finding of the GPU gets dcgm-exporter's
labels and value by UUID, and by Hostname and pci_bus_id, without label_replace.
"""

import os
import shutil

import pytest
import yaml

from test_grafana_dashboard import NODE_EXPORTER, PROMETHEUS, Stack, free_port, http_text, node_exporter_args, require, wait_for

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import metrics
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import build_report

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DCGM = os.path.join(REPO, "tests", "fixtures", "dcgm_exporter", "exporter-3.3.8-h100.prom")
UUID = "GPU-927d7444-b45a-7c49-8402-5e686e46a026"

pytestmark = pytest.mark.slow

#: the queries of docs/report.md, "Joining dcgm-exporter's series"
BY_UUID = ('(max by (host, rule, subject, severity) (gpuhost_baseline_finding_failing) == 1)'
           ' * on (host, subject) group_left (UUID, pci_bus_id, gpu, Hostname)'
           ' max by (host, subject, UUID, pci_bus_id, gpu, Hostname) (gpuhost_baseline_gpu_info)'
           ' and on (UUID) DCGM_FI_DEV_SM_CLOCK')
BY_BUS_ID = ('DCGM_FI_DEV_SM_CLOCK * on (Hostname, pci_bus_id) group_left (rule)'
             ' max by (Hostname, pci_bus_id, rule) ('
             '(max by (host, rule, subject) (gpuhost_baseline_finding_failing) == 1)'
             ' * on (host, subject) group_left (Hostname, pci_bus_id) max by (host, subject, Hostname, pci_bus_id)'
             ' (gpuhost_baseline_gpu_info))')


def report():
    """The machine of the recorded exposition as the audit reports it: its one GPU fails PCI-001."""
    finding = {"id": "PCI-001", "area": "pcie", "severity": "high", "status": "fail", "subject": "0000:00:09.0",
               "observed": 512, "expected": 4096, "message": "MaxReadReq 512 B < 4096 B"}
    return build_report({"h100-01": {"findings": [finding], "hostname": "6d6d7dc3ce21",
                                     "gpus": [{"index": 0, "uuid": UUID, "bus_id": "0000:00:09.0",
                                               "name": "NVIDIA H100 80GB HBM3"}]}},
                        generated="2026-12-07T00:00:00+00:00", collection_version="0.1.0")


@pytest.fixture(scope="module")
def prom(tmp_path_factory):
    require(PROMETHEUS, "prometheus")
    require(NODE_EXPORTER, "prometheus-node-exporter")
    tmp = str(tmp_path_factory.mktemp("dcgm-join"))
    textfile = os.path.join(tmp, "textfile")
    os.makedirs(textfile)
    shutil.copy(DCGM, os.path.join(textfile, "dcgm.prom"))
    with open(os.path.join(textfile, "gpuhost_baseline.prom"), "w", encoding="utf-8") as handle:
        handle.write(metrics.render_metrics(report()))
    stack = Stack(tmp)
    try:
        ne_port, prom_port = free_port(), free_port()
        stack.prom = "http://127.0.0.1:%d" % prom_port
        config = os.path.join(tmp, "prometheus.yml")
        with open(config, "w", encoding="utf-8") as handle:
            yaml.safe_dump({"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                            "scrape_configs": [{"job_name": "node",
                                                "static_configs": [{"targets": ["127.0.0.1:%d" % ne_port]}]}]}, handle)
        stack.start("node_exporter", node_exporter_args(ne_port, textfile))
        stack.start("prometheus", [PROMETHEUS, "--config.file=" + config, "--storage.tsdb.path=" + os.path.join(tmp, "tsdb"),
                                   "--web.listen-address=127.0.0.1:%d" % prom_port, "--log.level=warn"])
        wait_for("Prometheus ready", lambda: http_text(stack.prom + "/-/ready"))
        wait_for("both files scraped", lambda: stack.query("DCGM_FI_DEV_SM_CLOCK") and stack.query("gpuhost_baseline_gpu_info"))
        yield stack
    finally:
        stack.close()
        shutil.rmtree(tmp, ignore_errors=True)


def test_the_gpu_info_carries_dcgm_exporters_labels(prom):
    (info,) = prom.query("gpuhost_baseline_gpu_info")
    (dcgm,) = prom.query("DCGM_FI_DEV_SM_CLOCK")
    for label in ("UUID", "pci_bus_id", "gpu", "Hostname"):
        assert info["metric"][label] == dcgm["metric"][label], label
    assert info["metric"]["hostname"] == dcgm["metric"]["Hostname"]  # dcgm-exporter's main branch spelling


def test_a_failing_finding_joins_dcgm_by_uuid(prom):
    (row,) = prom.query(BY_UUID)
    assert row["metric"]["rule"] == "PCI-001" and row["metric"]["UUID"] == UUID
    assert row["metric"]["pci_bus_id"] == "00000000:00:09.0" and row["metric"]["host"] == "h100-01"


def test_a_dcgm_series_gets_the_failing_rule_by_hostname_and_bus_id(prom):
    (row,) = prom.query(BY_BUS_ID)
    # dcgm-exporter's series (its own labels: device, the driver) with the audit's rule beside it
    assert row["metric"]["rule"] == "PCI-001" and row["metric"]["device"] == "nvidia0"
    assert row["metric"]["DCGM_FI_DRIVER_VERSION"] == "535.183.01"
    assert float(row["value"][1]) == 345


def test_observed_and_expected_values_beside_the_finding(prom):
    observed = prom.query('gpuhost_baseline_finding_observed{rule="PCI-001"}')
    expected = prom.query('gpuhost_baseline_finding_expected{rule="PCI-001"}')
    assert [float(r["value"][1]) for r in observed] == [512] and [float(r["value"][1]) for r in expected] == [4096]
    # the shortfall per GPU, joined to its UUID in one expression
    (row,) = prom.query('(gpuhost_baseline_finding_expected - gpuhost_baseline_finding_observed)'
                        ' * on (host, origin, subject) group_left (UUID) gpuhost_baseline_gpu_info')
    assert row["metric"]["UUID"] == UUID and float(row["value"][1]) == 3584
