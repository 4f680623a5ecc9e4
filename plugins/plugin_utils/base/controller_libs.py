# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The third-party Python libraries the controller side needs, checked all at once.

:data:`REQUIRED` is the one table of them: the import name and the requirement as the collection's
``requirements.txt`` states it (a unit test keeps the two equal; ``requirements.txt`` itself is not
read here, as not every install of the collection has it). PyYAML, Jinja2 and MarkupSafe are not in
it: ansible-core depends on them, so every controller has them.

:func:`check` is called first by the first action of each playbook (``baseline_validate``,
``baseline_learn``, ``demo_snapshots``): when any library is missing it raises
:class:`MissingLibraries` with one message that names every missing library and the command that
installs them into the Python that runs ``ansible-playbook``, before a catalogue, a profile or a
variable is read (whose errors would otherwise be blamed for it, one library per run). The lazy
imports of ``catalogue_model`` and ``schema`` word their refusals with :func:`message` too.

Standard library only, at module level: the self-audit bundle takes this package to the hosts.
"""

from __future__ import absolute_import, division, print_function

import os
import sys

__metaclass__ = type

#: (import name, requirement as in requirements.txt): what plugins/plugin_utils and plugins/action import
#: beyond the standard library and ansible-core's own dependencies
REQUIRED = (
    ("jmespath", "jmespath>=1.0.1,<2"),          # catalogue_model.py: rule queries
    ("jsonschema", "jsonschema>=4.18.0,<5"),     # schema.py: Draft202012Validator over schemas/*.json
)

#: where the collection's requirements.txt is, when this install has it
REQUIREMENTS_TXT = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))), "requirements.txt")


class MissingLibraries(Exception):
    """Libraries of :data:`REQUIRED` do not import; ``str()`` is the message, ``missing`` their import names."""

    def __init__(self, text, missing):
        super(MissingLibraries, self).__init__(text)
        self.missing = list(missing)


def missing(required=REQUIRED):
    """``[(import name, reason or None)]`` of the libraries of ``required`` that do not import, in its order.

    The reason is set when the import failed on something other than the library itself (a library of
    its own that is missing: ``No module named 'rpds'``)."""
    out = []
    for name, dummy in required:
        try:
            __import__(name)
        except ImportError as exc:
            reason = None if getattr(exc, "name", None) == name else str(exc)
            out.append((name, reason))
    return out


def _quote(text):
    return "'%s'" % text.replace("'", "'\\''")


def message(names, required=REQUIRED, python=None, requirements_txt=None):
    """The one message for the missing libraries ``names`` (import names, or ``(name, reason)`` pairs of
    :func:`missing`): each named, and the command that installs every library of ``required`` missing
    here into ``python`` (default: the Python running this code, ``ansible-playbook``'s)."""
    pairs = [item if isinstance(item, tuple) else (item, None) for item in names]
    specs = dict(required)
    python = python or sys.executable or "python3"
    if requirements_txt is None:
        requirements_txt = REQUIREMENTS_TXT if os.path.isfile(REQUIREMENTS_TXT) else ""
    named = ", ".join("%s (%s)" % (name, reason) if reason else name for name, reason in pairs)
    command = "%s -m pip install %s" % (python, " ".join(_quote(specs.get(name, name)) for name, dummy in pairs))
    also = " (or %s -m pip install -r %s)" % (python, requirements_txt) if requirements_txt else ""
    return ("gpuhost.baseline needs the Python librar%s %s on the controller, in the Python that runs "
            "ansible-playbook (%s): install %s with: %s%s"
            % ("y" if len(pairs) == 1 else "ies", named, python, "it" if len(pairs) == 1 else "them", command, also))


def check(required=REQUIRED):
    """Raise :class:`MissingLibraries` naming every library of ``required`` that does not import."""
    absent = missing(required)
    if absent:
        raise MissingLibraries(message(absent, required), [name for name, dummy in absent])
