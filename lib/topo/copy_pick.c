/*
 * copy_pick.c -- the trials that decide, per collective and size, how large host calls move
 * their bytes over shm: streaming stores into FIFO slots or not, single copy or not
 * (copy_pick.h says why and how).
 */
#include "lib/topo/copy_pick.h"

#include "lib/base/config.h"

#include <string.h>

void tt_pick_init(struct tt_pick *p, const char *knob, uint32_t first, size_t min)
{
    memset(p, 0, sizeof(*p));
    p->forced = tt_env_auto01(knob);
    p->first = first;
    p->min = min;
    p->prefer = -1;
    p->prefer_from = TT_PICK_CLASSES;
}

void tt_pick_prefer(struct tt_pick *p, int way, double margin, size_t from, unsigned kinds)
{
    p->prefer = way != 0;
    p->prefer_margin = margin;
    p->prefer_kinds = kinds;
    p->prefer_from = 0;
    while (p->prefer_from < TT_PICK_CLASSES && (p->min << p->prefer_from) < from)
        p->prefer_from++;
    for (int k = 0; k < TT_PICK_KINDS; k++)
        for (int c = p->prefer_from; c < TT_PICK_CLASSES && (kinds >> k & 1); c++)
            p->cls[k][c].way = (uint8_t)p->prefer;
}

static int class_of(const struct tt_pick *p, size_t bytes)
{
    int k = 0;

    for (size_t b = bytes / p->min; b > 1 && k < TT_PICK_CLASSES - 1; b >>= 1)
        k++;
    return k;
}

/* A token: (kind * TT_PICK_CLASSES + class) * 2 + way. */
const struct tt_pick_class *tt_pick_class_of(const struct tt_pick *p, int token, int *kind,
                                             size_t *lo, size_t *hi)
{
    int k = (token >> 1) % TT_PICK_CLASSES;

    *kind = (token >> 1) / TT_PICK_CLASSES;
    *lo = p->min << k;
    *hi = k == TT_PICK_CLASSES - 1 ? SIZE_MAX : *lo * 2;
    return &p->cls[*kind][k];
}

int tt_pick_way(struct tt_pick *p, int kind, size_t bytes, int *token)
{
    struct tt_pick_class *c;
    uint32_t q;
    int cls, way;

    *token = -1;
    if (bytes < p->min)
        return 0;
    if (p->forced >= 0)
        return p->forced;
    if (kind < 0 || kind >= TT_PICK_KINDS)
        kind = TT_PICK_KINDS - 1;
    cls = class_of(p, bytes);
    c = &p->cls[kind][cls];
    if (c->calls++ < p->first)
        return c->way;
    q = (c->calls - 1 - p->first) % TT_PICK_PERIOD;
    if (q >= 2 * TT_PICK_TRIAL)
        return c->way;
    if (q == 0) /* a trial starts: forget what a failed one left */
        c->seen[0] = c->seen[1] = 0;
    way = (p->blocks ? q >= TT_PICK_TRIAL : q & 1) ? !c->way : c->way;
    *token = (kind * TT_PICK_CLASSES + cls) * 2 + way;
    return way;
}

/* The median of a way's TT_PICK_TRIAL times: one call that the scheduler held up does not
 * decide a trial. */
static double median(const float *t)
{
    float v[TT_PICK_TRIAL];

    memcpy(v, t, sizeof(v));
    for (int i = 1; i < TT_PICK_TRIAL; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            float x = v[j];
            v[j] = v[j - 1], v[j - 1] = x;
        }
    return (v[(TT_PICK_TRIAL - 1) / 2] + v[TT_PICK_TRIAL / 2]) / 2;
}

static struct tt_pick_class *class_of_token(struct tt_pick *p, int token)
{
    return &p->cls[(token >> 1) / TT_PICK_CLASSES][(token >> 1) % TT_PICK_CLASSES];
}

int tt_pick_record(struct tt_pick *p, int token, double seconds, int ok)
{
    struct tt_pick_class *c;
    int way = token & 1;

    if (token < 0 || !ok)
        return 0;
    c = class_of_token(p, token);
    if (c->seen[way] >= TT_PICK_TRIAL)
        return 0;
    c->t[way][c->seen[way]++] = (float)seconds;
    if (c->seen[0] < TT_PICK_TRIAL || c->seen[1] < TT_PICK_TRIAL)
        return 0;
    c->med[0] = median(c->t[0]);
    c->med[1] = median(c->t[1]);
    c->seen[0] = c->seen[1] = 0;
    return 1;
}

int tt_pick_decide(struct tt_pick *p, int token, const float med[2])
{
    struct tt_pick_class *c = class_of_token(p, token);
    int other = !c->way;
    int preferred = (token >> 1) % TT_PICK_CLASSES >= p->prefer_from && c->way == p->prefer &&
                    (p->prefer_kinds >> ((token >> 1) / TT_PICK_CLASSES) & 1);

    c->med[0] = med[0];
    c->med[1] = med[1];
    if (!(med[other] < (preferred ? p->prefer_margin : TT_PICK_MARGIN) * med[c->way]))
        return 0;
    c->way = (uint8_t)other;
    return 1;
}

int tt_pick_done(struct tt_pick *p, int token, double seconds, int ok)
{
    struct tt_pick_class *c;

    if (!tt_pick_record(p, token, seconds, ok))
        return 0;
    c = class_of_token(p, token);
    return tt_pick_decide(p, token, (const float[2]){c->med[0], c->med[1]});
}
