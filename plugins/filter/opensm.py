# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Filters behind role opensm: input checks, inventory validation and partitions.conf rendering (logic in
module_utils)."""

import importlib

from ansible.errors import AnsibleFilterError
from ansible_collections.gpucluster.fabric.plugins.plugin_utils.lazy import function

_PARTITIONS = "module_utils.opensm_partitions"


def opensm_input_errors(inputs, hostvars, groups, host="localhost", facts=None):
    return function("module_utils.opensm_input", "input_errors")(inputs, hostvars, groups, host, facts)


def opensm_partitions_conf(partitions, hostvars, groups, default_partition=None, header=""):
    op = importlib.import_module(f"ansible_collections.gpucluster.fabric.plugins.{_PARTITIONS}")
    try:
        return op.partitions_conf(partitions, hostvars, groups, default_partition, header=header)
    except op.PartitionError as exc:
        raise AnsibleFilterError(f"opensm_partitions_conf: invalid inventory:\n{exc}") from None


def opensm_allow_both_pkeys(partitions, hostvars, groups, default_partition=None):
    model, errors = function(_PARTITIONS, "resolve_partitions")(partitions, hostvars, groups, default_partition)
    if errors:
        joined = "\n".join(errors)
        raise AnsibleFilterError(f"opensm_allow_both_pkeys: invalid inventory:\n{joined}")
    return model["allow_both_pkeys"]


class FilterModule:
    def filters(self):
        return {
            "opensm_input_errors": opensm_input_errors,
            "opensm_partitions_conf": opensm_partitions_conf,
            "opensm_allow_both_pkeys": opensm_allow_both_pkeys,
        }
