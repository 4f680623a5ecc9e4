# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment:
    # Attributes of every action plugin (gpuhost.baseline.controller): a module whose check mode does
    # something of its own says so in its own attributes.check_mode, which takes the place of this one.
    # Each fragment is one string literal: ansible-test's yamllint reads them from the source (no `+`).
    DOCUMENTATION = r"""
options: {}
attributes:
  action:
    description: Runs on the controller as an action plugin.
    support: full
  async:
    description: Supports being used with the C(async) keyword.
    support: none
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: posix
"""

    # The note of the judging action plugins (baseline_evaluate, baseline_validate), beside the above.
    JUDGING = r"""
options: {}
notes:
  - Needs the Python libraries C(jmespath) and C(PyYAML) on the controller.
"""
