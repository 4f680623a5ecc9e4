# -*- coding: utf-8 -*-
# Copyright: gpuhost.baseline contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A console that does not grow with the fleet: the default callback, quieter per host."""
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: fleet
type: stdout
short_description: Ansible's default output, without a line per host for work that did not happen
version_added: 0.1.0
description:
  - The stock C(default) stdout callback with other defaults, for runs over many hosts (issue 37 of the
    collection's tracker, docs/report.md "The console").
  - A task whose hosts were all skipped or only C(ok) prints nothing, not even its banner (banners are printed
    when the first result to show arrives). C(changed), C(failed) and C(unreachable) results are shown as
    by C(default), and so is the message of every C(debug) task (the collection's playbooks speak through
    them), whatever O(display_ok_hosts) says; with C(-v) or more every C(ok) result is shown too.
  - Above 20 hosts (the console summary's folding threshold) the PLAY RECAP is one line per distinct set of
    counts, with the number of hosts and their names folded (the first five, the last two), instead of one
    line per host; and the hosts the verdict task fails (M(gpuhost.baseline.baseline_verdict), for
    C(gpuhost_fail_on) or hosts not audited) are one line per reason, not an error block per host. At 20 hosts
    or fewer those failures are shown as by C(default), when the task has ended.
  - An unreachable host is one line, C(unreachable) with the host and the reason, not a dump of the result
    and the task's origin; above 20 in one task, one line per reason with the hosts folded.
  - Select it with C(stdout_callback = gpuhost.baseline.fleet) in C([defaults]) of C(ansible.cfg) or
    C(ANSIBLE_STDOUT_CALLBACK=gpuhost.baseline.fleet); the collection's checkout sets it.
extends_documentation_fragment:
  - ansible.builtin.default_callback
  - ansible.builtin.result_format_callback
options:
  display_ok_hosts:
    description:
      - Show the C(ok) results of tasks other than C(debug) (with C(-v) they are shown whatever this says).
      - Defaults to V(false) here (V(true) in C(default)).
    type: bool
    default: false
    env:
      - name: ANSIBLE_DISPLAY_OK_HOSTS
    ini:
      - key: display_ok_hosts
        section: defaults
  display_skipped_hosts:
    description:
      - Show skipped results.
      - Defaults to V(false) here (V(true) in C(default)); with it, a task's banner waits for a result to show.
    type: bool
    default: false
    env:
      - name: ANSIBLE_DISPLAY_SKIPPED_HOSTS
    ini:
      - key: display_skipped_hosts
        section: defaults
requirements:
  - set as stdout callback in the configuration
"""

from ansible import constants as C
from ansible import context
from ansible.plugins.callback.default import CallbackModule as DefaultCallback
from ansible.utils.color import colorize, stringc

from ansible_collections.gpuhost.baseline.plugins.plugin_utils.report.console import (
    FOLD_HOSTS, MAX_NAME, escape, host_list)

#: the verdict's action: its per-host failures are folded above FOLD_HOSTS
VERDICT_ACTION = "baseline_verdict"
#: the debug actions, whose messages are always shown
MESSAGE_ACTIONS = frozenset(("debug", "ansible.builtin.debug", "ansible.legacy.debug"))
#: the recap's counts: (summarize() key, label, colour)
RECAP = (("ok", "ok", C.COLOR_OK), ("changed", "changed", C.COLOR_CHANGED),
         ("unreachable", "unreachable", C.COLOR_UNREACHABLE), ("failures", "failed", C.COLOR_ERROR),
         ("skipped", "skipped", C.COLOR_SKIP), ("rescued", "rescued", C.COLOR_OK),
         ("ignored", "ignored", C.COLOR_WARN))


def _task(result):
    """The task of a runner result (``task`` since ansible-core 2.19, ``_task`` before)."""
    task = getattr(result, "task", None)
    return task if task is not None else getattr(result, "_task", None)


def _result(result):
    """The result dict of a runner result (``result`` since ansible-core 2.19, ``_result`` before)."""
    value = getattr(result, "result", None)
    return value if isinstance(value, dict) else getattr(result, "_result", {}) or {}


def _host_name(result):
    host = getattr(result, "host", None)
    host = host if host is not None else getattr(result, "_host", None)
    return getattr(host, "name", None) or str(host)


def _unreachable_reason(message):
    """An unreachable result's message without Ansible's ``Task failed: `` lead."""
    text = " ".join(str(message or "unreachable without a message").split())
    return text[len("Task failed: "):] if text.startswith("Task failed: ") else text


def verdict_groups(failures):
    """``[(reason, hosts)]`` of ``[(host, message)]``: the hosts whose message is the same once its
    leading ``<host>: `` is taken away, in the order of their first failure."""
    groups, order = {}, []
    for host, message in failures:
        message = " ".join(str(message or "failed without a message").split())
        prefix = "%s: " % host
        reason = message[len(prefix):] if message.startswith(prefix) else message
        if reason not in groups:
            groups[reason] = []
            order.append(reason)
        groups[reason].append(host)
    return [(reason, groups[reason]) for reason in order]


def recap_groups(summaries):
    """``[(counts, hosts)]`` of ``{host: summarize(host)}``: hosts with the same counts together, the
    groups with unreachable or failed hosts first, then changed, then the largest."""
    groups = {}
    for name in sorted(summaries, key=str):
        counts = tuple(int(summaries[name].get(key) or 0) for key, unused_label, unused_color in RECAP)
        groups.setdefault(counts, []).append(name)
    return sorted(groups.items(), key=lambda item: (-(item[0][2] + item[0][3]), -item[0][1], -len(item[1]),
                                                    str(item[1][0])))


class CallbackModule(DefaultCallback):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "stdout"
    CALLBACK_NAME = "gpuhost.baseline.fleet"

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._verdicts = []     # the verdict task's failed results, shown when the task has ended
        self._unreachable = []  # the running task's unreachable results, likewise

    def v2_runner_on_failed(self, result, ignore_errors=False):
        action = getattr(_task(result), "action", None) or ""
        if action.split(".")[-1] == VERDICT_ACTION and not ignore_errors:
            self._verdicts.append(result)
            return None
        return super(CallbackModule, self).v2_runner_on_failed(result, ignore_errors)

    def v2_runner_on_unreachable(self, result):
        self._unreachable.append(result)

    def _show_unreachable(self):
        """The task's unreachable hosts: one line each, or one per reason above FOLD_HOSTS."""
        results, self._unreachable = self._unreachable, []
        if not results:
            return
        task = _task(results[0])
        if self._last_task_banner != getattr(task, "_uuid", None):
            self._print_task_banner(task)
        ignored = " (ignored)" if getattr(task, "ignore_unreachable", False) else ""
        failures = [(_host_name(r), _unreachable_reason(_result(r).get("msg"))) for r in results]
        if len(failures) <= FOLD_HOSTS:
            lines = [("[%s]" % escape(host, MAX_NAME), reason) for host, reason in failures]
        else:
            lines = [("%d hosts (%s)" % (len(hosts), host_list([escape(h, MAX_NAME) for h in hosts])), reason)
                     for reason, hosts in verdict_groups(failures)]
        for who, reason in lines:
            self._display.display("unreachable: %s: %s%s" % (who, escape(reason, 400), ignored),
                                  color=C.COLOR_UNREACHABLE, stderr=self.get_option("display_failed_stderr"))

    def _flush(self):
        """What the task that ended left to show: its unreachable hosts, then the verdict's failures, as by
        the default callback up to FOLD_HOSTS, else one line per reason."""
        self._show_unreachable()
        failures, self._verdicts = self._verdicts, []
        if len(failures) <= FOLD_HOSTS:
            for result in failures:
                super(CallbackModule, self).v2_runner_on_failed(result)
            return
        task = _task(failures[0])
        if self._last_task_banner != getattr(task, "_uuid", None):
            self._print_task_banner(task)
        for reason, hosts in verdict_groups([(_host_name(r), _result(r).get("msg")) for r in failures]):
            names = escape(hosts[0], MAX_NAME) if len(hosts) == 1 else "%d hosts (%s)" % (
                len(hosts), host_list([escape(h, MAX_NAME) for h in hosts]))
            self._display.display("failed: %s: %s" % (names, escape(reason, 400)), color=C.COLOR_ERROR,
                                  stderr=self.get_option("display_failed_stderr"))

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._flush()
        return super(CallbackModule, self).v2_playbook_on_task_start(task, is_conditional)

    def v2_playbook_on_handler_task_start(self, task):
        self._flush()
        return super(CallbackModule, self).v2_playbook_on_handler_task_start(task)

    def v2_playbook_on_play_start(self, play):
        self._flush()
        return super(CallbackModule, self).v2_playbook_on_play_start(play)

    def v2_playbook_on_no_hosts_remaining(self):
        self._flush()
        return super(CallbackModule, self).v2_playbook_on_no_hosts_remaining()

    def v2_runner_on_ok(self, result):
        task = _task(result)
        message = getattr(task, "action", None) in MESSAGE_ACTIONS
        if (message or self._display.verbosity > 0) and not self.get_option("display_ok_hosts"):
            # a message of the playbook, or any result asked for with -v: shown as by the default callback
            self.set_option("display_ok_hosts", True)
            try:
                return super(CallbackModule, self).v2_runner_on_ok(result)
            finally:
                self.set_option("display_ok_hosts", False)
        return super(CallbackModule, self).v2_runner_on_ok(result)

    def v2_playbook_on_stats(self, stats):
        self._flush()
        if len(stats.processed) <= FOLD_HOSTS:
            return super(CallbackModule, self).v2_playbook_on_stats(stats)
        self._display.banner("PLAY RECAP")
        for counts, names in recap_groups(dict((name, stats.summarize(name)) for name in stats.processed)):
            label = escape(names[0], MAX_NAME) if len(names) == 1 else "%d hosts" % len(names)
            worst = C.COLOR_ERROR if counts[2] or counts[3] else C.COLOR_CHANGED if counts[1] else C.COLOR_OK
            members = "" if len(names) == 1 else "  (%s)" % host_list([escape(n, MAX_NAME) for n in names])
            self._display.display("%s : %s%s" % (
                stringc(label, worst), " ".join(colorize(text, value, color) for value, (unused, text, color)
                                                in zip(counts, RECAP)), members), screen_only=True)
            self._display.display("%s : %s%s" % (
                label, " ".join(colorize(text, value, None) for value, (unused, text, unused_color)
                                in zip(counts, RECAP)), members), log_only=True)
        self._display.display("", screen_only=True)
        if stats.custom and self.get_option("show_custom_stats"):
            # as the default callback prints them
            self._display.banner("CUSTOM STATS: ")
            for key in sorted(k for k in stats.custom if k != "_run"):
                self._display.display("\t%s: %s" % (key, self._dump_results(stats.custom[key], indent=1).replace("\n", "")))
            if "_run" in stats.custom:
                self._display.display("", screen_only=True)
                self._display.display("\tRUN: %s" % self._dump_results(stats.custom["_run"], indent=1).replace("\n", ""))
            self._display.display("", screen_only=True)
        if context.CLIARGS.get("check") and self.get_option("check_mode_markers"):
            self._display.banner("DRY RUN")
        return None
