#!/bin/sh
# tests/integration/nccl/build-nccl-tests.sh SRC LIBNCCL LIBTUTTI CUDA_ROOT OUT -- build
# nccl-tests (NVIDIA's suite for NCCL, kept outside the project: NCCL_TESTS_DIR, else the peers
# folder beside the checkout, inside it (a device machine's copy) or beside /work/main) against
# tutti's libnccl.so.2, into OUT, for one GPU architecture: PTX for compute_90 by default (a
# third faster to build than sm_90 code; the driver compiles it at load), NCCL_TESTS_GENCODE to
# choose (tools/gpu-check: sm_90). It checks that every binary links against our library: the
# link is made with only our libnccl.so on the library path, and the binaries are then loaded
# with it. Running them needs a GPU (tools/gpu-check).
set -eu
src=$1 lib=$2 tutti=$3 cuda=$4 out=$5
nt=${NCCL_TESTS_DIR:-}
for d in "$src/../shared/peers/nccl-tests" "$src/shared/peers/nccl-tests" /work/shared/peers/nccl-tests; do
    [ -n "$nt" ] || { [ -f "$d/src/Makefile" ] && nt=$d; } || true
done
if [ -z "$nt" ]; then
    echo "nccl-tests not found (NCCL_TESTS_DIR, $src/../shared/peers/nccl-tests, /work/shared/peers/nccl-tests)"
    exit 1
fi
gencode=${NCCL_TESTS_GENCODE:--gencode=arch=compute_90,code=compute_90}
rm -rf "$out"
mkdir -p "$out/home/lib" "$out/home/include" "$out/build"
# NCCL_HOME: the toolkit's nccl.h and our library; CUDA_LIB: CUDA's runtime without the
# toolkit's own libnccl.so, which would otherwise be found first.
ln -s "$cuda/include/nccl.h" "$out/home/include/nccl.h"
ln -s "$lib" "$out/home/lib/libnccl.so"
ln -s "$lib" "$out/home/lib/libnccl.so.2"
ln -s "$tutti" "$out/home/lib/libtutti.so.0"
for f in "$cuda"/lib64/libcudart.so*; do ln -s "$f" "$out/home/lib/"; done
# nccl-tests writes only under BUILDDIR; a copy of its sources keeps the peers folder clean of
# anything make might leave.
cp -r "$nt/src" "$nt/verifiable" "$nt/os" "$out/"
echo "building nccl-tests from $nt ($gencode) against $lib"
# (LD_LIBRARY_PATH: where the linker finds libnccl's own libtutti.so.0)
LD_LIBRARY_PATH="$out/home/lib" make -C "$out/src" -j"$(nproc)" NCCL_HOME="$out/home" CUDA_HOME="$cuda" CUDA_LIB="$out/home/lib" \
    NVCC_GENCODE="$gencode" BUILDDIR="$out/build" \
    >"$out/make.log" 2>&1 || { tail -40 "$out/make.log"; exit 1; }
n=0
for b in "$out"/build/*_perf; do
    LD_LIBRARY_PATH="$out/home/lib" ldd "$b" | grep -q "libnccl.so.2 => $out/home/lib/libnccl.so.2" ||
        { echo "$b does not load $lib"; ldd "$b"; exit 1; }
    n=$((n + 1))
done
[ "$n" -ge 10 ] || { echo "only $n nccl-tests binaries were built"; exit 1; }
echo "nccl-tests: $n binaries built against $lib"
