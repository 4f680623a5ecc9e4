"""galaxy.yml's build_ignore keeps caches and run output out of the collection artifact.

The files git would commit (tracked, plus untracked ones .gitignore does not exclude) are copied
to a temporary directory, next to the clutter a working checkout collects: reports and snapshots
written where ansible-playbook ran, tool caches, molecule state, logs. ``ansible-galaxy collection
build`` of that copy must leave every planted path out and keep every plugin, role, rule, profile,
schema, template, meta file and the extra docs. The same planted paths must match the ``unwanted``
pattern of tools/build_check.sh, so that the build gate would catch a build_ignore that regressed.
"""
import os
import re
import shutil
import subprocess
import sys
import tarfile

import pytest
import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GALAXY = os.path.join(os.path.dirname(sys.executable), "ansible-galaxy")

# Paths a working checkout collects that must never ship (relative to the collection root).
PLANTED = [
    "reports/report.html",
    "reports/report.json",
    "gpuhost-reports/report.json",
    "gpuhost-snapshots/gpu01/proc/cmdline",
    "gpuhost-snapshots/gpu01.tar.gz",
    ".ruff_cache/0.6.0/123456",
    ".ruff_cache/CACHEDIR.TAG",
    ".mypy_cache/3.11/cache.db",
    "plugins/.mypy_cache/3.11/cache.db",
    "molecule/audit/.molecule/state.yml",
    "molecule/remediate/.molecule/inventory/ansible_inventory.yml",
    "ansible.log",
    "molecule/audit/ansible.log",
    "tests/integration/pytest-debug.log",
    ".pytest_cache/v/cache/lastfailed",
    "tests/.pytest_cache/v/cache/nodeids",
    ".hypothesis/examples/abc",
    "tests/unit/.hypothesis/examples/abc",
    "plugins/plugin_utils/__pycache__/report.cpython-311.pyc",
    ".tox/py311/pyvenv.cfg",
    "changelogs/.plugin-cache.yaml",
    "roles/audit/tasks/main.yml~",
]

# Everything under these must ship.
REQUIRED_TREES = ("plugins", "roles", "rules", "profiles", "schemas", "templates", "meta", "docs/docsite")
REQUIRED_FILES = ("LICENSE", "README.md", "requirements.txt", "meta/runtime.yml", "meta/execution-environment.yml",
                  "MANIFEST.json", "FILES.json")


def committed_files():
    """The files git would commit, relative to the checkout (missing ones, deleted in the tree, dropped)."""
    if not os.path.isdir(os.path.join(REPO, ".git")) or shutil.which("git") is None:
        pytest.skip("not a git checkout: cannot tell which files would be committed")
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                         stdout=subprocess.PIPE, check=True).stdout.decode("utf-8", "surrogateescape")
    return sorted(set(p for p in out.split("\0") if p and os.path.isfile(os.path.join(REPO, p))))


def build(tmp, build_ignore=None):
    """``(copied files, tarball member names)`` of a build of a cluttered copy of the checkout.

    ``build_ignore``, when given, replaces galaxy.yml's list in the copy.
    """
    root = tmp / "ansible_collections" / "gpuhost" / "baseline"
    files = committed_files()
    for rel in files:
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.join(REPO, rel), str(dest))
    for rel in PLANTED:
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(b"planted by test_build_ignore\n")
    with open(os.path.join(REPO, "galaxy.yml")) as handle:
        meta = yaml.safe_load(handle)
    if build_ignore is not None:
        meta["build_ignore"] = build_ignore
        (root / "galaxy.yml").write_text(yaml.safe_dump(meta))
    dist = tmp / "dist"
    env = dict(os.environ, ANSIBLE_NOCOLOR="1")
    env.pop("ANSIBLE_CONFIG", None)
    proc = subprocess.run([GALAXY, "collection", "build", "--force", "--output-path", str(dist), str(root)],
                          cwd=str(tmp), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:]
    tarball = dist / ("%s-%s-%s.tar.gz" % (meta["namespace"], meta["name"], meta["version"]))
    assert tarball.is_file(), (proc.stdout, os.listdir(str(dist)))
    with tarfile.open(str(tarball)) as tar:
        members = set(m.name[2:] if m.name.startswith("./") else m.name for m in tar.getmembers())
    return files, members


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build(tmp_path_factory.mktemp("build-ignore"))


def test_planted_clutter_is_left_out(built):
    files, members = built
    assert sorted(rel for rel in PLANTED if rel in members) == []
    # Nothing else either: the artifact is the committed files, their directories and the two
    # files ansible-galaxy writes.
    expected = set(files) | {"MANIFEST.json", "FILES.json"}
    for rel in files:
        parts = rel.split("/")[:-1]
        expected.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    assert sorted(members - expected) == [], "galaxy.yml build_ignore lets these into the artifact"


def test_collection_content_ships(built):
    files, members = built
    wanted = [rel for rel in files if rel.startswith(tuple(t + "/" for t in REQUIRED_TREES))]
    assert any(rel.startswith("plugins/modules/") for rel in wanted)
    assert any(rel.startswith("roles/remediate/") for rel in wanted)
    assert any(rel.startswith("rules/") for rel in wanted)
    missing = [rel for rel in wanted if rel not in members]
    assert missing == [], "build_ignore drops collection content: %s" % missing
    assert [rel for rel in REQUIRED_FILES if rel not in members] == []


def build_check_pattern():
    with open(os.path.join(REPO, "tools", "build_check.sh")) as handle:
        script = handle.read()
    match = re.search(r"^unwanted='([^']+)'$", script, re.M)
    assert match, "tools/build_check.sh has no unwanted='...' line"
    return re.compile(match.group(1))


def test_build_check_pattern_agrees(built):
    """tools/build_check.sh's content check flags every planted path and nothing that ships."""
    _files, members = built
    pattern = build_check_pattern()
    assert [rel for rel in PLANTED if not pattern.search(rel)] == []
    assert sorted(rel for rel in members if pattern.search(rel)) == []


def test_planted_clutter_ships_without_build_ignore(tmp_path):
    """The check above has teeth: with an empty build_ignore the clutter ships (ansible-galaxy's own
    defaults only cover __pycache__, .tox, *.pyc and earlier artifacts)."""
    _files, members = build(tmp_path, build_ignore=[])
    for rel in ("reports/report.html", "gpuhost-reports/report.json", ".ruff_cache/CACHEDIR.TAG",
                ".mypy_cache/3.11/cache.db", "molecule/audit/.molecule/state.yml", "ansible.log"):
        assert rel in members, rel


def documented_contents():
    """``(ships, left out)``: the paths of docs/development.md's "What the collection tarball holds" table."""
    with open(os.path.join(REPO, "docs", "development.md")) as handle:
        text = handle.read()
    section = text.split("### What the collection tarball holds", 1)[1].split("\n#", 1)[0]
    ships, left_out = set(), set()
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[1] not in ("ships", "left out"):
            continue
        paths = set(p.rstrip("/") for p in re.findall(r"`([^`]+)`", cells[0]))
        (ships if cells[1] == "ships" else left_out).update(paths)
    return ships, left_out


def test_tarball_contents_are_the_documented_ones(built):
    """Every top-level entry of the tarball is a documented 'ships' row, every 'ships' row the checkout has is
    in it, and no 'left out' path (the tests, tools, benchmarks, molecule, the Makefile, ...) is."""
    files, members = built
    ships, left_out = documented_contents()
    assert {"plugins", "roles", "playbooks", "docs", "tests", "tools", "benchmarks", "molecule", "Makefile"} <= ships | left_out
    top = set(m.split("/")[0] for m in members)
    assert sorted(top - ships) == [], "shipped but not documented in docs/development.md"
    present = set(rel.split("/")[0] for rel in files) | {"MANIFEST.json", "FILES.json"}
    assert sorted((ships & present) - top) == [], "documented as shipped but left out"
    nested = [m for m in members for path in left_out if m == path or m.startswith(path + "/")]
    assert nested == [], "documented as left out but shipped"
    assert "playbooks/demo.yml" in members and "plugins/plugin_utils/snapshot/snapgen/scenarios.py" in members
