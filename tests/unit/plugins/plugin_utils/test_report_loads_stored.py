# -*- coding: utf-8 -*-
"""report.loads_stored: report.json's text read with its hosts left as text, each decoded when it is
read (issue 20: the report writer holds the text, a fifth of the decoded objects, not the objects)."""

import json

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import HostsRead, loads_stored


def materialized(doc):
    """``doc`` with a HostsRead ``hosts`` read into a dict (the other values as they are)."""
    if isinstance(doc, dict) and isinstance(doc.get("hosts"), HostsRead):
        return dict(doc, hosts=dict(doc["hosts"].items()))
    return doc


DOC = {"schema": 3, "generated": "2000-01-01T00:00:00+00:00", "rules": {"CPU-001": {"title": "t"}},
       "hosts": {"a": {"state": "audited", "findings": [{"id": "CPU-001", "status": "pass"}]},
                 "b \"quoted\" \u00e9": {"state": "unreachable", "message": "no route", "findings": []},
                 "c": {"findings": [{"id": "X", "observed": {"nested": [1, {"hosts": {"x": 1}}]}}]}},
       "totals": {"hosts": 3}}


@pytest.mark.parametrize("text", [
    json.dumps(DOC),
    json.dumps(DOC, indent=2),
    json.dumps(DOC, separators=(",", ":"), ensure_ascii=False),
    " \n" + json.dumps(DOC, indent="\t") + "\r\n",
])
def test_the_same_document_as_json_loads_with_hosts_read_one_at_a_time(text):
    doc = loads_stored(text)
    assert isinstance(doc["hosts"], HostsRead) and list(doc) == list(DOC)
    assert list(doc["hosts"]) == list(DOC["hosts"]) and len(doc["hosts"]) == 3
    assert materialized(doc) == json.loads(text) == DOC
    first, again = doc["hosts"]["c"], doc["hosts"]["c"]
    assert first == again and first is not again  # decoded at each read, nothing kept


def test_a_key_given_twice_keeps_its_last_value_at_its_first_place_as_json_loads():
    text = '{"hosts": {"a": {"x": 1}, "a": {"x": 2}}, "schema": 3, "hosts": {"b": {}}, "schema": 4}'
    assert materialized(loads_stored(text)) == json.loads(text)
    assert list(loads_stored(text)) == list(json.loads(text))
    text = '{"hosts": {"a": 1}, "hosts": [1, 2]}'
    assert loads_stored(text) == json.loads(text) == {"hosts": [1, 2]}
    text = '{"hosts": [1], "hosts": {"a": 1}}'
    assert materialized(loads_stored(text)) == json.loads(text)


@pytest.mark.parametrize("text", ["[1, 2]", '"text"', "3", "null", "{}", '{"hosts": {}}', '{"hosts": null}',
                                  '{"hosts": "x"}', '{"schema": 3}'])
def test_anything_else_as_json_loads_gives_it(text):
    assert materialized(loads_stored(text)) == json.loads(text)


@pytest.mark.parametrize("text", ["", "{", '{"hosts": {"a": 1}', '{"hosts": {"a": 1,}}', '{"hosts": {"a" 1}}',
                                  '{"hosts": {a: 1}}', '{"hosts": {"a": 1}} x', '{"a": 1,}', '{"a": 1 "b": 2}',
                                  '{"hosts": {"a": {"x": }}}', '{"hosts": {"a": tru}}', "{1: 2}"])
def test_malformed_text_raises_what_json_loads_raises(text):
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    with pytest.raises(json.JSONDecodeError):
        loads_stored(text)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                    max_leaves=12)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(max_size=6), JSON, max_size=4), st.dictionaries(st.text(max_size=6), JSON, max_size=4),
       st.sampled_from([None, 2, "\t"]), st.booleans())
def test_any_json_object_reads_as_json_loads_reads_it(top, hosts, indent, ascii_only):
    doc = dict(top, hosts=hosts)
    text = json.dumps(doc, indent=indent, ensure_ascii=ascii_only)
    assert materialized(loads_stored(text)) == json.loads(text)


def test_stored_hosts_hold_each_host_as_its_report_json_text():
    """report.StoredHosts (build_stored's hosts): a host encoded once, decoded (a fresh, read-only
    copy) when it is read; report.json's text the same as of the same hosts in a dict; values are
    added through update_hosts only."""
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import (
        StoredHost, StoredHosts, dumps_document, host_text, update_hosts)
    held = StoredHosts(DOC["hosts"].items())
    assert list(held) == list(DOC["hosts"]) and len(held) == 3 and dict(held.items()) == DOC["hosts"]
    assert held.text_of("a") == host_text(DOC["hosts"]["a"]) and json.loads(held.text_of("c")) == DOC["hosts"]["c"]
    copy = held["a"]
    assert isinstance(copy, dict) and json.loads(json.dumps(copy)) == DOC["hosts"]["a"]
    with pytest.raises(TypeError, match="update_hosts"):
        copy["changes"] = {"new": 1}  # a change to a copy would be lost: refused, not silent
    with pytest.raises(TypeError, match="update_hosts"):
        copy.pop("state")
    with pytest.raises(TypeError):
        held["a"] = {}  # the mapping itself is immutable
    assert dict(copy, x=1)["x"] == 1  # a new mapping from it is a plain dict
    import copy as copying
    import pickle
    for made in (copying.copy(copy), copying.deepcopy(copy), pickle.loads(pickle.dumps(copy))):
        assert isinstance(made, dict) and not isinstance(made, StoredHost) and made == DOC["hosts"]["a"]
        made["changes"] = 1  # the caller's own copy
    document = dict(DOC, hosts=held)
    update_hosts(document, {"a": {"changes": {"new": 1}}, "not a host": {"x": 1}})
    assert document["hosts"] is not held and isinstance(document["hosts"], StoredHosts)
    assert document["hosts"]["a"]["changes"] == {"new": 1} and "changes" not in held["a"]
    assert document["hosts"].text_of("c") == held.text_of("c") and "not a host" not in document["hosts"]
    assert dumps_document(document) == dumps_document(dict(DOC, hosts=dict(document["hosts"].items())))
    plain = dict(DOC, hosts=dict(DOC["hosts"]))
    update_hosts(plain, {"c": {"changes": {}}})
    assert plain["hosts"]["c"]["changes"] == {} and "changes" not in DOC["hosts"]["c"]
    assert dumps_document(dict(DOC, hosts=StoredHosts())) == dumps_document(dict(DOC, hosts={}))
    # a host's text is one line of fields, a line per finding, then "]}"
    assert host_text(DOC["hosts"]["a"]).splitlines() == [
        '{"state":"audited","findings":[', '{"id":"CPU-001","status":"pass"}', "]}"]
    assert host_text({"state": "x"}) == '{"state":"x"}' and host_text("odd") == '"odd"'


def test_history_changes_go_into_hosts_held_as_text(tmp_path):
    """record_report adds each host's changes through update_hosts (a host held as text is a copy when read)."""
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report import history
    from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import StoredHosts, build_stored
    hosts = {"gpu01": {"findings": [{"id": "CPU-001", "status": "fail", "severity": "high", "message": "m"}]},
             "gone": {"state": "unreachable", "message": "no route", "findings": []}}
    stored = build_stored(hosts, generated="2025-06-01T12:00:00+00:00")
    assert isinstance(stored["hosts"], StoredHosts)
    assert history.record_report(stored, {"gpu01": "boot-a"}, str(tmp_path)) == []
    assert stored["hosts"]["gpu01"]["changes"]["records"] == 1 and "changes" not in stored["hosts"]["gone"]
    assert stored["changes"]["hosts_not_recorded"] == 1
