# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Validation for the nccl role: package versions, /etc/nccl.conf content and feature minimums.

Pure functions returning error strings (empty list = valid), so the role's preflight can assert on them and
name the host, the variable, the value and the fix; and ``run(module)``, the module nccl's steps on the node (module
nccl runs it, and module host_checks its checked state), with no Ansible import.
"""

import ctypes
import platform
import re

from .applier import ARGUMENT_SPEC as APPLIER_ARGUMENTS
from .applier import Applier
from .fabric_model import version_tuple
from .rdma_sysfs import nccl_gid, read_rdma_devices

# NCCL's environment documentation (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html) splits its
# variables into "System configuration" and "Debugging"; the latter "should not be used in production nor retained
# in scripts ... Keeping them set may result in sub-optimal behavior, crashes, or hangs."
DEBUG_ONLY_VARIABLES = frozenset(
    (
        "NCCL_ALGO",
        "NCCL_PROTO",
        "NCCL_BUFFSIZE",
        "NCCL_NTHREADS",
        "NCCL_IB_DISABLE",
        "NCCL_IB_CUDA_SUPPORT",
        "NCCL_NET_GDR_LEVEL",
        "NCCL_NET_GDR_READ",
        "NCCL_SHM_DISABLE",
        "NCCL_MIN_NCHANNELS",
        "NCCL_MAX_NCHANNELS",
        "NCCL_MIN_NRINGS",
        "NCCL_MAX_NRINGS",
        "NCCL_MIN_CTAS",
        "NCCL_MAX_CTAS",
        "NCCL_LL_THRESHOLD",
        "NCCL_TREE_THRESHOLD",
        "NCCL_SINGLE_RING_THRESHOLD",
        "NCCL_CHECKS_DISABLE",
        "NCCL_CHECK_POINTERS",
        "NCCL_LAUNCH_MODE",
    )
)
DEBUG_ONLY_PREFIXES = ("NCCL_P2P_",)

# Variables holding a list of interface or HCA names; a YAML list means exact names and is written with "=".
NAME_LIST_VARIABLES = {
    "NCCL_SOCKET_IFNAME": re.compile(r"[A-Za-z0-9_.:-]{1,15}"),  # Linux IFNAMSIZ - 1
    "NCCL_IB_HCA": re.compile(r"[A-Za-z0-9_]{1,64}(:[0-9]{1,3})?"),  # device[:port]
}
# Raw NCCL filter syntax: optional "^" (exclude) then optional "=" (exact), then comma-separated names.
_FILTER_RE = re.compile(r"\^?=?[A-Za-z0-9_.:-]+(,[A-Za-z0-9_.:-]+)*")

_NAME_RE = re.compile(r"NCCL_[A-Z0-9_]+")
_NCCL_VERSION_RE = re.compile(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)")
_CUDA_VERSION_RE = re.compile(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)")


def is_debug_only(name):
    return name in DEBUG_ONLY_VARIABLES or name.startswith(DEBUG_ONLY_PREFIXES)


def version_errors(nccl_version, cuda_version, revision=1):
    """Errors for the inputs of :func:`package_version` (NCCL X.Y.Z, CUDA X.Y, revision >= 1)."""
    errors = []
    if not isinstance(nccl_version, str) or not _NCCL_VERSION_RE.fullmatch(nccl_version):
        errors.append(
            f"nccl_version={nccl_version!r} is not an NCCL release number X.Y.Z; "
            "write it as a quoted string, e.g. '2.21.5'"
        )
    if not isinstance(cuda_version, str) or not _CUDA_VERSION_RE.fullmatch(cuda_version):
        errors.append(
            f"nccl_cuda_version={cuda_version!r} is not a CUDA major.minor version; "
            "write it as a quoted string, e.g. '12.4'"
        )
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < 1:
        errors.append(f"nccl_package_revision={revision!r} must be an integer >= 1 (NVIDIA's packages use 1)")
    return errors


def package_version(nccl_version, cuda_version, revision=1):
    """NVIDIA's Debian version string: ('2.21.5', '12.4') -> '2.21.5-1+cuda12.4'."""
    errors = version_errors(nccl_version, cuda_version, revision)
    if errors:
        raise ValueError("; ".join(errors))
    return f"{nccl_version}-{revision}+cuda{cuda_version}"


def version_code(nccl_version):
    """NCCL_VERSION_CODE / ncclGetVersion for 'X.Y.Z': X*10000 + Y*100 + Z since 2.9, X*1000 + Y*100 + Z before."""
    major, minor, patch = version_tuple(nccl_version)[:3]
    if (major, minor) >= (2, 9):
        return major * 10000 + minor * 100 + patch
    return major * 1000 + minor * 100 + patch


def version_at_least(actual, minimum):
    a, m = version_tuple(actual), version_tuple(minimum)
    width = max(len(a), len(m))
    return a + (0,) * (width - len(a)) >= m + (0,) * (width - len(m))


def _render_value(name, value):
    """Return (text, error)."""
    if isinstance(value, bool):
        return ("1" if value else "0"), None
    if isinstance(value, int):
        return str(value), None
    if isinstance(value, (list, tuple)):
        pattern = NAME_LIST_VARIABLES.get(name)
        if pattern is None:
            return None, "{}: a list is only accepted for {} (exact names)".format(name, ", ".join(NAME_LIST_VARIABLES))
        if not value:
            return None, f"{name}: the list of exact names is empty"
        bad = [item for item in value if not isinstance(item, str) or not pattern.fullmatch(item)]
        if bad:
            return None, "{}: {!r} are not valid {} names".format(
                name,
                bad,
                "interface" if name == "NCCL_SOCKET_IFNAME" else "HCA (device[:port])",
            )
        return "=" + ",".join(value), None
    if not isinstance(value, str):
        return None, f"{name}: value {value!r} must be a string, integer, boolean or (for name lists) a list"
    if value == "" or value != value.strip():
        return None, f"{name}: value {value!r} is empty or has leading/trailing whitespace"
    if any(ord(char) < 32 or ord(char) == 127 for char in value):
        return None, f"{name}: value {value!r} contains a control character (newline, tab, ...)"
    if name in NAME_LIST_VARIABLES and not _FILTER_RE.fullmatch(value):
        return None, f"{name}: {value!r} is not NCCL filter syntax ([^][=]name[,name...])"
    return value, None


def conf_lines(settings, allowed_debug=()):
    """Validate the ``nccl_conf`` mapping; return {'lines': ['NAME=value', ...], 'errors': [...], 'notes': [...]}.

    ``allowed_debug`` lists debug-only variable names the user explicitly allows (benchmarks only).
    """
    lines, errors, notes = [], [], []
    if not isinstance(settings, dict):
        return {"lines": [], "errors": ["nccl_conf must be a mapping of NCCL_* names to values"], "notes": []}
    allowed = set(allowed_debug or ())
    for name in allowed:
        if not isinstance(name, str) or not is_debug_only(name):
            errors.append(
                f"nccl_conf_allow_debug_variables: {name!r} is not a debug-only variable; "
                "list only the debug-only names you set in nccl_conf"
            )
    # Sorted by name: an inventory's mapping order is not stable (Molecule, YAML dumps), the file must be.
    for name, value in sorted(settings.items(), key=lambda item: str(item[0])):
        if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
            errors.append(f"nccl_conf: {name!r} is not an NCCL variable name (NCCL_ followed by A-Z, 0-9, _)")
            continue
        if name == "NCCL_CONF_FILE":
            errors.append("nccl_conf: NCCL_CONF_FILE is read from the environment only, not from /etc/nccl.conf")
            continue
        if is_debug_only(name) and name not in allowed:
            errors.append(
                f"nccl_conf: {name} is a debug-only NCCL variable (NCCL's docs: not for production, may cause "
                "sub-optimal behaviour, crashes or hangs); remove it, or for a benchmark host add it to "
                "nccl_conf_allow_debug_variables"
            )
            continue
        text, error = _render_value(name, value)
        if error:
            errors.append("nccl_conf: " + error)
            continue
        if name in NAME_LIST_VARIABLES and isinstance(value, str) and not text.lstrip("^").startswith("="):
            notes.append(
                f"{name}={text} is a prefix match (e.g. mlx5_1 also matches mlx5_10); give a YAML list for exact names"
            )
        if name == "NCCL_IB_GID_INDEX":
            notes.append(
                "NCCL_IB_GID_INDEX is detected automatically (RoCEv2) since NCCL 2.21; a fixed index breaks "
                "with VLANs or IPv6"
            )
        lines.append(f"{name}={text}")
    return {"lines": lines, "errors": errors, "notes": notes}


# NCCL_IB_ADDR_FAMILY: the family of the RoCE GID NCCL selects itself (NCCL 2.21 and later; AF_INET by default),
# NCCL's environment variables: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-ib-addr-family
ADDRESS_FAMILIES = {"ipv4": "AF_INET", "ipv6": "AF_INET6"}


def with_address_family(conf, family):
    """(nccl_conf with NCCL_IB_ADDR_FAMILY for ``family`` (nccl_ib_addr_family), errors): IPv6 writes AF_INET6 (IPv4
    is NCCL's default and writes nothing); nccl_conf's own NCCL_IB_ADDR_FAMILY must say the same."""
    if not isinstance(conf, dict):
        return conf, []
    given = conf.get("NCCL_IB_ADDR_FAMILY")
    wanted = ADDRESS_FAMILIES.get(family, "AF_INET")
    if given is not None and str(given) != wanted:
        return conf, [
            f"nccl_conf: NCCL_IB_ADDR_FAMILY={given} contradicts nccl_ib_addr_family={family} ({wanted}); set "
            "nccl_ib_addr_family (ipv4 or ipv6) and leave NCCL_IB_ADDR_FAMILY out of nccl_conf"
        ]
    if family == "ipv6" and given is None:
        return dict(conf, NCCL_IB_ADDR_FAMILY=wanted), []
    return conf, []


# From NCCL 2.21, NCCL_IB_GID_INDEX defaults to -1: NCCL picks the RoCE v2 GID of NCCL_IB_ADDR_FAMILY itself (NCCL's
# environment variables, NCCL_IB_GID_INDEX). Older NCCL uses index 0 unless told, a link-local RoCE v1 GID on mlx5.
GID_AUTO_SINCE = "2.21"
GID_TABLE_MAX = 256  # the largest GID table of the RDMA devices NCCL runs on (mlx5: 255 entries)


def gid_index(params, ports):
    """(NCCL_IB_GID_INDEX to write or None, errors, warnings) for nccl.conf, from nccl_ib_gid_index (``auto`` or an
    index) and the RoCE interfaces' ports (``ports``: {interface: its RDMA port, read_port's}, where it exists yet).

    auto: nothing for NCCL 2.21 and later; for older NCCL the index of the RoCE v2 GID of the address family on every
    RoCE interface, which must be one index for all (NCCL takes one). An index: written, inside each port's table."""
    wanted, interfaces = params["ib_gid_index"], params["roce_interfaces"]
    given = "NCCL_IB_GID_INDEX" in (params["conf"] or {})
    auto = str(wanted).strip().lower() == "auto"
    if not auto and not (str(wanted).strip().isdigit() and int(str(wanted)) < GID_TABLE_MAX):
        return None, [f"nccl_ib_gid_index={wanted!r} is neither auto nor a GID index (0-{GID_TABLE_MAX - 1})"], []
    if given:
        if auto:
            return None, [], []  # the site's own, with role nccl's note against a fixed index
        return None, ["nccl_conf sets NCCL_IB_GID_INDEX and nccl_ib_gid_index is not auto: set one of them"], []
    if not interfaces:
        return None, [], []
    if not auto:
        index = int(str(wanted))
        errors = [
            f"nccl_ib_gid_index={index} is outside the GID table of {name}'s RDMA port ({port['gid_table_size']} "
            f"entries, 0-{port['gid_table_size'] - 1}): set auto, or an index of the table (show_gids, or sysfs "
            f"/sys/class/infiniband/<device>/ports/<port>/gids)"
            for name, port in sorted(ports.items())
            if port.get("gid_table_size") and index >= port["gid_table_size"]
        ]
        return (None if errors else index), errors, []
    if version_at_least(params["nccl_version"], GID_AUTO_SINCE):
        return None, [], []
    family = params["ib_addr_family"]
    found = {name: nccl_gid(port, family) for name, port in ports.items()}
    missing = sorted(set(interfaces) - {name for name, gid in found.items() if gid})
    if missing:
        return (
            None,
            [],
            [
                f"NCCL {params['nccl_version']} chooses no RoCE GID itself (from {GID_AUTO_SINCE} it does): "
                f"NCCL_IB_GID_INDEX is written once {', '.join(missing)} has a RoCE v2 {family} GID (its fabric "
                "address)"
            ],
        )
    indexes = {name: gid["index"] for name, gid in found.items()}
    if len(set(indexes.values())) > 1:
        listed = ", ".join(f"{name} {index}" for name, index in sorted(indexes.items()))
        return (
            None,
            [
                f"NCCL {params['nccl_version']} takes one NCCL_IB_GID_INDEX for every RoCE interface, but their RoCE "
                f"v2 {family} GIDs are at different indexes ({listed}): give the interfaces their addresses in the "
                "same order, or use NCCL 2.21 or later, which chooses per port"
            ],
            [],
        )
    return next(iter(indexes.values())), [], []


def roce_ports(interfaces, root="/"):
    """{interface: its RDMA port (read_port's)} for the RoCE ``interfaces`` that have an RDMA device now."""
    ports = {}
    for device in read_rdma_devices(root):
        for port in device.get("ports") or []:
            if port.get("netdev") in interfaces and port.get("link_layer") == "Ethernet":
                ports.setdefault(port["netdev"], port)
    return ports


def feature_report(features, table, facts):
    """Check requested features against the minimums table.

    ``table``: list of rows {feature, component, minimum, source}. ``facts``: {component: version or None}.
    Returns {'errors': [...], 'unchecked': [...], 'checked': [...]}. A component whose version is unknown (None) is
    reported as unchecked, never as passed.
    """
    errors, unchecked, checked = [], [], []
    known = {row.get("feature") for row in table}
    for feature in features or ():
        if feature not in known:
            errors.append(
                "nccl_required_features: unknown feature {!r}; known: {}".format(feature, ", ".join(sorted(known)))
            )
            continue
        for row in table:
            if row.get("feature") != feature:
                continue
            component, minimum = row["component"], str(row["minimum"])
            actual = facts.get(component)
            label = "{} needs {} >= {} ({})".format(feature, component, minimum, row["source"])
            if actual in (None, ""):
                unchecked.append(label + f": {component} version unknown on this host")
            elif version_at_least(actual, minimum):
                checked.append(label + f": have {actual}")
            else:
                errors.append(label + f": this host has {actual}")
    return {"errors": errors, "unchecked": unchecked, "checked": checked}


def parse_dpkg_query(text):
    """Parse ``dpkg-query --show --showformat '${Package} ${Version} ${db:Status-Want} ${db:Status-Status}\\n'``.

    Returns {package: {'version': str, 'held': bool}} for installed packages only (not config-files, half-installed).
    """
    installed = {}
    for line in (text or "").splitlines():
        fields = line.split()
        if len(fields) == 4 and fields[3] == "installed":
            installed[fields[0]] = {"version": fields[1], "held": fields[2] == "hold"}
    return installed


def parse_package_index(text, packages=("libnccl2", "libnccl-dev")):
    """Parse an apt ``Packages`` index (or just its Package:/Version: lines) into {package: [versions]} for
    ``packages``: what a repository offers before apt knows it (the site preflight runs before cuda_repo)."""
    offered = {}
    package = None
    for line in (text or "").splitlines():
        if line.startswith("Package:"):
            package = line.split(":", 1)[1].strip()
        elif line.startswith("Version:") and package in packages:
            versions = offered.setdefault(package, [])
            version = line.split(":", 1)[1].strip()
            if version not in versions:
                versions.append(version)
        elif not line.strip():
            package = None
    return offered


def release_index_sha256(release_text, name):
    """The SHA256 a (signed) Release/InRelease file lists for index ``name`` (e.g. 'Packages.gz'), or ''."""
    in_sha256 = False
    for line in (release_text or "").splitlines():
        if not line.startswith(" "):
            in_sha256 = line.strip() == "SHA256:"
            continue
        fields = line.split()
        if in_sha256 and len(fields) == 3 and fields[2] == name and re.fullmatch(r"[0-9a-f]{64}", fields[0]):
            return fields[0]
    return ""


def parse_madison(text):
    """Parse ``apt-cache madison`` output into {package: [versions, in apt's order]}."""
    offered = {}
    for line in (text or "").splitlines():
        fields = [field.strip() for field in line.split("|")]
        if len(fields) >= 3 and fields[0] and fields[1]:
            versions = offered.setdefault(fields[0], [])
            if fields[1] not in versions:
                versions.append(fields[1])
    return offered


def package_decision(
    dpkg_text,
    madison_text,
    package_version,
    nccl_version,
    cuda_version,
    install_dev=False,
    allow_version_change=False,
    offered_index=None,
    before_repository=False,
):
    """What the nccl role manages on a host and what it must refuse, from dpkg-query and apt-cache madison.

    ``before_repository`` is true in check mode and in the site preflight (apt may not know the CUDA repository
    yet); then an empty madison is not an error, and ``offered_index`` (what cuda_repo read from the signed package
    index) is checked instead when there is one. Returns {installed, packages, offered, unverifiable, errors, notes};
    the messages do not name the host (the role's assert does).
    """
    installed = parse_dpkg_query(dpkg_text)
    packages = ["libnccl2"] + (["libnccl-dev"] if install_dev or "libnccl-dev" in installed else [])
    madison = parse_madison(madison_text)
    offered_index = offered_index or {}
    unverifiable = bool(before_repository) and not madison
    errors, notes = [], []
    if unverifiable:
        how = (
            "; the pair is checked against the signed package index of the repository instead"
            if offered_index
            else ", nor its availability checked"
        )
        notes.append(
            "apt does not know the CUDA repository yet (cuda_repo has not run for real), so the installation"
            f" of {package_version} cannot be simulated{how}."
        )
    if not unverifiable or offered_index:
        offered = madison or offered_index
        missing = [p for p in packages if package_version not in offered.get(p, [])]
        if missing:
            seen = " (apt does not know the CUDA repository yet: checked against its signed package index)"
            offered_list = ", ".join(offered.get("libnccl2") or ["none (run gpucluster.fabric.cuda_repo first)"])
            errors.append(
                f"{' and '.join(missing)} {package_version} (nccl_version={nccl_version},"
                f" nccl_cuda_version={cuda_version}) is not offered by the configured apt repositories"
                f"{seen if not madison else ''}; libnccl2 versions offered: {offered_list}. NVIDIA builds each NCCL"
                " release for a few CUDA versions only: pick an offered pair."
            )
    changing = [p for p, state in installed.items() if state["version"] != package_version]
    if changing and not allow_version_change:
        have = ", ".join(f"{p} {installed[p]['version']}{' (held)' if installed[p]['held'] else ''}" for p in changing)
        errors.append(
            f"installed {have} but nccl_version={nccl_version} / nccl_cuda_version={cuda_version} ask for"
            f" {package_version}. Replacing NCCL breaks running jobs and the pin is deliberate; to change it, drain"
            " the node and set nccl_allow_version_change: true."
        )
    return {
        "installed": installed,
        "packages": packages,
        "offered": madison or offered_index,
        "unverifiable": unverifiable,
        "errors": errors,
        "notes": notes,
    }


def package_state(installed, packages, package_version, hold):
    """What apt and dpkg still have to do: ``in_place`` (every package installed at ``package_version``) and
    ``hold_pending`` (the packages whose selection is not what ``hold`` asks for, or that are not installed yet)."""
    return {
        "in_place": all(installed.get(p, {}).get("version") == package_version for p in packages),
        "hold_pending": [p for p in packages if p not in installed or installed[p]["held"] != bool(hold)],
    }


# --- on the node (module nccl) --------------------------------------------------------------------------------------

PACKAGES = ("libnccl2", "libnccl-dev")
# apt_preferences(5): a priority above 1000 makes apt install this build even where that is a downgrade, and prefer
# it over every other candidate, so that an upgrade leaves NCCL alone.
PREFERENCES = "/etc/apt/preferences.d/gpucluster-nccl"


def _text(header, lines):
    return (header.rstrip("\n") + "\n" if header else "") + "".join(line + "\n" for line in lines)


def pin_preferences(header, version):
    """The apt pin of one exact build of both packages (libnccl2 and libnccl-dev must stay identical)."""
    return _text(
        header,
        [
            "# NCCL is pinned to one exact build: libnccl2 and libnccl-dev must stay identical.",
            f"Package: {' '.join(PACKAGES)}",
            f"Pin: version {version}",
            "Pin-Priority: 1001",
        ],
    )


def conf_text(header, lines):
    """/etc/nccl.conf: the checked ``conf_lines`` of nccl_conf, one NAME=value per line."""
    return _text(header, lines)


def installed_version(module, package):
    """The installed version of a Debian package, or None."""
    rc, out, _err = module.run_command(["dpkg-query", "--show", "--showformat", "${Version}", package])
    return out.strip() or None if rc == 0 else None


def feature_errors(module, features, table, versions):
    """The problems of ``nccl_required_features`` on this host, each naming the variable; unknown versions warned."""
    if not features:
        return []
    versions = dict(versions, **{"rdma-core": installed_version(module, "rdma-core")})
    report = feature_report(features, table, versions)
    for text in report["unchecked"]:
        module.warn(f"nccl_required_features not checked: {text}")
    prefix = "nccl_required_features: "
    return [error if error.startswith(prefix) else prefix + error for error in report["errors"]]


def read_packages(module):
    """(dpkg-query's, apt-cache madison's) output for the NCCL packages; ``module``: an AnsibleModule."""
    showformat = "${Package} ${Version} ${db:Status-Want} ${db:Status-Status}\n"
    rc, dpkg, err = module.run_command(["dpkg-query", "--show", "--showformat", showformat, *PACKAGES])
    if rc > 1:
        module.fail_json(msg=f"dpkg-query failed (rc {rc}): {err.strip()}")
    _rc, madison, _err = module.run_command(["apt-cache", "madison", *PACKAGES])
    return dpkg, madison


# --- the module (plugins/modules/nccl.py runs it; module host_checks runs its checked state) -----------------------


def loaded_version():
    """ncclGetVersion of the libnccl.so.2 the dynamic loader finds, or an error text."""
    try:
        library = ctypes.CDLL("libnccl.so.2")
    except OSError as exc:
        return None, f"libnccl.so.2 cannot be loaded: {exc}"
    version = ctypes.c_int()
    if library.ncclGetVersion(ctypes.byref(version)) != 0:
        return None, "ncclGetVersion failed"
    return version.value, None


def library_code(apply, nccl_version, build):
    """ncclGetVersion's code of the library the loader finds; refused (no change made) unless it is ``build``'s."""
    code, error = loaded_version()
    expected = version_code(nccl_version)
    if error or code != expected:
        apply.refuse(
            [
                f"libnccl.so.2 reports NCCL {code if error is None else error} but {build} (code"
                f" {expected}) is pinned; another libnccl.so.2 may shadow it (ldconfig -p | grep nccl)."
            ]
        )
    return code


ARGUMENT_SPEC = {
    **APPLIER_ARGUMENTS,
    "nccl_version": {"type": "raw", "required": True},
    "cuda_version": {"type": "raw", "required": True},
    "package_revision": {"type": "raw", "default": 1},
    "conf": {"type": "dict", "default": {}},
    "allow_debug_variables": {"type": "list", "elements": "raw", "default": []},
    "conf_path": {"type": "path", "default": "/etc/nccl.conf"},
    "ib_addr_family": {"type": "str", "default": "ipv4", "choices": ["ipv4", "ipv6"]},
    "ib_gid_index": {"type": "raw", "default": "auto"},
    "roce_interfaces": {"type": "list", "elements": "str", "default": []},
    "install_dev": {"type": "bool", "default": False},
    "allow_version_change": {"type": "bool", "default": False},
    "offered_index": {"type": "dict", "default": {}},
    "before_repository": {"type": "bool", "default": False},
    "required_features": {"type": "list", "elements": "str", "default": []},
    "feature_minimums": {"type": "list", "elements": "dict", "default": []},
    "hold": {"type": "bool", "default": True},
    "library": {"type": "bool", "default": False},
    "library_in_place": {"type": "bool", "default": False},
    "restore_pin": {"type": "str", "default": ""},
}


def run(module):
    """Module nccl on ``module`` (an AnsibleModule, or host_checks' stand-in): exits through it."""
    params = module.params
    apply = Applier(module)
    header = params["header"]
    nccl_version, cuda_version = params["nccl_version"], params["cuda_version"]

    # 1. The input, every problem at once, before anything is read or changed.
    settings, family_errors = with_address_family(params["conf"], params["ib_addr_family"])
    conf = conf_lines(settings, params["allow_debug_variables"])
    errors = version_errors(nccl_version, cuda_version, params["package_revision"]) + family_errors + conf["errors"]
    apply.refuse(errors)
    # NCCL_IB_GID_INDEX: the RoCE GID NCCL before 2.21 cannot choose itself, read from the interfaces' GID tables.
    index, gid_errors, gid_warnings = gid_index(params, roce_ports(params["roce_interfaces"], params["root"]))
    apply.refuse(gid_errors)
    if index is not None:
        conf["lines"] = sorted([*conf["lines"], f"NCCL_IB_GID_INDEX={index}"], key=lambda line: line.split("=", 1)[0])
    build = package_version(nccl_version, cuda_version, params["package_revision"])
    result = {"changed": False, "changes": [], "package_version": build}

    if params["restore_pin"]:
        pin = None if params["restore_pin"] == "absent" else pin_preferences(header, params["restore_pin"])
        apply.file(PREFERENCES, pin)
        module.exit_json(**apply.report(result))

    if params["library"]:
        module.exit_json(**dict(result, version_code=library_code(apply, nccl_version, build)))

    # 2. The packages: what is installed, what the repositories offer, and what the role may do.
    dpkg, madison = read_packages(module)
    decision = package_decision(
        dpkg_text=dpkg,
        madison_text=madison,
        package_version=build,
        nccl_version=nccl_version,
        cuda_version=cuda_version,
        install_dev=params["install_dev"],
        allow_version_change=params["allow_version_change"],
        offered_index=params["offered_index"],
        before_repository=params["before_repository"] or module.check_mode,
    )
    versions = {"nccl": str(nccl_version), "cuda": str(cuda_version), "kernel": platform.release()}
    features = feature_errors(module, params["required_features"], params["feature_minimums"], versions)
    apply.refuse(decision["errors"] + features)
    for note in conf["notes"]:
        module.warn(f"{params['host'] or 'nccl'}: nccl_conf: {note}")
    for warning in gid_warnings:
        module.warn(f"{params['host'] or 'nccl'}: {warning}")
    result.update({key: decision[key] for key in ("installed", "packages", "unverifiable")})
    result.update(package_state(decision["installed"], decision["packages"], build, params["hold"]))
    if decision["notes"]:
        result["msg"] = " ".join(decision["notes"])
    if params["state"] == "checked":
        module.exit_json(**result)
    if params["library_in_place"] and result["in_place"]:
        # apt has nothing to do: the library check that would follow an install, in this call, before any change.
        result["version_code"] = library_code(apply, nccl_version, build)

    # 3. The pin (before apt installs, so that apt's choice is the pinned build) and nccl.conf.
    apply.file(PREFERENCES, pin_preferences(header, build))
    apply.file(params["conf_path"], conf_text(header, conf["lines"]))
    module.exit_json(**apply.report(result))
