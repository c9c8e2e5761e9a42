/*
 * split_check -- run under tutti-run: tutti_comm_split against membership computed here.
 *
 * Parity groups ranked in reverse (key = -rank), a rank left out (TUTTI_SPLIT_NONE), one group
 * of all (a duplicate), a split of a split, and refused arguments; every new communicator's
 * rank and size are checked, and an all-reduce and a broadcast on it must see exactly its
 * members, while the parent stays usable between. Exit status 0: every check on this rank
 * passed.
 */
#include "check.h"
#include "tutti.h"

#include <stdio.h>
#include <string.h>

static int rank, nranks, failures;

/*
 * Check sub, the communicator of the parent ranks in members[0..size) (in their new order),
 * which must hold this rank at `index`: rank, size, the sum of the members' parent ranks, and
 * a broadcast of the last member's parent rank.
 */
static void check_group(const char *what, tutti_comm_t sub, const int *members, int size, int index)
{
    int r = -1, s = -1;
    long long sum = rank, want = 0, last = index == size - 1 ? rank : -1;

    CHECK(sub != NULL, "%s: no communicator", what);
    if (!sub)
        return;
    tutti_comm_rank(sub, &r);
    tutti_comm_size(sub, &s);
    CHECK(r == index && s == size, "%s: rank %d of %d, expected %d of %d", what, r, s, index, size);
    for (int k = 0; k < size; k++)
        want += members[k];
    CHECK(tutti_all_reduce(&sum, &sum, 1, TUTTI_INT64, TUTTI_SUM, sub, NULL) == TUTTI_SUCCESS,
          "%s: all-reduce: %s", what, tutti_comm_last_error(sub));
    CHECK(sum == want, "%s: the members' ranks sum to %lld, expected %lld", what, sum, want);
    CHECK(tutti_broadcast(&last, &last, 1, TUTTI_INT64, size - 1, sub, NULL) == TUTTI_SUCCESS,
          "%s: broadcast: %s", what, tutti_comm_last_error(sub));
    CHECK(last == members[size - 1], "%s: the last member is %lld, expected %d", what, last,
          members[size - 1]);
}

/* The parent still works: an all-reduce of 1s counts every rank. */
static void check_parent(tutti_comm_t comm, const char *after)
{
    int one = 1;
    CHECK(tutti_all_reduce(&one, &one, 1, TUTTI_INT32, TUTTI_SUM, comm, NULL) == TUTTI_SUCCESS &&
              one == nranks,
          "the parent after %s: %d (%s)", after, one, tutti_comm_last_error(comm));
}

int main(void)
{
    tutti_comm_t comm, sub = NULL, sub2 = NULL;
    int members[64], size, index;

    if (tutti_comm_init_env(&comm) != TUTTI_SUCCESS) {
        printf("FAIL init: %s\n", tutti_last_error());
        return 1;
    }
    tutti_comm_rank(comm, &rank);
    tutti_comm_size(comm, &nranks);

    /* Parity groups, ranked in reverse: members from the highest rank down. */
    CHECK(tutti_comm_split(comm, rank % 2, -rank, &sub, NULL) == TUTTI_SUCCESS, "parity: %s",
          tutti_last_error());
    size = index = 0;
    for (int r = nranks - 1; r >= 0; r--)
        if (r % 2 == rank % 2) {
            if (r == rank)
                index = size;
            members[size++] = r;
        }
    check_group("parity", sub, members, size, index);
    check_parent(comm, "the parity split");

    /* A split of the parity group: its first half (new ranks) apart from the rest. */
    if (sub) {
        int half = (size + 1) / 2, in_first = index < half;
        CHECK(tutti_comm_split(sub, in_first ? 0 : 1, 0, &sub2, NULL) == TUTTI_SUCCESS,
              "nested: %s", tutti_last_error());
        check_group("nested", sub2, in_first ? members : members + half,
                    in_first ? half : size - half, in_first ? index : index - half);
        tutti_comm_destroy(sub2);
    }
    tutti_comm_destroy(sub);

    /* Rank 0 left out; the others in one group in their old order. */
    CHECK(tutti_comm_split(comm, rank == 0 ? TUTTI_SPLIT_NONE : 7, 0, &sub, NULL) == TUTTI_SUCCESS,
          "left out: %s", tutti_last_error());
    if (rank == 0) {
        CHECK(sub == NULL, "left out: rank 0 got a communicator");
    } else {
        for (int r = 1; r < nranks; r++)
            members[r - 1] = r;
        check_group("left out", sub, members, nranks - 1, rank - 1);
    }
    tutti_comm_destroy(sub);

    /* Everyone, same key: a duplicate of the parent. */
    CHECK(tutti_comm_split(comm, 0, 0, &sub, NULL) == TUTTI_SUCCESS, "duplicate: %s",
          tutti_last_error());
    for (int r = 0; r < nranks; r++)
        members[r] = r;
    check_group("duplicate", sub, members, nranks, rank);
    check_parent(comm, "the duplicate");
    tutti_comm_destroy(sub);

    /* Refused arguments, on every rank alike (nothing is sent). */
    CHECK(tutti_comm_split(comm, 0, 0, NULL, NULL) == TUTTI_ERR_INVALID_ARG &&
              strstr(tutti_last_error(), "newcomm"),
          "NULL newcomm: %s", tutti_last_error());
    sub = comm;
    CHECK(tutti_comm_split(comm, -2, 0, &sub, NULL) == TUTTI_ERR_INVALID_ARG &&
              strstr(tutti_last_error(), "color") && sub == NULL,
          "color -2: %s", tutti_last_error());
    CHECK(tutti_comm_split(NULL, 0, 0, &sub, NULL) == TUTTI_ERR_INVALID_ARG, "NULL comm: %s",
          tutti_last_error());
    check_parent(comm, "refused splits");

    tutti_comm_destroy(comm);
    printf("split: rank %d of %d: %s (%d failure(s))\n", rank, nranks,
           failures ? "FAILED" : "all checks passed", failures);
    return failures ? 1 : 0;
}
