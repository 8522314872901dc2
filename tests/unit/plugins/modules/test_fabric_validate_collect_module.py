"""Module fabric_validate_collect's sminfo queries (sm_query), run as Ansible runs it, on the captured ibsim tree.

No InfiniBand here: ``sminfo`` is a stand-in on PATH that prints the line real sminfo printed against real OpenSM on
the lab's ibsim fabric (tests/unit/test_sminfo.py has it) and records its arguments and environment. The real query
against real OpenSM runs in scenario site and make lab (from the subnet manager, fabric_validate_sm_query_host)."""

import json
import os
import stat
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _process  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
ACTIVE = os.path.join(REPO, "tests", "fixtures", "sysfs-ibsim-active")
LINE = "sminfo: sm lid 1 sm guid 0x2c903000a1b2c, activity count 210 priority 0 state 3 SMINFO_MASTER"


def _fake_sminfo(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls.jsonl"
    script = bin_dir / "sminfo"
    script.write_text(
        f'#!/bin/sh\nprintf \'{{"argv": "%s", "sim": "%s"}}\\n\' "$*" "$SIM_HOST" >> {calls}\necho \'{LINE}\'\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return bin_dir, calls


def test_sm_query_asks_each_linkup_port_in_the_same_call(tmp_path, monkeypatch):
    bin_dir, calls = _fake_sminfo(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    result = _process.run_module(
        "fabric_validate_collect",
        tmp_path,
        root=ACTIVE,
        sm_query=True,
        sm_query_timeout=5,
        sm_query_environment={"SIM_HOST": "H-1"},
        settle_seconds=0,
    )
    assert result.get("failed") is not True, result
    ports = [r["item"] for r in result["sminfo"]]
    assert ports and all(r["rc"] == 0 and r["stdout"].strip() == LINE for r in result["sminfo"])
    asked = [json.loads(line) for line in calls.read_text().splitlines()]
    assert [a["argv"] for a in asked] == [f"-C {p['device']} -P {p['port']}" for p in ports]
    assert {a["sim"] for a in asked} == {"H-1"}


def test_without_sm_query_nothing_is_asked(tmp_path, monkeypatch):
    bin_dir, calls = _fake_sminfo(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    result = _process.run_module("fabric_validate_collect", tmp_path, root=ACTIVE, settle_seconds=0)
    assert result.get("failed") is not True, result
    assert "sminfo" not in result and not calls.exists()


def test_the_health_tier_is_the_node_checks_with_drift_where_the_host_has_an_intent(tmp_path, monkeypatch):
    """With ``health``, the module judges the health tier with the node check's code (node_check.validate_checks):
    without an intent the ``intent`` check is skipped, saying so; with one, every role it names is compared in check
    mode first (here rdma_modules, whose persisted module list is missing from the tree: drift.rdma_modules fails)."""
    bin_dir, _calls = _fake_sminfo(tmp_path)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    health = {"host": "gpu1", "expected": {"rate_gbps": 0, "active_mtu": 2048}, "inputs": {}}
    args = {"root": ACTIVE, "settle_seconds": 0, "sm_query": True, "sm_query_timeout": 5}
    missing = str(tmp_path / "absent.json")
    result = _process.run_module("fabric_validate_collect", tmp_path, health=dict(health, intent=missing), **args)
    assert result.get("failed") is not True, result
    by_name = {c["check"]: c for c in result["checks"]}
    assert by_name["intent"]["status"] == "skipped" and f"no intent at {missing}" in by_name["intent"]["message"]
    assert not [name for name in by_name if name.startswith("drift.")]
    ports = [name for name in by_name if name.startswith("port.state[")]
    assert ports and all(by_name[name]["status"] == "passed" for name in ports), by_name
    assert all(c["host"] == "gpu1" and c["tier"] == "health" for c in result["checks"])
    # The SM answered MASTER for every port asked: judged here the same way as on the controller.
    assert [c["status"] for name, c in by_name.items() if name.startswith("sm.master[")] == ["passed"] * len(ports)

    tree = tmp_path / "tree"
    (tree / "sys" / "module" / "ib_core").mkdir(parents=True)
    intent = tmp_path / "fabric.json"
    intent.write_text(
        json.dumps(
            {
                "schema": 1,
                "host": "gpu1",
                "roles": {
                    "rdma_modules": {
                        "core_modules": ["ib_core"],
                        "mode": "none",
                        "hca_detect": False,
                        "root": str(tree),
                    }
                },
            }
        )
    )
    result = _process.run_module("fabric_validate_collect", tmp_path, health=dict(health, intent=str(intent)), **args)
    names = [c["check"] for c in result["checks"]]
    assert names[0] == "drift.rdma_modules" and "intent" not in names, names
    drift = result["checks"][0]
    assert drift["status"] == "failed" and "gpucluster-rdma.conf: it is missing" in drift["message"], drift
    # The rest is the same health tier as without the intent.
    assert names[1:] == [name for name in by_name if name != "intent"]

    intent.write_text("{not json")
    result = _process.run_module("fabric_validate_collect", tmp_path, health=dict(health, intent=str(intent)), **args)
    first = result["checks"][0]
    assert first["check"] == "intent" and first["status"] == "failed" and "cannot read the intent" in first["message"]
