# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The remediation's decisions on the controller: which steps of a host's fix plan run (``fix_steps``, the
host_fix action).

May import: nothing else of ``plugin_utils``. Controller only (not in the self-audit bundle).
"""
