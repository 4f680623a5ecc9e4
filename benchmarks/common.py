"""Set-up the benchmarks share: the checkout importable as the collection, and the synthetic
768-CPU host (2 sockets x 192 cores x 2 threads, 8 NUMA nodes, 64 PCI devices with 8 GPUs behind
switches) that tools/make_fixtures.py --only large generates."""
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
