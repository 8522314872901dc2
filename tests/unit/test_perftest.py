import pytest
from ansible_collections.gpucluster.fabric.plugins.module_utils.perftest import parse_perftest, summarize_perftest

BW = [
    ("softroce-qemu/ib_write_bw_x1_client_vm1.txt", 0.23, 0.14, "OFF"),
    ("softroce-qemu/ib_write_bw_x1_server_vm2.txt", 0.23, 0.14, "OFF"),
    ("softroce-qemu/ib_write_bw_x1_client_vm1_512M.txt", 0.19, 0.16, "OFF"),
    ("softroce-qemu/ib_write_bw_R_client_vm1.txt", 0.28, 0.19, "ON"),
    ("softroce-qemu/ib_write_bw_R_server_vm2.txt", 0.28, 0.19, "ON"),
]


@pytest.mark.parametrize(("path", "peak", "avg", "rdma_cm"), BW)
def test_ib_write_bw(fixture_text, path, peak, avg, rdma_cm):
    parsed = parse_perftest(fixture_text(path))
    assert parsed["ok"] is True
    assert parsed["kind"] == "bw"
    assert parsed["test"] == "RDMA_Write BW"
    assert parsed["errors"] == []
    assert parsed["results"] == [
        {
            "bytes": 65536,
            "iterations": 1000,
            "bw_peak_gbps": peak,
            "bw_avg_gbps": avg,
            "msg_rate_mpps": parsed["results"][0]["msg_rate_mpps"],
        }
    ]
    assert parsed["settings"]["Device"] == "rxe0"
    assert parsed["settings"]["Link type"] == "Ethernet"
    assert parsed["settings"]["Mtu"] == "4096[B]"
    assert parsed["settings"]["GID index"] == "1"
    assert parsed["settings"]["rdma_cm QPs"] == rdma_cm
    assert summarize_perftest(parsed)["bw_avg_gbps"] == avg


def test_msg_rate_is_kept_exactly(fixture_text):
    parsed = parse_perftest(fixture_text("softroce-qemu/ib_write_bw_x1_client_vm1.txt"))
    assert parsed["results"][0]["msg_rate_mpps"] == 0.000258


@pytest.mark.parametrize(
    ("path", "typical", "avg", "p99"),
    [
        ("softroce-qemu/ib_write_lat_x1_client_vm1.txt", 238.80, 866.61, 4163.54),
        ("softroce-qemu/ib_write_lat_x1_server_vm2.txt", 243.70, 887.45, 4552.64),
        ("softroce-qemu/ib_write_lat_R_client_vm1.txt", 177.18, 315.21, 2141.96),
        ("softroce-qemu/ib_write_lat_R_server_vm2.txt", 177.24, 316.81, 2140.76),
    ],
)
def test_ib_write_lat(fixture_text, path, typical, avg, p99):
    parsed = parse_perftest(fixture_text(path))
    assert parsed["ok"] is True
    assert parsed["kind"] == "lat"
    row = parsed["results"][0]
    assert row["bytes"] == 2
    assert row["iterations"] == 1000
    assert row["t_typical_usec"] == typical
    assert row["t_avg_usec"] == avg
    assert row["p99_usec"] == p99
    summary = summarize_perftest(parsed)
    assert summary["t_typical_usec"] == typical


def test_rdma_cm_race_is_a_failure_not_zero_bandwidth(fixture_text):
    parsed = parse_perftest(fixture_text("softroce-qemu/FAILED_ib_write_bw_R_client_vm1_race.txt"))
    assert parsed["ok"] is False
    assert parsed["results"] == []
    assert "Event: RDMA_CM_EVENT_REJECTED; error: 8." in parsed["errors"]
    summary = summarize_perftest(parsed)
    assert summary["ok"] is False
    assert "bw_avg_gbps" not in summary


def test_empty_output_is_a_failure():
    parsed = parse_perftest("")
    assert parsed["ok"] is False
    assert parsed["errors"] == ["no result rows in perftest output"]


def test_error_after_results_is_a_failure(fixture_text):
    text = fixture_text("softroce-qemu/ib_write_bw_x1_client_vm1.txt") + "\n Failed to complete run\n"
    assert parse_perftest(text)["ok"] is False


def test_mb_per_sec_output_is_not_compared_with_gbits(fixture_text):
    text = fixture_text("softroce-qemu/ib_write_bw_x1_client_vm1.txt").replace("[Gb/sec]", "[MB/sec]")
    parsed = parse_perftest(text)
    assert parsed["ok"] is True
    assert parsed["bw_unit"] == "MB/sec"
    summary = summarize_perftest(parsed)
    assert summary["ok"] is False
    assert "--report_gbits" in summary["errors"][0]


# Captured by fabric_validate itself in the kernel lab (molecule/kernel_softroce converge, RDMA-CM -R over eth1,
# host load average ~21): both ends of the role's ib_write_bw and ib_write_lat runs.
ROLE_RUN = "softroce-qemu/fabric_validate/"


@pytest.mark.parametrize("side", ["client_vm1", "server_vm2"])
def test_role_captured_ib_write_bw(fixture_text, side):
    parsed = parse_perftest(fixture_text(f"{ROLE_RUN}ib_write_bw_{side}.txt"))
    assert parsed["ok"] is True, parsed["errors"]
    assert (parsed["kind"], parsed["bw_unit"]) == ("bw", "Gb/sec")
    assert parsed["settings"]["rdma_cm QPs"] == "ON"
    assert parsed["settings"]["Data ex. method"] == "rdma_cm"
    assert parsed["settings"]["GID index"] == "1"
    assert parsed["results"] == [
        {
            "bytes": 65536,
            "iterations": 1000,
            "bw_peak_gbps": 0.026303,
            "bw_avg_gbps": 0.009352,
            "msg_rate_mpps": 0.000018,
        }
    ]
    assert summarize_perftest(parsed) == {
        "ok": True,
        "kind": "bw",
        "bytes": 65536,
        "bw_avg_gbps": 0.009352,
        "bw_peak_gbps": 0.026303,
    }


@pytest.mark.parametrize(
    ("side", "typical", "p99"), [("client_vm1", 4290.91, 20597.30), ("server_vm2", 4417.04, 19605.26)]
)
def test_role_captured_ib_write_lat(fixture_text, side, typical, p99):
    parsed = parse_perftest(fixture_text(f"{ROLE_RUN}ib_write_lat_{side}.txt"))
    assert parsed["ok"] is True, parsed["errors"]
    assert parsed["kind"] == "lat"
    assert parsed["settings"]["Data ex. method"] == "rdma_cm"
    summary = summarize_perftest(parsed)
    assert (summary["bytes"], summary["t_typical_usec"], summary["p99_usec"]) == (2, typical, p99)


def test_server_banner_lines_are_not_errors(fixture_text):
    # "Waiting for client rdma_cm QP to connect" / "Please run the same command with the IB/RoCE interface IP"
    parsed = parse_perftest(fixture_text(f"{ROLE_RUN}ib_write_bw_server_vm2.txt"))
    assert parsed["errors"] == []
