#!/usr/bin/env bash
# ansible-test on what we ship: the built tarball, installed by the ansible-galaxy on PATH into a clean path outside
# any git checkout (inside a work tree ansible-test only sees files git tracks there), then `ansible-test <args>` from
# the installed collection, with the ansible-test on PATH (the Makefile's venv, or a matrix venv).
#
#   sanity.sh <tarball> <work dir> <ansible-test argument>...     e.g. sanity.sh x.tar.gz /tmp/s sanity --python 3.11
#
# ansible-test fetches a pip bootstrap script from a host our machines cannot reach; it looks in its cache first, so
# a stand-in (get_pip.py, next to this script) is put there for the pip version this ansible-test asks for.
set -euo pipefail

tarball=$(realpath "${1:?usage: sanity.sh <tarball> <work dir> <ansible-test argument>...}")
work=${2:?work dir}
shift 2
here=$(cd "$(dirname "$0")" && pwd)
python=$(dirname "$(command -v ansible-test)")/python

rm -rf "$work" && mkdir -p "$work"
ANSIBLE_COLLECTIONS_PATH=$work ansible-galaxy collection install --force --no-deps -p "$work" "$tarball"
pip_version=$("$python" - <<'PY'
import pathlib, re, ansible_test
source = pathlib.Path(ansible_test.__file__).parent / "_internal" / "python_requirements.py"
print(re.search(r"pip='([0-9.]+)'", source.read_text()).group(1))
PY
)
mkdir -p ~/.ansible/test/cache
cp "$here/get_pip.py" ~/.ansible/test/cache/"get_pip_${pip_version//./_}.py"
cd "$work/ansible_collections/gpucluster/fabric"
exec env -u ANSIBLE_COLLECTIONS_PATH ansible-test "$@" --color no
