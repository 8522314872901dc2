# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)


DOCUMENTATION = r"""
name: argument_spec_without_defaults
short_description: A role's argument spec options with every default removed
description:
  - Takes the parsed C(meta/argument_specs.yml) of a role and an entry point, and returns that entry point's options
    with C(default) removed at every level (suboptions included).
  - Used by the site playbook's preflight (C(gpucluster.fabric.preflight)) to check the values an inventory
    I(provides) with M(ansible.builtin.validate_argument_spec) outside the role, where the role's own defaults
    (often templates such as C({{ fabric_interfaces | default([]) }})) are neither loaded nor templated.
positional: _input, entry_point
options:
  _input:
    description: The parsed argument_specs.yml (a mapping with key C(argument_specs)).
    type: dict
    required: true
  entry_point:
    description: Entry point name.
    type: str
    default: main
author:
  - gpucluster.fabric contributors
"""

EXAMPLES = r"""
- name: Check the values an inventory gives role rdma_core
  ansible.builtin.validate_argument_spec:
    argument_spec: "{{ lookup('ansible.builtin.file', 'roles/rdma_core/meta/argument_specs.yml') | from_yaml
                       | gpucluster.fabric.argument_spec_without_defaults }}"
"""

RETURN = r"""
_value:
  description: The options mapping, without defaults.
  type: dict
"""

from ansible.errors import AnsibleFilterError  # noqa: E402


def _strip(options):
    stripped = {}
    for name, spec in (options or {}).items():
        spec = {key: value for key, value in dict(spec).items() if key != "default"}
        if "options" in spec:
            spec["options"] = _strip(spec["options"])
        stripped[name] = spec
    return stripped


def argument_spec_without_defaults(data, entry_point="main"):
    try:
        options = data["argument_specs"][entry_point].get("options") or {}
    except (KeyError, TypeError) as exc:
        raise AnsibleFilterError(f"argument_spec_without_defaults: no entry point {entry_point!r}: {exc}") from exc
    return _strip(options)


class FilterModule:
    def filters(self):
        return {"argument_spec_without_defaults": argument_spec_without_defaults}
