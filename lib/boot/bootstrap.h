/*
 * bootstrap.h -- out-of-band setup messages between the ranks of a communicator, over TCP.
 *
 * Rendezvous: every rank connects to the root service (started by tutti_get_id, or by rank 0
 * for MASTER_ADDR), presents the id's secret, its rank, the rank count and the address of its
 * own bootstrap listener, and gets back every rank's listener address. Then ranks message
 * each other directly: tt_boot_send/recv by (peer, tag), matched in order per (peer, tag).
 *
 * Every connection must open with the secret; one that does not, or that sends a malformed
 * header or an oversized length, is dropped with a warning. Nothing a peer sends can make a
 * rank allocate more than TT_BOOT_MAX_MSG for it, crash or wait past the deadline: reads are
 * nonblocking and multiplexed, so a stranger that connects and stays silent stalls nothing.
 */
#ifndef TT_BOOTSTRAP_H
#define TT_BOOTSTRAP_H

#include "lib/boot/id.h"

#include <stdint.h>

#define TT_BOOT_MAX_MSG (64u << 20)

enum {
    TT_TAG_ALLGATHER = 1,
    TT_TAG_P2P_CONN = 2,
    TT_TAG_GAVE_UP = 3,   /* body: why a rank gave up (tell_peers); fails every wait that sees it */
    TT_TAG_SHRINK = 4,    /* tutti_comm_shrink's agreement (boot_ft.c's sends) */
    TT_TAG_CONN = 0x100,  /* + channel */
    TT_TAG_DCONN = 0x200, /* + channel: device (p2p) connections */
};

/*
 * Start the root service listening at *addr (port 0 picks one; *addr gets the bound address)
 * in a detached thread. It serves one rendezvous and ends, or gives up after timeout_s.
 */
tutti_result_t tt_boot_root_start(struct tt_addr *addr, const unsigned char *secret,
                                  double timeout_s);

struct tt_boot;

/* Join the rendezvous of id as rank of nranks. Blocking, bounded by timeout_s. */
tutti_result_t tt_boot_init(const struct tt_id_info *id, int rank, int nranks, double timeout_s,
                            struct tt_boot **out);

tutti_result_t tt_boot_send(struct tt_boot *b, int peer, uint32_t tag, const void *data,
                            size_t len);
/* Receive exactly len bytes; a message of another length is an error naming both. */
tutti_result_t tt_boot_recv(struct tt_boot *b, int peer, uint32_t tag, void *data, size_t len);

/* data holds nranks blocks of `each` bytes; block `rank` is filled in, the rest arrive. */
tutti_result_t tt_boot_allgather(struct tt_boot *b, void *data, size_t each);
tutti_result_t tt_boot_barrier(struct tt_boot *b);

/*
 * This rank's communicator has failed for `why`: tell every other rank (once, best effort,
 * about 2 s at most; not at all while another thread is inside the bootstrap), so a rank
 * waiting in a connection's set-up fails now, and one that sees its connection to this rank
 * fail can say why (tt_boot_told). The thread's error message is left as it was.
 */
void tt_boot_tell(struct tt_boot *b, const char *why);
/* Has a rank told us it gave up (waiting up to wait_s for it)? Its rank, its reason in why;
 * -1 if none did. */
int tt_boot_told(struct tt_boot *b, double wait_s, char *why, size_t size);

/* Waits also end (TUTTI_ERR_ABORTED) once *flag becomes non-zero (tutti_comm_abort). */
void tt_boot_set_abort(struct tt_boot *b, const volatile int *flag);
/* A wait for a peer also ends (TUTTI_ERR_REMOTE) once gone(arg, peer) says its process has
 * exited (the communicator knows the pids of its machine's ranks). Called without blocking,
 * every poll of a wait; gone must not call into the bootstrap. */
void tt_boot_set_gone(struct tt_boot *b, int (*gone)(void *arg, int peer), void *arg);

/* The address of this rank's bootstrap listener (its interface is the one facing the root). */
const struct tt_addr *tt_boot_self_addr(const struct tt_boot *b);

void tt_boot_close(struct tt_boot *b);

/*
 * Surviving failed ranks (boot_ft.c, for tutti_comm_shrink). tt_boot_open makes a bootstrap
 * whose listener (on the interface of `facing`) is up before its ranks are known; its address
 * travels by other means, then tt_boot_join names the secret, this rank and every rank's
 * address, with no rendezvous. tt_boot_ft_send sends one message within deadline: a peer that
 * refuses, resets or is too slow is a result (TUTTI_ERR_REMOTE/TIMEOUT, quietly), nobody is
 * told, give-up notices and the abort flag are not looked at. tt_boot_ft_take takes a queued
 * message of (peer, tag) without waiting (up to cap bytes copied, its length in *len; 1 if
 * one was there). tt_boot_ft_wait waits up to wait_s for anything to arrive. tt_boot_ft_gone:
 * has peer's connection to us, or ours to it, been closed at its end?
 */
tutti_result_t tt_boot_open(const struct tt_addr *facing, double timeout_s, struct tt_boot **out);
tutti_result_t tt_boot_join(struct tt_boot *b, const unsigned char *secret, int rank, int nranks,
                            const struct tt_addr *addrs);
void tt_boot_set_timeout(struct tt_boot *b, double timeout_s);
tutti_result_t tt_boot_ft_send(struct tt_boot *b, int peer, uint32_t tag, const void *data,
                               size_t len, double deadline);
int tt_boot_ft_take(struct tt_boot *b, int peer, uint32_t tag, void *data, size_t cap, size_t *len);
void tt_boot_ft_wait(struct tt_boot *b, double wait_s);
int tt_boot_ft_gone(struct tt_boot *b, int peer);

/*
 * For the fuzzer and tests: a bootstrap with no sockets and one incoming connection, fed
 * bytes as if they had arrived on it (-1 once the connection is dropped), and the count of
 * messages it has queued. Close with tt_boot_close.
 */
struct tt_boot *tt_boot_fuzz_new(int nranks, const unsigned char *secret);
int tt_boot_fuzz_feed(struct tt_boot *b, const void *data, size_t len);
size_t tt_boot_fuzz_queued(const struct tt_boot *b);

/* Wire formats, shared with the root service. */
#define TT_HELLO_ROOT_LEN 64 /* "TTBH", secret, rank, nranks, listen address */
#define TT_HELLO_PEER_LEN 44 /* "TTBP", secret, from rank, nranks */
#define TT_MSG_HDR_LEN 16    /* "TTBM", tag, length (64 bit) */
#define TT_REPLY_HDR_LEN 12  /* "TTBR", status, count */

/*
 * The first host a Slurm node list names ("gpu[07-12,20],login1": "gpu07"), into out; -1 if
 * the list is empty or malformed, or the name does not fit in size bytes.
 */
int tt_hostlist_first(const char *list, char *out, size_t size);

/* Constant-time comparison of two secrets. */
int tt_secret_equal(const unsigned char *a, const unsigned char *b);

#endif
