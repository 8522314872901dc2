# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Fabric validation logic: pairing, threshold checks, fleet outliers. Pure functions used by the filters in
plugins/filter/fabric_validate.py; every check is a dict with host, tier, check, status (passed | failed | skipped),
measured, threshold, unit and message.
"""

import base64
import json
import re
import statistics
from collections.abc import Mapping

from .fabric_model import is_int, normalise_interface
from .nccl import is_debug_only
from .nccl_debug import nic_data_paths, nvls_used, parse_nccl_info
from .nccl_tests import parse_nccl_tests, primary
from .perftest import summarize_perftest_run
from .sminfo import infiniband_port as _infiniband_port
from .sminfo import query_ports as sm_query_ports
from .sminfo import sminfo_outcome

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


def rdma_rounds(hosts=None, pairs=None, present=None):
    """Schedule pairwise tests in rounds where no host takes part twice.

    Without explicit ``pairs``, each host is paired with the next one in a ring (sorted order): N tests for N hosts
    (one for two hosts), in 2 rounds (even N) or 3 (odd N). ``present``, when given, says for each of ``hosts`` (same
    order) whether it has an RDMA device; hosts without one are left out. Returns a list of rounds, each a list of
    {server, client}."""
    if present is not None:
        hosts = [host for host, has_rdma in zip(hosts or [], present) if has_rdma]
    if pairs is None:
        ordered = sorted(hosts or [])
        if len(ordered) < 2:
            return []
        if len(ordered) == 2:
            pairs = [{"server": ordered[1], "client": ordered[0]}]
        else:
            pairs = [{"server": ordered[(i + 1) % len(ordered)], "client": ordered[i]} for i in range(len(ordered))]
    rounds = []
    for pair in pairs:
        for members, scheduled in rounds:
            if pair["server"] not in members and pair["client"] not in members:
                scheduled.append(dict(pair))
                members.update((pair["server"], pair["client"]))
                break
        else:
            rounds.append(({pair["server"], pair["client"]}, [dict(pair)]))
    return [scheduled for _members, scheduled in rounds]


RDMA_TESTS = ("ib_write_bw", "ib_write_lat")


def perftest_argv(test, options, server_address=None, json_file=None):
    """argv of one perftest run under timeout: the server's (line-buffered by stdbuf, so its output survives a kill)
    when server_address is None, else the client's, connecting to server_address; with json_file, perftest also
    writes its JSON report there (--out_json --out_json_file=<json_file>).

    options: iterations, device (empty: perftest's choice), gid_index (< 0: perftest's choice), rdma_cm (-R),
    bw_size, lat_size (message sizes of ib_write_bw and ib_write_lat) and timeout (seconds)."""
    argv = ["timeout", str(options["timeout"])]
    argv += ["stdbuf", "-oL", test] if server_address is None else [test]
    argv += ["-n", str(options["iterations"])]
    if options.get("device"):
        argv += ["-d", str(options["device"])]
    if int(options.get("gid_index", -1)) >= 0:
        argv += ["-x", str(options["gid_index"])]
    if options.get("rdma_cm"):
        argv.append("-R")
    argv += (
        ["-s", str(options["bw_size"]), "--report_gbits"] if test == "ib_write_bw" else ["-s", str(options["lat_size"])]
    )
    if json_file:
        argv += ["--out_json", f"--out_json_file={json_file}"]
    return argv + ([str(server_address)] if server_address is not None else [])


def rdma_part(pairs, host, live):
    """This host's part in one round: its pairs as server (serve) and as client (connect), and whether it measures
    (live: it has an RDMA device and no pre-measured results)."""
    return {
        "serve": [pair for pair in pairs if pair["server"] == host],
        "connect": [pair for pair in pairs if pair["client"] == host],
        "live": bool(live),
    }


def _output(result):
    result = result or {}
    return f"{result.get('stdout') or ''}\n{result.get('stderr') or ''}"


def rdma_round_record(record, test, part, results, check_mode=False):
    """The host's record after one round of one perftest.

    part: this host's part in the round (rdma_part); results: the registered results of the round's tasks on this
    host - client, server_job (the server's async start), server (its collection) and json (the slurp of the client's
    --out_json report, when it wrote one). The client's side (judged) is appended to record['rdma'], with the report
    as json when read, the server's own output to record['rdma_served'], so a host that only served, as one of two
    hosts does, is reported with what it served rather than as having had no peer."""
    client, server_job, server, report = (results.get(name) for name in ("client", "server_job", "server", "json"))
    record = dict(record)
    record["rdma"] = list(record.get("rdma") or [])
    record["rdma_served"] = list(record.get("rdma_served") or [])
    if part["connect"] and part["live"]:
        record["rdma"].append(
            {
                "test": test,
                "peer": part["connect"][0]["server"],
                "output": _output(client),
                "rc": (client or {}).get("rc"),
                "skipped": "check mode" if check_mode else None,
            }
        )
        if report and not report.get("skipped"):
            # A report that could not be read is empty, and judged as a run that failed.
            record["rdma"][-1]["json"] = base64.b64decode(report.get("content") or "").decode("utf-8", "replace")
    if "ansible_job_id" in (server_job or {}):
        record["rdma_served"].append(
            {
                "test": test,
                "peer": part["serve"][0]["client"],
                "output": _output(server),
                "rc": (server or {}).get("rc"),
            }
        )
    return record


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


def _check(host, tier, check, status, message, measured=None, threshold=None, unit=None):
    return {
        "host": host,
        "tier": tier,
        "check": check,
        "status": status,
        "measured": measured,
        "threshold": threshold,
        "unit": unit,
        "message": message,
    }


def _ports(data):
    for device in (data.get("ib") or {}).get("devices") or []:
        for port in device.get("ports") or []:
            yield device["name"], port


def _rdma_port(data, device_name=None):
    """The port the RDMA tests use: on the named device, else the first ACTIVE port."""
    ports = list(_ports(data))
    if device_name:
        ports = [(d, p) for d, p in ports if d == device_name]
    active = [(d, p) for d, p in ports if p.get("state") == "ACTIVE"]
    chosen = (active or ports or [(None, None)])[0]
    return chosen


def health_checks(host, data, expected):
    checks = []
    ib = data.get("ib") or {}
    declared = [i["name"] for i in data.get("interfaces") or [] if isinstance(i, Mapping) and i.get("name")]
    if not ib.get("rdma_present") and declared:
        # Declared fabric interfaces (IPoIB or RoCE) need an RDMA device: its absence is a fault, not "not measured".
        message = (
            f"no RDMA device, but fabric_interfaces declares {', '.join(declared)}; check that the HCA is seen "
            "(lspci) and its driver loaded (role rdma_modules), or remove the interfaces from fabric_interfaces"
        )
        checks.append(_check(host, "health", "rdma.device", "failed", message, measured=0, threshold=len(declared)))
    elif not ib.get("rdma_present"):
        checks.append(_check(host, "health", "rdma.device", "skipped", "skipped: no RDMA device"))
    else:
        for device, port in _ports(data):
            name = f"{device}/{port['port']}"
            ok = port.get("state") == "ACTIVE" and port.get("phys_state") == "LinkUp"
            checks.append(
                _check(
                    host,
                    "health",
                    f"port.state[{name}]",
                    "passed" if ok else "failed",
                    f"{name} is {port.get('state')}/{port.get('phys_state')}"
                    + ("" if ok else ", expected ACTIVE/LinkUp"),
                    measured=f"{port.get('state')}/{port.get('phys_state')}",
                    threshold="ACTIVE/LinkUp",
                )
            )
            rate = port.get("rate_gbps")
            want_rate = expected.get("rate_gbps")
            if want_rate:
                ok = rate is not None and rate >= float(want_rate)
                checks.append(
                    _check(
                        host,
                        "health",
                        f"port.rate[{name}]",
                        "passed" if ok else "failed",
                        f"{name} rate {rate} Gb/s, expected at least {want_rate} Gb/s",
                        rate,
                        want_rate,
                        "Gb/s",
                    )
                )
            else:
                checks.append(
                    _check(
                        host,
                        "health",
                        f"port.rate[{name}]",
                        "skipped",
                        f"skipped: {name} rate {rate} Gb/s, no fabric_validate_expected_rate_gbps set",
                        rate,
                        unit="Gb/s",
                    )
                )
            mtu = port.get("active_mtu")
            want_mtu = expected.get("active_mtu")
            if not want_mtu:
                continue
            if mtu is None:
                checks.append(
                    _check(
                        host,
                        "health",
                        f"port.active_mtu[{name}]",
                        "skipped",
                        f"skipped: active MTU of {name} unknown (InfiniBand port and no ibv_devinfo)",
                        threshold=want_mtu,
                        unit="B",
                    )
                )
            else:
                ok = mtu >= int(want_mtu)
                checks.append(
                    _check(
                        host,
                        "health",
                        f"port.active_mtu[{name}]",
                        "passed" if ok else "failed",
                        f"{name} active MTU {mtu} (from {port.get('active_mtu_source')}), expected at least {want_mtu}",
                        mtu,
                        want_mtu,
                        "B",
                    )
                )
        for module, loaded in sorted((ib.get("modules_loaded") or {}).items()):
            checks.append(
                _check(
                    host,
                    "health",
                    f"module[{module}]",
                    "passed" if loaded else "failed",
                    f"kernel module {module} is " + ("loaded" if loaded else "not loaded"),
                    loaded,
                    True,
                )
            )
    checks.extend(_gpu_health(host, data))
    checks.extend(_nccl_conf_health(host, data))
    checks.extend(roce_qos_health(host, data.get("roce_qos")))
    checks.extend(subnet_manager_checks(host, data))
    for iface in data.get("interfaces") or []:
        want = iface.get("expected_mtu")
        have = iface.get("mtu")
        if have is None:
            status, message = "failed", f"interface {iface['name']} not found (expected MTU {want})"
        else:
            status = "passed" if int(have) == int(want) else "failed"
            message = f"interface {iface['name']} MTU {have}, expected {want}"
        checks.append(_check(host, "health", f"interface.mtu[{iface['name']}]", status, message, have, want, "B"))
    return checks


def sm_query_records(results, query_host):
    """One record per sminfo run (the registered loop results): device, port, query_host, rc, stdout and stderr
    (the task's message when it gave no rc: the query host was unreachable)."""
    records = []
    for result in results or []:
        item = result.get("item") or {}
        records.append(
            {
                "device": item.get("device"),
                "port": item.get("port"),
                "query_host": query_host,
                "rc": result.get("rc"),
                "stdout": result.get("stdout") or "",
                "stderr": result.get("stderr") or ("" if "rc" in result else result.get("msg") or ""),
            }
        )
    return records


def collected_record(collected, inputs):
    """A host's record as the report judges it (an entry of report.json's ``hosts``), from module
    fabric_validate_collect's result and ``inputs``, what the host's variables say: ``gpudirect`` (role rdma_modules'
    decision and why, or None), ``allowed_debug`` (nccl_conf_allow_debug_variables), ``require_pfc`` and
    ``declared_roce`` (the RoCE interfaces declared), ``rdma`` and ``nccl`` (pre-measured results). ``sm`` comes
    from sminfo, which runs after the collection: ``with_sm``."""
    return {
        "ib": collected.get("ib"),
        # How often the ports were read (more than once while a port waited for the subnet manager).
        "port_reads": collected.get("attempts"),
        "gpu": collected.get("gpu"),
        "gpudirect": inputs.get("gpudirect"),
        # Judged by role nccl's rule: its debug-only names, less those the host allows.
        "nccl_conf": dict(collected.get("nccl_conf") or {}, allowed_debug=list(inputs.get("allowed_debug") or [])),
        "versions": collected.get("versions"),
        "roce_qos": {
            "results": collected.get("roce_qos"),
            "require_pfc": inputs.get("require_pfc", False),
            "declared": list(inputs.get("declared_roce") or []),
        },
        "interfaces": collected.get("interfaces"),
        "rdma": list(inputs.get("rdma") or []),
        "rdma_served": [],
        "nccl": inputs.get("nccl"),
    }


def with_sm(record, sminfo_results, query_host):
    """``record`` with ``sm``: sm_query_records of the registered sminfo loop (none ran: an empty list)."""
    return dict(record, sm=sm_query_records(sminfo_results or [], query_host))


def host_record(collected, sminfo_results=None):
    """The host's whole record from module fabric_validate_collect's registered result (``record``, built by its
    action plugin) and, unless the module asked the subnet manager itself (the record has ``sm``), the ``results``
    of the registered sminfo loop: a list, or a callable that reads them, called only when a port was asked. A loop
    without items registers ``skipped_reason``, which ansible-core 2.21 warns about when the result is read whole
    (as another host's variable is)."""
    record = collected["record"]
    if "sm" in record:
        return record
    if not sm_query_ports(record.get("ib")):
        return with_sm(record, [], collected.get("sm_query_host"))
    results = sminfo_results() if callable(sminfo_results) else sminfo_results
    return with_sm(record, results, collected.get("sm_query_host"))


SM_HINT = "is OpenSM running? (systemctl status opensm on the subnet managers)"


def subnet_manager_checks(host, data):
    """sm.master[<device>/<port>] for each InfiniBand port: a master subnet manager answers at the port's SM LID.

    A port keeps ACTIVE, its LID and its SM LID from the last sweep after OpenSM stops, so the port checks alone
    pass a fabric with no SM (nothing would configure a new or reset port, nor answer path queries). ``data['sm']``:
    sm_query_records of the sminfo runs; None (not collected) gives no check, as does a port of RoCE link layer."""
    records = data.get("sm")
    if records is None or not (data.get("ib") or {}).get("rdma_present"):
        return []
    by_port = {(r.get("device"), r.get("port")): r for r in records}
    checks = []
    for device, port in _ports(data):
        if not _infiniband_port(port):
            continue
        name = f"{device}/{port['port']}"
        sm_lid = port.get("sm_lid")

        def one(status, message, measured=None, name=name):
            return _check(host, "health", f"sm.master[{name}]", status, message, measured, "SMINFO_MASTER")

        record = by_port.get((device, port["port"]))
        if port.get("phys_state") != "LinkUp":
            message = f"skipped: {name} is {port.get('phys_state')}: no subnet manager is reachable through it"
            checks.append(one("skipped", message))
            continue
        if not sm_lid:
            message = f"{name} has SM LID 0: no subnet manager has configured this port; {SM_HINT}"
            checks.append(one("failed", message, "SM LID 0"))
            continue
        if record is None:
            checks.append(one("skipped", f"skipped: the subnet manager of {name} was not queried"))
            continue
        query_host = record.get("query_host") or host
        where = "" if query_host == host else f" (asked from {query_host})"
        kind, detail = sminfo_outcome(record.get("rc"), record.get("stdout"), record.get("stderr"))
        said = f"; {detail}" if str(detail).startswith("sminfo") else f"; sminfo: {detail}" if detail else ""
        if kind == "answered" and detail["master"]:
            message = (
                f"{name}: the master SM answers at SM LID {detail['lid']} (GUID {detail['guid']}, priority "
                f"{detail['priority']}, activity count {detail['activity_count']}){where}"
            )
            checks.append(one("passed", message, detail["state_name"]))
        elif kind == "answered":
            message = (
                f"{name}: the SM at SM LID {detail['lid']} (GUID {detail['guid']}, priority {detail['priority']}) "
                f"answers in state {detail['state_name']}, not SMINFO_MASTER{where}: the fabric has no master SM "
                "where the port expects it; check the subnet managers (sminfo, systemctl status opensm)"
            )
            checks.append(one("failed", message, detail["state_name"]))
        elif kind == "not_installed":
            message = f"skipped: sminfo not found on {query_host}: install infiniband-diags to ask the subnet manager"
            checks.append(one("skipped", message))
        elif kind == "cannot_query":
            checks.append(one("skipped", f"skipped: sminfo cannot query {name} from {query_host}{said}"))
        elif kind == "no_sm_lid":
            checks.append(one("failed", f"{name}: sminfo finds no SM LID to ask{where}: {SM_HINT}{said}", "SM LID 0"))
        else:
            said = "; sminfo timed out" if kind == "timeout" else said
            message = f"{name}: no subnet manager answers at SM LID {sm_lid}{where}: {SM_HINT}{said}"
            checks.append(one("failed", message, "no answer"))
    return checks


def _gpu_health(host, data):
    gpu = data.get("gpu") or {}
    if not gpu.get("gpu_present"):
        reason = gpu.get("skipped_reason") or "no GPU"
        return [_check(host, "health", "gpu.nic_affinity", "skipped", f"skipped: {reason}")]
    checks = []
    for entry in gpu.get("affinity") or []:
        name = f"gpu.nic_affinity[{entry['gpu']}]"
        if entry.get("nic") is None:
            checks.append(_check(host, "health", name, "skipped", f"skipped: {entry['gpu']}: no NIC in topology"))
        else:
            checks.append(
                _check(
                    host,
                    "health",
                    name,
                    "failed" if entry["flagged"] else "passed",
                    entry.get("reason") or f"{entry['gpu']} nearest NIC {entry['nic_device']} at {entry['distance']}",
                    entry["distance"],
                    "PXB or nearer",
                )
            )
    gpudirect = data.get("gpudirect")
    if not gpudirect:
        checks.append(
            _check(host, "health", "gpudirect", "skipped", "skipped: fact gpucluster_gpudirect not set (rdma_modules)")
        )
    else:
        mode = gpudirect.get("mode")
        checks.append(
            _check(
                host,
                "health",
                "gpudirect",
                "failed" if mode in (None, "none") else "passed",
                f"GPUDirect RDMA mode {mode}: {gpudirect.get('reason', '')}".strip(),
                mode,
                "peermem or dmabuf",
            )
        )
    return checks


def _nccl_conf_health(host, data):
    """nccl.conf sets none of NCCL's debug-only variables, except those ``nccl_conf_allow_debug_variables`` allows.

    The same rule as role nccl's (``nccl.is_debug_only``), so a file the role writes passes and one it refuses fails.
    """
    conf = data.get("nccl_conf") or {}
    if conf.get("content") is None:
        return [_check(host, "health", "nccl.conf", "skipped", f"skipped: {conf.get('path', 'nccl.conf')} absent")]
    allowed = set(conf.get("allowed_debug") or ())
    debug = []
    for line in conf["content"].splitlines():
        key = line.split("#", 1)[0].split("=", 1)[0].strip()
        if key and is_debug_only(key):
            debug.append(key)
    found = [key for key in debug if key not in allowed]
    kept = [key for key in debug if key in allowed]
    docs = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html"
    if found:
        message = (
            f"{conf['path']} sets {', '.join(found)}: NCCL documents these for debugging, not for production ({docs}); "
            "remove them from the file and set them per job when debugging, or list them in "
            "nccl_conf_allow_debug_variables (benchmarks only)"
        )
    elif kept:
        message = f"{conf['path']} sets {', '.join(kept)}, debug-only, allowed by nccl_conf_allow_debug_variables"
    else:
        message = f"{conf['path']} sets none of NCCL's debug-only variables ({docs}, Debugging)"
    return [_check(host, "health", "nccl.conf", "failed" if found else "passed", message, found, [])]


def _qos_value(value):
    """A DSCP map as dcb writes it ("26:3 48:6", by DSCP); other values as they are."""
    if isinstance(value, Mapping):
        return " ".join(f"{dscp}:{prio}" for dscp, prio in sorted(value.items(), key=lambda item: int(item[0])))
    return value


def roce_qos_health(host, qos):
    """One check per RoCE interface and QoS setting, from module roce_qos run in check mode against the settings role
    roce_qos applied (``qos``: "results", its ``interfaces`` or None when the role did not run; "require_pfc";
    "declared", the host's RoCE interfaces). As wanted: passed; different: failed; a setting the device cannot take:
    skipped with the reason, failed for PFC when roce_qos_require_pfc asks for it."""
    qos = qos or {}
    if not qos.get("results"):
        if not qos.get("declared"):
            return []  # no RoCE interface: nothing to judge
        return [
            _check(
                host,
                "health",
                "roce_qos",
                "skipped",
                f"skipped: fact gpucluster_roce_qos not set: role roce_qos did not run on this host "
                f"(RoCE interfaces {', '.join(qos['declared'])})",
            )
        ]
    checks = []
    for interface, results in sorted((qos.get("results") or {}).items()):
        for setting in ("pfc", "dscp_map", "ecn", "tos"):
            result = results.get(setting) or {}
            state, wanted, current = result.get("state"), result.get("wanted"), result.get("current")
            name = f"roce_qos.{setting}[{interface}]"
            if state == "ok":
                status, message = "passed", f"{interface} {setting} is {_qos_value(current)}, as the inventory asks"
            elif state == "unsupported":
                required = setting == "pfc" and qos.get("require_pfc")
                status = "failed" if required else "skipped"
                message = f"{interface} {setting} not applied: {result.get('reason')}" + (
                    " (roce_qos_require_pfc is true)" if required else ""
                )
                message = message if required else f"skipped: {message}"
            else:
                status = "failed"
                message = (
                    f"{interface} {setting} is {_qos_value(current)}, the inventory asks {_qos_value(wanted)}: "
                    "something changed it since role roce_qos ran; run the role again (its boot-time unit "
                    "gpucluster-roce-qos.service applies the same at boot)"
                )
            checks.append(_check(host, "health", name, status, message, _qos_value(current), _qos_value(wanted)))
    return checks


def _parsed(run):
    """Which of perftest's outputs a run's check judged: 'json' (its --out_json report), 'text', or None (not run)."""
    return None if run.get("skipped") else "text" if run.get("json") is None else "json"


def _from_json(summary):
    return " (from perftest's JSON report)" if summary.get("format") == "json" else ""


def _rdma_run_check(host, run, thresholds, device, port, bw_references=None):
    """The check of one perftest run (one attempt)."""
    name = f"{run['test']}[{run.get('peer')}]"
    if run.get("skipped"):
        return _check(host, "rdma", name, "skipped", f"skipped: {run['skipped']}")
    summary = summarize_perftest_run(run)
    if run.get("rc") not in (None, 0):
        summary = {"ok": False, "errors": [f"exit status {run['rc']}"] + summary.get("errors", [])}
    if not summary["ok"]:
        return _check(
            host,
            "rdma",
            name,
            "failed",
            f"{run['test']} to {run.get('peer')} failed: " + "; ".join(summary["errors"][:3]),
        )
    if summary["kind"] == "bw":
        return _rdma_bw_check(host, name, run, summary, thresholds, device, port, bw_references)
    limit = float(thresholds["ib_write_lat_max_usec"]["value"])
    ok = summary["t_typical_usec"] <= limit
    return _check(
        host,
        "rdma",
        name,
        "passed" if ok else "failed",
        f"ib_write_lat to {run.get('peer')}: typical {summary['t_typical_usec']} us, threshold {limit} us"
        f"{_from_json(summary)}",
        summary["t_typical_usec"],
        limit,
        "us",
    )


def rdma_bw_reference(references, rate_gbps):
    """The first ib_write_bw reference row for a port of this rate (Gb/s), or None."""
    for row in references or []:
        if rate_gbps is not None and float(row["rate_gbps"]) == float(rate_gbps):
            return row
    return None


def _rdma_bw_check(host, name, run, summary, thresholds, device, port, references):
    """ib_write_bw against the published figure for the port's speed; for a speed with no published figure, against
    the site's own fraction of the port rate when the site set one, else skipped with the reason."""
    peer = run.get("peer")
    bw = summary["bw_avg_gbps"]
    rate = (port or {}).get("rate_gbps")
    where = f"{device}/{(port or {}).get('port')}"
    if not rate:
        return _check(host, "rdma", name, "skipped", "skipped: port rate unknown", bw, unit="Gb/s")
    row = rdma_bw_reference(references, rate)
    if row is not None:
        wanted = row.get("size_bytes")
        if wanted and int(summary.get("bytes") or 0) < int(wanted):
            return _check(
                host,
                "rdma",
                name,
                "skipped",
                f"skipped: the ib_write_bw reference for {row.get('name') or rate} ({rate} Gb/s) applies at "
                f"{wanted} B messages ({_cite(row)}); measured {bw} Gb/s at {summary.get('bytes')} B: set "
                f"fabric_validate_rdma_bw_size to at least {wanted}",
                bw,
                unit="Gb/s",
            )
        fraction = float(thresholds["ib_write_bw_fraction_of_reference"]["value"])
        limit = round(fraction * float(row["bw_gbps"]), 3)
        return _check(
            host,
            "rdma",
            name,
            "passed" if bw >= limit else "failed",
            f"ib_write_bw to {peer}: {bw} Gb/s, threshold {limit} Gb/s ({fraction} x {row['bw_gbps']} Gb/s published "
            f"for {' '.join(filter(None, [row.get('name'), f'{rate} Gb/s']))} ports: {_cite(row)})"
            f"{_from_json(summary)}",
            bw,
            limit,
            "Gb/s",
        )
    policy = thresholds["ib_write_bw_fraction_of_rate"]
    if policy.get("source") != "site override":
        return _check(
            host,
            "rdma",
            name,
            "skipped",
            f"skipped: no published ib_write_bw figure for a {rate} Gb/s port ({where}); measured {bw} Gb/s. "
            "Published rows: "
            + (", ".join(f"{r['rate_gbps']} Gb/s" for r in references or []) or "none")
            + ". Add a row with its source to fabric_validate_rdma_bw_references, or judge against a fraction of the "
            "port rate with fabric_validate_threshold_overrides.ib_write_bw_fraction_of_rate",
            bw,
            unit="Gb/s",
        )
    fraction = float(policy["value"])
    limit = round(fraction * rate, 3)
    return _check(
        host,
        "rdma",
        name,
        "passed" if bw >= limit else "failed",
        f"ib_write_bw to {peer}: {bw} Gb/s, threshold {limit} Gb/s "
        f"({fraction} x {rate} Gb/s port rate of {where}, site override: no published figure for this speed)"
        f"{_from_json(summary)}",
        bw,
        limit,
        "Gb/s",
    )


def _attempts(runs):
    """{(test, peer): [run, ...]} in the order measured: a measurement run again after it failed is its next attempt."""
    grouped = {}
    for run in runs:
        grouped.setdefault((run["test"], run.get("peer")), []).append(run)
    return grouped


def rdma_checks(host, data, thresholds, device_name=None, bw_references=None):
    if not (data.get("ib") or {}).get("rdma_present"):
        return [_check(host, "rdma", "rdma", "skipped", "skipped: no RDMA device")]
    runs = data.get("rdma") or []
    if not runs:
        served = data.get("rdma_served") or []
        if served:
            # With two hosts the ring holds one pair: the server's measurement is the client's check.
            parts = ", ".join(f"{s['test']} for {s.get('peer')}" for s in served)
            return [_check(host, "rdma", "rdma", "skipped", f"skipped: served {parts}; judged on the client")]
        return [_check(host, "rdma", "rdma", "skipped", "skipped: no peer to test against")]
    checks = []
    device, port = _rdma_port(data, device_name)
    for attempts in _attempts(runs).values():
        # parsed: which of perftest's outputs was judged, its JSON report (--out_json) or its text.
        judged = [
            dict(_rdma_run_check(host, run, thresholds, device, port, bw_references), parsed=_parsed(run))
            for run in attempts
        ]
        final = dict(judged[-1])
        if len(judged) > 1:
            # Only a failure is run again, so the last attempt decides; every attempt stays in the report.
            final["attempts"] = [
                {"attempt": n, "status": c["status"], "measured": c["measured"], "message": c["message"]}
                for n, c in enumerate(judged, 1)
            ]
            earlier = "; ".join(f"attempt {n}: {c['status']}, {c['message']}" for n, c in enumerate(judged[:-1], 1))
            final["message"] = f"{final['message']} (attempt {len(judged)} of {len(judged)}; {earlier})"
        checks.append(final)
    return checks


def rdma_retry_rounds(hosts, records, thresholds, device_name=None, attempt=2, bw_references=None):
    """The rounds to run for attempt ``attempt``: every measurement (client, server, test) whose attempts so far all
    failed and number attempt - 1, scheduled like rdma_rounds (no host twice in a round), each as [pairs, test].
    ``records``: each host's record (same order as ``hosts``). Every host computes the same list from the same
    records, so the rounds line up as the first ones do. A passed or skipped measurement is never run again; a
    pre-measured one (fabric_validate_measurements) is scheduled once more, but its hosts measure nothing live, so
    it keeps one attempt and is not scheduled again."""
    attempt = int(attempt)
    retry = {}
    for host, record in zip(hosts or [], records or []):
        record = record or {}
        if not (record.get("ib") or {}).get("rdma_present"):
            continue
        device, port = _rdma_port(record, device_name)
        for (test, peer), runs in _attempts(record.get("rdma") or []).items():
            if len(runs) != attempt - 1:
                continue
            if all(
                _rdma_run_check(host, run, thresholds, device, port, bw_references)["status"] == "failed"
                for run in runs
            ):
                retry.setdefault(test, []).append({"server": peer, "client": host})
    return [[pairs, test] for test in RDMA_TESTS if test in retry for pairs in rdma_rounds(pairs=retry[test])]


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


def node_check_records(host, data):
    """The health checks of one host from its own node check (``gpucluster-fabric-check --json -``, which the fleet
    check runs once per node): the check records it wrote, under this host's name. A node whose check could not run
    (not installed, no intent) gets one failed ``node_check`` check saying why."""
    report = data.get("report")
    if isinstance(report, dict) and isinstance(report.get("checks"), list):
        return [dict(check, host=host) for check in report["checks"]]
    why = (report or {}).get("reason") if isinstance(report, dict) else data.get("error")
    message = (
        f"the node check could not check {host}: {why or 'no report'}; run site.yml, which writes the host's intent "
        "and installs the check (role node_check)"
    )
    return [_check(host, "health", "node_check", "failed", message)]


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
        if "health" in tiers and "node_check" in data:  # the fleet check: what the node judged itself
            checks.extend(node_check_records(host, data["node_check"]))
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
