# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""What role fabric_interfaces makes true on a host, in one module run: the files each network backend reads, the
multi-rail and neighbour-table sysctls, the running links (mode, MTU, address), and the Soft-RoCE devices.

The file contents are pure functions of the normalised interfaces (fabric_model.normalise_interface), so that unit
tests pin them line by line; ``InterfacesApplier`` writes only what differs (module_utils/applier.py) and runs a
backend's reload command only when one of its files changed. None of these reloads takes a link down: each makes the
backend re-read its files, so that what it applies later (at the next boot, hotplug or reconnect) is what was written.

Sources: netplan(5) (``infiniband-mode`` since netplan 0.105), systemd.network(5) (``[Link] MTUBytes=``),
nm-settings-keyfile(5) and nm-settings(5) (``[infiniband] transport-mode``), interfaces(5) (ifupdown), sysctl.d(5),
udev(7), and rdma(8) (``rdma link add <name> type rxe netdev <if>``).
"""

import os
import uuid

from . import applier
from .fabric_link import LinkApplier, detect_backend, parse_is_active, present_sysctls
from .fabric_model import normalise_interface, version_tuple

NETPLAN_FILE = "/etc/netplan/60-gpucluster-fabric.yaml"
# netplan learnt infiniband-mode in 0.105 (Ubuntu 20.04 has 0.104: the key would be a parse error there).
NETPLAN_IPOIB_MODE_VERSION = "0.105"
NETWORKD_DIR = "/etc/systemd/network"
NM_DIR = "/etc/NetworkManager/system-connections"
IFUPDOWN_DIR = "/etc/network/interfaces.d"
# Sets the IPoIB mode when the device appears, before networkd applies the MTU: networkd (and netplan's networkd
# renderer) cannot set it on systemd < 250 (Ubuntu 22.04) and, as seen on Debian 12's systemd 252, rejects an
# [IPoIB] section in a .network file ("Unknown section 'IPoIB'").
UDEV_RULE = "/etc/udev/rules.d/70-gpucluster-ipoib-mode.rules"
SOFTROCE_UNIT_DIR = "/etc/systemd/system"
SOFTROCE_UNIT_PREFIX = "gpucluster-softroce-"
# ansible-core's to_uuid filter namespace (ansible/plugins/filter/core.py UUID_NAMESPACE_ANSIBLE): the profiles
# written before this module keep their UUIDs.
UUID_NAMESPACE_ANSIBLE = uuid.UUID("361E6D51-FAEC-444A-9079-341386DA8E2E")

BACKENDS = ("netplan", "systemd-networkd", "NetworkManager", "ifupdown", "none")
# The steps of the role, each with its tag (fabric_interfaces_<step>): a run limited to some steps' tags applies those.
STEPS = ("configure", "sysctl", "run", "softroce")
# What makes each backend re-read its files (only run when one changed; none takes a link down).
RELOAD = {
    "netplan": ["netplan", "generate"],
    "systemd-networkd": ["networkctl", "reload"],
    "NetworkManager": ["nmcli", "connection", "reload"],
}

# --- what is wanted -------------------------------------------------------------------------------------------------


def steps_to_run(run_tags, skip_tags, prefix="fabric_interfaces_"):
    """The role's steps this run applies (applier.steps_to_run)."""
    return applier.steps_to_run(STEPS, run_tags, skip_tags, prefix)


def _family(address):
    return "inet6" if address and ":" in address else "inet"


def _lines(header, body):
    return (header + "\n" if header else "") + "".join(line + "\n" for line in body)


def ifupdown_stanza(header, item):
    """/etc/network/interfaces.d/gpucluster-<name> (interfaces(5)): the mode is written before the MTU."""
    name, address = item["name"], item.get("address")
    body = [f"auto {name}", "iface {} {} {}".format(name, _family(address), "static" if address else "manual")]
    if address:
        body.append(f"    address {address}")
    body.append("    mtu {}".format(item["mtu"]))
    if item["kind"] == "ipoib":
        mode_file = f"/sys/class/net/{name}/mode"
        body += [
            "    # ifupdown has no IPoIB keyword: set the mode before the MTU (a mode change resets it)",
            "    pre-up [ ! -e {0} ] || echo {1} > {0}".format(mode_file, item["mode"]),
        ]
    return _lines(header, body)


def netplan_yaml(header, interfaces, ipoib_mode):
    """/etc/netplan/60-gpucluster-fabric.yaml; ``infiniband-mode`` only where netplan knows the key."""
    body = ["network:", "  version: 2", "  ethernets:"]
    for item in interfaces:
        body += ["    {}:".format(item["name"]), "      mtu: {}".format(item["mtu"])]
        if item["kind"] == "ipoib" and ipoib_mode:
            body.append("      infiniband-mode: {}".format(item["mode"]))
        if item.get("address"):
            body.append('      addresses: ["{}"]'.format(item["address"]))
    return _lines(header, body)


def networkd_network(header, item):
    """/etc/systemd/network/20-gpucluster-<name>.network (systemd.network(5))."""
    body = [
        f"# The IPoIB mode is set by {UDEV_RULE} (see role fabric_interfaces README).",
        "[Match]",
        "Name={}".format(item["name"]),
        "",
        "[Link]",
        "MTUBytes={}".format(item["mtu"]),
    ]
    if item.get("address"):
        body += ["", "[Network]", "Address={}".format(item["address"])]
    return _lines(header, body)


def nm_keyfile(header, host, item):
    """/etc/NetworkManager/system-connections/gpucluster-<name>.nmconnection (nm-settings-keyfile(5)).

    The UUID is derived from the host and interface name, so that a re-run writes the same profile.
    """
    name, address = item["name"], item.get("address")
    v6 = bool(address) and ":" in address
    ipoib = item["kind"] == "ipoib"
    body = [
        "[connection]",
        f"id=gpucluster-{name}",
        "uuid={}".format(uuid.uuid5(UUID_NAMESPACE_ANSIBLE, f"gpucluster.fabric/{host}/{name}")),
        "type={}".format("infiniband" if ipoib else "ethernet"),
        f"interface-name={name}",
        "autoconnect=true",
        "",
    ]
    if ipoib:
        body += ["[infiniband]", "mtu={}".format(item["mtu"]), "transport-mode={}".format(item["mode"])]
    else:
        body += ["[ethernet]", "mtu={}".format(item["mtu"])]
    for section, here in (("ipv4", bool(address) and not v6), ("ipv6", v6)):
        body += ["", f"[{section}]"] + (["method=manual", f"address1={address}"] if here else ["method=disabled"])
    return _lines(header, body)


def udev_rules(header, interfaces):
    """The udev rule that sets each IPoIB interface's mode when it appears (None when there is no IPoIB one)."""
    ipoib = [item for item in interfaces if item["kind"] == "ipoib"]
    if not ipoib:
        return None
    body = ["# Set the IPoIB mode when the device appears, before the network backend sets its MTU."]
    body += [
        'ACTION=="add", SUBSYSTEM=="net", KERNEL=="{}", TEST=="mode", ATTR{{mode}}="{}"'.format(i["name"], i["mode"])
        for i in ipoib
    ]
    return _lines(header, body)


def softroce_unit(header, item):
    """The oneshot unit that creates Soft-RoCE device ``item['softroce']`` on ``item['name']`` at boot (rxe devices
    do not persist), bound to the netdev's device unit."""
    name, rxe = item["name"], item["softroce"]
    device = f"sys-subsystem-net-devices-{name}.device"
    body = [
        "[Unit]",
        f"Description=Soft-RoCE device {rxe} on {name}",
        f"BindsTo={device}",
        f"After={device}",
        "",
        "[Service]",
        "Type=oneshot",
        "RemainAfterExit=yes",
        "ExecStartPre=-/sbin/modprobe rdma_rxe",
        f"ExecStart=/bin/sh -c 'rdma link show {rxe}/1 >/dev/null 2>&1 "
        f"|| exec rdma link add {rxe} type rxe netdev {name}'",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
    ]
    return _lines(header, body)


def backend_files(backend, header, host, interfaces, netplan_ipoib_mode=True):
    """Path -> (content, mode) of what ``backend`` reads for ``interfaces`` ({} for none)."""
    if not interfaces or backend in (None, "", "none"):
        return {}
    if backend == "netplan":
        # netplan refuses (0.106+ warns on) configuration files that others can read.
        files = {NETPLAN_FILE: (netplan_yaml(header, interfaces, netplan_ipoib_mode), 0o600)}
    elif backend == "systemd-networkd":
        files = {
            "{}/20-gpucluster-{}.network".format(NETWORKD_DIR, i["name"]): (networkd_network(header, i), 0o644)
            for i in interfaces
        }
    elif backend == "NetworkManager":
        # NetworkManager ignores keyfiles that others can read.
        files = {
            "{}/gpucluster-{}.nmconnection".format(NM_DIR, i["name"]): (nm_keyfile(header, host, i), 0o600)
            for i in interfaces
        }
    else:
        files = {
            "{}/gpucluster-{}".format(IFUPDOWN_DIR, i["name"]): (ifupdown_stanza(header, i), 0o644) for i in interfaces
        }
    rules = udev_rules(header, interfaces) if backend in ("netplan", "systemd-networkd") else None
    if rules is not None:
        files[UDEV_RULE] = (rules, 0o644)
    return files


def sysctl_conf(header, sysctls):
    """The sysctl.d file (sysctl.d(5)): one ``key=value`` a line."""
    return _lines(header, [f"{key}={value}" for key, value in sysctls.items()])


def parse_sysctl_conf(text):
    """key -> value of a sysctl.d file (comments and blank lines aside), as sysctl(8) reads it."""
    found = {}
    for line in (text or "").splitlines():
        line = line.strip()
        if not line or line[0] in "#;" or "=" not in line:
            continue
        key, value = line.lstrip("-").split("=", 1)
        found[key.strip().replace("/", ".")] = " ".join(value.split())
    return found


def netplan_knows_ipoib_mode(version):
    """Whether netplan ``version`` (dpkg's, e.g. ``0.106-0ubuntu3``) parses ``infiniband-mode``."""
    try:
        return version_tuple(version) >= version_tuple(NETPLAN_IPOIB_MODE_VERSION)
    except ValueError:
        return False


# --- making it so ---------------------------------------------------------------------------------------------------


class InterfacesApplier:
    """Applies the steps of role fabric_interfaces on one host through ``apply`` (an applier.Applier), changing only
    what differs. Commands that change the running system run only when ``apply.root`` is ``/``."""

    def __init__(self, apply, params):
        self.apply = apply
        self.module = apply.module
        self.params = params
        self.live = apply.root == "/"
        self.pending = []
        self.prefix = "{}: ".format(params["host"]) if params.get("host") else ""

    def _run(self, argv, what, fail=True):
        """Run ``argv`` (changing the running system); its rc. Nothing runs in check mode or off ``/``."""
        if self.module.check_mode or not self.live:
            return 0
        rc, _out, err = self.module.run_command(argv)
        if rc != 0 and fail:
            self.module.fail_json(
                msg="{}{} failed ({}): {}".format(self.prefix, what, " ".join(argv), err.strip() or f"exit {rc}"),
                **self.apply.report({}, pending=self.pending),
            )
        return rc

    def _query(self, argv):
        """Run a read-only command (also in check mode); (rc, stdout)."""
        if not self.live:
            return 1, ""
        rc, out, _err = self.module.run_command(argv)
        return rc, out

    def backend(self):
        wanted = self.params["backend"]
        if wanted != "auto":
            return wanted

        def unit_active(units):
            if not self.live:
                return {}
            _rc, out, _err = self.module.run_command(["systemctl", "is-active"] + list(units))
            return parse_is_active(units, out)

        return detect_backend(self.apply.root, unit_active) or "none"

    def configure(self, backend, interfaces):
        """Write the backend's files; reload the backend (and udev) when one changed; ifupdown reads them back."""
        ipoib_mode = True
        if backend == "netplan" and any(i["kind"] == "ipoib" for i in interfaces):
            rc, version = self._query(["dpkg-query", "-W", "-f=${Version}", "netplan.io"])
            ipoib_mode = rc == 0 and netplan_knows_ipoib_mode(version.strip())
        files = backend_files(backend, self.params["header"], self.params["host"], interfaces, ipoib_mode)
        changed = set()
        for path, (content, mode) in files.items():
            count = len(self.apply.changes)
            self.apply.file(path, content, mode)
            if len(self.apply.changes) > count:
                changed.add(path)
        if UDEV_RULE in changed:
            self._run(["udevadm", "control", "--reload"], "reloading the udev rules", fail=False)
        if changed - {UDEV_RULE} and backend in RELOAD:
            self._run(RELOAD[backend], f"making {backend} re-read its files")
        if backend == "ifupdown":
            # ifquery parses the whole configuration as ifup will at boot: a stanza it cannot see (no `source` line
            # for interfaces.d in /etc/network/interfaces) or cannot parse fails now, not at the next reboot.
            for item in interfaces:
                self._run(["ifquery", item["name"]], "ifupdown reading the stanza of {} back".format(item["name"]))

    def sysctl(self, sysctls):
        """Persist every sysctl; set now those this kernel exposes here, report the others as pending."""
        path = self.params["sysctl_file"]
        before = self.apply._read(path)
        if sysctls and (before is None or parse_sysctl_conf(before) != {k: str(v) for k, v in sysctls.items()}):
            self.apply.file(path, sysctl_conf(self.params["header"], sysctls))
        present = present_sysctls(list(sysctls), self.apply.root)
        for key, value in sysctls.items():
            if key not in present:
                self.pending.append("sysctl " + key)
                continue
            real = os.path.join(self.apply.root, "proc", "sys", *key.split("."))
            with open(real, encoding="utf-8") as handle:
                now = " ".join(handle.read().split())
            if now == str(value):
                continue
            self.apply.changes.append({"what": f"sysctl {key}", "why": f"it is {now}, wanted {value}"})
            if not self.module.check_mode:
                with open(real, "w", encoding="utf-8") as handle:
                    handle.write(f"{value}\n")

    def run(self, interfaces):
        """Mode, MTU and address of each running interface (module_utils/fabric_link.py LinkApplier)."""
        link = LinkApplier(self.module, os.path.join(self.apply.root, "sys"))
        for item in interfaces:
            link.apply(
                {
                    "name": item["name"],
                    "mode": item["mode"] if item["kind"] == "ipoib" else None,
                    "mtu": item["mtu"],
                    "address": item.get("address") or None,
                    "link_down_ok": self.params["link_down_ok"],
                }
            )
        for action in link.actions:
            name, why = action.split(": ", 1)
            self.apply.changes.append({"what": name, "why": why})

    def softroce(self, interfaces):
        """A boot unit per Soft-RoCE device, enabled, and started where the kernel has rdma_rxe."""
        devices = [i for i in interfaces if i["kind"] == "roce" and i.get("softroce")]
        if not devices:
            return
        units, written = [], False
        for item in devices:
            unit = SOFTROCE_UNIT_PREFIX + item["softroce"] + ".service"
            count = len(self.apply.changes)
            self.apply.file(f"{SOFTROCE_UNIT_DIR}/{unit}", softroce_unit(self.params["header"], item))
            written = written or len(self.apply.changes) > count
            units.append((unit, item))
        rxe = self._query(["modinfo", "-F", "filename", "rdma_rxe"])[0] == 0
        if written:
            self._run(["systemctl", "daemon-reload"], "reloading systemd")
        for unit, item in units:
            if self._query(["systemctl", "is-enabled", unit])[1].strip() != "enabled":
                self.apply.changes.append({"what": unit, "why": "not enabled"})
                self._run(["systemctl", "enable", unit], f"enabling {unit}")
            if not rxe:
                self.pending.append("softroce " + item["softroce"])
            elif self._query(["systemctl", "is-active", unit])[1].strip() != "active":
                self.apply.changes.append({"what": unit, "why": "not started (rdma_rxe is available)"})
                self._run(["systemctl", "start", unit], f"starting {unit}")


# Module fabric_interfaces' options (documented in plugins/modules/fabric_interfaces.py).
ARGUMENT_SPEC = {
    **applier.ARGUMENT_SPEC,
    "interfaces": {"type": "list", "elements": "dict", "required": True},
    "backend": {"type": "str", "default": "auto", "choices": ["auto", *BACKENDS]},
    "sysctls": {"type": "dict", "default": {}},
    "sysctl_file": {"type": "path", "default": "/etc/sysctl.d/60-gpucluster-fabric.conf"},
    "apply_runtime": {"type": "bool", "default": True},
    "link_down_ok": {"type": "bool", "default": False},
    "run_tags": {"type": "list", "elements": "str", "default": []},
    "skip_tags": {"type": "list", "elements": "str", "default": []},
}


def nothing_to_apply(args):
    """The result when the host has no fabric interface (the module is then not run, by module apply, the role's
    action or the node check alike), else None."""
    if args.get("interfaces"):
        return None
    return {"changed": False, "msg": "no fabric interface: nothing to apply"}


def run(module):
    """Module fabric_interfaces: each step the run names, each changing only what differs."""
    module.run_command_environ_update = {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"}
    params = module.params
    nothing = nothing_to_apply(params)
    if nothing is not None:
        module.exit_json(**nothing)
    apply = applier.Applier(module)
    interfaces = [normalise_interface(item) for item in params["interfaces"]]
    steps = steps_to_run(params["run_tags"], params["skip_tags"])
    interfaces_applier = InterfacesApplier(apply, params)
    backend = interfaces_applier.backend()
    result = {"backend": backend, "interfaces": interfaces, "steps": steps}
    if params["state"] == "checked":
        module.exit_json(changed=False, changes=[], pending=[], **result)
    if "configure" in steps:
        interfaces_applier.configure(backend, interfaces)
    if "sysctl" in steps:
        interfaces_applier.sysctl({key: str(value) for key, value in params["sysctls"].items()})
    if "run" in steps and params["apply_runtime"]:
        interfaces_applier.run(interfaces)
    if "softroce" in steps:
        interfaces_applier.softroce(interfaces)
    module.exit_json(**apply.report(result, pending=interfaces_applier.pending))
