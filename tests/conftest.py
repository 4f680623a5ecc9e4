"""Test set-up shared by every test: make the checkout importable as the collection.

Tests import ``ansible_collections.gpuhost.baseline`` from this checkout (never from an
installed copy), through ``build/collections/ansible_collections/gpuhost/baseline`` -> repo.
"""
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLLECTIONS = os.path.join(REPO, "build", "collections")
LINK = os.path.join(COLLECTIONS, "ansible_collections", "gpuhost", "baseline")

if not os.path.lexists(LINK):
    os.makedirs(os.path.dirname(LINK), exist_ok=True)
    os.symlink(REPO, LINK)
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)
os.environ.setdefault("ANSIBLE_COLLECTIONS_PATH", COLLECTIONS)
os.environ.setdefault("ANSIBLE_CONFIG", os.path.join(REPO, "ansible.cfg"))
