"""pcie_tune and nvidia_gpu through ansible-playbook: the four-run pattern on writable snapshot copies.

pcie_tune's four runs and those of nvidia_gpu with a snapshot root are the same four runs (two
tasks, two copies: the four_runs fixture); each test reads its own task's result and log.

pcie_tune acts on a copy of the generated ``incident`` snapshot (root option); afterwards the
config-space bytes are compared with the original byte by byte and decoded by ``parse_config``
and by ``lspci -F``. nvidia_gpu runs with root ``/`` against the stand-in
``tests/fixtures/bin/nvidia-smi`` (state in a JSON file; ``persistence_method: smi`` so that
systemctl is never called), and against a snapshot copy where nothing may run.
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.pci import parse_config

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "helpers"))
import lspci as lspci_helper  # noqa: E402
from test_fix_modules import task_output  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
FAKE_SMI = os.path.join(REPO, "tests", "fixtures", "bin", "nvidia-smi")
GPUS = ["0000:43:00.0", "0000:44:00.0", "0000:47:00.0", "0000:48:00.0",
        "0000:c3:00.0", "0000:c4:00.0", "0000:c7:00.0", "0000:c8:00.0"]
NICS = ["0000:49:00.0", "0000:c9:00.0"]
SWITCH_DOWNSTREAM = ["0000:42:00.0", "0000:42:01.0", "0000:46:00.0", "0000:46:01.0",
                     "0000:c2:00.0", "0000:c2:01.0", "0000:c6:00.0", "0000:c6:01.0"]


def _play(book, out, extra, env=None):
    """``(rc, log)`` of ansible-playbook running ``book`` on localhost; the play must have written ``out``."""
    environ = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_RETRY_FILES_ENABLED="0")
    environ.update(env or {})
    assert "ANSIBLE_COLLECTIONS_PATH" in environ  # set by tests/conftest.py
    proc = subprocess.run([ANSIBLE_PLAYBOOK, "-i", "localhost,", "-e", "ansible_python_interpreter=" + sys.executable,
                           str(book)] + list(extra), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=environ,
                          cwd=REPO, timeout=300, check=False)
    log = proc.stdout.decode("utf-8", "replace")
    assert out.exists(), log
    return proc.returncode, log


def run_task(tmp_path, module, args, *extra, env=None):
    """One task of ``module`` with ``args`` on localhost; returns (rc, registered result, log)."""
    out = tmp_path / "result.json"
    if out.exists():
        out.unlink()
    book = tmp_path / "play.yml"
    book.write_text(json.dumps([{
        "name": "fix", "hosts": "localhost", "connection": "local", "gather_facts": False,
        "tasks": [
            {"name": "the module", "gpuhost.baseline.%s" % module: args, "register": "r", "ignore_errors": True},
            {"name": "keep the result", "ansible.builtin.copy": {"content": "{{ r | to_json }}", "dest": str(out)},
             "check_mode": False, "diff": False},
        ]}]))
    rc, log = _play(book, out, extra, env)
    return rc, json.loads(out.read_text()), log


def run_tasks(tmp_path, tasks, *extra):
    """Tasks ``[(module, args)]`` as one play on localhost; returns (rc, [registered result per task],
    {index: the log of that task alone (test_fix_modules.task_output)})."""
    out = tmp_path / "results.json"
    if out.exists():
        out.unlink()
    book = tmp_path / "play-tasks.yml"
    play_tasks = [{"name": "task %d %s" % (index, module), "gpuhost.baseline.%s" % module: args,
                   "register": "r%d" % index, "ignore_errors": True} for index, (module, args) in enumerate(tasks)]
    collected = ", ".join("'r%d': r%d" % (index, index) for index in range(len(tasks)))
    play_tasks.append({"name": "keep the results", "ansible.builtin.copy": {
        "content": "{{ {%s} | to_json }}" % collected, "dest": str(out)}, "check_mode": False, "diff": False})
    book.write_text(json.dumps([{"name": "fix", "hosts": "localhost", "connection": "local", "gather_facts": False,
                                 "tasks": play_tasks}]))
    rc, log = _play(book, out, extra)
    results = json.loads(out.read_text())
    return (rc, [results["r%d" % index] for index in range(len(tasks))],
            dict((index, task_output(log, [index])) for index in range(len(tasks))))


def tree_hash(root):
    digest = hashlib.sha256()
    for base, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for name in sorted(files + dirs):
            path = os.path.join(base, name)
            digest.update(os.path.relpath(path, root).encode())
            if os.path.islink(path):
                digest.update(b"->" + os.readlink(path).encode())
            elif os.path.isfile(path):
                with open(path, "rb") as handle:
                    digest.update(handle.read())
                digest.update(oct(os.stat(path).st_mode).encode())
    return digest.hexdigest()


def config(root, address):
    with open(os.path.join(root, "sys", "bus", "pci", "devices", address, "config"), "rb") as handle:
        return handle.read()


@pytest.fixture
def tree(snapshot_trees, tmp_path):
    target = str(tmp_path / "incident")
    shutil.copytree(snapshot_trees["incident"], target, symlinks=True)
    return target


PCIE_ARGS = {"kinds": ["gpu", "nic"], "max_read_request": 4096, "acs_redirect": "disable", "acs_bridges": "auto",
             "backup": True}


#: the four steps of the four-run pattern: check (with the diff), apply, check again, apply again
FOUR_STEPS = (("--check", "--diff"), (), ("--check", "--diff"), ())


@pytest.fixture(scope="module")
def four_runs(snapshot_trees, tmp_path_factory):
    """pcie_tune (task 0) and nvidia_gpu with a snapshot root (task 1), each on its own incident copy,
    in the same four ansible-playbook runs: ``{"trees", "steps": [(rc, results, logs)], "hashes":
    {tree: [hash at the start, after each step]}}``."""
    tmp = tmp_path_factory.mktemp("pcie-nvidia")
    trees = {}
    for name in ("pcie", "nvidia"):
        trees[name] = str(tmp / name)
        shutil.copytree(snapshot_trees["incident"], trees[name], symlinks=True)
    tasks = [("pcie_tune", dict(PCIE_ARGS, root=trees["pcie"])),
             ("nvidia_gpu", {"persistence": True, "power_limit": "max", "root": trees["nvidia"]})]
    hashes = dict((name, [tree_hash(root)]) for name, root in trees.items())
    steps = []
    for extra in FOUR_STEPS:
        steps.append(run_tasks(tmp, tasks, *extra))
        for name, root in trees.items():
            hashes[name].append(tree_hash(root))
    yield {"trees": trees, "steps": steps, "hashes": hashes}
    shutil.rmtree(str(tmp), ignore_errors=True)


def test_pcie_tune_four_runs_and_exact_bytes(four_runs, snapshot_trees, tmp_path):
    original = snapshot_trees["incident"]
    tree = four_runs["trees"]["pcie"]
    start, after_check, after_apply, _after_check_again, after_apply_again = four_runs["hashes"]["pcie"]
    steps = [(rc, results[0], logs[0]) for rc, results, logs in four_runs["steps"]]

    rc, result, log = steps[0]
    assert rc == 0 and result["changed"] and not result.get("failed"), log
    assert after_check == start, "check mode changed the tree"
    assert result["commands"] == ["systemctl daemon-reload", "udevadm control --reload"]
    assert "+0000:43:00.0 CAP_EXP+8.w 0x593e MaxPayload 256 MaxReadReq 4096" in log

    rc, result, log = steps[1]
    assert rc == 0 and result["changed"] and not result.get("failed"), log
    assert result["persisted"]["covers"] and not result["persisted_before"]["covers"]
    assert [d["max_read_request_after"] for d in result["runtime"]["devices"]] == [4096] * 10

    rc, result, log = steps[2]
    assert rc == 0 and not result["changed"], log
    rc, result, log = steps[3]
    assert rc == 0 and not result["changed"] and result["commands"] == [], log
    assert after_apply_again == after_apply

    # only the MaxReadReq bits of Device Control changed on GPUs and NICs
    dumps = {}
    for address in GPUS + NICS:
        old, new = config(original, address), config(tree, address)
        assert len(new) == len(old) == 4096
        cap = parse_config(old)["pcie_cap_offset"]
        differing = [i for i in range(4096) if old[i] != new[i]]
        assert differing == [cap + 9], (address, differing)
        old_word = old[cap + 8] | old[cap + 9] << 8
        new_word = new[cap + 8] | new[cap + 9] << 8
        assert old_word & ~0x7000 == new_word & ~0x7000
        assert parse_config(new)["pcie"]["max_read_request"] == 4096
        assert parse_config(new)["pcie"]["max_payload"] == parse_config(old)["pcie"]["max_payload"]
        dumps[address] = new
    dump = str(tmp_path / "after.lspci")
    lspci_helper.write_dump(dumps, dump)
    decoded = lspci_helper.parse_verbose(lspci_helper.run_lspci(dump))
    assert sorted(decoded) == sorted(GPUS + NICS)
    for address, device in decoded.items():
        assert device["express"]["max_read_request"] == 4096, address

    # ACS: redirect bits cleared on the switch downstream ports only, every other bit kept
    for address in SWITCH_DOWNSTREAM:
        old, new = parse_config(config(original, address)), parse_config(config(tree, address))
        assert old["acs"]["ctl"]["request_redirect"] and old["acs"]["ctl"]["completion_redirect"]
        assert not new["acs"]["ctl"]["request_redirect"] and not new["acs"]["ctl"]["completion_redirect"]
        for bit in ("source_validation", "upstream_forwarding", "egress_control", "translation_blocking"):
            assert new["acs"]["ctl"][bit] == old["acs"]["ctl"][bit]
        differing = [i for i in range(4096) if config(original, address)[i] != config(tree, address)[i]]
        assert differing == [0x148 + 6], (address, differing)
    untouched = sorted(set(os.listdir(os.path.join(tree, "sys/bus/pci/devices"))) - set(GPUS + NICS + SWITCH_DOWNSTREAM))
    for address in untouched:
        assert config(original, address) == config(tree, address), address

    # the boot-time files and the enable link
    with open(os.path.join(tree, "usr/local/sbin/gpuhost-pcie-apply")) as handle:
        script = handle.read()
    assert os.stat(os.path.join(tree, "usr/local/sbin/gpuhost-pcie-apply")).st_mode & 0o777 == 0o755
    for address in GPUS + NICS:
        assert "apply %s CAP_EXP+8.w 5000:7000  # MaxReadReq 4096\n" % address in script
    for address in SWITCH_DOWNSTREAM:
        assert "apply %s ECAP_ACS+6.w 0000:000c  # ReqRedir-, CmpltRedir-\n" % address in script
    assert 'setpci -s "$1" "$2=$3"' in script
    assert subprocess.run(["sh", "-n", os.path.join(tree, "usr/local/sbin/gpuhost-pcie-apply")], check=False).returncode == 0
    with open(os.path.join(tree, "etc/systemd/system/gpuhost-pcie.service")) as handle:
        unit = handle.read()
    assert "Type=oneshot" in unit and "ExecStart=/usr/local/sbin/gpuhost-pcie-apply" in unit
    assert os.readlink(os.path.join(tree, "etc/systemd/system/multi-user.target.wants/gpuhost-pcie.service")) == \
        "/etc/systemd/system/gpuhost-pcie.service"
    with open(os.path.join(tree, "etc/udev/rules.d/90-gpuhost-pcie.rules")) as handle:
        rules = [line for line in handle.read().splitlines() if line and not line.startswith("#")]
    assert len(rules) == len(GPUS + NICS + SWITCH_DOWNSTREAM)
    assert 'ACTION=="add|bind", SUBSYSTEM=="pci", KERNEL=="0000:43:00.0", ' \
           'RUN+="/usr/local/sbin/gpuhost-pcie-apply %k"' in rules


def test_pcie_tune_second_task_keeps_a_backup(tree, tmp_path):
    rc, result, log = run_task(tmp_path, "pcie_tune", {"kinds": ["gpu"], "max_read_request": 4096, "root": tree})
    assert rc == 0 and result["changed"], log
    rc, result, log = run_task(tmp_path, "pcie_tune", {"kinds": ["nic"], "max_read_request": 4096, "root": tree,
                                                       "backup": True})
    assert rc == 0 and result["changed"], log
    backup = result["backup_files"]["/usr/local/sbin/gpuhost-pcie-apply"]
    with open(backup) as handle:
        assert "0000:49:00.0" not in handle.read()
    with open(os.path.join(tree, "usr/local/sbin/gpuhost-pcie-apply")) as handle:
        script = handle.read()
    assert "apply 0000:43:00.0 CAP_EXP+8.w" in script and "apply 0000:49:00.0 CAP_EXP+8.w" in script


@pytest.mark.parametrize("args,message", [
    ({"addresses": ["0000:43:00.0", "0000:99:00.0"], "max_read_request": 4096}, "0000:99:00.0 does not exist"),
    ({"addresses": ["0000:43:00.0"], "max_payload": 512}, "more than 0000:43:00.0 supports (256 bytes"),
    ({"addresses": ["0000:49:00.0"], "max_payload": 512}, "differ from 256 on 0000:40:03.1"),
    ({"kinds": ["gpu"], "max_read_request": 4096, "truncate": "0000:c8:00.0"}, "is 64 bytes"),
])
def test_pcie_tune_bad_input_fails_and_writes_nothing(tree, tmp_path, args, message):
    args = dict(args, root=tree)
    victim = args.pop("truncate", None)
    if victim:
        path = os.path.join(tree, "sys/bus/pci/devices", victim, "config")
        with open(path, "rb") as handle:
            head = handle.read(64)
        with open(path, "wb") as handle:
            handle.write(head)
    start = tree_hash(tree)
    rc, result, log = run_task(tmp_path, "pcie_tune", args)
    assert result.get("failed") and message in result["msg"], log
    assert tree_hash(tree) == start


def test_pcie_tune_max_payload_whole_link(tree, tmp_path):
    args = {"addresses": ["0000:40:03.1", "0000:49:00.0"], "max_payload": 512, "root": tree, "persist": False}
    rc, result, log = run_task(tmp_path, "pcie_tune", args)
    assert rc == 0 and result["changed"], log
    for address in args["addresses"]:
        assert parse_config(config(tree, address))["pcie"]["max_payload"] == 512
    rc, result, log = run_task(tmp_path, "pcie_tune", args)
    assert rc == 0 and not result["changed"], log


# -- nvidia_gpu -----------------------------------------------------------------------------------

def fake_state(tmp_path, processes=()):
    state = {"driver_version": "550.127.05", "gpus": [
        {"bus_id": "00000000:%02X:00.0" % bus, "persistence": False, "limit_w": 450.0, "default_w": 600.0,
         "max_w": 700.0, "min_w": 150.0, "processes": []} for bus in (0x43, 0x44, 0x47)]}
    state["gpus"][1]["processes"] = list(processes)
    path = tmp_path / "smi-state.json"
    path.write_text(json.dumps(state))
    return str(path)


def smi_env(path):
    # The stand-in starts with "#!/usr/bin/env python" (the only Python shebang ansible-test's sanity
    # accepts outside modules); this interpreter's directory first on PATH makes "python" the test's
    # own (a virtualenv always has one; Debian's /usr/bin has only python3).
    return {"FAKE_NVIDIA_SMI_STATE": path,
            "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}


NV_ARGS = {"persistence": True, "persistence_method": "smi", "power_limit": "max", "nvidia_smi": FAKE_SMI}


def read_state(path):
    with open(path) as handle:
        return json.load(handle)


def test_nvidia_gpu_four_runs_with_fake_smi(tmp_path):
    state = fake_state(tmp_path)
    rc, result, log = run_task(tmp_path, "nvidia_gpu", NV_ARGS, "--check", "--diff", env=smi_env(state))
    assert rc == 0 and result["changed"], log
    assert all(not g["persistence"] and g["limit_w"] == 450.0 for g in read_state(state)["gpus"])
    assert all(call == ["-q", "-x"] for call in read_state(state)["calls"])
    assert "+GPU 0 0000:43:00.0: persistence on, power limit 700 W" in log

    rc, result, log = run_task(tmp_path, "nvidia_gpu", NV_ARGS, env=smi_env(state))
    assert rc == 0 and result["changed"], log
    assert [c.split(" ", 1)[1] for c in result["commands"]] == [
        "-i 0 -pm 1", "-i 1 -pm 1", "-i 2 -pm 1", "-i 0 -pl 700", "-i 1 -pl 700", "-i 2 -pl 700"]
    assert all(g["persistence"] and g["limit_w"] == 700.0 for g in read_state(state)["gpus"])

    rc, result, log = run_task(tmp_path, "nvidia_gpu", NV_ARGS, "--check", env=smi_env(state))
    assert rc == 0 and not result["changed"], log
    calls = len(read_state(state)["calls"])
    rc, result, log = run_task(tmp_path, "nvidia_gpu", NV_ARGS, env=smi_env(state))
    assert rc == 0 and not result["changed"] and result["commands"] == [], log
    assert read_state(state)["calls"][calls:] == [["-q", "-x"]]


def test_nvidia_gpu_guard_refuses_then_force(tmp_path):
    state = fake_state(tmp_path, processes=[{"pid": 4242, "name": "python3", "type": "C"}])
    rc, result, log = run_task(tmp_path, "nvidia_gpu", NV_ARGS, env=smi_env(state))
    assert result.get("failed"), log
    assert "GPU 1 (0000:44:00.0): pid 4242 python3" in result["msg"] and "force: true" in result["msg"]
    assert result["processes"] == [{"gpu": 1, "bus_id": "0000:44:00.0", "pid": 4242, "name": "python3", "type": "C"}]
    assert all(call == ["-q", "-x"] for call in read_state(state)["calls"])

    rc, result, log = run_task(tmp_path, "nvidia_gpu", dict(NV_ARGS, force=True), env=smi_env(state))
    assert rc == 0 and result["changed"], log
    assert all(g["persistence"] and g["limit_w"] == 700.0 for g in read_state(state)["gpus"])


def test_nvidia_gpu_setting_not_taken_fails_naming_the_gpu(tmp_path):
    state = fake_state(tmp_path)
    data = read_state(state)
    data["ignore"] = ["-pl"]
    with open(state, "w") as handle:
        json.dump(data, handle)
    rc, result, log = run_task(tmp_path, "nvidia_gpu", dict(NV_ARGS, gpus=["2"]), env=smi_env(state))
    assert result.get("failed"), log
    assert "GPU 2 (0000:47:00.0) reports a power limit of 450 W, not 700 W" in result["msg"]


def test_nvidia_gpu_out_of_range_limit_runs_nothing(tmp_path):
    state = fake_state(tmp_path)
    rc, result, log = run_task(tmp_path, "nvidia_gpu", dict(NV_ARGS, power_limit="900"), env=smi_env(state))
    assert result.get("failed") and "outside what GPU 0" in result["msg"], log
    assert all(call == ["-q", "-x"] for call in read_state(state)["calls"])


def test_nvidia_gpu_on_a_snapshot_root_runs_nothing_and_is_idempotent(four_runs):
    # the same four runs as pcie_tune's (four_runs), on a copy of its own; the check again shows the
    # diff there (test_nvidia_gpu_four_runs_with_fake_smi checks again without it)
    start, after_check, applied, _after_check_again, after_apply_again = four_runs["hashes"]["nvidia"]
    steps = [(rc, results[1], logs[1]) for rc, results, logs in four_runs["steps"]]
    rc, result, log = steps[0]
    assert rc == 0 and result["changed"], log
    assert after_check == start
    rc, result, log = steps[1]
    assert rc == 0 and result["changed"], log
    assert result["commands"][:2] == ["nvidia-smi -i 0 -pm 1", "nvidia-smi -i 1 -pm 1"]
    assert "nvidia-smi -i 7 -pl 600" in result["commands"]
    assert applied != start  # the captured nvidia-smi XML now shows the applied state
    for rc, result, log in steps[2:]:
        assert rc == 0 and not result["changed"] and result["commands"] == [], log
    assert after_apply_again == applied
