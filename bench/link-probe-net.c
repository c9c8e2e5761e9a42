/*
 * link-probe-net.c -- bench/link-probe's connections (link-probe.h): the listening and the
 * connecting end, each connection tuned as a transport may tune it, whole reads and writes,
 * and the start both ends agree on.
 */
#include "link-probe.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int nsocks = 2, sockbuf = 4 << 20, listener = -1;

double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void die(const char *what)
{
    perror(what);
    exit(1);
}

static void tune(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (sockbuf > 0) { /* else the kernel's autotuning */
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sockbuf, sizeof(sockbuf));
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sockbuf, sizeof(sockbuf));
    }
}

void full_write(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            die("send");
        p += w;
        n -= (size_t)w;
    }
}

void full_read(int fd, char *p, size_t n)
{
    while (n) {
        ssize_t r = recv(fd, p, n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            die("recv");
        p += r;
        n -= (size_t)r;
    }
}

/* A start both ends agree on: the leader sends a byte on fd, the other answers. */
void common_start(int fd, int leader)
{
    char c = 0;

    if (leader) {
        full_write(fd, &c, 1);
        full_read(fd, &c, 1);
    } else {
        full_read(fd, &c, 1);
        full_write(fd, &c, 1);
    }
}

/* Listen on ADDR:PORT (0: any port); the port in *bound. */
void serve(const char *addr, int port, int *bound)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    socklen_t len = sizeof(a);
    int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);

    if (l < 0 || inet_pton(AF_INET, addr, &a.sin_addr) != 1)
        die("listen address");
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(l, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(l, MAXS) != 0)
        die("bind/listen");
    getsockname(l, (struct sockaddr *)&a, &len);
    *bound = ntohs(a.sin_port);
    listener = l;
}

void accept_all(int *fds)
{
    for (int s = 0; s < nsocks; s++) {
        int fd = accept(listener, NULL, NULL), idx = 0;
        if (fd < 0)
            die("accept");
        full_read(fd, (char *)&idx, sizeof(idx));
        if (idx < 0 || idx >= nsocks)
            die("bad index");
        tune(fd);
        fds[idx] = fd;
    }
    close(listener);
    listener = -1;
}

void connect_all(const char *addr, int port, int *fds)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};

    if (inet_pton(AF_INET, addr, &a.sin_addr) != 1)
        die("address");
    for (int s = 0; s < nsocks; s++) {
        int fd = -1;
        for (int tries = 0; tries < 500; tries++) {
            fd = socket(AF_INET, SOCK_STREAM, 0);
            if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0)
                break;
            close(fd);
            fd = -1;
            usleep(10000);
        }
        if (fd < 0)
            die("connect");
        tune(fd);
        full_write(fd, (char *)&s, sizeof(s));
        fds[s] = fd;
    }
}
