#!/bin/sh
# tests/gpu/check-gpu.sh TUTTI_RUN GPU_CHECK -- the gpu suite: CUDA device buffers on 1 to 4
# ranks sharing GPU 0 (gpu_check.c says what each mode proves), on the device path (p2p over
# CUDA IPC, device kernels; TUTTI_CUDA_P2P_MIN=0 so every size takes it) and on the staged
# one (TUTTI_CUDA_P2P=0). Without a usable device it prints why and exits 77, which meson
# reports as SKIP.
set -eu
run=$1 check=$2
rc=0
"$check" probe || rc=$?
[ $rc = 0 ] || exit $rc # 77: no device (the reason is printed above)
export TUTTI_TIMEOUT=120
step() { echo "-- $* ($(date +%T))"; }
step kernels
"$check" kernels
for n in 2 4 3 1; do
    step "device path, $n rank(s)"
    # Calls on a wrapped CUDA stream return at once (TUTTI_CUDA_ASYNC=1, the default).
    TUTTI_CUDA_P2P_MIN=0 "$run" -n $n "$check" order async
    # The device path must be the one taken, wrapped streams waiting on the GPU: rank 0 says
    # so at init.
    out=$(TUTTI_CUDA_P2P_MIN=0 TUTTI_DEBUG=INFO TUTTI_DEBUG_SUBSYS=INIT "$run" -n $n "$check" \
        matrix 2>&1) || { echo "$out"; echo "FAILED: matrix on $n rank(s), device path"; exit 1; }
    echo "$out" | grep -v " tutti INFO " || true
    echo "$out" | grep -q "device path: $n rank(s) on one host" ||
        { echo "$out"; echo "FAILED: matrix on $n rank(s) did not take the device path"; exit 1; }
    echo "$out" | grep -q "wrapped CUDA streams return at once" ||
        { echo "$out"; echo "FAILED: wrapped CUDA streams do not wait on the GPU"; exit 1; }
    TUTTI_CUDA_P2P_MIN=0 "$run" -n $n "$check" p2p
done
step "device path and staged calls interleaved on one CUDA stream; TUTTI_CUDA_ASYNC=0"
TUTTI_CUDA_P2P_MIN=1M "$run" -n 2 "$check" order async
TUTTI_CUDA_P2P_MIN=1M "$run" -n 4 "$check" order async
TUTTI_CUDA_ASYNC=0 TUTTI_CUDA_P2P_MIN=0 "$run" -n 2 "$check" order
step "staged path"
for n in 1 2 4; do
    TUTTI_CUDA_P2P=0 "$run" -n $n "$check" order async
done
TUTTI_CUDA_P2P=0 "$run" -n 2 "$check" matrix
TUTTI_CUDA_P2P=0 "$run" -n 2 "$check" p2p
step "point-to-point with the default TUTTI_CUDA_P2P_MIN (the largest size on the device path)"
"$run" -n 4 "$check" p2p
step "refused calls"
"$run" -n 2 "$check" mix
TUTTI_CUDA_P2P_MIN=0 TUTTI_CHECK_COLL=1 "$run" -n 3 "$check" kinds
step done
echo "gpu checks passed"
