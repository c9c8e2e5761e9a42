/*
 * socket.h -- TCP helpers for bootstrap: addresses, interface choice, bounded I/O.
 *
 * Every call that can wait takes an absolute deadline (tt_now() seconds) and fails with
 * TUTTI_ERR_TIMEOUT after it; none waits unbounded.
 */
#ifndef TT_SOCKET_H
#define TT_SOCKET_H

#include "tutti.h"

#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>

/* An IPv4 or IPv6 address with port, and its packed wire form. */
struct tt_addr {
    struct sockaddr_storage ss;
    socklen_t len;
};

#define TT_ADDR_PACKED 20 /* family (2) + port (2) + address (16) */

void tt_addr_pack(const struct tt_addr *a, unsigned char out[TT_ADDR_PACKED]);
/* Returns 0, or -1 if the bytes are not an address. */
int tt_addr_unpack(const unsigned char in[TT_ADDR_PACKED], struct tt_addr *a);
/* "10.0.0.1:1234" or "[fe80::1]:1234". */
const char *tt_addr_str(const struct tt_addr *a, char *buf, size_t size);
int tt_addr_port(const struct tt_addr *a);
void tt_addr_set_port(struct tt_addr *a, int port);

/*
 * Pick the interface for bootstrap per TUTTI_SOCKET_IFNAME (see README): writes its address
 * (port 0) and name. Default: first IPv4 interface that is up and not loopback or docker,
 * else loopback.
 */
tutti_result_t tt_if_pick(struct tt_addr *addr, char *ifname, size_t ifname_size);

/* Resolve "host" (name or literal) and port into an address. */
tutti_result_t tt_addr_resolve(const char *host, int port, struct tt_addr *addr);

/* Nonblocking listening socket bound to *addr (port 0: any); *addr gets the bound address. */
tutti_result_t tt_sock_listen(struct tt_addr *addr, int backlog, int *fd);

/* Connect (nonblocking fd), retrying while refused until deadline (the listener may not be
 * up yet). */
tutti_result_t tt_sock_connect(const struct tt_addr *addr, double deadline, int *fd);

/* Connect to a listener that was up (its address came from it): a refusal means it is gone, and
 * fails at once with TUTTI_ERR_REMOTE; other errors are retried as tt_sock_connect does. */
tutti_result_t tt_sock_connect_up(const struct tt_addr *addr, double deadline, int *fd);

/* Write / read exactly len bytes before deadline. A closed peer is TUTTI_ERR_REMOTE. */
tutti_result_t tt_sock_write(int fd, const void *buf, size_t len, double deadline);
/* Has the other end closed fd (an error, a hang-up, or end of file with nothing left to read)?
 * Never blocks; reads nothing. */
int tt_sock_closed(int fd);

tutti_result_t tt_sock_read(int fd, void *buf, size_t len, double deadline);

/* Big-endian field access for wire formats. */
static inline void tt_put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static inline uint32_t tt_get32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void tt_put64(unsigned char *p, uint64_t v)
{
    tt_put32(p, (uint32_t)(v >> 32));
    tt_put32(p + 4, (uint32_t)v);
}

static inline uint64_t tt_get64(const unsigned char *p)
{
    return (uint64_t)tt_get32(p) << 32 | tt_get32(p + 4);
}

#endif
