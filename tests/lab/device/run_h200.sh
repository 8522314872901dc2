#!/usr/bin/env bash
# On the accelerator machine, from the repository root: install the carried ansible-core wheels, build nccl-tests
# from the carried source against the NCCL of PyTorch's wheel, and run h200_validate.yml (nccl-tests and the PyTorch
# benchmark side by side). Writes the report under $OUT/<run id>/ and the build log to $OUT.
# Carry: .devcarry (ignored by git): whl/ holds the wheels of ansible-core 2.19.14, resolvelib 1.2.1, cryptography
# 50.0.2, cffi 2.1.1 and pycparser 3.12 (pip download, cp312 manylinux; the device README says how) and
# nccl-tests-2.19.6.tar.gz is ../shared/vendor/nccl-tests-2.19.6.tar.gz. Usage: bash tests/lab/device/run_h200.sh [run id]
set -euo pipefail
run_id=${1:-h200}
out=${OUT:?set OUT to the output folder}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .devcarry/whl/*.whl
export PYTHONPATH=/tmp/site PATH=/tmp/site/bin:$PATH
nccl_home=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0])')
work=/tmp/nccl-tests
[ -d "$work/src" ] || { mkdir -p "$work" && tar xzf .devcarry/nccl-tests-2.19.6.tar.gz -C "$work" --strip-components=1; }
start=$(date +%s)
[ -x "$work/build/all_reduce_perf" ] || make -C "$work" -j"$(nproc)" NCCL_HOME="$nccl_home" CUDA_HOME=/usr/local/cuda >"$out/nccl-tests-build.log" 2>&1
echo "nccl-tests built in $(( $(date +%s) - start )) s against $nccl_home"
mkdir -p /tmp/c/ansible_collections/gpucluster
ln -sfn "$PWD" /tmp/c/ansible_collections/gpucluster/fabric
export ANSIBLE_COLLECTIONS_PATH=/tmp/c ANSIBLE_LOCALHOST_WARNING=false
ansible-playbook --version | head -1
ansible-playbook tests/lab/device/h200_validate.yml -e report_dir="$out" -e run_id="$run_id" \
  -e nccl_tests_dir="$work/build" -e nccl_lib_dir="$nccl_home/lib" 2>&1 | tee "$out/playbook.log"
