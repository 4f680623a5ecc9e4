"""After the tuned side effect: cpu_power's tuned route on Debian's own tuned package.

molecule/remediate/side_effect.yml enabled and started tuned (disabled in the image) with the
``balanced`` profile, put C2 and the governor out of baseline again, and ran cpu_power (persist
auto) in check mode between two fingerprints, for real, and again; then audit.yml
(reports/tuned-audit). What the runs returned is in ``<ephemeral>/tuned.json``. Skipped on the
scenario's first verify, before the side effect ran.
"""
import os
import re

import pytest

import vmverify as vm

HOST = "gpuhost-remediate"
PROFILE = "gpuhost-baseline"
# tuned 2.20 (bookworm) reads user profiles from /etc/tuned/<name> and ships its own in
# /usr/lib/tuned/<name>; 2.23 and later use .../profiles/<name>
CONF = "/etc/tuned/%s/tuned.conf" % PROFILE
CPUS = ("cpu0", "cpu1")

pytestmark = pytest.mark.skipif(vm.tuned_results() is None,
                                reason="the tuned side effect has not run yet (first verify)")


@pytest.fixture(scope="module")
def results():
    return vm.tuned_results()


def _active(host):
    out = host.check_output("tuned-adm active")
    match = re.search(r"^Current active profile: (.+)$", out, re.M)
    assert match, out
    return match.group(1).strip()


def _cpu_state(host):
    state = {}
    for cpu in CPUS:
        base = "/sys/devices/system/cpu/%s" % cpu
        state[cpu] = (vm.sysfs(host, base + "/cpufreq/scaling_governor"),
                      vm.sysfs(host, base + "/cpuidle/state2/disable"))
    return state


def test_side_effect_started_from_a_power_saving_profile(results):
    start = dict(line.split(" ", 1) for line in results["start"] if " " in line)
    assert start["active"] == "Current active profile: balanced", results["start"]
    assert start["tuned_version"].startswith("2."), results["start"]


def test_check_mode_changed_nothing(results):
    check = results["check"]
    assert check["changed"] is True and check["persist"] == "tuned", check
    assert check["tuned"]["path"] == CONF and check["tuned"]["active_before"] == "balanced"
    assert "tuned-adm profile %s" % PROFILE in check["commands"]
    # the diff shows the profile file and the active profile change
    headers = [entry.get("after_header") for entry in check["diff"]]
    assert CONF in headers and "/etc/tuned/active_profile" in headers, headers
    guard = results["guard"]
    assert guard["changed"] == [] and guard["added"] == [] and guard["removed"] == [], guard
    assert guard["counts"]["files"] > 100 and guard["counts"]["cpu"] >= 8, guard
    assert results["active_after_check"] == "Current active profile: balanced"


def test_child_profile_includes_a_performance_profile_debian_ships(host, results):
    apply = results["apply"]
    assert apply["changed"] is True and apply["persist"] == "tuned", apply
    assert apply["tuned"]["path"] == CONF
    conf = host.file(CONF)
    assert conf.is_file and conf.user == "root" and conf.mode == 0o644
    text = conf.content_string
    include = re.search(r"^include=(.+)$", text, re.M)
    assert include, text
    parents = include.group(1).split(",")
    assert parents == apply["tuned"]["include"]
    # balanced is not a performance profile: replaced by the first default parent Debian ships
    assert parents[0] in ("accelerator-performance", "latency-performance", "throughput-performance"), parents
    for parent in parents:
        assert host.file("/usr/lib/tuned/%s/tuned.conf" % parent).is_file
    assert re.search(r"^governor=performance$", text, re.M), text
    # C2 (400 us) is above idle_latency_max_us 100; POLL and C1 are not
    assert re.search(r"^/sys/devices/system/cpu/cpu\*/cpuidle/state2/disable=1$", text, re.M), text
    assert "state1/disable" not in text and "state0/disable" not in text
    assert '"idle_latency_max_us": 100' in text


def test_tuned_runs_the_child_profile(host):
    assert _active(host) == PROFILE
    assert host.file("/etc/tuned/active_profile").content_string.split() == [PROFILE]
    tuned = host.service("tuned.service")
    assert tuned.is_running and tuned.is_enabled


def test_governor_performance_and_c2_disabled(host):
    assert _cpu_state(host) == dict((cpu, ("performance", "1")) for cpu in CPUS)
    for cpu in CPUS:
        base = "/sys/devices/system/cpu/%s/cpuidle" % cpu
        assert vm.sysfs(host, base + "/state0/disable") == "0"
        assert vm.sysfs(host, base + "/state1/disable") == "0"


def test_competing_boot_unit_disabled(host, results):
    assert sorted(results["apply"]["tuned"]["disabled"]) == sorted([
        "/etc/systemd/system/multi-user.target.wants/gpuhost-cpu-power.service",
        "/etc/udev/rules.d/90-gpuhost-cpu-power.rules"])
    assert not host.service("gpuhost-cpu-power.service").is_enabled
    assert not host.file("/etc/systemd/system/multi-user.target.wants/gpuhost-cpu-power.service").exists
    assert not host.file("/etc/udev/rules.d/90-gpuhost-cpu-power.rules").exists
    # inert, not removed: persist systemd installs it again
    assert host.file("/etc/systemd/system/gpuhost-cpu-power.service").is_file
    assert host.file("/usr/local/sbin/gpuhost-cpu-power").is_file


def test_second_run_changed_nothing(results):
    again = results["again"]
    assert again["changed"] is False, again
    assert again["persist"] == "tuned" and again["tuned"]["active_before"] == PROFILE
    assert again["runtime_changes"] == [] and again["tuned"]["disabled"] == []


def test_tuned_itself_applies_the_settings(host):
    """tuned, not the module's own writes, holds the settings: drift them and restart tuned (what a
    boot does), the child profile puts them back."""
    host.check_output("for f in /sys/devices/system/cpu/cpu[01]/cpuidle/state2/disable; do echo 0 > $f; done; "
                      "echo schedutil | tee /sys/devices/system/cpu/cpu[01]/cpufreq/scaling_governor")
    assert _cpu_state(host) == dict((cpu, ("schedutil", "0")) for cpu in CPUS)
    host.check_output("systemctl restart tuned.service")
    assert _active(host) == PROFILE
    assert _cpu_state(host) == dict((cpu, ("performance", "1")) for cpu in CPUS)


def test_audit_with_tuned_passes_cpu_008_and_009():
    report = vm.host_report(vm.load_report(os.path.join(vm.ephemeral(), "reports", "tuned-audit")), HOST)
    for rule in ("CPU-003", "CPU-006", "CPU-008", "CPU-009"):
        assert set(vm.statuses(report, rule).values()) == {"pass"}, (rule, vm.findings(report, rule))
    assert [f["observed"] for f in vm.findings(report, "CPU-009")] == [PROFILE]
