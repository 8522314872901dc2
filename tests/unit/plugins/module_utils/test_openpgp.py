import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _load import ROOT, load  # noqa: E402

openpgp = load("openpgp")
FIXTURES = ROOT / "tests" / "fixtures" / "openpgp"


def gpg_fingerprints():
    lines = (FIXTURES / "gpg-list-keys.txt").read_text().splitlines()
    return [line.split(":")[9] for line in lines if line.startswith("fpr:")]


def test_binary_keyring_matches_gpg():
    info = openpgp.keyring_info((FIXTURES / "rsa2048.gpg").read_bytes())
    assert [k["fingerprint"] for k in info["keys"]] == [gpg_fingerprints()[0]]
    assert info["keys"][0]["version"] == 4


def test_armored_keyring_matches_gpg():
    info = openpgp.keyring_info((FIXTURES / "ed25519.asc").read_bytes())
    assert [k["fingerprint"] for k in info["keys"]] == [gpg_fingerprints()[1]]


def test_two_keys_in_file_order():
    info = openpgp.keyring_info((FIXTURES / "two-keys.gpg").read_bytes())
    assert [k["fingerprint"] for k in info["keys"]] == gpg_fingerprints()


def test_truncated_keyring_is_an_error():
    data = (FIXTURES / "rsa2048.gpg").read_bytes()
    with pytest.raises(openpgp.OpenPGPError, match="truncated"):
        openpgp.keyring_info(data[:-10])


def test_garbage_is_an_error():
    with pytest.raises(openpgp.OpenPGPError, match="not an OpenPGP packet"):
        openpgp.keyring_info(b"deb [signed-by=/x] http://example.invalid/ /\n")


@pytest.mark.parametrize(
    "value, expected",
    [
        ("EB69 3B30 35CD 5710 E231 E123  A4B4 6996 3BF8 63CC", "EB693B3035CD5710E231E123A4B469963BF863CC"),
        ("0xeb693b3035cd5710e231e123a4b469963bf863cc", "EB693B3035CD5710E231E123A4B469963BF863CC"),
        ("A4B469963BF863CC", None),  # a long key ID is not a fingerprint
        ("ZZ693B3035CD5710E231E123A4B469963BF863CC", None),
    ],
)
def test_normalize_fingerprint(value, expected):
    assert openpgp.normalize_fingerprint(value) == expected


def fingerprints(listing):
    return [line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:")]


@pytest.mark.skipif(shutil.which("gpg") is None, reason="gpg not installed")
def test_fresh_key_matches_gpg(tmp_path):
    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    env = dict(os.environ, GNUPGHOME=str(home))

    def gpg(*arguments):
        return subprocess.run(["gpg", *arguments], env=env, check=True, capture_output=True).stdout

    gpg("--batch", "--passphrase", "", "--quick-gen-key", "t <t@t.invalid>", "rsa1024", "sign")
    primary = fingerprints(gpg("--with-colons", "--list-keys").decode())[0]
    gpg("--batch", "--passphrase", "", "--pinentry-mode", "loopback", "--quick-add-key", primary, "rsa1024", "encr")
    expected = fingerprints(gpg("--with-colons", "--list-keys").decode())
    assert len(expected) == 2
    exported = gpg("--export")
    subprocess.run(["gpgconf", "--kill", "gpg-agent"], env=env, check=False)
    info = openpgp.keyring_info(exported)
    assert len(info["keys"]) == 1
    assert [info["keys"][0]["fingerprint"]] + info["keys"][0]["subkeys"] == expected
