"""A plain clone resolves gpuhost.baseline.* without `make link` (issue 22: ansible-lint failed there).

ansible.cfg's ``collections_path = ./build/collections`` finds the collection through the committed,
relative link ``build/collections/ansible_collections/gpuhost/baseline -> ../../../..``. ansible-lint's
failure in a plain clone was ansible-playbook's syntax check not resolving the collection's modules and
roles (``syntax-check[unknown-module]``); the same syntax check of every playbook runs here in a fresh
``git clone`` of the committed tree, in a few seconds (the whole ansible-lint run, 1.5 min, is ``make lint``).
"""
import os
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
LINK = "build/collections/ansible_collections/gpuhost/baseline"


def git(*args, cwd=REPO):
    return subprocess.run(["git"] + list(args), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    if not os.path.isdir(os.path.join(REPO, ".git")) or shutil.which("git") is None:
        pytest.skip("not a git checkout")
    path = str(tmp_path_factory.mktemp("plain-clone") / "baseline")
    result = git("clone", "-q", "--no-hardlinks", REPO, path)
    assert result.returncode == 0, result.stdout
    return path


def test_the_collection_link_is_committed_relative():
    listed = git("ls-files", "-s", "--", LINK).stdout.split()
    assert listed and listed[0] == "120000", "%s is not committed as a symbolic link: %r" % (LINK, listed)
    assert git("cat-file", "-p", listed[1]).stdout == "../../../.."


def test_playbooks_resolve_the_collection_in_a_plain_clone(clone):
    assert os.path.realpath(os.path.join(clone, LINK)) == os.path.realpath(clone)
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith("ANSIBLE_") and k != "PYTHONPATH")
    env.update(ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false", ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="false",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    playbooks = sorted(os.path.join("playbooks", name) for name in os.listdir(os.path.join(clone, "playbooks"))
                       if name.endswith(".yml"))
    assert "playbooks/demo.yml" in playbooks
    result = subprocess.run([os.path.join(BIN, "ansible-playbook"), "--syntax-check", "-i", "localhost,"] + playbooks,
                            cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            universal_newlines=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout[-4000:]
    assert "couldn't resolve" not in result.stdout and "was not found" not in result.stdout
