#!/usr/bin/env bash
# A new machine's first `make lab`, made again on this one (docs/ci.md, "The new-machine check"):
#
#   new-machine.sh <checkout>
#
# First it removes what this project, or another tool, leaves on a machine that a first `make lab` could silently
# depend on: every lab container (label gpucluster-lab=true) and the project's podman networks, the lab mirror's
# server, cache and bridge, the lab images, the lab's shared state under /var/tmp, and podman's default bridge when no
# container uses it. Then it clones <checkout>'s HEAD into a new directory and runs `make lab` there, as a user's first
# command, then `make lab` again (a no-op: changed=0 everywhere) and
# `make lab-down`. It cannot remove the host packages (podman, debootstrap, ...) or pip's cache: a truly
# new machine also installs those (tests/lab/setup-host.sh). Exit status 0 when both passed.
# make test's phase keeps the lab images (NEW_MACHINE_KEEP_IMAGES=1) and leaves out the re-run (NEW_MACHINE_NO_RERUN=1,
# which scenario site's idempotence proves): it fits CI's budget that way (docs/ci.md).
set -euo pipefail

checkout=$(cd "${1:?usage: new-machine.sh <checkout>}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
mirror_cache=${LAB_MIRROR_CACHE:-/var/tmp/gpucluster-lab-mirror}
image_repo=${LAB_IMAGE_REPO:-localhost/gpucluster-lab}

say() { printf 'new-machine: %s\n' "$*"; }

if command -v podman >/dev/null; then
  mapfile -t containers < <(podman ps -a --filter label=gpucluster-lab=true --format '{{.Names}}')
  if ((${#containers[@]})); then
    say "removing lab containers: ${containers[*]}"
    podman rm -f -t 5 "${containers[@]}" >/dev/null
  fi
  mapfile -t networks < <(podman network ls --format '{{.Name}}' | grep '^gpucluster-' || true)
  if ((${#networks[@]})); then
    say "removing the project's podman networks: ${networks[*]}"
    podman network rm -f "${networks[@]}" >/dev/null
  fi
  mapfile -t images < <(podman images --format '{{.Repository}}:{{.Tag}}' | grep -F "$image_repo:" || true)
  if [[ -n "${NEW_MACHINE_KEEP_IMAGES:-}" ]]; then
    say "keeping the lab images (NEW_MACHINE_KEEP_IMAGES): built from a recipe hash, they hold no address"
  elif ((${#images[@]})); then
    say "removing the lab images: ${images[*]}"
    podman rmi -f "${images[@]}" >/dev/null
  fi
  # podman's default network keeps its bridge (CNI: cni-podman0) after its last container: a first lab
  # that needed it would pass here and fail on a new machine.
  default_bridge=$(podman network inspect podman --format '{{.NetworkInterface}}' 2>/dev/null || true)
  if [[ -n "$default_bridge" ]] && ip link show dev "$default_bridge" >/dev/null 2>&1; then
    if [[ -z "$(podman ps -a --filter network=podman --format '{{.Names}}')" ]]; then
      say "removing podman's default bridge $default_bridge (no container uses it)"
      ip link delete "$default_bridge"
    else
      say "keeping podman's default bridge $default_bridge: containers of others use it"
    fi
  fi
fi
"$here/mirror/mirror.sh" stop
if ip link show dev gpucluster-svc >/dev/null 2>&1; then
  say "removing the lab mirror's bridge gpucluster-svc"
  ip link delete gpucluster-svc
fi
say "removing the lab mirror's cache $mirror_cache and the labs' shared state /var/tmp/gpucluster-lab"
rm -rf "$mirror_cache" /var/tmp/gpucluster-lab

clone=$(mktemp -d "${TMPDIR:-/var/tmp}/gpucluster-new-machine.XXXXXX")
trap 'rm -rf "$clone"' EXIT
git clone --quiet "$checkout" "$clone/gpucluster.fabric"
cd "$clone/gpucluster.fabric"
say "a fresh clone of $(git rev-parse --short HEAD) in $PWD; ip -4 addr before make lab: $(ip -4 -o addr | awk '{printf "%s ", $2}')"
start=$(date +%s)
rc=0
make lab || rc=$?
say "make lab: exit $rc after $(($(date +%s) - start)) s; ip -4 addr after: $(ip -4 -o addr | awk '{printf "%s ", $2}')"
# The same command again: a no-op (changed=0 on every host, lab_up.yml's and site.yml's runs alike).
if ((rc == 0)) && [[ -z "${NEW_MACHINE_NO_RERUN:-}" ]]; then
  start=$(date +%s)
  make lab >"$clone/rerun.log" 2>&1 || rc=$?
  say "make lab again: exit $rc after $(($(date +%s) - start)) s"
  grep -E '^\S+ +: ok=' "$clone/rerun.log" || true
  if ((rc == 0)) && grep -E '^\S+ +: ok=' "$clone/rerun.log" | grep -qv ' changed=0 '; then
    say "make lab again changed something: it should change nothing"
    rc=1
  fi
  ((rc == 0)) || tail -n 60 "$clone/rerun.log"
fi
make --no-print-directory lab-down >/dev/null || say "make lab-down failed"
exit "$rc"
