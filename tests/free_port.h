/*
 * free_port.h -- a loopback TCP port nobody listens on now, for tests that start ranks with a
 * MASTER_PORT rendezvous themselves (test_env, test_faults, test_run). The kernel picks it;
 * another process could take it before the ranks bind it, which these tests accept.
 */
#ifndef TT_TESTS_FREE_PORT_H
#define TT_TESTS_FREE_PORT_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

static inline int free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    bind(fd, (struct sockaddr *)&a, sizeof(a));
    getsockname(fd, (struct sockaddr *)&a, &len);
    close(fd);
    return ntohs(a.sin_port);
}

#endif
