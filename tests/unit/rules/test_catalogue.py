"""Every rule of the shipped catalogue: its examples (rules/examples/<area>.yml, docs/rules.md
"Examples beside the rule") judged on the healthy facts document of helpers.baseline_facts.

test_every_rule_has_examples makes a rule without a passing and a failing example, or an example
of no rule, fail the suite; test_example judges each case (helpers.rule_examples.check_example).
"""
import os
import shutil
import subprocess
import sys

import pytest

from helpers.baseline_facts import GPU0, NIC, device, healthy_facts
from helpers.health_facts import add_health
from helpers import rule_examples
from helpers.site_catalogue import SITE_EXAMPLES, make_site, write

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_load import load_catalogue
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base import schema
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue import catalogue_load, catalogue_model
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge import evaluation

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TODAY = rule_examples.TODAY
FILES = rule_examples.read_examples()
EXAMPLES = rule_examples.examples_of(FILES)
MODELINE = "# yaml-language-server: $schema=../../schemas/rule-examples.schema.json"


def _noop(facts):
    return None


def _without_inventory(finding):
    """Not an inventory rule left not_applicable because the profile holds no inventory."""
    return not (finding["area"] == "inventory" and finding["status"] == "not_applicable")


@pytest.fixture(scope="module")
def catalogue():
    return load_catalogue()


def _run(params, mutate, profile="amd-epyc-nvidia"):
    facts = add_health(healthy_facts())
    mutate(facts)
    return evaluation.evaluate(facts, profile=profile, params=params, host="gpu01", today=TODAY)


def _of(result, rule_id):
    return [f for f in result["findings"] if f["id"] == rule_id]


def _rule_files(cat):
    out = {}
    for rule in cat.rules:
        out.setdefault(os.path.basename(rule.file).rsplit(".", 1)[0], []).append(rule.id)
    return out


def _example(rule_id, kind="fail", number=1):
    (found,) = [e for e in EXAMPLES if (e.rule_id, e.kind, e.number) == (rule_id, kind, number)]
    return found


# -- the examples ----------------------------------------------------------------------------

def test_every_rule_has_examples(catalogue):
    assert rule_examples.coverage_problems(_rule_files(catalogue), FILES) == []
    for rule in catalogue.rules:
        # a failing case, or for a rule that never fails (it says what it cannot judge) an unknown one
        kinds = [e.kind for e in EXAMPLES if e.rule_id == rule.id]
        assert kinds.count("fail") + kinds.count("unknown") >= 1, rule.id


def test_a_rule_without_examples_and_an_example_without_rule_are_named():
    files = {"cpu": {"CPU-001": FILES["cpu"]["CPU-001"], "CPU-099": FILES["cpu"]["CPU-001"]},
             "numa": {"KERNEL-001": dict(FILES["kernel"]["KERNEL-001"])}}
    problems = rule_examples.coverage_problems({"cpu": ["CPU-001", "CPU-002"], "kernel": ["KERNEL-001"],
                                                "numa": []}, files)
    assert problems == [
        "CPU-002 (rules/cpu.yml) has no examples: add a pass and a fail case to rules/examples/cpu.yml",
        "KERNEL-001 (rules/kernel.yml) has no examples: add a pass and a fail case to rules/examples/kernel.yml",
        "rules/examples/cpu.yml: CPU-099 is no rule of rules/cpu.yml",
        "rules/examples/numa.yml: KERNEL-001 is no rule of rules/numa.yml",
        "rules/examples/numa.yml: KERNEL-001 fail 1: may_also_fail names KERNEL-006, which is no rule",
    ]


def test_example_files_are_one_per_area_and_carry_the_modeline():
    assert sorted(FILES) == sorted(catalogue_model.AREA_NAMES)
    for stem in FILES:
        with open(os.path.join(rule_examples.EXAMPLES_DIR, stem + ".yml")) as handle:
            assert handle.readline().rstrip("\n") == MODELINE, stem


def test_examples_schema_is_valid_draft_2020_12():
    import jsonschema  # pylint: disable=import-outside-toplevel
    validator = rule_examples._schema_validator()  # pylint: disable=protected-access
    assert validator.schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(validator.schema)


@pytest.mark.parametrize("example", EXAMPLES, ids=["%s-%s-%d" % (e.rule_id, e.kind, e.number) for e in EXAMPLES])
def test_example(example):
    problems, findings = rule_examples.check_example(example)
    assert problems == [], findings


def test_failing_messages_are_specific():
    unused, findings = rule_examples.check_example(_example("PCI-001"))
    (f,) = [f for f in findings if f["status"] == "fail"]
    assert f["message"] == ("MaxReadReq 512 B < 4096 B on 0000:43:00.0 "
                            "(NVIDIA RTX PRO 6000 Blackwell Server Edition)")
    assert (f["subject"], f["expected"], f["observed"]) == (GPU0, 4096, 512)


def test_an_example_that_does_not_show_what_it_says_is_reported():
    def problems(rule_id, kind, case):
        path = os.path.join(rule_examples.EXAMPLES_DIR, "cpu.yml")
        return rule_examples.check_example(rule_examples.Example(rule_id, kind, 1, case, path))[0]

    (bad,) = problems("CPU-005", "fail", {})
    assert bad.startswith("CPU-005 fail 1 (rules/examples/cpu.yml): no failing finding: [('pass', None, "), bad
    (bad,) = problems("CPU-005", "pass", {"set": {"cpu.boost": False}})
    assert bad.startswith("CPU-005 pass 1 (rules/examples/cpu.yml): not every finding passes: [('fail', None, "), bad
    (bad,) = problems("CPU-005", "fail", {"set": {"cpu.boost": False}, "message": "no such words"})
    assert "no failing message holds 'no such words'" in bad
    (bad,) = problems("KERNEL-001", "fail", {"set": {"kernel.release": "6.8.12-4-pve"}})
    assert "other rules fail too: ['KERNEL-006']" in bad


@pytest.mark.parametrize("path, steps", [
    ("cpu.boost", [("key", "cpu"), ("key", "boost")]),
    ("numa.nodes[0].free_pct", [("key", "numa"), ("key", "nodes"), ("index", 0), ("key", "free_pct")]),
    ("lxc.containers[-1]", [("key", "lxc"), ("key", "containers"), ("index", -1)]),
    ('kernel.sysctl_persisted["vm.swappiness"]', [("key", "kernel"), ("key", "sysctl_persisted"), ("key", "vm.swappiness")]),
    ("persistence.pcie.devices[$GPU0]", [("key", "persistence"), ("key", "pcie"), ("key", "devices"), ("key", GPU0)]),
    ("pci.devices[address=$NIC].pcie", [("key", "pci"), ("key", "devices"), ("match", [("address", NIC)]), ("key", "pcie")]),
    ("topology.links[a=$GPU0,b=mlx5_0]", [("key", "topology"), ("key", "links"), ("match", [("a", GPU0), ("b", "mlx5_0")])]),
    ("nvidia.gpus[*].name", [("key", "nvidia"), ("key", "gpus"), ("all", None), ("key", "name")]),
])
def test_paths(path, steps):
    assert rule_examples.parse_path(path) == steps


@pytest.mark.parametrize("changes, message", [
    ({"set": {"cpu.cpufreq.drivr.x": 1}}, "cpu.cpufreq.drivr.x: no key 'drivr'"),
    ({"set": {"numa.nodes[5].free_pct": 1}}, "numa.nodes[5].free_pct: index 5 outside the list of 2"),
    ({"set": {"pci.devices[address=$GPU9].driver": "x"}}, "unknown name $GPU9"),
    ({"set": {"pci.devices[address=0000:99:00.0].driver": "x"}}, "no element with address='0000:99:00.0'"),
    ({"delete": ["kernel.sysctl_persisted[\"vm.nothing\"]"]}, "delete kernel.sysctl_persisted[\"vm.nothing\"]: nothing there"),
    ({"merge": {"cpu.boost": {"a": 1}}}, "merge cpu.boost: not a mapping there"),
    ({"append": {"cpu.cpufreq": 1}}, "append cpu.cpufreq: not a list there"),
    ({"set": {"cpu.boost[0]": 1}}, "cpu.boost[0]: [0] needs a list, got bool"),
])
def test_a_wrong_path_is_an_error_naming_it(changes, message):
    with pytest.raises(rule_examples.ExampleError) as caught:
        rule_examples.apply_changes(healthy_facts(), changes)
    assert message in str(caught.value)


def test_changes_reach_lists_named_addresses_and_literal_dollars():
    facts = rule_examples.apply_changes(healthy_facts(), {
        "set": {"pci.devices[kind=gpu].driver": "vfio-pci", "hostname": "$$GPU0", "nvidia.gpus[*].persistence": False},
        "merge": {"persistence.pcie.devices[$NIC]": {"udev": False}},
        "append": {"kernel.installed": "6.17.2-1-pve"},
        "delete": ["lxc.containers[id=101].mounts[-1]", "pci.devices[address=$GPU1]"]})
    assert [d["address"] for d in facts["pci"]["devices"] if d["driver"] == "vfio-pci"] == [GPU0]
    assert facts["hostname"] == "$GPU0" and [g["persistence"] for g in facts["nvidia"]["gpus"]] == [False, False]
    assert facts["persistence"]["pcie"]["devices"][NIC]["udev"] is False
    assert facts["kernel"]["installed"][-1] == "6.17.2-1-pve"
    assert [m["source"] for m in facts["lxc"]["containers"][0]["mounts"]] == ["/dev/nvidia0", "/dev/nvidiactl"]


def test_a_rule_given_twice_in_an_examples_file_is_an_error(tmp_path):
    path = write(tmp_path / "cpu.yml", """\
        CPU-001:
          pass: [{}]
          fail: [{set: {cpu.boost: false}}]
        CPU-001:
          pass: [{}]
          fail: [{set: {cpu.boost: false}}]
        """)
    with pytest.raises(rule_examples.ExampleError, match=r"cpu.yml: line 4: 'CPU-001' given twice"):
        rule_examples.read_file(str(path))


def test_an_examples_file_is_checked_against_its_schema(tmp_path):
    path = write(tmp_path / "cpu.yml", "CPU-001:\n  pass: [{}]\n  fail: [{sett: {cpu.boost: false}}]\n")
    with pytest.raises(rule_examples.ExampleError, match=r"CPU-001/fail/0: Additional properties .*'sett'"):
        rule_examples.read_file(str(path))
    path.write_text("CPU-001:\n  pass: [{}]\n")
    with pytest.raises(rule_examples.ExampleError, match=r"CPU-001: \{'pass': \[\{\}\]\} is not valid under any"):
        rule_examples.read_file(str(path))


# -- the catalogue loaders do not read the examples -------------------------------------------

def test_catalogue_loaders_ignore_the_examples_directory(tmp_path):
    assert os.path.isdir(os.path.join(schema.COLLECTION_ROOT, "rules", "examples"))
    rels = [rel for rel, unused, unused_rules in catalogue_load.read_rule_files(schema.COLLECTION_ROOT)]
    assert rels == ["rules/%s.yml" % area for area in sorted(catalogue_model.AREA_NAMES)]
    # a site's examples beside its rules: not rules (they would not even pass the rules schema)
    site = make_site(tmp_path / "site")
    write(site / "rules" / "examples" / "kernel.yml", SITE_EXAMPLES)
    assert [path for path, unused, unused_rules in catalogue_load.read_site_dir(str(site))["rules"]] == [
        str(site / "rules" / "kernel.yml")]
    cat = load_catalogue(site_dirs=[str(site)])
    assert [r.id for r in cat.rules if r.file.startswith(str(site))] == ["KERNEL-901"]
    # nor does the self-audit bundle's compiled catalogue carry them
    compiled = catalogue_load.compile_catalogue(site_dirs=[str(site)])
    assert "examples" not in compiled and "may_also_fail" not in compiled


# -- a site runs its own examples --------------------------------------------------------------

def test_a_site_runs_its_examples(tmp_path):
    site = make_site(tmp_path / "site")
    examples = write(site / "rules" / "examples" / "kernel.yml", SITE_EXAMPLES)
    assert rule_examples.check_site_examples(str(site), "site-inference") == []
    examples.write_text(SITE_EXAMPLES.replace("may_also_fail: [KERNEL-001, KERNEL-006]", "may_also_fail: [KERNEL-001]")
                        + "KERNEL-902:\n  pass: [{}]\n  fail: [{}]\n")
    problems = rule_examples.check_site_examples(str(site), "site-inference")
    assert problems[0] == "%s/kernel.yml: KERNEL-902 is no rule of %s/kernel.yml" % (site / "rules" / "examples", site / "rules")
    assert "KERNEL-901 fail 1" in problems[1] and "other rules fail too: ['KERNEL-006']" in problems[1]
    shutil.rmtree(str(site / "rules" / "examples"))
    assert rule_examples.check_site_examples(str(site), "site-inference") == [
        "KERNEL-901 (%s/kernel.yml) has no examples: add a pass and a fail case to %s/kernel.yml" % (
            site / "rules", site / "rules" / "examples")]


# -- beyond the examples ---------------------------------------------------------------------

def test_profile_amd_selects_every_rule(catalogue):
    assert set(catalogue.profile("amd-epyc-nvidia").rule_ids) == set(r.id for r in catalogue.rules)


def test_healthy_document_passes_everything():
    result = _run({"smt": "on", "nccl_nic_per_gpu": True}, _noop)
    bad = [(f["id"], f["status"], f["message"]) for f in result["findings"] if f["status"] != "pass"
           and _without_inventory(f)]
    assert bad == []


def test_intel_host_makes_amd_rules_not_applicable():
    def intel(facts):
        facts["cpu"].update(vendor="GenuineIntel", family=6, model=143)
        facts["cpu"]["cpufreq"]["driver"] = {"intel_pstate": 64}
        facts["cpu"]["amd_pstate"]["status"] = None
    result = _run({}, intel)
    for rid in ("CPU-001", "CPU-002"):
        (f,) = _of(result, rid)
        assert f["status"] == "not_applicable"


def test_no_gpu_makes_nvidia_rules_not_applicable():
    def no_gpu(facts):
        facts["nvidia"] = {"module": {"version": None, "open": None, "raw": None}, "smi": {"available": False, "error": None},
                           "driver_version": None, "cuda_version": None, "gpus": [], "topology": None, "present": False}
        facts["pci"]["devices"] = [d for d in facts["pci"]["devices"] if d["kind"] != "gpu"]
        facts["lxc"]["proxmox"] = False
    result = _run({}, no_gpu, profile="generic-nvidia-inference")
    for f in result["findings"]:
        if f["area"] in ("nvidia", "lxc") or f["id"] in ("PCI-001", "PCI-006"):
            assert f["status"] == "not_applicable", (f["id"], f["message"])


# -- device rules apply only to devices with the register they judge (issue 14, item 2) --------

VIRTIO_NIC = "0000:00:03.0"
#: the rules that read the PCI Express capability of a GPU or NIC (MaxReadReq, MaxPayload, link, boot MaxReadReq)
PCIE_REGISTER_RULES = ("PCI-002", "PCI-003", "PCI-004", "PCI-005", "PCI-008")


def _virtio_nic(config_bytes=256, error=None):
    """A virtio network function on a conventional PCI bus: no capability list entry for PCI Express."""
    def mutate(facts):
        facts["pci"]["devices"].insert(0, {
            "address": VIRTIO_NIC, "vendor_id": "0x1af4", "device_id": "0x1041", "class_id": "0x020000",
            "kind": "nic", "driver": "virtio-pci", "numa_node": None, "local_cpulist": "0-31", "upstream": [],
            "config_bytes": config_bytes, "pcie": None, "acs": None, "aer": None, "error": error})
    return mutate


def test_device_without_pcie_capability_is_not_applicable_with_the_reason():
    result = _run({"smt": "on", "nccl_nic_per_gpu": True}, _virtio_nic())
    for rule_id in PCIE_REGISTER_RULES:
        (f,) = [f for f in _of(result, rule_id) if f["subject"] == VIRTIO_NIC]
        assert f["status"] == "not_applicable", (rule_id, f["message"])
        assert f["message"] == ("no PCI Express capability, so no MaxReadReq, MaxPayload or link register to judge "
                                "(a conventional PCI or paravirtual device) on 0000:00:03.0 (0x1af4 0x1041 NIC)")
        assert (f["expected"], f["observed"]) == (None, None)
    # nothing for pcie_tune to fix on it, and the other devices are judged as before: all pass
    assert "pcie_tune" not in result["fix_plan"] and result["fix_plan"]["pcie_mrrs"] == {"gpu": [], "nic": []}
    others = [f for f in result["findings"] if f["subject"] != VIRTIO_NIC and f["status"] != "pass"
              and _without_inventory(f)]
    assert others == []


def test_device_with_pcie_capability_is_judged_as_before():
    def with_capability(facts):
        _virtio_nic()(facts)
        device(facts, VIRTIO_NIC)["pcie"] = dict(device(facts, NIC)["pcie"], max_read_request=512)
    result = _run({}, with_capability)
    (mrrs,) = [f for f in _of(result, "PCI-002") if f["subject"] == VIRTIO_NIC]
    assert (mrrs["status"], mrrs["observed"]) == ("fail", 512)
    (boot,) = [f for f in _of(result, "PCI-008") if f["subject"] == VIRTIO_NIC]
    # nothing sets it at boot, but without evidence that the running value was set at runtime it passes
    assert boot["status"] == "pass" and "no entry for it in /usr/local/sbin/gpuhost-pcie-apply" in boot["message"]
    assert VIRTIO_NIC in result["fix_plan"]["pcie_mrrs"]["nic"]


@pytest.mark.parametrize("config_bytes, error", [
    (None, "cannot read /sys/bus/pci/devices/0000:00:03.0/config: PCI Express, ACS and AER unknown (see errors)"),
    (64, "config space is 64 bytes: capabilities need root; run with become: true"),
])
def test_device_whose_capability_is_unknown_stays_unknown(config_bytes, error):
    # an unreadable or cut-short config space does not prove the capability absent
    result = _run({}, _virtio_nic(config_bytes, error))
    (f,) = [f for f in _of(result, "PCI-002") if f["subject"] == VIRTIO_NIC]
    assert f["status"] == "unknown" and error in f["message"], f["message"]
    assert [f["status"] for f in _of(result, "PCI-004") if f["subject"] == VIRTIO_NIC] == ["unknown"]


# -- the bundled snapshots ------------------------------------------------------------------

@pytest.fixture(scope="module")
def snapshots(tmp_path_factory):
    out = tmp_path_factory.mktemp("snapshots")
    subprocess.run([sys.executable, os.path.join(REPO, "tools", "make_fixtures.py"), str(out),
                    "--only", "incident", "--only", "healthy"], check=True, capture_output=True)
    return out


def _snapshot_result(snapshots, name):
    from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.gather import gather_facts
    from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root
    facts = gather_facts(Root(str(snapshots / name)))
    return evaluation.evaluate(facts, profile="auto", host=name, today=TODAY)


def test_incident_snapshot_shows_every_finding_of_the_incident(snapshots):
    result = _snapshot_result(snapshots, "incident")
    assert result["profile"] == "amd-epyc-nvidia"
    fails = [f for f in result["findings"] if f["status"] == "fail"]

    def failed(rule_id):
        return [f for f in fails if f["id"] == rule_id]

    assert "acpi-cpufreq" in failed("CPU-001")[0]["observed"]
    (kernel,) = failed("KERNEL-001")
    assert (kernel["observed"], kernel["expected"]) == ("6.8.12-4-pve", "6.14")
    assert kernel["pending"] and "6.14.8-2-pve" in kernel["message"]
    assert failed("NUMA-001")[0]["observed"] == 1
    assert "C2 (exit latency 400 us)" in failed("CPU-006")[0]["message"]
    gpus = failed("PCI-001")
    nics = failed("PCI-002")
    assert len(gpus) == 8 and len(nics) == 2
    assert all(f["observed"] == 512 for f in gpus + nics)
    (node,) = failed("NUMA-003")
    assert node["subject"] == "node0" and node["observed"] == 0.9
    assert failed("NUMA-004")
    acs = failed("PCI-006")
    assert acs and all("request_redirect" in f["observed"] for f in acs)
    assert len(failed("NVIDIA-004")) == 8
    assert len(failed("NVIDIA-007")) == 8
    (lxc,) = failed("LXC-001")
    assert "nvidia-uvm" in lxc["message"]


def test_healthy_snapshot_has_no_fail(snapshots):
    result = _snapshot_result(snapshots, "healthy")
    assert [f["message"] for f in result["findings"] if f["status"] == "fail"] == []
    assert result["summary"]["pass"] > 100


# -- docs/rules.md is generated from the YAML ------------------------------------------------

def test_rules_doc_is_up_to_date():
    proc = subprocess.run([sys.executable, os.path.join(REPO, "tools", "rules_doc.py"), "--check"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
