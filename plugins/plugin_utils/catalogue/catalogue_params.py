# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Profile parameters: their types and bounds (:func:`param_constraints`, read from
``schemas/profile.schema.json``), inventory overrides merged over a profile's values
(:func:`merge_params`) and a host's profile with its effective parameters (:func:`resolve_profile`).
No schema library is needed: the same checks run on a host in the self-audit bundle.
"""

from __future__ import absolute_import, division, print_function

import math
import re

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_model import CatalogueError, plain, select_profile
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.schema import profile_param_schemas

__metaclass__ = type


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
            elif isinstance(item, dict) and item is not spec and ("minimum" in item or "maximum" in item):
                # a mapping of names to bounded numbers (workload_floors): each value checked
                entry["range"] = (item.get("minimum"), item.get("maximum"))
                entry["per_key"] = True
            table[name] = entry
        _PARAM_CONSTRAINTS.append(table)
    return _PARAM_CONSTRAINTS[0]


def _check_param_range(name, value, where, spec=None):
    """Numbers finite and in range, choices and sizes among the allowed, versions dotted numbers
    (the bounds of :func:`param_constraints`; ``spec`` instead of the parameter's own: one value of a mapping)."""
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        raise CatalogueError("%s: parameter %s must be a finite number, got %r" % (where, name, value))
    spec = spec if spec is not None else (param_constraints().get(name) or {})
    if "range" in spec and spec.get("per_key") and isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, bool) or not isinstance(item, (int, float)):
                raise CatalogueError("%s: parameter %s.%s must be a number, got %r" % (where, name, key, item))
            _check_param_range("%s.%s" % (name, key), item, where, spec)
        return
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
