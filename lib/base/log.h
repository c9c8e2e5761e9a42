/*
 * log.h -- debug log with levels and subsystem masks (TUTTI_DEBUG, TUTTI_DEBUG_SUBSYS).
 *
 * The level is checked before anything is formatted, so a disabled TT_INFO costs one load and
 * one compare. Lines read "host:pid:rank tutti LEVEL SUBSYS message".
 */
#ifndef TT_LOG_H
#define TT_LOG_H

#include <stdarg.h>

enum tt_log_level { TT_LOG_NONE = 0, TT_LOG_WARN, TT_LOG_INFO, TT_LOG_TRACE };

enum tt_subsys {
    TT_SUB_INIT = 1 << 0,
    TT_SUB_COLL = 1 << 1,
    TT_SUB_SHM = 1 << 2,
    TT_SUB_NET = 1 << 3,
    TT_SUB_IB = 1 << 4,
    TT_SUB_TOPO = 1 << 5,
    TT_SUB_TUNE = 1 << 6,
    TT_SUB_DDP = 1 << 7,
    TT_SUB_BOOT = 1 << 8,
    TT_SUB_ALL = 0xffff
};

extern int tt_log_level;
extern unsigned tt_log_mask;

/* Reads TUTTI_DEBUG / TUTTI_DEBUG_SUBSYS once; cheap to call again. */
void tt_log_init(void);

/* What every entry point of the library calls first (init.c): tt_log_init and
 * tt_trace_init (TUTTI_TRACE); cheap to call again. */
void tt_base_init(void);

/* Rank shown in log lines of this process (the last communicator initialised). */
void tt_log_set_rank(int rank);
int tt_log_rank(void);

void tt_log_write(enum tt_log_level level, enum tt_subsys sub, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static inline int tt_log_on(enum tt_log_level level, enum tt_subsys sub)
{
    return tt_log_level >= (int)level && (tt_log_mask & (unsigned)sub);
}

#define TT_LOG(level, sub, ...)                                                                    \
    do {                                                                                           \
        if (tt_log_on(level, sub))                                                                 \
            tt_log_write(level, sub, __VA_ARGS__);                                                 \
    } while (0)
#define TT_WARN(sub, ...) TT_LOG(TT_LOG_WARN, sub, __VA_ARGS__)
#define TT_INFO(sub, ...) TT_LOG(TT_LOG_INFO, sub, __VA_ARGS__)
#define TT_TRACE(sub, ...) TT_LOG(TT_LOG_TRACE, sub, __VA_ARGS__)

#endif
