#!/usr/bin/python
# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

DOCUMENTATION = r"""
---
module: fabric_intent
short_description: Write the host's intent as one root-only file, changing it only when it differs
description:
  - Writes the intent the site preflight computed for the host (C(ansible_facts.gpucluster_fabric_intent) from
    M(gpucluster.fabric.preflight)) to C(/etc/gpucluster/fabric.json), mode C(0600), as sorted JSON, so that the node
    can be checked against it later without the inventory.
  - The intent holds, for each role the host gets, what its applier is to make true. It holds no secret (OpenSM's
    keys are left out, a URL's user and password are masked).
  - Only a file that differs is written, with the reason (RV(changes)) and, in diff mode, a diff.
  - Where the intent holds role C(node_check) (the site preflight puts the role's settings there), the same call
    installs the node check that reads the intent, as M(gpucluster.fabric.node_check) would (RV(node_check)).
version_added: 0.2.0
author: gpucluster.fabric maintainers (@gpucluster)
extends_documentation_fragment:
  - gpucluster.fabric.attributes
  - gpucluster.fabric.attributes.posix
  - gpucluster.fabric.applier
options:
  intent:
    description: The host's intent document (C(schema), C(host), C(roles)); without it the module fails with the fix.
    type: dict
  path:
    description: Where the file goes.
    type: path
    default: /etc/gpucluster/fabric.json
  release_hold:
    description:
      - Once the intent is written, end the converge's hold on the node check's Slurm actions
        (C(/run/gpucluster-fabric-check.hold), written by M(gpucluster.fabric.node_check_hold)), in the same call.
        Not in check mode; the hold's end is bookkeeping, not a change.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Record the host's intent on the host
  gpucluster.fabric.fabric_intent:
    intent: "{{ ansible_facts.gpucluster_fabric_intent }}"
"""

RETURN = r"""
changes:
  description: Each change made (or that would be made in check mode), C({what, why}).
  type: list
  elements: dict
  returned: always
path:
  description: The file written.
  type: str
  returned: always
node_check:
  description: The node check installed (C(command), C(unit), C(files)), where the intent holds role C(node_check).
  type: dict
  returned: when the intent holds role node_check
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils import converge_hold, node_check_install  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils import intent as rules  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.applier import (  # noqa: E402
    ARGUMENT_SPEC as APPLIER_ARGUMENTS,
)
from ansible_collections.gpucluster.fabric.plugins.module_utils.applier import Applier  # noqa: E402


def main():
    module = AnsibleModule(
        argument_spec={
            **APPLIER_ARGUMENTS,
            "intent": {"type": "dict"},
            "path": {"type": "path", "default": rules.PATH},
            "release_hold": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    params = module.params
    apply = Applier(module)
    apply.refuse(rules.errors(params["intent"]))
    result = {"path": params["path"]}
    if params["state"] == "checked":
        module.exit_json(changed=False, changes=[], **result)
    # The check that reads the intent, in the same call, where the host gets role node_check (its part of the
    # intent is module node_check's arguments, checked by the preflight that computed the intent); refused before
    # anything is written.
    arguments = (params["intent"].get("roles") or {}).get("node_check")
    if arguments is not None:
        checked, errors = node_check_install.checked_settings(arguments)
        apply.refuse(errors)
        checked["root"] = params["root"]
    apply.file(params["path"], rules.render(rules.redact(params["intent"])), mode=rules.MODE)
    if arguments is not None:
        result["node_check"] = node_check_install.install(module, apply, checked)
    if params["release_hold"] and not module.check_mode:
        converge_hold.release_hold(apply.path(converge_hold.HOLD_PATH))
    module.exit_json(**apply.report(result))


if __name__ == "__main__":
    main()
