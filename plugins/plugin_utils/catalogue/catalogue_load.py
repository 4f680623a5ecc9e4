# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The baseline catalogue: rules, profiles and waivers, loaded and validated.

Controller side only: the ``baseline_evaluate`` and ``baseline_validate`` action plugins
call :func:`load_catalogue`, ``catalogue_params.resolve_profile``, ``waivers.validate_waivers`` and
:func:`validate`; the evaluator (``evaluation.py``) judges facts against what they return. Rules and
profiles are YAML data (``rules/<area>.yml``, ``profiles/<name>.yml``, format in ``docs/rules.md`` and
``docs/profiles.md``), read by ``catalogue_files.py`` into the objects of ``catalogue_model.py``;
nothing here runs on a managed host, except the compiled catalogue of the self-audit bundle
(:func:`compile_catalogue` on the controller, :func:`load_compiled` on the host).

PyYAML and jmespath are controller dependencies, so they are imported inside the functions
that need them: importing this module never fails on a host without them. Loaded catalogues are kept
in memory and in a disk cache (``~/.cache/gpuhost-baseline``, :func:`_disk_cache`).

Everything malformed is rejected with ``CatalogueError`` naming the file, the rule id
(or profile / waiver) and what is wrong, before any host is judged.

Site catalogues (``gpuhost_catalogue_dirs``, ``site_dirs`` here) layer over the bundled one in
list order: each directory may hold ``rules/*.yml``, ``profiles/*.yml`` and ``waivers/*.yml``.
New rules and profiles are added; one that reuses an id or a name of an earlier layer must say
``replaces: true``, otherwise the collision is an error naming both files.
"""

from __future__ import absolute_import, division, print_function

import datetime
import hashlib
import json
import os
import re
import stat

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_files import MAX_CATALOGUE_BYTES, _check_file, _load_yaml
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_model import (
    AREA_NAMES, AREA_PREFIX, Catalogue, CatalogueError, DEFAULT_PROFILE, Expr, Profile, Rule, plain,
)
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_params import _check_param_value, merge_params, resolve_profile
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive.derive import REQUIRED_PARAMS
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.files import FileRefused, clip, loads_json, read_bytes
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.schema import COLLECTION_ROOT, SCHEMA_DIR, json_compatible
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.waivers import load_waiver_files, validate_waivers

__metaclass__ = type

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")

#: What a site catalogue directory (``gpuhost_catalogue_dirs``) may hold.
SITE_SUBDIRS = ("rules", "profiles", "waivers")

#: How errors name the variable that lists the site catalogue directories.
SITE_VARIABLE = "gpuhost_catalogue_dirs"


def _rel(path, base):
    try:
        rel = os.path.relpath(path, base)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def read_rule_files(base_dir):
    """``[[rel, area, rules]]`` of every ``<base_dir>/rules/<area>.yml``, each file loaded and
    checked against the rules schema (the documents the disk cache keeps)."""
    rules_dir = os.path.join(base_dir, "rules")
    if not os.path.isdir(rules_dir):
        raise CatalogueError("%s: rules directory missing" % rules_dir)
    files = []
    for name in sorted(os.listdir(rules_dir)):
        if not name.endswith((".yml", ".yaml")):
            continue
        path = os.path.join(rules_dir, name)
        rel = _rel(path, base_dir)
        area = name.rsplit(".", 1)[0]
        if area not in AREA_PREFIX:
            raise CatalogueError("%s: no such area %r (rule files are rules/<area>.yml for %s)" % (
                rel, area, ", ".join(AREA_NAMES)))
        data = _load_yaml(path)
        _check_file("rules", data, rel, "rule")
        files.append([rel, area, data])
    if not files:
        raise CatalogueError("%s: no rule files" % rules_dir)
    return files


def build_rules(files, sites=()):
    """:class:`Rule` objects of schema-checked rule files, with the checks a schema cannot make.

    ``sites`` (documents of :func:`read_site_dir`) layer over ``files`` in order: a site rule
    with a new id is added; one with the id of an earlier layer must say ``replaces: true``."""
    by_id = {}
    seen = {}  # id -> (file, layer)
    layers = [(0, files)] + [(n + 1, site["rules"]) for n, site in enumerate(sites)]
    for layer, layer_files in layers:
        for rel, area, data in layer_files:
            for index, raw in enumerate(data):
                rule = Rule(raw, rel, index)
                if area is not None and rule.area != area:
                    raise CatalogueError("%s: area %r does not match its file (rules/%s.yml holds area %s)" % (
                        rule.where, rule.area, area, area))
                previous = seen.get(rule.id)
                if previous is not None and previous[1] == layer:
                    raise CatalogueError("%s: duplicate id %s (already defined in %s)" % (
                        rule.where, rule.id, previous[0]))
                if previous is not None and not rule.replaces:
                    raise CatalogueError("%s: id %s is already defined in %s; a site rule replaces it only with "
                                         "replaces: true" % (rule.where, rule.id, _layer_file(previous)))
                if previous is None and rule.replaces:
                    raise CatalogueError("%s: replaces: true, but no earlier catalogue (bundled, or a directory "
                                         "listed before in %s) defines %s" % (rule.where, SITE_VARIABLE, rule.id))
                seen[rule.id] = (rel, layer)
                by_id[rule.id] = rule
    order = dict((a, i) for i, a in enumerate(AREA_NAMES))
    return sorted(by_id.values(), key=lambda r: (order[r.area], r.id))


def _layer_file(previous):
    """A file of an earlier layer, as errors name it: bundled files are relative to the collection."""
    path, layer = previous
    return "%s (bundled catalogue)" % path if layer == 0 else path


def _check_site_dirs(site_dirs):
    """Absolute paths of the site catalogue directories: a relative path is resolved against the
    current directory (ansible-playbook's); each must exist and hold rules/, profiles/ or waivers/,
    none of them a symbolic link (the directory itself is the operator's and may be one)."""
    if site_dirs is None:
        return []
    if not isinstance(site_dirs, (list, tuple)):
        raise CatalogueError("%s must be a list of directories, got %r" % (SITE_VARIABLE, site_dirs))
    out = []
    for entry in site_dirs:
        if not isinstance(entry, str) or not entry.strip():
            raise CatalogueError("%s must be a list of directories, got the entry %r" % (SITE_VARIABLE, entry))
        path = os.path.abspath(os.path.expanduser(str(entry)))
        shown = entry if entry == path else "%s (%s)" % (entry, path)
        if not os.path.isdir(path):
            raise CatalogueError("%s: %s: no such directory" % (SITE_VARIABLE, shown))
        if not any(_site_subdir(path, sub) for sub in SITE_SUBDIRS):
            raise CatalogueError("%s: %s holds none of %s" % (
                SITE_VARIABLE, shown, ", ".join(sub + "/" for sub in SITE_SUBDIRS)))
        if path in out:
            raise CatalogueError("%s: %s is listed twice" % (SITE_VARIABLE, shown))
        out.append(path)
    return out


def _site_subdir(site_dir, sub):
    """``<site_dir>/<sub>`` when it is a directory, None when there is nothing; a link (to anywhere:
    it would lead out of the site directory) or anything else in its place is refused."""
    path = os.path.join(site_dir, sub)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    except EnvironmentError as exc:
        raise CatalogueError("%s: cannot read: %s" % (path, exc.strerror or exc))
    if stat.S_ISLNK(mode):
        raise CatalogueError("%s: is a symbolic link: rules/, profiles/ and waivers/ of a site catalogue are directories "
                             "inside it (not followed)" % path)
    if not stat.S_ISDIR(mode):
        raise CatalogueError("%s: is not a directory" % path)
    return path


def _yaml_names(directory):
    """Sorted names of the YAML files of ``directory`` (none when it does not exist). Each is read
    by :func:`_load_yaml`, which refuses a link or anything but a regular file."""
    if not os.path.isdir(directory):
        return []
    try:
        names = os.listdir(directory)
    except EnvironmentError as exc:
        raise CatalogueError("%s: cannot list: %s" % (directory, exc.strerror or exc))
    return sorted(n for n in names if n.endswith((".yml", ".yaml")) and not n.startswith("."))


def _site_names(site_dir, sub):
    """:func:`_yaml_names` of a site directory's ``sub`` (rules, profiles, waivers), never through a link."""
    directory = _site_subdir(site_dir, sub)
    return _yaml_names(directory) if directory else []


def read_site_dir(site_dir):
    """The documents of one site catalogue directory, each file loaded and schema-checked:
    ``{"dir", "rules": [[path, area or None, rules]], "profiles": {name: [data, path, where]},
    "waivers": [path]}``. Files are named by their full path. A rule file named after an area
    (``rules/kernel.yml``) holds rules of that area only; any other name may mix areas."""
    rules = []
    for name in _site_names(site_dir, "rules"):
        path = os.path.join(site_dir, "rules", name)
        stem = name.rsplit(".", 1)[0]
        data = _load_yaml(path)
        _check_file("rules", data, path, "rule")
        rules.append([path, stem if stem in AREA_PREFIX else None, data])
    profiles = {}
    for name in _site_names(site_dir, "profiles"):
        path = os.path.join(site_dir, "profiles", name)
        pname = name.rsplit(".", 1)[0]
        if not _NAME_RE.match(pname):
            raise CatalogueError("%s: profile names are lower case letters, digits and dashes" % path)
        if pname in profiles:
            raise CatalogueError("%s: profile %s is also defined in %s" % (path, pname, profiles[pname][1]))
        data = _load_yaml(path)
        where = "%s: profile %s" % (path, pname)
        _check_file("profile", data, where, items=False)
        profiles[pname] = [data, path, where]
    waivers = [os.path.join(site_dir, "waivers", name) for name in _site_names(site_dir, "waivers")]
    return {"dir": site_dir, "rules": rules, "profiles": profiles, "waivers": waivers}


def layer_profiles(raw_profiles, sites=()):
    """The bundled profile documents with the sites' layered over them in order: a new name is
    added, a name of an earlier layer is replaced only by a profile that says ``replaces: true``."""
    merged = {}
    layers = [(0, raw_profiles)] + [(n + 1, site["profiles"]) for n, site in enumerate(sites)]
    for layer, documents in layers:
        for name in sorted(documents):
            data, path, where = documents[name]
            replaces = isinstance(data, dict) and data.get("replaces") is True
            previous = merged.get(name)
            if previous is not None and not replaces:
                raise CatalogueError("%s: the name %s is already used by %s; a site profile replaces it only with "
                                     "replaces: true (or pick another name and extends: %s)" % (
                                         where, name, _layer_file((previous[0][1], previous[1])), name))
            if previous is None and replaces:
                raise CatalogueError("%s: replaces: true, but no earlier catalogue (bundled, or a directory listed "
                                     "before in %s) defines profile %s" % (where, SITE_VARIABLE, name))
            merged[name] = ([data, path, where], layer)
    return dict((name, entry[0]) for name, entry in merged.items())


def read_profile_files(base_dir):
    """``{name: [data, rel, where]}`` of every profile file, loaded and checked against the
    profile schema (the documents the disk cache keeps)."""
    prof_dir = os.path.join(base_dir, "profiles")
    if not os.path.isdir(prof_dir):
        raise CatalogueError("%s: profiles directory missing" % prof_dir)
    raw_profiles = {}
    for fname in sorted(os.listdir(prof_dir)):
        if not fname.endswith((".yml", ".yaml")):
            continue
        path = os.path.join(prof_dir, fname)
        rel = _rel(path, base_dir)
        name = fname.rsplit(".", 1)[0]
        if not _NAME_RE.match(name):
            raise CatalogueError("%s: profile names are lower case letters, digits and dashes" % rel)
        data = _load_yaml(path)
        where = "%s: profile %s" % (rel, name)
        _check_file("profile", data, where, items=False)
        raw_profiles[name] = [data, rel, where]
    return raw_profiles


def build_profiles(raw_profiles, rules, prof_dir):
    """:class:`Profile` objects of schema-checked profile documents, ``extends`` resolved and
    every rule's parameters checked against each profile that selects it."""
    rule_ids = [r.id for r in rules]
    known_ids = set(rule_ids)
    resolved = {}

    def resolve(name, chain):
        if name in resolved:
            return resolved[name]
        data, rel, where = raw_profiles[name]
        parent = None
        if data.get("extends") is not None:
            parent_name = data["extends"]
            if parent_name not in raw_profiles:
                raise CatalogueError("%s: extends unknown profile %r (known: %s)" % (
                    where, parent_name, ", ".join(sorted(raw_profiles))))
            if parent_name in chain:
                raise CatalogueError("%s: extends cycle %s" % (where, " -> ".join(chain + [parent_name])))
            parent = resolve(parent_name, chain + [parent_name])

        priority = data.get("priority", parent.priority if parent else 0)
        match = Expr(data["match"], "%s: match" % where) if data.get("match") is not None else None

        sel = data.get("rules") or {}
        areas = sel["areas"] if "areas" in sel else (parent.areas if parent else [])
        include = list(sel.get("include") or [])
        exclude = list(sel.get("exclude") or [])
        own_severity = dict(sel.get("severity") or {})
        for rid in include + exclude:
            if rid not in known_ids:
                raise CatalogueError("%s: rules: unknown rule id %r" % (where, rid))
        for rid in sorted(own_severity):
            if rid not in known_ids:
                raise CatalogueError("%s: rules.severity: unknown rule id %r" % (where, rid))
        both = sorted(set(include) & set(exclude))
        if both:
            raise CatalogueError("%s: rules: %s both included and excluded" % (where, ", ".join(both)))
        p_include = set(parent.include) if parent else set()
        p_exclude = set(parent.exclude) if parent else set()
        inc = (p_include - set(exclude)) | set(include)
        exc = (p_exclude - set(include)) | set(exclude)
        selected = [r.id for r in rules if (r.area in areas or r.id in inc) and r.id not in exc]
        if not selected:
            raise CatalogueError("%s: selects no rule" % where)
        for rid in sorted(own_severity):
            if rid not in selected:
                raise CatalogueError("%s: rules.severity: %s is not selected by this profile (excluded, or outside "
                                     "its areas and include)" % (where, rid))
        severity = dict(parent.severity) if parent else {}
        severity.update(own_severity)
        severity = dict((rid, sev) for rid, sev in severity.items() if rid in selected)

        params_raw = data.get("params") or {}
        if parent:
            params = merge_params(parent.params, params_raw, where)
            # a child may also introduce new parameters
        else:
            params = {}
            for pname, value in params_raw.items():
                params[str(pname)] = _check_param_value(str(pname), value, None, where)
        if parent:
            for pname in params_raw:
                if pname not in parent.params:
                    params[str(pname)] = _check_param_value(str(pname), params_raw[pname], None, where)

        missing = sorted(set(REQUIRED_PARAMS) - set(params))
        if missing:
            raise CatalogueError("%s: missing parameter(s) %s (needed to derive facts)" % (where, ", ".join(missing)))
        by_id = dict((r.id, r) for r in rules)
        for rid in selected:
            for ref in sorted(by_id[rid].param_refs()):
                if ref not in params:
                    raise CatalogueError("%s: rule %s (%s) references unknown parameter %r (profile parameters: %s)" % (
                        where, rid, by_id[rid].file, ref, ", ".join(sorted(params))))
        profile = Profile(name, " ".join(data["description"].split()), priority, match, selected, params, rel,
                          severity)
        profile.areas = areas
        profile.include = sorted(inc)
        profile.exclude = sorted(exc)
        resolved[name] = profile
        return profile

    # some rules may be excluded by every profile: they still must reference only known parameters
    # of some profile, which the per-profile check below covers for selected ones.
    for name in sorted(raw_profiles):
        resolve(name, [name])
    if DEFAULT_PROFILE not in resolved:
        raise CatalogueError("%s: the fallback profile %s is missing" % (prof_dir, DEFAULT_PROFILE))
    return resolved


_CACHE = {}


def _stamp(base_dir, site_dirs=()):
    """Names, mtimes and sizes of the catalogue files and of the schemas that checked them; for
    the site directories also each file's content digest (a site file edited twice within the
    clock's resolution, same size, is still seen)."""
    stamp = []
    for sub, d in (("rules", os.path.join(base_dir, "rules")), ("profiles", os.path.join(base_dir, "profiles")),
                   ("schemas", SCHEMA_DIR)):
        try:
            for name in sorted(os.listdir(d)):
                st = os.stat(os.path.join(d, name))
                stamp.append((sub, name, st.st_mtime_ns, st.st_size))
        except EnvironmentError:
            stamp.append((sub, None))
    for site_dir in site_dirs:
        for sub in SITE_SUBDIRS:
            d = os.path.join(site_dir, sub)
            try:
                st = os.lstat(d)
                if not stat.S_ISDIR(st.st_mode):  # a link is never followed (read_site_dir refuses it)
                    stamp.append(("site", site_dir, sub, "link" if stat.S_ISLNK(st.st_mode) else "not a directory"))
                    continue
                for name in sorted(os.listdir(d)):
                    path = os.path.join(d, name)
                    st = os.lstat(path)
                    stamp.append(("site", site_dir, sub, name, st.st_mode, st.st_mtime_ns, st.st_size, _digest(path, st)))
            except FileNotFoundError:
                stamp.append(("site", site_dir, sub, None))
            except EnvironmentError:
                stamp.append(("site", site_dir, sub, "unreadable"))
    return tuple(stamp)


def _digest(path, st=None):
    """SHA-256 of the regular file ``path`` read through the bounded reader; None for anything else
    (a link, a FIFO, a device, a file over the size cap: the load itself refuses those, by name)."""
    st = st if st is not None else os.lstat(path)
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_CATALOGUE_BYTES:
        return None
    try:
        return hashlib.sha256(read_bytes(path, MAX_CATALOGUE_BYTES)).hexdigest()
    except EnvironmentError:
        return None


def _sites_documents(documents, site_dirs):
    """The site documents of a cached ``documents`` when they cover exactly ``site_dirs``, else None."""
    sites = documents.get("sites", [])
    if not isinstance(sites, list) or [s.get("dir") if isinstance(s, dict) else None for s in sites] != site_dirs:
        return None
    for site in sites:
        if not (isinstance(site.get("rules"), list) and isinstance(site.get("profiles"), dict)
                and isinstance(site.get("waivers"), list)):
            return None
    return sites


def load_catalogue(base_dir=None, site_dirs=None):
    """The validated :class:`Catalogue` of ``base_dir`` (default: this collection) with the site
    catalogue directories ``site_dirs`` (``gpuhost_catalogue_dirs``; relative paths are resolved
    against the current directory) layered over it in order."""
    base_dir = os.path.abspath(base_dir or COLLECTION_ROOT)
    sites_wanted = _check_site_dirs(site_dirs)
    stamp = _stamp(base_dir, sites_wanted)
    key = (base_dir, tuple(sites_wanted))
    cached = _CACHE.get(key)
    if cached and cached[0] == stamp:
        return cached[1]
    documents = _disk_cache(base_dir, stamp)
    sites = _sites_documents(documents, sites_wanted) if documents is not None else None
    if documents is None or sites is None:
        documents = {"rules": read_rule_files(base_dir), "profiles": read_profile_files(base_dir)}
        if sites_wanted:
            documents["sites"] = sites = [read_site_dir(d) for d in sites_wanted]
        else:
            sites = []
        fresh = True
    else:
        fresh = False
    rules = build_rules(documents["rules"], sites)
    profiles = build_profiles(layer_profiles(documents["profiles"], sites), rules, os.path.join(base_dir, "profiles"))
    if fresh:
        _disk_cache(base_dir, stamp, documents)
    waiver_files = [path for site in sites for path in site["waivers"]]
    catalogue = Catalogue(rules, profiles, base_dir, sites_wanted, waiver_files)
    _CACHE[key] = (stamp, catalogue)
    return catalogue


#: a cache file's name (the key: 24 hex digits of a SHA-256) and the names :func:`_prune_disk_cache` may remove
_CACHE_NAME = "catalogue-%s.json"
_CACHE_NAME_RE = re.compile(r"\Acatalogue-[0-9a-f]{24}\.json\Z")


def _cache_path(base_dir, stamp):
    import hashlib  # pylint: disable=import-outside-toplevel
    import sys  # pylint: disable=import-outside-toplevel

    cache_home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    key = hashlib.sha256(repr((base_dir, stamp, sys.version_info[:2], __file__)).encode("utf-8")).hexdigest()[:24]
    return os.path.join(cache_home, "gpuhost-baseline", _CACHE_NAME % key)


def _trusted(st):
    """A cache file (or its directory) this user owns and nobody else may write."""
    return st.st_uid == os.geteuid() and not st.st_mode & 0o022


def _open_cache_dir(directory, create):
    """A descriptor of the cache directory ``directory`` when it is a real directory (never a link: opened
    with ``O_NOFOLLOW``) this user owns and nobody else may write, else ``None``. ``create`` makes it (0700)
    when it is missing. Everything in it is then done through the descriptor (``dir_fd``), so a link put in
    its place afterwards changes nothing."""
    if create:
        parent = os.path.dirname(directory)
        os.makedirs(parent, mode=0o700, exist_ok=True)
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            pass
    try:
        st = os.lstat(directory)
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(st.st_mode) or not _trusted(st):
        return None  # a link, a file, another user's or a writable directory: no cache
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return None
    held = os.fstat(fd)
    if not (stat.S_ISDIR(held.st_mode) and _trusted(held) and (held.st_dev, held.st_ino) == (st.st_dev, st.st_ino)):
        os.close(fd)
        return None
    return fd


def _holds_dates(value):
    if isinstance(value, dict):
        return any(_holds_dates(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_holds_dates(v) for v in value)
    return isinstance(value, (datetime.date, datetime.datetime))


def _disk_cache(base_dir, stamp, documents=None):
    """Read (or, given ``documents``, write) the schema-checked catalogue documents for this
    exact set of files.

    Ansible runs every task of every host in a fresh worker process, so an in-process cache
    alone would load YAML and import jsonschema (about half a second) once per host; the key
    covers the files' names, sizes and mtimes (schemas included), the directory and the Python
    version. The cache is JSON (data, never code), lives in the user's own cache directory, is
    written 0600, and is used only when that directory and file belong to this user and are
    not writable by group or others: a planted file could otherwise slip past validation. What
    is read is rebuilt with the same code checks as the files; any problem means parsing again.
    """
    import binascii  # pylint: disable=import-outside-toplevel
    import json  # pylint: disable=import-outside-toplevel

    path = _cache_path(base_dir, stamp)
    directory, name = os.path.split(path)
    dir_fd = None
    try:
        if documents is None:
            dir_fd = _open_cache_dir(directory, create=False)
            if dir_fd is None:
                return None
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
            except OSError:  # missing, or a link (ELOOP)
                return None
            with os.fdopen(fd, "rb") as handle:
                st = os.fstat(handle.fileno())
                if not (stat.S_ISREG(st.st_mode) and _trusted(st)) or st.st_size > _CACHE_MAX_BYTES:
                    return None
                data = handle.read(_CACHE_MAX_BYTES + 1)
            if len(data) > _CACHE_MAX_BYTES:
                return None
            loaded = loads_json(data.decode("utf-8"))
            if isinstance(loaded, dict) and isinstance(loaded.get("rules"), list) and \
                    isinstance(loaded.get("profiles"), dict):
                return loaded
            return None
        if _holds_dates(documents):
            return None  # JSON would turn a YAML date into a string: parse each time instead
        # YAML 1.1 `true:` operator keys become "true", which Rule reads the same way
        text = json.dumps(json_compatible(documents), sort_keys=True)
        dir_fd = _open_cache_dir(directory, create=True)
        if dir_fd is None:
            return None
        tmp = ".catalogue.%s.%d" % (binascii.hexlify(os.urandom(6)).decode("ascii"), os.getpid())
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd)
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(text)
            os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        finally:
            try:
                os.unlink(tmp, dir_fd=dir_fd)
            except FileNotFoundError:
                pass
        _prune_disk_cache(dir_fd, keep=name)
    except Exception:  # pylint: disable=broad-except
        return None
    finally:
        if dir_fd is not None:
            os.close(dir_fd)
    return None


#: the largest cache file read back (the bundled catalogue's is about 70 kB)
_CACHE_MAX_BYTES = 16 * 1024 * 1024


#: catalogue cache files kept per user: one per set of catalogue files (bundled, each site's
#: combination, each upgrade of the collection); older ones are removed when a new one is written
DISK_CACHE_KEEP = 16


def _prune_disk_cache(dir_fd, keep, limit=DISK_CACHE_KEEP):
    """Remove the oldest cache files of the directory open as ``dir_fd`` (names :func:`_cache_path` gives)
    beyond ``limit`` (never ``keep``, the name just written); no other file is touched, nothing followed.
    A key changes with every edit of a catalogue file, so without a bound the directory grows with every
    change a site makes (about 70 kB each)."""
    entries = []
    for name in os.listdir(dir_fd):
        if not _CACHE_NAME_RE.match(name):
            continue
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and name != keep:
            entries.append((st.st_mtime, name))
    entries.sort(reverse=True)
    for _mtime, name in entries[max(limit - 1, 0):]:
        try:
            os.unlink(name, dir_fd=dir_fd)
        except OSError:
            pass  # removed by a concurrent run, or not ours to remove


def _resolve_auto_candidate(catalogue, name, params):
    # Same checks as an auto run choosing ``name``: unknown-everywhere names already failed.
    resolve_profile(catalogue, "auto", None, params)
    profile = catalogue.profile(name)
    return profile, merge_params(profile.params, plain(params or {}), "gpuhost_params (profile %s)" % name,
                                 ignore_unknown=True)


def validate(profile="auto", params=None, waivers=None, base_dir=None, waiver_files=None, site_dirs=None):
    """Load and check everything a run needs before any host is contacted.

    With ``profile: auto`` every profile's parameters are checked against ``params``
    (the one chosen per host is only known from its facts). ``site_dirs``: the site catalogue
    directories (``gpuhost_catalogue_dirs``); their waiver files join ``waiver_files``.
    """
    catalogue = load_catalogue(base_dir, site_dirs)
    waiver_files = list(waiver_files or []) + catalogue.waiver_files
    if profile in (None, "auto"):
        names = sorted(catalogue.profiles)
    else:
        names = [catalogue.profile(profile).name]
    effective = {}
    for name in names:
        unused_profile, effective[name] = resolve_profile(catalogue, name, None, params) if profile not in (None, "auto") \
            else _resolve_auto_candidate(catalogue, name, params)
    validate_waivers(waivers, catalogue, waiver_files)
    return {
        "profiles": names,
        "rules": len(catalogue.rules),
        "params": effective,
        "sysctls": list(catalogue.sysctls),
    }


def collection_version(root=COLLECTION_ROOT):
    """The version of the collection at ``root``: MANIFEST.json of a built (installed) collection, else
    galaxy.yml of a checkout; ``"unknown"`` when neither says (used by the reports and the self-audit)."""
    try:
        with open(os.path.join(root, "MANIFEST.json"), "rb") as handle:
            version = json.load(handle)["collection_info"]["version"]
        if version:
            return str(version)
    except (IOError, OSError, ValueError, KeyError, TypeError):
        pass
    try:
        import yaml  # pylint: disable=import-outside-toplevel

        with open(os.path.join(root, "galaxy.yml"), "rb") as handle:
            version = (yaml.safe_load(handle) or {}).get("version")
        if version:
            return str(version)
    except Exception:  # pylint: disable=broad-except  # no PyYAML, unreadable or odd file: unknown
        pass
    return "unknown"


#: file name of the compiled catalogue in the self-audit bundle (beside plugins/ in the bundle's tree)
COMPILED_NAME = "catalogue.json"

COMPILED_FORMAT = "gpuhost-baseline-compiled-catalogue"

COMPILED_VERSION = 1

#: largest compiled catalogue read on a host (bytes): the bundled one is about 300 kB
MAX_COMPILED_BYTES = 16 * 1024 * 1024


def compile_catalogue(site_dirs=None, base_dir=None):
    """The catalogue of ``base_dir`` (default: this collection) with the site directories
    ``site_dirs`` layered over it, checked exactly as :func:`load_catalogue` checks it (schemas,
    expressions, layering, profiles), as one JSON text for the self-audit bundle: the rule, profile
    and waiver documents (site waiver files read here), and the collection version. A host loads it
    with :func:`load_compiled`: no YAML parser and no jsonschema there."""
    base_dir = os.path.abspath(base_dir or COLLECTION_ROOT)
    load_catalogue(base_dir, site_dirs)  # every check, with its messages, before anything is written
    sites = []
    for site_dir in _check_site_dirs(site_dirs):
        site = read_site_dir(site_dir)
        site["waiver_items"] = [[raw, where] for raw, where in load_waiver_files(site["waivers"])]
        site["waivers"] = []  # paths on the controller mean nothing on a host
        sites.append(site)
    document = {"format": COMPILED_FORMAT, "version": COMPILED_VERSION,
                "collection_version": collection_version(base_dir),
                "rules": read_rule_files(base_dir), "profiles": read_profile_files(base_dir), "sites": sites}
    return json.dumps(json_compatible(document), sort_keys=True, separators=(",", ":"))


def load_compiled(path):
    """The :class:`Catalogue` of a compiled catalogue file (:func:`compile_catalogue`): built with
    the same code checks as from the YAML files; marked ``prechecked`` (the schemas ran when it was
    compiled). A missing, damaged or foreign file is a :class:`CatalogueError` naming it."""
    try:
        document = loads_json(read_bytes(path, MAX_COMPILED_BYTES).decode("utf-8"))
    except FileRefused as exc:
        raise CatalogueError("%s: cannot read the compiled catalogue: %s" % (path, exc.why))
    except (IOError, OSError) as exc:
        raise CatalogueError("%s: cannot read the compiled catalogue: %s" % (path, exc.strerror or exc))
    except (UnicodeDecodeError, ValueError) as exc:
        raise CatalogueError("%s: the compiled catalogue is not JSON: %s" % (path, clip(str(exc))))
    if not isinstance(document, dict) or document.get("format") != COMPILED_FORMAT:
        raise CatalogueError("%s: not a compiled gpuhost.baseline catalogue" % path)
    if document.get("version") != COMPILED_VERSION:
        raise CatalogueError("%s: compiled catalogue version %r, this code reads %d: build the bundle again" % (
            path, document.get("version"), COMPILED_VERSION))
    sites = document.get("sites")
    sites_ok = isinstance(sites, list) and all(
        isinstance(s, dict) and _sites_documents({"sites": [s]}, [s.get("dir")]) and isinstance(s.get("waiver_items"), list)
        for s in sites)
    if not (isinstance(document.get("rules"), list) and isinstance(document.get("profiles"), dict) and sites_ok):
        raise CatalogueError("%s: the compiled catalogue is damaged (rules, profiles or sites missing)" % path)
    try:
        rules = build_rules(document["rules"], sites)
        profiles = build_profiles(layer_profiles(document["profiles"], sites), rules, "profiles")
        items = [(raw, where) for site in sites for raw, where in site["waiver_items"]]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CatalogueError("%s: the compiled catalogue is damaged: %s: %s" % (path, type(exc).__name__, clip(str(exc))))
    return Catalogue(rules, profiles, os.path.dirname(os.path.abspath(path)), [s["dir"] for s in sites],
                     waiver_items=items, prechecked=True)
