#!/usr/bin/env bash
# Build a systemd-enabled Debian lab image with debootstrap and `podman import`.
#
#   build-image.sh <suite>            e.g. bookworm, bullseye, trixie
#
# The image is tagged localhost/gpucluster-lab:<suite> and
# localhost/gpucluster-lab:<suite>-<recipe hash>. When an image with the current recipe hash
# exists, nothing is rebuilt; any change to this file or packages.txt changes the hash.
set -euo pipefail

suite=${1:?usage: build-image.sh <suite>}
here=$(cd "$(dirname "$0")" && pwd)
repo_name=${LAB_IMAGE_REPO:-localhost/gpucluster-lab}

recipe_hash=$(cat "$here/build-image.sh" "$here/packages.txt" | sha256sum | cut -c1-12)
tag="$repo_name:$suite-$recipe_hash"

if podman image exists "$tag"; then
  podman tag "$tag" "$repo_name:$suite"
  echo "lab image $tag is current (cached)"
  exit 0
fi

# The Debian mirror is the one this machine's apt already uses (never hard-coded here).
mirror=${LAB_DEBIAN_MIRROR:-$("$here/debian-mirror.sh")}
packages=$(grep -v '^\s*#' "$here/packages.txt" | xargs | tr ' ' ',')

workdir=$(mktemp -d "${TMPDIR:-/var/tmp}/gpucluster-lab-$suite.XXXXXX")
trap 'rm -rf "$workdir"' EXIT
rootfs="$workdir/rootfs"

echo "building lab image $tag from $mirror ($suite)"
debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$mirror" >"$workdir/debootstrap.log" 2>&1 || {
  tail -n 40 "$workdir/debootstrap.log" >&2
  exit 1
}

# Containers have no console getty and no udev hardware: keep the boot quiet and reach "running".
for unit in getty@tty1.service console-getty.service systemd-udevd.service systemd-udev-trigger.service \
  systemd-udevd-control.socket systemd-udevd-kernel.socket systemd-resolved.service \
  systemd-timesyncd.service apt-daily.timer apt-daily-upgrade.timer; do
  ln -sf /dev/null "$rootfs/etc/systemd/system/$unit"
done
printf 'deb %s %s main\n' "$mirror" "$suite" >"$rootfs/etc/apt/sources.list"
# Keep images small; the roles under test install what they need.
printf 'APT::Install-Recommends "false";\nAPT::Install-Suggests "false";\n' >"$rootfs/etc/apt/apt.conf.d/90gpucluster-lab"
# Parallel lab containers share this machine's resolver and link: a passing "Temporary failure resolving"
# must not fail a test, so apt retries each download (with back-off).
printf 'Acquire::Retries "6";\n' >>"$rootfs/etc/apt/apt.conf.d/90gpucluster-lab"
# sshd: no host keys baked into the image (every container would share them). tests/lab/playbooks/lab_up.yml
# mounts a per-host ed25519 key made on the controller, whose public half it writes to the lab's known_hosts, and the
# lab's login key as root's authorized_keys. A container started without a key (a role scenario reached by the
# driver's own connection) simply has no sshd: the condition keeps the boot clean ("running", not "degraded").
rm -f "$rootfs"/etc/ssh/ssh_host_*
mkdir -p "$rootfs/etc/ssh/sshd_config.d" "$rootfs/etc/systemd/system/ssh.service.d"
printf '%s\n' 'HostKey /etc/ssh/ssh_host_ed25519_key' 'PermitRootLogin prohibit-password' \
  'PasswordAuthentication no' 'KbdInteractiveAuthentication no' 'UseDNS no' \
  >"$rootfs/etc/ssh/sshd_config.d/gpucluster-lab.conf"
printf '[Unit]\nConditionPathExists=/etc/ssh/ssh_host_ed25519_key\n' \
  >"$rootfs/etc/systemd/system/ssh.service.d/gpucluster-lab.conf"
# munge and Slurm: no key baked into the image (every container would share it); each starts only once lab_up.yml has
# written the lab's key and slurm.conf.
rm -f "$rootfs/etc/munge/munge.key"
for unit in munge:/etc/munge/munge.key slurmd:/etc/slurm/slurm.conf slurmctld:/etc/slurm/slurm.conf; do
  mkdir -p "$rootfs/etc/systemd/system/${unit%%:*}.service.d"
  printf '[Unit]\nConditionPathExists=%s\n' "${unit#*:}" \
    >"$rootfs/etc/systemd/system/${unit%%:*}.service.d/gpucluster-lab.conf"
done
rm -rf "$rootfs/var/lib/apt/lists/"* "$rootfs/var/cache/apt/archives/"*.deb
: >"$rootfs/etc/machine-id"

tar -C "$rootfs" --numeric-owner -c . | podman import \
  --change 'CMD ["/sbin/init"]' --change 'ENV container=podman' --change 'STOPSIGNAL SIGRTMIN+3' \
  - "$tag" >/dev/null
podman tag "$tag" "$repo_name:$suite"
echo "lab image $tag built"
