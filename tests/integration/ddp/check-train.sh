#!/bin/sh
# tests/integration/ddp/check-train.sh TUTTI_RUN TUTTI_TRAIN -- tutti-train on a small model (784-64-64-10,
# the first 2048 or 4096 Fashion-MNIST images) against its own equivalences:
#   - 2 and 4 ranks reach the parameters of 1 rank with the same global batch (64) after 30
#     steps, each value within 1e-5 + 1e-4 * |value| (only the order of float sums differs);
#   - every run ends with bitwise-identical parameters on all ranks (tutti-train checks it and
#     exits 3 otherwise; the line is also grepped);
#   - batch 32 accumulated twice with no_sync (2 ranks) equals batch 64, same tolerance;
#   - uneven per-rank batches (--split 1,40,23 on 3 ranks: local means weighted by
#     tutti_ddp_set_batch) equal 1 rank with batch 64, SGD with ZeRO-0/1/2 within the same
#     tolerance; Adam with ZeRO-0/1/2 with 99.99% of the values within it and every value
#     within 1e-4 (a tenth of one Adam step): a local mean rounds differently from the global
#     one in the last bit, and Adam divides a gradient by its own running magnitude, so where
#     a weight's gradient is near zero (an input pixel that is almost never lit) that bit
#     moves it by up to a few hundredths of a step;
#   - --balance auto:5 with --slow 1:2 (the split re-divided by measured speed every 5 steps)
#     equals 1 rank, same tolerance;
#   - local SGD: --local-sgd 1 (with and without --warmup) equals synchronous DDP (SGD with
#     momentum and weight decay are linear, so averaging the parameters after every local step
#     is averaging the gradients), same tolerance; --local-sgd 8 --warmup 20 on the full
#     training set and the reference model reaches test accuracy >= 0.80 in one epoch;
#     --local-sgd with --zero 1 is refused, naming it;
#   - --bucket-mb auto (adaptive_buckets: five caps tried over the first steps, one kept, the
#     choice said at INFO) equals 1 rank, same tolerance;
#   - ZeRO-1 and ZeRO-2 equal plain DDP (SGD and Adam), same tolerance;
#   - every compression hook trains: test accuracy after one epoch of 4096 images >= 0.60
#     (plain all-reduce reaches about 0.75, an untrained model about 0.10);
#   - checkpoint at step 20 then resume to step 45 gives bitwise the parameters of an
#     uninterrupted 45-step run (SGD; Adam + ZeRO-1; PowerSGD, whose error feedback and
#     warm-start factors are part of the checkpoint);
#   - --trace writes forward, backward, optimizer and bucket-reduction spans for each rank.
# Skips (77) when the data set is not installed (Debian: dataset-fashion-mnist).
set -eu
run=$1 train=$2
data=/usr/share/datasets/fashion-mnist
[ -e "$data/train-images-idx3-ubyte.gz" ] || [ -e "$data/train-images-idx3-ubyte" ] ||
    { echo "SKIP: Fashion-MNIST is not installed ($data; Debian: dataset-fashion-mnist)"; exit 77; }
out=$(mktemp -d /tmp/tutti-train-test-XXXXXX)
trap 'rm -rf "$out"' EXIT
export TUTTI_TIMEOUT=60
small="--hidden 64 --limit 2048 --quiet"

train() { # train NRANKS NAME ARGS... -> $out/NAME.bin (parameters), $out/NAME.txt (output)
    n=$1 name=$2
    shift 2
    if ! timeout 300 "$run" -n "$n" "$train" $small --save-params "$out/$name.bin" "$@" \
        >"$out/$name.txt" 2>&1; then
        cat "$out/$name.txt"
        echo "FAILED: $n rank(s): tutti-train $*"
        exit 1
    fi
    grep -q "bitwise identical on all $n ranks: yes" "$out/$name.txt" ||
        { cat "$out/$name.txt"; echo "FAILED: $name: ranks differ"; exit 1; }
}

near() { # near A B WHAT: 99.99% of the parameters within tolerance, all within 1e-4
    python3 - "$out/$1.bin" "$out/$2.bin" "$3" <<'PY'
import array, sys
a, b = (array.array("f", open(p, "rb").read()) for p in sys.argv[1:3])
assert len(a) == len(b) and len(a) > 0, f"{sys.argv[3]}: {len(a)} vs {len(b)} values"
over = sum(1 for x, y in zip(a, b) if abs(x - y) > 1e-5 + 1e-4 * abs(y))
diff = max(abs(x - y) for x, y in zip(a, b))
if over > len(a) // 10000 or diff > 1e-4:
    sys.exit(f"FAILED: {sys.argv[3]}: {over} of {len(a)} values past the tolerance, the "
             f"largest difference {diff:g}")
print(f"ok: {sys.argv[3]} ({over} of {len(a)} values past 1e-5 + 1e-4 |x|, largest difference {diff:g})")
PY
}

same() { # same A B WHAT: parameters within tolerance
    python3 - "$out/$1.bin" "$out/$2.bin" "$3" <<'PY'
import array, sys
a, b = (array.array("f", open(p, "rb").read()) for p in sys.argv[1:3])
assert len(a) == len(b) and len(a) > 0, f"{sys.argv[3]}: {len(a)} vs {len(b)} values"
worst = max(abs(x - y) - (1e-5 + 1e-4 * abs(y)) for x, y in zip(a, b))
diff = max(abs(x - y) for x, y in zip(a, b))
if worst > 0:
    sys.exit(f"FAILED: {sys.argv[3]}: parameters differ by up to {diff:g}")
print(f"ok: {sys.argv[3]} (largest difference {diff:g})")
PY
}

train 1 one --batch 64 --max-steps 30
train 2 two --batch 64 --max-steps 30
train 4 four --batch 64 --max-steps 30
same two one "2 ranks equal 1 rank"
same four one "4 ranks equal 1 rank"
cmp -s "$out/one.bin" "$out/two.bin" && echo "(2 ranks even bitwise equal to 1)"

train 2 accum --batch 32 --accum 2 --max-steps 30
same accum one "batch 32 accumulated twice equals batch 64"

train 1 adam-one --batch 64 --max-steps 30 --optim adam --lr 0.001
for w in 0 10; do
    train 2 local1-$w --batch 64 --max-steps 30 --local-sgd 1 --warmup $w
    same local1-$w two "--local-sgd 1 --warmup $w equals synchronous DDP"
done
train 2 local8 --epochs 1 --hidden 1024 --limit 60000 --local-sgd 8 --warmup 20
acc=$(sed -n 's/.*final test accuracy \([0-9.]*\).*/\1/p' "$out/local8.txt")
python3 -c "import sys; sys.exit(0 if float('$acc') >= 0.80 else 1)" ||
    { cat "$out/local8.txt"; echo "FAILED: --local-sgd 8: test accuracy $acc < 0.80"; exit 1; }
echo "ok: --local-sgd 8 --warmup 20 trains (test accuracy $acc after one epoch)"
if "$run" -n 2 "$train" $small --local-sgd 4 --zero 1 >"$out/lz.txt" 2>&1 ||
    ! grep -q -- "--local-sgd: not with --zero 1" "$out/lz.txt"; then
    cat "$out/lz.txt"; echo "FAILED: --local-sgd with --zero 1 was not refused"; exit 1
fi
echo "ok: --local-sgd with --zero 1 refused"

export TUTTI_DEBUG=INFO
train 2 adaptive --batch 64 --max-steps 40 --bucket-mb auto
unset TUTTI_DEBUG
train 1 one40 --batch 64 --max-steps 40
same adaptive one40 "--bucket-mb auto (five bucket caps tried over 31 steps) equals 1 rank"
grep -q "adaptive buckets: exposed communication per step .*; keeping [0-9.]* MiB" \
    "$out/adaptive.txt" || { cat "$out/adaptive.txt"; echo "FAILED: no adaptive-bucket choice"; exit 1; }
echo "ok: $(sed -n 's/.*\(keeping [0-9.]* MiB\).*/adaptive buckets: \1/p' "$out/adaptive.txt")"

train 2 balance --batch 64 --max-steps 30 --balance auto:5 --slow 1:2
same balance one "--balance auto:5 with rank 1 slowed 2x (the split re-divided every 5 steps) equals 1 rank"
for z in 0 1 2; do
    train 3 split$z --batch 64 --split 1,40,23 --max-steps 30 --zero $z
    same split$z one "3 ranks with batches 1, 40, 23 equal 1 rank with 64 (SGD, ZeRO-$z)"
    train 3 split-adam$z --batch 64 --split 1,40,23 --max-steps 30 --optim adam --lr 0.001 \
        --zero $z
    near split-adam$z adam-one "3 ranks with batches 1, 40, 23 against 1 rank with 64 (Adam, ZeRO-$z)"
done

train 2 zero1 --batch 64 --max-steps 30 --zero 1
train 2 zero2 --batch 64 --max-steps 30 --zero 2
same zero1 two "ZeRO-1 equals plain DDP (SGD)"
same zero2 two "ZeRO-2 equals plain DDP (SGD)"
train 2 adam --batch 64 --max-steps 30 --optim adam --lr 0.001
train 2 adam1 --batch 64 --max-steps 30 --optim adam --lr 0.001 --zero 1
train 2 adam2 --batch 64 --max-steps 30 --optim adam --lr 0.001 --zero 2
same adam1 adam "ZeRO-1 equals plain DDP (Adam)"
same adam2 adam "ZeRO-2 equals plain DDP (Adam)"

for h in none fp16 bf16 int8 topk powersgd; do
    train 2 hook-$h --batch 64 --epochs 1 --limit 4096 --hook $h
    acc=$(sed -n 's/.*final test accuracy \([0-9.]*\).*/\1/p' "$out/hook-$h.txt")
    python3 -c "import sys; sys.exit(0 if float('$acc') >= 0.60 else 1)" ||
        { cat "$out/hook-$h.txt"; echo "FAILED: hook $h: test accuracy $acc < 0.60"; exit 1; }
    echo "ok: hook $h trains (test accuracy $acc)"
done

for v in "--optim sgd" "--optim adam --lr 0.001 --zero 1" "--hook powersgd"; do
    rm -rf "$out/ckpt"
    train 2 full --batch 64 --max-steps 45 $v
    train 2 part --batch 64 --max-steps 20 --checkpoint "$out/ckpt" $v
    train 2 resumed --batch 64 --max-steps 45 --checkpoint "$out/ckpt" --resume $v
    cmp -s "$out/full.bin" "$out/resumed.bin" ||
        { echo "FAILED: checkpoint at 20 and resume to 45 ($v) differs from 45 steps"; exit 1; }
    echo "ok: checkpoint -> resume equals the uninterrupted run ($v)"
done

train 2 traced --batch 64 --max-steps 10 --trace "$out/trace.json"
python3 - "$out/trace.json" <<'PY'
import json, sys
text = open(sys.argv[1]).read().rstrip().rstrip(",")
events = json.loads(text + "]")
for r in (0, 1):
    names = {e.get("name") for e in events if e.get("pid") == r and e.get("ph") == "X"}
    for want in ("forward", "backward", "optimizer", "bucket reduction"):
        assert want in names, f"rank {r}: no '{want}' span in the trace ({sorted(names)[:12]})"
print("ok: the trace has forward, backward, optimizer and bucket-reduction spans per rank")
PY
echo "tutti-train checks passed"
