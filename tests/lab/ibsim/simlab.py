#!/usr/bin/env python3
"""Run real OpenSM on an ibsim fabric and read back what it programmed (lab helper, also used by the benchmark).

    simlab.py --hostvars-json hv.json --partitions parts.json [--sm-host sm1] [--keep]

Generates the fabric with gen_fabric.py, renders partitions.conf with the collection's module_utils, starts
`ibsim -s`, starts `opensm -g <SM port GUID>` under LD_PRELOAD=libumad2sim.so, waits for MASTER and prints each HCA
port's P_Key table (from `smpquery pkeys`) next to the host that owns it. Needs Debian's ibsim-utils, opensm and
infiniband-diags.
"""

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_fabric  # noqa: E402  (it makes the collection importable: tests/lab/collection.py)
from ansible_collections.gpucluster.fabric.plugins.module_utils.opensm_partitions import partitions_conf  # noqa: E402

UMAD2SIM = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"


class SimLab:
    """One ibsim process and one OpenSM attached to it, in a private directory."""

    def __init__(self, workdir, net_file, sm_guid, partitions_file, opensm_conf=None, ibsim_args=()):
        self.workdir = workdir
        self.net_file = net_file
        self.sm_guid = sm_guid
        self.partitions_file = partitions_file
        self.opensm_conf = opensm_conf
        self.ibsim_args = list(ibsim_args)
        self.ibsim = None
        self.opensm = None
        self.env = dict(
            os.environ,
            LD_PRELOAD=UMAD2SIM,
            SIM_HOST=gen_fabric.hca_id(int(sm_guid, 16)),
            OSM_TMP_DIR=workdir,
            OSM_CACHE_DIR=workdir,
        )

    def start_ibsim(self, timeout=600):
        log = open(os.path.join(self.workdir, "ibsim.log"), "w")  # noqa: SIM115 - lives as long as the process
        self.ibsim = subprocess.Popen(
            ["ibsim", "-n", *self.ibsim_args, "-s", self.net_file],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.workdir,
        )
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.ibsim.poll() is not None:
                raise RuntimeError("ibsim exited: " + self.tail("ibsim.log"))
            with open(os.path.join(self.workdir, "ibsim.log")) as handle:
                if "Network simulator ready" in handle.read():
                    return
            time.sleep(0.2)
        raise RuntimeError("ibsim not ready: " + self.tail("ibsim.log"))

    def start_opensm(self):
        cmd = [
            "opensm",
            "-d2",
            "-g",
            self.sm_guid,
            "-P",
            self.partitions_file,
            "-f",
            os.path.join(self.workdir, "osm.log"),
        ]
        if self.opensm_conf:
            cmd[1:1] = ["-F", self.opensm_conf]
        out = open(os.path.join(self.workdir, "opensm.out"), "w")  # noqa: SIM115
        self.opensm = subprocess.Popen(cmd, env=self.env, stdout=out, stderr=subprocess.STDOUT, cwd=self.workdir)

    def wait_master(self, timeout=600):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.opensm.poll() is not None:
                raise RuntimeError("opensm exited: " + self.tail("opensm.out"))
            with open(os.path.join(self.workdir, "opensm.out")) as handle:
                if "Entering MASTER state" in handle.read():
                    return self.sminfo()
            time.sleep(0.2)
        raise RuntimeError("opensm did not reach MASTER: " + self.tail("opensm.out"))

    def wait_sweep_done(self, timeout=600):
        """Wait until OpenSM logs that the subnet is up (first heavy sweep finished)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.opensm.poll() is not None:
                raise RuntimeError("opensm exited: " + self.tail("opensm.out"))
            try:
                with open(os.path.join(self.workdir, "osm.log")) as handle:
                    if "SUBNET UP" in handle.read():
                        return
            except FileNotFoundError:
                pass
            time.sleep(0.2)
        raise RuntimeError("no SUBNET UP: " + self.tail("osm.log"))

    def run(self, *cmd):
        return subprocess.run(cmd, env=self.env, check=True, capture_output=True, text=True).stdout

    def sminfo(self):
        return self.run("sminfo").strip()

    def port_lids(self):
        """{port GUID (0x + 16 hex): (lid, node description)} for every CA port, from `ibnetdiscover -p` (SMPs).

        Not from `saquery NR`: umad2sim has no RMPP, so SA answers stop at one MAD (a single NodeRecord).
        """
        result = {}
        for line in self.run("ibnetdiscover", "-p").splitlines():
            match = re.match(r"^CA\s+(\d+)\s+\d+\s+(0x[0-9a-f]+)\s.*\(\s*'([^']*)'", line)
            if match:
                result[f"0x{int(match.group(2), 16):016x}"] = (int(match.group(1)), match.group(3))
        return result

    def pkeys(self, lid):
        """P_Key table of the port at lid, without empty entries, as ints."""
        text = self.run("smpquery", "pkeys", str(lid))
        keys = []
        for line in text.splitlines():
            match = re.match(r"^\s*\d+:\s+(.*)$", line)
            if match:
                keys.extend(int(v, 16) for v in match.group(1).split() if int(v, 16) & 0x7FFF)
        return keys

    def hup(self):
        self.opensm.send_signal(signal.SIGHUP)

    def tail(self, name, lines=20):
        try:
            with open(os.path.join(self.workdir, name)) as handle:
                return "".join(handle.readlines()[-lines:])
        except OSError as exc:
            return str(exc)

    def stop(self):
        for proc in (self.opensm, self.ibsim):
            if proc and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()


def memberships_of(keys):
    """P_Key table entries -> {low 15 bits: full|limited|both}."""
    found = {}
    for key in keys:
        kind = "full" if key & 0x8000 else "limited"
        previous = found.get(key & 0x7FFF)
        found[key & 0x7FFF] = "both" if previous and previous != kind else kind
    return found


def describe_pkeys(keys):
    return " ".join(f"{k & 0x7FFF:#06x}({'full' if k & 0x8000 else 'limited'})" for k in keys)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hostvars-json", required=True, help="{host: {fabric_port_guids: [...]}} or inventory JSON")
    parser.add_argument("--groups-json", help="{group: [hosts]} (default: all hosts in group 'all')")
    parser.add_argument("--partitions", required=True, help="JSON file: opensm_partitions list")
    parser.add_argument("--default-partition", default="{}", help="JSON: opensm_default_partition")
    parser.add_argument("--sm-host", help="host whose first port GUID the SM binds (default: first host)")
    parser.add_argument("--hcas-per-leaf", type=int, default=4)
    parser.add_argument("--spines", type=int, default=2)
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args(argv)

    with open(args.hostvars_json) as handle:
        hostvars = json.load(handle)
    hostvars = hostvars.get("_meta", {}).get("hostvars", hostvars)
    groups = {"all": list(hostvars)}
    if args.groups_json:
        with open(args.groups_json) as handle:
            groups.update(json.load(handle))
    with open(args.partitions) as handle:
        partitions = json.load(handle)
    workdir = tempfile.mkdtemp(prefix="simlab-")
    try:
        text = partitions_conf(partitions, hostvars, groups, json.loads(args.default_partition))
        part_file = os.path.join(workdir, "partitions.conf")
        with open(part_file, "w") as handle:
            handle.write(text)
        net_file = os.path.join(workdir, "net")
        gen_fabric.main(
            [
                "--hostvars-json",
                args.hostvars_json,
                "--hcas-per-leaf",
                str(args.hcas_per_leaf),
                "--spines",
                str(args.spines),
                "-o",
                net_file,
            ]
        )
        sm_host = args.sm_host or list(hostvars)[0]
        sm_guid = gen_fabric.collect_port_guids(hostvars, [sm_host])[0][sm_host][0]
        lab = SimLab(workdir, net_file, sm_guid, part_file)
        try:
            lab.start_ibsim()
            lab.start_opensm()
            print(lab.wait_master())
            lab.wait_sweep_done()
            for guid, (lid, desc) in sorted(lab.port_lids().items(), key=lambda item: item[1][0]):
                print(f"lid {lid:4d} {guid} {desc:24s} {describe_pkeys(lab.pkeys(lid))}")
        finally:
            lab.stop()
    finally:
        if args.keep:
            print("work directory:", workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
