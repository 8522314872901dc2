"""The node check's own parts: arguments as the module would get them, check selection, the one-line reason, the
Prometheus text, atomic writes, drift judged by the appliers' real code on a tree, and the installed package importing
without Ansible. Its runs on real hosts (systemd timer, node_exporter scrape, faults) are in the lab's fault tests
(tests/integration/test_site_faults.py)."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _load import load
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

node_check = load("node_check")
install = load("node_check_install")
converge_hold = load("converge_hold")
node_library = load("node_library")


def test_arguments_are_what_the_modules_validator_gives():
    spec = {
        "name": {"type": "str", "required": True},
        "count": {"type": "int", "default": 3},
        "flag": {"type": "bool", "default": False},
        "items": {"type": "list", "elements": "str", "default": []},
        "where": {"type": "path", "default": "/etc/x"},
        "extra": {"type": "dict", "default": {}},
        "anything": {"type": "raw"},
    }
    for args in (
        {"name": "a"},
        {"name": "a", "count": "7", "flag": "yes", "items": ["x", 1], "where": "/tmp/y", "extra": {"k": 1}},
        {"name": 5, "flag": True, "items": "a,b", "anything": [1, "2"]},
    ):
        expected = ArgumentSpecValidator(spec).validate(dict(args)).validated_parameters
        assert node_check.params_for(spec, dict(args)) == expected


def test_arguments_of_another_version_or_type_are_refused_by_name():
    with pytest.raises(ValueError, match="arguments bogus are not options"):
        node_check.params_for({"a": {"type": "str"}}, {"bogus": 1})
    with pytest.raises(ValueError, match="option count: "):
        node_check.params_for({"count": {"type": "int"}}, {"count": "many"})


VALIDATE_PART = {
    "tiers": ["health"],
    "expected_rate_gbps": "400",
    "expected_active_mtu": "4096",
    "required_modules": "ib_core,ib_uverbs",
    "interfaces": [{"name": "ib0", "kind": "ipoib"}],
    "sysfs_root": "/",
    "max_nic_distance": "PXB",
    "sm_query_host": "",
    "sm_query_environment": {},
    "fleet_packages": ["libnccl2"],
}


def test_a_part_of_the_intent_is_read_typed_by_its_registry_spec_and_nothing_else():
    """fabric_validate's part (made from the role's variables): every key of the registry's ``part``, typed as
    ansible-core types it; a key missing or unknown is an intent of another version; a key the spec lacks cannot be
    read (a renamed argument is a bug, never a fallback default)."""
    part = node_check.intent_part({"fabric_validate": VALIDATE_PART}, "fabric_validate")
    assert part["expected_rate_gbps"] == 400.0 and part["expected_active_mtu"] == 4096
    assert part["required_modules"] == ["ib_core", "ib_uverbs"]
    expected = ArgumentSpecValidator(load("concerns").part_spec("fabric_validate")).validate(dict(VALIDATE_PART))
    assert dict(part) == expected.validated_parameters
    with pytest.raises(KeyError, match="the intent has no 'sysfs' here"):
        part.get("sysfs")
    assert node_check.intent_part({}, "fabric_validate") is None
    short = {key: value for key, value in VALIDATE_PART.items() if key != "sysfs_root"}
    with pytest.raises(ValueError, match="fabric_validate part has no sysfs_root"):
        node_check.intent_part({"fabric_validate": short}, "fabric_validate")
    with pytest.raises(ValueError, match="arguments sysfs are not options"):
        node_check.intent_part({"fabric_validate": dict(VALIDATE_PART, sysfs="/")}, "fabric_validate")
    with pytest.raises(ValueError, match="option expected_active_mtu: "):
        node_check.intent_part({"fabric_validate": dict(VALIDATE_PART, expected_active_mtu="big")}, "fabric_validate")
    # A role without a ``part``: its applier's arguments, defaulted by the applier's spec.
    nccl = node_check.intent_part({"nccl": {"conf_path": "/etc/nccl-site.conf"}}, "nccl")
    assert (nccl["conf_path"], nccl["ib_addr_family"], nccl["allow_debug_variables"]) == (
        "/etc/nccl-site.conf",
        "ipv4",
        [],
    )
    with pytest.raises(KeyError):
        nccl.get("address_family")


def test_a_broken_part_is_an_error_of_its_family_never_a_verdict():
    """An opensm part the intent of another version wrote (no partition_list): the opensm family says it broke, and
    the drift and health families still judge."""
    document = {"host": "sm1", "roles": {"opensm": {"unit": "opensm.service", "diag_environment": {}}}}
    checks, _versions = node_check.run_checks(document, module_class=lambda params: _Host({}))
    opensm = [c for c in checks if c["check"] == "opensm"]
    assert len(opensm) == 1 and opensm[0]["status"] == "error", checks
    assert "opensm part has no partition_list" in opensm[0]["message"]


def test_every_role_with_an_applier_has_a_drift_check_family():
    roles = {name.rsplit(".", 1)[-1] for name in node_check.APPLIERS}
    assert {f"drift.{role}" for role in roles} <= set(node_check.FAMILIES)


def test_selection_by_name_family_and_wildcard():
    assert node_check.selected("port.state[mlx5_0/1]", [], [])
    assert not node_check.selected("port.state[mlx5_0/1]", [], ["port.state"])
    assert not node_check.selected("port.state[mlx5_0/1]", [], ["port.*"])
    assert node_check.selected("port.state[mlx5_0/1]", [], ["port.state[mlx5_1/1]"])
    assert node_check.selected("drift.nccl", ["drift.*"], [])
    assert not node_check.selected("nccl.conf", ["drift.*"], [])


def test_unknown_check_names_and_bad_intervals_are_refused_naming_the_variable():
    assert node_check.pattern_errors(["port.state", "drift.*", "port.rate[ib0/1]"], "node_check_skip") == []
    errors = install.input_errors(0, True, ["port.stat"], ["drift.ncl", ""])
    assert errors[0].startswith("node_check_interval=0 is not a number of seconds from 10 to 86400")
    assert errors[1].startswith("node_check_only: 'port.stat' names no check of the node check; use one of")
    assert errors[2].startswith("node_check_skip: 'drift.ncl' names no check")
    assert errors[3].startswith("node_check_skip: '' names no check")
    assert len(errors) == 4
    assert install.input_errors(300, "yes", "port.rate", [])[0].startswith("node_check_timer='yes' is not a boolean")
    assert install.input_errors(300, True, "port.rate", [])[0].startswith("node_check_only='port.rate' is not a list")
    assert install.input_errors(10, False, [], []) == []


def test_the_settings_are_checked_once_as_the_module_receives_them():
    """checked_settings, which the preflight and module fabric_intent both call: the module's own types (a digit
    string is a number, "yes" a boolean, a comma-separated string a list, stripped), one message per bad value,
    naming the variable, and an option the module does not have refused by name."""
    settings, errors = install.checked_settings({"interval": "20", "timer": "yes", "only": "port.rate, port.state"})
    assert errors == [] and settings["interval"] == 20 and settings["timer"] is True
    assert settings["only"] == ["port.rate", "port.state"] and settings["skip"] == []
    _settings, errors = install.checked_settings({"interval": "abc", "timer": "maybe", "nope": 1})
    assert len(errors) == 3, errors
    assert errors[0].startswith("node_check: nope. Supported parameters include:")
    assert errors[1].startswith("node_check_interval='abc' is not a number of seconds")
    assert errors[2].startswith("node_check_timer='maybe' is not a boolean")


def _check(name, status, message="m"):
    return {"check": name, "status": status, "message": message}


def test_the_reason_is_the_first_failure_on_one_line():
    assert node_check.reason([_check("a", "passed"), _check("b", "skipped")]) == ""
    checks = [_check("a", "passed"), _check("interface.mtu[eth1]", "failed", "eth1 MTU\n1500"), _check("c", "failed")]
    assert node_check.reason(checks) == "interface.mtu[eth1]: eth1 MTU 1500 (+1 more)"
    assert node_check.summary(checks) == {"passed": 1, "failed": 2, "skipped": 0, "error": 0, "total": 3}


def _sample(check, state):
    """The end of the gpucluster_fabric_check_state line of ``check`` in ``state``, as the metrics write it."""
    labels = "".join(f'{key}="{value}",' for key, value in node_check.check_labels(check).items())
    return f'{labels}state="{state}"}} 1'


def test_metrics_have_one_series_per_check_and_state_and_escape_labels():
    checks = [_check('odd"name\\x', "failed"), _check("drift.nccl", "passed")]
    report = {
        "started": 1700000000.5,
        "duration_seconds": 0.25,
        "checks": checks,
        "summary": node_check.summary(checks),
    }
    text = node_check.metrics(report)
    assert (
        'gpucluster_fabric_check_state{check="odd\\"name\\\\x",family="odd\\"name\\\\x",subject="",state="failed"} 1'
        in text
    )
    assert 'gpucluster_fabric_check_state{check="drift.nccl",family="drift.nccl",subject="",state="failed"} 0' in text
    assert f'gpucluster_fabric_check_info{{version="{node_check.COLLECTION_VERSION}",schema="1",' in text
    assert 'gpucluster_fabric_checks{state="failed"} 1' in text
    assert "gpucluster_fabric_check_up 1\n" in text
    assert "gpucluster_fabric_check_last_run_timestamp_seconds 1700000000.500\n" in text
    samples = [line for line in text.splitlines() if line.startswith("gpucluster_fabric_check_state")]
    assert len(samples) == 8  # two checks, four states
    down = node_check.metrics({"started": 1.0, "duration_seconds": 0.0, "checks": None})
    assert "gpucluster_fabric_check_up 0\n" in down and "gpucluster_fabric_check_state" not in down


def test_metric_labels_join_node_exporter_and_a_subnet_managers_series_are_bounded():
    """A port's check carries node_exporter's node_infiniband_* labels (device, port), an interface's its
    node_network_* label (device); a family of 1,000 port checks gets FAMILY_SERIES checks' series, the failed
    first, and its counts."""
    assert node_check.check_labels("port.state[mlx5_0/1]") == {
        "check": "port.state[mlx5_0/1]",
        "family": "port.state",
        "subject": "mlx5_0/1",
        "device": "mlx5_0",
        "port": "1",
    }
    assert node_check.check_labels("interface.mtu[ib0]")["device"] == "ib0"
    assert "device" not in node_check.check_labels("partition.port[0x0002c90300a00001]")
    ports = [_check(f"partition.port[0x{i:016x}]", "passed") for i in range(1000)]
    ports[700] = _check("partition.port[0x00000000000002bc]", "failed")
    checks = [*ports, _check("sm.master", "passed")]
    report = {"started": 1.0, "duration_seconds": 0.5, "checks": checks, "summary": node_check.summary(checks)}
    text = node_check.metrics(report)
    states = [line for line in text.splitlines() if line.startswith("gpucluster_fabric_check_state{")]
    assert len(states) == (node_check.FAMILY_SERIES + 1) * len(node_check.STATES)
    assert _sample("partition.port[0x00000000000002bc]", "failed") in text
    assert 'gpucluster_fabric_check_family{family="partition.port",state="passed"} 999' in text
    assert 'gpucluster_fabric_check_series_left_out{family="partition.port"} 936' in text


def test_version_names_the_collection_release(capsys):
    with pytest.raises(SystemExit) as done:
        node_check.main(["--version"])
    assert done.value.code == 0
    assert (
        capsys.readouterr()
        .out.strip()
        .endswith(f"{node_check.COLLECTION_VERSION} (gpucluster.fabric; report schema 1, intent schema 1)")
    )


def test_an_atomic_write_leaves_no_part_behind(tmp_path):
    target = tmp_path / "d" / "m.prom"
    node_check.write_atomic(str(target), "one\n", 0o644)
    node_check.write_atomic(str(target), "two\n", 0o644)
    assert target.read_text() == "two\n" and (target.stat().st_mode & 0o777) == 0o644
    assert [p.name for p in target.parent.iterdir()] == ["m.prom"]


def test_an_atomic_write_follows_no_link_and_writes_only_into_a_directory_of_the_writer(tmp_path, monkeypatch):
    """Whoever may rename entries near the textfile directory: a link put in place of the directory, or of the file,
    leads nowhere; a directory of another user is refused."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "secret").write_text("root's\n")
    (elsewhere / "secret").chmod(0o600)
    (tmp_path / "textfile").symlink_to(elsewhere)
    with pytest.raises(OSError):
        node_check.write_atomic(str(tmp_path / "textfile" / "m.prom"), "x\n", 0o644)
    assert sorted(p.name for p in elsewhere.iterdir()) == ["secret"]
    real = tmp_path / "real"
    real.mkdir()
    (real / "m.prom").symlink_to(elsewhere / "secret")
    node_check.write_atomic(str(real / "m.prom"), "metrics\n", 0o644)
    assert not (real / "m.prom").is_symlink() and (real / "m.prom").read_text() == "metrics\n"
    assert (elsewhere / "secret").read_text() == "root's\n" and ((elsewhere / "secret").stat().st_mode & 0o777) == 0o600
    monkeypatch.setattr(node_check.os, "geteuid", lambda: os.stat(real).st_uid + 4242)
    with pytest.raises(PermissionError, match="belongs to uid"):
        node_check.write_atomic(str(real / "m.prom"), "x\n", 0o644)


def _rdma_modules_intent(root):
    return {
        "schema": 1,
        "host": "gpu1",
        "roles": {
            "rdma_modules": {"core_modules": ["ib_core"], "mode": "none", "hca_detect": False, "root": str(root)}
        },
    }


def test_drift_is_judged_by_the_appliers_own_code(tmp_path):
    """rdma_modules' applier, in check mode on a tree: its persisted module list missing is drift, naming the file;
    once the applier itself has written it (not in check mode), the same check passes."""
    (tmp_path / "sys" / "module" / "ib_core").mkdir(parents=True)
    document = _rdma_modules_intent(tmp_path)
    check, _result = node_check.drift_check("gpu1", "rdma_modules", document["roles"]["rdma_modules"])
    assert check["status"] == "failed", check
    assert "/etc/modules-load.d/gpucluster-rdma.conf: it is missing" in check["message"]
    assert check["message"].startswith("rdma_modules differs from the intent: ")

    class Applying(node_check.NodeModule):
        check_mode = False

        def atomic_move(self, src, dest):
            os.replace(src, dest)

    applied, _result = node_check.drift_check("gpu1", "rdma_modules", document["roles"]["rdma_modules"], Applying)
    assert applied["status"] == "failed"  # it changed the tree, as a converge would have
    again, _result = node_check.drift_check("gpu1", "rdma_modules", document["roles"]["rdma_modules"])
    assert again["status"] == "passed", again


def test_a_broken_intent_is_an_error_not_a_crash_nor_a_node_fault(tmp_path):
    check, _result = node_check.drift_check("gpu1", "rdma_modules", {"core_modules": ["ib_core"], "no_such_option": 1})
    assert check["status"] == "error"
    assert "rdma_modules: the intent's arguments cannot be checked: arguments no_such_option" in check["message"]


def test_without_an_intent_the_check_says_so_and_exits_2(tmp_path):
    report = node_check.check_node(str(tmp_path / "missing.json"), {"only": ["port.nope"]})
    assert report["status"] == "error" and node_check.exit_status(report) == 2
    assert "only: 'port.nope' names no check" in report["reason"]
    assert "cannot read the intent" in report["reason"] and "run site.yml" in report["reason"]


def test_the_command_writes_report_and_metrics(tmp_path):
    (tmp_path / "sys" / "module" / "ib_core").mkdir(parents=True)
    intent = tmp_path / "fabric.json"
    intent.write_text(json.dumps(_rdma_modules_intent(tmp_path)))
    config = tmp_path / "check.json"
    config.write_text(json.dumps({"textfile_dir": str(tmp_path / "tf"), "report": str(tmp_path / "r.json")}))
    status = node_check.main(["--intent", str(intent), "--config", str(config), "--lock", str(tmp_path / "lock")])
    report = json.loads((tmp_path / "r.json").read_text())
    assert status == 1 and report["status"] == "failed"
    assert report["reason"].startswith("drift.rdma_modules: rdma_modules differs from the intent")
    assert _sample("drift.rdma_modules", "failed") in (tmp_path / "tf" / "gpucluster_fabric.prom").read_text()


def test_firmware_settings_are_a_check_of_their_own_in_the_report_and_metrics(tmp_path):
    """hca.firmware[<address>] from what drift.hca_firmware's run of the applier read: mstconfig here is a stand-in
    printing a query laid out from mstflint's source (tests/fixtures/mstconfig/; no ConnectX here)."""
    fixtures = Path(__file__).resolve().parents[3] / "fixtures" / "mstconfig"
    tool = tmp_path / "mstconfig"
    tool.write_text(f'#!/bin/sh\ncat "$(cat {tmp_path / "state"})"\n')
    tool.chmod(0o755)
    (tmp_path / "state").write_text(str(fixtures / "query-pending.txt"))
    settings = {"ATS_ENABLED": True, "PCI_WR_ORDERING": "force_relax"}
    part = {"settings": settings, "devices": ["0000:17:00.0"], "apply": True, "mstconfig": str(tool)}
    intent = tmp_path / "fabric.json"
    intent.write_text(json.dumps({"schema": 1, "host": "gpu1", "roles": {"hca_firmware": part}}))
    config = tmp_path / "check.json"
    config.write_text(json.dumps({"textfile_dir": str(tmp_path / "tf"), "report": str(tmp_path / "r.json")}))
    arguments = ["--intent", str(intent), "--config", str(config), "--lock", str(tmp_path / "lock")]

    node_check.main(arguments)
    checks = {c["check"]: c for c in json.loads((tmp_path / "r.json").read_text())["checks"]}
    assert checks["drift.hca_firmware"]["status"] == "passed"  # set for the next boot: nothing left to set
    pending = checks["hca.firmware[0000:17:00.0]"]
    assert pending["status"] == "failed" and "ATS_ENABLED: current False(0), next boot True(1)" in pending["message"]
    assert "reboot the host" in pending["message"]
    metrics = (tmp_path / "tf" / "gpucluster_fabric.prom").read_text()
    assert _sample("hca.firmware[0000:17:00.0]", "failed") in metrics

    (tmp_path / "state").write_text(str(fixtures / "query-loaded.txt"))  # after the reboot
    node_check.main(arguments)
    checks = {c["check"]: c for c in json.loads((tmp_path / "r.json").read_text())["checks"]}
    assert checks["hca.firmware[0000:17:00.0]"]["status"] == "passed"

    (tmp_path / "state").write_text(str(fixtures / "query-default.txt"))  # someone reset the firmware's settings
    node_check.main(arguments)
    checks = {c["check"]: c for c in json.loads((tmp_path / "r.json").read_text())["checks"]}
    assert checks["drift.hca_firmware"]["status"] == "failed"
    assert "0000:17:00.0 ATS_ENABLED: next boot False(0), wanted True" in checks["drift.hca_firmware"]["message"]
    assert checks["hca.firmware[0000:17:00.0]"]["status"] == "failed"


def _pythons():
    found = [sys.executable]
    old = Path.home() / ".pyenv" / "versions" / "3.8.18" / "bin" / "python3.8"
    if old.exists():
        found.append(str(old))
    return found


@pytest.mark.parametrize("python", _pythons())
def test_the_installed_package_runs_on_the_standard_library_alone(tmp_path, python):
    """What module node_check installs, laid out as it does, imports and runs with no Ansible and no site-packages
    (python -I -S), on this interpreter and, where this machine has it, Python 3.8 (Ubuntu 20.04's)."""
    package = tmp_path / install.PACKAGE
    package.mkdir()
    (package / "__init__.py").write_text("")
    for path, source in install.package_sources().items():
        (package / path).parent.mkdir(parents=True, exist_ok=True)
        (package / path).write_text(source)
    launcher = tmp_path / "gpucluster-fabric-check"
    launcher.write_text(install.launcher(python).replace(repr(node_library.LIBRARY), repr(str(tmp_path))))
    run = subprocess.run(
        [python, "-I", "-S", str(launcher), "--intent", str(tmp_path / "none.json"), "--no-metrics", "--json", "-"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 2, run.stderr
    assert json.loads(run.stdout)["reason"].startswith("intent: cannot read the intent")
    sources = install.package_sources()
    assert {"node_check.py", "fabric_checks/__init__.py", "fabric_checks/health.py", "intent.py"} <= set(sources)
    assert "ansible" not in sources["node_check.py"].split('"""', 2)[2].split("def ", 1)[0]


# `scontrol -o show node` lines (Slurm 22.05's layout; the lab's fault tests read the real one).
IDLE = (
    "NodeName=gpu-01 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUEfctv=1 CPUTot=1 CPULoad=0.12 AvailableFeatures=(null) "
    "ActiveFeatures=(null) Gres=(null) NodeAddr=10.0.0.11 NodeHostName=gpu-01 Version=22.05.8 OS=Linux 6.1.0 "
    "RealMemory=1 AllocMem=0 FreeMem=15000 Sockets=1 Boards=1 State=IDLE ThreadsPerCore=1 TmpDisk=0 Weight=1 "
    "Owner=N/A MCS_label=N/A Partitions=gpu BootTime=2026-12-06T06:00:00 SlurmdStartTime=2026-12-06T06:01:00 "
    "LastBusyTime=2026-12-06T06:01:00 CfgTRES=cpu=1,mem=1M,billing=1 AllocTRES= CapWatts=n/a CurrentWatts=0 "
    "AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s"
)


def _drained(reason, state="IDLE+DRAIN"):
    return IDLE.replace("State=IDLE ", f"State={state} ") + f" Reason={reason} [root@2026-12-06T06:02:00]"


def test_scontrol_lines_give_state_flags_and_reason_without_the_stamp_or_later_fields():
    assert node_check.parse_scontrol_node(IDLE) == {"flags": {"IDLE"}, "reason": "", "partitions": ["gpu"]}
    line = _drained("fabric: drift.nccl: nccl differs [x]")
    parsed = node_check.parse_scontrol_node(line)
    assert parsed["flags"] == {"IDLE", "DRAIN"} and parsed["reason"] == "fabric: drift.nccl: nccl differs [x]"
    assert node_check.parse_scontrol_node(_drained("maintenance", "MIXED+DRAIN"))["flags"] == {"MIXED", "DRAIN"}
    # Slurm 23.02 and later print fields after the reason's stamp: they are not part of the reason.
    later = _drained("operator: cable") + " Comment=(null) Extra=(null) ReservationName=maint"
    assert node_check.parse_scontrol_node(later)["reason"] == "operator: cable"
    assert "NOT_RESPONDING" in node_check.parse_scontrol_node(IDLE.replace("State=IDLE ", "State=IDLE* "))["flags"]


def test_scontrol_json_of_either_layout_gives_the_same():
    old = {"nodes": [{"state": "idle", "state_flags": ["DRAIN"], "reason": "fabric: x", "partitions": ["gpu"]}]}
    new = {"nodes": [{"state": ["IDLE", "DRAIN"], "reason": "fabric: x", "partitions": ["gpu", "all"]}]}
    assert node_check.parse_scontrol_json(json.dumps(old)) == {
        "flags": {"IDLE", "DRAIN"},
        "reason": "fabric: x",
        "partitions": ["gpu"],
    }
    assert node_check.parse_scontrol_json(json.dumps(new))["partitions"] == ["gpu", "all"]
    assert node_check.parse_scontrol_json("scontrol: unrecognized option '--json'") is None


def _report(status, *failed):
    checks = [_check(name, "failed", detail) for name, detail in failed] + [_check("port.state[mlx5_0/1]", "passed")]
    return {"status": status, "checks": checks, "reason": ""}


MTU = ("interface.mtu[eth1]", "interface eth1 MTU 1500, expected 4092")
FAILED = _report("failed", MTU)
PASSED = _report("passed")
SETTINGS = {"drain_after": 2, "resume_after": 2, "max_drained": 0.1, "interval": 10}


def _node(flags="IDLE", reason=""):
    return {"flags": set(flags.split("+")), "reason": reason, "partitions": ["gpu"]}


def _held(count):
    return [("2026-12-07T05:00:00", f"gpu-{i:02d}") for i in range(count)]


def _runs(node, reports, memory=None, census=lambda: ([], 10), start=1000.0, every=6.0):
    """The decisions of runs ``every`` seconds apart on ``node``, which follows the drains and resumes decided."""
    memory = {} if memory is None else memory
    actions = []
    for i, report in enumerate(reports):
        action, reason, _why = node_check.slurm_decision(node, report, memory, SETTINGS, start + i * every, census)
        actions.append(action)
        if action == "drain":
            node = dict(node, flags=node["flags"] | {"DRAIN"}, reason=reason)
        elif action == "resume":
            node = dict(node, flags=node["flags"] - {"DRAIN"}, reason="")
    return actions, node, memory


def test_a_node_is_drained_after_two_failing_runs_that_outlast_an_interval_and_resumed_after_two_clean():
    actions, node, memory = _runs(_node(), [FAILED, FAILED, FAILED, PASSED, PASSED, PASSED])
    assert actions == [None, None, "drain", None, "resume", None]  # 0 s, 6 s (< one 10 s interval), 12 s
    assert memory["drained_reason"] is None and node["flags"] == {"IDLE"}
    long = _report("failed", ("drift.nccl", "x" * 500))
    _actions, node, _memory = _runs(_node(), [long, long, long])
    assert len(node["reason"]) == node_check.SLURM_REASON_LENGTH


def test_a_fault_that_comes_and_goes_every_run_changes_nothing_in_slurm():
    actions, _node_after, _memory = _runs(_node(), [FAILED, PASSED] * 6)
    assert actions == [None] * 12


def test_fabric_wide_faults_never_drain_a_node():
    dead_sm = _report("failed", ("sm.master[mlx5_0/1]", "no subnet manager answers"), ("opensm.running", "inactive"))
    actions, _node_after, _memory = _runs(_node(), [dead_sm] * 5)
    assert actions == [None] * 5


def test_firmware_settings_that_only_wait_for_a_reboot_never_drain_a_node():
    """hca.firmware fails while settings wait for a reboot (a planned change: Slurm reboots the node when its jobs
    end, hca_firmware_reboot_method slurm); it shows, and drains nothing. A wrong next-boot value does drain."""
    device = {"device_type": "ConnectX-7", "settings": {"ATS_ENABLED": {
        "current": "False", "next": "True", "wanted": "True", "current_ok": False, "next_ok": True}}}  # fmt: skip
    (pending,) = fabric_checks.firmware_checks("gpu1", {"devices": {"0000:17:00.0": device}})
    assert pending["status"] == "failed" and "set for the next boot, not loaded yet" in pending["message"]
    waiting = {"status": "failed", "checks": [pending], "reason": ""}
    actions, _node_after, _memory = _runs(_node(), [waiting] * 4)
    assert actions == [None] * 4
    device["settings"]["ATS_ENABLED"].update(next="False", next_ok=False)
    (wrong,) = fabric_checks.firmware_checks("gpu1", {"devices": {"0000:17:00.0": device}})
    actions, _node_after, _memory = _runs(_node(), [{"status": "failed", "checks": [wrong], "reason": ""}] * 3)
    assert actions == [None, None, "drain"]


def test_the_breaker_stops_new_drains_when_the_partition_has_its_share_drained():
    actions, _node_after, _memory = _runs(_node(), [FAILED] * 4, census=lambda: (_held(1), 2))  # a tenth of 2: one
    assert actions == [None] * 4
    decision = node_check.slurm_decision(_node(), FAILED, {"failing_runs": 5, "failing_since": 0.0}, SETTINGS, 100.0,
                                         lambda: (_held(4), 40))  # fmt: skip
    assert decision[0] is None and decision[2].startswith("breaker: 4 of the partition's 40 node(s)")
    assert node_check.drain_limit(0.1, 40) == 4 and node_check.drain_limit(0.1, 5) == 1
    assert node_check.drain_limit(3, 1000) == 3
    actions, _node_after, _memory = _runs(_node(), [FAILED] * 3, census=lambda: (_held(2), 40))
    assert actions == [None, None, "drain"]


def test_someone_elses_state_is_left_alone():
    for flags, reason in (
        ("IDLE+DRAIN", "disk replacement, ticket 42"),  # an operator's drain
        ("IDLE+DRAIN", "fabric: an operator's words that look like the check's"),
        ("DOWN", "Not responding"),
        ("DOWN+DRAIN", "fabric: x"),
        ("IDLE+FAIL", "bad DIMM"),
        ("IDLE+MAINT", ""),
        ("IDLE+REBOOT_REQUESTED", "firmware"),
        ("IDLE+NOT_RESPONDING", ""),
    ):
        actions, node, _memory = _runs(_node(flags, reason), [FAILED] * 3 + [PASSED] * 3)
        assert actions == [None] * 6, (flags, reason)
        assert node["reason"] == reason


def test_only_its_own_drain_is_resumed_while_slurm_still_holds_its_reason():
    memory = {}
    _actions, node, memory = _runs(_node(), [FAILED] * 3, memory)
    assert node["reason"].startswith("fabric: interface.mtu[eth1]") and memory["drained_reason"] == node["reason"]
    nccl = _report("failed", ("drift.nccl", "nccl differs"))
    action, reason, _why = node_check.slurm_decision(node, nccl, memory, SETTINGS, 2000.0)
    assert (action, reason) == ("drain", "fabric: drift.nccl: nccl differs")  # its own drain follows the fault
    operator = dict(node, reason="operator: cable swap")  # an operator re-drained it with a reason of their own
    actions, node, memory = _runs(operator, [PASSED] * 3, memory)
    assert actions == [None] * 3 and node["reason"] == "operator: cable swap" and memory["drained_reason"] is None


def test_nothing_happens_when_the_check_could_not_judge_the_node():
    for report in ({"status": "error", "checks": None, "reason": "intent: cannot read"}, {"status": "error"}):
        actions, node, _memory = _runs(_node("IDLE+DRAIN", "fabric: x"), [report] * 3, {"drained_reason": "fabric: x"})
        assert actions == [None] * 3 and node["flags"] == {"IDLE", "DRAIN"}


class _Scontrol(node_check.NodeModule):
    """The command runner, with scontrol and sinfo answered from a script: [(rc, out, err)] in order; calls recorded."""

    def __init__(self, answers):
        super().__init__({})
        self.answers, self.calls = list(answers), []

    @staticmethod
    def get_bin_path(arg, required=False, opt_dirs=None):
        return f"/usr/bin/{arg}"

    def run_command(self, args, **_kwargs):
        self.calls.append(args)
        return self.answers.pop(0)


NO_JSON = (1, "", "scontrol: unrecognized option '--json'\n")


def test_before_slurmd_registers_the_node_is_left_alone_and_a_silent_controller_is_said():
    module = _Scontrol([(1, "", "Node gpu-01 not found\n"), (1, "", "Node gpu-01 not found\n")])
    outcome = node_check.slurm_act(module, "gpu-01", FAILED)
    assert outcome["action"] is None and "Slurm does not know the node yet (Node gpu-01 not found)" in outcome["why"]
    module = _Scontrol([(124, "", "scontrol: timed out after 5 s (the node check's limit for one command)")])
    outcome = node_check.slurm_act(module, "gpu-01", FAILED)
    assert outcome["why"].startswith("the Slurm controller did not answer (scontrol: timed out")


def test_drain_and_resume_are_scontrol_updates_and_the_breaker_counts_with_sinfo(monkeypatch):
    monkeypatch.setattr(node_check, "BREAKER_SETTLE", 0)
    census = (
        "gpu-01|idle|Unknown|none\ngpu-02|drain|2026-12-07T05:00:00|fabric: drift.nccl: x\ngpu-03|idle|Unknown|none\n"
    )
    after = census.replace("gpu-01|idle|Unknown|none", "gpu-01|drain|2026-12-07T05:01:00|fabric: interface.mtu[eth1]")
    memory = {"failing_runs": 3, "failing_since": 0.0}
    module = _Scontrol([NO_JSON, (0, IDLE, ""), (0, census, ""), (0, "", ""), (0, after, "")])
    settings = dict(SETTINGS, max_drained=2)
    assert node_check.slurm_act(module, "gpu-01", FAILED, memory, settings, now=100.0)["action"] == "drain"
    assert module.calls[2] == ["/usr/bin/sinfo", "-h", "-N", "-o", "%N|%t|%H|%E", "-p", "gpu"]
    assert len(module.calls) == 5  # counted again after the drain: within the limit, kept
    assert module.calls[3] == [
        "/usr/bin/scontrol",
        "update",
        "nodename=gpu-01",
        "state=drain",
        "reason=fabric: interface.mtu[eth1]: interface eth1 MTU 1500, expected 4092",
    ]
    ours = _drained(memory["drained_reason"])
    memory.update(passing_runs=5)
    module = _Scontrol([NO_JSON, (0, ours, ""), (1, "", "slurm_update error: Invalid node state\n")])
    outcome = node_check.slurm_act(module, "gpu-01", PASSED, memory, SETTINGS, now=200.0)
    assert outcome["action"] == "resume" and outcome["error"] == "slurm_update error: Invalid node state"
    assert module.calls[2] == ["/usr/bin/scontrol", "update", "nodename=gpu-01", "state=resume"]


def test_nodes_that_drain_at_the_same_moment_past_the_breaker_undo_their_drain(monkeypatch):
    """Two nodes fail together and each counts the partition before the other's drain lands: both drain; counted
    again, the one past the limit (the same second: by name) undoes its drain at once."""
    monkeypatch.setattr(node_check, "BREAKER_SETTLE", 0)
    before = "gpu-01|idle|Unknown|none\ngpu-02|idle|Unknown|none\n"
    both = "gpu-01|drain|2026-12-07T05:01:00|fabric: x\ngpu-02|drain|2026-12-07T05:01:00|fabric: x\n"
    outcomes = {}
    for name in ("gpu-01", "gpu-02"):
        memory = {"failing_runs": 3, "failing_since": 0.0}
        line = IDLE.replace("NodeName=gpu-01", f"NodeName={name}")
        module = _Scontrol([NO_JSON, (0, line, ""), (0, before, ""), (0, "", ""), (0, both, ""), (0, "", "")])
        outcomes[name] = node_check.slurm_act(module, name, FAILED, memory, SETTINGS, now=100.0)
        outcomes[name]["calls"], outcomes[name]["memory"] = module.calls, memory
    assert outcomes["gpu-01"]["action"] == "drain" and len(outcomes["gpu-01"]["calls"]) == 5
    undone = outcomes["gpu-02"]
    assert undone["action"] == "drain undone" and undone["breaker"] is True
    assert undone["calls"][-1] == ["/usr/bin/scontrol", "update", "nodename=gpu-02", "state=resume"]
    assert undone["memory"]["drained_reason"] is None and undone["why"].startswith("breaker: drained at the same")


def test_a_converge_hold_leaves_slurm_alone_restarts_the_streaks_and_expires(tmp_path):
    """site.yml's hold (/run/gpucluster-fabric-check.hold): while it holds, a failing node is neither drained nor
    resumed and its streaks start again; an expired, unreadable or far-future hold holds nothing for long."""
    path = tmp_path / "hold"
    assert node_check.read_hold(str(path), 100.0) is None  # no file
    path.write_text(json.dumps({"until": time.time() + 60, "by": "site.yml"}))
    until, by = node_check.read_hold(str(path), time.time())
    assert by == "site.yml" and until > time.time()
    assert node_check.read_hold(str(path), until + 1) is None  # expired
    for text in ("{", "[]", '{"until": "soon"}', "null"):
        path.write_text(text)
        assert node_check.read_hold(str(path), time.time()) is None, text
    path.write_text(json.dumps({"until": time.time() + 10 * 86400}))  # never past HOLD_MAX from its writing
    assert node_check.read_hold(str(path), time.time() + converge_hold.HOLD_MAX + 1) is None
    memory = {"failing_runs": 5, "failing_since": 0.0, "passing_runs": 0}
    module = _Scontrol([NO_JSON, (0, IDLE, "")])
    outcome = node_check.slurm_act(module, "gpu-01", FAILED, memory, SETTINGS, now=100.0, hold=(200.0, "site.yml"))
    assert outcome["action"] is None and outcome["why"].startswith("held: site.yml is changing the node")
    assert len(module.calls) == 2 and memory == {"failing_runs": 0, "failing_since": None, "passing_runs": 0}
    # Held again the next run, then released: the failing runs count from the release.
    actions, _node_after, _memory = _runs(_node(), [FAILED, FAILED, FAILED], memory, start=300.0)
    assert actions == [None, None, "drain"]


fabric_checks = load("fabric_checks")


def test_the_fleet_report_takes_each_nodes_own_checks_and_compares_versions():
    """Records of the fleet check (playbook check.yml): the node's checks under its name, a node whose check could not
    run as one failed check saying why, and the versions the nodes read compared across the fleet."""

    def node(status, kernel, checks=None, reason=""):
        report = {"status": status, "reason": reason, "checks": checks, "versions": {"kernel": kernel, "packages": {}}}
        return {"node_check": {"report": report, "error": None}, "versions": report["versions"]}

    hosts = {
        "gpu1": node("passed", "6.1.0-9", [dict(_check("drift.nccl", "passed"), host="gpu1", tier="health")]),
        "gpu2": node("failed", "6.1.0-9", [dict(_check("interface.mtu[ib0]", "failed"), host="x", tier="health")]),
        "gpu3": node("error", "6.1.0-7", None, "intent: cannot read the intent /etc/gpucluster/fabric.json"),
        "gpu4": {"node_check": {"report": None, "error": "[Errno 2] No such file or directory"}, "versions": None},
    }
    result = fabric_checks.evaluate(hosts, {"tiers": ["health"], "thresholds": {}})
    by = {(c["host"], c["check"]): c for c in result["checks"]}
    assert by[("gpu1", "drift.nccl")]["status"] == "passed"
    assert by[("gpu2", "interface.mtu[ib0]")]["status"] == "failed"  # under the host's own name
    assert by[("gpu3", "node_check")]["status"] == "failed"
    assert "could not check gpu3: intent: cannot read the intent" in by[("gpu3", "node_check")]["message"]
    assert "No such file or directory; run site.yml" in by[("gpu4", "node_check")]["message"]
    assert by[("gpu3", "fleet.version[kernel]")]["status"] == "failed"
    assert by[("gpu1", "fleet.version[kernel]")]["status"] == "passed"
    assert result["summary"] == {"passed": 3, "failed": 4, "skipped": 0, "total": 7}


SMINFO = Path(__file__).resolve().parents[3] / "fixtures" / "sminfo"


class _Host(node_check.NodeModule):
    """Commands answered from captures: {program name: (rc, stdout, stderr)}; calls recorded with their env."""

    def __init__(self, answers):
        super().__init__({})
        self.answers, self.calls = answers, []

    @staticmethod
    def get_bin_path(arg, required=False, opt_dirs=None):
        return f"/usr/bin/{arg}"

    def run_command(self, args, environ_update=None, **_kwargs):
        self.calls.append((args, environ_update))
        return self.answers[args[0].rsplit("/", 1)[-1] if args[0] != "/usr/bin/timeout" else args[2]]


def test_a_subnet_manager_checks_its_unit_and_asks_for_the_master_with_its_environment():
    """Real sminfo output of OpenSM on the ibsim lab (tests/fixtures/sminfo): master, and OpenSM stopped."""
    opensm = {"unit": "opensm@0x1.service", "diag_environment": {"LD_PRELOAD": "umad2sim.so"}, "partition_list": []}
    master = (0, (SMINFO / "master.stdout").read_text(), "")
    ibaddr = (0, (SMINFO / "ibaddr.stdout").read_text(), "")
    host = _Host({"systemctl": (0, "active\n", ""), "sminfo": master, "ibaddr": ibaddr})
    checks = {c["check"]: c for c in node_check.subnet_manager_checks("sm1", opensm, host)}
    assert checks["opensm.running"]["status"] == "passed"
    assert checks["sm.master"]["status"] == "passed" and checks["sm.master"]["measured"] == "SMINFO_MASTER"
    assert checks["sm.master"]["message"].startswith("the fabric: the master SM answers at SM LID 1 (GUID ")
    assert host.calls[1] == (["/usr/bin/timeout", "5", "sminfo"], {"LD_PRELOAD": "umad2sim.so"})
    stopped = (255, (SMINFO / "sm-stopped.stdout").read_text(), (SMINFO / "sm-stopped.stderr").read_text())
    host = _Host({"systemctl": (3, "inactive\n", ""), "sminfo": stopped, "ibaddr": ibaddr})
    checks = {c["check"]: c for c in node_check.subnet_manager_checks("sm1", opensm, host)}
    assert checks["opensm.running"]["status"] == "failed"
    assert (
        "opensm@0x1.service is inactive: start it (systemctl start opensm@0x1.service)"
        in (checks["opensm.running"]["message"])
    )
    assert checks["sm.master"]["status"] == "failed" and "is OpenSM running?" in checks["sm.master"]["message"]


def test_a_subnet_manager_reads_its_own_state_and_the_fleet_wants_one_master():
    """sm.state: ibaddr's LID of this host's port; the master's answer where it is the master's LID, else sminfo
    <LID> (real output: a second OpenSM in STANDBY on the ibsim lab). fleet.sm_master judges the fleet's."""
    opensm = {
        "unit": "opensm@0x0002c90300a00001.service",
        "diag_environment": {"SIM_HOST": "H-1"},
        "partition_list": [],
    }
    master = (0, (SMINFO / "master.stdout").read_text(), "")
    ibaddr = (0, (SMINFO / "ibaddr.stdout").read_text(), "")
    host = _Host({"systemctl": (0, "active\n", ""), "sminfo": master, "ibaddr": ibaddr})
    checks = {c["check"]: c for c in node_check.subnet_manager_checks("sm1", opensm, host)}
    assert checks["sm.state"]["status"] == "passed" and checks["sm.state"]["measured"] == "SMINFO_MASTER"
    # The master's own port: its answer to sminfo is this SM's state, not asked twice.
    assert [call[0][2:] for call in host.calls] == [["opensm@0x0002c90300a00001.service"], ["sminfo"], ["ibaddr"]]
    # OpenSM bound to another port than ibaddr's first one: that port's LID is asked by GUID.
    host = _Host({"systemctl": (0, "active\n", ""), "sminfo": master, "ibaddr": ibaddr})
    other = dict(opensm, unit="opensm@0x0002c90300a00101.service")
    node_check.subnet_manager_checks("sm1", other, host)
    assert [call[0][2:] for call in host.calls][2:] == [["ibaddr"], ["ibaddr", "-G", "0x0002c90300a00101"]]
    assert node_check._port_guid_of(ibaddr[1]) == 0x0002C90300A00001

    standby = (0, (SMINFO / "standby.stdout").read_text(), "")
    second = (0, "GID fe80::2:c903:a0:101 LID start 0x5 end 0x5\n", "")
    answers = {"systemctl": (0, "active\n", ""), "ibaddr": second}
    host = _Host(answers)
    host.run_command = lambda args, environ_update=None, **_: (
        host.calls.append(args) or (standby if args[-1] == "5" else answers.get(args[2], master))
    )
    checks = {c["check"]: c for c in node_check.subnet_manager_checks("sm2", opensm, host)}
    assert checks["sm.state"]["status"] == "passed" and checks["sm.state"]["measured"] == "SMINFO_STANDBY"
    assert "this host's subnet manager (LID 5, priority 1) is SMINFO_STANDBY" in checks["sm.state"]["message"]
    assert ["/usr/bin/timeout", "5", "sminfo", "5"] in host.calls

    stopped = (255, (SMINFO / "sm-stopped.stdout").read_text(), (SMINFO / "sm-stopped.stderr").read_text())
    host = _Host({"systemctl": (3, "inactive\n", ""), "sminfo": stopped, "ibaddr": second})
    checks = {c["check"]: c for c in node_check.subnet_manager_checks("sm3", opensm, host)}
    assert checks["sm.state"]["status"] == "failed" and "(LID 5) does not answer" in checks["sm.state"]["message"]

    def state(host, measured):
        return {"host": host, "check": "sm.state", "measured": measured, "status": "passed"}

    one = fabric_checks.fleet_sm_checks([state("sm1", "SMINFO_MASTER"), state("sm2", "SMINFO_STANDBY")])
    assert [c["status"] for c in one] == ["passed"] and "one master subnet manager, sm1; 1 standby" in one[0]["message"]
    two = fabric_checks.fleet_sm_checks([state("sm1", "SMINFO_MASTER"), state("sm2", "SMINFO_MASTER")])
    assert two[0]["status"] == "failed" and "2 subnet managers are MASTER (sm1, sm2)" in two[0]["message"]
    none = fabric_checks.fleet_sm_checks([state("sm1", "SMINFO_STANDBY"), state("sm2", None)])
    assert none[0]["status"] == "failed" and none[0]["message"].startswith("no subnet manager is MASTER")
    idle = fabric_checks.fleet_sm_checks([state("sm1", "SMINFO_MASTER"), state("sm2", "SMINFO_NOTACT")])
    assert idle[0]["status"] == "failed" and "sm2 SMINFO_NOTACT took no part in the handover" in idle[0]["message"]
    assert fabric_checks.fleet_sm_checks([]) == []


def test_opensm_drift_is_the_role_applier_comparing_files_and_only_the_mode_of_the_keys_file(tmp_path):
    """drift.opensm is module opensm's own code (opensm_apply, concerns.appliers()) in check mode with the intent's
    ``applier`` part, which never has ``conf``: opensm.conf's content (the keys) is not compared, its mode is."""
    applier = {
        "root": str(tmp_path),
        "unit": "opensm@0x0002c90300a00001.service",
        "directories": ["/etc/opensm"],
        "partitions_file": "/etc/opensm/partitions.conf",
        "partitions": "Default=0x7fff, ipoib : ALL=limited;\ntraining=0x0101, ipoib : 0x0002c90300a00101=full;\n",
        "defaults_file": "/etc/default/opensm",
        "defaults": "PORTS=0x0002c90300a00001\n",
        "dropin_file": "/etc/systemd/system/opensm.service.d/gpucluster.conf",
        "dropin": "[Service]\n",
        "conf_file": "/etc/opensm/opensm.conf",
        "packages": [],
    }
    intent = {"applier": applier, "unit": applier["unit"], "diag_environment": {}}
    for key in ("partitions", "defaults", "dropin"):
        path = tmp_path / applier[f"{key}_file"].lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(applier[key])
        path.chmod(0o644)
    conf = tmp_path / "etc/opensm/opensm.conf"
    assert "the intent's" not in node_check.drift_check("sm1", "opensm", intent)[0]["message"]
    missing, _result = node_check.drift_check("sm1", "opensm", intent)
    assert missing["status"] == "failed" and "/etc/opensm/opensm.conf: it is missing" in missing["message"]
    conf.write_text("sm_key 0x00000000000b0b01\n")
    conf.chmod(0o600)
    check, result = node_check.drift_check("sm1", "opensm", intent)
    assert check["status"] == "passed", check
    assert result["partitions_changed"] is False and oct(conf.stat().st_mode & 0o777) == "0o600"
    (tmp_path / "etc/opensm/partitions.conf").write_text("Default=0x7fff, ipoib : ALL=full;\n")
    conf.chmod(0o644)
    check, result = node_check.drift_check("sm1", "opensm", intent)
    assert check["status"] == "failed" and result["partitions_changed"] is True
    assert "/etc/opensm/partitions.conf: its content differs" in check["message"]
    assert "/etc/opensm/opensm.conf: mode 0644, not 0600 (it holds the keys)" in check["message"]
    assert "0b0b01" not in check["message"] and oct(conf.stat().st_mode & 0o777) == "0o644"  # check mode


# --- bounded and visible when broken (what acts on a fleet) ------------------------------------------------------


def _stand_in(path, body):
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return path


def _firmware_run(tmp_path, mstconfig, config=None):
    """main() on an intent whose only role is hca_firmware, read with ``mstconfig``; (status, report, metrics)."""
    part = {"settings": {"ATS_ENABLED": True}, "devices": ["0000:17:00.0"], "apply": True, "mstconfig": str(mstconfig)}
    intent = tmp_path / "fabric.json"
    intent.write_text(json.dumps({"schema": 1, "host": "gpu1", "roles": {"hca_firmware": part}}))
    settings = {"textfile_dir": str(tmp_path / "tf"), "report": str(tmp_path / "r.json"), **(config or {})}
    (tmp_path / "check.json").write_text(json.dumps(settings))
    arguments = ["--intent", str(intent), "--config", str(tmp_path / "check.json"), "--lock", str(tmp_path / "lock")]
    arguments += ["--state", str(tmp_path / "state.json"), "--hold", str(tmp_path / "hold")]
    status = node_check.main([*arguments, "--deadline", "3"])
    report = json.loads((tmp_path / "r.json").read_text())
    return status, report, (tmp_path / "tf" / "gpucluster_fabric.prom").read_text()


def test_a_command_that_never_returns_is_stopped_with_what_it_started(tmp_path):
    """A shell stand-in whose child sleeps: both are killed (the command's own session) at the limit."""
    tool = _stand_in(tmp_path / "nvidia-smi", f"sleep 300 & echo $! > {tmp_path / 'child'}; wait")
    module = node_check.NodeModule({})
    node_check.NodeModule.timed_out = []
    started = time.monotonic()
    rc, _out, err = module.run_command([str(tool), "-q"], timeout=1)
    assert time.monotonic() - started < 5
    assert rc == 124 and err.startswith("nvidia-smi: timed out after 1 s")
    assert node_check.NodeModule.timed_out == [("nvidia-smi", 1.0)]
    child = int((tmp_path / "child").read_text())
    time.sleep(0.2)
    assert not Path(f"/proc/{child}").exists() or "zombie" in Path(f"/proc/{child}/status").read_text().lower()


def test_a_hung_tool_ends_the_run_at_its_deadline_names_the_tool_and_blocks_no_later_run(tmp_path):
    hung = _stand_in(tmp_path / "mstconfig", "exec sleep 300")
    started = time.monotonic()
    status, report, metrics = _firmware_run(tmp_path, hung)
    assert time.monotonic() - started < 8  # deadline 3 s, then the writes
    checks = {c["check"]: c for c in report["checks"]}
    assert status == node_check.EXIT_FAILED and report["status"] == "failed"
    assert checks["tool.timeout[mstconfig]"]["status"] == "failed"
    assert "mstconfig did not answer within 3 s" in checks["tool.timeout[mstconfig]"]["message"]
    assert checks["deadline"]["status"] == "skipped" and "health" in checks["deadline"]["message"]
    assert _sample("tool.timeout[mstconfig]", "failed") in metrics
    # The next run takes the lock at once and checks again.
    fixtures = Path(__file__).resolve().parents[3] / "fixtures" / "mstconfig"
    answering = _stand_in(tmp_path / "mstconfig2", f'cat "{fixtures / "query-loaded.txt"}"')
    status, report, _metrics = _firmware_run(tmp_path, answering)
    assert "tool.timeout[mstconfig]" not in {c["check"] for c in report["checks"]}
    assert "deadline" not in {c["check"] for c in report["checks"]}


def test_a_hung_scontrol_leaves_slurm_alone_within_its_limit_and_the_metrics_name_it(tmp_path, monkeypatch):
    """A controller that never answers (scontrol hangs): the run gives Slurm SLURM_TIMEOUT, says the controller did
    not answer, does nothing in Slurm, and the metrics name scontrol."""
    fixtures = Path(__file__).resolve().parents[3] / "fixtures" / "mstconfig"
    answering = _stand_in(tmp_path / "mstconfig", f'cat "{fixtures / "query-loaded.txt"}"')
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _stand_in(bin_dir / "scontrol", "exec sleep 300")
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setattr(node_check, "SLURM_TIMEOUT", 1)
    started = time.monotonic()
    status, report, metrics = _firmware_run(tmp_path, answering, {"slurm": True, "slurm_node": "gpu1"})
    assert time.monotonic() - started < 8
    assert status == node_check.EXIT_PASSED and report["slurm"]["action"] is None
    assert report["slurm"]["why"].startswith("the Slurm controller did not answer (scontrol: timed out after 1 s")
    assert report["tool_timeouts"] == {"scontrol": 1}
    assert 'gpucluster_fabric_check_tool_timeout_seconds{tool="scontrol"} 1\n' in metrics


def test_a_family_that_breaks_is_an_error_the_others_still_run_and_slurm_is_left_alone(tmp_path, monkeypatch):
    fixtures = Path(__file__).resolve().parents[3] / "fixtures" / "mstconfig"
    answering = _stand_in(tmp_path / "mstconfig", f'cat "{fixtures / "query-loaded.txt"}"')

    def broken(host, applied):
        raise TypeError("'NoneType' object is not subscriptable")

    monkeypatch.setattr(node_check, "firmware_checks", broken)
    status, report, metrics = _firmware_run(tmp_path, answering)
    checks = {c["check"]: c for c in report["checks"]}
    assert checks["drift.hca_firmware"]["status"] == "passed"  # the other families ran
    assert checks["hca.firmware"]["status"] == "error"
    assert "TypeError: 'NoneType' object is not subscriptable" in checks["hca.firmware"]["message"]
    assert report["status"] == "error" and status == node_check.EXIT_BROKEN
    assert node_check.slurm_decision(_node(), report, {}, SETTINGS, 0.0)[0] is None
    assert _sample("hca.firmware", "error") in metrics and "gpucluster_fabric_check_up 1" in metrics
    # A selection that leaves the family out does not hide that it broke.
    _status, report, _metrics = _firmware_run(tmp_path, answering, {"only": ["drift.*"]})
    assert {c["check"]: c["status"] for c in report["checks"]}["hca.firmware"] == "error"


def test_anything_that_escapes_ends_in_a_report_and_metrics_saying_the_check_could_not_run(tmp_path, monkeypatch):
    def crash(*_args, **_kwargs):
        raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")

    monkeypatch.setattr(node_check, "check_node", crash)
    status, report, metrics = _firmware_run(tmp_path, tmp_path / "none")
    assert status == node_check.EXIT_BROKEN and status not in (0, 1)
    assert report["status"] == "error" and report["checks"] is None
    assert report["reason"].startswith("the node check broke (UnicodeDecodeError")
    assert "gpucluster_fabric_check_up 0" in metrics


def test_a_configuration_of_the_wrong_type_is_refused_not_a_crash(tmp_path):
    status, report, _metrics = _firmware_run(tmp_path, tmp_path / "none", {"slurm": "yes", "only": "port.state"})
    assert status == node_check.EXIT_NOT_CHECKED and report["status"] == "error"
    assert "only should be list, not str" in report["reason"] and "slurm should be bool, not str" in report["reason"]


def test_help_gives_the_exit_statuses(capsys):
    with pytest.raises(SystemExit):
        node_check.main(["--help"])
    text = capsys.readouterr().out
    assert "3  the check itself broke" in text and "--only" in text and "--skip" in text


def test_sysfs_values_with_any_byte_are_read_not_a_crash(tmp_path):
    rdma_sysfs = load("rdma_sysfs")
    (tmp_path / "node_desc").write_bytes(b"gpu\xff\xfenode\n")
    assert rdma_sysfs.read_attribute(str(tmp_path / "node_desc")) == "gpu\ufffd\ufffdnode"
    assert node_check._label("eth\udcff") == "eth\\\\udcff"  # a netdev name's stray byte, escaped


def test_every_command_the_node_side_code_runs_is_bounded():
    """The node check's code, as installed (install.package_sources): commands run only through
    NodeModule.run_command, whose one wait has a timeout; no other way to start a process."""
    import ast

    starters = {"run", "call", "check_call", "check_output", "Popen", "system", "popen", "spawnv", "execv"}
    found = []
    for path, source in install.package_sources().items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = node.func.value.id if isinstance(node.func.value, ast.Name) else None
                if owner in ("subprocess", "os") and node.func.attr in starters:
                    found.append((path, node.func.attr, node.lineno))
                if node.func.attr == "communicate":
                    assert any(k.arg == "timeout" for k in node.keywords), (path, node.lineno)
    found = sorted((path, attr) for path, attr, _line in found)
    # roce_qos' boot entry point, which the check installs with roce_qos' code but never runs, bounds its own.
    assert found == [("node_check.py", "Popen"), ("roce_qos_boot.py", "Popen")], found


def test_arguments_that_leave_an_applier_nothing_to_do_are_no_drift_as_site_yml_does_not_run_it():
    """A host without fabric interfaces (multirail asked for) or without firmware settings: module apply and the
    role's own action do not run the module (the concern's nothing_to_apply), and the node check agrees."""
    from ansible_collections.gpucluster.fabric.plugins.plugin_utils.role_checks import nothing_to_apply

    bare = {"interfaces": [], "multirail": "enabled", "backend": "networkd"}
    check, result = node_check.drift_check("gpu1", "fabric_interfaces", bare)
    assert (
        check["status"] == "passed" and check["message"] == "fabric_interfaces: no fabric interface: nothing to apply"
    )
    assert result == nothing_to_apply("fabric_interfaces", bare)
    assert nothing_to_apply("hca_firmware", {"settings": {}})["reboot_required"] is False
    assert nothing_to_apply("roce_qos", {"interfaces": {}})["msg"] == "no RoCE interface: nothing to apply"
    assert nothing_to_apply("roce_qos", {"interfaces": {"eth1": {}}}) is None
    assert nothing_to_apply("nccl", {}) is None and nothing_to_apply("fabric_validate", {}) is None


AWKWARD = {
    "int": [8, "8", "08", "0x10", "", "8.0", "8.5", 8.0, True, None, "  9 ", "1e3", [8]],
    "bool": [True, "yes", "Yes", "", "0", 1, 0, 2, "maybe", 1.0, " on ", None],
    "float": ["1.5", 2, "x", "1e3", True],
    "str": [8, "x", True, 1.5],
    "path": ["~/x", 5],
    "list": ["a,b", ["a"], 5, 1.5, ("a",)],
}


@pytest.mark.parametrize(("kind", "value"), [(kind, value) for kind, values in AWKWARD.items() for value in values])
def test_the_node_types_an_appliers_arguments_as_ansible_core_does(kind, value):
    """The node check runs the appliers without Ansible: each intent argument gets the value and type the module
    got from ansible-core's ArgumentSpecValidator, or is refused where it was ("08" is 8, "0x10" and "" refused)."""
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

    spec = {"x": {"type": kind}}
    validated = ArgumentSpecValidator(spec).validate({"x": value})
    try:
        node = node_check.params_for(spec, {"x": value})["x"]
    except ValueError:
        node = "refused"
    ansible = "refused" if validated.error_messages else validated.validated_parameters["x"]
    assert (node, type(node)) == (ansible, type(ansible))
