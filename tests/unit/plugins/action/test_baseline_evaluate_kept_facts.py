"""baseline_evaluate's kept facts (keep_facts / facts_from): written to the run's local temporary directory, read
back once (through the controller's one bounded, no-follow reader) and removed; a file that cannot be read, a link,
or one that holds no mapping is a reason, never a traceback."""
import json
import os

from ansible import constants as C

from ansible_collections.gpuhost.baseline.plugins.action import baseline_evaluate


def oct_mode(path):
    return os.stat(path).st_mode & 0o777


def test_kept_facts_round_trip_and_the_file_is_removed(monkeypatch, tmp_path):
    monkeypatch.setattr(C, "DEFAULT_LOCAL_TMP", str(tmp_path))
    facts = {"schema_version": 1, "kernel": {"release": "6.8.12"}, "cpu": {"driver": "acpi-cpufreq"}}
    path = baseline_evaluate._keep_facts(facts)
    assert path.startswith(str(tmp_path)) and oct_mode(path) == 0o600
    assert baseline_evaluate._kept_facts(path) == (facts, None)
    assert list(tmp_path.iterdir()) == []


def test_a_missing_or_damaged_file_is_a_reason(tmp_path):
    facts, why = baseline_evaluate._kept_facts(str(tmp_path / "gone.json"))
    assert facts is None and "cannot be read" in why and "gone.json" in why
    damaged = tmp_path / "damaged.json"
    damaged.write_text('{"kernel": ')
    facts, why = baseline_evaluate._kept_facts(str(damaged))
    assert facts is None and "cannot be read" in why
    listed = tmp_path / "list.json"
    listed.write_text(json.dumps([1, 2]))
    wanted = "the facts kept from the first gather (%s) are no mapping" % listed
    assert baseline_evaluate._kept_facts(str(listed)) == (None, wanted)
    link = tmp_path / "link.json"
    link.symlink_to(listed)
    facts, why = baseline_evaluate._kept_facts(str(link))
    assert facts is None and "cannot be read" in why and "symbolic link" in why
