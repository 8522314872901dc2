#!/usr/bin/env bash
# Stop the VMs of a run dir and delete it (overlays, consoles, configs). The cached base is kept.
#
#   vm-down.sh <run-dir>          KERNEL_LAB_KEEP_RUN=1 keeps the run dir (consoles) after stopping the VMs
set -euo pipefail
run_dir=${1:?usage: vm-down.sh <run-dir>}
[[ -d "$run_dir" ]] || exit 0
run_dir=$(cd "$run_dir" && pwd)

shopt -s nullglob
for pid_file in "$run_dir"/*.pid; do
  pid=$(cat "$pid_file")
  # Only a qemu started for this run dir: a stale pid file must not kill an unrelated process.
  if [[ -r /proc/$pid/cmdline ]] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "qemu-system.*$run_dir/"; then
    kill "$pid"
    for _ in $(seq 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.2
    done
    if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid"; fi
  fi
  rm -f "$pid_file"
done
if [[ -z "${KERNEL_LAB_KEEP_RUN:-}" ]]; then rm -rf "$run_dir"; fi
