#!/bin/sh
# tests/integration/multiproc/check-binding.sh TUTTI_RUN TUTTI_PERF -- ranks bound one per core are not
# "ranks outnumber cores" (their waits spin): tutti counts the CPUs the ranks of a machine may
# use together, not the one CPU each bound rank sees; ranks sharing one core still are. Also
# that tutti-run --bind core puts ranks on distinct CPUs, round robin. Skips (77) with fewer
# than 2 CPUs.
set -u
run=$1 perf=$2
skip() { echo "SKIP: $*"; exit 77; }
command -v taskset >/dev/null || skip "taskset (util-linux) is not installed"
[ "$(nproc)" -ge 2 ] || skip "needs 2 CPUs, this process may use $(nproc)"
fail=0
blocks() { # blocks WANT(yes|no) LABEL LAUNCH...: rank 0's verdict on oversubscription
    want=$1 label=$2
    shift 2
    out=$(TUTTI_DEBUG=INFO TUTTI_DEBUG_SUBSYS=TOPO "$@" all_reduce -b 8 -e 1K -f 8 -n 3 -w 1 -c 1 2>&1)
    rc=$?
    got=no
    echo "$out" | grep "^\[0\].*ring position" | grep -q "ranks outnumber cores" && got=yes
    if [ $rc != 0 ] || [ $got != "$want" ] || ! echo "$out" | grep -q "Out of bounds values : 0 OK"; then
        echo "FAILED: $label: exit $rc, waits block: $got (want $want)"
        echo "$out" | grep -E "ring position|CPUs|failed" | head -8
        fail=1
    else
        echo "ok: $label: waits block: $got"
    fi
}
blocks no "2 ranks, unbound" "$run" -n 2 "$perf"
blocks no "2 ranks, --bind core (one CPU each)" "$run" --bind core -n 2 "$perf"
blocks yes "4 ranks, --bind core (two per CPU)" "$run" --bind core -n 4 "$perf"
first=$(taskset -pc $$ | sed 's/.*: //; s/[,-].*//')
blocks yes "2 ranks, both on CPU $first (taskset)" "$run" -n 2 taskset -c "$first" "$perf"
# --bind core: distinct CPUs for the first ranks, then round robin
cpus=$("$run" --bind core -n 3 sh -c 'grep Cpus_allowed_list /proc/self/status' 2>&1 |
    sort | sed 's/.*:[[:space:]]*//' | tr '\n' ' ')
set -- $cpus
if [ $# = 3 ] && [ "$1" != "$2" ] && ! echo "$1$2$3" | grep -q '[,-]'; then
    echo "ok: --bind core: ranks 0-2 on CPUs $cpus"
else
    echo "FAILED: --bind core: ranks 0-2 on CPUs '$cpus' (want one each, 0 and 1 distinct)"
    fail=1
fi
out=$("$run" --bind sideways -n 2 true 2>&1)
[ $? = 2 ] && echo "$out" | grep -q "bind sideways: want core or none" ||
    { echo "FAILED: a bad --bind value: $out"; fail=1; }
exit $fail
