#!/bin/sh
# Install into a scratch root, build tests/integration/install/example.c against it with pkg-config
# exactly as a user would, run it on 2 ranks with the installed tutti-run, and check that
# libtutti.so exports the public API and nothing else (and the bindings, where built).
set -eu
build=$1
src=$2
dest=$(mktemp -d /tmp/tutti-install-XXXXXX)
trap 'rm -rf "$dest"' EXIT

meson install -C "$build" --no-rebuild --destdir "$dest" >/dev/null
pc=$(find "$dest" -name tutti.pc | head -n 1)
[ -n "$pc" ] || { echo "tutti.pc was not installed"; exit 1; }
lib=$(find "$dest" -name 'libtutti.so' | head -n 1)
[ -n "$lib" ] || { echo "libtutti.so was not installed"; exit 1; }
[ -n "$(find "$dest" -name tutti.h)" ] || { echo "tutti.h was not installed"; exit 1; }

export PKG_CONFIG_PATH="$(dirname "$pc")"
export PKG_CONFIG_SYSROOT_DIR="$dest"
cc "$src/tests/integration/install/example.c" $(pkg-config --cflags --libs tutti) -o "$dest/example"

export LD_LIBRARY_PATH="$(dirname "$lib")"
run=$(find "$dest" -name tutti-run -type f | head -n 1)
out=$("$run" -n 2 "$dest/example")
echo "$out"
[ "$(echo "$out" | grep -c 'ok$')" = 2 ] || { echo "example did not pass on both ranks"; exit 1; }

extra=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^tutti_' | grep -v '^TUTTI_0$' || true)
if [ -n "$extra" ]; then
    echo "libtutti.so exports symbols outside the public API:"
    echo "$extra"
    exit 1
fi
# NCCL's API, where it was built: beside the system's libraries only in its own folder (it must
# not shadow NVIDIA's), exporting NCCL's functions only, and finding the installed libtutti.
nccl=$(find "$dest" -name 'libnccl.so.2' | head -n 1)
if [ -n "$nccl" ]; then
    [ "$(basename "$(dirname "$nccl")")" = tutti-nccl ] || { echo "libnccl.so.2 installed in $nccl"; exit 1; }
    bad=$(nm -D --defined-only "$nccl" | awk '$2 ~ /^[TW]$/ {print $3}' | grep -v '^p\?nccl' || true)
    [ -z "$bad" ] || { echo "libnccl.so.2 exports more than NCCL's API:"; echo "$bad"; exit 1; }
    ldd "$nccl" | grep -q "libtutti.so.0 => $(dirname "$lib")/" ||
        { echo "the installed libnccl.so.2 does not find the installed libtutti"; ldd "$nccl"; exit 1; }
    echo "libnccl.so.2 installed in $(dirname "$nccl"): ok"
fi
# The PyTorch backend, where it was built: importable from where it was installed, and working.
mod=$(find "$dest" -name '_tutti_torch*.so' | head -n 1)
if [ -n "$mod" ]; then
    pydir=$(dirname "$mod")
    [ -f "$pydir/tutti_torch/__init__.py" ] || { echo "tutti_torch/__init__.py was not installed"; exit 1; }
    PYTHONPATH="$pydir" /usr/bin/python3 -c '
import torch, torch.distributed as dist, tutti_torch
dist.init_process_group("tutti", init_method="file://'"$dest"'/store", rank=0, world_size=1)
x = torch.arange(4.0); dist.all_reduce(x); assert x.tolist() == [0, 1, 2, 3]
print("tutti_torch installed: ok")' || { echo "the installed tutti_torch does not work"; exit 1; }
fi
echo "install check passed"
