/*
 * split.h -- how tutti-train divides a batch among its ranks.
 */
#ifndef TT_TRAIN_SPLIT_H
#define TT_TRAIN_SPLIT_H

#define SPLIT_MAX_RANKS 64

/* Shares of the global batch per rank (--split b0,b1,...; none: equal). */
struct split_plan {
    int n;     /* ranks */
    int *want; /* --split's local batches (their sum is the global batch), NULL: equal shares */
};

/* Parse --split's "b0,b1,..." for n ranks whose sum must be batch; 0 or an error message. */
int split_parse(struct split_plan *p, const char *s, int n, int batch, char *err, int errlen);

/* Rank r's part of a batch of B samples: [*first, *first + *count). Equal shares (the first
 * B % n ranks one more), or --split's shares scaled to B (largest remainders; exact when B is
 * the global batch). */
void split_part(const struct split_plan *p, int B, int r, int *first, int *count);

/* New shares of batch for p->n ranks in proportion to their speeds (1 / seconds per sample,
 * each > 0), each at least 1 (largest remainders); p->want allocated if it was NULL. 0, or -1
 * when out of memory or batch < n. */
int split_rebalance(struct split_plan *p, int batch, const double *sec_per_sample);

#endif
