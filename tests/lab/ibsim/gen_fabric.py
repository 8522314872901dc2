#!/usr/bin/env python3
"""Generate an ibsim net file (ibnetdiscover format) whose HCA port GUIDs are the inventory's.

The fabric is a two-level fat-tree: leaf switches carry the HCAs, every leaf has `--links-per-spine` uplinks to every
spine. Each entry of a host's `fabric_port_guids` becomes one single-port HCA (as ConnectX-4 and newer expose one port
per PCI function) with NodeDescription "<host> mlx5_<n>", so `smpquery nodedesc` and OpenSM logs name the host.

Input is one of:
  --inventory PATH      an Ansible inventory (read through `ansible-inventory --list`)
  --hostvars-json PATH  JSON: `ansible-inventory --list` output, {host: {fabric_port_guids: [...]}} or
                        {host: [guids]}; '-' reads stdin
  --synthetic N         N hosts with 1 port GUID each (for benchmarks)

ibsim quirk the generator handles: ibsim gives an HCA's port p the GUID caguid + p, ignoring the "(guid)" written on
the port line, so caguid is written as port GUID - 1. Attach a libumad program to an HCA with
SIM_HOST=H-<16 hex digits of its port GUID> (see `--sim-host`).

ibsim's compiled-in limits (default -N/-S/-P): 2048 nodes, 256 switches, 13,312 ports; the generator refuses larger
fabrics unless --no-limits is given (then pass ibsim larger -N/-S/-P yourself).
"""

import argparse
import json
import math
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import collection  # noqa: E402  tests/lab/collection.py

collection.importable()
from ansible_collections.gpucluster.fabric.plugins.module_utils.opensm_partitions import collect_port_guids  # noqa: E402

IBSIM_MAX_NODES = 2048
IBSIM_MAX_SWITCHES = 256
IBSIM_MAX_PORTS = 13312
# Switch GUIDs come from a range that no HCA in the inventory may use (checked).
DEFAULT_SWITCH_GUID_BASE = 0x0008F10400000000
# Summary of the last fabric main() generated (read by the benchmark).
describe_last = ""


def load_hostvars(args):
    if args.synthetic:
        return {
            f"node{i:05d}": {"fabric_port_guids": [f"0x0002c903{i:08x}"]} for i in range(1, args.synthetic + 1)
        }, None
    if args.inventory:
        out = subprocess.run(
            ["ansible-inventory", "-i", args.inventory, "--list"], check=True, capture_output=True, text=True
        ).stdout
        data = json.loads(out)
    elif args.hostvars_json == "-":
        data = json.load(sys.stdin)
    else:
        with open(args.hostvars_json) as handle:
            data = json.load(handle)
    if "_meta" in data:
        hostvars = data["_meta"].get("hostvars", {})
        order = []
        for group in data.get("all", {}).get("children", []):
            order.extend(data.get(group, {}).get("hosts", []))
        order.extend(h for h in hostvars if h not in order)
        return hostvars, order
    # {host: [guids]} is accepted as shorthand for {host: {fabric_port_guids: [guids]}}
    return {h: ({"fabric_port_guids": v} if isinstance(v, list) else v) for h, v in data.items()}, None


def build_fabric(hcas, hcas_per_leaf, spines, links_per_spine, switch_guid_base):
    """hcas: [(port_guid_int, description)]. Returns (switches, hca_nodes) ready to print."""
    if hcas_per_leaf < 1 or spines < 1 or links_per_spine < 1:
        raise SystemExit("gen_fabric: --hcas-per-leaf, --spines and --links-per-spine must be >= 1")
    leaves = max(2, math.ceil(len(hcas) / hcas_per_leaf))
    leaf_ports = hcas_per_leaf + spines * links_per_spine
    spine_ports = leaves * links_per_spine
    if max(leaf_ports, spine_ports) > 254:
        raise SystemExit(f"gen_fabric: a switch would need {max(leaf_ports, spine_ports)} ports (max 254)")
    switches = []
    for s in range(spines):
        switches.append(
            {"guid": switch_guid_base + 1 + s, "name": f"spine{s + 1:02d}", "ports": spine_ports, "links": {}}
        )
    for leaf in range(leaves):
        guid = switch_guid_base + 0x10000 + leaf
        switches.append({"guid": guid, "name": f"leaf{leaf + 1:03d}", "ports": leaf_ports, "links": {}})
    leaf_sw = switches[spines:]
    for leaf_index, leaf in enumerate(leaf_sw):
        for s, spine in enumerate(switches[:spines]):
            for link in range(links_per_spine):
                leaf_port = hcas_per_leaf + 1 + s * links_per_spine + link
                spine_port = 1 + leaf_index * links_per_spine + link
                leaf["links"][leaf_port] = (sw_id(spine), spine_port, None)
                spine["links"][spine_port] = (sw_id(leaf), leaf_port, None)
    hca_nodes = []
    for index, (port_guid, desc) in enumerate(hcas):
        leaf = leaf_sw[index // hcas_per_leaf]
        leaf_port = index % hcas_per_leaf + 1
        node = {"port_guid": port_guid, "desc": desc, "leaf": leaf, "leaf_port": leaf_port}
        leaf["links"][leaf_port] = (hca_id(port_guid), 1, port_guid)
        hca_nodes.append(node)
    return switches, hca_nodes


def sw_id(switch):
    return f"S-{switch['guid']:016x}"


def hca_id(port_guid):
    return f"H-{port_guid:016x}"


def render(switches, hca_nodes, title):
    lines = [f"# ibsim fabric generated by tests/lab/ibsim/gen_fabric.py: {title}", ""]
    for switch in switches:
        lines.append(f"switchguid=0x{switch['guid']:016x}")
        lines.append(f'Switch\t{switch["ports"]} "{sw_id(switch)}"\t\t# "{switch["name"]}" base port 0')
        for port in sorted(switch["links"]):
            remote, remote_port, remote_guid = switch["links"][port]
            guid_part = f"({remote_guid:016x})" if remote_guid is not None else ""
            lines.append(f'[{port}]\t"{remote}"[{remote_port}]{guid_part}')
        lines.append("")
    for node in hca_nodes:
        lines.append(f"caguid=0x{node['port_guid'] - 1:016x}")
        lines.append(f'Ca\t1 "{hca_id(node["port_guid"])}"\t\t# "{node["desc"]}"')
        lines.append(f'[1]({node["port_guid"]:016x})\t"{sw_id(node["leaf"])}"[{node["leaf_port"]}]')
        lines.append("")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--inventory", help="Ansible inventory path")
    source.add_argument("--hostvars-json", help="JSON file with hostvars ('-' for stdin)")
    source.add_argument("--synthetic", type=int, metavar="N", help="N synthetic hosts, one port GUID each")
    parser.add_argument("--hcas-per-leaf", type=int, default=4)
    parser.add_argument("--spines", type=int, default=2)
    parser.add_argument("--links-per-spine", type=int, default=1)
    parser.add_argument("--switch-guid-base", type=lambda v: int(v, 0), default=DEFAULT_SWITCH_GUID_BASE)
    parser.add_argument("--no-limits", action="store_true", help="do not enforce ibsim's default size limits")
    parser.add_argument("--sim-host", metavar="HOST", help="print SIM_HOST for HOST's first port GUID and exit")
    parser.add_argument("-o", "--output", default="-", help="net file to write (default stdout)")
    args = parser.parse_args(argv)

    hostvars, order = load_hostvars(args)
    hosts = order or sorted(hostvars)
    guids_by_host, _owners, errors = collect_port_guids(hostvars, hosts)
    if errors:
        raise SystemExit("gen_fabric: invalid inventory:\n" + "\n".join(errors))
    if args.sim_host:
        guids = guids_by_host.get(args.sim_host)
        if not guids:
            raise SystemExit(f"gen_fabric: host {args.sim_host} has no fabric_port_guids")
        print(hca_id(int(guids[0], 16)))
        return 0
    hcas = []
    for host in hosts:
        for index, guid in enumerate(guids_by_host[host]):
            hcas.append((int(guid, 16), f"{host} mlx5_{index}"))
    if not hcas:
        raise SystemExit("gen_fabric: no host has fabric_port_guids")
    switches, hca_nodes = build_fabric(
        hcas, args.hcas_per_leaf, args.spines, args.links_per_spine, args.switch_guid_base
    )
    switch_guids = {s["guid"] for s in switches}
    hca_guids = {g for g, _ in hcas} | {g - 1 for g, _ in hcas}
    clash = switch_guids & hca_guids
    if clash:
        raise SystemExit(
            f"gen_fabric: switch GUID(s) {sorted(hex(g) for g in clash)} clash with HCA GUIDs; "
            "pass another --switch-guid-base"
        )
    ports = sum(s["ports"] + 1 for s in switches) + 2 * len(hca_nodes)
    if not args.no_limits and (
        len(switches) > IBSIM_MAX_SWITCHES
        or len(switches) + len(hca_nodes) > IBSIM_MAX_NODES
        or ports > IBSIM_MAX_PORTS
    ):
        raise SystemExit(
            f"gen_fabric: {len(switches)} switches, {len(hca_nodes)} HCAs, {ports} ports exceed ibsim's default limits "
            f"({IBSIM_MAX_SWITCHES} switches, {IBSIM_MAX_NODES} nodes, {IBSIM_MAX_PORTS} ports); use --no-limits and "
            "ibsim -N/-S/-P, or more HCAs per leaf"
        )
    title = (
        f"{len(hca_nodes)} HCAs, {len(switches) - args.spines} leaves x {args.hcas_per_leaf} HCA ports, "
        f"{args.spines} spines, {args.links_per_spine} link(s) per leaf-spine pair"
    )
    global describe_last
    describe_last = f"{title}; {len(switches)} switches, {ports} ports"
    text = render(switches, hca_nodes, title)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        with open(args.output, "w") as handle:
            handle.write(text)
    print(f"gen_fabric: {title}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
