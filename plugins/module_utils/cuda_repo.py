# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""NVIDIA's CUDA apt repository: names, paths and the checks of the cuda_repo role, as pure functions.

The I/O (apt sources, dpkg, downloads, gpgv) lives in the module ``cuda_repo_probe``; everything here takes text and
returns values or error strings (empty list = fine), so it is unit-tested without a host.
"""

import fnmatch
import re

# NVIDIA's CUDA apt repositories the role supports: repository name -> architecture directories.
SUPPORTED = {
    "ubuntu2004": ("x86_64", "sbsa"),
    "ubuntu2204": ("x86_64", "sbsa"),
    "ubuntu2404": ("x86_64", "sbsa"),
    "debian12": ("x86_64", "sbsa"),
}
ARCH_BY_MACHINE = {"x86_64": "x86_64", "aarch64": "sbsa"}
PACKAGE = "cuda-keyring"
# What NVIDIA's cuda-keyring installs, and the keyring apt's signed-by names.
KEYRING_PATH = "/usr/share/keyrings/cuda-archive-keyring.gpg"
APT_LISTS_DIR = "/var/lib/apt/lists"
SOURCE_FILES = ("/etc/apt/sources.list",)
SOURCE_GLOBS = ("/etc/apt/sources.list.d/*.list", "/etc/apt/sources.list.d/*.sources")

_URL_RE = re.compile(r"(https?|file)://\S+")
_CREDENTIALS_RE = re.compile(r"((?:https?|file)://)[^/@\s]+@")
_KEYRING_VERSION_RE = re.compile(r"[0-9][0-9.]*-[0-9]+")
_CUDA_URI_RE = re.compile(r"compute/cuda/repos/")
_TRUSTED_RE = re.compile(r"\btrusted\s*=\s*yes\b", re.IGNORECASE)


def parse_os_release(text):
    """/etc/os-release as a dict (quotes removed)."""
    values = {}
    for line in (text or "").splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key and not key.startswith("#"):
            values[key] = value.strip().strip("\"'")
    return values


def derive_repository(distro, arch, os_release, machine):
    """The NVIDIA repository name and architecture directory: as given, or from os-release and the machine.

    Ubuntu 22.04 -> ubuntu2204, Debian 12 -> debian12 (NVIDIA names Ubuntu by release, Debian by major version);
    x86_64 -> x86_64, aarch64 -> sbsa. Returns {distro, arch, host}, ``host`` describing what it was derived from.
    """
    system = (os_release.get("ID") or "").lower()
    version = os_release.get("VERSION_ID") or ""
    if not distro:
        distro = system + (version.replace(".", "") if system == "ubuntu" else version.split(".")[0])
    if not arch:
        arch = ARCH_BY_MACHINE.get(machine, machine)
    host = "{} {}".format(os_release.get("PRETTY_NAME") or f"{system} {version}".strip() or "unknown system", machine)
    return {"distro": distro, "arch": arch, "host": host}


def repository_url(base_url, distro, arch):
    return f"{(base_url or '').rstrip('/')}/compute/cuda/repos/{distro}/{arch}"


def list_path(distro, arch):
    """The cuda-keyring package's own source file, the one entry the role writes."""
    return f"/etc/apt/sources.list.d/cuda-{distro}-{arch}.list"


def source_entry(url):
    return f"deb [signed-by={KEYRING_PATH}] {url}/ /"


def apt_lists_pattern(distro, arch):
    """apt names a list file after its URI with '/' turned into '_' and '_' itself quoted as %5f (apt-pkg's
    URItoFileName), so .../repos/ubuntu2204/x86_64/ is stored as ..._repos_ubuntu2204_x86%5f64_Packages."""
    return "*compute_cuda_repos_{}_{}_*Packages*".format(distro, arch.replace("_", "%5f"))


def matching_lists(names, distro, arch):
    pattern = apt_lists_pattern(distro, arch)
    return sorted(name for name in names if fnmatch.fnmatchcase(name, pattern))


def input_errors(repo, base_url, fingerprint, wanted_fingerprint, keyring_version, distro_given):
    """Errors in the role's inputs, all of them. ``wanted_fingerprint`` is the normalised ``fingerprint`` or None."""
    errors = []
    distro, arch = repo["distro"], repo["arch"]
    if distro not in SUPPORTED or arch not in SUPPORTED[distro]:
        origin = "set; the host is" if distro_given else "derived from"
        errors.append(
            f"cuda_repo_distro={distro} / cuda_repo_arch={arch} ({origin} {repo['host']}) is not an NVIDIA CUDA "
            f"repository; supported: {', '.join(SUPPORTED)} on x86_64 or sbsa. "
            "Use a supported release, or set cuda_repo_distro to the nearest one you have validated"
        )
    if not isinstance(base_url, str) or not _URL_RE.fullmatch(base_url):
        errors.append(f"cuda_repo_base_url={base_url} must be an http(s):// or file:// URL")
    elif _CREDENTIALS_RE.match(base_url):
        # Never repeated: the URL is named without what stands before the @.
        masked = _CREDENTIALS_RE.sub(r"\1***@", base_url, count=1)
        errors.append(
            f"cuda_repo_base_url={masked} holds credentials: they would be written into the apt source, and the node "
            "check would need the network to compare them; give the URL without them and put them in "
            "/etc/apt/auth.conf.d/ (apt_auth.conf(5)), which apt reads for that host"
        )
    if not wanted_fingerprint:
        errors.append(
            f"cuda_repo_key_fingerprint={fingerprint} is not a full 40- or 64-hex-digit fingerprint (a key ID is "
            "not enough): give the whole fingerprint of the repository's signing key"
        )
    if not isinstance(keyring_version, str) or not _KEYRING_VERSION_RE.fullmatch(keyring_version):
        errors.append(f"cuda_repo_keyring_version={keyring_version} must be a Debian version like 1.1-1")
    return errors


def find_source_entries(files):
    """apt source entries for NVIDIA's CUDA repository in ``files`` ({path: text}), in path order.

    One-line (``deb ...``) files: every line that is not a comment and names compute/cuda/repos/. deb822
    (``.sources``) files: every stanza whose URIs name it, unless ``Enabled: no``. Returns dicts
    {path, line (1-based), text, trusted}.
    """
    entries = []
    for path in sorted(files):
        text = files[path] or ""
        if path.endswith(".sources"):
            entries.extend(_deb822_entries(path, text))
            continue
        for number, line in enumerate(text.splitlines(), 1):
            stripped = line.strip()
            if stripped and not stripped.startswith("#") and _CUDA_URI_RE.search(stripped):
                entries.append(
                    {"path": path, "line": number, "text": stripped, "trusted": bool(_TRUSTED_RE.search(stripped))}
                )
    return entries


def _deb822_entries(path, text):
    entries = []
    stanza = {}
    for number, line in enumerate(text.splitlines() + [""], 1):
        if not line.strip():
            if stanza:
                uris = stanza.get("uris", ("", 0))
                if _CUDA_URI_RE.search(uris[0]) and stanza.get("enabled", ("yes", 0))[0].lower() != "no":
                    trusted = stanza.get("trusted", ("no", 0))[0].lower() == "yes"
                    entries.append({"path": path, "line": uris[1], "text": "URIs: " + uris[0], "trusted": trusted})
            stanza = {}
            continue
        if line.lstrip().startswith("#") or line[0].isspace():
            continue
        key, sep, value = line.partition(":")
        if sep:
            stanza[key.strip().lower()] = (value.strip(), number)
    return entries


def source_errors(entries, own_list):
    """A second entry for the repository (outside ``own_list``) or trusted=yes anywhere: both refused."""
    errors = []
    foreign = [entry for entry in entries if entry["path"] != own_list]
    trusted = [entry for entry in entries if entry["trusted"]]

    def show(items):
        return " | ".join("{}:{}:{}".format(item["path"], item["line"], item["text"]) for item in items)

    if foreign:
        errors.append(
            f"apt already has CUDA repository entries outside {own_list}: {show(foreign)}. A second entry for the "
            "same repository breaks apt (conflicting Signed-By); remove those entries, then run the role again"
        )
    if trusted:
        errors.append(
            f"apt has CUDA repository entries marked trusted=yes: {show(trusted)}. apt would then accept the "
            "repository unsigned; remove those entries (the role writes its own, signed-by), then run the role again"
        )
    return errors


def list_is_current(text, entry):
    """True when the list file holds exactly ``entry`` (comments and blank lines aside)."""
    lines = [line.strip() for line in (text or "").splitlines()]
    return [line for line in lines if line and not line.startswith("#")] == [entry]


def keyring_errors(holder, fingerprints, wanted, advice):
    """``holder`` must hold exactly the key ``wanted``."""
    if fingerprints == [wanted]:
        return []
    held = ", ".join(fingerprints) if fingerprints else "no key"
    return [f"{holder} holds {held}, not exactly cuda_repo_key_fingerprint={wanted}. {advice}"]
