/*
 * tag.h -- the 32-bit tag every message carries beside its bytes (transport.h): which call of
 * the communicator it belongs to. A receiver compares it with its own call's before it reads
 * the bytes, so a message left over from a call its peer ran and it did not, or one of another
 * call its peer made in its place (another collective, count, dtype, op or root), fails the
 * call on the spot, naming both, instead of being read as data.
 *
 *   bits 31..22  the call's number mod 1024: collectives count alike on every rank (comm->seq,
 *                point-to-point batches do not count); 0 for point-to-point messages, which
 *                pair up by their order between two ranks
 *        21..19  kind: enum tt_coll (0..4), TT_TAG_P2P, TT_TAG_OWN (the library's own
 *                exchanges: TUTTI_CHECK_COLL's check, a trial's vote)
 *        18..15  dtype
 *        14..12  op (TUTTI_NUM_OPS: a premul-sum operator; 0 where the collective has none)
 *        11      refused (below)
 *        10..0   a hash of the count and the root
 * A point-to-point message has, in bits 18..0, a hash of its operation's byte count instead.
 *
 * A rank that refuses a collective for its own arguments (a buffer only it passes: NULL,
 * overlapping, host and device mixed) still runs the call's plan, without touching any buffer,
 * its messages empty and tagged "refused" with, in bits 10..8, the reason and in 7..0 its rank
 * (mod 256). A peer that receives
 * one goes on the same way (and passes the mark on): every rank's call ends at once, failing
 * on each rank that heard of the refusal, and every message of the call is consumed, so the
 * communicator stays usable and in step (exec.h poison).
 * The tag costs nothing to carry (shm: four bytes of the queue cell; sockets: of the header;
 * verbs: the write's immediate; the device path: a word beside the byte count) and one
 * comparison to check.
 */
#ifndef TT_TAG_H
#define TT_TAG_H

#include "tutti.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TT_TAG_P2P 5u
#define TT_TAG_OWN 6u
#define TT_TAG_REFUSED (1u << 11)

/* Why a rank refused its part of a call (bits 10..0 of its messages' tags). */
enum tt_refusal {
    TT_REFUSED_OTHER = 0,
    TT_REFUSED_SENDBUF_NULL,
    TT_REFUSED_RECVBUF_NULL,
    TT_REFUSED_OVERLAP,
    TT_REFUSED_MEMORY,
};

static inline uint32_t tt_tag_mix(uint64_t x)
{
    x ^= x >> 31;
    x *= 0x7fb5d329728ea185ull;
    x ^= x >> 27;
    x *= 0x81dadef4bc2dd44dull;
    return (uint32_t)(x ^ (x >> 33));
}

/* A collective (kind: enum tt_coll, or TT_TAG_OWN). */
static inline uint32_t tt_tag_call(unsigned kind, uint64_t seq, unsigned dtype, unsigned op,
                                   size_t count, int root)
{
    uint32_t h = tt_tag_mix((uint64_t)count * 0x9e3779b97f4a7c15ull ^ (uint32_t)root);
    return (uint32_t)(seq & 0x3ff) << 22 | (kind & 7u) << 19 | (dtype & 15u) << 15 |
           (op & 7u) << 12 | (h & 0x7ffu);
}

/* A point-to-point message of an operation of `bytes`. */
static inline uint32_t tt_tag_p2p(size_t bytes)
{
    return TT_TAG_P2P << 19 | (tt_tag_mix(bytes) & 0x7ffffu);
}

/* The tag of the messages of a call of tag `tag` that rank `who` refused for reason `why`. */
static inline uint32_t tt_tag_refused(uint32_t tag, unsigned why, int who)
{
    return (tag & ~0xfffu) | TT_TAG_REFUSED | (why & 7u) << 8 | ((unsigned)who & 0xffu);
}

static inline unsigned tt_tag_refusal(uint32_t tag)
{
    return tag >> 8 & 7u;
}

/* The refusing rank a refused message names, mod 256 (exact up to 256 ranks). */
static inline int tt_tag_refuser(uint32_t tag)
{
    return (int)(tag & 0xffu);
}

/* Is `got` a refused rank's message of the call whose tag is `want`? */
static inline int tt_tag_refuses(uint32_t got, uint32_t want)
{
    return (got & TT_TAG_REFUSED) && (got & ~0xfffu) == (want & ~0xfffu) &&
           (want >> 19 & 7u) != TT_TAG_P2P;
}

/* "its recvbuf is NULL", for a refusal's reason. */
const char *tt_refusal_text(unsigned why);

static inline unsigned tt_tag_kind(uint32_t tag)
{
    return tag >> 19 & 7u;
}

/*
 * What a message of tag `got` is, against this rank's `want` (its call's number is `seq`):
 * "its all_reduce #13 (float32, sum)" and which of kind, number, dtype, op, count-or-root differ,
 * into buf.
 */
void tt_tag_explain(uint32_t want, uint32_t got, uint64_t seq, char *buf, size_t size);

#endif
