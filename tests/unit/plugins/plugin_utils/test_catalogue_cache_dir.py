# -*- coding: utf-8 -*-
"""Issue 40, item 6: the catalogue's disk cache directory is checked with lstat and used through its descriptor.

Before, ``_disk_cache`` checked ``$XDG_CACHE_HOME/gpuhost-baseline`` with ``os.stat``: a link planted there to a
directory root owns (0755, so "trusted") made root write and prune ``catalogue-*.json`` in a directory another
user chose. Now the directory must be a real directory (never a link) this user owns that nobody else may
write; otherwise there is no disk cache (the catalogue is parsed, as with no cache at all)."""
import os
import shutil

import pytest

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base import schema
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue import catalogue_load

PLANTED = ["catalogue-%024d.json" % number for number in range(catalogue_load.DISK_CACHE_KEEP + 2)]


@pytest.fixture
def base(tmp_path):
    base = tmp_path / "coll"
    for sub in ("rules", "profiles"):
        shutil.copytree(os.path.join(schema.COLLECTION_ROOT, sub), str(base / sub))
    catalogue_load._CACHE.clear()
    yield str(base)
    catalogue_load._CACHE.clear()


def _chosen(tmp_path):
    """A directory another user chose, full of names the cache's pruning would remove."""
    chosen = tmp_path / "chosen"
    chosen.mkdir()
    os.chmod(str(chosen), 0o755)
    for name in PLANTED:
        (chosen / name).write_text("{}")
        os.utime(str(chosen / name), (1000, 1000))
    return chosen


def _load(base):
    catalogue_load._CACHE.clear()
    return catalogue_load.load_catalogue(base)


def test_a_link_in_place_of_the_cache_directory_is_never_followed(tmp_path, monkeypatch, base):
    home = tmp_path / "cache"
    home.mkdir()
    chosen = _chosen(tmp_path)
    os.symlink(str(chosen), str(home / "gpuhost-baseline"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    first = _load(base)
    second = _load(base)  # nothing cached, parsed again: the same catalogue
    assert second.by_id["NUMA-001"].title == first.by_id["NUMA-001"].title
    assert sorted(os.listdir(str(chosen))) == sorted(PLANTED)  # nothing written, nothing pruned
    assert os.path.islink(str(home / "gpuhost-baseline"))


@pytest.mark.parametrize("mode", [0o770, 0o757, 0o1777])
def test_a_cache_directory_others_may_write_is_not_used(tmp_path, monkeypatch, base, mode):
    home = tmp_path / "cache"
    directory = home / "gpuhost-baseline"
    directory.mkdir(parents=True)
    os.chmod(str(directory), mode)
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    _load(base)
    assert os.listdir(str(directory)) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give the directory to another user")
def test_another_users_cache_directory_is_not_used(tmp_path, monkeypatch, base):
    home = tmp_path / "cache"
    directory = home / "gpuhost-baseline"
    directory.mkdir(parents=True, mode=0o700)
    os.chown(str(directory), 65534, 65534)
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    _load(base)
    assert os.listdir(str(directory)) == []


def test_a_link_in_place_of_a_cache_file_is_not_read(tmp_path, monkeypatch, base):
    home = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    _load(base)
    directory = home / "gpuhost-baseline"
    (cached,) = os.listdir(str(directory))
    elsewhere = tmp_path / "elsewhere.json"
    shutil.move(str(directory / cached), str(elsewhere))
    os.symlink(str(elsewhere), str(directory / cached))
    stamp = catalogue_load._stamp(base, ())
    assert os.path.basename(catalogue_load._cache_path(base, stamp)) == cached
    assert catalogue_load._disk_cache(base, stamp) is None  # a link: not read
    # the catalogue still loads (parsed, not read through the link); the new cache file is renamed over the
    # link (replaced, never followed), and what it pointed to is left as it was
    before = elsewhere.read_bytes()
    assert _load(base).by_id["NUMA-001"]
    assert not os.path.islink(str(directory / cached)) and elsewhere.read_bytes() == before


def test_a_real_private_directory_is_used_and_created_0700(tmp_path, monkeypatch, base):
    home = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    _load(base)
    directory = home / "gpuhost-baseline"
    (cached,) = os.listdir(str(directory))
    assert oct(os.lstat(str(directory)).st_mode & 0o777) == "0o700"
    assert oct(os.lstat(str(directory / cached)).st_mode & 0o777) == "0o600"
