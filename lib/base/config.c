/* config.c -- the table of TUTTI_* knobs, their parsing and their validation; see config.h. */
#include "lib/base/config.h"
#include "lib/base/error.h"
#include "lib/base/log.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* What a knob accepts. */
enum kind {
    TEXT,    /* any string (its user checks it: a path, an id, a spec) */
    INT,     /* an integer within [lo, hi], or one of `words` */
    SIZE,    /* a byte count (K/M/G/T) within [lo, hi], or one of `words` */
    SECONDS, /* a finite number within [lo, hi] */
    WORDS,   /* one of `words` (case-insensitive) */
    LIST,    /* a comma list of `words`, all excluded where the first starts with ^ */
    LINKS,   /* TUTTI_TUNE_LINKS: four finite numbers, latencies >= 0, bandwidths > 0; measure */
    TAG,     /* letters, digits, '.', '_', '-' (it goes into file names) */
};

struct knob {
    const char *name;
    const char *def;
    const char *help;
    enum kind kind;
    double lo, hi;
    const char *words; /* '|' between them */
    const char *value; /* cached after first read */
    int from_env;
    int read;
};

#define K(name, def, help, kind, lo, hi, words)                                                    \
    {                                                                                              \
        name, def, help, kind, lo, hi, words, NULL, 0, 0                                           \
    }

/* Keep in step with README's table (a test compares them). */
static struct knob knobs[] = {
    K("TUTTI_DEBUG", "WARN", "log level: NONE, WARN, INFO or TRACE", WORDS, 0, 0,
      "NONE|OFF|WARN|INFO|TRACE"),
    K("TUTTI_DEBUG_SUBSYS", "ALL",
      "subsystems to log: comma list of INIT,COLL,SHM,NET,IB,TOPO,TUNE,DDP,BOOT; ^ excludes", LIST,
      0, 0, "INIT|COLL|SHM|NET|IB|TOPO|TUNE|DDP|BOOT|ALL"),
    K("TUTTI_TIMEOUT", "300", "seconds any wait may make no progress before it fails", SECONDS,
      0.001, 1e6, NULL),
    K("TUTTI_NCCL_TIMEOUT", "1800",
      "seconds any wait of a communicator made through the NCCL API (libnccl.so.2) may make no "
      "progress before it fails (ncclRemoteError, the message in ncclGetLastError)",
      SECONDS, 0.001, 1e6, NULL),
    K("TUTTI_STALL_WARN", "30",
      "seconds without progress after which a rank logs which ranks have not reached the "
      "operation, or (set-up) whom a bootstrap wait waits for and which ranks have not joined "
      "the rendezvous (0: never)",
      SECONDS, 0, 1e6, NULL),
    K("TUTTI_SHRINK_TIMEOUT", "30",
      "seconds tutti_comm_shrink waits for a rank that sends nothing (stopped, hung, or not "
      "shrinking) before the others leave it out; it is fenced",
      SECONDS, 0.001, 1e6, NULL),
    K("TUTTI_CHECK_COLL", "0",
      "1: before each collective, check that every rank calls the same one (kind, count, dtype, "
      "op, root, sequence; an all-gather per call), and before each point-to-point batch that "
      "both ends of each message agree (size, direction, device path; a message per peer)",
      WORDS, 0, 0, "0|1"),
    K("TUTTI_DETERMINISTIC", "0",
      "1: all-reduce, reduce-scatter and reduce sum in one fixed order (bitwise reproducible "
      "whatever algorithm, channels or chunk size; slower)",
      WORDS, 0, 0, "0|1"),
    K("TUTTI_NCHANNELS", "1", "rings run in parallel, each over its own connections (1..32)", INT,
      1, 32, NULL),
    K("TUTTI_BUFFSIZE", "1M", "bytes of FIFO per connection (split into TUTTI_STEPS slots)", SIZE,
      8192, 1 << 30, NULL),
    K("TUTTI_STEPS", "8", "slots per connection FIFO (2..64); a chunk fills one slot", INT, 2, 64,
      NULL),
    K("TUTTI_SHM_SINGLE_COPY", "auto",
      "all-gather, broadcast and point-to-point messages of 8 KiB and more between ranks of a "
      "host: 1 one copy (the receiver reads the sender's memory, process_vm_readv), 0 two copies "
      "through the FIFO, auto a trial per collective and size, repeated every 256 calls, picks",
      WORDS, 0, 0, "auto|0|1"),
    K("TUTTI_SYMMETRIC", "1",
      "1: host collectives whose buffers lie in windows of symmetric memory on every rank "
      "(tutti_comm_window_register) read and write their peers' buffers in place, in one pass; "
      "0: they take the usual path (any rank's 0 at the first registration turns it off for the "
      "communicator)",
      WORDS, 0, 0, "0|1"),
    K("TUTTI_CUDA_P2P", "1",
      "0: device buffers are always staged through pinned host memory; 1: when every rank is on "
      "one host and its GPU reaches the others', they move GPU to GPU (CUDA IPC)",
      WORDS, 0, 0, "0|1"),
    K("TUTTI_CUDA_P2P_MIN", "auto",
      "device-path collectives smaller than this many bytes are staged all the same; auto: 4M "
      "where ranks share a GPU, else 0",
      SIZE, 0, 1099511627776.0, "auto"),
    K("TUTTI_CUDA_BUFFSIZE", "32M",
      "bytes of device memory per p2p connection (split into TUTTI_STEPS slots)", SIZE, 8192,
      2147483648.0, NULL),
    K("TUTTI_CUDA_ASYNC", "1",
      "1: device-path calls on a wrapped CUDA stream return at once, the stream waits on the GPU; "
      "0: they return once done",
      WORDS, 0, 0, "0|1"),
    K("TUTTI_ALGO", "",
      "algorithm per collective, e.g. all_reduce:ring;all_reduce:rd (default: the tuner's rule)",
      TEXT, 0, 0, NULL),
    K("TUTTI_WAIT", "auto",
      "how waits idle: poll (spin, yield, sleep), block (sleep in the kernel until the peer "
      "wakes us), auto: block when this host's ranks outnumber its cores",
      WORDS, 0, 0, "auto|poll|block"),
    K("TUTTI_TUNE_LINKS", "",
      "cost model links: intra_us,intra_gbs,inter_us,inter_gbs (default 0.25,12,10,2.5); "
      "measure: a communicator on several nodes measures its network link at init",
      LINKS, 0, 0, NULL),
    K("TUTTI_STREAM_STORES", "auto",
      "how calls of 64 KiB and more write shared-memory FIFO slots: auto (a trial per "
      "collective and size, repeated every 256 calls, picks ordinary or streaming stores), 0 "
      "(ordinary), 1 (streaming)",
      WORDS, 0, 0, "auto|0|1"),
    K("TUTTI_SPIN", "auto",
      "polls a wait spins before it yields the core (0..100000000); auto: 2000, or 0 when this "
      "host's ranks outnumber its cores",
      INT, 0, 1e8, "auto"),
    K("TUTTI_YIELD_US", "auto",
      "microseconds a wait without progress yields the core before it sleeps (0..10000000; poll: "
      "in growing naps; block: in the kernel until woken); auto: 1000, or 100 when this host's "
      "ranks outnumber its cores",
      INT, 0, 1e7, "auto"),
    K("TUTTI_SOCKET_IFNAME", "",
      "interfaces for bootstrap sockets: prefixes (eth,ib), ^ to exclude, = for exact names", TEXT,
      0, 0, NULL),
    K("TUTTI_NET_CHUNK", "0",
      "where every rank is alone on its host over sockets, calls of 256 KiB and more: 0 a "
      "message per slot (512 KiB; or TUTTI_NET_COPY_MSG), 1 a quarter slot, auto a trial per "
      "collective and size, repeated every 256 calls, picks",
      WORDS, 0, 0, "auto|0|1"),
    K("TUTTI_NET_WHOLE", "auto",
      "when a socket receiver reads a payload past its first 4 KiB: 1 once all of it has "
      "arrived (one read), 0 as its bytes arrive, auto: 1 while its process is sending on "
      "sockets too",
      WORDS, 0, 0, "auto|0|1"),
    K("TUTTI_NET_DIRECT", "1",
      "1: a socket receiver reads a payload of more than 48 bytes straight to where its step "
      "puts it (the destination of a copy, a reduction's slot); 0: into a slot first, then copied",
      WORDS, 0, 0, "0|1"),
    K("TUTTI_NET_COPY_MSG", "4M",
      "where every rank is alone on its host over sockets and TUTTI_NET_DIRECT=1 everywhere: the "
      "largest message of a broadcast, and of an all-gather of 16 MiB or more (0..1G; at most a "
      "slot: a slot)",
      SIZE, 0, 1 << 30, NULL),
    K("TUTTI_NSOCKS", "2",
      "TCP sockets per network connection (1..16); messages alternate over them", INT, 1, 16, NULL),
    K("TUTTI_NET_TIMEOUT", "5",
      "seconds (1..86400) a network link may stay silent before its connections count as dead", INT,
      1, 86400, NULL),
    K("TUTTI_TRANSPORTS", "",
      "transports to allow (shm,socket) or, led by ^, to exclude (^shm,^socket); names: shm, p2p, "
      "net_ib, socket; empty: all",
      LIST, 0, 0, "shm|p2p|net_ib|socket"),
    K("TUTTI_IBVERBS_LIB", "libibverbs.so.1",
      "the verbs library to load at run time (a path, or a name for the dynamic loader)", TEXT, 0,
      0, NULL),
    K("TUTTI_IB_HCA", "",
      "HCA ports to use: name prefixes with optional :port (mlx5_0:1,mlx5_1); ^ excludes, = "
      "matches names exactly; empty: every active port",
      TEXT, 0, 0, NULL),
    K("TUTTI_IB_GID_INDEX", "-1",
      "GID index (-1..255); -1: RoCE v2 (IPv4-mapped first) on Ethernet ports, LID routing on "
      "InfiniBand",
      INT, -1, 255, NULL),
    K("TUTTI_IB_QPS", "2", "RC queue pairs per connection (1..8); messages alternate over them",
      INT, 1, 8, NULL),
    K("TUTTI_TOPO_FILE", "", "hwloc XML to use instead of the live machine's topology", TEXT, 0, 0,
      NULL),
    K("TUTTI_TOPO_DUMP_FILE", "", "rank 0 writes the detected topology (hwloc XML) here", TEXT, 0,
      0, NULL),
    K("TUTTI_HOSTID", "", "host identity override, so one machine can pose as several", TEXT, 0, 0,
      NULL),
    K("TUTTI_TRACE", "",
      "write a Chrome/Perfetto trace of collectives (and application spans) to this file; %r in "
      "the name: one file per rank",
      TEXT, 0, 0, NULL),
    K("TUTTI_ID", "", "communicator id string (set by tutti-run)", TEXT, 0, 0, NULL),
    K("TUTTI_JOIN", "",
      "id string of the job's join service, where newcomers wait to be admitted by "
      "tutti_comm_grow (set by tutti-run --elastic)",
      TEXT, 0, 0, NULL),
    K("TUTTI_JOINING", "0",
      "1: tutti_comm_init_env joins a running job as a newcomer (tutti_comm_join) instead of "
      "starting one (set by tutti-run for --join and --restart ranks)",
      WORDS, 0, 0, "0|1"),
    K("TUTTI_RANK", "", "this process's rank (set by tutti-run)", INT, 0, 1 << 30, NULL),
    K("TUTTI_WORLD_SIZE", "", "number of ranks (set by tutti-run)", INT, 1, 1 << 30, NULL),
    K("TUTTI_LOCAL_RANK", "", "rank among the ranks of this host (set by tutti-run)", INT, 0,
      1 << 30, NULL),
    K("TUTTI_SECRET", "",
      "shared secret for a MASTER_ADDR rendezvous (any string; the same on every host)", TEXT, 0, 0,
      NULL),
    K("TUTTI_JOB_TAG", "",
      "tag in shared-memory segment names (set by tutti-run for clean-up; letters, digits, . _ -)",
      TAG, 0, 0, NULL),
};
#define NKNOBS (sizeof(knobs) / sizeof(knobs[0]))

static pthread_mutex_t knob_lock = PTHREAD_MUTEX_INITIALIZER;

static struct knob *find(const char *name)
{
    for (size_t i = 0; i < NKNOBS; i++)
        if (strcmp(knobs[i].name, name) == 0)
            return &knobs[i];
    return NULL;
}

static struct knob *load(const char *name)
{
    struct knob *k = find(name);

    if (!k) {
        fprintf(stderr, "tutti: internal error: knob %s is not declared in config.c\n", name);
        abort();
    }
    pthread_mutex_lock(&knob_lock);
    if (!k->read) {
        const char *v = getenv(name);
        k->from_env = v && *v;
        k->value = k->from_env ? strdup(v) : k->def;
        if (!k->value)
            k->value = k->def;
        k->read = 1;
    }
    pthread_mutex_unlock(&knob_lock);
    return k;
}

const char *tt_env_str(const char *name)
{
    return load(name)->value;
}

int tt_env_is_set(const char *name)
{
    return load(name)->from_env;
}

int tt_parse_size(const char *s, size_t *out)
{
    char *end;
    unsigned long long v, mul = 1;

    if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
        return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || end == s)
        return -1;
    switch (*end) {
    case 'k':
    case 'K': mul = 1ULL << 10; break;
    case 'm':
    case 'M': mul = 1ULL << 20; break;
    case 'g':
    case 'G': mul = 1ULL << 30; break;
    case 't':
    case 'T': mul = 1ULL << 40; break;
    default: break;
    }
    if (mul > 1)
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end != '\0' || (v && mul > ULLONG_MAX / v) || v * mul > SIZE_MAX)
        return -1;
    *out = (size_t)(v * mul);
    return 0;
}

/* Is w one of the '|'-separated words (case-insensitive where nocase)? */
static int is_word(const char *words, const char *w, size_t len, int nocase)
{
    for (const char *p = words; p && *p;) {
        size_t n = strcspn(p, "|");
        if (n == len && (nocase ? strncasecmp(p, w, len) : strncmp(p, w, len)) == 0)
            return 1;
        p = p[n] ? p + n + 1 : NULL;
    }
    return 0;
}

/* "a, b or c" from "a|b|c". */
static void words_text(const char *words, char *buf, size_t size)
{
    size_t n = 0, count = 1, i = 0;

    for (const char *p = words; *p; p++)
        count += *p == '|';
    buf[0] = '\0';
    for (const char *p = words; *p && n < size; i++) {
        size_t len = strcspn(p, "|");
        n += (size_t)snprintf(buf + n, size - n, "%s%.*s",
                              i == 0           ? ""
                              : i + 1 == count ? " or "
                                               : ", ",
                              (int)len, p);
        p += len + (p[len] == '|');
    }
}

/* Parse a number of kind INT, SIZE or SECONDS. 0 if it parses (finite), -1 if not. */
static int parse_number(const struct knob *k, const char *v, double *out)
{
    char *end;

    if (k->kind == SIZE) {
        size_t s;
        if (tt_parse_size(v, &s) != 0)
            return -1;
        *out = (double)s;
        return 0;
    }
    errno = 0;
    if (k->kind == INT) {
        long long x = strtoll(v, &end, 10);
        if (errno || end == v || *end != '\0')
            return -1;
        *out = (double)x;
        return 0;
    }
    *out = strtod(v, &end);
    return errno || end == v || *end != '\0' || !isfinite(*out) ? -1 : 0;
}

/* Is v a value k accepts? If not, why into `why`. */
static int accepts(const struct knob *k, const char *v, char *why, size_t size)
{
    char list[160];
    double x = 0;
    int nocase = strncmp(k->name, "TUTTI_DEBUG", 11) == 0; /* log levels and subsystems */

    switch (k->kind) {
    case TEXT: return 1;
    case WORDS:
        if (is_word(k->words, v, strlen(v), nocase))
            return 1;
        words_text(k->words, list, sizeof(list));
        snprintf(why, size, "is not %s", list);
        return 0;
    case LIST: {
        int excl = v[0] == '^';
        for (const char *p = v + excl; *p || p == v + excl;) {
            size_t n = strcspn(p, ",");
            int caret = *p == '^';
            if (caret && !excl) {
                snprintf(why, size,
                         "mixes allowed and excluded (^) names: lead with ^ to "
                         "exclude them all");
                return 0;
            }
            if (!is_word(k->words, p + caret, n - (size_t)caret, nocase)) {
                words_text(k->words, list, sizeof(list));
                snprintf(why, size, "names '%.*s', which is not %s", (int)(n - (size_t)caret),
                         p + caret, list);
                return 0;
            }
            if (!p[n])
                break;
            p += n + 1;
        }
        return 1;
    }
    case LINKS: {
        double l[4];
        char tail;
        if (strcmp(v, "measure") == 0)
            return 1;
        if (sscanf(v, "%lf,%lf,%lf,%lf%c", &l[0], &l[1], &l[2], &l[3], &tail) != 4 ||
            !isfinite(l[0]) || !isfinite(l[1]) || !isfinite(l[2]) || !isfinite(l[3]) || l[0] < 0 ||
            l[2] < 0 || l[1] <= 0 || l[3] <= 0) {
            snprintf(why, size,
                     "is not intra_us,intra_gbs,inter_us,inter_gbs (finite numbers, latencies "
                     ">= 0, bandwidths > 0) nor measure");
            return 0;
        }
        return 1;
    }
    case TAG:
        if (strlen(v) <= 40 && strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789._-") == strlen(v))
            return 1;
        snprintf(why, size, "is not a tag of at most 40 letters, digits, '.', '_' or '-'");
        return 0;
    case INT:
    case SIZE:
    case SECONDS:
        if (k->words && is_word(k->words, v, strlen(v), 0))
            return 1;
        if (parse_number(k, v, &x) == 0 && x >= k->lo && x <= k->hi)
            return 1;
        snprintf(why, size, "is not %s within %.15g..%.15g%s%s",
                 k->kind == INT    ? "an integer"
                 : k->kind == SIZE ? "a byte count (K/M/G/T suffixes)"
                                   : "a finite number of seconds",
                 k->lo, k->hi, k->words ? " or " : "", k->words ? k->words : "");
        return 0;
    }
    return 1;
}

/* The value of numeric knob k: the environment's where it is accepted, else the default (with a
 * warning once a process: tt_env_validate fails any init that sees it). */
static double number(const char *name, enum kind want)
{
    static int warned[NKNOBS];
    struct knob *k = load(name);
    char why[256];
    double x = 0;

    if (k->kind != want) {
        fprintf(stderr, "tutti: internal error: knob %s read as the wrong kind\n", name);
        abort();
    }
    if (accepts(k, k->value, why, sizeof(why)) && parse_number(k, k->value, &x) == 0)
        return x;
    if (k->value != k->def && !__atomic_exchange_n(&warned[k - knobs], 1, __ATOMIC_RELAXED))
        TT_WARN(TT_SUB_INIT, "%s='%s' %s; using %s", name, k->value, why, k->def);
    parse_number(k, k->def, &x);
    return x;
}

long long tt_env_int(const char *name)
{
    return (long long)number(name, INT);
}

size_t tt_env_size(const char *name)
{
    return (size_t)number(name, SIZE);
}

double tt_env_double(const char *name)
{
    return number(name, SECONDS);
}

int tt_env_flag(const char *name)
{
    struct knob *k = load(name);
    char why[128];

    if (k->kind != WORDS || strcmp(k->words, "0|1") != 0) {
        fprintf(stderr, "tutti: internal error: knob %s is not a 0|1 flag\n", name);
        abort();
    }
    return strcmp(accepts(k, k->value, why, sizeof(why)) ? k->value : k->def, "1") == 0;
}

int tt_env_auto01(const char *name)
{
    struct knob *k = load(name);
    char why[128];
    const char *v;

    if (k->kind != WORDS || strcmp(k->words, "auto|0|1") != 0) {
        fprintf(stderr, "tutti: internal error: knob %s is not an auto|0|1 choice\n", name);
        abort();
    }
    v = accepts(k, k->value, why, sizeof(why)) ? k->value : k->def;
    return strcmp(v, "0") == 0 ? 0 : strcmp(v, "1") == 0 ? 1 : -1;
}

/* The message of tt_env_validate (its caller logs it or not), into msg. */
static int env_problems(const char *fn, char *out, size_t size)
{
    char msg[1024], why[256];
    int n = 0, bad = 0;

    for (size_t i = 0; i < NKNOBS; i++) {
        struct knob *k = load(knobs[i].name);
        if (!k->from_env || accepts(k, k->value, why, sizeof(why)))
            continue;
        if (n < (int)sizeof(msg) - 64)
            n += snprintf(msg + n, sizeof(msg) - (size_t)n, "%s%s='%.64s' %s", bad ? "; " : "",
                          k->name, k->value, why);
        bad++;
    }
    if (bad)
        snprintf(out, size,
                 "%s: %s (every TUTTI_* variable must hold a value its knob accepts: README, "
                 "\"Environment variables\")",
                 fn, msg);
    return bad;
}

tutti_result_t tt_env_validate(const char *fn)
{
    char msg[1400];

    return env_problems(fn, msg, sizeof(msg)) ? tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "%s", msg)
                                              : TUTTI_SUCCESS;
}

tutti_result_t tutti_env_check(void) /* a question: the caller says what it makes of it */
{
    char msg[1400];

    return env_problems("tutti_env_check", msg, sizeof(msg))
               ? tt_fail_quiet(NULL, TUTTI_ERR_INVALID_ARG, "%s", msg)
               : TUTTI_SUCCESS;
}

tutti_result_t tutti_env_number(const char *name, double *value)
{
    struct knob *k = name ? find(name) : NULL;
    char why[256] = "";
    double x = 0;

    if (!value)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG, "tutti_env_number: value is NULL");
    if (!k || !(k->kind == INT || k->kind == SIZE || k->kind == SECONDS))
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                       "tutti_env_number: %s is not a numeric TUTTI_* knob (README, "
                       "\"Environment variables\")",
                       name ? name : "(NULL)");
    k = load(name);
    if (!accepts(k, k->value, why, sizeof(why)) || parse_number(k, k->value, &x) != 0)
        return tt_fail(NULL, TUTTI_ERR_INVALID_ARG,
                       "%s='%.64s' %s (every TUTTI_* variable must hold a value its knob "
                       "accepts: README, \"Environment variables\")",
                       name, k->value, *why ? why : "is a word, not a number");
    *value = x;
    return TUTTI_SUCCESS;
}

const char *tt_env_knob(size_t i)
{
    return i < NKNOBS ? knobs[i].name : NULL;
}

int tt_env_numeric(const char *name)
{
    struct knob *k = find(name);
    return k && (k->kind == INT || k->kind == SIZE || k->kind == SECONDS);
}

void tt_env_forget(void)
{
    pthread_mutex_lock(&knob_lock);
    for (size_t i = 0; i < NKNOBS; i++) {
        if (knobs[i].read && knobs[i].value != knobs[i].def)
            free((void *)knobs[i].value);
        knobs[i].value = NULL;
        knobs[i].read = knobs[i].from_env = 0;
    }
    pthread_mutex_unlock(&knob_lock);
}

void tutti_env_print(FILE *out)
{
    if (!out)
        return;
    for (size_t i = 0; i < NKNOBS; i++) {
        struct knob *k = load(knobs[i].name);
        fprintf(out, "%-20s = %-12s (%s)  %s\n", k->name, *k->value ? k->value : "\"\"",
                k->from_env ? "environment" : "default", k->help);
    }
}
