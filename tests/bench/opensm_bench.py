"""Scale figures for role opensm (prints numbers; not a timed test, nothing here passes or fails on speed).

1. Rendering: validate and render partitions.conf for --guids port GUIDs (default 10,000: hosts x 8 HCAs), with the
   collection's module_utils directly and, with --ansible, through `ansible-playbook` and the filter on hostvars.
2. Real OpenSM on a large ibsim fat-tree (default 1,000 HCAs, 18 per leaf, 18 spines): time for ibsim to load,
   OpenSM to reach MASTER and finish its first heavy sweep with the partitions, P_Key tables checked on sampled
   ports with smpquery; the node check's isolation family on the subnet manager (node_check.isolation: every port's
   P_Key table read with smpquery, side by side, under the run's deadline) on the whole fabric; then a membership
   change applied with SIGHUP and the time until the sampled ports show it.

    python3 tests/bench/opensm_bench.py [--guids 10000] [--hcas 1000] [--ansible] [--skip-fabric]

Needs ibsim-utils, opensm, infiniband-diags for part 2.
"""

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


sys.path.insert(0, os.path.join(ROOT, "tests", "lab"))
import collection  # noqa: E402  tests/lab/collection.py

COLLECTIONS = collection.importable()
sys.path.insert(0, os.path.join(ROOT, "tests", "lab", "ibsim"))
import gen_fabric  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils import node_check  # noqa: E402
from ansible_collections.gpucluster.fabric.plugins.module_utils.opensm_partitions import (  # noqa: E402
    partition_list,
    partitions_conf,
    resolve_partitions,
)
from simlab import SimLab, memberships_of  # noqa: E402

DEFAULT_POLICY = {"membership": "limited", "ipoib": True, "mtu": 4096, "full_members": [{"group": "storage"}]}


def inventory(n_guids, per_host):
    """Hosts node00001.. with per_host GUIDs each; 1/16 of the hosts in 'storage', the rest in 'gpu_nodes'."""
    hostvars, groups = {}, {"all": [], "gpu_nodes": [], "storage": [], "subnet_managers": []}
    n_hosts = -(-n_guids // per_host)
    made = 0
    for i in range(1, n_hosts + 1):
        host = f"node{i:05d}"
        count = min(per_host, n_guids - made)
        hostvars[host] = {"fabric_port_guids": [f"0x0002c903{(i << 8) + p:08x}" for p in range(1, count + 1)]}
        made += count
        groups["all"].append(host)
        groups["storage" if i % 16 == 0 else "gpu_nodes"].append(host)
    groups["subnet_managers"].append("node00001")
    return hostvars, groups


def partitions(extra_full_host=None):
    training = [{"group": "gpu_nodes", "membership": "full"}, {"group": "storage", "membership": "limited"}]
    if extra_full_host:
        training = [{"group": "gpu_nodes", "membership": "full"}, {"group": "storage", "membership": "full"}]
    return [
        {"name": "training", "pkey": "0x0101", "ipoib": True, "mtu": 4096, "members": training},
        {"name": "storage", "pkey": "0x0200", "members": [{"group": "storage", "membership": "full"}]},
        {"name": "mgmt", "pkey": "0x0300", "members": [{"group": "subnet_managers", "membership": "full"}]},
    ]


def bench_render(n_guids, per_host):
    hostvars, groups = inventory(n_guids, per_host)
    t0 = time.perf_counter()
    model, errors = resolve_partitions(partitions(), hostvars, groups, DEFAULT_POLICY)
    t1 = time.perf_counter()
    text = partitions_conf(partitions(), hostvars, groups, DEFAULT_POLICY)
    t2 = time.perf_counter()
    assert not errors, errors[:3]
    members = sum(len(p["members"]) for p in model["partitions"])
    print(
        f"render: {n_guids} port GUIDs on {len(hostvars)} hosts, {len(model['partitions'])} partitions, "
        f"{members} member entries"
    )
    print(
        f"render: validate+resolve {t1 - t0:.3f} s; validate+resolve+render {t2 - t1:.3f} s; "
        f"partitions.conf {len(text.splitlines())} lines, {len(text)} bytes, longest line "
        f"{max(len(line) for line in text.splitlines())} chars"
    )
    return hostvars, groups


def bench_render_ansible(hostvars, groups):
    work = tempfile.mkdtemp(prefix="opensm-bench-ansible-")
    try:
        inv = {"all": {"children": {}}}
        for group in ("gpu_nodes", "storage", "subnet_managers"):
            inv["all"]["children"][group] = {"hosts": dict.fromkeys(groups[group])}
        for host, hv in hostvars.items():
            for group in ("gpu_nodes", "storage"):
                if host in groups[group]:
                    inv["all"]["children"][group]["hosts"][host] = hv
        with open(os.path.join(work, "hosts.json"), "w") as handle:
            json.dump(inv, handle)
        with open(os.path.join(work, "vars.json"), "w") as handle:
            json.dump({"opensm_partitions": partitions(), "opensm_default_partition": DEFAULT_POLICY}, handle)
        playbook = os.path.join(work, "render.yml")
        with open(playbook, "w") as handle:
            handle.write(
                "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
                "    - ansible.builtin.copy:\n"
                '        content: "{{ opensm_partitions | gpucluster.fabric.opensm_partitions_conf(hostvars, groups,'
                ' opensm_default_partition) }}"\n'
                f"        dest: {work}/partitions.conf\n"
                "        mode: '0644'\n"
            )
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=COLLECTIONS)
        t0 = time.perf_counter()
        subprocess.run(
            [
                "ansible-playbook",
                "-i",
                os.path.join(work, "hosts.json"),
                "-e",
                "@" + os.path.join(work, "vars.json"),
                "-c",
                "local",
                playbook,
            ],
            check=True,
            env=env,
            capture_output=True,
            text=True,
        )
        t1 = time.perf_counter()
        with open(os.path.join(work, "partitions.conf")) as handle:
            lines = len(handle.read().splitlines())
        print(
            f"render via ansible-playbook (filter on hostvars of {len(hostvars)} hosts): {t1 - t0:.1f} s wall "
            f"including ansible start-up; {lines} lines written"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


def bench_fabric(n_hcas, per_leaf, spines, samples, isolation_workers):
    hostvars, groups = inventory(n_hcas, 1)
    work = tempfile.mkdtemp(prefix="opensm-bench-fabric-")
    lab = None
    try:
        with open(os.path.join(work, "hv.json"), "w") as handle:
            json.dump(hostvars, handle)
        net = os.path.join(work, "net")
        gen_fabric.main(
            [
                "--hostvars-json",
                os.path.join(work, "hv.json"),
                "--hcas-per-leaf",
                str(per_leaf),
                "--spines",
                str(spines),
                "-o",
                net,
            ]
        )
        part_file = os.path.join(work, "partitions.conf")
        with open(part_file, "w") as handle:
            handle.write(partitions_conf(partitions(), hostvars, groups, DEFAULT_POLICY))
        conf = os.path.join(work, "opensm.conf")
        with open(conf, "w") as handle:
            handle.write("routing_engine ftree,updn\nallow_both_pkeys FALSE\n")
        sm_guid = hostvars["node00001"]["fabric_port_guids"][0]
        lab = SimLab(work, net, sm_guid, part_file, opensm_conf=conf)
        t0 = time.perf_counter()
        lab.start_ibsim()
        t1 = time.perf_counter()
        lab.start_opensm()
        lab.wait_master()
        t2 = time.perf_counter()
        lab.wait_sweep_done()
        t3 = time.perf_counter()
        print(f"fabric: {gen_fabric.describe_last}")
        print(
            f"fabric: ibsim ready {t1 - t0:.1f} s; OpenSM MASTER {t2 - t1:.1f} s; first heavy sweep done "
            f"(SUBNET UP, partitions applied) {t3 - t1:.1f} s after start"
        )
        lids = lab.port_lids()
        t4 = time.perf_counter()
        print(f"fabric: {len(lids)} CA ports discovered by ibnetdiscover -p in {t4 - t3:.1f} s")
        rng = random.Random(7)
        sample = rng.sample(sorted(lids), min(samples, len(lids)))
        gpu, storage = set(groups["gpu_nodes"]), set(groups["storage"])
        owner = {hv["fabric_port_guids"][0]: host for host, hv in hostvars.items()}

        def expected(guid, changed):
            host = owner[guid]
            if host == "node00001":
                return {0x7FFF: "full", 0x0101: "full", 0x0300: "full"}
            if host in storage:
                return {0x7FFF: "full", 0x0101: "full" if changed else "limited", 0x0200: "full"}
            return {0x7FFF: "limited", 0x0101: "full"} if host in gpu else {}

        bad = [g for g in sample if memberships_of(lab.pkeys(lids[g][0])) != expected(g, False)]
        print(f"fabric: P_Key tables of {len(sample)} sampled ports match the inventory: {not bad} {bad[:3]}")
        model, _errors = resolve_partitions(partitions(), hostvars, groups, DEFAULT_POLICY)
        bench_isolation(lab, partition_list(model), sm_guid, len(lids), isolation_workers)
        # membership change: storage becomes a full member of 'training'
        with open(part_file, "w") as handle:
            handle.write(partitions_conf(partitions(extra_full_host=True), hostvars, groups, DEFAULT_POLICY))
        storage_sample = [g for g in sorted(lids) if owner[g] in storage][:samples]
        pid = lab.opensm.pid
        t5 = time.perf_counter()
        lab.hup()
        deadline = time.time() + 600
        while time.time() < deadline:
            if all(memberships_of(lab.pkeys(lids[g][0])) == expected(g, True) for g in storage_sample):
                break
            time.sleep(0.2)
        t6 = time.perf_counter()
        state = lab.sminfo()
        print(
            f"fabric: SIGHUP -> {len(storage_sample)} storage ports show full 'training' membership after "
            f"{t6 - t5:.1f} s; same OpenSM PID {lab.opensm.pid == pid and lab.opensm.poll() is None}; {state}"
        )
    finally:
        if lab:
            lab.stop()
        shutil.rmtree(work, ignore_errors=True)


def bench_isolation(lab, listed, sm_guid, ports, workers):
    """The node check's isolation family as a subnet manager's run does it (node_check.isolation, under the run's
    deadline), with the environment that attaches the diagnostics to the simulated SM port (the lab's
    opensm_diag_environment), against the partition list of the same inventory as the intent carries it."""
    environment = {key: lab.env[key] for key in ("LD_PRELOAD", "SIM_HOST", "OSM_TMP_DIR", "OSM_CACHE_DIR")}
    opensm = {"partition_list": listed, "diag_environment": environment}
    node_check.NodeModule.deadline = time.monotonic() + node_check.RUN_DEADLINE
    node_check.NodeModule.timed_out = []
    # ibsim serves a few clients at once (OpenSM is one): past that, a client's connect fails and its port cannot be
    # read, which the check fails closed. Real ports answer smpquery side by side through the kernel's umad.
    node_check.ISOLATION_WORKERS = workers
    # umad2sim writes a sysfs tree for each process into its working directory (./sys-<pid>) and removes it at exit:
    # on disk that, not the check, is most of the time (12.8 s for 1,000 ports here, against 2.9 s on tmpfs). Real
    # ports have no such cost; BENCH_CWD= (empty) keeps the directory the benchmark runs in.
    here = os.getcwd()
    os.chdir(os.environ.get("BENCH_CWD", "/dev/shm") or here)
    try:
        started = time.perf_counter()
        checks = node_check.isolation("sm", opensm, node_check.NodeModule({}), sm_guid)
        took = time.perf_counter() - started
    finally:
        os.chdir(here)
        node_check.NodeModule.deadline = None
    states = {}
    for check in checks:
        states[check["status"]] = states.get(check["status"], 0) + 1
    port_checks = len([c for c in checks if c["check"].startswith("partition.port[")])
    for check in [c for c in checks if c["status"] != "passed"][:3]:
        print(f"node check isolation: {check['status']} {check['check']}: {check['message'][:300]}")
    print(
        f"node check isolation: {port_checks} of {ports} CA ports judged ({len(checks)} checks: {states}) in "
        f"{took:.1f} s, {node_check.ISOLATION_WORKERS} smpquery at once; commands timed out: "
        f"{len(node_check.NodeModule.timed_out)}"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--guids", type=int, default=10000)
    parser.add_argument("--guids-per-host", type=int, default=8)
    parser.add_argument("--ansible", action="store_true", help="also render through ansible-playbook")
    parser.add_argument("--hcas", type=int, default=1000)
    parser.add_argument("--hcas-per-leaf", type=int, default=18)
    parser.add_argument("--spines", type=int, default=18)
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--skip-fabric", action="store_true")
    parser.add_argument(
        "--isolation-workers", type=int, default=8, help="smpquery processes at once (the node check's: 16)"
    )
    args = parser.parse_args()
    print(f"host: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}")
    hostvars, groups = bench_render(args.guids, args.guids_per_host)
    if args.ansible:
        bench_render_ansible(hostvars, groups)
    if not args.skip_fabric:
        bench_fabric(args.hcas, args.hcas_per_leaf, args.spines, args.samples, args.isolation_workers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
