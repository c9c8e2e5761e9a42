/*
 * scratch_dir.h -- a fresh directory under /tmp for one test's files (rank output, pid files),
 * removed with what it holds when the test's process exits, so runs leave nothing behind.
 */
#ifndef TT_TESTS_SCRATCH_DIR_H
#define TT_TESTS_SCRATCH_DIR_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char scratch_path[64];

static void scratch_dir_remove(void)
{
    DIR *d = scratch_path[0] ? opendir(scratch_path) : NULL;
    struct dirent *e;

    if (!d)
        return;
    while ((e = readdir(d))) {
        char p[sizeof(scratch_path) + 256];
        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof(p), "%s/%s", scratch_path, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(scratch_path);
}

/* Make /tmp/PREFIX-XXXXXX; its path, or NULL if it cannot be made. */
static const char *scratch_dir(const char *prefix)
{
    snprintf(scratch_path, sizeof(scratch_path), "/tmp/%s-XXXXXX", prefix);
    if (!mkdtemp(scratch_path))
        return NULL;
    atexit(scratch_dir_remove);
    return scratch_path;
}

#endif
