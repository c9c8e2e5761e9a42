#!/bin/sh
# tests/integration/nccl/nccl-tests-gpu.sh BUILD [MAX] -- on a GPU (tools/gpu-check): nccl-tests built
# against tutti's libnccl.so.2 (sm_90), then all_reduce, all_gather, reduce_scatter, broadcast,
# reduce, alltoall and sendrecv with every result checked (-c 1), 8 B to MAX (default 64M), on 1
# to 4 ranks (threads) sharing the GPU (tests/support/gpushare), and NVIDIA's NCCL on 1 rank
# beside them where the toolkit has it. Fails on a run that fails or finds a wrong value.
set -u
build=$1 max=${2:-64M}
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../../.." && pwd)
cuda=$(dirname "$(dirname "$(command -v nvcc)")")
out=$build/tests/integration/nccl/nccl-tests-gpu
NCCL_TESTS_GENCODE="-gencode=arch=compute_90,code=sm_90" sh "$here/build-nccl-tests.sh" "$src" \
    "$build/bindings/nccl/libnccl.so.2" "$build/libtutti.so.0" "$cuda" "$out" || exit 1
fail=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
one() { # one LABEL LIBDIR N BINARY: a run, checked
    label=$1 libdir=$2 n=$3 bin=$4
    echo "--- $label: $(basename "$bin"), $n rank(s) sharing the GPU"
    LD_PRELOAD=$build/tests/integration/nccl/libgpushare.so GPUSHARE_DEVICES=$n \
        LD_LIBRARY_PATH=$libdir TUTTI_NCCL_TIMEOUT=60 \
        timeout 120 "$bin" -b 8 -e "$max" -f 8 -t "$n" -g 1 -c 1 -w 2 -n 5 >"$log" 2>&1
    rc=$?
    cat "$log"
    if [ $rc != 0 ] || ! grep -q "Out of bounds values : 0 OK" "$log"; then
        echo "FAILED: $label $(basename "$bin") on $n rank(s) (exit $rc)"
        fail=1
    fi
}
for t in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
    for n in 1 2 3 4; do
        one tutti "$out/home/lib" $n "$out/build/${t}_perf"
    done
    if [ -e "$cuda/lib64/libnccl.so.2" ]; then
        one "NVIDIA NCCL" "$cuda/lib64" 1 "$out/build/${t}_perf"
    fi
done
[ $fail = 0 ] && echo "nccl-tests on tutti: all passed" || echo "nccl-tests on tutti: FAILED"
exit $fail
