# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""The one check record every tier makes (``check``: host, tier, check, status, measured, threshold, unit,
message), and the port helpers the tiers share.
"""

STATUSES = ("passed", "failed", "skipped")


def check(host, tier, check, status, message, measured=None, threshold=None, unit=None):
    """One verdict, as report.json, the JUnit and Markdown reports, the heat map and the node check's metrics read it:
    ``status`` one of STATUSES (skipped means not measured, with the reason in ``message``, never a pass)."""
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


_check = check  # the name the tiers call it by


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
