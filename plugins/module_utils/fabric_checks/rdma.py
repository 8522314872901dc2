# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""The RDMA tier: pairing hosts into rounds of perftest runs, their command lines, and the bandwidth and latency
judged against the published figure for the port's speed.
"""

import base64

from ..perftest import summarize_perftest_run
from .nccl import _cite
from .record import _check, _rdma_port


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
