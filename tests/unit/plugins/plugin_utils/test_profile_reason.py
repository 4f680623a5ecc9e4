# -*- coding: utf-8 -*-
"""The report says why a profile judged each host (issue 37, host roles): named by gpuhost_profile,
chosen by ``auto`` (the match that held, the higher-priority profiles that did not), or the default
when no match held."""

import copy

from helpers.baseline_facts import healthy_facts

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue import catalogue_load, catalogue_model
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge.judge import judge_host
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import build_report


def cpu_node_facts():
    facts = copy.deepcopy(healthy_facts())
    facts["nvidia"] = {"present": False}
    facts["pci"]["devices"] = [d for d in facts["pci"]["devices"] if d.get("vendor_id") != "0x10de"]
    return facts


def test_auto_names_the_priority_of_the_match_that_held():
    cat = catalogue_load.load_catalogue()
    profile, why = catalogue_model.choose_profile(cat, "auto", healthy_facts())
    assert profile.name == "amd-epyc-nvidia"
    assert why == "auto: the highest-priority profile whose match holds on the facts (priority 100)", why
    assert "not matched" not in why


def test_auto_names_the_higher_priority_profiles_that_did_not_match():
    cat = catalogue_load.load_catalogue()
    profile, why = catalogue_model.choose_profile(cat, "auto", cpu_node_facts())
    assert profile.name == "cpu-node"
    assert why == ("auto: the highest-priority profile whose match holds on the facts (priority 50); "
                   "not matched: amd-epyc-nvidia (priority 100)"), why
    assert "nvidia.present" not in why  # words, not the jmespath of the profile's match


def test_no_match_is_the_default_and_says_so():
    cat = catalogue_load.load_catalogue()
    facts = healthy_facts()
    facts["cpu"] = dict(facts["cpu"], vendor="GenuineIntel")  # an Intel GPU host: neither match holds
    profile, why = catalogue_model.choose_profile(cat, "auto", facts)
    assert profile.name == catalogue_model.DEFAULT_PROFILE
    assert why == ("auto: no profile's match holds on the facts (not matched: amd-epyc-nvidia (priority 100), "
                   "cpu-node (priority 50)), so the default profile")


def test_a_named_profile_and_the_report_keep_the_reason():
    cat = catalogue_load.load_catalogue()
    assert catalogue_model.choose_profile(cat, "cpu-node", healthy_facts())[1] == "named by gpuhost_profile"
    named = judge_host(healthy_facts(), cat, {"host": "a", "profile": "cpu-node"}).part
    auto = judge_host(cpu_node_facts(), cat, {"host": "b"}).part
    doc = build_report({"a": named, "b": auto})
    assert doc["hosts"]["a"]["profile_reason"] == "named by gpuhost_profile"
    assert doc["hosts"]["b"]["profile"] == "cpu-node" and doc["hosts"]["b"]["profile_reason"].startswith("auto: ")
    # a host without a judgement (unreachable) has none
    assert build_report({"c": {"state": "unreachable", "findings": []}})["hosts"]["c"]["profile_reason"] is None
