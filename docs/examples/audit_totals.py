# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run the gpuhost.baseline audit through ansible-runner and read its totals (docs/callers.md).

    python audit_totals.py -i inventory.yml [--data-dir DIR] [-e gpuhost_fail_on=high] [--apply]

The audit and remediate roles publish fleet and per-host totals as the custom stat
``gpuhost_baseline`` (``ansible.builtin.set_stats``, docs/report.md "Totals for callers").
ansible-runner hands custom stats over in the ``playbook_on_stats`` event, as
``event_data["artifact_data"]``; ``Runner.stats`` does not carry them. The same event is kept on
disk under ``<data dir>/artifacts/<ident>/job_events/``, so the totals can be read again later.

Needs ansible-runner and ansible-core, and the collection installed where ansible-playbook finds
it (ANSIBLE_COLLECTIONS_PATH or ``ansible-galaxy collection install``).
"""

import argparse
import glob
import json
import os
import sys
import tempfile

import ansible_runner

STAT = "gpuhost_baseline"


def totals_of(runner):
    """The ``gpuhost_baseline`` totals of a finished run, or None when the run wrote no report
    (the catalogue or the inventory was rejected before any host was audited)."""
    stats_events = [e for e in runner.events if e.get("event") == "playbook_on_stats"]
    if not stats_events:
        return None
    return (stats_events[-1].get("event_data", {}).get("artifact_data") or {}).get(STAT)


def totals_from_artifacts(artifact_dir):
    """The same totals, read back from a run's artifact directory (``runner.config.artifact_dir``)."""
    for path in sorted(glob.glob(os.path.join(artifact_dir, "job_events", "*.json")), reverse=True):
        with open(path) as handle:
            event = json.load(handle)
        if event.get("event") == "playbook_on_stats":
            return (event.get("event_data", {}).get("artifact_data") or {}).get(STAT)
    return None


def run_audit(inventory, private_data_dir, extravars=None, envvars=None, check=True,
              playbook="gpuhost.baseline.audit"):
    """Run ``playbook`` (a playbook of the installed collection, by name) and return
    ``(runner, totals)``.

    ansible-playbook runs in ``<private_data_dir>/project`` when that directory exists, else in
    ``private_data_dir``: a relative ``gpuhost_report_dir`` (default ``gpuhost-reports``) is
    taken from there. ``runner.rc`` is ansible-playbook's exit code (0, 2, 4: docs/report.md).
    """
    private_data_dir = os.path.abspath(private_data_dir)
    os.makedirs(private_data_dir, exist_ok=True)  # ansible-runner wants it to exist
    runner = ansible_runner.run(
        private_data_dir=private_data_dir,
        playbook=playbook,
        inventory=inventory,
        extravars=extravars or {},
        envvars=envvars or {},
        cmdline="--check" if check else None,
        quiet=True,
    )
    return runner, totals_of(runner)


def summary_lines(totals):
    """Short text of the totals: one line for the fleet, one per host."""
    fleet = totals["fleet"]
    sev = fleet["fail_by_severity"]
    lines = ["fleet: %d host(s), %d audited, %d unreachable, %d failed; %d failing finding(s) "
             "(critical %d, high %d, medium %d, low %d), %d unknown"
             % (fleet["hosts"], fleet["audited"], fleet["unreachable"], fleet["failed"], fleet["fail"],
                sev.get("critical", 0), sev.get("high", 0), sev.get("medium", 0), sev.get("low", 0), fleet["unknown"])]
    for name, host in sorted(totals["hosts"].items()):
        lines.append("  %-24s %-11s fail %3d  unknown %3d  pass %3d%s"
                     % (name, host["state"], host["fail"], host["unknown"], host["pass"],
                        "  (reboot required)" if host["reboot_required"] else ""))
    lines.append("report: %s" % totals["reports"].get("json", "(not written)"))
    return lines


def main(argv=None):
    parser = argparse.ArgumentParser(description="Audit with gpuhost.baseline and print its totals.")
    parser.add_argument("-i", "--inventory", required=True, help="inventory file or directory")
    parser.add_argument("--data-dir", help="ansible-runner private data dir (default: a new temporary one)")
    parser.add_argument("-e", "--extra-var", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--apply", action="store_true", help="run without --check (the audit changes nothing anyway)")
    args = parser.parse_args(argv)
    extravars = {}
    for item in args.extra_var:
        name, sep, value = item.partition("=")
        if not sep or not name:
            parser.error("-e expects NAME=VALUE, got %r" % item)
        extravars[name] = value
    if not os.path.exists(args.inventory):
        parser.error("inventory %s does not exist" % args.inventory)
    data_dir = args.data_dir or tempfile.mkdtemp(prefix="gpuhost-audit-")
    runner, totals = run_audit(os.path.abspath(args.inventory), data_dir, extravars=extravars, check=not args.apply)
    if totals is None:
        print("no totals: the run wrote no report (ansible-playbook exit %s); see %s/stdout"
              % (runner.rc, runner.config.artifact_dir), file=sys.stderr)
    else:
        print("\n".join(summary_lines(totals)))
    return runner.rc if isinstance(runner.rc, int) else 1


if __name__ == "__main__":
    sys.exit(main())
