#!/usr/bin/env bash
# Run a command on the trixie controller (build-image.sh) with the venv of one ansible-core release, for the releases
# Debian 12's Python cannot run (2.20 and later need Python >= 3.12):
#
#   run.sh <ansible-core version> <command> [<arg>...]
#
# The venv is <checkout>/.venv-core-<version>, made inside the container from the complete lock
# tests/lab/matrix/core-<version>.txt (pip --no-deps), once per lock and image. The container shares the host's
# network (the lab's SSH addresses, the lab mirror) and process table, sees the checkout, /tmp and /var/tmp at the
# same paths, and drives the host's own podman through the host's podman service (podman-service.sh; the wrapper
# ./podman, mounted at /usr/local/bin/podman, runs the host's client in the host's root, mounted at /host: a
# privileged helper, for the lab only). The network namespaces podman makes there are
# mounted under /run/netns, which is shared with the host, so that either side can join the other's containers. The caller's ANSIBLE_*, MOLECULE_*,
# LAB_* and GPUCLUSTER_* variables and pip's index settings pass through; the command runs in the caller's working
# directory. HOME is <checkout>/.cache/controller-home, so that ansible-test's and pip's caches outlive the container.
set -euo pipefail

core=${1:?usage: run.sh <ansible-core version> <command> [<arg>...]}
shift
(($#)) || { echo "run.sh: name a command" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
lock=$root/tests/lab/matrix/core-$core.txt
[[ -f "$lock" ]] || { echo "run.sh: no lock $lock for ansible-core $core" >&2; exit 2; }
venv=$root/.venv-core-$core

mkdir -p "$root/.cache/controller-home" /run/netns
image=$("$here/build-image.sh" | sed -n 's/^controller image \([^ ]*\) \(is current\|built\).*/\1/p')
[[ -n "$image" ]] || { echo "run.sh: no controller image" >&2; exit 1; }

pass=()
while read -r name; do pass+=(--env "$name"); done < <(compgen -e |
  grep -E '^(ANSIBLE|MOLECULE|LAB|GPUCLUSTER|SMOKE)_|^TMPDIR$|^PIP_(INDEX_URL|EXTRA_INDEX_URL|TRUSTED_HOST|CERT|DEFAULT_TIMEOUT)$' || true)
ca=/etc/ssl/certs/ca-certificates.crt
mounts=(-v /:/host -v /run/netns:/host/run/netns:rshared -v "$root:$root" -v /tmp:/tmp -v /var/tmp:/var/tmp -v "$here/podman:/usr/local/bin/podman:ro")
# The host's CA bundle, so that pip in the container trusts what pip on the host trusts.
[[ -f "$ca" ]] && mounts+=(-v "$ca:$ca:ro")
[[ "$PWD" == "$root"* || "$PWD" == /tmp* || "$PWD" == /var/tmp* ]] || mounts+=(-v "$PWD:$PWD")

controller() {
  podman run --rm -i --privileged --network host --pid host "${mounts[@]}" "${pass[@]}" \
    --env "HOME=$root/.cache/controller-home" --env NO_COLOR=1 \
    --env "PATH=$venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    -w "$PWD" "$image" "$@"
}

# The lab mirror runs on the host: started here, where it outlives the container (see mirror.sh, LAB_MIRROR_NO_START).
"$root/tests/lab/mirror/mirror.sh" start >/dev/null
pass+=(--env LAB_MIRROR_NO_START=1)
pass+=(--env "GPUCLUSTER_PODMAN_SOCKET=$("$here/podman-service.sh" start)")

stamp=$(cat "$lock" | sha256sum | cut -c1-12)-${image##*:}
if [[ "$(cat "$venv/.stamp" 2>/dev/null)" != "$stamp" ]]; then
  echo "run.sh: making $venv on $image from $lock" >&2
  rm -rf "$venv"
  controller /bin/sh -c 'python3 -m venv "$0" && "$0/bin/pip" install --quiet --no-deps -r "$1"' "$venv" "$lock" >&2
  echo "$stamp" >"$venv/.stamp"
fi
controller "$@"
