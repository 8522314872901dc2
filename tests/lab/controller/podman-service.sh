#!/usr/bin/env bash
# The host's podman API service for the matrix's controller container (run.sh): podman commands run in the container
# reach the host's podman through it (`podman --remote`, the image's /usr/local/bin/podman), so that containers are
# created, entered and copied into by the host's own podman, in the host's namespaces. (The host's podman binary run
# directly in the container would mount the new containers' file systems in the controller's mount namespace, where
# `podman exec` does not find them.)
#
#   podman-service.sh start   start the service unless it answers; print its socket
#   podman-service.sh stop    stop the service this script started
#
# The socket is <checkout>/.cache/controller-podman.sock; the service runs until stopped (`make matrix` stops it).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
mkdir -p "$root/.cache"
socket=$root/.cache/controller-podman.sock
pidfile=$root/.cache/controller-podman.pid

answers() { podman --remote --url "unix://$socket" version >/dev/null 2>&1; }

case ${1:-} in
start)
  exec 9>"$root/.cache/controller-podman.lock"
  flock 9
  if ! answers; then
    rm -f "$socket"
    # 9>&-: the service must not hold the start lock for ever
    setsid podman system service --time=0 "unix://$socket" >"$root/.cache/controller-podman.log" 2>&1 </dev/null 9>&- &
    echo $! >"$pidfile"
    # Up to 60 s: on a loaded 2-core machine (CI starting scenarios and building images beside it) the service has
    # taken longer than 10 s to answer.
    for _ in $(seq 600); do answers && break; sleep 0.1; done
    answers || { cat "$root/.cache/controller-podman.log" >&2; exit 1; }
  fi
  echo "$socket"
  ;;
stop)
  # /proc/<pid>/cmdline separates the arguments with NUL bytes, which grep does not match with "."
  if [[ -f "$pidfile" ]] && tr '\0' ' ' <"/proc/$(cat "$pidfile")/cmdline" 2>/dev/null | grep -q "system service"; then
    kill "$(cat "$pidfile")"
  fi
  rm -f "$pidfile"
  ;;
*)
  echo "usage: podman-service.sh start|stop" >&2
  exit 2
  ;;
esac
