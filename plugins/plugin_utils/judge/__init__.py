# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The judge: facts and a catalogue in, findings out (``evaluation``), per host with its history
(``judge``), and the self-audit that runs it on a host (``self_audit``).

May import: ``base``, ``derive``, ``catalogue`` and ``report``. Nothing imports the judge except action
plugins, modules' controller halves and the self-audit bundle's entry point. Shipped to hosts in the
self-audit bundle: Python 3.8+.
"""
