#!/bin/sh
# tests/integration/fuzz/run.sh SOURCE_ROOT BUILD_DIR SECONDS -- build the libFuzzer harnesses with clang
# (address + undefined-behaviour sanitizers) and run each for SECONDS on a copy of its
# checked-in corpus (tests/integration/fuzz/corpus/NAME). Skips (77) with the reason where clang or its
# libFuzzer runtime is missing (Debian: clang, libclang-rt-14-dev).
set -eu
src=$1 build=$2 secs=$3
out=$(mktemp -d /tmp/tutti-fuzz-XXXXXX)
trap 'rm -rf "$out"' EXIT
command -v clang >/dev/null || { echo "SKIP: clang is not installed"; exit 77; }
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }' >"$out/t.c"
clang -fsanitize=fuzzer "$out/t.c" -o "$out/t" 2>/dev/null ||
    { echo "SKIP: clang has no libFuzzer runtime (libclang-rt-14-dev)"; exit 77; }
flags="-g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -D_GNU_SOURCE -I$src/include -I$src -I$build"
# lib/boot and the lib/base it calls (lib/LAYERS: nothing there calls higher).
lib=""
for f in boot/bootstrap boot/boot_in boot/boot_root boot/socket boot/id base/error base/log \
    base/config base/wait base/trace base/init; do
    lib="$lib $src/lib/$f.c"
done
# The two harnesses are built, then run, side by side: one core each (the suite runs this
# test alone), so the test takes SECONDS of fuzzing, not twice that.
fuzz() { # fuzz NAME: build and run one harness; its output in $out/log_NAME, its status in $out/rc_NAME
    name=$1
    clang $flags "$src/tests/integration/fuzz/fuzz_$name.c" $lib -lpthread -o "$out/fuzz_$name" >"$out/log_$name" 2>&1 ||
        { echo 2 >"$out/rc_$name"; return; }
    mkdir -p "$out/corpus_$name"
    cp "$src/tests/integration/fuzz/corpus/$name"/* "$out/corpus_$name/"
    echo "fuzz_$name: $secs s from $(ls "$out/corpus_$name" | wc -l) seeds" >"$out/head_$name"
    rc=0
    TUTTI_DEBUG=NONE "$out/fuzz_$name" -max_total_time="$secs" -rss_limit_mb=1024 -max_len=4096 \
        -print_final_stats=1 -artifact_prefix="$out/$name-" "$out/corpus_$name" >"$out/log_$name" 2>&1 || rc=$?
    echo $rc >"$out/rc_$name"
}
for name in boot id; do
    fuzz $name &
done
wait
failed=0
for name in boot id; do
    rc=$(cat "$out/rc_$name" 2>/dev/null || echo 3)
    cat "$out/head_$name" 2>/dev/null || true
    grep -E "stat::number_of_executed_units|stat::peak_rss|ERROR|SUMMARY|error:" "$out/log_$name" || true
    if [ "$rc" != 0 ]; then
        echo "fuzz_$name failed (exit $rc); the input that broke it:"
        for f in "$out/$name"-crash-* "$out/$name"-leak-* "$out/$name"-oom-* "$out/$name"-timeout-*; do
            [ -e "$f" ] && od -An -c "$f" | head -n 20
        done
        failed=1
    fi
done
[ $failed = 0 ] || exit 1
echo "fuzzing passed"
