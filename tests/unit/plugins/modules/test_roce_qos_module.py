"""Module roce_qos on a synthesised mlx5 host (see test_roce_qos_apply.py): require_pfc refuses a NIC without DCB
before anything is written, check mode writes nothing, warnings name each setting not applied."""

import json
import os
from pathlib import Path

import pytest
from ansible_collections.gpucluster.fabric.plugins.modules import roce_qos as mod

SETTINGS = {"trust": "dscp", "pfc_priorities": [3], "dscp_map": {"26": 3, "48": 6}, "tos": 106, "ecn": True}


class Exit(Exception):
    pass


class FakeModule:
    dcb_supported = True
    check_mode = False
    params = {}

    _diff = False

    def __init__(self, argument_spec, supports_check_mode, **_checks):
        self.params = {name: spec.get("default") for name, spec in argument_spec.items()}
        self.params.update(type(self).params)
        self.check_mode = type(self).check_mode
        self.warnings = []
        self.commands = []

    def get_bin_path(self, name, required=False):
        return "/usr/sbin/" + name

    def atomic_move(self, source, destination):
        os.replace(source, destination)

    def warn(self, text):
        self.warnings.append(text)

    def run_command(self, argv, environ_update=None):
        self.commands.append(argv)
        if not self.dcb_supported:
            return 1, "", "Attribute read: Operation not supported\n"
        if argv[1:4] == ["-j", "pfc", "show"]:
            return 0, json.dumps({"prio_pfc": [False] * 8}), ""
        if argv[1:4] == ["-j", "app", "show"]:
            return 0, "{}", ""
        return 0, "", ""

    def fail_json(self, **kwargs):
        type(self).result = dict(kwargs, failed=True)
        raise Exit()

    def exit_json(self, **kwargs):
        type(self).result = kwargs
        raise Exit()


def _host(tmp_path):
    root = tmp_path / "root"
    (root / "sys/class/net/ens1f0np0").mkdir(parents=True)
    ndevs = root / "sys/class/infiniband/mlx5_0/ports/1/gid_attrs/ndevs"
    ndevs.mkdir(parents=True)
    (ndevs / "0").write_text("ens1f0np0\n")
    tos = tmp_path / "config/rdma_cm/mlx5_0/ports/1/default_roce_tos"
    tos.parent.mkdir(parents=True)
    tos.write_text("0\n")
    return root, tmp_path / "config", tos


def _run(monkeypatch, sysfs, configfs, dcb_supported=True, check_mode=False, **params):
    fake = type(
        "Module",
        (FakeModule,),
        {
            "dcb_supported": dcb_supported,
            "check_mode": check_mode,
            "params": {
                "interfaces": {"ens1f0np0": SETTINGS},
                "sysfs_root": str(sysfs),
                "configfs_root": str(configfs),
                **params,
            },
        },
    )
    monkeypatch.setattr(mod, "AnsibleModule", fake)
    with pytest.raises(Exit):
        mod.main()
    return fake.result


def test_require_pfc_refuses_a_nic_without_dcb_before_any_write(monkeypatch, tmp_path):
    root, configfs, tos = _host(tmp_path)
    result = _run(monkeypatch, root, configfs, dcb_supported=False, require_pfc=True)
    assert result["failed"] and not result["changed"]
    assert result["msg"].startswith("PFC cannot be set on ens1f0np0 and roce_qos_require_pfc is true, so nothing")
    assert tos.read_text() == "0\n"  # the ToS it could have set was not written


def test_without_require_pfc_the_rest_is_applied_and_the_rest_said(monkeypatch, tmp_path):
    root, configfs, tos = _host(tmp_path)
    result = _run(monkeypatch, root, configfs, dcb_supported=False)
    assert result["changed"] and tos.read_text() == "106\n"
    assert result["unsupported"][0].startswith("ens1f0np0 pfc: the driver of ens1f0np0 has no DCB support")
    assert result["interfaces"]["ens1f0np0"]["tos"]["state"] == "changed"


def test_check_mode_writes_nothing_and_a_second_run_changes_nothing(monkeypatch, tmp_path):
    root, configfs, tos = _host(tmp_path)
    checked = _run(monkeypatch, root, configfs, check_mode=True)
    assert checked["changed"] and tos.read_text() == "0\n"
    _run(monkeypatch, root, configfs)
    assert tos.read_text() == "106\n"


def test_persist_writes_the_boot_files_once(monkeypatch, tmp_path):
    root, configfs, _tos = _host(tmp_path)
    files = tmp_path / "files"
    persist = {"persist": True, "root": str(files), "header": "# managed"}
    first = _run(monkeypatch, root, configfs, **persist)
    written = sorted(change["what"] for change in first["changes"])
    library = "/usr/local/lib/gpucluster-fabric"
    assert written == [
        "/etc/gpucluster/roce_qos.json",
        "/etc/systemd/system/gpucluster-roce-qos.service",
        "/etc/udev/rules.d/90-gpucluster-roce-qos.rules",
        library,
        f"{library}/gpucluster_fabric_roce_qos",
        f"{library}/gpucluster_fabric_roce_qos/__init__.py",
        f"{library}/gpucluster_fabric_roce_qos/roce_qos_apply.py",
        f"{library}/gpucluster_fabric_roce_qos/roce_qos_boot.py",
    ]
    # the code the unit runs is the code this module ran, the entry point included, in the node's one library
    for name in ("roce_qos_apply.py", "roce_qos_boot.py"):
        shipped = Path(mod.__file__).parents[1] / "module_utils" / name
        assert (files / library[1:] / "gpucluster_fabric_roce_qos" / name).read_text() == shipped.read_text()
    unit = (files / "etc/systemd/system/gpucluster-roce-qos.service").read_text()
    assert unit.startswith(
        "# managed\n[Unit]\nDescription=RoCE lossless QoS (PFC, DSCP map, ECN, RDMA-CM default ToS) on ens1f0np0"
    )
    assert (
        "ExecStart=/usr/bin/python3 /usr/local/lib/gpucluster-fabric/gpucluster_fabric_roce_qos/roce_qos_boot.py"
        " /etc/gpucluster/roce_qos.json 120\n" in unit
    )
    config = json.loads((files / "etc/gpucluster/roce_qos.json").read_text())
    assert config == {"interfaces": {"ens1f0np0": SETTINGS}}
    again = _run(monkeypatch, root, configfs, **persist)
    assert again["changes"] == []  # (the fake dcb never keeps what it is told: "changed" is the live part)
    # What an earlier version put in /usr/local/libexec/gpucluster goes, and the directory with it once empty.
    legacy = files / "usr/local/libexec/gpucluster"
    legacy.mkdir(parents=True)
    for name in ("roce_qos_apply.py", "roce_qos_boot.py"):
        (legacy / name).write_text("# an earlier version\n")
    upgraded = _run(monkeypatch, root, configfs, **persist)
    assert sorted(change["what"] for change in upgraded["changes"]) == [
        "/usr/local/libexec/gpucluster",
        "/usr/local/libexec/gpucluster/roce_qos_apply.py",
        "/usr/local/libexec/gpucluster/roce_qos_boot.py",
    ]
    assert not legacy.exists() and _run(monkeypatch, root, configfs, **persist)["changes"] == []
    wait = _run(monkeypatch, root, configfs, **dict(persist, boot_wait_seconds=30))
    assert wait["changes"] == [
        {"what": "/etc/systemd/system/gpucluster-roce-qos.service", "why": "its content differs"}
    ]


def test_what_was_asked_is_in_the_result_and_no_interface_is_nothing_to_apply(monkeypatch, tmp_path):
    """The result says what was asked (role roce_qos registers it as gpucluster_roce_qos, which fabric_validate reads
    the live QoS back against); a host without a RoCE interface reads and writes nothing."""
    root, configfs, _tos = _host(tmp_path)
    result = _run(monkeypatch, root, configfs, require_pfc=False)
    assert result["settings"] == {"ens1f0np0": SETTINGS} and result["require_pfc"] is False
    nothing = type("Module", (FakeModule,), {"params": {"interfaces": {}, "require_pfc": True}})
    monkeypatch.setattr(mod, "AnsibleModule", nothing)
    with pytest.raises(Exit):
        mod.main()
    assert nothing.result["msg"] == "no RoCE interface: nothing to apply" and not nothing.result["changed"]
    assert nothing.result["settings"] == {} and nothing.result["require_pfc"] is True
