"""Module hca_firmware (plugins/module_utils/hca_firmware.py), run as Ansible runs it, and its parser.

No ConnectX adapter is reachable here, so mstconfig cannot run against one. The query outputs in
tests/fixtures/mstconfig/ are laid out from mstflint 4.21's own printf formats (mlxconfig/mlxcfg_ui.cpp:
MlxCfg::printOpening, printConfHeader and printSingleParam; see that directory's README), and the commands the
module runs are answered by a stand-in ``mstconfig`` (a shell script) that prints them and records each ``set``.
The parameter catalogue the preflight checks names against is mstflint's own database, written by
tools/mlxconfig_catalogue.py, whose --check (in `make lint`, where tests/lab/setup-host.sh installed mstflint)
compares the two.
"""

import stat
from pathlib import Path

import pytest
from _process import run_module
from ansible_collections.gpucluster.fabric.plugins.module_utils import hca_firmware
from ansible_collections.gpucluster.fabric.plugins.module_utils.fabric_checks import firmware_checks
from ansible_collections.gpucluster.fabric.plugins.plugin_utils.mlxconfig_params import CATALOGUE

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "mstconfig"
ROOT = Path(__file__).resolve().parents[4]
WANTED = {"ATS_ENABLED": True, "PCI_WR_ORDERING": "force_relax"}


def test_the_query_is_parsed_column_by_column():
    parsed = hca_firmware.parse_query((FIXTURES / "query-pending.txt").read_text())
    assert parsed["device_type"] == "ConnectX7"
    assert parsed["columns"] == ["default", "current", "next"]
    assert parsed["params"]["ATS_ENABLED"] == {
        "default": {"text": "False", "number": 0},
        "current": {"text": "False", "number": 0},
        "next": {"text": "True", "number": 1},
    }
    assert parsed["params"]["NUM_OF_VFS"]["next"] == {"text": None, "number": 0}
    assert parsed["params"]["PCI_WR_ORDERING"]["next"] == {"text": "force_relax", "number": 1}
    only_next = hca_firmware.parse_query((FIXTURES / "query-next-only.txt").read_text())
    assert only_next["columns"] == ["next"]
    assert only_next["params"]["ATS_ENABLED"] == {"next": {"text": "True", "number": 1}}


@pytest.mark.parametrize(
    ("wanted", "found", "same"),
    [
        (True, "True(1)", True),
        (True, "False(0)", False),
        ("true", "True(1)", True),
        (1, "True(1)", True),
        ("force_relax", "force_relax(1)", True),
        ("FORCE_RELAX", "force_relax(1)", True),
        ("per_mkey", "force_relax(1)", False),
        (16, "16", True),
        ("0x10", "16", True),
        ("08", "8", True),  # a leading zero is decimal, never a crash of int(x, 0)
        ("0x0A", "10", True),
        (8, "16", False),
        (True, "N/A", False),
    ],
)
def test_a_wanted_value_matches_by_number_or_name(wanted, found, same):
    assert hca_firmware.matches(hca_firmware.wanted_value(wanted), hca_firmware.parse_value(found)) is same


def test_settings_are_checked_against_mstflints_parameter_database():
    assert hca_firmware.setting_errors(WANTED, CATALOGUE) == []
    assert hca_firmware.setting_errors({"LINK_TYPE_P1": "ETH", "NUM_OF_VFS": 8}, CATALOGUE) == []
    errors = hca_firmware.setting_errors(
        {"ATS_ENABLE": True, "PCI_WR_ORDERING": "relaxed", "LINK_TYPE": "ETH", "SRIOV_EN": "maybe", "bad name": 1},
        CATALOGUE,
    )
    assert len(errors) == 5, errors
    assert any("ATS_ENABLE is not a parameter mstconfig knows" in e for e in errors)
    assert any("'relaxed' is not one of its values force_relax, per_mkey" in e for e in errors)
    assert any("LINK_TYPE is set per port: name it LINK_TYPE_P1" in e for e in errors)
    assert any("SRIOV_EN: 'maybe' is not a boolean" in e for e in errors)
    assert any("'bad name' is not an mstconfig parameter name" in e for e in errors)


def _adapter(root, address, vendor="0x15b3", klass="0x020700"):
    device = root / "sys" / "bus" / "pci" / "devices" / address
    device.mkdir(parents=True)
    (device / "vendor").write_text(vendor + "\n")
    (device / "class").write_text(klass + "\n")
    return device


@pytest.fixture(name="tool")
def _tool(tmp_path):
    """A stand-in mstconfig: ``query`` prints the state file's fixture, ``set`` records its arguments and moves the
    state to the fixture of settings set but not loaded."""
    state = tmp_path / "state"
    state.write_text(str(FIXTURES / "query-default.txt"))
    calls = tmp_path / "calls"
    script = tmp_path / "mstconfig"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {calls}\n'
        'case " $* " in\n'
        f'  *" set "*) echo "{FIXTURES / "query-pending.txt"}" > {state}; echo "Applying... Done!";'
        ' echo "-I- Please reboot machine to load new configurations." ;;\n'
        f'  *" query "*) cat "$(cat {state})" ;;\n'
        "esac\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    root = tmp_path / "root"
    _adapter(root, "0000:17:00.0")
    _adapter(root, "0000:17:00.1")  # the second port of the same adapter: one configuration
    _adapter(root, "0000:2a:00.0", vendor="0x10de", klass="0x030200")  # a GPU
    vf = _adapter(root, "0000:17:00.2")
    (vf / "physfn").mkdir()
    return {"path": str(script), "root": str(root), "calls": calls, "state": state}


def test_only_adapters_physical_function_zero_are_configured(tool):
    assert hca_firmware.adapters(tool["root"]) == ["0000:17:00.0"]


def test_without_apply_it_reads_and_reports_both_values(tmp_path, tool):
    result = run_module(
        "hca_firmware", tmp_path, settings=WANTED, mstconfig=tool["path"], root=tool["root"], host="gpu-01"
    )
    assert result["changed"] is False and not result.get("failed"), result
    assert result["differences"] == [
        "0000:17:00.0 ATS_ENABLED: current False(0), next boot False(0), wanted True",
        "0000:17:00.0 PCI_WR_ORDERING: current per_mkey(0), next boot per_mkey(0), wanted force_relax",
    ]
    assert result["reboot_required"] is False
    assert " set " not in tool["calls"].read_text()
    (check,) = firmware_checks("gpu-01", result)
    assert check["check"] == "hca.firmware[0000:17:00.0]" and check["status"] == "failed"
    assert "ATS_ENABLED: current False(0), next boot False(0), wanted True" in check["message"]


def test_apply_sets_only_what_differs_then_waits_for_a_reboot(tmp_path, tool):
    checked = run_module(
        "hca_firmware", tmp_path, check=True, settings=WANTED, apply=True, mstconfig=tool["path"], root=tool["root"]
    )
    assert checked["changed"] is True and checked["reboot_required"] is True
    assert " set " not in tool["calls"].read_text()  # check mode: nothing set

    applied = run_module(
        "hca_firmware", tmp_path, settings=WANTED, apply=True, mstconfig=tool["path"], root=tool["root"]
    )
    assert applied["changed"] is True, applied
    assert [c["what"] for c in applied["changes"]] == ["0000:17:00.0 ATS_ENABLED", "0000:17:00.0 PCI_WR_ORDERING"]
    assert "-y -d 0000:17:00.0 set ATS_ENABLED=1 PCI_WR_ORDERING=force_relax" in tool["calls"].read_text()
    assert applied["reboot_required"] is True
    assert applied["ansible_facts"] == {"gpucluster_hca_firmware_reboot_required": True}

    again = run_module("hca_firmware", tmp_path, settings=WANTED, apply=True, mstconfig=tool["path"], root=tool["root"])
    assert again["changed"] is False and again["reboot_required"] is True  # set, not loaded: no second set
    assert tool["calls"].read_text().count(" set ") == 1
    (pending,) = firmware_checks("gpu-01", again)
    assert pending["status"] == "failed" and "not loaded yet" in pending["message"]

    tool["state"].write_text(str(FIXTURES / "query-loaded.txt"))  # the reboot
    loaded = run_module(
        "hca_firmware", tmp_path, settings=WANTED, apply=True, mstconfig=tool["path"], root=tool["root"]
    )
    assert loaded["changed"] is False and loaded["reboot_required"] is False and loaded["differences"] == []
    (passed,) = firmware_checks("gpu-01", loaded)
    assert passed["status"] == "passed"
    assert "ATS_ENABLED=True(1), PCI_WR_ORDERING=force_relax(1)" in passed["message"]


def test_settings_on_a_host_without_an_adapter_or_mstconfig_fail_naming_the_fix(tmp_path, tool):
    empty = tmp_path / "empty"
    (empty / "sys" / "bus" / "pci" / "devices").mkdir(parents=True)
    result = run_module("hca_firmware", tmp_path, settings=WANTED, mstconfig=tool["path"], root=str(empty), host="h")
    assert result["failed"] and "h: hca_firmware_settings names settings, but the host has no NVIDIA" in result["msg"]
    missing = run_module("hca_firmware", tmp_path, settings=WANTED, mstconfig="/nonexistent/mstconfig", host="h")
    assert missing["failed"] and "install Debian's mstflint" in missing["msg"]
    preflight = run_module(
        "hca_firmware", tmp_path, settings=WANTED, mstconfig="/nonexistent/mstconfig", state="checked"
    )
    assert not preflight.get("failed") and "not installed yet" in preflight["msg"]


def test_a_parameter_the_firmware_does_not_report_fails(tmp_path, tool):
    result = run_module(
        "hca_firmware", tmp_path, settings={"SRIOV_EN": True}, apply=True, mstconfig=tool["path"], root=tool["root"]
    )
    assert result["failed"] and "its firmware does not report SRIOV_EN" in result["msg"]
    assert " set " not in tool["calls"].read_text()


def test_no_settings_reads_nothing(tmp_path):
    result = run_module("hca_firmware", tmp_path, mstconfig="/nonexistent/mstconfig")
    assert result["changed"] is False and result["devices"] == {} and not result.get("failed")
    assert firmware_checks("h", result) == []
