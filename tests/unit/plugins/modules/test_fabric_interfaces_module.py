"""Module fabric_interfaces on a host tree: each backend's files, the sysctls, the running links and Soft-RoCE, changed
only where they differ, check mode changing nothing, reloads only when a file changed, and the steps a run's tags
choose. The file contents are pinned line by line (they are what role fabric_interfaces wrote from Jinja templates
before this module: same bytes, so an upgraded host sees no change)."""

import os

import pytest
from ansible.plugins.filter.core import to_uuid
from ansible_collections.gpucluster.fabric.plugins.module_utils import fabric_interfaces_apply as rules
from ansible_collections.gpucluster.fabric.plugins.module_utils.fabric_model import normalise_interface
from ansible_collections.gpucluster.fabric.plugins.modules import fabric_interfaces as mod

HEADER = "#\n# Ansible managed\n#"
IB0 = normalise_interface({"name": "ib0", "kind": "ipoib", "address": "10.10.0.11/16"})
ROCE = normalise_interface({"name": "ens1f0", "kind": "roce", "mtu": 9000, "address": "fd00::5/64", "softroce": "rxe0"})
SYSCTLS = {"net.ipv4.conf.all.arp_ignore": "2", "net.ipv4.neigh.default.gc_thresh3": "4096"}


class Exit(Exception):
    pass


class FakeModule:
    """AnsibleModule as far as the module uses it; ``ip`` and systemctl answer like a host whose links match sysfs."""

    check_mode = False
    params = {}
    _diff = True
    enabled = ()
    rxe = True

    def __init__(self, argument_spec=None, supports_check_mode=True, **_checks):
        spec = argument_spec or mod_spec()
        self.params = {name: option.get("default") for name, option in spec.items()}
        self.params.update(type(self).params)
        self.check_mode = type(self).check_mode
        self.commands, self.warnings = [], []
        self.enabled = set(type(self).enabled)

    def get_bin_path(self, name, required=False):
        return "/usr/sbin/" + name

    def atomic_move(self, source, destination):
        """As AnsibleModule.atomic_move: an existing file keeps its mode, a new one gets the umask's (0644)."""
        mode = os.stat(destination).st_mode & 0o7777 if os.path.exists(destination) else 0o644
        os.replace(source, destination)
        os.chmod(destination, mode)

    def warn(self, text):
        self.warnings.append(text)

    def _addresses(self, name):
        """The link's addresses, kept in the tree (``addresses/<name>``) so that they outlive one run."""
        path = os.path.join(self.params["root"], "addresses", name)
        return path, (open(path).read().split() if os.path.exists(path) else [])

    def run_command(self, argv, environ_update=None):
        self.commands.append(" ".join(argv))
        sysfs = os.path.join(self.params["root"], "sys", "class", "net")
        if argv[0].endswith("/ip") and argv[1:3] == ["-o", "addr"]:
            name = argv[-1]
            lines = "".join(f"4: {name}    inet {a} scope global {name}\\ x\n" for a in self._addresses(name)[1])
            return 0, lines, ""
        if argv[0].endswith("/ip") and argv[1:4] == ["link", "set", "dev"] and argv[5] == "mtu":
            with open(os.path.join(sysfs, argv[4], "mtu"), "w") as handle:
                handle.write(argv[6] + "\n")
            return 0, "", ""
        if argv[0].endswith("/ip") and argv[1:3] == ["addr", "add"]:
            path, present = self._addresses(argv[-1])
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as handle:
                handle.write(" ".join(present + [argv[3]]))
            return 0, "", ""
        if argv[:2] == ["systemctl", "is-enabled"]:
            return 0, "enabled\n" if argv[2] in self.enabled else "disabled\n", ""
        if argv[:2] == ["systemctl", "enable"]:
            self.enabled.add(argv[2])
            return 0, "", ""
        if argv[:2] == ["systemctl", "is-active"]:
            return 0, "active\n" * (len(argv) - 2), ""
        if argv[:2] == ["modinfo", "-F"]:
            return (0, "/lib/modules/rdma_rxe.ko\n", "") if self.rxe else (1, "", "not found")
        if argv[:2] == ["dpkg-query", "-W"]:
            return 0, "0.106-0ubuntu3", ""
        return 0, "", ""

    def fail_json(self, **kwargs):
        self.result = dict(kwargs, failed=True)
        raise Exit()

    def exit_json(self, **kwargs):
        self.result = kwargs
        raise Exit()


def mod_spec():
    captured = {}

    class Capture(Exception):
        pass

    def grab(argument_spec, **_kwargs):
        captured.update(argument_spec)
        raise Capture()

    original = mod.AnsibleModule
    mod.AnsibleModule = grab
    try:
        with pytest.raises(Capture):
            mod.main()
    finally:
        mod.AnsibleModule = original
    return captured


def host_tree(tmp_path, mtu=1500, mode="connected"):
    """A host with ib0 (IPoIB) and ens1f0 (Ethernet) in sysfs and the sysctls of its network namespace."""
    root = tmp_path / "root"
    for name, kind in (("ib0", "32"), ("ens1f0", "1")):
        link = root / "sys" / "class" / "net" / name
        link.mkdir(parents=True)
        (link / "mtu").write_text(f"{mtu}\n")
        (link / "flags").write_text("0x1003\n")
        (link / "type").write_text(kind + "\n")
        if name == "ib0":
            (link / "mode").write_text(mode + "\n")
    arp = root / "proc/sys/net/ipv4/conf/all/arp_ignore"
    arp.parent.mkdir(parents=True)
    arp.write_text("0\n")
    return root


class LiveApplier(rules.InterfacesApplier):
    """As on a host (commands run) while the files stay below the test's tree."""

    def __init__(self, apply, params):
        super().__init__(apply, params)
        self.live = True


def run(root, check_mode=False, live=True, module=FakeModule, enabled=(), **params):
    """One module run on ``root``; the FakeModule, which holds the result and the commands it ran."""
    fake = type(
        "Module", (module,), {"check_mode": check_mode, "enabled": enabled, "params": dict(root=str(root), **params)}
    )
    module_holder = {}

    def build(**kwargs):
        module_holder["module"] = fake(**kwargs)
        return module_holder["module"]

    original_module, original_applier = mod.AnsibleModule, rules.InterfacesApplier
    mod.AnsibleModule = build
    if live:
        rules.InterfacesApplier = LiveApplier
    try:
        with pytest.raises(Exit):
            mod.main()
    finally:
        mod.AnsibleModule, rules.InterfacesApplier = original_module, original_applier
    return module_holder["module"]


# --- the files -----------------------------------------------------------------------------------------------------


def test_netplan_file_with_and_without_infiniband_mode():
    assert rules.netplan_yaml(HEADER, [IB0, ROCE], True) == (
        "#\n# Ansible managed\n#\n"
        "network:\n  version: 2\n  ethernets:\n"
        '    ib0:\n      mtu: 4092\n      infiniband-mode: datagram\n      addresses: ["10.10.0.11/16"]\n'
        '    ens1f0:\n      mtu: 9000\n      addresses: ["fd00::5/64"]\n'
    )
    assert "infiniband-mode" not in rules.netplan_yaml(HEADER, [IB0], False)
    assert rules.netplan_knows_ipoib_mode("0.105") and rules.netplan_knows_ipoib_mode("0.106-0ubuntu3")
    assert not rules.netplan_knows_ipoib_mode("0.104-0ubuntu2~20.04.4") and not rules.netplan_knows_ipoib_mode("")


def test_ifupdown_stanza_sets_the_mode_before_the_mtu():
    assert rules.ifupdown_stanza(HEADER, IB0).splitlines()[3:] == [
        "auto ib0",
        "iface ib0 inet static",
        "    address 10.10.0.11/16",
        "    mtu 4092",
        "    # ifupdown has no IPoIB keyword: set the mode before the MTU (a mode change resets it)",
        "    pre-up [ ! -e /sys/class/net/ib0/mode ] || echo datagram > /sys/class/net/ib0/mode",
    ]
    bare = normalise_interface({"name": "eth2", "kind": "roce"})
    assert rules.ifupdown_stanza("", bare) == "auto eth2\niface eth2 inet manual\n    mtu 9000\n"
    assert "iface ens1f0 inet6 static" in rules.ifupdown_stanza("", ROCE)


def test_networkd_file():
    assert rules.networkd_network("", IB0) == (
        f"# The IPoIB mode is set by {rules.UDEV_RULE} (see role fabric_interfaces README).\n"
        "[Match]\nName=ib0\n\n[Link]\nMTUBytes=4092\n\n[Network]\nAddress=10.10.0.11/16\n"
    )


def test_networkmanager_keyfile_keeps_the_uuid_ansible_gave_it():
    text = rules.nm_keyfile("", "gpu01", IB0)
    assert f"uuid={to_uuid('gpucluster.fabric/gpu01/ib0')}\n" in text
    assert "[infiniband]\nmtu=4092\ntransport-mode=datagram\n\n[ipv4]\nmethod=manual\naddress1=10.10.0.11/16\n" in text
    assert text.endswith("[ipv6]\nmethod=disabled\n")
    v6 = rules.nm_keyfile("", "gpu01", ROCE)
    assert "type=ethernet\n" in v6 and "[ipv4]\nmethod=disabled\n\n[ipv6]\nmethod=manual\naddress1=fd00::5/64\n" in v6


def test_udev_rule_only_with_ipoib_and_only_for_networkd_and_netplan():
    assert rules.udev_rules("", [ROCE]) is None
    assert 'KERNEL=="ib0", TEST=="mode", ATTR{mode}="datagram"' in rules.udev_rules("", [IB0, ROCE])
    assert rules.UDEV_RULE in rules.backend_files("systemd-networkd", "", "h", [IB0])
    assert rules.UDEV_RULE not in rules.backend_files("NetworkManager", "", "h", [IB0])
    assert rules.backend_files("none", "", "h", [IB0]) == {}
    modes = {path: mode for path, (_text, mode) in rules.backend_files("NetworkManager", "", "h", [IB0]).items()}
    assert modes == {rules.NM_DIR + "/gpucluster-ib0.nmconnection": 0o600}


def test_softroce_unit():
    text = rules.softroce_unit("", ROCE)
    assert "BindsTo=sys-subsystem-net-devices-ens1f0.device\n" in text
    assert "|| exec rdma link add rxe0 type rxe netdev ens1f0'\n" in text


def test_sysctl_file_written_by_ansible_posix_is_kept():
    assert rules.parse_sysctl_conf("# x\nnet.ipv4.conf.all.arp_ignore = 2\n; y\n-kernel/a=1  2\n") == {
        "net.ipv4.conf.all.arp_ignore": "2",
        "kernel.a": "1 2",
    }


@pytest.mark.parametrize(
    ("run_tags", "skip_tags", "steps"),
    [
        (["all"], [], ["configure", "sysctl", "run", "softroce"]),
        (["gpu"], [], ["configure", "sysctl", "run", "softroce"]),  # a user's tag on the include_role
        (["fabric_interfaces_sysctl"], [], ["sysctl"]),
        (["fabric_interfaces_run", "fabric_interfaces_configure"], [], ["configure", "run"]),
        (["fabric_interfaces_preflight"], [], []),
        (["all"], ["fabric_interfaces_softroce"], ["configure", "sysctl", "run"]),
    ],
)
def test_steps_chosen_by_the_run_tags(run_tags, skip_tags, steps):
    assert rules.steps_to_run(run_tags, skip_tags) == steps


# --- the module ----------------------------------------------------------------------------------------------------

PARAMS = {
    "interfaces": [
        {"name": "ib0", "kind": "ipoib", "address": "10.10.0.11/16"},
        {"name": "ens1f0", "kind": "roce", "mtu": 9000, "softroce": "rxe0"},
    ],
    "backend": "systemd-networkd",
    "sysctls": SYSCTLS,
    "host": "gpu01",
    "header": HEADER,
}


def test_converge_then_nothing_to_change(tmp_path):
    root = host_tree(tmp_path)
    first = run(root, sysctl_file="/etc/sysctl.d/60-gpucluster-fabric.conf", **PARAMS)
    result = first.result
    assert result["changed"] and result["backend"] == "systemd-networkd" and not result.get("failed"), result
    whats = [change["what"] for change in result["changes"]]
    assert whats[:3] == [
        rules.NETWORKD_DIR + "/20-gpucluster-ib0.network",
        rules.NETWORKD_DIR + "/20-gpucluster-ens1f0.network",
        rules.UDEV_RULE,
    ]
    assert "sysctl net.ipv4.conf.all.arp_ignore" in whats and "gpucluster-softroce-rxe0.service" in whats
    # the neighbour table sysctl is not in this namespace: persisted, not set, reported
    assert result["pending"] == ["sysctl net.ipv4.neigh.default.gc_thresh3"]
    assert (root / "proc/sys/net/ipv4/conf/all/arp_ignore").read_text() == "2\n"
    assert (root / "sys/class/net/ib0/mode").read_text() == "datagram\n"
    assert (root / "sys/class/net/ib0/mtu").read_text() == "4092\n"
    assert (
        (root / "etc/sysctl.d/60-gpucluster-fabric.conf")
        .read_text()
        .endswith("net.ipv4.conf.all.arp_ignore=2\nnet.ipv4.neigh.default.gc_thresh3=4096\n")
    )
    assert oct(os.stat(root / "etc/systemd/system/gpucluster-softroce-rxe0.service").st_mode & 0o777) == "0o644"
    assert first.commands.count("networkctl reload") == 1 and first.commands.count("udevadm control --reload") == 1
    assert "systemctl daemon-reload" in first.commands
    assert "systemctl enable gpucluster-softroce-rxe0.service" in first.commands

    again = run(
        root,
        sysctl_file="/etc/sysctl.d/60-gpucluster-fabric.conf",
        enabled=["gpucluster-softroce-rxe0.service"],
        **PARAMS,
    )
    assert again.result["changes"] == [] and again.result["changed"] is False, again.result["changes"]
    reloads = ("networkctl", "udevadm", "systemctl daemon-reload", "systemctl enable")
    assert not any(c.startswith(reloads) for c in again.commands)


def test_check_mode_reports_and_changes_nothing(tmp_path):
    root = host_tree(tmp_path)
    dry = run(root, check_mode=True, **PARAMS)
    real = run(root, **PARAMS)
    assert [c["what"] for c in dry.result["changes"]] == [c["what"] for c in real.result["changes"]]
    dry_commands = [c for c in dry.commands if not c.startswith(("/usr/sbin/ip -o", "systemctl is-", "modinfo"))]
    assert dry_commands == [], dry_commands
    assert {d["before_header"] for d in dry.result["diff"]} >= {rules.UDEV_RULE}


def test_without_rdma_rxe_the_device_is_pending_and_not_started(tmp_path):
    no_rxe = type("NoRxe", (FakeModule,), {"rxe": False})
    fake = run(host_tree(tmp_path), module=no_rxe, **{**PARAMS, "backend": "none", "sysctls": {}})
    assert fake.result["pending"] == ["softroce rxe0"], fake.result
    assert "systemctl enable gpucluster-softroce-rxe0.service" in fake.commands
    assert not any(c.startswith("systemctl start") for c in fake.commands)


def test_only_the_tagged_step(tmp_path):
    root = host_tree(tmp_path)
    fake = run(root, run_tags=["fabric_interfaces_sysctl"], **PARAMS)
    assert fake.result["steps"] == ["sysctl"]
    assert {c["what"] for c in fake.result["changes"]} == {
        "/etc/sysctl.d/60-gpucluster-fabric.conf",
        "sysctl net.ipv4.conf.all.arp_ignore",
    }
    assert (root / "sys/class/net/ib0/mtu").read_text() == "1500\n"


class RefusingIfquery(FakeModule):
    def run_command(self, argv, environ_update=None):
        if argv[0] == "ifquery":
            self.commands.append(" ".join(argv))
            return 1, "", "Unknown interface ib0"
        return super().run_command(argv, environ_update)


def test_ifupdown_reads_each_stanza_back_and_a_refusal_fails(tmp_path):
    fake = run(host_tree(tmp_path), **{**PARAMS, "backend": "ifupdown"})
    assert [c for c in fake.commands if c.startswith("ifquery")] == ["ifquery ib0", "ifquery ens1f0"]
    refused = run(host_tree(tmp_path / "refused"), module=RefusingIfquery, **{**PARAMS, "backend": "ifupdown"})
    assert refused.result["failed"] and "gpu01: ifupdown reading the stanza of ib0 back failed" in refused.result["msg"]
    assert "Unknown interface ib0" in refused.result["msg"]
    # nothing after the refusal: the running links were not touched
    assert not any(" link set " in c for c in refused.commands)


def test_a_file_already_right_is_left_alone_and_not_reloaded(tmp_path):
    root = host_tree(tmp_path)
    run(root, **PARAMS)
    rule = root / rules.UDEV_RULE.lstrip("/")
    rule.write_text(rule.read_text() + "# edited\n")
    fake = run(root, enabled=["gpucluster-softroce-rxe0.service"], **PARAMS)
    assert [c["what"] for c in fake.result["changes"]] == [rules.UDEV_RULE]
    assert "udevadm control --reload" in fake.commands and "networkctl reload" not in fake.commands


def test_networkmanager_keyfiles_stay_0600(tmp_path):
    root = host_tree(tmp_path)
    params = {**PARAMS, "backend": "NetworkManager"}
    run(root, **params)
    keyfile = root / rules.NM_DIR.lstrip("/") / "gpucluster-ib0.nmconnection"
    assert oct(os.stat(keyfile).st_mode & 0o777) == "0o600"
    again = run(root, enabled=["gpucluster-softroce-rxe0.service"], **params)
    assert again.result["changes"] == [], again.result["changes"]
    os.chmod(keyfile, 0o644)
    fixed = run(root, enabled=["gpucluster-softroce-rxe0.service"], **params)
    assert [c["why"] for c in fixed.result["changes"]] == ["mode 0600"]
    assert oct(os.stat(keyfile).st_mode & 0o777) == "0o600"


def test_a_host_without_fabric_interfaces_has_nothing_to_apply(tmp_path):
    """Called with no interface (a play of one's own), the module reads and changes nothing, as module apply and the
    node check skip it (fabric_interfaces_apply.nothing_to_apply)."""
    root = host_tree(tmp_path)
    params = {**PARAMS, "interfaces": [], "sysctls": {"net.ipv4.conf.all.arp_ignore": 2}}
    done = run(root, **params)
    assert done.result == {"changed": False, "msg": "no fabric interface: nothing to apply"}
    assert done.commands == [] and (root / "proc/sys/net/ipv4/conf/all/arp_ignore").read_text() == "0\n"
