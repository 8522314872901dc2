"""Verify the rdma_modules role on a converged container (testinfra).

The container cannot load modules (it shares the host's kernel), so this checks what persists them at boot —
with systemd's and kmod's own parsers — and that bad input fails in preflight leaving the host unchanged.
"""

import json
import os
import subprocess

import pytest

LOAD_CONF = "/etc/modules-load.d/gpucluster-rdma.conf"
PEERMEM_CONF = "/etc/modules-load.d/gpucluster-nvidia-peermem.conf"
SOFTDEP_CONF = "/etc/modprobe.d/gpucluster-rdma.conf"
# converge.yml: the core modules, ib_ipoib (an ipoib interface), rdma_rxe (a roce interface with softroce),
# then rdma_modules_extra with '-' spelled '_' as the kernel reports it. No adapter exists in a container.
EXPECTED_MODULES = ["ib_core", "ib_uverbs", "ib_umad", "rdma_ucm", "ib_ipoib", "rdma_rxe", "nvme_rdma"]


def listed_modules(content):
    return [line.split()[0] for line in content.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_modules_load_file(host):
    conf = host.file(LOAD_CONF)
    assert conf.exists and conf.user == "root" and conf.group == "root" and conf.mode == 0o644
    assert conf.content_string.startswith("#\n# Ansible managed\n")
    assert listed_modules(conf.content_string) == EXPECTED_MODULES


def test_systemd_modules_load_reads_it(host):
    # systemd-analyze shows the modules-load.d configuration exactly as systemd-modules-load will read it at boot.
    config = host.check_output("systemd-analyze cat-config modules-load.d")
    section = config.split("# " + LOAD_CONF, 1)[1].split("\n# /", 1)[0]
    assert listed_modules(section) == EXPECTED_MODULES


def test_softdep_seen_by_modprobe(host):
    conf = host.file(SOFTDEP_CONF)
    assert conf.exists and conf.mode == 0o644
    # kmod's own parser (modprobe --showconfig) reads the softdep back.
    assert "softdep mlx5_ib pre: mlx5_core" in host.check_output("modprobe --showconfig").splitlines()


def test_no_peermem_entry_without_nvidia_driver(host):
    assert not host.file(PEERMEM_CONF).exists
    assert "nvidia_peermem" not in host.check_output("systemd-analyze cat-config modules-load.d")


def host_fingerprint(host):
    return host.check_output(
        "find /etc/modules-load.d /etc/modprobe.d -type f -exec sha256sum {} + | sort; ls -la /etc/modules-load.d"
    )


# The role's one step (module gpucluster.fabric.rdma_modules) checks the input and the host before it changes anything.
APPLY = "RDMA kernel modules and GPUDirect RDMA"
# bad_input.yml case -> (the task that must fail, text its message must hold)
BAD_INPUTS = {
    "unknown-mode": (
        "Validating arguments against arg spec 'main'",
        "value of rdma_modules_gpudirect_mode must be one of: auto, peermem, dmabuf, none, got: gdrcopy",
    ),
    "shell-metacharacters": (
        APPLY,
        '"ib_core; reboot" in rdma_modules_extra is not a kernel module name',
    ),
    "command-substitution": (APPLY, "is not a kernel module name"),
    "peermem-without-driver": (
        APPLY,
        "rdma_modules_gpudirect_mode=peermem: GPUDirect mode peermem was requested but there is no NVIDIA kernel"
        " driver",
    ),
    "dmabuf-without-driver": (
        APPLY,
        "GPUDirect mode dmabuf was requested but there is no NVIDIA kernel driver",
    ),
    "softdep-pre-not-a-list": (APPLY, "rdma_modules_softdeps[0]="),
    "runtime-load-forced": (
        APPLY,
        "modprobe cannot load ib_core ib_uverbs ib_umad rdma_ucm",
    ),
}


@pytest.fixture(scope="module")
def bad_input_run(host, tmp_path_factory):
    """Run bad_input.yml once; return (host before, host after, recorded failures, ansible output)."""
    before = host_fingerprint(host)
    results_file = tmp_path_factory.mktemp("bad_input") / "results.json"
    playbook = os.path.join(os.environ["MOLECULE_SCENARIO_DIRECTORY"], "bad_input.yml")
    run = subprocess.run(
        ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], playbook],
        capture_output=True,
        text=True,
        check=False,
        env=dict(os.environ, BAD_INPUT_RESULTS=str(results_file)),
    )
    output = run.stdout + run.stderr
    assert run.returncode == 0, output
    return before, host_fingerprint(host), json.loads(results_file.read_text()), output


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_fails_in_preflight(bad_input_run, case):
    _, _, results, output = bad_input_run
    assert case in results, output
    task, message = BAD_INPUTS[case]
    failure = results[case]
    assert failure["task"].startswith(task), failure
    assert message in failure["msg"] + "\n".join(failure["results"])


def test_bad_input_left_the_host_unchanged(host, bad_input_run):
    before, after, results, output = bad_input_run
    assert sorted(results) == sorted(BAD_INPUTS), output
    assert after == before
    assert "changed=0" in output.split("PLAY RECAP", 1)[1], output
    assert not host.file("/tmp/pwned").exists
