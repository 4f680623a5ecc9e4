# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Offline stand-in for the get-pip.py bootstrap script that ansible-test downloads.

ansible-test creates each sanity virtual environment without pip and then runs a
cached ``get-pip.py`` (``~/.ansible/test/cache/get_pip_<version>.py``) inside it;
when the cache is empty it downloads the script from a host that CI machines here
cannot reach.  ``tools/sanity.sh`` installs this file under that cached name.

It does what get-pip.py is used for: put pip into the running interpreter, then
install the packages ansible-test asked for (normally ``pip==<pinned version>``).
pip comes from the interpreter's own ``ensurepip`` wheel, so only the configured
package index is needed, which ``pip install`` uses anyway.
"""

from __future__ import absolute_import, division, print_function

import ensurepip
import os
import subprocess
import sys

__metaclass__ = type

# get-pip.py options that only steer its own bootstrap; pip install does not know them.
GET_PIP_ONLY_OPTIONS = ('--no-setuptools', '--no-wheel')

SYSTEM_CA_BUNDLE = '/etc/ssl/certs/ca-certificates.crt'


def pip_install_arguments(argv):
    """Return the ``pip install`` arguments for the arguments get-pip.py was given."""
    return [arg for arg in argv if arg not in GET_PIP_ONLY_OPTIONS]


def pip_environment(environ):
    """Return the environment for pip: the system CA bundle unless one is configured."""
    env = dict(environ)
    if not env.get('PIP_CERT') and os.path.isfile(SYSTEM_CA_BUNDLE):
        env['PIP_CERT'] = SYSTEM_CA_BUNDLE
    return env


def main(argv):
    """Bootstrap pip with ensurepip, then install what ansible-test asked for."""
    try:
        ensurepip.bootstrap(upgrade=True, default_pip=True)
    except Exception as exc:  # pylint: disable=broad-except
        sys.stderr.write(
            'get-pip stand-in: ensurepip failed in %s: %s; the interpreter needs its ensurepip '
            'module (on Debian system Python: apt-get install python3-venv)\n' % (sys.executable, exc))
        return 1

    arguments = pip_install_arguments(argv)
    if not [arg for arg in arguments if not arg.startswith('-')]:
        # Nothing to install beyond the bundled pip.
        return 0

    command = [sys.executable, '-m', 'pip', 'install', '--upgrade'] + arguments
    result = subprocess.call(command, env=pip_environment(os.environ))
    if result != 0:
        sys.stderr.write(
            'get-pip stand-in: %s exited with %d: check that the package index is reachable '
            '(PIP_INDEX_URL / pip.conf) and PIP_CERT points at a CA bundle\n' % (' '.join(command), result))
    return result


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
