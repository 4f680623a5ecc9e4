"""gpuhost.baseline.sysctl was renamed to gpuhost.baseline.kernel_sysctl.

The old name must keep working through the ``plugin_routing`` redirect of ``meta/runtime.yml``
(same result as the new name) and must say that it is deprecated; the new name must not warn.
Both run on a tiny writable root (``root`` option), so nothing outside ``tmp_path`` is touched.
"""
import json
import os
import subprocess
import sys

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")


def make_root(path):
    """A root with ``kernel.numa_balancing`` at 1 and no sysctl.d file of ours."""
    os.makedirs(os.path.join(path, "proc", "sys", "kernel"))
    os.makedirs(os.path.join(path, "etc", "sysctl.d"))
    with open(os.path.join(path, "proc", "sys", "kernel", "numa_balancing"), "w") as handle:
        handle.write("1\n")
    return path


def run(tmp_path, module, root):
    out = tmp_path / ("%s.json" % module.replace(".", "_"))
    playbook = tmp_path / ("%s.yml" % module.replace(".", "_"))
    playbook.write_text(json.dumps([{
        "name": "rename", "hosts": "localhost", "gather_facts": False,
        "tasks": [
            {"name": "set numa_balancing", module: {"key": "kernel.numa_balancing", "value": "0", "root": root},
             "register": "result"},
            {"name": "save", "ansible.builtin.copy": {"content": "{{ result | to_json }}", "dest": str(out)}},
        ]}]))
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", ANSIBLE_RETRY_FILES_ENABLED="0",
               ANSIBLE_DEPRECATION_WARNINGS="1")
    proc = subprocess.run([PLAYBOOK, "-i", "localhost,", "-c", "local",
                           "-e", "ansible_python_interpreter=%s" % sys.executable, str(playbook)],
                          cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:]
    return proc.stdout, json.loads(out.read_text())


def read(root, *parts):
    with open(os.path.join(root, *parts)) as handle:
        return handle.read()


def test_runtime_yml_routes_the_old_name():
    with open(os.path.join(REPO, "meta", "runtime.yml")) as handle:
        runtime = yaml.safe_load(handle)
    route = runtime["plugin_routing"]["modules"]["sysctl"]
    assert route["redirect"] == "gpuhost.baseline.kernel_sysctl"
    assert route["deprecation"]["removal_version"] == "2.0.0"
    assert "kernel_sysctl" in route["deprecation"]["warning_text"]
    assert not os.path.exists(os.path.join(REPO, "plugins", "modules", "sysctl.py"))
    assert os.path.exists(os.path.join(REPO, "plugins", "modules", "kernel_sysctl.py"))


def test_old_name_works_and_warns(tmp_path):
    old_root = make_root(str(tmp_path / "old"))
    new_root = make_root(str(tmp_path / "new"))
    old_log, old = run(tmp_path, "gpuhost.baseline.sysctl", old_root)
    new_log, new = run(tmp_path, "gpuhost.baseline.kernel_sysctl", new_root)

    for result, root in ((old, old_root), (new, new_root)):
        assert result["changed"] is True and not result.get("failed"), result
        assert (result["runtime_before"], result["runtime_after"]) == ("1", "0"), result
        assert read(root, "proc", "sys", "kernel", "numa_balancing").strip() == "0"
        assert "kernel.numa_balancing = 0" in read(root, "etc", "sysctl.d", "90-gpuhost-baseline.conf")
    # The redirect adds the deprecation to the task result too.
    deprecations = old.pop("deprecations", [])
    assert [(d.get("collection_name"), d.get("version")) for d in deprecations] == [("gpuhost.baseline", "2.0.0")]
    assert "gpuhost.baseline.kernel_sysctl" in deprecations[0]["msg"]
    assert "deprecations" not in new, new
    # Same module behind both names: same result apart from the paths under each root.
    assert json.dumps(old).replace(old_root, "ROOT") == json.dumps(new).replace(new_root, "ROOT")

    flat = " ".join(old_log.split())
    assert "[DEPRECATION WARNING]" in flat, old_log[-3000:]
    assert "gpuhost.baseline.sysctl" in flat and "renamed to gpuhost.baseline.kernel_sysctl" in flat, old_log[-3000:]
    assert "2.0.0" in flat, old_log[-3000:]
    assert "DEPRECATION" not in new_log, new_log[-3000:]
