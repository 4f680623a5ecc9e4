# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Findings and everything written from them: the finding contract (``findings``), report.json
(``report``), its views (``views``, ``views_machine``), the report directory (``report_dir``), Prometheus
metrics (``metrics``), the console summary (``console``), run totals (``stats``), exit codes (``verdict``)
and the drift history (``history``).

May import: ``base`` and ``catalogue``. Not the judge (a report is written from findings, never by
re-judging); ``history`` does not import the views; ``findings`` imports only small helpers. Shipped to
hosts in the self-audit bundle: Python 3.8+.
"""
