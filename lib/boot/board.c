/* board.c -- the node status board; see board.h. */
#include "lib/boot/board.h"
#include "lib/core/comm.h"
#include "lib/base/error.h"
#include "lib/base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int tt_board_init(struct tutti_comm *c)
{
    struct tt_comm_board *b = &c->board;
    int first = c->topo.local_of[c->rank] == 0, fd = -1;
    char name[128];
    tutti_result_t rc;

    memset(b, 0, sizeof(*b));
    b->nlines = c->local_size;
    b->map_len = ((unsigned long)b->nlines * sizeof(struct tt_board_line) + 4095) & ~4095ul;
    snprintf(name, sizeof(name), "/tutti-%s-board-%d", c->job_tag, c->topo.node_of[c->rank]);
    if (first) {
        shm_unlink(name); /* a killed job's, with the same tag */
        fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
        /* fallocate: on a full /dev/shm, no board rather than SIGBUS at its first write */
        if (fd >= 0 && (ftruncate(fd, (off_t)b->map_len) != 0 ||
                        posix_fallocate(fd, 0, (off_t)b->map_len) != 0)) {
            close(fd);
            fd = -1;
        }
    }
    rc = tt_boot_barrier(c->boot); /* created before anyone opens it */
    if (rc != TUTTI_SUCCESS) {
        /* A rank failed (killed while joining), maybe the one that made it: every rank of the
         * node removes the name, so that it cannot be left behind. */
        if (fd >= 0)
            close(fd);
        shm_unlink(name);
        goto out;
    }
    if (!first)
        fd = shm_open(name, O_RDWR, 0600);
    if (fd >= 0) {
        b->map = mmap(NULL, b->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (b->map == MAP_FAILED)
            b->map = NULL;
    }
    rc = tt_boot_barrier(c->boot); /* everyone has mapped it */
    /* Every rank of the node removes the name, not only its maker: the maker may be killed
     * after the barrier let the others through and before its own unlink (found by the faults
     * test under ASan). The rest find it gone. */
    shm_unlink(name);
    if (!b->map)
        TT_INFO(TT_SUB_INIT, "status board unavailable (%s): stall reports show less", name);
    else
        b->lines = b->map;
out:
    return rc;
}

void tt_board_free(struct tt_comm_board *b)
{
    if (b->map)
        munmap(b->map, b->map_len);
    memset(b, 0, sizeof(*b));
}
