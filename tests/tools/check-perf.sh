#!/bin/sh
# tutti-perf end to end on 2 ranks: every collective from 8 B to 64 MiB with checking reports
# #wrong 0 and exits 0; with the --corrupt test hook it reports wrong elements and exits 1;
# its JSON feeds tutti-plot (when gnuplot is installed).
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

if command -v gnuplot >/dev/null; then
    "$plot" -o "$out/plot.png" -t test "$out/all.json" >/dev/null
    [ -s "$out/plot.png" ] || { echo "tutti-plot wrote no PNG"; exit 1; }
else
    echo "gnuplot not installed: tutti-plot not exercised"
fi
echo "tutti-perf checks passed"
