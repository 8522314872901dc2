# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Parse perftest (ib_write_bw, ib_write_lat, ...) output as printed by perftest 4.x.

Pure functions, no Ansible imports: unit-tested on captured Soft-RoCE output in tests/fixtures/softroce-qemu.
"""

import re

_HEADER_RE = re.compile(r"^\s*(?P<name>\S.*?)\s+Test\s*$")
_KV_RE = re.compile(r"([A-Za-z][A-Za-z0-9_.* /-]*?)\s*:\s*(\S[^\t]*?)\s*(?=\t|$)")
_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_ROW_RE = re.compile(r"^\s*\d+\s+\d+(?:\s+" + _NUM + r")+\s*$")

# Lines that perftest prints when a run did not complete (RDMA-CM rejects, missing device, peer gone).
_ERROR_RE = re.compile(
    r"(error|failed|couldn't|could not|unable|ERRNO|not supported|no such|timed out|refused)",
    re.IGNORECASE,
)

BW_COLUMNS = ("bytes", "iterations", "bw_peak_gbps", "bw_avg_gbps", "msg_rate_mpps")
LAT_COLUMNS = (
    "bytes",
    "iterations",
    "t_min_usec",
    "t_max_usec",
    "t_typical_usec",
    "t_avg_usec",
    "t_stdev_usec",
    "p99_usec",
    "p999_usec",
)


def _number(text):
    value = float(text)
    return int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value


def parse_perftest(text):
    """Parse one perftest run.

    Returns a dict: ok (bool), kind ('bw' | 'lat' | None), test (e.g. 'RDMA_Write BW'), settings (header key/values),
    results (list of row dicts), errors (the lines that explain a failure).

    A run is ok only when it printed at least one result row and no error line.  A run that printed nothing but
    an RDMA-CM error (the client started before the server listened) is a failure, never zero bandwidth.
    """
    text = text or ""
    test = None
    kind = None
    settings = {}
    results = []
    errors = []
    columns = None
    bw_unit = "Gb/sec"
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip() or set(line.strip()) <= {"-", "*"}:
            continue
        header = _HEADER_RE.match(line)
        if header and test is None and ":" not in line:
            test = header.group("name").strip()
            kind = "bw" if test.endswith(" BW") else "lat" if test.endswith(" Latency") else None
            continue
        if line.lstrip().startswith("#bytes"):
            columns = LAT_COLUMNS if "t_min" in line else BW_COLUMNS
            if "MB/sec" in line:
                bw_unit = "MB/sec"
            continue
        if columns and _ROW_RE.match(line):
            values = [_number(v) for v in line.split()]
            results.append(dict(zip(columns, values)))
            continue
        if _ERROR_RE.search(line):
            errors.append(line.strip())
            continue
        if (
            test is not None
            and columns is None
            and ":" in line
            and not line.lstrip().startswith(("local", "remote", "GID:"))
        ):
            for key, value in _KV_RE.findall(line):
                settings[key.strip()] = value.strip()
    ok = bool(results) and not errors
    if not results and not errors:
        errors.append("no result rows in perftest output")
    return {
        "ok": ok,
        "kind": kind,
        "test": test,
        "settings": settings,
        "results": results,
        "bw_unit": bw_unit,
        "errors": errors,
    }


def summarize_perftest(parsed):
    """Reduce a parsed run to the numbers the validation gates use (largest message size row)."""
    if not parsed.get("ok") or not parsed.get("results"):
        return {"ok": False, "errors": parsed.get("errors", [])}
    if parsed["kind"] == "bw" and parsed.get("bw_unit") != "Gb/sec":
        # perftest prints MB/sec unless run with --report_gbits; the gates compare Gb/s with the port rate.
        return {"ok": False, "errors": ["bandwidth reported in MB/sec; run perftest with --report_gbits"]}
    row = max(parsed["results"], key=lambda r: r["bytes"])
    summary = {"ok": True, "kind": parsed["kind"], "bytes": row["bytes"]}
    if parsed["kind"] == "bw":
        summary["bw_avg_gbps"] = row["bw_avg_gbps"]
        summary["bw_peak_gbps"] = row["bw_peak_gbps"]
    elif parsed["kind"] == "lat":
        summary["t_typical_usec"] = row["t_typical_usec"]
        summary["t_avg_usec"] = row["t_avg_usec"]
        summary["p99_usec"] = row.get("p99_usec")
    return summary
