# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""The options of NVIDIA's CUDA repository and its keyring, the same in modules cuda_repo and cuda_repo_probe (their
argument spec: plugins/module_utils/cuda_repo_probe.py)."""


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  base_url:
    description: Base URL holding C(compute/cuda/repos/<distro>/<arch>/) (C(https://), C(http://) or C(file://)).
    type: str
    required: true
  distro:
    description: NVIDIA repository name (C(ubuntu2204), C(debian12), ...); empty derives it from C(/etc/os-release).
    type: str
    default: ""
  arch:
    description: NVIDIA architecture directory (C(x86_64), C(sbsa)); empty derives it from the machine.
    type: str
    default: ""
  keyring_version:
    description: The cuda-keyring package version wanted.
    type: str
    default: "1.1-1"
  key_fingerprint:
    description: Fingerprint of the only key the repository keyring may hold (spaces and case are ignored).
    type: str
    required: true
  keyring_deb_content:
    description: Base64 of the .deb named by O(keyring_deb_src); set by the action plugin, not by hand.
    type: str
    default: ""
  verify_signature:
    description: Verify the repository's C(InRelease) with C(gpgv) against the keyring.
    type: bool
    default: true
  validate_certs:
    description: Validate TLS certificates when downloading.
    type: bool
    default: true
  timeout:
    description: Seconds per download attempt. A transient network error is retried twice, an HTTP answer is final.
    type: int
    default: 30
"""
