"""What `ansible-galaxy collection build` puts into the tarball users install: the collection, never a secret, the
lab or the developer's tools, and nothing git does not track."""

import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GALAXY = Path(sys.executable).parent / "ansible-galaxy"

# Files a user must not get: secrets (the example vault's password), the lab (its inventory holds OpenSM keys in
# the clear), the developer's tools and build outputs.
FORBIDDEN_PREFIXES = (
    "inventories/lab/",
    "tests/lab/",
    "tests/repo/",
    "tests/bench/",
    "tests/integration/",
    "molecule/",
    "tools/",
    ".ci/",
    ".build/",
    ".venv",
    "reports/",
    "fabric-reports/",
    ".ansible/",
)
# A vault password, a build output, or what a run wrote (logs such as ansible-navigator.log, retry files), tracked or
# not: `ansible-galaxy collection build` ships every file not in build_ignore, whatever git ignores.
FORBIDDEN_SUFFIXES = (".vault-password", ".tar.gz", ".pyc", ".log", ".retry")
REQUIRED = ("MANIFEST.json", "FILES.json", "meta/runtime.yml", "playbooks/site.yml", "README.md", "LICENSE")


@pytest.fixture(scope="module")
def tarball(tmp_path_factory):
    if not GALAXY.is_file():
        pytest.skip("no ansible-galaxy next to this Python")
    return _build(ROOT, tmp_path_factory.mktemp("tarball"))


@pytest.fixture(scope="module")
def members(tarball):
    return _members(tarball)


def forbidden(members):
    """The members a user must not get."""
    return [
        name
        for name in members
        if name.startswith(FORBIDDEN_PREFIXES) or name.endswith(FORBIDDEN_SUFFIXES) or "/__pycache__/" in name
    ]


def _build(source, out):
    """The tarball `ansible-galaxy collection build` makes of a collection tree."""
    run = subprocess.run(
        [str(GALAXY), "collection", "build", "--force", "--output-path", str(out), str(source)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    (built,) = out.glob("*.tar.gz")
    return built


def _members(tarball):
    with tarfile.open(tarball) as archive:
        return [m.name for m in archive.getmembers() if m.isfile()]


def test_no_secret_lab_tool_or_run_file_is_shipped(members):
    assert forbidden(members) == []


def test_a_log_left_by_a_run_is_caught(tmp_path):
    """The check above can fail: a tree with an untracked log, as a run leaves one, ships it and is caught."""
    if not GALAXY.is_file():
        pytest.skip("no ansible-galaxy next to this Python")
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("galaxy.yml", "meta/runtime.yml", "README.md", "LICENSE"):
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_bytes((ROOT / name).read_bytes())
    (tree / "ansible-navigator.log").write_text("a run's log\n")
    (tree / "playbooks").mkdir()
    (tree / "playbooks" / "ansible.log").write_text("a log_path of ansible.cfg\n")
    out = tmp_path / "out"
    out.mkdir()
    assert sorted(forbidden(_members(_build(tree, out)))) == ["ansible-navigator.log", "playbooks/ansible.log"]


def test_the_collection_itself_is_shipped(members):
    assert set(REQUIRED) <= set(members)
    roles = {path.parent.parent.name for path in (ROOT / "roles").glob("*/tasks/main.yml")}
    assert roles and all(f"roles/{role}/tasks/main.yml" in members for role in roles)
    plugins = {
        str(path.relative_to(ROOT)) for path in (ROOT / "plugins").rglob("*.py") if "__pycache__" not in path.parts
    }
    assert plugins - set(members) == set()


def test_only_files_git_tracks_are_shipped(members):
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    tracked = set(subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True).stdout.split())
    untracked = [name for name in members if name not in tracked and name not in ("MANIFEST.json", "FILES.json")]
    assert untracked == [], f"the build would ship files git does not track: {untracked}"


def test_no_shipped_file_cites_a_file_users_do_not_have(tarball):
    # The project's own notes (FACTS.md, the seed blog) live outside the repository; a user who reads a source or a
    # message that points there cannot follow it. tests/fixtures/ holds captured output of earlier versions verbatim.
    citing = []
    with tarfile.open(tarball) as archive:
        for member in archive.getmembers():
            if not member.isfile() or member.name.startswith("tests/fixtures/"):
                continue
            text = archive.extractfile(member).read().decode("utf-8", errors="replace")
            if "FACTS.md" in text or "shared/seed" in text:
                citing.append(member.name)
    assert citing == []
