/*
 * env_init.c -- tutti_comm_init_env: rank, size and rendezvous from what launchers set.
 *
 * Rank/size, first complete pair wins: TUTTI_RANK/TUTTI_WORLD_SIZE (tutti-run), RANK/WORLD_SIZE
 * (torchrun), SLURM_PROCID/SLURM_NTASKS (srun), OMPI_COMM_WORLD_RANK/_SIZE (mpirun).
 * Rendezvous: TUTTI_ID; else MASTER_ADDR/MASTER_PORT with rank 0 serving; else, when the
 * launcher says every rank is on this host, 127.0.0.1 and a port derived from the job id;
 * else, under srun across nodes, the step's first node and a port derived from the step.
 */
#include "lib/boot/bootstrap.h"
#include "lib/core/comm.h"
#include "lib/init/comm_init.h"
#include "lib/base/config.h"
#include "lib/base/error.h"
#include "lib/base/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *env(const char *name)
{
    /* TUTTI_* knobs go through the table (read once, listed by tutti-run --env). */
    const char *v = strncmp(name, "TUTTI_", 6) == 0 ? tt_env_str(name) : getenv(name);
    return v && *v ? v : NULL;
}

static tutti_result_t parse_int(const char *name, const char *v, int *out)
{
    char *end;
    long x;

    errno = 0;
    x = strtol(v, &end, 10);
    if (errno || end == v || *end != '\0' || x < 0 || x > 1 << 30)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                       "tutti_comm_init_env: %s='%s' is not a "
                       "non-negative integer",
                       name, v);
    *out = (int)x;
    return TUTTI_SUCCESS;
}

static tutti_result_t rank_and_size(int *rank, int *size, int *local_rank)
{
    static const char *sets[][3] = {
        {"TUTTI_RANK", "TUTTI_WORLD_SIZE", "TUTTI_LOCAL_RANK"},
        {"RANK", "WORLD_SIZE", "LOCAL_RANK"},
        {"SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
        {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    };

    for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++) {
        const char *r = env(sets[i][0]), *s = env(sets[i][1]), *l = env(sets[i][2]);
        if (!r && !s)
            continue;
        if (!r || !s)
            return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                           "tutti_comm_init_env: %s is set but %s is not",
                           r ? sets[i][0] : sets[i][1], r ? sets[i][1] : sets[i][0]);
        TT_CHECK(parse_int(sets[i][0], r, rank));
        TT_CHECK(parse_int(sets[i][1], s, size));
        *local_rank = -1;
        if (l)
            TT_CHECK(parse_int(sets[i][2], l, local_rank));
        if (*size < 1 || *rank >= *size)
            return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                           "tutti_comm_init_env: %s=%d is out of range for %s=%d", sets[i][0],
                           *rank, sets[i][1], *size);
        return TUTTI_SUCCESS;
    }
    return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                   "tutti_comm_init_env: no rank in the environment: set TUTTI_RANK and "
                   "TUTTI_WORLD_SIZE (or run under tutti-run, torchrun, srun or mpirun)");
}

/* A 32-byte secret from a string (not cryptographic: anyone who knows the inputs has it). */
static void derive_secret(const char *text, unsigned char *secret)
{
    uint64_t h = 0x9e3779b97f4a7c15ull;

    for (int i = 0; i < TT_SECRET_BYTES; i++) {
        for (const char *p = text; *p; p++) {
            h ^= (unsigned char)*p;
            h *= 0x100000001b3ull;
        }
        h ^= h >> 29;
        h *= 0xbf58476d1ce4e5b9ull;
        secret[i] = (unsigned char)(h >> 32);
    }
}

/*
 * A rendezvous reachable from the network with a secret derived from what everyone can see
 * (address, port, rank count) admits anyone who computes it. Say so, once a host (the rank
 * that is local rank 0, or rank 0 where the launcher gives none), unless TUTTI_SECRET is set.
 * On loopback only this machine's users can reach it: nothing is said.
 */
static void warn_derived_secret(const struct tt_addr *root, int rank)
{
    const char *lr = env("TUTTI_LOCAL_RANK") ? env("TUTTI_LOCAL_RANK")
                     : env("LOCAL_RANK")     ? env("LOCAL_RANK")
                                             : env("SLURM_LOCALID");
    const struct sockaddr_in *v4 = (const struct sockaddr_in *)&root->ss;
    const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)&root->ss;
    char where[80];

    if (env("TUTTI_SECRET") || (lr ? atoi(lr) != 0 : rank != 0))
        return;
    if ((root->ss.ss_family == AF_INET && (ntohl(v4->sin_addr.s_addr) >> 24) == 127) ||
        (root->ss.ss_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr)))
        return;
    TT_WARN(TT_SUB_BOOT,
            "TUTTI_SECRET is not set: the rendezvous at %s admits ranks by a secret derived from "
            "its address, port and rank count, which anyone who can reach it can compute (a "
            "stranger could join as a rank). Set TUTTI_SECRET to the same random string on "
            "every host",
            tt_addr_str(root, where, sizeof(where)));
}

/* This Slurm step: its key ("JOB.STEP", or the job id alone), node count and node list (the
 * step's, else the job's; NULL if none). 0 when not under Slurm. */
struct slurm_step {
    char key[96];
    int nodes;
    const char *list, *list_name;
};

static int slurm_step(struct slurm_step *st)
{
    static const char *lists[] = {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"};
    const char *job = env("SLURM_JOB_ID"), *step = env("SLURM_STEP_ID");
    const char *nn =
        env("SLURM_STEP_NUM_NODES") ? env("SLURM_STEP_NUM_NODES") : env("SLURM_NNODES");

    if (!job || !nn)
        return 0;
    snprintf(st->key, sizeof(st->key), "%s%s%s", job, step ? "." : "", step ? step : "");
    st->nodes = atoi(nn);
    st->list = st->list_name = NULL;
    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]) && !st->list; i++)
        if (env(lists[i])) {
            st->list = env(lists[i]);
            st->list_name = lists[i];
        }
    return 1;
}

/* The job's key from Slurm or Open MPI when every rank is on this host, for a loopback
 * rendezvous; NULL if none. */
static const char *local_job_id(int size, struct slurm_step *st)
{
    const char *ls = env("OMPI_COMM_WORLD_LOCAL_SIZE");

    if (slurm_step(st) && st->nodes == 1)
        return st->key;
    if (ls && atoi(ls) == size) {
        if (env("OMPI_MCA_ess_base_jobid"))
            return env("OMPI_MCA_ess_base_jobid");
        if (env("PMIX_NAMESPACE"))
            return env("PMIX_NAMESPACE");
        if (env("OMPI_MCA_orte_ess_jobid"))
            return env("OMPI_MCA_orte_ess_jobid");
    }
    return NULL;
}

int tt_hostlist_first(const char *list, char *out, size_t size)
{
    size_t n = 0;

    for (const char *p = list; *p && *p != ','; p++) {
        if (*p == '[') { /* a range list: its first number, as written (zero padding kept) */
            size_t digits = 0;
            for (p++; *p >= '0' && *p <= '9'; p++, digits++) {
                if (n + 1 >= size)
                    return -1;
                out[n++] = *p;
            }
            if (!digits || (*p != '-' && *p != ',' && *p != ']'))
                return -1;
            while (*p && *p != ']')
                p++;
            if (!*p)
                return -1;
            continue;
        }
        if (*p == ']' || n + 1 >= size)
            return -1;
        out[n++] = *p;
    }
    if (n == 0)
        return -1;
    out[n] = '\0';
    return 0;
}

/* A port for key in [base, base + span). */
static int hash_port(const char *key, int base, int span)
{
    unsigned h = 2166136261u;

    for (const char *p = key; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return base + (int)(h % (unsigned)span);
}

/*
 * The loopback rendezvous port for a job: a hash of its id into the 10,000 ports below the
 * kernel's ephemeral range (ip_local_port_range; every rank on the host reads the same one),
 * so that no connection's local port can be holding it. Above the range when too little lies
 * below it.
 */
static int job_port(const char *job)
{
    int lo = 32768, hi = 60999, base, span;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");

    if (f) {
        if (fscanf(f, "%d %d", &lo, &hi) != 2 || lo < 1 || hi < lo || hi > 65535)
            lo = 32768, hi = 60999;
        fclose(f);
    }
    if (lo - 1024 >= 4096) {
        span = lo - 1024 < 10000 ? lo - 1024 : 10000;
        base = lo - span;
    } else if (65535 - hi >= 4096) {
        base = hi + 1;
        span = 65536 - base < 10000 ? 65536 - base : 10000;
    } else {
        base = 29000, span = 20000;
    }
    return hash_port(job, base, span);
}

static tutti_result_t rendezvous_from_env(int rank, int size, tutti_id_t *id)
{
    const char *s = env("TUTTI_ID"), *host = env("MASTER_ADDR"), *port_s = env("MASTER_PORT");
    const char *job, *hint = "";
    struct slurm_step st;
    struct tt_id_info info;
    char text[512], first[256], why[160];
    int port;

    if (s) {
        if (tutti_id_from_string(s, id) != TUTTI_SUCCESS)
            return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "tutti_comm_init_env: TUTTI_ID: %s",
                           tutti_last_error());
        return TUTTI_SUCCESS;
    }
    if (host || port_s) {
        if (!host || !port_s)
            return tt_fail(
                NULL, TUTTI_ERR_INVALID_ARG, "tutti_comm_init_env: %s is set but %s is not",
                host ? "MASTER_ADDR" : "MASTER_PORT", host ? "MASTER_PORT" : "MASTER_ADDR");
        TT_CHECK(parse_int("MASTER_PORT", port_s, &port));
        if (port < 1 || port > 65535)
            return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                           "tutti_comm_init_env: MASTER_PORT=%d is not a TCP port", port);
        TT_CHECK(tt_addr_resolve(host, port, &info.root));
        snprintf(text, sizeof(text), "%s|%s|%d|%d", env("TUTTI_SECRET") ? env("TUTTI_SECRET") : "",
                 host, port, size);
        warn_derived_secret(&info.root, rank);
    } else if ((job = local_job_id(size, &st)) != NULL) {
        port = job_port(job);
        TT_CHECK(tt_addr_resolve("127.0.0.1", port, &info.root));
        snprintf(text, sizeof(text), "%s|job|%s|%d", env("TUTTI_SECRET") ? env("TUTTI_SECRET") : "",
                 job, size);
        TT_INFO(TT_SUB_BOOT, "all ranks on this host: loopback rendezvous on port %d (job %s)",
                port, job);
        hint = " (the port comes from the job id; set MASTER_ADDR and MASTER_PORT to choose one)";
    } else if (env("SLURM_PROCID") && slurm_step(&st) && st.nodes > 1 && st.list) {
        /* srun across nodes: rank 0 runs on the step's first node (block and cyclic
         * distributions alike) and serves there, on a port from the step's key in the band
         * below the usual ephemeral range (the nodes' own ranges may differ). */
        if (tt_hostlist_first(st.list, first, sizeof(first)) != 0)
            return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                           "tutti_comm_init_env: %s='%s' is not a node list this library can "
                           "read; set MASTER_ADDR and MASTER_PORT",
                           st.list_name, st.list);
        port = hash_port(st.key, 22768, 10000);
        if (tt_addr_resolve(first, port, &info.root) != TUTTI_SUCCESS)
            return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                           "tutti_comm_init_env: the first node of %s, %s: %s; set MASTER_ADDR "
                           "and MASTER_PORT",
                           st.list_name, first, tutti_last_error());
        snprintf(text, sizeof(text), "%s|slurm|%s|%s|%d",
                 env("TUTTI_SECRET") ? env("TUTTI_SECRET") : "", st.key, first, size);
        warn_derived_secret(&info.root, rank);
        TT_INFO(TT_SUB_BOOT, "Slurm step %s on %d nodes: rendezvous at %s:%d, its first node",
                st.key, st.nodes, first, port);
        snprintf(why, sizeof(why),
                 " (rank 0 serves on the first node of %s, which must be its own; set "
                 "MASTER_ADDR and MASTER_PORT to choose)",
                 st.list_name);
        hint = why;
    } else {
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                       "tutti_comm_init_env: no rendezvous in the environment: set TUTTI_ID, or "
                       "MASTER_ADDR and MASTER_PORT (rank 0 listens there)");
    }
    derive_secret(text, info.secret);
    if (rank == 0) {
        struct tt_addr at = info.root;
        char buf[80];
        if (tt_boot_root_start(&at, info.secret, tt_env_double("TUTTI_TIMEOUT")) != TUTTI_SUCCESS)
            return tt_fail(NULL, TUTTI_ERR_SYSTEM,
                           "tutti_comm_init_env: rank 0 cannot serve the rendezvous at %s: "
                           "%s%s",
                           tt_addr_str(&info.root, buf, sizeof(buf)), tutti_last_error(), hint);
    }
    tt_id_encode(&info, id);
    return TUTTI_SUCCESS;
}

tutti_result_t tt_join_from_master(struct tt_id_info *svc)
{
    const char *host = env("MASTER_ADDR"), *port_s = env("MASTER_PORT");
    char text[512];
    int port;

    if (!host || !port_s)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                       "neither TUTTI_JOIN nor MASTER_ADDR and MASTER_PORT are set: newcomers join "
                       "through the job's join service (tutti-run --elastic serves one; "
                       "tutti_join_serve)");
    TT_CHECK(parse_int("MASTER_PORT", port_s, &port));
    if (port < 1 || port > 65534)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                       "MASTER_PORT=%d: the join service listens on the next port, which must be "
                       "a TCP port",
                       port);
    TT_CHECK(tt_addr_resolve(host, port + 1, &svc->root));
    snprintf(text, sizeof(text), "%s|join|%s|%d", env("TUTTI_SECRET") ? env("TUTTI_SECRET") : "",
             host, port);
    derive_secret(text, svc->secret);
    return TUTTI_SUCCESS;
}

tutti_result_t tutti_comm_init_env(tutti_comm_t *comm)
{
    tutti_config_t cfg = TUTTI_CONFIG_INIT;
    tutti_id_t id;
    int rank, size;

    tt_base_init();
    if (!comm)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "tutti_comm_init_env: comm is NULL");
    TT_CHECK(tt_env_validate("tutti_comm_init_env"));
    if (tt_env_flag("TUTTI_JOINING")) /* a newcomer (tutti-run --join, --restart) */
        return tutti_comm_join(comm, NULL);
    TT_CHECK(rank_and_size(&rank, &size, &cfg.local_rank));
    TT_CHECK(rendezvous_from_env(rank, size, &id));
    return tutti_comm_init(comm, size, &id, rank, &cfg);
}
