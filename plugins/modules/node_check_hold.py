#!/usr/bin/python
# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

DOCUMENTATION = r"""
---
module: node_check_hold
short_description: Hold the node check's Slurm actions while a converge changes the host, or end the hold
description:
  - Writes C(/run/gpucluster-fabric-check.hold), root's only, which the node check reads
    (M(gpucluster.fabric.node_check)). While it holds, the check runs and reports as always but leaves Slurm alone,
    since the host differs from its old intent because it is being changed. site.yml writes it before its roles
    change a host, and M(gpucluster.fabric.fabric_intent) removes it once the host's new intent is written.
  - A hold ends at O(seconds) from its writing at the latest (the node check also ignores one older than a day), so a
    run that stops half-way never holds a node for good.
  - Bookkeeping in C(/run), not a setting of the host, in one call on the host; it never reports a change.
version_added: 0.2.0
author: gpucluster.fabric maintainers (@gpucluster)
extends_documentation_fragment:
  - gpucluster.fabric.attributes
  - gpucluster.fabric.attributes.posix
options:
  state:
    description: V(present) writes the hold, V(absent) ends it.
    type: str
    choices: [present, absent]
    default: present
  seconds:
    description: How long the hold lasts at most, from now.
    type: int
    default: 3600
  by:
    description: Who holds the node, as the node check's journal line and report say it.
    type: str
    default: site.yml
  path:
    description: The hold's file, where the node check reads it.
    type: path
    default: /run/gpucluster-fabric-check.hold
attributes:
  check_mode:
    support: full
    details: Changes nothing in check mode.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Hold the node check's Slurm actions for at most an hour
  gpucluster.fabric.node_check_hold:
    seconds: 3600

- name: End the hold
  gpucluster.fabric.node_check_hold:
    state: absent
"""

RETURN = r"""
until:
  description: Until when (Unix time) the hold lasts, with O(state=present).
  type: int
  returned: when state is present
"""

import time  # noqa: E402

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils import converge_hold  # noqa: E402


def main():
    module = AnsibleModule(
        argument_spec={
            "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
            "seconds": {"type": "int", "default": 3600},
            "by": {"type": "str", "default": "site.yml"},
            "path": {"type": "path", "default": converge_hold.HOLD_PATH},
        },
        supports_check_mode=True,
    )
    params = module.params
    if params["seconds"] < 0:
        module.fail_json(msg=f"seconds: {params['seconds']} is negative; give how long the hold may last (e.g. 3600)")
    result = {"changed": False}
    if params["state"] == "present":
        result["until"] = int(time.time()) + params["seconds"]
        if not module.check_mode:
            converge_hold.write_hold(params["path"], result["until"], params["by"])
    elif not module.check_mode:
        converge_hold.release_hold(params["path"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
