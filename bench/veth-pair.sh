# bench/veth-pair.sh -- sourced, after bench/tcp-cc.sh, by bench/compare-mpi/compare and
# bench/ab-knobs: a second emulated host for 2-host runs, a network namespace joined to this one
# by a veth pair (root).
#   veth_up NS V0 V1 NET   namespace NS under cc_set's congestion control; V0 here as NET.1/24,
#                          V1 in NS as NET.2/24, both up; sets veth_mpi, Open MPI's TCP options
#                          for ranks on both sides (its ranks reach mpirun's PMIx server over
#                          TCP too, so PMIx's are exported)
#   veth_down NS V0        remove them (call from the EXIT trap)
veth_mpi=""
veth_up() {
    ip netns add "$1" || return 1
    cc_ns "$1"
    ip link add "$2" type veth peer name "$3" && ip link set "$3" netns "$1" &&
        ip addr add "$4.1/24" dev "$2" && ip link set "$2" up &&
        ip netns exec "$1" ip addr add "$4.2/24" dev "$3" &&
        ip netns exec "$1" ip link set lo up && ip netns exec "$1" ip link set "$3" up || return 1
    veth_mpi="--mca btl_tcp_if_include $4.0/24 --mca oob_tcp_if_include $2 -x PMIX_MCA_ptl_tcp_remote_connections=1"
    export PMIX_MCA_ptl_tcp_remote_connections=1 PMIX_MCA_ptl_tcp_if_include="$2"
}
veth_down() {
    ip link del "$2" 2>/dev/null
    ip netns del "$1" 2>/dev/null
}
