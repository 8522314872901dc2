#!/usr/bin/python
# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

DOCUMENTATION = r"""
---
module: nccl
short_description: Check role nccl's input and packages, pin the exact NCCL and write nccl.conf, only what differs
description:
  - Role C(gpucluster.fabric.nccl) around apt. Checks the input (the NCCL/CUDA pair, the build revision,
    C(nccl_conf)'s names and values, NCCL's debug-only variables), every problem at once, then reads the installed
    and offered packages (C(dpkg-query), C(apt-cache madison)) and refuses a build the repositories do not offer, or
    a change of an installed NCCL without O(allow_version_change), before any change.
  - Then writes the apt pin of the exact build (C(/etc/apt/preferences.d/gpucluster-nccl), so that apt never
    prefers another) and O(conf_path), each only where it differs, and returns each change with its reason
    (RV(changes)); apt installs the packages after it.
  - With O(library=true), instead reads the version the installed C(libnccl.so.2) reports (C(ncclGetVersion)) and
    fails when it is not the pinned one (another libnccl.so.2 may shadow it).
  - With O(restore_pin), only writes the pin of that installed version (or removes it for V(absent)), as the role
    does when an install fails, so that the host is left as it was.
version_added: 0.2.0
author: gpucluster.fabric maintainers (@gpucluster)
extends_documentation_fragment:
  - gpucluster.fabric.attributes
  - gpucluster.fabric.attributes.posix
  - gpucluster.fabric.applier
options:
  nccl_version:
    description: The NCCL release, C(X.Y.Z) (role variable C(nccl_version)).
    type: raw
    required: true
  cuda_version:
    description: The CUDA C(major.minor) the build is for (C(nccl_cuda_version)).
    type: raw
    required: true
  package_revision:
    description: NVIDIA's Debian revision of the build (C(nccl_package_revision)).
    type: raw
    default: 1
  conf:
    description: The NCCL variables of C(/etc/nccl.conf) (C(nccl_conf)).
    type: dict
    default: {}
  allow_debug_variables:
    description: Debug-only NCCL variables the site allows in C(conf) (C(nccl_conf_allow_debug_variables)).
    type: list
    elements: raw
    default: []
  conf_path:
    description: Where nccl.conf is written.
    type: path
    default: /etc/nccl.conf
  ib_addr_family:
    description:
      - The address family of the RoCE GID NCCL 2.21 and later select; V(ipv6) writes C(NCCL_IB_ADDR_FAMILY=AF_INET6).
        An C(NCCL_IB_ADDR_FAMILY) in O(conf) that says otherwise is refused.
    type: str
    choices: [ipv4, ipv6]
    default: ipv4
  ib_gid_index:
    description:
      - C(NCCL_IB_GID_INDEX) to write. V(auto) writes it only for NCCL before 2.21, as the index of the RoCE v2 GID of
        O(ib_addr_family) on every interface of O(roce_interfaces) (one index for all, or refused); an index is
        written as given, refused where it lies outside a RoCE port's GID table.
    type: raw
    default: auto
  roce_interfaces:
    description: The RoCE interfaces whose RDMA ports' GID tables O(ib_gid_index) reads.
    type: list
    elements: str
    default: []
  install_dev:
    description: Manage C(libnccl-dev) too (it is also managed when it is installed).
    type: bool
    default: false
  allow_version_change:
    description: Allow replacing an installed NCCL of another version.
    type: bool
    default: false
  offered_index:
    description: "C({package: [versions]}) read from the repository's signed index, checked before apt knows it."
    type: dict
    default: {}
  before_repository:
    description: Whether apt may not know the repository yet (the site preflight); check mode implies it.
    type: bool
    default: false
  required_features:
    description:
      - Features this host must support (V(dmabuf), V(nvls), V(ib_gid_auto), V(conf_file_env)), each checked against
        O(feature_minimums) for the NCCL and CUDA versions given, the running kernel and the installed rdma-core; a
        component whose version is unknown is warned about as not checked, never passed.
    type: list
    elements: str
    default: []
  feature_minimums:
    description: Rows C({feature, component, minimum, source}), the role's table of minimum versions with sources.
    type: list
    elements: dict
    default: []
  hold:
    description: Whether the packages are to be held with dpkg (role variable C(nccl_hold)), for RV(hold_pending).
    type: bool
    default: true
  library:
    description: Read the version the installed C(libnccl.so.2) reports and check it (after apt installed it).
    type: bool
    default: false
  library_in_place:
    description:
      - With O(state=present), when every package is already installed at the pinned build (RV(in_place)), also
        check the library as O(library) does, before any change, and return RV(version_code) - the check that
        follows an install, without a second call when apt has nothing to do.
    type: bool
    default: false
  restore_pin:
    description: Write only the pin of this installed version, or remove the pin with V(absent).
    type: str
    default: ""
"""

EXAMPLES = r"""
- name: Check the input and the packages, pin NCCL 2.21.5 for CUDA 12.4 and write nccl.conf
  gpucluster.fabric.nccl:
    host: "{{ inventory_hostname }}"
    nccl_version: "2.21.5"
    cuda_version: "12.4"
    conf: {NCCL_IB_HCA: [mlx5_0, mlx5_1]}
  register: nccl
"""

RETURN = r"""
package_version:
  description: The exact Debian version, C(<nccl_version>-<revision>+cuda<major.minor>).
  returned: success
  type: str
  sample: 2.21.5-1+cuda12.4
installed:
  description: "Installed NCCL packages, C({package: {version, held}})."
  returned: success
  type: dict
packages:
  description: The packages the role manages (C(libnccl2), and C(libnccl-dev) when asked for or installed).
  returned: success
  type: list
  elements: str
unverifiable:
  description: Whether apt does not know the repository yet, so an installation cannot be simulated.
  returned: success
  type: bool
in_place:
  description: Whether every package of RV(packages) is installed at RV(package_version) (apt has nothing to do).
  returned: success
  type: bool
hold_pending:
  description: The packages of RV(packages) whose dpkg selection is not yet what O(hold) asks for (or not installed).
  returned: success
  type: list
  elements: str
version_code:
  description: What C(ncclGetVersion) of the installed library returned (with O(library=true), or with
    O(library_in_place=true) when RV(in_place)).
  returned: with library, or with library_in_place when in_place
  type: int
changes:
  description: What was changed (or, in check mode, would be), each with why.
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.nccl import ARGUMENT_SPEC, run  # noqa: E402


def main():
    run(AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True))


if __name__ == "__main__":
    main()
