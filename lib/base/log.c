/* log.c -- see log.h. */
#include "lib/base/log.h"
#include "lib/base/config.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

int tt_log_level = TT_LOG_WARN;
unsigned tt_log_mask = TT_SUB_ALL;
static int log_rank = -1;
static char log_host[64];
static pthread_once_t log_once = PTHREAD_ONCE_INIT;

static const struct {
    const char *name;
    unsigned bit;
} subsys_names[] = {
    {"INIT", TT_SUB_INIT}, {"COLL", TT_SUB_COLL}, {"SHM", TT_SUB_SHM},   {"NET", TT_SUB_NET},
    {"IB", TT_SUB_IB},     {"TOPO", TT_SUB_TOPO}, {"TUNE", TT_SUB_TUNE}, {"DDP", TT_SUB_DDP},
    {"BOOT", TT_SUB_BOOT}, {"ALL", TT_SUB_ALL},
};

static const char *subsys_name(unsigned bit)
{
    for (size_t i = 0; i < sizeof(subsys_names) / sizeof(subsys_names[0]); i++)
        if (subsys_names[i].bit == bit)
            return subsys_names[i].name;
    return "?";
}

/* "INIT,COLL" or "^SHM" / "^SHM,^NET" (all but those). Unknown names count for nothing
 * (tt_env_validate refuses them before any communicator forms). */
static unsigned parse_mask(const char *s)
{
    int invert = 0;
    unsigned mask = 0;
    char buf[256];

    if (*s == '^') {
        invert = 1;
        s++;
    }
    snprintf(buf, sizeof(buf), "%s", s);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (invert && *tok == '^')
            tok++;
        for (size_t i = 0; i < sizeof(subsys_names) / sizeof(subsys_names[0]); i++)
            if (strcasecmp(tok, subsys_names[i].name) == 0)
                mask |= subsys_names[i].bit;
    }
    return invert ? (TT_SUB_ALL & ~mask) : mask;
}

static void log_init_once(void)
{
    const char *lvl = tt_env_str("TUTTI_DEBUG");

    if (strcasecmp(lvl, "NONE") == 0 || strcasecmp(lvl, "OFF") == 0)
        tt_log_level = TT_LOG_NONE;
    else if (strcasecmp(lvl, "INFO") == 0)
        tt_log_level = TT_LOG_INFO;
    else if (strcasecmp(lvl, "TRACE") == 0)
        tt_log_level = TT_LOG_TRACE;
    else /* WARN, and what tt_env_validate refuses */
        tt_log_level = TT_LOG_WARN;
    tt_log_mask = parse_mask(tt_env_str("TUTTI_DEBUG_SUBSYS"));
    if (gethostname(log_host, sizeof(log_host)) != 0)
        snprintf(log_host, sizeof(log_host), "?");
    log_host[sizeof(log_host) - 1] = '\0';
}

void tt_log_init(void)
{
    pthread_once(&log_once, log_init_once);
}

void tt_log_set_rank(int rank)
{
    __atomic_store_n(&log_rank, rank, __ATOMIC_RELAXED);
}

int tt_log_rank(void)
{
    return __atomic_load_n(&log_rank, __ATOMIC_RELAXED);
}

void tt_log_write(enum tt_log_level level, enum tt_subsys sub, const char *fmt, ...)
{
    static const char *names[] = {"NONE", "WARN", "INFO", "TRACE"};
    char line[1024];
    int n, rank = __atomic_load_n(&log_rank, __ATOMIC_RELAXED);
    va_list ap;

    tt_log_init(); /* the host name, for callers that log before anything initialised it */
    n = snprintf(line, sizeof(line), "%s:%d:%d tutti %s %s%s", log_host, (int)getpid(), rank,
                 names[level], sub == TT_SUB_ALL ? "" : subsys_name(sub),
                 sub == TT_SUB_ALL ? "" : " ");
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof(line))
        vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    va_end(ap);
    /* One write per line so lines of concurrent ranks do not interleave. */
    fprintf(stderr, "%s\n", line);
}
