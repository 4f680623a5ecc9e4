"""The fact key -> source table (plugin_utils/catalogue/sources.py) and unknown messages that name it (issue 13, item 3)."""
import re

import pytest

from helpers.baseline_facts import GPU0, device, healthy_facts

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue import sources
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge import evaluation
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_load import load_catalogue

TODAY = "2026-06-01"
#: a file the readers read (absolute path under a system tree) or a command they run
NAMES_A_SOURCE = re.compile(r"/(proc|sys|etc|usr|lib|boot|run)/|nvidia-smi|journalctl|dmesg|systemctl")


def _evaluate(facts):
    return evaluation.evaluate(facts, params={"smt": "on"}, host="gpu01", today=TODAY)


def _of(result, rule_id):
    return [f for f in result["findings"] if f["id"] == rule_id]


# -- keys ------------------------------------------------------------------------------------

@pytest.mark.parametrize("query, subjects, key", [
    ("cpu.boost", None, "cpu.boost"),
    ("power_limit_w", "derived.nvidia.gpus", "derived.nvidia.gpus[].power_limit_w"),
    ("free_pct", "numa.nodes[?mem_total_kb != `0`]", "numa.nodes[].free_pct"),
    ("pcie.link_speed", "derived.pcie.peer_devices[?!idle]", "derived.pcie.peer_devices[].pcie.link_speed"),
    (None, "numa.nodes[?mem_total_kb != `0`]", "numa.nodes[]"),
    ("cpu.cpufreq.policies == `0` && 'x' || null", None, None),  # an expression, not a fact path
    ("length(x)", "derived.pcie.gpus", "derived.pcie.gpus[]"),  # an expression over an element: the element's
])
def test_fact_key(query, subjects, key):
    assert sources.fact_key(query, subjects) == key


def test_lookup_takes_the_longest_prefix_and_list_elements():
    assert sources.lookup("cpu.boost") == sources.SOURCES["cpu.boost"]
    # no entry of its own: the entry of cpu.cpufreq covers it
    assert sources.lookup("cpu.cpufreq.min_khz") == sources.SOURCES["cpu.cpufreq"]
    assert sources.lookup("derived.pcie.gpus[].pcie.max_read_request") == sources.SOURCES["derived.pcie.gpus[]"]
    # the list itself (subjects null): the source of its elements
    assert sources.lookup("derived.pcie.gpus") == sources.SOURCES["derived.pcie.gpus[]"]
    assert sources.lookup("nothing.known.here") == ()
    assert sources.lookup(None) == ()


# -- messages --------------------------------------------------------------------------------

def test_no_value_names_the_file_and_quotes_its_reader():
    facts = {"errors": [{"subsystem": "cpu", "path": "/sys/devices/system/cpu/cpufreq/boost", "reason": "empty file"}]}
    assert sources.no_value("cpu.boost", facts) == (
        "no value from /sys/devices/system/cpu/cpufreq/boost, /sys/devices/system/cpu/intel_pstate/no_turbo or "
        "/sys/devices/system/cpu/cpufreq/policy*/boost: /sys/devices/system/cpu/cpufreq/boost: empty file")
    # one source: its reason alone; no error recorded: the file alone
    facts = {"errors": [{"subsystem": "kernel", "path": "/proc/sys/vm/swappiness", "reason": "not an integer: 'x'"}]}
    assert sources.no_value("kernel.sysctl.swappiness", facts) == \
        "no value from /proc/sys/vm/swappiness: not an integer: 'x'"
    assert sources.no_value("kernel.sysctl.swappiness", {"errors": []}) == "no value from /proc/sys/vm/swappiness"
    assert sources.no_value("kernel.sysctl.swappiness", {"errors": "garbage"}) == "no value from /proc/sys/vm/swappiness"
    assert sources.no_value("nothing.known", {}) is None


def test_placeholders_come_from_the_subject_and_wildcards_match_errors():
    errors = {"errors": [
        {"subsystem": "numa", "path": "/sys/devices/system/node/node0/meminfo", "reason": "truncated"},
        {"subsystem": "numa", "path": "/sys/devices/system/node/node1/meminfo", "reason": "no 'Node 1 MemTotal:' line"},
    ]}
    assert sources.no_value("numa.nodes[].free_pct", errors, {"id": 1}) == \
        "no value from /sys/devices/system/node/node1/meminfo: no 'Node 1 MemTotal:' line"
    # without the element the placeholder is a wildcard, and the first matching error is quoted with its path
    assert sources.no_value("numa.nodes[].free_pct", errors) == \
        "no value from /sys/devices/system/node/node*/meminfo: /sys/devices/system/node/node0/meminfo: truncated"


def test_an_error_about_the_device_directory_counts_for_its_files():
    errors = {"errors": [{"subsystem": "pci", "path": "/sys/bus/pci/devices/0000:05:00.0",
                          "reason": "not a symlink in this capture"}]}
    assert sources.no_value("derived.pcie.nics[].pcie.link_width", errors, {"address": "0000:05:00.0"}) == (
        "no value from /sys/bus/pci/devices/0000:05:00.0/config: "
        "/sys/bus/pci/devices/0000:05:00.0: not a symlink in this capture")


def test_command_sources_match_the_command_and_its_capture_file():
    for path in ("nvidia-smi -q -x", "commands/nvidia-smi-q.xml"):
        facts = {"errors": [{"subsystem": "nvidia", "path": path, "reason": "leaves the snapshot root"}]}
        message = sources.no_value("derived.nvidia.gpus[].power_limit_w", facts, {})
        assert message.startswith("no value from nvidia-smi -q -x (<gpu_power_readings>/<current_power_limit>): ")
        assert message.endswith("leaves the snapshot root")
    # a live host's error names the command line it ran
    facts = {"errors": [{"subsystem": "health", "reason": "exit 1: no journal",
                         "path": "journalctl -k -b -o short-monotonic --no-pager -q -n 100000"}]}
    assert sources.no_value("derived.health.gpus[].xid_hardware", facts, {}).endswith(
        "journalctl -k -b -o short-monotonic --no-pager -q -n 100000: exit 1: no journal")
    # the topology capture's error is not about -q -x
    facts = {"errors": [{"subsystem": "nvidia", "path": "nvidia-smi topo -m", "reason": "no matrix"}]}
    assert sources.no_value("nvidia.cuda_version", facts) == "no value from nvidia-smi -q -x (<cuda_version>)"


def test_names_source():
    assert sources.names_source("installed kernels not readable (/lib/modules, /boot)")
    assert sources.names_source("nvidia-smi reports no GPU")
    assert not sources.names_source("config space is 64 bytes: capabilities need root")
    assert not sources.names_source("NUMA node of /dev/nvidia0 unknown")  # a device node is not what was read
    assert not sources.names_source(None)


# -- the table covers the catalogue ----------------------------------------------------------

def _rule_keys(rule):
    subjects = rule.subjects.text if rule.subjects is not None else None
    keys = [sources.fact_key(rule.query.text, subjects)]
    if rule.operand.query is not None:
        keys.append(sources.fact_key(rule.operand.query.text, subjects))
    if subjects is not None:
        keys.append(sources.fact_key(None, subjects))
    return [k for k in keys if k]


def test_every_fact_a_rule_reads_has_a_source():
    missing = []
    for rule in load_catalogue().rules:
        for key in _rule_keys(rule):
            if not sources.lookup(key):
                missing.append("%s: %s" % (rule.id, key))
    assert missing == [], "add these fact keys to plugins/plugin_utils/catalogue/sources.py SOURCES: %s" % missing


def test_every_source_is_a_file_a_command_a_profile_parameter_or_a_measurement():
    for key, entries in sources.SOURCES.items():
        assert entries, key
        for entry in entries:
            where = entry[0] if isinstance(entry, tuple) else entry
            assert where.startswith("/") or where in sources._CAPTURES or \
                where.startswith("profile parameter ") or where.startswith("host_measure "), (key, where)


# -- unknown findings name their source (evaluation.py) --------------------------------------

def test_host_wide_unknown_names_the_file_and_the_recorded_reason():
    facts = healthy_facts()
    facts["cpu"]["boost"] = None
    facts["errors"] = [{"subsystem": "cpu", "path": "/sys/devices/system/cpu/cpufreq/boost", "reason": "permission denied"}]
    (f,) = _of(_evaluate(facts), "CPU-005")
    assert f["status"] == "unknown"
    assert "/sys/devices/system/cpu/cpufreq/boost: permission denied" in f["message"]
    assert "no data" not in f["message"]


def test_per_gpu_unknown_names_the_nvidia_smi_element():
    facts = healthy_facts()
    facts["nvidia"]["gpus"][0]["power"]["limit_w"] = None
    (f,) = [f for f in _of(_evaluate(facts), "NVIDIA-007") if f["status"] == "unknown"]
    assert f["message"].startswith(
        "power limit unknown: no value from nvidia-smi -q -x (<gpu_power_readings>/<current_power_limit>) on ")


def test_a_rule_reason_without_a_file_gets_the_file():
    facts = healthy_facts()
    device(facts, GPU0).update(pcie=None, acs=None, aer=None,
                               error="config space is 64 bytes: capabilities need root; run with become: true")
    (f,) = [f for f in _of(_evaluate(facts), "PCI-001") if f["subject"] == GPU0]
    assert f["status"] == "unknown"
    assert "config space is 64 bytes: capabilities need root; run with become: true " \
           "(read from /sys/bus/pci/devices/%s/config) on %s" % (GPU0, GPU0) in f["message"]


def test_a_rule_reason_naming_a_file_is_kept_as_it_is():
    facts = healthy_facts()
    facts["kernel"]["installed"] = None
    (f,) = _of(_evaluate(facts), "KERNEL-006")
    assert f["status"] == "unknown"
    assert f["message"].endswith(" unknown: installed kernels not readable (/lib/modules, /boot)"), f["message"]
    assert "read from" not in f["message"]


def test_a_null_operand_names_its_source():
    facts = healthy_facts()
    facts["numa"]["nodes"][1]["mem_total_kb"] = None
    unknown = [f for f in _of(_evaluate(facts), "LXC-003") if f["status"] == "unknown"]
    assert unknown and all("expected value {query: memory_limit_mib} is null (no value from "
                           "/sys/devices/system/node/node*/meminfo (MemTotal))" in f["message"] for f in unknown)


def test_a_value_that_cannot_be_judged_names_its_file():
    facts = healthy_facts()
    facts["kernel"]["release"] = "not-a-version"
    (f,) = _of(_evaluate(facts), "KERNEL-001")
    assert f["status"] == "unknown"
    assert f["message"] == "cannot compare running kernel not-a-version with 6.14 (read from /proc/sys/kernel/osrelease)"


def test_a_null_subject_list_names_its_source():
    facts = healthy_facts()
    facts["pci"]["devices"] = None
    (f,) = _of(_evaluate(facts), "PCI-001")
    assert f["status"] == "unknown"
    assert NAMES_A_SOURCE.search(f["message"]), f["message"]
    assert "/sys/bus/pci/devices/*/config" in f["message"]


def test_sysctl_sources_are_the_directories_the_facts_read():
    # one list (facts/kernel.py SYSCTL_DIRS): an unknown finding names every directory read
    from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.kernel import SYSCTL_CONF, SYSCTL_DIRS
    named = sources.SOURCES["kernel.sysctl_persisted"]
    assert [d + "/*.conf" for d in SYSCTL_DIRS] + [SYSCTL_CONF] == list(named)
    assert "/usr/local/lib/sysctl.d/*.conf" in named and "/lib/sysctl.d/*.conf" in named
