"""junit.xml and summary.md's cells, whatever the checks' messages hold (tool output included)."""

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _load import load  # noqa: E402

report_files = load("report_files", kind="plugin_utils")

# perftest's own words with a control character (ESC, as from a colourising tool), a NUL and XML specials.
NASTY = 'ib_write_bw failed: \x1b[31mRDMA_CM_EVENT_REJECTED\x1b[0m <&> "quoted"\x00 | regex a|b'
REPORT = {
    "run_id": "r1",
    "tiers": ["health", "rdma"],
    "summary": {"passed": 1, "failed": 1, "skipped": 1, "total": 3},
    "checks": [
        {"host": "n1", "tier": "health", "check": "port.state[mlx5_0/1]", "status": "passed", "message": "ACTIVE"},
        {
            "host": "n1",
            "tier": "rdma",
            "check": "ib_write_bw[n2]",
            "status": "failed",
            "message": NASTY,
            "measured": None,
            "threshold": 360,
            "unit": "Gb/s",
        },  # fmt: skip
        {"host": "n2", "tier": "rdma", "check": "rdma", "status": "skipped", "message": "skipped: no RDMA device"},
    ],
}


def test_junit_is_valid_xml_for_any_message():
    text = report_files.junit_xml(REPORT, comment="Ansible managed -- do not edit")
    root = ET.fromstring(text.split("\n", 1)[1])  # parses: no character XML 1.0 forbids
    assert (root.tag, root.get("tests"), root.get("failures"), root.get("skipped")) == ("testsuites", "3", "1", "1")
    suites = {s.get("name"): s for s in root}
    assert set(suites) == {"fabric_validate.health", "fabric_validate.rdma"}
    failure = suites["fabric_validate.rdma"].find("testcase[@name='ib_write_bw[n2]']/failure")
    assert failure.get("message").startswith("ib_write_bw failed: \ufffd[31mRDMA_CM_EVENT_REJECTED")
    assert '<&> "quoted"\ufffd | regex a|b' in failure.get("message")
    assert failure.text == "measured nothing, threshold 360 Gb/s"
    assert suites["fabric_validate.rdma"].find("testcase[@classname='n2']/skipped").get("message").startswith("skipped")
    assert "<!-- Ansible managed - - do not edit -->" in text


def test_markdown_cells_stay_one_cell_and_show_literally():
    cell = report_files.markdown_cell("NCCL_IB_HCA=^mlx5_0|mlx5_1\nsecond line <b>\\")
    assert cell == "NCCL_IB_HCA=^mlx5_0\\|mlx5_1<br>second line &lt;b&gt;\\\\"
    assert "|" not in cell.replace("\\|", "")
    assert report_files.markdown_cell(None) == "" and report_files.markdown_cell(4092) == "4092"
