#!/bin/sh
# tests/integration/multiproc/check-soak.sh TUTTI_RUN COLL_CHECK GROUP_CHECK -- the soak suite: `coll_check
# soak` (a random sequence of checked calls) on layouts that take different algorithms and
# transport paths, TUTTI_SOAK_SECONDS each (default 3):
#   4 ranks on one node          ranks outnumber cores: direct, flat, rd, tree
#   5 ranks, 2 channels, 2 small slots per FIFO   folded rd and rh, many chunks, tight flow
#   6 ranks on 2 emulated nodes  hierarchical algorithms with 3 ranks a node, sockets
#   3 ranks on 3 emulated nodes  sockets only, small slots
#   2 ranks with TUTTI_CHECK_COLL=1 and TUTTI_DETERMINISTIC=1
#   3 ranks by single copy       TUTTI_SHM_SINGLE_COPY=1 with polling waits: every message of
#                                8 KiB and more read out of its sender's memory
#   4 ranks by single copy       the same with blocking waits
#   3 ranks, symmetric memory    coll_check --symmetric-mix: buffers in a window, a third per
#                                rank from malloc (the ranks fall back together)
# then `group_check soak` (random groups of all-reduces, all-gathers and reduce-scatters,
# packed where they may be, some all-reduces chained on the previous one's output) on 2 ranks,
# on 4 (ranks outnumber cores) and on 3 with TUTTI_CHECK_COLL=1.
# The seed is TUTTI_SOAK_SEED, or the time (printed: a failure names seed and call, and the
# same layout with TUTTI_SOAK_SEED set replays it). A wait without progress for 60 s fails
# (TUTTI_TIMEOUT), and so does a layout that runs far past its time.
set -u
run=$1 check=$2 group=$3
secs=${TUTTI_SOAK_SECONDS:-3}
seed=${TUTTI_SOAK_SEED:-$(date +%s)}
limit=$(awk -v s="$secs" 'BEGIN { printf "%d", 2 * s + 120 }')
log=$(mktemp /tmp/tutti-soak-XXXXXX)
trap 'rm -f "$log"' EXIT
fail=0
layout() { # layout LABEL [VAR=VALUE ...] -- TUTTI_RUN_ARGS... (the program: $prog)
    label=$1
    shift
    vars=""
    while [ "$1" != "--" ]; do
        vars="$vars $1"
        shift
    done
    shift
    echo "== $label:$vars tutti-run $* (seed $seed, $secs s)"
    # shellcheck disable=SC2086 # vars: VAR=VALUE words
    # shellcheck disable=SC2086 # extra: the program's own flags after its arguments
    env TUTTI_TIMEOUT=60 $vars timeout "$limit" "$run" "$@" "$prog" soak "$secs" "$seed" $extra \
        >"$log" 2>&1
    rc=$?
    grep -E "FAIL|^\[0\] soak:.*calls in|tutti-run:" "$log" | head -n 20
    if [ $rc != 0 ]; then
        echo "FAILED: $label (exit $rc); replay: TUTTI_SOAK_SEED=$seed"
        tail -n 20 "$log"
        fail=1
    fi
}
prog=$check extra=""
layout "4 ranks, one node" -- -n 4
layout "5 ranks, small slots" TUTTI_NCHANNELS=2 TUTTI_BUFFSIZE=64K TUTTI_STEPS=2 -- -n 5
layout "6 ranks, 2 nodes" -- -n 6 --nodes 2
layout "3 ranks, 3 nodes" TUTTI_BUFFSIZE=256K -- -n 3 --nodes 3
layout "2 ranks, checked and deterministic" TUTTI_CHECK_COLL=1 TUTTI_DETERMINISTIC=1 -- -n 2
layout "3 ranks, single copy" TUTTI_SHM_SINGLE_COPY=1 TUTTI_WAIT=poll -- -n 3
layout "4 ranks, single copy, blocking waits" TUTTI_SHM_SINGLE_COPY=1 TUTTI_WAIT=block -- -n 4
extra=--symmetric-mix
layout "3 ranks, symmetric memory mixed with the heap" -- -n 3
extra=""
prog=$group
layout "groups, 2 ranks" -- -n 2
layout "groups, 4 ranks" -- -n 4
layout "groups, 3 ranks, checked" TUTTI_CHECK_COLL=1 -- -n 3
exit $fail
