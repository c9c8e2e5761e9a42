/*
 * topo.h -- what each rank tells the others about where it runs, and what every rank derives
 * from all of it: nodes, local ranks, ring order.
 *
 * Each rank fills a fixed-size record from hwloc (or from TUTTI_TOPO_FILE, an hwloc XML;
 * without hwloc, from the kernel): host identity (hostname + boot id, or TUTTI_HOSTID), the
 * physical machine (never overridden: ranks posing as several hosts still share its cores),
 * NUMA node and CPUs of its binding, GPU PCI bus id, nearest NIC. Records are all-gathered
 * at init; tt_topo_derive() turns them into the same answer on every rank.
 */
#ifndef TT_TOPO_H
#define TT_TOPO_H

#include "tutti.h"

#include <stdint.h>

#define TT_CPUMASK_WORDS 16 /* CPUs 0..1023 in rank records */

struct tt_rank_info {
    uint64_t host_hash;    /* node identity: TUTTI_HOSTID, or hostname + boot id */
    uint64_t machine_hash; /* the physical machine: hostname + boot id */
    int32_t pid;
    int32_t local_rank_hint; /* from the launcher, -1 if none */
    int32_t numa;            /* NUMA node of the binding, -1 unknown */
    int32_t ncpus;           /* CPUs this process may run on */
    int32_t machine_cpus;    /* CPUs of the machine */
    int32_t shm_mib;         /* size of /dev/shm in MiB, 0 if unknown */
    uint32_t picks;          /* the measured choices' knobs, as comm_init.c encodes them */
    uint32_t net_copy_kib;   /* TUTTI_NET_COPY_MSG in KiB, 0 under TUTTI_NET_DIRECT=0 */
    char host[64];           /* name shown in messages (TUTTI_HOSTID if set) */
    char cpuset[48];         /* "0-1" */
    char gpu_bus[16];        /* "0000:3b:00.0", "" if none */
    char nic[32];            /* nearest network interface, "" if none */
    char
        hca[32]; /* verbs HCA port this rank uses ("mlx5_0:1"), "" if none (transport/registry.c) */
    char cuda_bus[16]; /* PCI bus id of this rank's current CUDA device, "" if none or the
                        * device path is off (cuda_dev.c) */
    uint64_t cpumask[TT_CPUMASK_WORDS]; /* CPUs this process may run on (0..1023) */
};

struct tt_topo {
    int nranks;
    int nnodes;
    int *node_of;      /* node index of each rank (nodes numbered by their lowest rank) */
    int *local_of;     /* index of each rank within its node */
    int *node_size;    /* ranks on each node */
    int *ring;         /* ring order: nodes in turn, within a node by NUMA node, then rank */
    int uniform;       /* every node has the same number of ranks */
    int machine_ranks; /* ranks on this rank's physical machine */
    /* CPUs those ranks may run on together (the union of their affinity masks): ranks bound
     * one per core (Slurm, mpirun --bind-to core, tutti-run --bind) see one CPU each, yet do
     * not outnumber the cores */
    int machine_cores;
};

/* Fill this rank's record. */
tutti_result_t tt_topo_self(struct tt_rank_info *me, int local_rank_hint, int rank);

/* Derive the layout from every rank's record (identical on every rank). */
tutti_result_t tt_topo_derive(const struct tt_rank_info *all, int nranks, int me,
                              struct tt_topo *t);

void tt_topo_free(struct tt_topo *t);

/*
 * Print the machine (from hwloc: packages, NUMA nodes, cores, PCI devices), for tutti-topo.
 * xml: a TUTTI_TOPO_FILE-style path, or NULL for TUTTI_TOPO_FILE / the live machine.
 */
tutti_result_t tt_topo_print_machine(FILE *out, const char *xml);

#endif
