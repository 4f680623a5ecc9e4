"""One leg of the ansible-core matrix: the collection's playbooks under one ansible-core.

Usage: python tests/matrix/check_version.py --bin VENV/bin --label 2.16 [--reference build/matrix/2.19]

Runs, with the ansible-core of ``--bin`` and the checkout as the collection (build/collections):
  1. ``ansible-playbook --version`` names the ansible-core the leg is for;
  2. the demo (``gpuhost.baseline.demo``): rc 0 and its reports;
  3. ``audit.yml --check`` of the four demo snapshots: every report file byte for byte as
     tests/fixtures/golden/ (after the generation time is normalised);
  4. ``remediate.yml --check --diff`` of the same hosts: the same exit code, diffs and report as
     the reference leg, and not one byte of the snapshots changed;
  5. ``learn.yml`` of the healthy snapshot: the same site profile as the reference leg, and a
     second run that changes nothing;
  6. ``ansible-doc`` of every module: rendered, no warning.
Outputs go to build/matrix/<label>/ (the reference leg's are what the others are compared with).
Prints one line per step, with its time; exits 1 when a step failed, naming each.

Standard library and the ansible-core venv only: it runs under Python 3.11 on the controller and
under Debian 13's Python 3.13 in the chroot of ansible-core 2.20 and later (tools/matrix.sh).
"""
import argparse
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests"))

from helpers.golden import FILES, first_difference, read_normalised, with_golden_cluster  # noqa: E402

SNAPSHOTS = os.path.join(REPO, "build", "snapshots")
GOLDEN = os.path.join(REPO, "tests", "fixtures", "golden")
DEMO_HOSTS = ("incident", "healthy", "intel", "hostile")
STEP_TIMEOUT = 900


class StepFailed(Exception):
    pass


def inventory(path, names):
    """An inventory of demo snapshot hosts (JSON is YAML), audited over the local connection."""
    hosts = dict(("demo-%s" % name, {"gpuhost_root": os.path.join(SNAPSHOTS, name)}) for name in names)
    document = with_golden_cluster({"all": {"children": {"snapshots": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"},
        "hosts": hosts}}}})
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(document, handle, indent=1)
    return path


class Leg:
    def __init__(self, bindir, label, reference):
        self.bindir = os.path.abspath(bindir)
        self.label = label
        self.reference = reference
        self.out = os.path.join(REPO, "build", "matrix", label)
        self.env = dict(os.environ)
        self.env.update({
            "ANSIBLE_COLLECTIONS_PATH": os.path.join(REPO, "build", "collections"),
            "ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg"),
            "ANSIBLE_NOCOLOR": "1",
            "PATH": self.bindir + os.pathsep + os.environ.get("PATH", ""),
            # the leg's own catalogue cache, not the user's
            "XDG_CACHE_HOME": os.path.join(self.out, "cache"),
        })

    def run(self, name, argv, cwd=None):
        """Run an ansible command of the leg; its output is kept in <out>/<name>.log."""
        argv = [os.path.join(self.bindir, argv[0])] + list(argv[1:])
        log = os.path.join(self.out, name + ".log")
        with open(log, "w", encoding="utf-8") as handle:
            try:
                done = subprocess.run(argv, cwd=cwd or self.out, env=self.env, stdout=handle,
                                      stderr=subprocess.STDOUT, timeout=STEP_TIMEOUT, check=False)
            except subprocess.TimeoutExpired:
                raise StepFailed("%s did not end within %d s (log: %s)" % (" ".join(argv[:2]), STEP_TIMEOUT, log))
        with open(log, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
        for marker in ("Traceback (most recent call last)", "DeprecationWarning", "[DEPRECATION WARNING]"):
            if marker in text:
                raise StepFailed("%s printed %r (log: %s)" % (name, marker, log))
        return done.returncode, text

    def expect(self, condition, message):
        if not condition:
            raise StepFailed(message)

    # -- the steps ---------------------------------------------------------------------------

    def step_version(self):
        rc, text = self.run("version", ["ansible-playbook", "--version"])
        first = text.split("\n", 1)[0]
        self.expect(rc == 0 and ("[core %s." % self.label) in first,
                    "ansible-playbook --version says %r, not ansible-core %s" % (first, self.label))
        return first

    def step_demo(self):
        rc, text = self.run("demo", ["ansible-playbook", "gpuhost.baseline.demo", "-e", "demo_dir=demo"])
        self.expect(rc == 0, "the demo exited %d (log: %s/demo.log)" % (rc, self.out))
        for name in FILES:
            self.expect(os.path.isfile(os.path.join(self.out, "demo", "reports", name)), "the demo wrote no %s" % name)
        self.compare_with_reference("demo/reports/report.json")
        return "rc 0, %d report files" % len(FILES)

    def step_audit_golden(self):
        reports = os.path.join(self.out, "audit")
        hosts = inventory(os.path.join(self.out, "demo.json"), DEMO_HOSTS)
        rc, _text = self.run("audit", ["ansible-playbook", "-i", hosts, os.path.join(REPO, "playbooks", "audit.yml"),
                                       "--check", "-e", "gpuhost_report_dir=%s" % reports])
        self.expect(rc == 0, "audit.yml --check exited %d (log: %s/audit.log)" % (rc, self.out))
        for name in FILES:
            got = read_normalised(os.path.join(reports, name))
            want = read_normalised(os.path.join(GOLDEN, name))
            difference = first_difference(got, want)
            self.expect(difference is None, "%s differs from tests/fixtures/golden/%s: %s" % (name, name, difference))
        return "%d report files as golden" % len(FILES)

    def step_remediate(self):
        before = tree_digest(SNAPSHOTS)
        reports = os.path.join(self.out, "remediate")
        rc, text = self.run("remediate", ["ansible-playbook", "-i", os.path.join(self.out, "demo.json"),
                                          os.path.join(REPO, "playbooks", "remediate.yml"), "--check", "--diff",
                                          "-e", "gpuhost_report_dir=%s" % reports])
        self.expect(tree_digest(SNAPSHOTS) == before, "remediate.yml --check changed the demo snapshots")
        self.expect(os.path.isfile(os.path.join(reports, "report.json")), "remediate.yml --check wrote no report")
        diffs = text.count("\n--- before")
        summary = {"rc": rc, "diffs": diffs}
        self.keep("remediate.summary.json", summary)
        self.compare_with_reference("remediate.summary.json")
        self.compare_with_reference("remediate/report.json")
        return "rc %d, %d diffs, report as the reference" % (rc, diffs)

    def step_learn(self):
        site = os.path.join(self.out, "learn")
        argv = ["ansible-playbook", "-i", inventory(os.path.join(self.out, "healthy.json"), ("healthy",)),
                os.path.join(REPO, "playbooks", "learn.yml"), "-e", "gpuhost_learn_dir=%s" % site]
        rc, _text = self.run("learn", argv)
        self.expect(rc == 0, "learn.yml exited %d (log: %s/learn.log)" % (rc, self.out))
        profiles = sorted(glob.glob(os.path.join(site, "profiles", "*.yml")))
        self.expect(len(profiles) == 1, "learn.yml wrote %d profiles, not 1" % len(profiles))
        self.compare_with_reference(os.path.relpath(profiles[0], self.out))
        rc, text = self.run("learn-again", argv)
        self.expect(rc == 0 and "changed=0" in text, "learning the same host again changed something or failed")
        return "rc 0, profile as the reference, again unchanged"

    def step_ansible_doc(self):
        paths = glob.glob(os.path.join(REPO, "plugins", "modules", "*.py"))
        modules = sorted(os.path.basename(path)[:-3] for path in paths)
        for module in modules:
            rc, text = self.run("doc-%s" % module, ["ansible-doc", "-t", "module", "gpuhost.baseline.%s" % module])
            self.expect(rc == 0 and "gpuhost.baseline.%s" % module in text and "[WARNING]" not in text
                        and "ERROR" not in text, "ansible-doc gpuhost.baseline.%s: rc %d or a warning (log: %s)"
                        % (module, rc, os.path.join(self.out, "doc-%s.log" % module)))
        return "%d modules" % len(modules)

    # -- comparing with the reference leg ------------------------------------------------------

    def keep(self, relpath, data):
        with open(os.path.join(self.out, relpath), "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1, sort_keys=True)

    def compare_with_reference(self, relpath):
        if not self.reference:
            return
        want_path = os.path.join(self.reference, relpath)
        self.expect(os.path.isfile(want_path), "the reference leg has no %s: run it first" % want_path)
        got = read_normalised(os.path.join(self.out, relpath))
        want = read_normalised(want_path)
        difference = first_difference(got, want)
        self.expect(difference is None,
                    "%s differs from the reference leg's (%s): %s" % (relpath, want_path, difference))


def tree_digest(root):
    digest = hashlib.sha256()
    for top, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(top, name)
            digest.update(os.path.relpath(path, root).encode("utf-8", "surrogateescape") + b"\0")
            if not os.path.islink(path):
                with open(path, "rb") as handle:
                    digest.update(hashlib.sha256(handle.read()).digest())
    return digest.hexdigest()


STEPS = ("version", "demo", "audit_golden", "remediate", "learn", "ansible_doc")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--bin", required=True, help="the bin directory of the ansible-core venv")
    parser.add_argument("--label", required=True, help="the ansible-core version (major.minor)")
    parser.add_argument("--reference", help="the reference leg's output directory (build/matrix/<label>)")
    parser.add_argument("--steps", default=",".join(STEPS), help="comma-separated subset of %s" % ", ".join(STEPS))
    args = parser.parse_args(argv)
    if not os.path.isdir(SNAPSHOTS):
        print("check_version: ERROR: %s missing: make fixtures builds it" % SNAPSHOTS, file=sys.stderr)
        return 2
    leg = Leg(args.bin, args.label, args.reference and os.path.abspath(args.reference))
    shutil.rmtree(leg.out, ignore_errors=True)
    os.makedirs(leg.out)
    failed = []
    for step in args.steps.split(","):
        start = time.time()
        try:
            said = getattr(leg, "step_" + step)()
            status = "ok"
        except StepFailed as exc:
            said, status = str(exc), "FAILED"
            failed.append(step)
        print("matrix %-5s %-13s %5.0fs  %-6s %s" % (args.label, step, time.time() - start, status, said), flush=True)
    shutil.rmtree(os.path.join(leg.out, "cache"), ignore_errors=True)
    if failed:
        print("matrix %s: FAILED: %s" % (args.label, ", ".join(failed)), flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
