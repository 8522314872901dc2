"""fabric_link's decisions on a fake sysfs, with `ip` replaced by a recorder that updates that sysfs like the kernel."""

import pytest
from ansible_collections.gpucluster.fabric.plugins.modules import fabric_link as mod


class Exit(Exception):
    pass


class FakeModule:
    def __init__(self, sysfs, check_mode=False, refuse_live_mtu=False, **params):
        self.params = {"mode": None, "mtu": None, "address": None, "link_down_ok": False, "sysfs_root": str(sysfs)}
        self.params.update(params)
        self.check_mode = check_mode
        self.sysfs = sysfs
        self.refuse_live_mtu = refuse_live_mtu
        self.commands = []
        self.warnings = []
        self.addresses = []

    def get_bin_path(self, name, required=False):
        return "/usr/sbin/" + name

    def warn(self, text):
        self.warnings.append(text)

    def _link(self, name):
        return self.sysfs / "class" / "net" / name

    def run_command(self, args, environ_update=None):
        args = args[1:]
        self.commands.append(" ".join(args))
        if args[:2] == ["-o", "addr"]:
            name = args[-1]
            return 0, "".join(f"4: {name}    inet {a} scope global {name}\\ x\n" for a in self.addresses), ""
        if args[:2] == ["link", "set"]:
            link = self._link(args[3])
            flags = int((link / "flags").read_text(), 0)
            if args[4] == "mtu":
                if self.refuse_live_mtu and flags & 1:
                    return 2, "", "RTNETLINK answers: Device or resource busy"
                (link / "mtu").write_text(args[5] + "\n")
            elif args[4] in ("up", "down"):
                (link / "flags").write_text(hex(flags | 1 if args[4] == "up" else flags & ~1) + "\n")
            return 0, "", ""
        if args[:2] == ["addr", "add"]:
            self.addresses.append(args[2])
            return 0, "", ""
        raise AssertionError(args)

    def fail_json(self, **kwargs):
        self.result = dict(kwargs, failed=True)
        raise Exit()

    def exit_json(self, **kwargs):
        self.result = kwargs
        raise Exit()


def ipoib(tmp_path, mode="connected", mtu=65520, flags="0x1003"):
    base = tmp_path / "class" / "net" / "ib0"
    base.mkdir(parents=True)
    (base / "mtu").write_text(f"{mtu}\n")
    (base / "flags").write_text(flags + "\n")
    (base / "type").write_text("32\n")
    (base / "operstate").write_text("up\n")
    (base / "mode").write_text(mode + "\n")
    return base


def run(module):
    with pytest.raises(Exit):
        mod.FabricLink(module).run()
    return module.result


def test_mode_is_written_before_the_mtu(tmp_path, monkeypatch):
    base = ipoib(tmp_path)
    real_open = open

    def kernel_open(path, mode="r", *args, **kwargs):
        handle = real_open(path, mode, *args, **kwargs)
        if str(path).endswith("/mode") and "w" in mode:
            # the kernel resets the MTU to the new mode's maximum when the mode changes
            (base / "mtu").write_text("4092\n")
        return handle

    monkeypatch.setattr("builtins.open", kernel_open)
    module = FakeModule(tmp_path, name="ib0", mode="datagram", mtu=2044)
    result = run(module)
    assert result["changed"] is True
    assert result["actions"] == ["ib0: mode connected -> datagram", "ib0: mtu 4092 -> 2044"]
    assert (base / "mode").read_text() == "datagram\n"
    assert result["after"]["mtu"] == 2044


def test_a_link_already_right_is_left_alone(tmp_path):
    ipoib(tmp_path, mode="datagram", mtu=4092)
    module = FakeModule(tmp_path, name="ib0", mode="datagram", mtu=4092)
    module.addresses = ["10.10.0.11/16"]
    module.params["address"] = "10.10.0.11/16"
    result = run(module)
    assert (result["changed"], result["actions"]) == (False, [])
    assert [c for c in module.commands if not c.startswith("-o addr")] == []


def test_check_mode_predicts_without_touching(tmp_path):
    base = ipoib(tmp_path, mode="connected", mtu=65520, flags="0x1002")
    module = FakeModule(tmp_path, check_mode=True, name="ib0", mode="datagram", mtu=4092, address="10.10.0.11/16")
    result = run(module)
    assert result["actions"] == [
        "ib0: mode connected -> datagram",
        "ib0: mtu None -> 4092",
        "ib0: link up",
        "ib0: address 10.10.0.11/16 added",
    ]
    assert result["after"]["mtu"] == 4092 and result["after"]["mode"] == "datagram"
    assert (base / "mode").read_text() == "connected\n" and (base / "mtu").read_text() == "65520\n"
    assert [c for c in module.commands if not c.startswith("-o addr")] == []


def test_refused_live_mtu_change_fails_without_link_down_ok(tmp_path):
    ipoib(tmp_path, mode="datagram", mtu=2044)
    module = FakeModule(tmp_path, refuse_live_mtu=True, name="ib0", mtu=4092)
    result = run(module)
    assert result["failed"] and "fabric_interfaces_link_down_ok: true" in result["msg"]
    assert "link set dev ib0 down" not in module.commands


def test_refused_live_mtu_change_bounces_only_when_allowed(tmp_path):
    base = ipoib(tmp_path, mode="datagram", mtu=2044)
    module = FakeModule(tmp_path, refuse_live_mtu=True, name="ib0", mtu=4092, link_down_ok=True)
    result = run(module)
    assert result["actions"] == ["ib0: mtu 2044 -> 4092", "ib0: link down/up for the mtu change"]
    link_commands = [c for c in module.commands if not c.startswith("-o addr")]
    assert link_commands[-3:] == ["link set dev ib0 down", "link set dev ib0 mtu 4092", "link set dev ib0 up"]
    assert (base / "mtu").read_text() == "4092\n"


def test_mode_on_a_device_without_mode_only_warns(tmp_path):
    base = ipoib(tmp_path, mode="datagram", mtu=1500)
    (base / "mode").unlink()
    module = FakeModule(tmp_path, name="ib0", mode="datagram", mtu=4092)
    result = run(module)
    assert result["actions"] == ["ib0: mtu 1500 -> 4092"]
    assert "not an IPoIB netdev" in module.warnings[0]


def test_missing_interface_fails(tmp_path):
    (tmp_path / "class" / "net").mkdir(parents=True)
    result = run(FakeModule(tmp_path, name="ib9", mtu=4092))
    assert result["failed"] and "ib9 does not exist" in result["msg"]
