/*
 * link-probe.h -- what bench/link-probe.c (the ways of moving bytes, the timing, the options)
 * and link-probe-net.c (the connections) share.
 */
#ifndef LINK_PROBE_H
#define LINK_PROBE_H

#include <stddef.h>

#define MAXS 16 /* connections at most (-s) */

extern int nsocks;   /* connections between the two ends (-s) */
extern int sockbuf;  /* SO_SNDBUF and SO_RCVBUF of each (-B; 0: the kernel's autotuning) */
extern int listener; /* the serving end's listening socket until accept_all, else -1 */

double now(void);
void die(const char *what);
void full_write(int fd, const char *p, size_t n);
void full_read(int fd, char *p, size_t n);
/* A start both ends agree on: the leader sends a byte on fd, the other answers. */
void common_start(int fd, int leader);
/* Listen on ADDR:PORT (0: any port); the port in *bound. */
void serve(const char *addr, int port, int *bound);
/* The serving end: accept nsocks connections, each into its place in fds. */
void accept_all(int *fds);
/* The other end: make nsocks connections to ADDR:PORT. */
void connect_all(const char *addr, int port, int *fds);

#endif
