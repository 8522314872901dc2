#!/usr/bin/env python3
"""Lab only: keep a sysfs-shaped view of the GPU nodes' simulated HCA ports up to date (not shipped).

A lab GPU node is a container on a kernel without RDMA, so /sys/class/infiniband is empty. Its "HCA" is a port of the
ibsim fabric that real OpenSM (on the lab's subnet manager) configures. libumad2sim, when a process first looks at
/sys/class/infiniband, asks ibsim for the attached port's NodeInfo, PortInfo and P_Key table and writes them as a
sysfs tree under ./sys-<pid> (state, phys_state, rate, lid, sm_lid, gids, pkeys), removed again at exit.

This loop runs on the subnet manager, next to ibsim (ibsim's remote mode, which would let the GPU node containers
attach themselves, panicked or crashed its clients in our runs): every --interval seconds, for each
--port NAME=SIM_HOST it starts such a process attached to that HCA and moves the tree to <dest>/NAME/infiniband
(atomic rename). <dest>/NAME is bind-mounted read-only into GPU node NAME, where role fabric_validate reads it
(fabric_validate_sysfs_root). A port reads INIT until OpenSM has swept it and ACTIVE, with a LID and the SM's LID,
afterwards.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

UMAD2SIM = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"

# Runs under LD_PRELOAD=libumad2sim.so: listing /sys/class/infiniband makes umad2sim build ./sys-<pid>; copy it.
CHILD = r"""
import os, shutil, sys
os.listdir("/sys/class/infiniband")
src = os.path.join(os.getcwd(), "sys-%d" % os.getpid(), "sys", "class", "infiniband")
shutil.copytree(src, sys.argv[1], symlinks=True)
"""


def snapshot(dest, name, sim_host, timeout):
    """One view: <dest>/<name>/infiniband, a symbolic link swapped atomically to the newest tree (the one before it
    is kept until the next swap, so a reader that is walking it never sees it disappear)."""
    node_dir = os.path.join(dest, name)
    os.makedirs(node_dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix=".snap-", dir=node_dir)
    env = dict(os.environ, LD_PRELOAD=UMAD2SIM, SIM_HOST=sim_host)
    try:
        subprocess.run(
            [sys.executable, "-c", CHILD, os.path.join(work, "infiniband")],
            cwd=work,
            env=env,
            check=True,
            timeout=timeout,
            capture_output=True,
        )
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    final = os.path.join(node_dir, "infiniband")
    previous = os.readlink(final).split("/")[0] if os.path.islink(final) else None
    link = os.path.join(node_dir, ".infiniband.new")
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(os.path.basename(work) + "/infiniband", link)
    os.replace(link, final)
    for entry in os.listdir(node_dir):
        if entry.startswith(".snap-") and entry not in (os.path.basename(work), previous):
            shutil.rmtree(os.path.join(node_dir, entry), ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", required=True, help="directory holding one view per node")
    parser.add_argument("--port", action="append", default=[], metavar="NAME=SIM_HOST", help="node name and HCA")
    parser.add_argument("--interval", type=float, default=2.0)
    parser.add_argument("--once", action="store_true", help="take one snapshot of each port and exit")
    args = parser.parse_args()
    ports = [item.split("=", 1) for item in args.port]
    if not ports or any(len(pair) != 2 or not all(pair) for pair in ports):
        parser.error("give at least one --port NAME=SIM_HOST")
    failed = False
    while True:
        for name, sim_host in ports:
            try:
                snapshot(args.dest, name, sim_host, timeout=30)
            except (subprocess.SubprocessError, OSError) as exc:
                failed = True
                print(f"{name} ({sim_host}): snapshot failed: {exc}", file=sys.stderr, flush=True)
        if args.once:
            return 1 if failed else 0
        time.sleep(args.interval)


if __name__ == "__main__":
    sys.exit(main())
