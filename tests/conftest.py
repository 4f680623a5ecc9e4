"""Test set-up shared by every test: make the checkout importable as the collection.

Tests import ``ansible_collections.gpuhost.baseline`` from this checkout (never from an
installed copy), through ``build/collections/ansible_collections/gpuhost/baseline`` -> repo.
"""
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(REPO, "build", "collections")
LINK = os.path.join(COLLECTIONS, "ansible_collections", "gpuhost", "baseline")

if not os.path.lexists(LINK):  # committed, relative (as `make link` makes it); put back where missing
    os.makedirs(os.path.dirname(LINK), exist_ok=True)
    os.symlink(os.path.join("..", "..", "..", ".."), LINK)
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)
os.environ.setdefault("ANSIBLE_COLLECTIONS_PATH", COLLECTIONS)
os.environ.setdefault("ANSIBLE_CONFIG", os.path.join(REPO, "ansible.cfg"))
# The catalogue's disk cache (and any other XDG cache) of every test and of every ansible-playbook
# the tests start goes to a directory of this run, removed at its end (pytest_unconfigure, or at exit): the
# tests' many catalogue copies never reach the user's ~/.cache.
import atexit  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

CACHE_HOME = tempfile.mkdtemp(prefix="gpuhost-test-cache-")
os.environ["XDG_CACHE_HOME"] = CACHE_HOME
# also when pytest stops before pytest_unconfigure (a conftest that fails to import: a missing package)
atexit.register(shutil.rmtree, CACHE_HOME, True)
# ansible-playbook, ansible-runner and molecule are the venv's, whatever started pytest
VENV_BIN = os.path.join(REPO, ".venv", "bin")
if os.path.isdir(VENV_BIN) and VENV_BIN not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = VENV_BIN + os.pathsep + os.environ.get("PATH", "")


# -- generated snapshot trees (tools/make_fixtures.py) ---------------------------------
import subprocess  # noqa: E402

import pytest  # noqa: E402

#: The snapshots ``tools/make_fixtures.py OUTDIR`` builds by default (``large`` is the benchmark's).
SNAPSHOT_NAMES = ("incident", "healthy", "intel", "hostile")


@pytest.fixture(scope="session")
def snapshot_trees(tmp_path_factory):
    """``{name: path}`` of the bundled snapshots, generated once per test session."""
    outdir = tmp_path_factory.mktemp("snapshots")
    subprocess.run([sys.executable, os.path.join(REPO, "tools", "make_fixtures.py"), str(outdir)],
                   check=True, stdout=subprocess.DEVNULL)
    return dict((name, str(outdir / name)) for name in SNAPSHOT_NAMES)


@pytest.fixture
def healthy_copy(snapshot_trees, tmp_path):
    """A copy of the healthy demo snapshot that a test may change (tests/helpers/snapshot_edit.py)."""
    root = str(tmp_path / "healthy")
    shutil.copytree(snapshot_trees["healthy"], root, symlinks=True)
    return root


@pytest.fixture(autouse=True)
def _unmount_readonly_attributes():
    """Bind mounts that helpers.fixhost.make_readonly made during a test are gone after it."""
    yield
    from helpers import fixhost
    fixhost.unmount_all()


def pytest_unconfigure(config):  # pylint: disable=unused-argument
    shutil.rmtree(CACHE_HOME, ignore_errors=True)
