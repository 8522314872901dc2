"""roce_qos_apply on a synthesised host: sysfs and configfs trees built from the kernel's documentation, and a dcb
that answers as iproute2 6.1's does (its JSON shapes from dcb/dcb_pfc.c and dcb/dcb_app.c). SYNTHESISED, not
captured: no mlx5 NIC is reachable from this project's machines; the qemu lab (molecule/kernel_softroce) runs the same
code against a real kernel, where virtio has no DCB and Soft-RoCE no ECN switches."""

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ansible_collections.gpucluster.fabric.plugins.module_utils.roce_qos_apply import (
    Host,
    QosError,
    apply_all,
    dcb_argv,
    default_tos_path,
    ecn_paths,
    parse_dscp_map,
    parse_pfc,
    rdma_port_of,
    summary_lines,
)

ROOT = Path(__file__).resolve().parents[4]
SETTINGS = {"trust": "dscp", "pfc_priorities": [3], "dscp_map": {26: 3, 48: 6}, "tos": 106, "ecn": True}


class FakeDcb:
    """dcb's PFC and APP state of one NIC, or a NIC without DCB (virtio, Soft-RoCE): the error iproute2 prints."""

    def __init__(self, supported=True, pfc=(), dscp_map=None):
        self.supported = supported
        self.pfc = set(pfc)
        self.map = dict(dscp_map or {})
        self.calls = []

    def __call__(self, argv):
        self.calls.append(argv)
        if not self.supported:
            return 1, "", "Attribute read: Operation not supported\n"
        if argv[:4] == ["dcb", "-j", "pfc", "show"]:
            return 0, json.dumps({"pfc_cap": 8, "prio_pfc": [p in self.pfc for p in range(8)]}), ""
        if argv[:4] == ["dcb", "-j", "app", "show"]:
            data = {"dscp_prio": [[d, p] for d, p in sorted(self.map.items())]} if self.map else {}
            return 0, json.dumps(data), ""
        if argv[:3] == ["dcb", "pfc", "set"]:
            self.pfc = {int(v.split(":")[0]) for v in argv[6:] if v.endswith(":on")}
            return 0, "", ""
        if argv[:3] == ["dcb", "app", "replace"]:
            self.map.update({int(d): int(p) for d, p in (v.split(":") for v in argv[6:])})
            return 0, "", ""
        if argv[:3] == ["dcb", "app", "del"]:
            for d, p in (v.split(":") for v in argv[6:]):
                assert self.map.get(int(d)) == int(p), "dcb app del of an entry that is not there fails"
                del self.map[int(d)]
            return 0, "", ""
        raise AssertionError(argv)

    def writes(self):
        return [c for c in self.calls if "-j" not in c]


def make_host(tmp_path, *, mlx5_ecn=True, rdma_cm=True, netdev="ens1f0np0", device="mlx5_0"):
    root = tmp_path / "root"
    net = root / "sys/class/net" / netdev
    net.mkdir(parents=True)
    if mlx5_ecn:
        for point in ("roce_np", "roce_rp"):
            enable = net / "ecn" / point / "enable"
            enable.mkdir(parents=True)
            for prio in range(8):
                (enable / str(prio)).write_text("0\n")
    ndevs = root / f"sys/class/infiniband/{device}/ports/1/gid_attrs/ndevs"
    ndevs.mkdir(parents=True)
    (ndevs / "0").write_text(f"{netdev}\n")
    configfs = tmp_path / "config"
    if rdma_cm:
        (configfs / "rdma_cm").mkdir(parents=True)
    return root, configfs


class ConfigfsHost(Host):
    """Creating a device's group in rdma_cm's configfs makes its ports' files appear, as the kernel does."""

    def mkdir(self, path):
        super().mkdir(path)
        if not self.check_mode:
            port = f"{path}/ports/1"
            import os

            os.makedirs(port)
            for name, value in (("default_roce_tos", "0"), ("default_roce_mode", "RoCE v2")):
                with open(f"{port}/{name}", "w", encoding="ascii") as handle:
                    handle.write(value + "\n")


def test_parsers_read_iproute2_json():
    assert parse_pfc('{"pfc_cap":8,"prio_pfc":[false,false,false,true,false,false,false,false]}') == [3]
    assert parse_dscp_map('{"dscp_prio":[[26,3],[48,6]]}') == {26: 3, 48: 6}
    assert parse_dscp_map("{}") == {}


def test_dcb_commands_add_before_they_delete():
    assert dcb_argv("ens1f0", SETTINGS, {10: 3, 26: 1}) == [
        ["dcb", "pfc", "set", "dev", "ens1f0", "prio-pfc", "0:off", "1:off", "2:off", "3:on", "4:off", "5:off",
         "6:off", "7:off"],
        ["dcb", "app", "replace", "dev", "ens1f0", "dscp-prio", "26:3", "48:6"],
        ["dcb", "app", "del", "dev", "ens1f0", "dscp-prio", "10:3"],
    ]  # fmt: skip
    # Trust PCP: the table emptied (mlx5 trusts PCP while it has no DSCP entry).
    assert dcb_argv("ens1f0", dict(SETTINGS, trust="pcp"), {26: 3})[1:] == [
        ["dcb", "app", "del", "dev", "ens1f0", "dscp-prio", "26:3"]
    ]


def test_ecn_switches_and_tos_path():
    paths = ecn_paths("ens1f0", SETTINGS, "/fake")
    assert paths["/fake/sys/class/net/ens1f0/ecn/roce_np/enable/3"] == "1"
    assert paths["/fake/sys/class/net/ens1f0/ecn/roce_rp/enable/3"] == "1"
    assert paths["/fake/sys/class/net/ens1f0/ecn/roce_np/enable/0"] == "0"
    assert len(paths) == 16
    assert set(ecn_paths("ens1f0", dict(SETTINGS, ecn=False)).values()) == {"0"}
    assert default_tos_path("mlx5_0", 1) == "/sys/kernel/config/rdma_cm/mlx5_0/ports/1/default_roce_tos"


def test_rdma_port_found_by_the_gid_netdev(tmp_path):
    root = make_host(tmp_path, netdev="eth1", device="rxe0")[0]
    assert rdma_port_of("eth1", str(root)) == ("rxe0", 1)
    assert rdma_port_of("eth2", str(root)) == (None, None)


def test_mlx5_host_is_set_then_left_alone(tmp_path):
    root, configfs = make_host(tmp_path)
    dcb = FakeDcb(pfc=[0], dscp_map={10: 3})
    wanted = {"ens1f0np0": SETTINGS}

    # Check mode: everything read, nothing written, every setting would change.
    checked = apply_all(ConfigfsHost(str(root), str(configfs), dcb, check_mode=True), wanted)["ens1f0np0"]
    assert {k: checked[k]["state"] for k in ("pfc", "dscp_map", "ecn", "tos")} == dict.fromkeys(
        ("pfc", "dscp_map", "ecn", "tos"), "changed"
    )
    assert dcb.writes() == [] and not (configfs / "rdma_cm/mlx5_0").exists()
    assert (root / "sys/class/net/ens1f0np0/ecn/roce_np/enable/3").read_text() == "0\n"

    first = apply_all(ConfigfsHost(str(root), str(configfs), dcb), wanted)["ens1f0np0"]
    assert first["pfc"] == {"state": "changed", "wanted": [3], "current": [0], "commands": [dcb.writes()[0]]}
    assert dcb.pfc == {3} and dcb.map == {26: 3, 48: 6}
    assert first["ecn"]["state"] == "changed" and first["tos"] == {"state": "changed", "wanted": 106, "current": 0}
    for point in ("roce_np", "roce_rp"):
        enabled = [
            p for p in range(8) if (root / f"sys/class/net/ens1f0np0/ecn/{point}/enable/{p}").read_text() == "1\n"
        ]
        assert enabled == [3]
    assert (configfs / "rdma_cm/mlx5_0/ports/1/default_roce_tos").read_text() == "106\n"
    assert first["rdma_port"] == "mlx5_0/1"

    # A second run finds everything as wanted: nothing written.
    writes = len(dcb.writes())
    second = apply_all(ConfigfsHost(str(root), str(configfs), dcb), wanted)["ens1f0np0"]
    assert all(second[k]["state"] == "ok" for k in ("pfc", "dscp_map", "ecn", "tos")), second
    assert len(dcb.writes()) == writes


def test_device_without_dcb_or_ecn_says_why(tmp_path):
    root, configfs = make_host(tmp_path, mlx5_ecn=False, netdev="eth1", device="rxe0")
    results = apply_all(ConfigfsHost(str(root), str(configfs), FakeDcb(supported=False)), {"eth1": SETTINGS})
    eth1 = results["eth1"]
    assert eth1["pfc"]["state"] == "unsupported"
    assert (
        "the driver of eth1 has no DCB support (dcb: Attribute read: Operation not supported)" in eth1["pfc"]["reason"]
    )
    assert eth1["dscp_map"]["state"] == "unsupported"
    assert "exposes no ECN switches" in eth1["ecn"]["reason"]
    # What the device can take is still applied.
    assert eth1["tos"]["state"] == "changed"
    lines = summary_lines(results)
    assert "eth1 tos: changed" in lines and any(line.startswith("eth1 pfc: unsupported (") for line in lines)


def test_missing_dcb_tool_rdma_cm_or_interface(tmp_path):
    root, configfs = make_host(tmp_path, rdma_cm=False)

    def no_dcb(argv):
        return 127, "", "dcb: not found"

    results = apply_all(ConfigfsHost(str(root), str(configfs), no_dcb), {"ens1f0np0": SETTINGS, "ens9": SETTINGS})
    assert "dcb (iproute2 5.11 or newer) is not installed" in results["ens1f0np0"]["pfc"]["reason"]
    assert "load the rdma_cm module" in results["ens1f0np0"]["tos"]["reason"]
    assert all(results["ens9"][k]["reason"] == "interface ens9 does not exist" for k in ("pfc", "ecn", "tos"))


def test_a_failing_dcb_write_raises(tmp_path):
    root, configfs = make_host(tmp_path)
    dcb = FakeDcb()

    def failing(argv):
        if argv[:3] == ["dcb", "pfc", "set"]:
            return 2, "", "Error: Invalid argument\n"
        return dcb(argv)

    with pytest.raises(QosError, match="dcb pfc set dev ens1f0np0 .* failed \\(2\\): Error: Invalid argument"):
        apply_all(ConfigfsHost(str(root), str(configfs), failing), {"ens1f0np0": SETTINGS})


def test_boot_entry_point_reads_the_role_s_settings(tmp_path):
    """The two files as module roce_qos installs them side by side (option persist), run as the unit runs them."""
    libexec = tmp_path / "libexec"
    libexec.mkdir()
    shutil.copy(ROOT / "plugins" / "module_utils" / "roce_qos_apply.py", libexec / "roce_qos_apply.py")
    shutil.copy(ROOT / "plugins" / "module_utils" / "roce_qos_boot.py", libexec / "roce_qos_boot.py")
    config = tmp_path / "roce_qos.json"
    config.write_text(json.dumps({"interfaces": {"nosuchif0": {**SETTINGS, "dscp_map": {"26": 3, "48": 6}}}}))
    boot = subprocess.run(
        [sys.executable, str(libexec / "roce_qos_boot.py"), str(config)], capture_output=True, text=True, check=False
    )
    assert boot.returncode == 0, boot.stderr
    assert "nosuchif0: no RDMA port after waiting" in boot.stdout
    assert "nosuchif0 pfc: unsupported (interface nosuchif0 does not exist)" in boot.stdout


def test_every_command_goes_through_the_caller_s_runner():
    with pytest.raises(TypeError, match="runner"):
        Host()


def test_the_boot_entry_points_commands_are_bounded(monkeypatch):
    """At boot each command ends within COMMAND_TIMEOUT (killed and said after it), a missing program is rc 127."""
    from ansible_collections.gpucluster.fabric.plugins.module_utils import roce_qos_boot

    monkeypatch.setattr(roce_qos_boot, "COMMAND_TIMEOUT", 0.5)
    assert roce_qos_boot.run(["echo", "hi"]) == (0, "hi\n", "")
    assert roce_qos_boot.run(["gpucluster-no-such-program"])[0] == 127
    started = time.monotonic()
    rc, _out, err = roce_qos_boot.run(["sleep", "30"])
    assert rc == 124 and "no answer within 0.5 s (killed)" in err and time.monotonic() - started < 5
