# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Totals for callers: the ``gpuhost_baseline`` custom stats of an audit or remediation run.

``caller_stats(report, paths)`` is a pure function of a ``report.json`` document (as
``report.build_report`` returns it, or as parsed back from the file, any schema) and the paths the reports
were written to. The roles publish its result with ``ansible.builtin.set_stats`` so that a caller
(ansible-runner, AWX, a CI job) gets fleet and per-host counts without parsing the reports.
The shape is documented in docs/report.md ("Totals for callers").
"""

from __future__ import absolute_import, division, print_function

from collections.abc import Mapping

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.findings import HOST_STATES, SEVERITIES, STATUSES, hosts_by_kind
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import expand_document

__metaclass__ = type

#: Layout version of the stats document (independent of report.json's ``schema``).
STATS_SCHEMA = 1


class StatsError(ValueError):
    """The document handed to ``caller_stats`` is not a report.json document."""


def _count(value):
    """A non-negative int from a count, a list (its length) or anything else (0)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return max(value, 0)
    if isinstance(value, (list, tuple)):
        return len(value)
    return 0


def _host_stats(name, host):
    if not isinstance(host, dict):
        raise StatsError("host %s: expected a mapping, got %s" % (name, type(host).__name__))
    findings = host.get("findings") or []
    if not isinstance(findings, (list, tuple)):
        raise StatsError("host %s: findings must be a list, got %s" % (name, type(findings).__name__))
    counts = dict((status, 0) for status in STATUSES)
    by_severity = dict((sev, 0) for sev in SEVERITIES)
    reboot_required = False
    for index, finding in enumerate(findings):
        if not isinstance(finding, dict):
            raise StatsError("host %s: finding %d is not a mapping" % (name, index))
        status = finding.get("status")
        if status not in counts:
            raise StatsError("host %s: finding %s has status %r, not one of %s"
                             % (name, finding.get("id", index), status, ", ".join(STATUSES)))
        counts[status] += 1
        if status == "fail":
            severity = finding.get("severity") or "unknown"
            by_severity[severity] = by_severity.get(severity, 0) + 1
            if finding.get("reboot_required"):
                reboot_required = True
    state = host.get("state") or "audited"
    out = {
        "state": state,
        "message": host.get("message"),
        "profile": host.get("profile"),
    }
    out.update(counts)
    out.update(
        fail_by_severity=by_severity,
        reboot_required=reboot_required,
        facts_errors=_count(host.get("facts_errors")),
        pending=_count(host.get("pending")),
    )
    return out


def _fleet(hosts):
    fleet = {"hosts": len(hosts)}
    for state in HOST_STATES:
        fleet[state] = sum(1 for h in hosts.values() if h["state"] == state)
    for status in STATUSES:
        fleet[status] = sum(h[status] for h in hosts.values())
    fleet["hosts_failing"] = sum(1 for h in hosts.values() if h["fail"])
    fleet["reboot_required"] = sum(1 for h in hosts.values() if h["reboot_required"])
    by_severity = dict((sev, 0) for sev in SEVERITIES)
    for host in hosts.values():
        for sev, count in host["fail_by_severity"].items():
            by_severity[sev] = by_severity.get(sev, 0) + count
    fleet["fail_by_severity"] = by_severity
    fleet["facts_errors"] = sum(h["facts_errors"] for h in hosts.values())
    # host names, sorted, for callers that act on them (open a ticket, rerun with --limit)
    fleet["names"] = {
        "unreachable": sorted(n for n, h in hosts.items() if h["state"] == "unreachable"),
        "failed": sorted(n for n, h in hosts.items() if h["state"] == "failed"),
        "failing": sorted(n for n, h in hosts.items() if h["fail"]),
    }
    return fleet


def caller_stats(report, paths=None, report_dir=None):
    """The ``gpuhost_baseline`` custom stats for ``report`` (a report.json document).

    ``paths`` maps each format written (``json``, ``md``, ...) to its path; ``report_dir`` is the
    directory they were written to. Returns ``{"schema", "generated", "profile",
    "collection_version", "fleet", "hosts", "reports"}``; ``fleet`` holds every key of the
    report's ``totals`` with the same values, plus ``facts_errors`` and ``names`` (host names by problem).
    Raises :class:`StatsError` when ``report`` is not a report document.
    """
    if not isinstance(report, dict):
        raise StatsError("expected a report.json document (a mapping), got %s" % type(report).__name__)
    report = expand_document(report)  # a stored report.json (schema 3 or 2): rule fields back in the findings
    hosts_in = report.get("hosts")
    if hosts_in is None:
        hosts_in = {}
    if not isinstance(hosts_in, Mapping):
        raise StatsError("hosts must be a mapping of host name to host, got %s" % type(hosts_in).__name__)
    hosts = dict((str(name), _host_stats(str(name), hosts_in[name])) for name in sorted(hosts_in, key=str))
    reports = {}
    if report_dir is not None:
        reports["dir"] = str(report_dir)
    for fmt, path in sorted((paths or {}).items()):
        reports[str(fmt)] = str(path)
    return {
        "schema": STATS_SCHEMA,
        "generated": report.get("generated"),
        "profile": report.get("profile"),
        "collection_version": report.get("collection_version"),
        "fleet": dict(_fleet(hosts), hosts_by_kind=hosts_by_kind(hosts_in[name] for name in hosts_in)),
        "hosts": hosts,
        "reports": reports,
    }
