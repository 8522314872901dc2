#!/usr/bin/env bash
# What a user gets from the built tarball: install it with ansible-galaxy into a clean path, then run a playbook that
# uses the collection's roles by FQCN, imports its playbook gpucluster.fabric.rdma and runs validation (the report
# must land in ./fabric-reports/, below the playbook's working directory), against one systemd lab
# container per suite, reached over SSH (a key pair and host keys made per run, strict host key checking). Nothing
# from the checkout is on any Ansible search path: ANSIBLE_COLLECTIONS_PATH is the clean
# path alone, no roles path, no ansible.cfg, its own ANSIBLE_HOME, and the playbook runs from the clean directory.
#
#   run.sh <venv> <tarball> <out dir> <suite>...
#
# With SMOKE_PYTHON38=<a python3.8 built for Debian 12>, one more bookworm container is managed through that
# interpreter (mounted read-only at the same path): the Python 3.8 target of Ubuntu 20.04, which only ansible-core 2.19
# manages; its target reports suite "bookworm-python3.8".
#
# Writes <out dir>/targets/<container>.json (the facts of each target it ran on) and <out dir>/smoke.log.
set -euo pipefail

venv=$(realpath "${1:?usage: run.sh <venv> <tarball> <out dir> <suite>...}")
tarball=$(realpath "${2:?tarball}")
out=${3:?out dir}
shift 3
(($#)) || { echo "run.sh: name at least one lab suite" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
mkdir -p "$out" && out=$(realpath "$out")

core=$("$venv/bin/python" -c 'import ansible.release; print(ansible.release.__version__)')
# Outside the checkout, one per checkout and core, so that parallel runs never share it.
work=${TMPDIR:-/tmp}/gpucluster-fabric-tarball-smoke-$(echo "$root" | md5sum | cut -c1-8)-core$core
read -r nofile nproc < <("$root/tests/lab/container-ulimits.sh")
memlock=${LAB_MEMLOCK_KIB:-$("$root/tests/lab/memlock-kib.sh")}

containers=()
cleanup() { ((${#containers[@]})) && podman rm -f "${containers[@]}" >/dev/null 2>&1 || true; }
trap cleanup EXIT

# A clean Ansible environment: drop every ANSIBLE_* the caller (e.g. the Makefile) exported.
while read -r name; do unset "$name"; done < <(compgen -e | grep '^ANSIBLE_' || true)
export ANSIBLE_HOME=$work/home ANSIBLE_COLLECTIONS_PATH=$work/collections
rm -rf "$work" && mkdir -p "$work/home" "$work/collections" "$work/empty" "$work/play" "$out/targets"
rm -f "$out"/targets/*.json

"$venv/bin/ansible-galaxy" collection install --no-deps -p "$work/collections" "$tarball"
# The installed files are the tarball's (FILES.json checksums), and they are the only gpucluster.fabric visible.
"$venv/bin/ansible-galaxy" collection verify --offline gpucluster.fabric
"$venv/bin/ansible-galaxy" collection list gpucluster.fabric --format json >"$work/list.json"
"$venv/bin/python" - "$work/list.json" "$work/collections/ansible_collections" <<'PY'
import json, sys
found = {path: cols for path, cols in json.load(open(sys.argv[1])).items() if "gpucluster.fabric" in cols}
if list(found) != [sys.argv[2]]:
    sys.exit(f"gpucluster.fabric must be found only in {sys.argv[2]}, found in: {sorted(found)}")
PY

cp "$here/smoke.yml" "$work/play/smoke.yml"
# Ansible reaches the containers over SSH, as a user reaches servers (and as the lab does): a login key and a host key
# per container made here, mounted into it, and a known_hosts written from those keys (strict checking).
ssh_dir=$work/ssh
mkdir -p "$ssh_dir" && chmod 700 "$ssh_dir"
ssh-keygen -q -t ed25519 -N '' -C "gpucluster tarball smoke" -f "$ssh_dir/id_ed25519"
: >"$ssh_dir/known_hosts"
inventory=$work/play/inventory.yml
printf 'all:\n  children:\n    gpu_nodes:\n      hosts:\n' >"$inventory"
targets=("$@")
[[ -n "${SMOKE_PYTHON38:-}" ]] && targets+=(bookworm-python3.8)
for target in "${targets[@]}"; do
  suite=${target%%-python3.8}
  extra=() python_var=
  if [[ "$target" == *-python3.8 ]]; then
    prefix=$(dirname "$(dirname "$SMOKE_PYTHON38")")
    extra=(-v "$prefix:$prefix:ro")
    python_var="          ansible_python_interpreter: $SMOKE_PYTHON38"
  fi
  image=$(LAB_IMAGE_REPO=${LAB_IMAGE_REPO:-localhost/gpucluster-lab} "$root/tests/lab/images/build-image.sh" "$suite" |
    sed -n 's/^lab image \([^ ]*\) \(is current\|built\).*/\1/p')
  [[ -n "$image" ]] || { echo "run.sh: no lab image for $suite" >&2; exit 1; }
  name=tarball-smoke-$target-core$core
  podman rm -f "$name" >/dev/null 2>&1 || true
  containers+=("$name")
  ssh-keygen -q -t ed25519 -N '' -C "$name" -f "$ssh_dir/$name.host_key"
  extra+=(-v "$ssh_dir/$name.host_key:/etc/ssh/ssh_host_ed25519_key:ro" -v "$ssh_dir/id_ed25519.pub:/root/.ssh/authorized_keys:ro")
  # A network of its own, apart from podman's default one (Molecule's role scenarios) and the lab's (fixed
  # addresses): podman hands out dynamic addresses in order, and they would reach addresses others hold.
  podman network exists gpucluster-smoke ||
    podman network create --subnet 10.89.77.0/24 gpucluster-smoke >/dev/null
  podman run -d --name "$name" --hostname "$name" --privileged --systemd always "${extra[@]}" \
    --network gpucluster-smoke \
    --ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc" "$image" /sbin/init >/dev/null
  address=$(podman inspect -f '{{(index .NetworkSettings.Networks "gpucluster-smoke").IPAddress}}' "$name")
  printf '%s %s\n' "$address" "$(cut -d' ' -f1,2 "$ssh_dir/$name.host_key.pub")" >>"$ssh_dir/known_hosts"
  printf '        %s:\n          ansible_host: %s\n          smoke_suite: %s\n' "$name" "$address" "$target" >>"$inventory"
  [[ -z "$python_var" ]] || printf '%s\n' "$python_var" >>"$inventory"
done
cat >>"$inventory" <<EOF
      vars:
        ansible_user: root
        ansible_ssh_private_key_file: $ssh_dir/id_ed25519
        ansible_ssh_common_args: >-
          -o UserKnownHostsFile=$ssh_dir/known_hosts -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes
          -o GlobalKnownHostsFile=/dev/null
        ansible_python_interpreter: auto_silent
        rdma_core_memlock: "$memlock"
        smoke_facts_dir: $out/targets
EOF
# systemd's bus appears a moment after the container starts; then --wait waits for the boot to finish.
for name in "${containers[@]}"; do
  state=
  for _ in $(seq 120); do
    state=$(podman exec "$name" systemctl is-system-running --wait 2>/dev/null || true)
    [[ "$state" == running || "$state" == degraded ]] && break
    sleep 1
  done
  [[ "$state" == running || "$state" == degraded ]] || { echo "run.sh: $name did not boot ($state)" >&2; exit 1; }
done

cd "$work/play"
# The check must be able to fail: without the clean path, the same playbook cannot even be parsed.
if ANSIBLE_COLLECTIONS_PATH=$work/empty "$venv/bin/ansible-playbook" -i inventory.yml --syntax-check smoke.yml \
  >"$work/negative.log" 2>&1; then
  echo "run.sh: smoke.yml parsed without the installed collection; the check proves nothing" >&2
  cat "$work/negative.log" >&2
  exit 1
fi
grep -q "gpucluster.fabric" "$work/negative.log" || { cat "$work/negative.log" >&2; exit 1; }

"$venv/bin/ansible-playbook" -i inventory.yml smoke.yml
echo "tarball smoke: ansible-core $core, $(ls "$out/targets" | wc -l) target(s): ${targets[*]}"
