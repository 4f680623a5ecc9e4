# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""From facts to derived values: ``derive.derive`` runs the per-area derivations (``derive_cpu``,
``derive_kernel``, ``derive_pcie``, ``derive_nvidia``, ``derive_health`` ...), which turn a host's raw facts
into the values the rules compare (``derived.*``); the Xid catalogue (``xid_catalogue``) and the observation
of a host's inventory (``inventory_observe``) are their knowledge. Pure functions, no I/O.

May import: ``base`` and the facts parsers (``module_utils/facts``). Not the catalogue, the judge or the
report. Shipped to hosts in the self-audit bundle: Python 3.8+.
"""
