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

import difflib  # noqa: E402

from ansible.errors import AnsibleFilterError  # noqa: E402

# What site.yml applies, in its order: every role on GPU nodes but opensm, which runs on the subnet managers.
SITE_ROLES = ("rdma_core", "rdma_modules", "cuda_repo", "nccl", "fabric_interfaces", "opensm", "fabric_validate")
SM_ROLES = ("opensm",)


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


def site_roles(value, gpu=None, sm=None):
    """gpucluster_roles validated and in site.yml's order; None means every role."""
    if value is None:
        names = list(SITE_ROLES)
    else:
        if isinstance(value, str):
            value = [part for part in (p.strip() for p in value.split(",")) if part]
        if not isinstance(value, (list, tuple)) or not all(isinstance(name, str) for name in value):
            raise AnsibleFilterError(
                f"gpucluster_roles={value!r} is not a list of role names; list some of {', '.join(SITE_ROLES)}"
            )
        unknown = [name for name in value if name not in SITE_ROLES]
        if unknown:
            hints = []
            for name in unknown:
                close = difflib.get_close_matches(name, SITE_ROLES, n=1)
                hints.append(f"{name!r}" + (f" (did you mean {close[0]}?)" if close else ""))
            raise AnsibleFilterError(
                f"gpucluster_roles names unknown roles {', '.join(hints)}; the roles are {', '.join(SITE_ROLES)}"
            )
        names = [name for name in SITE_ROLES if name in value]
    if gpu is None and sm is None:
        return names
    return [name for name in names if (sm if name in SM_ROLES else gpu)]


class FilterModule:
    def filters(self):
        return {"argument_spec_without_defaults": argument_spec_without_defaults, "site_roles": site_roles}
