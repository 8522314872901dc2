# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Filters of roles nccl and cuda_repo: NCCL versions, nccl.conf, apt and OpenPGP parsing (each documented in
<name>.yml; logic in module_utils)."""

from ansible.errors import AnsibleFilterError
from ansible_collections.gpucluster.fabric.plugins.module_utils import nccl
from ansible_collections.gpucluster.fabric.plugins.module_utils.openpgp import normalize_fingerprint


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
