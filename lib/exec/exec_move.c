/*
 * exec_move.c -- how the executor (exec.c) moves and reduces a chunk's bytes: host memory and
 * lib/kern/reduce.c's kernels, or the device mover's queued work (struct tt_mover); a premul-sum
 * call's scaling of the caller's input and AVG's division on the way. See exec.h.
 */
#include "lib/exec/exec.h"
#include "lib/kern/copy.h"
#include "lib/base/error.h"

tutti_result_t tt_mv_copy(struct tt_exec *x, void *dst, const void *src, size_t bytes)
{
    if (x->mover)
        return x->mover->copy(x->mover->ctx, dst, src, bytes);
    tt_copy(dst, src, bytes);
    return TUTTI_SUCCESS;
}

/* A copy into send connection sc's slot: with streaming stores where x says and the slot is
 * memory another process reads (copy_pick.h). */
tutti_result_t tt_mv_copy_out(struct tt_exec *x, const struct tt_conn *sc, void *slot,
                              const void *src, size_t bytes)
{
    if (x->nt_slots && !x->mover && sc->tp->shared_slots) {
        tt_copy_nt(slot, src, bytes);
        return TUTTI_SUCCESS;
    }
    return tt_mv_copy(x, slot, src, bytes);
}

static tutti_result_t mv_reduce(struct tt_exec *x, void *dst, void *dst2, const void *a,
                                const void *b, size_t n)
{
    if (x->mover)
        return x->mover->reduce(x->mover->ctx, dst, dst2, a, b, n, x->dtype, x->op, 0);
    x->kernel(dst, dst2, a, b, n);
    return TUTTI_SUCCESS;
}

/* mv_reduce of a step's received bytes a with its source b, which a premul-sum call scales as
 * it reads it when b is the caller's input (x->premul). */
tutti_result_t tt_mv_reduce_src(struct tt_exec *x, const struct tt_step *s, void *dst, void *dst2,
                                const void *a, const void *b, size_t n)
{
    if (x->premul && s->src == TT_BUF_SEND) {
        x->pm_kernel(dst, dst2, a, b, n, x->premul);
        return TUTTI_SUCCESS;
    }
    return mv_reduce(x, dst, dst2, a, b, n);
}

/*
 * tt_mv_copy_out / tt_mv_copy of a step's source, scaled likewise. Into a slot by way of a bounce
 * buffer that stays in cache: the kernel's vector stores into a slot the peer has just read
 * wait for each line to come back from the peer's core (1 MiB 2-rank all-reduce: 229 us
 * against 86-121 with memcpy's, which write whole lines without fetching them).
 */
tutti_result_t tt_mv_copy_src(struct tt_exec *x, const struct tt_step *s, const struct tt_conn *sc,
                              void *dst, const void *src, size_t n)
{
    size_t bytes = n * x->esize;

    if (!x->premul || s->src != TT_BUF_SEND)
        return sc ? tt_mv_copy_out(x, sc, dst, src, bytes) : tt_mv_copy(x, dst, src, bytes);
    if (!sc) {
        tt_premul(x->dtype, dst, src, n, x->premul);
        return TUTTI_SUCCESS;
    }
    if (tt_buffer_grow(&x->mem->bounce, &x->mem->bounce_cap, bytes) != 0)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "executor: out of memory");
    tt_premul(x->dtype, x->mem->bounce, src, n, x->premul);
    return tt_mv_copy_out(x, sc, dst, x->mem->bounce, bytes);
}

tutti_result_t tt_mv_postop(struct tt_exec *x, const struct tt_step *s, void *d, size_t n)
{
    if (!(s->flags & TT_STEP_POSTOP) || x->op != TUTTI_AVG)
        return TUTTI_SUCCESS;
    if (x->mover)
        return x->mover->divide(x->mover->ctx, d, n, x->dtype, x->avg_divisor);
    tt_postop_avg(x->dtype, d, n, x->avg_divisor);
    return TUTTI_SUCCESS;
}

/*
 * A reduction that gives a segment's final value into dst (and, when slot != NULL, the send
 * slot): AVG's division follows it (postop). On the host the reduction, the division and the
 * copy to the slot go a block at a time, so each pass finds the block in cache (2-rank float32
 * AVG all-reduce, medians of four: 214 against 235 us at 1 MiB; at 16 MiB within the noise).
 * The same kernels, so the same bits. The device mover does all three in one kernel. Without
 * a division, one reduction writing both.
 */
#define TT_AVG_BLOCK 16384
tutti_result_t tt_mv_reduce_final(struct tt_exec *x, const struct tt_step *s,
                                  const struct tt_conn *sc, char *dst, char *slot, const char *a,
                                  const char *b, size_t n)
{
    int avg = (s->flags & TT_STEP_POSTOP) && x->op == TUTTI_AVG;
    size_t step = TT_AVG_BLOCK / x->esize, o = 0;
    tutti_result_t r;

    if (!avg)
        return tt_mv_reduce_src(x, s, dst, slot, a, b, n);
    if (x->mover)
        return x->mover->reduce(x->mover->ctx, dst, slot, a, b, n, x->dtype, x->op, x->avg_divisor);
    do {
        size_t m = n - o < step ? n - o : step, off = o * x->esize;
        r = tt_mv_reduce_src(x, s, dst + off, NULL, a + off, b + off, m);
        if (r == TUTTI_SUCCESS)
            r = tt_mv_postop(x, s, dst + off, m);
        if (r == TUTTI_SUCCESS && slot)
            r = tt_mv_copy_out(x, sc, slot + off, dst + off, m * x->esize);
        o += m;
    } while (o < n && r == TUTTI_SUCCESS);
    return r;
}
