#!/usr/bin/python
# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

DOCUMENTATION = r"""
---
module: gpudirect_facts
short_description: Gather what decides GPUDirect RDMA (DMA-BUF or nvidia-peermem) and decide it
description:
  - Reads the kernel release, the rdma-core version (dpkg), whether ib_core is the inbox one or MLNX_OFED/DOCA's
    (loaded module's taint, built-in, C(modules.dep) path, the PeerDirect symbol in C(/proc/kallsyms), OFED
    packages, C(ofed_info -s)), whether the NVIDIA kernel module is the open one (C(/proc/driver/nvidia/version)),
    whether C(nvidia-peermem.ko) exists, and the NCCL version when known (dpkg C(libnccl2) or O(nccl_version)).
  - Decides the GPUDirect RDMA mode from those facts - DMA-BUF when kernel >= 5.12, rdma-core >= 34, NCCL >= 2.13
    and the open GPU kernel modules; nvidia-peermem when DMA-BUF is out of reach and ib_core is MLNX_OFED/DOCA;
    none otherwise or without an NVIDIA driver - and says why.
  - Also reports whether kernel modules can be loaded here (not in containers, not without C(/proc/modules)) and the
    NVIDIA/Mellanox RDMA adapters on the PCI bus with the kernel modules they need.
  - Reads only; never changes anything. Safe in check mode.
version_added: 0.1.0
author: gpucluster.fabric maintainers (@gpucluster)
extends_documentation_fragment:
  - gpucluster.fabric.attributes
  - gpucluster.fabric.attributes.info_module
  - gpucluster.fabric.attributes.posix
options:
  root:
    description:
      - Directory that stands for C(/). Point it at a captured tree to decide for it instead of the live system;
        commands (C(ofed_info), C(modinfo)) only run when O(root=/).
    type: path
    default: /
  mode:
    description: The requested mode; V(auto) decides from the facts, the others are checked against them.
    type: str
    choices: [auto, peermem, dmabuf, none]
    default: auto
  nccl_version:
    description:
      - NCCL version the jobs use (V(2.21.5), a Debian version, or an C(ncclGetVersion) code such as V(22809)).
        Empty reads dpkg C(libnccl2); PyTorch wheels bundle their own NCCL, which only this option can tell.
    type: str
    default: ""
  hca_driver_map:
    description: Kernel driver bound to an adapter -> kernel modules that adapter needs for RDMA.
    type: dict
    default: {mlx5_core: [mlx5_core, mlx5_ib], mlx4_core: [mlx4_core, mlx4_ib]}
  hca_unbound_modules:
    description: Modules for an NVIDIA/Mellanox adapter that no driver is bound to yet.
    type: list
    elements: str
    default: [mlx5_core, mlx5_ib]
  kallsyms:
    description: Look for the PeerDirect symbol in C(/proc/kallsyms) (about 150,000 lines) when ib_core is in use.
    type: bool
    default: true
  core_modules:
    description:
      - Modules the host loads before the adapters' own (RV(hca_modules)); with O(extra_modules) they make
        RV(wanted).
    type: list
    elements: str
    default: []
  extra_modules:
    description: Modules the host loads after the adapters' own.
    type: list
    elements: str
    default: []
  hca_detect:
    description: Whether the adapters' modules (RV(hca_modules)) are part of RV(wanted).
    type: bool
    default: true
  runtime_load:
    description:
      - Whether RV(wanted) is to be loaded now. V(null) decides from RV(facts.runtime_load) (not in a container,
        not without C(/proc/modules)).
      - When the modules are to be loaded, C(modprobe --dry-run --all) checks that every one can be; a module that
        cannot is reported in RV(load_errors).
    type: raw
  fail_on_errors:
    description:
      - Fail when the requested O(mode) cannot be honoured (RV(errors)) or a module cannot be loaded (RV(load_errors)),
        with every problem in one message, one line each. The facts are returned either way.
    type: bool
    default: false
  host:
    description: Host name each line of the failure message starts with (the role passes C(inventory_hostname)).
    type: str
    default: ""
notes:
  - Debian and Ubuntu (dpkg) only for the rdma-core and NCCL versions.
"""

EXAMPLES = r"""
- name: Decide GPUDirect RDMA
  gpucluster.fabric.gpudirect_facts:
  register: gd

- name: Show the decision
  ansible.builtin.debug:
    msg: "{{ gd.gpudirect.mode }}: {{ gd.gpudirect.reason }}"

- name: Decide for a tree captured from another host, with the NCCL that PyTorch bundles
  gpucluster.fabric.gpudirect_facts:
    root: /srv/captures/node17
    nccl_version: "22809"
"""

RETURN = r"""
gpudirect:
  description: The decision, as recorded in the C(gpucluster_gpudirect) fact.
  returned: unless O(mode) cannot be honoured (see RV(errors))
  type: dict
  contains:
    mode: {description: "peermem, dmabuf or none", type: str, returned: always}
    reason: {description: "Why, naming the facts that decided it", type: str, returned: always}
  sample: {mode: dmabuf, reason: "DMA-BUF: kernel 6.1.0-18-amd64 >= 5.12, rdma-core 44.0 >= 34, ..."}
errors:
  description: Why O(mode) cannot be honoured on this host (for example peermem without an NVIDIA driver).
  returned: always
  type: list
  elements: str
decision_warnings:
  description:
    - O(mode) can be honoured but goes against the facts (for example dmabuf on a 5.4 kernel).
    - Also shown as Ansible warnings.
  returned: always
  type: list
  elements: str
facts:
  description: What the decision was made from.
  returned: always
  type: dict
  contains:
    kernel: {description: "C(release)", type: dict, returned: always}
    rdma_core: {description: "C(package), C(version), C(major); null when not installed", type: dict, returned: always}
    ib_core:
      description: "C(state) loaded|builtin|available|missing, C(source) inbox|mlnx_ofed|absent, C(peer_memory_api),
        C(ofed_packages), C(ofed_info), C(evidence)"
      type: dict
      returned: always
    nvidia: {description: "C(present), C(loaded), C(version), C(open), C(evidence)", type: dict, returned: always}
    peermem:
      description: "C(loaded), C(available), C(path), C(persisted_in) (modules-load.d files that load it at boot)"
      type: dict
      returned: always
    nccl: {description: "C(version), C(source)", type: dict, returned: always}
    runtime_load:
      description: "C(possible), C(reason): whether kernel modules can be loaded here"
      type: dict
      returned: always
    hca:
      description: "NVIDIA/Mellanox network adapters: address, vendor, device, class, driver"
      type: list
      returned: always
hca_modules:
  description: Kernel modules the adapters in RV(facts.hca) need, from O(hca_driver_map) and O(hca_unbound_modules).
  returned: always
  type: list
  elements: str
wanted:
  description:
    - Every module the host loads, in load order (O(core_modules), RV(hca_modules) when O(hca_detect),
      O(extra_modules)), C(-) spelled C(_) as the kernel reports them, each once.
  returned: always
  type: list
  elements: str
runtime_load:
  description: Whether RV(wanted) is loaded now (C(load)), and why not (C(why)).
  returned: always
  type: dict
  sample: {load: false, why: "in a container (/.dockerenv)"}
load_errors:
  description: Why RV(wanted) cannot be loaded now (C(modprobe --dry-run) failed), with the fix.
  returned: always
  type: list
  elements: str
"""


# ansible-test requires the documentation above every import.
from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.gpudirect import MODES, assess  # noqa: E402


def main():
    module = AnsibleModule(
        argument_spec={
            "root": {"type": "path", "default": "/"},
            "mode": {"type": "str", "default": "auto", "choices": list(MODES)},
            "nccl_version": {"type": "str", "default": ""},
            "hca_driver_map": {
                "type": "dict",
                "default": {"mlx5_core": ["mlx5_core", "mlx5_ib"], "mlx4_core": ["mlx4_core", "mlx4_ib"]},
            },
            "hca_unbound_modules": {"type": "list", "elements": "str", "default": ["mlx5_core", "mlx5_ib"]},
            "kallsyms": {"type": "bool", "default": True},
            "core_modules": {"type": "list", "elements": "str", "default": []},
            "extra_modules": {"type": "list", "elements": "str", "default": []},
            "hca_detect": {"type": "bool", "default": True},
            "runtime_load": {"type": "raw"},
            "fail_on_errors": {"type": "bool", "default": False},
            "host": {"type": "str", "default": ""},
        },
        supports_check_mode=True,
    )
    module.run_command_environ_update = {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"}
    params = module.params
    found = assess(module, params, params["host"])
    decision, facts = found["decision"], found["facts"]
    for warning in decision["warnings"]:
        module.warn(warning)
    result = {
        "changed": False,
        "facts": facts,
        "errors": decision["errors"],
        "decision_warnings": decision["warnings"],
        "hca_modules": found["adapters"],
        "wanted": found["wanted"],
        "runtime_load": found["runtime"],
        "load_errors": found["load_errors"],
    }
    if decision["mode"]:
        result["gpudirect"] = {"mode": decision["mode"], "reason": decision["reason"]}
    problems = found["problems"]
    if params["fail_on_errors"] and problems:
        module.fail_json(msg="\n".join(problems), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
