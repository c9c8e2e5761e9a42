/*
 * free_port.h -- a loopback TCP port nobody listens on now, for tests that start ranks with a
 * MASTER_PORT rendezvous themselves (test_env, test_faults, test_run). It is drawn from below
 * the kernel's ephemeral range (ip_local_port_range), where no connection of a test running
 * beside this one can be given it as its local port; a port the kernel hands out would be in
 * that range, and was taken that way between the check and the ranks' bind.
 */
#ifndef TT_TESTS_FREE_PORT_H
#define TT_TESTS_FREE_PORT_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static inline int port_is_free(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM, 0), ok;

    a.sin_port = htons((unsigned short)port);
    ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

static inline int free_port(void)
{
    static unsigned seed;
    int lo = 32768, hi = 60999;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");

    if (f) {
        if (fscanf(f, "%d %d", &lo, &hi) != 2)
            lo = 32768;
        fclose(f);
    }
    if (!seed)
        seed = ((unsigned)getpid() * 2654435761u ^ (unsigned)time(NULL)) | 1u;
    if (lo < 12000)
        lo = 12000;
    for (int tries = 0; tries < 1000; tries++) {
        int port = lo - 10000 + (int)(rand_r(&seed) % 10000u);
        if (port_is_free(port))
            return port;
    }
    return 0;
}

#endif
