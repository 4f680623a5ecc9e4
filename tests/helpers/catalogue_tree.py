"""A writable copy of the bundled catalogue (rules/ and profiles/) for tests that break it."""
import os
import shutil

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def copy_catalogue(directory):
    """Copy rules/ and profiles/ of this checkout into ``directory`` (a pathlib.Path); return it."""
    for sub in ("rules", "profiles"):
        shutil.copytree(os.path.join(REPO, sub), str(directory / sub))
    return directory


def edit(path, old, new):
    """Replace the first ``old`` in the file ``path`` by ``new``; ``old`` must be there."""
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))
