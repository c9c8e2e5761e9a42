#!/bin/sh
# tests/support/ibemu/check-ib.sh TUTTI_RUN COLL_CHECK TUTTI_PERF FAULT_RANK IBEMU_LIB -- the InfiniBand
# transport (net_ib) through the emulated verbs provider, one rank per emulated node:
#   - every collective (coll_check matrix, p2p, large) on 2, 3 and 4 nodes over RoCE, on 2
#     nodes over InfiniBand (LID routing), on 2 nodes x 2 ranks (shm inside, net_ib across),
#     each run logging net_ib as the transport between nodes;
#   - tutti-perf all_reduce from 8 B to 16 MiB on 4 nodes: #wrong 0;
#   - zero-copy sends from registered memory (tutti_comm_register), with the emulator's HCA
#     reading sources 200 us after the post (TUTTI_IBEMU_DELAY_US), so a step that overwrote
#     a source still being sent would be caught: point-to-point (the registration cache
#     registers each buffer once, a second registration of the same buffer hits), every
#     collective on 3 nodes and on 2 nodes x 2 ranks (hierarchical: shm inside), recursive
#     doubling in place on 4 nodes; unregistered memory
#     is never sent zero-copy; a registration the HCA refuses (locked-memory limit) is
#     copied instead, with a warning;
#   - TUTTI_IB_GID_INDEX=1 routes by the IPv4-mapped GID; TUTTI_IB_HCA=emu1 picks that device; TUTTI_IB_HCA=^emu excludes every device and the
#     job falls back to sockets saying why, as it does with no verbs library at all;
#   - a corrupted rkey on one rank's 200th write: both ranks fail (the writer with the remote
#     access error, its peer with an error too) instead of hanging;
#   - a rank killed with SIGKILL mid-all-reduce: every survivor fails within 10 s.
set -eu
run=$1 check=$2 perf=$3 fault=$4 emu=$5
out=$(mktemp -d /tmp/tutti-ib-test-XXXXXX)
trap 'rm -rf "$out"' EXIT
export TUTTI_TIMEOUT=60 TUTTI_DEBUG=INFO TUTTI_DEBUG_SUBSYS=INIT,IB,NET
export TUTTI_IBVERBS_LIB="$emu"

job() { # job NAME NRANKS NODES PROG ARGS... (environment from the caller)
    name=$1 n=$2 nodes=$3
    shift 3
    if ! timeout 300 "$run" -n "$n" --nodes "$nodes" "$@" >"$out/$name" 2>&1; then
        grep -v " INFO " "$out/$name" | tail -n 30
        echo "FAILED: $name: $n ranks on $nodes nodes: $*"
        exit 1
    fi
}
uses_ib() { # uses_ib NAME: every rank logged net_ib toward another node, none fell back
    grep -q "transport net_ib" "$out/$1" && ! grep -q "transport socket" "$out/$1" ||
        { grep -E "transport|InfiniBand" "$out/$1" | head; echo "FAILED: $1 did not use net_ib"; exit 1; }
}

for n in 2 3 4; do
    for m in matrix p2p large; do
        job "roce-$n-$m" $n $n "$check" $m
        uses_ib "roce-$n-$m"
    done
    echo "ok: every collective over net_ib (RoCE), $n nodes"
done
TUTTI_IBEMU_LINK=ib job ib-2 2 2 "$check" matrix
uses_ib ib-2
grep -q "InfiniBand, LID" "$out/ib-2" || { echo "FAILED: not an InfiniBand port"; exit 1; }
echo "ok: every collective over net_ib (InfiniBand link layer, LID routing), 2 nodes"
TUTTI_IB_QPS=1 job qp1 4 2 "$check" matrix
uses_ib qp1
grep -q "transport shm" "$out/qp1" || { echo "FAILED: no shm inside the nodes"; exit 1; }
echo "ok: 2 nodes x 2 ranks: shm inside, net_ib across, 1 QP per connection"

job perf 4 4 "$perf" all_reduce -b 8 -e 16M -c 1
uses_ib perf
grep -q "Out of bounds values : 0 OK" "$out/perf" || { cat "$out/perf"; exit 1; }
echo "ok: tutti-perf all_reduce 8 B .. 16 MiB on 4 nodes over net_ib: #wrong 0"

export TUTTI_IBEMU_DELAY_US=200
job zc-p2p 2 2 "$check" p2p --register
uses_ib zc-p2p
for r in 0 1; do
    grep "^\[$r\].*net_ib: registered" "$out/zc-p2p" | tail -n 1 | grep -q "4 miss(es), 3 hit(s)" ||
        { grep "registered" "$out/zc-p2p"; echo "FAILED: rank $r: 4 registrations, 3 cache hits expected"; exit 1; }
done
grep -q "to rank 1, channel 0: [0-9]* of [0-9]* message(s) zero-copy" "$out/zc-p2p" ||
    { echo "FAILED: no zero-copy sends"; exit 1; }
if grep -q "zero-copy" "$out/roce-2-p2p"; then echo "FAILED: zero-copy from unregistered memory"; exit 1; fi
job zc-matrix 3 3 "$check" matrix 200003 --register
uses_ib zc-matrix
TUTTI_ALGO="all_reduce:rd;all_gather:rd" job zc-rd 4 4 "$check" matrix 200003 --register
uses_ib zc-rd
[ "$(grep -c "message(s) zero-copy" "$out/zc-rd")" -ge 4 ] || { echo "FAILED: zc-rd sent nothing zero-copy"; exit 1; }
job zc-hier 4 2 "$check" matrix 200003 --register
grep -q "message(s) zero-copy" "$out/zc-hier" || { echo "FAILED: zc-hier sent nothing zero-copy"; exit 1; }
# The HCA refuses the big registrations (locked-memory limit): those sends are copied, and
# the rank says why once.
TUTTI_IBEMU_MEMLOCK=8000000 job zc-memlock 2 2 "$check" p2p --register
grep -q "cannot register.*Cannot allocate memory.*sends from it are copied" "$out/zc-memlock" ||
    { grep -i regist "$out/zc-memlock"; echo "FAILED: no warning for a refused registration"; exit 1; }
unset TUTTI_IBEMU_DELAY_US
echo "ok: zero-copy sends from registered memory (registration cache: 4 misses, 3 hits per rank), every collective on 3 nodes and on 2 nodes x 2 ranks, in-place recursive doubling on 4, with a late HCA"

TUTTI_IB_GID_INDEX=1 job gid1 2 2 "$check" p2p
uses_ib gid1
grep -q "GID index 1 (0:0:0:0:0:ffff:7f" "$out/gid1" || { grep HCA "$out/gid1"; echo "FAILED: GID index 1"; exit 1; }
TUTTI_IB_HCA=emu1 job hca 2 2 "$check" p2p
grep -q "HCA emu1:1" "$out/hca" || { grep HCA "$out/hca"; echo "FAILED: TUTTI_IB_HCA=emu1"; exit 1; }
TUTTI_IB_HCA=^emu job nohca 2 2 "$check" p2p
grep -q "transport socket.*no InfiniBand/RoCE: no active port" "$out/nohca" ||
    { grep transport "$out/nohca"; echo "FAILED: no fallback to sockets"; exit 1; }
TUTTI_IBVERBS_LIB=/nonexistent/libibverbs.so job nolib 2 2 "$check" p2p
grep -q "transport socket.*no InfiniBand/RoCE: cannot load /nonexistent" "$out/nolib" ||
    { grep transport "$out/nolib"; echo "FAILED: no fallback to sockets"; exit 1; }
echo "ok: TUTTI_IB_HCA picks and excludes devices; without a usable HCA, sockets, saying why"

# Failures: ranks started directly (tutti-run would stop the survivors itself).
start() { # start DIR N [ENV...]: N fault_rank loops, one per node
    dir=$1 n=$2
    shift 2
    mkdir -p "$dir"
    port=$((29700 + $$ % 200))
    pids=""
    for r in $(seq 0 $((n - 1))); do
        env MASTER_ADDR=127.0.0.1 MASTER_PORT=$port WORLD_SIZE=$n RANK=$r TUTTI_HOSTID=node$r \
            TUTTI_SECRET=ib-test-$$ "$@" "$fault" "$dir" loop >"$dir/out.$r" 2>&1 &
        pids="$pids $!"
    done
}
wait_all() { # wait_all DIR SECONDS: every rank exits 0 (saw an error) within SECONDS
    ( sleep "$2"; kill -9 $pids ) </dev/null >/dev/null 2>&1 &
    guard=$!
    ok=1
    for p in $pids; do wait "$p" || ok=0; done
    kill $guard 2>/dev/null || { echo "FAILED: ranks still running after $2 s (a hang)"; ok=0; }
    grep -h RESULT "$1"/out.* || true
    [ $ok = 1 ] || { tail -n 5 "$1"/out.*; echo "FAILED: a rank did not report an error"; exit 1; }
}

start "$out/rkey" 2 TUTTI_IBEMU_FAULT=bad_rkey TUTTI_IBEMU_FAULT_RANK=1 TUTTI_IBEMU_FAULT_AFTER=200
wait_all "$out/rkey" 30
grep -q "RESULT rank 1 .*to rank 0 (host node0, GID .*remote access error" "$out/rkey/out.1" ||
    { echo "FAILED: rank 1 does not name the remote access error, peer and GID"; exit 1; }
grep -q "RESULT rank 0 code" "$out/rkey/out.0" || { echo "FAILED: rank 0 saw no error"; exit 1; }
echo "ok: a bad rkey fails both sides with a readable error"

start "$out/kill" 3
i=0
while [ ! -e "$out/kill/pid.0" ] || [ ! -e "$out/kill/pid.1" ] || [ ! -e "$out/kill/pid.2" ]; do
    i=$((i + 1)); [ $i -lt 300 ] || { echo "FAILED: ranks never got ready"; exit 1; }
    sleep 0.1
done
sleep 1
victim=$(echo $pids | cut -d' ' -f2)
kill -9 "$victim"
pids=$(echo $pids | cut -d' ' -f1,3)
wait_all "$out/kill" 10
echo "ok: a rank killed mid-all-reduce: the survivors fail within 10 s"
echo "ib checks passed"
