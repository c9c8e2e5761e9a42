/* Built outside the tree against an installed tutti: cc example.c $(pkg-config --cflags --libs
 * tutti) */
#include <tutti.h>
#include <stdio.h>

int main(void)
{
    tutti_comm_t comm;
    int rank, size;
    double x[3], y[3];

    if (tutti_version() != TUTTI_VERSION_CODE) {
        fprintf(stderr, "header/library version mismatch\n");
        return 1;
    }
    if (tutti_comm_init_env(&comm) != TUTTI_SUCCESS) {
        fprintf(stderr, "init: %s\n", tutti_last_error());
        return 1;
    }
    tutti_comm_rank(comm, &rank);
    tutti_comm_size(comm, &size);
    for (int i = 0; i < 3; i++)
        x[i] = rank + i;
    if (tutti_all_reduce(x, y, 3, TUTTI_FLOAT64, TUTTI_SUM, comm, NULL) != TUTTI_SUCCESS) {
        fprintf(stderr, "all_reduce: %s\n", tutti_comm_last_error(comm));
        return 1;
    }
    /* sum over ranks of (r + i) = n(n-1)/2 + n*i */
    for (int i = 0; i < 3; i++)
        if (y[i] != size * (size - 1) / 2.0 + size * i) {
            fprintf(stderr, "rank %d: element %d is %g\n", rank, i, y[i]);
            return 1;
        }
    printf("example: rank %d of %d ok\n", rank, size);
    tutti_comm_destroy(comm);
    return 0;
}
