#!/bin/sh
# tests/integration/ddp/check-ddp.sh TUTTI_RUN DDP_CHECK DDP_JOIN_CHECK DDP_ZERO3_CHECK -- the DDP
# layer on 1 to 4 ranks (ddp_check.c, ddp_join_check.c and ddp_zero3_check.c say what each
# mode proves). Every job must exit 0 within its bound: the error modes too, because the
# programs assert that the errors happen and what they say.
set -eu
run=$1 check=$2 join=$3 zero3=$4
out=$(mktemp -d /tmp/tutti-ddp-test-XXXXXX)
trap 'rm -rf "$out"' EXIT
export TUTTI_TIMEOUT=30
job() { # job NRANKS MODE ARGS...: ddp_check; ddp_join_check for join and errors; ddp_zero3_check
    n=$1
    shift
    prog=$check
    case $1 in join | errors) prog=$join ;; zero3) prog=$zero3 ;; esac
    if ! timeout 120 "$run" -n "$n" "$prog" "$@" >"$out/log" 2>&1; then
        cat "$out/log"
        echo "FAILED: $n rank(s): $(basename "$prog") $*"
        exit 1
    fi
    echo "ok: $n rank(s): $(basename "$prog") $*"
}
for n in 1 2 3 4; do
    job $n average none 0
    job $n average none 1
done
for o in 0 1; do # reductions in finish only, and during backward, whatever the cores
    job 2 average none 0 $o
    job 3 average none 1 $o
    job 3 average fp16 0 $o
done
for h in fp16 bf16 int8 user; do
    job 3 average $h 0
done
job 2 average fp16 1
for n in 1 2 3; do
    job $n weights none 0
    job $n weights none 1
done
for h in fp16 int8 user; do
    job 3 weights $h 0
done
job 1 adaptive-config
job 3 accum 0
job 3 accum 1
for m in mismatch-count mismatch-shape mismatch-setting mismatch-buffer unused unused-one \
    unused-zero; do
    job 2 $m
    job 3 $m
done
for n in 1 2 3; do
    job $n buffers
done
for n in 1 2 4; do
    job $n zero3
done
job 1 damaged
job 3 damaged
# Symmetric memory with no change to the program: ZeRO-3's gradient buffers on one host (their
# reduces take the symmetric path) and the buckets across 2 emulated hosts x 2 (the
# hierarchical all-reduce's stages inside each host). Each run must log the path.
traced() { # traced PATTERN NRANKS NODES PROG ARGS...
    pat=$1 n=$2 nodes=$3 prog=$4
    shift 4
    if ! TUTTI_DEBUG=TRACE TUTTI_DEBUG_SUBSYS=COLL timeout 120 "$run" -n "$n" --nodes "$nodes" \
        "$prog" "$@" >"$out/log" 2>&1 || ! grep -q "$pat" "$out/log"; then
        grep -v ' TRACE ' "$out/log" | tail -40
        echo "FAILED: $n rank(s) as $nodes node(s): $(basename "$prog") $*: no '$pat' logged"
        exit 1
    fi
    echo "ok: $n rank(s) as $nodes node(s): $(basename "$prog") $*: $(grep -c "$pat" "$out/log") calls"
}
traced '#[0-9]*: symmetric path' 2 1 "$zero3" zero3
traced '(symmetric inside nodes)' 4 2 "$check" average none 1
# Uneven inputs (with buffers): every optimizer path on 1, 2 and 4 ranks, the hooks on 3 (views
# both ways).
for n in 1 2 4; do
    for o in app sgd0 sgd1 sgd2; do
        job $n join none 0 $o
    done
done
job 3 join none 1 app
for h in fp16 bf16 int8 topk user powersgd; do
    job 3 join $h 1 sgd0
done
job 3 join powersgd 0 app
job 1 errors
job 3 errors
echo "ddp checks passed"
