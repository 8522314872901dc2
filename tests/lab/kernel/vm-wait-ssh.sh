#!/usr/bin/env bash
# Wait until every VM of a run dir (or the named ones) accepts SSH with the lab key and has finished booting.
#
#   vm-wait-ssh.sh <run-dir> [name...]        KERNEL_LAB_SSH_TIMEOUT seconds (default 300)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
run_dir=${1:?usage: vm-wait-ssh.sh <run-dir> [name...]}
shift
if [[ $# -eq 0 ]]; then
  for f in "$run_dir"/*.json; do set -- "$@" "$(basename "$f" .json)"; done
fi
deadline=$((SECONDS + ${KERNEL_LAB_SSH_TIMEOUT:-300}))

for name in "$@"; do
  until "$here/vm-ssh.sh" "$run_dir" "$name" -o ConnectTimeout=5 -o BatchMode=yes \
    'timeout 120 systemctl is-system-running --wait >/dev/null 2>&1; true' 2>/dev/null; do
    pid_file="$run_dir/$name.pid"
    if ! kill -0 "$(cat "$pid_file" 2>/dev/null)" 2>/dev/null; then
      echo "$name: qemu is not running; console tail:" >&2
      tail -n 30 "$run_dir/$name.console" >&2 || true
      exit 1
    fi
    if ((SECONDS > deadline)); then
      echo "$name: no SSH after ${KERNEL_LAB_SSH_TIMEOUT:-300} s; console tail:" >&2
      tail -n 30 "$run_dir/$name.console" >&2 || true
      exit 1
    fi
    sleep 3
  done
  echo "$name: SSH ready after $SECONDS s" >&2
done
