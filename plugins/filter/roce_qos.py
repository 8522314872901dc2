# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Filters of role roce_qos: its input checks and the settings per RoCE interface (each documented in <name>.yml)."""

from ansible_collections.gpucluster.fabric.plugins.plugin_utils.lazy import function

qos_errors = function("module_utils.roce_qos", "qos_errors")
resolved_settings = function("module_utils.roce_qos", "resolved_settings")

KEYS = ("trust", "pfc_priorities", "dscp_map", "tos", "ecn")


def _defaults(data):
    return {key: data.get(key) for key in KEYS}


def roce_qos_errors(data):
    """Every problem of one host's QoS input, each naming the host, the variable and the fix."""
    return qos_errors(
        data.get("host"),
        _defaults(data),
        data.get("interface_overrides") or {},
        data.get("interfaces") or [],
        data.get("nccl_conf"),
    )


def roce_qos_settings(data):
    """{interface: settings} for every RoCE interface, as module roce_qos and the boot-time unit take them."""
    return resolved_settings(_defaults(data), data.get("interface_overrides") or {}, data.get("interfaces") or [])


class FilterModule:
    def filters(self):
        return {"roce_qos_errors": roce_qos_errors, "roce_qos_settings": roce_qos_settings}
