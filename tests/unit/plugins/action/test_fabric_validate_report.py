"""Role fabric_validate and its report action in real ansible-playbook runs on localhost (connection local).

Three hosts read captured trees: two Soft-RoCE hosts with pre-measured perftest and nccl-tests output (the first with
an nvidia-smi that replays an H200 capture and an nccl.conf with a debug-only variable), and a bare host.
"""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _playbook import ansible_playbook, needs_playbook  # noqa: E402

REPO = Path(__file__).resolve().parents[4]
FIXTURES = REPO / "tests" / "fixtures"

pytestmark = [needs_playbook, pytest.mark.playbook]

PLAY = """
- name: Validate
  hosts: all
  gather_facts: false
  environment:
    PATH: "{{ fv_path }}"
  vars:
    fv_peer: "{{ groups['rdma_hosts'] | difference([inventory_hostname]) | first }}"
    fv_measurements:
      rdma:
        - {test: ib_write_bw, peer: "{{ fv_peer }}", output: "{{ lookup('file', fv_captures ~ '/' ~ fv_bw) }}"}
        - {test: ib_write_lat, peer: "{{ fv_peer }}", output: "{{ lookup('file', fv_captures ~ '/' ~ fv_lat) }}"}
      nccl_output: "{{ lookup('file', fv_nccl) }}"
    fabric_validate_tiers: [health, rdma, nccl, outliers]
    fabric_validate_sysfs_root: "{{ fv_root }}"
    fabric_validate_port_settle_seconds: 0
    fabric_validate_required_modules: [rdma_rxe]
    fabric_validate_expected_rate_gbps: 2.5
    fabric_validate_threshold_overrides: {ib_write_bw_fraction_of_rate: 0.05, ib_write_lat_max_usec: 1000}
    fabric_validate_run_id: fixed
    fabric_validate_measurements: "{{ fv_measurements if inventory_hostname in groups['rdma_hosts'] else {} }}"
    fabric_interfaces: "{{ [{'name': 'eth1', 'kind': 'roce', 'mtu': 4200}] if inventory_hostname != 'bare' else [] }}"
  roles:
    - role: gpucluster.fabric.fabric_validate
"""


def _inventory(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    capture = FIXTURES / "h200-1gpu"
    smi = bin_dir / "nvidia-smi"
    smi.write_text(
        f'#!/bin/sh\ncase "$*" in "topo -m") exec cat {capture}/nvidia-smi-topo-m.txt ;;\n'
        f"  *) exec cat {capture}/query-gpu.csv ;; esac\n"
    )
    smi.chmod(0o755)
    (tmp_path / "nccl.conf").write_text("NCCL_IB_HCA==rxe0\nNCCL_ALGO=Ring\n")
    (tmp_path / "empty").mkdir()
    system_path = "/usr/bin:/bin"
    hosts = {
        "vm1": {
            "fv_root": str(FIXTURES / "sysfs-softroce-vm1"),
            "fv_path": f"{bin_dir}:{system_path}",
            "fv_bw": "ib_write_bw_x1_client_vm1.txt",
            "fv_lat": "ib_write_lat_x1_client_vm1.txt",
            "fabric_validate_nccl_conf_path": str(tmp_path / "nccl.conf"),
        },
        "vm2": {
            "fv_root": str(FIXTURES / "sysfs-softroce-vm2"),
            "fv_path": system_path,
            "fv_bw": "ib_write_bw_R_client_vm1.txt",
            "fv_lat": "ib_write_lat_R_client_vm1.txt",
            "fabric_validate_nccl_conf_path": str(tmp_path / "absent.conf"),
        },
        "bare": {
            "fv_root": str(tmp_path / "empty"),
            "fv_path": system_path,
            "fabric_validate_nccl_conf_path": str(tmp_path / "absent.conf"),
        },
    }
    inventory = {
        "all": {
            "vars": {
                "ansible_connection": "local",
                "ansible_python_interpreter": sys.executable,
                "fv_captures": str(FIXTURES / "softroce-qemu"),
                "fv_nccl": str(FIXTURES / "nccl-tests-h200-1gpu" / "all_reduce_perf-h200-1gpu.txt"),
                "fabric_validate_report_dir": str(tmp_path / "reports"),
            },
            "children": {
                "rdma_hosts": {"hosts": {name: hosts[name] for name in ("vm1", "vm2")}},
                "bare_hosts": {"hosts": {"bare": hosts["bare"]}},
            },
        }
    }
    path = tmp_path / "hosts.json"
    path.write_text(json.dumps(inventory))
    return path


def _run(tmp_path, *args, env_extra=None):
    inventory = tmp_path / "hosts.json"
    if not inventory.exists():
        _inventory(tmp_path)
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAY)
    return ansible_playbook(tmp_path, inventory, playbook, *args, env_extra=env_extra)


PNG = b"\x89PNG\r\n\x1a\n"
# A host's record in report.json: the same whether the measured tiers kept it (tiers.yml) or the report built it
# from what the collection registered (a run without measured tiers).
RECORD_KEYS = {
    "ib", "port_reads", "gpu", "gpudirect", "nccl_conf", "versions", "roce_qos", "interfaces", "sm", "rdma",
    "rdma_served", "nccl", "node_check", "pcie", "pcie_paths", "gid_family",
}  # fmt: skip


def _tasks(run):
    return [line.split(" : ", 1)[1].split("]")[0] for line in run.stdout.splitlines() if line.startswith("TASK [")]


def test_one_run_writes_every_report_file_and_fails_the_failing_host(tmp_path):
    run = _run(tmp_path)
    out = run.stdout + run.stderr
    assert run.returncode == 2, out
    run_dir = tmp_path / "reports" / "fixed"
    report = json.loads((run_dir / "report.json").read_text())
    assert sorted(report) == [
        "busbw_references",
        "checks",
        "figures",
        "hosts",
        "nccl_side_by_side",
        "rdma_bw_references",
        "run_id",
        "summary",
        "thresholds",
        "tiers",
    ]
    # The pre-measured nccl-tests output is one H200's (one rank): judged, and named in the note, not drawn.
    one_rank = "{}: 1 rank, no data moves between GPUs: not drawn"
    assert report["figures"] == {
        "files": ["heatmap.png", "plot.png"],
        "note": f"{one_rank.format('vm1')}; {one_rank.format('vm2')}",
    }
    assert report["run_id"] == "fixed"
    assert report["thresholds"]["ib_write_bw_fraction_of_rate"] == {
        "value": 0.05,
        "unit": "fraction of the port rate (Gb/s)",
        "source": "site override",
    }
    by_check = {(c["host"], c["check"]): c for c in report["checks"]}
    assert by_check[("vm1", "ib_write_bw[vm2]")]["measured"] == 0.14
    assert by_check[("vm1", "nccl.conf")]["status"] == "failed"
    assert by_check[("bare", "rdma.device")]["message"] == "skipped: no RDMA device"
    assert by_check[("vm1", "interface.mtu[eth1]")]["measured"] == 4200
    # The health tier is the node check's, judged where the module read: these hosts have no intent (site.yml writes
    # one), so the settings the roles manage are not compared, and the report says so.
    assert by_check[("vm1", "intent")]["status"] == "skipped", "an intent at /etc/gpucluster/fabric.json here?"
    assert report["hosts"]["vm2"]["node_check"]["report"]["checks"][0]["check"] == "intent"
    assert report["hosts"]["vm1"]["gpu"]["gpus"][0]["name"] == "NVIDIA H200"
    assert report["hosts"]["vm1"]["nccl_conf"]["content"] == "NCCL_IB_HCA==rxe0\nNCCL_ALGO=Ring\n"
    assert report["hosts"]["vm2"]["nccl_conf"]["content"] is None
    assert all(set(record) == RECORD_KEYS for record in report["hosts"].values()), report["hosts"]
    assert report["summary"]["failed"] >= 1
    assert (run_dir / "report.json").read_text().endswith("}\n")
    junit = (run_dir / "junit.xml").read_text()
    assert f'<testsuites name="fabric_validate fixed" tests="{len(report["checks"])}"' in junit
    assert '<skipped message="skipped: no RDMA device" />' in junit
    assert "Ansible managed" in junit
    summary = (run_dir / "summary.md").read_text()
    assert "# Fabric validation fixed" in summary
    assert "| ib_write_bw_fraction_of_rate | 0.05 | fraction of the port rate (Gb/s) | site override |" in summary
    assert "![every host against every check" in summary and "(heatmap.png)" in summary
    assert "(plot.png)" in summary
    for name in ("heatmap.png", "plot.png"):
        assert (run_dir / name).read_bytes()[:8] == PNG, name
    # Only vm1 fails, with one line per failed check naming host, check, measured value and threshold.
    assert "fatal: [vm1]: FAILED!" in out
    assert "vm1: health/nccl.conf measured ['NCCL_ALGO'], threshold []" in out
    assert "fatal: [vm2]" not in out and "fatal: [bare]" not in out, [
        c for c in report["checks"] if c["status"] == "failed"
    ]
    assert f"fabric_validate fixed: {report['summary']['passed']} passed" in out
    # A run that finds the same results leaves the files as they were and changes nothing.
    before = {p.name: p.stat().st_mtime_ns for p in run_dir.iterdir()}
    again = _run(tmp_path)
    assert {p.name: p.stat().st_mtime_ns for p in run_dir.iterdir()} == before
    assert "changed=1" not in again.stdout


def test_health_tier_takes_eight_task_slots(tmp_path):
    # The argument spec, the checks with the read and the host's record (one task), the sminfo query of check
    # sm.master (a loop over the InfiniBand ports: none here), the measured tiers' include (skipped), the subnet
    # managers' own checks (a loop over those outside the play: none here), the report, its line, the failures.
    run = _run(tmp_path, "-e", '{"fabric_validate_tiers": ["health"], "fabric_validate_fail_on_failure": false}')
    assert run.returncode == 0, run.stdout + run.stderr
    tasks = _tasks(run)
    assert len(tasks) == 8, tasks
    run_dir = tmp_path / "reports" / "fixed"
    report = json.loads((run_dir / "report.json").read_text())
    # The records the report built from what the collection registered: the same as the tiers' (the test above).
    assert all(set(record) == RECORD_KEYS for record in report["hosts"].values()), report["hosts"]
    vm1 = report["hosts"]["vm1"]
    assert vm1["rdma"] == [] and vm1["sm"] == [] and vm1["nccl"] is None and vm1["port_reads"] == 1
    assert vm1["nccl_conf"]["allowed_debug"] == [] and "NCCL_ALGO=Ring" in vm1["nccl_conf"]["content"]
    assert vm1["roce_qos"]["declared"] == ["eth1"] and report["hosts"]["bare"]["roce_qos"]["declared"] == []
    # Nothing measured: the heat map, and no plot of empty panels.
    assert report["figures"]["files"] == ["heatmap.png"]
    assert report["figures"]["note"].startswith("no bandwidth plot: nothing was measured")
    assert (run_dir / "heatmap.png").read_bytes()[:8] == PNG
    assert not (run_dir / "plot.png").exists()
    assert "> no bandwidth plot: nothing was measured" in (run_dir / "summary.md").read_text()


def test_without_matplotlib_the_report_is_written_and_says_why(tmp_path):
    # A matplotlib that cannot be imported, first on the controller's path: what a controller without it sees.
    shadow = tmp_path / "shadow" / "matplotlib"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('matplotlib hidden by the test')\n")
    run = _run(tmp_path, env_extra={"PYTHONPATH": str(shadow.parent)})
    out = run.stdout + run.stderr
    # The run fails only for vm1's failed check (as with matplotlib), not for the missing figures.
    assert run.returncode == 2, out
    assert "fatal: [vm1]: FAILED!" in out and "fatal: [vm2]" not in out
    assert "figures not drawn: matplotlib is not installed for the controller's Python" in out
    run_dir = tmp_path / "reports" / "fixed"
    report = json.loads((run_dir / "report.json").read_text())
    assert report["figures"]["files"] == []
    assert "meta/ee-requirements.txt" in report["figures"]["note"]
    assert sorted(p.name for p in run_dir.iterdir()) == ["junit.xml", "report.json", "summary.md"]
    summary = (run_dir / "summary.md").read_text()
    assert "> figures not drawn: matplotlib is not installed" in summary and ".png)" not in summary


def test_check_mode_reports_and_writes_nothing(tmp_path):
    run = _run(tmp_path, "--check")
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert "check mode: the hosts were read as they are now, before the changes this run would make" in out
    assert "failed check(s) are reported, not enforced, and no report was written" in out
    assert not (tmp_path / "reports").exists()


@pytest.mark.parametrize("step", ["preflight", "collect", "rdma", "nccl", "report"])
def test_each_step_runs_alone_in_check_mode(tmp_path, step):
    run = _run(tmp_path, "--check", "--tags", f"fabric_validate_{step}")
    assert run.returncode == 0, run.stdout + run.stderr
    tasks = _tasks(run)
    assert "Read RDMA devices and ports, GPUs, nccl.conf and interface MTUs" in tasks  # the checks run first in it
    expected = {
        "preflight": "Read RDMA devices and ports, GPUs, nccl.conf and interface MTUs",
        "collect": "Ask each InfiniBand port's subnet manager whether it is the master (sminfo)",
        "rdma": "Record the client's and the server's results",
        "nccl": "Record the benchmark's output, or why none ran",
        "report": "Show the result",
    }[step]
    assert expected in tasks, tasks


def test_bad_input_fails_in_preflight_with_every_message(tmp_path):
    run = _run(
        tmp_path,
        "-e",
        '{"fabric_validate_tiers": ["speed"], "fabric_validate_measurements": {"rdma": [{"test": "ib_read_bw"}]}}',
    )
    out = run.stdout + run.stderr
    assert run.returncode == 2, out
    assert "fabric_validate_tiers contains unknown tier 'speed'" in out
    assert "fabric_validate_measurements must be {rdma: [{test: ib_write_bw|ib_write_lat, peer, output}]" in out
    # The checks fail the read's task before the module runs: nothing was read or recorded.
    assert "fatal: [vm1]: FAILED!" in out
    assert "TASK [gpucluster.fabric.fabric_validate : Ask each InfiniBand port's" not in out


def test_build_report_judges_and_lists_each_hosts_failures():
    from ansible_collections.gpucluster.fabric.plugins.action.fabric_validate_report import build_report

    args = {
        "run_id": "r1",
        "tiers": ["health"],
        "thresholds": {"ib_write_lat_max_usec": {"value": 2.5, "unit": "us", "source": "perftest"}},
        "threshold_overrides": {"ib_write_lat_max_usec": 3},
        "expected": {"rate_gbps": 0, "active_mtu": 4096},
        "hosts": {"n1": {"interfaces": [{"name": "eth1", "expected_mtu": 4200, "mtu": 1500}]}, "n2": {}},
        "unreached": ["n3"],
    }
    report, failures = build_report(args)
    assert report["run_id"] == "r1"
    assert report["thresholds"] == {"ib_write_lat_max_usec": {"value": 3, "unit": "us", "source": "site override"}}
    assert report["hosts"] is args["hosts"]
    assert report["summary"]["total"] == len(report["checks"])
    assert ("n3", "host.reached", "failed") in [(c["host"], c["check"], c["status"]) for c in report["checks"]]
    assert sorted(failures) == ["n1", "n2"]
    # n1 declares eth1 but has no RDMA device: that fails too, before the interface's MTU.
    assert failures["n1"] == [
        "n1: health/rdma.device measured 0, threshold 1 - no RDMA device, but fabric_interfaces declares eth1; check"
        " that the HCA is seen (lspci) and its driver loaded (role rdma_modules), or remove the interfaces from"
        " fabric_interfaces",
        "n1: health/interface.mtu[eth1] measured 1500 B, threshold 4200 B - interface eth1 MTU 1500, expected 4200",
    ]
    assert failures["n2"] == []


def test_fleet_failures_go_to_every_host():
    from ansible_collections.gpucluster.fabric.plugins.action.fabric_validate_report import host_failures

    checks = [
        {
            "host": "fleet",
            "tier": "outliers",
            "check": "x",
            "status": "failed",
            "measured": 1,
            "threshold": 2,
            "unit": None,
            "message": "m",
        },
        {
            "host": "n1",
            "tier": "health",
            "check": "y",
            "status": "passed",
            "measured": 1,
            "threshold": 1,
            "unit": None,
            "message": "ok",
        },
    ]
    assert host_failures(checks, ["n1", "n2"]) == {
        "n1": ["fleet: outliers/x measured 1, threshold 2 - m"],
        "n2": ["fleet: outliers/x measured 1, threshold 2 - m"],
    }


def test_a_relative_report_dir_is_below_the_working_directory_and_the_outcome_is_a_stat(tmp_path, monkeypatch):
    # The playbook lives elsewhere (as in an installed collection): the report lands where ansible-playbook runs.
    _inventory(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    playbook = tmp_path / "elsewhere" / "play.yml"
    playbook.write_text(PLAY)
    monkeypatch.setenv("ANSIBLE_SHOW_CUSTOM_STATS", "true")
    extra = '{"fabric_validate_report_dir": "rel-reports", "fabric_validate_fail_on_failure": false}'
    run = ansible_playbook(tmp_path, tmp_path / "hosts.json", playbook, "-e", extra)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert (tmp_path / "rel-reports" / "fixed" / "report.json").is_file()
    assert not (tmp_path / "elsewhere" / "rel-reports").exists()
    # AWX/AAP keeps custom stats as the job's artifacts.
    stats = out.split("CUSTOM STATS:", 1)[1]
    assert "fabric_validate" in stats and str(tmp_path / "rel-reports" / "fixed") in stats, stats


def test_a_subnet_managers_own_check_joins_the_report_and_its_failures_are_the_fabrics():
    """The loop of tasks/report.yml: each subnet manager's node check JSON becomes its record, judged like a node of
    the fleet check; its failed partition check fails every host of the play; an unreachable one says so."""
    from ansible_collections.gpucluster.fabric.plugins.action.fabric_validate_report import (
        build_report,
        subnet_manager_records,
    )

    def check(name, status, message):
        return {"host": "sm-a", "tier": "health", "check": name, "status": status, "measured": None,
                "threshold": None, "unit": None, "message": message}  # fmt: skip

    own = {
        "host": "sm-a",
        "status": "failed",
        "reason": "partition[tenant]: held by 0x0002c90300a00201",
        "versions": {"kernel": "6.1.0-9", "packages": {}},
        "checks": [
            check("sm.state", "passed", "this host's subnet manager (LID 1, priority 14) is SMINFO_MASTER"),
            check("partition[tenant]", "failed", "held by 0x0002c90300a00201, not a member"),
        ],
    }
    results = [
        {"item": "sm-a", "rc": 1, "stdout": json.dumps(own), "changed": False},
        {"item": "sm-b", "unreachable": True, "msg": "ssh: connect to host sm-b port 22: Connection timed out"},
        {"item": "sm-c", "skipped": True},
    ]
    records = subnet_manager_records(results)
    assert set(records) == {"sm-a", "sm-b"}
    hosts = {"gpu1": {"node_check": {"report": {"status": "passed", "checks": []}, "error": None}}, **records}
    args = {"run_id": "r", "tiers": ["health"], "thresholds": {}, "hosts": hosts, "play_hosts": ["gpu1"]}
    report, failures = build_report(args)
    by = {(c["host"], c["check"]): c["status"] for c in report["checks"]}
    assert by[("sm-a", "sm.state")] == "passed" and by[("sm-a", "partition[tenant]")] == "failed"
    assert by[("sm-b", "node_check")] == "failed"
    assert any("sm-a: health/partition[tenant]" in line for line in failures["gpu1"]), failures
    assert any("sm-b: health/node_check" in line for line in failures["gpu1"]), failures
