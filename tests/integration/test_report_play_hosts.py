"""baseline_report reads the fleet from the play (option ``play_hosts``), as the roles call it.

The roles no longer template every host's results into the task's arguments (issue 20: that was
~40 % of the report task's cost and held the expanded argument in memory): the action reads each
named host's ``gpuhost_eval.host_report`` from ``hostvars`` itself, the remediate guard's report of
a host the guard refused, and ``gpuhost_note``. A host without an evaluation (a later
``gpuhost_serial`` batch's host) is left out. The rolling remediate run with a refused host is in
test_controller_guard.py, which also checks the report of each batch.
"""
import json
import os
import subprocess
import sys

from helpers.report_file import load_report

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ANSIBLE_PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

INVENTORY = """
all:
  vars:
    ansible_connection: local
    ansible_python_interpreter: "{{ ansible_playbook_python }}"
  hosts:
    h-audited:
      gpuhost_note: the inventory's note, replaced by the task's host_notes
    h-noted:
      # templated in the host's own context when the action reads it
      gpuhost_note: "{{ 'capture of ' ~ inventory_hostname }}"
    h-later: {}
    h-refused: {}
"""

PLAYBOOK = """
- name: Results as the roles leave them, then the reports read from the play
  hosts: all
  gather_facts: false
  tasks:
    - name: An evaluation for every host but h-later (a later batch's host)
      ansible.builtin.set_fact:
        gpuhost_eval: "{{ {'host_report': evaluations[inventory_hostname], 'changed': false} }}"
      when: inventory_hostname in evaluations

    - name: The remediate role's guard refuses h-refused (after its evaluation here, which its report replaces)
      ansible.builtin.set_fact:
        gpuhost_controller_guard: {failed: true, host_report: {state: failed, message: refused by the guard, findings: []}}
      when: inventory_hostname == 'h-refused'

    - name: And fails it
      ansible.builtin.fail:
        msg: refused
      when: inventory_hostname == 'h-refused'

    - name: Reports
      gpuhost.baseline.baseline_report:
        report_dir: "{{ out_dir }}"
        play_hosts: "{{ report_names | default(ansible_play_hosts_all) }}"
        host_notes: {h-audited: the task's note}
        profile: auto
        preview: "{{ ansible_check_mode }}"
      run_once: true
      delegate_to: localhost
      check_mode: false
      register: written

    - name: Console
      ansible.builtin.debug:
        msg: "{{ written.console | to_json }}"
      run_once: true
"""

FINDING = {"id": "CPU-001", "status": "fail", "severity": "high", "subject": None, "observed": "acpi-cpufreq",
           "expected": "amd-pstate", "message": "scaling driver acpi-cpufreq"}
EVALUATIONS = {
    "h-audited": {"state": "audited", "profile": "amd-epyc-nvidia", "findings": [FINDING]},
    "h-noted": {"state": "unreachable", "message": "no route to host", "findings": []},
    "h-refused": {"state": "audited", "findings": [FINDING]},
}


def run(tmp_path, *extra, inventory=INVENTORY):
    (tmp_path / "hosts.yml").write_text(inventory)
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    (tmp_path / "vars.json").write_text(json.dumps({"evaluations": EVALUATIONS, "out_dir": str(tmp_path / "reports")}))
    env = dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_RETRY_FILES_ENABLED="0", ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    proc = subprocess.run([ANSIBLE_PLAYBOOK, "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml"),
                           "-e", "@" + str(tmp_path / "vars.json")] + list(extra),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=REPO, timeout=300, check=False)
    return proc.returncode, proc.stdout.decode("utf-8", "replace")


def console_of(log):
    line = [text for text in log.splitlines() if '"msg": "[' in text][-1]
    return json.loads(json.loads("{%s}" % line.strip())["msg"])


def test_the_report_holds_every_evaluated_host_and_the_refused_one_read_from_the_play(tmp_path):
    rc, log = run(tmp_path, "--check")
    assert rc == 2, log  # h-refused failed in the play; the reports were written after it
    hosts = load_report(tmp_path / "reports")["hosts"]
    assert sorted(hosts) == ["h-audited", "h-noted", "h-refused"], log  # h-later: no evaluation, left out
    assert hosts["h-audited"]["state"] == "audited" and hosts["h-audited"]["profile"] == "amd-epyc-nvidia"
    # the finding's rule text put back from the catalogue, as for an evaluation registered by the role
    assert [(f["id"], f["status"], f["area"]) for f in hosts["h-audited"]["findings"]] == [("CPU-001", "fail", "cpu")]
    assert (hosts["h-noted"]["state"], hosts["h-noted"]["message"]) == ("unreachable", "no route to host")
    # the guard's report replaces the refused host's evaluation
    assert (hosts["h-refused"]["state"], hosts["h-refused"]["message"], hosts["h-refused"]["findings"]) == (
        "failed", "refused by the guard", [])
    console = "\n".join(console_of(log))
    assert "capture of h-noted" in console  # gpuhost_note, templated in h-noted's context
    assert "the task's note" in console and "the inventory's note" not in console
    assert "h-later" not in console


def test_a_name_that_is_no_inventory_host_fails_the_task_naming_it(tmp_path):
    rc, log = run(tmp_path, "-e", '{"report_names": ["h-audited", "h-typo"]}')
    assert rc == 2, log
    assert "baseline_report: play_hosts names 'h-typo', not in the inventory" in log
    assert not (tmp_path / "reports").exists()


def test_a_note_that_cannot_be_templated_fails_the_task_naming_the_host(tmp_path):
    inventory = INVENTORY.replace("{{ 'capture of ' ~ inventory_hostname }}", "{{ no_such_variable }}")
    rc, log = run(tmp_path, inventory=inventory)
    assert rc == 2, log
    assert "baseline_report: the gpuhost_note of host h-noted cannot be templated: " in log, log
    assert "no_such_variable" in log and "Traceback" not in log
