/*
 * config.h -- every TUTTI_* knob, declared once in config.c's table with its default and help.
 *
 * A knob is read from the environment the first time it is asked for and kept: later changes
 * to the environment do not affect a running process. Names not in the table are a bug
 * (tt_env_str aborts in debug builds) so README's table and the code cannot drift apart.
 */
#ifndef TT_CONFIG_H
#define TT_CONFIG_H

#include <stddef.h>

/* Value of a knob: the environment's if set and non-empty, else the default ("" if none). */
const char *tt_env_str(const char *name);

/* Non-zero if the environment set this knob. */
int tt_env_is_set(const char *name);

/*
 * Parse a knob as a number; sizes accept K/M/G suffixes (powers of 1024). A malformed value
 * logs a warning naming the variable (once a process) and yields the default.
 */
long long tt_env_int(const char *name);
/* The same, clamped to [lo, hi]; a value outside logs a warning naming the variable. */
long long tt_env_int_in(const char *name, long long lo, long long hi);
size_t tt_env_size(const char *name);
double tt_env_double(const char *name);

/* Parse "12", "4K", "1M", "2G" into *out; returns 0 on success, -1 if malformed. */
int tt_parse_size(const char *s, size_t *out);

#endif
