#!/bin/sh
# tests/integration/nccl/check-nccl.sh TUTTI_RUN NCCL_CHECK -- NCCL programs on tutti (cudamock):
# nccl_check's battery with its communicators made every way NCCL's user guide shows, on the
# device path (ranks of one process address each other's device memory directly) and staged.
set -eu
run=$1 check=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
step() { echo "-- $* ($(date +%T))"; }
step "one rank per process (tutti-run), 2 and 3 ranks"
mkdir -p "$dir/a" && "$run" -n 2 "$check" ranks "$dir/a"
mkdir -p "$dir/b" && TUTTI_CUDA_P2P=0 "$run" -n 3 "$check" ranks "$dir/b"
step "windows (ncclCommWindowRegister) on the device path: tutti's symmetric path, 2 ranks"
mkdir -p "$dir/w"
out=$(TUTTI_CUDA_P2P_MIN=0 TUTTI_DEBUG=TRACE TUTTI_DEBUG_SUBSYS=COLL "$run" -n 2 "$check" ranks \
    "$dir/w" 2>&1) || { echo "$out" | grep -v " TRACE "; exit 1; }
echo "$out" | grep -v " TRACE "
took=$(echo "$out" | grep -c "symmetric path (device memory)")
echo "calls on windows that took the symmetric path: $took"
[ "$took" -eq 4 ] || { echo "expected 4 (2 all-reduces x 2 ranks)"; exit 1; }
step "ncclCommInitAll: 4 devices in one process (device path, no IPC)"
out=$(CUDAMOCK_DEVICES=4 TUTTI_CUDA_P2P_MIN=0 TUTTI_DEBUG=INFO TUTTI_DEBUG_SUBSYS=INIT "$check" all 4 2>&1) ||
    { echo "$out"; exit 1; }
echo "$out" | grep -v " tutti INFO "
echo "$out" | grep -q "device path: 4 rank(s) on one host" ||
    { echo "$out"; echo "ncclCommInitAll's 4 ranks did not take the device path"; exit 1; }
step "ncclCommInitRank in a group (as nccl-tests): 3 devices; 2 ranks sharing one device"
CUDAMOCK_DEVICES=3 "$check" group 3
CUDAMOCK_DEVICES=1 TUTTI_CUDA_P2P_MIN=0 "$check" group 2
step "non-blocking init, polled: 2 devices, staged"
CUDAMOCK_DEVICES=2 TUTTI_CUDA_P2P=0 "$check" nonblocking 2
step "a rank that makes no call: the other's stream goes on, ncclRemoteError, the reason"
mkdir -p "$dir/t" && TUTTI_NCCL_TIMEOUT=2 "$run" -n 2 "$check" timeout "$dir/t"
step done
