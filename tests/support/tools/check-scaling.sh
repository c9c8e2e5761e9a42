#!/bin/sh
# tests/support/tools/check-scaling.sh TUTTI_TOPO [TUTTI_RUN TUTTI_TRAIN] -- the scaling
# what-if model (tutti-topo --scaling) against figures worked out here, and bench/scaling/run
# end to end on a small model:
#   - no gradient, a core for every thread: E(n) = 1 where n divides the batch, every n
#     linear;
#   - 4 ranks on 2 cores, no gradient: compute doubles, E(4) = 0.5; 3 ranks: the share is
#     1.5 and the local batch ceil(B / 3), E(3) as worked out below;
#   - the communication of n = 2 and 8 ranks in one node equals tutti-topo --simulate's best
#     all-reduce of the gradient's bytes (the same cost model, read from its table);
#   - a gradient that costs more than the compute: E falls and the last points are saturated;
#   - measured compute and all-reduce (--compute-ms, --comm-ms) add up, nothing hidden
#     where the ranks fill the cores;
#   - --compute-ms with a figure missing is refused, naming it;
#   - bench/scaling/run -N 2 on a 784-64-64-10 MLP writes measured, predicted, model and cluster
#     rows, and tutti-plot --scaling draws them (with gnuplot); rank 0 alone took the whole
#     batch in the 2-rank run (its bench-data line says so).
# No timing is asserted: bench/scaling/run --check compares the model with the measurement.
set -eu
topo=$1 run=${2:-} train=${3:-}
here=$(cd "$(dirname "$0")/../../.." && pwd)
out=$(mktemp -d /tmp/tutti-scaling-test-XXXXXX)
trap 'rm -rf "$out"' EXIT
sc() { "$topo" --scaling "$@" >"$out/sc.txt" 2>&1 || { cat "$out/sc.txt"; echo "FAILED: tutti-topo --scaling $*"; exit 1; }; }
col() { # col N COLUMN: the column's value in n's row of $out/sc.txt
    awk -v n="$1" -v c="$2" '!/^#/ && $1 == n { print $c }' "$out/sc.txt"
}

sc --sample-us 100 --batch 1024 --grad-mb 0 --nodes 1 --per-node 8
for n in 1 2 4 8; do
    [ "$(col $n 9)" = 1.000 ] && [ "$(col $n 10)" = linear ] ||
        { cat "$out/sc.txt"; echo "FAILED: no gradient, own cores: E($n) is not 1.000, linear"; exit 1; }
done
echo "ok: no communication and a core each: E(n) = 1, linear"

sc --sample-us 100 --batch 120 --grad-mb 0 --nodes 1 --per-node 4 --cores 2 --n 1,2,3,4
# E(3) = T1 / (3 T3), T1 = 120 samples, T3 = 1.5 x 40 samples: 120 / (3 x 60) = 0.667
for want in "2 1.000" "3 0.667" "4 0.500"; do
    set -- $want
    [ "$(col $1 9)" = "$2" ] || { cat "$out/sc.txt"; echo "FAILED: 2 cores: E($1) is not $2"; exit 1; }
done
echo "ok: ranks beyond the cores share them: E(3) = 0.667, E(4) = 0.500"

# measured parts: 6.4 ms of compute and 1.6 ms of all-reduce at 2 ranks, nothing hidden on 2
# cores: E(2) = 12.8 / (2 x 8.0) = 0.800
sc --sample-us 100 --batch 128 --grad-mb 4 --nodes 1 --per-node 2 --cores 2 --n 1,2 \
    --compute-ms 12.8,6.4 --comm-ms 0,1.6
[ "$(col 2 5)" = 1.600 ] && [ "$(col 2 6)" = 0.000 ] && [ "$(col 2 9)" = 0.800 ] ||
    { cat "$out/sc.txt"; echo "FAILED: measured compute and all-reduce: E(2) is not 0.800"; exit 1; }
echo "ok: measured compute and all-reduce compose: E(2) = 0.800"

bytes=4194304
for n in 2 8; do
    sc --sample-us 100 --batch 1024 --grad-mb 4 --nodes 1 --per-node 8 --n $n
    got=$(col $n 5)
    "$topo" --simulate --nodes 1 --per-node $n --coll all_reduce -b $bytes -e $bytes >"$out/sim.txt"
    best=$(python3 - "$out/sim.txt" $bytes <<'PY'
import sys
for line in open(sys.argv[1]):
    t = line.split()
    if not t or t[0] != sys.argv[2]:
        continue
    times, i = [], 1
    while i < len(t) - 1:  # time and busbw per algorithm, "-" for one without a formula
        if t[i] == "-":
            i += 1
            continue
        times.append(float(t[i]))
        i += 2
    print(min(times) / 1000)
PY
)
    python3 -c "import sys; sys.exit(0 if abs($got - $best) <= 0.001 + 1e-3 * $best else 1)" ||
        { cat "$out/sc.txt" "$out/sim.txt"; echo "FAILED: $n ranks: comm $got ms, --simulate's best $best ms"; exit 1; }
    echo "ok: $n ranks: 4 MiB of gradients cost $got ms, --simulate's best all-reduce"
done

sc --sample-us 1 --batch 65536 --grad-mb 64 --nodes 16 --per-node 8 --links 0.3,100,2,25
last=$(awk '!/^#/ { r = $10 } END { print r }' "$out/sc.txt")
e1=$(col 1 9) e128=$(col 128 9)
[ "$last" = saturated ] && python3 -c "import sys; sys.exit(0 if 0 < $e128 < $e1 else 1)" ||
    { cat "$out/sc.txt"; echo "FAILED: communication-bound: no saturated regime"; exit 1; }
echo "ok: communication-bound: E(128) = $e128, ends saturated"

if "$topo" --scaling --sample-us 1 --batch 8 --grad-mb 1 --n 1,2 --compute-ms 5 >"$out/bad.txt" 2>&1 ||
    ! grep -q -- "--compute-ms and --comm-ms need" "$out/bad.txt"; then
    cat "$out/bad.txt"; echo "FAILED: --compute-ms with a figure missing was not refused"; exit 1
fi
echo "ok: --compute-ms with a figure missing refused"

[ -n "$train" ] || { echo "scaling model checks passed (no tutti-train: bench/scaling/run not run)"; exit 0; }
data=/usr/share/datasets/fashion-mnist
if ! [ -e "$data/train-images-idx3-ubyte.gz" ] && ! [ -e "$data/train-images-idx3-ubyte" ]; then
    echo "SKIP: bench/scaling/run needs Fashion-MNIST ($data; Debian: dataset-fashion-mnist)"
    exit 77
fi
build=$(dirname "$(dirname "$train")")
"$here/bench/scaling/run" --build "$build" -N 2 --reps 1 --steps 3 --out "$out/b" \
    -- --hidden 64 --limit 2048 >"$out/run.txt" 2>&1 ||
    { cat "$out/run.txt"; echo "FAILED: bench/scaling/run"; exit 1; }
for f in measured predicted model cluster cluster-fast; do
    [ "$(grep -c '^[0-9]' "$out/b/$f.dat")" -ge 2 ] ||
        { cat "$out/run.txt"; echo "FAILED: $f.dat has fewer than 2 rows"; exit 1; }
done
if command -v gnuplot >/dev/null; then
    [ -s "$out/b/scaling.png" ] || { cat "$out/run.txt"; echo "FAILED: no scaling.png"; exit 1; }
fi
"$run" -n 2 "$train" --bench --bench-steps 2 --hidden 64 --limit 2048 --batch 64 >"$out/b2.txt" 2>&1 ||
    { cat "$out/b2.txt"; echo "FAILED: tutti-train --bench on 2 ranks"; exit 1; }
grep -q "bench-data: n 2 batch 64 .* alone_samples 64.0 " "$out/b2.txt" ||
    { cat "$out/b2.txt"; echo "FAILED: rank 0 alone did not take the whole batch"; exit 1; }
echo "ok: bench/scaling/run end to end (measured, predicted, cluster rows; picture), T1 on the whole batch"
echo "scaling checks passed"
