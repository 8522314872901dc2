# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""The health tier: ports, modules, GPUs and their NICs, GPUDirect, nccl.conf, the RoCE QoS, interface MTUs and the
subnet manager of each port, judged on what one host read (its record); and the records of the nodes' own checks
(node_check.py), which the fleet check reports instead.
"""

from collections.abc import Mapping

from ..nccl import is_debug_only
from ..pcie import ACS_REDIRECT, acs_names
from ..rdma_sysfs import gid_family, gid_ipv4, nccl_gid
from ..sminfo import infiniband_port as _infiniband_port
from ..sminfo import query_ports as sm_query_ports
from ..sminfo import sminfo_outcome
from .record import _check, _ports


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
    checks.extend(pcie_checks(host, data))
    checks.extend(iommu_checks(host, data))
    checks.extend(acs_checks(host, data))
    checks.extend(roce_gid_checks(host, data))
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
        "gid_family": inputs.get("gid_family") or "ipv4",
        # Judged by role nccl's rule: its debug-only names, less those the host allows.
        "nccl_conf": dict(collected.get("nccl_conf") or {}, allowed_debug=list(inputs.get("allowed_debug") or [])),
        "versions": collected.get("versions"),
        "roce_qos": {
            "results": collected.get("roce_qos"),
            "require_pfc": inputs.get("require_pfc", False),
            "declared": list(inputs.get("declared_roce") or []),
        },
        "interfaces": collected.get("interfaces"),
        "pcie": collected.get("pcie"),
        "pcie_paths": collected.get("pcie_paths"),
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
        outcome = sminfo_outcome(record.get("rc"), record.get("stdout"), record.get("stderr"))
        checks.append(one(*sm_verdict(name, outcome, query_host, host, f"at SM LID {sm_lid}")))
    return checks


def sm_verdict(subject, outcome, query_host, host, where_asked=""):
    """(status, message, measured) of one sminfo answer (sminfo_outcome's (kind, detail)) about ``subject`` (a port,
    or a subnet manager asking its fabric), asked on ``query_host`` for ``host``: the one judgement of check
    sm.master, for each port (subnet_manager_checks) and on a subnet manager (node_check)."""
    kind, detail = outcome
    where = "" if query_host == host else f" (asked from {query_host})"
    said = f"; {detail}" if str(detail).startswith("sminfo") else f"; sminfo: {detail}" if detail else ""
    if kind == "answered" and detail["master"]:
        message = (
            f"{subject}: the master SM answers at SM LID {detail['lid']} (GUID {detail['guid']}, priority "
            f"{detail['priority']}, activity count {detail['activity_count']}){where}"
        )
        return "passed", message, detail["state_name"]
    if kind == "answered":
        message = (
            f"{subject}: the SM at SM LID {detail['lid']} (GUID {detail['guid']}, priority {detail['priority']}) "
            f"answers in state {detail['state_name']}, not SMINFO_MASTER{where}: the fabric has no master SM "
            "where it is expected; check the subnet managers (sminfo, systemctl status opensm)"
        )
        return "failed", message, detail["state_name"]
    if kind == "not_installed":
        message = f"skipped: sminfo not found on {query_host}: install infiniband-diags to ask the subnet manager"
        return "skipped", message, None
    if kind == "cannot_query":
        return "skipped", f"skipped: sminfo cannot query {subject} from {query_host}{said}", None
    if kind == "no_sm_lid":
        return "failed", f"{subject}: sminfo finds no SM LID to ask{where}: {SM_HINT}{said}", "SM LID 0"
    said = "; sminfo timed out" if kind == "timeout" else said
    asked = f" {where_asked}" if where_asked else ""
    return "failed", f"{subject}: no subnet manager answers{asked}{where}: {SM_HINT}{said}", "no answer"


def _gpu_health(host, data):
    gpu = data.get("gpu") or {}
    if gpu.get("failed_reason"):
        message = f"{gpu['failed_reason']}: the GPUs cannot be read (a GPU off the bus, or its driver not answering)"
        return [_check(host, "health", "gpu.nic_affinity", "failed", message)]
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


def node_check_records(host, data):
    """The health checks of one host from its own node check (``gpucluster-fabric-check --json -``, which the fleet
    check runs once per node): the check records it wrote, under this host's name. A node whose check could not run
    (not installed, no intent) gets one failed ``node_check`` check saying why."""
    report = data.get("report")
    if isinstance(report, dict) and isinstance(report.get("checks"), list):
        # A check the node's code could not judge (status error: it broke) fails the report, as what it is.
        return [
            dict(check, host=host, status="failed", message=f"the node check broke here: {check['message']}")
            if check.get("status") == "error"
            else dict(check, host=host)
            for check in report["checks"]
        ]
    why = (report or {}).get("reason") if isinstance(report, dict) else data.get("error")
    message = (
        f"the node check could not check {host}: {why or 'no report'}; run site.yml, which writes the host's intent "
        "and installs the check (role node_check)"
    )
    return [_check(host, "health", "node_check", "failed", message)]


def node_judged_checks(host, data):
    """The health tier of one host, as its node judged it (``data['node_check']``): the fleet check's node check, or
    role fabric_validate's collection, which runs the same code (node_check.validate_checks). Where the record also
    holds the sminfo answers (``sm``: role fabric_validate asked them, from another host where
    fabric_validate_sm_query_host says so), each port's ``sm.master`` is judged from those here, in its place."""
    checks = node_check_records(host, data["node_check"])
    if data.get("sm") is None:
        return checks
    answered = subnet_manager_checks(host, data)
    kept = [c for c in checks if not c["check"].startswith("sm.master[")]
    at = next((i for i, c in enumerate(checks) if c["check"].startswith("sm.master[")), len(checks))
    return kept[:at] + answered + kept[at:]


def _text(speed, width):
    shown = "unknown speed" if speed is None else f"{speed:g} GT/s"
    return f"{shown} x{width if width is not None else '?'}"


def _lowest(*values):
    known = [value for value in values if value is not None]
    return min(known) if known else None


def pcie_checks(host, data):
    """``pcie.link[<address>]`` for each device of ``data['pcie']`` (pcie.read_links; None: not read, no check): its
    link runs at the speed and width both it and the port above it can run (``possible``). Fewer lanes fail. A
    lower speed fails too, except on an NVIDIA GPU whose lanes are all there: those GPUs lower the link speed
    themselves when idle, so the speed is reported, skipped."""
    devices = data.get("pcie")
    if devices is None:
        return []
    if not devices:
        return [_check(host, "health", "pcie.link", "skipped", "skipped: no NVIDIA GPU and no PCI RDMA device")]
    checks = []
    for found in devices:
        link, port = found["link"], found["port"] or {}
        name = f"pcie.link[{found['address']}]"
        subject = f"{found['address']} ({found['role']})"
        if link["current_width"] is None and link["current_speed"] is None:
            message = f"skipped: {subject} reports no PCIe link (not a PCIe function, or its link files unreadable)"
            checks.append(_check(host, "health", name, "skipped", message))
            continue
        speed = _lowest(link["max_speed"], port.get("max_speed"))
        width = _lowest(link["max_width"], port.get("max_width"))
        now, possible = _text(link["current_speed"], link["current_width"]), _text(speed, width)
        where = f"device max {_text(link['max_speed'], link['max_width'])}"
        if port:
            where += f", port {port['address']} max {_text(port.get('max_speed'), port.get('max_width'))}"
        narrow = width is not None and (link["current_width"] or 0) < width
        slow = speed is not None and (link["current_speed"] or 0) < speed
        if narrow or (slow and found["role"] != "GPU"):
            message = (
                f"{subject} runs at {now}, possible {possible} ({where}): the link trained down; reseat the card or "
                "its riser, check the slot and cable, and the BIOS's PCIe speed setting, then reboot"
            )
            checks.append(_check(host, "health", name, "failed", message, now, possible))
        elif slow:
            message = (
                f"skipped: {subject} runs at {now}, possible {possible} ({where}): all lanes are up; an idle NVIDIA "
                "GPU lowers its link speed itself (nvidia-smi --help-query-gpu: the link generation 'may be reduced "
                "when the GPU is not in use'), so read it under load (nvidia-smi -q, GPU Link Info)"
            )
            checks.append(_check(host, "health", name, "skipped", message, now, possible))
        else:
            message = f"{subject} runs at {now}, as possible ({where})"
            checks.append(_check(host, "health", name, "passed", message, now, possible))
    return checks


NCCL_TROUBLESHOOTING = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html"


def iommu_checks(host, data):
    """``iommu``: how the IOMMU treats the GPUs and RDMA NICs (pcie.iommu_mode of each in ``data['pcie']``), against
    what the host's GPUDirect RDMA mode (role rdma_modules' decision, ``data['gpudirect']``) needs: with GPUDirect on
    (dmabuf or peermem), a translating IOMMU sends the GPU-NIC traffic through the root complex or stops it (NCCL's
    troubleshooting, "GPU Direct"), so it must be off or in passthrough (iommu=pt)."""
    devices = data.get("pcie")
    if devices is None:
        return []
    modes = {d["address"]: d.get("iommu") or "unknown" for d in devices}
    if not modes:
        return [_check(host, "health", "iommu", "skipped", "skipped: no NVIDIA GPU and no PCI RDMA device")]
    shown = ", ".join(f"{address} {mode}" for address, mode in sorted(modes.items()))
    gpudirect = (data.get("gpudirect") or {}).get("mode")
    translated = sorted(address for address, mode in modes.items() if mode == "translated")
    if gpudirect in ("dmabuf", "peermem") and translated:
        message = (
            f"GPUDirect RDMA ({gpudirect}) with the IOMMU translating for {', '.join(translated)}: peer-to-peer PCIe "
            f"traffic between GPU and NIC goes through the root complex or fails ({NCCL_TROUBLESHOOTING}, GPU Direct); "
            "boot with iommu=pt (passthrough) or with the IOMMU off"
        )
        return [_check(host, "health", "iommu", "failed", message, shown, "off or passthrough")]
    if gpudirect not in ("dmabuf", "peermem"):
        message = f"the IOMMU: {shown}; GPUDirect RDMA is {gpudirect or 'not decided here'}, so any mode serves"
        return [_check(host, "health", "iommu", "passed", message, shown)]
    message = f"the IOMMU: {shown}: GPUDirect RDMA ({gpudirect}) reaches the NIC directly"
    return [_check(host, "health", "iommu", "passed", message, shown, "off or passthrough")]


def roce_gid_checks(host, data):
    """``roce.gid[<dev>/<port>]`` for each RoCE port (Ethernet link layer): a RoCE v2 GID of the address family NCCL
    uses (``gid_family``: role nccl's nccl_ib_addr_family, IPv4 unless the site says IPv6) on the port's interface
    (gid_attrs/types and ndevs). NCCL 2.21 and later choose the GID themselves (NCCL_IB_GID_INDEX -1) by address
    family and range; with only link-local GIDs (fe80::, the interface has no fabric address) they land on one that is
    not routable. The index found is the measurement the fleet compares (fleet.roce_gid_index)."""
    family = data.get("gid_family") or "ipv4"
    label = {"ipv4": "IPv4", "ipv6": "IPv6"}.get(family, family)
    checks = []
    for device, port in _ports(data):
        if port.get("link_layer") != "Ethernet":
            continue
        name = f"roce.gid[{device}/{port['port']}]"
        netdev = port.get("netdev") or "its interface"
        v2 = [g for g in port.get("gids") or [] if g.get("type") == "RoCE v2"]
        first = nccl_gid(port, family)
        threshold = f"RoCE v2 {label}"
        if first:
            address = gid_ipv4(first["gid"]) or first["gid"]
            message = (
                f"{device}/{port['port']}: RoCE v2 GID {first['index']} is {address} on {first.get('ndev') or netdev}, "
                f"the {label} GID NCCL selects (NCCL_IB_GID_INDEX unset or -1, NCCL 2.21+)"
            )
            checks.append(_check(host, "health", name, "passed", message, first["index"], threshold))
        elif v2:
            found = ", ".join(f"{g['index']} ({gid_family(g.get('gid') or '')})" for g in v2)
            message = (
                f"{device}/{port['port']}: no {label} RoCE v2 GID on {netdev} (RoCE v2 GIDs: {found}): NCCL would use "
                f"a GID of another family or one no router forwards; give {netdev} its fabric {label} address (role "
                "fabric_interfaces), or set nccl_ib_addr_family to the family the fabric uses"
            )
            checks.append(_check(host, "health", name, "failed", message, None, threshold))
        else:
            message = (
                f"{device}/{port['port']}: no RoCE v2 GID on {netdev} (types: "
                f"{', '.join(sorted({str(g.get('type')) for g in port.get('gids') or []})) or 'none'}): give {netdev} "
                f"an {label} address; RoCE v1 is not routable"
            )
            checks.append(_check(host, "health", name, "failed", message, None, threshold))
    return checks


def acs_checks(host, data):
    """``pcie.acs``: no switch downstream port between a GPU and an RDMA NIC that meet in a PCIe switch
    (pcie.path_bridges) has ACS Request or Completion Redirect on where GPUDirect RDMA is on: redirected, the GPU-NIC
    traffic goes up to the root complex, slower or not at all (NCCL's troubleshooting, "PCI Access Control Services
    (ACS)"; NVIDIA/nccl#1737, #2079). Pairs that meet only at the root complex are not judged: their traffic crosses
    it whatever ACS says."""
    paths = data.get("pcie_paths")
    if paths is None:
        return []
    if not paths:
        return [_check(host, "health", "pcie.acs", "skipped", "skipped: no GPU and RDMA NIC on this host")]
    if not any(path["bridges"] for path in paths):
        message = (
            f"skipped: none of the {len(paths)} GPU-NIC pair(s) meets in a PCIe switch: no switch port between them "
            "to judge (a pair that meets at the root complex crosses it whatever ACS says)"
        )
        return [_check(host, "health", "pcie.acs", "skipped", message)]
    gpudirect = (data.get("gpudirect") or {}).get("mode")
    cleared_at_boot = bool((data.get("gpudirect") or {}).get("acs_clear"))
    bridges = {bridge["address"]: bridge for path in paths for bridge in path["bridges"]}
    redirecting = sorted(a for a, b in bridges.items() if b["control"] is not None and b["control"] & ACS_REDIRECT)
    unread = sorted(a for a, b in bridges.items() if not b["readable"])
    pairs = len(paths)
    if gpudirect not in ("dmabuf", "peermem"):
        message = f"skipped: GPUDirect RDMA is {gpudirect or 'not decided here'}: no peer-to-peer path to judge"
        return [_check(host, "health", "pcie.acs", "skipped", message, redirecting)]
    if redirecting:
        shown = "; ".join(f"{a} ({', '.join(acs_names(bridges[a]['control']))})" for a in redirecting)
        fix = (
            "gpucluster-acs-clear.service (rdma_modules_acs_clear) did not clear it: systemctl status "
            "gpucluster-acs-clear.service, or run the collection again (--tags rdma_modules)"
            if cleared_at_boot
            else "clear it at every boot (rdma_modules_acs_clear: true; by hand, setpci -s <bridge> "
            "ECAP_ACS+0x6.w=0000), or with the BIOS's ACS setting"
        )
        message = (
            f"ACS redirects peer-to-peer traffic on {len(redirecting)} bridge(s) between the GPUs and NICs: {shown}; "
            f"{fix}: {NCCL_ACS}"
        )
        return [_check(host, "health", "pcie.acs", "failed", message, redirecting, [])]
    if unread:
        message = f"skipped: the configuration space of {', '.join(unread)} cannot be read (run as root)"
        return [_check(host, "health", "pcie.acs", "skipped", message)]
    message = f"no ACS redirect on the {len(bridges)} bridge(s) of the {pairs} GPU-NIC path(s)"
    if cleared_at_boot:
        message += " (cleared at every boot by gpucluster-acs-clear.service: rdma_modules_acs_clear)"
    return [_check(host, "health", "pcie.acs", "passed", message, [], [])]


NCCL_ACS = NCCL_TROUBLESHOOTING + "#pci-access-control-services-acs"


# The unit of an hca.firmware check that fails only because settings wait for a reboot: a planned change on its way
# (hca_firmware_reboot_method), which the node check shows but never drains a node for.
PENDING_REBOOT = "settings waiting for a reboot"


def firmware_checks(host, applied):
    """``hca.firmware[<address>]`` for each adapter module hca_firmware read (``applied``: its result; None: the site
    names no firmware setting, no check). A setting not wanted at the next boot fails with both values and the fix; a
    setting wanted at the next boot but not now fails saying a reboot is pending."""
    if not applied or not applied.get("devices"):
        return []  # no setting named; or the read failed, which drift.hca_firmware reports
    checks = []
    for address, device in sorted(applied["devices"].items()):
        settings = device.get("settings") or {}
        subject = f"{address} ({device.get('device_type') or 'adapter'})"
        name = f"hca.firmware[{address}]"
        wrong = [
            f"{key}: current {item['current']}, next boot {item['next']}, wanted {item['wanted']}"
            for key, item in sorted(settings.items())
            if not item["next_ok"]
        ]
        pending = [
            f"{key}: current {item['current']}, next boot {item['next']}"
            for key, item in sorted(settings.items())
            if item["next_ok"] and not item["current_ok"]
        ]
        bad = len(wrong) + len(pending)
        if wrong:
            message = (
                f"{subject}: {'; '.join(wrong)}: set them (hca_firmware_apply: true, or mstconfig -d {address} set"
                " NAME=VALUE) and reboot the host"
            )
            if pending:
                message += f"; waiting for a reboot: {'; '.join(pending)}"
            checks.append(_check(host, "health", name, "failed", message, bad, 0, "settings"))
        elif pending:
            message = (
                f"{subject}: set for the next boot, not loaded yet: {'; '.join(pending)}: reboot the host (or"
                " hca_firmware_reboot: true) to load them"
            )
            checks.append(_check(host, "health", name, "failed", message, bad, 0, PENDING_REBOOT))
        else:
            listed = ", ".join(f"{key}={item['current']}" for key, item in sorted(settings.items()))
            checks.append(_check(host, "health", name, "passed", f"{subject}: {listed}, as wanted", 0, 0, "settings"))
    return checks
