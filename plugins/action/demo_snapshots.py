# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write the demo hosts' snapshots on the controller (documentation: plugins/modules/demo_snapshots.py)."""

from __future__ import absolute_import, division, print_function

import sys

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.actionbase import ControllerAction
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.controller_libs import MissingLibraries, check as check_libraries
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.base.files import clip, controller_path
from ansible_collections.gpuhost.baseline.plugins.plugin_utils.snapshot.snapgen.demo import (
    DemoError, write_demo, write_inventory)

__metaclass__ = type

ARGUMENT_SPEC = dict(dest=dict(type="path", default="gpuhost-demo/snapshots"), inventory=dict(type="path"))


class ActionModule(ControllerAction):
    # In check mode nothing is written; changed says whether a snapshot would be.
    ARGUMENT_SPEC = ARGUMENT_SPEC

    def act(self, result, args):
        # the first action of demo.yml, which audits the snapshots next: every missing library named at once,
        # before anything is written
        try:
            check_libraries()
        except MissingLibraries as exc:
            result.update(failed=True, msg=str(exc))
            return result
        dest = args["dest"]
        try:
            # relative: from the working directory of ansible-playbook, never the collection's directory
            dest = controller_path(dest)
            written = write_demo(dest, check_only=bool(self._task.check_mode))
            if args["inventory"]:
                inventory = controller_path(args["inventory"])
                # the interpreter of this controller: the audit of a snapshot runs in its process anyway
                if write_inventory(inventory, written["hosts"], sys.executable, check_only=bool(self._task.check_mode)):
                    written["changed"] = True
                written["inventory"] = inventory
        except DemoError as exc:
            result.update(failed=True, msg="demo_snapshots: %s" % clip(exc))
            return result
        except (IOError, OSError) as exc:
            result.update(failed=True, msg="demo_snapshots: cannot write the demo snapshots under %s: %s; give dest "
                          "(demo_dir for the demo playbook) a directory the controller user may write"
                          % (clip(dest), clip(exc)))
            return result
        result.update(dest=dest, **written)
        return result
