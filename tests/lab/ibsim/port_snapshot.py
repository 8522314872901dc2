#!/usr/bin/env python3
"""Lab only: keep a sysfs-shaped view of this node's simulated HCA port up to date (not shipped).

A lab GPU node is a container on a kernel without RDMA, so /sys/class/infiniband is empty. Its "HCA" is a port of the
ibsim fabric that real OpenSM (on the lab's subnet manager) configures. libumad2sim, when a process first looks at
/sys/class/infiniband, asks ibsim for the attached port's NodeInfo, PortInfo and P_Key table and writes them as a
sysfs tree under ./sys-<pid> (state, phys_state, rate, lid, sm_lid, gids, pkeys), removed again at exit. This loop
starts such a process every --interval seconds and copies that tree to <dest>/sys/class/infiniband (atomic rename),
so role fabric_validate (fabric_validate_sysfs_root=<dest>) judges what the simulated fabric really reports: a port
stays INIT until OpenSM has swept it, and becomes ACTIVE with a LID and the SM's LID afterwards.
<dest>/sys/class/net and <dest>/sys/module link to the node's real /sys entries.

Environment (from the unit): LD_PRELOAD is NOT set for this loop; the child gets it. SIM_HOST names the node's
simulated HCA (H-<port GUID>), IBSIM_SERVER_NAME the subnet manager host that runs ibsim in remote mode.
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


def snapshot(dest, timeout):
    sys_dir = os.path.join(dest, "sys")
    class_dir = os.path.join(sys_dir, "class")
    os.makedirs(class_dir, exist_ok=True)
    for name, target in (("net", "/sys/class/net"), (os.path.join("..", "module"), "/sys/module")):
        link = os.path.normpath(os.path.join(class_dir, name))
        if not os.path.islink(link):
            os.symlink(target, link)
    work = tempfile.mkdtemp(prefix="snap-", dir=dest)
    staged = os.path.join(work, "infiniband")
    env = dict(os.environ, LD_PRELOAD=UMAD2SIM)
    try:
        subprocess.run(
            [sys.executable, "-c", CHILD, staged], cwd=work, env=env, check=True, timeout=timeout, capture_output=True
        )
        final = os.path.join(class_dir, "infiniband")
        old = final + ".old"
        if os.path.isdir(final):
            os.rename(final, old)
        os.rename(staged, final)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", default="/run/gpucluster-lab/sysfs")
    parser.add_argument("--interval", type=float, default=2.0)
    parser.add_argument("--once", action="store_true", help="take one snapshot and exit")
    args = parser.parse_args()
    os.makedirs(args.dest, exist_ok=True)
    while True:
        try:
            snapshot(args.dest, timeout=30)
        except (subprocess.SubprocessError, OSError) as exc:
            print(f"snapshot failed: {exc}", file=sys.stderr, flush=True)
            if args.once:
                return 1
        if args.once:
            return 0
        time.sleep(args.interval)


if __name__ == "__main__":
    sys.exit(main())
