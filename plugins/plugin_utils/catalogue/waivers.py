# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Waivers: waiver files read and checked (:func:`load_waiver_files`), the waivers of a run checked
against the catalogue (:func:`validate_waivers`), and their dates (:func:`parse_date`). A waiver
names a rule (and optionally a host and a subject), a reason and an expiry date (``docs/profiles.md``).
"""

from __future__ import absolute_import, division, print_function

import datetime
import re

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_files import _check_file, _item_where, _load_yaml
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_model import CatalogueError, plain
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_params import type_name
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.files import clip

__metaclass__ = type

_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


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
