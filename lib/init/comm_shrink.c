/*
 * comm_shrink.c -- tutti_comm_shrink: the surviving ranks of a communicator agree on which
 * ranks are gone and make a communicator of the others, in their old order;
 * tutti_comm_failed_ranks.
 *
 * It runs over the communicator's bootstrap network, whose listeners outlive a failure of the
 * data connections, with boot_ft.c's sends (a gone peer is a result there, not a failure).
 * A rank is found dead when its process has exited (ranks on this machine), its bootstrap
 * connection was closed at its end, or a send to it is refused; it is found silent when it
 * sends nothing for TUTTI_SHRINK_TIMEOUT (stopped, hung, or not calling tutti_comm_shrink).
 *
 * 1. Hello: each rank makes the listener of the new communicator's bootstrap, sends its
 *    address to every rank not found dead, and waits for every other rank's hello or for the
 *    rank to be found dead or silent. The ranks heard from, and itself, are its proposal.
 * 2. Agreement, a round per rank in rank order (the rotating coordinator of consensus with a
 *    failure detector): in round r, rank r drops from its proposal the ranks it has found
 *    dead or silent and sends the proposal, with the members' addresses, to every rank not
 *    found dead; every other rank waits for it and adopts it, or finds r dead or silent and
 *    keeps its own. Once a coordinator that no survivor finds gone has sent, every survivor
 *    holds its proposal, and the coordinators after it send that same proposal: every survivor
 *    decides the same membership, whatever failures each of them saw. A silent rank was sent
 *    every proposal too: when it resumes and calls tutti_comm_shrink it reads them, decides the
 *    same membership, finds itself outside it and is fenced (TUTTI_ERR_FENCED).
 * 3. Build: the members join a bootstrap over the agreed addresses (no rendezvous), with a
 *    secret derived from the old one, the attempt and the membership, so a fenced rank can
 *    neither connect nor collide with the new communicator's shared-memory names. A member that
 *    fails while the communicator is made fails it on every member; they agree again, over the
 *    new bootstrap (which every member holds), without it.
 */
#include "lib/base/config.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/base/wait.h"
#include "lib/core/comm.h"
#include "lib/init/comm_init.h"

#include "transport/transport.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ALIVE, DEAD, SILENT };

#define HELLO_LEN (8 + TT_ADDR_PACKED)

/* One attempt: the communicator being shrunk (the caller's, or the one an earlier attempt
 * failed to make) and what this rank knows of its ranks. */
struct shrink {
    struct tutti_comm *comm; /* what tutti_comm_shrink was called on */
    double quiet_s;          /* TUTTI_SHRINK_TIMEOUT */
    struct tt_boot *boot;    /* this attempt's bootstrap */
    int rank, n;
    int *orig; /* each rank's rank in comm */
    unsigned char secret[TT_SECRET_BYTES];
    struct tt_boot *next; /* the listener of the communicator being made */
    char *state;          /* ALIVE, DEAD, SILENT */
    unsigned char *est;   /* the proposal: 1 for a member */
    struct tt_addr *addr; /* each rank's next listener, where known */
    unsigned char *known;
    unsigned char *msg; /* a proposal as sent */
    size_t msg_cap;
};

static const char *why_gone(int state)
{
    return state == DEAD ? "found dead" : "silent for TUTTI_SHRINK_TIMEOUT";
}

/* Has rank k of this attempt failed, as far as this rank can see without asking it? */
static int found_dead(struct shrink *s, int k)
{
    if (k == s->rank)
        return 0;
    if (s->state[k] == DEAD || tt_comm_peer_exited(s->comm, s->orig[k]))
        return 1;
    return tt_boot_ft_gone(s->boot, k);
}

static void mark(struct shrink *s, int k, int state)
{
    if (s->state[k] != ALIVE)
        return;
    s->state[k] = (char)state;
    TT_INFO(TT_SUB_INIT, "tutti_comm_shrink: rank %d of %d %s", s->orig[k], s->comm->nranks,
            why_gone(state));
}

/* Send to k unless it is found dead; a refusal or a reset marks it dead. */
static void send_to(struct shrink *s, int k, uint32_t tag, const void *data, size_t len)
{
    tutti_result_t rc;

    if (k == s->rank || s->state[k] == DEAD || found_dead(s, k)) {
        if (k != s->rank)
            mark(s, k, DEAD);
        return;
    }
    rc = tt_boot_ft_send(s->boot, k, tag, data, len, tt_now() + s->quiet_s);
    if (rc == TUTTI_ERR_REMOTE)
        mark(s, k, DEAD);
    else if (rc != TUTTI_SUCCESS)
        mark(s, k, SILENT);
}

/* Wait for a message of tag from k (1, its bytes in buf, up to cap), or until k is found
 * dead or silent for quiet_s (0). */
static int wait_for(struct shrink *s, int k, uint32_t tag, void *buf, size_t cap, size_t *len)
{
    double since = tt_now();

    for (;;) {
        /* What k sent counts even where k has since been found gone (it sent before). */
        if (tt_boot_ft_take(s->boot, k, tag, buf, cap, len))
            return 1;
        if (s->state[k] != ALIVE)
            return 0;
        if (found_dead(s, k)) { /* (what it sent before it went has been read now) */
            if (tt_boot_ft_take(s->boot, k, tag, buf, cap, len))
                return 1;
            mark(s, k, DEAD);
            return 0;
        }
        if (tt_now() - since > s->quiet_s) {
            mark(s, k, SILENT);
            return 0;
        }
        tt_boot_ft_wait(s->boot, 0.02);
    }
}

static void hello(struct shrink *s)
{
    unsigned char msg[HELLO_LEN], in[HELLO_LEN];
    size_t len;

    memcpy(msg, "TTSH", 4);
    tt_put32(msg + 4, (uint32_t)s->n);
    tt_addr_pack(tt_boot_self_addr(s->next), msg + 8);
    s->addr[s->rank] = *tt_boot_self_addr(s->next);
    s->known[s->rank] = 1;
    for (int k = 0; k < s->n; k++)
        send_to(s, k, TT_TAG_SHRINK, msg, sizeof(msg));
    for (int k = 0; k < s->n; k++) {
        if (k == s->rank || !wait_for(s, k, TT_TAG_SHRINK, in, sizeof(in), &len))
            continue;
        if (len != sizeof(in) || memcmp(in, "TTSH", 4) != 0 || tt_get32(in + 4) != (uint32_t)s->n ||
            tt_addr_unpack(in + 8, &s->addr[k]) != 0) {
            TT_WARN(TT_SUB_INIT, "tutti_comm_shrink: a malformed hello from rank %d", s->orig[k]);
            mark(s, k, SILENT);
            continue;
        }
        s->known[k] = 1;
    }
    for (int k = 0; k < s->n; k++)
        s->est[k] = k == s->rank || (s->state[k] == ALIVE && s->known[k]);
}

/* The proposal as sent: "TTSE", n, a flag per rank, then each member's address. */
static size_t pack(struct shrink *s)
{
    size_t off = 8 + (size_t)s->n;

    memcpy(s->msg, "TTSE", 4);
    tt_put32(s->msg + 4, (uint32_t)s->n);
    memcpy(s->msg + 8, s->est, (size_t)s->n);
    for (int k = 0; k < s->n; k++)
        if (s->est[k]) {
            tt_addr_pack(&s->addr[k], s->msg + off);
            off += TT_ADDR_PACKED;
        }
    return off;
}

static int adopt(struct shrink *s, const unsigned char *m, size_t len)
{
    size_t off = 8 + (size_t)s->n;
    struct tt_addr a;

    if (len < off || len > s->msg_cap || memcmp(m, "TTSE", 4) != 0 ||
        tt_get32(m + 4) != (uint32_t)s->n)
        return -1;
    for (int k = 0; k < s->n; k++)
        if (m[8 + k]) {
            if (len < off + TT_ADDR_PACKED || tt_addr_unpack(m + off, &a) != 0)
                return -1;
            off += TT_ADDR_PACKED;
        }
    off = 8 + (size_t)s->n;
    for (int k = 0; k < s->n; k++) {
        s->est[k] = m[8 + k] != 0;
        if (s->est[k]) {
            tt_addr_unpack(m + off, &s->addr[k]);
            s->known[k] = 1;
            off += TT_ADDR_PACKED;
        }
    }
    return 0;
}

static void agree(struct shrink *s)
{
    size_t len;

    for (int r = 0; r < s->n; r++) {
        if (r == s->rank) {
            for (int k = 0; k < s->n; k++)
                if (k != s->rank && (s->state[k] != ALIVE || found_dead(s, k))) {
                    mark(s, k, DEAD);
                    s->est[k] = 0;
                }
            len = pack(s);
            for (int k = 0; k < s->n; k++)
                send_to(s, k, TT_TAG_SHRINK + 1, s->msg, len);
            continue;
        }
        if (wait_for(s, r, TT_TAG_SHRINK + 1, s->msg, s->msg_cap, &len) &&
            adopt(s, s->msg, len) != 0) {
            TT_WARN(TT_SUB_INIT, "tutti_comm_shrink: a malformed proposal from rank %d",
                    s->orig[r]);
            mark(s, r, SILENT);
        }
    }
}

static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The new communicator's secret: the old one's and the membership, mixed. Not the attempt:
 * members that made the communicator and members that failed to (a rank died inside its last
 * barrier) then shrink it alike, the first calling tutti_comm_shrink on it, the others
 * agreeing again over its bootstrap, and reach the same communicator. */
static void derive_secret(const struct shrink *s, unsigned char *out)
{
    uint64_t h = mix64((uint64_t)s->n);

    for (int k = 0; k < s->n; k++)
        h = mix64(h ^ (uint64_t)(s->est[k] ? k + 1 : 0) << 1);
    for (int w = 0; w < TT_SECRET_BYTES / 8; w++) {
        uint64_t v = 0;
        for (int i = 0; i < TT_SECRET_BYTES; i++)
            v = mix64(v ^ s->secret[i] ^ (uint64_t)w << 8 ^ h);
        h = mix64(h ^ v);
        memcpy(out + 8 * w, &v, 8);
    }
}

static void attempt_free(struct shrink *s)
{
    free(s->state);
    free(s->est);
    free(s->addr);
    free(s->known);
    free(s->msg);
    s->state = NULL;
    s->est = s->known = s->msg = NULL;
    s->addr = NULL;
}

static tutti_result_t attempt_alloc(struct shrink *s)
{
    s->msg_cap = 8 + (size_t)s->n * (1 + TT_ADDR_PACKED);
    s->state = calloc((size_t)s->n, 1);
    s->est = calloc((size_t)s->n, 1);
    s->addr = calloc((size_t)s->n, sizeof(*s->addr));
    s->known = calloc((size_t)s->n, 1);
    s->msg = malloc(s->msg_cap);
    if (!s->state || !s->est || !s->addr || !s->known || !s->msg)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "out of memory for %d ranks", s->n);
    return TUTTI_SUCCESS;
}

/*
 * The FIFO names that two failed ranks of one node made for each other: nobody else would
 * remove them (a receiver removes its own when it closes, a sender at destroy the ones made
 * for it that it never attached to; tutti-run removes everything at the job's end, a job
 * started otherwise would keep them). Every survivor does it for every node, its own or not:
 * a node whose ranks all failed has nobody left to do it, and on another host the names are
 * not in this host's /dev/shm, so the unlinks find nothing (nodes emulated on one host with
 * TUTTI_HOSTID share it). A few unlinks per pair of failed ranks.
 */
static void unlink_between_failed(struct tutti_comm *c)
{
    char name[160];

    for (int a = 0; a < c->nranks; a++) {
        if (!c->shrink_failed[a])
            continue;
        for (int b = 0; b < c->nranks; b++) {
            if (a == b || !c->shrink_failed[b] || c->topo.node_of[a] != c->topo.node_of[b])
                continue;
            for (int ch = 0; ch < c->conns.nchannels; ch++) {
                tt_shm_name(name, sizeof(name), c->job_tag, a, b, ch);
                tt_shm_unlink(name);
            }
        }
    }
}

/* One attempt: agree, then make the communicator of the members. On a failure to make it,
 * *again is set and s describes the next attempt (over the bootstrap just made). */
static tutti_result_t attempt(struct shrink *s, tutti_comm_t *newcomm, const tutti_config_t *config,
                              int *again)
{
    unsigned char secret[TT_SECRET_BYTES];
    struct tt_addr *addrs;
    int *orig, n = 0, me = -1;
    tutti_result_t rc;

    *again = 0;
    TT_CHECK(attempt_alloc(s));
    TT_CHECK(tt_boot_open(tt_boot_self_addr(s->boot), s->quiet_s, &s->next));
    hello(s);
    agree(s);
    for (int k = 0; k < s->n; k++) {
        if (k == s->rank && s->est[k])
            me = n;
        n += s->est[k];
        s->comm->shrink_failed[s->orig[k]] = !s->est[k];
    }
    if (me < 0)
        return tt_fail(NULL, TUTTI_ERR_FENCED,
                       "this rank was fenced out: the other ranks agreed on a communicator of %d "
                       "without it (it was silent for TUTTI_SHRINK_TIMEOUT=%g s, or found "
                       "failed, while they shrank)",
                       n, s->quiet_s);
    addrs = calloc((size_t)n, sizeof(*addrs));
    orig = calloc((size_t)n, sizeof(*orig));
    if (!addrs || !orig) {
        free(addrs);
        free(orig);
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "out of memory for %d ranks", n);
    }
    n = 0;
    for (int k = 0; k < s->n; k++)
        if (s->est[k]) {
            addrs[n] = s->addr[k];
            orig[n++] = s->orig[k];
        }
    derive_secret(s, secret);
    rc = tt_boot_join(s->next, secret, me, n, addrs);
    free(addrs);
    if (rc == TUTTI_SUCCESS)
        rc = tt_comm_init_boot(newcomm, s->next, me, n, secret, config);
    if (rc == TUTTI_SUCCESS) {
        tt_boot_set_timeout((*newcomm)->boot, (*newcomm)->timeout_s);
        unlink_between_failed(s->comm);
        s->next = NULL;
        free(orig);
        return TUTTI_SUCCESS;
    }
    TT_INFO(TT_SUB_INIT,
            "tutti_comm_shrink: making the communicator of %d failed (%s); agreeing again", n,
            tt_thread_error());
    /* The next attempt shrinks the communicator that failed to be made. */
    if (s->boot != s->comm->boot)
        tt_boot_close(s->boot);
    s->boot = s->next;
    s->next = NULL;
    s->rank = me;
    s->n = n;
    free(s->orig);
    s->orig = orig;
    memcpy(s->secret, secret, sizeof(secret));
    attempt_free(s);
    *again = 1;
    return rc;
}

static tutti_result_t shrink(struct tutti_comm *comm, tutti_comm_t *newcomm,
                             const tutti_config_t *config)
{
    struct shrink s = {.comm = comm, .boot = comm->boot, .rank = comm->rank, .n = comm->nranks};
    tutti_config_t inherit = TUTTI_CONFIG_INIT;
    tutti_result_t rc = TUTTI_SUCCESS;
    int again = 1;

    s.quiet_s = tt_env_double("TUTTI_SHRINK_TIMEOUT");
    s.orig = malloc((size_t)comm->nranks * sizeof(*s.orig));
    if (!s.orig)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "out of memory");
    for (int k = 0; k < comm->nranks; k++)
        s.orig[k] = k;
    memcpy(s.secret, comm->secret, sizeof(s.secret));
    if (!config) { /* the old communicator's settings */
        inherit.timeout_s = comm->timeout_s;
        inherit.nchannels = comm->nchannels;
        config = &inherit;
    }
    /* Each attempt after the first leaves out a rank that failed in the one before. */
    for (int tries = 0; again && tries <= comm->nranks; tries++)
        rc = attempt(&s, newcomm, config, &again);
    if (s.next)
        tt_boot_close(s.next);
    if (s.boot != comm->boot)
        tt_boot_close(s.boot);
    attempt_free(&s);
    free(s.orig);
    return rc;
}

tutti_result_t tutti_comm_shrink(tutti_comm_t comm, tutti_comm_t *newcomm,
                                 const tutti_config_t *config)
{
    double t0 = tt_now();
    tutti_result_t rc;
    int nranks, failed = 0;

    TT_CHECK(tt_comm_check(comm, "tutti_comm_shrink"));
    if (!newcomm)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "tutti_comm_shrink: newcomm is NULL");
    *newcomm = NULL;
    if (comm->shrink_called)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                       "tutti_comm_shrink: comm was shrunk already (once per communicator: "
                       "shrink the communicator that call made)");
    if (!comm->boot)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG,
                       "tutti_comm_shrink: comm has no bootstrap network (a communicator of "
                       "one rank in this process cannot lose a rank)");
    comm->shrink_called = 1;
    comm->shrink_failed = calloc((size_t)comm->nranks, 1);
    if (!comm->shrink_failed)
        return tt_fail(comm, TUTTI_ERR_SYSTEM, "tutti_comm_shrink: out of memory");
    /* Work queued on streams ends first (failed, if comm has failed): none is left behind. */
    tt_comm_wait_idle(comm);
    pthread_mutex_lock(&comm->run_lock);
    rc = shrink(comm, newcomm, config);
    pthread_mutex_unlock(&comm->run_lock);
    if (rc != TUTTI_SUCCESS)
        return tt_fail(comm, rc, "tutti_comm_shrink: rank %d of %d: %s", comm->rank, comm->nranks,
                       tt_thread_error());
    tutti_comm_size(*newcomm, &nranks);
    for (int k = 0; k < comm->nranks; k++)
        failed += comm->shrink_failed[k];
    TT_INFO(TT_SUB_INIT,
            "tutti_comm_shrink: rank %d of %d is rank %d of %d (%d rank(s) gone) after %.3f s",
            comm->rank, comm->nranks, (*newcomm)->rank, nranks, failed, tt_now() - t0);
    return TUTTI_SUCCESS;
}

tutti_result_t tutti_comm_failed_ranks(tutti_comm_t comm, int *ranks, int size, int *count)
{
    int n = 0;

    TT_CHECK(tt_comm_check(comm, "tutti_comm_failed_ranks"));
    if (!count || (size > 0 && !ranks) || size < 0)
        return tt_fail(comm, TUTTI_ERR_INVALID_ARG, "tutti_comm_failed_ranks: %s",
                       !count     ? "count is NULL"
                       : size < 0 ? "size is negative"
                                  : "ranks is NULL with size > 0");
    for (int r = 0; r < comm->nranks; r++) {
        int gone;
        if (comm->shrink_failed)
            gone = comm->shrink_failed[r];
        else
            gone = tt_comm_peer_exited(comm, r) ||
                   (r != comm->rank && comm->boot && tt_boot_ft_gone(comm->boot, r));
        if (gone && n < size)
            ranks[n] = r;
        n += gone;
    }
    *count = n;
    return TUTTI_SUCCESS;
}
