/*
 * fold.h -- fitting n ranks onto the power-of-two schedules (recursive doubling, halving).
 *
 * With p the largest power of two <= n and r = n - p: of the first 2r ring positions, each
 * odd one folds into the even one before it (sends it its data before, gets the result
 * after); the remaining p positions take virtual ranks 0..p-1 and run the power-of-two
 * schedule among themselves. Costs two extra hops for r ranks, none when n is a power of two.
 */
#ifndef TT_FOLD_H
#define TT_FOLD_H

struct tt_fold {
    int p, r;
    int vrank; /* this rank's virtual rank, or -1 if it folds away */
    int buddy; /* position it folds into / that folds into it, or -1 */
};

static inline void tt_fold_init(struct tt_fold *f, int n, int pos)
{
    f->p = 1;
    while (f->p * 2 <= n)
        f->p *= 2;
    f->r = n - f->p;
    f->buddy = -1;
    if (pos < 2 * f->r) {
        f->vrank = pos % 2 ? -1 : pos / 2;
        f->buddy = pos % 2 ? pos - 1 : pos + 1;
    } else {
        f->vrank = pos - f->r;
    }
}

/* Ring position of virtual rank v. */
static inline int tt_fold_pos(const struct tt_fold *f, int v)
{
    return v < f->r ? 2 * v : v + f->r;
}

#endif
