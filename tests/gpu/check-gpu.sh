#!/bin/sh
# tests/gpu/check-gpu.sh TUTTI_RUN GPU_CHECK -- the gpu suite: CUDA device buffers on 1 to 4
# ranks sharing GPU 0 (gpu_check.c says what each mode proves). Without a usable device it
# prints why and exits 77, which meson reports as SKIP.
set -eu
run=$1 check=$2
rc=0
"$check" probe || rc=$?
[ $rc = 0 ] || exit $rc # 77: no device (the reason is printed above)
export TUTTI_TIMEOUT=120
"$check" kernels
for n in 1 2 3 4; do
    "$run" -n $n "$check" matrix
    "$run" -n $n "$check" order
    "$run" -n $n "$check" p2p
done
"$run" -n 2 "$check" mix
echo "gpu checks passed"
