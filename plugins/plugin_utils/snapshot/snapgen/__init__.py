"""Synthetic snapshot generator: the demo hosts, the test fixtures and the benchmark host.

Controller-side (never shipped to managed hosts, not in the self-audit bundle): builds directory
trees laid out like a host (docs/snapshot-format.md) from a description, byte for byte
deterministic. Two entry points use it: the ``gpuhost.baseline.demo_snapshots`` action (the
``gpuhost.baseline.demo`` playbook of an installed collection) and ``tools/make_fixtures.py`` (a
checkout's ``make fixtures``, the tests and benchmarks).
"""
