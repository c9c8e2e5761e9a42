#!/bin/sh
# Two ranks in two network namespaces joined by a veth pair: the bootstrap and the socket
# transport run over the veth addresses (10.231.0.1 and .2), nothing else; then tutti-run on
# each side as two hosts (--nnodes 2), 2 ranks a namespace. Skips (77) with
# the reason when namespaces cannot be made here (not root, no ip(8), no netns support).
set -u
run=$1 perf=$2 fault=${3:-}
ns1=tutti-t1-$$ ns2=tutti-t2-$$ v1=tt1-$$ v2=tt2-$$
skip() { echo "SKIP: $*"; exit 77; }
cleanup() { ip netns del "$ns1" 2>/dev/null; ip netns del "$ns2" 2>/dev/null; }
# waited PID0 PID1: both ranks' exit codes (rc0, rc1), and ok=1 if both are 0
waited() { wait "$1"; rc0=$?; wait "$2"; rc1=$?; ok=1; [ $rc0 = 0 ] && [ $rc1 = 0 ] || ok=0; }
# verdict WHAT FILE...: unless ok is still 1, print the ranks' output and fail
verdict() {
    what=$1; shift
    [ $ok = 1 ] || { cat "$@"; rm -rf "$out"; echo "$what failed (exit $rc0 / $rc1)"; exit 1; }
}
command -v ip >/dev/null || skip "ip (iproute2) is not installed"
[ "$(id -u)" = 0 ] || skip "creating network namespaces needs root"
ip netns add "$ns1" 2>/dev/null || skip "ip netns add failed: no network namespace support here"
trap cleanup EXIT
ip netns add "$ns2" || exit 1
ip link add "$v1" type veth peer name "$v2" || skip "veth pairs are not available"
ip link set "$v1" netns "$ns1" && ip link set "$v2" netns "$ns2" || exit 1
ip netns exec "$ns1" ip addr add 10.231.0.1/24 dev "$v1" || exit 1
ip netns exec "$ns2" ip addr add 10.231.0.2/24 dev "$v2" || exit 1
for n in "$ns1" "$ns2"; do ip netns exec "$n" ip link set lo up; done
ip netns exec "$ns1" ip link set "$v1" up && ip netns exec "$ns2" ip link set "$v2" up || exit 1

out=$(mktemp -d /tmp/tutti-netns-XXXXXX)
common="MASTER_ADDR=10.231.0.1 MASTER_PORT=29631 WORLD_SIZE=2 TUTTI_SECRET=netns-test-$$ TUTTI_TIMEOUT=60 TUTTI_DEBUG=INFO TUTTI_DEBUG_SUBSYS=NET,INIT"
ip netns exec "$ns1" env $common RANK=0 TUTTI_HOSTID=ns1 TUTTI_SOCKET_IFNAME="=$v1" \
    "$perf" all -b 8 -e 4M -f 8 -n 3 -w 1 -c 1 >"$out/r0" 2>&1 &
p0=$!
ip netns exec "$ns2" env $common RANK=1 TUTTI_HOSTID=ns2 TUTTI_SOCKET_IFNAME="=$v2" \
    "$perf" all -b 8 -e 4M -f 8 -n 3 -w 1 -c 1 >"$out/r1" 2>&1 &
p1=$!
waited "$p0" "$p1"
cat "$out/r0"
echo "--- rank 1:"
grep -E "WARN|transport|interface" "$out/r1"
grep -q "Out of bounds values : 0 OK" "$out/r0" || ok=0
grep -q "transport socket" "$out/r0" || ok=0
grep -q "interface $v1 (10.231.0.1" "$out/r0" || ok=0
[ $ok = 1 ] || { rm -rf "$out"; echo "netns test failed (exit $rc0 / $rc1)"; exit 1; }
echo "netns: collectives over the veth pair passed"

# tutti-run on each "host" (--nnodes 2), 2 ranks in each namespace, no interface named: the
# launcher leaves the choice to the library (not loopback: the master is 10.231.0.1), and
# the ranks of one namespace share memory while the namespaces talk over the veth pair.
common="TUTTI_SECRET=netns-run-$$ TUTTI_TIMEOUT=60 TUTTI_DEBUG=INFO TUTTI_DEBUG_SUBSYS=NET"
for h in 0 1; do
    ns=$([ $h = 0 ] && echo "$ns1" || echo "$ns2")
    ip netns exec "$ns" env $common TUTTI_HOSTID=ns$h "$run" -n 4 --nnodes 2 --node-rank $h \
        --master 10.231.0.1:29634 "$perf" all_reduce -b 8 -e 1M -f 32 -n 3 -w 1 -c 1 \
        >"$out/l$h" 2>&1 &
    eval "l$h=\$!"
done
waited "$l0" "$l1"
grep -E "^\[0\] +[0-9]|WARN" "$out/l0"
grep -q "Out of bounds values : 0 OK" "$out/l0" || ok=0
grep -q "^\[2\] .*interface $v2 (10.231.0.2" "$out/l1" || ok=0
grep -q "^\[0\] .*interface $v1 (10.231.0.1" "$out/l0" || ok=0
verdict "netns tutti-run --nnodes" "$out/l0" "$out/l1"
echo "netns: tutti-run on two hosts (4 ranks, 2 a namespace) passed"

# A slow link (the pair limited to 200 Mbit/s each way): payloads read whole (TUTTI_NET_WHOLE=1)
# stay short of whole past the 1 ms wait, and are then read as their bytes come, every
# result right.
if ip netns exec "$ns1" tc qdisc add dev "$v1" root tbf rate 200mbit burst 64kb latency 100ms \
    2>/dev/null; then
    ip netns exec "$ns2" tc qdisc add dev "$v2" root tbf rate 200mbit burst 64kb latency 100ms
    common="MASTER_ADDR=10.231.0.1 MASTER_PORT=29635 WORLD_SIZE=2 TUTTI_SECRET=netns-slow-$$ TUTTI_TIMEOUT=60 TUTTI_NET_WHOLE=1 TUTTI_DEBUG=TRACE TUTTI_DEBUG_SUBSYS=NET"
    for r in 0 1; do
        ns=$([ $r = 0 ] && echo "$ns1" || echo "$ns2") v=$([ $r = 0 ] && echo "$v1" || echo "$v2")
        ip netns exec "$ns" env $common RANK=$r TUTTI_HOSTID=ns$r TUTTI_SOCKET_IFNAME="=$v" \
            "$perf" all_gather -b 2M -e 2M -n 2 -w 0 -c 1 >"$out/s$r" 2>&1 &
        eval "s$r=\$!"
    done
    waited "$s0" "$s1"
    ip netns exec "$ns1" tc qdisc del dev "$v1" root
    ip netns exec "$ns2" tc qdisc del dev "$v2" root
    grep -E "^\[0\] +[0-9]|WARN|not all there" "$out/s0"
    grep -q "Out of bounds values : 0 OK" "$out/s0" || ok=0
    for r in 0 1; do
        grep -q "a payload not all there after 1 ms: read as its bytes come" "$out/s$r" || ok=0
    done
    verdict "netns slow link" "$out/s0" "$out/s1"
    echo "netns: whole-payload reads over a 200 Mbit/s link passed"
else
    echo "SKIP (this part): tc cannot shape the veth pair here (no tbf qdisc)"
fi

# Cut the link in the middle of all-reduces: both ranks must fail (no hang) within 10 s,
# with the default TUTTI_NET_TIMEOUT and no TUTTI_TIMEOUT.
[ -n "$fault" ] || exit 0
common="MASTER_ADDR=10.231.0.1 MASTER_PORT=29632 WORLD_SIZE=2 TUTTI_SECRET=netns-cut-$$"
mkdir -p "$out/cut"
ip netns exec "$ns1" env $common RANK=0 TUTTI_HOSTID=ns1 TUTTI_SOCKET_IFNAME="=$v1" \
    "$fault" "$out/cut" loop >"$out/c0" 2>&1 &
p0=$!
ip netns exec "$ns2" env $common RANK=1 TUTTI_HOSTID=ns2 TUTTI_SOCKET_IFNAME="=$v2" \
    "$fault" "$out/cut" loop >"$out/c1" 2>&1 &
p1=$!
i=0
while [ ! -e "$out/cut/pid.0" ] || [ ! -e "$out/cut/pid.1" ]; do
    i=$((i + 1)); [ $i -lt 300 ] || { echo "ranks never got ready"; cat "$out/c0" "$out/c1"; exit 1; }
    sleep 0.1
done
sleep 1
ip netns exec "$ns1" ip link set "$v1" down
cut=$(date +%s.%N)
( sleep 20; kill -9 $p0 $p1 ) </dev/null >/dev/null 2>&1 &
guard=$!
wait $p0; rc0=$?
wait $p1; rc1=$?
done_at=$(date +%s.%N)
kill $guard 2>/dev/null
cat "$out/c0" "$out/c1" | grep RESULT
took=$(awk "BEGIN { printf \"%.1f\", $done_at - $cut }")
echo "netns: link cut; both ranks returned errors $took s later (exit $rc0 / $rc1)"
rm -rf "$out"
[ $rc0 = 0 ] && [ $rc1 = 0 ] && awk "BEGIN { exit !($took < 10) }" && exit 0
echo "link-cut test failed"
exit 1
