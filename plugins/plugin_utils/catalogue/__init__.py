# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rule catalogue: loading and checking rule and profile files (``catalogue_load``,
``catalogue_files``), the compiled model and its bounded expression interpreter (``catalogue_model``), profile
parameters and inventory overrides (``catalogue_params``), waivers (``waivers``) and where each fact is read
(``sources``).

May import: ``base`` and ``derive`` (the parameters derivation needs). Not the judge or the report.
Shipped to hosts in the self-audit bundle: Python 3.8+.
"""
