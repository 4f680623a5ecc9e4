# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The baseline catalogue: rules, profiles and waivers, loaded and validated.

Controller side only: the ``baseline_evaluate`` and ``baseline_validate`` action plugins
call :func:`load_catalogue`, :func:`resolve_profile`, :func:`validate_waivers` and
:func:`validate`; the evaluator (:mod:`evaluate`) judges facts against what they return. Rules and profiles are YAML data (``rules/<area>.yml``,
``profiles/<name>.yml``, format in ``docs/rules.md`` and ``docs/profiles.md``); nothing here
runs on a managed host.

PyYAML and jmespath are controller dependencies, so they are imported inside the functions
that need them: importing this module never fails on a host without them.

Everything malformed is rejected with :class:`CatalogueError` naming the file, the rule id
(or profile / waiver) and what is wrong, before any host is judged.

Site catalogues (``gpuhost_catalogue_dirs``, ``site_dirs`` here) layer over the bundled one in
list order: each directory may hold ``rules/*.yml``, ``profiles/*.yml`` and ``waivers/*.yml``.
New rules and profiles are added; one that reuses an id or a name of an earlier layer must say
``replaces: true``, otherwise the collision is an error naming both files.
"""

from __future__ import absolute_import, division, print_function

import copy
import datetime
import hashlib
import json
import math
import os
import re
import stat
import time

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.derive import REQUIRED_PARAMS
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.files import FileRefused, clip, loads_json, read_bytes
# COLLECTION_ROOT: rules/ and profiles/ live next to plugins/ (one definition, in schema.py)
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.schema import (
    COLLECTION_ROOT, SCHEMA_DIR, SchemaError, check as check_schema, json_compatible, profile_param_schemas)

__metaclass__ = type


#: area (file name) -> rule id prefix
AREAS = (
    ("cpu", "CPU"),
    ("kernel", "KERNEL"),
    ("numa", "NUMA"),
    ("pcie", "PCI"),
    ("iommu", "IOMMU"),
    ("nvidia", "NVIDIA"),
    ("lxc", "LXC"),
    ("inventory", "INV"),
    ("health", "HEALTH"),
)
AREA_PREFIX = dict(AREAS)
AREA_NAMES = tuple(name for name, unused_label in AREAS)
#: facts subsystem each area reads first (used to explain a missing section)
AREA_SUBSYSTEM = {"cpu": "cpu", "kernel": "kernel", "numa": "numa", "pcie": "pci",
                  "iommu": "iommu", "nvidia": "nvidia", "lxc": "lxc",
                  "inventory": "pci", "health": "health"}

#: A rule's ``fix.action`` -> ``(module, kind)``: the module a task of the remediate role applies it
#: with (``None``: the role has none, so only ``kind: manual`` may name it), and the ``fix.kind`` a rule
#: that states none gets (rule files of the format before ``kind``: :func:`upgrade_fix`). The rules
#: schema's enum of actions is this list (tests/unit/plugins/plugin_utils/test_schema.py); which
#: rule a task of ``roles/remediate/tasks/fix.yml`` applies is checked by tests/unit/rules/test_fix_binding.py.
FIX_ACTIONS = {
    "sysctl": ("gpuhost.baseline.kernel_sysctl", "automatic"),
    "kernel_cmdline": ("gpuhost.baseline.kernel_cmdline", "automatic"),
    "kernel_package": ("ansible.builtin.package", "manual"),
    "cpu_power": ("gpuhost.baseline.cpu_power", "automatic"),
    "cpu_idle": ("gpuhost.baseline.cpu_power", "automatic"),
    "thp": (None, "manual"),
    "pcie_tune": ("gpuhost.baseline.pcie_tune", "automatic"),
    "nvidia_gpu": ("gpuhost.baseline.nvidia_gpu", "automatic"),
    "nvidia_driver": (None, "manual"),
    "lxc_config": (None, "manual"),
    "manual": (None, "manual"),
}
#: ``fix.kind``: ``automatic`` (the remediate role applies it whenever the rule fails), ``opt_in``
#: (it applies it only when the rule's ``fix.variable`` is set), ``manual`` (people do it: the hint says
#: what and why it is not automatic)
FIX_KINDS = ("automatic", "opt_in", "manual")


def upgrade_fix(rules):
    """Rule documents of the format before ``fix.kind`` (``fix: {action, hint}``) in place: each
    ``fix`` mapping without ``kind`` gets the default kind of its action (:data:`FIX_ACTIONS`;
    ``manual`` for an action the schema then rejects). Anything else is left to the schema."""
    for raw in rules if isinstance(rules, list) else []:
        fix = raw.get("fix") if isinstance(raw, dict) else None
        if isinstance(fix, dict) and "kind" not in fix:
            action = fix.get("action")
            known = FIX_ACTIONS.get(action) if isinstance(action, str) else None
            fix["kind"] = known[1] if known else "manual"
    return rules


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

#: profile ``auto`` falls back to this one when no profile's ``match`` holds
DEFAULT_PROFILE = "generic-nvidia-inference"

_ID_RE = re.compile(r"^([A-Z]+)-(\d{3})$")
_PARAM_IN_EXPR_RE = re.compile(r"(?<![.\w@])params\.([A-Za-z_][A-Za-z0-9_]*)")
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")

#: What a site catalogue directory (``gpuhost_catalogue_dirs``) may hold.
SITE_SUBDIRS = ("rules", "profiles", "waivers")
#: How errors name the variable that lists the site catalogue directories.
SITE_VARIABLE = "gpuhost_catalogue_dirs"


#: Limits of one catalogue file (rule file, profile, waiver list): a site catalogue may come from a
#: shared directory, so its files are untrusted input of a tool that runs as root (docs/profiles.md,
#: "Site catalogue limits"). A file over ``MAX_CATALOGUE_BYTES`` is refused unread; YAML anchors and
#: aliases are refused (nothing in a catalogue needs them, and they are how a 500-byte file becomes
#: 9**9 values once walked); at most ``MAX_YAML_NODES`` values, nested at most ``MAX_YAML_DEPTH``
#: deep, a number at most ``MAX_YAML_NUMBER_CHARS`` characters. The bundled files are far below.
MAX_CATALOGUE_BYTES = 1024 * 1024
MAX_YAML_NODES = 100000
MAX_YAML_DEPTH = 32
MAX_YAML_NUMBER_CHARS = 100

#: Limits of one jmespath expression of a rule or a profile, checked when it is loaded: its length,
#: its syntax tree's depth and size, and how deeply function calls nest in it (``to_string`` in
#: ``to_string`` doubles a string at each level). The bundled expressions reach a depth of 9, 33
#: nodes and functions nested 3 deep (``test_catalogue_safety``: at most half of each bound).
MAX_EXPR_CHARS = 2000
MAX_EXPR_DEPTH = 24
MAX_EXPR_NODES = 300
MAX_EXPR_FUNCTION_NESTING = 6

#: The cost bound of one rule on one host, checked while its expressions run (:class:`Budget`):
#: evaluation steps (syntax-tree nodes visited, plus the values walked to check a size or
#: flattened), characters that ``to_string`` and ``join`` produce, and the size of a value that
#: is compared with ``==``/``contains``, serialised or returned, counted with every shared part
#: once per use (``[@,@] | [@,@] | ...`` doubles at each stage without copying anything).
#: Over any of them the rule is ``unknown`` with a message naming the rule and the bound; the wall
#: clock is a backstop. The bundled catalogue on the 768-CPU benchmark host stays far below.
RULE_STEPS = 2000000
RULE_CHARS = 4 * 1024 * 1024
VALUE_NODES = 200000
VALUE_CHARS = 4 * 1024 * 1024
VALUE_DEPTH = 64
RULE_SECONDS = 10.0


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


_LOADERS = {}


def _loader_class(yaml):
    """PyYAML's safe loader (the C one when there is libyaml) without the timestamp resolver: an
    unquoted ``2025-02-30`` stays the string it is, and :func:`parse_date` names file, entry and
    field when it is not a date (the timestamp constructor raised a bare ``ValueError``)."""
    if "safe" not in _LOADERS:
        base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        resolvers = dict((first, [(tag, regexp) for tag, regexp in entries if tag != "tag:yaml.org,2002:timestamp"])
                         for first, entries in base.yaml_implicit_resolvers.items())
        _LOADERS["safe"] = type("CatalogueLoader", (base,), {"yaml_implicit_resolvers": resolvers})
    return _LOADERS["safe"]


def _place(mark):
    return "line %d, column %d" % (mark.line + 1, mark.column + 1)


def _yaml_problem(path, exc, yaml):
    """``exc`` (a YAMLError) as one line naming the file and the place, never quoting the file:
    PyYAML's own text may carry a snippet of the line it stopped at."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if isinstance(exc, yaml.MarkedYAMLError):
        what = "; ".join(" ".join(str(part).split()) for part in (exc.context, exc.problem) if part)
        where = _place(mark) if mark is not None else "somewhere"
        return "%s: not valid YAML: %s: %s" % (path, where, clip(what or "malformed", 160))
    if isinstance(exc, yaml.reader.ReaderError):
        return "%s: not valid YAML: byte %s: %s" % (path, exc.position, clip(" ".join(str(exc.reason).split()), 160))
    return "%s: not valid YAML: %s" % (path, clip(" ".join(str(exc).split()), 160))


_INT_FLOAT = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")


def _scan_yaml(yaml, loader_class, data, path):
    """Walk the YAML events of ``data`` once, before anything is built of them: anchors and aliases,
    more than :data:`MAX_YAML_NODES` values, nesting deeper than :data:`MAX_YAML_DEPTH` and overlong
    numbers are refused, each naming the file, line and column. The event parser keeps its own
    stack (no recursion), so ``[[[[...`` is counted here before the composer recurses into it."""
    loader = loader_class(data)
    nodes = depth = 0
    try:
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
                raise CatalogueError("%s: %s: anchors and aliases are not allowed in catalogue files (write the "
                                     "value out)" % (path, _place(event.start_mark)))
            if isinstance(event, (yaml.ScalarEvent, yaml.CollectionStartEvent)):
                nodes += 1
                if nodes > MAX_YAML_NODES:
                    raise CatalogueError("%s: %s: more than %d values (the limit of a catalogue file)" % (
                        path, _place(event.start_mark), MAX_YAML_NODES))
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_YAML_DEPTH:
                    raise CatalogueError("%s: %s: nested deeper than %d (the limit of a catalogue file)" % (
                        path, _place(event.start_mark), MAX_YAML_DEPTH))
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
            elif isinstance(event, yaml.ScalarEvent) and len(event.value) > MAX_YAML_NUMBER_CHARS \
                    and event.implicit[0] and loader.resolve(yaml.ScalarNode, event.value, (True, False)) in _INT_FLOAT:
                raise CatalogueError("%s: %s: a number of %d characters (at most %d)" % (
                    path, _place(event.start_mark), len(event.value), MAX_YAML_NUMBER_CHARS))
    except yaml.YAMLError as exc:
        raise CatalogueError(_yaml_problem(path, exc, yaml))
    finally:
        loader.dispose()


def _load_yaml(path):
    """The document of the catalogue file ``path``, read through the one bounded reader (a regular
    file, not a link, not over :data:`MAX_CATALOGUE_BYTES`) and loaded within the limits above.
    Every refusal is a :class:`CatalogueError` naming the file (and the line where there is one);
    none quotes the file's content."""
    yaml = _yaml()
    try:
        data = read_bytes(path, MAX_CATALOGUE_BYTES)
    except FileRefused as exc:
        raise CatalogueError("%s: refused: %s" % (path, exc.why))
    except EnvironmentError as exc:
        raise CatalogueError("%s: cannot read: %s" % (path, exc.strerror or exc))
    loader_class = _loader_class(yaml)
    _scan_yaml(yaml, loader_class, data, path)
    loader = loader_class(data)
    try:
        return loader.get_single_data()  # nosec: a safe loader
    except yaml.YAMLError as exc:
        raise CatalogueError(_yaml_problem(path, exc, yaml))
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        raise CatalogueError("%s: not valid YAML: a value cannot be read (%s)" % (path, type(exc).__name__))
    finally:
        loader.dispose()


def _rel(path, base):
    try:
        rel = os.path.relpath(path, base)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel


def expression_cost(parsed):
    """``{"depth", "nodes", "functions"}`` of a jmespath syntax tree: its depth, its number of nodes
    and how deeply function calls nest in it (walked without recursion)."""
    depth = nodes = functions = 0
    stack = [(parsed, 1, 0)]
    while stack:
        node, level, calls = stack.pop()
        nodes += 1
        if node.get("type") == "function_expression":
            calls += 1
        depth = max(depth, level)
        functions = max(functions, calls)
        for child in node.get("children") or ():
            if isinstance(child, dict):
                stack.append((child, level + 1, calls))
    return {"depth": depth, "nodes": nodes, "functions": functions}


class CostExceeded(Exception):
    """Expressions went over the cost bound of a rule (:class:`Budget`); ``bound`` says which
    (``more than 2000000 evaluation steps``), ``field`` names the expression that was running."""

    def __init__(self, bound, field=None):
        Exception.__init__(self, bound)
        self.bound = bound
        self.field = field


class Budget:
    """What the expressions of one rule on one host may still spend (the bounds are read when the
    budget is made: :data:`RULE_STEPS`, :data:`RULE_CHARS`, :data:`VALUE_NODES`,
    :data:`VALUE_CHARS`, :data:`VALUE_DEPTH`, :data:`RULE_SECONDS`)."""

    def __init__(self):
        self.steps = RULE_STEPS
        self.chars = RULE_CHARS
        self.value_nodes = VALUE_NODES
        self.value_chars = VALUE_CHARS
        self.value_depth = VALUE_DEPTH
        self.seconds = RULE_SECONDS
        self.steps_left = self.steps
        self.chars_left = self.chars
        self.deadline = time.monotonic() + self.seconds
        self._ticks = 0
        self._interpreter = None

    def interpreter(self):
        """The jmespath interpreter charging this budget (made once)."""
        if self._interpreter is None:
            self._interpreter = _bounded_interpreter(self) or False
        return self._interpreter or None

    def step(self, count=1):
        self.steps_left -= count
        if self.steps_left < 0:
            raise CostExceeded("more than %d evaluation steps" % self.steps)
        self._ticks += count
        if self._ticks >= 4096:
            self._ticks = 0
            if time.monotonic() > self.deadline:
                raise CostExceeded("more than %g seconds" % self.seconds)

    def produce(self, count):
        """``count`` more characters made by ``to_string`` or ``join``."""
        self.chars_left -= count
        if self.chars_left < 0:
            raise CostExceeded("more than %d characters made by to_string and join" % self.chars)

    def value(self, value):
        """Walk ``value`` as a comparison or a serialisation would, every shared part once per use,
        and stop as soon as it is over :data:`VALUE_NODES` values, :data:`VALUE_CHARS` characters
        or :data:`VALUE_DEPTH` levels; the values walked are steps. Returns the number of values."""
        limit = self.value_nodes
        nodes = chars = depth = 0
        level = [value]
        while level:
            depth += 1
            if depth > self.value_depth:
                raise CostExceeded("a value nested more than %d deep" % self.value_depth)
            nodes += len(level)
            below = []
            for item in level:
                if isinstance(item, str):
                    chars += len(item)
                elif isinstance(item, dict):
                    try:
                        chars += sum(map(len, item))
                    except TypeError:  # a key that is not a string (not from facts or jmespath)
                        chars += len(item)
                    below.extend(item.values())
                elif isinstance(item, list):
                    below.extend(item)
                else:
                    continue
                if nodes + len(below) > limit:
                    raise CostExceeded("a value of more than %d values" % limit)
            if chars > self.value_chars:
                raise CostExceeded("a value of more than %d characters" % self.value_chars)
            level = below
        self.step(nodes)
        return nodes


_BOUNDED = {}


def _bounded_interpreter(budget):
    """A jmespath tree interpreter that charges ``budget`` for every node it visits, every value it
    compares, serialises or flattens and every character ``to_string`` and ``join`` make; None with
    a jmespath too different from the 0.10/1.0 this was written against (plain search then)."""
    if "class" not in _BOUNDED:
        try:
            from jmespath import functions, visitor  # pylint: disable=import-outside-toplevel

            _BOUNDED["class"] = _make_bounded_interpreter(functions, visitor)
        except (ImportError, AttributeError):
            _BOUNDED["class"] = None
    cls = _BOUNDED["class"]
    return cls(budget) if cls is not None else None


def _make_bounded_interpreter(functions, visitor):
    class BoundedFunctions(functions.Functions):
        def __init__(self, budget):
            functions.Functions.__init__(self)
            self.budget = budget

        @functions.signature({"types": []})
        def _func_to_string(self, arg):
            if isinstance(arg, str):
                return arg
            self.budget.value(arg)
            chunks = []
            for chunk in json.JSONEncoder(separators=(",", ":"), default=str).iterencode(arg):
                self.budget.produce(len(chunk))
                chunks.append(chunk)
            return "".join(chunks)

        @functions.signature({"types": ["string"]}, {"types": ["array-string"]})
        def _func_join(self, separator, array):
            self.budget.step(len(array))
            self.budget.produce(sum(len(item) for item in array) + len(separator) * max(len(array) - 1, 0))
            return separator.join(array)

        @functions.signature({"types": ["array", "string"]}, {"types": []})
        def _func_contains(self, subject, search):
            if isinstance(subject, list):
                self.budget.value(subject)
                self.budget.value(search)
            return search in subject

    class BoundedInterpreter(visitor.TreeInterpreter):
        def __init__(self, budget):
            visitor.TreeInterpreter.__init__(self, visitor.Options(custom_functions=BoundedFunctions(budget)))
            self.budget = budget

        def visit(self, node, *args, **kwargs):
            self.budget.step()
            return visitor.TreeInterpreter.visit(self, node, *args, **kwargs)

        def visit_comparator(self, node, value):
            if node["value"] not in ("eq", "ne"):
                return visitor.TreeInterpreter.visit_comparator(self, node, value)
            left = self.visit(node["children"][0], value)
            right = self.visit(node["children"][1], value)
            if isinstance(left, (list, dict)) and isinstance(right, (list, dict)):
                self.budget.value(left)
                self.budget.value(right)
            return self.COMPARATOR_FUNC[node["value"]](left, right)

        def visit_flatten(self, node, value):
            base = self.visit(node["children"][0], value)
            if not isinstance(base, list):
                return None
            self.budget.step(sum(len(element) if isinstance(element, list) else 1 for element in base))
            merged = []
            for element in base:
                if isinstance(element, list):
                    merged.extend(element)
                else:
                    merged.append(element)
            return merged

    return BoundedInterpreter


class Expr:
    """A compiled jmespath expression that remembers its text, within the bounds of an expression
    (:data:`MAX_EXPR_CHARS`, :data:`MAX_EXPR_DEPTH`, :data:`MAX_EXPR_NODES`,
    :data:`MAX_EXPR_FUNCTION_NESTING`); it runs within a :class:`Budget`."""

    def __init__(self, text, where):
        if not isinstance(text, str) or not text.strip():
            raise CatalogueError("%s: must be a non-empty jmespath expression string, got %s" % (
                where, clip(repr(text), 100)))
        #: the field, as messages name it (``query``, ``expect.min.query``, ``match``)
        self.field = where.rsplit(": ", 1)[-1]
        if len(text) > MAX_EXPR_CHARS:
            raise CatalogueError("%s: jmespath expression too costly for a catalogue: %d characters long (at most %d)" % (
                where, len(text), MAX_EXPR_CHARS))
        jmespath = _jmespath()
        try:
            self.compiled = jmespath.compile(text)
        except jmespath.exceptions.JMESPathError as exc:
            raise CatalogueError("%s: bad jmespath %s: %s" % (where, clip(repr(text), 200), clip(" ".join(str(exc).split()), 300)))
        except RecursionError:
            raise CatalogueError("%s: jmespath expression too costly for a catalogue: nested too deeply to parse" % where)
        cost = expression_cost(self.compiled.parsed)
        for key, bound, what in (("functions", MAX_EXPR_FUNCTION_NESTING, "function calls nested %d deep"),
                                 ("depth", MAX_EXPR_DEPTH, "nested %d deep"),
                                 ("nodes", MAX_EXPR_NODES, "%d parts")):
            if cost[key] > bound:
                raise CatalogueError("%s: jmespath expression too costly for a catalogue: %s (at most %d)" % (
                    where, what % cost[key], bound))
        self.text = text
        self.params = sorted(set(_PARAM_IN_EXPR_RE.findall(text)))

    def search(self, data, budget=None):
        """Result of the expression; raises :class:`EvaluationError` for runtime type errors and
        :class:`CostExceeded` when ``budget`` (a fresh :class:`Budget` when None) is spent."""
        jmespath = _jmespath()
        budget = budget if budget is not None else Budget()
        interpreter = budget.interpreter()
        try:
            if interpreter is None:
                result = self.compiled.search(data)
            else:
                result = interpreter.visit(self.compiled.parsed, data)
            if isinstance(result, (list, dict)):
                budget.value(result)
            return result
        except CostExceeded as exc:
            if exc.field is None:
                exc.field = self.field
            raise
        except jmespath.exceptions.JMESPathError as exc:
            raise EvaluationError("cannot evaluate %s: %s" % (self.text, clip(" ".join(str(exc).split()), 300)))
        except RecursionError:
            raise EvaluationError("cannot evaluate %s: values nested too deeply" % self.text)

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

    def resolve(self, params, scope, budget=None):
        if self.param is not None:
            return params.get(self.param)
        if self.query is not None:
            return self.query.search(scope, budget)
        return self.literal

    def describe(self):
        if self.param is not None:
            return "{param: %s}" % self.param
        if self.query is not None:
            return "{query: %s}" % self.query.text
        return repr(self.literal)


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
        # the structure was checked against schemas/rules.schema.json (read_rule_files); what follows
        # is what a schema cannot say
        self.id = raw["id"]
        self.title = raw["title"].strip()
        self.area = raw["area"]
        match = _ID_RE.match(self.id)
        if not match or match.group(1) != AREA_PREFIX[self.area]:
            raise CatalogueError("%s: id must look like %s-NNN for area %s" % (where, AREA_PREFIX[self.area], self.area))
        self.severity = raw["severity"]
        self.rationale = " ".join(raw["rationale"].split())
        self.source = raw["source"].strip()
        self.reboot_required = raw["reboot_required"]
        fix = raw["fix"]
        self.fix_action = fix["action"]
        self.fix_hint = " ".join(fix["hint"].split())
        # the schema checked the names and that opt_in comes with its variable (and only it)
        self.fix_kind = fix.get("kind") or FIX_ACTIONS[self.fix_action][1]
        self.fix_variable = fix.get("variable")
        if self.fix_kind != "manual" and FIX_ACTIONS[self.fix_action][0] is None:
            raise CatalogueError("%s: fix: kind %s needs an action the remediate role applies (%s), got %s; "
                                 "use kind manual" % (where, self.fix_kind, ", ".join(
                                     a for a, (module, unused_kind) in FIX_ACTIONS.items() if module), self.fix_action))

        def expr(key):
            if raw.get(key) is None:
                return None
            return Expr(raw[key], "%s: %s" % (where, key))

        self.applies_when = expr("applies_when")
        self.subjects = expr("subjects")
        self.subject = expr("subject")
        self.detail = expr("detail")
        self.query = expr("query")
        self.unknown_reason = expr("unknown_reason")
        self.pending_when = expr("pending_when")
        self.label = raw.get("label") or self.title
        self.unit = raw.get("unit") or ""
        # a site rule that takes the place of a rule of an earlier layer with the same id
        self.replaces = raw.get("replaces") is True

        (op, value), = raw["expect"].items()
        # YAML 1.1 reads a bare `true:` / `false:` key as a boolean (the schema saw it as the string).
        if op is True:
            op = "true"
        elif op is False:
            op = "false"
        self.op = op
        self.operand = Operand(value, "%s: expect.%s" % (where, op))

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

    def __init__(self, rules, profiles, base_dir, site_dirs=(), waiver_files=(), waiver_items=(), prechecked=False):
        self.rules = rules
        self.by_id = dict((r.id, r) for r in rules)
        self.profiles = profiles
        self.base_dir = base_dir
        #: absolute site catalogue directories layered over the bundled catalogue, in order
        self.site_dirs = list(site_dirs)
        #: waiver files of the site directories (``<dir>/waivers/*.yml``), in layer then name order
        self.waiver_files = list(waiver_files)
        #: site waivers already loaded, ``[(waiver, where)]``: a compiled catalogue carries them
        #: (its waiver files were read and checked when it was compiled)
        self.waiver_items = list(waiver_items)
        #: True for a compiled catalogue (:func:`load_compiled`): its files and the configuration
        #: beside it were checked against the schemas on the controller, the host has no jsonschema
        self.prechecked = prechecked
        self._views = {}

    def profile(self, name):
        if name not in self.profiles:
            raise CatalogueError("unknown profile %r: known profiles are %s, or auto" % (
                name, ", ".join(sorted(self.profiles))))
        return self.profiles[name]

    def for_profile(self, profile):
        """This catalogue with the rule severities ``profile`` (a name or :class:`Profile`) sets in
        ``rules.severity``; the catalogue itself when it changes none. The evaluator copies each
        finding's severity from ``by_id``, so judging with the view reports the profile's severity."""
        if isinstance(profile, str):
            profile = self.profile(profile)
        changed = dict((rid, sev) for rid, sev in (getattr(profile, "severity", None) or {}).items()
                       if rid in self.by_id and self.by_id[rid].severity != sev)
        if not changed:
            return self
        key = tuple(sorted(changed.items()))
        if key not in self._views:
            rules = []
            for rule in self.rules:
                if rule.id in changed:
                    rule = copy.copy(rule)
                    rule.severity = changed[rule.id]
                rules.append(rule)
            self._views[key] = Catalogue(rules, self.profiles, self.base_dir, self.site_dirs, self.waiver_files,
                                         self.waiver_items, self.prechecked)
        return self._views[key]


def _item_where(base, noun, items, index):
    """Where item ``index`` of the list ``items`` is: ``base: rule CPU-001``, ``base: waiver #2
    (rule PCI-001)``, or for an inventory variable (``noun`` None) ``base[1] (rule PCI-001)``."""
    item = items[index] if isinstance(items, list) and index is not None and index < len(items) else None
    ident = item.get("id") if noun == "rule" and isinstance(item, dict) else None
    if isinstance(ident, str):
        return "%s: %s %s" % (base, noun, ident)
    where = "%s[%d]" % (base, index) if noun is None else "%s: %s #%d" % (base, noun, index + 1)
    rule = item.get("rule") if isinstance(item, dict) else None
    return "%s (rule %s)" % (where, rule) if isinstance(rule, str) else where


def _check_file(kind, data, where, noun=None, items=True):
    """``data`` (one loaded file, or an inventory variable) against ``schemas/<kind>``; a
    :class:`CatalogueError` naming ``where``, the item (rule id, waiver number) and the field."""
    if kind == "rules":
        upgrade_fix(data)  # files of the format before fix.kind still load
    try:
        check_schema(kind, data, items=items)
    except SchemaError as exc:
        if exc.index is not None:
            where = _item_where(where, noun, data, exc.index)
        raise CatalogueError("%s: %s" % (where, exc))


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


# -- parameters -------------------------------------------------------------------------

def type_name(value):
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
    if reference is not None and value is not None and type_name(value) != type_name(reference):
        hint = " (quote it)" if type_name(reference) == "string" else ""
        raise CatalogueError("%s: parameter %s must be a %s like %r, got %s %r%s" % (
            where, name, type_name(reference), reference, type_name(value), value, hint))
    if isinstance(value, dict) and isinstance(reference, dict):
        for key, sub in value.items():
            ref_sub = reference.get(key)
            if ref_sub is None and reference:
                ref_sub = next(iter(reference.values()))
            if ref_sub is not None and sub is not None and type_name(sub) != type_name(ref_sub):
                raise CatalogueError("%s: parameter %s.%s must be a %s like %r, got %r" % (
                    where, name, key, type_name(ref_sub), ref_sub, sub))
    _check_param_range(name, value, where)
    return value


_PARAM_CONSTRAINTS = []


def param_constraints():
    """``{name: {"range": (low, high), "choices": (...), "version": pattern}}`` of the scalar
    parameters, read from ``params.properties`` of ``schemas/profile.schema.json``: the one place a
    parameter's range, choices and version form are written. The schema checks them in profile files
    (and in an editor); this code checks inventory overrides (``gpuhost_params``) with the same
    bounds, also on a host, where no schema library runs. An enum of numbers is a set of sizes (the
    PCIe MaxReadReq parameters), checked by ``test_knowledge_once`` against ``facts/pci.py`` SIZES."""
    if not _PARAM_CONSTRAINTS:
        table = {}
        for name, spec in profile_param_schemas().items():
            if not isinstance(spec, dict) or name == "inventory":
                continue
            entry = {}
            if "minimum" in spec or "maximum" in spec:
                entry["range"] = (spec.get("minimum"), spec.get("maximum"))
            if isinstance(spec.get("enum"), list):
                entry["choices"] = tuple(spec["enum"])
            item = spec.get("additionalProperties") if spec.get("type") == "object" else spec
            if isinstance(item, dict) and item.get("pattern") and item.get("type") == "string":
                entry["version"] = re.compile(item["pattern"])
                entry["per_key"] = item is not spec
            table[name] = entry
        _PARAM_CONSTRAINTS.append(table)
    return _PARAM_CONSTRAINTS[0]


def _check_param_range(name, value, where):
    """Numbers finite and in range, choices and sizes among the allowed, versions dotted numbers
    (the bounds of :func:`param_constraints`)."""
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        raise CatalogueError("%s: parameter %s must be a finite number, got %r" % (where, name, value))
    spec = param_constraints().get(name) or {}
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if "range" in spec and number:
        low, high = spec["range"]
        if (low is not None and value < low) or (high is not None and value > high):
            bounds = "at least %s" % low if high is None else "between %s and %s" % (low, high)
            raise CatalogueError("%s: parameter %s must be %s, got %r" % (where, name, bounds, value))
    choices = spec.get("choices")
    if choices and value not in choices:
        if all(isinstance(c, int) for c in choices):
            raise CatalogueError("%s: parameter %s must be a PCIe size in bytes (%s), got %r" % (
                where, name, ", ".join(str(c) for c in choices[:-1]) + " or %s" % choices[-1], value))
        raise CatalogueError("%s: parameter %s must be one of %s, got %r" % (where, name, ", ".join(choices), value))
    if "version" in spec:
        versions = value.items() if spec["per_key"] and isinstance(value, dict) else [(None, value)]
        for key, version in versions:
            if version is not None and not (isinstance(version, str) and spec["version"].match(version)):
                raise CatalogueError("%s: parameter %s%s must be a version such as '6.14' or '570.124.06' "
                                     "(quoted), got %r" % (where, name, "" if key is None else "." + str(key), version))


def merge_params(base, overrides, where, ignore_unknown=False):
    """``overrides`` over ``base``; mapping-valued parameters merge one level deep.

    ``ignore_unknown`` drops names ``base`` does not know (an ``auto`` profile that
    does not use a parameter another profile defines) instead of rejecting them.
    """
    if overrides is None:
        overrides = {}
    if not isinstance(overrides, dict):
        raise CatalogueError("%s: parameters must be a mapping, got %s" % (where, type_name(overrides)))
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

    def __init__(self, name, description, priority, match, rule_ids, params, file, severity=None):
        self.name = name
        self.description = description
        self.priority = priority
        self.match = match
        self.rule_ids = rule_ids
        self.params = params
        self.file = file
        #: rule id -> severity for the selected rules whose severity this profile (or a parent) changes
        self.severity = dict(severity or {})


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


def _cache_path(base_dir, stamp):
    import hashlib  # pylint: disable=import-outside-toplevel
    import sys  # pylint: disable=import-outside-toplevel

    cache_home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    key = hashlib.sha256(repr((base_dir, stamp, sys.version_info[:2], __file__)).encode("utf-8")).hexdigest()[:24]
    return os.path.join(cache_home, "gpuhost-baseline", "catalogue-%s.json" % key)


def _trusted(st):
    """A cache file (or its directory, by its ``os.stat``) this user owns and nobody else may write."""
    return st.st_uid == os.geteuid() and not st.st_mode & 0o022


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
    import json  # pylint: disable=import-outside-toplevel
    import tempfile  # pylint: disable=import-outside-toplevel

    path = _cache_path(base_dir, stamp)
    directory = os.path.dirname(path)
    try:
        if documents is None:
            if not os.path.lexists(path) or not _trusted(os.stat(directory)):
                return None
            st = os.lstat(path)
            if not (stat.S_ISREG(st.st_mode) and _trusted(st)):
                return None
            loaded = loads_json(read_bytes(path).decode("utf-8"))
            if isinstance(loaded, dict) and isinstance(loaded.get("rules"), list) and \
                    isinstance(loaded.get("profiles"), dict):
                return loaded
            return None
        if _holds_dates(documents):
            return None  # JSON would turn a YAML date into a string: parse each time instead
        # YAML 1.1 `true:` operator keys become "true", which Rule reads the same way
        text = json.dumps(json_compatible(documents), sort_keys=True)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        if not _trusted(os.stat(directory)):
            return None
        fd, tmp = tempfile.mkstemp(prefix=".catalogue.", dir=directory)  # 0600
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(text)
            os.rename(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
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
                if truthy(profile.match.search(facts)):
                    return profile
            except EvaluationError:
                continue
            except CostExceeded as exc:
                raise CatalogueError("%s: profile %s: match went over the cost bound of a query (%s)" % (
                    profile.file, profile.name, exc.bound))
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

def parse_date(value, where):
    if isinstance(value, datetime.datetime):
        return value.date()
    if isinstance(value, datetime.date):
        return value
    if isinstance(value, str) and _DATE_RE.match(value.strip()):
        try:
            return datetime.datetime.strptime(value.strip(), "%Y-%m-%d").date()
        except ValueError:
            pass
    raise CatalogueError("%s: expires must be a date YYYY-MM-DD, got %s" % (where, clip(repr(value), 100)))


def load_waiver_files(paths):
    """``[(waiver, where)]`` from YAML files each holding a waiver list (``gpuhost_waiver_files``),
    every file checked against ``schemas/waivers.schema.json``."""
    items = []
    for path in paths or []:
        if not isinstance(path, str) or not path:
            raise CatalogueError("gpuhost_waiver_files must be a list of YAML file paths, got %r" % (path,))
        data = _load_yaml(path)
        if data is None:
            data = []  # an empty file waives nothing
        _check_file("waivers", data, path, "waiver")
        items.extend((raw, _item_where(path, "waiver", data, index)) for index, raw in enumerate(data))
    return items


def _check_waiver_shape(waivers, where):
    """Where the schemas cannot be run (a host without jsonschema, judging with a compiled
    catalogue whose configuration the controller checked), what :func:`validate_waivers` reads
    must still be there: a list of mappings with ``rule``, ``reason`` and ``expires``."""
    if not isinstance(waivers, list):
        raise CatalogueError("%s must be a list of waivers, got %s" % (where, type_name(waivers)))
    for index, raw in enumerate(waivers):
        if not isinstance(raw, dict) or any(key not in raw for key in ("rule", "reason", "expires")):
            raise CatalogueError("%s: each waiver is a mapping with rule, reason and expires" % (
                _item_where(where, None, waivers, index)))


def validate_waivers(waivers, catalogue, files=None):
    """Normalised waivers ``{rule, hosts, subjects, reason, expires (date)}`` of the inventory
    list ``waivers`` and the waiver ``files``; the structure is checked against
    ``schemas/waivers.schema.json``, the rule ids and dates here."""
    if waivers is None:
        waivers = []
    waivers = plain(waivers)
    if getattr(catalogue, "prechecked", False):
        _check_waiver_shape(waivers, "gpuhost_waivers")
    else:
        _check_file("waivers", waivers, "gpuhost_waivers")
    items = [(raw, _item_where("gpuhost_waivers", None, waivers, index)) for index, raw in enumerate(waivers)]
    items += load_waiver_files(files)
    items += [tuple(item) for item in getattr(catalogue, "waiver_items", ())]
    result = []
    for raw, where in items:
        rule = raw["rule"]
        if rule not in catalogue.by_id:
            raise CatalogueError("%s: unknown rule id %r" % (where, rule))
        hosts = raw.get("hosts")
        if hosts is None:
            hosts = ["*"]
        if isinstance(hosts, str):
            hosts = [hosts]
        subjects = raw.get("subjects")
        if subjects is not None and not isinstance(subjects, list):
            subjects = [subjects]
        result.append({
            "rule": str(rule),
            "hosts": [str(h) for h in hosts],
            "subjects": None if subjects is None else [str(s) for s in subjects],
            "reason": " ".join(str(raw["reason"]).split()),
            "expires": parse_date(raw["expires"], where),
        })
    return result


# -- comparisons -----------------------------------------------------------------------------


def truthy(value):
    # jmespath truthiness: false, null, empty string/list/dict are false; 0 is true.
    if value is None or value is False:
        return False
    if isinstance(value, (str, list, dict)) and not value:
        return False
    return True


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


# -- the compiled catalogue of the self-audit bundle --------------------------------------------

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
