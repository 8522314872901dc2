#!/usr/bin/python
# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

DOCUMENTATION = r"""
---
module: fabric_validate_collect
short_description: Read everything role fabric_validate judges on a host, in one call
description:
  - Returns the RDMA devices and ports (as M(gpucluster.fabric.ib_port_info)), the GPUs and GPU to NIC affinity (as
    M(gpucluster.fabric.gpu_topology_info)), the content of C(nccl.conf), the MTU of every expected interface and
    the live RoCE QoS against O(roce_qos).
  - Role fabric_validate calls it once per host. A port that is C(LinkUp) but C(INIT) or C(ARMED) waits for the
    subnet manager (one just started may not have swept every port yet). With O(settle_seconds), the RDMA devices
    are read again every O(settle_delay) seconds while such a port remains, and the last read is returned (running
    out of time is for the caller to judge, not a failure).
  - Reads only; never changes anything. Safe in check mode.
version_added: 0.2.0
author: gpucluster.fabric maintainers (@gpucluster)
options:
  nccl_conf_path:
    description: NCCL configuration file to read (not below O(root)).
    type: path
    default: /etc/nccl.conf
  interfaces:
    description:
      - Interfaces whose MTU is read from C(<root>/sys/class/net/<name>/mtu), each C({name, expected_mtu}) (what the
        C(gpucluster.fabric.fabric_expected_mtus) filter returns).
    type: list
    elements: dict
    default: []
  roce_qos:
    description:
      - RoCE interface name to the QoS settings role gpucluster.fabric.roce_qos applied (its fact
        C(gpucluster_roce_qos.settings)); each is read back as M(gpucluster.fabric.roce_qos) reads it in check
        mode, from the host's own C(/sys) and configfs (not below O(root)).
    type: dict
    default: {}
  packages:
    description:
      - Debian packages whose installed version is read (C(dpkg-query)), for the fleet's version agreement; a package
        that is not installed reads as null.
    type: list
    elements: str
    default: []
  settle_seconds:
    description: How long ports that wait for the subnet manager are read again; V(0) returns the first read.
    type: int
    default: 0
  settle_delay:
    description: Seconds between two reads of ports that wait for the subnet manager (at least 1).
    type: int
    default: 3
  sm_query:
    description:
      - Also ask each InfiniBand port's subnet manager whether it is the master (C(sminfo -C <device> -P <port>),
        each under O(sm_query_timeout) seconds, on this host) for the ports that are C(LinkUp) with an SM LID, and
        return RV(sminfo). Role fabric_validate sets it when the host queries for itself
        (C(fabric_validate_sm_query_host)); sminfo only reads.
    type: bool
    default: false
  sm_query_timeout:
    description: Seconds each C(sminfo) may take (C(timeout)).
    type: int
    default: 15
  sm_query_environment:
    description: Environment variables of the C(sminfo) runs (the lab attaches C(sminfo) to a simulated HCA).
    type: dict
    default: {}
  record:
    description:
      - What the host's variables say for its record (the action plugin's, on the controller; the module ignores
        it) - C(gpudirect), C(allowed_debug), C(require_pfc), C(declared_roce), C(rdma), C(nccl) and
        C(sm_query_host). With it, the result has RV(record) and RV(sm_query_host).
    type: dict
  health:
    description:
      - Judge the health tier here, as the node check (M(gpucluster.fabric.node_check)) judges it, and return
        RV(checks) - C(expected) (C(rate_gbps), C(active_mtu)) is what the ports must reach. The action plugin adds
        C(host) and the O(record)'s inputs. Where the host's intent (C(intent), by default
        C(/etc/gpucluster/fabric.json)) exists (site.yml writes it), the checks include the drift of every setting the
        collection manages, read in check mode.
    type: dict
extends_documentation_fragment:
  - gpucluster.fabric.role_checks
  - gpucluster.fabric.attributes
  - gpucluster.fabric.attributes.info_module
  - gpucluster.fabric.attributes.posix
  - gpucluster.fabric.fabric_probe.rdma
  - gpucluster.fabric.fabric_probe.gpu
notes:
  - A host without RDMA devices or without nvidia-smi returns C(ib.rdma_present=false) or C(gpu.gpu_present=false);
    callers report them as skipped, not passed.
"""

EXAMPLES = r"""
- name: Read the fabric, GPU and configuration state
  gpucluster.fabric.fabric_validate_collect:
    modules: [ib_core, ib_uverbs, rdma_ucm]
    interfaces: "{{ fabric_interfaces | gpucluster.fabric.fabric_expected_mtus }}"
  register: collected
"""

RETURN = r"""
ib:
  description: rdma_present, devices and modules_loaded, as M(gpucluster.fabric.ib_port_info) returns them.
  returned: always
  type: dict
gpu:
  description: gpu_present, skipped_reason, failed_reason, gpus, affinity, nic_count and flagged, as
    M(gpucluster.fabric.gpu_topology_info) returns them (without the raw topology).
  returned: always
  type: dict
nccl_conf:
  description: C(path) and C(content) of the NCCL configuration file; content is null when the file does not exist.
  returned: always
  type: dict
  sample: {path: /etc/nccl.conf, content: "NCCL_IB_HCA=mlx5_0\n"}
attempts:
  description: How many times the RDMA devices were read (1 unless ports waited for the subnet manager).
  returned: always
  type: int
  sample: 1
interfaces:
  description: One entry per requested interface - name, expected_mtu and mtu (null when the interface is absent).
  returned: always
  type: list
  elements: dict
  sample: [{name: eth1, expected_mtu: 4200, mtu: 4200}]
versions:
  description: C(packages) (name to installed version or null) and C(kernel) (the running kernel's release).
  returned: always
  type: dict
  sample: {packages: {libnccl2: 2.21.5-1+cuda12.4, rdma-core: null}, kernel: 6.1.0-27-amd64}
sminfo:
  description: With O(sm_query), one result per port asked - C(item) (C(device), C(port)), C(rc), C(stdout) and
    C(stderr), as a registered C(ansible.builtin.command) loop has them.
  returned: with sm_query
  type: list
  elements: dict
checks:
  description:
    - With O(health), the health tier's check records (host, tier, check, status, measured, threshold, unit,
      message), as the node check writes them; each InfiniBand port's C(sm.master) is judged again on the controller
      where its subnet manager was asked from another host.
  returned: with health
  type: list
  elements: dict
record:
  description:
    - The host's record as role fabric_validate's report judges it (an entry of C(report.json)'s C(hosts)); with
      O(sm_query), its C(sm) too, else without it (the sminfo task after this module adds it).
  returned: with O(record)
  type: dict
sm_query_host:
  description: The host the sminfo queries of this host run on (O(record)'s C(sm_query_host)).
  returned: with O(record)
  type: str
pcie:
  description:
    - The PCIe link of each NVIDIA GPU and each RDMA device's PCI function - C(address), C(role), C(vendor),
      C(device), C(class), C(link) (C(current_speed) and C(max_speed) in GT/s, C(current_width) and C(max_width) in
      lanes) and C(port), the same of the port above it (null on the root bus).
  returned: always
  type: list
  elements: dict
pcie_paths:
  description:
    - For each NVIDIA GPU and RDMA NIC pair, C(gpu), C(nic) and C(bridges) - each bridge between them (C(address)),
      its ACS Control register (C(control), null without an ACS capability) and whether its configuration space
      could be read (C(readable); only root reads past the first 64 bytes).
  returned: always
  type: list
  elements: dict
roce_qos:
  description: Per interface and setting, what M(gpucluster.fabric.roce_qos) returns in check mode (C(ok), C(changed)
    meaning different from O(roce_qos), or C(unsupported) with the reason); empty without O(roce_qos).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.fabric_collect import (  # noqa: E402
    ARGUMENT_SPEC,
    CollectError,
    collect,
)
from ansible_collections.gpucluster.fabric.plugins.module_utils.intent import PATH as INTENT_PATH  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.node_check import validate_checks  # noqa: E402


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    try:
        result = collect(module, module.params)
    except CollectError as exc:
        module.fail_json(msg=str(exc), **exc.result)
    health = module.params["health"]
    if health is not None:
        result["checks"] = validate_checks(
            health.get("host") or "localhost",
            result,
            health.get("inputs") or {},
            health.get("expected") or {},
            health.get("intent") or INTENT_PATH,
        )
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
