"""Every threshold and busbw reference fabric_validate ships names a source a user can open."""

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEFAULTS = yaml.safe_load((ROOT / "roles/fabric_validate/defaults/main.yml").read_text())
# A source is an upstream document (a link), or says plainly that the figure is this collection's policy (explained
# in the role's README), or defers to the reference rows that carry their own links.
OWN_WORDS = (
    "policy of this collection",
    "each fabric_validate_busbw_references row",
    "each fabric_validate_rdma_bw_references row",
    "the ratio of the published rows",
)


def _rows():
    for name, row in DEFAULTS["fabric_validate_thresholds"].items():
        yield f"fabric_validate_thresholds.{name}", row
    for table in ("fabric_validate_busbw_references", "fabric_validate_rdma_bw_references"):
        for index, row in enumerate(DEFAULTS[table]):
            yield f"{table}[{index}]", row


@pytest.mark.parametrize(("where", "row"), list(_rows()), ids=lambda v: v if isinstance(v, str) else "")
def test_source_is_upstream_or_declared_policy(where, row):
    source = row["source"]
    assert "FACTS.md" not in source, where
    if "url" in row:  # an upstream file, pinned to a commit so the line number stays true
        assert row["url"].startswith("https://github.com/") and "/blob/" in row["url"], where
        assert "/blob/main/" not in row["url"] and "#L" in row["url"], f"{where}: pin the commit and the line"
    else:
        assert "https://" in source or source.startswith(OWN_WORDS), f"{where}: {source}"
    if "policy of this collection" in source:
        assert "roles/fabric_validate/README.md" in source, f"{where}: say where the policy is explained"


def test_reference_rows_name_the_message_size_of_their_source():
    for row in DEFAULTS["fabric_validate_busbw_references"]:
        size = row["size_bytes"]
        label = {8 << 30: "8G", 16 << 30: "16G"}[size]
        assert f" {label}" in " ".join(row["source"].split()), row["source"]
    for row in DEFAULTS["fabric_validate_rdma_bw_references"]:
        assert row["size_bytes"] == 1 << 20 and "1 MiB" in " ".join(row["source"].split()), row["source"]
    rows = DEFAULTS["fabric_validate_rdma_bw_references"]
    assert DEFAULTS["fabric_validate_rdma_bw_size"] >= max(r["size_bytes"] for r in rows)


def test_default_run_reaches_the_reference_sizes():
    units = {"G": 1 << 30, "M": 1 << 20, "K": 1 << 10}
    text = str(DEFAULTS["fabric_validate_nccl_max_bytes"])
    max_bytes = int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)
    assert max_bytes >= max(row["size_bytes"] for row in DEFAULTS["fabric_validate_busbw_references"])
