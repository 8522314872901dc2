"""The next release's notes, made by a dry run on a copy: every module, filter, role and playbook is announced once.

    python tools/release_notes.py [--check] [--version X.Y.Z]

Copies what antsibull-changelog reads (galaxy.yml, meta, plugins, roles, playbooks, changelogs) into a temporary
collection tree, runs `antsibull-changelog release` there for galaxy.yml's version (the release being made), and
compares what that release lists as new with what the collection has that no earlier release announced.
antsibull-changelog finds new modules, filters and roles by their `version_added` (modules' and filters'
DOCUMENTATION, roles' meta/argument_specs.yml); playbooks come from changelog fragments
(`add object.playbook`). With --check it exits 1 on any difference, naming it. The checkout is never changed.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
COPIED = ["galaxy.yml", "meta", "plugins", "roles", "playbooks", "changelogs", "README.md", "LICENSE"]


def _announced(release):
    """{kind: set of names} a release entry of changelog.yaml lists as new."""
    return {
        "module": {entry["name"] for entry in release.get("modules", [])},
        "filter": {entry["name"] for entry in release.get("plugins", {}).get("filter", [])},
        "role": {entry["name"] for entry in release.get("objects", {}).get("role", [])},
        "playbook": {entry["name"] for entry in release.get("objects", {}).get("playbook", [])},
    }


def filters():
    docs = (ROOT / "plugins/filter").glob("*.yml")
    names = {yaml.safe_load(doc.read_text())["DOCUMENTATION"]["name"] for doc in docs}
    for code in (ROOT / "plugins/filter").glob("*.py"):
        text = code.read_text()
        if 'DOCUMENTATION = r"""' in text:
            names.add(yaml.safe_load(text.split('DOCUMENTATION = r"""')[1].split('"""')[0])["name"])
    return names


def present():
    """{kind: set of names} the collection has now."""
    return {
        "module": {path.stem for path in (ROOT / "plugins/modules").glob("*.py") if path.stem != "__init__"},
        "filter": filters(),
        "role": {path.name for path in (ROOT / "roles").iterdir() if (path / "meta/argument_specs.yml").is_file()},
        "playbook": {path.stem for path in (ROOT / "playbooks").glob("*.yml")},
    }


def dry_run(version):
    """The release entry `antsibull-changelog release --version <version>` writes, on a copy of the collection."""
    with tempfile.TemporaryDirectory(prefix="gpucluster-release-") as tmp:
        copy = Path(tmp) / "ansible_collections" / "gpucluster" / "fabric"
        for name in COPIED:
            source = ROOT / name
            if source.is_dir():
                shutil.copytree(source, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
            elif source.is_file():
                copy.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, copy / name)
        bin_dir = str(Path(sys.executable).parent)
        env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=tmp, ANSIBLE_HOME=str(Path(tmp) / "home"))
        env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
        subprocess.run(
            [os.path.join(bin_dir, "antsibull-changelog"), "release", "--version", version],
            cwd=copy, env=env, check=True, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        return yaml.safe_load((copy / "changelogs/changelog.yaml").read_text())["releases"][version]


def problems(version):
    releases = yaml.safe_load((ROOT / "changelogs/changelog.yaml").read_text())["releases"]
    earlier = {kind: set() for kind in ("module", "filter", "role", "playbook")}
    for release in releases.values():
        for kind, names in _announced(release).items():
            earlier[kind] |= names
    new = _announced(dry_run(version))
    found = []
    for kind, names in present().items():
        for name in sorted(names - earlier[kind] - new[kind]):
            how = "a changelog fragment's `add object.playbook`" if kind == "playbook" else f"version_added: {version}"
            found.append(f"{kind} {name}: new since the last release, but release {version}'s notes miss it ({how})")
        for name in sorted(new[kind] & earlier[kind]):
            found.append(f"{kind} {name}: release {version}'s notes list it as new, but an earlier release did")
    return found


def next_version():
    """galaxy.yml's version: the release being made (it is raised right after a release)."""
    return yaml.safe_load((ROOT / "galaxy.yml").read_text())["version"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when the notes would miss or repeat anything")
    parser.add_argument("--version", default=None, help="the release to make (default: galaxy.yml's version)")
    args = parser.parse_args()
    version = args.version or next_version()
    released = yaml.safe_load((ROOT / "changelogs/changelog.yaml").read_text())["releases"]
    if version in released:
        print(f"release_notes.py: {version} is released already: raise galaxy.yml's version", file=sys.stderr)
        return 1
    found = problems(version)
    for line in found:
        print(f"release_notes.py: {line}", file=sys.stderr)
    if not found:
        print(f"release_notes.py: release {version}'s notes list every new module, filter, role and playbook")
    return 1 if found and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
