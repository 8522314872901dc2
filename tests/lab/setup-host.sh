#!/usr/bin/env bash
# Prepare a Debian 12 machine (as root) for the lab and the tests: the Debian packages the harness
# needs, podman configured as this machine requires (runc; see docs/lab.md, "What a lab host needs"), and kernel limits
# for many systemd containers. Idempotent; quick when everything is in place.
set -euo pipefail

# podman/runc/debootstrap: lab containers and images; apt-utils/gnupg/dpkg-dev: the lab CUDA apt mirror
# (tests/lab/mirror). With --kernel-lab also qemu for the real-kernel lab (tests/lab/kernel).
# openssh-client: the lab reaches its containers over SSH. mstflint: its parameter database, which
# tools/mlxconfig_catalogue.py --check (a unit test) compares the catalogue with.
packages=(podman runc debootstrap apt-utils gnupg dpkg-dev openssh-client mstflint)
if [[ "${1:-}" == "--kernel-lab" ]]; then
  packages+=(qemu-system-x86 qemu-utils e2fsprogs)
fi

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "installing host packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# crun refuses this machine's cgroup layout; runc works.
conf=/etc/containers/containers.conf
if ! grep -qs '^runtime *= *"runc"' "$conf"; then
  mkdir -p /etc/containers
  if grep -qs '^\[engine\]' "$conf"; then
    sed -i '/^\[engine\]/a runtime = "runc"' "$conf"
  else
    printf '[engine]\nruntime = "runc"\n' >>"$conf"
  fi
fi

# podman's default container ulimits (nofile=1048576) are refused where this machine's hard limits are lower: make
# its default what the machine allows, so that Molecule's platforms need no podman-only ulimits setting.
if ! grep -qs '^default_ulimits' "$conf"; then
  read -r nofile nproc < <("$(dirname "$0")/container-ulimits.sh")
  line="default_ulimits = [\"nofile=$nofile:$nofile\", \"nproc=$nproc:$nproc\"]"
  if grep -qs '^\[containers\]' "$conf"; then
    sed -i "/^\[containers\]/a $line" "$conf"
  else
    printf '[containers]\n%s\n' "$line" >>"$conf"
  fi
fi

# ansible-navigator refuses to start an execution environment under podman without /dev/mqueue (POSIX message
# queues, for multiprocessing in the EE); this machine does not mount it by default. For `make lab-ee`.
if [[ ! -d /dev/mqueue ]]; then
  mkdir -p /dev/mqueue
  mount -t mqueue mqueue /dev/mqueue
fi

# Each systemd container takes several inotify instances; the default 128 stops at ~26 containers.
if (($(sysctl -n fs.inotify.max_user_instances) < 2048)); then
  sysctl -q -w fs.inotify.max_user_instances=2048
fi
