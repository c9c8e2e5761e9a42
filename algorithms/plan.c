/* plan.c -- growing a plan; see plan.h. */
#include "algorithms/plan.h"

#include <stdlib.h>

void tt_plan_reset(struct tt_plan *p)
{
    p->nsteps = 0;
    p->nlanes = 0;
    p->oom = 0;
    p->next_phase = 0;
    p->resets++;
}

void tt_plan_free(struct tt_plan *p)
{
    free(p->steps);
    free(p->lanes);
    p->steps = NULL;
    p->lanes = NULL;
    p->steps_cap = 0;
    p->lanes_cap = 0;
    tt_plan_reset(p);
}

void tt_plan_lane(struct tt_plan *p, int channel)
{
    if (p->nlanes == p->lanes_cap) {
        int cap = p->lanes_cap ? 2 * p->lanes_cap : 8;
        struct tt_lane *l = realloc(p->lanes, (size_t)cap * sizeof(*l));
        if (!l) {
            p->oom = 1;
            return;
        }
        p->lanes = l;
        p->lanes_cap = cap;
    }
    p->lanes[p->nlanes++] = (struct tt_lane){.channel = channel, .first = p->nsteps, .nsteps = 0};
    p->next_phase = 0;
}

void tt_plan_step(struct tt_plan *p, const struct tt_step *s)
{
    if (s->count == 0)
        return;
    if (p->nlanes == 0) {
        p->oom = 1; /* a builder bug: no lane open */
        return;
    }
    if (p->nsteps == p->steps_cap) {
        size_t cap = p->steps_cap ? 2 * p->steps_cap : 64;
        struct tt_step *st = realloc(p->steps, cap * sizeof(*st));
        if (!st) {
            p->oom = 1;
            return;
        }
        p->steps = st;
        p->steps_cap = cap;
    }
    p->steps[p->nsteps] = *s;
    if (p->next_phase && p->lanes[p->nlanes - 1].nsteps > 0)
        p->steps[p->nsteps].flags |= TT_STEP_PHASE;
    p->next_phase = 0;
    p->nsteps++;
    p->lanes[p->nlanes - 1].nsteps++;
}

const char *tt_prim_name(int prim)
{
    static const char *names[TT_NUM_PRIMS] = {
        "send",           "recv", "recv-reduce-send", "recv-reduce-copy", "recv-reduce-copy-send",
        "recv-copy-send", "copy",
    };
    return (prim >= 0 && prim < TT_NUM_PRIMS) ? names[prim] : "?";
}
