#!/usr/bin/env bash
# make bench-opensm: tests/bench/opensm_bench.py (partitions rendering, real OpenSM on a 1,000-HCA ibsim fat-tree,
# the node check's isolation family on it) in a throwaway container of the lab image, with Debian's ibsim-utils,
# opensm and infiniband-diags installed there as the lab's subnet manager gets them. The container sits on a network
# of its own (gpucluster-bench, 10.89.76.0/24), removed afterwards; its only traffic out is apt's, to this machine's
# own Debian mirror. Arguments go to opensm_bench.py.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
image=${LAB_IMAGE_REPO:-localhost/gpucluster-lab}:${LAB_SUITE:-bookworm}
network=gpucluster-bench
podman network exists "$network" || podman network create --subnet 10.89.76.0/24 "$network" >/dev/null
trap 'podman network rm -f "$network" >/dev/null 2>&1 || true' EXIT
"$root/.venv/bin/python" "$root/tests/lab/collection.py" >/dev/null 2>&1 || true  # the collections root link
podman run --rm --network "$network" -e BENCH_CWD="${BENCH_CWD-/dev/shm}" -v "$root:$root" -w "$root" "$image" sh -c '
  set -e
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null && apt-get install -y -qq ibsim-utils opensm infiniband-diags >/dev/null
  exec python3 tests/bench/opensm_bench.py "$@"' sh "$@"
