"""Make this checkout importable as ansible_collections.gpucluster.fabric (as `make venv` links it)."""

import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
COLLECTIONS = os.path.join(ROOT, ".build", "collections")
LINK = os.path.join(COLLECTIONS, "ansible_collections", "gpucluster", "fabric")

if not os.path.exists(LINK):
    os.makedirs(os.path.dirname(LINK), exist_ok=True)
    os.symlink(ROOT, LINK)
if COLLECTIONS not in sys.path:
    sys.path.insert(0, COLLECTIONS)
