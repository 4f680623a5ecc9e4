# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Snapshots on the controller: checking and importing snapshot tarballs (``snapshot``), one
``host_facts`` run from an action plugin (``gathering``), and the demo and fixture generator (``snapgen``).

May import: ``base``. Controller only (not in the self-audit bundle).
"""
