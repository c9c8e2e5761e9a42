# bench/tcp-cc.sh -- sourced by bench/link-compare, bench/ab-knobs and
# bench/compare-mpi/compare: the TCP congestion control a run uses (-C). The kernel's default
# differs between systems (Debian's is cubic; this project's VM defaults to bbr, whose pacing
# moves a burst's transmissions between CPUs so that a veth pair or loopback reorders them:
# BENCHMARKS.md, "Congestion control"), and socket figures follow it, so every run says which
# it had.
#   cc_set CC     use CC in this namespace (root: restored by cc_restore); checks it exists
#   cc_ns NS      the same in network namespace NS (gone with it)
#   cc_restore    put this namespace's back (call from the EXIT trap)
#   cc_now [NS]   the one in use here (or in namespace NS)
cc_want="" cc_old=""
cc_now() {
    if [ -n "${1:-}" ]; then
        ip netns exec "$1" sysctl -n net.ipv4.tcp_congestion_control 2>/dev/null || echo unknown
    else
        sysctl -n net.ipv4.tcp_congestion_control 2>/dev/null || echo unknown
    fi
}
cc_avail() { sysctl -n net.ipv4.tcp_available_congestion_control 2>/dev/null; }
cc_set() {
    [ "$(id -u)" = 0 ] || { echo "-C: setting the congestion control needs root" >&2; return 2; }
    case " $(cc_avail) " in *" $1 "*) ;; *) modprobe "tcp_$1" 2>/dev/null || true ;; esac
    case " $(cc_avail) " in
    *" $1 "*) ;;
    *) echo "-C $1: not available here (net.ipv4.tcp_available_congestion_control: $(cc_avail))" >&2; return 2 ;;
    esac
    cc_old=$(cc_now "")
    cc_want=$1
    sysctl -qw net.ipv4.tcp_congestion_control="$1"
}
cc_ns() { [ -z "$cc_want" ] || ip netns exec "$1" sysctl -qw net.ipv4.tcp_congestion_control="$cc_want"; }
cc_restore() { [ -z "$cc_old" ] || sysctl -qw net.ipv4.tcp_congestion_control="$cc_old"; }
