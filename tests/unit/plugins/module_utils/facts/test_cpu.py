# -*- coding: utf-8 -*-
"""CPU facts: cpuinfo, cpulists, cpufreq/cpuidle summaries over trees, broken input, fuzzing, live host."""

from __future__ import absolute_import, division, print_function

import json
import time

import pytest
from hypothesis import given, settings, strategies as st

from helpers.tree import write_tree

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts import cpu as _cpu
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.cpu import (
    boost_state,
    count_values,
    format_cpulist,
    parse_cpuinfo,
    parse_cpulist,
)
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root

FUZZ = settings(max_examples=200, deadline=None)
CPU = "/sys/devices/system/cpu"


class CountingRoot(Root):
    """A Root that remembers every path it opened."""

    def __init__(self, *args, **kwargs):
        Root.__init__(self, *args, **kwargs)
        self.opened = []

    def read_bytes(self, path, subsystem, optional=False, **kwargs):
        self.opened.append(path)
        return Root.read_bytes(self, path, subsystem, optional=optional, **kwargs)


# -- /proc/cpuinfo samples (kernel format: "key<TAB>: value", blank line between CPUs) ----------------

EPYC_FLAGS = ("fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht "
              "syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good amd_lbr_v2 nopl nonstop_tsc cpuid "
              "extd_apicid aperfmperf rapl pni pclmulqdq monitor ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe "
              "popcnt aes xsave avx f16c rdrand lahf_lm cmp_legacy svm extapic cr8_legacy abm sse4a misalignsse "
              "3dnowprefetch osvw ibs skinit wdt tce topoext perfctr_core perfctr_nb bpext perfctr_llc mwaitx cpb "
              "cat_l3 cdp_l3 hw_pstate ssbd mba perfmon_v2 ibrs ibpb stibp ibrs_enhanced vmmcall fsgsbase bmi1 avx2 "
              "smep bmi2 erms invpcid cqm rdt_a avx512f avx512dq rdseed adx smap avx512ifma clflushopt clwb "
              "avx512cd sha_ni avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves avx_vnni avx512_bf16 clzero irperf "
              "xsaveerptr rdpru wbnoinvd amd_ppin cppc arat npt lbrv svm_lock nrip_save tsc_scale vmcb_clean "
              "flushbyasid decodeassists pausefilter pfthreshold avic v_vmsave_vmload vgif x2avic v_spec_ctrl vnmi "
              "avx512vbmi umip pku ospke avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni avx512_bitalg "
              "avx512_vpopcntdq rdpid bus_lock_detect movdiri movdir64b overflow_recov succor smca fsrm "
              "avx512_vp2intersect flush_l1d")

EPYC_BLOCK = """processor\t: {cpu}
vendor_id\t: AuthenticAMD
cpu family\t: 26
model\t\t: 2
model name\t: AMD EPYC 9335 32-Core Processor
stepping\t: 1
microcode\t: 0xb002116
cpu MHz\t\t: 3000.000
cache size\t: 1024 KB
physical id\t: {socket}
siblings\t: 64
core id\t\t: {core}
cpu cores\t: 32
apicid\t\t: {apic}
initial apicid\t: {apic}
fpu\t\t: yes
fpu_exception\t: yes
cpuid level\t: 16
wp\t\t: yes
flags\t\t: {flags}
bugs\t\t: sysret_ss_attrs spectre_v1 spectre_v2 spec_store_bypass srso
bogomips\t: 5990.66
TLB size\t: 192 4K pages
clflush size\t: 64
cache_alignment\t: 64
address sizes\t: 52 bits physical, 57 bits virtual
power management: ts ttp tm hwpstate cpb eff_freq_ro [13] [14] [15]

"""

XEON_FLAGS = ("fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush dts acpi mmx fxsr sse sse2 ss "
              "ht tm pbe syscall nx pdpe1gb rdtscp lm constant_tsc art arch_perfmon pebs bts rep_good nopl xtopology "
              "nonstop_tsc cpuid aperfmperf tsc_known_freq pni pclmulqdq dtes64 monitor ds_cpl vmx smx est tm2 ssse3 sdbg fma "
              "cx16 xtpr pdcm pcid dca sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand lahf_lm "
              "abm 3dnowprefetch cpuid_fault epb cat_l3 cat_l2 cdp_l3 invpcid_single intel_ppin cdp_l2 ssbd mba ibrs ibpb "
              "stibp ibrs_enhanced tpr_shadow flexpriority ept vpid ept_ad fsgsbase tsc_adjust bmi1 avx2 smep bmi2 erms "
              "invpcid cqm rdt_a avx512f avx512dq rdseed adx smap avx512ifma clflushopt clwb intel_pt avx512cd sha_ni "
              "avx512bw avx512vl xsaveopt xsavec xgetbv1 xsaves cqm_llc cqm_occup_llc cqm_mbm_total cqm_mbm_local "
              "split_lock_detect avx_vnni avx512_bf16 wbnoinvd dtherm ida arat pln pts hfi vnmi avx512vbmi umip pku ospke "
              "waitpkg avx512_vbmi2 gfni vaes vpclmulqdq avx512_vnni avx512_bitalg tme avx512_vpopcntdq la57 rdpid "
              "bus_lock_detect cldemote movdiri movdir64b enqcmd fsrm md_clear serialize tsxldtrk pconfig arch_lbr ibt "
              "amx_bf16 avx512_fp16 amx_tile amx_int8 flush_l1d arch_capabilities")
XEON_VMX_FLAGS = ("vnmi preemption_timer posted_intr invvpid ept_x_only ept_ad ept_1gb flexpriority apicv tsc_offset vtpr mtf "
                  "vapic ept vpid unrestricted_guest vapic_reg vid ple shadow_vmcs pml ept_mode_based_exec tsc_scaling "
                  "usr_wait_pause notify_vm_exiting ipi_virt")

XEON_BLOCK = """processor\t: {cpu}
vendor_id\t: GenuineIntel
cpu family\t: 6
model\t\t: 143
model name\t: Intel(R) Xeon(R) Platinum 8480+
stepping\t: 8
microcode\t: 0x2b000571
cpu MHz\t\t: 2000.000
cache size\t: 107520 KB
physical id\t: {socket}
siblings\t: 112
core id\t\t: {core}
cpu cores\t: 56
apicid\t\t: {apic}
initial apicid\t: {apic}
fpu\t\t: yes
fpu_exception\t: yes
cpuid level\t: 32
wp\t\t: yes
flags\t\t: {flags}
vmx flags\t: {vmx_flags}
bugs\t\t: spectre_v1 spectre_v2 spec_store_bypass swapgs eibrs_pbrsb
bogomips\t: 4000.00
clflush size\t: 64
cache_alignment\t: 64
address sizes\t: 46 bits physical, 57 bits virtual
power management:

"""


def epyc_cpuinfo(sockets=2, cores=32, threads=2):
    """cpuinfo of an EPYC 9335 host numbered like Linux does: first threads of all cores, then siblings."""
    blocks = []
    cpu = 0
    for thread in range(threads):
        for socket in range(sockets):
            for core in range(cores):
                apic = socket * 128 + core * 2 + thread
                blocks.append(EPYC_BLOCK.format(cpu=cpu, socket=socket, core=core, apic=apic, flags=EPYC_FLAGS))
                cpu += 1
    return "".join(blocks)


def xeon_cpuinfo(sockets=2, cores=4, threads=2):
    blocks = []
    cpu = 0
    for thread in range(threads):
        for socket in range(sockets):
            for core in range(cores):
                blocks.append(XEON_BLOCK.format(cpu=cpu, socket=socket, core=core, apic=socket * 128 + core * 2 + thread,
                                                flags=XEON_FLAGS, vmx_flags=XEON_VMX_FLAGS))
                cpu += 1
    return "".join(blocks)


def test_cpuinfo_epyc_9335():
    info = parse_cpuinfo(epyc_cpuinfo())
    assert info == {"vendor": "AuthenticAMD", "family": 26, "model": 2,
                    "model_name": "AMD EPYC 9335 32-Core Processor",
                    "sockets": 2, "cores": 64, "threads": 128}


def test_cpuinfo_xeon():
    info = parse_cpuinfo(xeon_cpuinfo())
    assert info == {"vendor": "GenuineIntel", "family": 6, "model": 143,
                    "model_name": "Intel(R) Xeon(R) Platinum 8480+",
                    "sockets": 2, "cores": 8, "threads": 16}


def test_cpuinfo_smt_off_and_bytes():
    info = parse_cpuinfo(epyc_cpuinfo(sockets=1, cores=32, threads=1).encode())
    assert (info["sockets"], info["cores"], info["threads"]) == (1, 32, 32)


def test_cpuinfo_768_cpus_is_fast():
    text = epyc_cpuinfo(sockets=2, cores=192, threads=2)
    start = time.perf_counter()
    info = parse_cpuinfo(text)
    elapsed = time.perf_counter() - start
    assert (info["sockets"], info["cores"], info["threads"]) == (2, 384, 768)
    # one linear pass over ~1.6 MB: a few tens of milliseconds; a quadratic parser takes seconds
    assert elapsed < 1.0, elapsed


def test_cpuinfo_truncated_mid_block():
    text = epyc_cpuinfo(sockets=1, cores=2, threads=1)
    cut = text[:text.rindex("physical id")]
    info = parse_cpuinfo(cut)
    assert info["threads"] == 2 and info["sockets"] == 1 and info["cores"] == 1


def test_cpuinfo_without_topology_or_vendor():
    arm = "processor\t: 0\nBogoMIPS\t: 50.00\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\n\n" \
          "processor\t: 1\nBogoMIPS\t: 50.00\n"
    info = parse_cpuinfo(arm)
    assert info == {"vendor": None, "family": None, "model": None, "model_name": None,
                    "sockets": None, "cores": None, "threads": 2}


@pytest.mark.parametrize("data", [None, "", b"", "garbage\n\n\n", b"\x89PNG\r\n\x1a\n\x00\xff", 12,
                                  "cpu family\t: twenty-six\nmodel\t: x\n"])
def test_cpuinfo_broken(data):
    info = parse_cpuinfo(data)
    assert info["family"] is None and info["model"] is None and info["threads"] is None


@FUZZ
@given(st.one_of(st.text(), st.binary(),
                 st.lists(st.sampled_from(["processor\t: 0\n", "vendor_id\t: AuthenticAMD\n", "cpu family\t: 26\n",
                                           "model\t\t: 2\n", "model\t\t: x\n", "physical id\t: 0\n", "physical id\t: 1\n",
                                           "core id\t\t: 3\n", "\n", ":", "model name\t:\n", "\x00"]),
                          max_size=40).map("".join)))
def test_cpuinfo_fuzz(data):
    info = parse_cpuinfo(data)
    assert set(info) == {"vendor", "family", "model", "model_name", "sockets", "cores", "threads"}
    for key in ("family", "model", "sockets", "cores", "threads"):
        assert info[key] is None or isinstance(info[key], int)


# -- cpulists ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, cpus", [
    ("0-31,64-95\n", list(range(32)) + list(range(64, 96))),
    ("0", [0]),
    ("0,2,4-5", [0, 2, 4, 5]),
    ("\n", []),
    ("", []),
    ("0-7:2/4", [0, 1, 4, 5]),
    ("5-3", None),
    ("a-b", None),
    ("0-", None),
    ("1,,2", None),
    ("0-3:0/4", None),
    (None, None),
])
def test_parse_cpulist(text, cpus):
    assert parse_cpulist(text) == cpus


def test_format_cpulist():
    assert format_cpulist(list(range(32)) + list(range(64, 96))) == "0-31,64-95"
    assert format_cpulist([5, 0, 1, 2, 1]) == "0-2,5"
    assert format_cpulist([]) == ""


@FUZZ
@given(st.lists(st.integers(min_value=0, max_value=1023), max_size=200))
def test_cpulist_roundtrip(cpus):
    assert parse_cpulist(format_cpulist(cpus)) == sorted(set(cpus))


@FUZZ
@given(st.one_of(st.text(), st.binary()))
def test_cpulist_fuzz(data):
    result = parse_cpulist(data)
    assert result is None or all(isinstance(cpu, int) for cpu in result)


# -- summaries ----------------------------------------------------------------------------------------

def test_count_values_and_boost_logic():
    assert count_values(["performance"] * 3 + ["powersave", None]) == {"performance": 3, "powersave": 1}
    assert count_values([3700000, 3700000]) == {"3700000": 2}
    assert count_values([]) == {}
    assert boost_state(1, True, [0]) is True
    assert boost_state(0, None, []) is False
    assert boost_state(None, True, [1]) is False
    assert boost_state(None, False, []) is True
    assert boost_state(None, None, [1, 1]) is True
    assert boost_state(None, None, [1, 0]) is False
    assert boost_state(None, None, []) is None


# -- trees ------------------------------------------------------------------------------------------

IDLE_STATES = (
    ("POLL", "CPUIDLE CORE POLL IDLE", 0, 0),
    ("C1", "ACPI FFH MWAIT 0x0", 1, 2),
    ("C2", "ACPI IOPORT 0x814", 400, 800),
)


def amd_tree(cpus=8, c2_disabled=(1, 2), missing_c2=(6,), no_idle=(7,), governors=None):
    files = {
        "/proc/cpuinfo": epyc_cpuinfo(sockets=1, cores=cpus // 2, threads=2),
        CPU + "/online": "0-%d\n" % (cpus - 1),
        CPU + "/smt/control": "on\n",
        CPU + "/smt/active": "1\n",
        CPU + "/amd_pstate/status": "active\n",
        CPU + "/cpuidle/current_driver": "acpi_idle\n",
        CPU + "/cpuidle/current_governor": "menu\n",
        CPU + "/cpuidle/available_governors": "ladder menu teo\n",
    }
    for cpu in range(cpus):
        files["%s/cpu%d/topology/core_id" % (CPU, cpu)] = "%d\n" % (cpu % (cpus // 2))
        policy = "%s/cpufreq/policy%d/" % (CPU, cpu)
        governor = (governors or {}).get(cpu, "performance")
        files[policy + "scaling_driver"] = "amd-pstate-epp\n"
        files[policy + "scaling_governor"] = governor + "\n"
        files[policy + "energy_performance_preference"] = (
            "performance\n" if governor == "performance" else "balance_performance\n")
        files[policy + "scaling_min_freq"] = "1500000\n"
        files[policy + "scaling_max_freq"] = "4400000\n"
        files[policy + "scaling_available_governors"] = "performance powersave\n"
        files[policy + "boost"] = "1\n"
        if cpu in no_idle:
            continue
        for index, (name, desc, latency, residency) in enumerate(IDLE_STATES):
            if index == 2 and cpu in missing_c2:
                continue
            state = "%s/cpu%d/cpuidle/state%d/" % (CPU, cpu, index)
            files[state + "name"] = name + "\n"
            files[state + "desc"] = desc + "\n"
            files[state + "latency"] = "%d\n" % latency
            files[state + "residency"] = "%d\n" % residency
            files[state + "disable"] = "1\n" if (index == 2 and cpu in c2_disabled) else "0\n"
            files[state + "usage"] = "12345\n"
            files[state + "time"] = "987654\n"
    return files


def test_gather_amd_tree(tmp_path):
    root = CountingRoot(write_tree(tmp_path, amd_tree(governors={3: "powersave"})))
    facts = _cpu.gather(root)
    json.dumps(facts)
    assert (facts["vendor"], facts["family"], facts["model"]) == ("AuthenticAMD", 26, 2)
    assert (facts["sockets"], facts["cores"], facts["threads"]) == (1, 4, 8)
    assert facts["online"] == "0-7"
    assert facts["smt"] == {"control": "on", "active": True}
    assert facts["cpufreq"] == {
        "policies": 8,
        "driver": {"amd-pstate-epp": 8},
        "governor": {"performance": 7, "powersave": 1},
        "epp": {"balance_performance": 1, "performance": 7},
        "min_khz": {"1500000": 8},
        "max_khz": {"4400000": 8},
        "available_governors": ["performance", "powersave"],
    }
    assert facts["amd_pstate"] == {"status": "active"}
    assert facts["intel_pstate"] == {"status": None, "no_turbo": None}
    assert facts["boost"] is True
    assert facts["cpuidle"] == {
        "driver": "acpi_idle",
        "governor": "menu",
        "states": [
            {"index": 0, "name": "POLL", "desc": "CPUIDLE CORE POLL IDLE", "latency_us": 0, "residency_us": 0,
             "enabled_cpus": 7, "disabled_cpus": 0},
            {"index": 1, "name": "C1", "desc": "ACPI FFH MWAIT 0x0", "latency_us": 1, "residency_us": 2,
             "enabled_cpus": 7, "disabled_cpus": 0},
            {"index": 2, "name": "C2", "desc": "ACPI IOPORT 0x814", "latency_us": 400, "residency_us": 800,
             "enabled_cpus": 4, "disabled_cpus": 2},
        ],
    }
    assert root.errors == []
    # descriptions are read once per state; only "disable" is read for every CPU; usage/time never
    names = [path for path in root.opened if path.endswith("/name")]
    assert names == ["%s/cpu0/cpuidle/state%d/name" % (CPU, index) for index in range(3)]
    assert len([path for path in root.opened if path.endswith("/disable")]) == 7 + 7 + 6
    assert not [path for path in root.opened if path.endswith(("/usage", "/time"))]


def test_idle_state_missing_on_cpu0_is_described_from_first_cpu_having_it(tmp_path):
    root = Root(write_tree(tmp_path, amd_tree(cpus=4, c2_disabled=(), missing_c2=(0, 1), no_idle=())))
    states = _cpu.gather(root)["cpuidle"]["states"]
    assert [state["name"] for state in states] == ["POLL", "C1", "C2"]
    assert states[2]["latency_us"] == 400
    assert (states[2]["enabled_cpus"], states[2]["disabled_cpus"]) == (2, 0)


def test_unreadable_disable_flags_give_one_error_per_state(tmp_path):
    files = amd_tree(cpus=4, c2_disabled=(), missing_c2=(), no_idle=())
    for cpu in range(4):
        files["%s/cpu%d/cpuidle/state2/disable" % (CPU, cpu)] = "garbage\n"
    root = Root(write_tree(tmp_path, files))
    states = _cpu.gather(root)["cpuidle"]["states"]
    assert (states[2]["enabled_cpus"], states[2]["disabled_cpus"]) == (0, 0)
    assert len(root.errors) == 1
    assert "idle state 2" in root.errors[0]["reason"] and "4 CPU(s)" in root.errors[0]["reason"]


def test_gather_intel_tree(tmp_path):
    files = {
        "/proc/cpuinfo": xeon_cpuinfo(),
        CPU + "/online": "0-15\n",
        CPU + "/smt/control": "off\n",
        CPU + "/smt/active": "0\n",
        CPU + "/intel_pstate/status": "active\n",
        CPU + "/intel_pstate/no_turbo": "1\n",
        CPU + "/cpuidle/current_driver": "intel_idle\n",
        CPU + "/cpuidle/current_governor_ro": "menu\n",
    }
    for cpu in range(16):
        policy = "%s/cpufreq/policy%d/" % (CPU, cpu)
        files[policy + "scaling_driver"] = "intel_pstate\n"
        files[policy + "scaling_governor"] = "powersave\n"
        files[policy + "energy_performance_preference"] = "balance_performance\n"
        files[policy + "scaling_min_freq"] = "800000\n"
        files[policy + "scaling_max_freq"] = "3800000\n"
        files[policy + "scaling_available_governors"] = "performance powersave\n"
    root = Root(write_tree(tmp_path, files))
    facts = _cpu.gather(root)
    assert facts["vendor"] == "GenuineIntel" and facts["model"] == 143
    assert facts["smt"] == {"control": "off", "active": False}
    assert facts["intel_pstate"] == {"status": "active", "no_turbo": True}
    assert facts["amd_pstate"] == {"status": None}
    assert facts["boost"] is False
    assert facts["cpufreq"]["driver"] == {"intel_pstate": 16}
    assert facts["cpuidle"] == {"driver": "intel_idle", "governor": "menu", "states": []}
    assert root.errors == []


def test_acpi_cpufreq_global_boost(tmp_path):
    files = {"/proc/cpuinfo": epyc_cpuinfo(1, 1, 1), CPU + "/online": "0\n", CPU + "/cpufreq/boost": "0\n"}
    policy = CPU + "/cpufreq/policy0/"
    for name, value in (("scaling_driver", "acpi-cpufreq"), ("scaling_governor", "schedutil"),
                        ("scaling_min_freq", "1500000"), ("scaling_max_freq", "3000000"),
                        ("scaling_available_governors", "conservative ondemand userspace powersave performance schedutil")):
        files[policy + name] = value + "\n"
    facts = _cpu.gather(Root(write_tree(tmp_path, files)))
    assert facts["boost"] is False
    assert facts["cpufreq"]["epp"] == {}
    assert facts["cpufreq"]["available_governors"] == [
        "conservative", "ondemand", "performance", "powersave", "schedutil", "userspace"]


def test_gather_768_cpu_tree_reads_only_what_it_needs(tmp_path):
    files = {"/proc/cpuinfo": epyc_cpuinfo(sockets=2, cores=192, threads=2), CPU + "/online": "0-767\n",
             CPU + "/cpuidle/current_driver": "acpi_idle\n", CPU + "/cpuidle/current_governor": "menu\n"}
    for cpu in range(768):
        for index, (name, desc, latency, residency) in enumerate(IDLE_STATES + (("C3", "ACPI HLT", 800, 1600),)):
            state = "%s/cpu%d/cpuidle/state%d/" % (CPU, cpu, index)
            for leaf, value in (("name", name), ("desc", desc), ("latency", latency), ("residency", residency),
                                ("disable", int(index == 3 and cpu >= 384))):
                files[state + leaf] = "%s\n" % value
    root = CountingRoot(write_tree(tmp_path, files))
    start = time.perf_counter()
    facts = _cpu.gather(root)
    elapsed = time.perf_counter() - start
    assert facts["threads"] == 768
    assert [(s["enabled_cpus"], s["disabled_cpus"]) for s in facts["cpuidle"]["states"]] == [
        (768, 0), (768, 0), (768, 0), (384, 384)]
    # 4 descriptions x 4 files + 768 x 4 disable flags + a handful of global files
    assert len(root.opened) < 4 * 4 + 768 * 4 + 20
    assert elapsed < 10.0, elapsed


def test_gather_empty_tree(tmp_path):
    root = Root(str(tmp_path))
    facts = _cpu.gather(root)
    json.dumps(facts)
    assert facts["vendor"] is None and facts["threads"] is None
    assert facts["cpufreq"]["policies"] == 0 and facts["cpufreq"]["driver"] == {}
    assert facts["boost"] is None
    assert facts["cpuidle"] == {"driver": None, "governor": None, "states": []}
    paths = set(err["path"] for err in root.errors)
    assert {"/proc/cpuinfo", CPU, CPU + "/online"} <= paths


def test_gather_hostile_tree(tmp_path):
    files = {
        "/proc/cpuinfo": b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)),
        CPU + "/online": "",
        CPU + "/smt/active": "yes\n",
        CPU + "/cpufreq/policy0/scaling_driver": "",
        CPU + "/cpufreq/policy0/scaling_min_freq": "fast\n",
        CPU + "/cpufreq/policyX/scaling_driver": "ignored\n",
        CPU + "/cpu0/cpuidle/state0/name": "POLL\n",
        CPU + "/cpu0/cpuidle/state0/latency": "\xff\n",
        CPU + "/cpu0/cpuidle/stateZ/name": "ignored\n",
    }
    root = Root(write_tree(tmp_path, files))
    facts = _cpu.gather(root)
    json.dumps(facts)
    assert facts["vendor"] is None
    assert facts["smt"]["active"] is None
    assert facts["cpufreq"]["policies"] == 1
    assert facts["cpufreq"]["driver"] == {} and facts["cpufreq"]["min_khz"] == {}
    assert facts["cpuidle"]["states"][0]["name"] == "POLL"
    assert facts["cpuidle"]["states"][0]["latency_us"] is None
    reasons = dict((err["path"], err["reason"]) for err in root.errors)
    assert "no vendor_id" in reasons["/proc/cpuinfo"]
    assert reasons[CPU + "/online"] == "empty file"
    assert "not an integer" in reasons[CPU + "/cpufreq/policy0/scaling_min_freq"]


def test_gather_live_host():
    root = Root("/")
    facts = _cpu.gather(root)
    json.dumps(facts)
    assert facts["vendor"] in ("AuthenticAMD", "GenuineIntel", "HygonGenuine", "CentaurHauls")
    assert isinstance(facts["threads"], int) and facts["threads"] >= 1
    assert parse_cpulist(facts["online"])
