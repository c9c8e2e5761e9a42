/*
 * copy_pick.h -- measured choices between two ways of moving a large host call, per
 * communicator, collective and size:
 *   - does it write its shared-memory FIFO slots with streaming stores (tt_copy_nt,
 *     lib/kern/copy.h) or ordinary ones (comm->pick, TUTTI_STREAM_STORES);
 *   - does an all-gather, broadcast or point-to-point batch over shm send its final bytes by
 *     address for the receiver to copy out of the sender's memory, one copy, or through the
 *     FIFO, two copies (comm->pick_sc, TUTTI_SHM_SINGLE_COPY; exec.h tt_exec_single_copy).
 *     Its trial calls end, either way, only once the receivers have taken every byte sent
 *     (exec.h drain): else two copies would be timed to the sender's last write into the
 *     FIFO and one copy to the receiver's read, and a rank that only sends (a broadcast's
 *     root, a gather's leaves) would pick two copies for the wrong reason.
 *
 * Single copy wins where process_vm_readv is fast next to memcpy: on 2026-12-02's machine a
 * 2-rank all-gather of 1 MiB took 32-37 us in one copy against 80-83 in two; on 2026-12-01's it
 * lost broadcast from 1 MiB and out-of-place all-gather at 16 MiB.
 *
 * Whether streaming stores are faster depends on how far apart the two ranks' cores are,
 * which no API says and which a virtual machine changes while it runs: on this project's 2-vCPU VM
 * the hypervisor moves the pair between host cores that share a cache (a cache line's round trip
 * 100-140 ns) and cores that do not (430-560 ns), for seconds to minutes at a time. Next to each
 * other, ordinary stores win (streaming: 1.2-1.9x slower); far apart, streaming stores do
 * (2-rank all-gather 256 KiB-8 MiB about 2x faster, level with Open MPI's single copy, which
 * the far placement hardly touches). BENCHMARKS.md, "Two placements".
 *
 * So each collective's size class (a power of two from the picker's min; classes are per
 * collective, so a program that alternates two collectives of one size, all-gather and
 * reduce-scatter, say, does not time one against the other) runs a trial at its call
 * TT_PICK_FIRST and then every TT_PICK_PERIOD calls: TT_PICK_TRIAL calls each way,
 * alternating, timed; the way whose median call took less time, by more than TT_PICK_MARGIN,
 * is used until the next trial (a median, so that one call the scheduler held up does not
 * decide). A call pays for what the one before left behind, so alternating calls each pay
 * some of the other way's cost (4 ranks on 2 cores, broadcast of 4 MiB: both ways timed at
 * 1.0-1.9 ms where they run at 0.5 and 1.3 ms); trials in two blocks of one way each were
 * tried and left out: they slowed point-to-point on 4 ranks / 2 cores (scatter of 4 MiB 1.55x,
 * gather and all-to-all 1.2x; BENCHMARKS.md, "Trials decided together"). Every rank makes the same
 * calls, so the ranks try the same way in the same call and each times what both ways together
 * cost. A rank's choice only decides how it sends its own bytes: ranks that disagree still move the
 * same bytes (a receiver takes a message by address or through a slot alike). But each rank times
 * only its own part, and ranks of one pipeline that decided apart then mixed the ways in every
 * later trial; so a collective's ranks vote (lib/engine/pick.c): at a trial's end they all-gather
 * their medians and all decide on the mean, where their knobs match (comm_init.c; else their trials
 * need not line up, and each decides alone). Point-to-point batches decide alone: their ranks pick
 * by their own largest send. The second picker's trials start where the first's end, so no call is
 * timed by both.
 *
 * Where ranks outnumber cores, the single-copy picker starts all-gathers and point-to-point
 * batches of 64 KiB and more on one copy and leaves it only for two copies 30% faster
 * (tt_pick_prefer; comm_init.c says why, and why not broadcasts).
 *
 * The knobs: auto (the trial), 0 (never), 1 (always).
 */
#ifndef TT_STREAM_PICK_H
#define TT_STREAM_PICK_H

#include <stddef.h>
#include <stdint.h>

/* The smallest call each picker times: streaming stores pay only for large copies; a single
 * copy's system call pays from a few KiB (shm.c sends by address from SHM_REMOTE_MIN). */
#define TT_PICK_MIN_STREAM ((size_t)64 << 10)
#define TT_PICK_MIN_SINGLE ((size_t)8 << 10)
/* The net chunk picker (comm_init.c fit_net): a quarter of a 512 KiB slot is a message from
 * calls of 256 KiB. */
#define TT_PICK_MIN_NET ((size_t)256 << 10)
#define TT_PICK_CLASSES 20 /* from the picker's min: 8 KiB .. 4 GiB and above, or from 64 KiB */
#define TT_PICK_KINDS 8    /* collectives (enum tt_coll); point-to-point takes the last */
#define TT_PICK_FIRST 2    /* a class's first calls set up connections and touch pages */
#define TT_PICK_TRIAL 4
#define TT_PICK_PERIOD 256
#define TT_PICK_MARGIN 0.85 /* the other way must take less than this share of the time */

struct tt_pick_class {
    uint32_t calls;
    uint8_t way;               /* in use: 0 ordinary stores, 1 streaming */
    uint8_t seen[2];           /* this trial's timed calls each way */
    float t[2][TT_PICK_TRIAL]; /* their times, seconds */
    float med[2];              /* the last whole trial's median each way */
};

struct tt_pick {
    int forced;            /* -1: measure; 0 or 1: that way always */
    size_t min;            /* calls of fewer bytes take way 0, untimed; classes start here */
    uint32_t first;        /* a class's first trial starts at this call (0-based) */
    int prefer;            /* tt_pick_prefer's way, or -1 */
    int prefer_from;       /* for classes from this one on */
    unsigned prefer_kinds; /* of these kinds (bit k: kind k) */
    double prefer_margin;
    /* A trial times TT_PICK_TRIAL calls one way, then as many the other (else the ways
     * alternate call by call): for a choice whose effect outlasts the call (the socket
     * message size: the connection's state carries over to the next call) */
    int blocks;
    struct tt_pick_class cls[TT_PICK_KINDS][TT_PICK_CLASSES];
};

/* From the knob (auto, 0 or 1); trials at call `first` of a class and every TT_PICK_PERIOD
 * calls after (TT_PICK_FIRST, or later for a second picker whose trials must not overlap the
 * first's: both pickers' classes are powers of two, so a size falls in the same range in
 * each); calls of `min` bytes and more (a power of two) are picked for. */
void tt_pick_init(struct tt_pick *p, const char *knob, uint32_t first, size_t min);

/* Start every class of `from` bytes and more of the kinds in mask `kinds` (bit k: kind k) on
 * `way` (tt_pick_init: 0) and leave it only for a way whose median is below `margin` times its
 * own (TT_PICK_MARGIN for the way back): a prior for where the trial is noisier than the gap
 * it looks for. */
void tt_pick_prefer(struct tt_pick *p, int way, double margin, size_t from, unsigned kinds);

/*
 * The way for a call of collective `kind` (enum tt_coll) moving `bytes`: 0 ordinary stores, 1
 * streaming. *token: what to hand to tt_pick_done once the call is over, or -1 when it need
 * not be timed.
 */
int tt_pick_way(struct tt_pick *p, int kind, size_t bytes, int *token);

/* The call of `token` took `seconds`; `ok`: it succeeded (a failed call is not counted).
 * Returns 1 when this ended a trial that changed the class's way. */
int tt_pick_done(struct tt_pick *p, int token, double seconds, int ok);

/* tt_pick_done in two halves, for ranks that decide together (lib/engine/pick.c): record the call;
 * returns 1 when it ended a trial, whose medians are then in the class's med. Decide with
 * medians `med` (this rank's, or the ranks' mean): returns 1 when the way changed. */
int tt_pick_record(struct tt_pick *p, int token, double seconds, int ok);
int tt_pick_decide(struct tt_pick *p, int token, const float med[2]);

/* The class a token timed: its collective, its way now, and its bytes range [*lo, *hi). */
const struct tt_pick_class *tt_pick_class_of(const struct tt_pick *p, int token, int *kind,
                                             size_t *lo, size_t *hi);

#endif
