#!/bin/sh
# A /dev/shm too small for the job's FIFOs (a container's default is 64 MiB): every rank must
# fail with tutti's error naming /dev/shm and the remedy, not die of SIGBUS when a page of a
# FIFO cannot be had; with a smaller TUTTI_BUFFSIZE the same job must then fit and pass.
# The test mounts its own 6 MiB tmpfs on /dev/shm in a private mount namespace (unshare -m),
# so nothing outside sees it; it skips (77) with the reason where that cannot be done.
set -u
run=$1 perf=$2
skip() { echo "SKIP: $*"; exit 77; }
command -v unshare >/dev/null || skip "unshare (util-linux) is not installed"
[ "$(id -u)" = 0 ] || skip "a private mount namespace with its own /dev/shm needs root"
unshare -m true 2>/dev/null || skip "unshare -m failed: no mount namespaces here"
inner='mount -t tmpfs -o size=6M tmpfs /dev/shm || exit 99; "$@"'
job() { unshare -m sh -c "$inner" sh "$run" -n 4 "$perf" all_reduce -b 8 -e 64K -f 8 -n 3 -w 1 -c 1; }
out=$(TUTTI_TIMEOUT=30 job 2>&1)
rc=$?
echo "$out" | tail -5
[ $rc = 99 ] && skip "cannot mount a tmpfs on /dev/shm here"
case $rc in 0) echo "FAILED: 4 ranks with 1 MiB FIFOs fit in a 6 MiB /dev/shm?"; exit 1 ;; esac
[ $rc -ge 128 ] && { echo "FAILED: a rank died of a signal (exit $rc)"; exit 1; }
echo "$out" | grep -q "killed by" && { echo "FAILED: a rank was killed"; exit 1; }
echo "$out" | grep -q "no room for .* in /dev/shm.*TUTTI_BUFFSIZE" ||
    { echo "FAILED: no error naming /dev/shm and TUTTI_BUFFSIZE"; exit 1; }
out=$(TUTTI_TIMEOUT=30 TUTTI_BUFFSIZE=64K job 2>&1)
rc=$?
echo "$out" | tail -3
[ $rc = 0 ] && echo "$out" | grep -q "Out of bounds values : 0 OK" ||
    { echo "FAILED: with TUTTI_BUFFSIZE=64K the job should fit (exit $rc)"; exit 1; }
echo "ok: a full /dev/shm is an error, a smaller TUTTI_BUFFSIZE fits"
