"""Persistence facts (_persist.py) and the boot-time judgements derived from them (_derive.py).

The parsers are fed what the fix modules render (so the two cannot drift), then broken,
truncated and garbage files; gather runs on copies of the generated snapshots.
"""
import json
import os
import shutil

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.baseline_facts import GPU0, NIC, healthy_facts

from ansible_collections.gpuhost.baseline.plugins.module_utils.fix import cpu as _fix_cpu
from ansible_collections.gpuhost.baseline.plugins.module_utils.fix import pcie as _fix_pcie
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import persist as _persist
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive import derive
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.gather import gather_facts
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_load import load_catalogue
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root

PARAMS = dict(load_catalogue().profile("amd-epyc-nvidia").params)
A, B, BRIDGE = "0000:43:00.0", "0000:49:00.0", "0000:42:00.0"


def _entries():
    return _fix_pcie.merge_entries({}, {
        (A, _fix_pcie.DEVCTL_REG): (5 << 12, _fix_pcie.READRQ_MASK),
        (B, _fix_pcie.DEVCTL_REG): ((5 << 12) | (1 << 5), _fix_pcie.READRQ_MASK | _fix_pcie.PAYLOAD_MASK),
        (BRIDGE, _fix_pcie.ACSCTL_REG): (0, _fix_pcie.ACS_REDIRECT_MASK),
    })


# -- pure parsers ---------------------------------------------------------------------------

def test_pcie_script_round_trip_and_device_settings():
    text = _fix_pcie.render_script(_entries())
    entries, bad = _persist.parse_pcie_script_lines(text)
    assert entries == _entries() and bad == []
    assert _fix_pcie.parse_script is _persist.parse_pcie_script
    assert _persist.pcie_device_settings(entries) == {
        A: {"max_read_request": 4096, "max_payload": None, "acs_request_redirect": None,
            "acs_completion_redirect": None},
        B: {"max_read_request": 4096, "max_payload": 256, "acs_request_redirect": None,
            "acs_completion_redirect": None},
        BRIDGE: {"max_read_request": None, "max_payload": None, "acs_request_redirect": False,
                 "acs_completion_redirect": False},
    }


def test_pcie_script_broken_lines_are_reported_not_guessed():
    good = "apply %s CAP_EXP+8.w 5000:7000" % A
    text = _fix_pcie.render_script(_entries()).replace(good, "apply %s CAP_EXP+8.w 50:7000" % A)
    text += "apply 0000:44:00.0 COMMAND.w 0004:0004\napply\n"
    entries, bad = _persist.parse_pcie_script_lines(text)
    assert (A, _fix_pcie.DEVCTL_REG) not in entries and (B, _fix_pcie.DEVCTL_REG) in entries
    assert len(bad) == 3 and bad[0].startswith("apply %s CAP_EXP+8.w 50:7000" % A)
    # a partial mask says nothing about the field
    assert _persist.pcie_device_settings({(A, _fix_pcie.DEVCTL_REG): (0x5000, 0x1000)})[A]["max_read_request"] is None
    # encodings 6 and 7 are reserved
    assert _persist.pcie_device_settings({(A, _fix_pcie.DEVCTL_REG): (0x7000, 0x7000)})[A]["max_read_request"] is None


@pytest.mark.parametrize("text", [None, "", "\x00\xff garbage", "apply apply apply", "#!/bin/sh\nexit 0\n"])
def test_pcie_script_garbage_gives_nothing(text):
    assert _persist.parse_pcie_script_lines(text)[0] == {}


def test_udev_rules_of_the_module_and_others():
    text = _fix_pcie.render_udev(_entries())
    assert _persist.parse_udev_rules(text, _persist.PCIE_SCRIPT_PATH) == sorted([A, B, BRIDGE])
    other = ('ACTION=="add", SUBSYSTEM=="pci", KERNEL=="0000:01:00.0", RUN+="/bin/true %k"\n'
             'ACTION=="add", SUBSYSTEM=="usb", KERNEL=="0000:02:00.0", RUN+="/usr/local/sbin/gpuhost-pcie-apply"\n'
             '# ACTION=="add", SUBSYSTEM=="pci", KERNEL=="0000:03:00.0", RUN+="/usr/local/sbin/gpuhost-pcie-apply"\n'
             'garbage "" ==\n\xff\n')
    assert _persist.parse_udev_rules(other, _persist.PCIE_SCRIPT_PATH) == []
    cpu = _fix_cpu.render_udev()
    assert _persist.parse_udev_rules(cpu, _persist.CPU_SCRIPT_PATH, subsystem="module") == ["*cpufreq*|*pstate*"]
    assert _persist.parse_udev_rules(cpu, _persist.CPU_SCRIPT_PATH) == []  # not a pci rule
    assert _persist.parse_udev_rules(cpu.replace("gpuhost-cpu-power", "other"), _persist.CPU_SCRIPT_PATH,
                                     subsystem="module") == []


def test_unit_parsing():
    for render, script in ((_fix_pcie.render_unit, _persist.PCIE_SCRIPT_PATH),
                           (_fix_cpu.render_unit, _persist.CPU_SCRIPT_PATH)):
        parsed = _persist.parse_unit(render())
        assert parsed == {"exec_start": [script], "wanted_by": ["multi-user.target"], "type": "oneshot"}
    text = ("[Unit]\nDescription=x\n[Service]\nExecStart=-/bin/a \\\n  --flag\nExecStart=\nExecStart=+/bin/b x\n"
            "; comment\n[Install]\nWantedBy=a.target \\\n b.target\n")
    assert _persist.parse_unit(text) == {"exec_start": ["/bin/b"], "wanted_by": ["a.target", "b.target"],
                                         "type": None}
    for garbage in ("", "\x00\xff", "[Unit]\nDescription=only\n", "ExecStart=/bin/x\n"):
        assert _persist.parse_unit(garbage) is None
    assert _persist.parse_unit(None) is None


def test_cpu_settings_line():
    settings = _fix_cpu.settings_of(governor="performance", epp="performance", boost=True, idle_latency_max_us=10)
    text = _fix_cpu.render_script(settings)
    assert _persist.cpu_script_settings(text) == settings
    assert _fix_cpu.script_settings is _persist.cpu_script_settings
    assert _persist.cpu_script_settings(text.replace('"governor"', '"governor')) is None
    assert _persist.cpu_script_settings(_persist.CPU_SETTINGS_MARK + "[1, 2]\n") is None
    assert _persist.cpu_script_settings("#!/bin/sh\n") is None
    kept, problems = _persist.checked_cpu_settings({"governor": 1, "boost": "yes", "idle_latency_max_us": True,
                                                    "epp": "power", "colour": "red"})
    assert kept == {"epp": "power"} and len(problems) == 4


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=400))
def test_parsers_never_raise(text):
    _persist.parse_pcie_script_lines(text)
    _persist.parse_udev_rules(text, _persist.PCIE_SCRIPT_PATH)
    _persist.parse_unit(text)
    _persist.checked_cpu_settings(_persist.cpu_script_settings(text))


# -- gather ----------------------------------------------------------------------------------

def _copy(snapshot_trees, name, tmp_path):
    root = str(tmp_path / name)
    shutil.copytree(snapshot_trees[name], root, symlinks=True)
    return root


def _write(root, path, text):
    real = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(real), exist_ok=True)
    if os.path.lexists(real):
        os.unlink(real)
    with open(real, "wb") as handle:
        handle.write(text if isinstance(text, bytes) else text.encode("utf-8"))


def test_gather_incident_has_nothing_and_no_errors(snapshot_trees):
    root = Root(snapshot_trees["incident"])
    facts = _persist.gather(root)
    assert facts["pcie"]["devices"] == {} and not facts["pcie"]["active"] and not facts["pcie"]["enabled"]
    assert facts["pcie"]["script"] == {"path": _persist.PCIE_SCRIPT_PATH, "present": False, "managed": False,
                                       "entries": 0, "executable": None}
    assert facts["cpu_power"]["settings"] is None and not facts["cpu_power"]["active"]
    assert facts["cpu_power"]["udev"] == {"path": _persist.CPU_UDEV_PATH, "present": False, "modules": []}
    assert root.errors == []


def test_gather_healthy_reads_what_the_modules_wrote(snapshot_trees):
    root = Root(snapshot_trees["healthy"])
    facts = _persist.gather(root)
    assert root.errors == []
    pcie = facts["pcie"]
    assert pcie["active"] and pcie["enabled"] and pcie["unit"]["runs_script"] and pcie["script"]["entries"] == 10
    assert len(pcie["devices"]) == 10
    assert all(d["max_read_request"] == 4096 and d["udev"] for d in pcie["devices"].values())
    cpu = facts["cpu_power"]
    assert cpu["active"] and cpu["settings"] == {"governor": "performance", "epp": "performance", "boost": True,
                                                 "idle_latency_max_us": 100}
    assert cpu["udev"] == {"path": _persist.CPU_UDEV_PATH, "present": True, "modules": ["*cpufreq*|*pstate*"]}


def test_gather_broken_files(snapshot_trees, tmp_path):
    root = _copy(snapshot_trees, "healthy", tmp_path)
    _write(root, _persist.PCIE_SCRIPT_PATH, b"#!/bin/sh\nsetpci -s 43:00.0 CAP_EXP+8.w=5000:7000\n")
    _write(root, _persist.CPU_SCRIPT_PATH, _persist.CPU_SETTINGS_MARK + '{"governor": 7, "boost": true}\n')
    os.unlink(os.path.join(root, _persist.CPU_WANTS_LINK.lstrip("/")))
    os.unlink(os.path.join(root, _persist.PCIE_UNIT_PATH.lstrip("/")))
    os.symlink("/dev/null", os.path.join(root, _persist.PCIE_UNIT_PATH.lstrip("/")))
    reader = Root(root)
    facts = _persist.gather(reader)
    assert facts["pcie"]["devices"] == {} and not facts["pcie"]["script"]["managed"]
    assert facts["pcie"]["unit"]["masked"] and not facts["pcie"]["enabled"] and not facts["pcie"]["active"]
    assert facts["cpu_power"]["settings"] == {"boost": True} and not facts["cpu_power"]["enabled"]
    reasons = dict((e["path"], e["reason"]) for e in reader.errors)
    assert "not written by gpuhost.baseline.pcie_tune" in reasons[_persist.PCIE_SCRIPT_PATH]
    assert "governor is 7, not a str" in reasons[_persist.CPU_SCRIPT_PATH]
    assert all(e["subsystem"] == "persistence" for e in reader.errors)


def test_gather_garbage_unit_and_truncated_script(snapshot_trees, tmp_path):
    root = _copy(snapshot_trees, "healthy", tmp_path)
    script = _fix_pcie.render_script(_entries())
    _write(root, _persist.PCIE_SCRIPT_PATH, script[:script.index("apply %s" % B) + 20])
    _write(root, _persist.CPU_UNIT_PATH, b"\xff\xfe\x00garbage\n")
    reader = Root(root)
    facts = _persist.gather(reader)
    assert list(facts["pcie"]["devices"]) == [BRIDGE, A]  # B was cut off
    assert facts["cpu_power"]["unit"]["present"] and not facts["cpu_power"]["unit"]["runs_script"]
    assert not facts["cpu_power"]["active"]
    paths = [e["path"] for e in reader.errors]
    assert _persist.PCIE_SCRIPT_PATH in paths and _persist.CPU_UNIT_PATH in paths


def test_facts_document_has_the_section(snapshot_trees):
    facts = gather_facts(Root(snapshot_trees["healthy"]), ["persistence"])
    assert facts["gathered"] == ["persistence"] and facts["persistence"]["pcie"]["active"]
    json.dumps(facts)


# -- derived boot state ------------------------------------------------------------------------

def _derived(facts, **params):
    p = dict(PARAMS)
    p.update(params)
    return derive(facts, p)["derived"]


def _sysctl(facts, short):
    return _derived(facts)["kernel"]["sysctl_boot"][short]


def test_sysctl_boot_sources_in_systemd_order():
    facts = healthy_facts()
    assert _sysctl(facts, "numa_balancing")["problems"] == []
    del facts["kernel"]["sysctl_persisted"]["kernel.numa_balancing"]
    item = _sysctl(facts, "numa_balancing")
    assert item["boot"] == 1 and "would be lost at reboot" in item["problems"][0]
    facts["kernel"]["configured_cmdline"]["params"]["numa_balancing"] = "disable"
    assert _sysctl(facts, "numa_balancing")["problems"] == []
    # sysctl.* is applied after numa_balancing= and so wins
    facts["kernel"]["configured_cmdline"]["params"]["sysctl.kernel/numa_balancing"] = "1"
    assert _sysctl(facts, "numa_balancing")["boot"] == 1
    # and a sysctl.d file wins over both
    facts["kernel"]["sysctl_persisted"]["kernel.numa_balancing"] = {"value": "0", "file": "/etc/sysctl.d/x.conf"}
    assert _sysctl(facts, "numa_balancing")["problems"] == []
    facts["numa"]["node_count"] = 1
    del facts["kernel"]["sysctl_persisted"]["kernel.numa_balancing"]
    del facts["kernel"]["configured_cmdline"]["params"]["sysctl.kernel/numa_balancing"]
    del facts["kernel"]["configured_cmdline"]["params"]["numa_balancing"]
    assert _sysctl(facts, "numa_balancing")["boot"] == 0  # a one-node kernel never turns it on


def test_sysctl_boot_runtime_wrong_too_and_garbage():
    facts = healthy_facts()
    facts["kernel"]["sysctl"]["swappiness"] = 60
    del facts["kernel"]["sysctl_persisted"]["vm.swappiness"]
    (problem,) = _sysctl(facts, "swappiness")["problems"]
    assert "would be 60 after a reboot, wanted at most 10" in problem and "lost" not in problem
    facts["kernel"]["sysctl_persisted"]["vm.swappiness"] = {"value": "ten", "file": "/etc/sysctl.d/x.conf"}
    assert "not an integer" in _sysctl(facts, "swappiness")["problems"][0]
    assert _derived(facts, swappiness_max=None)["kernel"]["sysctl_boot"]["swappiness"]["problems"] is None
    facts["kernel"]["sysctl_persisted"] = None
    item = _sysctl(facts, "zone_reclaim_mode")
    assert item["problems"] is None and "sysctl_persisted missing" in item["reason"]
    facts = healthy_facts()
    facts["numa"]["node_count"] = None
    del facts["kernel"]["sysctl_persisted"]["kernel.numa_balancing"]
    assert _sysctl(facts, "numa_balancing")["problems"] is None


def _cpu_boot(facts, **params):
    cpu = _derived(facts, **params)["cpu"]
    return cpu["power_boot_problems"], cpu["power_boot_reason"]


def _no_cpu_unit(facts):
    facts["persistence"]["cpu_power"].update(enabled=False, active=False)


@pytest.mark.parametrize("params,driver,ok", [
    ({"idle": "poll"}, "acpi_idle", True),
    ({"cpuidle.off": "1"}, "acpi_idle", True),          # C1 (1 us) is within 100 us
    ({"idle": "halt"}, "acpi_idle", True),
    ({"processor.max_cstate": "1"}, "acpi_idle", True),  # C2 is state 2
    ({"processor.max_cstate": "2"}, "acpi_idle", False),
    ({"processor.max_cstate": "1"}, "intel_idle", False),  # processor.* only binds acpi_idle
    ({"intel_idle.max_cstate": "1"}, "intel_idle", True),
    ({"intel_idle.max_cstate": "0"}, "intel_idle", False),  # intel_idle off, acpi_idle takes over
    ({"idle": "nomwait"}, "acpi_idle", False),
])
def test_cpu_idle_bound_from_the_command_line(params, driver, ok):
    facts = healthy_facts()
    _no_cpu_unit(facts)
    facts["kernel"]["configured_cmdline"]["params"].update(params)
    facts["kernel"]["configured_cmdline"]["params"]["cpufreq.default_governor"] = "performance"
    facts["cpu"]["cpuidle"]["driver"] = driver
    problems, reason = _cpu_boot(facts)
    assert reason is None
    assert (problems == []) is ok, problems


def test_cpu_boot_problems():
    facts = healthy_facts()
    assert _cpu_boot(facts) == ([], None)
    facts["persistence"]["cpu_power"]["settings"]["idle_latency_max_us"] = 500
    (problem,) = _cpu_boot(facts)[0]
    assert "disables only states above 500 us" in problem and "which would be lost at reboot" in problem
    assert _cpu_boot(facts, idle_latency_max_us=500) == ([], None)
    facts = healthy_facts()
    facts["persistence"]["cpu_power"]["settings"]["governor"] = "powersave"
    facts["cpu"]["cpufreq"]["governor"] = {"powersave": 64}
    (problem,) = _cpu_boot(facts)[0]
    assert "sets governor powersave" in problem and "lost" not in problem
    facts["kernel"]["configured_cmdline"]["params"]["cpufreq.default_governor"] = "performance"
    assert _cpu_boot(facts) == ([], None)
    # the unit sets performance, but nothing runs it again when acpi-cpufreq (a module) loads after it
    facts = healthy_facts()
    facts["persistence"]["cpu_power"]["udev"] = {"path": _persist.CPU_UDEV_PATH, "present": False, "modules": []}
    (problem,) = _cpu_boot(facts)[0]
    assert "no udev rule runs /usr/local/sbin/gpuhost-cpu-power" in problem and "default governor" in problem
    facts["kernel"]["configured_cmdline"]["params"]["cpufreq.default_governor"] = "performance"
    assert _cpu_boot(facts) == ([], None)
    facts = healthy_facts()
    del facts["persistence"]["cpu_power"]["udev"]  # facts of an older collection version: same finding
    assert "no udev rule" in _cpu_boot(facts)[0][0]
    facts = healthy_facts()
    facts["persistence"]["cpu_power"]["unit"]["masked"] = True
    facts["persistence"]["cpu_power"]["active"] = False
    assert all("masked" in p for p in _cpu_boot(facts)[0])
    facts["cpu"]["cpufreq"]["policies"] = 0
    facts["cpu"]["cpuidle"]["states"] = []
    assert _cpu_boot(facts) == ([], None)  # a VM without cpufreq and cpuidle has nothing to persist
    facts["cpu"]["cpuidle"]["states"] = None
    assert _cpu_boot(facts)[0] is None
    del facts["persistence"]
    assert "not gathered" in _cpu_boot(facts)[1]


def _peer(facts, address):
    return [p for p in _derived(facts)["pcie"]["peer_devices"] if p["address"] == address][0]


def test_pcie_boot_problems():
    facts = healthy_facts()
    assert _peer(facts, GPU0)["boot_problems"] == [] and _peer(facts, GPU0)["boot_max_read_request"] == 4096
    facts["persistence"]["pcie"]["devices"][NIC]["max_read_request"] = 512
    assert "sets MaxReadReq 512 B, below 4096 B" in _peer(facts, NIC)["boot_problems"][0]
    facts["persistence"]["pcie"].update(enabled=False, active=False)
    (problem,) = _peer(facts, GPU0)["boot_problems"]
    assert "is not enabled" in problem and "the running 4096 B would be lost at reboot" in problem
    facts["persistence"]["pcie"]["script"]["present"] = False
    facts["persistence"]["pcie"]["devices"] = {}
    # nothing sets it at boot, but no evidence the running value was set at runtime (PCI-008 fails only on evidence)
    assert _peer(facts, GPU0)["boot_problems"] == [] and "is not installed" in _peer(facts, GPU0)["boot_note"]
    facts["persistence"]["pcie"]["devices"] = ["garbage"]
    assert _peer(facts, GPU0)["boot_problems"] == [] and "no evidence" in _peer(facts, GPU0)["boot_note"]
    facts["persistence"] = None
    assert _peer(facts, GPU0)["boot_problems"] is None and "not gathered" in _peer(facts, GPU0)["boot_reason"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["pcie", "cpu_power"]), st.text(max_size=12),
       st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=8))
def test_derive_survives_garbage_persistence(part, key, value):
    facts = healthy_facts()
    facts["persistence"][part][key or "x"] = value
    json.dumps(derive(facts, PARAMS)["derived"])
