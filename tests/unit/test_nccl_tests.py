import json

import pytest
from ansible_collections.gpucluster.fabric.plugins.module_utils.nccl_tests import (
    parse_nccl_tests,
    parse_nccl_tests_json,
    parse_nccl_tests_text,
)

TEXT = "nccl-tests-h200-1gpu/all_reduce_perf-h200-1gpu.txt"
JSON = "nccl-tests-h200-1gpu/all_reduce_perf-h200-1gpu.json"
INFO = "nccl-tests-h200-1gpu/all_gather_perf-h200-1gpu-debuginfo.txt"


def test_all_reduce_text(fixture_text):
    parsed = parse_nccl_tests_text(fixture_text(TEXT))
    assert parsed["ok"] is True
    assert parsed["collective"] == "all_reduce_perf"
    assert parsed["nccl_tests_version"] == "2.19.6"
    assert parsed["nccl_library_version"] == 22809
    assert parsed["devices"] == [{"rank": 0, "host": "vm", "device": 0, "bus_id": "0000:00:06", "name": "NVIDIA H200"}]
    assert parsed["nranks"] == 1
    assert len(parsed["results"]) == 31  # 8 B .. 8 GiB, factor 2
    first, last = parsed["results"][0], parsed["results"][-1]
    assert (first["size"], first["count"], first["type"], first["redop"], first["root"]) == (8, 2, "float", "sum", -1)
    assert first["out_of_place"] == {"time_us": 7.68, "algbw_gbps": 0.0, "busbw_gbps": 0.0, "wrong": 0}
    assert last["size"] == 8589934592
    assert last["out_of_place"]["algbw_gbps"] == 2147.8
    assert last["in_place"]["algbw_gbps"] == 6e06  # printed as "6e+06"
    assert parsed["avg_busbw_gbps"] == 0.0
    assert parsed["out_of_bounds"] == 0
    assert parsed["wrong_total"] == 0
    assert parsed["largest"] == {"size": 8589934592, "busbw_gbps": 0.0, "algbw_gbps": 2147.8}


def test_all_reduce_json_matches_text(fixture_text):
    from_json = parse_nccl_tests_json(fixture_text(JSON))
    from_text = parse_nccl_tests_text(fixture_text(TEXT))
    assert from_json["ok"] is True
    assert from_json["collective"] == "all_reduce_perf"
    assert from_json["nccl_library_version"] == 22809
    assert from_json["devices"] == from_text["devices"]
    assert [r["size"] for r in from_json["results"]] == [r["size"] for r in from_text["results"]]
    for j, t in zip(from_json["results"], from_text["results"]):
        # The text table rounds to 2 decimals (or 5 significant digits); JSON keeps full precision.
        assert j["out_of_place"]["time_us"] == pytest.approx(t["out_of_place"]["time_us"], abs=0.006)
        assert j["out_of_place"]["busbw_gbps"] == t["out_of_place"]["busbw_gbps"]
        assert j["out_of_place"]["wrong"] == t["out_of_place"]["wrong"] == 0
    assert from_json["avg_busbw_gbps"] == 0.0


def test_auto_detects_format(fixture_text):
    assert parse_nccl_tests(fixture_text(JSON))["format"] == "json"
    assert parse_nccl_tests(fixture_text(TEXT))["format"] == "text"


def test_info_lines_interleaved(fixture_text):
    parsed = parse_nccl_tests(fixture_text(INFO))
    assert parsed["ok"] is True
    assert parsed["collective"] == "all_gather_perf"
    assert [r["size"] for r in parsed["results"]] == [1048576, 4194304, 16777216, 67108864, 268435456]
    assert parsed["results"][-1]["out_of_place"]["algbw_gbps"] == 2087.2
    assert parsed["results"][0]["redop"] == "none"


def test_wrong_results_fail(fixture_text):
    lines = fixture_text(TEXT).splitlines()
    row = next(i for i, line in enumerate(lines) if line.strip().startswith("1048576 "))
    fields = lines[row].split()
    fields[8] = "3"  # out-of-place #wrong
    lines[row] = "   ".join(fields)
    parsed = parse_nccl_tests_text("\n".join(lines))
    assert parsed["ok"] is False
    assert parsed["wrong_total"] == 3
    assert "1 message size(s) reported #wrong > 0" in parsed["errors"]


def test_wrong_in_json_fails(fixture_text):
    data = json.loads(fixture_text(JSON))
    data["results"][4]["in_place"]["nwrong"] = 7.0
    parsed = parse_nccl_tests_json(data)
    assert parsed["ok"] is False
    assert parsed["wrong_total"] == 7


def test_validation_disabled_reports_na():
    text = (
        "#  Rank  0 Group  0 Pid   1 on  h device  0 [0000:00:06] NVIDIA H200\n"
        "     1048576        262144     float     sum      -1     7.65  137.07    0.00     N/A     1.35  774.46"
        "    0.00     N/A\n"
    )
    parsed = parse_nccl_tests_text(text)
    assert parsed["ok"] is True
    assert parsed["results"][0]["out_of_place"]["wrong"] is None


def test_no_rows_is_a_failure():
    parsed = parse_nccl_tests("# nccl-tests version 2.19.6\nvm:1:1 [0] NCCL WARN NET/IB : Got async event\n")
    assert parsed["ok"] is False
    assert any("NCCL WARN" in e for e in parsed["errors"])
    assert "no result rows in nccl-tests output" in parsed["errors"]


# The layout roles/fabric_validate/files/nccl_allreduce_torch.py prints (in-place column only); written from its
# format strings, not captured: replace with a capture from a real multi-GPU run when one exists.
TORCH_TWO_GPUS = """\
# torch 2.9.1+cu130 nccl-library=22809
# nThread 1 nGpus 1 nRanks 2 minBytes 1048576 maxBytes 4194304 step: 2(factor) warmup iters: 5 iters: 20
#  Rank  Device  Name
#  Rank  0 device  0 NVIDIA H200
#  Rank  1 device  1 NVIDIA H200
#                                            in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)
     1048576        262144     float     sum      -1    20.00   52.43   52.43       0
     2097152        524288     float     sum      -1    30.00   69.91   69.91       0
     4194304       1048576     float     sum      -1    40.00  104.86  104.86       0
# Avg bus bandwidth    : 75.7333
"""


def test_torch_benchmark_format():
    parsed = parse_nccl_tests(TORCH_TWO_GPUS)
    assert parsed["ok"] is True
    assert parsed["nccl_library_version"] == 22809
    assert parsed["nranks"] == 2
    assert [d["name"] for d in parsed["devices"]] == ["NVIDIA H200", "NVIDIA H200"]
    assert parsed["results"][-1]["out_of_place"] is None
    assert parsed["results"][-1]["in_place"]["busbw_gbps"] == 104.86
    assert parsed["largest"] == {"size": 4194304, "busbw_gbps": 104.86, "algbw_gbps": 104.86}
    assert parsed["avg_busbw_gbps"] == 75.7333


def test_torch_benchmark_wrong_elements_fail():
    parsed = parse_nccl_tests(TORCH_TWO_GPUS.replace("104.86       0", "104.86      12"))
    assert parsed["ok"] is False
    assert parsed["wrong_total"] == 12


def test_torch_benchmark_real_two_h200(fixture_text):
    # Captured on the 2 x H200 accelerator host (NVLink NV18, NCCL 2.28.9, NVLS off):
    # python3 roles/fabric_validate/files/nccl_allreduce_torch.py -b 8 -e 8G
    parsed = parse_nccl_tests(fixture_text("nccl-torch-h200/nccl_allreduce_torch-h200-2gpu.txt"))
    assert parsed["ok"] is True
    assert parsed["nccl_library_version"] == 22809
    assert parsed["nranks"] == 2
    assert len(parsed["results"]) == 31  # 8 B .. 8 GiB by factor 2
    assert parsed["wrong_total"] == 0
    assert parsed["largest"] == {"size": 8589934592, "busbw_gbps": 347.78, "algbw_gbps": 347.78}
    assert parsed["avg_busbw_gbps"] == 111.809


def test_torch_benchmark_real_one_h200_has_zero_busbw(fixture_text):
    parsed = parse_nccl_tests(fixture_text("nccl-torch-h200/nccl_allreduce_torch-h200-1gpu.txt"))
    assert parsed["ok"] is True
    assert parsed["nranks"] == 1
    assert {row["in_place"]["busbw_gbps"] for row in parsed["results"]} == {0.0}
