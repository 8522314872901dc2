"""The collection declares what its controller-side plugins need, the way ansible-builder reads it for an execution
environment (meta/execution-environment.yml)."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILDER = Path(sys.executable).parent / "ansible-builder"


def _declared(name):
    lines = (ROOT / "meta" / "ee-requirements.txt").read_text().splitlines()
    return next(line.split("#")[0].strip() for line in lines if line.startswith(f"{name}=="))


def test_ansible_builder_introspect_finds_the_controller_requirements(tmp_path):
    if not BUILDER.is_file():
        pytest.skip("no ansible-builder next to this Python")
    (tmp_path / "ansible_collections" / "gpucluster").mkdir(parents=True)
    (tmp_path / "ansible_collections" / "gpucluster" / "fabric").symlink_to(ROOT)
    run = subprocess.run([str(BUILDER), "introspect", str(tmp_path)], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{_declared('matplotlib')}  # from collection gpucluster.fabric" in run.stdout, run.stdout


def test_the_plot_requirement_is_the_one_the_tests_run_with():
    # The developers' venv (requirements.txt) and execution environments get the same matplotlib.
    assert _declared("matplotlib") in (ROOT / "requirements.txt").read_text().splitlines()


def _pins(path):
    return dict(
        line.split("#")[0].strip().split("==", 1)
        for line in (ROOT / path).read_text().splitlines()
        if "==" in line and not line.startswith("#")
    )


def test_the_lab_ee_definition_builds_a_containerfile_with_our_pins(tmp_path):
    # `ansible-builder create` writes the build context without building: the definition is valid for ansible-builder
    # 3, and what the EE installs is what the developers' venv pins (`make ee` builds it, `make lab-ee` runs it).
    if not BUILDER.is_file():
        pytest.skip("no ansible-builder next to this Python")
    # The definition in a copy of its place in the tree, with a stand-in tarball where `make ee` puts the real one.
    definition = tmp_path / "tests" / "lab" / "ee" / "execution-environment.yml"
    definition.parent.mkdir(parents=True)
    definition.write_text((ROOT / "tests" / "lab" / "ee" / "execution-environment.yml").read_text())
    (tmp_path / ".build" / "ee").mkdir(parents=True)
    (tmp_path / ".build" / "ee" / "gpucluster-fabric.tar.gz").write_bytes(b"")
    run = subprocess.run(
        [str(BUILDER), "create", "--file", str(definition), "--context", str(tmp_path / "ctx")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    containerfile = (tmp_path / "ctx" / "Containerfile").read_text()
    pins = _pins("constraints.txt")
    refs = f'ARG ANSIBLE_INSTALL_REFS="ansible-core=={pins["ansible-core"]} ansible-runner=={pins["ansible-runner"]}"'
    assert refs in containerfile
    assert 'ARG EE_BASE_IMAGE="localhost/gpucluster-ee-base:bookworm"' in containerfile
    assert 'ARG ANSIBLE_GALAXY_CLI_COLLECTION_OPTS="--no-deps"' in containerfile
    user_pip = (tmp_path / "ctx" / "_build" / "requirements.txt").read_text().split()
    assert user_pip == [f"ansible=={pins['ansible']}"]
    assert (tmp_path / "ctx" / "_build" / "collections" / "gpucluster-fabric.tar.gz").exists()
