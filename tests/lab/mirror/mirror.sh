#!/usr/bin/env bash
# Start, stop or locate the lab's NVIDIA-style CUDA apt mirror (see README.md).
#
#   mirror.sh start    build the mirror if its recipe changed (cached), serve it, print the manifest path
#   mirror.sh stop     stop the server this script started
#   mirror.sh status   exit 0 when the server answers, print the manifest path
#
# The server listens on an address of the lab's own: 10.89.79.1 on the bridge gpucluster-svc (10.89.79.0/24), which
# `start` creates when it is missing. Every container reaches it through its own network's gateway (this machine),
# whatever podman network it is on: nothing depends on an address another tool may or may not have made. An address
# of your own ($LAB_MIRROR_ADDRESS) must be on an interface this project made (tests/lab/local_addresses.py):
# `start` refuses any other. Port $LAB_MIRROR_PORT (default 8642). The manifest ($LAB_MIRROR_CACHE/current.json)
# holds the URLs and the key fingerprints.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache_root=${LAB_MIRROR_CACHE:-/var/tmp/gpucluster-lab-mirror}
port=${LAB_MIRROR_PORT:-8642}
pidfile="$cache_root/server.pid"
manifest="$cache_root/current.json"

bridge=gpucluster-svc  # tests/lab/local_addresses.py knows it by this name
default_address=10.89.79.1
default_prefix=24

# The mirror's address, made local first when it is the lab's own (the bridge and its address, idempotent).
address() {
  local addr=${LAB_MIRROR_ADDRESS:-$default_address}
  if [[ -z "${LAB_MIRROR_ADDRESS:-}" ]]; then
    ip link show dev "$bridge" >/dev/null 2>&1 || ip link add name "$bridge" type bridge
    ip -4 addr show dev "$bridge" to "$addr/32" | grep -q inet ||
      ip addr add "$addr/$default_prefix" dev "$bridge"
    ip link set dev "$bridge" up
  fi
  python3 "$here/../local_addresses.py" "$addr" || exit 1
  echo "$addr"
}

answers() { # <url>
  python3 - "$1" <<'PY'
import sys
import urllib.request

try:
    urllib.request.urlopen(sys.argv[1] + "/signed/compute/cuda/repos/debian12/x86_64/Release", timeout=10).read()
except Exception:
    sys.exit(1)
PY
}

# A busy machine may answer late: three tries before the server counts as gone (and another start replaces it).
answers_soon() { # <url>
  local try
  for try in 1 2 3; do
    answers "$1" && return 0
    sleep "$try"
  done
  return 1
}

running_pid() {
  [[ -f "$pidfile" ]] || return 1
  local pid
  pid=$(cat "$pidfile")
  kill -0 "$pid" 2>/dev/null && grep -q serve.py "/proc/$pid/cmdline" 2>/dev/null && echo "$pid"
}

stop() {
  local pid
  if pid=$(running_pid); then
    kill "$pid"
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$pidfile"
}

case ${1:-} in
start)
  # Molecule scenarios run in parallel (make molecule MOLECULE_JOBS): one start at a time builds and serves.
  mkdir -p "$cache_root"
  exec 9>"$cache_root/.start.lock"
  flock 9
  addr=$(address)
  url="http://$addr:$port"
  dir=$("$here/build-mirror.sh" "$url")
  mkdir -p "$cache_root"
  if running_pid >/dev/null && [[ "$(readlink -f "$cache_root/serving")" == "$dir" ]] && answers_soon "$url"; then
    echo "$manifest"
    exit 0
  fi
  # The matrix's controller container (tests/lab/controller/run.sh) starts the server on the host before it runs
  # anything: a server started in the container would die with it, under another run's feet.
  if [[ -n "${LAB_MIRROR_NO_START:-}" ]]; then
    echo "mirror.sh: the lab mirror does not answer at $url, and LAB_MIRROR_NO_START forbids starting it here" >&2
    exit 1
  fi
  stop
  ln -sfn "$dir" "$cache_root/serving"
  # 9>&-: the server must not inherit (and hold for ever) the start lock
  setsid python3 "$here/serve.py" "$addr" "$port" "$dir/www" >"$cache_root/server.log" 2>&1 </dev/null 9>&- &
  echo $! >"$pidfile"
  python3 - "$dir/mirror.json" "$dir" "$manifest" <<'PY'
import json
import sys

src, root, dst = sys.argv[1:]
manifest = json.load(open(src))
manifest["root"] = root
manifest["keyring"] = root + "/lab-keyring.gpg"
with open(dst, "w") as f:
    json.dump(manifest, f, indent=2)
    f.write("\n")
PY
  for _ in $(seq 50); do
    if ! running_pid >/dev/null; then
      cat "$cache_root/server.log" >&2
      exit 1
    fi
    if ss -ltn "sport = :$port" | grep -q LISTEN; then break; fi
    sleep 0.1
  done
  echo "$manifest"
  ;;
stop) stop ;;
status)
  running_pid >/dev/null && answers "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["url"])' "$manifest")"
  echo "$manifest"
  ;;
*)
  echo "usage: mirror.sh start|stop|status" >&2
  exit 2
  ;;
esac
