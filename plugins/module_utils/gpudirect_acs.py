# Copyright: gpucluster.fabric contributors
# Apache License 2.0 (see LICENSE)
"""Role rdma_modules' ACS clearing (rdma_modules_acs_clear): a switch port between a GPU and an RDMA NIC with ACS
Request or Completion Redirect on sends GPUDirect peer-to-peer traffic up to the root complex, slower, or hangs it
(NCCL's troubleshooting, "PCI Access Control Services (ACS)"; NVIDIA/nccl#2079). Linux turns ACS on where an IOMMU is
on, at every boot, so clearing it once does not last: a oneshot unit clears it at every boot, with the very code the
node check reads it with (module_utils/pcie.py, in the node's one library: module_utils/node_library.py), and the
module clears it now. Only the switch downstream ports of pairs that meet in a switch (pcie.acs_clear_plan), never
while the IOMMU translates for them.

Opt-in and reversible: turning the setting off removes the unit and its code (the bridges get their ACS back at the
next boot). Standard library only (Python 3.8 targets).
"""

from . import node_library, pcie

# pcie.py in a package of its own in the node's one library (module_utils/node_library.py).
PACKAGE = "gpucluster_fabric_acs"
CODE = f"{node_library.LIBRARY}/{PACKAGE}/pcie.py"
UNIT = "gpucluster-acs-clear.service"
UNIT_FILE = "/etc/systemd/system/" + UNIT


def errors(acs_clear, mode, root, host_prefix=""):
    """Why clearing is refused on this host: it serves GPUDirect RDMA only (``mode``: the host's decided GPUDirect
    mode), on a host with at least one GPU and RDMA NIC to clear between."""
    if not acs_clear:
        return []
    if mode in (None, "", "none"):
        return [
            f"{host_prefix}rdma_modules_acs_clear is set, but GPUDirect RDMA is off on this host (mode "
            f"{mode or 'none'}): no peer-to-peer path to clear ACS on; unset rdma_modules_acs_clear for this host"
        ]
    gpus, nics = pcie.gpudirect_functions(root)
    if not gpus or not nics:
        return [
            f"{host_prefix}rdma_modules_acs_clear is set, but this host has no GPUDirect path ({len(gpus)} NVIDIA GPU,"
            f" {len(nics)} RDMA NIC on its PCI bus): unset rdma_modules_acs_clear for this host"
        ]
    _bridges, refusal = pcie.acs_clear_plan(root)
    if refusal:
        return [f"{host_prefix}rdma_modules_acs_clear is set, but {refusal}, or unset rdma_modules_acs_clear"]
    return []


def unit(header):
    """The oneshot unit (systemd.service(5)) that clears ACS redirect at boot, before GPU jobs start."""
    lines = [
        "[Unit]",
        "Description=Clear PCIe ACS redirect between GPUs and RDMA NICs (GPUDirect RDMA)",
        "Documentation=https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html",
        "DefaultDependencies=no",
        "After=local-fs.target systemd-modules-load.service",
        "Before=sysinit.target slurmd.service nvidia-persistenced.service",
        "",
        "[Service]",
        "Type=oneshot",
        "RemainAfterExit=yes",
        f"ExecStart=/usr/bin/python3 {CODE} --clear-acs-redirect",
        "",
        "[Install]",
        "WantedBy=sysinit.target",
    ]
    return (header.rstrip("\n") + "\n" if header else "") + "\n".join(lines) + "\n"


def apply(module, applier, acs_clear, header):
    """Install (or, not asked, remove) the unit and its code, each only where it differs; clear what redirects now.
    Returns {clear, unit, bridges: [{address, before, after}]} (in check mode: what would be cleared)."""
    root = applier.root
    live = root == "/"
    node_library.ship(applier, PACKAGE, [pcie], "Role rdma_modules' ACS clearing at boot.", wanted=acs_clear)
    node_library.remove_legacy(applier, ["pcie.py"])
    before = len(applier.changes)
    applier.file(UNIT_FILE, unit(header) if acs_clear else None)
    changed = len(applier.changes) > before
    outcome = {"clear": acs_clear, "unit": UNIT if acs_clear else None, "bridges": []}
    systemctl = module.get_bin_path("systemctl") if live else None
    if systemctl and changed:
        applier.changes.append({"what": "systemd", "why": "daemon-reload, to read " + UNIT_FILE})
        if not module.check_mode:
            module.run_command([systemctl, "daemon-reload"], check_rc=True)
    if systemctl and acs_clear:
        rc, _out, _err = module.run_command([systemctl, "is-enabled", UNIT])
        if rc != 0:
            applier.changes.append({"what": UNIT, "why": "not enabled"})
            if not module.check_mode:
                module.run_command([systemctl, "enable", UNIT], check_rc=True)
    if not acs_clear:
        return outcome
    bridges, refusal = pcie.acs_clear_plan(root)
    if refusal:
        module.fail_json(msg=f"rdma_modules_acs_clear: ACS left as it is: {refusal}", **applier.report(outcome))
    failed = []
    for bridge in bridges:
        names = " ".join(pcie.acs_names(bridge["control"] & pcie.ACS_REDIRECT))
        applier.changes.append(
            {"what": f"ACS {bridge['address']}", "why": f"{names} on (ACS Control {bridge['control']:#06x})"}
        )
        cleared = {
            "address": bridge["address"],
            "before": bridge["control"],
            "after": bridge["control"] & ~pcie.ACS_REDIRECT,
        }
        if not module.check_mode:
            try:
                written = pcie.clear_acs_redirect(root, bridge["address"])
            except OSError as exc:
                failed.append(f"{bridge['address']} ({exc.strerror or exc})")
                continue
            cleared["after"] = written[1] if written else None
        outcome["bridges"].append(cleared)
    if failed:
        done = ", ".join(b["address"] for b in outcome["bridges"]) or "none"
        module.fail_json(
            msg=f"rdma_modules_acs_clear: ACS cleared on {len(outcome['bridges'])} of {len(bridges)} bridge(s) "
            f"({done}); not on {', '.join(failed)}: GPUDirect traffic through those still goes to the root complex",
            **applier.report(outcome),
        )
    return outcome
