#!/bin/sh
# tests/integration/nccl/check-symbols.sh NCCL_H LIBNCCL -- libnccl.so.2 exports every function
# the CUDA toolkit's nccl.h declares (and its pnccl* name), and nothing else.
set -eu
h=$1 lib=$2
want=$(mktemp) have=$(mktemp)
trap 'rm -f "$want" "$have"' EXIT
# Declarations: a return type, then the name and its '(' (nccl.h puts each on one line).
grep -oE '^[[:space:]]*(ncclResult_t|const char ?\*|void)[[:space:]]+p?nccl[A-Za-z0-9_]+[[:space:]]*\(' "$h" |
    sed -E 's/.*[[:space:]*](p?nccl[A-Za-z0-9_]+)[[:space:]]*\($/\1/' | sort -u >"$want"
nm -D --defined-only "$lib" | awk '$2 ~ /^[TW]$/ {print $3}' | sed 's/@.*//' | sort -u >"$have"
n=$(wc -l <"$want")
[ "$n" -ge 80 ] || { echo "read only $n functions from $h: the parse is broken"; exit 1; }
missing=$(comm -23 "$want" "$have")
extra=$(comm -13 "$want" "$have")
[ -z "$missing" ] || { echo "not exported by $lib:"; echo "$missing"; exit 1; }
[ -z "$extra" ] || { echo "exported by $lib but not in $h:"; echo "$extra"; exit 1; }
echo "$lib exports all $n functions of $h (ncclX and pncclX), and nothing else"
