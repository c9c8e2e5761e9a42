/*
 * test_multinode.c -- several nodes emulated on this machine (tutti-run --nodes: TUTTI_HOSTID
 * per block of ranks), so shared memory joins ranks of a node and sockets join nodes:
 * every collective checked on 2 nodes x 2 ranks and 3 x 1; every algorithm forced in turn
 * (TUTTI_ALGO) under tutti-perf's result check and the dtype x op matrix (the one-node
 * algorithms on one node); tutti-topo's views.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static int sh(const char *cmd)
{
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void run(const char *env, int n, int nodes, const char *prog, const char *args)
{
    char cmd[1024];
    int rc;

    snprintf(cmd, sizeof(cmd), "%s '%s' -n %d --nodes %d '%s' %s 2>&1", env, getenv("TUTTI_RUN"), n,
             nodes, prog, args);
    rc = sh(cmd);
    cr_assert_eq(rc, 0, "%s: exit status %d", cmd, rc);
}

#define SHAPE_TESTS(n, k)                                                                          \
    Test(multinode, matrix_##n##_ranks_##k##_nodes, .timeout = 300)                                \
    {                                                                                              \
        run("", n, k, getenv("COLL_CHECK"), "matrix");                                             \
    }                                                                                              \
    Test(multinode, p2p_##n##_ranks_##k##_nodes, .timeout = 120)                                   \
    {                                                                                              \
        run("", n, k, getenv("COLL_CHECK"), "p2p");                                                \
    }                                                                                              \
    Test(multinode, large_##n##_ranks_##k##_nodes, .timeout = 300)                                 \
    {                                                                                              \
        run("", n, k, getenv("COLL_CHECK"), "large");                                              \
    }

SHAPE_TESTS(4, 2)
SHAPE_TESTS(3, 3)

/* Every algorithm forced in turn: on 2 x 2 nodes, the one-node algorithms (direct, flat) on
 * 4 ranks of one node, recursive halving and doubling also on 3 x 1 (a rank folds in). */
static const struct forced {
    const char *algo; /* TUTTI_ALGO's COLLECTIVE:ALGORITHM */
    int n, nodes;
} forced[] = {
    {"all_reduce:ring", 4, 2},       {"all_reduce:rd", 4, 2},     {"all_reduce:rabenseifner", 4, 2},
    {"all_reduce:tree", 4, 2},       {"all_reduce:hier", 4, 2},   {"all_reduce:direct", 4, 1},
    {"all_reduce:flat", 4, 1},       {"all_gather:ring", 4, 2},   {"all_gather:rd", 4, 2},
    {"all_gather:hier", 4, 2},       {"all_gather:direct", 4, 1}, {"reduce_scatter:ring", 4, 2},
    {"reduce_scatter:rh", 4, 2},     {"reduce_scatter:rh", 3, 3}, {"all_gather:rd", 3, 3},
    {"reduce_scatter:direct", 4, 1}, {"broadcast:chain", 4, 2},   {"broadcast:tree", 4, 2},
    {"broadcast:hier", 4, 2},        {"reduce:chain", 4, 2},
};
#define NFORCED (sizeof(forced) / sizeof(forced[0]))

/* tutti-perf exits non-zero on any wrong element. */
Test(multinode, every_algorithm_forced, .timeout = 600)
{
    for (size_t i = 0; i < NFORCED; i++) {
        char env[128], args[160];
        snprintf(env, sizeof(env), "TUTTI_ALGO=%s", forced[i].algo);
        snprintf(args, sizeof(args), "%.*s -b 8 -e 4M -f 8 -n 2 -w 1 -c 1 -d %s",
                 (int)(strchr(forced[i].algo, ':') - forced[i].algo), forced[i].algo,
                 i % 2 ? "float32" : "bfloat16");
        run(env, forced[i].n, forced[i].nodes, getenv("TUTTI_PERF"), args);
    }
}

/* The dtype x op matrix under each forced algorithm of a collective that has alternatives. */
Test(multinode, every_algorithm_every_dtype_and_op, .timeout = 900)
{
    for (size_t i = 0; i < NFORCED; i++) {
        char env[128];
        if (strcmp(forced[i].algo, "all_gather:ring") == 0 ||
            strcmp(forced[i].algo, "reduce_scatter:ring") == 0 ||
            strncmp(forced[i].algo, "broadcast:chain", 15) == 0 ||
            strncmp(forced[i].algo, "reduce:", 7) == 0)
            continue; /* the defaults the shape tests run */
        snprintf(env, sizeof(env), "TUTTI_ALGO=%s", forced[i].algo);
        run(env, forced[i].n, forced[i].nodes, getenv("COLL_CHECK"), "matrix 10007");
    }
}

/* The socket transport's wire format: payloads carried in the header (up to 48 bytes) and
 * after it (padded to 64 bytes), a message's start read ahead in one call (up to 4 KiB of
 * payload): every length from 1 to 200 and from 3968 to 4300 bytes back to back on one
 * connection, then lengths around the slot size (both slot shapes), checked element by
 * element. */
Test(multinode, socket_message_lengths, .timeout = 300)
{
    run("", 2, 2, getenv("TUTTI_PERF"), "sendrecv -b 1 -e 200 -i 1 -n 2 -w 0 -c 1 -d int8");
    run("", 2, 2, getenv("TUTTI_PERF"), "all_reduce -b 1 -e 200 -i 1 -n 2 -w 0 -c 1 -d int8");
    /* around what a receiver reads ahead (4 KiB of payload and its header) */
    run("", 2, 2, getenv("TUTTI_PERF"), "sendrecv -b 3968 -e 4300 -i 1 -n 2 -w 0 -c 1 -d int8");
    /* 2 slots of 512 KiB (one rank a host over sockets), and 8 of 128 KiB */
    run("", 2, 2, getenv("TUTTI_PERF"),
        "broadcast -b 524224 -e 524416 -i 7 -n 2 -w 0 -c 1 -d int8 -r all");
    run("TUTTI_STEPS=8", 2, 2, getenv("TUTTI_PERF"),
        "broadcast -b 131008 -e 131200 -i 7 -n 2 -w 0 -c 1 -d int8 -r all");
}

/* The root of a large reduce refuses it (recvbuf NULL) while its peers on other hosts send
 * megabytes over sockets: it releases their messages unread, and the next all-reduces are
 * right on every rank (nothing of the refused call is left in the streams). Where payloads
 * wait in the kernel for the step that takes them (TUTTI_NET_DIRECT=1), the root's trace must
 * say it dropped one, read after its release. A leaf that refuses a large broadcast drops the
 * root's messages alike: the ranks whose call succeeds hold the root's data. */
Test(multinode, refused_large_call_over_sockets, .timeout = 120)
{
    char args[768];

    snprintf(args, sizeof(args),
             "-c '\"$0\" reduce-null-root >/tmp/tutti-drop.$$ 2>&1; rc=$?; "
             "grep -v \" NET \" /tmp/tutti-drop.$$; "
             "n=$(grep -c \"released unread: its payload dropped\" /tmp/tutti-drop.$$); "
             "rm -f /tmp/tutti-drop.$$; "
             "[ $rc = 0 ] && {  [ \"$TUTTI_RANK\" != 0 ] || [ $n -gt 0 ]; } || "
             "{ echo \"rank $TUTTI_RANK: exit $rc, $n dropped\"; exit 9; }' '%s'",
             getenv("PROBE_CHECK"));
    run("PROBE_COUNT=1000003 TUTTI_DEBUG=TRACE TUTTI_DEBUG_SUBSYS=NET", 2, 2, "sh", args);
    run("PROBE_COUNT=1000003 TUTTI_NET_DIRECT=0", 2, 2, getenv("PROBE_CHECK"), "reduce-null-root");
    run("PROBE_COUNT=300007", 3, 3, getenv("PROBE_CHECK"), "reduce-overlap-root");
    /* a leaf refuses a broadcast sent in messages past a slot (TUTTI_NET_COPY_MSG) */
    run("PROBE_COUNT=3000007", 2, 2, getenv("PROBE_CHECK"), "bcast-null-leaf");
    run("PROBE_COUNT=3000007", 3, 3, getenv("PROBE_CHECK"), "bcast-null-leaf");
}

/* TUTTI_TUNE_LINKS=measure: the network link measured at init (one figure for every rank,
 * said by rank 0), and every collective right with the tuner on it. */
Test(multinode, tune_links_measured, .timeout = 300)
{
    run("TUTTI_TUNE_LINKS=measure TUTTI_DEBUG=INFO TUTTI_DEBUG_SUBSYS=TUNE", 4, 2,
        getenv("TUTTI_PERF"),
        "all -b 8 -e 1M -f 32 -n 2 -w 1 -c 1 >/tmp/tutti-measure.$$ 2>&1; rc=$?; "
        "grep -v ' TUNE [a-z_]* of ' /tmp/tutti-measure.$$; "
        "grep -q '^.0. .*network link measured at init: [0-9.]* us a hop, [0-9.]* GB/s' "
        "/tmp/tutti-measure.$$ || rc=9; rm -f /tmp/tutti-measure.$$; exit $rc");
    run("TUTTI_TUNE_LINKS=measure", 3, 3, getenv("TUTTI_PERF"),
        "all_reduce -b 8 -e 4M -f 8 -n 2 -w 1 -c 1");
}

/* TUTTI_NET_CHUNK (every rank alone on its host): quarter-slot messages forced, every
 * collective x dtype x op right on 2 hosts (100,003 elements: several quarter slots) and
 * lengths around a quarter slot; the trial (auto) voted alike on both ranks of a 1 MiB
 * broadcast loop; with 2 ranks a host the picker is off (no trial in as many calls), and so it
 * is by default (0). Ranks whose knobs differ (TUTTI_NET_CHUNK=1, or TUTTI_STREAM_STORES=1, on
 * rank 1 alone, under auto) cannot vote, so every rank sends whole slots: messages of one size
 * at both ends, every result right. */
static void net_chunk_rank1(const char *rank1_env)
{
    char args[512];

    snprintf(args, sizeof(args),
             "-c '[ \"$TUTTI_RANK\" != 1 ] || export %s; exec \"$0\" broadcast -b 256K -e 4M "
             "-f 4 -n 30 -w 0 -c 1 -r all' '%s'",
             rank1_env, getenv("TUTTI_PERF"));
    run("TUTTI_NET_CHUNK=auto", 2, 2, "sh", args);
}

Test(multinode, net_chunk, .timeout = 300)
{
    net_chunk_rank1("TUTTI_NET_CHUNK=1");
    net_chunk_rank1("TUTTI_STREAM_STORES=1");
    run("TUTTI_NET_CHUNK=1", 2, 2, getenv("COLL_CHECK"), "matrix 100003");
    run("TUTTI_NET_CHUNK=1", 2, 2, getenv("TUTTI_PERF"),
        "broadcast -b 262080 -e 262272 -i 7 -n 2 -w 0 -c 1 -d int8 -r all");
    run("TUTTI_NET_CHUNK=auto TUTTI_DEBUG=TRACE TUTTI_DEBUG_SUBSYS=TUNE", 2, 2,
        getenv("TUTTI_PERF"),
        "broadcast -b 1M -e 1M -n 30 -w 0 -c 1 >/tmp/tutti-chunk.$$ 2>&1; rc=$?; "
        "grep -v ' TUNE ' /tmp/tutti-chunk.$$; "
        "v0=$(grep '^.0. .*trial vote.*quarter slot' /tmp/tutti-chunk.$$ | sed 's/.*TUNE //'); "
        "v1=$(grep '^.1. .*trial vote.*quarter slot' /tmp/tutti-chunk.$$ | sed 's/.*TUNE //'); "
        "[ -n \"$v0\" ] && [ \"$v0\" = \"$v1\" ] || { echo \"votes: '$v0' / '$v1'\"; rc=9; }; "
        "rm -f /tmp/tutti-chunk.$$; exit $rc");
    run("TUTTI_NET_CHUNK=auto TUTTI_DEBUG=TRACE TUTTI_DEBUG_SUBSYS=TUNE", 4, 2,
        getenv("TUTTI_PERF"),
        "broadcast -b 1M -e 1M -n 30 -w 0 -c 1 >/tmp/tutti-chunk.$$ 2>&1; rc=$?; "
        "grep -v ' TUNE ' /tmp/tutti-chunk.$$; "
        "! grep 'quarter slot' /tmp/tutti-chunk.$$ || rc=9; rm -f /tmp/tutti-chunk.$$; exit $rc");
    run("TUTTI_DEBUG=TRACE TUTTI_DEBUG_SUBSYS=TUNE", 2, 2, getenv("TUTTI_PERF"),
        "all -b 256K -e 4M -f 4 -n 30 -w 0 -c 1 >/tmp/tutti-chunk.$$ 2>&1; rc=$?; "
        "grep -v ' TUNE ' /tmp/tutti-chunk.$$; "
        "! grep 'quarter slot' /tmp/tutti-chunk.$$ || rc=9; rm -f /tmp/tutti-chunk.$$; exit $rc");
}

/* How a socket receiver reads a payload past its read-ahead: TUTTI_NET_WHOLE, only once all of
 * it has arrived (1) or as its bytes come (0); TUTTI_NET_DIRECT, straight to where its step
 * puts it (1) or into a slot first (0). Every collective x dtype x op right on 2 hosts under
 * each, and lengths around the read-ahead (32 KiB of payload, asked for after a message that
 * fitted in it; 4 KiB after a longer one: the all-gather's) and the slot, checked element by
 * element; each rank's trace must say its payloads were read whole (in place) where the knob is
 * 1 and must not where it is 0. (A payload that stays short of whole past 1 ms: check-netns.sh,
 * a rate-limited link.) */
static void net_read_run(const char *knob, const char *mode, const char *trace,
                         const char *perf_args)
{
    char env[160], args[1024];

    snprintf(env, sizeof(env), "%s=%s TUTTI_DEBUG=TRACE TUTTI_DEBUG_SUBSYS=NET", knob, mode);
    snprintf(args, sizeof(args),
             "-c '\"$0\" %s -n 2 -w 0 -c 1 -d int8 >/tmp/tutti-read.$$ 2>&1; rc=$?; "
             "grep -v \" NET \" /tmp/tutti-read.$$; "
             "n=$(grep -c \"payloads read %s\" /tmp/tutti-read.$$); rm -f /tmp/tutti-read.$$; "
             "[ $rc = 0 ] && [ $n %s ] || { echo \"rank $TUTTI_RANK: exit $rc, $n read %s\"; "
             "exit 9; }' '%s'",
             perf_args, trace, mode[0] == '1' ? "-gt 0" : "= 0", trace, getenv("TUTTI_PERF"));
    run(env, 2, 2, "sh", args);
}

Test(multinode, net_read, .timeout = 300)
{
    static const char *const lengths[] = {"sendrecv -b 32640 -e 32960 -i 1",
                                          "all_gather -b 8K -e 4M -f 8",
                                          "broadcast -b 524224 -e 524416 -i 7 -r all"};

    run("TUTTI_NET_WHOLE=1", 2, 2, getenv("COLL_CHECK"), "matrix 100003");
    run("TUTTI_NET_DIRECT=0", 2, 2, getenv("COLL_CHECK"), "matrix 100003");
    for (size_t i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++) {
        net_read_run("TUTTI_NET_WHOLE", "1", "whole", lengths[i]);
        net_read_run("TUTTI_NET_WHOLE", "0", "whole", lengths[i]);
        net_read_run("TUTTI_NET_DIRECT", "1", "in place", lengths[i]);
        net_read_run("TUTTI_NET_DIRECT", "0", "in place", lengths[i]);
    }
}

/* TUTTI_NET_COPY_MSG (every rank alone on its host, payloads read in place): a broadcast, and an
 * all-gather of 16 MiB or more, in messages past a slot, checked element by element at
 * lengths around the 4 MiB message on 2 and 3 hosts (each rank the root in turn; on 3 a rank
 * forwards what it receives); each receiving rank's trace must say it read a message longer
 * than a slot, and must not under TUTTI_NET_COPY_MSG=0, nor in an all-gather of 12 MiB
 * (which keeps its slots). A rank with TUTTI_NET_DIRECT=0, or another size, makes every rank
 * send slots: every result right, no long message anywhere. */
static void net_copy_run(const char *env, const char *rank1_env, int n, const char *perf_args,
                         int want_long)
{
    char envs[256], args[1024];

    snprintf(envs, sizeof(envs), "%s TUTTI_DEBUG=TRACE TUTTI_DEBUG_SUBSYS=NET", env);
    snprintf(args, sizeof(args),
             "-c '[ \"$TUTTI_RANK\" != 1 ] || export %s; "
             "\"$0\" %s -n 2 -w 0 -c 1 >/tmp/tutti-copy.$$ 2>&1; rc=$?; "
             "grep -v \" NET \" /tmp/tutti-copy.$$; "
             "n=$(grep -c \"messages longer than a slot\" /tmp/tutti-copy.$$); "
             "rm -f /tmp/tutti-copy.$$; "
             "[ $rc = 0 ] && [ $n %s ] || { echo \"rank $TUTTI_RANK: exit $rc, $n long\"; "
             "exit 9; }' '%s'",
             rank1_env, perf_args, want_long ? "-gt 0" : "= 0", getenv("TUTTI_PERF"));
    run(envs, n, n, "sh", args);
}

Test(multinode, net_copy_msg, .timeout = 300)
{
    static const char *const lengths[] = {"broadcast -b 4194240 -e 4194432 -i 7 -r all -d int8",
                                          "broadcast -b 9M -e 9M -r all -d float64"};

    for (size_t i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++) {
        net_copy_run("", "X=0", 2, lengths[i], 1);
        net_copy_run("", "X=0", 3, lengths[i], 1);
        net_copy_run("TUTTI_NET_COPY_MSG=0", "X=0", 2, lengths[i], 0);
    }
    net_copy_run("", "X=0", 2, "all_gather -b 12M -e 12M -d int8", 0);
    net_copy_run("", "X=0", 2, "all_gather -b 16777152 -e 16777280 -i 64 -d int8", 1);
    net_copy_run("", "X=0", 3, "all_gather -b 25165824 -e 25165824 -d float16", 1);
    net_copy_run("", "TUTTI_NET_DIRECT=0", 2, lengths[0], 0);
    net_copy_run("", "TUTTI_NET_COPY_MSG=1M", 3, lengths[1], 0);
    net_copy_run("TUTTI_NET_COPY_MSG=1M", "X=0", 3, lengths[1], 1);
}

Test(multinode, perf_over_sockets, .timeout = 300)
{
    run("", 4, 2, getenv("TUTTI_PERF"), "all -b 8 -e 1M -f 16 -n 3 -w 1 -c 1");
}

Test(multinode, sockets_only_between_local_ranks, .timeout = 120)
{
    /* With shared memory excluded, ranks of one host talk over loopback TCP. */
    run("TUTTI_TRANSPORTS=^shm", 3, 1, getenv("COLL_CHECK"), "p2p");
}

Test(multinode, topo_comm_view, .timeout = 60)
{
    char cmd[1024];

    snprintf(cmd, sizeof(cmd),
             "'%s' -n 4 --nodes 2 '%s' --comm > /tmp/tutti-topo-comm.$$ 2>&1 && "
             "grep -q '4 ranks on 2 node(s)' /tmp/tutti-topo-comm.$$ && "
             "grep -q '0: - shm socket socket' /tmp/tutti-topo-comm.$$ && "
             "grep -q 'tree 1' /tmp/tutti-topo-comm.$$; rc=$?; cat /tmp/tutti-topo-comm.$$; "
             "rm -f /tmp/tutti-topo-comm.$$; exit $rc",
             getenv("TUTTI_RUN"), getenv("TUTTI_TOPO"));
    cr_assert_eq(sh(cmd), 0, "tutti-topo --comm did not show the expected layout");
}

Test(multinode, topo_simulate_4096_ranks, .timeout = 60)
{
    char cmd[1024];

    snprintf(cmd, sizeof(cmd),
             "out=$(timeout 10 '%s' --simulate --nodes 512 --per-node 8) || exit 1; "
             "for c in all_reduce all_gather reduce_scatter broadcast reduce; do "
             "echo \"$out\" | grep -q \"# $c:\" || exit 2; done; "
             "echo \"$out\" | grep -q 'hier' || exit 3; "
             "echo \"$out\" | grep -c '^ *536870912 ' | grep -q 5 || exit 4",
             getenv("TUTTI_TOPO"));
    cr_assert_eq(sh(cmd), 0, "tutti-topo --simulate for 512 x 8 ranks failed");
}

/* Across hosts a reduction reads the bytes the network landed once more (tune.c's g): on 2
 * hosts the exchange (rd, S reduced) keeps the small all-reduces, the ring (S/2 reduced) takes
 * them from 1 MiB (BENCHMARKS.md, "The ring for large all-reduces across hosts"). */
Test(multinode, topo_simulate_net_reduce, .timeout = 60)
{
    char cmd[1024];

    /* each pair: a size and the algorithm the model must take for it */
    snprintf(cmd, sizeof(cmd),
             "out=$('%s' --simulate --nodes 2 --per-node 1 --coll all_reduce -b 8 -e 4M -f 2) "
             "|| exit 1; for p in '8 rd' '524288 rd' '1048576 ring' '4194304 ring'; do "
             "set -- $p; echo \"$out\" | grep -q \"^ *$1 .* $2\\$\" || exit 2; done",
             getenv("TUTTI_TOPO"));
    cr_assert_eq(sh(cmd), 0,
                 "tutti-topo --simulate: 2-host all-reduce picks are not rd to "
                 "512 KiB, ring from 1 MiB");
}

/* --oversub: the model for ranks outnumbering cores, where every hop waits for a context switch
 * and the one-hop direct all-gather beats recursive doubling's two rounds on 4 ranks. */
Test(multinode, topo_simulate_oversub, .timeout = 60)
{
    char cmd[1024];

    snprintf(cmd, sizeof(cmd),
             "t='%s'; a='--simulate --nodes 1 --per-node 4 --coll all_gather -b 8 -e 8'; "
             "$t $a | grep -q '^ *8 .* rd$' || exit 1; "
             "$t $a --oversub | grep -q '^ *8 .* direct$' || exit 2; "
             "$t $a --oversub | grep -q 'a hop takes at least 7.00 us' || exit 3",
             getenv("TUTTI_TOPO"));
    cr_assert_eq(sh(cmd), 0,
                 "tutti-topo --simulate --oversub did not take the oversubscribed model");
}
