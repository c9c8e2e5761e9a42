/*
 * elastic_check -- an elastic job for tutti-run --elastic (test_elastic.c).
 *
 *   elastic_check EPOCHS [DIE_RANK DIE_EPOCH]
 *
 * Each rank holds a state of 4096 floats. An epoch is 10 steps; a step all-reduces every rank's
 * contribution (the same formula on every rank: a function of the epoch, step and index) and
 * adds the mean to the state, so the state after the last epoch is the sum of the formula over
 * every step, whatever the job's size was at each: it is checked element by element at the end.
 * A step that fails (a rank died) is followed by tutti_comm_shrink and a broadcast of rank 0's
 * (epoch, step, state), and the job goes on from there. At the end of every epoch the members
 * call tutti_comm_grow; newcomers (tutti_comm_init_env with TUTTI_JOINING=1, as tutti-run
 * starts them) receive (epoch, step, state) by the same broadcast. The rank that was DIE_RANK
 * when the job started kills itself (SIGKILL) at the start of epoch DIE_EPOCH.
 *
 * Prints "GREW a -> b", "SHRUNK a -> b", and at the end "FINAL size N state ok" (exit 0), or
 * "FAIL ..." (exit 1); a fenced rank prints "FENCED" and exits 3.
 */
#include "tutti.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LEN 4096
#define STEPS 10

struct state {
    int32_t epoch, step;
    float s[LEN];
};

static float formula(int epoch, int step, int i)
{
    return (float)((epoch * 7 + step * 3 + i) % 17);
}

static void fail(const char *what, tutti_comm_t comm)
{
    printf("FAIL %s: %s\n", what, comm ? tutti_comm_last_error(comm) : tutti_last_error());
    fflush(stdout);
    exit(1);
}

/* After a shrink or a grow: everyone takes rank 0's (epoch, step, state). */
static tutti_result_t sync_state(struct state *st, tutti_comm_t comm)
{
    return tutti_broadcast(st, st, sizeof(*st), TUTTI_UINT8, 0, comm, NULL);
}

static tutti_comm_t shrink(tutti_comm_t comm, struct state *st)
{
    tutti_comm_t next;
    int n, m;

    for (;;) {
        tutti_result_t rc = tutti_comm_shrink(comm, &next, NULL);
        if (rc == TUTTI_ERR_FENCED) {
            printf("FENCED: %s\n", tutti_comm_last_error(comm));
            exit(3);
        }
        if (rc != TUTTI_SUCCESS)
            fail("tutti_comm_shrink", comm);
        tutti_comm_size(comm, &n);
        tutti_comm_size(next, &m);
        printf("SHRUNK %d -> %d\n", n, m);
        tutti_comm_destroy(comm);
        comm = next;
        if (sync_state(st, comm) == TUTTI_SUCCESS)
            return comm;
    }
}

int main(int argc, char **argv)
{
    int epochs, die_rank = -1, die_epoch = -1, rank, n, members = 0;
    const char *r0 = getenv("TUTTI_RANK");
    static struct state st;
    static float contrib[LEN], sum[LEN];
    tutti_comm_t comm, next;

    if (argc != 2 && argc != 4) {
        fprintf(stderr, "usage: elastic_check EPOCHS [DIE_RANK DIE_EPOCH]\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    epochs = atoi(argv[1]);
    if (argc == 4) {
        die_rank = atoi(argv[2]);
        die_epoch = atoi(argv[3]);
    }
    if (tutti_comm_init_env(&comm) != TUTTI_SUCCESS)
        fail("init", NULL);
    tutti_comm_rank(comm, &rank);
    tutti_comm_joined(comm, &members);
    if (members > 0) { /* a newcomer: the members' state first */
        if (sync_state(&st, comm) != TUTTI_SUCCESS)
            comm = shrink(comm, &st);
        printf("JOINED as rank %d at epoch %d\n", rank, (int)st.epoch);
        die_rank = -1; /* a replacement does not die again */
    }
    while (st.epoch < epochs) {
        if (st.step == 0 && die_rank >= 0 && r0 && atoi(r0) == die_rank && st.epoch == die_epoch)
            raise(SIGKILL);
        tutti_comm_size(comm, &n);
        for (int i = 0; i < LEN; i++)
            contrib[i] = formula(st.epoch, st.step, i);
        if (tutti_all_reduce(contrib, sum, LEN, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL) !=
            TUTTI_SUCCESS) {
            comm = shrink(comm, &st);
            continue;
        }
        for (int i = 0; i < LEN; i++)
            st.s[i] += sum[i] / (float)n;
        usleep(20000);
        if (++st.step < STEPS)
            continue;
        st.step = 0;
        st.epoch++;
        /* A join point. */
        if (tutti_comm_grow(comm, 0, &next, NULL) != TUTTI_SUCCESS) {
            comm = shrink(comm, &st);
            continue;
        }
        if (next) {
            int m;
            tutti_comm_size(next, &m);
            printf("GREW %d -> %d at epoch %d\n", n, m, (int)st.epoch);
            tutti_comm_destroy(comm);
            comm = next;
            if (sync_state(&st, comm) != TUTTI_SUCCESS)
                comm = shrink(comm, &st);
        }
    }
    tutti_comm_size(comm, &n);
    for (int i = 0; i < LEN; i++) {
        float want = 0;
        for (int e = 0; e < epochs; e++)
            for (int s = 0; s < STEPS; s++)
                want += formula(e, s, i);
        if (st.s[i] != want) {
            printf("FAIL state[%d] = %g, not %g\n", i, st.s[i], want);
            return 1;
        }
    }
    /* Every rank ends at the same size: the last call is a collective. */
    if (tutti_all_reduce(&n, &members, 1, TUTTI_INT32, TUTTI_MAX, comm, NULL) != TUTTI_SUCCESS ||
        members != n)
        fail("the final all-reduce", comm);
    printf("FINAL size %d state ok\n", n);
    tutti_comm_destroy(comm);
    return 0;
}
