"""cuda_repo (the role's applier) run as Ansible runs it, against the real signed fixture repository over file://,
on a directory tree as the host (the probe's harness: test_cuda_repo_probe.py). dpkg installs with ``--root``."""

import json
import os
import subprocess
import sys

from test_cuda_repo_probe import (
    APT_LIST,
    FIXTURES,
    KEYRING,
    LAB_KEY,
    LIST,
    NVIDIA_KEY,
    OFFERED,
    REPO_DIR,
    base,
    converged_host,
    dpkg_root,
    fresh_host,
)
from test_cuda_repo_probe import pytestmark as probe_pytestmark

pytestmark = probe_pytestmark  # needs dpkg-deb, dpkg-query and gpgv

MODULE = FIXTURES.parents[2] / "plugins" / "modules" / "cuda_repo.py"
HEADER = "#\n# Ansible managed\n#"


def run_module(tmp_path, check_mode=False, diff=False, **args):
    temp = tmp_path / "tmp"
    temp.mkdir(exist_ok=True)
    args.setdefault("distro", "debian12")
    args.setdefault("arch", "x86_64")
    args.setdefault("key_fingerprint", LAB_KEY)
    args.setdefault("header", HEADER)
    args.setdefault("host", "gpu01")
    args_file = tmp_path / "args.json"
    args_file.write_text(
        json.dumps({"ANSIBLE_MODULE_ARGS": dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff)})
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p), TMPDIR=str(temp))
    proc = subprocess.run(
        [sys.executable, str(MODULE), str(args_file)], capture_output=True, text=True, env=env, check=False
    )
    assert list(temp.iterdir()) == [], "the module left files behind"
    return json.loads(proc.stdout)


def entry(variant="signed"):
    return f"deb [signed-by=/{KEYRING}] {base(variant)}/{REPO_DIR}/ /"


def test_fresh_host_gets_the_verified_keyring_and_the_source_and_a_re_run_changes_nothing(tmp_path):
    root = dpkg_root(tmp_path)
    result = run_module(tmp_path, base_url=base("signed"), root=str(root))
    assert result["changed"] is True, result
    assert result["changes"] == [
        {"what": "package cuda-keyring", "why": "installed none, wanted 1.1-1"},
        # the package ships this file with NVIDIA's entry; ours points it at cuda_repo_base_url
        {"what": "/" + LIST, "why": "its content differs"},
    ]
    assert result["steps"] == ["install", "configure"]
    assert (root / KEYRING).read_bytes() == (FIXTURES / "lab-keyring.gpg").read_bytes()
    # byte for byte what the role's template wrote: the managed comment, then the one entry
    assert (root / LIST).read_text() == f"{HEADER}\n{entry()}\n"
    assert oct((root / LIST).stat().st_mode & 0o777) == "0o644"
    assert "offered_nccl" not in result  # a real run refreshes apt's index instead
    (root / APT_LIST).write_text("Package: libnccl2\n")
    again = run_module(tmp_path, base_url=base("signed"), root=str(root))
    assert again["changed"] is False and again["changes"] == [] and again["downloaded"] == []


def test_check_mode_on_a_fresh_host_reports_both_changes_and_what_the_repository_offers(tmp_path):
    root = dpkg_root(tmp_path)
    result = run_module(tmp_path, check_mode=True, diff=True, base_url=base("signed"), root=str(root))
    assert [c["what"] for c in result["changes"]] == ["package cuda-keyring", "/" + LIST]
    assert result["offered_nccl"] == OFFERED  # for the nccl role's prediction: apt does not know the repository
    assert result["diff"][0]["after"] == f"{HEADER}\n{entry()}\n"
    assert not (root / KEYRING).exists() and not (root / LIST).exists()
    assert "cuda-keyring" not in (root / "var/lib/dpkg/status").read_text()


def test_a_new_mirror_is_verified_then_only_the_source_changes(tmp_path):
    root = converged_host(tmp_path)
    (root / LIST).write_text(f"{HEADER}\n{entry()}\n")
    mirror = tmp_path / "mirror"
    (mirror).mkdir()
    os.symlink(FIXTURES / "signed", mirror / "other")
    result = run_module(tmp_path, base_url=f"file://{mirror}/other", root=str(root))
    assert result["downloaded"] == ["InRelease"]
    assert result["changes"] == [{"what": "/" + LIST, "why": "its content differs"}]
    assert f"file://{mirror}/other/{REPO_DIR}/ /" in (root / LIST).read_text()


def test_any_problem_fails_before_anything_changes(tmp_path):
    root = dpkg_root(tmp_path)
    wrong = run_module(tmp_path, base_url=base("wrongkey"), root=str(root))
    assert wrong["failed"] is True and "InRelease is not signed by key" in wrong["msg"]
    assert not (root / LIST).exists() and not (root / KEYRING).exists()
    key = run_module(tmp_path, base_url=base("signed"), root=str(root), key_fingerprint=NVIDIA_KEY)
    assert key["failed"] is True and f"not exactly cuda_repo_key_fingerprint={NVIDIA_KEY}" in key["msg"]
    assert not (root / LIST).exists()


def test_a_tampered_keyring_is_repaired_with_its_reason(tmp_path):
    root = dpkg_root(tmp_path)
    assert run_module(tmp_path, base_url=base("signed"), root=str(root))["changed"] is True
    (root / KEYRING).write_bytes((FIXTURES / "lab-keyring.gpg").read_bytes() * 2)  # a second key slipped in
    result = run_module(tmp_path, base_url=base("signed"), root=str(root))
    assert result["changes"] == [
        {"what": "package cuda-keyring", "why": f"its keyring holds {LAB_KEY}, {LAB_KEY}, not exactly the key"}
    ]
    assert result["installed"]["fingerprints"] == [LAB_KEY]


def test_tags_choose_the_steps_and_a_check_changes_nothing(tmp_path):
    root = dpkg_root(tmp_path)
    only = run_module(tmp_path, base_url=base("signed"), root=str(root), run_tags=["cuda_repo_configure"])
    assert only["steps"] == ["configure"] and [c["what"] for c in only["changes"]] == ["/" + LIST]
    assert not (root / KEYRING).exists()
    preflight = run_module(tmp_path, base_url=base("signed"), root=str(root), run_tags=["cuda_repo_preflight"])
    assert preflight["steps"] == [] and preflight["changed"] is False
    checked = run_module(tmp_path, base_url=base("signed"), root=str(fresh_host(tmp_path / "b")), state="checked")
    assert checked["changed"] is False and checked["steps"] == [] and checked["offered_nccl"] == OFFERED
