/*
 * boot_int.h -- the rank side of bootstrap inside lib/boot: its state, shared by bootstrap.c
 * (rendezvous, sending, receiving in order) and boot_in.c (reading what arrives).
 */
#ifndef TT_BOOT_INT_H
#define TT_BOOT_INT_H

#include "lib/boot/bootstrap.h"

#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define BOOT_MAX_PENDING                                                                           \
    256 /* connections without a valid hello yet; when full, the oldest goes                       \
         */
#define BOOT_HELLO_WAIT 3.0

enum { IN_HELLO, IN_HDR, IN_BODY };

struct boot_msg {
    struct boot_msg *next;
    int from;
    uint32_t tag;
    size_t len;
    size_t cap; /* bytes allocated: grows as the body arrives, never ahead of it */
    unsigned char *data;
};

#define BOOT_FIRST_ALLOC (64 * 1024)

/* An accepted connection and where its reader is. */
struct boot_in {
    int fd;
    int peer; /* -1 until its hello checks out */
    int state;
    short ready;
    size_t got;
    double deadline;
    unsigned char hdr[TT_HELLO_PEER_LEN];
    struct boot_msg *msg;
};

struct tt_boot {
    int rank, nranks;
    unsigned char secret[TT_SECRET_BYTES];
    double timeout;
    int lfd;
    struct tt_addr self;
    struct tt_addr *addrs;
    int *out_fd;
    char *peer_closed;
    struct boot_in *in;
    int nin, incap;
    struct boot_msg *head, **tailp;
    struct pollfd *pfd;
    int pfdcap;
    const volatile int *abort;
    int (*gone)(void *arg, int peer); /* tt_boot_set_gone: has peer's process exited? */
    void *gone_arg;
    int told;     /* this rank has told the others it gave up (or was told) */
    double stall; /* TUTTI_STALL_WARN: a wait this long is logged */
    /* Held by every public entry point: a communicator's error may be told (tt_boot_tell) from
     * a stream's thread while the caller's thread waits in a connection's set-up. */
    pthread_mutex_t lock;
};

/* boot_in.c: queue a whole message; drop accepted connection i; wait for what arrives (and
 * for wfd to take bytes, unless -1) until deadline. */
void tt_boot_enqueue(struct tt_boot *b, struct boot_msg *m);
void tt_boot_in_drop(struct tt_boot *b, int i);
int tt_boot_poll(struct tt_boot *b, int wfd, double deadline);
/* Read what has arrived, without waiting: a connection just accepted is read at the next poll,
 * and a peer may have sent on a new connection before it closed or exited. */
void tt_boot_drain(struct tt_boot *b);

#endif
