#!/usr/bin/env bash
# Build the controller image for the newer ansible-core releases of `make matrix`: Debian trixie, whose own
# python3 (3.13) ansible-core 2.20 and later need on the controller (Debian 12's 3.11 is too old for them).
#
#   build-image.sh            prints "controller image <tag> is current|built"
#
# Cached in podman by a hash of this file, like the lab images (tests/lab/images/build-image.sh).
# The image holds no Ansible: run.sh makes each release's venv from its lock (tests/lab/matrix/core-<version>.txt).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
suite=trixie
repo_name=${LAB_CONTROLLER_IMAGE_REPO:-localhost/gpucluster-controller}
recipe_hash=$(cat "$here/build-image.sh" | sha256sum | cut -c1-12)
tag="$repo_name:$suite-$recipe_hash"

if podman image exists "$tag"; then
  echo "controller image $tag is current (cached)"
  exit 0
fi

mirror=${LAB_DEBIAN_MIRROR:-$("$here/../images/debian-mirror.sh")}
# python3-venv: the releases' venvs; openssh-client: the lab is reached over SSH; git, dpkg-dev, gpg and gpgv: what
# the unit tests run (ansible-galaxy build in a checkout, the CUDA repository probe's package and key checks; gpg-agent
# for the key the OpenPGP test generates).
packages=python3,python3-venv,openssh-client,ca-certificates,git,gpg,gpg-agent,gpgv,dpkg-dev,procps,iproute2,make
workdir=$(mktemp -d "${TMPDIR:-/var/tmp}/gpucluster-controller.XXXXXX")
trap 'rm -rf "$workdir"' EXIT
rootfs="$workdir/rootfs"
echo "building controller image $tag from $mirror ($suite)"
debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$mirror" >"$workdir/debootstrap.log" 2>&1 || {
  tail -n 40 "$workdir/debootstrap.log" >&2
  exit 1
}
# podman: run.sh mounts tests/lab/controller/podman at /usr/local/bin/podman (the host's podman, over its API).
rm -rf "$rootfs/var/lib/apt/lists/"* "$rootfs/var/cache/apt/archives/"*.deb
tar -C "$rootfs" --numeric-owner -c . | podman import - "$tag" >/dev/null
echo "controller image $tag built"
