"""The apply action decides whether a role's applier runs with the run's --tags and --skip-tags as Ansible decides
it for the role's own task: compared with ansible-core's Taggable.evaluate_tags on real Task objects, every case."""

import itertools

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.block import Block
from ansible.playbook.play import Play
from ansible.playbook.task import Task
from ansible_collections.gpucluster.fabric.plugins.plugin_utils.role_checks import selected_by_tags

TASK_TAGS = [
    [],
    ["fabric_interfaces_run"],
    ["fabric_interfaces_run", "fabric_interfaces_sysctl"],
    ["always"],
    ["never"],
]
RUN_TAGS = [["all"], ["fabric_interfaces_run"], ["other"], ["tagged"], ["untagged"], ["always"], ["never"]]
SKIP_TAGS = [[], ["fabric_interfaces_run"], ["other"], ["all"], ["tagged"], ["untagged"], ["always"]]


@pytest.mark.parametrize(("tags", "only", "skip"), list(itertools.product(TASK_TAGS, RUN_TAGS, SKIP_TAGS)))
def test_as_ansible_decides(tags, only, skip):
    task = Task(block=Block(play=Play()))  # a task of a block of a play, as Ansible evaluates it
    task._loader = DataLoader()
    if tags:
        task.tags = list(tags)
    assert selected_by_tags(tags, only, skip) is task.evaluate_tags(only, skip, {})
