"""After remediate.yml: the guest's real kernel state is the baseline, and stays so at boot.

Runs as molecule's testinfra verifier, after check, converge and idempotence. ``host`` is the
guest (over SSH, as root); prepare's starting state and the runs' reports come from the
scenario's ephemeral directory (molecule/shared/vmverify.py).
"""
import os
import re

import pytest

import vmverify as vm

HOST = "gpuhost-remediate"

# The scenario verifies twice: these tests after idempotence; after the tuned side effect (which
# replaces the boot unit by tuned's child profile) only tests/test_tuned.py runs.
pytestmark = pytest.mark.skipif(vm.tuned_results() is not None,
                                reason="the tuned side effect ran: tests/test_tuned.py verifies this state")
SYSCTL_D = "/etc/sysctl.d/90-gpuhost-baseline.conf"


@pytest.fixture(scope="module")
def start():
    return vm.prepared()


@pytest.fixture(scope="module")
def converge_report():
    runs = vm.report_dirs("apply")
    # converge, then idempotence
    assert len(runs) == 2, "apply runs: %s" % runs
    return vm.host_report(vm.load_report(runs[0]), HOST)


@pytest.fixture(scope="module")
def idempotence_report():
    return vm.host_report(vm.load_report(vm.report_dirs("apply")[-1]), HOST)


@pytest.fixture(scope="module")
def targets(converge_report, start):
    """Endpoints the PCIe rules judged and remediate raised: the guest has no GPU, so PCI-002's NICs."""
    before = converge_report["before"]
    assert set(vm.statuses(before, "PCI-001").values()) == {"not_applicable"}
    nics = vm.statuses(before, "PCI-002")
    assert set(nics.values()) == {"fail"}
    # the collection's kind 'nic' (class 0x0200): the virtio-net and the e1000e; virtio-blk and nvme are not judged
    assert sorted(start["endpoints"][addr][0] for addr in nics) == sorted([vm.VIRTIO_NET, vm.E1000E])
    return sorted(nics)


def test_numa_balancing_off_now_and_at_boot(host, start):
    assert start["numa_balancing"] == 1
    assert vm.sysfs(host, "/proc/sys/kernel/numa_balancing") == "0"
    conf = host.file(SYSCTL_D)
    assert conf.is_file and conf.user == "root" and conf.mode == 0o644
    assert re.search(r"^kernel\.numa_balancing\s*=\s*0\s*$", conf.content_string, re.M), conf.content_string
    # the swappiness drift of a stock Debian (60) was fixed the same way
    assert vm.sysfs(host, "/proc/sys/vm/swappiness") == "10"
    assert re.search(r"^vm\.swappiness\s*=\s*10\s*$", conf.content_string, re.M)


def test_max_read_request_4096_on_judged_endpoints_other_bits_unchanged(host, start, targets):
    for address, (ident, before) in sorted(start["endpoints"].items()):
        now = vm.devctl(host, address)
        if address in targets:
            assert before & vm.READRQ_MASK in (0x0000, 0x2000), "prepare left %s at %#06x" % (address, before)
            assert now == (before & ~vm.READRQ_MASK) | vm.READRQ_4096, "%s %s: Device Control %#06x -> %#06x" % (
                address, ident, before, now)
            assert vm.lspci_max_read_request(host, address) == 4096
        else:
            # not a GPU or NIC: remediate leaves it alone (still prepare's 512 B)
            assert now == before, "%s %s was not judged but changed: %#06x -> %#06x" % (address, ident, before, now)
            assert vm.lspci_max_read_request(host, address) == 512


def test_deep_idle_state_disabled_on_both_cpus_shallow_ones_kept(host, start):
    assert sorted(start["cpus"]) == ["cpu0", "cpu1"]
    for cpu, state in sorted(start["cpus"].items()):
        assert state["c2_disable"] == 0
        base = "/sys/devices/system/cpu/%s/cpuidle" % cpu
        assert vm.sysfs(host, base + "/state2/name") == "C2"
        assert vm.sysfs(host, base + "/state2/latency") == "400"
        assert vm.sysfs(host, base + "/state2/disable") == "1"
        # POLL (0 us) and C1 (1 us) are within idle_latency_max_us (100 us)
        assert vm.sysfs(host, base + "/state0/disable") == "0"
        assert vm.sysfs(host, base + "/state1/disable") == "0"


def test_governor_performance_on_both_cpus(host, start):
    for cpu, state in sorted(start["cpus"].items()):
        assert state["governor"] != "performance"
        assert vm.sysfs(host, "/sys/devices/system/cpu/%s/cpufreq/scaling_governor" % cpu) == "performance"


def test_pcie_boot_unit_installed_and_enabled_for_the_judged_endpoints(host, targets):
    unit = host.service("gpuhost-pcie.service")
    assert unit.is_enabled
    assert host.file("/etc/systemd/system/multi-user.target.wants/gpuhost-pcie.service").is_symlink
    script = host.file("/usr/local/sbin/gpuhost-pcie-apply")
    assert script.is_file and script.mode & 0o111
    entries = re.findall(r"^apply (\S+) CAP_EXP\+8\.w 5000:7000", script.content_string, re.M)
    assert sorted(entries) == targets
    udev = host.file("/etc/udev/rules.d/90-gpuhost-pcie.rules").content_string
    assert sorted(re.findall(r'KERNEL=="([^"]+)"', udev)) == targets
    # the script does what the unit will do at boot: run it, nothing changes (values already set)
    before = dict((a, vm.devctl(host, a)) for a in targets)
    host.check_output("/usr/local/sbin/gpuhost-pcie-apply")
    assert dict((a, vm.devctl(host, a)) for a in targets) == before


def test_cpu_power_unit_installed_and_enabled(host):
    assert host.service("gpuhost-cpu-power.service").is_enabled
    script = host.file("/usr/local/sbin/gpuhost-cpu-power").content_string
    assert '"governor": "performance"' in script and '"idle_latency_max_us": 100' in script
    # acpi-cpufreq is a module in the guest, loaded by udev after the unit may have run: the rule
    # runs the script again when it loads
    assert host.run("lsmod | grep -q '^acpi_cpufreq '").rc == 0
    rule = host.file("/etc/udev/rules.d/90-gpuhost-cpu-power.rules").content_string
    assert 'SUBSYSTEM=="module"' in rule and 'RUN+="/usr/local/sbin/gpuhost-cpu-power"' in rule


def test_grub_holds_the_profile_cmdline_and_update_grub_ran(host):
    default = host.file("/etc/default/grub").content_string
    match = re.search(r'^GRUB_CMDLINE_LINUX_DEFAULT="([^"]*)"', default, re.M)
    assert match and "iommu=pt" in match.group(1).split(), default
    # generic-nvidia-inference excludes CPU-001; the guest is an AMD family 16 CPU, not Zen: no amd_pstate
    assert "amd_pstate" not in default
    backups = host.run("ls /etc/default/ | grep -c '^grub\\.[0-9]*\\..*~$'").stdout.strip()
    assert int(backups or 0) >= 1, "no backup of /etc/default/grub"
    # update-grub regenerated grub.cfg after the edit: its kernel lines carry the parameter
    cfg = host.file("/boot/grub/grub.cfg")
    assert cfg.is_file
    linux_lines = [line.split() for line in cfg.content_string.splitlines() if line.strip().startswith("linux")]
    normal = [words for words in linux_lines if "single" not in words]
    # recovery entries ("single") are built from GRUB_CMDLINE_LINUX alone, without the _DEFAULT part
    assert normal and all("iommu=pt" in words for words in normal), linux_lines
    # QEMU boots with -kernel/-append: the running command line does not have it (until a real boot loader boots)
    assert "iommu=pt" not in vm.sysfs(host, "/proc/cmdline")


def test_report_before_after_pending_reboot(converge_report):
    before = converge_report["before"]
    assert converge_report["state"] == "audited"
    # PCI-008 is not among them: without the audit history nothing shows the NICs' values were set at runtime
    for rule in ("NUMA-001", "NUMA-006", "KERNEL-005", "KERNEL-007", "PCI-002", "CPU-003", "CPU-006",
                 "CPU-008", "IOMMU-001"):
        assert set(vm.statuses(before, rule).values()) == {"fail"}, (rule, vm.findings(before, rule))
    for rule in ("NUMA-001", "NUMA-006", "KERNEL-005", "KERNEL-007", "PCI-002", "PCI-008", "CPU-003", "CPU-006",
                 "CPU-008"):
        assert set(vm.statuses(converge_report, rule).values()) == {"pass"}, (rule, vm.findings(converge_report, rule))
    # the cmdline edit waits for a reboot; the report says so
    reboot = [p for p in converge_report["pending"] if p.get("kind") == "reboot"]
    assert reboot and any("iommu=pt" in p["message"] for p in reboot), converge_report["pending"]
    # no IOMMU in this q35 guest: passthrough is configured but IOMMU-001 cannot pass here
    assert vm.statuses(converge_report, "IOMMU-001") == {None: "fail"}


def test_nvidia_fixes_skipped_without_a_gpu(converge_report, idempotence_report):
    for view in (converge_report["before"], converge_report, idempotence_report):
        nvidia = [f for f in view["findings"] if f["area"] == "nvidia"]
        assert nvidia and set(f["status"] for f in nvidia) == {"not_applicable"}, nvidia
    # so the NVIDIA-004/NVIDIA-007 fix task had nothing to do: its condition lists failing NVIDIA rules
    assert not [f for f in converge_report["before"]["findings"]
                if f["id"] in ("NVIDIA-004", "NVIDIA-007") and f["status"] == "fail"]


def test_second_run_found_nothing_left_to_fix(converge_report, idempotence_report):
    fixed = dict(((f["id"], f["subject"]), f["status"]) for f in converge_report["findings"]
                 if f["id"] not in vm.MEMORY_RULES)
    again_before = dict(((f["id"], f["subject"]), f["status"]) for f in idempotence_report["before"]["findings"]
                        if f["id"] not in vm.MEMORY_RULES)
    assert again_before == fixed


def test_check_run_changed_nothing_it_reports(start):
    runs = vm.report_dirs("check")
    assert len(runs) == 1, runs
    report = vm.host_report(vm.load_report(runs[0]), HOST)

    # in --check the re-audit reads the untouched guest: every finding as before
    def view(findings):
        # free memory moves between the two reads, so the NUMA memory balance rules may flip
        return [(f["id"], f["subject"], f["status"]) for f in findings if f["id"] not in vm.MEMORY_RULES]

    assert view(report["findings"]) == view(report["before"]["findings"])
    assert set(vm.statuses(report, "PCI-002").values()) == {"fail"}
    observed = dict((f["subject"], f["observed"]) for f in vm.findings(report, "PCI-002"))
    assert observed == dict((a, 128 if start["endpoints"][a][0] == vm.E1000E else 512) for a in observed)


# -- gpuhost_prove (issue 39): the validate measurements before and after the fixes --------------------------------

def figures(view):
    return dict((entry["key"], entry) for entry in view["prove"]["figures"])


def test_prove_the_governor_fix_lifted_the_capped_clock_under_load(converge_report):
    # prepare.yml's powersave governor held both CPUs at the lowest P-state (1000 of 2000 MHz)
    (governors,) = vm.findings(converge_report["before"], "CPU-003")
    assert governors["observed"] == {"powersave": 2}, governors
    prove = converge_report["prove"]
    assert "CPU-003" in prove["fixes"] and prove["repeats"] == {"before": 2, "after": 2}, prove
    assert prove["reason"] is None, prove
    lowest = figures(converge_report)["cpu_freq/lowest"]
    assert (lowest["before"], lowest["after"], lowest["unit"], lowest["rule"]) == (1000.0, 2000.0, "MHz", "VAL-001")
    assert lowest["verdict"] == "better" and lowest["change_pct"] == 100.0, lowest
    assert vm.statuses(converge_report["before"], "VAL-001") == {"cpu0": "fail", "cpu1": "fail"}
    assert vm.statuses(converge_report, "VAL-001") == {"cpu0": "pass", "cpu1": "pass"}


def test_prove_reports_the_memory_figures_it_cannot_move(converge_report):
    # TCG's memory speed is the host's: the figures are reported with their noise, not expected to change
    for node in ("0", "1"):
        entry = figures(converge_report)["mem_bw/%s" % node]
        assert entry["unit"] == "GB/s" and entry["before"] > 0 and entry["after"] > 0, entry
        assert entry["noise"] is not None and entry["verdict"] in ("better", "worse", "within noise", "unchanged"), entry


def test_prove_judges_the_site_workloads_pass_fail_and_unknown_with_the_reason(converge_report):
    assert vm.statuses(converge_report, "VAL-012") == {"bench-above-floor": "pass", "bench-below-floor": "fail",
                                                       "bench-hung": "unknown", "bench-garbage": "unknown"}
    said = dict((f["subject"], f["message"]) for f in vm.findings(converge_report, "VAL-012"))
    assert "123.4 < 200" in said["bench-below-floor"], said
    assert "killed after 2 s" in said["bench-hung"], said
    assert "no line matched" in said["bench-garbage"] and "no figure here" in said["bench-garbage"], said
    above = figures(converge_report)["workload/bench-above-floor"]
    assert (above["before"], above["after"], above["verdict"]) == (123.4, 123.4, "within noise"), above
    assert "workload/bench-hung" not in figures(converge_report)


def test_prove_figures_in_the_host_page_and_the_metrics():
    run = vm.report_dirs("apply")[0]
    with open(os.path.join(run, "report.md")) as handle:
        page = handle.read()
    assert "### What the fixes delivered" in page
    assert "| lowest CPU clock under load (MHz) | VAL-001 | 1,000 | 2,000 | +1,000 (+100.0 %) | better |" in page
    with open(os.path.join(run, "metrics.prom")) as handle:
        series = handle.read()
    assert re.search(r'^gpuhost_baseline_prove_figure\{host="%s",origin="controller",figure="cpu_freq/lowest",'
                     r'unit="MHz",phase="before",cluster=""\} 1000(\.0)?$' % HOST, series, re.M), series


def test_prove_again_after_nothing_left_to_fix_and_not_in_check_mode(idempotence_report):
    lowest = figures(idempotence_report)["cpu_freq/lowest"]
    assert (lowest["before"], lowest["after"]) == (2000.0, 2000.0) and lowest["verdict"] in ("within noise", "unchanged")
    report = vm.host_report(vm.load_report(vm.report_dirs("check")[0]), HOST)
    assert report["prove"]["figures"] == [] and report["prove"]["reason"] == "not measured: --check runs no measurement"
