# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Filters for role fabric_interfaces: defaults, validation and MTU arithmetic (logic in module_utils)."""

DOCUMENTATION = r"""
---
name: fabric_interfaces_errors
short_description: Inventory errors of a fabric_interfaces list
version_added: 0.1.0
description:
  - Returns one message per problem, each naming the host, the entry, the value and the fix. An empty list is valid.
  - Also provides C(fabric_interfaces_preflight_errors) (every check of role fabric_interfaces' preflight, these
    and the link type against the kind, OS family, peer group and network backend, with one mapping argument whose
    keys are the options below plus C(check_link_type) and C(host_checks)), C(fabric_interfaces_normalise)
    (defaults filled in), C(fabric_interfaces_sysctls) (the multi-rail and neighbour-table sysctls, from positional
    peers, multirail, multirail_sysctls and neigh_tuning), C(roce_active_mtu), C(ipoib_max_mtu) and
    C(neigh_gc_thresholds).
positional: host, links, enhanced_ipoib, partitions, roce_min_rdma_mtu, default_partition
options:
  _input:
    description: The fabric_interfaces list.
    type: list
    elements: dict
    required: true
  host:
    description: Host name used in the messages.
    type: str
    default: localhost
  links:
    description:
      - What M(gpucluster.fabric.fabric_link_info) reported (name to state). An interface missing there is an
        error; its C(enhanced_ipoib) decides whether connected mode is refused.
    type: dict
    default: {}
  enhanced_ipoib:
    description: Map of interface name to true/false, overriding the detected enhanced IPoIB state.
    type: dict
    default: {}
  partitions:
    description: opensm_partitions, to cross-check IPoIB MTUs against the partition MTU.
    type: list
    elements: dict
  roce_min_rdma_mtu:
    description: RDMA MTU a RoCE interface's MTU must allow; 0 disables the check.
    type: int
    default: 4096
  default_partition:
    description:
      - opensm_default_partition, to cross-check the MTU of interfaces on the Default partition (0x7fff) when
        O(partitions) has no C(Default) entry.
    type: dict
"""

EXAMPLES = r"""
- name: Refuse bad interface definitions
  ansible.builtin.assert:
    that: __errors | length == 0
    fail_msg: "{{ __errors | join('\n') }}"
  vars:
    __errors: "{{ fabric_interfaces | gpucluster.fabric.fabric_interfaces_errors(inventory_hostname) }}"
"""

RETURN = r"""
_value:
  description: Error messages; empty when the list is valid.
  type: list
  elements: str
"""

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils import fabric_model, fabric_mtu  # noqa: E402


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
