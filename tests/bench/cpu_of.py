"""Wall time and controller CPU of one command, including the ssh ControlPersist masters it leaves behind.

    python3 tests/bench/cpu_of.py [--json FILE] -- make lab

`time make lab` misses the CPU of ssh masters: they daemonise, so no process of the command reaps them. This runs
the command as a child subreaper (site_bench.subreaper), then stops the ssh masters it left running and reaps them
and its exited orphans (podman exec's conmon), so that their CPU is counted with the rest (RUSAGE_CHILDREN). The
containers' own monitors (conmon) of a command that starts containers are re-parented to it too and left running.
Masters that were running before the command started are not its own: stop them first
(`pkill -f 'ssh: .*\\[mux\\]'`) for a cold measurement. Exits with the command's status.
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import site_bench  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="append the measurement to this file (one JSON object per line)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command")
    site_bench.subreaper(True)
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    rc = subprocess.run(command, check=False).returncode
    wall = time.monotonic() - t0
    masters = site_bench.reap_leftovers()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    row = {
        "command": " ".join(command),
        "rc": rc,
        "wall_s": round(wall, 1),
        "cpu_s": round(site_bench.cpu(after) - site_bench.cpu(before), 1),
        "leftover_processes_reaped": masters,
        "load_1min": [load, os.getloadavg()[0]],
    }
    print("cpu_of: " + json.dumps(row), file=sys.stderr)
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(row) + "\n")
    return rc


if __name__ == "__main__":
    sys.exit(main())
