#!/bin/sh
# A small /dev/shm (a container's default is 64 MiB): with TUTTI_BUFFSIZE left alone the
# FIFOs shrink until every pair of ranks fits (comm.c fit_shm), so the job runs, even with
# the algorithms that connect every pair on 2 channels; with a TUTTI_BUFFSIZE too large for
# it, every rank fails with tutti's error naming /dev/shm and the remedy, not SIGBUS when a
# page of a FIFO cannot be had. The test mounts its own 6 MiB tmpfs on /dev/shm in a private
# mount namespace (unshare -m), so nothing outside sees it; it skips (77) with the reason
# where that cannot be done.
set -u
run=$1 perf=$2
skip() { echo "SKIP: $*"; exit 77; }
command -v unshare >/dev/null || skip "unshare (util-linux) is not installed"
[ "$(id -u)" = 0 ] || skip "a private mount namespace with its own /dev/shm needs root"
unshare -m true 2>/dev/null || skip "unshare -m failed: no mount namespaces here"
inner='mount -t tmpfs -o size=6M tmpfs /dev/shm || exit 99; "$@"'
job() { unshare -m sh -c "$inner" sh "$run" -n 4 "$perf" "$@" -b 8 -e 256K -f 8 -n 3 -w 1 -c 1; }
export TUTTI_TIMEOUT=30

out=$(TUTTI_BUFFSIZE=1M job all_reduce 2>&1)
rc=$?
echo "$out" | tail -4
[ $rc = 99 ] && skip "cannot mount a tmpfs on /dev/shm here"
case $rc in 0) echo "FAILED: 4 ranks with 1 MiB FIFOs fit in a 6 MiB /dev/shm?"; exit 1 ;; esac
[ $rc -ge 128 ] && { echo "FAILED: a rank died of a signal (exit $rc)"; exit 1; }
echo "$out" | grep -q "killed by" && { echo "FAILED: a rank was killed"; exit 1; }
echo "$out" | grep -q "no room for .* in /dev/shm.*TUTTI_BUFFSIZE" ||
    { echo "FAILED: no error naming /dev/shm and TUTTI_BUFFSIZE"; exit 1; }

out=$(TUTTI_NCHANNELS=2 TUTTI_DEBUG=INFO TUTTI_DEBUG_SUBSYS=INIT \
    TUTTI_ALGO='all_reduce:flat;reduce_scatter:direct;all_gather:direct' job all 2>&1)
rc=$?
echo "$out" | grep -E "TUTTI_BUFFSIZE|Out of bounds|failed|killed" | head -4
[ $rc = 0 ] || { echo "FAILED: with the default TUTTI_BUFFSIZE the job should fit (exit $rc)"; exit 1; }
[ "$(echo "$out" | grep -c "^\[0\] # tutti-perf [a-z_]*: 4 ranks")" = 9 ] &&
    echo "$out" | grep -q "Out of bounds values : 0 OK" ||
    { echo "FAILED: not every collective ran and checked"; exit 1; }
echo "$out" | grep -q "INFO INIT TUTTI_BUFFSIZE: .* KiB FIFOs, not the default 1024 KiB" ||
    { echo "FAILED: rank 0 did not say that it shrank the FIFOs"; exit 1; }
echo "ok: the default fits a small /dev/shm, a TUTTI_BUFFSIZE too large is a clear error"
