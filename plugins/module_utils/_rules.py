# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The baseline catalogue (rules, profiles, waivers) and its one evaluator.

Controller side only: the ``baseline_evaluate`` and ``baseline_validate`` action plugins
call :func:`load_catalogue`, :func:`resolve_profile`, :func:`validate_waivers` and
:func:`evaluate`. Rules and profiles are YAML data (``rules/<area>.yml``,
``profiles/<name>.yml``, format in ``docs/rules.md`` and ``docs/profiles.md``); nothing here
runs on a managed host.

PyYAML and jmespath are controller dependencies, so they are imported inside the functions
that need them: importing this module never fails on a host without them.

Everything malformed is rejected with :class:`CatalogueError` naming the file, the rule id
(or profile / waiver) and what is wrong, before any host is judged.
"""

from __future__ import absolute_import, division, print_function

import datetime
import fnmatch
import os
import re

from ansible_collections.gpuhost.baseline.plugins.module_utils._derive import REQUIRED_PARAMS, derive
from ansible_collections.gpuhost.baseline.plugins.module_utils._kernel import compare_kernel_release

__metaclass__ = type

#: Collection root: rules/ and profiles/ live next to plugins/.
COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

STATUSES = ("pass", "fail", "unknown", "waived", "not_applicable")
SEVERITIES = ("critical", "high", "medium", "low", "info")

#: area (file name) -> rule id prefix
AREAS = (
    ("cpu", "CPU"),
    ("kernel", "KERNEL"),
    ("numa", "NUMA"),
    ("pcie", "PCI"),
    ("iommu", "IOMMU"),
    ("nvidia", "NVIDIA"),
    ("lxc", "LXC"),
)
AREA_PREFIX = dict(AREAS)
AREA_NAMES = tuple(name for name, unused_label in AREAS)
#: facts subsystem each area reads first (used to explain a missing section)
AREA_SUBSYSTEM = {"cpu": "cpu", "kernel": "kernel", "numa": "numa", "pcie": "pci",
                  "iommu": "iommu", "nvidia": "nvidia", "lxc": "lxc"}

#: Keys the remediate role maps to a fixing module; a rule naming anything else is rejected.
FIX_ACTIONS = ("sysctl", "kernel_cmdline", "kernel_package", "cpu_power", "cpu_idle", "thp",
               "pcie_tune", "nvidia_gpu", "nvidia_driver", "lxc_config", "manual")

#: operator -> kind of operand it takes
OPERATORS = {
    "equals": "scalar",
    "not_equals": "scalar",
    "in": "list",
    "not_in": "list",
    "min": "number",
    "max": "number",
    "min_version": "version",
    "min_kernel": "version",
    "all_equal": "scalar",
    "all_in": "list",
    "empty": "flag",
    "true": "flag",
    "false": "flag",
    "uniform": "flag",
}

#: Parameters whose value is one of a closed set.
PARAM_CHOICES = {
    "smt": ("on", "off", "any"),
    "power_limit_policy": ("max", "default"),
}

RULE_REQUIRED = ("id", "title", "area", "severity", "rationale", "source", "query", "expect", "fix",
                 "reboot_required")
RULE_OPTIONAL = ("applies_when", "subjects", "subject", "detail", "unknown_reason", "pending_when",
                 "label", "unit")
PROFILE_KEYS = ("description", "extends", "priority", "match", "rules", "params")
PROFILE_RULE_KEYS = ("areas", "include", "exclude")
WAIVER_KEYS = ("rule", "hosts", "subjects", "reason", "expires")

#: profile ``auto`` falls back to this one when no profile's ``match`` holds
DEFAULT_PROFILE = "generic-nvidia-inference"

_ID_RE = re.compile(r"^([A-Z]+)-(\d{3})$")
_PARAM_IN_EXPR_RE = re.compile(r"(?<![.\w@])params\.([A-Za-z_][A-Za-z0-9_]*)")
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class CatalogueError(Exception):
    """A rule, profile, parameter or waiver is malformed; the message says where and what."""


# -- helpers --------------------------------------------------------------------------

def _jmespath():
    try:
        import jmespath  # pylint: disable=import-outside-toplevel
    except ImportError:
        raise CatalogueError("the Python library jmespath is required on the controller to evaluate the "
                             "baseline: pip install jmespath (into the Python that runs ansible-playbook)")
    return jmespath


def _yaml():
    try:
        import yaml  # pylint: disable=import-outside-toplevel
    except ImportError:
        raise CatalogueError("the Python library PyYAML is required on the controller to read the rule "
                             "catalogue: pip install pyyaml")
    return yaml


def plain(value):
    """A copy of ``value`` made of plain JSON types.

    Facts arriving through Ansible may be str/dict subclasses (tagged or unsafe values);
    jmespath's functions type-check by class name and would reject them.
    """
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, dict):
        return dict((str(k), plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v) for v in value]
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    return str(value)


def _load_yaml(path):
    yaml = _yaml()
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        with open(path, "rb") as handle:
            return yaml.load(handle, Loader=loader)  # nosec: safe loader
    except EnvironmentError as exc:
        raise CatalogueError("%s: cannot read: %s" % (path, exc.strerror or exc))
    except yaml.YAMLError as exc:
        raise CatalogueError("%s: not valid YAML: %s" % (path, str(exc).replace("\n", " ")))


def _rel(path, base):
    try:
        rel = os.path.relpath(path, base)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


class Expr:
    """A compiled jmespath expression that remembers its text."""

    def __init__(self, text, where):
        if not isinstance(text, str) or not text.strip():
            raise CatalogueError("%s: must be a non-empty jmespath expression string, got %r" % (where, text))
        jmespath = _jmespath()
        try:
            self.compiled = jmespath.compile(text)
        except jmespath.exceptions.JMESPathError as exc:
            raise CatalogueError("%s: bad jmespath %r: %s" % (where, text, str(exc).replace("\n", " ")))
        self.text = text
        self.params = sorted(set(_PARAM_IN_EXPR_RE.findall(text)))

    def search(self, data):
        """Result of the expression; raises :class:`EvaluationError` for runtime type errors."""
        jmespath = _jmespath()
        try:
            return self.compiled.search(data)
        except jmespath.exceptions.JMESPathError as exc:
            raise EvaluationError("cannot evaluate %s: %s" % (self.text, str(exc).replace("\n", " ")))

    def __repr__(self):
        return "Expr(%r)" % self.text


class EvaluationError(Exception):
    """A jmespath expression failed on this host's facts (becomes ``unknown``)."""


# -- rules ----------------------------------------------------------------------------

class Operand:
    """An operator's value: a literal, ``{param: name}`` or ``{query: jmespath}``."""

    def __init__(self, raw, where):
        self.param = None
        self.query = None
        self.literal = None
        if isinstance(raw, dict):
            if set(raw) == {"param"}:
                if not isinstance(raw["param"], str) or not raw["param"]:
                    raise CatalogueError("%s: {param: ...} needs a parameter name, got %r" % (where, raw["param"]))
                self.param = raw["param"]
            elif set(raw) == {"query"}:
                self.query = Expr(raw["query"], where + ".query")
            else:
                raise CatalogueError("%s: a mapping operand must be {param: <name>} or {query: <jmespath>}, got "
                                     "keys %s" % (where, ", ".join(sorted(str(k) for k in raw))))
        else:
            self.literal = raw

    @property
    def dynamic(self):
        return self.param is not None or self.query is not None

    def resolve(self, params, scope):
        if self.param is not None:
            return params.get(self.param)
        if self.query is not None:
            return self.query.search(scope)
        return self.literal

    def describe(self):
        if self.param is not None:
            return "{param: %s}" % self.param
        if self.query is not None:
            return "{query: %s}" % self.query.text
        return repr(self.literal)


def _check_literal(op, kind, value, where):
    if kind == "list":
        if not isinstance(value, list):
            raise CatalogueError("%s: operator %s needs a list, got %r" % (where, op, value))
    elif kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise CatalogueError("%s: operator %s needs a number, got %r" % (where, op, value))
    elif kind == "version":
        if not isinstance(value, str) or not re.match(r"^\d", value):
            raise CatalogueError("%s: operator %s needs a version string such as '6.14' (quoted), got %r"
                                 % (where, op, value))
    elif kind == "flag":
        if value is not True:
            raise CatalogueError("%s: operator %s takes the value true, got %r" % (where, op, value))
    elif kind == "scalar":
        if isinstance(value, (list, dict)):
            raise CatalogueError("%s: operator %s needs a single value, got %r" % (where, op, value))


class Rule:
    """One validated rule of the catalogue."""

    def __init__(self, raw, path, index):
        where = "%s: rule #%d" % (path, index + 1)
        if not isinstance(raw, dict):
            raise CatalogueError("%s: a rule must be a mapping, got %s" % (where, type(raw).__name__))
        rid = raw.get("id")
        if isinstance(rid, str):
            where = "%s: rule %s" % (path, rid)
        self.where = where
        self.file = path
        unknown = sorted(str(k) for k in raw if k not in RULE_REQUIRED + RULE_OPTIONAL)
        if unknown:
            raise CatalogueError("%s: unknown key(s) %s (allowed: %s)" % (
                where, ", ".join(unknown), ", ".join(RULE_REQUIRED + RULE_OPTIONAL)))
        missing = [k for k in RULE_REQUIRED if k not in raw]
        if missing:
            raise CatalogueError("%s: missing required key(s) %s" % (where, ", ".join(missing)))
        for key in ("id", "title", "area", "severity", "rationale", "source"):
            if not isinstance(raw[key], str) or not raw[key].strip():
                raise CatalogueError("%s: %s must be a non-empty string, got %r" % (where, key, raw[key]))
        self.id = raw["id"]
        self.title = raw["title"].strip()
        self.area = raw["area"]
        if self.area not in AREA_PREFIX:
            raise CatalogueError("%s: unknown area %r (known: %s)" % (where, self.area, ", ".join(AREA_NAMES)))
        match = _ID_RE.match(self.id)
        if not match or match.group(1) != AREA_PREFIX[self.area]:
            raise CatalogueError("%s: id must look like %s-NNN for area %s" % (where, AREA_PREFIX[self.area], self.area))
        self.severity = raw["severity"]
        if self.severity not in SEVERITIES:
            raise CatalogueError("%s: unknown severity %r (known: %s)" % (where, self.severity, ", ".join(SEVERITIES)))
        self.rationale = " ".join(raw["rationale"].split())
        self.source = raw["source"].strip()
        if not re.match(r"^https://\S+$", self.source):
            raise CatalogueError("%s: source must be an https:// URL of the authority, got %r" % (where, self.source))
        if not isinstance(raw["reboot_required"], bool):
            raise CatalogueError("%s: reboot_required must be true or false, got %r" % (where, raw["reboot_required"]))
        self.reboot_required = raw["reboot_required"]

        fix = raw["fix"]
        if not isinstance(fix, dict) or set(fix) != {"action", "hint"}:
            raise CatalogueError("%s: fix must be a mapping with exactly the keys action and hint, got %r" % (where, fix))
        if fix["action"] not in FIX_ACTIONS:
            raise CatalogueError("%s: unknown fix action %r (known: %s)" % (where, fix["action"], ", ".join(FIX_ACTIONS)))
        if not isinstance(fix["hint"], str) or not fix["hint"].strip():
            raise CatalogueError("%s: fix.hint must be a non-empty string" % where)
        self.fix_action = fix["action"]
        self.fix_hint = " ".join(fix["hint"].split())

        def expr(key):
            if raw.get(key) is None:
                return None
            return Expr(raw[key], "%s: %s" % (where, key))

        self.applies_when = expr("applies_when")
        self.subjects = expr("subjects")
        self.subject = expr("subject")
        if (self.subjects is None) != (self.subject is None):
            raise CatalogueError("%s: subjects and subject go together (subjects lists the elements, subject "
                                 "labels each one)" % where)
        self.detail = expr("detail")
        self.query = expr("query")
        self.unknown_reason = expr("unknown_reason")
        self.pending_when = expr("pending_when")
        for key in ("label", "unit"):
            if key in raw and not isinstance(raw[key], str):
                raise CatalogueError("%s: %s must be a string, got %r" % (where, key, raw[key]))
        self.label = raw.get("label") or self.title
        self.unit = raw.get("unit") or ""

        expect = raw["expect"]
        if not isinstance(expect, dict) or len(expect) != 1:
            raise CatalogueError("%s: expect must be a mapping with exactly one operator (%s), got %r" % (
                where, ", ".join(OPERATORS), expect))
        (op, value), = expect.items()
        # YAML 1.1 reads a bare `true:` / `false:` key as a boolean.
        if op is True:
            op = "true"
        elif op is False:
            op = "false"
        if op not in OPERATORS:
            raise CatalogueError("%s: unknown operator %r (known: %s)" % (where, op, ", ".join(OPERATORS)))
        self.op = op
        self.operand = Operand(value, "%s: expect.%s" % (where, op))
        if not self.operand.dynamic:
            _check_literal(op, OPERATORS[op], value, "%s: expect" % where)
        elif OPERATORS[op] == "flag":
            raise CatalogueError("%s: operator %s takes the value true, not a reference" % (where, op))

    def param_refs(self):
        """Parameters this rule reads: operand references and ``params.X`` in expressions."""
        refs = set()
        if self.operand.param:
            refs.add(self.operand.param)
        for e in (self.applies_when, self.subjects, self.subject, self.detail, self.query,
                  self.unknown_reason, self.pending_when, self.operand.query):
            if e is not None:
                refs.update(e.params)
        return refs


class Catalogue:
    """Every rule (by id, in catalogue order) and every resolved profile."""

    def __init__(self, rules, profiles, base_dir):
        self.rules = rules
        self.by_id = dict((r.id, r) for r in rules)
        self.profiles = profiles
        self.base_dir = base_dir

    def profile(self, name):
        if name not in self.profiles:
            raise CatalogueError("unknown profile %r: known profiles are %s, or auto" % (
                name, ", ".join(sorted(self.profiles))))
        return self.profiles[name]


def load_rules(base_dir):
    """Every rule of ``<base_dir>/rules/<area>.yml``, validated, in area then file order."""
    rules_dir = os.path.join(base_dir, "rules")
    if not os.path.isdir(rules_dir):
        raise CatalogueError("%s: rules directory missing" % rules_dir)
    rules = []
    seen = {}
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
        if not isinstance(data, list) or not data:
            raise CatalogueError("%s: must be a non-empty YAML list of rules" % rel)
        for index, raw in enumerate(data):
            rule = Rule(raw, rel, index)
            if rule.area != area:
                raise CatalogueError("%s: area %r does not match its file (rules/%s.yml holds area %s)" % (
                    rule.where, rule.area, area, area))
            if rule.id in seen:
                raise CatalogueError("%s: duplicate id %s (already defined in %s)" % (rule.where, rule.id, seen[rule.id]))
            seen[rule.id] = rel
            rules.append(rule)
    order = dict((a, i) for i, a in enumerate(AREA_NAMES))
    rules.sort(key=lambda r: (order[r.area], r.id))
    if not rules:
        raise CatalogueError("%s: no rule files" % rules_dir)
    return rules


# -- parameters -------------------------------------------------------------------------

def _type_name(value):
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "mapping"
    return "null" if value is None else type(value).__name__


def _check_param_value(name, value, reference, where):
    """``value`` must have the type of the profile's value ``reference`` (and be a valid choice)."""
    value = plain(value)
    if reference is not None and value is not None and _type_name(value) != _type_name(reference):
        hint = " (quote it)" if _type_name(reference) == "string" else ""
        raise CatalogueError("%s: parameter %s must be a %s like %r, got %s %r%s" % (
            where, name, _type_name(reference), reference, _type_name(value), value, hint))
    if name in PARAM_CHOICES and value not in PARAM_CHOICES[name]:
        raise CatalogueError("%s: parameter %s must be one of %s, got %r" % (
            where, name, ", ".join(PARAM_CHOICES[name]), value))
    if isinstance(value, dict) and isinstance(reference, dict):
        for key, sub in value.items():
            ref_sub = reference.get(key)
            if ref_sub is None and reference:
                ref_sub = next(iter(reference.values()))
            if ref_sub is not None and sub is not None and _type_name(sub) != _type_name(ref_sub):
                raise CatalogueError("%s: parameter %s.%s must be a %s like %r, got %r" % (
                    where, name, key, _type_name(ref_sub), ref_sub, sub))
    return value


def merge_params(base, overrides, where, ignore_unknown=False):
    """``overrides`` over ``base``; mapping-valued parameters merge one level deep.

    ``ignore_unknown`` drops names ``base`` does not know (an ``auto`` profile that
    does not use a parameter another profile defines) instead of rejecting them.
    """
    if overrides is None:
        overrides = {}
    if not isinstance(overrides, dict):
        raise CatalogueError("%s: parameters must be a mapping, got %s" % (where, _type_name(overrides)))
    merged = dict(base)
    for name, value in overrides.items():
        name = str(name)
        if name not in base:
            if ignore_unknown:
                continue
            raise CatalogueError("%s: unknown parameter %r (known: %s)" % (where, name, ", ".join(sorted(base))))
        value = _check_param_value(name, value, base[name], where)
        if isinstance(value, dict) and isinstance(base[name], dict):
            combined = dict(base[name])
            combined.update(value)
            value = combined
        merged[name] = value
    return merged


# -- profiles -----------------------------------------------------------------------------

class Profile:
    """A profile with ``extends`` resolved: rule ids selected and full parameters."""

    def __init__(self, name, description, priority, match, rule_ids, params, file):
        self.name = name
        self.description = description
        self.priority = priority
        self.match = match
        self.rule_ids = rule_ids
        self.params = params
        self.file = file


def _id_list(value, where):
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise CatalogueError("%s: must be a list of rule ids, got %r" % (where, value))
    return list(value)


def load_profiles(base_dir, rules):
    """Every ``<base_dir>/profiles/<name>.yml``, validated and resolved against ``rules``."""
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
        if not isinstance(data, dict):
            raise CatalogueError("%s: must be a YAML mapping" % where)
        unknown = sorted(str(k) for k in data if k not in PROFILE_KEYS)
        if unknown:
            raise CatalogueError("%s: unknown key(s) %s (allowed: %s)" % (where, ", ".join(unknown), ", ".join(PROFILE_KEYS)))
        if not isinstance(data.get("description"), str) or not data["description"].strip():
            raise CatalogueError("%s: description must be a non-empty string" % where)
        raw_profiles[name] = (data, rel, where)

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
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise CatalogueError("%s: priority must be an integer, got %r" % (where, priority))
        match = Expr(data["match"], "%s: match" % where) if data.get("match") is not None else None

        sel = data.get("rules") or {}
        if not isinstance(sel, dict):
            raise CatalogueError("%s: rules must be a mapping with areas/include/exclude" % where)
        bad = sorted(str(k) for k in sel if k not in PROFILE_RULE_KEYS)
        if bad:
            raise CatalogueError("%s: rules: unknown key(s) %s (allowed: %s)" % (where, ", ".join(bad), ", ".join(PROFILE_RULE_KEYS)))
        if "areas" in sel:
            areas = sel["areas"]
            if not isinstance(areas, list) or not all(a in AREA_PREFIX for a in areas):
                raise CatalogueError("%s: rules.areas must be a list of areas among %s, got %r" % (
                    where, ", ".join(AREA_NAMES), areas))
        else:
            areas = parent.areas if parent else []
        include = _id_list(sel.get("include"), "%s: rules.include" % where)
        exclude = _id_list(sel.get("exclude"), "%s: rules.exclude" % where)
        for rid in include + exclude:
            if rid not in known_ids:
                raise CatalogueError("%s: rules: unknown rule id %r" % (where, rid))
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

        params_raw = data.get("params") or {}
        if not isinstance(params_raw, dict):
            raise CatalogueError("%s: params must be a mapping" % where)
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
        profile = Profile(name, " ".join(data["description"].split()), priority, match, selected, params, rel)
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


def _stamp(base_dir):
    stamp = []
    for sub in ("rules", "profiles"):
        d = os.path.join(base_dir, sub)
        try:
            for name in sorted(os.listdir(d)):
                st = os.stat(os.path.join(d, name))
                stamp.append((sub, name, st.st_mtime_ns, st.st_size))
        except EnvironmentError:
            stamp.append((sub, None))
    return tuple(stamp)


def load_catalogue(base_dir=None):
    """The validated :class:`Catalogue` of ``base_dir`` (default: this collection)."""
    base_dir = os.path.abspath(base_dir or COLLECTION_ROOT)
    stamp = _stamp(base_dir)
    cached = _CACHE.get(base_dir)
    if cached and cached[0] == stamp:
        return cached[1]
    catalogue = _disk_cache(base_dir, stamp)
    if catalogue is None:
        rules = load_rules(base_dir)
        profiles = load_profiles(base_dir, rules)
        catalogue = Catalogue(rules, profiles, base_dir)
        _disk_cache(base_dir, stamp, catalogue)
    _CACHE[base_dir] = (stamp, catalogue)
    return catalogue


def _disk_cache(base_dir, stamp, catalogue=None):
    """Read (or, given ``catalogue``, write) the parsed catalogue for this exact set of files.

    Ansible runs every task of every host in a fresh worker process, so an in-process cache
    alone would parse and validate the YAML once per host; the key covers the files' names,
    sizes and mtimes, the directory and the Python version. The cache sits in the user's own
    cache directory; any problem with it just means parsing again.
    """
    import hashlib  # pylint: disable=import-outside-toplevel
    import pickle  # pylint: disable=import-outside-toplevel
    import sys  # pylint: disable=import-outside-toplevel

    cache_home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    key = hashlib.sha256(repr((base_dir, stamp, sys.version_info[:2], __file__)).encode("utf-8")).hexdigest()[:24]
    path = os.path.join(cache_home, "gpuhost-baseline", "catalogue-%s.pickle" % key)
    try:
        if catalogue is None:
            if not os.path.exists(path):
                return None
            with open(path, "rb") as handle:
                loaded = pickle.load(handle)  # nosec: our own cache file, written below
            return loaded if isinstance(loaded, Catalogue) else None
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = "%s.%d.tmp" % (path, os.getpid())
        with open(tmp, "wb") as handle:
            pickle.dump(catalogue, handle, protocol=2)
        os.rename(tmp, path)
    except Exception:  # pylint: disable=broad-except
        return None
    return None


def select_profile(catalogue, name, facts):
    """The profile called ``name``; ``auto``: the highest-priority profile whose ``match`` holds
    on ``facts`` (ties by name), else :data:`DEFAULT_PROFILE`."""
    if name is None or name == "auto":
        facts = plain(facts or {})
        candidates = sorted((p for p in catalogue.profiles.values() if p.match is not None),
                            key=lambda p: (-p.priority, p.name))
        for profile in candidates:
            try:
                if _truthy(profile.match.search(facts)):
                    return profile
            except EvaluationError:
                continue
        return catalogue.profile(DEFAULT_PROFILE)
    if not isinstance(name, str):
        raise CatalogueError("profile must be a profile name or auto, got %r" % (name,))
    return catalogue.profile(name)


def resolve_profile(catalogue, name, facts=None, overrides=None):
    """``(profile, effective params)`` with inventory ``overrides`` merged and checked."""
    profile = select_profile(catalogue, name, facts)
    overrides = plain(overrides or {})
    auto = name is None or name == "auto"
    if auto and isinstance(overrides, dict):
        known = set()
        for other in catalogue.profiles.values():
            known.update(other.params)
        unknown = sorted(k for k in overrides if k not in known)
        if unknown:
            raise CatalogueError("gpuhost_params: unknown parameter %r (known: %s)" % (
                unknown[0], ", ".join(sorted(known))))
    params = merge_params(profile.params, overrides, "gpuhost_params (profile %s)" % profile.name,
                          ignore_unknown=auto)
    return profile, params


# -- waivers -------------------------------------------------------------------------------

def _parse_date(value, where):
    if isinstance(value, datetime.datetime):
        return value.date()
    if isinstance(value, datetime.date):
        return value
    if isinstance(value, str) and _DATE_RE.match(value.strip()):
        try:
            return datetime.datetime.strptime(value.strip(), "%Y-%m-%d").date()
        except ValueError:
            pass
    raise CatalogueError("%s: expires must be a date YYYY-MM-DD, got %r" % (where, value))


def validate_waivers(waivers, catalogue):
    """Normalised waivers: ``{rule, hosts, subjects, reason, expires (date)}``."""
    if waivers is None:
        return []
    if not isinstance(waivers, list):
        raise CatalogueError("gpuhost_waivers must be a list of {rule, hosts, subjects, reason, expires}, got %s"
                             % _type_name(plain(waivers)))
    result = []
    for index, raw in enumerate(waivers):
        where = "gpuhost_waivers[%d]" % index
        if not isinstance(raw, dict):
            raise CatalogueError("%s: must be a mapping {rule, hosts, subjects, reason, expires}" % where)
        rule = raw.get("rule")
        if isinstance(rule, str):
            where = "%s (rule %s)" % (where, rule)
        unknown = sorted(str(k) for k in raw if k not in WAIVER_KEYS)
        if unknown:
            raise CatalogueError("%s: unknown key(s) %s (allowed: %s)" % (where, ", ".join(unknown), ", ".join(WAIVER_KEYS)))
        for key in ("rule", "reason", "expires"):
            if raw.get(key) in (None, ""):
                raise CatalogueError("%s: %s is required" % (where, key))
        if not isinstance(rule, str) or rule not in catalogue.by_id:
            raise CatalogueError("%s: unknown rule id %r" % (where, rule))
        if not isinstance(raw["reason"], str) or not raw["reason"].strip():
            raise CatalogueError("%s: reason must be a non-empty string" % where)
        hosts = raw.get("hosts")
        if hosts is None:
            hosts = ["*"]
        if isinstance(hosts, str):
            hosts = [hosts]
        if not isinstance(hosts, list) or not hosts or not all(isinstance(h, str) and h for h in hosts):
            raise CatalogueError("%s: hosts must be a list of host name patterns, got %r" % (where, raw.get("hosts")))
        subjects = raw.get("subjects")
        if subjects is not None:
            if isinstance(subjects, (str, int)) and not isinstance(subjects, bool):
                subjects = [subjects]
            if not isinstance(subjects, list) or not subjects or \
                    not all(isinstance(s, (str, int)) and not isinstance(s, bool) for s in subjects):
                raise CatalogueError("%s: subjects must be a list of subject labels or patterns, got %r" % (
                    where, raw.get("subjects")))
            subjects = [str(s) for s in subjects]
        result.append({
            "rule": str(rule),
            "hosts": [str(h) for h in hosts],
            "subjects": subjects,
            "reason": " ".join(str(raw["reason"]).split()),
            "expires": _parse_date(raw["expires"], where),
        })
    return result


def _waiver_for(waivers, rule_id, host, subject):
    """The first matching waiver still valid, else the first matching expired one (or None)."""
    expired = None
    for waiver in waivers:
        if waiver["rule"] != rule_id:
            continue
        if not any(fnmatch.fnmatchcase(host or "", pat) for pat in waiver["hosts"]):
            continue
        if waiver["subjects"] is not None:
            if subject is None or not any(fnmatch.fnmatchcase(str(subject), pat) for pat in waiver["subjects"]):
                continue
        if not waiver.get("_expired"):
            return waiver
        if expired is None:
            expired = waiver
    return expired


# -- comparisons -----------------------------------------------------------------------------

_VERSION_RE = re.compile(r"^\s*v?(\d+(?:\.\d+)*)")


def compare_versions(a, b):
    """``-1``/``0``/``1`` comparing dotted numeric versions (``570.133.07`` < ``575``,
    ``12.8`` < ``12.10``); missing components count as 0. ``None`` when either is not a version."""
    def key(value):
        if isinstance(value, bool) or value is None:
            return None
        if isinstance(value, (int, float)):
            value = str(value)
        if not isinstance(value, str):
            return None
        match = _VERSION_RE.match(value)
        if not match:
            return None
        return [int(part) for part in match.group(1).split(".")]
    ka, kb = key(a), key(b)
    if ka is None or kb is None:
        return None
    width = max(len(ka), len(kb))
    ka += [0] * (width - len(ka))
    kb += [0] * (width - len(kb))
    return (ka > kb) - (ka < kb)


def _truthy(value):
    # jmespath truthiness: false, null, empty string/list/dict are false; 0 is true.
    if value is None or value is False:
        return False
    if isinstance(value, (str, list, dict)) and not value:
        return False
    return True


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _fmt(value, unit=""):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        text = ("%.2f" % value).rstrip("0").rstrip(".")
        return text + unit
    if _is_number(value):
        return "%d%s" % (value, unit)
    if isinstance(value, dict):
        if not value:
            return "none"
        return ", ".join("%s (%s)" % (k, _fmt(v)) for k, v in value.items())
    if isinstance(value, list):
        if not value:
            return "none"
        return ", ".join(_fmt(v, unit) for v in value)
    return "%s%s" % (value, unit)


def _members(value):
    """Values of a list, or the keys of a dict of counts (``{"performance": 128}``)."""
    if isinstance(value, dict):
        return list(value.keys())
    if isinstance(value, list):
        return value
    return None


def _judge(op, observed, expected, unit, label):
    """``(passed, message)``; ``passed`` None means the observation cannot be judged."""
    u = (" " + unit) if unit and not unit.startswith(" ") else unit
    obs = _fmt(observed, u)
    exp = _fmt(expected, u)
    if op == "equals":
        ok = observed == expected
        return ok, "%s is %s" % (label, obs) if ok else "%s is %s, expected %s" % (label, obs, exp)
    if op == "not_equals":
        ok = observed != expected
        return ok, "%s is %s" % (label, obs) if ok else "%s is %s, must not be" % (label, obs)
    if op in ("in", "not_in"):
        if not isinstance(expected, list):
            return None, "expected value %s is not a list" % exp
        inside = observed in expected
        if op == "in":
            return inside, "%s is %s" % (label, obs) if inside else "%s is %s, expected one of %s" % (label, obs, exp)
        return not inside, "%s is %s" % (label, obs) if not inside else "%s is %s, must not be one of %s" % (label, obs, exp)
    if op in ("min", "max"):
        if not _is_number(observed):
            return None, "%s is %r, not a number" % (label, observed)
        if not _is_number(expected):
            return None, "limit %r for %s is not a number" % (expected, label)
        if op == "min":
            ok = observed >= expected
            return ok, "%s %s %s %s" % (label, obs, ">=" if ok else "<", exp)
        ok = observed <= expected
        return ok, "%s %s %s %s" % (label, obs, "<=" if ok else ">", exp)
    if op in ("min_version", "min_kernel"):
        cmp = compare_kernel_release(observed, expected) if op == "min_kernel" else compare_versions(observed, expected)
        if cmp is None:
            return None, "cannot compare %s %s with %s" % (label, obs, exp)
        ok = cmp >= 0
        return ok, "%s %s %s %s" % (label, obs, "is at least" if ok else "is older than", exp)
    if op in ("all_equal", "all_in"):
        members = _members(observed)
        if members is None:
            return None, "%s is %s, not a list or counts per value" % (label, obs)
        if not members:
            return None, "%s has no values" % label
        if op == "all_equal":
            ok = all(m == expected for m in members)
            return ok, "%s all %s" % (label, exp) if ok else "%s not all %s: %s" % (label, exp, obs)
        if not isinstance(expected, list):
            return None, "expected value %s is not a list" % exp
        bad = [m for m in members if m not in expected]
        return not bad, "%s is %s" % (label, obs) if not bad else "%s is %s, expected only %s" % (label, obs, exp)
    if op == "uniform":
        members = _members(observed)
        if members is None:
            return None, "%s is %s, not a list or counts per value" % (label, obs)
        ok = len(set(_fmt(m) for m in members)) <= 1
        return ok, "%s uniform: %s" % (label, obs) if ok else "%s not uniform: %s" % (label, obs)
    if op == "empty":
        if not isinstance(observed, (list, dict)):
            return None, "%s is %s, not a list" % (label, obs)
        return not observed, "%s: none" % label if not observed else "%s: %s" % (label, obs)
    if op in ("true", "false"):
        if not isinstance(observed, bool):
            return None, "%s is %s, not true or false" % (label, obs)
        ok = observed is (op == "true")
        return ok, "%s is %s" % (label, obs)
    return None, "unknown operator %s" % op


# -- evaluation ------------------------------------------------------------------------------

def _finding(rule, status, subject, expected, observed, message, pending=False, waiver=None):
    return {
        "id": rule.id,
        "title": rule.title,
        "area": rule.area,
        "severity": rule.severity,
        "status": status,
        "subject": subject,
        "expected": expected,
        "observed": observed,
        "message": message,
        "fix": rule.fix_hint,
        "reboot_required": rule.reboot_required,
        "rationale": rule.rationale,
        "source": rule.source,
        "fix_action": rule.fix_action,
        "pending": pending,
        "waiver": waiver,
    }


# What a finding copies from its rule: the same on every host, so a host's part of the report
# leaves it out (``compact_findings``) and the report puts it back from the catalogue
# (``expand_findings``): a third less for every worker to send to the controller.
RULE_TEXT_FIELDS = ("title", "area", "severity", "fix", "reboot_required", "rationale", "source", "fix_action")


def compact_findings(findings):
    """``findings`` without the fields copied from their rule (``RULE_TEXT_FIELDS``)."""
    return [dict((k, v) for k, v in f.items() if k not in RULE_TEXT_FIELDS) if isinstance(f, dict) else f
            for f in findings or []]


def expand_findings(findings, catalogue=None):
    """``findings`` with the fields of their rule put back where absent (inverse of
    ``compact_findings``); a finding whose id is not in the catalogue is returned as it is."""
    catalogue = catalogue or load_catalogue()
    out = []
    for finding in findings or []:
        rule = catalogue.by_id.get(finding.get("id")) if isinstance(finding, dict) else None
        if rule is not None and any(k not in finding for k in RULE_TEXT_FIELDS):
            full = _finding(rule, None, None, None, None, None)
            finding = dict((k, finding[k] if k in finding else full[k])
                           for k in list(full) + [k for k in finding if k not in full])
        out.append(finding)
    return out


def _missing_reason(rule, doc):
    """Why a null observation is null, when the rule does not say: a subsystem not gathered
    or broken beats the generic 'no data'."""
    subsystem = AREA_SUBSYSTEM[rule.area]
    query_root = rule.query.text.split(".", 1)[0].split("[", 1)[0]
    if query_root in ("kernel", "cpu", "numa", "pci", "iommu", "nvidia", "lxc"):
        subsystem = query_root
    if subsystem not in doc:
        return "the %s facts were not gathered (host_facts option gather)" % subsystem
    if doc.get(subsystem) is None:
        reasons = [e.get("reason") for e in doc.get("errors") or []
                   if isinstance(e, dict) and e.get("subsystem") == subsystem and e.get("reason")]
        return "gathering %s failed%s" % (subsystem, (": " + reasons[0]) if reasons else "")
    return None


def _subject_label(value):
    if value is None:
        return None
    if isinstance(value, (dict, list)):
        return _fmt(value)
    return _fmt(value)


def _evaluate_one(rule, doc, scope, params, subject, detail):
    suffix = ""
    if subject is not None:
        suffix = " on %s" % subject
        if detail:
            suffix += " (%s)" % detail
    try:
        observed = rule.query.search(scope)
        expected = rule.operand.resolve(params, scope)
    except EvaluationError as exc:
        return _finding(rule, "unknown", subject, None, None, str(exc) + suffix)
    if observed is None:
        reason = _missing_reason(rule, doc) if subject is None else None
        if not reason and rule.unknown_reason is not None:
            try:
                reason = rule.unknown_reason.search(scope)
            except EvaluationError:
                reason = None
            if isinstance(reason, list):
                reason = "; ".join(_fmt(r) for r in reason if r) or None
            elif reason is not None and not isinstance(reason, str):
                reason = _fmt(reason)
        if not reason:
            reason = "no data: %s is null" % rule.query.text
        return _finding(rule, "unknown", subject, expected, None, "%s unknown: %s%s" % (rule.label, reason, suffix))
    if expected is None and OPERATORS[rule.op] != "flag":
        what = rule.operand.describe()
        return _finding(rule, "unknown", subject, None, observed,
                        "%s: expected value %s is null%s" % (rule.label, what, suffix))
    if OPERATORS[rule.op] == "flag":
        expected = {"empty": [], "true": True, "false": False, "uniform": "uniform"}[rule.op]
    passed, message = _judge(rule.op, observed, expected, rule.unit, rule.label)
    if passed is None:
        return _finding(rule, "unknown", subject, expected, observed, message + suffix)
    status = "pass" if passed else "fail"
    finding = _finding(rule, status, subject, expected, observed, message + suffix)
    if not passed and rule.pending_when is not None:
        try:
            pending = rule.pending_when.search(scope)
        except EvaluationError:
            pending = None
        if _truthy(pending):
            finding["pending"] = True
            note = pending if isinstance(pending, str) else \
                _fmt(pending) if isinstance(pending, list) else "configured, takes effect after a reboot"
            finding["message"] += "; pending: %s" % note
    return finding


def _evaluate_rule(rule, doc, params):
    if rule.applies_when is not None:
        try:
            applies = rule.applies_when.search(doc)
        except EvaluationError as exc:
            return [_finding(rule, "unknown", None, None, None, str(exc))]
        if applies is None and _missing_reason(rule, doc):
            # null because the facts the condition reads are missing, not because it is false
            return [_finding(rule, "unknown", None, None, None,
                             "%s unknown: %s" % (rule.label, _missing_reason(rule, doc)))]
        if not _truthy(applies):
            return [_finding(rule, "not_applicable", None, None, None,
                             "not applicable: %s is %s" % (rule.applies_when.text, _fmt(applies)))]
    if rule.subjects is None:
        return [_evaluate_one(rule, doc, doc, params, None, None)]
    try:
        elements = rule.subjects.search(doc)
    except EvaluationError as exc:
        return [_finding(rule, "unknown", None, None, None, str(exc))]
    if elements is None:
        reason = _missing_reason(rule, doc) or "no data: %s is null" % rule.subjects.text
        return [_finding(rule, "unknown", None, None, None, "%s unknown: %s" % (rule.label, reason))]
    if not isinstance(elements, list):
        return [_finding(rule, "unknown", None, None, None,
                         "%s: %s is not a list" % (rule.label, rule.subjects.text))]
    if not elements:
        return [_finding(rule, "not_applicable", None, None, None,
                         "not applicable: no subjects (%s is empty)" % rule.subjects.text)]
    findings = []
    for index, element in enumerate(elements):
        try:
            subject = _subject_label(rule.subject.search(element))
        except EvaluationError:
            subject = None
        if subject is None:
            subject = "#%d" % index
        detail = None
        if rule.detail is not None:
            try:
                detail = rule.detail.search(element)
            except EvaluationError:
                detail = None
            detail = _fmt(detail) if detail not in (None, "", []) else None
        findings.append(_evaluate_one(rule, doc, element, params, subject, detail))
    return findings


def _apply_waiver(finding, waivers, host, today):
    if finding["status"] != "fail":
        return finding
    waiver = _waiver_for(waivers, finding["id"], host, finding["subject"])
    if waiver is None:
        return finding
    shown = {
        "reason": waiver["reason"],
        "expires": waiver["expires"].isoformat(),
        "hosts": list(waiver["hosts"]),
        "subjects": list(waiver["subjects"]) if waiver["subjects"] is not None else None,
        "expired": bool(waiver["_expired"]),
    }
    finding["waiver"] = shown
    if waiver["_expired"]:
        finding["message"] = "waiver expired %s: %s; %s" % (shown["expires"], waiver["reason"], finding["message"])
    else:
        finding["status"] = "waived"
        finding["message"] = "waived until %s: %s; %s" % (shown["expires"], waiver["reason"], finding["message"])
    return finding


def summarize(findings):
    summary = dict((s, 0) for s in STATUSES)
    for finding in findings:
        summary[finding["status"]] = summary.get(finding["status"], 0) + 1
    return summary


def failing_lines(findings):
    """One short line per failing finding (what the audit role prints)."""
    lines = []
    for f in findings:
        if f["status"] != "fail":
            continue
        lines.append("%s [%s] %s%s%s" % (
            f["id"], f["severity"], f["message"],
            " [fix needs reboot]" if f["reboot_required"] and not f["pending"] else "",
            " [pending]" if f["pending"] else ""))
    return lines


def fix_plan(findings, facts=None):
    """What the remediate role acts on: per ``fix.action``, each failing rule id with its failing
    subjects (host-wide findings add none). Waived findings are not fixed. With ``facts``, the
    ``pcie_mrrs`` entry splits the devices whose MaxReadReq rules fail (now or at boot) by kind, since
    GPUs and NICs have separate parameters."""
    plan = {}
    for f in findings:
        if f["status"] != "fail":
            continue
        subjects = plan.setdefault(f.get("fix_action") or "manual", {}).setdefault(f["id"], [])
        if f.get("subject") is not None and f["subject"] not in subjects:
            subjects.append(f["subject"])
    if isinstance(facts, dict):
        devices = (facts.get("pci") or {}).get("devices") if isinstance(facts.get("pci"), dict) else None
        kinds = dict((d.get("address"), d.get("kind")) for d in devices or [] if isinstance(d, dict))
        mrrs = {"gpu": [], "nic": []}
        pcie = plan.get("pcie_tune", {})
        for rule in ("PCI-001", "PCI-002", "PCI-008"):
            for address in pcie.get(rule, []):
                kind = kinds.get(address)
                if kind in mrrs and address not in mrrs[kind]:
                    mrrs[kind].append(address)
        plan["pcie_mrrs"] = mrrs
    return plan


#: Why a failing finding is left for people after remediation, per fix action.
_NOT_AUTOMATIC = {
    "manual": "manual",
    "lxc_config": "manual (container configuration on the Proxmox host)",
    "nvidia_driver": "manual (driver installation)",
    "kernel_package": "needs a kernel package: set gpuhost_kernel_package and run with --tags kernel_package",
    "thp": "manual (transparent hugepages policy)",
}


def pending_items(findings, fixed_actions=None):
    """What is still open after fixing, one entry per failing finding, with why:
    ``kind`` is ``reboot`` (configured, waits for a reboot), ``opt-in`` (a fix exists but is off
    by policy), ``manual`` (no automatic fix) or ``not-fixed`` (the fix ran but the check still fails)."""
    items = []
    for f in findings:
        if f["status"] != "fail":
            continue
        action = f.get("fix_action") or "manual"
        if f.get("pending"):
            kind, why = "reboot", "pending a reboot"
        elif f["id"] == "PCI-006":
            kind, why = "opt-in", "opt-in: set gpuhost_fix_acs=true (weakens device isolation; not on hosts passing devices to VMs)"
        elif action in _NOT_AUTOMATIC:
            kind, why = "manual", _NOT_AUTOMATIC[action]
        else:
            kind, why = "not-fixed", "still failing after the %s fix" % action
        items.append({"id": f["id"], "subject": f.get("subject"), "kind": kind,
                      "message": "%s: %s (%s)" % (why, f.get("message") or f.get("title"), f.get("fix") or "")})
    return items


def host_report(facts, outcome, before=None, note=None, failure=None):
    """This host's part of the report (the input of ``baseline_report``) from its facts and evaluation.

    ``failure`` (why work on the host did not complete) makes its state ``failed`` with that
    message, findings kept."""
    numa = facts.get("numa") if isinstance(facts.get("numa"), dict) else {}
    errors = facts.get("errors")
    part = {
        "state": "audited",
        "hostname": facts.get("hostname"),
        "findings": compact_findings(outcome["findings"]),
        "profile": outcome["profile"],
        "numa": numa.get("nodes") or [],
        "facts_errors": len(errors) if isinstance(errors, list) else 0,
    }
    if before is not None:
        part["before"] = {"findings": compact_findings(before)}
        part["pending"] = outcome["pending_items"]
    if note:
        part["message"] = note
    if failure:
        part["state"] = "failed"
        part["message"] = "%s; %s" % (failure, note) if note else failure
    return part


def busy_gpus(facts):
    """GPUs with compute processes, for the maintenance guard: ``[{"index", "bus_id", "processes"}]``."""
    busy = []
    nvidia = facts.get("nvidia") if isinstance(facts, dict) else None
    gpus = nvidia.get("gpus") if isinstance(nvidia, dict) else None
    # facts come from hosts: a malformed section is no GPU, never a traceback
    for gpu in gpus if isinstance(gpus, list) else []:
        processes = gpu.get("processes") if isinstance(gpu, dict) else None
        procs = [p for p in processes if isinstance(p, dict)] if isinstance(processes, list) else []
        if procs:
            busy.append({"index": gpu.get("index"), "bus_id": gpu.get("bus_id"),
                         "processes": ["%s (pid %s)" % (p.get("name"), p.get("pid")) for p in procs]})
    return busy


def _today(today):
    if today is None:
        return datetime.date.today()
    return _parse_date(today, "today")


def evaluate(facts, profile="auto", params=None, waivers=None, host=None, today=None, base_dir=None,
             catalogue=None):
    """Judge one host's facts document.

    Returns ``{"findings", "summary", "profile", "params", "failing", "failing_ids", "fix_plan",
    "busy_gpus"}``. Raises
    :class:`CatalogueError` for a malformed catalogue, profile name, parameter or waiver.
    """
    catalogue = catalogue or load_catalogue(base_dir)
    if not isinstance(facts, dict):
        raise CatalogueError("facts must be the gpuhost facts mapping (ansible_facts.gpuhost), got %s"
                             % _type_name(plain(facts)))
    facts = plain(facts)
    chosen, effective = resolve_profile(catalogue, profile, facts, params)
    checked = validate_waivers(waivers, catalogue)
    day = _today(today)
    for waiver in checked:
        waiver["_expired"] = waiver["expires"] < day
    doc = derive(facts, effective)
    doc["params"] = effective
    findings = []
    for rid in chosen.rule_ids:
        for finding in _evaluate_rule(catalogue.by_id[rid], doc, effective):
            findings.append(_apply_waiver(finding, checked, host, day))
    return {
        "findings": findings,
        "summary": summarize(findings),
        "profile": chosen.name,
        "params": effective,
        "failing": failing_lines(findings),
        "failing_ids": sorted(set(f["id"] for f in findings if f["status"] == "fail")),
        "fix_plan": fix_plan(findings, facts),
        "busy_gpus": busy_gpus(facts),
        "pending_items": pending_items(findings),
    }


def _resolve_auto_candidate(catalogue, name, params):
    # Same checks as an auto run choosing ``name``: unknown-everywhere names already failed.
    resolve_profile(catalogue, "auto", None, params)
    profile = catalogue.profile(name)
    return profile, merge_params(profile.params, plain(params or {}), "gpuhost_params (profile %s)" % name,
                                 ignore_unknown=True)


def validate(profile="auto", params=None, waivers=None, base_dir=None):
    """Load and check everything a run needs before any host is contacted.

    With ``profile: auto`` every profile's parameters are checked against ``params``
    (the one chosen per host is only known from its facts).
    """
    catalogue = load_catalogue(base_dir)
    if profile in (None, "auto"):
        names = sorted(catalogue.profiles)
    else:
        names = [catalogue.profile(profile).name]
    effective = {}
    for name in names:
        unused_profile, effective[name] = resolve_profile(catalogue, name, None, params) if profile not in (None, "auto") \
            else _resolve_auto_candidate(catalogue, name, params)
    validate_waivers(waivers, catalogue)
    return {
        "profiles": names,
        "rules": len(catalogue.rules),
        "params": effective,
    }
