"""What every playbook checks before any host is contacted (the first play: playbooks/vars/preflight.yml
and playbooks/tasks/preflight.yml; the first action: plugin_utils/base/controller_libs.py); docs/report.md,
"Exit codes and gpuhost_fail_on":

* no false green: hosts that match nothing (a missing -i file, an empty inventory, a --limit) fail the run
  with one line instead of exiting 0 with nothing audited; -e gpuhost_allow_empty=true allows it;
* an ansible-core older than the collection supports stops at once with one line naming the minimum
  (the minimum raised above the running version with -e gpuhost_min_ansible, the internal knob);
* a controller Python without jmespath and jsonschema is told both, and the command, in one message.

ansible-playbook runs as a subprocess with the collection's ansible.cfg and json results, so that a
failed task's message is one line of the output."""
import glob
import json
import os
import re
import subprocess
import sys

import ansible
import pytest
from ansible.release import __version__ as ANSIBLE_VERSION

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
#: no sshd listens on the discard port: a host that is contacted is unreachable at once
GHOST = {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 9,
         "ansible_ssh_common_args": "-o ConnectTimeout=3 -o BatchMode=yes",
         "ansible_python_interpreter": "/usr/bin/python3"}
PLAYBOOKS = ("audit.yml", "remediate.yml", "validate.yml", "learn.yml", "snapshot.yml")
FAILED = 2
NO_HOSTS = ("gpuhost.baseline: no host matched: the inventory is empty, or its -i source is missing or unparsable "
            "(inventory sources: {sources}{limit}); check -i and --limit, or set gpuhost_allow_empty=true to allow "
            "an empty run")


def playbook(cwd, name, inventory, *args, **kwargs):
    """``ansible-playbook -i inventory playbooks/<name> args`` in ``cwd``; ``inventory`` a path, or a dict
    written as one; ``python`` runs ansible-playbook with another interpreter."""
    if isinstance(inventory, dict):
        path = os.path.join(str(cwd), "inventory.yml")
        with open(path, "w") as handle:
            json.dump(inventory, handle)
        inventory = path
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    env.pop("PYTHONPATH", None)
    command = [ANSIBLE_PLAYBOOK, "-i", str(inventory), os.path.join(REPO, "playbooks", name)] + list(args)
    if kwargs.get("python"):
        command.insert(0, kwargs["python"])
    return subprocess.run(command, cwd=str(cwd), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300, check=False)


def lines_with(output, text):
    return [line for line in output.splitlines() if text in line]


def untouched(result):
    """Nothing after the first play ran, and no host was contacted."""
    assert "UNREACHABLE" not in result.stdout, result.stdout
    assert "PLAY [Validate profiles" not in result.stdout and "PLAY [Audit" not in result.stdout, result.stdout
    assert "TASK [gpuhost.baseline" not in result.stdout, result.stdout


# -- no host matched ------------------------------------------------------------------------


@pytest.mark.parametrize("name", PLAYBOOKS)
def test_a_missing_inventory_file_fails_the_run_with_one_line(tmp_path, name):
    missing = tmp_path / "nosuchfile.yml"
    result = playbook(tmp_path, name, missing)
    out = result.stdout
    assert result.returncode == FAILED, out
    assert "Unable to parse %s as an inventory source" % missing in out  # Ansible's warning, as before
    assert lines_with(out, NO_HOSTS.format(sources=missing, limit="")), out
    untouched(result)


def test_an_empty_inventory_fails_the_run(tmp_path):
    empty = tmp_path / "empty.yml"
    empty.write_text("")
    result = playbook(tmp_path, "audit.yml", empty, "--check", "-e", "gpuhost_report_dir=%s" % (tmp_path / "r"))
    assert result.returncode == FAILED, result.stdout
    assert lines_with(result.stdout, NO_HOSTS.format(sources=empty, limit="")), result.stdout
    assert re.search(r"localhost +: ok=0 .* failed=1 ", result.stdout), result.stdout
    untouched(result)
    assert not (tmp_path / "r").exists()


def test_an_inventory_of_empty_groups_fails_the_run(tmp_path):
    result = playbook(tmp_path, "remediate.yml", {"all": {"children": {"gpu": {"hosts": {}}}}}, "--check")
    assert result.returncode == FAILED, result.stdout
    assert lines_with(result.stdout, "gpuhost.baseline: no host matched: the inventory is empty"), result.stdout
    untouched(result)


def test_a_limit_that_matches_no_host_of_the_inventory_is_refused_before_any_play(tmp_path):
    # ansible-playbook itself refuses it (exit 1), before the playbook's first play: the host is never contacted
    result = playbook(tmp_path, "audit.yml", {"all": {"hosts": {"ghost": GHOST}}}, "--limit", "nomatch")
    assert result.returncode == 1, result.stdout
    assert "Specified inventory, host pattern and/or --limit leaves us with no hosts to target" in result.stdout
    assert "PLAY [" not in result.stdout
    untouched(result)


def test_a_limit_on_an_empty_inventory_stops_at_the_first_plays_hosts(tmp_path):
    # a --limit leaves no host to any play, the implicit localhost included: the first play's hosts keyword
    # refuses the run, an error of the playbook (ansible-core 2.19 and later: exit code 4; 2.16: 1)
    missing = tmp_path / "nosuchfile.yml"
    result = playbook(tmp_path, "validate.yml", missing, "--limit", "gpu01")
    major_minor = tuple(int(part) for part in ANSIBLE_VERSION.split(".")[:2])
    assert result.returncode == (4 if major_minor >= (2, 19) else 1), result.stdout
    assert NO_HOSTS.format(sources=missing, limit="; --limit gpu01") in result.stdout
    assert "PLAY [" not in result.stdout
    untouched(result)


@pytest.mark.parametrize("limit", [(), ("--limit", "gpu01")])
def test_allow_empty_keeps_an_empty_run_green(tmp_path, limit):
    args = ("--check", "-e", "gpuhost_allow_empty=true", "-e", "gpuhost_report_dir=%s" % (tmp_path / "r")) + limit
    result = playbook(tmp_path, "audit.yml", tmp_path / "nosuchfile.yml", *args)
    assert result.returncode == 0, result.stdout
    assert "no host matched" not in result.stdout
    assert "skipping: no hosts matched" in result.stdout
    assert not (tmp_path / "r").exists()


def test_a_run_with_hosts_passes_the_first_play_and_localhost_stays_out_of_it(snapshot_trees, tmp_path):
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "gpuhost_root": snapshot_trees["healthy"]}
    result = playbook(tmp_path, "audit.yml", {"all": {"hosts": {"demo-healthy": host}}}, "--check",
                      "-e", "gpuhost_report_dir=%s" % (tmp_path / "r"))
    assert result.returncode == 0, result.stdout
    assert "no host matched" not in result.stdout
    assert "localhost " not in result.stdout.split("PLAY RECAP", 1)[1]
    assert (tmp_path / "r" / "report.json").exists()


# -- the minimum ansible-core -----------------------------------------------------------------


@pytest.mark.parametrize("name, args", [(name, ()) for name in PLAYBOOKS]
                         + [("snapshot.yml", ("--tags", "import")), ("audit.yml", ("--limit", "ghost"))])
def test_an_ansible_core_below_the_minimum_stops_before_any_host_is_contacted(tmp_path, name, args):
    result = playbook(tmp_path, name, {"all": {"hosts": {"ghost": GHOST}}}, "-e", "gpuhost_min_ansible=99.0", *args)
    out = result.stdout
    assert result.returncode == FAILED, out
    line = ("gpuhost.baseline needs ansible-core 99.0 or later; this is %s: upgrade ansible-core "
            "(python3 -m pip install 'ansible-core>=99.0', into the Python that runs ansible-playbook)" % ANSIBLE_VERSION)
    assert lines_with(out, json.dumps(line)[1:-1]), out
    assert "no host matched" not in out
    untouched(result)


def test_the_demo_refuses_an_old_ansible_core_before_writing_anything(tmp_path):
    result = playbook(tmp_path, "demo.yml", tmp_path / "none.yml", "-e", "gpuhost_min_ansible=99.0")
    assert result.returncode == FAILED, result.stdout
    assert lines_with(result.stdout, "gpuhost.baseline needs ansible-core 99.0 or later; this is %s" % ANSIBLE_VERSION)
    assert not (tmp_path / "gpuhost-demo").exists()


# -- the controller's libraries ---------------------------------------------------------------

#: ansible-core and its dependencies (import names; their distributions' metadata goes with them)
ANSIBLE_CORE_ONLY = ("ansible", "yaml", "_yaml", "jinja2", "markupsafe", "cryptography", "cffi", "_cffi_backend",
                     "pycparser", "packaging", "resolvelib")
DISTRIBUTIONS = ("ansible_core", "pyyaml", "jinja2", "markupsafe", "cryptography", "cffi", "pycparser", "packaging",
                 "resolvelib")


def core_only(name):
    """Whether ``name`` (an entry of site-packages) is ansible-core, a dependency of it or their metadata."""
    name = name.lower()
    if name.endswith(".dist-info"):
        return name.split("-", 1)[0] in DISTRIBUTIONS
    return name in ANSIBLE_CORE_ONLY or name.split(".", 1)[0] in ANSIBLE_CORE_ONLY and name.endswith(".so")


def venv_with(tmp_path_factory, also=()):
    """A Python (a venv) that has ansible-core and its dependencies, and of the rest only ``also`` (import
    names): the packages of this venv linked into a directory that a .pth file of the new venv names."""
    top = tmp_path_factory.mktemp("core-only")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(top / "venv")], check=True)
    libs = top / "libs"
    libs.mkdir()
    site = os.path.dirname(os.path.dirname(os.path.abspath(ansible.__file__)))
    for name in os.listdir(site):
        if core_only(name) or name in also:
            os.symlink(os.path.join(site, name), str(libs / name))
    (site_packages,) = glob.glob(str(top / "venv" / "lib" / "python*" / "site-packages"))
    with open(os.path.join(site_packages, "gpuhost-test-core-only.pth"), "w") as handle:
        handle.write(str(libs) + "\n")
    python = str(top / "venv" / "bin" / "python")
    probe = subprocess.run([python, "-c", "import ansible, jinja2, yaml\n"
                            "for name in ('jmespath', 'jsonschema'):\n"
                            "    try:\n        __import__(name)\n    except ImportError:\n        pass\n"
                            "    else:\n        print(name)"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert probe.returncode == 0 and probe.stdout.split() == list(also), probe.stdout
    return python


@pytest.fixture(scope="module")
def core_only_python(tmp_path_factory):
    """A Python with ansible-core, without jmespath and jsonschema."""
    return venv_with(tmp_path_factory)


def missing_libraries_line(python):
    return ("gpuhost.baseline needs the Python libraries jmespath, jsonschema on the controller, in the Python that "
            "runs ansible-playbook (%s): install them with: %s -m pip install 'jmespath>=1.0.1,<2' "
            "'jsonschema>=4.18.0,<5' (or %s -m pip install -r " % (python, python, python))


@pytest.mark.parametrize("name", ["audit.yml", "learn.yml"])
def test_a_controller_without_jmespath_and_jsonschema_is_told_at_once(core_only_python, snapshot_trees, tmp_path,
                                                                      name):
    host = {"ansible_connection": "local", "ansible_python_interpreter": core_only_python,
            "gpuhost_root": snapshot_trees["healthy"]}
    result = playbook(tmp_path, name, {"all": {"hosts": {"demo-healthy": host}}}, "--check",
                      "-e", "gpuhost_report_dir=%s" % (tmp_path / "r"), python=core_only_python)
    out = result.stdout
    assert result.returncode == FAILED, out
    found = lines_with(out, json.dumps(missing_libraries_line(core_only_python))[1:-1])
    assert found and "requirements.txt" in found[-1], out
    # not blamed on a variable, nor reported one library per run
    assert "invalid baseline configuration" not in out and "gpuhost_waivers" not in out
    assert "Traceback" not in out
    assert not (tmp_path / "r").exists()


def test_the_demo_without_jmespath_and_jsonschema_writes_nothing(core_only_python, tmp_path):
    result = playbook(tmp_path, "demo.yml", tmp_path / "none.yml", python=core_only_python)
    assert result.returncode == FAILED, result.stdout
    assert lines_with(result.stdout, json.dumps(missing_libraries_line(core_only_python))[1:-1]), result.stdout
    assert not (tmp_path / "gpuhost-demo").exists()


def test_a_controller_without_jsonschema_is_not_told_about_a_variable(snapshot_trees, tmp_path_factory, tmp_path):
    # the schema check of the waivers was the first to need jsonschema: "invalid baseline configuration
    # (host demo-healthy): gpuhost_waivers: ..." named a variable the inventory does not even set
    python = venv_with(tmp_path_factory, also=("jmespath",))
    host = {"ansible_connection": "local", "ansible_python_interpreter": python, "gpuhost_root": snapshot_trees["healthy"]}
    result = playbook(tmp_path, "audit.yml", {"all": {"hosts": {"demo-healthy": host}}}, "--check", python=python)
    out = result.stdout
    assert result.returncode == FAILED, out
    line = ("gpuhost.baseline needs the Python library jsonschema on the controller, in the Python that runs "
            "ansible-playbook (%s): install it with: %s -m pip install 'jsonschema>=4.18.0,<5'" % (python, python))
    assert lines_with(out, json.dumps(line)[1:-1]), out
    assert "gpuhost_waivers" not in out and "invalid baseline configuration" not in out and "jmespath" not in out
