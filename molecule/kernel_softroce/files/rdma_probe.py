#!/usr/bin/python3
"""Read a VM's RDMA state in one pass and print it as JSON (the kernel lab's verify asserts on it).

Usage: rdma_probe.py MODULE[,MODULE...] RXE:NETDEV:IPV4 [RXE:NETDEV:IPV4 ...]

One Python start instead of one Ansible module per check: under qemu TCG each module run costs seconds.
"""

import ipaddress
import json
import os
import subprocess
import sys


def run(*argv):
    try:
        result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except OSError as error:
        return 127, str(error)
    return result.returncode, result.stdout


def run_json(*argv):
    rc, out = run(*argv)
    try:
        return json.loads(out) if rc == 0 else {"error": out}
    except ValueError:
        return {"error": out}


def roce_v2_gid_index(rxe, ipv4):
    """Index of the RoCE v2 GID that carries ipv4 (IPv4-mapped IPv6), or None."""
    want = ipaddress.IPv6Address("::ffff:" + ipv4).exploded
    port = f"/sys/class/infiniband/{rxe}/ports/1"
    try:
        indexes = sorted(os.listdir(port + "/gids"), key=int)
    except OSError:
        return None
    for index in indexes:
        try:
            with open(f"{port}/gids/{index}") as gid, open(f"{port}/gid_attrs/types/{index}") as kind:
                if gid.read().strip() == want and kind.read().strip() == "RoCE v2":
                    return int(index)
        except OSError:
            continue
    return None


def main():
    modules = sys.argv[1].split(",")
    softroce = [spec.split(":") for spec in sys.argv[2:]]
    # Waits for the end of boot, so a check right after a reboot sees the final state.
    _, state = run("timeout", "300", "systemctl", "is-system-running", "--wait")
    _, failed = run("systemctl", "--failed", "--no-legend", "--plain")
    probe = {
        "system_state": state.strip(),
        "failed_units": failed.splitlines(),
        "modules": {name: os.path.isdir("/sys/module/" + name) for name in modules},
        "rdma_links": run_json("rdma", "-j", "link", "show"),
        "netdevs": {},
        "devinfo": {},
        "gid_index": {},
    }
    for rxe, netdev, ipv4 in softroce:
        links = run_json("ip", "-j", "address", "show", "dev", netdev)
        probe["netdevs"][netdev] = links[0] if isinstance(links, list) and links else links
        rc, out = run("ibv_devinfo", "-v", "-d", rxe)
        probe["devinfo"][rxe] = out
        probe["gid_index"][rxe] = roce_v2_gid_index(rxe, ipv4)
    json.dump(probe, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
