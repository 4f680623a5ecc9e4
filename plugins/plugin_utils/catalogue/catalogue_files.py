# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading one catalogue file (rule file, profile, waiver list) as untrusted input: YAML within the
limits below (size, values, depth, numbers; no anchors or aliases) and the JSON Schema check of
its kind (``schemas/``), with rule files of the format before ``fix.kind`` upgraded first
(:func:`upgrade_fix`). PyYAML is imported inside the functions that need it.
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_model import CatalogueError, FIX_ACTIONS
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.files import FileRefused, clip, read_bytes
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.schema import SchemaError, check as check_schema

__metaclass__ = type


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


def _yaml():
    try:
        import yaml  # pylint: disable=import-outside-toplevel
    except ImportError:
        raise CatalogueError("the Python library PyYAML is required on the controller to read the rule "
                             "catalogue: pip install pyyaml")
    return yaml


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
