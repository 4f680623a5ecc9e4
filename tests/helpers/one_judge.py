"""The self-audit bundle run on the hosts an audit playbook judged, for the one-judge tests
(issue 19): the same snapshots, the same site catalogue, the same profile must give the same
findings on the host as ``audit.yml`` gives on the controller.

The bundle is built by roles/self_audit/files/make_bundle.py (as the role builds it) and run
with ``python3 -I -S``: only the standard library and the bundle itself can be imported."""
import importlib.util
import json
import os
import subprocess
import sys

from helpers.report_file import load_report
from helpers.runner import REPO

MAKE_BUNDLE = os.path.join(REPO, "roles", "self_audit", "files", "make_bundle.py")
#: keys of a host's part compared besides the findings
HOST_KEYS = ("state", "profile")


def build_bundle(output, site_dirs=()):
    spec = importlib.util.spec_from_file_location("make_bundle", MAKE_BUNDLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.build(REPO, str(output), [str(d) for d in site_dirs])
    return str(output)


def self_audit_hosts(tmp, roots, config=None, site_dirs=()):
    """``{host: host part of its report.json, read as the tests read the audit's}`` of one
    self-audit run per ``roots`` entry (``{inventory name: snapshot root}``)."""
    bundle = build_bundle(os.path.join(str(tmp), "gpuhost-self-audit"), site_dirs)
    hosts = {}
    for host, root in sorted(roots.items()):
        work = os.path.join(str(tmp), "self-audit-" + host)
        os.makedirs(work)
        path = os.path.join(work, "config.json")
        with open(path, "w") as handle:
            json.dump(dict(config or {}, host=host), handle)
        env = {"PATH": os.environ.get("PATH", os.defpath), "GPUHOST_SELF_AUDIT_CACHE": os.path.join(str(tmp), "cache"),
               "LC_ALL": "C"}
        done = subprocess.run([sys.executable, "-I", "-S", bundle, "--config", path, "--root", root,
                               "--report-dir", os.path.join(work, "r"), "--textfile-dir", os.path.join(work, "t"),
                               "--history-dir", "none"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, check=False,
                              universal_newlines=True)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (host, done.stdout, done.stderr)
        hosts[host] = load_report(os.path.join(work, "r"))["hosts"][host]
    return hosts


def differences(audit_hosts, self_hosts):
    """Human-readable differences between the audit's and the self-audit's view of each host
    (an empty list when they judged alike): host state and profile, then finding by finding."""
    out = []
    for host, mine in sorted(self_hosts.items()):
        theirs = audit_hosts[host]
        for key in HOST_KEYS:
            if theirs.get(key) != mine.get(key):
                out.append("%s: %s %r (audit) != %r (self-audit)" % (host, key, theirs.get(key), mine.get(key)))
        audit_findings, self_findings = theirs.get("findings") or [], mine.get("findings") or []
        if len(audit_findings) != len(self_findings):
            out.append("%s: %d findings (audit) != %d (self-audit)" % (host, len(audit_findings), len(self_findings)))
        for a, b in zip(audit_findings, self_findings):
            if a != b:
                keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
                out.append("%s %s %s: %s" % (host, a.get("id"), a.get("subject"),
                                             ", ".join("%s %r != %r" % (k, a.get(k), b.get(k)) for k in keys)))
    return out
