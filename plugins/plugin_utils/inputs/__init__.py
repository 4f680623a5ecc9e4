# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the operator gives the roles: the ``gpuhost_*`` variables a host may set (``inventory_vars``),
the roles' values checked beyond an argument spec (``role_values``), and a profile learned from a golden
host (``learn``).

May import: ``base`` and ``derive``. Controller only (not in the self-audit bundle).
"""
