/*
 * test_copy_pick.c -- the streaming-store trial (lib/topo/copy_pick.h) against a model of it
 * written out here: which calls are timed and which way each runs, when a size class's way
 * changes (only when the other way is faster by more than the margin), trials every
 * TT_PICK_PERIOD calls, failed calls not counted, size classes apart, and
 * TUTTI_STREAM_STORES forcing a way.
 */
#include "../../../lib/topo/copy_pick.h"

#include <criterion/criterion.h>
#include <stdlib.h>

#define KIB ((size_t)1 << 10)

/*
 * One call of `bytes`, as coll.c makes it: ask the way, "run" it for cost[way] seconds,
 * report. Returns the way it ran; *timed says whether it was a trial call, *changed whether
 * the report changed the class's way.
 */
static int call_kind(struct tt_pick *p, int kind, size_t bytes, const double cost[2], int ok,
                     int *timed, int *changed)
{
    int token, way = tt_pick_way(p, kind, bytes, &token);

    *timed = token >= 0;
    *changed = tt_pick_done(p, token, cost[way], ok);
    return way;
}

/* A call of collective 0 (all-reduce). */
static int call(struct tt_pick *p, size_t bytes, const double cost[2], int ok, int *timed,
                int *changed)
{
    return call_kind(p, 0, bytes, cost, ok, timed, changed);
}

static void init(struct tt_pick *p, const char *knob)
{
    if (knob)
        cr_assert(setenv("TUTTI_STREAM_STORES", knob, 1) == 0);
    tt_pick_init(p, "TUTTI_STREAM_STORES", TT_PICK_FIRST, TT_PICK_MIN_STREAM);
}

Test(copy_pick, small_calls_are_ordinary_and_untimed)
{
    struct tt_pick p;
    const double cost[2] = {1.0, 0.1};
    int timed, changed;

    init(&p, NULL);
    for (int i = 0; i < 3 * TT_PICK_PERIOD; i++) {
        cr_assert(call(&p, TT_PICK_MIN_STREAM - 1, cost, 1, &timed, &changed) == 0);
        cr_assert(!timed && !changed, "call %d below %zu bytes was timed", i, TT_PICK_MIN_STREAM);
    }
}

/* The schedule: calls 0 and 1 (TT_PICK_FIRST) untimed on the current way, then 2*TRIAL
 * alternating timed calls starting on the current way, then untimed until the next period. */
Test(copy_pick, trial_schedule_and_switch_when_streaming_wins)
{
    struct tt_pick p;
    const double cost[2] = {1.0, 0.5}; /* streaming twice as fast */
    int timed, changed, way, switched_at = -1;

    init(&p, NULL);
    for (int i = 0; i < TT_PICK_FIRST + TT_PICK_PERIOD + 2 * TT_PICK_TRIAL; i++) {
        int q = i - TT_PICK_FIRST;
        int in_trial = q >= 0 && q % TT_PICK_PERIOD < 2 * TT_PICK_TRIAL;

        way = call(&p, 256 * KIB, cost, 1, &timed, &changed);
        cr_assert(timed == in_trial, "call %d: timed %d, expected %d", i, timed, in_trial);
        if (i < TT_PICK_FIRST + 2 * TT_PICK_TRIAL)
            cr_assert(way == (in_trial ? (q & 1) : 0), "call %d ran way %d", i, way);
        else if (!in_trial || q % TT_PICK_PERIOD % 2 == 0)
            cr_assert(way == 1, "call %d after the switch ran way %d", i, way);
        else
            cr_assert(way == 0, "call %d: the second trial's odd calls try ordinary stores", i);
        if (changed) {
            cr_assert(switched_at < 0, "call %d switched again", i);
            switched_at = i;
        }
    }
    cr_assert(switched_at == TT_PICK_FIRST + 2 * TT_PICK_TRIAL - 1, "switched at call %d",
              switched_at);
}

Test(copy_pick, switches_back_when_the_placement_moves)
{
    struct tt_pick p;
    const double far[2] = {1.0, 0.5}, near[2] = {1.0, 1.5};
    int timed, changed, way = 0, changes = 0;

    init(&p, NULL);
    for (int i = 0; i < TT_PICK_FIRST + TT_PICK_PERIOD; i++)
        changes += (call(&p, 1 << 20, far, 1, &timed, &changed), changed);
    cr_assert(changes == 1);
    for (int i = 0; i < TT_PICK_PERIOD; i++) {
        way = call(&p, 1 << 20, near, 1, &timed, &changed);
        changes += changed;
    }
    cr_assert(changes == 2 && way == 0, "changes %d, way %d", changes, way);
}

Test(copy_pick, margin_keeps_the_way_on_a_near_tie)
{
    struct tt_pick p;
    /* streaming 10% faster: inside the margin (it must take < 0.85 of the time) */
    const double cost[2] = {1.0, 0.9};
    int timed, changed, way = 0;

    init(&p, NULL);
    for (int i = 0; i < TT_PICK_FIRST + 4 * TT_PICK_PERIOD; i++) {
        way = call(&p, 128 * KIB, cost, 1, &timed, &changed);
        cr_assert(!changed, "call %d switched on a %.0f%% difference", i, 10.0);
    }
    cr_assert(way == 0);
}

Test(copy_pick, failed_calls_do_not_count)
{
    struct tt_pick p;
    const double cost[2] = {1.0, 0.1};
    int timed, changed;

    init(&p, NULL);
    /* every call of the first trial fails: no switch, whatever the times */
    for (int i = 0; i < TT_PICK_FIRST + 2 * TT_PICK_TRIAL; i++) {
        call(&p, 512 * KIB, cost, 0, &timed, &changed);
        cr_assert(!changed);
    }
    /* untimed calls up to the next trial, which succeeds: it alone decides */
    for (int i = TT_PICK_FIRST + 2 * TT_PICK_TRIAL; i < TT_PICK_FIRST + TT_PICK_PERIOD; i++)
        cr_assert(call(&p, 512 * KIB, cost, 1, &timed, &changed) == 0 && !timed);
    int changes = 0;
    for (int i = 0; i < 2 * TT_PICK_TRIAL; i++)
        changes += (call(&p, 512 * KIB, cost, 1, &timed, &changed), changed);
    cr_assert(changes == 1);
    cr_assert(call(&p, 512 * KIB, cost, 1, &timed, &changed) == 1);
}

Test(copy_pick, size_classes_are_apart)
{
    struct tt_pick p;
    const double fast_stream[2] = {1.0, 0.5}, slow_stream[2] = {1.0, 2.0};
    int timed, changed;

    init(&p, NULL);
    /* interleave: 64 KiB (class 0) likes streaming, 8 MiB (class 7) does not */
    for (int i = 0; i < TT_PICK_FIRST + 2 * TT_PICK_TRIAL; i++) {
        call(&p, 64 * KIB, fast_stream, 1, &timed, &changed);
        call(&p, 8 << 20, slow_stream, 1, &timed, &changed);
    }
    cr_assert(call(&p, 127 * KIB, fast_stream, 1, &timed, &changed) == 1, "64-128 KiB streams");
    cr_assert(call(&p, 8 << 20, slow_stream, 1, &timed, &changed) == 0, "8 MiB stays ordinary");
    cr_assert(call(&p, 128 * KIB, fast_stream, 1, &timed, &changed) == 0,
              "128 KiB is the next class, never tried");
}

/* The first timed call's token of (kind, bytes) in a fresh picker, and what it names. */
static void check_token(int kind, size_t bytes, size_t want_lo, size_t want_hi)
{
    struct tt_pick p;
    size_t lo, hi;
    int token = -1, k = -1;

    init(&p, NULL);
    for (int i = 0; i <= TT_PICK_FIRST; i++)
        tt_pick_way(&p, kind, bytes, &token);
    cr_assert(token >= 0);
    const struct tt_pick_class *c = tt_pick_class_of(&p, token, &k, &lo, &hi);
    cr_assert(k == (kind < TT_PICK_KINDS ? kind : TT_PICK_KINDS - 1) && lo == want_lo &&
                  hi == want_hi && c->calls == TT_PICK_FIRST + 1,
              "kind %d, %zu bytes: token names kind %d, [%zu, %zu), %u calls", kind, bytes, k, lo,
              hi, c->calls);
}

Test(copy_pick, tokens_name_their_class)
{
    check_token(0, 64 * KIB, 64 * KIB, 128 * KIB);
    check_token(3, 127 * KIB, 64 * KIB, 128 * KIB);
    check_token(1, 8 << 20, 8 << 20, 16 << 20);
    check_token(4, (size_t)1 << 40, TT_PICK_MIN_STREAM << (TT_PICK_CLASSES - 1), SIZE_MAX);
    check_token(200, 1 << 20, 1 << 20, 2 << 20); /* unknown kinds share the last */
}

/* all-gather and reduce-scatter of one size, alternating (as FSDP does): each is timed
 * against itself, so reduce-scatter being cheaper is no reason to switch either. */
Test(copy_pick, collectives_are_apart)
{
    struct tt_pick p;
    const double ag[2] = {1.0, 1.0}, rs[2] = {0.3, 0.3};
    int timed, changed, changes = 0;

    init(&p, NULL);
    for (int i = 0; i < 2 * TT_PICK_PERIOD; i++) {
        call_kind(&p, 1, 1 << 20, ag, 1, &timed, &changed);
        changes += changed;
        call_kind(&p, 2, 1 << 20, rs, 1, &timed, &changed);
        changes += changed;
    }
    cr_assert(changes == 0, "%d switches", changes);
}

static void forced(const char *knob, int want)
{
    struct tt_pick p;
    const double cost[2] = {want ? 2.0 : 0.5, want ? 0.5 : 2.0}; /* the forced way is slower */
    int timed, changed;

    init(&p, knob);
    for (int i = 0; i < TT_PICK_FIRST + 2 * TT_PICK_PERIOD; i++) {
        cr_assert(call(&p, 1 << 20, cost, 1, &timed, &changed) == want);
        cr_assert(!timed && !changed);
    }
    cr_assert(call(&p, 1000, cost, 1, &timed, &changed) == 0, "small calls are never streamed");
}

Test(copy_pick, forced_streaming)
{
    forced("1", 1);
}

Test(copy_pick, forced_ordinary)
{
    forced("0", 0);
}

Test(copy_pick, bad_knob_measures)
{
    struct tt_pick p;

    init(&p, "yes");
    cr_assert(p.forced == -1);
}

/* One call of the trial held up (the scheduler took the core): the median ignores it. */
Test(copy_pick, one_slow_call_does_not_decide)
{
    struct tt_pick p;
    const double even[2] = {1.0, 1.0};
    const double stall[2] = {20.0, 20.0};
    int timed, changed, changes = 0, n = 0;

    init(&p, NULL);
    for (int i = 0; i < TT_PICK_FIRST + 2 * TT_PICK_TRIAL; i++) {
        int token, way = tt_pick_way(&p, 0, 1 << 20, &token);
        /* the first timed call, on the current (ordinary) way, stalls */
        double t = token >= 0 && n++ == 0 ? stall[way] : even[way];
        changes += tt_pick_done(&p, token, t, 1);
    }
    (void)timed, (void)changed;
    cr_assert(changes == 0, "one stalled call switched the way");
    /* a trial where streaming takes half the time does switch */
    const double half[2] = {1.0, 0.5};
    for (int i = 0; i < TT_PICK_PERIOD; i++)
        changes += (call(&p, 1 << 20, half, 1, &timed, &changed), changed);
    cr_assert(changes == 1);
}

/* A second picker (single copy) starts its trials after the first's end, so the two never
 * time the same calls. */
Test(copy_pick, a_later_first_trial)
{
    struct tt_pick p;
    const double cost[2] = {1.0, 0.5};
    int token, lag = TT_PICK_FIRST + 2 * TT_PICK_TRIAL;

    cr_assert(setenv("TUTTI_SHM_SINGLE_COPY", "auto", 1) == 0);
    tt_pick_init(&p, "TUTTI_SHM_SINGLE_COPY", (uint32_t)lag, TT_PICK_MIN_SINGLE);
    for (int i = 0; i < lag + TT_PICK_PERIOD; i++) {
        int q = (i - lag) % TT_PICK_PERIOD;
        int way = tt_pick_way(&p, 1, 1 << 20, &token);
        cr_assert((token >= 0) == (i >= lag && q < 2 * TT_PICK_TRIAL), "call %d: token %d", i,
                  token);
        tt_pick_done(&p, token, cost[way], 1);
    }
    cr_assert(tt_pick_way(&p, 1, 1 << 20, &token) == 1);
}

/* The single-copy picker's classes start at its own minimum, below the streaming one's. */
Test(copy_pick, single_copy_from_its_own_min)
{
    struct tt_pick p;
    const double cost[2] = {1.0, 0.5};
    int timed, changed, token, k;
    size_t lo, hi;

    cr_assert(setenv("TUTTI_SHM_SINGLE_COPY", "auto", 1) == 0);
    tt_pick_init(&p, "TUTTI_SHM_SINGLE_COPY", TT_PICK_FIRST, TT_PICK_MIN_SINGLE);
    for (int i = 0; i < 2 * TT_PICK_PERIOD; i++) {
        cr_assert(call(&p, TT_PICK_MIN_SINGLE - 1, cost, 1, &timed, &changed) == 0);
        cr_assert(!timed, "call %d below %zu bytes was timed", i, TT_PICK_MIN_SINGLE);
    }
    for (int i = 0; i <= TT_PICK_FIRST; i++)
        tt_pick_way(&p, 2, TT_PICK_MIN_SINGLE, &token);
    cr_assert(token >= 0, "the first trial did not start at call %d", TT_PICK_FIRST);
    tt_pick_class_of(&p, token, &k, &lo, &hi);
    cr_assert(k == 2 && lo == TT_PICK_MIN_SINGLE && hi == 2 * TT_PICK_MIN_SINGLE,
              "kind %d, [%zu, %zu)", k, lo, hi);
}

/* Run `calls` calls of 1 MiB where the ways cost cost[0] and cost[1]; the last way run. */
static int run_calls(struct tt_pick *p, int calls, const double cost[2], int *changes)
{
    int timed, changed, way = -1;

    for (int i = 0; i < calls; i++) {
        way = call(p, 1 << 20, cost, 1, &timed, &changed);
        *changes += changed;
    }
    return way;
}

/* A preferred way (single copy where ranks outnumber cores): every class from the given size
 * on starts there and leaves it only for a way below the preferred margin; the way back needs
 * the usual one. Smaller classes start on way 0 with the usual margin. */
Test(copy_pick, a_preferred_way_needs_its_own_margin_to_leave)
{
    struct tt_pick p;
    const double near[2] = {0.8, 1.0}, far[2] = {0.6, 1.0}, back[2] = {1.0, 0.8};
    int changes = 0, timed, changed;

    init(&p, NULL);
    tt_pick_prefer(&p, 1, 0.7, 256 * KIB, 1u << 0 | 1u << 5);
    cr_assert(call(&p, 1 << 20, near, 1, &timed, &changed) == 1, "did not start on way 1");
    cr_assert(call_kind(&p, 5, 256 * KIB, near, 1, &timed, &changed) == 1,
              "another collective and size did not start on way 1");
    cr_assert(call_kind(&p, 5, 128 * KIB, near, 1, &timed, &changed) == 0,
              "a size below the preference's did not start on way 0");
    cr_assert(call_kind(&p, 3, 1 << 20, near, 1, &timed, &changed) == 0,
              "a collective outside the preference's did not start on way 0");
    /* way 0 20% faster: not enough to leave the preferred way, trial after trial */
    cr_assert(run_calls(&p, 3 * TT_PICK_PERIOD, near, &changes) == 1 && changes == 0,
              "left the preferred way for a 20%% gain (%d change(s))", changes);
    /* 40% faster: left at the next trial's end */
    cr_assert(run_calls(&p, TT_PICK_PERIOD, far, &changes) == 0 && changes == 1,
              "did not leave the preferred way for a 40%% gain (%d change(s))", changes);
    /* back to the preferred way for a 20% gain (the usual margin) */
    cr_assert(run_calls(&p, TT_PICK_PERIOD, back, &changes) == 1 && changes == 2,
              "did not come back to the preferred way for a 20%% gain (%d change(s))", changes);
}

/* Without a preference, a 20% gain is enough (TT_PICK_MARGIN): the same numbers switch. */
Test(copy_pick, without_a_preference_the_usual_margin)
{
    struct tt_pick p;
    const double near[2] = {1.0, 0.8};
    int changes = 0;

    init(&p, NULL);
    cr_assert(run_calls(&p, TT_PICK_PERIOD, near, &changes) == 1 && changes == 1,
              "a 20%% gain did not switch (%d change(s))", changes);
}

/* A collective outside the preference's kinds keeps the usual margin both ways. */
Test(copy_pick, a_kind_outside_the_preference_uses_the_usual_margin)
{
    struct tt_pick p;
    const double near[2] = {1.0, 0.8};
    int changes = 0, timed, changed, way = 0;

    init(&p, NULL);
    tt_pick_prefer(&p, 1, 0.7, 64 * KIB, 1u << 1);
    for (int i = 0; i < TT_PICK_PERIOD; i++) {
        way = call_kind(&p, 3, 1 << 20, near, 1, &timed, &changed);
        changes += changed;
    }
    cr_assert(way == 1 && changes == 1, "way %d after %d change(s)", way, changes);
}

/*
 * Ranks that decide together (coll.c's vote): tt_pick_record says when a trial has ended and
 * leaves its medians; tt_pick_decide takes medians from outside. Two ranks whose own trials
 * disagree (one sees streaming 40% faster, the other 10% slower) both follow the mean (0.85
 * of the time: not below the margin), so both keep their way, where alone the first would
 * have switched.
 */
Test(copy_pick, ranks_decide_on_the_mean_of_their_medians)
{
    struct tt_pick a, b;
    const double ca[2] = {1.0, 0.6}, cb[2] = {1.0, 1.1};
    int ended = 0;

    init(&a, NULL);
    init(&b, NULL);
    for (int i = 0; i < TT_PICK_FIRST + 2 * TT_PICK_TRIAL; i++) {
        int ta, tb, wa = tt_pick_way(&a, 0, 1 << 20, &ta), wb = tt_pick_way(&b, 0, 1 << 20, &tb);
        int ea, eb;

        cr_assert(wa == wb && (ta >= 0) == (tb >= 0), "call %d: the ranks' schedules differ", i);
        ea = tt_pick_record(&a, ta, ca[wa], 1);
        eb = tt_pick_record(&b, tb, cb[wb], 1);
        cr_assert(ea == eb, "call %d: one rank's trial ended, the other's not", i);
        if (!ea)
            continue;
        ended++;
        cr_assert(i == TT_PICK_FIRST + 2 * TT_PICK_TRIAL - 1, "the trial ended at call %d", i);
        const struct tt_pick_class *k;
        size_t lo, hi;
        int kind;
        k = tt_pick_class_of(&a, ta, &kind, &lo, &hi);
        cr_assert(k->med[0] == 1.0f && k->med[1] == 0.6f, "rank a's medians %g, %g", k->med[0],
                  k->med[1]);
        const float mean[2] = {1.0f, 0.85f};
        cr_assert(!tt_pick_decide(&a, ta, mean) && !tt_pick_decide(&b, tb, mean),
                  "a rank switched on the mean's 15%% gain");
        const float far[2] = {1.0f, 0.5f};
        struct tt_pick a2 = a;
        cr_assert(tt_pick_decide(&a2, ta, far), "a 50%% gain did not switch");
        cr_assert(tt_pick_way(&a2, 0, 1 << 20, &ta) == 1, "the switch did not stick");
    }
    cr_assert(ended == 1);
}
