#!/usr/bin/env bash
# SSH into a kernel-lab VM as root with the lab key:  vm-ssh.sh <run-dir> <name> [ssh options] [command]
set -euo pipefail
run_dir=${1:?usage: vm-ssh.sh <run-dir> <name> [ssh args]}
name=${2:?usage: vm-ssh.sh <run-dir> <name> [ssh args]}
shift 2
config="$run_dir/$name.json"
[[ -f "$config" ]] || {
  echo "no VM $name in $run_dir" >&2
  exit 1
}
read -r port key known_hosts < <(python3 -c 'import json, sys
c = json.load(open(sys.argv[1])); print(c["port"], c["identity_file"], c["known_hosts"])' "$config")
# Every VM has its own host key (vm-up.sh), listed in the run dir's known_hosts: checked strictly.
exec ssh -p "$port" -i "$key" -o IdentitiesOnly=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile="$known_hosts" \
  -o GlobalKnownHostsFile=/dev/null -o LogLevel=ERROR root@127.0.0.1 "$@"
