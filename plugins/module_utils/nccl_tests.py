# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Parse nccl-tests (all_reduce_perf, all_gather_perf, ...) output: the text table and the -J JSON file.

Pure functions, no Ansible imports: unit-tested on output captured on a real H200 in tests/fixtures.
"""

import json
import re

_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_VALUE = r"(?:" + _NUM + r"|N/A)"
# size count type redop root | time algbw busbw #wrong | time algbw busbw #wrong
_ROW_RE = re.compile(
    r"^\s*(?P<size>\d+)\s+(?P<count>\d+)\s+(?P<type>\S+)\s+(?P<redop>\S+)\s+(?P<root>-?\d+)"
    r"\s+(?P<op_time>" + _VALUE + r")\s+(?P<op_algbw>" + _VALUE + r")\s+(?P<op_busbw>" + _VALUE + r")"
    r"\s+(?P<op_wrong>" + _VALUE + r")"
    r"\s+(?P<ip_time>" + _VALUE + r")\s+(?P<ip_algbw>" + _VALUE + r")\s+(?P<ip_busbw>" + _VALUE + r")"
    r"\s+(?P<ip_wrong>" + _VALUE + r")\s*$"
)
_SINGLE_ROW_RE = re.compile(
    r"^\s*(?P<size>\d+)\s+(?P<count>\d+)\s+(?P<type>\S+)\s+(?P<redop>\S+)\s+(?P<root>-?\d+)"
    r"\s+(?P<time>" + _VALUE + r")\s+(?P<algbw>" + _VALUE + r")\s+(?P<busbw>" + _VALUE + r")"
    r"\s+(?P<wrong>" + _VALUE + r")\s*$"
)
_TORCH_RE = re.compile(r"^#\s*torch (?P<torch>\S+) nccl-library=(?P<l>\d+)")
_SHORT_RANK_RE = re.compile(r"^#\s+Rank\s+(?P<rank>\d+)\s+device\s+(?P<device>\d+)\s+(?P<name>\S.*?)\s*$")
_VERSION_RE = re.compile(
    r"^#\s*nccl-tests version (?P<tests>\S+)(?: nccl-headers=(?P<h>\d+))?(?: nccl-library=(?P<l>\d+))?"
)
_START_RE = re.compile(r"^#\s*Collective test starting:\s*(?P<name>\S+)")
_RANK_RE = re.compile(
    r"^#\s+Rank\s+(?P<rank>\d+)\s+Group\s+(?P<group>\d+)\s+Pid\s+(?P<pid>\d+)\s+on\s+(?P<host>\S+)\s+device\s+"
    r"(?P<device>\d+)\s+\[(?P<bus>[^\]]+)\]\s+(?P<name>.+?)\s*$"
)
_AVG_RE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(?P<v>" + _NUM + r")")
_OOB_RE = re.compile(r"^#\s*Out of bounds values\s*:\s*(?P<n>\d+)\s*(?P<ok>\S+)?")
_NCCL_WARN_RE = re.compile(r"NCCL (WARN|ERROR)|Test NCCL failure|Test CUDA failure|Test failure", re.IGNORECASE)


def _value(text):
    if text == "N/A":
        return None
    return float(text)


def _row(g, out_of_place, in_place):
    """One size's row: its columns (the row pattern's groups) and the two timed sides."""
    return {
        "size": int(g["size"]),
        "count": int(g["count"]),
        "type": g["type"],
        "redop": g["redop"],
        "root": int(g["root"]),
        "out_of_place": out_of_place,
        "in_place": in_place,
    }


def _side(time_us, algbw, busbw, wrong):
    wrong_value = _value(wrong)
    return {
        "time_us": _value(time_us),
        "algbw_gbps": _value(algbw),
        "busbw_gbps": _value(busbw),
        "wrong": None if wrong_value is None else int(wrong_value),
    }


def primary(row):
    """The out-of-place numbers (what nccl-tests' PERFORMANCE.md quotes), or in-place where only that was timed."""
    return row["out_of_place"] or row["in_place"]


def _sides(row):
    return [row[side] for side in ("out_of_place", "in_place") if row[side]]


def _finish(result):
    rows = result["results"]
    wrong = [r for r in rows if any((side["wrong"] or 0) > 0 for side in _sides(r))]
    result["wrong_total"] = sum((side["wrong"] or 0) for r in rows for side in _sides(r))
    result["nranks"] = len(result["devices"]) or result.get("nranks") or None
    if rows:
        largest = max(rows, key=lambda r: r["size"])
        result["largest"] = {
            "size": largest["size"],
            "busbw_gbps": primary(largest)["busbw_gbps"],
            "algbw_gbps": primary(largest)["algbw_gbps"],
        }
        result["peak_busbw_gbps"] = max((primary(r)["busbw_gbps"] or 0.0) for r in rows)
    else:
        result["largest"] = None
        result["peak_busbw_gbps"] = None
        result["errors"].append("no result rows in nccl-tests output")
    if wrong:
        result["errors"].append(f"{len(wrong)} message size(s) reported #wrong > 0")
    if result.get("out_of_bounds") not in (None, 0):
        result["errors"].append("out of bounds values: {}".format(result["out_of_bounds"]))
    result["ok"] = bool(rows) and not result["errors"]
    return result


def parse_nccl_tests_text(text):
    """Parse the text table; NCCL INFO lines and other noise interleaved with it are ignored."""
    result = {
        "format": "text",
        "collective": None,
        "nccl_tests_version": None,
        "nccl_library_version": None,
        "devices": [],
        "results": [],
        "avg_busbw_gbps": None,
        "out_of_bounds": None,
        "errors": [],
    }
    for raw in (text or "").splitlines():
        line = raw.rstrip()
        match = _ROW_RE.match(line)
        if match:
            g = match.groupdict()
            out_of_place = _side(g["op_time"], g["op_algbw"], g["op_busbw"], g["op_wrong"])
            result["results"].append(
                _row(g, out_of_place, _side(g["ip_time"], g["ip_algbw"], g["ip_busbw"], g["ip_wrong"]))
            )
            continue
        match = _SINGLE_ROW_RE.match(line)
        if match:
            g = match.groupdict()
            # One timed column: the in-place one (torch.distributed.all_reduce works in place).
            result["results"].append(_row(g, None, _side(g["time"], g["algbw"], g["busbw"], g["wrong"])))
            continue
        for regex, handler in (
            (_TORCH_RE, _on_torch),
            (_SHORT_RANK_RE, _on_short_rank),
            (_VERSION_RE, _on_version),
            (_START_RE, _on_start),
            (_RANK_RE, _on_rank),
            (_AVG_RE, _on_avg),
            (_OOB_RE, _on_oob),
        ):
            found = regex.match(line)
            if found:
                handler(result, found)
                break
        else:
            if _NCCL_WARN_RE.search(line):
                result["errors"].append(line.strip())
    return _finish(result)


def _on_version(result, m):
    result["nccl_tests_version"] = m.group("tests")
    if m.group("l"):
        result["nccl_library_version"] = int(m.group("l"))


def _on_torch(result, m):
    result["collective"] = result["collective"] or "all_reduce (torch.distributed)"
    result["nccl_library_version"] = int(m.group("l"))


def _on_short_rank(result, m):
    result["devices"].append(
        {
            "rank": int(m.group("rank")),
            "host": None,
            "device": int(m.group("device")),
            "bus_id": None,
            "name": m.group("name"),
        }
    )


def _on_start(result, m):
    result["collective"] = m.group("name")


def _on_rank(result, m):
    result["devices"].append(
        {
            "rank": int(m.group("rank")),
            "host": m.group("host"),
            "device": int(m.group("device")),
            "bus_id": m.group("bus"),
            "name": m.group("name"),
        }
    )


def _on_avg(result, m):
    result["avg_busbw_gbps"] = float(m.group("v"))


def _on_oob(result, m):
    result["out_of_bounds"] = int(m.group("n"))


def parse_nccl_tests_json(data):
    """Parse the file written by nccl-tests -J (format version 3). ``data`` is the text or the loaded dict."""
    if not isinstance(data, dict):
        data = json.loads(data)
    config = data.get("config", {})
    result = {
        "format": "json",
        "collective": None,
        "nccl_tests_version": None,
        "nccl_library_version": data.get("nccl_version"),
        "devices": [
            {
                "rank": d.get("rank"),
                "host": d.get("hostname"),
                "device": d.get("device"),
                "bus_id": d.get("device_hex"),
                "name": d.get("device_info"),
            }
            for d in config.get("devices", [])
        ],
        "results": [],
        "avg_busbw_gbps": (data.get("average_bus_bandwidth") or {}).get("bandwidth"),
        "out_of_bounds": (data.get("out_of_bounds") or {}).get("count"),
        "errors": [e for e in data.get("errors", []) if e],
    }
    args = data.get("args") or []
    if args:
        result["collective"] = args[0].rsplit("/", 1)[-1]
    for row in data.get("results", []):
        sides = {}
        for side in ("out_of_place", "in_place"):
            values = row.get(side) or {}
            nwrong = values.get("nwrong")
            sides[side] = {
                "time_us": values.get("time"),
                "algbw_gbps": values.get("alg_bw"),
                "busbw_gbps": values.get("bus_bw"),
                "wrong": None if nwrong is None else int(nwrong),
            }
        result["results"].append(
            {
                "size": int(row["size"]),
                "count": int(row["count"]),
                "type": row.get("type"),
                "redop": row.get("redop"),
                "root": int(str(row.get("root", "-1")).strip()),
                "out_of_place": sides["out_of_place"],
                "in_place": sides["in_place"],
            }
        )
    return _finish(result)


def parse_nccl_tests(text):
    """Parse either format: JSON when the text is a JSON object, the text table otherwise."""
    stripped = (text or "").lstrip()
    if stripped.startswith("{"):
        return parse_nccl_tests_json(stripped)
    return parse_nccl_tests_text(text)
