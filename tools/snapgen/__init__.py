"""Synthetic snapshot generator for gpuhost.baseline test fixtures and benchmarks.

Controller-side helper (never shipped to managed hosts): builds directory trees laid
out like a host (docs/snapshot-format.md) from a description, byte for byte
deterministic. ``tools/make_fixtures.py`` is the command-line entry point.
"""
