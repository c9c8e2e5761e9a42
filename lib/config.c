/* config.c -- the table of TUTTI_* knobs and their parsing; see config.h. */
#include "config.h"
#include "log.h"

#include "tutti.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct knob {
    const char *name;
    const char *def;
    const char *help;
    const char *value; /* cached after first read */
    int from_env;
    int read;
};

/* Keep in step with README's table (a test compares them). */
static struct knob knobs[] = {
    {"TUTTI_DEBUG", "WARN", "log level: NONE, WARN, INFO or TRACE", NULL, 0, 0},
    {"TUTTI_DEBUG_SUBSYS", "ALL",
     "subsystems to log: comma list of INIT,COLL,SHM,NET,IB,TOPO,TUNE,DDP,BOOT; ^ excludes", NULL,
     0, 0},
    {"TUTTI_TIMEOUT", "300", "seconds any wait may make no progress before it fails", NULL, 0, 0},
    {"TUTTI_STALL_WARN", "30",
     "seconds without progress after which a rank logs which ranks have not reached the "
     "operation, or (set-up) whom a bootstrap wait waits for and which ranks have not joined "
     "the rendezvous (0: never)",
     NULL, 0, 0},
    {"TUTTI_CHECK_COLL", "0",
     "1: before each collective, check that every rank calls the same one (kind, count, dtype, "
     "op, root, sequence; an all-gather per call), and before each point-to-point batch that "
     "both ends of each message agree (size, direction, device path; a message per peer)",
     NULL, 0, 0},
    {"TUTTI_DETERMINISTIC", "0",
     "1: all-reduce, reduce-scatter and reduce sum in one fixed order (bitwise reproducible "
     "whatever algorithm, channels or chunk size; slower)",
     NULL, 0, 0},
    {"TUTTI_NCHANNELS", "1", "rings run in parallel, each over its own connections", NULL, 0, 0},
    {"TUTTI_BUFFSIZE", "1M", "bytes of FIFO per connection (split into TUTTI_STEPS slots)", NULL, 0,
     0},
    {"TUTTI_STEPS", "8", "slots per connection FIFO; a chunk fills one slot", NULL, 0, 0},
    {"TUTTI_SHM_SINGLE_COPY", "auto",
     "all-gather, broadcast and point-to-point messages of 8 KiB and more between ranks of a "
     "host: 1 one copy (the receiver reads the sender's memory, process_vm_readv), 0 two copies "
     "through the FIFO, auto a trial per collective and size, repeated every 256 calls, picks",
     NULL, 0, 0},
    {"TUTTI_CUDA_P2P", "1",
     "0: device buffers are always staged through pinned host memory; 1: when every rank is on "
     "one host and its GPU reaches the others', they move GPU to GPU (CUDA IPC)",
     NULL, 0, 0},
    {"TUTTI_CUDA_P2P_MIN", "auto",
     "device-path collectives smaller than this many bytes are staged all the same; auto: 4M "
     "where ranks share a GPU, else 0",
     NULL, 0, 0},
    {"TUTTI_CUDA_BUFFSIZE", "32M",
     "bytes of device memory per p2p connection (split into TUTTI_STEPS slots)", NULL, 0, 0},
    {"TUTTI_CUDA_ASYNC", "1",
     "1: device-path calls on a wrapped CUDA stream return at once, the stream waits on the GPU; "
     "0: they return once done",
     NULL, 0, 0},
    {"TUTTI_ALGO", "",
     "algorithm per collective, e.g. all_reduce:ring;all_reduce:rd (default: the tuner's rule)",
     NULL, 0, 0},
    {"TUTTI_WAIT", "auto",
     "how waits idle: poll (spin, yield, sleep), block (sleep in the kernel until the peer "
     "wakes us), auto: block when this host's ranks outnumber its cores",
     NULL, 0, 0},
    {"TUTTI_TUNE_LINKS", "",
     "cost model links: intra_us,intra_gbs,inter_us,inter_gbs (default 0.25,12,10,2.5)", NULL, 0,
     0},
    {"TUTTI_STREAM_STORES", "auto",
     "how calls of 64 KiB and more write shared-memory FIFO slots: auto (a trial per "
     "collective and size, repeated every 256 calls, picks ordinary or streaming stores), 0 "
     "(ordinary), 1 (streaming)",
     NULL, 0, 0},
    {"TUTTI_SPIN", "auto",
     "polls a wait spins before it yields the core; auto: 2000, or 0 when this host's ranks "
     "outnumber its cores",
     NULL, 0, 0},
    {"TUTTI_YIELD_US", "auto",
     "microseconds a wait without progress yields the core before it sleeps (poll: in growing "
     "naps; block: in the kernel until woken); auto: 1000, or 100 when this host's ranks "
     "outnumber its cores",
     NULL, 0, 0},
    {"TUTTI_SOCKET_IFNAME", "",
     "interfaces for bootstrap sockets: prefixes (eth,ib), ^ to exclude, = for exact names", NULL,
     0, 0},
    {"TUTTI_NSOCKS", "2",
     "TCP sockets per network connection (1..16); messages alternate over them", NULL, 0, 0},
    {"TUTTI_NET_TIMEOUT", "5",
     "seconds a network link may stay silent before its connections count as dead", NULL, 0, 0},
    {"TUTTI_TRANSPORTS", "", "transports to exclude (^shm) or allow (shm); empty: all", NULL, 0, 0},
    {"TUTTI_IBVERBS_LIB", "libibverbs.so.1",
     "the verbs library to load at run time (a path, or a name for the dynamic loader)", NULL, 0,
     0},
    {"TUTTI_IB_HCA", "",
     "HCA ports to use: name prefixes with optional :port (mlx5_0:1,mlx5_1); ^ excludes, = "
     "matches names exactly; empty: every active port",
     NULL, 0, 0},
    {"TUTTI_IB_GID_INDEX", "-1",
     "GID index; -1: RoCE v2 (IPv4-mapped first) on Ethernet ports, LID routing on InfiniBand",
     NULL, 0, 0},
    {"TUTTI_IB_QPS", "2", "RC queue pairs per connection (1..8); messages alternate over them",
     NULL, 0, 0},
    {"TUTTI_TOPO_FILE", "", "hwloc XML to use instead of the live machine's topology", NULL, 0, 0},
    {"TUTTI_TOPO_DUMP_FILE", "", "rank 0 writes the detected topology (hwloc XML) here", NULL, 0,
     0},
    {"TUTTI_HOSTID", "", "host identity override, so one machine can pose as several", NULL, 0, 0},
    {"TUTTI_TRACE", "",
     "write a Chrome/Perfetto trace of collectives (and application spans) to this file; %r in "
     "the name: one file per rank",
     NULL, 0, 0},
    {"TUTTI_ID", "", "communicator id string (set by tutti-run)", NULL, 0, 0},
    {"TUTTI_RANK", "", "this process's rank (set by tutti-run)", NULL, 0, 0},
    {"TUTTI_WORLD_SIZE", "", "number of ranks (set by tutti-run)", NULL, 0, 0},
    {"TUTTI_LOCAL_RANK", "", "rank among the ranks of this host (set by tutti-run)", NULL, 0, 0},
    {"TUTTI_SECRET", "", "shared secret for MASTER_ADDR rendezvous (any string)", NULL, 0, 0},
    {"TUTTI_JOB_TAG", "", "tag in shared-memory segment names (set by tutti-run for clean-up)",
     NULL, 0, 0},
};
static pthread_mutex_t knob_lock = PTHREAD_MUTEX_INITIALIZER;

static struct knob *find(const char *name)
{
    for (size_t i = 0; i < sizeof(knobs) / sizeof(knobs[0]); i++)
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

    if (!s || !*s || *s == '-')
        return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || end == s)
        return -1;
    switch (*end) {
    case 'k':
    case 'K':
        mul = 1ULL << 10;
        end++;
        break;
    case 'm':
    case 'M':
        mul = 1ULL << 20;
        end++;
        break;
    case 'g':
    case 'G':
        mul = 1ULL << 30;
        end++;
        break;
    default: break;
    }
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end != '\0' || (v && mul > ULLONG_MAX / v) || v * mul > SIZE_MAX)
        return -1;
    *out = (size_t)(v * mul);
    return 0;
}

/* A bad value's warning, once a process however often the knob is read. */
static int first_warning(const struct knob *k)
{
    static int warned[sizeof(knobs) / sizeof(knobs[0])];
    return !__atomic_exchange_n(&warned[k - knobs], 1, __ATOMIC_RELAXED);
}

long long tt_env_int(const char *name)
{
    struct knob *k = load(name);
    char *end;
    long long v;

    errno = 0;
    v = strtoll(k->value, &end, 10);
    if (errno || end == k->value || *end != '\0') {
        if (first_warning(k))
            TT_WARN(TT_SUB_INIT, "%s='%s' is not an integer; using %s", name, k->value, k->def);
        v = strtoll(k->def, NULL, 10);
    }
    return v;
}

long long tt_env_int_in(const char *name, long long lo, long long hi)
{
    long long v = tt_env_int(name), c = v < lo ? lo : v > hi ? hi : v;

    if (c != v && first_warning(load(name)))
        TT_WARN(TT_SUB_INIT, "%s=%lld is outside %lld..%lld; using %lld", name, v, lo, hi, c);
    return c;
}

size_t tt_env_size(const char *name)
{
    struct knob *k = load(name);
    size_t v = 0;

    if (tt_parse_size(k->value, &v) != 0) {
        if (first_warning(k))
            TT_WARN(TT_SUB_INIT, "%s='%s' is not a size (e.g. 512K, 4M); using %s", name, k->value,
                    k->def);
        tt_parse_size(k->def, &v);
    }
    return v;
}

double tt_env_double(const char *name)
{
    struct knob *k = load(name);
    char *end;
    double v;

    errno = 0;
    v = strtod(k->value, &end);
    if (errno || end == k->value || *end != '\0') {
        if (first_warning(k))
            TT_WARN(TT_SUB_INIT, "%s='%s' is not a number; using %s", name, k->value, k->def);
        v = strtod(k->def, NULL);
    }
    return v;
}

void tutti_env_print(FILE *out)
{
    if (!out)
        return;
    for (size_t i = 0; i < sizeof(knobs) / sizeof(knobs[0]); i++) {
        struct knob *k = load(knobs[i].name);
        fprintf(out, "%-20s = %-12s (%s)  %s\n", k->name, *k->value ? k->value : "\"\"",
                k->from_env ? "environment" : "default", k->help);
    }
}
