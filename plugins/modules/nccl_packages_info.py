#!/usr/bin/python
# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)

DOCUMENTATION = r"""
---
module: nccl_packages_info
short_description: Read the installed and offered NCCL packages and decide what the nccl role may do
description:
  - Reads the installed C(libnccl2)/C(libnccl-dev) (C(dpkg-query)) and the versions the configured apt repositories
    offer (C(apt-cache madison)), and decides which packages the nccl role manages and what it must refuse - a
    build the repositories do not offer, or a change of an installed NCCL version without
    O(allow_version_change).
  - Before apt knows the CUDA repository (check mode on a fresh host, the site preflight), the offer cannot be read
    from apt; O(offered_index) (what M(gpucluster.fabric.cuda_repo_probe) or the cuda_repo role read from the
    repository's signed package index) is checked instead when given.
  - Reads only; never changes anything. Safe in check mode.
version_added: 0.1.0
options:
  package_version:
    description: The exact Debian version wanted, C(<nccl_version>-<revision>+cuda<major.minor>).
    type: str
    required: true
  nccl_version:
    description: The inventory's C(nccl_version), for the messages.
    type: str
    required: true
  cuda_version:
    description: The inventory's C(nccl_cuda_version), for the messages.
    type: str
    required: true
  install_dev:
    description: Manage C(libnccl-dev) too (it is also managed when it is installed).
    type: bool
    default: false
  allow_version_change:
    description: Allow replacing an installed NCCL of another version.
    type: bool
    default: false
  offered_index:
    description: "C({package: [versions]}) read from the repository's signed index, used before apt knows it."
    type: dict
    default: {}
  before_repository:
    description: Whether apt may not know the repository yet (the site preflight); check mode implies it.
    type: bool
    default: false
author: gpucluster.fabric maintainers (@gpucluster)
extends_documentation_fragment:
  - gpucluster.fabric.attributes
  - gpucluster.fabric.attributes.info_module
  - gpucluster.fabric.attributes.posix
"""

EXAMPLES = r"""
- name: Read the installed and offered NCCL packages
  gpucluster.fabric.nccl_packages_info:
    package_version: 2.21.5-1+cuda12.4
    nccl_version: 2.21.5
    cuda_version: "12.4"
  register: nccl_packages
"""

RETURN = r"""
installed:
  description: "Installed NCCL packages, C({package: {version, held}})."
  type: dict
  returned: always
packages:
  description: The packages the role manages (C(libnccl2), and C(libnccl-dev) when asked for or installed).
  type: list
  elements: str
  returned: always
offered:
  description: The versions offered per package (apt's, or O(offered_index) before apt knows the repository).
  type: dict
  returned: always
unverifiable:
  description: Whether apt does not know the repository yet, so an installation cannot be simulated.
  type: bool
  returned: always
errors:
  description: What the role must refuse, each naming the host, the variables and the fix.
  type: list
  elements: str
  returned: always
notes:
  description: What could not be verified, and why.
  type: list
  elements: str
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.nccl import package_decision  # noqa: E402

PACKAGES = ["libnccl2", "libnccl-dev"]


def main():
    module = AnsibleModule(
        argument_spec={
            "package_version": {"type": "str", "required": True},
            "nccl_version": {"type": "str", "required": True},
            "cuda_version": {"type": "str", "required": True},
            "install_dev": {"type": "bool", "default": False},
            "allow_version_change": {"type": "bool", "default": False},
            "offered_index": {"type": "dict", "default": {}},
            "before_repository": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    params = module.params
    showformat = "${Package} ${Version} ${db:Status-Want} ${db:Status-Status}\n"
    rc, dpkg, err = module.run_command(["dpkg-query", "--show", "--showformat", showformat, *PACKAGES])
    if rc > 1:
        module.fail_json(msg=f"dpkg-query failed (rc {rc}): {err.strip()}")
    _rc, madison, _err = module.run_command(["apt-cache", "madison", *PACKAGES])
    decision = package_decision(
        dpkg_text=dpkg,
        madison_text=madison,
        package_version=params["package_version"],
        nccl_version=params["nccl_version"],
        cuda_version=params["cuda_version"],
        install_dev=params["install_dev"],
        allow_version_change=params["allow_version_change"],
        offered_index=params["offered_index"],
        before_repository=params["before_repository"] or module.check_mode,
    )
    module.exit_json(changed=False, **decision)


if __name__ == "__main__":
    main()
