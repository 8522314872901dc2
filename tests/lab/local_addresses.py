"""Refuse any address the lab gives its hosts or the controller that is not on an interface this project made.

    local_addresses.py <address or URL> [...]

Each address must be reached on this machine through an interface of the project's own: the mirror's bridge
(`gpucluster-svc`, tests/lab/mirror/mirror.sh) or the bridge of a podman network named `gpucluster-*` (the lab's
management and fabric networks, the role scenarios' and the tarball smoke's). An address routed through any other
interface (the default route, off the machine, or podman's default network, which another tool may or may not have
made) fails, named with the interface it would leave through. Exit status 0 when all are, 1 otherwise.
"""

import json
import subprocess
import sys
import urllib.parse

MIRROR_BRIDGE = "gpucluster-svc"
NETWORK_PREFIX = "gpucluster-"


def _run(argv):
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=30).stdout


def project_interfaces(run=_run):
    """{interface name: what made it}: the mirror's bridge and the bridges of the project's podman networks."""
    interfaces = {MIRROR_BRIDGE: "the lab mirror's bridge (tests/lab/mirror/mirror.sh)"}
    for network in json.loads(run(["podman", "network", "ls", "--format", "json"])):
        name = network.get("name") or network.get("Name", "")
        bridge = network.get("network_interface") or network.get("NetworkInterface")
        if name.startswith(NETWORK_PREFIX) and bridge:
            interfaces[bridge] = f"podman network {name}"
    return interfaces


def host_of(value):
    """The address in an address or a URL."""
    return urllib.parse.urlsplit(value).hostname if "://" in value else value


def interface_of(address, run=_run):
    """The interface that holds `address` (a local one) or that traffic to it leaves through."""
    route = json.loads(run(["ip", "-j", "route", "get", address]))[0]
    if route.get("type") == "local":
        holders = json.loads(run(["ip", "-j", "-4", "addr", "show", "to", f"{address}/32"]))
        return holders[0]["ifname"] if holders else route["dev"]
    return route["dev"]


def problems(values, run=_run):
    """One line per address that is not on a project interface."""
    ours = project_interfaces(run)
    found = []
    for value in values:
        address = host_of(value)
        interface = interface_of(address, run)
        if interface not in ours:
            found.append(
                f"{value}: reached through {interface}, which this project did not make; the lab's addresses live "
                f"on {', '.join(sorted(ours))}"
            )
    return found


def main(argv):
    if not argv:
        sys.exit(__doc__)
    found = problems(argv)
    for line in found:
        print(f"local_addresses.py: {line}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
