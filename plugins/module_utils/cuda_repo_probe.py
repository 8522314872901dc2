# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""What modules cuda_repo_probe and cuda_repo share: read the host's CUDA repository setup, verify cuda-keyring and the
repository's signature in a temporary directory of their own (always removed), and install the verified keyring.

The rules (names, paths, input and source checks) are in cuda_repo.py; this is their use against a live host.
"""

import base64
import glob
import gzip
import hashlib
import os
import platform
import shutil
import signal
import tempfile
import time

from . import cuda_repo
from .applier import ARGUMENT_SPEC as APPLIER_ARGUMENTS
from .applier import Applier, steps_to_run
from .nccl import (
    parse_package_index,
    release_index_sha256,
)
from .openpgp import (
    OpenPGPError,
    keyring_info,
    normalize_fingerprint,
)

C_LOCALE = {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"}
# The options of the repository and its keyring, the same in module cuda_repo_probe and module cuda_repo.
PROBE_ARGUMENTS = {
    "base_url": {"type": "str", "required": True},
    "distro": {"type": "str", "default": ""},
    "arch": {"type": "str", "default": ""},
    "keyring_version": {"type": "str", "default": "1.1-1", "no_log": False},
    "key_fingerprint": {"type": "str", "required": True, "no_log": False},
    "keyring_deb_src": {"type": "str", "default": "", "no_log": False},
    "keyring_deb_content": {"type": "str", "default": "", "no_log": True},
    "verify_signature": {"type": "bool", "default": True},
    "validate_certs": {"type": "bool", "default": True},
    "timeout": {"type": "int", "default": 30},
}
DPKG_LOCK_WAIT = 60


class Probe:
    def __init__(self, module, workdir):
        self.module = module
        self.params = module.params
        self.workdir = workdir
        self.root = self.params["root"]
        self.errors = []
        self.downloaded = []
        self.deb = None  # the verified package, when one was fetched

    def host_path(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def read(self, path, binary=False):
        try:
            if binary:
                with open(self.host_path(path), "rb") as handle:
                    return handle.read()
            with open(self.host_path(path), encoding="utf-8", errors="replace") as handle:
                return handle.read()
        except OSError:
            return None

    def run(self, *argv, environ=None):
        return self.module.run_command(list(argv), environ_update=dict(C_LOCALE, **(environ or {})))

    # --- what the host has -------------------------------------------------------------------------------------

    def source_files(self):
        """{path as the host sees it: text} of apt's source files."""
        paths = list(cuda_repo.SOURCE_FILES)
        for pattern in cuda_repo.SOURCE_GLOBS:
            found = sorted(glob.glob(self.host_path(pattern)))
            paths.extend("/" + os.path.relpath(path, self.root) for path in found)
        files = {}
        for path in paths:
            text = self.read(path)
            if text is not None:
                files[path] = text
        return files

    def installed_version(self):
        admindir = self.host_path("/var/lib/dpkg")
        rc, out, _err = self.run(
            self.module.get_bin_path("dpkg-query", required=True),
            "--admindir",
            admindir,
            "--show",
            "--showformat",
            "${Version} ${db:Status-Status}",
            cuda_repo.PACKAGE,
        )
        fields = out.split()
        if rc == 0 and len(fields) == 2 and fields[1] == "installed":
            return fields[0]
        return ""

    @staticmethod
    def fingerprints(data):
        """Primary key fingerprints, or None when ``data`` is missing or not a keyring."""
        if data is None:
            return None
        try:
            return [key["fingerprint"] for key in keyring_info(data)["keys"]]
        except OpenPGPError:
            return None

    # --- downloads ---------------------------------------------------------------------------------------------

    def fetch(self, url, name):
        """(bytes, None) or (None, 'what went wrong'). Transient network errors are retried; HTTP answers are final."""
        if getattr(self.module, "offline", False):  # the node check (node_check.py) reads what the host has only
            return None, "not downloaded: the node check reads only what the host has"
        # Imported here: the node check runs this module's code on the node, without Ansible.
        from ansible.module_utils.urls import fetch_url

        local = url.startswith("file:")
        attempts = 1 if local else 3
        status, msg = -1, ""
        for attempt in range(attempts):
            response, info = fetch_url(self.module, url, timeout=self.params["timeout"])
            status, msg = info.get("status", -1), info.get("msg", "")
            if response is not None and (local or status == 200):
                data = response.read()
                self.downloaded.append(name)
                return data, None
            if status is not None and status > 0:
                break
            if attempt + 1 < attempts:
                time.sleep(5)
        return None, f"HTTP {status if status is not None and status > 0 else '-'}, {msg}"

    # --- the checks --------------------------------------------------------------------------------------------

    def keyring_package(self, url, wanted):
        """Path of the extracted package keyring when the package is the wanted one and holds the key, else None."""
        version = self.params["keyring_version"]
        deb = os.path.join(self.workdir, "cuda-keyring.deb")
        source = self.params["keyring_deb_src"]
        if source:
            if not self.params["keyring_deb_content"]:
                return None  # the action plugin has reported the missing controller file
            data = base64.b64decode(self.params["keyring_deb_content"])
            where = f"cuda_repo_keyring_deb={source}"
        else:
            deb_url = f"{url}/cuda-keyring_{version}_all.deb"
            data, problem = self.fetch(deb_url, "cuda-keyring")
            if data is None:
                self.errors.append(
                    f"cannot download {deb_url} ({problem}); check cuda_repo_base_url, cuda_repo_distro/cuda_repo_arch "
                    "and cuda_repo_keyring_version, or give the .deb with cuda_repo_keyring_deb"
                )
                return None
            where = deb_url
        with open(deb, "wb") as handle:
            handle.write(data)
        dpkg_deb = self.module.get_bin_path("dpkg-deb", required=True)
        rc, out, err = self.run(dpkg_deb, "--show", "--showformat", "${Package} ${Version}", deb)
        identity = out.strip() if rc == 0 else ""
        if identity != f"{cuda_repo.PACKAGE} {version}":
            self.errors.append(
                'the keyring package ({}) is "{}", expected "{} {}"; check cuda_repo_keyring_deb / '
                "cuda_repo_keyring_version".format(
                    where, identity or "not a Debian package: " + err.strip(), cuda_repo.PACKAGE, version
                )
            )
            return None
        tree = os.path.join(self.workdir, "deb")
        rc, _out, err = self.run(dpkg_deb, "--extract", deb, tree)
        keyring = os.path.join(tree, cuda_repo.KEYRING_PATH.lstrip("/"))
        data = None
        if rc == 0:
            try:
                with open(keyring, "rb") as handle:
                    data = handle.read()
            except OSError:
                data = None
        found = self.fingerprints(data)
        errors = cuda_repo.keyring_errors(
            "the cuda-keyring package's keyring" + ("" if found is not None else f" ({cuda_repo.KEYRING_PATH})"),
            found or [],
            wanted,
            "Do not install it: check where the package came from, or set cuda_repo_key_fingerprint to your "
            "mirror's signing key",
        )
        if errors:
            self.errors.extend(errors)
            return None
        self.deb = deb
        return keyring

    def verified_release(self, url, keyring, wanted):
        """The text gpgv verified in the repository's InRelease, or None."""
        data, problem = self.fetch(f"{url}/InRelease", "InRelease")
        if data is None:
            self.errors.append(
                f"{url}/InRelease cannot be fetched ({problem}): the repository is unsigned or unreachable. apt "
                "would refuse it; sign the mirror (InRelease) with the key in cuda_repo_key_fingerprint. Never use "
                "trusted=yes"
            )
            return None
        gpgv = self.module.get_bin_path("gpgv")
        if not gpgv:
            self.errors.append("gpgv is not installed on the host; install the gpgv package (apt needs it as well)")
            return None
        inrelease = os.path.join(self.workdir, "InRelease")
        verified = os.path.join(self.workdir, "InRelease.verified")
        with open(inrelease, "wb") as handle:
            handle.write(data)
        rc, _out, err = self.run(gpgv, "--homedir", self.workdir, "--keyring", keyring, "--output", verified, inrelease)
        if rc != 0:
            self.errors.append(
                "{}/InRelease is not signed by key {} ({}); check cuda_repo_base_url points at the right mirror and "
                "that the mirror is signed with the key in cuda_repo_key_fingerprint".format(
                    url, wanted, " ".join(err.split())
                )
            )
            return None
        with open(verified, encoding="utf-8", errors="replace") as handle:
            return handle.read()

    def offered(self, url, release):
        """{package: [versions]} from the Packages.gz the verified release lists, or None when it lists none."""
        sha256 = release_index_sha256(release, "Packages.gz")
        if not sha256:
            return None
        data, problem = self.fetch(f"{url}/Packages.gz", "Packages.gz")
        if data is None:
            self.errors.append(
                f"cannot download {url}/Packages.gz ({problem}), the package index the signed InRelease lists; "
                "check that the mirror is complete and reachable"
            )
            return None
        actual = hashlib.sha256(data).hexdigest()
        if actual != sha256:
            self.errors.append(
                f"{url}/Packages.gz has SHA256 {actual}, but the signed InRelease lists {sha256}: the mirror is "
                "inconsistent (half-synced) or tampered with; fix the mirror at cuda_repo_base_url, then run again"
            )
            return None
        try:
            text = gzip.decompress(data).decode("utf-8", errors="replace")
        except (OSError, EOFError) as exc:
            self.errors.append(f"{url}/Packages.gz is not gzip data ({exc}); fix the mirror at cuda_repo_base_url")
            return None
        return parse_package_index(text)

    def install(self):
        """dpkg -i of the verified .deb (the bytes checked above); waits for the dpkg lock like apt does."""
        argv = [self.module.get_bin_path("dpkg", required=True), "--force-confdef", "--force-confold"]
        if os.path.realpath(self.root) != "/":  # a directory tree as the host (tests)
            argv += ["--root", self.root, "--log", os.devnull, "--force-not-root"]
        deadline = time.time() + DPKG_LOCK_WAIT
        while True:
            rc, out, err = self.run(*argv, "--install", self.deb, environ={"DEBIAN_FRONTEND": "noninteractive"})
            if rc == 0 or "lock" not in err or time.time() > deadline:
                return rc, out, err
            time.sleep(2)

    def probe(self):
        params = self.params
        os_release = cuda_repo.parse_os_release(self.read("/etc/os-release") or self.read("/usr/lib/os-release"))
        repo = cuda_repo.derive_repository(params["distro"], params["arch"], os_release, platform.machine())
        wanted = normalize_fingerprint(params["key_fingerprint"])
        url = cuda_repo.repository_url(params["base_url"], repo["distro"], repo["arch"])
        own_list = cuda_repo.list_path(repo["distro"], repo["arch"])
        entry = cuda_repo.source_entry(url)
        result = {
            "distro": repo["distro"],
            "arch": repo["arch"],
            "url": url,
            "list_path": own_list,
            "source_entry": entry,
            "keyring_path": cuda_repo.KEYRING_PATH,
        }
        input_errors = cuda_repo.input_errors(
            repo,
            params["base_url"],
            params["key_fingerprint"],
            wanted,
            params["keyring_version"],
            bool(params["distro"]),
        )
        self.errors.extend(input_errors)
        self.errors.extend(cuda_repo.source_errors(cuda_repo.find_source_entries(self.source_files()), own_list))

        version = self.installed_version()
        installed_keys = self.fingerprints(self.read(cuda_repo.KEYRING_PATH, binary=True))
        lists_dir = self.host_path(cuda_repo.APT_LISTS_DIR)
        names = os.listdir(lists_dir) if os.path.isdir(lists_dir) else []
        apt_lists = [
            os.path.join(cuda_repo.APT_LISTS_DIR, name)
            for name in cuda_repo.matching_lists(names, repo["distro"], repo["arch"])
        ]
        list_current = cuda_repo.list_is_current(self.read(own_list), entry)
        install_needed = version != params["keyring_version"] or installed_keys != [wanted]
        want_offered = params["verify_signature"] and (
            params["offered_nccl"] == "always" or (params["offered_nccl"] == "auto" and not apt_lists)
        )
        result.update(
            installed={"version": version, "fingerprints": installed_keys or []},
            apt_lists=apt_lists,
            list_current=list_current,
            install_needed=install_needed,
        )
        if input_errors:
            return result  # nothing sensible to download

        keyring = None
        if install_needed:
            keyring = self.keyring_package(url, wanted)
            if keyring is None:
                return result
        elif params["verify_signature"] and (not list_current or want_offered):
            keyring = self.host_path(cuda_repo.KEYRING_PATH)  # installed, wanted version, exactly the key
        if keyring is None or not params["verify_signature"]:
            return result
        release = self.verified_release(url, keyring, wanted)
        if release is not None and want_offered:
            offered = self.offered(url, release)
            if offered is not None:
                result["offered_nccl"] = offered
        return result


class Stopped(BaseException):  # not caught by the probe's `except Exception` handlers
    """Raised by the SIGHUP/SIGTERM handler so that the download directory is removed on the way out."""


def _stop(signum, _frame):
    raise Stopped(signum)


def probe_host(module, install=False, name="cuda_repo_probe"):
    """(result, probe): what the host has, every problem in ``probe.errors``; with ``install``, and no problem, the
    verified cuda-keyring is installed (reported in check mode). ``result['changed']`` says whether it was, and
    ``result['install_why']`` why."""
    params = module.params
    # A lost connection (SIGHUP) or a kill (SIGTERM) unwinds through the finally below, like an error does.
    for signum in (signal.SIGHUP, signal.SIGTERM):
        signal.signal(signum, _stop)
    workdir = tempfile.mkdtemp(prefix="cuda_repo.")
    changed, outcome = False, {}
    try:
        probe = Probe(module, workdir)
        result = probe.probe()
        if install and result["install_needed"] and not probe.errors:
            changed = True
            before = result["installed"]
            if before["version"] != params["keyring_version"]:
                why = f"installed {before['version'] or 'none'}, wanted {params['keyring_version']}"
            else:
                why = f"its keyring holds {', '.join(before['fingerprints']) or 'no key'}, not exactly the key"
            outcome["install_why"] = why
            if not module.check_mode:
                rc, out, err = probe.install()
                outcome.update(rc=rc, stdout=out, stderr=err)
                keys = probe.fingerprints(probe.read(cuda_repo.KEYRING_PATH, binary=True)) or []
                if rc != 0:
                    probe.errors.append(f"dpkg could not install the verified cuda-keyring: {' '.join(err.split())}")
                else:
                    probe.errors.extend(
                        cuda_repo.keyring_errors(
                            cuda_repo.KEYRING_PATH,
                            keys,
                            normalize_fingerprint(params["key_fingerprint"]),
                            f"Reinstall cuda-keyring {params['keyring_version']}",
                        )
                    )
                result["installed"] = {"version": probe.installed_version(), "fingerprints": keys}
    except Stopped as stop:
        shutil.rmtree(workdir, ignore_errors=True)
        module.fail_json(msg=f"{name} stopped by signal {stop.args[0]}; its downloads were removed")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result.update(changed=changed, errors=probe.errors, downloaded=probe.downloaded, **outcome)
    return result, probe


# --- module cuda_repo_probe (plugins/modules/cuda_repo_probe.py runs it, and module host_checks) -------------------

ARGUMENT_SPEC = {
    **PROBE_ARGUMENTS,
    "offered_nccl": {"type": "str", "choices": ["auto", "always", "never"], "default": "auto"},
    "fail_on_errors": {"type": "bool", "default": False},
    "install": {"type": "bool", "default": False},
    "root": {"type": "path", "default": "/"},
}


def run(module):
    """Module cuda_repo_probe on ``module`` (an AnsibleModule, or host_checks' stand-in): exits through it."""
    params = module.params
    if params["install"]:
        params["offered_nccl"] = "never"
    result, probe = probe_host(module, install=params["install"])
    result.pop("install_why", None)
    if (params["install"] or params["fail_on_errors"]) and probe.errors:
        module.fail_json(msg="; ".join(probe.errors), **result)
    module.exit_json(**result)


# --- module cuda_repo, the role's applier (plugins/modules/cuda_repo.py runs it, and module node_apply) -------------

APPLY_STEPS = ("install", "configure")
APPLY_ARGUMENT_SPEC = {
    **APPLIER_ARGUMENTS,
    **PROBE_ARGUMENTS,
    "run_tags": {"type": "list", "elements": "str", "default": []},
    "skip_tags": {"type": "list", "elements": "str", "default": []},
}
APT_UPDATE_TRIES = 3


def apply(module):
    """Module cuda_repo: the checks first (failing before any change), then the verified cuda-keyring and the source
    where they differ, then apt's index where this run changed the repository or apt has no lists of it yet."""
    params = module.params
    applying = params["state"] == "present"
    steps = steps_to_run(APPLY_STEPS, params["run_tags"], params["skip_tags"], "cuda_repo_") if applying else []
    # What the repository offers is read only where nothing else can tell: in check mode (or a check), before apt
    # has lists of the repository. A real run refreshes apt's index instead.
    params["offered_nccl"] = "auto" if module.check_mode or not applying else "never"
    applier = Applier(module)
    result, probe = probe_host(module, install="install" in steps, name="cuda_repo")
    if probe.errors:
        module.fail_json(msg="; ".join(probe.errors), **result)
    why = result.pop("install_why", None)
    if result.pop("changed"):
        applier.changes.append({"what": "package cuda-keyring", "why": why})
    if "configure" in steps:
        entry = result["source_entry"] + "\n"
        applier.file(result["list_path"], f"{params['header']}\n{entry}" if params["header"] else entry)
    if steps:
        refresh_index(module, applier, result)
    module.exit_json(**applier.report(result, steps=steps))


def refresh_index(module, applier, result):
    """``apt-get update`` where this run changed the repository or apt has no lists of it (so that apt, and NCCL's
    applier after it in the same call, see what the repository offers), on the real root only, not in check mode;
    tried APT_UPDATE_TRIES times, as a mirror may be briefly unreachable. A tree (root other than /) has no apt."""
    if module.params["root"] != "/":
        return
    if applier.changes:
        why = "the repository's keyring or source changed"
    elif not result["apt_lists"]:
        why = "apt has no lists of the repository yet"
    else:
        return
    applier.changes.append({"what": "apt index", "why": why})
    if module.check_mode:
        return
    command = [module.get_bin_path("apt-get", required=True), "update", "-q", "-o", "DPkg::Lock::Timeout=300"]
    for attempt in range(APT_UPDATE_TRIES):
        rc, out, err = module.run_command(command, environ_update={"LANG": "C", "LC_ALL": "C"})
        if rc == 0:
            return
        if attempt + 1 < APT_UPDATE_TRIES:
            time.sleep(5 * (attempt + 1))
    detail = (err or out).strip().splitlines()[-3:]
    module.fail_json(msg=f"apt-get update failed (rc {rc}): {' '.join(detail)}", **result)
