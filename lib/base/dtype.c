/* dtype.c -- dtype sizes and names, operator names; see dtype.h. */
#include "lib/base/dtype.h"

size_t tutti_dtype_size(tutti_dtype_t dtype)
{
    static const size_t sizes[TUTTI_NUM_DTYPES] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8, 1, 1};
    return (unsigned)dtype < TUTTI_NUM_DTYPES ? sizes[dtype] : 0;
}

const char *tutti_dtype_name(tutti_dtype_t dtype)
{
    static const char *names[TUTTI_NUM_DTYPES] = {
        "int8",    "uint8",    "int32",   "uint32",  "int64",       "uint64",
        "float16", "bfloat16", "float32", "float64", "float8_e4m3", "float8_e5m2"};
    return (unsigned)dtype < TUTTI_NUM_DTYPES ? names[dtype] : "invalid";
}

int tt_redop_is_custom(tutti_op_t op)
{
    return ((unsigned)op & ~((TT_REDOP_GENS << 16) | (TT_REDOP_SLOTS - 1))) == TT_REDOP_TAG;
}

const char *tutti_op_name(tutti_op_t op)
{
    static const char *names[TUTTI_NUM_OPS] = {"sum", "prod", "min", "max", "avg"};
    return (unsigned)op < TUTTI_NUM_OPS ? names[op]
           : tt_redop_is_custom(op)     ? "premul_sum"
                                        : "invalid";
}
