/*
 * shm_names.h -- the names a test's jobs left in /dev/shm: each one starting with a prefix is
 * removed (so a failing test leaves nothing behind either), and the last one is kept for the
 * test's message.
 */
#ifndef TT_TESTS_SHM_NAMES_H
#define TT_TESTS_SHM_NAMES_H

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Remove every /dev/shm name starting with prefix; the last one into left ("" if none). */
static inline void shm_names_remove(const char *prefix, char *left, size_t size)
{
    char path[320];
    DIR *d = opendir("/dev/shm");
    struct dirent *e;

    left[0] = '\0';
    while (d && (e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        snprintf(left, size, "%s", e->d_name);
        snprintf(path, sizeof(path), "/dev/shm/%s", e->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
}

#endif
