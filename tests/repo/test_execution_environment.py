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
