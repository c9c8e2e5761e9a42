/*
 * test_topo.c -- the layout every rank derives from the rank records (nodes, local ranks,
 * ring order by node then NUMA node), and records read from golden hwloc XMLs
 * (tests/unit/topo/) through TUTTI_TOPO_FILE, including the dump round trip.
 */
#include "../../../lib/topo/topo.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void rec(struct tt_rank_info *r, uint64_t host, uint64_t machine, int numa)
{
    memset(r, 0, sizeof(*r));
    r->host_hash = host;
    r->machine_hash = machine;
    r->numa = numa;
    r->local_rank_hint = -1;
}

Test(topo, nodes_local_ranks_and_ring)
{
    /* 8 ranks: hosts A B A B A B A B; NUMA nodes on A: 1 0 1 0, on B: 0 0 1 1. */
    struct tt_rank_info r[8];
    struct tt_topo t;
    uint64_t host[8] = {'A', 'B', 'A', 'B', 'A', 'B', 'A', 'B'};
    int numa[8] = {1, 0, 0, 0, 1, 1, 0, 1};

    for (int i = 0; i < 8; i++)
        rec(&r[i], host[i], 42, numa[i]);
    cr_assert_eq(tt_topo_derive(r, 8, 3, &t), TUTTI_SUCCESS);
    cr_assert_eq(t.nnodes, 2);
    cr_assert(t.uniform);
    cr_assert_eq(t.machine_ranks, 8, "all on one physical machine");
    int want_node[8] = {0, 1, 0, 1, 0, 1, 0, 1}, want_local[8] = {0, 0, 1, 1, 2, 2, 3, 3};
    for (int i = 0; i < 8; i++) {
        cr_assert_eq(t.node_of[i], want_node[i], "node of %d", i);
        cr_assert_eq(t.local_of[i], want_local[i], "local index of %d", i);
    }
    /* Node 0 (ranks 0 2 4 6) by NUMA: 2 6 (NUMA 0) then 0 4 (NUMA 1); node 1: 1 3 5 7. */
    int want_ring[8] = {2, 6, 0, 4, 1, 3, 5, 7};
    for (int i = 0; i < 8; i++)
        cr_assert_eq(t.ring[i], want_ring[i], "ring position %d", i);
    tt_topo_free(&t);
}

Test(topo, uneven_nodes_and_machines)
{
    struct tt_rank_info r[5];
    struct tt_topo t;

    rec(&r[0], 1, 10, 0);
    rec(&r[1], 1, 10, 0);
    rec(&r[2], 1, 10, 0);
    rec(&r[3], 2, 20, 0);
    rec(&r[4], 2, 20, 0);
    cr_assert_eq(tt_topo_derive(r, 5, 4, &t), TUTTI_SUCCESS);
    cr_assert_eq(t.nnodes, 2);
    cr_assert(!t.uniform);
    cr_assert_eq(t.node_size[0], 3);
    cr_assert_eq(t.node_size[1], 2);
    cr_assert_eq(t.machine_ranks, 2, "rank 4 shares its machine with rank 3 only");
    tt_topo_free(&t);
}

Test(topo, golden_xml_and_dump_round_trip)
{
    char xml[512], dump[64];
    struct tt_rank_info me;
    FILE *f;

    snprintf(xml, sizeof(xml), "%s/tests/unit/topo/two-socket-32pu.xml", getenv("SOURCE_ROOT"));
    snprintf(dump, sizeof(dump), "/tmp/tutti-topo-dump-%d.xml", (int)getpid());
    setenv("TUTTI_TOPO_FILE", xml, 1);
    setenv("TUTTI_TOPO_DUMP_FILE", dump, 1);
    setenv("TUTTI_HOSTID", "golden", 1);
    cr_assert_eq(tt_topo_self(&me, -1, 0), TUTTI_SUCCESS, "%s", tutti_last_error());
    cr_assert_eq(me.machine_cpus, 32, "PUs of the XML machine, not of this one");
    cr_assert_eq(me.numa, 0);
    cr_assert_str_eq(me.host, "golden");
    cr_assert_neq(me.host_hash, me.machine_hash, "TUTTI_HOSTID changes the node, not the machine");
    /* What rank 0 dumped loads again and describes the same machine. */
    f = tmpfile();
    cr_assert_eq(tt_topo_print_machine(f, dump), TUTTI_SUCCESS, "%s", tutti_last_error());
    rewind(f);
    char line[256] = "";
    cr_assert_not_null(fgets(line, sizeof(line), f));
    cr_assert(strstr(line, "2 package(s), 2 NUMA node(s), 16 core(s), 32 PU(s)"), "%s", line);
    fclose(f);
    unlink(dump);
}

Test(topo, unreadable_xml_is_named)
{
    struct tt_rank_info me;

    setenv("TUTTI_TOPO_FILE", "/nonexistent/topology.xml", 1);
    cr_assert_eq(tt_topo_self(&me, -1, 0), TUTTI_ERR_INVALID_ARG);
    cr_assert(strstr(tutti_last_error(), "TUTTI_TOPO_FILE=/nonexistent/topology.xml"), "%s",
              tutti_last_error());
}
