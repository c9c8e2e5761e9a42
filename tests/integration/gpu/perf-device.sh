#!/bin/sh
# tests/integration/gpu/perf-device.sh TUTTI_RUN TUTTI_PERF MAX -- tutti-perf on device buffers (-G 1),
# every result checked (-c 1): all_reduce, all_gather, reduce_scatter and broadcast on 2 and 4
# ranks and sendrecv on 2, from 8 B to MAX, on the device path at every size
# (TUTTI_CUDA_P2P_MIN=0) and on the staged one (TUTTI_CUDA_P2P=0); on symmetric device memory
# (-R 2; all four on 2 ranks, all_reduce on 4, to 64 MiB); then all_reduce on host
# buffers for reference (to 64 MiB, or MAX if smaller). A wait that makes no progress for 60 s
# fails (a broken path must not eat a GPU run); after a failed run the rest of that path's
# runs are skipped. Prints each run's table; exits 1 if any run failed or counted a wrong
# element. Run by tools/gpu-check on a GPU and by the gpu-mock test on tests/support/cudamock.
set -u
run=$1 perf=$2 max=$3
fail=0 broken=""
perf() { # perf LABEL RANKS COLL ARGS...: one tutti-perf run that must validate
    label=$1 n=$2 c=$3
    shift 3
    if [ "$broken" = "$label" ]; then
        echo "## $label: $c on $n ranks skipped (an earlier $label run failed)"
        return
    fi
    out=$(env TUTTI_CUDA_P2P=$p2p TUTTI_CUDA_P2P_MIN=$min TUTTI_TIMEOUT=60 timeout 300 "$run" -n $n \
        "$perf" $c "$@" 2>&1)
    echo "## $label: $c on $n ranks"
    echo "$out"
    echo "$out" | grep -q "Out of bounds values : 0 OK" ||
        { echo "FAILED: $label $c on $n ranks"; fail=1; broken=$label; }
}
for path in device staged; do
    echo "=== tutti-perf on device buffers, $path path ($(date +%T))"
    p2p=1 min=0
    [ $path = staged ] && p2p=0 min=auto
    for n in 2 4; do
        for c in all_reduce all_gather reduce_scatter broadcast; do
            perf $path $n $c -G 1 -b 8 -e "$max" -f 8 -n 5 -w 1 -c 1
        done
    done
    perf $path 2 sendrecv -G 1 -b 8 -e "$max" -f 8 -n 5 -w 1 -c 1
done
# Symmetric device memory (-R 2: tutti_mem_alloc_device in windows), on the device path, to
# 64 MiB (or MAX if smaller), beside the device path's rows above.
echo "=== tutti-perf on symmetric device memory ($(date +%T))"
p2p=1 min=0
sym_max=64M
[ "$(numfmt --from=iec "$max")" -lt $((64 << 20)) ] && sym_max=$max
for c in all_reduce all_gather reduce_scatter broadcast; do
    perf symmetric 2 $c -G 1 -R 2 -b 8 -e "$sym_max" -f 8 -n 5 -w 1 -c 1
done
perf symmetric 4 all_reduce -G 1 -R 2 -b 8 -e "$sym_max" -f 8 -n 5 -w 1 -c 1
echo "=== tutti-perf on host buffers (reference) ($(date +%T))"
p2p=1 min=auto
host_max=64M
[ "$(numfmt --from=iec "$max")" -lt $((64 << 20)) ] && host_max=$max
for n in 2 4; do
    perf host $n all_reduce -b 8 -e "$host_max" -f 8 -n 20 -w 2 -c 1
done
exit $fail
