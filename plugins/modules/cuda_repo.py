#!/usr/bin/python
# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)


DOCUMENTATION = r"""
---
module: cuda_repo
short_description: Add NVIDIA's CUDA apt repository through a verified cuda-keyring, changing only what differs
version_added: 0.2.0
description:
  - The applier of role C(gpucluster.fabric.cuda_repo)'s steps, after the checks of
    M(gpucluster.fabric.cuda_repo_probe) (the same code) - the inputs, the other apt sources of the repository, the
    installed keyring and, when something must be verified, the cuda-keyring package and the repository's
    signature. Any problem fails the task before anything changes, with every problem in one message.
  - C(install) installs the verified cuda-keyring (C(dpkg -i) of the bytes just checked) when the installed one is not
    O(keyring_version) or its keyring is not exactly O(key_fingerprint).
  - C(configure) writes the keyring package's own source file with the one entry for O(base_url), signed by the
    package's keyring. Then, where either step changed something or apt has no lists of the repository yet, it
    refreshes apt's index (C(apt-get update), tried three times; not in check mode, and only when O(root=/)).
  - In check mode it reports both and, when apt has no lists of the repository yet, returns the libnccl2/libnccl-dev
    builds the verified index offers (RV(offered_nccl)), so that the nccl role can predict its installation.
  - An action plugin of the same name reads O(keyring_deb_src) on the controller and passes its bytes to the module.
options:
  keyring_deb_src:
    description: Path on the controller to the cuda-keyring .deb to use instead of downloading it.
    type: str
    default: ""
  run_tags:
    description:
      - The run's C(ansible_run_tags). When it names some steps' tags (C(cuda_repo_install), C(cuda_repo_configure)),
        only those steps run; C(cuda_repo_preflight) alone runs the checks only.
    type: list
    elements: str
    default: []
  skip_tags:
    description: The run's C(ansible_skip_tags); the steps whose tags it names do not run.
    type: list
    elements: str
    default: []
author: gpucluster.fabric maintainers (@gpucluster)
extends_documentation_fragment:
  - gpucluster.fabric.cuda_repo
  - gpucluster.fabric.applier
  - gpucluster.fabric.attributes
  - gpucluster.fabric.attributes.posix
notes:
  - Needs C(dpkg-deb) and, to verify the signature, C(gpgv) on the host.
"""

EXAMPLES = r"""
- name: Add NVIDIA's CUDA repository through the verified cuda-keyring
  gpucluster.fabric.cuda_repo:
    base_url: https://developer.download.nvidia.com
    key_fingerprint: EB693B3035CD5710E231E123A4B469963BF863CC
    host: "{{ inventory_hostname }}"
    header: "{{ ansible_managed | comment }}"
  register: cuda_repo_applied
"""

RETURN = r"""
steps:
  description: The steps this run applied.
  returned: always
  type: list
  elements: str
  sample: [install, configure]
changes:
  description: What was changed (or, in check mode, would be), each with why.
  returned: always
  type: list
  elements: dict
  sample: [{what: package cuda-keyring, why: "installed none, wanted 1.1-1"}]
list_path:
  description: The source file written (the keyring package's own).
  returned: always
  type: str
  sample: /etc/apt/sources.list.d/cuda-debian12-x86_64.list
source_entry:
  description: The one entry that file holds.
  returned: always
  type: str
apt_lists:
  description: apt's list files of the repository before this run; empty when apt did not know it yet.
  returned: always
  type: list
  elements: str
installed:
  description: The installed cuda-keyring version and its keyring's fingerprints (after the installation).
  returned: always
  type: dict
downloaded:
  description: What was fetched from the repository in this call (C(cuda-keyring), C(InRelease), C(Packages.gz)).
  returned: always
  type: list
  elements: str
offered_nccl:
  description: The libnccl2 and libnccl-dev versions in the verified package index, {package -> [versions]}.
  returned: in check mode, when apt has no lists of the repository
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.cuda_repo_probe import (  # noqa: E402
    APPLY_ARGUMENT_SPEC,
    apply,
)


def build_module():
    return AnsibleModule(argument_spec=APPLY_ARGUMENT_SPEC, supports_check_mode=True)


def main():
    apply(build_module())


if __name__ == "__main__":
    main()
