# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""The validation's input: tiers, thresholds and their overrides, reference rows, pre-measured results, the
interfaces' expected MTUs; each problem named for the preflight.
"""

import json
import re
from collections.abc import Mapping

from ..fabric_model import IB_MTUS, is_int, normalise_interface, parse_int
from .rdma import RDMA_TESTS

TIERS = ("health", "rdma", "nccl", "outliers")


# fabric_validate_nccl_benchmarks: nccl-tests where found, else the PyTorch benchmark; or every one found.
NCCL_BENCHMARKS = ("first", "all")


FRACTION_THRESHOLDS = (
    "ib_write_bw_fraction_of_reference",
    "ib_write_bw_fraction_of_rate",
    "nccl_busbw_fraction_of_reference",
    "outlier_fraction_of_median",
)


POSITIVE_THRESHOLDS = ("ib_write_lat_max_usec",)


MEASUREMENTS_SHAPE = "{rdma: [{test: ib_write_bw|ib_write_lat, peer, output}], nccl_output: str}"


def measurements_errors(measurements):
    """fabric_validate_measurements must be a mapping whose rdma (when given) lists perftest results."""
    rdma = measurements.get("rdma", []) if isinstance(measurements, Mapping) else None
    if isinstance(rdma, list) and all(isinstance(e, Mapping) and e.get("test") in RDMA_TESTS for e in rdma):
        return []
    shown = json.dumps(measurements, default=str)
    if len(shown) > 200:
        shown = shown[:197] + "..."
    return [f"fabric_validate_measurements must be {MEASUREMENTS_SHAPE}; got {shown}"]


def preflight_errors(
    tiers,
    thresholds,
    pairs,
    play_hosts,
    settle_seconds=0,
    settle_delay=1,
    measurements=None,
    references=None,
    rdma_attempts=1,
    rdma_bw_references=None,
    nccl_benchmarks="first",
    sm_query_host=None,
    inventory_hosts=None,
    expected_rate_gbps=0,
    expected_active_mtu=0,
):
    """Messages for bad input, each naming the variable, the value and the fix. Empty when all is well."""
    errors = measurements_errors({} if measurements is None else measurements)
    try:  # -e gives a string: "3" is 3
        attempts = None if isinstance(rdma_attempts, bool) else int(str(rdma_attempts))
    except ValueError:
        attempts = None
    if attempts is None or attempts < 1:
        errors.append(
            f"fabric_validate_rdma_attempts={rdma_attempts!r} must be a whole number, at least 1 (1 measures once); "
            "use e.g. 3"
        )
    errors.extend(reference_errors(references or []))
    errors.extend(rdma_reference_errors(rdma_bw_references or []))
    errors.extend(expected_port_errors(expected_rate_gbps, expected_active_mtu))
    if sm_query_host and inventory_hosts is not None and sm_query_host not in inventory_hosts:
        errors.append(
            f"fabric_validate_sm_query_host={sm_query_host} is not an inventory host; name one, or leave it unset"
        )
    if nccl_benchmarks not in NCCL_BENCHMARKS:
        errors.append(
            f"fabric_validate_nccl_benchmarks={nccl_benchmarks!r} must be one of {', '.join(NCCL_BENCHMARKS)} "
            "(first: nccl-tests where found, else the PyTorch benchmark; all: every one found, side by side)"
        )
    if int(settle_seconds) < 0:
        errors.append(
            f"fabric_validate_port_settle_seconds={settle_seconds} must be 0 or more; "
            "use e.g. 60 (0 judges the first read)"
        )
    if int(settle_delay) < 1:
        errors.append(f"fabric_validate_port_settle_delay={settle_delay} must be at least 1 (seconds); use e.g. 3")
    for tier in tiers or []:
        if tier not in TIERS:
            errors.append(f"fabric_validate_tiers contains unknown tier '{tier}'; use any of {', '.join(TIERS)}")
    for name, entry in (thresholds or {}).items():
        value = entry.get("value") if isinstance(entry, dict) else entry
        try:
            number = float(value)
        except (TypeError, ValueError):
            errors.append(f"fabric_validate_thresholds.{name}={value!r} is not a number")
            continue
        if name in FRACTION_THRESHOLDS and not 0 < number <= 1:
            errors.append(f"fabric_validate_thresholds.{name}={value} is outside (0, 1]; give a fraction such as 0.9")
        elif name in POSITIVE_THRESHOLDS and number <= 0:
            errors.append(f"fabric_validate_thresholds.{name}={value} must be greater than 0")
        elif name not in FRACTION_THRESHOLDS + POSITIVE_THRESHOLDS:
            errors.append(
                f"fabric_validate_thresholds has unknown key '{name}'; known: "
                + ", ".join(FRACTION_THRESHOLDS + POSITIVE_THRESHOLDS)
            )
    for index, pair in enumerate(pairs or []):
        for role in ("server", "client"):
            host = (pair or {}).get(role)
            if host not in play_hosts:
                errors.append(
                    f"fabric_validate_rdma_pairs[{index}].{role}={host!r} is not a host in this play; "
                    f"use one of {', '.join(sorted(play_hosts))} or remove the pair"
                )
        if pair and pair.get("server") == pair.get("client"):
            errors.append(f"fabric_validate_rdma_pairs[{index}] pairs {pair.get('server')!r} with itself")
    return errors


def expected_port_errors(rate_gbps, active_mtu):
    """The port minima the health tier judges each port by: a rate of 0 Gb/s or more, and an active MTU of 0 (not
    checked) or one an RDMA port can report."""
    errors = []
    try:  # -e gives text: "400" is 400
        rate = None if isinstance(rate_gbps, bool) else float(str(rate_gbps))
    except ValueError:
        rate = None
    if rate is None or not 0 <= rate < float("inf"):
        errors.append(
            f"fabric_validate_expected_rate_gbps={rate_gbps!r} must be a number of Gb/s, 0 or more "
            "(0 skips the rate check); use e.g. 400 for NDR"
        )
    try:
        mtu = parse_int(active_mtu)
    except ValueError:
        mtu = None
    if mtu is None or (mtu and mtu not in IB_MTUS):
        errors.append(
            f"fabric_validate_expected_active_mtu={active_mtu!r} must be 0 (not checked) or an RDMA MTU: "
            f"{', '.join(map(str, IB_MTUS))}; use e.g. 4096"
        )
    return errors


def reference_errors(references):
    """Messages for busbw reference rows that cannot be used: each row needs a pattern, a shape, a figure, a source."""
    errors = []
    if not isinstance(references, list):
        return [f"fabric_validate_busbw_references must be a list of rows, got {type(references).__name__}"]
    for index, row in enumerate(references):
        where = f"fabric_validate_busbw_references[{index}]"
        if not isinstance(row, Mapping):
            errors.append(f"{where}={row!r} is not a mapping; give {{gpu, gpus_per_node, busbw_gbps, source}}")
            continue
        try:
            re.compile(str(row.get("gpu", "")))
        except re.error as err:
            errors.append(f"{where}.gpu={row.get('gpu')!r} is not a regular expression ({err})")
        if not row.get("gpu"):
            errors.append(f"{where}.gpu is missing: give a regular expression on the nvidia-smi name, e.g. 'H100'")
        if not is_int(row.get("gpus_per_node")) or int(row["gpus_per_node"]) < 2:
            errors.append(f"{where}.gpus_per_node={row.get('gpus_per_node')!r} must be an integer of 2 or more")
        try:
            ok = float(row.get("busbw_gbps")) > 0
        except (TypeError, ValueError):
            ok = False
        if not ok:
            errors.append(f"{where}.busbw_gbps={row.get('busbw_gbps')!r} must be a number of GB/s greater than 0")
        if "size_bytes" in row and (not is_int(row["size_bytes"]) or int(row["size_bytes"]) < 1):
            errors.append(f"{where}.size_bytes={row['size_bytes']!r} must be a whole number of bytes, e.g. 17179869184")
        elif "min_bytes" in row and (
            not is_int(row["min_bytes"]) or not 1 <= int(row["min_bytes"]) <= int(row.get("size_bytes") or 0)
        ):
            errors.append(
                f"{where}.min_bytes={row['min_bytes']!r} must be a whole number of bytes from 1 to size_bytes "
                "(the sweep whose mean busbw the source judges); it needs size_bytes"
            )
        if row.get("nvls") is not None and not isinstance(row["nvls"], bool):
            errors.append(
                f"{where}.nvls={row['nvls']!r} must be true (measured with NVLink SHARP), false (without) or left out "
                "(the source does not say)"
            )
        if not str(row.get("source") or "").strip():
            errors.append(f"{where}.source is missing: name the document a reader can open for this figure")
    return errors


def rdma_reference_errors(references):
    """Messages for ib_write_bw reference rows that cannot be used: each needs a port rate, a figure and a source."""
    if not isinstance(references, list):
        return [f"fabric_validate_rdma_bw_references must be a list of rows, got {type(references).__name__}"]
    errors = []
    for index, row in enumerate(references):
        where = f"fabric_validate_rdma_bw_references[{index}]"
        if not isinstance(row, Mapping):
            errors.append(f"{where}={row!r} is not a mapping; give {{rate_gbps, bw_gbps, source}}")
            continue
        for key, what in (("rate_gbps", "the port rate in Gb/s, e.g. 400"), ("bw_gbps", "the figure in Gb/s")):
            try:
                ok = float(row.get(key)) > 0
            except (TypeError, ValueError):
                ok = False
            if not ok:
                errors.append(f"{where}.{key}={row.get(key)!r} must be a number greater than 0: {what}")
        if "size_bytes" in row and (not is_int(row["size_bytes"]) or int(row["size_bytes"]) < 1):
            errors.append(f"{where}.size_bytes={row['size_bytes']!r} must be a whole number of bytes, e.g. 1048576")
        if not str(row.get("source") or "").strip():
            errors.append(f"{where}.source is missing: name the document a reader can open for this figure")
    return errors


def expected_interface_mtus(interfaces):
    """``[{name, expected_mtu}]``: every declared interface with the MTU it should have, its kind's default included.

    The MTU comes from ``fabric_model.normalise_interface`` (an interface without ``mtu`` expects DEFAULT_MTU of its
    kind and mode), so an interface left at a wrong default is judged too. Entries without a name or with an MTU that
    is not a number are left to role fabric_interfaces' preflight, which reports them.
    """
    expected = []
    for iface in interfaces or []:
        if not isinstance(iface, dict) or not isinstance(iface.get("name"), str):
            continue
        mtu = normalise_interface(iface)["mtu"]
        if is_int(mtu):
            expected.append({"name": iface["name"], "expected_mtu": mtu})
    return expected


def merge_thresholds(defaults, overrides):
    """{name: {value, unit, source}} with site overrides (plain numbers) applied and marked as such."""
    merged = {name: dict(entry) for name, entry in (defaults or {}).items()}
    for name, value in (overrides or {}).items():
        entry = merged.setdefault(name, {})
        entry["value"] = value.get("value") if isinstance(value, dict) else value
        entry["source"] = "site override"
    return merged
