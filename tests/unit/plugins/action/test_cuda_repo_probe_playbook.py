"""The cuda_repo_probe action plugin in real ansible-playbook runs on localhost (connection local, a directory tree
as the host, the lab mirror's files over file://; nothing is installed)."""

import base64
import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from _playbook import PLAYBOOK, ansible_playbook  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "cuda_repo"
DEB = FIXTURES / "signed" / "compute" / "cuda" / "repos" / "debian12" / "x86_64" / "cuda-keyring_1.1-1_all.deb"
LAB_KEY = "2DAB59B7E049DB922CEBF45F52D59CBD1C0AA271"

pytestmark = [
    pytest.mark.skipif(
        not PLAYBOOK.is_file() or not (shutil.which("dpkg-deb") and shutil.which("gpgv")),
        reason="needs ansible-playbook next to this Python, dpkg-deb and gpgv",
    ),
    pytest.mark.playbook,
]

PLAY = """
- name: Probe
  hosts: all
  gather_facts: false
  tasks:
    - name: Probe with a controller .deb
      gpucluster.fabric.cuda_repo_probe:
        base_url: "file://{fixtures}/signed"
        distro: debian12
        arch: x86_64
        key_fingerprint: {key}
        keyring_deb_src: "{deb}"
        root: "{root}"
      register: probe
    - name: Write the result
      ansible.builtin.copy:
        content: "{{{{ probe | to_json }}}}"
        dest: "{out}"
        mode: "0600"
"""


def _probe(tmp_path, deb):
    root = tmp_path / "host"
    (root / "var" / "lib" / "dpkg").mkdir(parents=True)
    (root / "var" / "lib" / "dpkg" / "status").write_text("")
    out = tmp_path / "result.json"
    playbook = tmp_path / "probe.yml"
    playbook.write_text(PLAY.format(fixtures=FIXTURES, key=LAB_KEY, deb=deb, root=root, out=out))
    run = ansible_playbook(
        tmp_path, "localhost,", playbook, "-c", "local", "-e", f"ansible_python_interpreter={sys.executable}"
    )
    assert run.returncode == 0, run.stdout + run.stderr
    return json.loads(out.read_text()), run.stdout


def test_controller_deb_is_verified_instead_of_downloaded(tmp_path):
    result = _probe(tmp_path, DEB)[0]
    assert result["errors"] == []
    assert result["install_needed"] is True
    assert result["downloaded"] == ["InRelease", "Packages.gz"]  # the keyring package came from the controller
    # the package's bytes are not logged with the module's arguments
    assert base64.b64encode(DEB.read_bytes()).decode()[:40] not in json.dumps(result)


def test_missing_controller_deb_is_one_more_error(tmp_path):
    result = _probe(tmp_path, tmp_path / "nowhere.deb")[0]
    assert result["errors"] == [
        f"cuda_repo_keyring_deb={tmp_path / 'nowhere.deb'} is not a file on the controller; copy NVIDIA's "
        "cuda-keyring_1.1-1_all.deb there or leave it empty to download it"
    ]
    assert result["downloaded"] == []


APPLY = """
- name: Apply
  hosts: all
  gather_facts: false
  tasks:
    - name: Apply with a controller .deb
      gpucluster.fabric.cuda_repo:
        base_url: "file://{fixtures}/unsigned"
        distro: debian12
        arch: x86_64
        key_fingerprint: {key}
        keyring_deb_src: "{deb}"
        root: "{root}"
        host: gpu01
"""


def test_the_applier_with_a_missing_controller_deb_fails_with_every_problem_and_writes_nothing(tmp_path):
    root = tmp_path / "host"
    (root / "var" / "lib" / "dpkg").mkdir(parents=True)
    (root / "var" / "lib" / "dpkg" / "status").write_text("")
    (root / "etc" / "apt" / "sources.list.d").mkdir(parents=True)
    (root / "etc" / "apt" / "sources.list.d" / "other.list").write_text(
        f"deb [trusted=yes] file://{FIXTURES}/signed/compute/cuda/repos/debian12/x86_64/ /\n"
    )
    playbook = tmp_path / "apply.yml"
    missing = tmp_path / "nowhere.deb"
    playbook.write_text(APPLY.format(fixtures=FIXTURES, key=LAB_KEY, deb=missing, root=root))
    run = ansible_playbook(
        tmp_path, "localhost,", playbook, "-c", "local", "-e", f"ansible_python_interpreter={sys.executable}"
    )
    assert run.returncode != 0
    # one message: the controller's file and the host's other source entry, after the host's name
    assert f"localhost: cuda_repo_keyring_deb={missing} is not a file on the controller" in run.stdout
    assert "other.list" in run.stdout
    assert sorted(p.name for p in (root / "etc" / "apt" / "sources.list.d").iterdir()) == ["other.list"]
