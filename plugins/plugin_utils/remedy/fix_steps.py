# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which steps of a host's fix plan run (the host_fix action, on the controller).

A step runs when one of its rules fails on the host, its ``enabled`` condition holds, and the run's
``--tags`` / ``--skip-tags`` select it by its rule ids and tags, as Ansible selects a task by its tags.
A step has no ``always`` or ``never`` tag (the remediate role's data is checked for that by
tests/unit/rules/test_fix_binding.py), so of Ansible's special tags only ``all`` and ``tagged`` (every
step has tags: its rule ids) and ``untagged`` (none) apply.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def tags_select(tags, run_tags, skip_tags):
    """Whether a step tagged ``tags`` (its rule ids and tags, never empty) runs under ``--tags run_tags``
    and ``--skip-tags skip_tags`` (Ansible's ``ansible_run_tags`` and ``ansible_skip_tags``; ``run_tags``
    is ``["all"]`` when the run names none)."""
    tags, run, skip = set(tags), set(run_tags or ["all"]), set(skip_tags or [])
    if not (run & {"all", "tagged"} or tags & run):
        return False
    return not (skip & {"all", "tagged"} or tags & skip)


def select_steps(steps, failing, run_tags, skip_tags):
    """``(selected steps, {name: why left out})``: the steps of ``steps`` (the plan's order) that apply to
    ``failing`` (rule ids); a step of a failing rule that does not run is left out with why (``disabled``:
    its condition is false; ``tags``: --tags / --skip-tags). A step of no failing rule is neither."""
    failing = set(failing)
    selected, left_out = [], {}
    for step in steps:
        rules = list(step.get("rules") or [])
        if not failing.intersection(rules):
            continue
        if not step.get("enabled", True):
            left_out[step["name"]] = "disabled"
        elif not tags_select(rules + list(step.get("tags") or []), run_tags, skip_tags):
            left_out[step["name"]] = "tags"
        else:
            selected.append(step)
    return selected, left_out


def applied_rules(selected, failing, check_mode):
    """The failing rule ids of the steps ``selected`` that ran: the host_fix action passes the steps the module
    says ran (a failed one included: its rule may well be half-fixed), or every step it chose when the
    connection was lost under them (which ran is not known); none in check mode, which applies nothing."""
    if check_mode:
        return []
    return sorted(set(failing).intersection(rule for step in selected for rule in step.get("rules") or []))
