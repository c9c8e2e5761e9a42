/* tag.c -- naming what a message's tag says; see tag.h. */
#include "lib/exec/tag.h"

#include "algorithms/algorithms.h"

#include <string.h>

/* The call number a tag's 10 bits name, the one nearest `near`. */
static unsigned long long full_seq(uint32_t tag, uint64_t near)
{
    int d = (int)(((tag >> 22) - (uint32_t)near) & 0x3ffu);

    if (d >= 512)
        d -= 1024;
    return (unsigned long long)((int64_t)near + d);
}

static int reduces(unsigned kind)
{
    return kind == TT_COLL_ALL_REDUCE || kind == TT_COLL_REDUCE_SCATTER || kind == TT_COLL_REDUCE;
}

static void describe(uint32_t t, uint64_t near, char *buf, size_t size)
{
    unsigned kind = tt_tag_kind(t), dtype = t >> 15 & 15u, op = t >> 12 & 7u;

    if (kind == TT_TAG_P2P) {
        snprintf(buf, size, "a point-to-point message");
        return;
    }
    snprintf(buf, size, "%s #%llu (%s%s%s)",
             kind < TT_NUM_COLLS  ? tt_coll_name((enum tt_coll)kind)
             : kind == TT_TAG_OWN ? "library check (TUTTI_CHECK_COLL or a trial's vote)"
                                  : "unknown call",
             full_seq(t, near), tutti_dtype_name((tutti_dtype_t)dtype), reduces(kind) ? ", " : "",
             !reduces(kind)        ? ""
             : op == TUTTI_NUM_OPS ? "premul_sum"
                                   : tutti_op_name((tutti_op_t)op));
}

void tt_tag_explain(uint32_t want, uint32_t got, uint64_t seq, char *buf, size_t size)
{
    static const struct {
        uint32_t mask;
        const char *name;
    } fields[] = {{0x7u << 19, "kind"},
                  {0x3ffu << 22, "call number"},
                  {0xfu << 15, "dtype"},
                  {0x7u << 12, "op"},
                  {0x7ffu, "count or root"}};
    char g[160], w[160], diff[96] = "";
    size_t n = 0;
    int p2p = tt_tag_kind(want) == TT_TAG_P2P && tt_tag_kind(got) == TT_TAG_P2P;

    describe(got, seq, g, sizeof(g));
    describe(want, seq, w, sizeof(w));
    for (size_t i = 0; !p2p && i < sizeof(fields) / sizeof(fields[0]); i++)
        if ((want ^ got) & fields[i].mask)
            n +=
                (size_t)snprintf(diff + n, sizeof(diff) - n, "%s%s", n ? ", " : "", fields[i].name);
    if (p2p)
        snprintf(buf, size,
                 "a point-to-point operation of another size than this rank's receive (the "
                 "k-th send to a rank meets that rank's k-th receive from the sender)");
    else
        snprintf(buf, size, "its %s, where this rank runs %s (they differ in: %s)", g, w,
                 n ? diff : "?");
}

const char *tt_refusal_text(unsigned why)
{
    switch (why) {
    case TT_REFUSED_SENDBUF_NULL: return "its sendbuf is NULL";
    case TT_REFUSED_RECVBUF_NULL: return "its recvbuf is NULL";
    case TT_REFUSED_OVERLAP: return "its sendbuf and recvbuf overlap but the call is not in place";
    case TT_REFUSED_MEMORY: return "it passed host and device memory together";
    default: return "its arguments";
    }
}
