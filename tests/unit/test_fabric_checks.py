import base64
from pathlib import Path

import pytest
from ansible_collections.gpucluster.fabric.plugins.module_utils.fabric_checks import (
    collected_record,
    evaluate,
    expected_interface_mtus,
    failure_lines,
    fleet_gid_checks,
    fleet_version_checks,
    health_checks,
    host_record,
    measurements_errors,
    merge_thresholds,
    node_judged_checks,
    outlier_checks,
    perftest_argv,
    plot_series,
    preflight_errors,
    rdma_checks,
    rdma_part,
    rdma_retry_rounds,
    rdma_round_record,
    rdma_rounds,
    reference_errors,
    roce_gid_checks,
    roce_qos_health,
    sm_query_records,
    subnet_manager_checks,
    with_sm,
)
from ansible_collections.gpucluster.fabric.plugins.module_utils.rdma_sysfs import read_rdma_devices
from ansible_collections.gpucluster.fabric.plugins.module_utils.sminfo import query_ports as sm_query_ports

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

THRESHOLDS = {
    "ib_write_bw_fraction_of_reference": {"value": 1.0, "source": "test"},
    "ib_write_bw_fraction_of_rate": {"value": 0.9, "source": "test"},
    "ib_write_lat_max_usec": {"value": 2.5, "source": "test"},
    "nccl_busbw_fraction_of_reference": {"value": 0.95, "source": "test"},
    "outlier_fraction_of_median": {"value": 0.9, "source": "test"},
}
BW_CLIENT = "softroce-qemu/ib_write_bw_x1_client_vm1.txt"
REFERENCES = [{"gpu": "H100|H200", "gpus_per_node": 8, "busbw_gbps": 370, "source": "a test row"}]


def _ib(vm):
    devices = read_rdma_devices(str(FIXTURES / f"sysfs-softroce-{vm}"))
    return {"rdma_present": True, "devices": devices, "modules_loaded": {"ib_core": True, "rdma_rxe": True}}


def _config(tiers, **thresholds):
    return {
        "tiers": tiers,
        "thresholds": merge_thresholds(THRESHOLDS, thresholds),
        "references": REFERENCES,
        "expected": {"active_mtu": 4096},
    }


def _by(result, host, check):
    return next(c for c in result["checks"] if c["host"] == host and c["check"] == check)


@pytest.mark.parametrize(("n", "rounds"), [(1, 0), (2, 1), (3, 3), (4, 2), (5, 3), (8, 2), (64, 2)])
def test_ring_pairing_is_linear(n, rounds):
    hosts = [f"h{i:02d}" for i in range(n)]
    schedule = rdma_rounds(hosts)
    assert len(schedule) == rounds
    pairs = [p for r in schedule for p in r]
    assert len(pairs) == (0 if n < 2 else 1 if n == 2 else n)
    for r in schedule:
        members = [h for p in r for h in (p["server"], p["client"])]
        assert len(members) == len(set(members)), "a host appears twice in one round"
    if n > 2:
        assert {p["client"] for p in pairs} == set(hosts)
        assert {p["server"] for p in pairs} == set(hosts)


def test_explicit_pairs_are_scheduled():
    pairs = [{"server": "a", "client": "b"}, {"server": "a", "client": "c"}, {"server": "d", "client": "e"}]
    assert rdma_rounds(pairs=pairs) == [[pairs[0], pairs[2]], [pairs[1]]]


def test_hosts_without_rdma_are_left_out_of_the_rounds():
    assert rdma_rounds(["a", "b", "c"], None, [True, False, True]) == [[{"server": "c", "client": "a"}]]


OPTIONS = {"timeout": 60, "iterations": 5000, "device": "", "gid_index": -1, "rdma_cm": False, "bw_size": 65536}


def test_perftest_argv_server_and_client():
    options = dict(OPTIONS, lat_size=2)
    assert perftest_argv("ib_write_bw", options) == [
        "timeout", "60", "stdbuf", "-oL", "ib_write_bw", "-n", "5000", "-s", "65536", "--report_gbits",
    ]  # fmt: skip
    options.update(device="rxe0", gid_index=1, rdma_cm=True)
    assert perftest_argv("ib_write_lat", options, "192.168.77.2") == [
        "timeout", "60", "ib_write_lat", "-n", "5000", "-d", "rxe0", "-x", "1", "-R", "-s", "2", "192.168.77.2",
    ]  # fmt: skip


def test_perftest_argv_asks_for_the_json_report():
    options = dict(OPTIONS, lat_size=2)
    assert perftest_argv("ib_write_bw", options, "10.0.0.2", "/tmp/ansible.x.perftest.json") == [
        "timeout", "60", "ib_write_bw", "-n", "5000", "-s", "65536", "--report_gbits",
        "--out_json", "--out_json_file=/tmp/ansible.x.perftest.json", "10.0.0.2",
    ]  # fmt: skip
    # No file (the tempfile task skipped: perftest without standard JSON): the text alone, as before.
    assert perftest_argv("ib_write_lat", options, "10.0.0.2", "") == perftest_argv("ib_write_lat", options, "10.0.0.2")


def test_round_record_keeps_the_clients_json_report(fixture_text):
    pairs = [{"server": "b", "client": "a"}]
    report = fixture_text("perftest-json/ib_write_bw_client-25.01.0-0.80.json")
    client = {"stdout": "bw rows", "stderr": "", "rc": 0}
    slurped = {"content": base64.b64encode(report.encode()).decode(), "encoding": "base64", "source": "/tmp/x"}
    a = rdma_round_record({}, "ib_write_bw", rdma_part(pairs, "a", True), {"client": client, "json": slurped})
    assert a["rdma"][0]["json"] == report
    # Unreadable (the slurp failed): recorded empty, judged a failure; skipped (no report asked for): no json key.
    failed = {"failed": True, "msg": "file not found: /tmp/x"}
    a = rdma_round_record({}, "ib_write_bw", rdma_part(pairs, "a", True), {"client": client, "json": failed})
    assert a["rdma"][0]["json"] == ""
    skipped = {"skipped": True, "changed": False}
    a = rdma_round_record({}, "ib_write_bw", rdma_part(pairs, "a", True), {"client": client, "json": skipped})
    assert "json" not in a["rdma"][0]


def test_rdma_checks_judge_the_json_report_and_say_so(fixture_text):
    text = fixture_text("softroce-qemu/ib_write_bw_x1_client_vm1.txt")
    report = fixture_text("perftest-json/ib_write_bw_client-25.01.0-0.80.json")
    run = {"test": "ib_write_bw", "peer": "vm2", "output": text, "rc": 0}
    by_text = _by(
        evaluate({"vm1": {"ib": _ib("vm1"), "rdma": [run]}}, _config(["rdma"], ib_write_bw_fraction_of_rate=0.9)),
        "vm1",
        "ib_write_bw[vm2]",
    )
    hosts = {"vm1": {"ib": _ib("vm1"), "rdma": [dict(run, json=report)]}}
    result = evaluate(hosts, _config(["rdma"], ib_write_bw_fraction_of_rate=0.9))
    by_json = _by(result, "vm1", "ib_write_bw[vm2]")
    assert (by_text["parsed"], by_json["parsed"]) == ("text", "json")
    assert (by_json["status"], by_json["measured"], by_json["threshold"]) == ("failed", 0.14, 2.25)
    assert by_json["message"] == by_text["message"] + " (from perftest's JSON report)"
    assert plot_series(hosts)["rdma"] == {"vm1": [{"peer": "vm2", "bw_avg_gbps": 0.14}]}
    # Exit status 0 and a result row in the text, but no report: a failure, not 0 Gb/s.
    hosts["vm1"]["rdma"][0]["json"] = ""
    missing = _by(evaluate(hosts, _config(["rdma"])), "vm1", "ib_write_bw[vm2]")
    assert (missing["status"], missing["measured"], missing["parsed"]) == ("failed", None, "json")
    assert "perftest wrote no JSON report" in missing["message"]
    # A latency report is judged on its t_typical, as the text is.
    lat = fixture_text("perftest-json/ib_write_lat_client-25.01.0-0.80.json")
    hosts = {"vm1": {"ib": _ib("vm1"), "rdma": [{"test": "ib_write_lat", "peer": "vm2", "output": "", "json": lat}]}}
    check = _by(evaluate(hosts, _config(["rdma"])), "vm1", "ib_write_lat[vm2]")
    assert (check["status"], check["measured"], check["parsed"]) == ("failed", 238.8, "json")


def test_round_record_keeps_the_client_and_the_server_side():
    pairs = [{"server": "b", "client": "a"}]
    client = {"stdout": "bw rows", "stderr": "warn", "rc": 0}
    served = {"stdout": "served", "stderr": "", "rc": 0}
    a = rdma_round_record({"rdma": [], "ib": {}}, "ib_write_bw", rdma_part(pairs, "a", True), {"client": client})
    assert a["rdma"] == [{"test": "ib_write_bw", "peer": "b", "output": "bw rows\nwarn", "rc": 0, "skipped": None}]
    assert a["rdma_served"] == [] and a["ib"] == {}
    results = {"client": {"skipped": True}, "server_job": {"ansible_job_id": "j1"}, "server": served}
    b = rdma_round_record({"rdma": []}, "ib_write_bw", rdma_part(pairs, "b", True), results)
    assert b["rdma"] == []
    assert b["rdma_served"] == [{"test": "ib_write_bw", "peer": "a", "output": "served\n", "rc": 0}]
    # A host that only watches (pre-measured results) records nothing; check mode marks the client's entry.
    assert rdma_round_record({"rdma": []}, "ib_write_lat", rdma_part(pairs, "a", False), {})["rdma"] == []
    checked = rdma_round_record({"rdma": []}, "ib_write_lat", rdma_part(pairs, "a", True), {}, True)
    assert checked["rdma"][0]["skipped"] == "check mode" and checked["rdma"][0]["rc"] is None


def test_preflight_errors():
    errors = preflight_errors(
        ["health", "speed"],
        {"ib_write_bw_fraction_of_rate": 1.5, "outlier_fraction_of_median": 0, "ib_write_lat_max_usec": -1},
        [{"server": "node1", "client": "ghost"}],
        ["node1", "node2"],
    )
    assert "fabric_validate_tiers contains unknown tier 'speed'; use any of health, rdma, nccl, outliers" in errors
    assert any("ib_write_bw_fraction_of_rate=1.5 is outside (0, 1]" in e for e in errors)
    assert any("outlier_fraction_of_median=0 is outside (0, 1]" in e for e in errors)
    assert any("ib_write_lat_max_usec=-1 must be greater than 0" in e for e in errors)
    assert any("fabric_validate_rdma_pairs[0].client='ghost' is not a host in this play" in e for e in errors)
    assert preflight_errors(["health"], THRESHOLDS, [], ["node1"]) == []
    assert preflight_errors([], {"ib_write_bw_fraction_of_rate": 1}, None, []) == []


@pytest.mark.parametrize(
    ("rate", "mtu", "wrong"),
    [
        (0, 0, []),
        ("400", "4096", []),
        (200.5, 2048, []),
        (-1, 4096, ["fabric_validate_expected_rate_gbps=-1 must be a number of Gb/s, 0 or more"]),
        ("fast", 4096, ["fabric_validate_expected_rate_gbps='fast'"]),
        (True, 4096, ["fabric_validate_expected_rate_gbps=True"]),
        ("nan", 4096, ["fabric_validate_expected_rate_gbps='nan'"]),
        (400, 4092, ["fabric_validate_expected_active_mtu=4092 must be 0 (not checked) or an RDMA MTU: 256, 512,"]),
        (400, "-4096", ["fabric_validate_expected_active_mtu='-4096'"]),
        (-5, "0x1000", ["expected_rate_gbps=-5", "expected_active_mtu='0x1000'"]),
    ],
)
def test_expected_port_minima_are_checked_in_the_preflight(rate, mtu, wrong):
    errors = preflight_errors([], {}, [], [], expected_rate_gbps=rate, expected_active_mtu=mtu)
    assert len(errors) == len(wrong), errors
    for error, words in zip(errors, wrong):
        assert words in error


@pytest.mark.parametrize(
    "measurements",
    [
        {},
        {"nccl_output": "x"},
        {"rdma": []},
        {"rdma": [{"test": "ib_write_bw", "peer": "n2", "output": ""}, {"test": "ib_write_lat", "peer": "n2"}]},
    ],
)
def test_measurements_of_the_right_shape_pass(measurements):
    assert measurements_errors(measurements) == []
    assert preflight_errors(["health"], {}, [], ["node1"], measurements=measurements) == []


@pytest.mark.parametrize(
    "measurements",
    [
        [],
        "rdma",
        {"rdma": "ib_write_bw"},
        {"rdma": [{"test": "ib_read_bw"}]},
        {"rdma": [{"peer": "n2"}]},
        {"rdma": [1]},
    ],
)
def test_measurements_of_another_shape_fail_with_the_expected_shape(measurements):
    (error,) = measurements_errors(measurements)
    assert error.startswith(
        "fabric_validate_measurements must be {rdma: [{test: ib_write_bw|ib_write_lat, peer, output}], "
        "nccl_output: str}; got "
    )


def test_bad_measurements_are_reported_with_the_other_errors_and_shortened():
    errors = preflight_errors(["speed"], {}, [], ["node1"], 60, 3, {"rdma": [{"test": "x", "output": "y" * 500}]})
    assert len(errors) == 2
    assert errors[0].endswith('"output": "' + "y" * (197 - len('{"rdma": [{"test": "x", "output": "')) + "...")
    assert errors[1].startswith("fabric_validate_tiers contains unknown tier 'speed'")


def test_preflight_errors_port_settle():
    assert preflight_errors(["health"], {}, [], ["node1"], 60, 3) == []
    assert preflight_errors(["health"], {}, [], ["node1"], 0, 1) == []
    errors = preflight_errors(["health"], {}, [], ["node1"], -5, 0)
    assert errors == [
        "fabric_validate_port_settle_seconds=-5 must be 0 or more; use e.g. 60 (0 judges the first read)",
        "fabric_validate_port_settle_delay=0 must be at least 1 (seconds); use e.g. 3",
    ]


def test_absent_hardware_is_skipped_never_passed(fixture_text):
    gpu_absent = {"gpu_present": False, "skipped_reason": "nvidia-smi not found"}
    hosts = {"bare": {"ib": {"rdma_present": False, "devices": [], "modules_loaded": {}}, "gpu": gpu_absent}}
    result = evaluate(hosts, _config(["health", "rdma", "nccl", "outliers"]))
    statuses = {c["check"]: c["status"] for c in result["checks"] if c["host"] == "bare"}
    assert set(statuses.values()) == {"skipped"}
    assert _by(result, "bare", "rdma.device")["message"] == "skipped: no RDMA device"
    assert _by(result, "bare", "rdma")["message"] == "skipped: no RDMA device"
    assert result["summary"]["passed"] == 0


def test_an_nvidia_smi_that_fails_is_a_failed_check_not_a_skip():
    """A GPU off the bus makes the installed nvidia-smi fail: gpu.nic_affinity fails, saying what nvidia-smi said."""
    gpu = {"gpu_present": False, "failed_reason": "nvidia-smi --query-gpu=... failed (rc=15): Unknown Error"}
    hosts = {"gpu01": {"ib": {"rdma_present": False, "devices": [], "modules_loaded": {}}, "gpu": gpu}}
    check = _by(evaluate(hosts, _config(["health"])), "gpu01", "gpu.nic_affinity")
    assert check["status"] == "failed" and "rc=15): Unknown Error: the GPUs cannot be read" in check["message"]


def test_declared_rdma_rails_without_an_rdma_device_fail():
    rails = [{"name": f"ib{i}", "expected_mtu": 4092, "mtu": None} for i in range(8)]
    no_rdma = {"rdma_present": False, "devices": [], "modules_loaded": {}}
    hosts = {"gpu01": {"ib": no_rdma, "gpu": {"gpu_present": False}, "interfaces": rails}}
    check = _by(evaluate(hosts, _config(["health"])), "gpu01", "rdma.device")
    assert check["status"] == "failed" and (check["measured"], check["threshold"]) == (0, 8)
    assert "fabric_interfaces declares ib0, ib1, ib2, ib3, ib4, ib5, ib6, ib7" in check["message"]


def test_rdma_bw_fails_below_fraction_of_port_rate(fixture_text):
    hosts = {
        "vm1": {
            "ib": _ib("vm1"),
            "rdma": [
                {
                    "test": "ib_write_bw",
                    "peer": "vm2",
                    "output": fixture_text("softroce-qemu/ib_write_bw_x1_client_vm1.txt"),
                }
            ],
        }
    }
    # No published figure for a 2.5 Gb/s port: skipped with the reason, never judged against an invented row.
    unlisted = _by(evaluate(hosts, _config(["rdma"])), "vm1", "ib_write_bw[vm2]")
    assert (unlisted["status"], unlisted["measured"]) == ("skipped", 0.14)
    assert "no published ib_write_bw figure for a 2.5 Gb/s port" in unlisted["message"]
    assert "fabric_validate_threshold_overrides.ib_write_bw_fraction_of_rate" in unlisted["message"]
    # The site's own fraction of the rate judges it.
    result = evaluate(hosts, _config(["rdma"], ib_write_bw_fraction_of_rate=0.9))
    check = _by(result, "vm1", "ib_write_bw[vm2]")
    assert check["status"] == "failed"
    assert check["measured"] == 0.14
    assert check["threshold"] == 2.25  # 0.9 x 2.5 Gb/s (rxe 1X SDR)
    assert "site override" in check["message"]
    lines = failure_lines(result["checks"])
    assert lines[0].startswith("vm1: rdma/ib_write_bw[vm2] measured 0.14 Gb/s, threshold 2.25 Gb/s")
    # A site that accepts 5 % of line rate on emulation passes the same measurement.
    passing = evaluate(hosts, _config(["rdma"], ib_write_bw_fraction_of_rate=0.05))
    assert _by(passing, "vm1", "ib_write_bw[vm2]")["status"] == "passed"


def test_rdma_race_reported_as_failure(fixture_text):
    output = fixture_text("softroce-qemu/FAILED_ib_write_bw_R_client_vm1_race.txt")
    hosts = {"vm1": {"ib": _ib("vm1"), "rdma": [{"test": "ib_write_bw", "peer": "vm2", "output": output}]}}
    check = _by(evaluate(hosts, _config(["rdma"])), "vm1", "ib_write_bw[vm2]")
    assert check["status"] == "failed"
    assert "RDMA_CM_EVENT_REJECTED" in check["message"]
    assert check["measured"] is None


def test_rdma_latency_threshold(fixture_text):
    output = fixture_text("softroce-qemu/ib_write_lat_x1_client_vm1.txt")
    hosts = {"vm1": {"ib": _ib("vm1"), "rdma": [{"test": "ib_write_lat", "peer": "vm2", "output": output}]}}
    check = _by(evaluate(hosts, _config(["rdma"])), "vm1", "ib_write_lat[vm2]")
    assert (check["status"], check["measured"], check["threshold"]) == ("failed", 238.8, 2.5)


def test_health_on_softroce_tree():
    result = evaluate({"vm1": {"ib": _ib("vm1")}}, _config(["health"]))
    assert _by(result, "vm1", "port.state[rxe0/1]")["status"] == "passed"
    assert _by(result, "vm1", "port.active_mtu[rxe0/1]")["status"] == "passed"
    rate = _by(result, "vm1", "port.rate[rxe0/1]")
    assert rate["status"] == "skipped"  # no expected rate given
    assert _by(result, "vm1", "module[rdma_rxe]")["status"] == "passed"
    assert _by(result, "vm1", "nccl.conf")["status"] == "skipped"


@pytest.mark.parametrize(
    ("iface", "expected"),
    [
        ({"name": "ib0", "kind": "ipoib"}, 4092),
        ({"name": "ib0", "kind": "ipoib", "mode": "connected"}, 65520),
        ({"name": "eth1", "kind": "roce"}, 9000),
        ({"name": "eth1", "kind": "roce", "mtu": "4200"}, 4200),
        ({"name": "ib0", "kind": "ipoib", "mtu": 2044}, 2044),
    ],
)
def test_every_declared_interface_has_an_expected_mtu(iface, expected):
    assert expected_interface_mtus([iface]) == [{"name": iface["name"], "expected_mtu": expected}]


def test_malformed_interfaces_are_left_to_fabric_interfaces():
    bad = [{"kind": "roce"}, {"name": "eth1", "kind": "roce", "mtu": "big"}, {"name": "x", "kind": "ethernet"}, "ib0"]
    assert expected_interface_mtus(bad) == []
    assert expected_interface_mtus(None) == []


def test_interface_without_mtu_left_at_a_wrong_default_fails():
    # fabric_validate used to read only interfaces that set an mtu: ib0 at 2044 was never judged.
    declared = [{"name": "ib0", "kind": "ipoib"}, {"name": "eth1", "kind": "roce", "mtu": 4200}]
    measured = {"ib0": 2044, "eth1": 4200}
    interfaces = [dict(e, mtu=measured[e["name"]]) for e in expected_interface_mtus(declared)]
    result = evaluate({"vm1": {"ib": _ib("vm1"), "interfaces": interfaces}}, _config(["health"]))
    check = _by(result, "vm1", "interface.mtu[ib0]")
    assert check["status"] == "failed"
    assert check["message"] == "interface ib0 MTU 2044, expected 4092"
    assert (check["measured"], check["threshold"], check["unit"]) == (2044, 4092, "B")
    assert _by(result, "vm1", "interface.mtu[eth1]")["status"] == "passed"


def test_nccl_conf_debug_only_settings_fail():
    data = {
        "ib": _ib("vm1"),
        "nccl_conf": {"path": "/etc/nccl.conf", "content": "NCCL_ALGO=Ring\nNCCL_P2P_LEVEL=NVL\n"},
    }
    check = _by(evaluate({"vm1": data}, _config(["health"])), "vm1", "nccl.conf")
    assert check["status"] == "failed"
    assert check["measured"] == ["NCCL_ALGO", "NCCL_P2P_LEVEL"]
    assert check["message"].startswith("/etc/nccl.conf sets NCCL_ALGO, NCCL_P2P_LEVEL: NCCL documents these for")
    assert "remove them from the file" in check["message"]
    clean = dict(data, nccl_conf={"path": "/etc/nccl.conf", "content": "NCCL_IB_HCA==mlx5_0\n"})
    passed = _by(evaluate({"vm1": clean}, _config(["health"])), "vm1", "nccl.conf")
    assert passed["status"] == "passed"
    assert passed["message"].startswith("/etc/nccl.conf sets none of NCCL's debug-only variables (https://docs.nvidia")


def test_single_gpu_nccl_is_skipped_with_reason(fixture_text):
    data = {
        "gpu": {"gpu_present": True, "gpus": [{"name": "NVIDIA H200"}]},
        "nccl": {"output": fixture_text("nccl-tests-h200-1gpu/all_reduce_perf-h200-1gpu.txt")},
    }
    check = _by(evaluate({"h200": data}, _config(["nccl"])), "h200", "nccl.all_reduce[nccl-tests]")
    assert check["status"] == "skipped"
    assert "bus bandwidth is 0 by definition" in check["message"]


def _eight_ranks(text, busbw_by_size):
    """The real one-rank H200 table turned into an 8-rank one (rank lines + out-of-place busbw per size)."""
    rank_line = next(line for line in text.splitlines() if "Rank  0" in line)
    extra = "\n".join(rank_line.replace("Rank  0", f"Rank  {i}") for i in range(1, 8))
    text = text.replace(rank_line, rank_line + "\n" + extra)
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] in busbw_by_size:
            fields[7] = busbw_by_size[fields[0]]
            text = text.replace(line, "  ".join(fields))
    return text


def _nccl_check(fixture_text, busbw_by_size, references=None):
    text = _eight_ranks(fixture_text("nccl-tests-h200-1gpu/all_reduce_perf-h200-1gpu.txt"), busbw_by_size)
    data = {"gpu": {"gpu_present": True, "gpus": [{"name": "NVIDIA H200"}]}, "nccl": {"output": text}}
    config = _config(["nccl"])
    if references is not None:
        config["references"] = references
    return _by(evaluate({"h200": data}, config), "h200", "nccl.all_reduce[nccl-tests]")


def test_nccl_reference_threshold(fixture_text):
    check = _nccl_check(fixture_text, {"8589934592": "340.00"})
    assert check["status"] == "failed"
    assert (check["measured"], check["threshold"]) == (340.0, 351.5)
    assert "a test row" in check["message"]


SIZED = [{"gpu": "H200", "gpus_per_node": 8, "busbw_gbps": 431, "size_bytes": 4294967296, "source": "row src"}]


def test_nccl_reference_compares_at_the_rows_message_size(fixture_text):
    # 4 GiB is below the reference, 8 GiB above it: the row applies at 4 GiB, so the run fails on that size.
    check = _nccl_check(fixture_text, {"4294967296": "400.00", "8589934592": "440.00"}, SIZED)
    assert check["status"] == "failed"
    assert (check["measured"], check["threshold"]) == (400.0, 409.45)
    assert "at 4294967296 B" in check["message"] and "row src" in check["message"]
    check = _nccl_check(fixture_text, {"4294967296": "420.00", "8589934592": "300.00"}, SIZED)
    assert (check["status"], check["measured"]) == ("passed", 420.0)


def test_nccl_reference_uses_the_next_larger_size(fixture_text):
    rows = [dict(SIZED[0], size_bytes=5000000000)]
    check = _nccl_check(fixture_text, {"4294967296": "100.00", "8589934592": "440.00"}, rows)
    assert (check["status"], check["measured"]) == ("passed", 440.0)
    assert "at 8589934592 B" in check["message"]


def test_nccl_run_that_stops_below_the_reference_size_is_skipped(fixture_text):
    rows = [dict(SIZED[0], size_bytes=17179869184)]
    check = _nccl_check(fixture_text, {"8589934592": "440.00"}, rows)
    assert check["status"] == "skipped"
    assert "applies at 17179869184 B" in check["message"]
    assert "measured up to 8589934592 B" in check["message"]
    assert "fabric_validate_nccl_max_bytes" in check["message"]


def test_reference_rows_are_checked_in_preflight():
    good = SIZED[0]
    assert reference_errors([good]) == []
    bad = [
        {"gpu": "H(", "gpus_per_node": 8, "busbw_gbps": 400, "source": "x"},
        {"gpu": "", "gpus_per_node": 1, "busbw_gbps": 0, "source": " "},
        {"gpu": "H200", "gpus_per_node": "8", "busbw_gbps": "fast", "size_bytes": -1, "source": "x"},
        "H200",
    ]
    errors = reference_errors(bad)
    joined = "\n".join(errors)
    for text in (
        "[0].gpu='H(' is not a regular expression",
        "[1].gpu is missing",
        "[1].gpus_per_node=1 must be an integer of 2 or more",
        "[1].busbw_gbps=0 must be",
        "[1].source is missing",
        "[2].gpus_per_node='8'",
        "[2].busbw_gbps='fast'",
        "[2].size_bytes=-1",
        "[3]='H200' is not a mapping",
    ):
        assert text in joined, text
    assert len(errors) == 9
    assert reference_errors({"gpu": "H200"}) == ["fabric_validate_busbw_references must be a list of rows, got dict"]
    via_preflight = preflight_errors(["nccl"], {}, [], ["a"], references=bad)
    assert via_preflight == errors


def test_outliers_below_fraction_of_median():
    checks = [
        {"host": h, "tier": "rdma", "check": "ib_write_bw[x]", "status": "passed", "measured": v}
        for h, v in (("a", 380.0), ("b", 390.0), ("c", 385.0), ("d", 300.0))
    ]
    result = {c["host"]: c["status"] for c in outlier_checks(checks, THRESHOLDS) if c["check"] == "outlier.ib_write_bw"}
    assert result == {"a": "passed", "b": "passed", "c": "passed", "d": "failed"}
    few = outlier_checks(checks[:2], THRESHOLDS)
    assert {c["status"] for c in few} == {"skipped"}


def _ibsim(state):
    devices = read_rdma_devices(str(FIXTURES / f"sysfs-ibsim-{state}"))
    return {"rdma_present": True, "devices": devices, "modules_loaded": {}}


def test_health_on_ibsim_port_swept_by_opensm():
    config = _config(["health"])
    config["expected"]["rate_gbps"] = 10
    result = evaluate({"lab-gpu-01": {"ib": _ibsim("active")}}, config)
    state = _by(result, "lab-gpu-01", "port.state[ibsim0/1]")
    assert state["status"] == "passed"
    assert _by(result, "lab-gpu-01", "port.rate[ibsim0/1]")["status"] == "passed"
    # InfiniBand port without ibv_devinfo: the active MTU is unknown, reported skipped, never passed
    assert _by(result, "lab-gpu-01", "port.active_mtu[ibsim0/1]")["status"] == "skipped"
    assert result["summary"]["failed"] == 0


def test_health_fails_on_port_the_sm_has_not_swept():
    result = evaluate({"lab-gpu-01": {"ib": _ibsim("init")}}, _config(["health"]))
    check = _by(result, "lab-gpu-01", "port.state[ibsim0/1]")
    assert check["status"] == "failed"
    assert "INIT" in check["message"]


def _sm_record(name, rc, query_host="lab-sm-01"):
    """A record as sm_query_records makes it, from a real sminfo run (tests/fixtures/sminfo)."""
    text = {part: FIXTURES / "sminfo" / f"{name}.{part}" for part in ("stdout", "stderr")}
    record = {"device": "ibsim0", "port": 1, "query_host": query_host, "rc": rc}
    record.update({part: path.read_text() if path.exists() else "" for part, path in text.items()})
    return record


def _sm_check(record, state="active", host="lab-gpu-01"):
    data = {"ib": _ibsim(state), "sm": [] if record is None else [record]}
    checks = subnet_manager_checks(host, data)
    assert [c["check"] for c in checks] == ["sm.master[ibsim0/1]"]
    return checks[0]


def test_sm_master_passes_when_the_master_answers():
    check = _sm_check(_sm_record("master", 0))
    assert check["status"] == "passed"
    assert check["measured"] == check["threshold"] == "SMINFO_MASTER"
    assert check["message"] == (
        "ibsim0/1: the master SM answers at SM LID 1 (GUID 0x2c90300a00001, priority 14, activity count 164) "
        "(asked from lab-sm-01)"
    )


def test_sm_master_fails_when_opensm_is_stopped_although_the_port_stays_active():
    """Real: OpenSM stopped on the lab's SM; the port stays ACTIVE with SM LID 1 from the last sweep."""
    data = {"ib": _ibsim("active"), "sm": [_sm_record("sm-stopped", 255)]}
    result = evaluate({"lab-gpu-01": data}, _config(["health"]))
    assert _by(result, "lab-gpu-01", "port.state[ibsim0/1]")["status"] == "passed"
    check = _by(result, "lab-gpu-01", "sm.master[ibsim0/1]")
    assert check["status"] == "failed"
    assert check["measured"] == "no answer"
    assert check["message"] == (
        "ibsim0/1: no subnet manager answers at SM LID 1 (asked from lab-sm-01): is OpenSM running? "
        "(systemctl status opensm on the subnet managers); sminfo: iberror: failed: query"
    )


def test_sm_master_fails_on_timeout_and_on_a_standby_answer():
    assert "sminfo timed out" in _sm_check({**_sm_record("sm-stopped", 124), "stdout": "", "stderr": ""})["message"]
    standby = {
        **_sm_record("master", 0),
        "stdout": "sminfo: sm lid 1 sm guid 0x2c90300a00001, activity count 3 priority 14 state 2 SMINFO_STANDBY\n",
    }
    check = _sm_check(standby)
    assert check["status"] == "failed" and check["measured"] == "SMINFO_STANDBY"
    assert "not SMINFO_MASTER" in check["message"]


def test_sm_master_fails_on_a_port_no_sm_has_swept():
    """The INIT tree: SM LID 0. No query is made (fabric_sm_query_ports leaves the port out)."""
    assert sm_query_ports(_ibsim("init")) == []
    check = _sm_check(None, state="init")
    assert check["status"] == "failed" and check["measured"] == "SM LID 0"
    assert "is OpenSM running?" in check["message"]


def test_sm_master_is_skipped_without_sminfo_or_without_access():
    missing = _sm_check(_sm_record("not-installed", 127, query_host="lab-gpu-01"))
    assert missing["status"] == "skipped"
    assert missing["message"] == (
        "skipped: sminfo not found on lab-gpu-01: install infiniband-diags to ask the subnet manager"
    )
    no_umad = _sm_check(_sm_record("no-umad", 255, query_host="lab-gpu-01"))
    assert no_umad["status"] == "skipped"
    assert "Failed to open 'ibsim0' port '1'" in no_umad["message"]


def test_sm_master_is_not_judged_on_roce_or_without_rdma():
    roce = {"ib": _ib("vm1"), "sm": []}
    assert sm_query_ports(roce["ib"]) == []
    assert subnet_manager_checks("vm1", roce) == []
    assert subnet_manager_checks("bare", {"ib": {"rdma_present": False}, "sm": []}) == []
    # Not collected (an older record): no check.
    assert subnet_manager_checks("lab-gpu-01", {"ib": _ibsim("active")}) == []


def test_sm_query_ports_and_records():
    assert sm_query_ports(_ibsim("active")) == [{"device": "ibsim0", "port": 1}]
    results = [
        {"item": {"device": "ibsim0", "port": 1}, "rc": 0, "stdout": "x", "stderr": ""},
        {"item": {"device": "mlx5_0", "port": 1}, "unreachable": True, "msg": "Failed to connect"},
    ]
    assert sm_query_records(results, "sm1") == [
        {"device": "ibsim0", "port": 1, "query_host": "sm1", "rc": 0, "stdout": "x", "stderr": ""},
        {"device": "mlx5_0", "port": 1, "query_host": "sm1", "rc": None, "stdout": "", "stderr": "Failed to connect"},
    ]


def test_collected_record_and_its_sminfo_answers():
    collected = {
        "ib": _ibsim("active"),
        "attempts": 2,
        "gpu": {"gpu_present": False},
        "nccl_conf": {"path": "/etc/nccl.conf", "content": "NCCL_ALGO=Ring\n"},
        "versions": {"packages": {}, "kernel": "6.1"},
        "roce_qos": {},
        "interfaces": [{"name": "ib0", "expected_mtu": 4092, "mtu": 4092}],
    }
    inputs = {"gpudirect": None, "allowed_debug": ["NCCL_ALGO"], "require_pfc": True, "declared_roce": ["eth1"]}
    record = collected_record(collected, inputs)
    assert record["port_reads"] == 2 and record["rdma"] == [] and record["rdma_served"] == [] and record["nccl"] is None
    conf = {"path": "/etc/nccl.conf", "content": "NCCL_ALGO=Ring\n", "allowed_debug": ["NCCL_ALGO"]}
    assert record["nccl_conf"] == conf
    assert record["roce_qos"] == {"results": {}, "require_pfc": True, "declared": ["eth1"]}
    assert "sm" not in record
    results = [{"item": {"device": "ibsim0", "port": 1}, "rc": 0, "stdout": "x", "stderr": ""}]
    full = with_sm(record, results, "sm1")
    assert full["sm"] == [{"device": "ibsim0", "port": 1, "query_host": "sm1", "rc": 0, "stdout": "x", "stderr": ""}]
    assert with_sm(record, None, "sm1")["sm"] == [] and "sm" not in record
    # The same through host_record, from the registered results; a record that has sm (the module asked) is kept.
    assert host_record({"record": record, "sm_query_host": "sm1"}, results) == full
    assert host_record({"record": full, "sm_query_host": "x"}, []) == full
    assert host_record({"record": record, "sm_query_host": "h"}) == dict(record, sm=[])
    # The nccl.conf check reads the allowed names from the record: NCCL_ALGO allowed here, so it passes.
    checks = evaluate({"h": full}, _config(["health"]))["checks"]
    assert next(c for c in checks if c["check"] == "nccl.conf")["status"] == "passed"


def test_unreached_host_is_a_failed_check():
    config = _config(["health"])
    config["unreached"] = ["lab-gpu-02"]
    result = evaluate({"lab-gpu-01": {"ib": _ibsim("active")}}, config)
    check = _by(result, "lab-gpu-02", "host.reached")
    assert check["status"] == "failed"
    assert "not validated" in check["message"]
    assert result["summary"]["failed"] == 1


def test_host_that_only_served_is_skipped_with_what_it_served(fixture_text):
    # Two hosts: one pair, vm2 serves and vm1's client run is judged. vm2 had a peer: it must not say otherwise.
    served = [{"test": "ib_write_bw", "peer": "vm1", "rc": 0, "output": fixture_text(BW_CLIENT)}]
    hosts = {
        "vm1": {"ib": _ib("vm1"), "rdma": [{"test": "ib_write_bw", "peer": "vm2", "output": fixture_text(BW_CLIENT)}]},
        "vm2": {"ib": _ib("vm2"), "rdma": [], "rdma_served": served},
        "vm3": {"ib": _ib("vm2"), "rdma": []},
    }
    result = evaluate(hosts, _config(["rdma"], ib_write_bw_fraction_of_rate=0.05))
    assert _by(result, "vm1", "ib_write_bw[vm2]")["status"] == "passed"
    check = _by(result, "vm2", "rdma")
    assert check["status"] == "skipped"
    assert check["message"] == "skipped: served ib_write_bw for vm1; judged on the client"
    assert _by(result, "vm3", "rdma")["message"] == "skipped: no peer to test against"


def _same_verdicts(now, then):
    """The same checks with the same verdicts; a bandwidth message may say more now (which threshold row applied)."""
    for new, old in zip(now, then, strict=True):
        new, old = dict(new), dict(old)
        if new["check"].startswith("ib_write_bw"):
            assert new.pop("message").startswith(old.pop("message").rstrip(")"))
        assert new == old
    return True


# Checks added after the kernel lab recorded its reports, judged on the same recorded host data.
LATER_CHECKS = ("roce.gid[", "fleet.roce_gid_index")


def _as_recorded(checks):
    """The checks as the kernel lab recorded them, before a measurement's check said which of perftest's outputs it
    parsed (there: the text, perftest 4.5 writing no standard JSON), and without the checks added since."""
    assert {c["parsed"] for c in checks if "parsed" in c} == {"text"}
    return [{k: v for k, v in c.items() if k != "parsed"} for c in checks if not c["check"].startswith(LATER_CHECKS)]


def _later(result):
    return {(c["host"], c["check"]): c for c in result["checks"] if c["check"].startswith(LATER_CHECKS)}


def test_kernel_lab_report_is_reproduced_from_its_recorded_data():
    # The report fabric_validate wrote on the kernel lab's VMs (real rxe0, live perftest at host load ~21, the
    # scenario's first thresholds): judging its recorded host data again gives the same checks, the bandwidth gate
    # failing at 0.009352 < 0.01 Gb/s.
    import json

    report = json.loads(
        (FIXTURES / "softroce-qemu" / "fabric_validate" / "report_load21_bw_gate_failed.json").read_text()
    )
    result = evaluate(
        report["hosts"],
        {"tiers": report["tiers"], "thresholds": report["thresholds"], "expected": {"active_mtu": 4096}},
    )
    assert _same_verdicts(_as_recorded(result["checks"]), report["checks"])
    assert report["summary"] == {"passed": 15, "failed": 1, "skipped": 7, "total": 23}
    assert result["summary"] == {"passed": 18, "failed": 1, "skipped": 7, "total": 26}
    # The real rxe0 of each VM has its RoCE v2 IPv4 GID at index 1 (its fabric address), the fleet agrees.
    later = _later(result)
    assert later[("vm1", "roce.gid[rxe0/1]")]["message"].startswith("rxe0/1: RoCE v2 GID 1 is 192.168.77.1 on eth1")
    assert later[("vm2", "roce.gid[rxe0/1]")]["measured"] == 1
    assert later[("fleet", "fleet.roce_gid_index")]["status"] == "passed"
    bw = _by(result, "vm1", "ib_write_bw[vm2]")
    assert (bw["status"], bw["measured"], bw["threshold"]) == ("failed", 0.009352, 0.01)
    assert _by(result, "vm1", "port.state[rxe0/1]")["measured"] == "ACTIVE/LinkUp"
    assert "from ibv_devinfo" in _by(result, "vm2", "port.active_mtu[rxe0/1]")["message"]


def test_kernel_lab_passing_report_is_reproduced_from_its_recorded_data():
    # The converge that passed (thresholds 0.001 x rate and 50 ms, host load ~28): live numbers above zero.
    import json

    report = json.loads((FIXTURES / "softroce-qemu" / "fabric_validate" / "report_load28_passed.json").read_text())
    result = evaluate(
        report["hosts"],
        {"tiers": report["tiers"], "thresholds": report["thresholds"], "expected": {"active_mtu": 4096}},
    )
    assert _same_verdicts(_as_recorded(result["checks"]), report["checks"])
    assert result["summary"] == {"passed": 19, "failed": 0, "skipped": 7, "total": 26}
    assert _by(result, "vm1", "ib_write_bw[vm2]")["measured"] == 0.021588
    assert _by(result, "vm1", "ib_write_lat[vm2]")["measured"] == 3805.52
    assert (
        _by(result, "vm2", "rdma")["message"]
        == "skipped: served ib_write_bw for vm1, ib_write_lat for vm1; judged on the client"
    )
    # The role now joins stdout and stderr with a real newline.
    assert report["hosts"]["vm1"]["rdma"][0]["output"].endswith("-\n")


def test_roce_qos_read_back_is_judged_per_setting():
    # What module roce_qos returns in check mode on a Soft-RoCE VM after the role ran (no DCB, no ECN switches).
    results = {
        "eth1": {
            "pfc": {"state": "unsupported", "wanted": [3], "current": None, "reason": "the driver of eth1 has no DCB"},
            "dscp_map": {"state": "unsupported", "wanted": {26: 3}, "current": None, "reason": "no DCB"},
            "ecn": {"state": "unsupported", "wanted": [3], "current": None, "reason": "no ECN switches"},
            "tos": {"state": "ok", "wanted": 106, "current": 106},
        }
    }
    checks = {c["check"]: c for c in roce_qos_health("vm1", {"results": results, "require_pfc": False})}
    assert checks["roce_qos.tos[eth1]"]["status"] == "passed"
    assert checks["roce_qos.pfc[eth1]"]["status"] == "skipped"
    assert checks["roce_qos.pfc[eth1]"]["message"] == "skipped: eth1 pfc not applied: the driver of eth1 has no DCB"
    # PFC required: the same read is a failure.
    required = {c["check"]: c for c in roce_qos_health("vm1", {"results": results, "require_pfc": True})}
    assert required["roce_qos.pfc[eth1]"]["status"] == "failed"
    assert required["roce_qos.ecn[eth1]"]["status"] == "skipped"
    # Something reset the ToS after the role ran (a reload of rdma_cm): failed, with what was found and wanted.
    results["eth1"]["tos"] = {"state": "changed", "wanted": 106, "current": 0}
    (tos,) = [c for c in roce_qos_health("vm1", {"results": results}) if c["check"] == "roce_qos.tos[eth1]"]
    assert tos["status"] == "failed" and tos["measured"] == 0 and tos["threshold"] == 106
    assert "eth1 tos is 0, the inventory asks 106" in tos["message"]


def test_roce_qos_without_the_role_is_skipped_only_where_roce_is_declared():
    assert roce_qos_health("gpu1", {"results": None, "declared": []}) == []
    (check,) = roce_qos_health("gpu1", {"results": None, "declared": ["ens1f0np0"]})
    assert check["status"] == "skipped" and "role roce_qos did not run" in check["message"]


def test_roce_qos_dscp_map_reads_as_dcb_writes_it():
    results = {"eth1": {k: {"state": "ok", "wanted": [3], "current": [3]} for k in ("pfc", "ecn", "tos")}}
    results["eth1"]["dscp_map"] = {"state": "changed", "wanted": {"26": 3, "48": 6}, "current": {"8": 1}}
    (check,) = [c for c in roce_qos_health("h", {"results": results}) if c["check"] == "roce_qos.dscp_map[eth1]"]
    assert (check["measured"], check["threshold"]) == ("8:1", "26:3 48:6")


def _versions(packages, kernel="6.1.0-27-amd64", fw="28.39.1002", driver=None):
    data = {
        "versions": {"packages": packages, "kernel": kernel},
        "ib": {"devices": [{"name": "mlx5_0", "board_id": "MT_0000000838", "fw_ver": fw}]},
    }
    if driver:
        data["gpu"] = {"gpus": [{"driver_version": driver}]}
    return data


def test_fleet_versions_name_the_odd_node_and_the_majority():
    same = {"rdma-core": "44.0-2", "libnccl2": "2.21.5-1+cuda12.4", "perftest": None}
    hosts = {
        "gpu1": _versions(same, driver="580.159.04"),
        "gpu2": _versions(same, driver="580.159.04"),
        "gpu3": _versions(dict(same, **{"rdma-core": "33.2-1"}), fw="28.36.1010", driver="580.159.04"),
    }
    checks = {(c["host"], c["check"]): c for c in fleet_version_checks(hosts)}
    odd = checks[("gpu3", "fleet.version[rdma-core]")]
    assert odd["status"] == "failed" and (odd["measured"], odd["threshold"]) == ("33.2-1", "44.0-2")
    assert odd["message"] == (
        "rdma-core 33.2-1 on gpu3, but 2 of 3 hosts that have it run 44.0-2: install the same version on every node"
    )
    assert checks[("gpu1", "fleet.version[rdma-core]")]["status"] == "passed"
    assert checks[("gpu3", "fleet.version[hca_firmware[MT_0000000838]]")]["status"] == "failed"
    assert all(checks[(h, "fleet.version[gpu_driver]")]["status"] == "passed" for h in hosts)
    assert all(checks[(h, "fleet.version[kernel]")]["status"] == "passed" for h in hosts)
    # Installed nowhere: not compared.
    assert not any(key[1].endswith("[perftest]") for key in checks)


def test_fleet_versions_two_way_split_fails_both_and_one_host_is_skipped():
    hosts = {
        "a": _versions({"libnccl2": "2.21.5-1+cuda12.4", "perftest": "4.5+0.17-1"}),
        "b": _versions({"libnccl2": "2.23.4-1+cuda12.6", "perftest": None}),
    }
    checks = {(c["host"], c["check"]): c for c in fleet_version_checks(hosts)}
    # One of two each: no majority, both fail, the message lists what the fleet runs.
    for host in ("a", "b"):
        check = checks[(host, "fleet.version[libnccl2]")]
        assert check["status"] == "failed" and "with no majority" in check["message"], check
    assert checks[("b", "fleet.version[libnccl2]")]["message"] == (
        "libnccl2 2.23.4-1+cuda12.6 on b; the fleet runs 2.21.5-1+cuda12.4 (1), 2.23.4-1+cuda12.6 (1) with no "
        "majority: install one version on every node"
    )
    # perftest on one host only: nothing to agree on here (b's RDMA checks judge a missing perftest).
    assert not [key for key in checks if key[1] == "fleet.version[perftest]"]
    (alone,) = fleet_version_checks({"a": hosts["a"]})
    assert alone["status"] == "skipped" and alone["check"] == "fleet.versions"


def test_fleet_what_a_host_lacks_is_not_a_version_disagreement():
    bare = {"versions": {"packages": {"rdma-core": "44.0-2", "perftest": None}, "kernel": "6.1.0-27-amd64"}}
    full = {"rdma-core": "44.0-2", "perftest": "4.5+0.17-1"}
    hosts = {"gpu1": _versions(full), "gpu2": _versions(full), "bare": bare}
    checks = fleet_version_checks(hosts)
    assert [c for c in checks if c["status"] != "passed"] == []
    assert not [c for c in checks if c["host"] == "bare" and "hca_firmware" in c["check"]]


def _bw_run(peer, gbps, rc=0):
    """The captured Soft-RoCE ib_write_bw client output with its result row's bandwidth replaced by ``gbps``."""
    captured = (FIXTURES / "softroce-qemu" / "ib_write_bw_x1_client_vm1.txt").read_text()
    output = captured.replace("0.23               0.14", f"{gbps}               {gbps}")
    assert output != captured
    return {"test": "ib_write_bw", "peer": peer, "output": output, "rc": rc, "skipped": None}


def _rdma_record(runs):
    return {
        "ib": {
            "rdma_present": True,
            "devices": [{"name": "mlx5_0", "ports": [{"port": 1, "state": "ACTIVE", "rate_gbps": 400.0}]}],
        },
        "rdma": runs,
    }


RETRY_THRESHOLDS = {
    "ib_write_bw_fraction_of_reference": {"value": 1.0},
    "ib_write_bw_fraction_of_rate": {"value": 0.9, "source": "site override"},
    "ib_write_lat_max_usec": {"value": 5.0},
}


def test_a_slow_attempt_that_passes_on_retry_passes_with_every_attempt_reported():
    record = _rdma_record([_bw_run("gpu2", 120.5), _bw_run("gpu2", 371.2)])
    (check,) = rdma_checks("gpu1", record, RETRY_THRESHOLDS)
    assert (check["status"], check["measured"]) == ("passed", 371.2)
    assert [(a["attempt"], a["status"], a["measured"]) for a in check["attempts"]] == [
        (1, "failed", 120.5),
        (2, "passed", 371.2),
    ]
    assert "(attempt 2 of 2; attempt 1: failed, ib_write_bw to gpu2: 120.5 Gb/s" in check["message"]


def test_a_persistently_slow_measurement_fails_after_every_attempt():
    record = _rdma_record([_bw_run("gpu2", 120.5), _bw_run("gpu2", 118.0), _bw_run("gpu2", 121.9)])
    (check,) = rdma_checks("gpu1", record, RETRY_THRESHOLDS)
    assert check["status"] == "failed" and len(check["attempts"]) == 3
    assert {a["status"] for a in check["attempts"]} == {"failed"}


def test_retry_rounds_hold_only_what_failed_every_time_so_far():
    records = [
        _rdma_record([_bw_run("gpu2", 120.5)]),  # gpu1 -> gpu2 failed once
        _rdma_record([_bw_run("gpu3", 380.0)]),  # gpu2 -> gpu3 passed
        _rdma_record([_bw_run("gpu1", 10.0, rc=1)]),  # gpu3 -> gpu1 failed (exit status)
    ]
    hosts = ["gpu1", "gpu2", "gpu3"]
    rounds = rdma_retry_rounds(hosts, records, RETRY_THRESHOLDS, None, 2)
    # gpu1 and gpu3 share no host with... gpu1 serves gpu3 and is client of gpu2: two rounds.
    assert rounds == [
        [[{"server": "gpu2", "client": "gpu1"}], "ib_write_bw"],
        [[{"server": "gpu1", "client": "gpu3"}], "ib_write_bw"],
    ]
    # After a second attempt that passed for gpu1 and failed again for gpu3: only gpu3 goes to attempt 3.
    records[0]["rdma"].append(_bw_run("gpu2", 371.0))
    records[2]["rdma"].append(_bw_run("gpu1", 11.0, rc=1))
    assert rdma_retry_rounds(hosts, records, RETRY_THRESHOLDS, None, 3) == [
        [[{"server": "gpu1", "client": "gpu3"}], "ib_write_bw"]
    ]
    # Nothing failed: nothing to run.
    assert rdma_retry_rounds(hosts[1:2], records[1:2], RETRY_THRESHOLDS, None, 2) == []


@pytest.mark.parametrize("attempts", [0, "0", "three", True])
def test_rdma_attempts_must_be_a_whole_number_from_one(attempts):
    errors = preflight_errors(["rdma"], {}, [], ["gpu1"], rdma_attempts=attempts)
    assert any(e.startswith(f"fabric_validate_rdma_attempts={attempts!r} must be a whole number") for e in errors)
    assert preflight_errors(["rdma"], {}, [], ["gpu1"], rdma_attempts="3") == []


def test_the_node_judges_the_health_tier_and_the_controller_the_answers_asked_from_elsewhere():
    """The health tier of role fabric_validate is what the node judged (node_check.validate_checks, registered in
    the record's node_check). Where the port's subnet manager was asked from another host, the record's ``sm`` holds
    the answers and each port's sm.master is judged from them, in its place; without ``sm`` (the fleet check) the
    node's verdicts stand."""
    record = collected_record(
        {"ib": _ibsim("active"), "gpu": {"gpu_present": False}, "versions": {}, "roce_qos": {}, "interfaces": []},
        {"gpudirect": None},
    )
    on_node = health_checks("gpu1", with_sm(record, [], "gpu1"), {})
    sm = [c["check"] for c in on_node if c["check"].startswith("sm.master[")]
    assert sm and all(c["status"] == "skipped" for c in on_node if c["check"] in sm)
    drift = {"host": "gpu1", "tier": "health", "check": "drift.nccl", "status": "passed"}
    node = {"report": {"checks": [drift, *on_node]}}
    # The fleet check's record: the node's checks as they are, under the inventory's name.
    renamed = [dict(c, host="gpu-01") for c in node["report"]["checks"]]
    assert node_judged_checks("gpu-01", {"node_check": node}) == renamed
    line = "sminfo: sm lid 1 sm guid 0x2c903000a1b2c, activity count 210 priority 0 state 3 SMINFO_MASTER"
    ports = sm_query_ports(record["ib"])
    answers = [{"item": p, "rc": 0, "stdout": line, "stderr": ""} for p in ports]
    asked = with_sm(dict(record, node_check=node), answers, "sm1")
    judged = node_judged_checks("gpu1", asked)
    assert [c["check"] for c in judged] == [c["check"] for c in node["report"]["checks"]]
    by_name = {c["check"]: c for c in judged}
    assert all(by_name[name]["status"] == "passed" and "(asked from sm1)" in by_name[name]["message"] for name in sm)


def _roce(gids):
    port = {"port": 1, "link_layer": "Ethernet", "netdev": "eth1", "gids": gids}
    return {"ib": {"rdma_present": True, "devices": [{"name": "mlx5_0", "ports": [port]}]}}


LINK_LOCAL = {"index": 0, "gid": "fe80:0000:0000:0000:5054:00ff:feab:0001", "type": "RoCE v2", "ndev": "eth1"}
V1 = {"index": 0, "gid": "fe80:0000:0000:0000:5054:00ff:feab:0001", "type": "IB/RoCE v1", "ndev": "eth1"}


def _ipv4(index, last):
    return {"index": index, "gid": f"0000:0000:0000:0000:0000:ffff:0a14:{last:04x}", "type": "RoCE v2", "ndev": "eth1"}


def test_a_roce_port_needs_a_routable_v2_gid_and_the_fleet_one_index():
    (only_local,) = roce_gid_checks("gpu1", _roce([LINK_LOCAL]))
    assert only_local["status"] == "failed"
    assert "no IPv4 RoCE v2 GID on eth1 (RoCE v2 GIDs: 0 (link-local))" in only_local["message"]
    (v1,) = roce_gid_checks("gpu1", _roce([V1]))
    assert v1["status"] == "failed" and "no RoCE v2 GID on eth1 (types: IB/RoCE v1)" in v1["message"]
    (found,) = roce_gid_checks("gpu1", _roce([LINK_LOCAL, _ipv4(3, 1)]))
    assert found["status"] == "passed" and found["measured"] == 3 and "GID 3 is 10.20.0.1 on eth1" in found["message"]
    assert roce_gid_checks("gpu1", {"ib": _ibsim("active")}) == []  # InfiniBand: no GID to choose
    # The site's fabric is IPv6 (nccl_ib_addr_family: ipv6, NCCL_IB_ADDR_FAMILY=AF_INET6): its global GID, not IPv4's.
    global6 = {"index": 2, "gid": "fd00:0000:0000:0020:0000:0000:0000:0001", "type": "RoCE v2", "ndev": "eth1"}
    (six,) = roce_gid_checks("gpu1", dict(_roce([LINK_LOCAL, _ipv4(1, 1), global6]), gid_family="ipv6"))
    assert six["status"] == "passed" and six["measured"] == 2 and six["threshold"] == "RoCE v2 IPv6"
    assert "GID 2 is fd00:0000:0000:0020:0000:0000:0000:0001 on eth1, the IPv6 GID NCCL selects" in six["message"]
    (no_six,) = roce_gid_checks("gpu1", dict(_roce([LINK_LOCAL, _ipv4(1, 1)]), gid_family="ipv6"))
    assert no_six["status"] == "failed" and "(RoCE v2 GIDs: 0 (link-local), 1 (ipv4))" in no_six["message"]
    checks = [
        *roce_gid_checks("gpu1", _roce([LINK_LOCAL, _ipv4(1, 1)])),
        *roce_gid_checks("gpu2", _roce([LINK_LOCAL, _ipv4(1, 2)])),
        *roce_gid_checks("gpu3", _roce([LINK_LOCAL, _ipv4(3, 3)])),
    ]
    (fleet,) = fleet_gid_checks(checks)
    assert fleet["status"] == "failed" and fleet["host"] == "fleet"
    assert fleet["message"].startswith("NCCL's RoCE v2 GID is at index 1 on 2 of 3 ports, elsewhere on: gpu3 ")
    assert fleet_gid_checks(checks[:2])[0]["status"] == "passed" and fleet_gid_checks(checks[:1]) == []
