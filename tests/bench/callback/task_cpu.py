"""Controller CPU by task: where a no-op run of site.yml spends its time (a benchmark aid, not a test).

Enabled with ANSIBLE_CALLBACK_PLUGINS=tests/bench/callback ANSIBLE_CALLBACKS_ENABLED=task_cpu; writes one line per
task to $GPUCLUSTER_TASK_CPU_LOG (default task_cpu.log): controller CPU s (ansible-playbook and the workers and ssh
clients it has reaped) from the task's start to the next one's, wall s, hosts, and the play and task names. ssh
ControlPersist masters are reaped only at the end; their CPU falls on the last line.
"""

import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: task_cpu
type: aggregate
short_description: controller CPU per task, to a file
description: Controller CPU s and wall s per task, written to $GPUCLUSTER_TASK_CPU_LOG.
"""


def _cpu():
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "task_cpu"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._rows = []
        self._current = None
        self._play = ""
        self._hosts = {}

    def _close(self):
        if self._current is not None:
            name, cpu0, wall0 = self._current
            self._rows.append((_cpu() - cpu0, time.monotonic() - wall0, len(self._hosts), self._play, name))
        self._hosts = {}
        self._current = None

    def v2_playbook_on_play_start(self, play):
        self._close()
        self._play = play.get_name()
        self._current = ("(play start)", _cpu(), time.monotonic())

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._close()
        self._current = (task.get_name(), _cpu(), time.monotonic())

    def _seen(self, result, *args, **kwargs):
        self._hosts[result._host.get_name()] = True

    v2_runner_on_ok = v2_runner_on_failed = v2_runner_on_skipped = v2_runner_on_unreachable = _seen

    def v2_playbook_on_stats(self, stats):
        self._close()
        path = os.environ.get("GPUCLUSTER_TASK_CPU_LOG", "task_cpu.log")
        total = sum(r[0] for r in self._rows)
        with open(path, "a") as out:  # one block per run
            out.write(f"# run: total controller CPU {total:.2f} s (before the ssh masters are reaped)\n")
            for cpu, wall, hosts, play, name in self._rows:
                out.write(f"{cpu:8.2f} {wall:8.2f} {hosts:4d}  {play} | {name}\n")
