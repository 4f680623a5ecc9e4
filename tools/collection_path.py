"""Make ``ansible_collections.gpuhost.baseline`` importable for the scripts in tools/.

    import collection_path  # noqa: F401  (tools/ is the script's own directory, so first on sys.path)

If the package is not importable yet, the build link (``make link``, ``tests/conftest.py``) is put on
``sys.path``; without one, a private link to this checkout in a temporary directory, removed at exit.
"""

import atexit
import os
import shutil
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _collection_path():
    link = os.path.join(REPO, "build", "collections")
    if os.path.isdir(os.path.join(link, "ansible_collections", "gpuhost", "baseline", "plugins")):
        return link
    scratch = tempfile.mkdtemp(prefix="gpuhost-tools-collections-")
    atexit.register(shutil.rmtree, scratch, True)
    os.makedirs(os.path.join(scratch, "ansible_collections", "gpuhost"))
    os.symlink(REPO, os.path.join(scratch, "ansible_collections", "gpuhost", "baseline"))
    return scratch


try:
    import ansible_collections.gpuhost.baseline.plugins.plugin_utils  # noqa: F401  pylint: disable=unused-import
except ImportError:
    sys.path.insert(0, _collection_path())
