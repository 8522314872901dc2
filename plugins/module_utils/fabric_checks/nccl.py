# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""The NCCL tier: the benchmarks' runs, their bus bandwidth against the published reference rows, and GPUDirect's
data path read from NCCL's INFO lines.
"""

import re
from collections.abc import Mapping

from ..nccl_debug import nic_data_paths, nvls_used, parse_nccl_info
from ..nccl_tests import parse_nccl_tests, primary
from .record import _check


def busbw_reference(references, gpu_name, gpus, nvls=None):
    """The first reference row whose 'gpu' pattern matches the GPU name, whose gpus_per_node equals ``gpus`` and whose
    ``nvls`` (when the row has one) is what the run used: a row measured with NVLink SHARP does not judge a run without
    it, nor the other way round. A run whose NVLS use is unknown (None) matches only rows that do not say."""
    for row in references or []:
        if not re.search(row["gpu"], gpu_name or "", re.IGNORECASE) or int(row["gpus_per_node"]) != int(gpus or 0):
            continue
        if row.get("nvls") is not None and (nvls is None or bool(row["nvls"]) != bool(nvls)):
            continue
        return row
    return None


def _cite(row):
    """A reference row's source, with its address when the row has one."""
    return f"{_cite(row)} ({row['url']})" if row.get("url") else str(row["source"])


def _shape(gpus, model, nvls):
    state = {True: "NVLS on", False: "NVLS off", None: "NVLS use unknown (run with NCCL_DEBUG=INFO)"}[nvls]
    return f"{gpus}x {model}, {state}"


def _missing_reference(references, model, nranks, nvls):
    """Why no row judges this shape: the rows the table has for this GPU model (their shapes and sources), or none."""
    rows = [r for r in references or [] if re.search(r["gpu"], model or "", re.IGNORECASE)]
    if not rows:
        known = "the table has no row for this GPU model"
    else:
        known = "the table's rows for this GPU model are " + "; ".join(
            f"{r['gpus_per_node']} GPUs"
            + ("" if r.get("nvls") is None else (", NVLS on" if r["nvls"] else ", NVLS off"))
            + f" ({r['source'].split(' (')[0]})"
            for r in rows
        )
    return (
        f"no published busbw figure for {_shape(nranks, model, nvls)}: {known}. No public source we know of publishes "
        "this shape; add a row with its source to fabric_validate_busbw_references"
    )


def nccl_runs(data):
    """The host's all-reduce runs as a list of {tool, output, rc, environment} or {tool, skipped}: the role records a
    list (one run per benchmark); a single mapping (pre-measured output, older records) is one run."""
    nccl = data.get("nccl")
    if not nccl:
        return []
    runs = nccl if isinstance(nccl, list) else [nccl]
    result = []
    for run in runs:
        run = dict(run or {})
        if not run.get("tool"):
            parsed = parse_nccl_tests(run.get("output") or "")
            if "torch.distributed" in (parsed.get("collective") or ""):
                run["tool"] = "pytorch"
            elif parsed.get("nccl_tests_version") or parsed.get("format") == "json":
                run["tool"] = "nccl-tests"
            else:
                run["tool"] = "given"
        result.append(run)
    return result


def nccl_run_records(results, tools, environment=None):
    """What the report keeps of the benchmarks that ran: for each registered result that has an exit status (the
    others did not run), {tool (its name in ``tools``), output (stdout, a newline, stderr), rc, environment (the
    variables the role set for the run, as strings)}."""
    records = []
    for result, tool in zip(results, tools):
        if not isinstance(result, Mapping) or result.get("rc") is None:
            continue
        records.append(
            {
                "tool": tool,
                "output": (result.get("stdout") or "") + "\n" + (result.get("stderr") or ""),
                "rc": result["rc"],
                "environment": {str(k): str(v) for k, v in (environment or {}).items()},
            }
        )
    return records


def _conf_settings(content):
    """KEY=VALUE lines of an nccl.conf (comments dropped)."""
    settings = {}
    for line in (content or "").splitlines():
        key, sep, value = line.split("#", 1)[0].partition("=")
        if sep and key.strip():
            settings[key.strip()] = value.strip()
    return settings


def nccl_checks(host, data, thresholds, references):
    gpu = data.get("gpu") or {}
    if not gpu.get("gpu_present"):
        return [_check(host, "nccl", "nccl.all_reduce", "skipped", f"skipped: {gpu.get('skipped_reason') or 'no GPU'}")]
    runs = [r for r in nccl_runs(data) if r.get("output") or r.get("skipped")]
    if not runs:
        return [
            _check(
                host,
                "nccl",
                "nccl.all_reduce",
                "skipped",
                "skipped: no all-reduce benchmark "
                "(set fabric_validate_nccl_tests_dir or fabric_validate_nccl_torch_python)",
            )
        ]
    checks = [_nccl_run_check(host, data, run, thresholds, references) for run in runs]
    checks.extend(data_path_checks(host, data, runs))
    return checks


def _nccl_run_check(host, data, run, thresholds, references):
    """The verdict of one benchmark's run: busbw at the reference row's message size against the row."""
    gpu = data.get("gpu") or {}
    name = f"nccl.all_reduce[{run['tool']}]"

    def one(status, message, measured=None, threshold=None, unit=None):
        return _check(host, "nccl", name, status, message, measured, threshold, unit)

    if run.get("skipped"):
        return one("skipped", f"skipped: {run['skipped']}")
    parsed = parse_nccl_tests(run["output"])
    if run.get("rc") not in (None, 0):
        parsed["ok"] = False
        parsed["errors"].insert(0, f"exit status {run['rc']}")
    if not parsed["ok"]:
        return one(
            "failed", f"{run['tool']} failed: " + "; ".join(parsed["errors"]), parsed.get("wrong_total"), 0, "#wrong"
        )
    busbw = parsed["largest"]["busbw_gbps"]
    nranks = parsed["nranks"]
    model = (parsed["devices"] or [{}])[0].get("name") or (gpu.get("gpus") or [{}])[0].get("name")
    environment = dict(_conf_settings((data.get("nccl_conf") or {}).get("content")), **(run.get("environment") or {}))
    info = parse_nccl_info(run["output"])
    nvls = nvls_used(info, environment)
    if nranks is not None and nranks < 2:
        return one(
            "skipped",
            f"skipped: {nranks} rank: bus bandwidth is 0 by definition (2(n-1)/n), so no published figure applies "
            f"(measured up to {parsed['largest']['size']} B)",
            busbw,
            unit="GB/s",
        )
    row = busbw_reference(references, model, nranks, nvls)
    if row is None:
        return one(
            "skipped",
            f"skipped: {_missing_reference(references, model, nranks, nvls)}; measured {busbw} GB/s at "
            f"{parsed['largest']['size']} B",
            busbw,
            unit="GB/s",
        )
    measured = reference_measurement(parsed, row)
    if measured is None:
        return one(
            "skipped",
            f"skipped: the busbw reference for {nranks}x {row['gpu']} applies at {row['size_bytes']} B "
            f"({_cite(row)}); measured up to {parsed['largest']['size']} B "
            f"(busbw {busbw} GB/s): set fabric_validate_nccl_max_bytes to at least {row['size_bytes']}",
            busbw,
            unit="GB/s",
        )
    size, busbw = measured
    fraction = float(thresholds["nccl_busbw_fraction_of_reference"]["value"])
    limit = round(fraction * float(row["busbw_gbps"]), 3)
    return one(
        "passed" if busbw is not None and busbw >= limit else "failed",
        f"{run['tool']} busbw {busbw} GB/s at {size} B, threshold {limit} GB/s "
        f"({fraction} x {row['busbw_gbps']} GB/s reference for {_shape(nranks, row['gpu'], nvls)}: {_cite(row)})",
        busbw,
        limit,
        "GB/s",
    )


def data_path_checks(host, data, runs):
    """``nccl.data_path[<hca>]``: the GPUDirect path NCCL had for each NIC (from the run's NCCL_DEBUG=INFO lines)
    against the decision of role rdma_modules (fact gpucluster_gpudirect: peermem, dmabuf or none).

    A NIC NCCL could not give GPU memory while the host decided on GPUDirect fails: NCCL then stages every transfer
    through host memory. DMA-BUF where peermem was decided passes with a note (NCCL prefers DMA-BUF where both work).
    """
    info = None
    for run in runs:
        parsed = parse_nccl_info(run.get("output"))
        if parsed["info"]:
            info = parsed
            break
    if info is None:
        return [
            _check(
                host,
                "nccl",
                "nccl.data_path",
                "skipped",
                "skipped: no NCCL_DEBUG=INFO lines in the benchmark's output (fabric_validate_nccl_debug_info false, "
                "or a pre-measured output without them)",
            )
        ]
    decided = ((data.get("gpudirect") or {}).get("mode")) or None
    paths = nic_data_paths(info)
    if not paths:
        return [
            _check(
                host,
                "nccl",
                "nccl.data_path",
                "skipped",
                f"skipped: NCCL listed no RDMA NIC (network {info.get('network') or 'unknown'}); "
                f"GPUDirect RDMA decided: {decided or 'unknown (fact gpucluster_gpudirect not set)'}",
                info.get("network"),
                decided,
            )
        ]
    checks = []
    channels = info.get("net_channels") or {}
    for hca, path in paths.items():
        index = info["nics"][hca]["index"]
        used = channels.get(index)
        seen = (
            f"; {used['gdr']} network connection(s) through it read GPU memory directly (GDRDMA), {used['plain']} "
            "through host memory"
            if used
            else "; no connection through it in this run (one node: NVLink/PCIe carried the traffic)"
        )
        said = f"NCCL {info.get('version') or ''} had {DATA_PATH_WORDS[path]} for {hca}{seen}".replace("  ", " ")
        if decided is None:
            status, message = "skipped", f"skipped: {said}; fact gpucluster_gpudirect not set (rdma_modules)"
        elif decided == "none":
            status = "passed"
            message = f"{said}; rdma_modules decided none" + (
                " (NCCL found a GPUDirect path anyway)" if path != "none" else ""
            )
        elif path == "none" or (used and used["plain"] and not used["gdr"]):
            status = "failed"
            message = (
                f"{said}, but rdma_modules decided {decided}: NCCL stages every transfer through host memory. "
                "Check that nvidia-peermem is loaded or that the kernel, rdma-core and the GPU driver support "
                "DMA-BUF (https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html#nccl-dmabuf-enable)"
            )
        else:
            status = "passed"
            note = {
                "dmabuf": " (NCCL prefers DMA-BUF where the GPU and the NIC both support it)",
                "peermem": " (the GPU offered NCCL no DMA-BUF, so nvidia-peermem carried it)",
            }
            message = f"{said}; rdma_modules decided {decided}" + (note[path] if path != decided else "")
        checks.append(_check(host, "nccl", f"nccl.data_path[{hca}]", status, message, path, decided))
    return checks


DATA_PATH_WORDS = {
    "dmabuf": "GPUDirect RDMA through DMA-BUF",
    "peermem": "GPUDirect RDMA through nvidia-peermem",
    "none": "no GPUDirect RDMA",
}


def reference_measurement(parsed, row):
    """(size, busbw) to compare with a reference row: at the row's size_bytes, else the smallest larger size.

    A row without size_bytes compares the largest size measured. A row with min_bytes too gives the mean busbw of the
    sizes from min_bytes to size_bytes, as a source that judges nccl-tests' average over a sweep does (the size
    returned is then "min_bytes-size_bytes"). None when the run stopped below the row's size: busbw grows with the
    message size, so a smaller one would fail a healthy fabric.
    """
    wanted = row.get("size_bytes")
    if not wanted:
        return parsed["largest"]["size"], parsed["largest"]["busbw_gbps"]
    candidates = [r for r in parsed["results"] if r["size"] >= int(wanted)]
    if not candidates:
        return None
    if row.get("min_bytes"):
        sweep = [
            primary(r)["busbw_gbps"]
            for r in parsed["results"]
            if int(row["min_bytes"]) <= r["size"] <= int(wanted) and primary(r)["busbw_gbps"] is not None
        ]
        if not sweep:
            return None
        return f"{row['min_bytes']}-{wanted}", round(sum(sweep) / len(sweep), 2)
    chosen = min(candidates, key=lambda r: r["size"])
    return chosen["size"], primary(chosen)["busbw_gbps"]
