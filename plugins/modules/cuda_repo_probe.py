#!/usr/bin/python
# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)


DOCUMENTATION = r"""
---
module: cuda_repo_probe
short_description: Check NVIDIA's CUDA apt repository setup on a host, verify cuda-keyring, optionally install it
description:
  - In one call on the host, for the C(gpucluster.fabric.cuda_repo) role, derives the NVIDIA repository name and
    architecture (from O(distro)/O(arch) or C(/etc/os-release) and the machine), checks the inputs, scans the apt
    sources for other or C(trusted=yes) entries for the CUDA repository, and reads the installed C(cuda-keyring)
    version and the fingerprints of the keyring it installed.
  - It downloads only when something must be verified, that is when the installed keyring package is not
    O(keyring_version), the installed keyring is not exactly O(key_fingerprint), the source file does not hold the
    entry for O(base_url) yet, or the repository's offered NCCL builds are wanted (O(offered_nccl)). Then, in its own
    temporary directory (always removed before it returns), it downloads the C(cuda-keyring) package (or takes the
    bytes of the controller's .deb from the action plugin), checks its name and version with C(dpkg-deb), checks that
    its keyring holds exactly O(key_fingerprint), verifies the repository's C(InRelease) with C(gpgv) against that
    keyring, and reads the libnccl2/libnccl-dev versions from the C(Packages.gz) whose SHA256 the verified
    C(InRelease) lists.
  - Every problem found is returned in RV(errors), each naming the role variable and the fix; the module fails on
    them only with O(fail_on_errors=true) (then with all of them in one message). With O(install=true) it installs
    the package bytes it has just verified (C(dpkg -i)) and fails on any error.
  - An action plugin of the same name runs on the controller first; it reads O(keyring_deb_src) there and passes
    its bytes to the module.
version_added: 0.2.0
author: gpucluster.fabric maintainers (@gpucluster)
extends_documentation_fragment:
  - gpucluster.fabric.cuda_repo
  - gpucluster.fabric.attributes
  - gpucluster.fabric.attributes.posix
options:
  keyring_deb_src:
    description:
      - Path on the controller to the cuda-keyring .deb to use instead of downloading it. Read by the action plugin,
        which reports a missing file in RV(errors).
    type: str
    default: ""
  offered_nccl:
    description:
      - When to read the libnccl2/libnccl-dev versions the repository offers (needs O(verify_signature)).
      - V(auto) reads them when apt has no lists of the repository yet (apt cannot tell what it offers).
    type: str
    choices: [auto, always, never]
    default: auto
  fail_on_errors:
    description: Fail when RV(errors) is not empty, naming the host and every problem in the message.
    type: bool
    default: false
  install:
    description:
      - Install the verified package with C(dpkg -i) when the installed one is not the wanted version or its keyring
        is not exactly O(key_fingerprint). Fails on any error. In check mode, reports the change only.
    type: bool
    default: false
  root:
    description:
      - Root of the host's file system (tests) for the files read, dpkg's database and C(dpkg --root) when installing.
    type: path
    default: /
attributes:
  check_mode:
    description: Reads and verifies only, in check mode as well; with O(install=true) it reports the installation.
    support: full
  diff_mode:
    description: No diff.
    support: none
notes:
  - Needs C(dpkg-deb) and, to verify the signature, C(gpgv) on the host.
"""

EXAMPLES = r"""
- name: Check the host, the inputs and (when needed) the keyring and the repository signature
  gpucluster.fabric.cuda_repo_probe:
    base_url: https://developer.download.nvidia.com
    key_fingerprint: EB693B3035CD5710E231E123A4B469963BF863CC
  register: cuda_repo_probe

- name: Install the verified cuda-keyring
  gpucluster.fabric.cuda_repo_probe:
    base_url: https://developer.download.nvidia.com
    key_fingerprint: EB693B3035CD5710E231E123A4B469963BF863CC
    install: true
  when: cuda_repo_probe.install_needed
"""

RETURN = r"""
errors:
  description: Every problem found, each naming the role variable and the fix; empty when all is well.
  returned: always
  type: list
  elements: str
distro:
  description: NVIDIA repository name used.
  returned: always
  type: str
  sample: debian12
arch:
  description: NVIDIA architecture directory used.
  returned: always
  type: str
  sample: x86_64
url:
  description: The repository URL (no trailing slash).
  returned: always
  type: str
  sample: https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64
list_path:
  description: The source file the role writes (the keyring package's own).
  returned: always
  type: str
  sample: /etc/apt/sources.list.d/cuda-debian12-x86_64.list
source_entry:
  description: The one line that file must hold.
  returned: always
  type: str
  sample: "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] https://m/compute/cuda/repos/debian12/x86_64/ /"
keyring_path:
  description: The keyring the package installs and the entry names in C(signed-by).
  returned: always
  type: str
  sample: /usr/share/keyrings/cuda-archive-keyring.gpg
installed:
  description: The installed cuda-keyring version (empty when not installed) and its keyring's fingerprints.
  returned: always
  type: dict
  sample: {version: 1.1-1, fingerprints: [EB693B3035CD5710E231E123A4B469963BF863CC]}
list_current:
  description: Whether the source file holds exactly RV(source_entry).
  returned: always
  type: bool
apt_lists:
  description: apt's list files of the repository (C(/var/lib/apt/lists)); empty when apt does not know it yet.
  returned: always
  type: list
  elements: str
install_needed:
  description: Whether the keyring package must be installed (wrong version, or a keyring that is not the key).
  returned: always
  type: bool
downloaded:
  description: What was fetched from the repository in this call (C(cuda-keyring), C(InRelease), C(Packages.gz)).
  returned: always
  type: list
  elements: str
offered_nccl:
  description: The libnccl2 and libnccl-dev versions in the verified package index, {package -> [versions]}.
  returned: when the index was read
  type: dict
  sample: {libnccl2: [2.21.5-1+cuda12.4], libnccl-dev: [2.21.5-1+cuda12.4]}
"""

from ansible.module_utils.basic import AnsibleModule  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.cuda_repo_probe import ARGUMENT_SPEC, run  # noqa: E402


def build_module():
    return AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)


def main():
    run(build_module())


if __name__ == "__main__":
    main()
