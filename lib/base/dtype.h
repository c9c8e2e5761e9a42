/*
 * dtype.h -- what every layer asks of a dtype or an operator: its size and name
 * (tutti_dtype_size, tutti_dtype_name and tutti_op_name are public, in tutti.h), and whether
 * an op value is a handle of an operator made at run time (lib/core/redop.c makes them).
 */
#ifndef TT_DTYPE_H
#define TT_DTYPE_H

#include "tutti.h"

/* A run-time operator's handle: TAG | generation << 16 | slot. */
#define TT_REDOP_TAG 0x40000000u
#define TT_REDOP_GENS 0x3fffu
#define TT_REDOP_SLOTS 0x10000u

/* Is op a handle of the run-time operators' form (live or not)? */
int tt_redop_is_custom(tutti_op_t op);

#endif
