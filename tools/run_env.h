/* run_env.h -- tutti-run's preparations for its ranks (run_env.c). */
#ifndef TUTTI_RUN_ENV_H
#define TUTTI_RUN_ENV_H

#include <stddef.h>

/* Node (or host) k of `of` holds ranks [ceil(k*n/of), ceil((k+1)*n/of)) of n = nranks. */
int run_block_first(int k, int of, int nranks);
/* The environment of rank r (local rank `local` of `lsize` on its host; node >= 0: the
 * TUTTI_HOSTID it poses as; joining: a newcomer, TUTTI_JOINING=1). NULL without memory; free()
 * releases it. */
char **run_rank_env(int r, int local, int lsize, int node, int joining);
/* The program's path, as execvp would find it (NULL and errno set if not). */
char *run_find_program(const char *name);
/* Raise the file descriptor limit for n local ranks, or say why not (-1). */
int run_fds_for(int n);
/* A free loopback port, written as text into buf (0), or -1. */
int run_torch_store_port(char *buf, size_t size);
/* Remove the shared-memory names of job `tag` that its ranks could not remove. */
void run_shm_cleanup(const char *tag);

#endif
