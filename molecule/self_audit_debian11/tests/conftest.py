"""The scenario's verifier imports molecule/shared/vmverify.py."""
import os
import sys

SHARED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared")
if SHARED not in sys.path:
    sys.path.insert(0, os.path.abspath(SHARED))
