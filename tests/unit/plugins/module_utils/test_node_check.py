"""The node check's own parts: arguments as the module would get them, check selection, the one-line reason, the
Prometheus text, atomic writes, drift judged by the appliers' real code on a tree, and the installed package importing
without Ansible. Its runs on real hosts (systemd timer, node_exporter scrape, faults) are in the lab's fault tests
(tests/integration/test_site_faults.py)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _load import load
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

node_check = load("node_check")
install = load("node_check_install")
node_apply = load("node_apply")


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


def test_every_role_with_an_applier_has_a_drift_check_family():
    roles = {name.rsplit(".", 1)[-1] for name in node_apply.APPLIERS}
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


def _check(name, status, message="m"):
    return {"check": name, "status": status, "message": message}


def test_the_reason_is_the_first_failure_on_one_line():
    assert node_check.reason([_check("a", "passed"), _check("b", "skipped")]) == ""
    checks = [_check("a", "passed"), _check("interface.mtu[eth1]", "failed", "eth1 MTU\n1500"), _check("c", "failed")]
    assert node_check.reason(checks) == "interface.mtu[eth1]: eth1 MTU 1500 (+1 more)"
    assert node_check.summary(checks) == {"passed": 1, "failed": 2, "skipped": 0, "total": 3}


def test_metrics_have_one_series_per_check_and_state_and_escape_labels():
    checks = [_check('odd"name\\x', "failed"), _check("drift.nccl", "passed")]
    report = {
        "started": 1700000000.5,
        "duration_seconds": 0.25,
        "checks": checks,
        "summary": node_check.summary(checks),
    }
    text = node_check.metrics(report)
    assert 'gpucluster_fabric_check_state{check="odd\\"name\\\\x",state="failed"} 1' in text
    assert 'gpucluster_fabric_check_state{check="drift.nccl",state="failed"} 0' in text
    assert 'gpucluster_fabric_checks{state="failed"} 1' in text
    assert "gpucluster_fabric_check_up 1\n" in text
    assert "gpucluster_fabric_check_last_run_timestamp_seconds 1700000000.500\n" in text
    samples = [line for line in text.splitlines() if line.startswith("gpucluster_fabric_check_state")]
    assert len(samples) == 6
    down = node_check.metrics({"started": 1.0, "duration_seconds": 0.0, "checks": None})
    assert "gpucluster_fabric_check_up 0\n" in down and "gpucluster_fabric_check_state" not in down


def test_an_atomic_write_leaves_no_part_behind(tmp_path):
    target = tmp_path / "d" / "m.prom"
    node_check.write_atomic(str(target), "one\n", 0o644)
    node_check.write_atomic(str(target), "two\n", 0o644)
    assert target.read_text() == "two\n" and (target.stat().st_mode & 0o777) == 0o644
    assert [p.name for p in target.parent.iterdir()] == ["m.prom"]


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


def test_a_broken_intent_is_a_check_that_fails_not_a_crash(tmp_path):
    check, _result = node_check.drift_check("gpu1", "rdma_modules", {"core_modules": ["ib_core"], "no_such_option": 1})
    assert check["status"] == "failed"
    assert "the intent's rdma_modules arguments: arguments no_such_option are not options" in check["message"]


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
    status = node_check.main(["--intent", str(intent), "--config", str(config)])
    report = json.loads((tmp_path / "r.json").read_text())
    assert status == 1 and report["status"] == "failed"
    assert report["reason"].startswith("drift.rdma_modules: rdma_modules differs from the intent")
    assert 'check="drift.rdma_modules",state="failed"} 1' in (tmp_path / "tf" / "gpucluster_fabric.prom").read_text()


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
    for name, source in install.package_sources().items():
        (package / f"{name}.py").write_text(source)
    launcher = tmp_path / "gpucluster-fabric-check"
    launcher.write_text(install.launcher(python).replace(repr(install.LIBRARY), repr(str(tmp_path))))
    run = subprocess.run(
        [python, "-I", "-S", str(launcher), "--intent", str(tmp_path / "none.json"), "--no-metrics", "--json", "-"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 2, run.stderr
    assert json.loads(run.stdout)["reason"].startswith("intent: cannot read the intent")
    assert "ansible" not in install.package_sources()["node_check"].split('"""', 2)[2].split("def ", 1)[0]
