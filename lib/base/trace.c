/* trace.c -- TUTTI_TRACE; see trace.h. */
#include "lib/base/trace.h"
#include "lib/base/config.h"
#include "lib/base/error.h"
#include "lib/base/log.h"

#include "tutti.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TT_TRACE_MAX (1u << 18)
#define TT_TRACE_TRACKS 256

struct ev {
    double ts, dur;
    int tid;
    char cat[12];
    char name[64];
    char args[160];
};

struct track {
    int tid;
    char name[48];
};

int tt_trace_on;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static char path[512];
static struct ev *evs;
static size_t nev, cap;
static unsigned long long dropped;
static struct track tracks[TT_TRACE_TRACKS];
static int ntracks, next_tid = 1;
static int emptied;    /* the file was emptied for this run (by us or local rank 0) */
static int wrote_meta; /* metadata of this process already written */
static _Thread_local int my_tid;

static void at_exit(void)
{
    tutti_trace_flush();
}

static void read_env(void)
{
    const char *p = tt_env_str("TUTTI_TRACE");

    if (!p[0])
        return;
    snprintf(path, sizeof(path), "%s", p);
    tt_trace_on = 1;
    atexit(at_exit);
}

void tt_trace_init(void)
{
    pthread_once(&once, read_env);
}

double tt_trace_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

/* The calling thread's tid; called with the lock held. */
static int thread_tid(void)
{
    if (!my_tid)
        my_tid = next_tid++;
    return my_tid;
}

static void name_track(int tid, const char *name)
{
    for (int i = 0; i < ntracks; i++)
        if (tracks[i].tid == tid)
            return;
    if (ntracks == TT_TRACE_TRACKS)
        return;
    tracks[ntracks].tid = tid;
    snprintf(tracks[ntracks].name, sizeof(tracks[ntracks].name), "%s", name);
    ntracks++;
}

void tt_trace_thread_name(const char *name)
{
    if (!tt_trace_on)
        return;
    pthread_mutex_lock(&lock);
    name_track(thread_tid(), name);
    pthread_mutex_unlock(&lock);
}

void tt_trace_add(const char *cat, const char *name, double ts, double dur, int lane,
                  const char *args)
{
    struct ev *e;
    int tid;

    if (!tt_trace_on)
        return;
    pthread_mutex_lock(&lock);
    tid = thread_tid();
    if (lane >= 0) {
        char tn[48];
        snprintf(tn, sizeof(tn), "thread %d lane %d", tid, lane);
        tid = tid * 100 + 1 + (lane % 99);
        name_track(tid, tn);
    }
    if (nev == cap) {
        size_t ncap = cap ? 2 * cap : 4096;
        struct ev *g = ncap <= TT_TRACE_MAX ? realloc(evs, ncap * sizeof(*g)) : NULL;
        if (!g) {
            if (dropped++ == 0)
                TT_WARN(TT_SUB_ALL,
                        "TUTTI_TRACE: event buffer full (%zu events); dropping "
                        "events until the next tutti_trace_flush",
                        nev);
            pthread_mutex_unlock(&lock);
            return;
        }
        evs = g;
        cap = ncap;
    }
    e = &evs[nev++];
    e->ts = ts;
    e->dur = dur < 0 ? 0 : dur;
    e->tid = tid;
    snprintf(e->cat, sizeof(e->cat), "%s", cat ? cat : "user");
    snprintf(e->name, sizeof(e->name), "%s", name ? name : "");
    snprintf(e->args, sizeof(e->args), "%s", args ? args : "");
    pthread_mutex_unlock(&lock);
}

/* The file of this rank: %r replaced by the rank. */
static int file_name(char *out, size_t size, int rank, int *per_rank)
{
    const char *r = strstr(path, "%r");

    *per_rank = r != NULL;
    if (!r)
        return snprintf(out, size, "%s", path) >= (int)size ? -1 : 0;
    return snprintf(out, size, "%.*s%d%s", (int)(r - path), path, rank, r + 2) >= (int)size ? -1
                                                                                            : 0;
}

void tt_trace_comm_ready(int local_rank)
{
    char name[600];
    int per_rank, fd;

    if (!tt_trace_on)
        return;
    pthread_mutex_lock(&lock);
    if (!emptied && file_name(name, sizeof(name), tt_log_rank(), &per_rank) == 0 &&
        (per_rank || local_rank == 0)) {
        fd = open(name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0)
            close(fd);
        else
            TT_WARN(TT_SUB_ALL, "TUTTI_TRACE: cannot create %s: %m", name);
    }
    emptied = 1;
    pthread_mutex_unlock(&lock);
}

/* Append s to the growing buffer *b. */
static int put(char **b, size_t *len, size_t *bcap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int put(char **b, size_t *len, size_t *bcap, const char *fmt, ...)
{
    va_list ap;
    int n;

    for (;;) {
        va_start(ap, fmt);
        n = vsnprintf(*b + *len, *bcap - *len, fmt, ap);
        va_end(ap);
        if (n < 0)
            return -1;
        if ((size_t)n < *bcap - *len) {
            *len += (size_t)n;
            return 0;
        }
        char *g = realloc(*b, 2 * *bcap + (size_t)n);
        if (!g)
            return -1;
        *b = g;
        *bcap = 2 * *bcap + (size_t)n;
    }
}

/* JSON string body of s: quotes, backslashes and control characters escaped. */
static void json_str(char *out, size_t size, const char *s)
{
    size_t o = 0;

    for (; *s && o + 7 < size; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c < 0x20) {
            o += (size_t)snprintf(out + o, size - o, "\\u%04x", c);
        } else {
            out[o++] = (char)c;
        }
    }
    out[o] = 0;
}

tutti_result_t tutti_trace_flush(void)
{
    char name[600], esc[160];
    char *b = NULL;
    size_t len = 0, bcap = 1 << 16;
    int rank = tt_log_rank(), per_rank, fd = -1, bad = 0;
    tutti_result_t rc = TUTTI_SUCCESS;
    struct stat st;

    tt_trace_init();
    if (!tt_trace_on)
        return TUTTI_SUCCESS;
    pthread_mutex_lock(&lock);
    if (nev == 0) /* nothing to say (tutti-run itself, say): leave the file alone */
        goto out;
    if (file_name(name, sizeof(name), rank, &per_rank) != 0) {
        rc = tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "TUTTI_TRACE: file name too long");
        goto out;
    }
    b = malloc(bcap);
    if (!b) {
        rc = tt_fail(NULL, TUTTI_ERR_SYSTEM, "tutti_trace_flush: out of memory");
        goto out;
    }
    b[0] = 0;
    if (!wrote_meta) {
        bad |= put(&b, &len, &bcap,
                   "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank "
                   "%d (pid %d)\"}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,"
                   "\"args\":{\"sort_index\":%d}},\n",
                   rank, rank, (int)getpid(), rank, rank);
    }
    for (int i = 0; i < ntracks; i++) {
        json_str(esc, sizeof(esc), tracks[i].name);
        bad |= put(&b, &len, &bcap,
                   "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{"
                   "\"name\":\"%s\"}},\n",
                   rank, tracks[i].tid, esc);
    }
    for (size_t i = 0; i < nev && !bad; i++) {
        const struct ev *e = &evs[i];
        char ename[160];
        json_str(ename, sizeof(ename), e->name);
        json_str(esc, sizeof(esc), e->cat);
        bad |= put(&b, &len, &bcap,
                   "{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,"
                   "\"pid\":%d,\"tid\":%d%s%s%s},\n",
                   ename, esc, e->ts, e->dur, rank, e->tid, e->args[0] ? ",\"args\":" : "", e->args,
                   "");
    }
    if (bad) {
        rc = tt_fail(NULL, TUTTI_ERR_SYSTEM, "tutti_trace_flush: out of memory");
        goto out;
    }
    fd = open(name, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (emptied ? 0 : O_TRUNC), 0644);
    if (fd < 0) {
        rc = tt_fail(NULL, TUTTI_ERR_SYSTEM, "TUTTI_TRACE: cannot open %s: %m", name);
        goto out;
    }
    emptied = 1;
    /* One rank at a time; the first writer opens the array. */
    flock(fd, LOCK_EX);
    if (fstat(fd, &st) == 0 && st.st_size == 0 && write(fd, "[\n", 2) != 2)
        bad = 1;
    for (size_t off = 0; off < len && !bad;) {
        ssize_t w = write(fd, b + off, len - off);
        if (w <= 0)
            bad = 1;
        else
            off += (size_t)w;
    }
    flock(fd, LOCK_UN);
    if (bad) {
        rc = tt_fail(NULL, TUTTI_ERR_SYSTEM, "TUTTI_TRACE: writing %s: %m", name);
        goto out;
    }
    wrote_meta = 1;
    ntracks = 0; /* written: later flushes add only new tracks */
    nev = 0;
    if (dropped)
        TT_WARN(TT_SUB_ALL, "TUTTI_TRACE: %llu event(s) were dropped (buffer full)", dropped);
    dropped = 0;
out:
    if (fd >= 0)
        close(fd);
    free(b);
    pthread_mutex_unlock(&lock);
    return rc;
}

int tutti_trace_enabled(void)
{
    tt_trace_init();
    return tt_trace_on;
}

double tutti_trace_clock(void)
{
    return tt_trace_us();
}

void tutti_trace_span(const char *name, const char *category, double start_us, double end_us,
                      const char *args)
{
    tt_trace_init();
    if (!tt_trace_on || !name)
        return;
    /* Only a JSON object is passed through; anything else would break the file. */
    if (args && (args[0] != '{' || args[strlen(args) - 1] != '}'))
        args = NULL;
    tt_trace_add(category ? category : "user", name, start_us, end_us - start_us, -1, args);
}

void tutti_trace_name_thread(const char *name)
{
    tt_trace_init();
    if (name)
        tt_trace_thread_name(name);
}
