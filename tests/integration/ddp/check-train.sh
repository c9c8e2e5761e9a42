#!/bin/sh
# tests/integration/ddp/check-train.sh TUTTI_RUN TUTTI_TRAIN -- tutti-train on a small model (784-64-64-10,
# the first 2048 or 4096 Fashion-MNIST images) against its own equivalences:
#   - 2 and 4 ranks reach the parameters of 1 rank with the same global batch (64) after 30
#     steps, each value within 1e-5 + 1e-4 * |value| (only the order of float sums differs);
#   - every run ends with bitwise-identical parameters on all ranks (tutti-train checks it and
#     exits 3 otherwise; the line is also grepped);
#   - batch 32 accumulated twice with no_sync (2 ranks) equals batch 64, same tolerance;
#   - uneven per-rank batches (--split 1,40,23 on 3 ranks: local means weighted by
#     tutti_ddp_set_batch) equal 1 rank with batch 64, SGD and Adam (--eps 1e-6) with
#     ZeRO-0/1/2/3 within the same tolerance. With Adam's default eps 1e-8, 99.99% of the
#     values are within it and every value within 1e-4 (a tenth of one Adam step): where a
#     weight's gradient is a sum that cancels to almost nothing, the last bits the float sums
#     leave differ with the order of summation, and Adam divides that gradient by its own
#     running magnitude, so they move the weight by up to a few hundredths of a step. Even
#     ranks do the same (4 ranks against 1 leave one value past the tolerance): it is float32
#     data parallelism, not the weighting;
#   - --balance auto:5 with --slow 1:2 (the split re-divided by measured speed every 5 steps)
#     equals 1 rank, same tolerance;
#   - local SGD: --local-sgd 1 (with and without --warmup) equals synchronous DDP (SGD with
#     momentum and weight decay are linear, so averaging the parameters after every local step
#     is averaging the gradients), same tolerance; --local-sgd 8 --warmup 20 on the full
#     training set and the reference model reaches test accuracy >= 0.80 in one epoch;
#     --local-sgd with --zero 1 is refused, naming it;
#   - --overlap 1 and 0 (bucket reductions during backward, or all in finish; auto picks
#     0 on this 2-CPU machine) equal 1 rank, same tolerance;
#   - --bucket-mb auto (adaptive_buckets: five caps tried over the first steps, one kept, the
#     choice said at INFO) equals 1 rank, same tolerance;
#   - ZeRO-1 and ZeRO-2 equal plain DDP (SGD and Adam), same tolerance; ZeRO-3 (layers gathered
#     before forward and backward, gradients reduced onto their owners) too, on 2 and 4 ranks;
#     its memory line shows parameters, gradients and optimizer state each at 1/4 of the model
#     on 4 ranks; --zero 3 with --accum is refused, naming it;
#   - every compression hook trains: test accuracy after one epoch of 4096 images >= 0.60
#     (plain all-reduce reaches about 0.75, an untrained model about 0.10);
#   - checkpoint at step 20 then resume to step 45 gives bitwise the parameters of an
#     uninterrupted 45-step run (SGD; Adam + ZeRO-1; Adam + ZeRO-3 on 2 and 4 ranks, whose
#     parameters are saved from the shards; PowerSGD, whose error feedback and warm-start
#     factors are part of the checkpoint);
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

for o in 0 1; do
    train 2 overlap$o --batch 64 --max-steps 30 --overlap $o
    same overlap$o one "--overlap $o equals 1 rank"
done

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
adam6="--optim adam --lr 0.001 --eps 1e-6"
train 1 adam6-one --batch 64 --max-steps 30 $adam6
for z in 0 1 2 3; do
    train 3 split$z --batch 64 --split 1,40,23 --max-steps 30 --zero $z
    same split$z one "3 ranks with batches 1, 40, 23 equal 1 rank with 64 (SGD, ZeRO-$z)"
    train 3 split-adam$z --batch 64 --split 1,40,23 --max-steps 30 $adam6 --zero $z
    same split-adam$z adam6-one "3 ranks with batches 1, 40, 23 equal 1 rank with 64 (Adam, ZeRO-$z)"
done
train 3 split-adam --batch 64 --split 1,40,23 --max-steps 30 --optim adam --lr 0.001
near split-adam adam-one "3 ranks with batches 1, 40, 23 against 1 rank with 64 (Adam, eps 1e-8)"

train 2 zero1 --batch 64 --max-steps 30 --zero 1
train 2 zero2 --batch 64 --max-steps 30 --zero 2
same zero1 two "ZeRO-1 equals plain DDP (SGD)"
same zero2 two "ZeRO-2 equals plain DDP (SGD)"
train 2 adam --batch 64 --max-steps 30 --optim adam --lr 0.001
train 2 adam1 --batch 64 --max-steps 30 --optim adam --lr 0.001 --zero 1
train 2 adam2 --batch 64 --max-steps 30 --optim adam --lr 0.001 --zero 2
same adam1 adam "ZeRO-1 equals plain DDP (Adam)"
same adam2 adam "ZeRO-2 equals plain DDP (Adam)"
train 4 adam-four --batch 64 --max-steps 30 --optim adam --lr 0.001
for n in 2 4; do
    ref=two aref=adam
    [ $n = 4 ] && ref=four aref=adam-four
    train $n zero3-$n --batch 64 --max-steps 30 --zero 3
    same zero3-$n $ref "ZeRO-3 equals plain DDP (SGD, $n ranks)"
    train $n adam3-$n --batch 64 --max-steps 30 --optim adam --lr 0.001 --zero 3
    same adam3-$n $aref "ZeRO-3 equals plain DDP (Adam, $n ranks)"
done
# The memory line on 4 ranks: each part at most its 1/4 share (MiB, two decimals).
timeout 300 "$run" -n 4 "$train" --hidden 256 --limit 2048 --batch 64 --max-steps 5 --zero 3 \
    --optim adam --lr 0.001 >"$out/mem3.txt" 2>&1 || { cat "$out/mem3.txt"; echo "FAILED: --zero 3 memory run"; exit 1; }
python3 - "$out/mem3.txt" <<'PY'
import re, sys
lines = [l for l in open(sys.argv[1]) if "memory (rank" in l]
assert len(lines) == 4, f"{len(lines)} memory lines of 4 ranks"
for l in lines:
    m = re.search(r"parameters ([0-9.]+) of ([0-9.]+) \(its shard; at most ([0-9.]+) gathered.*"
                  r"gradients ([0-9.]+) \(its shard.*optimizer state ([0-9.]+),", l)
    assert m, f"no ZeRO-3 breakdown in: {l}"
    p, total, gathered, g, opt = map(float, m.groups())
    share = total / 4 + 0.01
    assert 0 < p <= share and 0 < g <= share and 0 < opt <= 2 * share, l  # Adam: two moments
    assert gathered < total, l
print("ok: --zero 3 on 4 ranks keeps parameters, gradients and Adam's two moments at 1/4 each: "
      + lines[0].split("MiB): ")[1].split(", activations")[0])
PY
if "$run" -n 2 "$train" $small --zero 3 --accum 2 >"$out/z3a.txt" 2>&1 ||
    ! grep -q -- "--accum: not with --zero 3" "$out/z3a.txt"; then
    cat "$out/z3a.txt"; echo "FAILED: --zero 3 with --accum was not refused"; exit 1
fi
echo "ok: --zero 3 with --accum refused"

for h in none fp16 bf16 int8 topk powersgd; do
    train 2 hook-$h --batch 64 --epochs 1 --limit 4096 --hook $h
    acc=$(sed -n 's/.*final test accuracy \([0-9.]*\).*/\1/p' "$out/hook-$h.txt")
    python3 -c "import sys; sys.exit(0 if float('$acc') >= 0.60 else 1)" ||
        { cat "$out/hook-$h.txt"; echo "FAILED: hook $h: test accuracy $acc < 0.60"; exit 1; }
    echo "ok: hook $h trains (test accuracy $acc)"
done

resumes() { # resumes NRANKS ARGS...: checkpoint at step 20, resume to 45, against 45 steps
    n=$1
    shift
    rm -rf "$out/ckpt"
    train $n full --batch 64 --max-steps 45 "$@"
    train $n part --batch 64 --max-steps 20 --checkpoint "$out/ckpt" "$@"
    train $n resumed --batch 64 --max-steps 45 --checkpoint "$out/ckpt" --resume "$@"
    cmp -s "$out/full.bin" "$out/resumed.bin" ||
        { echo "FAILED: $n ranks: checkpoint at 20 and resume to 45 ($*) differs from 45 steps"; exit 1; }
    echo "ok: checkpoint -> resume equals the uninterrupted run ($n ranks, $*)"
}
for v in "--optim sgd" "--optim adam --lr 0.001 --zero 1" "--optim adam --lr 0.001 --zero 3" \
    "--hook powersgd"; do
    resumes 2 $v
done
resumes 4 --optim adam --lr 0.001 --zero 3 # ZeRO-3: each rank's quarter saved and given back

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
