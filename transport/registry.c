/*
 * registry.c -- every transport this build has, and the choices made from them (transport.h):
 * which one joins two ranks (the cheapest that can, among those TUTTI_TRANSPORTS allows), a
 * rank to itself, the device path's, this rank's HCA port for verbs, and forgetting a
 * registration everywhere. The only file outside a transport's own that knows which were
 * built.
 */
#include "transport/transport.h"
#include "lib/base/config.h"
#include "lib/topo/topo.h"

#include "tutti_build.h"
#if TUTTI_HAVE_IBVERBS
#include "transport/net_ib.h"
#endif

#include <stdio.h>
#include <string.h>

/* The transports that may join two ranks. */
static const struct tt_transport *const between[] = {
    &tt_transport_shm,
#if TUTTI_HAVE_IBVERBS
    &tt_transport_ib,
#endif
    &tt_transport_socket,
};
#define NBETWEEN (sizeof(between) / sizeof(between[0]))

int tt_transport_allowed(const struct tt_transport *tp)
{
    const char *spec = tt_env_str("TUTTI_TRANSPORTS");
    const char *list = spec[0] == '^' ? spec + 1 : spec;
    int listed = 0;
    char buf[128];

    if (!*spec)
        return 1;
    snprintf(buf, sizeof(buf), "%s", list);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save))
        listed |= strcmp(t + (spec[0] == '^' && *t == '^'), tp->name) == 0; /* ^shm,^socket */
    return spec[0] == '^' ? !listed : listed;
}

const struct tt_transport *tt_transport_between(const struct tt_rank_info *a,
                                                const struct tt_rank_info *b)
{
    const struct tt_transport *best = NULL;

    for (size_t i = 0; i < NBETWEEN; i++) {
        const struct tt_transport *tp = between[i];
        if (tp->joins && tp->joins(a, b) && (!best || tp->cost < best->cost) &&
            tt_transport_allowed(tp))
            best = tp;
    }
    return best;
}

const struct tt_transport *tt_transport_self(void)
{
    return &tt_transport_mem;
}

const struct tt_transport *tt_transport_device(void)
{
#if TUTTI_HAVE_CUDA
    return &tt_transport_p2p;
#else
    return NULL;
#endif
}

void tt_transport_probe_hca(const char *nic, int local_rank_hint, char *hca, size_t hca_size,
                            char *why, size_t why_size)
{
    hca[0] = '\0';
#if TUTTI_HAVE_IBVERBS
    if (!tt_transport_allowed(&tt_transport_ib)) {
        snprintf(why, why_size, "TUTTI_TRANSPORTS='%s' excludes %s", tt_env_str("TUTTI_TRANSPORTS"),
                 tt_transport_ib.name);
        return;
    }
    if (tt_ib_probe(nic, local_rank_hint, hca, hca_size, why, why_size))
        why[0] = '\0';
#else
    (void)nic, (void)local_rank_hint, (void)hca_size;
    snprintf(why, why_size, "this libtutti was built without verbs headers");
#endif
}

void tt_transport_unregister(struct tt_memreg *reg)
{
    for (size_t i = 0; i < NBETWEEN; i++)
        if (between[i]->unregister)
            between[i]->unregister(reg);
}
