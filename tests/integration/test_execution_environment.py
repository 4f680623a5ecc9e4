"""The collection in an execution environment: what ansible-builder would put into the image.

``ansible-builder create`` on the sample definition docs/execution-environment.yml (with the
collection tarball built from this checkout next to it) writes the build context without a
container runtime or network (run without a network where ``unshare -rn`` works). The Python requirements of the collection are only worked out
during ``ansible-builder build``, inside the image, by the context's own
``_build/scripts/introspect.py`` over the installed collections. The test runs that same script
here, over the tarball installed with ``ansible-galaxy collection install --offline``: the
requirements it writes (what the image would pip-install) must hold the controller's runtime
needs and none of the test tools.
"""
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)
SAMPLE = os.path.join(REPO, "docs", "execution-environment.yml")

RUNTIME = {"jmespath", "jsonschema"}
TEST_ONLY = {"pytest", "hypothesis", "molecule", "ansible-lint", "antsibull-changelog", "antsibull-docs",
             "ansible-builder", "junitparser", "xunitparser", "testinfra", "pytest-testinfra", "ansible-runner",
             "ansible-core"}


def names(lines):
    """Distribution names (normalised) of requirement lines, comments and options left out."""
    found = set()
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", line)
        assert match, line
        found.add(re.sub(r"[-_.]+", "-", match.group(0)).lower())
    return found


def _offline_prefix():
    """``unshare -rn`` (a new user and network namespace without interfaces) when this machine allows it."""
    if shutil.which("unshare") is None:
        return []
    probe = subprocess.run(["unshare", "-rn", "true"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           check=False)
    return ["unshare", "-rn"] if probe.returncode == 0 else []


OFFLINE = _offline_prefix()


def run(argv, cwd, timeout=600):
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", PATH=BIN + os.pathsep + os.environ.get("PATH", ""))
    env.pop("ANSIBLE_CONFIG", None)
    proc = subprocess.run(argv, cwd=str(cwd), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=timeout, check=False)
    assert proc.returncode == 0, "%s failed (%d):\n%s" % (" ".join(argv), proc.returncode, proc.stdout[-4000:])
    return proc.stdout


@pytest.fixture(scope="module")
def galaxy_meta():
    with open(os.path.join(REPO, "galaxy.yml")) as handle:
        return yaml.safe_load(handle)


@pytest.fixture(scope="module")
def tarball(tmp_path_factory, galaxy_meta):
    dist = tmp_path_factory.mktemp("dist")
    run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", "--force", "--output-path", str(dist), REPO],
        dist)
    path = dist / ("%s-%s-%s.tar.gz" % (galaxy_meta["namespace"], galaxy_meta["name"], galaxy_meta["version"]))
    assert path.is_file(), os.listdir(str(dist))
    return path


@pytest.fixture(scope="module")
def context(tmp_path_factory, tarball):
    """The build context ``ansible-builder create`` writes for the sample next to the tarball."""
    if not os.path.exists(os.path.join(BIN, "ansible-builder")):
        pytest.fail("ansible-builder is not installed in %s: it is pinned in requirements-test.txt (make venv)" % BIN)
    work = tmp_path_factory.mktemp("ee")
    shutil.copy(SAMPLE, str(work / "execution-environment.yml"))
    shutil.copy(str(tarball), str(work / tarball.name))
    # no network needed (and none given where the machine allows a network namespace)
    run(OFFLINE + [os.path.join(BIN, "ansible-builder"), "create", "--file", "execution-environment.yml",
                   "--context", "context", "--output-filename", "Containerfile"], work)
    return work / "context"


@pytest.fixture(scope="module")
def introspected(tmp_path_factory, tarball, context):
    """``(pip lines, bindep lines)`` the build would install for the collection.

    The tarball is installed (offline) into a collections path, then the context's own
    introspect.py, which the builder stage of the Containerfile runs, reads it.
    """
    collections = tmp_path_factory.mktemp("collections")
    run([os.path.join(BIN, "ansible-galaxy"), "collection", "install", "--offline", "--force",
         "-p", str(collections), str(tarball)], collections)
    pip_out, bindep_out = collections / "requirements.txt", collections / "bindep.txt"
    script = context / "_build" / "scripts" / "introspect.py"
    assert script.is_file()
    run(OFFLINE + [sys.executable, str(script), "introspect", "--write-pip", str(pip_out), "--write-bindep", str(bindep_out),
                   str(collections)], collections)
    pip_lines = pip_out.read_text().splitlines() if pip_out.exists() else []
    bindep_lines = bindep_out.read_text().splitlines() if bindep_out.exists() else []
    return pip_lines, bindep_lines


def test_sample_names_this_version(galaxy_meta):
    """The sample installs the tarball `ansible-galaxy collection build` writes for galaxy.yml's version."""
    with open(SAMPLE) as handle:
        sample = yaml.safe_load(handle)
    assert sample["version"] == 3
    name = "%s-%s-%s.tar.gz" % (galaxy_meta["namespace"], galaxy_meta["name"], galaxy_meta["version"])
    assert sample["dependencies"]["galaxy"]["collections"] == [{"name": "/build/" + name, "type": "file"}]
    assert sample["additional_build_files"] == [{"src": name, "dest": "."}]
    base = sample["images"]["base_image"]["name"]
    # a placeholder image name, never a registry host (docs/execution-environment.md)
    assert "/" not in base and "." not in base.split(":")[0], base


def test_create_writes_the_context(context, tarball):
    containerfile = (context / "Containerfile").read_text()
    assert "introspect.py introspect" in containerfile
    assert 'EE_BASE_IMAGE="ansible-core-ee:' in containerfile
    with open(str(context / "_build" / "requirements.yml")) as handle:
        galaxy = yaml.safe_load(handle)
    assert galaxy["collections"] == [{"name": "/build/" + tarball.name, "type": "file"}]
    assert (context / "_build" / tarball.name).is_file()
    # nothing for pip or bindep in the definition itself: all of it comes from the collection
    assert not (context / "_build" / "requirements.txt").exists()
    assert not (context / "_build" / "bindep.txt").exists()


def test_image_gets_runtime_requirements_only(introspected):
    pip_lines, bindep_lines = introspected
    found = names(pip_lines)
    assert RUNTIME <= found, pip_lines
    assert found & TEST_ONLY == set(), pip_lines
    # every requirement is attributed to this collection (introspect appends "# from collection x")
    for line in pip_lines:
        if line.strip() and not line.startswith("#"):
            assert "# from collection gpuhost.baseline" in line, line
    assert [line for line in bindep_lines if line.strip() and not line.startswith("#")] == []


def test_requirement_files_split():
    """requirements.txt: the controller's runtime needs; requirements-test.in: it plus the tools, pinned
    (the lock requirements-test.txt, made from it, is checked by tests/unit/tools/test_lock.py)."""
    with open(os.path.join(REPO, "requirements.txt")) as handle:
        runtime = handle.read().splitlines()
    with open(os.path.join(REPO, "requirements-test.in")) as handle:
        test = handle.read().splitlines()
    # cryptography: not imported by the collection, an upper bound on an ansible-core dependency
    assert names(runtime) == RUNTIME | {"cryptography"}
    assert [line for line in runtime if line.startswith("cryptography")] == ["cryptography<51"]
    assert "-r requirements.txt" in [line.strip() for line in test]
    pinned = [line.split("#", 1)[0].strip() for line in test]
    pinned = [line for line in pinned if line and not line.startswith("-")]
    assert all(re.match(r"^[A-Za-z0-9._-]+==[0-9][^ ]*$", line) for line in pinned), pinned
    assert {"ansible-core", "ansible-builder", "pytest", "hypothesis", "molecule", "ansible-lint",
            "antsibull-changelog", "junitparser", "pytest-testinfra"} <= names(test)
    with open(os.path.join(REPO, "meta", "execution-environment.yml")) as handle:
        meta = yaml.safe_load(handle)
    assert meta["dependencies"] == {"python": "requirements.txt"}
