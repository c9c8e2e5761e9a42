/*
 * run_env.c -- what tutti-run prepares for its ranks before it starts them: their
 * environment, the program's path, file descriptors, a port for a PyTorch store, and the
 * shared-memory names a killed job left.
 */
#include "run_env.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* Remove shared-memory names of this job that ranks could not remove (killed in setup). */
void run_shm_cleanup(const char *tag)
{
    char prefix_name[96];
    DIR *d = opendir("/dev/shm");
    struct dirent *e;

    if (!d)
        return;
    snprintf(prefix_name, sizeof(prefix_name), "tutti-%s-", tag);
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix_name, strlen(prefix_name)) == 0) {
            char path[512];
            snprintf(path, sizeof(path), "/%s", e->d_name);
            shm_unlink(path);
        }
    }
    closedir(d);
}

/*
 * The program's path, as execvp would find it (NULL and errno set if not). Looked up before
 * fork, like everything a child needs: see spawn.
 */
char *run_find_program(const char *name)
{
    const char *path = getenv("PATH"), *p;
    size_t len = strlen(name);

    if (strchr(name, '/'))
        return access(name, X_OK) == 0 ? strdup(name) : NULL;
    errno = ENOENT;
    for (p = path && *path ? path : "/bin:/usr/bin"; p;
         p = strchr(p, ':') ? strchr(p, ':') + 1 : NULL) {
        size_t dl = strcspn(p, ":");
        char *full = malloc(dl + len + 2);
        if (!full)
            return NULL;
        snprintf(full, dl + len + 2, "%.*s%s%s", (int)dl, dl ? p : "", dl ? "/" : "", name);
        if (access(full, X_OK) == 0)
            return full;
        free(full);
    }
    errno = ENOENT;
    return NULL;
}

/* Node (or host) k of K holds ranks [ceil(k*n/K), ceil((k+1)*n/K)). */
int run_block_first(int k, int of, int nranks)
{
    return (int)(((long long)k * nranks + of - 1) / of);
}

/* The environment of rank r: ours with its TUTTI_RANK, TUTTI_LOCAL_RANK (and TUTTI_HOSTID
 * where node >= 0, TUTTI_JOINING=1 for a newcomer), and torchrun's RANK, LOCAL_RANK,
 * LOCAL_WORLD_SIZE for PyTorch programs. One allocation (pointers, then the new strings): free()
 * releases it. */
char **run_rank_env(int r, int local, int lsize, int node, int joining)
{
    static const char *const mine[] = {"TUTTI_RANK=", "TUTTI_LOCAL_RANK=", "RANK=",
                                       "LOCAL_RANK=", "LOCAL_WORLD_SIZE=", "TUTTI_JOINING="};
    extern char **environ;
    size_t n = 0, k = 0;
    char **env, *own;

    while (environ[n])
        n++;
    env = calloc(1, (n + 8) * sizeof(*env) + 7 * 64);
    if (!env)
        return NULL;
    own = (char *)(env + n + 8);
    for (size_t i = 0; i < n; i++) {
        int drop = node >= 0 && strncmp(environ[i], "TUTTI_HOSTID=", 13) == 0;
        for (size_t m = 0; m < sizeof(mine) / sizeof(mine[0]); m++)
            drop |= strncmp(environ[i], mine[m], strlen(mine[m])) == 0;
        if (!drop)
            env[k++] = environ[i];
    }
    snprintf(env[k++] = own, 64, "TUTTI_RANK=%d", r);
    snprintf(env[k++] = own + 64, 64, "TUTTI_LOCAL_RANK=%d", local);
    snprintf(env[k++] = own + 128, 64, "RANK=%d", r);
    snprintf(env[k++] = own + 192, 64, "LOCAL_RANK=%d", local);
    snprintf(env[k++] = own + 256, 64, "LOCAL_WORLD_SIZE=%d", lsize);
    if (node >= 0)
        snprintf(env[k++] = own + 320, 64, "TUTTI_HOSTID=node%d", node);
    if (joining)
        snprintf(env[k++] = own + 384, 64, "TUTTI_JOINING=1");
    return env;
}

/* A free loopback port for PyTorch's store (its env:// rendezvous), which rank 0 of a
 * PyTorch program binds; a tutti program ignores it. */
int run_torch_store_port(char *buf, size_t size)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rc = -1;

    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0) {
        snprintf(buf, size, "%d", ntohs(a.sin_port));
        rc = 0;
    }
    if (fd >= 0)
        close(fd);
    return rc;
}

/*
 * File descriptors: tutti-run holds two pipes per local rank, and its rendezvous (one host) a
 * connection per rank. Raise the soft limit toward the hard one where it is short; where even
 * the hard limit is, say so now (a launcher that ran out halfway would leave its ranks waiting
 * for a rendezvous that cannot accept them).
 */
int run_fds_for(int n)
{
    struct rlimit rl;
    rlim_t need = (rlim_t)(5 * (long)n + 64);

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= need)
        return 0;
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need) {
        fprintf(stderr,
                "tutti-run: %d local ranks need about %lu file descriptors in tutti-run, but "
                "its limit is %lu (hard limit %lu): raise it (ulimit -n %lu) or start fewer "
                "ranks\n",
                n, (unsigned long)need, (unsigned long)rl.rlim_cur, (unsigned long)rl.rlim_max,
                (unsigned long)need);
        return -1;
    }
    rl.rlim_cur = need;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
        fprintf(stderr, "tutti-run: cannot raise the file descriptor limit to %lu: %s\n",
                (unsigned long)need, strerror(errno));
        return -1;
    }
    return 0;
}
