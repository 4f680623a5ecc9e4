# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Catalogue files checked against the collection's JSON Schemas (``schemas/``).

Controller side only. The schemas (draft 2020-12) describe the structure of a rule file, a
profile file and a waiver list; :func:`check` runs one with ``jsonschema`` and turns the first
error into a message naming the file, the item (rule id, waiver number) and the field. What a
schema cannot say (a jmespath expression compiles, a parameter a rule reads exists, a waiver
names a known rule, an id's prefix matches its area) is checked by ``catalogue_model.py``,
``catalogue_load.py`` and ``waivers.py``.

A subschema may carry ``x-message``, the text shown when it fails: a string, or a mapping of
JSON Schema keyword to string. The text is a ``str.format`` template with ``field`` (dotted
path of the failing value), ``value`` (the value), ``known`` (the allowed values of an
``enum``), ``missing`` and ``unknown`` (keys, for ``required`` and ``additionalProperties``).
"""

from __future__ import absolute_import, division, print_function

import datetime
import os
import re

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.controller_libs import message as missing_library_message
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.files import clip, loads_json, read_bytes

__metaclass__ = type

#: Collection root: schemas/ lives next to plugins/.
COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCHEMA_DIR = os.path.join(COLLECTION_ROOT, "schemas")
#: kind -> schema file
SCHEMA_FILES = {"rules": "rules.schema.json", "profile": "profile.schema.json", "waivers": "waivers.schema.json"}

#: When several errors are found, the one of the earliest keyword here is reported first
#: (an unknown key explains more than the missing one it was probably meant to be).
_KEYWORD_ORDER = ("type", "additionalProperties", "required", "dependentRequired", "propertyNames", "enum", "const",
                  "pattern", "anyOf", "minItems", "minProperties", "maxProperties")

_VALIDATORS = {}


class SchemaError(ValueError):
    """A document breaks its schema; ``str()`` is the message, ``index`` the list item (or None)."""

    def __init__(self, message, index=None):
        super(SchemaError, self).__init__(message)
        self.index = index


def validator(kind):
    """The (cached) ``jsonschema`` validator of ``kind`` (``rules``, ``profile`` or ``waivers``)."""
    if kind not in _VALIDATORS:
        try:
            import jsonschema  # pylint: disable=import-outside-toplevel
        except ImportError:
            raise SchemaError(missing_library_message(["jsonschema"]))
        schema = document(kind)
        jsonschema.Draft202012Validator.check_schema(schema)
        _VALIDATORS[kind] = jsonschema.Draft202012Validator(schema)
    return _VALIDATORS[kind]


def warm():
    """Build the validator of every kind of :data:`SCHEMA_FILES` now, ``jsonschema`` imported with them.

    Called when an action plugin is imported: Ansible imports it in the controller's main process
    before it forks a worker per host, and each worker inherits the validators instead of importing
    jsonschema and building them again (about 55 ms a host). Nothing is reported here: a missing
    library or a broken schema is said where a validator is used, as always."""
    for kind in SCHEMA_FILES:
        try:
            # one validation too: jsonschema builds some of its machinery on first use
            validator(kind).is_valid(None)
        except Exception:  # pylint: disable=broad-except
            pass


_DOCUMENTS = {}


def document(kind):
    """The parsed JSON Schema of ``kind`` (cached): plain JSON, read without jsonschema, so code
    that takes data from a schema (the parameter bounds) also runs on a host."""
    if kind not in _DOCUMENTS:
        path = os.path.join(SCHEMA_DIR, SCHEMA_FILES[kind])
        try:
            _DOCUMENTS[kind] = loads_json(read_bytes(path, 1024 * 1024).decode("utf-8"))
        except (IOError, OSError, ValueError) as exc:
            raise SchemaError("%s: cannot load the schema: %s" % (path, exc))
    return _DOCUMENTS[kind]


def profile_param_schemas():
    """``{parameter name: its schema}`` of a profile's ``params`` (``schemas/profile.schema.json``)."""
    params = document("profile").get("properties", {}).get("params", {})
    return dict(params.get("properties") or {})


def json_compatible(value):
    """``value`` as JSON would hold it: YAML 1.1's ``true:``/``false:`` keys as the strings a
    rule author meant, dates as ``YYYY-MM-DD``, other keys as strings."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if isinstance(key, bool):
                key = "true" if key else "false"
            out[key if isinstance(key, str) else str(key)] = json_compatible(item)
        return out
    if isinstance(value, (list, tuple)):
        return [json_compatible(item) for item in value]
    if isinstance(value, datetime.date):
        return value.isoformat()[:10]
    return value


def _template(error):
    custom = error.schema.get("x-message") if isinstance(error.schema, dict) else None
    if isinstance(custom, dict):
        custom = custom.get(error.validator)
    return custom


def _field(path):
    return ".".join(str(p) for p in path) or "(top level)"


class _Shown:
    """A value as a message shows it (``{value!r}`` in an ``x-message``): the document itself (the
    top level) by its kind only, since a file that is not a catalogue file at all (a link to
    ``/etc/shadow`` read as one string) must not be quoted; anything else clipped to one line of
    at most :data:`VALUE_CHARS` characters."""

    KINDS = {str: "a string", int: "a number", float: "a number", bool: "true or false", list: "a list",
             dict: "a mapping", type(None): "nothing (an empty document)"}

    def __init__(self, value, top):
        self.value = value
        self.top = top

    def __repr__(self):
        if self.top:
            return self.KINDS.get(type(self.value), "something else")
        return clip(repr(self.value), VALUE_CHARS)

    def __str__(self):
        if self.top:
            return repr(self)
        return clip(str(self.value), VALUE_CHARS)

    def __format__(self, spec):
        return format(str(self), spec)


#: What a message quotes of a value at most (characters).
VALUE_CHARS = 120


def _message(error, path, top=False):
    """The text of one error, ``path`` being the failing value's path inside its item; ``top``: the
    failing value is the document itself."""
    instance = error.instance
    values = {"field": _field(path), "value": _Shown(instance, top), "known": "", "missing": "", "unknown": ""}
    if error.validator == "enum":
        values["known"] = ", ".join(str(v) for v in error.validator_value)
    if error.validator == "required" and isinstance(instance, dict):
        values["missing"] = ", ".join(k for k in error.validator_value if k not in instance)
    if error.validator == "additionalProperties" and isinstance(instance, dict):
        allowed = list((error.schema.get("properties") or {}).keys())
        values["unknown"] = _unknown_keys(instance, allowed)
        values["known"] = ", ".join(allowed)
    custom = _template(error)
    if custom:
        return custom.format(**values)
    where = "" if not path else "%s: " % _field(path)
    if error.validator == "required":
        return "%smissing required key(s) %s" % (where, values["missing"])
    if error.validator == "additionalProperties":
        return "%sunknown key(s) %s (allowed: %s)" % (where, values["unknown"], values["known"])
    if top:  # jsonschema's own text quotes the whole document
        return "not a %s document (it fails the schema's %s)" % (error.schema.get("title", "catalogue") if isinstance(
            error.schema, dict) else "catalogue", error.validator)
    return "%s%s" % (where, clip(error.message, 300))


#: An unknown key a message quotes: one that looks like a key (a line of some other file that
#: happens to parse as a mapping, ``root:$6$...:::``, is counted, not quoted).
_KEY_SHOWN_RE = re.compile(r"^[A-Za-z0-9_.-]{1,60}$")


def _unknown_keys(document, allowed):
    """The keys of ``document`` not in ``allowed``, as a message lists them: at most 20 names; a key
    that does not look like one is only counted."""
    names = ["true" if k is True else "false" if k is False else str(k) for k in document]
    unknown = sorted(name for name in names if name not in allowed)
    shown = [name for name in unknown if _KEY_SHOWN_RE.match(name)]
    text = ", ".join(shown[:20]) + (", ..." if len(shown) > 20 else "")
    others = len(unknown) - len(shown)
    if others:
        text += "%s[%d not shown: not a name]" % (", " if shown else "", others)
    return text


def _unknown_top_level_keys(kind, document):
    """Unknown keys of a mapping document are refused before anything else looks at it (before the
    copy :func:`json_compatible` makes, before the validator walks it): the same message the
    validator gives, without walking what the keys hold."""
    schema = validator(kind).schema
    if not (isinstance(document, dict) and isinstance(schema, dict) and schema.get("type") == "object"
            and schema.get("additionalProperties") is False):
        return
    allowed = list((schema.get("properties") or {}).keys())
    if all(isinstance(k, str) and k in allowed for k in document):
        return
    custom = schema.get("x-message")
    custom = custom.get("additionalProperties") if isinstance(custom, dict) else None
    values = {"field": _field([]), "value": _Shown(document, True), "known": ", ".join(allowed), "missing": "",
              "unknown": _unknown_keys(document, allowed)}
    if custom:
        raise SchemaError(custom.format(**values))
    raise SchemaError("unknown key(s) %s (allowed: %s)" % (values["unknown"], values["known"]))


def _rank(error):
    keyword = _KEYWORD_ORDER.index(error.validator) if error.validator in _KEYWORD_ORDER else len(_KEYWORD_ORDER)
    return (len(error.absolute_path), [str(p) for p in error.absolute_path], keyword)


def check(kind, document, items=False):
    """Raise :class:`SchemaError` for the first schema error of ``document`` (already loaded).

    With ``items`` (rule files, waiver lists) the document is a list: the error's ``index``
    names the item, and the message's field is relative to that item.
    """
    _unknown_top_level_keys(kind, document)
    document = json_compatible(document)
    errors = sorted(validator(kind).iter_errors(document), key=_rank)
    if not errors:
        return
    error = errors[0]
    path = list(error.absolute_path)
    index = None
    top = not path
    if items and path and isinstance(path[0], int):
        index, path = path[0], path[1:]
    raise SchemaError(_message(error, path, top), index)
