/* socket.c -- see socket.h. */
#include "lib/boot/socket.h"
#include "lib/base/config.h"
#include "lib/base/error.h"
#include "lib/base/log.h"
#include "lib/base/wait.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void tt_addr_pack(const struct tt_addr *a, unsigned char out[TT_ADDR_PACKED])
{
    memset(out, 0, TT_ADDR_PACKED);
    if (a->ss.ss_family == AF_INET) {
        const struct sockaddr_in *s = (const struct sockaddr_in *)&a->ss;
        out[1] = 4;
        memcpy(out + 2, &s->sin_port, 2);
        memcpy(out + 4, &s->sin_addr, 4);
    } else if (a->ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)&a->ss;
        out[1] = 6;
        memcpy(out + 2, &s->sin6_port, 2);
        memcpy(out + 4, &s->sin6_addr, 16);
    }
}

int tt_addr_unpack(const unsigned char in[TT_ADDR_PACKED], struct tt_addr *a)
{
    memset(a, 0, sizeof(*a));
    if (in[0] == 0 && in[1] == 4) {
        struct sockaddr_in *s = (struct sockaddr_in *)&a->ss;
        s->sin_family = AF_INET;
        memcpy(&s->sin_port, in + 2, 2);
        memcpy(&s->sin_addr, in + 4, 4);
        a->len = sizeof(*s);
        return 0;
    }
    if (in[0] == 0 && in[1] == 6) {
        struct sockaddr_in6 *s = (struct sockaddr_in6 *)&a->ss;
        s->sin6_family = AF_INET6;
        memcpy(&s->sin6_port, in + 2, 2);
        memcpy(&s->sin6_addr, in + 4, 16);
        a->len = sizeof(*s);
        return 0;
    }
    return -1;
}

const char *tt_addr_str(const struct tt_addr *a, char *buf, size_t size)
{
    char host[INET6_ADDRSTRLEN] = "?";

    if (a->ss.ss_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)&a->ss)->sin_addr, host, sizeof(host));
        snprintf(buf, size, "%s:%d", host, tt_addr_port(a));
    } else if (a->ss.ss_family == AF_INET6) {
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)&a->ss)->sin6_addr, host, sizeof(host));
        snprintf(buf, size, "[%s]:%d", host, tt_addr_port(a));
    } else {
        snprintf(buf, size, "(no address)");
    }
    return buf;
}

int tt_addr_port(const struct tt_addr *a)
{
    if (a->ss.ss_family == AF_INET)
        return ntohs(((const struct sockaddr_in *)&a->ss)->sin_port);
    if (a->ss.ss_family == AF_INET6)
        return ntohs(((const struct sockaddr_in6 *)&a->ss)->sin6_port);
    return 0;
}

void tt_addr_set_port(struct tt_addr *a, int port)
{
    if (a->ss.ss_family == AF_INET)
        ((struct sockaddr_in *)&a->ss)->sin_port = htons((uint16_t)port);
    else if (a->ss.ss_family == AF_INET6)
        ((struct sockaddr_in6 *)&a->ss)->sin6_port = htons((uint16_t)port);
}

/* Does name match the list? mode '=': exact names; otherwise prefixes. */
static int if_in_list(const char *name, const char *list, int exact)
{
    char buf[256];

    snprintf(buf, sizeof(buf), "%s", list);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (exact ? strcmp(name, t) == 0 : strncmp(name, t, strlen(t)) == 0)
            return 1;
    }
    return 0;
}

static int if_wanted(const char *name, unsigned flags, const char *spec)
{
    if (!(flags & IFF_UP))
        return 0;
    if (!*spec)
        return !(flags & IFF_LOOPBACK) && strncmp(name, "docker", 6) != 0;
    if (spec[0] == '^') {
        int exact = spec[1] == '=';
        return !if_in_list(name, spec + 1 + exact, exact);
    }
    if (spec[0] == '=')
        return if_in_list(name, spec + 1, 1);
    return if_in_list(name, spec, 0);
}

tutti_result_t tt_if_pick(struct tt_addr *addr, char *ifname, size_t ifname_size)
{
    const char *spec = tt_env_str("TUTTI_SOCKET_IFNAME");
    struct ifaddrs *ifs, *best = NULL, *lo = NULL;

    if (getifaddrs(&ifs) != 0)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "getifaddrs failed: %m");
    /* Prefer IPv4; take IPv6 only if no IPv4 interface matches. */
    for (int pass = 0; pass < 2 && !best; pass++) {
        int family = pass == 0 ? AF_INET : AF_INET6;
        for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
            if (!i->ifa_addr || i->ifa_addr->sa_family != family)
                continue;
            if (family == AF_INET6 &&
                IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr))
                continue;
            if ((i->ifa_flags & IFF_LOOPBACK) && (i->ifa_flags & IFF_UP) && !lo &&
                family == AF_INET)
                lo = i;
            if (if_wanted(i->ifa_name, i->ifa_flags, spec)) {
                best = i;
                break;
            }
        }
    }
    if (!best && !*spec)
        best = lo;
    if (!best) {
        freeifaddrs(ifs);
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                       "no network interface matches TUTTI_SOCKET_IFNAME='%s'", spec);
    }
    memset(addr, 0, sizeof(*addr));
    addr->len = best->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
                                                     : sizeof(struct sockaddr_in6);
    memcpy(&addr->ss, best->ifa_addr, addr->len);
    tt_addr_set_port(addr, 0);
    snprintf(ifname, ifname_size, "%s", best->ifa_name);
    freeifaddrs(ifs);
    return TUTTI_SUCCESS;
}

tutti_result_t tt_addr_resolve(const char *host, int port, struct tt_addr *addr)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
    int err = getaddrinfo(host, NULL, &hints, &res);

    if (err != 0)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "cannot resolve host '%s': %s", host,
                       gai_strerror(err));
    memset(addr, 0, sizeof(*addr));
    memcpy(&addr->ss, res->ai_addr, res->ai_addrlen);
    addr->len = res->ai_addrlen;
    tt_addr_set_port(addr, port);
    freeaddrinfo(res);
    return TUTTI_SUCCESS;
}

static int set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

tutti_result_t tt_sock_listen(struct tt_addr *addr, int backlog, int *fd)
{
    char buf[80];
    int s = socket(addr->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

    if (s < 0)
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "socket failed: %m");
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(s, (struct sockaddr *)&addr->ss, addr->len) != 0) {
        int err = errno;
        close(s);
        errno = err;
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "bind to %s failed: %m",
                       tt_addr_str(addr, buf, sizeof(buf)));
    }
    if (listen(s, backlog) != 0 || set_nonblock(s) != 0) {
        int err = errno;
        close(s);
        errno = err;
        return tt_fail(NULL, TUTTI_ERR_SYSTEM, "listen on %s failed: %m",
                       tt_addr_str(addr, buf, sizeof(buf)));
    }
    addr->len = sizeof(addr->ss);
    getsockname(s, (struct sockaddr *)&addr->ss, &addr->len);
    *fd = s;
    return TUTTI_SUCCESS;
}

static int poll_one(int fd, short events, double deadline)
{
    double left = deadline - tt_now();
    struct pollfd p = {.fd = fd, .events = events};

    if (left <= 0)
        return 0;
    return poll(&p, 1, left > 0.1 ? 100 : (int)(left * 1000) + 1);
}

static tutti_result_t connect_loop(const struct tt_addr *addr, double deadline, int retry_refused,
                                   int *fd)
{
    char buf[80];
    int err = 0, one = 1;

    for (;;) {
        int s = socket(addr->ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        socklen_t elen = sizeof(err);

        if (s < 0)
            return tt_fail(NULL, TUTTI_ERR_SYSTEM, "socket failed: %m");
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        set_nonblock(s);
        if (connect(s, (const struct sockaddr *)&addr->ss, addr->len) == 0) {
            *fd = s;
            return TUTTI_SUCCESS;
        }
        err = errno;
        if (err == EINPROGRESS) {
            while (tt_now() < deadline) {
                if (poll_one(s, POLLOUT, deadline) > 0)
                    break;
            }
            err = ETIMEDOUT;
            getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &elen);
            if (err == 0) {
                *fd = s;
                return TUTTI_SUCCESS;
            }
        }
        close(s);
        if (err != ECONNREFUSED && err != ETIMEDOUT && err != ECONNRESET && err != EAGAIN)
            break;
        if (err == ECONNREFUSED && !retry_refused)
            return tt_fail(NULL, TUTTI_ERR_REMOTE,
                           "connect to %s: refused: nothing listens there any more (the process "
                           "exited or gave up)",
                           tt_addr_str(addr, buf, sizeof(buf)));
        if (tt_now() >= deadline)
            break;
        /* Not listening yet: try again shortly. */
        nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
    }
    errno = err;
    if (err == ECONNREFUSED || err == ETIMEDOUT)
        return tt_fail(NULL, TUTTI_ERR_TIMEOUT, "connect to %s: %m until the deadline",
                       tt_addr_str(addr, buf, sizeof(buf)));
    return tt_fail(NULL, TUTTI_ERR_SYSTEM, "connect to %s failed: %m",
                   tt_addr_str(addr, buf, sizeof(buf)));
}

tutti_result_t tt_sock_connect(const struct tt_addr *addr, double deadline, int *fd)
{
    return connect_loop(addr, deadline, 1, fd);
}

tutti_result_t tt_sock_connect_up(const struct tt_addr *addr, double deadline, int *fd)
{
    return connect_loop(addr, deadline, 0, fd);
}

tutti_result_t tt_sock_write(int fd, const void *buf, size_t len, double deadline)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return tt_fail(
                NULL, errno == EPIPE || errno == ECONNRESET ? TUTTI_ERR_REMOTE : TUTTI_ERR_SYSTEM,
                "send failed: %m");
        if (tt_now() >= deadline)
            return tt_fail(NULL, TUTTI_ERR_TIMEOUT, "send timed out");
        poll_one(fd, POLLOUT, deadline);
    }
    return TUTTI_SUCCESS;
}

int tt_sock_closed(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    char c;

    return poll(&p, 1, 0) == 1 &&
           ((p.revents & (POLLERR | POLLHUP)) ||
            ((p.revents & POLLIN) && recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0));
}

tutti_result_t tt_sock_read(int fd, void *buf, size_t len, double deadline)
{
    char *p = buf;

    while (len > 0) {
        ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n == 0)
            return tt_fail(NULL, TUTTI_ERR_REMOTE, "connection closed by peer");
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return tt_fail(NULL, errno == ECONNRESET ? TUTTI_ERR_REMOTE : TUTTI_ERR_SYSTEM,
                           "recv failed: %m");
        if (tt_now() >= deadline)
            return tt_fail(NULL, TUTTI_ERR_TIMEOUT, "recv timed out");
        poll_one(fd, POLLIN, deadline);
    }
    return TUTTI_SUCCESS;
}
