#!/usr/bin/env bash
# Build the execution environment's base image locally (no container registry is reachable here): a minimal Debian
# bookworm from debootstrap with python3, pip and an SSH client, imported into podman as
# localhost/gpucluster-ee-base:bookworm (and :bookworm-<recipe hash>; cached while this file is unchanged).
# ansible-builder puts ansible-core, ansible-runner, the collection and its Python requirements on top
# (tests/lab/ee/execution-environment.yml).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=localhost/gpucluster-ee-base
suite=bookworm
recipe_hash=$(sha256sum "$here/build-base.sh" | cut -c1-12)
tag="$repo:$suite-$recipe_hash"
if podman image exists "$tag"; then
  podman tag "$tag" "$repo:$suite"
  echo "EE base image $tag is current (cached)"
  exit 0
fi

mirror=${LAB_DEBIAN_MIRROR:-$("$here/../images/debian-mirror.sh")}
# openssh-client: the EE reaches managed hosts over SSH; ca-certificates: pip over TLS.
packages=python3,python3-pip,openssh-client,ca-certificates
workdir=$(mktemp -d "${TMPDIR:-/var/tmp}/gpucluster-ee-base.XXXXXX")
trap 'rm -rf "$workdir"' EXIT
rootfs="$workdir/rootfs"
echo "building EE base image $tag from $mirror ($suite)"
debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$mirror" >"$workdir/debootstrap.log" 2>&1 || {
  tail -n 40 "$workdir/debootstrap.log" >&2
  exit 1
}
printf 'deb %s %s main\n' "$mirror" "$suite" >"$rootfs/etc/apt/sources.list"
# The certificate authorities this machine trusts besides Debian's (a site's TLS proxy in front of the package
# registries, for one), so that pip inside the image reaches what pip on this machine reaches.
shopt -s nullglob
local_cas=(/usr/local/share/ca-certificates/*.crt)
if ((${#local_cas[@]})); then
  cp "${local_cas[@]}" "$rootfs/usr/local/share/ca-certificates/"
  chroot "$rootfs" update-ca-certificates >/dev/null
fi
rm -rf "$rootfs/var/lib/apt/lists/"* "$rootfs/var/cache/apt/archives/"*.deb
tar -C "$rootfs" --numeric-owner -c . | podman import --change 'CMD ["/bin/bash"]' - "$tag" >/dev/null
podman tag "$tag" "$repo:$suite"
echo "EE base image $tag built"
