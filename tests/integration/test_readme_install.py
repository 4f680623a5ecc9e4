"""The README's Install section, run as written, in a fresh venv (issue 34).

A fresh venv gets only ansible-core (what a user's controller already has); then the commands of the
README's Install block run one by one, through bash, in a copy of the checkout's files, with HOME a
temporary directory (so ``~/dist`` and ``~/.ansible/collections`` are the test's): the build in the
checkout, then from another directory the galaxy install of
the tarball, the ``pip install -r`` of the installed collection's requirements.txt. Before that
last line the demo must stop with one message naming every missing library and the install command;
after it the demo runs from an empty directory with no Ansible configuration at all.

Every install takes the versions of the lock (requirements-test.txt, as pip constraints): the
README's commands are what is tested, not the day's newest releases.
"""
import os
import re
import subprocess
import sys
import tarfile

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOCK = os.path.join(REPO, "requirements-test.txt")

pytestmark = pytest.mark.slow


def install_block():
    """The non-comment lines of the first ``sh`` block under the README's ``## Install``."""
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as handle:
        text = handle.read()
    section = text.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
    return [line.strip() for line in block.split("\n") if line.strip() and not line.strip().startswith("#")]


def constraints(path):
    """The lock's pins without their hashes: pip constraints for the fresh venv's installs."""
    with open(LOCK, encoding="utf-8") as handle:
        pins = re.findall(r"^([A-Za-z0-9._-]+==\S+) \\$", handle.read(), re.M)
    path.write_text("\n".join(pins) + "\n")
    return str(path)


def locked(name):
    with open(LOCK, encoding="utf-8") as handle:
        return re.search(r"^%s==(\S+) \\$" % re.escape(name), handle.read(), re.M).group(1)


def bash(line, cwd, env, timeout=600):
    return subprocess.run(["bash", "-c", line], cwd=str(cwd), env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=timeout, check=False)


def test_install_section_from_the_built_tarball_in_a_fresh_venv(tmp_path):
    lines = install_block()
    assert [line.split()[:3] for line in lines] == [
        ["ansible-galaxy", "collection", "build"],
        ["ansible-galaxy", "collection", "install"],
        ["python3", "-m", "pip"]], lines
    home = tmp_path / "home"
    home.mkdir()
    venv = tmp_path / "venv"
    env = dict((k, v) for k, v in os.environ.items()
               if not k.startswith(("ANSIBLE_", "VIRTUAL_ENV", "PYTHON")) and k != "PIP_CONSTRAINT")
    env.update(HOME=str(home), PATH=str(venv / "bin") + os.pathsep + os.environ.get("PATH", ""),
               PIP_CONSTRAINT=constraints(tmp_path / "constraints.txt"), ANSIBLE_NOCOLOR="1",
               XDG_CACHE_HOME=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    done = bash("python3 -m pip install -q ansible-core==%s" % locked("ansible-core"), tmp_path, env)
    assert done.returncode == 0, done.stdout
    # the checkout's files as a clone has them
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout.split(b"\0")
    with tarfile.open(str(tmp_path / "tree.tar"), "w") as tar:
        for name in listed:
            name = name.decode()
            if name and not name.startswith("build/") and os.path.lexists(os.path.join(REPO, name)):
                tar.add(os.path.join(REPO, name), arcname=name, recursive=False)
    with tarfile.open(str(tmp_path / "tree.tar")) as tar:
        tar.extractall(str(checkout))

    # the build in the checkout, the rest from elsewhere (as the README says)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for line, cwd in zip(lines[:2], (checkout, elsewhere)):
        done = bash(line, cwd, env)
        assert done.returncode == 0, "%s: %s" % (line, done.stdout)
    assert (home / ".ansible" / "collections" / "ansible_collections" / "gpuhost" / "baseline" / "MANIFEST.json").is_file()

    empty = tmp_path / "empty"
    empty.mkdir()
    before = bash("ansible-playbook gpuhost.baseline.demo", empty, env)
    assert before.returncode == 2, before.stdout
    # one message naming both libraries and the install command (ansible-core 2.19 prints a failed
    # task's message twice: its [ERROR] summary and the fatal result)
    named = set(re.findall(r"needs the Python libraries (.+?) on the controller", before.stdout))
    assert named == {"jmespath, jsonschema"}, before.stdout
    assert "-m pip install" in before.stdout and "requirements.txt" in before.stdout, before.stdout
    assert "Traceback" not in before.stdout and "gpuhost_waivers" not in before.stdout

    done = bash(lines[2], elsewhere, env)
    assert done.returncode == 0, "%s: %s" % (lines[2], done.stdout)
    after = bash("ansible-playbook gpuhost.baseline.demo", empty, env)
    assert after.returncode == 0, after.stdout
    assert "Warning" not in after.stdout.split("PLAY [", 1)[0].replace("[WARNING]: No inventory", "").replace(
        "[WARNING]: provided hosts list is empty", ""), after.stdout
    for name in ("report.json", "report.html", "report.md", "junit.xml", "metrics.prom"):
        assert (empty / "gpuhost-demo" / "reports" / name).is_file(), name
