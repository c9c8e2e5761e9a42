#!/bin/sh
# tests/integration/gpu/check-gpu.sh TUTTI_RUN GPU_CHECK -- the gpu suite: CUDA device buffers on 1 to 4
# ranks sharing GPU 0 (gpu_check.c says what each mode proves), on the device path (p2p over
# CUDA IPC, device kernels; TUTTI_CUDA_P2P_MIN=0 so every size takes it) and on the staged
# one (TUTTI_CUDA_P2P=0). Without a usable device it prints why and exits 77, which meson
# reports as SKIP. A failed check does not stop the others (a GPU run is rare: it should say
# everything it can); the suite fails at the end, listing them. A wait that makes no progress
# for 30 s fails (TUTTI_TIMEOUT), and every check is bounded, so a hang costs little.
set -u
run=$1 check=$2
# The suite's other programs sit beside gpu_check, with the same suffix (_mock on cudamock).
soak=$(dirname "$check")/soak_check${check##*gpu_check}
kern=$(dirname "$check")/kernel_check${check##*gpu_check}
symdev=$(dirname "$check")/symdev_check${check##*gpu_check}
rc=0
"$check" probe || rc=$?
[ $rc = 0 ] || exit $rc # 77: no device (the reason is printed above)
export TUTTI_TIMEOUT=30
failed=""
step() { echo "-- $* ($(date +%T))"; }
t() { # t NAME CMD...: one check, at most 120 s (a shell function bounds itself)
    name=$1
    shift
    case $(command -v "$1") in
    /*) timeout 120 "$@" ;;
    *) "$@" ;;
    esac
    [ $? = 0 ] && return 0
    echo "FAILED: $name"
    failed="$failed
  $name"
    return 1
}
# Wrapped-stream calls that return at once fail alike everywhere if they fail at all: after
# the first failure the others are listed, not run.
async_broken=""
t_async() {
    if [ -n "$async_broken" ]; then
        echo "SKIPPED: $1 (after: $async_broken)"
        failed="$failed
  $1 (not run)"
        return
    fi
    t "$@" || async_broken=$1
}
# The device path, with the init log: rank 0 must say the path was taken and that wrapped
# CUDA streams wait on the GPU.
matrix_device() {
    n=$1
    out=$(TUTTI_CUDA_P2P_MIN=0 TUTTI_DEBUG=INFO TUTTI_DEBUG_SUBSYS=INIT timeout 120 "$run" -n $n \
        "$check" matrix 2>&1)
    rc=$?
    echo "$out" | grep -v " tutti INFO "
    [ $rc = 0 ] || return 1
    echo "$out" | grep -q "device path: $n rank(s) on one host" ||
        { echo "$out"; echo "matrix on $n rank(s) did not take the device path"; return 1; }
    echo "$out" | grep -q "wrapped CUDA streams return at once" ||
        { echo "$out"; echo "wrapped CUDA streams do not wait on the GPU"; return 1; }
}
step kernels
t "kernels" "$kern" kernels
for n in 2 4 3 1; do
    step "device path, $n rank(s)"
    # Calls on a wrapped CUDA stream return at once (TUTTI_CUDA_ASYNC=1, the default).
    t_async "order async, device path, $n rank(s)" \
        env TUTTI_CUDA_P2P_MIN=0 "$run" -n $n "$check" order async
    t "matrix, device path, $n rank(s)" matrix_device $n
    t "p2p, device path, $n rank(s)" env TUTTI_CUDA_P2P_MIN=0 "$run" -n $n "$check" p2p
    t "group, device path, $n rank(s)" env TUTTI_CUDA_P2P_MIN=0 "$run" -n $n "$check" group
done
# Symmetric device memory (tutti_mem_alloc_device, windows). symdev_took MIN CMD...: CMD with
# the COLL trace on; at least MIN of its calls must log the symmetric path on device memory.
# Ranks as threads of one process (as nccl-tests' -t) address each other's device memory
# directly, with no IPC handle (CUDA refuses a process its own).
symdev_took() {
    min=$1
    shift
    out=$(TUTTI_CUDA_P2P_MIN=0 TUTTI_DEBUG=TRACE TUTTI_DEBUG_SUBSYS=COLL timeout 120 "$@" 2>&1)
    rc=$?
    echo "$out" | grep -v " tutti TRACE "
    [ $rc = 0 ] || return 1
    took=$(echo "$out" | grep -c "symmetric path (device memory)")
    echo "$took calls took the symmetric path on device memory"
    [ "$took" -ge "$min" ] || { echo "too few (at least $min)"; return 1; }
}
step "symmetric device memory"
t "symmetric device memory, 3 ranks as threads of one process" \
    symdev_took 300 "$symdev" threads 3
for n in 2 3 4; do
    t "symmetric device memory, matrix, $n ranks" \
        symdev_took $((n * 1000)) "$run" -n $n "$symdev" matrix
    t "symmetric device memory, rules, $n ranks" env TUTTI_CUDA_P2P_MIN=0 "$run" -n $n "$symdev" rules
done
t "symmetric device memory, the program's own cudaMalloc memory, 3 ranks" \
    symdev_took 3000 "$run" -n 3 "$symdev" matrix-own
t "symmetric device memory, rules, TUTTI_CHECK_COLL=1, 3 ranks" \
    env TUTTI_CUDA_P2P_MIN=0 TUTTI_CHECK_COLL=1 "$run" -n 3 "$symdev" rules
step "device path: algorithms that send to the rank itself (connected at init)"
t "matrix, device path, TUTTI_DETERMINISTIC=1, 3 ranks" \
    env TUTTI_DETERMINISTIC=1 TUTTI_CUDA_P2P_MIN=0 "$run" -n 3 "$check" matrix
t "matrix, device path, flat all-reduce, 4 ranks" \
    env TUTTI_ALGO=all_reduce:flat TUTTI_CUDA_P2P_MIN=0 "$run" -n 4 "$check" matrix
step "device path and staged calls interleaved on one CUDA stream; TUTTI_CUDA_ASYNC=0"
for n in 2 4; do
    t_async "order async, interleaved, $n ranks" \
        env TUTTI_CUDA_P2P_MIN=1M "$run" -n $n "$check" order async
done
t "order, TUTTI_CUDA_ASYNC=0" env TUTTI_CUDA_ASYNC=0 TUTTI_CUDA_P2P_MIN=0 "$run" -n 2 "$check" order
step "staged path"
for n in 1 2 4; do
    t "order async, staged, $n rank(s)" env TUTTI_CUDA_P2P=0 "$run" -n $n "$check" order async
done
t "matrix, staged, 2 ranks" env TUTTI_CUDA_P2P=0 "$run" -n 2 "$check" matrix
t "p2p, staged, 2 ranks" env TUTTI_CUDA_P2P=0 "$run" -n 2 "$check" p2p
t "group, staged, 2 ranks" env TUTTI_CUDA_P2P=0 "$run" -n 2 "$check" group
step "random sequences: device-path, staged and NULL-stream calls interleaved (soak)"
for n in 2 3 4; do
    t "soak, $n ranks" env TUTTI_CUDA_P2P_MIN=16K "$run" -n $n "$soak" soak
done
step "point-to-point with the default TUTTI_CUDA_P2P_MIN (the largest size on the device path)"
t "p2p, default threshold, 4 ranks" "$run" -n 4 "$check" p2p
step "refused calls"
t "mix" "$run" -n 2 "$check" mix
t "capture, device path" env TUTTI_CUDA_P2P_MIN=0 "$run" -n 2 "$check" capture
t "capture, staged" env TUTTI_CUDA_P2P=0 "$run" -n 2 "$check" capture
t "kinds" env TUTTI_CUDA_P2P_MIN=0 TUTTI_CHECK_COLL=1 "$run" -n 3 "$check" kinds
step "a failing kernel (cudamock only: a GPU passes it, saying so)"
for n in 2 3; do
    t "fault, device path, $n ranks" env TUTTI_CUDA_P2P_MIN=0 "$run" -n $n "$soak" fault
done
step done
if [ -n "$failed" ]; then
    echo "gpu checks FAILED:$failed"
    exit 1
fi
echo "gpu checks passed"
