"""Set-up the benchmarks share: the checkout importable as the collection, the synthetic 768-CPU
host (2 sockets x 192 cores x 2 threads, 8 NUMA nodes, 64 PCI devices with 8 GPUs behind switches)
that tools/make_fixtures.py --only large generates, the demo snapshots, and the measuring of one
command's process tree (fleet.py, live.py)."""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: the ansible commands' directory: the checkout's .venv (`make venv`), else that of the Python running
BIN = os.path.join(REPO, ".venv", "bin")
if not os.access(os.path.join(BIN, "ansible-playbook"), os.X_OK):
    BIN = os.path.dirname(sys.executable)
#: The demo snapshots the fleet benchmarks' hosts cycle through.
SNAPSHOTS = ("incident", "healthy", "intel")


def import_collection():
    """Make ``ansible_collections.gpuhost.baseline`` import from this checkout (build/collections,
    the link `make link` makes, made here when missing)."""
    sys.path.insert(0, os.path.join(REPO, "build", "collections"))
    link = os.path.join(REPO, "build", "collections", "ansible_collections", "gpuhost", "baseline")
    if not os.path.lexists(link):
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(REPO, link)


def tree_size(path):
    """``(bytes, files)`` of every file under ``path``."""
    total, count = 0, 0
    for root, unused_dirs, files in os.walk(path):
        for name in files:
            total += os.path.getsize(os.path.join(root, name))
            count += 1
    return total, count


def large_host(workdir, quiet=False):
    """Path of the synthetic host in ``workdir``, generated (and the time it took printed) when missing."""
    large = os.path.join(workdir, "large")
    if not os.path.isdir(large):
        start = time.perf_counter()
        subprocess.run([sys.executable, os.path.join(REPO, "tools", "make_fixtures.py"), workdir, "--only", "large"],
                       check=True, stdout=subprocess.DEVNULL if quiet else None)
        print("generated synthetic host in %.2f s: %s" % (time.perf_counter() - start, large))
    return large


def demo_snapshots(work, names=SNAPSHOTS):
    """The directory holding the demo snapshots ``names``: build/snapshots (`make fixtures`) when it has
    them all, else ``work``/snapshots, generated there."""
    snaps = os.path.join(REPO, "build", "snapshots")
    if all(os.path.isdir(os.path.join(snaps, snap)) for snap in names):
        return snaps
    snaps = os.path.join(work, "snapshots")
    for snap in names:
        subprocess.run([sys.executable, os.path.join(REPO, "tools", "make_fixtures.py"), snaps, "--only", snap],
                       check=True)
    return snaps


def ansible_env(forks, **extra):
    """The environment the benchmarks run ansible with: this checkout as the collection, its ansible.cfg,
    ``forks`` workers, no colour, the checkout's venv first in PATH, and ``extra`` variables."""
    env = dict(os.environ)
    env.update({
        "ANSIBLE_COLLECTIONS_PATH": os.path.join(REPO, "build", "collections"),
        "ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg"),
        "ANSIBLE_FORKS": str(forks),
        "ANSIBLE_NOCOLOR": "1",
        "PATH": BIN + os.pathsep + env.get("PATH", ""),
    })
    env.update(extra)
    return env


def median(values):
    values = sorted(values)
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2.0


#: Runs a command and writes the resource use of its process tree (CPU seconds, peak RSS of its
#: largest process in KiB, as getrusage(RUSAGE_CHILDREN) gives them) to the file named first. It is
#: the tree's child subreaper: a process that outlives its parent (ssh's ControlPersist master,
#: which leaves the ansible process tree) is reparented to it, ended with SIGTERM once the command
#: has exited and reaped, so that its CPU is the tree's too and no connection outlives the run.
MEASURE = (
    "import ctypes, json, os, resource, signal, subprocess, sys, time\n"
    "ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER\n"
    "rc = subprocess.call(sys.argv[2:])\n"
    "def children():\n"
    "    found = []\n"
    "    for pid in os.listdir('/proc'):\n"
    "        try:\n"
    "            with open('/proc/%s/stat' % pid) as stat:\n"
    "                if int(stat.read().rsplit(')', 1)[1].split()[1]) == os.getpid():\n"
    "                    found.append(int(pid))\n"
    "        except (OSError, ValueError, IndexError):\n"
    "            pass\n"
    "    return found\n"
    "left = children()\n"
    "for pid in left:\n"
    "    os.kill(pid, signal.SIGTERM)\n"
    "while True:\n"
    "    try:\n"
    "        os.wait()\n"
    "    except ChildProcessError:\n"
    "        break\n"
    "use = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "json.dump({'rc': rc, 'cpu': use.ru_utime + use.ru_stime, 'maxrss_kib': use.ru_maxrss, 'orphans': len(left)},\n"
    "          open(sys.argv[1], 'w'))\n"
    "sys.exit(rc)\n"
)


def timed(argv, env, ok=(0,)):
    """Wall seconds, CPU seconds (user + system of the whole process tree, the processes that left it
    included), peak RSS (MiB, its largest process) and the output of one command, run under its own
    measuring process so the peak of one command is not that of an earlier one."""
    handle, figures = tempfile.mkstemp(prefix="gpuhost-bench-rusage-")
    os.close(handle)
    start = time.perf_counter()
    # its own process group: stopped with the whole tree if this process is (an error, ^C, SIGTERM)
    proc = subprocess.Popen([sys.executable, "-c", MEASURE, figures] + list(argv), cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output = proc.communicate()[0]
    except BaseException:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait()
        os.unlink(figures)
        raise
    elapsed = time.perf_counter() - start
    with open(figures) as stream:
        use = json.load(stream)
    os.unlink(figures)
    if proc.returncode not in ok:
        sys.stderr.write(output[-3000:])
        raise SystemExit("%s failed with rc %d" % (argv[0], proc.returncode))
    return elapsed, use["cpu"], use["maxrss_kib"] / 1024.0, output
