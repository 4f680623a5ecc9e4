# -*- coding: utf-8 -*-
"""The self-audit runner (plugins/plugin_utils/judge/self_audit.py) and its zip application
(roles/self_audit/files/make_bundle.py, bundle_main.py) over the demo snapshots.

What the self_audit role's timer runs on a host: report.json and the node_exporter textfile are
written through a temporary file and a rename; bad input (config, root, output directories,
missing libraries, a tampered bundle) gives exit status 1 or 2 and one line on stderr, never a
traceback.
"""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
import zipfile

import pytest

from helpers.snapshot_edit import remove_pcie_boot_mechanism, set_boot_id, set_max_read_request
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.judge import self_audit
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.report import expand_document
from helpers.prom import parse_families, parse_metrics

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
FILES = os.path.join(REPO, "roles", "self_audit", "files")
PROMTOOL = "/usr/bin/promtool"
GENERATED = "2025-06-01T12:00:00+00:00"


def load_make_bundle():
    spec = importlib.util.spec_from_file_location("make_bundle", os.path.join(FILES, "make_bundle.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def out(tmp_path):
    return {"report": str(tmp_path / "reports"), "textfile": str(tmp_path / "textfile"), "tmp": tmp_path}


def write_config(tmp_path, config, name="config.json"):
    path = tmp_path / name
    path.write_text(config if isinstance(config, str) else json.dumps(config))
    return str(path)


def run(argv, capsys):
    status = self_audit.main(argv)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err + captured.out
    return status, captured.out, captured.err


def args(out, root, config="none", *more):
    return ["--config", config, "--root", root, "--report-dir", out["report"], "--textfile-dir", out["textfile"],
            "--generated", GENERATED] + list(more)


def read(path):
    with open(path) as handle:
        return handle.read()


def test_incident_snapshot_writes_report_and_textfile(snapshot_trees, out, capsys):
    config = write_config(out["tmp"], {"host": "gpu-incident", "profile": "amd-epyc-nvidia",
                                       "report_dir": out["report"], "textfile_dir": out["textfile"]})
    status, stdout, err = run(["--config", config, "--root", snapshot_trees["incident"], "--generated", GENERATED], capsys)
    assert status == 0, err
    assert "gpu-incident audited with profile amd-epyc-nvidia" in stdout
    # stored as the controller stores it (rule fields once, docs/report.md); expanded for reading
    report = expand_document(json.loads(read(os.path.join(out["report"], "report.json"))))
    host = report["hosts"]["gpu-incident"]
    assert list(report["hosts"]) == ["gpu-incident"] and host["state"] == "audited"
    assert report["generated"] == GENERATED and report["profile"] == "amd-epyc-nvidia"
    assert host["summary"]["fail"] > 10  # the incident host drifts
    failing = [f for f in host["findings"] if f["status"] == "fail"]
    # findings carry their rule's text, as the controller's report does
    assert all(f["title"] and f["severity"] and f["rationale"] for f in failing)
    text = read(os.path.join(out["textfile"], "gpuhost_baseline.prom"))
    families = parse_families(text)
    assert families["gpuhost_baseline_host_up"]["samples"] == [({"host": "gpu-incident", "origin": "self_audit", "cluster": ""}, 1.0)]
    flagged = [s for s in families["gpuhost_baseline_finding_failing"]["samples"] if s[1] == 1]
    assert len(flagged) == len(failing)
    assert families["gpuhost_baseline_run_duration_seconds"]["samples"][0][1] > 0
    assert families["gpuhost_baseline_self_audit_cpu_seconds"]["samples"][0][1] > 0
    # nothing else in either directory: no temporary file left behind; the host's history beside the report
    # (and the manifest of the report set, report_dir.MANIFEST)
    assert sorted(os.listdir(out["report"])) == [".gpuhost-report.json", "history", "report.json"]
    assert os.listdir(os.path.join(out["report"], "history")) == ["gpu-incident.jsonl"]
    assert "first audit in the history" in host["changes"]["summary"]
    assert os.listdir(out["textfile"]) == ["gpuhost_baseline.prom"]


def test_the_config_s_cluster_labels_every_series_of_the_host(snapshot_trees, out, capsys):
    """gpuhost_cluster (the role writes it as ``cluster``): on every series with a host label, the run's own
    CPU time included, and in report.json."""
    config = write_config(out["tmp"], {"host": "gpu-healthy", "cluster": "east \"1\"",
                                       "report_dir": out["report"], "textfile_dir": out["textfile"]})
    status, dummy, err = run(["--config", config, "--root", snapshot_trees["healthy"], "--generated", GENERATED], capsys)
    assert status == 0, err
    samples = [lb for name, lb, value in parse_metrics(read(os.path.join(out["textfile"], "gpuhost_baseline.prom")))
               if "host" in lb]
    assert samples and all(lb["cluster"] == 'east "1"' for lb in samples), [lb for lb in samples if lb.get("cluster") != 'east "1"']
    assert "gpuhost_baseline_self_audit_cpu_seconds" in set(
        name for name, lb, value in parse_metrics(read(os.path.join(out["textfile"], "gpuhost_baseline.prom"))))
    report = json.loads(read(os.path.join(out["report"], "report.json")))
    assert report["hosts"]["gpu-healthy"]["cluster"] == 'east "1"'


def test_config_kernel_log_boots_reaches_the_gatherer(snapshot_trees, out, capsys):
    """kernel_log_boots 2 in the config: the previous boot is asked for; the incident snapshot was
    captured with one boot, so HEALTH-016 is unknown and says the boot list was not captured."""
    config = write_config(out["tmp"], {"host": "gpu-incident", "profile": "amd-epyc-nvidia", "kernel_log_boots": 2,
                                       "report_dir": out["report"], "textfile_dir": out["textfile"]})
    status, dummy, err = run(["--config", config, "--root", snapshot_trees["incident"], "--generated", GENERATED],
                             capsys)
    assert status == 0, err
    report = expand_document(json.loads(read(os.path.join(out["report"], "report.json"))))
    (finding,) = [f for f in report["hosts"]["gpu-incident"]["findings"] if f["id"] == "HEALTH-016"]
    assert finding["status"] == "unknown" and "journalctl-list-boots.txt not captured" in finding["message"]


GPU = "0000:43:00.0"
OTHER_BOOT = "0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9"


@pytest.fixture
def healthy(healthy_copy):
    return healthy_copy


def audit_again(out, root, capsys, *more, generated=GENERATED):
    """One run of the runner on ``root`` as host ``h``; report.json (expanded) and the textfile's families."""
    argv = ["--config", "none", "--root", root, "--report-dir", out["report"], "--textfile-dir", out["textfile"],
            "--generated", generated, "--host", "h"] + list(more)
    status, stdout, err = run(argv, capsys)
    assert status == 0, err
    report = expand_document(json.loads(read(os.path.join(out["report"], "report.json"))))
    return report, parse_families(read(os.path.join(out["textfile"], "gpuhost_baseline.prom"))), stdout


def test_history_on_the_host_lists_the_change_since_the_last_run(healthy, out, capsys):
    """Issue 12, item 3 on the host: every run appends one record to history/<host>.jsonl in the
    report directory; the report says what changed since the last run, same boot or across a
    reboot, and the textfile carries the time of the last change."""
    first, families, stdout = audit_again(out, healthy, capsys, generated="2025-06-01T12:00:00+00:00")
    assert "history: first audit in the history" in stdout
    set_max_read_request(healthy, GPU, 512)
    report, families, stdout = audit_again(out, healthy, capsys, generated="2025-06-01T13:00:00+00:00")
    changes = report["hosts"]["h"]["changes"]
    assert changes["new_fails"] == [{"rule": "PCI-001", "subject": GPU, "status_before": "pass", "status_after": "fail",
                                     "observed_before": 4096, "observed_after": 512}]
    # besides it only the error counter rules moved: unknown at the first audit, judged from the second (HEALTH-020..023)
    assert changes["counts"]["new_fails"] == 1 and changes["boot"] == "same" and changes["previous"]["time"] == first["generated"]
    assert changes["count"] == 1 + len(changes["status_changed"]) and changes["status_changed"]
    assert set(i["rule"] for i in changes["status_changed"]) <= {"HEALTH-020", "HEALTH-021", "HEALTH-022", "HEALTH-023"}
    assert "since the audit of 2025-06-01T12:00:00+00:00 (same boot): 1 new fail" in stdout
    assert families["gpuhost_baseline_last_change_timestamp_seconds"]["samples"] == [({"host": "h", "origin": "self_audit", "cluster": ""}, 1748782800.0)]

    set_boot_id(healthy, OTHER_BOOT)
    set_max_read_request(healthy, GPU, 4096)
    report, families, stdout = audit_again(out, healthy, capsys, generated="2025-06-01T14:00:00+00:00")
    changes = report["hosts"]["h"]["changes"]
    assert changes["boot"] == "reboot" and "across a reboot" in stdout
    assert [(i["rule"], i["subject"], i["status_after"]) for i in changes["resolved"]] == [("PCI-001", GPU, "pass")]
    lines = read(os.path.join(out["report"], "history", "h.jsonl")).splitlines()
    assert [json.loads(line)["boot_id"] for line in lines][-1] == OTHER_BOOT and len(lines) == 3


def test_pci008_on_the_host_fails_on_the_evidence_of_its_own_history(healthy, out, capsys):
    """PCI-008 judged by the self-audit with the host's history: 512 seen earlier in this boot, 4096
    now and no boot mechanism: the running value would be lost at reboot."""
    remove_pcie_boot_mechanism(healthy)
    report, dummy, dummy2 = audit_again(out, healthy, capsys)
    assert [f["status"] for f in report["hosts"]["h"]["findings"] if f["id"] == "PCI-008" and f["subject"] == GPU] \
        == ["pass"]
    set_max_read_request(healthy, GPU, 512)
    audit_again(out, healthy, capsys, generated="2025-06-01T13:00:00+00:00")
    set_max_read_request(healthy, GPU, 4096)
    report, dummy, dummy2 = audit_again(out, healthy, capsys, generated="2025-06-01T14:00:00+00:00")
    (boot,) = [f for f in report["hosts"]["h"]["findings"] if f["id"] == "PCI-008" and f["subject"] == GPU]
    assert boot["status"] == "fail", boot["message"]
    assert "MaxReadReq was 512 B at the audit of 2025-06-01T13:00:00+00:00 earlier in this boot" in boot["message"]


def test_history_is_pruned_to_history_keep_and_can_be_turned_off(healthy, out, capsys):
    config = write_config(out["tmp"], {"history_keep": 2, "host": "h", "report_dir": out["report"],
                                       "textfile_dir": out["textfile"]})
    for hour in (12, 13, 14):
        status, dummy, err = run(["--config", config, "--root", healthy,
                                  "--generated", "2025-06-01T%d:00:00+00:00" % hour], capsys)
        assert status == 0, err
    lines = read(os.path.join(out["report"], "history", "h.jsonl")).splitlines()
    assert [json.loads(line)["time"] for line in lines] == ["2025-06-01T13:00:00+00:00", "2025-06-01T14:00:00+00:00"]

    shutil.rmtree(out["report"])
    elsewhere = str(out["tmp"] / "elsewhere")
    for option in (["--history-dir", "none"], []):
        config = write_config(out["tmp"], {"history_dir": elsewhere if option else "", "host": "h"})
        status, stdout, err = run(args(out, healthy, config) + option, capsys)
        assert status == 0, err
        assert sorted(os.listdir(out["report"])) == [".gpuhost-report.json", "report.json"] and "; history:" not in stdout
        assert "changes" not in json.loads(read(os.path.join(out["report"], "report.json")))["hosts"]["h"]
    assert not os.path.exists(elsewhere)


def test_a_damaged_history_is_a_warning_and_is_repaired(healthy, out, capsys):
    history = os.path.join(out["report"], "history")
    os.makedirs(history)
    with open(os.path.join(history, "h.jsonl"), "w") as handle:
        handle.write('{"garbage": \n\x00\x01 not json at all\n')
    status, stdout, err = run(args(out, healthy, "none", "--host", "h"), capsys)
    assert status == 0, err
    assert "gpuhost-self-audit: warning: history file %s line 1" % os.path.join(history, "h.jsonl") in err
    lines = read(os.path.join(history, "h.jsonl")).splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["host"] == "h"


def test_promtool_accepts_the_textfile(snapshot_trees, out, capsys):
    status, dummy, err = run(args(out, snapshot_trees["incident"], "none", "--host", "gpu-incident"), capsys)
    assert status == 0, err
    with open(os.path.join(out["textfile"], "gpuhost_baseline.prom"), "rb") as handle:
        done = subprocess.run([PROMTOOL, "check", "metrics"], stdin=handle, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, check=False)
    assert done.returncode == 0, done.stdout.decode()


def test_files_are_replaced_by_rename_never_rewritten(snapshot_trees, out, capsys, monkeypatch):
    """Each file appears by a rename of a finished temporary file in the same directory, whose name
    the textfile collector ignores; until then the old file is there, whole."""
    os.makedirs(out["textfile"])
    os.makedirs(out["report"])
    prom = os.path.join(out["textfile"], "gpuhost_baseline.prom")
    old = "# HELP old_metric an earlier run\n# TYPE old_metric gauge\nold_metric 1\n"
    with open(prom, "w") as handle:
        handle.write(old)
    renames = []
    real_replace = os.replace

    def replace(src, dst):
        if dst == prom:
            assert read(prom) == old  # the reader still sees the previous file, complete
            assert os.path.dirname(src) == out["textfile"]
            name = os.path.basename(src)
            assert name.startswith(".") and not name.endswith(".prom"), name
            assert parse_families(read(src))["gpuhost_baseline_host_up"]  # the new file is complete before the rename
        renames.append((src, dst))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    status, dummy, err = run(args(out, snapshot_trees["healthy"], "none", "--host", "h"), capsys)
    assert status == 0, err
    # the report set's manifest before (complete: false) and after report.json (report_dir.write_reports)
    assert [os.path.basename(d) for s, d in renames] == [".gpuhost-report.json", "report.json", ".gpuhost-report.json",
                                                         "gpuhost_baseline.prom"]
    assert "old_metric" not in read(prom)
    assert sorted(os.listdir(out["textfile"])) == ["gpuhost_baseline.prom"]


def test_hostile_snapshot_is_audited_without_a_traceback(snapshot_trees, out, capsys):
    status, stdout, err = run(args(out, snapshot_trees["hostile"], "none", "--host", "hostile"), capsys)
    assert status == 0, err
    families = parse_families(read(os.path.join(out["textfile"], "gpuhost_baseline.prom")))
    assert families["gpuhost_baseline_facts_errors"]["samples"][0][1] > 0


@pytest.mark.parametrize("content, message", [
    ("{not json", "is not valid JSON"),
    ("", "is not valid JSON"),
    ("[1, 2]", "must hold a JSON object, not list"),
    ('{"profile": "auto", "colour": "red"}', "unknown key 'colour'"),
    ('{"params": [1]}', "params must be dict, not list"),
    ('{"command_timeout": true}', "command_timeout must be a number, not bool"),
    ('{"gather": ["cpu", "floppy"]}', "gather names unknown subsystem(s) floppy"),
    ('{"history_keep": 0}', "history_keep must be at least 1, not 0"),
    ('{"history_dir": 7}', "history_dir must be str, not int"),
    ('{"kernel_log_boots": 3}', "kernel_log_boots must be from 1 to 2, not 3"),
    ('{"kernel_log_boots": "2"}', "kernel_log_boots must be int, not str"),
    (b"\xff\xfe{}", "is not UTF-8 text"),
])
def test_garbage_config_exits_2_with_a_message(snapshot_trees, out, capsys, content, message):
    path = out["tmp"] / "config.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    status, dummy, err = run(args(out, snapshot_trees["healthy"], str(path)), capsys)
    assert status == 2
    assert err.startswith("gpuhost-self-audit: config file %s" % path) and message in err, err
    assert len(err.strip().splitlines()) == 1
    assert not os.path.exists(out["report"]) and not os.path.exists(out["textfile"])


def test_missing_config_and_missing_root_exit_2(out, capsys):
    status, dummy, err = run(args(out, "/", str(out["tmp"] / "nope.json")), capsys)
    assert status == 2 and "cannot read the config file" in err and "nope.json" in err
    status, dummy, err = run(args(out, str(out["tmp"] / "no-such-snapshot")), capsys)
    assert status == 2 and "no-such-snapshot is not a directory" in err


def test_unknown_profile_writes_a_failed_report_and_exits_1(snapshot_trees, out, capsys):
    config = write_config(out["tmp"], {"profile": "no-such-profile", "host": "gpu01"})
    status, dummy, err = run(args(out, snapshot_trees["healthy"], config), capsys)
    assert status == 1
    assert err.startswith("gpuhost-self-audit: baseline evaluation of gpu01:") and "no-such-profile" in err, err
    report = json.loads(read(os.path.join(out["report"], "report.json")))
    assert report["hosts"]["gpu01"]["state"] == "failed" and "no-such-profile" in report["hosts"]["gpu01"]["message"]
    families = parse_families(read(os.path.join(out["textfile"], "gpuhost_baseline.prom")))
    assert families["gpuhost_baseline_host_up"]["samples"] == [({"host": "gpu01", "origin": "self_audit", "cluster": ""}, 0.0)]


def test_missing_libraries_name_the_debian_packages(snapshot_trees, out, capsys, monkeypatch):
    monkeypatch.setattr(self_audit, "LIBRARIES", self_audit.LIBRARIES + (("gpuhost_no_such_lib", "python3-nosuch"),))
    status, dummy, err = run(args(out, snapshot_trees["healthy"], "none", "--host", "gpu01"), capsys)
    assert status == 1 and "gpuhost_no_such_lib" in err and "apt-get install python3-nosuch" in err, err
    assert json.loads(read(os.path.join(out["report"], "report.json")))["hosts"]["gpu01"]["state"] == "failed"


def test_unwritable_textfile_directory_exits_1_naming_it(snapshot_trees, out, capsys):
    blocker = out["tmp"] / "textfile"
    blocker.write_text("a file where the directory should be\n")
    status, dummy, err = run(args(out, snapshot_trees["healthy"], "none"), capsys)
    assert status == 1 and "cannot write %s" % os.path.join(str(blocker), "gpuhost_baseline.prom") in err, err
    assert blocker.read_text() == "a file where the directory should be\n"


def test_an_internal_error_is_one_line(snapshot_trees, out, capsys, monkeypatch):
    def broken(*unused_args, **unused_kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(self_audit, "gather_facts", broken)
    status, dummy, err = run(args(out, snapshot_trees["healthy"], "none"), capsys)
    assert status == 1 and err == "gpuhost-self-audit: internal error: RuntimeError: boom\n"


def test_command_runner_reports_timeouts_and_missing_binaries():
    # the tool's bound from command_timeouts (gpuhost_command_timeouts), by the basename of argv[0]
    runner = self_audit.command_runner({os.path.basename(sys.executable): 0.5})
    began = time.monotonic()
    result = runner([sys.executable, "-c", "import time; time.sleep(5)"])
    assert time.monotonic() - began < 4
    assert result.bound == "timeout" and "did not answer within 0.5 s" in result.reason
    rc, dummy, err = runner(["/nonexistent/gpuhost-tool"])
    assert rc == 127 and err
    # a runner with room to start Python on a loaded machine (0.5 s is not always enough)
    rc, out, dummy = self_audit.command_runner()([sys.executable, "-c", "import os; print(os.environ['LC_ALL'])"])
    assert rc == 0 and out.strip() == "C"


# -- the zip application ---------------------------------------------------------------------

def test_bundle_is_reproducible_and_holds_what_a_host_needs(tmp_path):
    make_bundle = load_make_bundle()
    first, second = str(tmp_path / "one"), str(tmp_path / "two")
    make_bundle.build(REPO, first)
    make_bundle.build(REPO, second)
    assert read_bytes(first) == read_bytes(second)
    assert read_bytes(first).startswith(b"#!/usr/bin/python3\n") and os.stat(first).st_mode & 0o777 == 0o755
    with zipfile.ZipFile(first) as archive:
        names = archive.namelist()
    prefix = "ansible_collections/gpuhost/baseline/"
    for rel in ("plugins/plugin_utils/judge/self_audit.py", "plugins/plugin_utils/judge/judge.py",
                "plugins/module_utils/facts/gather.py", "catalogue.json", "MANIFEST.json"):
        assert prefix + rel in names
    # the host reads the compiled catalogue: no YAML travels, and of the schemas (checked here) only
    # the profile's, read as data for the parameters' bounds
    assert not [n for n in names if n.endswith((".yml", ".yaml"))]
    assert [n for n in names if n.startswith(prefix + "schemas/")] == [prefix + "schemas/profile.schema.json"]
    # its own jmespath, with the licence it is distributed under
    assert "jmespath/parser.py" in names and "jmespath/LICENSE.txt" in names
    assert "__main__.py" in names and names == sorted(names)
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_bundle_of_something_else_fails_with_a_message(tmp_path):
    make_bundle = load_make_bundle()
    assert make_bundle.main([str(tmp_path), str(tmp_path / "out")]) == 1
    assert not os.path.exists(str(tmp_path / "out"))


def read_bytes(path):
    with open(path, "rb") as handle:
        return handle.read()


def run_bundle(bundle, cache, argv):
    env = dict(os.environ, GPUHOST_SELF_AUDIT_CACHE=cache, XDG_CACHE_HOME=cache)
    return subprocess.run([sys.executable, bundle] + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=env, check=False, universal_newlines=True)


def test_bundle_runs_unpacked_once_per_content(snapshot_trees, tmp_path):
    make_bundle = load_make_bundle()
    bundle, cache = str(tmp_path / "gpuhost-self-audit"), str(tmp_path / "cache")
    make_bundle.build(REPO, bundle)
    argv = ["--config", "none", "--root", snapshot_trees["incident"], "--host", "gpu-incident",
            "--report-dir", str(tmp_path / "r"), "--textfile-dir", str(tmp_path / "t")]
    done = run_bundle(bundle, cache, argv)
    assert done.returncode == 0, done.stderr
    assert "gpu-incident audited" in done.stdout
    unpacked = [n for n in os.listdir(cache) if n.startswith("bundle-")]
    assert len(unpacked) == 1
    # the code ran from the unpacked tree, not from the checkout or the zip
    assert os.path.isfile(os.path.join(cache, unpacked[0], "ansible_collections/gpuhost/baseline/catalogue.json"))
    assert parse_families(read(str(tmp_path / "t" / "gpuhost_baseline.prom")))["gpuhost_baseline_host_up"]
    # another content (a new collection version) replaces the unpacked copy
    with zipfile.ZipFile(bundle, "a") as archive:
        archive.writestr("ansible_collections/gpuhost/baseline/zz-note.txt", "changed\n")
    done = run_bundle(bundle, cache, argv)
    assert done.returncode == 0, done.stderr
    now = [n for n in os.listdir(cache) if n.startswith("bundle-") or n.startswith(".bundle-")]
    assert len(now) == 1 and now != unpacked


def test_bundle_refuses_a_member_outside_its_tree(tmp_path):
    bundle, cache = str(tmp_path / "evil"), str(tmp_path / "cache")
    with zipfile.ZipFile(bundle, "w") as archive:
        archive.write(os.path.join(FILES, "bundle_main.py"), "__main__.py")
        archive.writestr("../../escaped.txt", "no\n")
    done = run_bundle(bundle, cache, ["--config", "none"])
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("gpuhost-self-audit: cannot unpack") and "unsafe member name" in done.stderr
    assert not os.path.exists(str(tmp_path / "escaped.txt"))
    assert not os.listdir(cache)


# -- the bundle on a bare host: Python 3.8+, standard library only ---------------------------------

def bare_run(python, bundle, cache, root, host, tmp_path, *more):
    """The bundle run by ``python`` in isolated mode without site-packages (``-I -S``): only the
    standard library and the bundle itself can be imported, as on a host with nothing installed."""
    env = {"PATH": os.environ.get("PATH", os.defpath), "GPUHOST_SELF_AUDIT_CACHE": cache, "LC_ALL": "C",
           "PYENV_VERSION": os.environ.get("PYENV_VERSION", "")}
    argv = [python, "-I", "-S", bundle, "--config", "none", "--root", root, "--host", host,
            "--report-dir", str(tmp_path / host / "r"), "--textfile-dir", str(tmp_path / host / "t"),
            "--generated", GENERATED] + list(more)
    return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, check=False,
                          universal_newlines=True)


def test_bundle_needs_nothing_outside_the_standard_library(snapshot_trees, tmp_path):
    bundle, cache = str(tmp_path / "gpuhost-self-audit"), str(tmp_path / "cache")
    load_make_bundle().build(REPO, bundle)
    for name, root in sorted(snapshot_trees.items()):
        done = bare_run(sys.executable, bundle, cache, root, "demo-" + name, tmp_path)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (name, done.stderr)
        assert "demo-%s audited with profile" % name in done.stdout
        report = json.loads(read(str(tmp_path / ("demo-" + name) / "r" / "report.json")))
        assert report["hosts"]["demo-" + name]["state"] == "audited"


def interpreters():
    """Python 3.8 to 3.10 interpreters on this machine (Debian's, or pyenv's), oldest first."""
    found = []
    pyenv = os.path.expanduser("~/.pyenv/versions")
    for minor in (8, 9, 10):
        candidates = ["/usr/bin/python3.%d" % minor, "/usr/local/bin/python3.%d" % minor]
        if os.path.isdir(pyenv):
            candidates += [os.path.join(pyenv, v, "bin", "python3.%d" % minor) for v in sorted(os.listdir(pyenv))]
        for path in candidates:
            if os.access(path, os.X_OK):
                found.append(path)
                break
    return found


@pytest.mark.parametrize("minor", [8, 9])
def test_bundle_runs_on_older_pythons_found_here(snapshot_trees, tmp_path, minor):
    """Run for real where this machine has the interpreter (the Debian 11 guest of the VM tests
    runs 3.9 in CI in any case; test_bundle_code_is_python_3_8_syntax checks 3.8 statically)."""
    found = [p for p in interpreters() if p.endswith("python3.%d" % minor)]
    if not found:
        pytest.skip("no Python 3.%d on this machine" % minor)
    bundle, cache = str(tmp_path / "gpuhost-self-audit"), str(tmp_path / "cache")
    load_make_bundle().build(REPO, bundle)
    for name in ("incident", "hostile"):
        done = bare_run(found[0], bundle, cache, snapshot_trees[name], "demo-" + name, tmp_path)
        assert done.returncode == 0 and "Traceback" not in done.stderr, (found[0], name, done.stderr)


def bundle_sources(bundle):
    with zipfile.ZipFile(bundle) as archive:
        return dict((n, archive.read(n).decode("utf-8")) for n in archive.namelist() if n.endswith(".py"))


def test_bundle_code_is_python_3_8_syntax(tmp_path):
    """Every Python file of the bundle parses as Python 3.8 (the grammar of 3.8, not of the
    interpreter running the test) and vermin finds nothing that needs a newer Python."""
    import ast  # pylint: disable=import-outside-toplevel

    bundle = str(tmp_path / "gpuhost-self-audit")
    load_make_bundle().build(REPO, bundle)
    sources = bundle_sources(bundle)
    assert len(sources) > 30
    for name, text in sorted(sources.items()):
        ast.parse(text, filename=name, feature_version=(3, 8))
    tree = tmp_path / "tree"
    for name, text in sources.items():
        path = tree / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    vermin = os.path.join(os.path.dirname(sys.executable), "vermin")
    done = subprocess.run([vermin, "--target=3.8-", "--violations", "--no-tips", "--no-parse-comments",
                           "--eval-annotations", "-q", str(tree)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False, universal_newlines=True)
    assert done.returncode == 0, done.stdout


def test_vermin_finds_a_planted_3_9_feature(tmp_path):
    """The 3.8 check above can fail: a file using str.removeprefix (3.9) is a violation."""
    (tmp_path / "new.py").write_text("x = 'ab'.removeprefix('a')\n")
    vermin = os.path.join(os.path.dirname(sys.executable), "vermin")
    done = subprocess.run([vermin, "--target=3.8-", "--violations", "--no-tips", "-q", str(tmp_path)],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False, universal_newlines=True)
    assert done.returncode != 0 and "removeprefix" in done.stdout, done.stdout


def test_bundle_with_a_site_catalogue_judges_with_it(snapshot_trees, tmp_path):
    from helpers.site_catalogue import make_site  # pylint: disable=import-outside-toplevel

    site = make_site(tmp_path / "site")
    bundle, cache = str(tmp_path / "gpuhost-self-audit"), str(tmp_path / "cache")
    load_make_bundle().build(REPO, bundle, [str(site)])
    config = write_config(tmp_path, {"profile": "site-inference"})
    done = bare_run(sys.executable, bundle, cache, snapshot_trees["incident"], "gpu01", tmp_path)
    assert done.returncode == 0, done.stderr
    env = {"PATH": os.environ.get("PATH", os.defpath), "GPUHOST_SELF_AUDIT_CACHE": cache}
    done = subprocess.run([sys.executable, "-I", "-S", bundle, "--config", config, "--root", snapshot_trees["incident"],
                           "--host", "gpu01", "--report-dir", str(tmp_path / "site-r"), "--textfile-dir",
                           str(tmp_path / "site-t")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                          check=False, universal_newlines=True)
    assert done.returncode == 0 and "with profile site-inference" in done.stdout, done.stderr
    report = expand_document(json.loads(read(str(tmp_path / "site-r" / "report.json"))))
    (site_rule,) = [f for f in report["hosts"]["gpu01"]["findings"] if f["id"] == "KERNEL-901"]
    assert site_rule["status"] == "fail" and site_rule["title"] == "running kernel at least 6.10 (site minimum)"


def test_bundle_checks_parameter_bounds_on_the_host(snapshot_trees, tmp_path):
    bundle, cache = str(tmp_path / "gpuhost-self-audit"), str(tmp_path / "cache")
    load_make_bundle().build(REPO, bundle)
    config = write_config(tmp_path, {"params": {"swappiness_max": 500}})
    env = {"PATH": os.environ.get("PATH", os.defpath), "GPUHOST_SELF_AUDIT_CACHE": cache}
    done = subprocess.run([sys.executable, "-I", "-S", bundle, "--config", config, "--root", snapshot_trees["healthy"],
                           "--host", "gpu01", "--report-dir", str(tmp_path / "r"), "--textfile-dir", str(tmp_path / "t")],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, check=False, universal_newlines=True)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "parameter swappiness_max must be between 0 and 200, got 500" in done.stderr, done.stderr


def test_bundle_build_refuses_a_malformed_site_catalogue(tmp_path):
    site = tmp_path / "site"
    (site / "rules").mkdir(parents=True)
    (site / "rules" / "broken.yml").write_text("- id: KERNEL-902\n  title: no area\n")
    make_bundle = load_make_bundle()
    out = tmp_path / "out"
    assert make_bundle.main([REPO, str(out), "--catalogue-dir", str(site)]) == 1
    assert not out.exists()


@pytest.mark.filterwarnings("ignore:Duplicate name")
def test_a_damaged_compiled_catalogue_is_a_failed_report_not_a_traceback(snapshot_trees, tmp_path):
    bundle, cache = str(tmp_path / "gpuhost-self-audit"), str(tmp_path / "cache")
    load_make_bundle().build(REPO, bundle)
    with zipfile.ZipFile(bundle, "a") as archive:  # a later member of the same name wins on extract
        archive.writestr("ansible_collections/gpuhost/baseline/catalogue.json", '{"format": "something else"}')
    done = bare_run(sys.executable, bundle, cache, snapshot_trees["healthy"], "gpu01", tmp_path)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "not a compiled gpuhost.baseline catalogue" in done.stderr, done.stderr


def test_the_role_preflight_and_the_bundle_name_the_same_oldest_python():
    import yaml  # pylint: disable=import-outside-toplevel

    spec = importlib.util.spec_from_file_location("bundle_main", os.path.join(FILES, "bundle_main.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with open(os.path.join(REPO, "roles", "self_audit", "vars", "main.yml")) as handle:
        role = yaml.safe_load(handle)["gpuhost_self_audit_min_python"]
    assert tuple(int(part) for part in str(role).split(".")) == module.MIN_PYTHON == (3, 8)


def test_an_older_python_gets_one_line(tmp_path):
    bundle = str(tmp_path / "gpuhost-self-audit")
    load_make_bundle().build(REPO, bundle)
    with zipfile.ZipFile(bundle) as archive:
        main = archive.read("__main__.py").decode("utf-8")
    # run __main__ as an older interpreter would see itself
    code = "import sys; sys.version_info = (3, 7, 9, 'final', 0); sys.argv = [%r]; exec(compile(%r, '__main__', 'exec'))" % (
        bundle, main)
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          check=False, universal_newlines=True)
    assert done.returncode == 2 and done.stderr.startswith("gpuhost-self-audit: Python 3.8+ is needed"), done.stderr
    assert "Traceback" not in done.stderr
