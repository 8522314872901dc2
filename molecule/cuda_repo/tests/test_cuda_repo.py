"""Verify cuda_repo on a converged host against the lab CUDA mirror (testinfra)."""

import base64
import importlib.util
import json
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
MANIFEST = json.loads(
    (Path(os.environ.get("LAB_MIRROR_CACHE") or "/var/tmp/gpucluster-lab-mirror") / "current.json").read_text()
)
KEYRING = "/usr/share/keyrings/cuda-archive-keyring.gpg"
LIST = "/etc/apt/sources.list.d/cuda-debian12-x86_64.list"
REPO_URL = MANIFEST["variants"]["signed"] + "/compute/cuda/repos/debian12/x86_64/"


def openpgp():
    spec = importlib.util.spec_from_file_location("openpgp", ROOT / "plugins" / "module_utils" / "openpgp.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fingerprints(host, path):
    # base64: testinfra's ansible backend cannot carry binary file content
    data = base64.b64decode(host.check_output(f"base64 -w0 {path}"))
    return [key["fingerprint"] for key in openpgp().keyring_info(data)["keys"]]


def test_keyring_package_installed(host):
    package = host.package("cuda-keyring")
    assert package.is_installed
    assert package.version == "1.1-1"


def test_keyring_holds_only_the_mirror_key(host):
    assert host.file(KEYRING).mode == 0o644
    assert fingerprints(host, KEYRING) == [MANIFEST["fingerprint"]]


def test_one_source_entry_signed_by_the_keyring(host):
    entries = host.check_output(
        "grep -rhE 'compute/cuda/repos/' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null"
        " | grep -v '^#' || true"
    ).splitlines()
    assert entries == [f"deb [signed-by={KEYRING}] {REPO_URL} /"]
    assert "trusted=yes" not in host.file(LIST).content_string


def test_pin_file_from_the_keyring_package(host):
    pin = host.file("/etc/apt/preferences.d/cuda-repository-pin-600")
    assert "Pin: release l=NVIDIA CUDA" in pin.content_string
    assert "Pin-Priority: 600" in pin.content_string


def test_mirror_key_not_trusted_globally(host):
    paths = host.check_output("find /etc/apt/trusted.gpg /etc/apt/trusted.gpg.d -type f 2>/dev/null || true").split()
    for path in paths:
        if path.endswith((".gpg", ".asc")) or path == "/etc/apt/trusted.gpg":
            assert MANIFEST["fingerprint"] not in fingerprints(host, path), path


def test_apt_uses_the_repository_at_priority_600(host):
    policy = host.check_output("apt-cache policy")
    assert f"600 {REPO_URL.rstrip('/')}  Packages" in policy or f"600 {REPO_URL} Packages" in policy, policy
    madison = host.check_output("apt-cache madison libnccl2")
    for build in MANIFEST["nccl"]:
        assert build["package_version"] in madison


@pytest.mark.parametrize(
    "variant, message",
    [("wrongkey", "NO_PUBKEY"), ("unsigned", "is not signed")],
)
def test_apt_refuses_the_bad_variants_with_this_keyring(host, variant, message):
    """apt itself, given the installed keyring, rejects a repository it does not sign (no trusted=yes anywhere)."""
    url = MANIFEST["variants"][variant] + "/compute/cuda/repos/debian12/x86_64/"
    result = host.run(
        "d=$(mktemp -d) && mkdir -p $d/lists/partial && "
        f"echo 'deb [signed-by={KEYRING}] {url} /' > $d/sources.list && "
        "apt-get update -o Dir::Etc::SourceList=$d/sources.list -o Dir::Etc::SourceParts=/nonexistent "
        "-o Dir::State::Lists=$d/lists; rc=$?; rm -rf $d; exit $rc"
    )
    assert result.rc != 0, result.stdout
    assert message in result.stdout + result.stderr
