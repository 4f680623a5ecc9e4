# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment:
    # Options and attributes shared by the state-changing modules (sysctl, kernel_cmdline, cpu_power...).
    DOCUMENTATION = r"""
options:
  root:
    description:
      - Directory that stands for the host's C(/). Files are read and written below it.
      - V(/) changes the live host. Any other value is a writable copy of a snapshot directory
        (see C(docs/snapshot-format.md)). Kernel attributes under C(proc/) and C(sys/) are plain files
        there, so writing them is how the change shows, and B(no command is ever run); the commands
        that would have run are listed in RV(commands).
    type: path
    default: /
  backup:
    description:
      - Keep a copy of every configuration file before it is replaced, next to it, named
        C(<file>.<pid>.<date>@<time>~) (the name systemd and GRUB ignore). The paths are returned in
        RV(backup_files).
      - The C(remediate) role always sets this to V(true).
    type: bool
    default: false
attributes:
  check_mode:
    description: Decides and reports what would change, writes nothing and runs no command.
    support: full
  diff_mode:
    description: Returns the before and after text of every file, and a summary of kernel attribute changes.
    support: full
notes:
  - Configuration files are written to a temporary file in the same directory and renamed into place,
    so they are never half-written. When a later step of the same task fails, what the task already
    wrote is put back before it reports the failure.
  - Needs root on a live host (C(become=true)).
"""
