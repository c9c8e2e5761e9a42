#!/bin/sh
# tests/integration/ddp/check-train-elastic.sh TUTTI_RUN TUTTI_TRAIN -- tutti-train --elastic
# under tutti-run --elastic 3:4 --restart 1 on 4 ranks, one rank killed (SIGKILL, by --crash
# R:S, in the middle of the first epoch) and a replacement started: the run must finish (exit
# 0), the survivors must have gone on as 3 and taken the newcomer back to 4, its final test
# accuracy must be within 0.01 of the same run undisturbed, every rank's parameters bitwise
# identical at the end (tutti-train checks and says so), and nothing new left in /dev/shm.
# Plain DDP (SGD) on one host, and ZeRO-2 (whose lost rank's momentum shard restarts from
# zero) across 2 emulated nodes (sockets between them). Skips (77) without the data set.
set -eu
run=$1 train=$2
data=/usr/share/datasets/fashion-mnist
[ -f "$data/train-images-idx3-ubyte.gz" ] || { echo "SKIP: $data is not installed"; exit 77; }
out=$(mktemp -d /tmp/tutti-train-elastic-XXXXXX)
trap 'rm -rf "$out"' EXIT
common="--epochs 2 --limit 6000 --quiet"
ls /dev/shm > "$out/shm.before"

accuracy() { sed -n 's/.*final test accuracy \([0-9.]*\).*/\1/p' "$1"; }

case_() { # case_ NAME TUTTI_RUN_OPTIONS -- TRAIN_OPTIONS
    name=$1 nodes=$2 victim=$3 step=$4
    shift 4
    timeout 300 "$run" -n 4 --nodes "$nodes" "$train" $common "$@" > "$out/$name.ref" 2>&1 ||
        { tail -n 20 "$out/$name.ref"; echo "FAILED: $name: the undisturbed run"; exit 1; }
    if ! timeout 300 "$run" -n 4 --nodes "$nodes" --elastic 3:4 --restart 1 "$train" $common \
        --elastic --grow-every 5 --crash "$victim:$step" "$@" > "$out/$name" 2>&1; then
        grep -v " INFO " "$out/$name" | tail -n 30
        echo "FAILED: $name: the elastic run did not finish"
        exit 1
    fi
    for want in "rank $victim: crashing at step $step" "3 of 4 rank(s) go on" \
        "started \[4\] in its place" "1 newcomer(s) joined" "bitwise identical on all 4 ranks: yes"; do
        grep -q "$want" "$out/$name" || { grep -v " INFO " "$out/$name" | tail -n 30; echo "FAILED: $name: no '$want'"; exit 1; }
    done
    ref=$(accuracy "$out/$name.ref") got=$(accuracy "$out/$name")
    awk -v a="$ref" -v b="$got" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && b != "" && d <= 0.01) }' ||
        { echo "FAILED: $name: final test accuracy $got, undisturbed $ref (more than 0.01 apart)"; exit 1; }
    resumed=$(sed -n 's/.*first step after the recovery done (step [0-9]*, \([0-9.]*\) s.*/\1/p' "$out/$name")
    echo "ok: $name: rank $victim killed at step $step; 3 ranks went on (first step $resumed s after the recovery began), a replacement joined; final test accuracy $got (undisturbed $ref); parameters bitwise identical on all 4 ranks"
}

case_ sgd 1 2 30
case_ zero2-2-nodes 2 1 45 --zero 2

ls /dev/shm > "$out/shm.after"
left=$(comm -13 "$out/shm.before" "$out/shm.after" | grep '^tutti-' || true)
[ -z "$left" ] || { echo "FAILED: left in /dev/shm: $left"; exit 1; }
echo "ok: nothing left in /dev/shm"
