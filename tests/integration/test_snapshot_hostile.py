"""playbooks/snapshot.yml refuses a hostile tarball from a host, naming the member (issue 10 item 3).

The import step of the playbook (``--tags import``) is run on a tarball placed where the fetch
puts it, as a compromised host would deliver it: links leading out of the snapshot. Nothing is
unpacked and nothing outside the snapshot directory is touched.
"""
import io
import json
import os
import shutil
import tarfile

from helpers.runner import run_playbook, stdout_of, task_events

INVENTORY = {"all": {"hosts": {"localhost": {"ansible_connection": "local", "gpuhost_become": False,
                                             "ansible_python_interpreter": shutil.which("python3")}}}}


def hostile_tarball(path, victim):
    with tarfile.open(path, "w:gz") as tar:
        def add(name, kind, data=b"", target="", mode=0o644):
            info = tarfile.TarInfo(name)
            info.type = kind
            info.linkname = target
            info.mode = mode
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)

        add("snapshot.json", tarfile.REGTYPE, json.dumps({"format": 1}).encode())
        add("proc", tarfile.DIRTYPE, mode=0o777)
        add("proc/cmdline", tarfile.SYMTYPE, target=str(victim))
        add("etc", tarfile.DIRTYPE, mode=0o777)
        add("etc/systemd", tarfile.SYMTYPE, target="../../../../../../../../" + str(victim.parent).lstrip("/"))
        add("etc/systemd/victim", tarfile.REGTYPE, b"overwritten\n")


def import_events(runner):
    """``[(event name, result)]`` of the import task."""
    return [(e["event"], e["event_data"]["res"]) for e in task_events(runner, "gpuhost.baseline.snapshot_import")]


def test_hostile_tarball_is_refused_by_the_playbook(tmp_path):
    captured = tmp_path / "captured"
    captured.mkdir()
    victim = tmp_path / "outside" / "victim"
    victim.parent.mkdir()
    victim.write_text("precious\n")
    hostile_tarball(captured / "localhost.tar.gz", victim)
    runner = run_playbook(tmp_path, "snapshot.yml", INVENTORY, extravars={"gpuhost_snapshot_dir": str(captured)},
                          cmdline="--tags import")
    assert runner.rc != 0, stdout_of(runner)
    events = import_events(runner)
    assert [event for event, dummy in events] == ["runner_on_failed"]
    res = events[0][1]
    msg = res["msg"]
    assert "proc/cmdline: symbolic link to the absolute path %r" % str(victim) in msg, msg
    assert "etc/systemd: symbolic link to" in msg and "leaves the snapshot" in msg, msg
    assert "etc/systemd/victim: stored inside the symbolic link member 'etc/systemd'" in msg, msg
    assert [line.split(":")[0] for line in res["refused"]] == ["proc/cmdline", "etc/systemd", "etc/systemd/victim"]
    # nothing unpacked, nothing written outside
    assert sorted(os.listdir(captured)) == ["localhost.tar.gz"]
    assert victim.read_text() == "precious\n"
    assert sorted(os.listdir(victim.parent)) == ["victim"]


def test_good_tarball_is_imported_by_the_playbook(tmp_path):
    captured = tmp_path / "captured"
    captured.mkdir()
    with tarfile.open(captured / "localhost.tar.gz", "w:gz") as tar:
        for name, data in (("snapshot.json", b'{"format": 1}\n'), ("proc/cmdline", b"quiet\n")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o666
            tar.addfile(info, io.BytesIO(data))
    runner = run_playbook(tmp_path, "snapshot.yml", INVENTORY, extravars={"gpuhost_snapshot_dir": str(captured)},
                          cmdline="--tags import")
    assert runner.rc == 0, stdout_of(runner)
    [(event, res)] = import_events(runner)
    assert event == "runner_on_ok"
    assert res["changed"] is True and res["members"] == 2 and res["dest"] == str(captured / "localhost")
    assert (captured / "localhost" / "proc" / "cmdline").read_text() == "quiet\n"
    assert oct(os.stat(captured / "localhost" / "proc" / "cmdline").st_mode & 0o777) == oct(0o644)
