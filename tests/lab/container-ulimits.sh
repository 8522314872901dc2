#!/usr/bin/env bash
# Print "NOFILE NPROC": the ulimits lab containers can be given on this machine.
# podman's defaults (nofile=1048576) are refused where the hard limits are lower, so read them:
# nofile is the shell's hard limit; nproc is the hard limit capped at 32768, because podman lowers
# its own RLIMIT_NPROC to at most that and runc cannot raise a container above its parent.
set -euo pipefail
nofile=$(ulimit -Hn)
nproc=$(ulimit -Hu)
[[ "$nofile" == unlimited ]] && nofile=1048576
if [[ "$nproc" == unlimited ]] || ((nproc > 32768)); then nproc=32768; fi
echo "$nofile $nproc"
