import json

import pytest
from ansible_collections.gpucluster.fabric.plugins.filter.fabric_validate import perftest_probe_json_capable
from ansible_collections.gpucluster.fabric.plugins.module_utils.perftest import (
    parse_perftest,
    parse_perftest_json,
    perftest_json_capable,
    perftest_version,
    summarize_perftest,
    summarize_perftest_run,
)

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


# --out_json: tests/fixtures/perftest-json holds no capture (this needs an RDMA device, which none of the project's
# machines has) but JSON laid out exactly as upstream perftest 25.01.0-0.80 (Debian trixie) writes it:
# write_test_info_to_file, write_bw_report_to_file and write_report_lat_to_file in src/perftest_parameters.c and
# REPORT_FMT_JSON / REPORT_FMT_LAT_JSON in src/perftest_parameters.h (https://github.com/linux-rdma/perftest), one
# dprintf after another, with the settings and numbers of the Soft-RoCE text captures of the same tests; no field of
# its own. The .notjson file is the same bandwidth run in the bare-key layout of perftest 4.5-0.17 (Debian bookworm).
JSON_BW = "perftest-json/ib_write_bw_client-25.01.0-0.80.json"
JSON_LAT = "perftest-json/ib_write_lat_client-25.01.0-0.80.json"
TEXT_BW = "softroce-qemu/ib_write_bw_x1_client_vm1.txt"
TEXT_LAT = "softroce-qemu/ib_write_lat_x1_client_vm1.txt"


@pytest.mark.parametrize(("json_path", "text_path"), [(JSON_BW, TEXT_BW), (JSON_LAT, TEXT_LAT)])
def test_json_report_gives_the_text_parsers_shape(fixture_text, json_path, text_path):
    """The JSON parser's result and summary have the text parser's shape, numbers and names."""
    parsed = parse_perftest_json(fixture_text(json_path))
    text = parse_perftest(fixture_text(text_path))
    assert parsed["ok"] is True and parsed["errors"] == [] and parsed["format"] == "json"
    assert parsed["kind"] == text["kind"]
    assert parsed["results"] == text["results"]
    assert summarize_perftest(parsed) == summarize_perftest(text)
    assert parsed["settings"]["Device"] == "rxe0" and parsed["settings"]["Link_type"] == "Ethernet"


def test_json_report_kinds_and_test_names(fixture_text):
    assert parse_perftest_json(fixture_text(JSON_BW))["test"] == "RDMA_Write_BW_Test"
    lat = parse_perftest_json(fixture_text(JSON_LAT))
    assert (lat["test"], lat["kind"]) == ("RDMA_Write_Latency_Test", "lat")
    assert lat["results"][0]["p999_usec"] == 8899.84


def test_bad_json_reports_are_failures_never_zero_bandwidth(fixture_text):
    """An empty report (perftest never wrote it), invalid JSON, the 4.5 series' bare keys and a report without
    the numbers all fail, each saying why."""
    report = json.loads(fixture_text(JSON_BW))
    no_average = json.dumps({**report, "results": {k: v for k, v in report["results"].items() if k != "BW_average"}})
    # perftest -o bandwidth writes "bw_avg" alone (with a trailing comma, which is not JSON either).
    bw_only = json.dumps({**report, "results": {"bw_avg": 0.14}})
    cases = {
        "": "perftest wrote no JSON report",
        "  \n": "perftest wrote no JSON report",
        fixture_text("perftest-json/ib_write_bw_client-4.5-0.17.notjson"): "not valid JSON",
        fixture_text(JSON_BW)[:-20]: "not valid JSON",
        "[]": "has no test_info",
        json.dumps({**report, "results": None}): "has no results",
        no_average: "lacks the numbers BW_average",
        bw_only: "lacks the numbers MsgSize, n_iterations, BW_peak, BW_average, MsgRate",
        json.dumps({**report, "test_info": {"test": "Send_forwarding_Test"}}): "unknown test 'Send_forwarding_Test'",
    }
    for text, error in cases.items():
        parsed = parse_perftest_json(text)
        assert parsed["ok"] is False and parsed["results"] == [], text
        assert error in parsed["errors"][0], (error, parsed["errors"])
        assert summarize_perftest(parsed) == {"ok": False, "errors": parsed["errors"]}


def test_run_summary_says_which_output_it_judged(fixture_text):
    text_run = {"output": fixture_text(TEXT_BW)}
    json_run = {"output": fixture_text(TEXT_BW), "json": fixture_text(JSON_BW)}
    assert summarize_perftest_run(text_run) == {
        **summarize_perftest(parse_perftest(text_run["output"])),
        "format": "text",
    }
    assert summarize_perftest_run(json_run)["format"] == "json"
    assert summarize_perftest_run(json_run)["bw_avg_gbps"] == 0.14
    # The report is what counts once asked for: a missing one fails though the text has a result row.
    missing = summarize_perftest_run({**json_run, "json": ""})
    assert missing["ok"] is False and missing["format"] == "json"
    # ... and the text's own error lines (an RDMA-CM reject) follow its error.
    race = summarize_perftest_run(
        {"output": fixture_text("softroce-qemu/FAILED_ib_write_bw_R_client_vm1_race.txt"), "json": ""}
    )
    assert race["errors"][0].startswith("perftest wrote no JSON report")
    assert any("RDMA_CM_EVENT_REJECTED" in e for e in race["errors"][1:])


HELP = "perftest-help/ib_write_bw-help-{}.txt"
VERSION = "perftest-help/ib_write_bw-version-{}.txt"


@pytest.mark.parametrize(
    ("package", "version", "lists_option", "capable"),
    [
        # Real `ib_write_bw --help` / `--version` of Debian's packages (tests/fixtures/README.md).
        ("25.01.0+0.80-trixie", (6, 24), True, True),
        ("4.5+0.17-bookworm", (6, 6), True, False),  # lists --out_json but writes bare keys
        ("4.4+0.37-bullseye", (5, 96), False, False),
    ],
)
def test_json_capability_from_real_help_and_version(fixture_text, package, version, lists_option, capable):
    help_text, version_text = fixture_text(HELP.format(package)), fixture_text(VERSION.format(package))
    assert perftest_version(version_text) == version
    assert ("--out_json_file=<file>" in help_text) is lists_option
    assert perftest_json_capable(version_text, help_text) is capable


def test_json_capability_edges(fixture_text):
    help_text = fixture_text(HELP.format("25.01.0+0.80-trixie"))
    assert perftest_json_capable("Version: 6.19\n", help_text) is True  # the first with standard JSON (f9e82f7)
    assert perftest_json_capable("Version: 6.18\n", help_text) is False
    assert perftest_json_capable("Version: 6.24\n", "") is False
    assert perftest_json_capable("", help_text) is False
    assert perftest_version("ib_write_bw: command not found") is None


def test_json_capability_filter_reads_the_registered_probe(fixture_text):
    def probe(package):
        return {
            "results": [
                {"item": "--version", "rc": 10, "stdout": fixture_text(VERSION.format(package)).rstrip("\n")},
                {"item": "--help", "rc": 1, "stdout": fixture_text(HELP.format(package))},
            ]
        }

    assert perftest_probe_json_capable(probe("25.01.0+0.80-trixie")) is True
    assert perftest_probe_json_capable(probe("4.5+0.17-bookworm")) is False
    assert perftest_probe_json_capable({"skipped": True, "changed": False}) is False
    missing = {"item": "--version", "rc": 2, "failed": True, "msg": "[Errno 2] No such file or directory"}
    assert perftest_probe_json_capable({"results": [missing]}) is False
