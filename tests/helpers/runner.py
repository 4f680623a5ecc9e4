"""Run the collection's playbooks through ansible-runner's Python API, from this checkout."""
import os

import ansible_runner

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_BIN = os.path.join(REPO, ".venv", "bin")


def run_playbook(tmp_path, playbook, inventory, extravars=None, cmdline=None):
    """Run ``playbooks/<playbook>`` with ``inventory`` (a dict) and return the runner.

    Each run gets its own private data dir under ``tmp_path``; the checkout is reached through
    the build/collections link that tests/conftest.py creates.
    """
    private = tmp_path / ("runner-%s" % len(list(tmp_path.glob("runner-*"))))
    private.mkdir()
    env = {
        "ANSIBLE_COLLECTIONS_PATH": os.environ["ANSIBLE_COLLECTIONS_PATH"],
        "ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg"),
        "ANSIBLE_ROLES_PATH": os.path.join(REPO, "roles"),
        "PATH": VENV_BIN + os.pathsep + os.environ.get("PATH", ""),
        "ANSIBLE_NOCOLOR": "1",
    }
    runner = ansible_runner.run(
        private_data_dir=str(private),
        project_dir=REPO,
        playbook=os.path.join(REPO, "playbooks", playbook),
        inventory=inventory,
        extravars=extravars or {},
        cmdline=cmdline,
        envvars=env,
        quiet=True,
    )
    return runner


def stdout_of(runner):
    return runner.stdout.read() if runner.stdout else ""
