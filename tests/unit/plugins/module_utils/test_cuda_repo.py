import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _load import load  # noqa: E402

cuda_repo = load("cuda_repo")

FP = "2DAB59B7E049DB922CEBF45F52D59CBD1C0AA271"
URL = "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64"
OWN = "/etc/apt/sources.list.d/cuda-debian12-x86_64.list"


@pytest.mark.parametrize(
    ("os_release", "machine", "expected"),
    [
        ('ID=ubuntu\nVERSION_ID="22.04"\n', "x86_64", ("ubuntu2204", "x86_64")),
        ('ID=ubuntu\nVERSION_ID="20.04"\n', "aarch64", ("ubuntu2004", "sbsa")),
        ('ID=debian\nVERSION_ID="12"\n', "x86_64", ("debian12", "x86_64")),
        ('ID="rocky"\nVERSION_ID="9.4"\n', "ppc64le", ("rocky9", "ppc64le")),
    ],
)
def test_derive_repository(os_release, machine, expected):
    repo = cuda_repo.derive_repository("", "", cuda_repo.parse_os_release(os_release), machine)
    assert (repo["distro"], repo["arch"]) == expected


def test_given_names_win():
    repo = cuda_repo.derive_repository("debian12", "sbsa", {"ID": "debian", "VERSION_ID": "11"}, "x86_64")
    assert (repo["distro"], repo["arch"]) == ("debian12", "sbsa")


def test_names_and_apt_list_pattern():
    assert cuda_repo.repository_url("https://developer.download.nvidia.com//", "debian12", "x86_64") == URL
    assert cuda_repo.list_path("debian12", "x86_64") == OWN
    assert cuda_repo.source_entry(URL) == f"deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] {URL}/ /"
    names = [
        "developer.download.nvidia.com_compute_cuda_repos_debian12_x86%5f64_Packages",
        "developer.download.nvidia.com_compute_cuda_repos_debian12_x86%5f64_Packages.lz4",
        "developer.download.nvidia.com_compute_cuda_repos_debian12_x86_64_Packages",  # not how apt names it
        "developer.download.nvidia.com_compute_cuda_repos_debian12_sbsa_Packages",
        "developer.download.nvidia.com_compute_cuda_repos_debian12_x86%5f64_InRelease",
    ]
    assert cuda_repo.matching_lists(names, "debian12", "x86_64") == names[:2]


def test_input_errors_all_at_once():
    repo = {"distro": "debian11", "arch": "x86_64", "host": "Debian 11 x86_64"}
    errors = cuda_repo.input_errors(repo, "ftp://x", "3BF863CC", None, "1.1", distro_given=False)
    assert len(errors) == 4
    assert errors[0].startswith("cuda_repo_distro=debian11 / cuda_repo_arch=x86_64 (derived from Debian 11 x86_64)")
    repo = {"distro": "debian12", "arch": "x86_64", "host": "Debian 12 x86_64"}
    assert cuda_repo.input_errors(repo, "file:///srv/mirror", FP, FP, "1.1-1", distro_given=True) == []


def test_credentials_in_the_url_are_refused_without_repeating_them():
    """A user:password in the URL would reach the apt source, and the node check would need the network to compare
    the masked URL the intent keeps: refused in favour of apt's auth.conf.d, the secret not in the message."""
    repo = {"distro": "debian12", "arch": "x86_64", "host": "Debian 12 x86_64"}
    for url in ("https://mirror-user:s3cret@mirror.example/cuda", "http://tok3n@mirror.example/cuda"):
        (error,) = cuda_repo.input_errors(repo, url, FP, FP, "1.1-1", distro_given=True)
        assert error.startswith("cuda_repo_base_url=") and "***@mirror.example/cuda holds credentials" in error
        assert "s3cret" not in error and "tok3n" not in error and "mirror-user" not in error
        assert "/etc/apt/auth.conf.d/" in error
    assert cuda_repo.input_errors(repo, "https://mirror.example/a@b", FP, FP, "1.1-1", distro_given=True) == []


def test_find_source_entries():
    files = {
        OWN: "# Ansible managed\ndeb [signed-by=/k] " + URL + "/ /\n",
        "/etc/apt/sources.list": "deb http://debian.mirror.example/debian bookworm main\n#deb " + URL + "/ /\n",
        "/etc/apt/sources.list.d/x.list": "  deb [ Trusted=yes ] " + URL + "/ /\n",
        "/etc/apt/sources.list.d/y.sources": (
            "# comment\nTypes: deb\nURIs: " + URL + "/\nSuites: /\nTrusted: yes\n\n"
            "Types: deb\nEnabled: no\nURIs: " + URL + "/\n\nTypes: deb\nURIs: http://debian.mirror.example/debian\n"
        ),
    }
    entries = cuda_repo.find_source_entries(files)
    assert [(e["path"], e["line"], e["trusted"]) for e in entries] == [
        (OWN, 2, False),
        ("/etc/apt/sources.list.d/x.list", 1, True),
        ("/etc/apt/sources.list.d/y.sources", 3, True),
    ]
    errors = cuda_repo.source_errors(entries, OWN)
    assert len(errors) == 2
    assert errors[0].startswith(
        f"apt already has CUDA repository entries outside {OWN}: /etc/apt/sources.list.d/x.list:1:"
    )
    assert "marked trusted=yes" in errors[1] and OWN not in errors[1].split(":", 1)[1].split(".")[0]
    assert cuda_repo.source_errors(entries[:1], OWN) == []


def test_list_is_current():
    entry = cuda_repo.source_entry(URL)
    assert cuda_repo.list_is_current(f"# Ansible managed\n\n{entry}\n", entry)
    assert not cuda_repo.list_is_current(f"{entry}\n{entry}\n", entry)
    assert not cuda_repo.list_is_current(None, entry)


def test_keyring_errors():
    assert cuda_repo.keyring_errors("k", [FP], FP, "fix") == []
    assert cuda_repo.keyring_errors("k", [], FP, "fix") == [
        f"k holds no key, not exactly cuda_repo_key_fingerprint={FP}. fix"
    ]
    assert "holds A, B," in cuda_repo.keyring_errors("k", ["A", "B"], FP, "fix")[0]
