# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The base of the collection's controller-only action plugins (demo_snapshots, baseline_report,
snapshot_import): what each of them did the same way before its own work.

A package of its own, beside the layers: it imports ansible-core's ``ActionBase`` at module level,
which the packages the self-audit bundle takes to the hosts (``base``, ``derive``, ``catalogue``,
``report``, ``judge``) may not: no ansible-core is installed there (docs/architecture.md).

May import: ``base``. Controller only (not in the self-audit bundle).
"""

from __future__ import absolute_import, division, print_function

from ansible.plugins.action import ActionBase

__metaclass__ = type


class ControllerAction(ActionBase):
    """An action plugin that works on the controller only: nothing is transferred to or run on the
    managed host. A subclass sets :attr:`ARGUMENT_SPEC` (the options its documentation module declares
    too) and implements :meth:`act`, which gets the task's arguments checked against it; it supports
    check mode (its module's ``attributes.check_mode`` says what check mode does there)."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    #: the action's options, as ``AnsibleModule`` takes them
    ARGUMENT_SPEC = {}

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # Ansible refuses a task argument outside _VALID_ARGS before run(); the spec names them all
        cls._VALID_ARGS = frozenset(cls.ARGUMENT_SPEC)

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=self.ARGUMENT_SPEC)
        return self.act(result, args)

    def act(self, result, args):
        """The action's work: ``result`` (from ``ActionBase.run``) updated and returned; ``args`` the
        task's arguments with their defaults."""
        raise NotImplementedError
