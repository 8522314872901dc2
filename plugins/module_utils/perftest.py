# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Parse perftest (ib_write_bw, ib_write_lat, ...) output: the text it prints (perftest 4.x and later) and the JSON
report it writes with --out_json (standard JSON from perftest 24.01.0-0.38, version 6.19, on).

Pure functions, no Ansible imports: unit-tested on captured Soft-RoCE output in tests/fixtures/softroce-qemu and on
JSON laid out as upstream's print code writes it (tests/fixtures/perftest-json).
"""

import json
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


# perftest wrote --out_json reports from v4.5-0.11 (commit 45e574b, 2021) but with bare keys and trailing commas, not
# JSON; "Make output JSON standard" (commit f9e82f7) first shipped in 24.01.0-0.38, whose --version says 6.20 (its
# branch already carried 6.19). Older versions (Debian bookworm's 4.5+0.17 says 6.06) keep the text parser.
JSON_MIN_VERSION = (6, 19)
_VERSION_RE = re.compile(r"^\s*Version:\s*(\d+)\.(\d+)", re.MULTILINE)
_JSON_BW = {
    "MsgSize": "bytes",
    "n_iterations": "iterations",
    "BW_peak": "bw_peak_gbps",
    "BW_average": "bw_avg_gbps",
    "MsgRate": "msg_rate_mpps",
}
_JSON_LAT = {
    "MsgSize": "bytes",
    "n_iterations": "iterations",
    "t_min": "t_min_usec",
    "t_max": "t_max_usec",
    "t_typical": "t_typical_usec",
    "t_avg": "t_avg_usec",
    "t_stdev": "t_stdev_usec",
    "percentile_99": "p99_usec",
    "percentile_99.9": "p999_usec",
}


def perftest_version(version_text):
    """(major, minor) from ``ib_write_bw --version`` ("Version: 6.24"), or None."""
    match = _VERSION_RE.search(version_text or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def perftest_json_capable(version_text, help_text):
    """Whether this perftest writes a standard JSON report: its --help lists --out_json_file and its --version is
    JSON_MIN_VERSION or later (the 4.5 series lists the option too but writes bare keys, which no JSON parser reads)."""
    version = perftest_version(version_text)
    return bool(version and version >= JSON_MIN_VERSION and "--out_json_file" in (help_text or ""))


def _json_failure(error, test=None, kind=None):
    return {
        "ok": False,
        "format": "json",
        "kind": kind,
        "test": test,
        "settings": {},
        "results": [],
        "bw_unit": "Gb/sec",
        "errors": [error],
    }


def parse_perftest_json(text, bw_unit="Gb/sec"):
    """Parse the report perftest writes with --out_json --out_json_file=<file>: {"test_info": {...}, "results": {...}}.

    Returns the same shape as parse_perftest (plus format 'json'), with one result row: perftest rewrites the file
    for each message size, so it holds the last one only. The report names no unit: bw_unit is what the run asked
    for (fabric_perftest_argv always passes --report_gbits). Empty, invalid or incomplete JSON is a failure, never
    zero bandwidth: perftest writes the report only after a run completed.
    """
    if not (text or "").strip():
        return _json_failure("perftest wrote no JSON report (the run ended before its report)")
    try:
        report = json.loads(text)
    except ValueError as exc:
        return _json_failure(f"perftest's JSON report is not valid JSON: {exc}")
    if not isinstance(report, dict) or not isinstance(report.get("test_info"), dict):
        return _json_failure("perftest's JSON report has no test_info")
    settings = report["test_info"]
    test = str(settings.get("test", ""))
    kind = "bw" if test.endswith("_BW_Test") else "lat" if test.endswith("_Latency_Test") else None
    results = report.get("results")
    columns = _JSON_BW if kind == "bw" else _JSON_LAT if kind == "lat" else None
    if columns is None:
        return _json_failure(f"perftest's JSON report is of an unknown test {test!r}", test, kind)
    if not isinstance(results, dict):
        return _json_failure("perftest's JSON report has no results", test, kind)
    missing = [
        key for key in columns if isinstance(results.get(key), bool) or not isinstance(results.get(key), (int, float))
    ]
    if missing:
        return _json_failure(f"perftest's JSON report lacks the numbers {', '.join(missing)}", test, kind)
    row = {name: results[key] for key, name in columns.items()}
    return {
        "ok": True,
        "format": "json",
        "kind": kind,
        "test": test,
        "settings": settings,
        "results": [row],
        "bw_unit": bw_unit,
        "errors": [],
    }


def summarize_perftest_run(run):
    """The summary (summarize_perftest) of one recorded run, from its JSON report when the run has one (key json),
    else from its text output; the summary's format says which. When the JSON report is missing or bad, the error
    lines of the text output (an RDMA-CM reject, say) follow its error."""
    if run.get("json") is None:
        parsed = parse_perftest(run.get("output", ""))
        parsed["format"] = "text"
    else:
        parsed = parse_perftest_json(run["json"])
        if not parsed["ok"]:
            parsed["errors"] += [
                e for e in parse_perftest(run.get("output", ""))["errors"] if "no result rows" not in e
            ]
    summary = summarize_perftest(parsed)
    summary["format"] = parsed["format"]
    return summary
