# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Ansible's own verdict on a host after the reports are written (the action ``baseline_verdict``,
documented in plugins/modules/baseline_verdict.py; docs/report.md, "Exit codes").

Pure functions: no ansible-core import (this file travels with the ``plugin_utils`` of the self-audit
bundle like the others; it runs on Python 3.8+).
"""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.findings import FAIL_ON_LEVELS

__metaclass__ = type

#: the action's options (plugins/modules/baseline_verdict.py repeats them for ansible-doc; a unit test
#: keeps the two equal)
ARGUMENT_SPEC = dict(
    host=dict(type="str", required=True),
    state=dict(type="str", default=""),
    reason=dict(type="str", default=""),
    fix_error=dict(type="str"),
    failing=dict(type="list", elements="str", default=[]),
    fail_on=dict(type="str", default="none", choices=list(FAIL_ON_LEVELS)),
    report_dir=dict(type="str", default=""),
)

#: how many failing findings the message names before "and N more"
LISTED = 5


def must_contact(state, fix_error=None):
    """Whether the host is contacted once more: it was reported unreachable (and no fix failed on it)."""
    return not fix_error and state == "unreachable"


def verdict(host, state="", reason="", fix_error=None, failing=(), fail_on="none", report_dir=""):
    """Why ``host`` fails the run, or None when it passes.

    ``state`` and ``reason`` are its report entry's ``state`` (``audited``, ``failed``,
    ``unreachable``...) and ``message``;
    ``fix_error`` why its remediation did not complete; ``failing`` its failing findings at or above
    ``fail_on`` as ``baseline_report`` lists them (``failing_hosts``). An ``unreachable`` state reaches
    this function only when the host answered the second contact."""
    reason = reason or ""
    if fix_error:
        return ("remediation of %s did not complete: %s; the report shows where it stands, run remediate.yml again"
                % (host, fix_error))
    if state == "unreachable":
        return ("%s was unreachable when it was audited and answers now (%s); it is reported unreachable, "
                "run the audit again" % (host, reason))
    if state == "failed":
        return "%s could not be audited: %s; it is reported failed" % (host, reason)
    failing = list(failing or [])
    if not failing:
        return None
    more = " and %d more" % (len(failing) - LISTED) if len(failing) > LISTED else ""
    listed = ", ".join(failing[:LISTED])
    return ("%s: %d failing finding(s) at or above severity %s: %s%s. Reports were written to %s; fix the drift "
            "or waive it, or raise gpuhost_fail_on" % (host, len(failing), fail_on, listed, more, report_dir))


def passes(state="", fix_error=None, failing=()):
    """Whether a host's verdict is a pass with nothing to do: it is not contacted once more
    (:func:`must_contact`) and :func:`verdict` finds no reason to fail it. ``baseline_report`` lists
    these hosts (``passing_hosts``) so that ``verdict.yml`` ends the role for them without a task."""
    return not must_contact(state, fix_error) and verdict("", state, fix_error=fix_error, failing=failing) is None
