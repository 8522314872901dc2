# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Filters for role fabric_interfaces: its preflight checks and its sysctls (logic in module_utils/fabric_mtu.py)."""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpucluster.fabric.plugins.plugin_utils.lazy import function


def fabric_interfaces_preflight_errors(interfaces, checks=None):
    """Every preflight error of role fabric_interfaces (module_utils/fabric_mtu.py's preflight_errors)."""
    return function("module_utils.fabric_mtu", "preflight_errors")(interfaces, checks)


def _wrap(func):
    def call(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except (TypeError, ValueError) as exc:
            raise AnsibleFilterError(f"{func.__name__}: {exc}") from exc

    call.__name__ = func.__name__
    return call


class FilterModule:
    def filters(self):
        return {
            "fabric_interfaces_preflight_errors": _wrap(fabric_interfaces_preflight_errors),
            "fabric_interfaces_sysctls": _wrap(function("module_utils.fabric_mtu", "fabric_sysctls")),
        }
