# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Filters for role fabric_interfaces: defaults, validation and MTU arithmetic (logic in module_utils)."""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpucluster.fabric.plugins.module_utils import fabric_model, fabric_mtu


def fabric_interfaces_errors(
    interfaces,
    host="localhost",
    links=None,
    enhanced_ipoib=None,
    partitions=None,
    roce_min_rdma_mtu=4096,
    default_partition=None,
):
    return fabric_mtu.list_errors(
        interfaces,
        host=host,
        links=links,
        enhanced_ipoib=enhanced_ipoib,
        partitions=partitions,
        roce_min_rdma_mtu=int(roce_min_rdma_mtu or 0) or None,
        default_partition=default_partition,
    )


def fabric_interfaces_preflight_errors(interfaces, checks=None):
    """Every preflight error of role fabric_interfaces; ``checks`` holds the keyword arguments (host, links,
    enhanced_ipoib, partitions, roce_min_rdma_mtu, default_partition, check_link_type, host_checks)."""
    checks = dict(checks or {})
    checks["roce_min_rdma_mtu"] = int(checks.get("roce_min_rdma_mtu", 4096) or 0) or None
    return fabric_mtu.role_errors(interfaces, **checks)


def fabric_interfaces_normalise(interfaces):
    return [fabric_model.normalise_interface(iface) for iface in interfaces or []]


def _wrap(function):
    def call(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except (TypeError, ValueError) as exc:
            raise AnsibleFilterError(f"{function.__name__}: {exc}") from exc

    call.__name__ = function.__name__
    return call


class FilterModule:
    def filters(self):
        return {
            "fabric_interfaces_errors": fabric_interfaces_errors,
            "fabric_interfaces_preflight_errors": _wrap(fabric_interfaces_preflight_errors),
            "fabric_interfaces_sysctls": _wrap(fabric_mtu.fabric_sysctls),
            "fabric_interfaces_normalise": fabric_interfaces_normalise,
            "roce_active_mtu": _wrap(fabric_model.roce_active_mtu),
            "ipoib_max_mtu": _wrap(fabric_model.ipoib_max_mtu),
            "neigh_gc_thresholds": _wrap(fabric_mtu.neigh_gc_thresholds),
        }
