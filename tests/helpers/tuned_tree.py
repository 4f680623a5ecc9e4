"""Lay tuned's files (tests/fixtures/tuned) into a snapshot copy: installed, running or not."""
import os
import shutil

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "tuned")
PID = 4242


def _write(root, path, text):
    real = os.path.join(str(root), path.lstrip("/"))
    os.makedirs(os.path.dirname(real), exist_ok=True)
    with open(real, "w") as handle:
        handle.write(text)
    return real


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def lay_tuned(root, active="balanced", running=True, enabled=True, layout="2.19", comm="tuned"):
    """tuned as the Debian 12 (2.19, profiles in /usr/lib/tuned/<name>) or a RHEL 9 (2.24,
    /usr/lib/tuned/profiles/<name>) package leaves it, with ``active`` selected."""
    system = "/usr/lib/tuned" if layout == "2.19" else "/usr/lib/tuned/profiles"
    for name in ("accelerator-performance", "latency-performance", "balanced"):
        _write(root, "%s/%s/tuned.conf" % (system, name), fixture("%s.tuned.conf" % name))
    _write(root, "/etc/tuned/tuned-main.conf", "daemon = 1\ndynamic_tuning = 0\n")
    if active is not None:
        _write(root, "/etc/tuned/active_profile", active + "\n")
        _write(root, "/etc/tuned/profile_mode", fixture("profile_mode"))
    if running:
        _write(root, "/run/tuned/tuned.pid", "%d\n" % PID)
        _write(root, "/proc/%d/comm" % PID, comm + "\n")
    if enabled:
        link = os.path.join(str(root), "etc/systemd/system/multi-user.target.wants/tuned.service")
        os.makedirs(os.path.dirname(link), exist_ok=True)
        if not os.path.lexists(link):
            os.symlink("/usr/lib/systemd/system/tuned.service", link)
    return root


def copy_with_tuned(source, dest, **kwargs):
    shutil.copytree(source, str(dest), symlinks=True)
    return lay_tuned(str(dest), **kwargs)
