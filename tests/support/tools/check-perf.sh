#!/bin/sh
# tutti-perf end to end on 2 ranks: every collective from 8 B to 64 MiB with checking reports
# #wrong 0 and exits 0; with the --corrupt test hook it reports wrong elements and exits 1;
# an nccl-tests command line runs; its JSON feeds tutti-plot (when gnuplot is installed).
set -eu
run=$1 perf=$2 plot=$3
out=$(mktemp -d /tmp/tutti-perf-test-XXXXXX)
trap 'rm -rf "$out"' EXIT

"$run" -n 2 "$perf" all -b 8 -e 64M -f 4 -c 1 -J "$out/all.json" >"$out/all.txt" 2>&1 ||
    { cat "$out/all.txt"; echo "tutti-perf all failed"; exit 1; }
grep -q "Out of bounds values : 0 OK" "$out/all.txt" || { cat "$out/all.txt"; exit 1; }
for c in all_reduce all_gather reduce_scatter broadcast reduce sendrecv all_to_all gather scatter; do
    grep -q "tutti-perf $c:" "$out/all.txt" || { echo "no table for $c"; exit 1; }
    grep -q "\"collective\": \"$c\"" "$out/all.json" || { echo "no JSON rows for $c"; exit 1; }
done
# Every data row carries #wrong 0 (out of place and, where it exists, in place).
bad=$(grep -E '^\[0\] +[0-9]' "$out/all.txt" | awk '$10 != "0" || ($14 != "0" && $14 != "N/A")' | head -n 3)
[ -z "$bad" ] || { echo "rows with wrong elements:"; echo "$bad"; exit 1; }

if "$run" -n 2 "$perf" reduce_scatter -b 1K -e 64K -f 4 -c 1 --corrupt >"$out/bad.txt" 2>&1; then
    cat "$out/bad.txt"; echo "a corrupted result went unnoticed"; exit 1
fi
grep -q "Out of bounds values : [1-9][0-9]* FAILED" "$out/bad.txt" || { cat "$out/bad.txt"; exit 1; }

# Usage errors name the flag.
if "$run" -n 1 "$perf" all_reduce -d float13 >"$out/usage.txt" 2>&1; then exit 1; fi
grep -q -- "-d float13" "$out/usage.txt" || { cat "$out/usage.txt"; exit 1; }

# A command line written for nccl-tests' all_reduce_perf: short and long flags, -t/-g 1, -m,
# -a 3 (max), -z, -p, -F (CSV rows to a file beside the table): it runs, its table and CSV
# agree on the sizes, and flags that cannot mean the same here are refused by name.
"$run" -n 2 "$perf" all_reduce -t 1 -g 1 --minbytes 8 --maxbytes=4K --stepfactor 8 --iters 5 \
    -w 1 -m 3 -a 3 -z 1 -p 0 --op max --datatype float -c 1 -F "$out/rows.csv" >"$out/nccl.txt" 2>&1 ||
    { cat "$out/nccl.txt"; echo "an nccl-tests command line failed"; exit 1; }
grep -q "iters 5 x 3 calls, agg max" "$out/nccl.txt" || { cat "$out/nccl.txt"; exit 1; }
grep -q "Out of bounds values : 0 OK" "$out/nccl.txt" || { cat "$out/nccl.txt"; exit 1; }
sizes=$(grep -E '^\[0\] +[0-9]' "$out/nccl.txt" | awk '$5 == "max" {print $2}' | tr '\n' ' ')
csvsizes=$(awk -F, 'NR > 1 && $6 == "max" && $11 == "0" {print $3}' "$out/rows.csv" | tr '\n' ' ')
[ "$sizes" = "8 64 512 4096 " ] && [ "$csvsizes" = "$sizes" ] ||
    { echo "table sizes '$sizes', CSV sizes '$csvsizes'"; cat "$out/rows.csv"; exit 1; }
# -r all: a checked row per root for each size.
"$run" -n 2 "$perf" scatter -r all -b 8 -e 64 -f 8 -c 1 >"$out/roots.txt" 2>&1 ||
    { cat "$out/roots.txt"; echo "-r all failed"; exit 1; }
roots=$(grep -E '^\[0\] +[0-9]' "$out/roots.txt" | awk '$10 == "0" {print $2 "/" $6}' | tr '\n' ' ')
[ "$roots" = "8/0 8/1 64/0 64/1 " ] || { echo "-r all rows (size/root): '$roots'"; cat "$out/roots.txt"; exit 1; }
for bad in "-t 2:one thread a rank" "-g 4:one GPU a rank" "-G 8:CUDA graph" "-m 0:-m 0" \
    "--bogus 1:--bogus" "-a 7:-a 7"; do
    flags=${bad%%:*} want=${bad#*:}
    # shellcheck disable=SC2086 # flags: two words
    if "$run" -n 1 "$perf" all_reduce $flags >"$out/usage.txt" 2>&1; then
        echo "tutti-perf accepted $flags"; exit 1
    fi
    grep -q -- "$want" "$out/usage.txt" || { echo "$flags: no '$want' in:"; cat "$out/usage.txt"; exit 1; }
done

if command -v gnuplot >/dev/null; then
    "$plot" -o "$out/plot.png" -t test "$out/all.json" >/dev/null
    [ -s "$out/plot.png" ] || { echo "tutti-plot wrote no PNG"; exit 1; }
else
    echo "gnuplot not installed: tutti-plot not exercised"
fi
echo "tutti-perf checks passed"
