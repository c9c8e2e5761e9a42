/*
 * connect.c -- a communicator's connections: which transport joins two ranks (the registry's
 * choice, transport/registry.c: shm on one host, net_ib where both have an HCA port, else
 * sockets; TUTTI_TRANSPORTS narrows it), and
 * making connections: the ring's at init, the rest when a plan first needs them, the device
 * path's mesh at init.
 */
#include "lib/core/comm.h"
#include "lib/base/config.h"
#include "lib/cuda/cuda.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/base/wait.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Name of the interface that holds addr ("?" if none does). */
static void iface_of(const struct tt_addr *addr, char *name, size_t size)
{
    struct ifaddrs *ifs;

    snprintf(name, size, "?");
    if (getifaddrs(&ifs) != 0)
        return;
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != addr->ss.ss_family)
            continue;
        if ((addr->ss.ss_family == AF_INET &&
             memcmp(&((struct sockaddr_in *)i->ifa_addr)->sin_addr,
                    &((const struct sockaddr_in *)&addr->ss)->sin_addr, 4) == 0) ||
            (addr->ss.ss_family == AF_INET6 &&
             memcmp(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr,
                    &((const struct sockaddr_in6 *)&addr->ss)->sin6_addr, 16) == 0)) {
            snprintf(name, size, "%s", i->ifa_name);
            break;
        }
    }
    freeifaddrs(ifs);
}

/* The transport rank a uses to reach rank b (the registry's choice), NULL if none may. */
static const struct tt_transport *transport_between(const struct tutti_comm *c, int a, int b)
{
    return a == b ? tt_transport_self() : tt_transport_between(&c->peers[a], &c->peers[b]);
}

const char *tt_comm_transport_name(const struct tutti_comm *c, int a, int b)
{
    const struct tt_transport *tp = transport_between(c, a, b);
    return tp ? tp->name : "none";
}

const struct tt_transport *tt_comm_transport(const struct tutti_comm *c, int peer)
{
    return c->tp_of[peer] ? c->tp_of[peer] : transport_between(c, c->rank, peer);
}

static tutti_result_t pick_transport(struct tutti_comm *c, int peer)
{
    const struct tt_transport *tp;

    if (c->tp_of[peer])
        return TUTTI_SUCCESS;
    tp = transport_between(c, c->rank, peer);
    if (!tp)
        return tt_fail(c, TUTTI_ERR_UNSUPPORTED,
                       "no transport from rank %d (host %s) to rank %d (host %s): "
                       "TUTTI_TRANSPORTS='%s' excludes every one that could connect them",
                       c->rank, c->peers[c->rank].host, peer, c->peers[peer].host,
                       tt_env_str("TUTTI_TRANSPORTS"));
    if (tp->describe && !c->net_logged) { /* the first connection over the network */
        char buf[80], ifname[IF_NAMESIZE + 1], why[400] = "", how[80];
        tp->describe(how, sizeof(how));
        if (tp->hca) {
            TT_INFO(TT_SUB_IB, "rank %d: network transport %s on HCA port %s, %s", c->rank,
                    tp->name, c->peers[c->rank].hca, how);
        } else {
            iface_of(tt_boot_self_addr(c->boot), ifname, sizeof(ifname));
            if (c->ib_why[0])
                snprintf(why, sizeof(why), " (no InfiniBand/RoCE: %s)", c->ib_why);
            else if (!c->peers[peer].hca[0])
                snprintf(why, sizeof(why), " (rank %d on host %s has no InfiniBand/RoCE port)",
                         peer, c->peers[peer].host);
            TT_INFO(TT_SUB_NET, "rank %d: network transport %s on interface %s (%s), %s%s", c->rank,
                    tp->name, ifname, tt_addr_str(tt_boot_self_addr(c->boot), buf, sizeof(buf)),
                    how, why);
        }
        c->net_logged = 1;
    }
    c->tp_of[peer] = tp;
    TT_INFO(TT_SUB_INIT, "rank %d -> rank %d (host %s): transport %s", c->rank, peer,
            c->peers[peer].host, tp->name);
    return TUTTI_SUCCESS;
}

/* The transport of a connection to peer: the device path's p2p, or the peer's own. */
static tutti_result_t transport_for(struct tutti_comm *c, int device, int peer,
                                    const struct tt_transport **tp)
{
    if (device) {
        *tp = tt_transport_device();
        return *tp ? TUTTI_SUCCESS
                   : tt_fail(c, TUTTI_ERR_UNSUPPORTED, "the device path: built without CUDA");
    }
    TT_CHECK(pick_transport(c, peer));
    *tp = c->tp_of[peer];
    return TUTTI_SUCCESS;
}

struct link {
    int peer;
    int channel;
};

/* A receiver waiting for its sender to connect stops waiting when the sender's process has
 * exited (on this machine), a rank has said over bootstrap that it gave up, or comm is aborted:
 * not at TUTTI_TIMEOUT. */
static int sender_gone(void *arg, int peer)
{
    struct tutti_comm *c = arg;
    char why[512];

    if (__atomic_load_n(&c->abort_flag, __ATOMIC_ACQUIRE))
        return 1;
    if (tt_comm_peer_exited(c, peer))
        return 1;
    return tt_boot_told(c->boot, 0, why, sizeof(why)) >= 0;
}

/* Blobs travel as a 4-byte length and a fixed-size body, so receivers know the size. */
#define WIRE_BLOB (4 + TT_BLOB_MAX)

/*
 * Set up connections: first every receive side (blob to the sender), then every send side
 * (blob from the receiver). Bootstrap sends do not wait for the peer's receive, so ranks
 * meet no matter in which order they list their links.
 */
static tutti_result_t connect_links(struct tutti_comm *c, int device, const struct link *recvs,
                                    int nrecv, const struct link *sends, int nsend)
{
    struct tt_transport_ctx ctx = {.rank = c->rank,
                                   .nranks = c->nranks,
                                   .job_tag = c->job_tag,
                                   .slot_bytes = device ? c->cuda.slot_bytes : c->slot_bytes,
                                   .msg_max = device ? 0 : c->net_copy_bytes,
                                   .nslots = c->nslots,
                                   .sleepy = c->sleepy,
                                   .pids = c->pids,
                                   .net_addr = tt_boot_self_addr(c->boot),
                                   .timeout_s = c->timeout_s,
                                   .cuda_stream = c->cuda.stream};
    struct tt_exec_conns *tab = device ? &c->cuda.conns : &c->conns;
    uint32_t tag = device ? TT_TAG_DCONN : TT_TAG_CONN;
    unsigned char wire[WIRE_BLOB];
    size_t idx;

    for (int i = 0; i < nrecv; i++) {
        int p = recvs[i].peer, ch = recvs[i].channel;
        const struct tt_transport *tp;
        size_t len = 0;

        idx = (size_t)ch * (size_t)c->nranks + (size_t)p;
        if (tab->recv[idx])
            continue;
        TT_CHECK(transport_for(c, device, p, &tp));
        memset(wire, 0, sizeof(wire));
        TT_CHECK(tp->recv_setup(&ctx, p, ch, wire + 4, &len, &tab->recv[idx]));
        tab->recv[idx]->gone = sender_gone;
        tab->recv[idx]->gone_arg = c;
        tt_put32(wire, (uint32_t)len);
        TT_CHECK(tt_boot_send(c->boot, p, tag + (uint32_t)ch, wire, sizeof(wire)));
    }
    for (int i = 0; i < nsend; i++) {
        int p = sends[i].peer, ch = sends[i].channel;
        const struct tt_transport *tp;
        uint32_t len;

        idx = (size_t)ch * (size_t)c->nranks + (size_t)p;
        if (tab->send[idx])
            continue;
        TT_CHECK(transport_for(c, device, p, &tp));
        TT_CHECK(tt_boot_recv(c->boot, p, tag + (uint32_t)ch, wire, sizeof(wire)));
        len = tt_get32(wire);
        if (len > TT_BLOB_MAX)
            return tt_fail(c, TUTTI_ERR_REMOTE, "rank %d sent a %u-byte connection blob", p, len);
        TT_CHECK(tp->send_connect(&ctx, p, ch, wire + 4, len, &tab->send[idx]));
    }
    /* Every sender has connected (or is about to): receivers complete their side. */
    for (int i = 0; i < nrecv; i++) {
        struct tt_conn *conn =
            tab->recv[(size_t)recvs[i].channel * (size_t)c->nranks + (size_t)recvs[i].peer];
        TT_CHECK(conn->tp->finish(conn, tt_now() + c->timeout_s));
    }
    return TUTTI_SUCCESS;
}

/* Add (peer, channel) to a list unless it is there already. */
static int link_add(struct link *list, int n, int peer, int channel)
{
    for (int i = 0; i < n; i++)
        if (list[i].peer == peer && list[i].channel == channel)
            return n;
    list[n] = (struct link){peer, channel};
    return n + 1;
}

tutti_result_t tt_comm_connect_plan(struct tutti_comm *c, const struct tt_plan *p, int device)
{
    struct tt_exec_conns *tab = device ? &c->cuda.conns : &c->conns;
    struct link *recvs = NULL, *sends = NULL;
    int nr = 0, ns = 0;
    tutti_result_t rc;

    for (size_t i = 0, lane = 0; i < p->nsteps; i++) {
        const struct tt_step *s = &p->steps[i];
        size_t base;
        while (i >= p->lanes[lane].first + p->lanes[lane].nsteps)
            lane++;
        base = (size_t)p->lanes[lane].channel * (size_t)c->nranks;
        if ((tt_prim_sends(s->prim) && !tab->send[base + (size_t)s->send_peer]) ||
            (tt_prim_recvs(s->prim) && !tab->recv[base + (size_t)s->recv_peer])) {
            if (!recvs) {
                recvs = malloc(p->nsteps * sizeof(*recvs));
                sends = malloc(p->nsteps * sizeof(*sends));
                if (!recvs || !sends) {
                    free(recvs);
                    free(sends);
                    return tt_fail(c, TUTTI_ERR_SYSTEM, "out of memory connecting peers");
                }
            }
            if (tt_prim_sends(s->prim) && !tab->send[base + (size_t)s->send_peer])
                ns = link_add(sends, ns, s->send_peer, p->lanes[lane].channel);
            if (tt_prim_recvs(s->prim) && !tab->recv[base + (size_t)s->recv_peer])
                nr = link_add(recvs, nr, s->recv_peer, p->lanes[lane].channel);
        }
    }
    if (!recvs)
        return TUTTI_SUCCESS;
    rc = connect_links(c, device, recvs, nr, sends, ns);
    free(recvs);
    free(sends);
    return rc;
}

/*
 * The device path sets up everything at init (cuda_dev.c says why: nothing that may wait
 * for the whole GPU can run once a collective holds a CUDA stream): its stream, its kernels
 * loaded, and a p2p connection to every other rank on every channel, and to this rank itself
 * where the tuner may pick an algorithm that sends to it (det, flat).
 */
tutti_result_t tt_comm_connect_device_mesh(struct tutti_comm *c, tutti_result_t prepared)
{
    int nch = c->cuda.conns.nchannels, n = 0, self = tt_tune_may_send_to_self(&c->tuner);
    struct link *links = malloc((size_t)c->nranks * (size_t)nch * sizeof(*links));
    tutti_result_t rc;

    if (!links)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "out of memory connecting the device path");
    rc = prepared;
    for (int ch = 0; ch < nch; ch++)
        for (int p = 0; p < c->nranks; p++)
            if (p != c->rank || self)
                links[n++] = (struct link){p, ch};
    if (rc == TUTTI_SUCCESS)
        rc = connect_links(c, 1, links, n, links, n);
    free(links);
    if (rc != TUTTI_SUCCESS)
        return tt_fail(NULL, rc,
                       "setting up the device path (TUTTI_CUDA_P2P=0 stages device buffers "
                       "through the host instead): %s",
                       tt_thread_error());
    return TUTTI_SUCCESS;
}

tutti_result_t tt_comm_connect_ring(struct tutti_comm *c, int prev, int next)
{
    struct link recvs[32], sends[32];

    for (int ch = 0; ch < c->nchannels; ch++) {
        recvs[ch] = (struct link){prev, ch};
        sends[ch] = (struct link){next, ch};
    }
    return connect_links(c, 0, recvs, c->nchannels, sends, c->nchannels);
}
