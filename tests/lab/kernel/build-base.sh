#!/usr/bin/env bash
# Build (or reuse) the kernel-lab VM base: a debootstrap root file system with Debian's stock kernel, the kernel and
# initramfs extracted for qemu -kernel/-initrd, a per-build SSH login key (no host keys: vm-up.sh gives each VM its
# own), and base.img made with mke2fs -d (no loop device).
#
#   build-base.sh [suite]          default: bookworm (KERNEL_LAB_SUITE)
#
# KERNEL_LAB_NETWORK picks how the VM configures its network, like the hosts the roles meet: ifupdown (default,
# Debian 12's own default) or networkd (systemd-networkd, as under netplan). guest/<variant>/ holds its packages and files.
#
# Prints the base directory on stdout (progress goes to stderr). The directory is named after a hash of this recipe
# (this file, packages.txt, guest/, the suite and the network variant): a changed recipe builds a new base, an unchanged one is reused.
# Cache root: KERNEL_LAB_CACHE (default /var/tmp/gpucluster-kernel-lab). Needs root (debootstrap, chroot).
# Older bases of the same suite are deleted after a build (running VMs keep their open backing file).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
suite=${1:-${KERNEL_LAB_SUITE:-bookworm}}
network=${KERNEL_LAB_NETWORK:-ifupdown}
cache=${KERNEL_LAB_CACHE:-/var/tmp/gpucluster-kernel-lab}
[[ -d "$here/guest/$network" && "$network" != common ]] || {
  echo "KERNEL_LAB_NETWORK=$network is not a variant in $here/guest; use ifupdown or networkd" >&2
  exit 2
}

recipe_hash=$(
  {
    echo "$suite $network"
    cat "$here/build-base.sh" "$here/packages.txt"
    (cd "$here/guest" && find common "$network" -type f | LC_ALL=C sort | xargs sha256sum)
  } | sha256sum | cut -c1-12
)
base="$cache/base-$suite-$network-$recipe_hash"

# A base older than KERNEL_LAB_MAX_AGE_DAYS (default 14) is rebuilt too: its apt lists and kernel follow the archive.
max_age_min=$((${KERNEL_LAB_MAX_AGE_DAYS:-14} * 24 * 60))
if [[ -f "$base/complete" && -z $(find "$base/complete" -mmin +"$max_age_min") ]]; then
  echo "kernel-lab base $base is current (cached)" >&2
  echo "$base"
  exit 0
fi

[[ $(id -u) -eq 0 ]] || {
  echo "build-base.sh must run as root (debootstrap, chroot)" >&2
  exit 1
}
for tool in debootstrap mke2fs ssh-keygen; do
  command -v "$tool" >/dev/null || {
    echo "missing $tool (apt-get install debootstrap e2fsprogs openssh-client)" >&2
    exit 1
  }
done

# The Debian mirror is the one this machine's apt already uses (never hard-coded here).
mirror=${LAB_DEBIAN_MIRROR:-$("$here/../images/debian-mirror.sh")}
packages=$(cat "$here/packages.txt" "$here/guest/$network/packages.txt" | grep -v '^\s*#' | xargs | tr ' ' ',')

mkdir -p "$cache"
work=$(mktemp -d "$cache/build-$suite.XXXXXX")
rootfs="$work/rootfs"
cleanup() {
  if mountpoint -q "$rootfs/proc" 2>/dev/null; then umount "$rootfs/proc"; fi
  rm -rf "$work"
}
trap cleanup EXIT

start=$SECONDS
echo "building kernel-lab base $base from $mirror ($suite, $network)" >&2
debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 || {
  tail -n 40 "$work/debootstrap.log" >&2
  exit 1
}
echo "debootstrap done after $((SECONDS - start)) s" >&2

# Guest configuration (management NIC by DHCP, initramfs module list, fstab, ...).
cp -rT "$here/guest/common/rootfs" "$rootfs"
cp -rT "$here/guest/$network/rootfs" "$rootfs"
printf 'deb %s %s main\n' "$mirror" "$suite" >"$rootfs/etc/apt/sources.list"
: >"$rootfs/etc/machine-id" # each VM generates its own at first boot

mount -t proc proc "$rootfs/proc"
if [[ $network == networkd ]]; then chroot "$rootfs" systemctl enable systemd-networkd.service 2>/dev/null; fi
chroot "$rootfs" /bin/sh -eu <<'CHROOT'
# Nothing in the background competes with Ansible for the single emulated CPU or for the dpkg lock.
for unit in apt-daily.timer apt-daily-upgrade.timer man-db.timer e2scrub_all.timer fstrim.timer \
  e2scrub_reap.service getty@tty1.service; do
  ln -sf /dev/null "/etc/systemd/system/$unit"
done
# No host keys in the base (openssh-server's postinst made some): each VM gets its own from vm-up.sh through qemu
# fw_cfg, installed before sshd starts (guest/common: kernel-lab-ssh-hostkey.service).
rm -f /etc/ssh/ssh_host_*
systemctl enable kernel-lab-ssh-hostkey.service 2>/dev/null
# Rebuild the initramfs with only the modules the VM needs to mount its root (guest/common/rootfs/etc/initramfs-tools): a small
# initramfs boots noticeably faster under emulation than Debian's MODULES=most default.
update-initramfs -u -k all >/dev/null
CHROOT
umount "$rootfs/proc"

mkdir -p "$work/out"
kernel=$(find "$rootfs/boot" -maxdepth 1 -name "vmlinuz-*" -printf "%f\n" | sort -V | tail -n 1)
version=${kernel#vmlinuz-}
cp "$rootfs/boot/$kernel" "$work/out/vmlinuz"
cp "$rootfs/boot/initrd.img-$version" "$work/out/initrd.img"
echo "$version" >"$work/out/kernel-version"

# A fresh key for every build: it lives only in the cache (mode 0600), never in the repository.
ssh-keygen -q -t ed25519 -N '' -C "gpucluster-kernel-lab-$recipe_hash" -f "$work/out/id_ed25519"
install -d -m 0700 "$rootfs/root/.ssh"
install -m 0600 "$work/out/id_ed25519.pub" "$rootfs/root/.ssh/authorized_keys"

rm -rf "$rootfs/var/cache/apt/archives/"*.deb
# Room for the packages the roles install; the raw file is sparse and each VM writes to its own qcow2 overlay.
used_mib=$(du -sm "$rootfs" | cut -f1)
mke2fs -q -t ext4 -L kernel-lab -d "$rootfs" "$work/out/base.img" "$((used_mib + 1536))M"

for old in "$cache/base-$suite-$network-"*; do rm -rf "$old"; done
mv "$work/out" "$base"
touch "$base/complete"
echo "kernel-lab base built in $((SECONDS - start)) s: kernel $version" >&2
echo "$base"
