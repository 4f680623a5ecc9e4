# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The small shared base of the controller side: safe file reading and atomic writing (``files``), times
(``isotime``), the documentation paths of fact keys (``docpath``), the third-party library check
(``controller_libs``) and the JSON Schema validators of the collection's documents (``schema``).

May import: the standard library (and, inside functions, the libraries ``controller_libs`` checks), and
nothing else of ``plugin_utils``. Shipped to hosts in the self-audit bundle: Python 3.8+.
"""
