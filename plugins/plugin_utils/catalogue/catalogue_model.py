# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The baseline catalogue as objects: :class:`Rule`, :class:`Operand`, :class:`Profile`,
:class:`Catalogue`, the compiled jmespath :class:`Expr` run by a bounded interpreter under a
per-rule :class:`Budget`, and the profile choice (:func:`select_profile`).

Controller side (and the self-audit bundle on a host): jmespath is imported inside the functions
that need it, so importing this module never fails without it. Everything malformed is rejected with
:class:`CatalogueError` naming the file, the rule id (or profile) and what is wrong. Loading the YAML
files into these objects is ``catalogue_load.py``; parameters ``catalogue_params.py``; waivers
``waivers.py``.
"""

from __future__ import absolute_import, division, print_function

import copy
import datetime
import json
import re
import time

from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.sysctls import REFERENCE_RE as _SYSCTL_IN_EXPR_RE
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.sysctls import name_problem as sysctl_name_problem
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.controller_libs import message as missing_library_message
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.files import clip

__metaclass__ = type

#: The areas, each once: ``(area (file name), rule id prefix, place in the views)``. This order is
#: the catalogue's (rule files, the rules of report.json); the place is where report.html's fleet
#: matrix shows the area (:func:`area_view_key`): what an operator looks at first, GPU health, then
#: the subsystems a slow GPU host is most often tuned wrong in (PCIe, NUMA, CPU power, kernel), the
#: NVIDIA stack, then the rest; the comparison with a golden host and the measured validation last.
AREA_TABLE = (
    ("cpu", "CPU", 4),
    ("kernel", "KERNEL", 5),
    ("numa", "NUMA", 3),
    ("pcie", "PCI", 2),
    ("iommu", "IOMMU", 7),
    ("nvidia", "NVIDIA", 6),
    ("lxc", "LXC", 8),
    ("inventory", "INV", 9),
    ("health", "HEALTH", 1),
    ("validation", "VAL", 10),
)
#: area (file name) -> rule id prefix, in the catalogue's order
AREAS = tuple((name, prefix) for name, prefix, unused_place in AREA_TABLE)

AREA_PREFIX = dict(AREAS)

AREA_NAMES = tuple(name for name, unused_label in AREAS)

#: facts subsystem each area reads first (used to explain a missing section)
AREA_SUBSYSTEM = {"cpu": "cpu", "kernel": "kernel", "numa": "numa", "pcie": "pci",
                  "iommu": "iommu", "nvidia": "nvidia", "lxc": "lxc",
                  "inventory": "pci", "health": "health", "validation": "measure"}

_AREA_PLACE = dict((name, place) for name, unused_prefix, place in AREA_TABLE)


def area_view_key(area):
    """Sort key of an area in the views (report.html's fleet matrix): its place in :data:`AREA_TABLE`,
    then any other name (an area a report of another version names) alphabetically."""
    return (_AREA_PLACE.get(area, len(AREA_TABLE) + 1), str(area or ""))


#: The areas in the order the views show them (:func:`area_view_key`).
AREA_VIEW_ORDER = tuple(sorted(AREA_NAMES, key=area_view_key))

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


def _jmespath():
    try:
        import jmespath  # pylint: disable=import-outside-toplevel
    except ImportError:
        raise CatalogueError(missing_library_message(["jmespath"]))
    return jmespath


def plain(value):
    """A copy of ``value`` made of plain JSON types.

    Facts arriving through Ansible may be str/dict subclasses (tagged or unsafe values);
    jmespath's functions type-check by class name and would reject them.
    """
    kind = type(value)
    # the plain types first, by exact type: a facts document is almost all of them
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    if kind is dict:
        return {str(key): plain(item) for key, item in value.items()}
    if kind is list:
        return [plain(item) for item in value]
    if isinstance(value, int):  # an int subclass (bool cannot be subclassed: True and False are taken above)
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
        #: sysctls read by their dotted name (``kernel.sysctl."vm.dirty_ratio"``): the gather reads them too
        self.sysctls = sorted(set(m.group("name") for m in _SYSCTL_IN_EXPR_RE.finditer(text)))
        problem = sysctl_name_problem(self.sysctls)
        if problem:
            raise CatalogueError("%s: %s" % (where, problem))

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
        self.fix_by_kind = fix.get("subjects_by_kind")
        self.history_as = raw.get("history_as")
        # the words of a finding that does not apply (the report shows them as they are)
        self.applies_to = " ".join(raw["applies_to"].split()) if raw.get("applies_to") else None
        self.no_subjects = " ".join(raw["no_subjects"].split()) if raw.get("no_subjects") else None
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
        # a failing finding's severity from its graded events (the worst of a text or list of severities);
        # a profile's ``rules.severity`` caps it (:meth:`Catalogue.for_profile`)
        self.severity_from = expr("severity_from")
        self.severity_cap = None
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

    def _expressions(self):
        return [e for e in (self.applies_when, self.subjects, self.subject, self.detail, self.query,
                            self.unknown_reason, self.pending_when, self.severity_from, self.operand.query)
                if e is not None]

    def param_refs(self):
        """Parameters this rule reads: operand references and ``params.X`` in expressions."""
        refs = set()
        if self.operand.param:
            refs.add(self.operand.param)
        for e in self._expressions():
            refs.update(e.params)
        return refs

    def sysctl_refs(self):
        """Sysctls this rule reads by their dotted name (``kernel.sysctl."vm.dirty_ratio"``)."""
        refs = set()
        for e in self._expressions():
            refs.update(e.sysctls)
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
        #: the sysctls the rules read by name, which the gather reads beyond the managed ones (host_facts'
        #: ``sysctls``): a rule for a new sysctl is a catalogue entry, no code
        self.sysctls = sorted(set().union(*[rule.sysctl_refs() for rule in rules]))
        problem = sysctl_name_problem(self.sysctls)
        if problem:
            raise CatalogueError("the rules read too many sysctls by name: %s" % problem)

    def profile(self, name):
        if name not in self.profiles:
            raise CatalogueError("unknown profile %r: known profiles are %s, or auto" % (
                name, ", ".join(sorted(self.profiles))))
        return self.profiles[name]

    def history_values(self):
        """``{name: (rule id, ...)}``: the rules whose observed value per subject the audits of a boot
        keep for the later ones, under the name of their ``history_as`` (``history.earlier_in_boot``)."""
        out = {}
        for rule in self.rules:
            if rule.history_as:
                out.setdefault(rule.history_as, ())
                out[rule.history_as] += (rule.id,)
        return out

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
                    rule.severity = rule.severity_cap = changed[rule.id]
                rules.append(rule)
            self._views[key] = Catalogue(rules, self.profiles, self.base_dir, self.site_dirs, self.waiver_files,
                                         self.waiver_items, self.prechecked)
        return self._views[key]


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


def select_profile(catalogue, name, facts):
    """The profile called ``name``; ``auto``: the highest-priority profile whose ``match`` holds
    on ``facts`` (ties by name), else :data:`DEFAULT_PROFILE`."""
    return choose_profile(catalogue, name, facts)[0]


def choose_profile(catalogue, name, facts):
    """``(profile, why)``: :func:`select_profile`'s profile and, in words, why it judges the host
    (named by ``gpuhost_profile``; ``auto``: the priority of the profile whose match held and the
    profiles of higher priority whose match did not, or that none held and the default was taken)."""
    if name is None or name == "auto":
        facts = plain(facts or {})
        candidates = sorted((p for p in catalogue.profiles.values() if p.match is not None),
                            key=lambda p: (-p.priority, p.name))
        missed = []
        for profile in candidates:
            try:
                if truthy(profile.match.search(facts)):
                    # the match itself is jmespath, which the report's reader should not have to
                    # read: the profile is named, its file holds the expression
                    why = "auto: the highest-priority profile whose match holds on the facts (priority %d)" % (
                        profile.priority)
                    if missed:
                        why += "; not matched: %s" % ", ".join(missed)
                    return profile, why
            except EvaluationError:
                pass  # a match that cannot be evaluated on these facts does not hold
            except CostExceeded as exc:
                raise CatalogueError("%s: profile %s: match went over the cost bound of a query (%s)" % (
                    profile.file, profile.name, exc.bound))
            missed.append("%s (priority %d)" % (profile.name, profile.priority))
        why = "auto: no profile's match holds on the facts%s, so the default profile" % (
            " (not matched: %s)" % ", ".join(missed) if missed else "")
        return catalogue.profile(DEFAULT_PROFILE), why
    if not isinstance(name, str):
        raise CatalogueError("profile must be a profile name or auto, got %r" % (name,))
    return catalogue.profile(name), "named by gpuhost_profile"


def truthy(value):
    # jmespath truthiness: false, null, empty string/list/dict are false; 0 is true.
    if value is None or value is False:
        return False
    if isinstance(value, (str, list, dict)) and not value:
        return False
    return True
