/*
 * config.h -- every TUTTI_* knob, declared once in config.c's table with its default, its help
 * and what values it accepts.
 *
 * A knob is read from the environment the first time it is asked for and kept: later changes
 * to the environment do not affect a running process. Names not in the table are a bug
 * (tt_env_str aborts) so README's table and the code cannot drift apart.
 *
 * One rule for bad values: a value that does not parse, is not finite, or lies outside its
 * knob's range is an error. tt_env_validate (called by every init function and by tutti-run
 * before it starts anything) fails naming each bad variable, its value and what it accepts;
 * nothing is clamped or silently replaced. The accessors below return the default for a bad
 * value (a process that reads a knob before validating it gets the documented behaviour, and
 * a warning once).
 */
#ifndef TT_CONFIG_H
#define TT_CONFIG_H

#include "tutti.h"

#include <stddef.h>

/* Value of a knob: the environment's if set and non-empty, else the default ("" if none). */
const char *tt_env_str(const char *name);

/* Non-zero if the environment set this knob. */
int tt_env_is_set(const char *name);

/* A numeric knob's value (sizes accept K/M/G/T suffixes, powers of 1024); the default where
 * the value is bad (see above). A knob that also accepts a word ("auto") reads it with
 * tt_env_str first. */
long long tt_env_int(const char *name);
size_t tt_env_size(const char *name);
double tt_env_double(const char *name);
/* A 0|1 knob: 1 where it is "1". */
int tt_env_flag(const char *name);
/* An auto|0|1 knob: -1 for auto, else 0 or 1. */
int tt_env_auto01(const char *name);

/* Every knob the environment sets holds a value its knob accepts: TUTTI_SUCCESS, or
 * TUTTI_ERR_INVALID_ARG (message set: "fn: TUTTI_X='v' is ...; TUTTI_Y=..."). */
tutti_result_t tt_env_validate(const char *fn);

/* Parse "12", "4K", "1M", "2G", "1T" into *out; returns 0 on success, -1 if malformed. */
int tt_parse_size(const char *s, size_t *out);

/* For tests: the table's knobs by index (NULL past the end), whether a knob is numeric (its
 * values are checked against a range), and forgetting every value read so far (the next read
 * looks at the environment again). */
const char *tt_env_knob(size_t i);
int tt_env_numeric(const char *name);
void tt_env_forget(void);

#endif
