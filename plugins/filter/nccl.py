# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)


DOCUMENTATION = r"""
name: nccl_package_version
short_description: NVIDIA's libnccl2 package version for an NCCL release and CUDA version
description:
  - Returns C(2.21.5-1+cuda12.4) for C('2.21.5') and C('12.4'). The companion filters of this file
    (C(nccl_version_errors), C(nccl_conf), C(nccl_feature_report), C(nccl_parse_package_version),
    C(nccl_parse_dpkg_query), C(nccl_parse_madison), C(nccl_parse_package_index), C(apt_release_index_sha256),
    C(nccl_version_code),
    C(openpgp_fingerprint)) return validation results for the nccl and cuda_repo roles' preflight.
positional: _input, cuda_version, revision
options:
  _input:
    description: NCCL release, X.Y.Z (string).
    type: str
    required: true
  cuda_version:
    description: CUDA major.minor (string).
    type: str
    required: true
  revision:
    description: Debian revision of NVIDIA's package.
    type: int
    default: 1
author:
  - gpucluster.fabric contributors
"""

EXAMPLES = r"""
nccl_package: "{{ '2.21.5' | gpucluster.fabric.nccl_package_version('12.4') }}"  # 2.21.5-1+cuda12.4
"""

RETURN = r"""
_value:
  description: The Debian version string.
  type: str
"""

from ansible.errors import AnsibleFilterError  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils import nccl  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.openpgp import normalize_fingerprint  # noqa: E402


def nccl_package_version(nccl_version, cuda_version, revision=1):
    try:
        return nccl.package_version(nccl_version, cuda_version, revision)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def nccl_version_code(nccl_version):
    return nccl.version_code(nccl_version)


def nccl_version_errors(nccl_version, cuda_version, revision=1):
    return nccl.version_errors(nccl_version, cuda_version, revision)


def nccl_parse_package_version(text):
    return nccl.parse_package_version(text)


def nccl_conf(settings, allowed_debug=()):
    return nccl.conf_lines(settings, allowed_debug)


def nccl_feature_report(features, table, facts):
    return nccl.feature_report(features, table, facts)


def nccl_parse_dpkg_query(text):
    return nccl.parse_dpkg_query(text)


def nccl_parse_madison(text):
    return nccl.parse_madison(text)


def nccl_parse_package_index(text):
    return nccl.parse_package_index(text)


def apt_release_index_sha256(text, name):
    return nccl.release_index_sha256(text, name)


def openpgp_fingerprint(value):
    """Normalised fingerprint (upper-case hex, no spaces), or '' when ``value`` is not one."""
    return normalize_fingerprint(value) or ""


class FilterModule:
    def filters(self):
        return {
            "nccl_package_version": nccl_package_version,
            "nccl_version_code": nccl_version_code,
            "nccl_version_errors": nccl_version_errors,
            "nccl_parse_package_version": nccl_parse_package_version,
            "nccl_conf": nccl_conf,
            "nccl_feature_report": nccl_feature_report,
            "nccl_parse_dpkg_query": nccl_parse_dpkg_query,
            "nccl_parse_madison": nccl_parse_madison,
            "nccl_parse_package_index": nccl_parse_package_index,
            "apt_release_index_sha256": apt_release_index_sha256,
            "openpgp_fingerprint": openpgp_fingerprint,
        }
