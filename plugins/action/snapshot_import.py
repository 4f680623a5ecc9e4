# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side import of a snapshot tarball (documentation: plugins/modules/snapshot_import.py)."""

from __future__ import absolute_import, division, print_function

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.actionbase import ControllerAction
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.files import clip, controller_path
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.snapshot.snapshot import (
    ARGUMENT_SPEC, LISTED, SnapshotError, SnapshotRefused, import_snapshot)

__metaclass__ = type


class ActionModule(ControllerAction):
    # In check mode the tarball is checked and nothing is written.
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def act(self, result, args):
        try:
            args = dict(args, src=controller_path(args["src"]), dest=controller_path(args["dest"]))
        except (IOError, OSError) as exc:
            result.update(failed=True, msg="snapshot_import: cannot resolve the relative paths %r and %r: the working "
                          "directory of ansible-playbook is gone (%s); give absolute paths"
                          % (args["src"], args["dest"], exc))
            return result
        try:
            imported = import_snapshot(args["src"], args["dest"], check_only=bool(self._task.check_mode))
        except SnapshotRefused as exc:
            # every name and reason quoted clipped (files.clip); at most LISTED of them listed
            refused = exc.lines(LISTED)
            if len(exc.problems) > LISTED:
                refused.append("... and %d more" % (len(exc.problems) - LISTED))
            result.update(failed=True, refused=refused,
                          msg="snapshot_import: %s. Nothing was unpacked to %s; a capture by host_snapshot never "
                              "holds such members (docs/snapshot-format.md, 'Importing a snapshot')"
                              % (exc, clip(args["dest"])))
            return result
        except SnapshotError as exc:
            result.update(failed=True, msg="snapshot_import: %s" % exc)
            return result
        result.update(changed=True, **imported)
        return result
