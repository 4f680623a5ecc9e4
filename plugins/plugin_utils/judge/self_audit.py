# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Self-audit: gather, judge and report one host on that host (the ``self_audit`` role's runner).

The ``gpuhost.baseline.self_audit`` role installs this collection's facts readers, evaluator and
catalogue on a managed host as one file, ``/usr/local/sbin/gpuhost-self-audit`` (a Python zip
application built by ``roles/self_audit/files/make_bundle.py``), and a systemd timer that runs it.
Each run does on the host what ``audit.yml`` does over SSH, for that host alone:

1. gather ``ansible_facts.gpuhost`` with ``module_utils/facts`` (the code ``host_facts`` runs);
2. judge them with ``plugin_utils`` (profile, parameters, waivers from the role's config file);
3. keep the drift history on the host (``plugin_utils/report/history.py``, one JSON Lines file in the
   history directory, by default ``history/`` in the report directory): the judging sees what the
   earlier audits of this boot saw (PCI-008), the report says what changed since the last run
   (``hosts.<name>.changes``) and the metrics carry the time of the last change;
4. write ``report.json`` (one host, the format of ``docs/report.md``) into the report directory,
   and ``gpuhost_baseline.prom`` into node_exporter's textfile directory, each to a temporary
   name in the same directory and renamed, so a reader never sees half a file.

It changes nothing else on the host. Host requirements: Python 3.8+ and its standard library,
nothing else: the bundle carries the catalogue compiled to JSON on the controller (rules, profiles,
the site's ``gpuhost_catalogue_dirs``, all checked against the schemas there: no PyYAML and no
jsonschema on the host) and its own copy of jmespath (pure Python). The judging is
``judge.judge_host``, the code ``baseline_evaluate`` runs on the controller, so a host judges
itself as the audit playbook judges it. Run from a checkout instead (tests), it reads the catalogue
files and needs PyYAML, jmespath and jsonschema as the controller does.

Exit status: 0 the host was audited (whatever the findings: drift is what the metrics report);
1 the audit could not be done (a catalogue, profile or parameter error, a facts failure): both
files are still written when their directories are writable, with the host ``failed`` and the
reason, so the metrics say so; 2 the command line or the config file is unusable. Every error
is one line on stderr starting ``gpuhost-self-audit:``, never a traceback.

Every line it prints (the journal line on stdout, warnings and errors on stderr) goes through
:func:`say`: host-controlled text in it (the host name, GPU names in a message, a history's
path) is escaped by ``console.escape``, so nothing it prints can recolour a terminal, move the
cursor or fake another journal line. The config file is read like every file this tool reads
(``files.read_bytes``: a regular file, not through a link, never blocking, bounded).
"""

from __future__ import absolute_import, division, print_function

import argparse
import datetime
import os
import resource
import shutil
import socket
import sys
import time

from ansible_collections.gpuhost.baseline.plugins.module_utils.host import runner
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.gather import SUBSYSTEMS, gather_facts
from ansible_collections.gpuhost.baseline.plugins.module_utils.facts.health import MAX_KERNEL_LOG_BOOTS
from ansible_collections.gpuhost.baseline.plugins.module_utils.host.root import Root
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_load import (
    COMPILED_NAME, collection_version, load_catalogue, load_compiled,
)
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.catalogue.catalogue_model import CatalogueError
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.schema import COLLECTION_ROOT
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.findings import expand_findings
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.history import record_report
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge import fault_watch
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge.judge import judge_host
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import (
    ReportError, build_stored, dumps_document, update_hosts)
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.metrics import (
    ORIGIN_SELF_AUDIT, MetricsError, prom_escape, render_host_metrics)
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.console import escape
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.files import (
    DEFAULT_CAP, FileRefused, atomic_write, loads_json, read_bytes)
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report_dir import ReportDirError, write_stored

__metaclass__ = type

PROG = "gpuhost-self-audit"
DEFAULT_CONFIG = "/etc/gpuhost-self-audit.json"
#: the unit --watch starts on a GPU fault line (the role's service)
WATCH_UNIT = PROG + ".service"
DEFAULT_REPORT_DIR = "/var/lib/gpuhost-baseline"
DEFAULT_TEXTFILE_DIR = "/var/lib/prometheus/node-exporter"
PROM_FILE = "gpuhost_baseline.prom"
#: the history directory when the config names none: ``history`` in the report directory
HISTORY_SUBDIR = "history"
#: records kept per host when the config names no count: a week of hourly runs
DEFAULT_HISTORY_KEEP = 168
#: keys of the config file (written by the role from its variables) and their JSON types
CONFIG_KEYS = {
    "host": str,
    "profile": str,
    "params": dict,
    "waivers": list,
    "gather": list,
    "report_dir": str,
    "textfile_dir": str,
    "command_timeouts": dict,
    "command_timeout": (int, float),
    "history_dir": str,
    "history_keep": int,
    "kernel_log_boots": int,
    "cluster": str,
}
#: largest config file read (bytes): the role writes a few kilobytes (params and waivers included)
CONFIG_CAP = DEFAULT_CAP
#: longest line printed, in characters after escaping (a hostile value cannot flood the journal)
LINE_CHARS = 4000
#: the most seconds of the deprecated ``command_timeout`` (as of each entry of ``command_timeouts``)
MAX_COMMAND_TIMEOUT = 86400
#: libraries the catalogue files need when no compiled catalogue is there (a run from a checkout),
#: and the Debian packages that provide them
LIBRARIES = (("yaml", "python3-yaml"), ("jmespath", "python3-jmespath"), ("jsonschema", "python3-jsonschema"))
#: where ``module.get_bin_path`` also looks, so a timer's PATH finds what an Ansible module finds
SBIN_DIRS = ("/sbin", "/usr/sbin", "/usr/local/sbin")


def say(text, stream=None):
    """Print ``gpuhost-self-audit: <text>`` as one line on ``stream`` (stdout by default), escaped by
    ``console.escape`` (control characters as ``\\x1b``, newlines as ``\\n``, at most
    :data:`LINE_CHARS` characters): the only way this runner prints."""
    stream = sys.stdout if stream is None else stream
    stream.write(escape("%s: %s" % (PROG, text), limit=LINE_CHARS) + "\n")
    stream.flush()  # a long-running --watch writes to the journal as it goes (Python 3.8 buffers stderr)


def warn(text):
    say("warning: %s" % text, sys.stderr)


class SelfAuditError(Exception):
    """A problem with a message for the operator; ``status`` is the exit status."""

    def __init__(self, message, status=1):
        Exception.__init__(self, message)
        self.status = status


def load_config(path):
    """The config file ``path`` (JSON object, keys of ``CONFIG_KEYS``), checked; ``{}`` for None."""
    if path is None:
        return {}
    try:
        text = read_bytes(path, CONFIG_CAP).decode("utf-8")
    except FileRefused as exc:  # a link, a FIFO, a device, a directory, or over CONFIG_CAP
        raise SelfAuditError("cannot read the config file %s: %s" % (path, exc.why), status=2)
    except (IOError, OSError) as exc:
        raise SelfAuditError("cannot read the config file %s: %s" % (path, exc.strerror or exc), status=2)
    except UnicodeDecodeError as exc:
        raise SelfAuditError("config file %s is not UTF-8 text: %s" % (path, exc), status=2)
    try:
        config = loads_json(text)  # nested too deeply is a ValueError too
    except ValueError as exc:
        raise SelfAuditError("config file %s is not valid JSON: %s" % (path, exc), status=2)
    if not isinstance(config, dict):
        raise SelfAuditError("config file %s must hold a JSON object, not %s" % (path, type(config).__name__), status=2)
    for key, value in config.items():
        wanted = CONFIG_KEYS.get(key)
        if wanted is None:
            raise SelfAuditError("config file %s: unknown key %r (known: %s)" % (path, key, ", ".join(sorted(CONFIG_KEYS))),
                                 status=2)
        if value is not None and (not isinstance(value, wanted) or isinstance(value, bool)):
            raise SelfAuditError("config file %s: %s must be %s, not %s" % (
                path, key, wanted.__name__ if isinstance(wanted, type) else "a number", type(value).__name__), status=2)
    keep = config.get("history_keep")
    if keep is not None and keep < 1:
        raise SelfAuditError("config file %s: history_keep must be at least 1, not %d" % (path, keep), status=2)
    boots = config.get("kernel_log_boots")
    if boots is not None and not 1 <= boots <= MAX_KERNEL_LOG_BOOTS:
        raise SelfAuditError("config file %s: kernel_log_boots must be from 1 to %d, not %d"
                             % (path, MAX_KERNEL_LOG_BOOTS, boots), status=2)
    try:
        config["command_timeouts"] = command_timeouts(config)
    except ValueError as exc:
        raise SelfAuditError("config file %s: %s" % (path, exc), status=2)
    unknown = [s for s in config.get("gather") or [] if s not in SUBSYSTEMS]
    if unknown:
        raise SelfAuditError("config file %s: gather names unknown subsystem(s) %s (known: %s)"
                             % (path, ", ".join(map(str, unknown)), ", ".join(SUBSYSTEMS)), status=2)
    return config


def which(name):
    """``shutil.which`` over PATH plus the sbin directories (as ``AnsibleModule.get_bin_path``)."""
    path = os.environ.get("PATH") or os.defpath
    dirs = path.split(os.pathsep) + [d for d in SBIN_DIRS if d not in path.split(os.pathsep)]
    return shutil.which(name, path=os.pathsep.join(dirs))


def command_timeouts(config):
    """The config's ``command_timeouts`` (tool name -> seconds: ``gpuhost_command_timeouts``, as the
    audit's ``host_facts`` takes it) checked by ``runner.checked_timeouts``, as ``{name: seconds}``; a
    ``command_timeout`` (deprecated: ``gpuhost_self_audit_command_timeout``) checked too. Raises
    :class:`ValueError` with one line naming the first bad value."""
    every = config.get("command_timeout")
    if every is not None and (isinstance(every, bool) or not isinstance(every, (int, float))
                              or not 0 < every <= MAX_COMMAND_TIMEOUT):
        raise ValueError("command_timeout must be a number of seconds from 1 to %d, not %r" % (MAX_COMMAND_TIMEOUT, every))
    given = config.get("command_timeouts")
    if given is not None and not isinstance(given, dict):
        raise ValueError("command_timeouts must be an object (tool name -> seconds), not %s" % type(given).__name__)
    return runner.checked_timeouts(given)


def command_runner(timeouts=None, every=None):
    """``run(argv) -> Result`` (unpacks as ``(rc, stdout, stderr)``) for :class:`Root`: the one command
    runner (module_utils/host/runner.py): C locale, no stdin, output bounded while read, the process
    group killed at the tool's time bound: ``timeouts`` (tool name -> seconds, the config's
    ``command_timeouts``), then ``every`` (the deprecated ``command_timeout``) when given, then the
    runner's own per-tool defaults (``runner.TIMEOUTS``): the bounds of the audit's ``host_facts``."""
    timeouts = dict(timeouts or {})

    def run(argv):
        name = os.path.basename(str(argv[0])) if argv else ""
        timeout = every if every and name not in timeouts else None
        return runner.run(argv, timeout=timeout, timeouts=timeouts, env={"LANG": "C"}).decoded("replace")
    return run


def host_name(config, facts=None):
    """The name the report and the metrics use: ``host`` of the config (the role writes the inventory
    name there), else the host's own name."""
    name = config.get("host")
    if name:
        return name
    if isinstance(facts, dict) and isinstance(facts.get("hostname"), str) and facts["hostname"].strip():
        return facts["hostname"].strip()
    return socket.gethostname() or "localhost"


def missing_libraries():
    """``[(import name, Debian package)]`` of the libraries the evaluation needs that do not import."""
    missing = []
    for module, package in LIBRARIES:
        try:
            __import__(module)
        except ImportError:
            missing.append((module, package))
    return missing


def audit_host(config, root="/", run_command=None, history_dir=None):
    """``(host name, host part of report.json)`` of one gather and evaluation; the part's
    ``boot_id`` is the boot the facts saw (for the history, as ``baseline_evaluate`` gives it).

    With ``history_dir``, the rules see what the earlier audits of this boot recorded there
    (``history.with_history``: PCI-008's evidence); a damaged or unreadable history is a warning
    on stderr, never a failure. A catalogue, profile, parameter or waiver error gives a part with
    state ``failed`` and the reason (the report is still written); nothing here raises for bad input.
    """
    live = os.path.abspath(root or "/") == "/"
    if not live and not os.path.isdir(root):
        raise SelfAuditError("snapshot root %s is not a directory" % root, status=2)
    try:
        timeouts = command_timeouts(config)
    except ValueError as exc:
        raise SelfAuditError("config: %s" % exc, status=2)
    if run_command is None:
        run_command = command_runner(timeouts, config.get("command_timeout"))
    reader = Root(root, run_command=run_command, which=which)
    compiled = os.path.join(COLLECTION_ROOT, COMPILED_NAME)
    missing = [] if os.path.lexists(compiled) else missing_libraries()
    catalogue, refusal = None, None
    if not missing:
        try:
            # the bundle's compiled catalogue (the site's catalogue directories included, checked when the
            # role built the bundle); from a checkout, the catalogue files themselves. Loaded before the gather,
            # which reads the sysctls its rules read by name (Catalogue.sysctls)
            catalogue = load_compiled(compiled) if os.path.lexists(compiled) else load_catalogue()
        except CatalogueError as exc:
            refusal = exc
    facts = gather_facts(reader, config.get("gather") or None, {
        "kernel_log_boots": config.get("kernel_log_boots"),
        "sysctls": catalogue.sysctls if catalogue is not None else None})
    name = host_name(config, facts)
    if missing:
        return name, {"state": "failed", "message": (
            "cannot judge %s: the Python libraries %s are not installed for %s (Debian: apt-get install %s; "
            "docs/self-audit.md)" % (name, ", ".join(m for m, unused in missing), sys.executable,
                                     " ".join(p for unused, p in missing)))}
    if refusal is not None:
        return name, {"state": "failed", "message": "baseline evaluation of %s: %s" % (name, refusal)}
    host_vars = {"host": name, "profile": config.get("profile") or "auto", "params": config.get("params") or {},
                 "waivers": config.get("waivers") or [], "cluster": config.get("cluster") or None}
    # the report below takes every rule text from this catalogue: nothing to keep for another one
    judgement = judge_host(facts, catalogue, host_vars, history=history_dir, bundled=catalogue)
    for warning in judgement.warnings:
        warn(warning)
    part = judgement.part
    if not judgement.failed:
        # the report carries each finding's rule text (title, rationale, fix), as baseline_report restores it
        part["findings"] = expand_findings(part["findings"], catalogue)
    return name, part


def _cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime + children.ru_utime + children.ru_stime


def cpu_metric(name, cpu, cluster=""):
    """The self-audit run's own CPU time, appended to the host's series (docs/self-audit.md), labelled as
    they are (host, origin, cluster)."""
    metric = "gpuhost_baseline_self_audit_cpu_seconds"
    return "# HELP %s %s\n# TYPE %s gauge\n%s{host=\"%s\",origin=\"%s\",cluster=\"%s\"} %s\n" % (
        metric, "CPU time (user + system, children included) of the last self-audit run of the host.", metric,
        metric, prom_escape(name), ORIGIN_SELF_AUDIT, prom_escape(cluster or ""), round(cpu, 3))


def write_outputs(report, name, report_dir, textfile_dir, started, cpu_start):
    """Write report.json, then the textfile (``metrics.render_host_metrics`` and the run's CPU
    time); ``{"json": path, "prom": path}``. The run's wall time so far is the host's
    ``duration_seconds`` (``gpuhost_baseline_run_duration_seconds``)."""
    update_hosts(report, {name: {"duration_seconds": round(time.monotonic() - started, 3)}})
    try:
        os.makedirs(report_dir, mode=0o755, exist_ok=True)
        paths = write_stored(dumps_document(report), report_dir, formats=["json"])[0]
    except (IOError, OSError) as exc:
        raise SelfAuditError("cannot write report.json into %s: %s" % (report_dir, exc))
    except ReportDirError as exc:  # the message says what was refused and what to do
        raise SelfAuditError(str(exc))
    except ReportError as exc:
        raise SelfAuditError("cannot build report.json: %s" % exc)
    try:
        text = render_host_metrics(report, name)
    except MetricsError as exc:
        raise SelfAuditError("cannot render the metrics: %s" % exc)
    cluster = (report.get("hosts") or {}).get(name, {}).get("cluster")
    text += cpu_metric(name, _cpu_seconds() - cpu_start, cluster if isinstance(cluster, str) else "")
    prom = os.path.join(textfile_dir, PROM_FILE)
    try:
        os.makedirs(textfile_dir, mode=0o755, exist_ok=True)
        atomic_write(prom, text)
    except (IOError, OSError) as exc:
        raise SelfAuditError("cannot write %s: %s (gpuhost_self_audit_textfile_dir)" % (prom, exc))
    paths["prom"] = prom
    return paths


def parser():
    p = argparse.ArgumentParser(prog=PROG, description=(
        "Audit this host against the gpuhost.baseline rules and write report.json and a node_exporter "
        "textfile (installed by the gpuhost.baseline.self_audit role; docs/self-audit.md)."))
    p.add_argument("--config", default=DEFAULT_CONFIG,
                   help="JSON config written by the role (default %(default)s; 'none' for built-in defaults)")
    p.add_argument("--root", default="/", help="snapshot directory to audit instead of the live host")
    p.add_argument("--host", help="host name in the report and the metrics (default: config, then hostname)")
    p.add_argument("--report-dir", help="directory of report.json (default: config, then %s)" % DEFAULT_REPORT_DIR)
    p.add_argument("--textfile-dir", help="node_exporter textfile directory (default: config, then %s)"
                   % DEFAULT_TEXTFILE_DIR)
    p.add_argument("--history-dir", help="drift history directory (default: config, then history/ in the report "
                   "directory; 'none' keeps no history)")
    p.add_argument("--generated", help=argparse.SUPPRESS)  # fixed timestamp for tests
    p.add_argument("--watch", action="store_true",
                   help="follow the kernel log instead of auditing: start --watch-unit on each GPU fault line "
                        "(Xid, SXid, fallen off the bus, RmInitAdapter, GSP), at most once per --watch-interval")
    p.add_argument("--watch-unit", default=WATCH_UNIT, help="the systemd unit --watch starts (default %(default)s)")
    p.add_argument("--watch-interval", type=float, default=fault_watch.DEFAULT_INTERVAL,
                   help="seconds between two starts (default %%(default)s; %d to %d)" % fault_watch.INTERVAL_BOUNDS)
    return p


def history_directory(option, config, report_dir):
    """The history directory of this run, ``None`` for none: the ``--history-dir`` option ('none'
    for none), else the config's ``history_dir`` (empty for none), else ``history/`` in the report directory."""
    if option is not None:
        return None if option in ("", "none") else option
    if "history_dir" in config and config["history_dir"] is not None:
        return config["history_dir"] or None
    return os.path.join(report_dir, HISTORY_SUBDIR)


def run(argv):
    """The command: parse, audit, write. Returns the exit status; raises :class:`SelfAuditError`."""
    started, cpu_start = time.monotonic(), _cpu_seconds()
    args = parser().parse_args(argv)
    if args.watch:
        least, most = fault_watch.INTERVAL_BOUNDS
        if not least <= args.watch_interval <= most:
            raise SelfAuditError("--watch-interval must be %d to %d seconds, not %g" % (least, most, args.watch_interval),
                                 status=2)
        try:
            fault_watch.watch(args.watch_unit, args.watch_interval, say=lambda text: say(text, sys.stderr))
        except fault_watch.WatchError as exc:
            raise SelfAuditError(str(exc))
        return 0
    config = load_config(None if args.config == "none" else args.config)
    if args.host:
        config["host"] = args.host
    report_dir = args.report_dir or config.get("report_dir") or DEFAULT_REPORT_DIR
    textfile_dir = args.textfile_dir or config.get("textfile_dir") or DEFAULT_TEXTFILE_DIR
    history_dir = history_directory(args.history_dir, config, report_dir)
    name, part = audit_host(config, root=args.root, history_dir=history_dir)
    boot_id = part.pop("boot_id", None)
    counters = part.pop("counters", None)
    generated = args.generated or datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    try:
        report = build_stored({name: part}, profile=part.get("profile"), generated=generated,
                              collection_version=collection_version())
    except ReportError as exc:  # the evaluator broke the report contract: say so in the report itself
        part = {"state": "failed", "message": "the findings break the report contract: %s" % exc}
        report = build_stored({name: part}, generated=generated, collection_version=collection_version())
    success = report["hosts"][name]["state"] == "audited"
    if history_dir:
        # one record appended (pruned to history_keep), what changed since the last run into the report
        for warning in record_report(report, {name: boot_id}, history_dir,
                                     config.get("history_keep") or DEFAULT_HISTORY_KEEP,
                                     counters={name: counters}):
            warn(warning)
    paths = write_outputs(report, name, report_dir, textfile_dir, started, cpu_start)
    totals = report["totals"]
    if not success:
        raise SelfAuditError("%s (report written to %s, metrics to %s)"
                             % (report["hosts"][name]["message"], paths["json"], paths["prom"]))
    changes = report["hosts"][name].get("changes")
    since = ""
    if isinstance(changes, dict) and changes.get("summary"):
        since = "; history: %s" % changes["summary"]
    say("%s audited with profile %s: %d pass, %d fail, %d unknown, %d waived, %d not applicable%s; wrote %s and %s"
        % (name, report["profile"], totals["pass"], totals["fail"], totals["unknown"], totals["waived"],
           totals["not_applicable"], since, paths["json"], paths["prom"]))
    return 0


def main(argv=None):
    """Entry point: never a traceback, one line on stderr for every failure."""
    try:
        return run(sys.argv[1:] if argv is None else argv)
    except SelfAuditError as exc:
        say(str(exc), sys.stderr)
        return exc.status
    except KeyboardInterrupt:
        say("interrupted", sys.stderr)
        return 130
    except Exception as exc:  # pylint: disable=broad-except  # a bug must still read as one line in the journal
        say("internal error: %s: %s" % (type(exc).__name__, exc), sys.stderr)
        return 1
