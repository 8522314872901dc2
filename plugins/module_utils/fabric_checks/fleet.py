# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Across the fleet: outliers, software versions that disagree, every tier evaluated into the report's checks and
summary, the failure lines and the plot's data.
"""

import re
import statistics

from ..nccl_tests import parse_nccl_tests, primary
from ..perftest import summarize_perftest_run
from .health import health_checks, node_judged_checks
from .nccl import nccl_checks, nccl_runs
from .rdma import rdma_checks
from .record import _check


def outlier_checks(checks, thresholds, min_hosts=3):
    """Flag hosts below fraction x fleet median, per metric: RDMA bandwidth (a host's slowest pair) and NCCL busbw per
    benchmark (nccl-tests and the PyTorch benchmark are compared each with its own kind, never with each other)."""
    fraction = float(thresholds["outlier_fraction_of_median"]["value"])
    metrics = {"ib_write_bw": {}, "nccl.busbw": {}}
    for check in checks:
        if check["status"] == "skipped" or not isinstance(check["measured"], (int, float)):
            continue
        if check["tier"] == "rdma" and check["check"].startswith("ib_write_bw"):
            metric = "ib_write_bw"
        elif check["tier"] == "nccl" and check["check"].startswith("nccl.all_reduce"):
            metric = "nccl.busbw" + check["check"][len("nccl.all_reduce") :]
        else:
            continue
        metrics.setdefault(metric, {}).setdefault(check["host"], []).append(float(check["measured"]))
    result = []
    for metric, values in metrics.items():
        per_host = {host: min(v) for host, v in values.items()}
        if len(per_host) < min_hosts:
            if metric in ("ib_write_bw", "nccl.busbw"):  # the per-benchmark NCCL metrics say nothing when too few
                result.append(
                    _check(
                        "fleet",
                        "outliers",
                        f"outlier.{metric}",
                        "skipped",
                        f"skipped: {len(per_host)} host(s) measured, need {min_hosts} for a fleet median",
                    )
                )
            continue
        median = statistics.median(per_host.values())
        limit = round(fraction * median, 3)
        for host, value in sorted(per_host.items()):
            result.append(
                _check(
                    host,
                    "outliers",
                    f"outlier.{metric}",
                    "passed" if value >= limit else "failed",
                    f"{metric} {value}, fleet median {median}, threshold {limit} ({fraction} x median)",
                    value,
                    limit,
                )
            )
    return result


def software_versions(data):
    """{component: version} of one host's collected data: the packages read (``versions.packages``), the kernel, the
    GPU driver and each HCA board's firmware (``hca_firmware[<board_id>]``). An absent package is None."""
    versions = dict((data.get("versions") or {}).get("packages") or {})
    kernel = (data.get("versions") or {}).get("kernel")
    if kernel:
        versions["kernel"] = kernel
    drivers = sorted(
        {g.get("driver_version") for g in (data.get("gpu") or {}).get("gpus") or [] if g.get("driver_version")}
    )
    if drivers:
        versions["gpu_driver"] = ",".join(drivers)
    for device in (data.get("ib") or {}).get("devices") or []:
        if device.get("fw_ver"):
            board = device.get("board_id") or device["name"]
            versions[f"hca_firmware[{board}]"] = device["fw_ver"]
    return versions


def fleet_version_checks(hosts):
    """Every node of the fleet runs the same software: per component (packages such as libnccl2 and rdma-core, the
    kernel, the GPU driver, each HCA board's firmware), each host's version against the most common one among the
    hosts that have it. A host that differs fails, naming that version and how many hosts run it; a tie fails every
    host; a component fewer than two hosts have, or one host alone, has nothing to agree with. NCCL users mix
    versions across nodes without noticing (https://github.com/NVIDIA/nccl/issues/1267); a mismatch is a failure,
    not a warning."""
    per_host = {host: software_versions(data or {}) for host, data in hosts.items()}
    if len(per_host) < 2:
        return [
            _check(host, "health", "fleet.versions", "skipped", "skipped: one host, no fleet to compare with")
            for host in per_host
        ]
    checks = []
    components = sorted({name for versions in per_host.values() for name in versions})
    for component in components:
        # Among the hosts that have it: whether a package, a GPU or an HCA is there at all is for the roles that
        # install them and for the RDMA and NCCL tiers to judge (a node without perftest fails its RDMA checks).
        seen = {host: versions[component] for host, versions in per_host.items() if versions.get(component)}
        if len(seen) < 2:
            continue  # nothing to agree with
        values = list(seen.values())
        modes = statistics.multimode(values)
        majority = modes[0] if len(modes) == 1 else None
        share = values.count(majority) if majority else 0
        for host, version in sorted(seen.items()):
            name = f"fleet.version[{component}]"
            if majority is None:
                status = "failed"
                message = (
                    f"{component} {version} on {host}; the fleet runs "
                    + ", ".join(f"{v} ({values.count(v)})" for v in sorted(set(values)))
                    + " with no majority: install one version on every node"
                )
            elif version == majority:
                status = "passed"
                message = f"{component} {version}, as {share} of {len(seen)} hosts that have it"
            else:
                status = "failed"
                message = (
                    f"{component} {version} on {host}, but {share} of {len(seen)} hosts that have it run "
                    f"{majority}: install the same version on every node"
                )
            checks.append(_check(host, "health", name, status, message, version, majority))
    return checks


def fleet_gid_checks(checks):
    """``fleet.roce_gid_index``: every RoCE port of the fleet finds NCCL's RoCE v2 GID at the same index (the
    measurement of its passed roce.gid check). NCCL older than 2.21 uses one NCCL_IB_GID_INDEX for every node, and
    a node whose GID sits elsewhere talks on the wrong one. Fewer than two such ports: nothing to agree on."""
    found = {(c["host"], c["check"]): c["measured"] for c in checks if c["check"].startswith("roce.gid[")}
    indexes = {key: index for key, index in found.items() if index is not None}
    if len(indexes) < 2:
        return []
    counts = {}
    for index in indexes.values():
        counts[index] = counts.get(index, 0) + 1
    common = max(counts.values())
    majority = sorted(index for index, count in counts.items() if count == common)
    if len(counts) == 1:
        message = f"every RoCE port ({len(indexes)}) has NCCL's RoCE v2 GID at index {majority[0]}"
        return [_check("fleet", "health", "fleet.roce_gid_index", "passed", message, majority[0], majority[0])]
    others = sorted(
        f"{host} {check[9:-1]} at {index}" for (host, check), index in indexes.items() if index != majority[0]
    )
    message = (
        f"NCCL's RoCE v2 GID is at index {majority[0]} on {common} of {len(indexes)} ports, elsewhere on: "
        f"{', '.join(others)}; a fixed NCCL_IB_GID_INDEX (NCCL before 2.21) is wrong for those: give every node the "
        "same addresses in the same order, or let NCCL 2.21+ choose"
    )
    return [_check("fleet", "health", "fleet.roce_gid_index", "failed", message, len(counts), 1, "indexes")]


def fleet_sm_checks(checks):
    """``fleet.sm_master``: of the subnet managers whose own state was read (their ``sm.state`` checks), exactly one
    is MASTER and the others STANDBY (OpenSM's handover: the highest priority, then the lowest GUID, is master).
    None read: nothing to judge."""
    states = {c["host"]: c["measured"] for c in checks if c["check"] == "sm.state" and c["measured"]}
    if not states:
        return []
    masters = sorted(host for host, state in states.items() if state == "SMINFO_MASTER")
    others = sorted(
        f"{host} {state}" for host, state in states.items() if state not in ("SMINFO_MASTER", "SMINFO_STANDBY")
    )
    listed = ", ".join(f"{host} {state}" for host, state in sorted(states.items()))
    if len(masters) == 1 and not others:
        message = f"one master subnet manager, {masters[0]}; {len(states) - 1} standby ({listed})"
        return [_check("fleet", "health", "fleet.sm_master", "passed", message, 1, 1, "masters")]
    if not masters:
        problem = "no subnet manager is MASTER: the fabric is not being managed"
    elif len(masters) > 1:
        problem = (
            f"{len(masters)} subnet managers are MASTER ({', '.join(masters)}): each manages a fabric of its own "
            "(split fabric), or they do not see each other"
        )
    else:
        problem = f"{', '.join(others)} took no part in the handover"
    message = f"{problem} ({listed}); read each one's journal, and opensm_priority in the inventory"
    return [_check("fleet", "health", "fleet.sm_master", "failed", message, len(masters), 1, "masters")]


def evaluate(hosts, config):
    """All checks for the selected tiers. ``hosts``: {host: collected data}; ``config``: tiers, thresholds,
    references, expected, rdma_device, unreached (hosts of the play that were not validated: unreachable, or failed
    before this role ran; each gets a failed ``host.reached`` check, so a lost node never reads as a clean fleet)."""
    tiers = config.get("tiers") or []
    thresholds = config["thresholds"]
    checks = []
    for host in sorted(config.get("unreached") or []):
        checks.append(
            _check(
                host,
                "health",
                "host.reached",
                "failed",
                f"{host} was not validated: unreachable, or failed earlier in this run (see the play recap)",
            )
        )
    for host in sorted(hosts):
        data = hosts[host] or {}
        if "health" in tiers and data.get("node_check") is not None:  # judged on the node (node check, collection)
            checks.extend(node_judged_checks(host, data))
        elif "health" in tiers:
            checks.extend(health_checks(host, data, config.get("expected") or {}))
        if "rdma" in tiers:
            checks.extend(
                rdma_checks(host, data, thresholds, config.get("rdma_device"), config.get("rdma_bw_references"))
            )
        if "nccl" in tiers:
            checks.extend(nccl_checks(host, data, thresholds, config.get("references")))
    if "health" in tiers:
        checks.extend(fleet_version_checks(hosts))
        checks.extend(fleet_gid_checks(checks))
        checks.extend(fleet_sm_checks(checks))
    if "outliers" in tiers:
        checks.extend(outlier_checks(checks, thresholds))
    summary = {status: len([c for c in checks if c["status"] == status]) for status in ("passed", "failed", "skipped")}
    summary["total"] = len(checks)
    return {"checks": checks, "summary": summary}


def failure_lines(checks):
    """One line per failed check: host, check, measured value and threshold."""
    lines = []
    for c in checks:
        if c["status"] != "failed":
            continue
        unit = f" {c['unit']}" if c.get("unit") else ""
        lines.append(
            f"{c['host']}: {c['tier']}/{c['check']} measured {c['measured']}{unit}, threshold {c['threshold']}{unit}"
            f" - {c['message']}"
        )
    return lines


def nccl_side_by_side(hosts):
    """The all-reduce busbw of every benchmark a host ran, per message size, in one table:
    {tools: [tool, ...], rows: [{host, size, busbw: {tool: GB/s}}]}, for reading nccl-tests and the PyTorch benchmark
    next to each other (the same columns, the in-place result where one has only that)."""
    tools = []
    rows = {}
    for host, data in sorted((hosts or {}).items()):
        for run in nccl_runs(data or {}):
            if not run.get("output"):
                continue
            if run["tool"] not in tools:
                tools.append(run["tool"])
            for r in parse_nccl_tests(run["output"])["results"]:
                row = rows.setdefault((host, r["size"]), {"host": host, "size": r["size"], "busbw": {}})
                row["busbw"][run["tool"]] = primary(r)["busbw_gbps"]
    return {"tools": tools, "rows": [rows[key] for key in sorted(rows)]}


def plot_series(hosts, checks=None):
    """Data for the report plot: NCCL busbw (and algbw) by message size per host, RDMA bandwidth per host; a run of
    one rank is left out (``left_out``, with why).

    With ``checks`` (the judged checks) also ``thresholds``: ``nccl`` {host: GB/s} and ``rdma`` {host: {peer: Gb/s}},
    the limits the verdicts used, for drawing next to the measurements.
    """
    nccl = {}
    rdma = {}
    left_out = []  # runs not drawn, each with why
    labels = {}  # (host, tool) -> series name: the host, or "host (tool)" where several benchmarks ran on it
    for host, data in sorted((hosts or {}).items()):
        runs = [r for r in nccl_runs(data or {}) if r.get("output")]
        for run in runs:
            parsed = parse_nccl_tests(run["output"])
            label = host if len(runs) == 1 else f"{host} ({run['tool']})"
            if parsed["nranks"] is not None and parsed["nranks"] < 2:
                # One rank reduces with nobody: the benchmark times a copy or nothing, and its algbw (1.07 million
                # GB/s at 16 GiB on one H200) would flatten every other line of the plot.
                left_out.append(f"{label}: {parsed['nranks']} rank, no data moves between GPUs: not drawn")
                continue
            labels[(host, run["tool"])] = label
            nccl[label] = [
                {
                    "size": r["size"],
                    "busbw_gbps": primary(r)["busbw_gbps"],
                    "algbw_gbps": primary(r)["algbw_gbps"],
                }
                for r in parsed["results"]
            ]
        for run in (data or {}).get("rdma") or []:
            summary = summarize_perftest_run(run)
            if summary.get("ok") and summary.get("kind") == "bw":
                rdma.setdefault(host, []).append({"peer": run.get("peer"), "bw_avg_gbps": summary["bw_avg_gbps"]})
    series = {"nccl": nccl, "rdma": rdma, "left_out": left_out}
    if checks is not None:
        limits = {"nccl": {}, "rdma": {}}
        for check in checks:
            if check.get("threshold") is None or check["status"] == "skipped":
                continue
            tool = re.match(r"^nccl\.all_reduce\[(.*)\]$", check["check"])
            if tool and (check["host"], tool.group(1)) in labels:
                limits["nccl"][labels[(check["host"], tool.group(1))]] = check["threshold"]
            match = re.match(r"^ib_write_bw\[(.*)\]$", check["check"])
            if match and check["host"] in rdma:
                limits["rdma"].setdefault(check["host"], {})[match.group(1)] = check["threshold"]
        series["thresholds"] = limits
    return series
