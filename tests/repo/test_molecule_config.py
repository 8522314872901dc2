"""Molecule's own schema validation of every scenario, with each driver a user may pick (podman, docker).

`molecule list` loads every scenario's molecule.yml merged over .config/molecule/config.yml and validates it against
Molecule's schema and the driver's (molecule-plugins); a key one driver does not know fails it, as a user's
`GPUCLUSTER_MOLECULE_DRIVER=docker molecule create` would. It creates nothing.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
MOLECULE = Path(sys.executable).parent / "molecule"
SCENARIOS = sorted(p.parent.name for p in (ROOT / "molecule").glob("*/molecule.yml"))

pytestmark = pytest.mark.skipif(not MOLECULE.is_file(), reason="no molecule next to this Python")


def _molecule(cwd, driver, *args, configs=("config.yml",)):
    env = dict(os.environ, GPUCLUSTER_MOLECULE_DRIVER=driver, ANSIBLE_NOCOLOR="1", NO_COLOR="1")
    env["PATH"] = f"{MOLECULE.parent}{os.pathsep}{env.get('PATH', '')}"
    env.pop("MOLECULE_EPHEMERAL_DIRECTORY", None)
    bases = [arg for config in configs for arg in ("-c", str(Path(cwd) / ".config" / "molecule" / config))]
    return subprocess.run(
        [str(MOLECULE), *bases, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize(
    ("driver", "configs"),
    [
        ("podman", ("config.yml",)),
        ("docker", ("config.yml",)),
        # the lab's role scenarios over SSH (make test, make molecule): Molecule's default driver, managed
        ("podman", ("config.yml", "ssh.yml")),
    ],
    ids=["podman", "docker", "lab-ssh"],
)
def test_every_scenario_validates_with_the_driver(driver, configs):
    run = _molecule(ROOT, driver, "list", "--format", "plain", configs=configs)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out
    assert "Failed to validate" not in out
    # Molecule looks up a `default` scenario on every command: there is one, so no "glob failed" is logged.
    assert "glob failed" not in out
    for scenario in SCENARIOS:
        assert any(scenario in line.split() for line in run.stdout.splitlines()), (scenario, run.stdout)
    # Each instance line: name, driver, provisioner, scenario, created, converged. The scenarios with a lab of their
    # own keep Molecule's default driver; every other one gets the driver this case asks for.
    rows = (line.split() for line in run.stdout.splitlines())
    drivers = {fields[3]: fields[1] for fields in rows if len(fields) == 6}
    wanted = "default" if "ssh.yml" in configs else driver
    for scenario in SCENARIOS:
        assert drivers.get(scenario) == ("default" if scenario in {"site", "kernel_softroce"} else wanted), drivers


def test_a_podman_only_key_fails_with_docker(tmp_path):
    # The check above can fail: the same project with the podman-only `systemd` key, as it was, is refused.
    shutil.copytree(ROOT / ".config", tmp_path / ".config")
    (tmp_path / "galaxy.yml").write_text((ROOT / "galaxy.yml").read_text())
    config = tmp_path / ".config" / "molecule" / "config.yml"
    data = yaml.safe_load(config.read_text())
    data["platforms"][0]["systemd"] = "always"
    config.write_text(yaml.safe_dump(data))
    scenario = tmp_path / "molecule" / "rdma_core"
    scenario.mkdir(parents=True)
    (scenario / "molecule.yml").write_text("---\nscenario:\n  name: rdma_core\n")
    assert _molecule(tmp_path, "podman", "list", "-s", "rdma_core").returncode == 0
    refused = _molecule(tmp_path, "docker", "list", "-s", "rdma_core")
    assert refused.returncode != 0
    assert "Additional properties are not allowed ('systemd' was unexpected)" in refused.stdout + refused.stderr


def test_no_scenario_overrides_the_users_paths():
    for path in [ROOT / ".config" / "molecule" / "config.yml", *sorted((ROOT / "molecule").glob("*/molecule.yml"))]:
        env = ((yaml.safe_load(path.read_text()) or {}).get("provisioner") or {}).get("env") or {}
        assert not {"ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_COLLECTIONS_PATHS", "ANSIBLE_ROLES_PATH"} & set(env), path


def test_instance_names_carry_the_run_id():
    for path in [ROOT / ".config" / "molecule" / "config.yml", *sorted((ROOT / "molecule").glob("*/molecule.yml"))]:
        data = yaml.safe_load(path.read_text()) or {}
        if (data.get("driver") or {}).get("name") == "default":
            continue  # a lab of its own (site's lab, kernel_softroce's VMs), not containers a driver creates
        for platform in data.get("platforms") or []:
            assert "${GPUCLUSTER_MOLECULE_RUN_ID:-local}" in platform["name"], (path, platform["name"])
