#!/bin/sh
# tests/integration/sanitize/run.sh SOURCE_ROOT BUILD_DIR MODE -- the suite under a checker.
#   asan      a build with AddressSanitizer + UndefinedBehaviorSanitizer (BUILD_DIR/san-asan);
#             the unit and fault suites and the launcher, perf, env, stream and DDP tests, halting on the
#             first report (leaks included), point-to-point by single copy, groups of
#             collectives (group_check, and 3 s of its soak), then net_ib's
#             zero-copy path over the emulated verbs provider (2 and 4 emulated nodes,
#             registered buffers, a late HCA), symmetric memory (coll_check --symmetric,
#             a soak mixing it with the usual path, sym_check misuse), and two of
#             tutti_comm_shrink's cases (a second kill during the shrink, a fenced rank)
#   tsan      a build with ThreadSanitizer (BUILD_DIR/san-tsan); ranks as threads of one
#             process (tests/integration/sanitize/tsan_ranks.c: Criterion's runner does not run under it),
#             then the host-stream checks (a worker thread per stream) and the DDP layer's
#             averaging, uneven-input and ZeRO-3 checks as 2-rank jobs
#   valgrind  a 2-rank all-reduce job under valgrind memcheck: no invalid access, no leak
set -eu
src=$1 build=$2 mode=$3
case $mode in
asan|tsan)
    dir=$build/san-$mode
    opt=$([ "$mode" = asan ] && echo "address,undefined" || echo "thread")
    # Without CUDA: the sanitizers would see into the CUDA runtime (and the asan build is the
    # suite's -Dcuda=disabled build). Without the PyTorch backend: none of these checks use
    # it, and its three C++ files with libtorch's headers compile slowly. The tsan build also
    # leaves out verbs and hwloc (its checks use neither): the suite's build without any
    # optional library, which must compile.
    less=$([ "$mode" = tsan ] && echo "-Dibverbs=disabled -Dhwloc=disabled" || true)
    [ -f "$dir/build.ninja" ] || meson setup "$dir" "$src" -Db_sanitize="$opt" -Db_lundef=false \
        -Dbuildtype=debugoptimized -Dcuda=disabled -Dtorch=disabled $less >/dev/null
    # The outer meson test points LD_LIBRARY_PATH at the plain build: the inner one must not
    # inherit it, or the instrumented tests would load the uninstrumented library.
    unset LD_LIBRARY_PATH
    export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
    export LSAN_OPTIONS="suppressions=$src/tests/integration/sanitize/lsan.supp:print_suppressions=0"
    export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
    out=$(mktemp /tmp/tutti-san-XXXXXX)
    trap 'rm -f "$out"' EXIT
    build_quiet() { # build_quiet DIR [TARGET...]: ninja, its output shown only if it fails
        ninja -C "$@" >"$out" 2>&1 || { grep -E "FAILED|error" "$out" | head -n 20; exit 1; }
    }
    if [ "$mode" = asan ]; then
        build_quiet "$dir"
        meson test -C "$dir" --no-rebuild --print-errorlogs --suite unit --suite faults | tee "$out"
        meson test -C "$dir" --no-rebuild --print-errorlogs launcher env perf streams ddp |
            tee -a "$out"
        # tutti_comm_shrink's agreement and retries: a second rank killed while the others
        # shrink, and a stopped rank fenced.
        meson test -C "$dir" --no-rebuild --print-errorlogs shrink \
            --test-args='--filter=shrink/@(second_rank_killed_while_shrinking|stopped_rank_is_fenced)' |
            tee -a "$out"
        want=15
        # Recursive halving's scratch buffer on real ranks (one folds in), then a larger call
        # that grows it.
        TUTTI_ALGO=reduce_scatter:rh TUTTI_TIMEOUT=60 "$dir/tools/tutti-run" -n 3 \
            "$dir/tests/coll_check" matrix 10007
        echo "asan: recursive-halving reduce-scatter passed"
        # Point-to-point batches and all-to-all by single copy (whole messages read out of the
        # sender's buffers, the executor's bookkeeping of what moved ahead).
        for m in p2p all_to_all; do
            TUTTI_SHM_SINGLE_COPY=1 TUTTI_TIMEOUT=60 "$dir/tools/tutti-run" -n 2 \
                "$dir/tests/coll_check" $m
        done
        echo "asan: point-to-point by single copy passed"
        # Groups of collectives: packed runs' copies in and out, then random groups.
        TUTTI_TIMEOUT=60 "$dir/tools/tutti-run" -n 3 "$dir/tests/group_check"
        TUTTI_TIMEOUT=60 "$dir/tools/tutti-run" -n 2 "$dir/tests/group_check" soak 3 1
        echo "asan: groups of collectives passed"
        # Symmetric memory: the pass and the gate's lines, a mix with the usual path, misuse.
        TUTTI_TIMEOUT=60 "$dir/tools/tutti-run" -n 3 "$dir/tests/coll_check" matrix 10007 --symmetric
        TUTTI_TIMEOUT=60 "$dir/tools/tutti-run" -n 3 "$dir/tests/coll_check" soak 3 1 \
            --symmetric-mix
        TUTTI_TIMEOUT=60 "$dir/tools/tutti-run" -n 2 "$dir/tests/sym_check" misuse
        # Across 2 nodes x 2: the hierarchical plans' stages inside each node on windows.
        TUTTI_ALGO='all_reduce:hier;all_gather:hier;broadcast:hier' TUTTI_TIMEOUT=60 \
            "$dir/tools/tutti-run" -n 4 --nodes 2 "$dir/tests/sym_check" nodes
        echo "asan: symmetric memory passed"
    else
        build_quiet "$dir" tests/tsan_ranks tests/stream_check tests/ddp_check tests/ddp_join_check \
            tests/ddp_zero3_check tools/tutti-run
        TUTTI_SOCKET_IFNAME==lo "$dir/tests/tsan_ranks"
        # Host streams: each rank's worker thread against its caller, as real processes.
        for m in order async mixed fail abort; do
            TUTTI_SOCKET_IFNAME==lo TUTTI_TIMEOUT=60 "$dir/tools/tutti-run" -n 2 \
                "$dir/tests/stream_check" $m
        done
        # The DDP layer: its stream worker reduces buckets while the caller marks gradients.
        # ZeRO-3: gradient buffers taken from its window on the caller's thread, given back on
        # the stream's.
        for args in "ddp_check average none 1" "ddp_check average int8 1" \
            "ddp_join_check join none 1 sgd1" "ddp_zero3_check zero3"; do
            # shellcheck disable=SC2086 # the words of args: a program and its arguments
            set -- $args
            prog=$1
            shift
            TUTTI_SOCKET_IFNAME==lo TUTTI_TIMEOUT=60 "$dir/tools/tutti-run" -n 2 \
                "$dir/tests/$prog" "$@"
        done
        exit 0
    fi
    # Every run must have run its tests and failed none (meson exits 0 when nothing matched).
    ok=$(grep -c '^ *[0-9]*/[0-9]* .* OK ' "$out" || true)
    failed=$(grep -c '^ *[0-9]*/[0-9]* .* FAIL ' "$out" || true)
    if [ "$ok" -lt "$want" ] || [ "$failed" -gt 0 ]; then
        echo "sanitizer run: $ok test(s) passed (at least $want must), $failed failed"
        exit 1
    fi
    # net_ib's zero-copy path (the executor's hazard tracking, the registration cache) over
    # the emulated verbs provider with a late HCA, where the build has the verbs transport.
    emu=$dir/tests/libtutti-ibemu.so
    if [ -f "$emu" ]; then
        for job in "2 p2p" "4 matrix"; do
            set -- $job
            TUTTI_ALGO="all_reduce:rd;all_gather:rd" TUTTI_IBVERBS_LIB=$emu TUTTI_IBEMU_DELAY_US=200 \
                TUTTI_TIMEOUT=60 "$dir/tools/tutti-run" -n "$1" --nodes "$1" \
                "$dir/tests/coll_check" "$2" 20003 --register
        done
        echo "asan: net_ib zero-copy jobs passed"
    fi
    ;;
valgrind)
    command -v valgrind >/dev/null || { echo "SKIP: valgrind is not installed"; exit 77; }
    log=$(mktemp -d /tmp/tutti-vg-XXXXXX)
    trap 'rm -rf "$log"' EXIT
    "$build/tools/tutti-run" -n 2 valgrind --quiet --error-exitcode=99 --leak-check=full \
        --suppressions="$src/tests/integration/sanitize/valgrind.supp" \
        --errors-for-leak-kinds=definite --log-file="$log/vg.%p" \
        "$build/tools/tutti-demo" 20000 || { cat "$log"/vg.*; exit 1; }
    if grep -l "ERROR SUMMARY: [1-9]\|definitely lost: [1-9]" "$log"/vg.* 2>/dev/null; then
        cat "$log"/vg.*
        exit 1
    fi
    echo "valgrind: no invalid accesses, no leaks"
    ;;
*) echo "usage: run.sh SOURCE_ROOT BUILD_DIR asan|tsan|valgrind"; exit 2 ;;
esac
