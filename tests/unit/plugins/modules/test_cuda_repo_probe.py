"""cuda_repo_probe run as Ansible runs it (a separate Python process with its arguments as JSON), against a real
signed repository over file:// URLs.

The repository is tests/fixtures/cuda_repo: the debian12/x86_64 index files and cuda-keyring of the lab mirror's
three variants (tests/lab/mirror: signed by the lab key, unsigned, signed by a stranger key). When the lab mirror is
built on this machine, test_live_lab_mirror runs against it as well. The host is a directory tree (``root``) with
apt's sources and lists, a dpkg status file and the installed keyring. Nothing is installed on this machine: the
install path runs in check mode, or with ``dpkg --root`` into the directory tree.
"""

import base64
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]
MODULE = REPO / "plugins" / "modules" / "cuda_repo_probe.py"
FIXTURES = REPO / "tests" / "fixtures" / "cuda_repo"
LAB_KEY = "2DAB59B7E049DB922CEBF45F52D59CBD1C0AA271"
STRANGER_KEY = "3DB172B4962107ABB44BF3A86A34148A0F4E0E52"
NVIDIA_KEY = "EB693B3035CD5710E231E123A4B469963BF863CC"
REPO_DIR = "compute/cuda/repos/debian12/x86_64"
OFFERED = {
    "libnccl2": ["2.21.5-1+cuda12.4", "2.23.4-1+cuda12.6"],
    "libnccl-dev": ["2.21.5-1+cuda12.4", "2.23.4-1+cuda12.6"],
}
KEYRING = "usr/share/keyrings/cuda-archive-keyring.gpg"
LIST = "etc/apt/sources.list.d/cuda-debian12-x86_64.list"
APT_LIST = "var/lib/apt/lists/mirror_signed_compute_cuda_repos_debian12_x86%5f64_Packages"

pytestmark = pytest.mark.skipif(
    not (shutil.which("dpkg-deb") and shutil.which("dpkg-query") and shutil.which("gpgv")),
    reason="needs dpkg-deb, dpkg-query and gpgv (Debian/Ubuntu)",
)


def base(variant, mirror=FIXTURES):
    return f"file://{mirror}/{variant}"


def dpkg_status(root, version):
    status = Path(root) / "var" / "lib" / "dpkg" / "status"
    status.parent.mkdir(parents=True, exist_ok=True)
    stanza = (
        f"Package: cuda-keyring\nStatus: install ok installed\nPriority: optional\nSection: misc\n"
        f"Maintainer: lab <lab@localhost.invalid>\nArchitecture: all\nVersion: {version}\nDescription: keyring\n\n"
        if version
        else ""
    )
    status.write_text(stanza)


def fresh_host(tmp_path):
    root = tmp_path / "host"
    (root / "etc" / "apt" / "sources.list.d").mkdir(parents=True)
    (root / "var" / "lib" / "apt" / "lists").mkdir(parents=True)
    (root / "etc" / "os-release").write_text(
        'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n'
    )
    dpkg_status(root, "")
    return root


def converged_host(tmp_path, variant="signed", mirror=FIXTURES, lists=True):
    """What the role leaves: cuda-keyring 1.1-1, the lab keyring, the source entry, apt's lists of the repository."""
    root = fresh_host(tmp_path)
    dpkg_status(root, "1.1-1")
    (root / KEYRING).parent.mkdir(parents=True)
    shutil.copy(FIXTURES / "lab-keyring.gpg", root / KEYRING)
    entry = f"deb [signed-by=/{KEYRING}] {base(variant, mirror)}/{REPO_DIR}/ /"
    (root / LIST).write_text(f"# Ansible managed\n{entry}\n")
    if lists:
        (root / APT_LIST).write_text("Package: libnccl2\n")
    return root


def run_module(tmp_path, check_mode=False, **args):
    """The module's JSON result; also asserts that it left nothing in its temporary directory's parent."""
    temp = tmp_path / "tmp"
    temp.mkdir(exist_ok=True)
    args.setdefault("distro", "debian12")
    args.setdefault("arch", "x86_64")
    args.setdefault("key_fingerprint", LAB_KEY)
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": dict(args, _ansible_check_mode=check_mode)}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p), TMPDIR=str(temp))
    proc = subprocess.run(
        [sys.executable, str(MODULE), str(args_file)], capture_output=True, text=True, env=env, check=False
    )
    assert list(temp.iterdir()) == [], "the module left files behind"
    return json.loads(proc.stdout)


def test_fresh_host_downloads_verifies_and_reads_the_offered_nccl(tmp_path):
    result = run_module(tmp_path, base_url=base("signed"), root=str(fresh_host(tmp_path)))
    assert result["errors"] == []
    assert result["changed"] is False
    assert result["install_needed"] is True
    assert result["downloaded"] == ["cuda-keyring", "InRelease", "Packages.gz"]
    assert result["offered_nccl"] == OFFERED
    assert result["url"] == f"{base('signed')}/{REPO_DIR}"
    assert result["list_path"] == "/" + LIST
    assert result["source_entry"] == f"deb [signed-by=/{KEYRING}] {base('signed')}/{REPO_DIR}/ /"
    assert result["installed"] == {"version": "", "fingerprints": []}
    assert result["apt_lists"] == [] and result["list_current"] is False


def test_no_op_on_a_converged_host_downloads_nothing(tmp_path):
    root = converged_host(tmp_path)
    result = run_module(tmp_path, base_url=base("signed"), root=str(root))
    assert result["errors"] == []
    assert result["downloaded"] == []
    assert result["install_needed"] is False and result["list_current"] is True
    assert result["apt_lists"] == ["/" + APT_LIST]
    assert result["installed"] == {"version": "1.1-1", "fingerprints": [LAB_KEY]}
    assert "offered_nccl" not in result


def test_apt_without_the_lists_reads_the_index_with_the_installed_keyring(tmp_path):
    root = converged_host(tmp_path, lists=False)
    result = run_module(tmp_path, base_url=base("signed"), root=str(root))
    assert result["errors"] == []
    assert result["downloaded"] == ["InRelease", "Packages.gz"]
    assert result["offered_nccl"] == OFFERED


def test_offered_nccl_always_and_never(tmp_path):
    root = str(converged_host(tmp_path))
    assert run_module(tmp_path, base_url=base("signed"), root=root, offered_nccl="always")["offered_nccl"] == OFFERED
    result = run_module(tmp_path, base_url=base("signed"), root=str(fresh_host(tmp_path / "b")), offered_nccl="never")
    assert result["downloaded"] == ["cuda-keyring", "InRelease"] and "offered_nccl" not in result


def test_a_new_base_url_is_verified_before_the_source_changes(tmp_path, request):
    """A converged host pointed at another mirror: the new mirror's InRelease is checked with the installed key."""
    mirror = tmp_path / "mirror"
    shutil.copytree(FIXTURES / "signed", mirror / "other")
    root = converged_host(tmp_path)
    result = run_module(tmp_path, base_url=f"file://{mirror}/other", root=str(root))
    assert result["errors"] == [] and result["list_current"] is False
    assert result["downloaded"] == ["InRelease"]


def test_wrong_fingerprint_refuses_the_package(tmp_path):
    root = converged_host(tmp_path)  # holds the lab key: not the one asked for
    result = run_module(
        tmp_path,
        base_url=base("signed"),
        root=str(root),
        key_fingerprint="EB69 3B30 35CD 5710 E231 E123 A4B4 6996 3BF8 63CC",
    )
    assert result["install_needed"] is True
    assert result["downloaded"] == ["cuda-keyring"]
    assert result["errors"] == [
        f"the cuda-keyring package's keyring holds {LAB_KEY}, not exactly cuda_repo_key_fingerprint={NVIDIA_KEY}. "
        "Do not install it: check where the package came from, or set cuda_repo_key_fingerprint to your mirror's "
        "signing key"
    ]


def test_unsigned_repository_is_refused(tmp_path):
    result = run_module(tmp_path, base_url=base("unsigned"), root=str(fresh_host(tmp_path)))
    assert len(result["errors"]) == 1
    assert result["errors"][0].startswith(f"{base('unsigned')}/{REPO_DIR}/InRelease cannot be fetched (")
    assert "the repository is unsigned or unreachable" in result["errors"][0]
    assert "offered_nccl" not in result


def test_repository_signed_by_another_key_is_refused(tmp_path):
    result = run_module(tmp_path, base_url=base("wrongkey"), root=str(fresh_host(tmp_path)))
    assert len(result["errors"]) == 1
    assert result["errors"][0].startswith(f"{base('wrongkey')}/{REPO_DIR}/InRelease is not signed by key {LAB_KEY} (")
    assert STRANGER_KEY in result["errors"][0]  # gpgv names the key that did sign it


def test_converged_host_moved_to_a_wrongly_signed_mirror_is_refused(tmp_path):
    root = converged_host(tmp_path)
    result = run_module(tmp_path, base_url=base("wrongkey"), root=str(root))
    assert result["install_needed"] is False and result["downloaded"] == ["InRelease"]
    assert "InRelease is not signed by key " + LAB_KEY in result["errors"][0]


def test_tampered_inrelease_is_refused(tmp_path):
    mirror = tmp_path / "mirror"
    shutil.copytree(FIXTURES / "signed", mirror / "signed")
    inrelease = mirror / "signed" / REPO_DIR / "InRelease"
    inrelease.write_text(inrelease.read_text().replace("Label: NVIDIA CUDA", "Label: NVIDIA CUDX"))
    result = run_module(tmp_path, base_url=f"file://{mirror}/signed", root=str(fresh_host(tmp_path)))
    assert "InRelease is not signed by key" in result["errors"][0]
    assert "offered_nccl" not in result


def test_tampered_package_index_is_refused(tmp_path):
    mirror = tmp_path / "mirror"
    shutil.copytree(FIXTURES / "signed", mirror / "signed")
    index = mirror / "signed" / REPO_DIR / "Packages.gz"
    data = bytearray(index.read_bytes())
    data[-1] ^= 0xFF  # the uncompressed size: still a file of the same length, another SHA256
    index.write_bytes(bytes(data))
    result = run_module(tmp_path, base_url=f"file://{mirror}/signed", root=str(fresh_host(tmp_path)))
    assert len(result["errors"]) == 1
    assert "/Packages.gz has SHA256 " in result["errors"][0]
    assert (
        "but the signed InRelease lists 29d7b63e3ee2e0ae1edec0f2311f5c32b79fcf182a2de212e9d6e09981876bf8"
        in (result["errors"][0])
    )
    assert "offered_nccl" not in result


def test_foreign_and_trusted_source_entries_are_refused_with_the_other_errors(tmp_path):
    root = converged_host(tmp_path)
    (root / "etc/apt/sources.list.d/second-cuda.list").write_text(
        f"# deb {base('signed')}/{REPO_DIR}/ / (a comment is no entry)\n"
        f"deb [trusted=yes] {base('signed')}/{REPO_DIR}/ /\n"
    )
    (root / "etc/apt/sources.list.d/nvidia.sources").write_text(
        f"Types: deb\nURIs: {base('signed')}/{REPO_DIR}/\nSuites: /\nTrusted: yes\n\n"
        f"Enabled: no\nTypes: deb\nURIs: {base('unsigned')}/{REPO_DIR}/\nSuites: /\n"
    )
    (root / "etc/apt/sources.list").write_text("deb http://debian.mirror.example/debian bookworm main\n")
    result = run_module(tmp_path, base_url=base("signed"), root=str(root), keyring_version="1.1")
    foreign, trusted, version = (
        [e for e in result["errors"] if e.startswith("apt already has")],
        [e for e in result["errors"] if "marked trusted=yes" in e],
        [e for e in result["errors"] if e.startswith("cuda_repo_keyring_version=1.1 ")],
    )
    assert len(result["errors"]) == 3 and foreign and trusted and version
    assert foreign[0].startswith(
        "apt already has CUDA repository entries outside /etc/apt/sources.list.d/cuda-debian12-x86_64.list: "
        f"/etc/apt/sources.list.d/nvidia.sources:2:URIs: {base('signed')}/{REPO_DIR}/ | "
        f"/etc/apt/sources.list.d/second-cuda.list:2:deb [trusted=yes] {base('signed')}/{REPO_DIR}/ /. "
    )
    assert "unsigned" not in foreign[0]  # the disabled stanza is no entry
    assert result["downloaded"] == []  # input errors: nothing to verify


def test_wrong_package_version_from_the_controller(tmp_path):
    """A controller .deb (bytes from the action plugin) whose version is not cuda_repo_keyring_version."""
    tree = tmp_path / "deb"
    subprocess.run(
        ["dpkg-deb", "--raw-extract", str(FIXTURES / "signed" / REPO_DIR / "cuda-keyring_1.1-1_all.deb"), str(tree)],
        check=True,
    )
    control = tree / "DEBIAN" / "control"
    control.write_text(control.read_text().replace("Version: 1.1-1", "Version: 1.0-1"))
    deb = tmp_path / "cuda-keyring_1.0-1_all.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(tree), str(deb)], check=True, capture_output=True)
    result = run_module(
        tmp_path,
        base_url=base("signed"),
        root=str(fresh_host(tmp_path)),
        keyring_deb_src="/srv/cuda-keyring.deb",
        keyring_deb_content=base64.b64encode(deb.read_bytes()).decode(),
    )
    assert result["downloaded"] == []
    assert result["errors"] == [
        'the keyring package (cuda_repo_keyring_deb=/srv/cuda-keyring.deb) is "cuda-keyring 1.0-1", expected '
        '"cuda-keyring 1.1-1"; check cuda_repo_keyring_deb / cuda_repo_keyring_version'
    ]


def test_controller_package_is_used_instead_of_a_download(tmp_path):
    deb = FIXTURES / "signed" / REPO_DIR / "cuda-keyring_1.1-1_all.deb"
    result = run_module(
        tmp_path,
        base_url=base("signed"),
        root=str(fresh_host(tmp_path)),
        keyring_deb_src=str(deb),
        keyring_deb_content=base64.b64encode(deb.read_bytes()).decode(),
    )
    assert result["errors"] == [] and result["downloaded"] == ["InRelease", "Packages.gz"]


def test_missing_package_is_reported(tmp_path):
    mirror = tmp_path / "mirror"
    shutil.copytree(FIXTURES / "signed", mirror / "signed")
    (mirror / "signed" / REPO_DIR / "cuda-keyring_1.1-1_all.deb").unlink()
    result = run_module(tmp_path, base_url=f"file://{mirror}/signed", root=str(fresh_host(tmp_path)))
    assert result["errors"][0].startswith(
        f"cannot download file://{mirror}/signed/{REPO_DIR}/cuda-keyring_1.1-1_all.deb ("
    )
    assert "or give the .deb with cuda_repo_keyring_deb" in result["errors"][0]


def test_bad_inputs_are_all_reported_and_nothing_is_downloaded(tmp_path):
    result = run_module(
        tmp_path,
        base_url="ftp://mirror.example",
        root=str(fresh_host(tmp_path)),
        distro="debian11",
        key_fingerprint="A4B469963BF863CC",
        keyring_version="latest",
    )
    assert result["downloaded"] == []
    assert [error.split(" ", 1)[0] for error in result["errors"]] == [
        "cuda_repo_distro=debian11",
        "cuda_repo_base_url=ftp://mirror.example",
        "cuda_repo_key_fingerprint=A4B469963BF863CC",
        "cuda_repo_keyring_version=latest",
    ]
    assert "(set; the host is Debian GNU/Linux 12 (bookworm) " in result["errors"][0]


def test_repository_derived_from_os_release(tmp_path):
    root = fresh_host(tmp_path)
    (root / "etc" / "os-release").write_text('PRETTY_NAME="Ubuntu 22.04.4 LTS"\nID=ubuntu\nVERSION_ID="22.04"\n')
    result = run_module(tmp_path, base_url=base("signed"), root=str(root), distro="", offered_nccl="never")
    assert result["distro"] == "ubuntu2204"
    # The fixture mirror has debian12 only: the download fails, naming the derived repository.
    assert f"/compute/cuda/repos/ubuntu2204/{result['arch']}/cuda-keyring_1.1-1_all.deb" in result["errors"][0]


def test_unsupported_release_names_what_it_was_derived_from(tmp_path):
    root = fresh_host(tmp_path)
    (root / "etc" / "os-release").write_text(
        'PRETTY_NAME="Debian GNU/Linux 11 (bullseye)"\nID=debian\nVERSION_ID="11"\n'
    )
    result = run_module(tmp_path, base_url=base("signed"), root=str(root), distro="", arch="ppc64le")
    assert result["errors"][0].startswith(
        "cuda_repo_distro=debian11 / cuda_repo_arch=ppc64le (derived from Debian GNU/Linux 11 (bullseye) "
    )
    assert (
        "is not an NVIDIA CUDA repository; supported: ubuntu2004, ubuntu2204, ubuntu2404, debian12"
        in (result["errors"][0])
    )


def test_install_in_check_mode_reports_the_change_only(tmp_path):
    result = run_module(
        tmp_path, check_mode=True, base_url=base("signed"), root=str(fresh_host(tmp_path)), install=True
    )
    assert result["changed"] is True and result["errors"] == []
    assert "rc" not in result  # dpkg did not run
    assert result["downloaded"] == ["cuda-keyring", "InRelease"]  # verified again, no index


def test_install_fails_on_errors(tmp_path):
    result = run_module(
        tmp_path, check_mode=True, base_url=base("wrongkey"), root=str(fresh_host(tmp_path)), install=True
    )
    assert result["failed"] is True and "InRelease is not signed by key" in result["msg"]


def test_install_not_needed_changes_nothing(tmp_path):
    result = run_module(
        tmp_path, check_mode=True, base_url=base("signed"), root=str(converged_host(tmp_path)), install=True
    )
    assert result["changed"] is False and result["downloaded"] == []


def dpkg_root(tmp_path):
    """A fresh host whose dpkg database dpkg --root can install into."""
    root = fresh_host(tmp_path)
    for directory in ("info", "updates", "triggers"):
        (root / "var" / "lib" / "dpkg" / directory).mkdir(parents=True, exist_ok=True)
    (root / "var" / "lib" / "dpkg" / "available").write_text("")
    return root


def test_install_puts_the_verified_package_in_place_and_a_re_run_is_a_no_op(tmp_path):
    root = dpkg_root(tmp_path)
    result = run_module(tmp_path, base_url=base("signed"), root=str(root), install=True)
    assert result["changed"] is True and result["errors"] == [], result
    assert result["installed"] == {"version": "1.1-1", "fingerprints": [LAB_KEY]}
    assert (root / KEYRING).read_bytes() == (FIXTURES / "lab-keyring.gpg").read_bytes()
    assert (root / "etc/apt/preferences.d/cuda-repository-pin-600").is_file()
    (root / LIST).write_text(f"# Ansible managed\ndeb [signed-by=/{KEYRING}] {base('signed')}/{REPO_DIR}/ /\n")
    (root / APT_LIST).write_text("Package: libnccl2\n")
    again = run_module(tmp_path, base_url=base("signed"), root=str(root), install=True)
    assert again["changed"] is False and again["downloaded"] == [] and again["install_needed"] is False


def test_install_repairs_a_tampered_keyring_at_the_right_version(tmp_path):
    root = dpkg_root(tmp_path)
    assert run_module(tmp_path, base_url=base("signed"), root=str(root), install=True)["changed"] is True
    (root / KEYRING).write_bytes((FIXTURES / "lab-keyring.gpg").read_bytes() * 2)  # a second key slipped in
    probe = run_module(tmp_path, base_url=base("signed"), root=str(root))
    assert probe["install_needed"] is True and probe["installed"]["fingerprints"] == [LAB_KEY, LAB_KEY]
    result = run_module(tmp_path, base_url=base("signed"), root=str(root), install=True)
    assert result["changed"] is True and result["installed"]["fingerprints"] == [LAB_KEY]


def test_failed_verification_installs_nothing(tmp_path):
    root = dpkg_root(tmp_path)
    result = run_module(tmp_path, base_url=base("wrongkey"), root=str(root), install=True)
    assert result["failed"] is True and "InRelease is not signed by key" in result["msg"]
    assert not (root / KEYRING).exists()
    assert "cuda-keyring" not in (root / "var/lib/dpkg/status").read_text()


def _lab_mirror():
    cache = Path(os.environ.get("LAB_MIRROR_CACHE") or "/var/tmp/gpucluster-lab-mirror") / "current.json"
    try:
        manifest = json.loads(cache.read_text())
    except (OSError, ValueError):
        return None
    return manifest if (Path(manifest.get("root", "")) / "www" / "signed" / REPO_DIR).is_dir() else None


@pytest.mark.skipif(_lab_mirror() is None, reason="the lab mirror is not built here (tests/lab/mirror/mirror.sh)")
def test_live_lab_mirror(tmp_path):
    manifest = _lab_mirror()
    www = Path(manifest["root"]) / "www"
    result = run_module(
        tmp_path, base_url=base("signed", www), root=str(fresh_host(tmp_path)), key_fingerprint=manifest["fingerprint"]
    )
    assert result["errors"] == []
    assert sorted(result["offered_nccl"]["libnccl2"]) == sorted(build["package_version"] for build in manifest["nccl"])
    result = run_module(
        tmp_path,
        base_url=base("wrongkey", www),
        root=str(fresh_host(tmp_path / "wrongkey")),
        key_fingerprint=manifest["fingerprint"],
    )
    assert "InRelease is not signed by key " + manifest["fingerprint"] in result["errors"][0]


@pytest.mark.parametrize("signum", ["SIGTERM", "SIGHUP"])
def test_a_signal_during_a_download_removes_the_download_directory(tmp_path, signum):
    """A server that never answers holds the probe in its download; a kill or a lost session must still remove the
    probe's directory (the handler unwinds through the module's finally) and fail with a message."""
    import glob
    import http.server
    import signal
    import socketserver
    import threading
    import time

    class Silent(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            time.sleep(20)

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Silent)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        tmp_root = tmp_path / "tmp"
        tmp_root.mkdir()
        args = {
            "base_url": f"http://127.0.0.1:{server.server_address[1]}",
            "distro": "debian12",
            "arch": "x86_64",
            "key_fingerprint": NVIDIA_KEY,
            "keyring_version": "1.1-1",
            "root": str(tmp_path / "root"),
        }
        (tmp_path / "root").mkdir()
        args_file = tmp_path / "args.json"
        args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p), TMPDIR=str(tmp_root))
        proc = subprocess.Popen(
            [sys.executable, str(MODULE), str(args_file)], stdout=subprocess.PIPE, text=True, env=env
        )
        deadline = time.time() + 15
        while not glob.glob(str(tmp_root / "cuda_repo.*")) and time.time() < deadline:
            time.sleep(0.1)
        assert glob.glob(str(tmp_root / "cuda_repo.*")), "the probe made no download directory"
        time.sleep(0.5)  # into the download
        proc.send_signal(getattr(signal, signum))
        out, _err = proc.communicate(timeout=20)
        assert proc.returncode == 1
        assert json.loads(out)["msg"].startswith("cuda_repo_probe stopped by signal")
        assert not glob.glob(str(tmp_root / "cuda_repo.*"))
    finally:
        server.shutdown()
