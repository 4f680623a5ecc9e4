"""Run the collection's playbooks through ansible-runner's Python API, from this checkout."""
import os

import ansible_runner

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_BIN = os.path.join(REPO, ".venv", "bin")


def run_playbook(tmp_path, playbook, inventory, extravars=None, cmdline=None, env=None, event_handler=None):
    """Run ``playbooks/<playbook>`` with ``inventory`` (a dict) and return the runner.

    Each run gets its own private data dir under ``tmp_path``; the checkout is reached through
    the build/collections link that tests/conftest.py creates. ``env`` adds environment
    variables; ``event_handler`` gets each ansible-runner event as it happens.
    """
    private = tmp_path / ("runner-%s" % len(list(tmp_path.glob("runner-*"))))
    private.mkdir()
    envvars = {
        "ANSIBLE_COLLECTIONS_PATH": os.environ["ANSIBLE_COLLECTIONS_PATH"],
        "ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg"),
        "ANSIBLE_ROLES_PATH": os.path.join(REPO, "roles"),
        "PATH": VENV_BIN + os.pathsep + os.environ.get("PATH", ""),
        "ANSIBLE_NOCOLOR": "1",
    }
    envvars.update(env or {})
    runner = ansible_runner.run(
        private_data_dir=str(private),
        project_dir=REPO,
        playbook=os.path.join(REPO, "playbooks", playbook),
        inventory=inventory,
        extravars=extravars or {},
        cmdline=cmdline,
        envvars=envvars,
        quiet=True,
        event_handler=event_handler,
    )
    return runner


def stdout_of(runner):
    return runner.stdout.read() if runner.stdout else ""


def task_events(runner, action, kinds=("runner_on_ok", "runner_on_failed")):
    """The events of kind ``kinds`` of tasks running ``action``, in order.

    Read defensively: ansible-runner also reports lines that ansible-playbook writes to stderr
    outside any task (a Python warning at start-up, for example) as ``verbose`` events without
    ``event_data``; such events are skipped, never indexed.
    """
    return [e for e in runner.events if e.get("event") in kinds
            and (e.get("event_data") or {}).get("task_action") == action]
