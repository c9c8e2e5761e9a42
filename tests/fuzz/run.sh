#!/bin/sh
# tests/fuzz/run.sh SOURCE_ROOT BUILD_DIR SECONDS -- build the libFuzzer harnesses with clang
# (address + undefined-behaviour sanitizers) and run each for SECONDS on a copy of its
# checked-in corpus (tests/fuzz/corpus/NAME). Skips (77) with the reason where clang or its
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
lib="$src/lib/bootstrap.c $src/lib/boot_root.c $src/lib/error.c $src/lib/log.c $src/lib/config.c $src/lib/socket.c $src/lib/id.c $src/lib/wait.c $src/lib/trace.c $src/tests/fuzz/stubs.c"
for name in boot id; do
    clang $flags "$src/tests/fuzz/fuzz_$name.c" $lib -lpthread -o "$out/fuzz_$name"
    mkdir -p "$out/corpus_$name"
    cp "$src/tests/fuzz/corpus/$name"/* "$out/corpus_$name/"
    echo "fuzz_$name: $secs s from $(ls "$out/corpus_$name" | wc -l) seeds"
    set +e
    TUTTI_DEBUG=NONE "$out/fuzz_$name" -max_total_time="$secs" -rss_limit_mb=1024 -max_len=4096 \
        -print_final_stats=1 -artifact_prefix="$out/" "$out/corpus_$name" >"$out/log_$name" 2>&1
    rc=$?
    set -e
    grep -E "stat::number_of_executed_units|stat::peak_rss|ERROR|SUMMARY" "$out/log_$name" || true
    if [ $rc != 0 ]; then
        echo "fuzz_$name failed (exit $rc); the input that broke it:"
        for f in "$out"/crash-* "$out"/leak-* "$out"/oom-* "$out"/timeout-*; do
            [ -e "$f" ] && od -An -c "$f" | head -n 20
        done
        exit 1
    fi
done
echo "fuzzing passed"
