/*
 * rank_helper -- a tutti rank that misbehaves on request, for the launcher tests.
 *
 *   rank_helper DIR MODE [ARG]
 * Every rank initialises a communicator, runs one all-reduce, writes its pid to DIR/pid.RANK
 * and then, by MODE:
 *   exit RANK CODE   rank RANK exits with CODE; the others block in another all-reduce
 *   kill RANK        rank RANK kills itself with SIGKILL; the others block
 *   wait             every rank waits in an all-reduce that cannot complete (rank 0 sleeps)
 *   ok               every rank does a barrier and exits 0
 */
#include "tutti.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    tutti_comm_t comm;
    int rank, n;
    float x[1024] = {0}, y[1024];
    char path[512];
    FILE *f;

    if (argc < 3)
        return 2;
    if (tutti_comm_init_env(&comm) != TUTTI_SUCCESS) {
        fprintf(stderr, "init: %s\n", tutti_last_error());
        return 1;
    }
    tutti_comm_rank(comm, &rank);
    tutti_comm_size(comm, &n);
    if (tutti_all_reduce(x, y, 1024, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL) != TUTTI_SUCCESS)
        return 1;
    snprintf(path, sizeof(path), "%s/pid.%d", argv[1], rank);
    f = fopen(path, "w");
    if (!f)
        return 1;
    fprintf(f, "%d\n", (int)getpid());
    fclose(f);
    int local;
    tutti_comm_local_rank(comm, &local);
    printf("rank %d ready (local rank %d, %d ranks)\n", rank, local, n);
    fflush(stdout);
    tutti_barrier(comm, NULL);
    if (strcmp(argv[2], "exit") == 0 && argc > 4 && rank == atoi(argv[3]))
        return atoi(argv[4]);
    if (strcmp(argv[2], "kill") == 0 && argc > 3 && rank == atoi(argv[3]))
        raise(SIGKILL);
    if (strcmp(argv[2], "ok") == 0) {
        tutti_barrier(comm, NULL);
        tutti_comm_destroy(comm);
        return 0;
    }
    if (strcmp(argv[2], "wait") == 0 && rank == 0)
        for (;;)
            pause();
    /* Blocks: a peer is gone or asleep. */
    tutti_all_reduce(x, y, 1024, TUTTI_FLOAT32, TUTTI_SUM, comm, NULL);
    fprintf(stderr, "rank %d: all-reduce returned: %s\n", rank, tutti_comm_last_error(comm));
    return 1;
}
