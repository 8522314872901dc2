# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Filter site_roles of the site preflight (documented in site_roles.yml), and argument_spec_without_defaults, which
action plugin declared_vars uses."""

import difflib

from ansible.errors import AnsibleFilterError


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
    """gpucluster_roles validated and in site.yml's order (the registry of concerns: every role on GPU nodes but
    opensm, which runs on the subnet managers, and node_check, which runs on both); None means every role."""
    # Imported at the call: a filter file imports no module_utils when it is loaded (plugin_utils/lazy.py).
    from ansible_collections.gpucluster.fabric.plugins.module_utils import concerns

    site, on_sms, on_every = concerns.roles(), concerns.roles("sm"), concerns.roles("every")
    if value is None:
        names = list(site)
    else:
        if isinstance(value, str):
            value = [part for part in (p.strip() for p in value.split(",")) if part]
        if not isinstance(value, (list, tuple)) or not all(isinstance(name, str) for name in value):
            raise AnsibleFilterError(
                f"gpucluster_roles={value!r} is not a list of role names; list some of {', '.join(site)}"
            )
        unknown = [name for name in value if name not in site]
        if unknown:
            hints = []
            for name in unknown:
                close = difflib.get_close_matches(name, site, n=1)
                hints.append(f"{name!r}" + (f" (did you mean {close[0]}?)" if close else ""))
            raise AnsibleFilterError(
                f"gpucluster_roles names unknown roles {', '.join(hints)}; the roles are {', '.join(site)}"
            )
        names = [name for name in site if name in value]
    if gpu is None and sm is None:
        return names
    return [name for name in names if ((gpu or sm) if name in on_every else sm if name in on_sms else gpu)]


class FilterModule:
    def filters(self):
        return {"site_roles": site_roles}
